//! The OOM story: the report's new lines (what collection already freed, the largest hole against
//! the request over the last snapshots, grouped blockers, the advice) on fixtures worked out by
//! hand and on the demo run checked by a second method (SQL over the views); where a request
//! fits now; the story as a library result. The page it writes is tested in `story_page`.

use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Value};

use crate::common::{data, import, json_of, memstate, on_db, small, text_of, write_json};

pub(crate) fn allocation(uid: u64, kind: &str, state: &str, offset: u64, size: u64) -> Value {
    json!({"uid": uid, "kind": kind, "state": state, "offset": offset, "size": size})
}

fn dump(seq: i64, reason: &str, allocations: Vec<Value>, failed: Vec<Value>) -> Value {
    let mut memory = json!({"id": "0x1e00000000000003", "kind": "GPU_FB_MEM", "capacity": 10000, "allocations": allocations});
    if !failed.is_empty() {
        memory["failed_requests"] = json!(failed);
    }
    json!({"format": "memstate-dump", "version": 1, "run": {"id": "story", "node": 0},
           "snapshot": {"seq": seq, "time_ns": seq * 1_000_000_000, "reason": reason}, "memories": [memory]})
}

/// Two snapshots of a 10,000-byte memory. seq 1: A valid [0,1000), B collectable [1000,3000),
/// C collectable [3000,3500), D valid [5000,6000), E collectable [8000,8500): free 5000 in
/// [3500,5000) [6000,8000) [8500,10000), largest 2000. seq 2 (oom): B gone, C pending_free, E
/// still collectable, F valid [1000,2000) new: free 6000 in [2000,3000) [3500,5000) [6000,8000)
/// [8500,10000), largest 2000. Collection freed B and C between them: 2 allocations, 2500 bytes.
/// Unmovable at seq 2: [0,2000) and [5000,6000); after collection the largest range is
/// [6000,10000) = 4000. Three requests failed: 4500 (fragmentation: 6000 free, not solved by
/// collection; the cheapest window is [5500,10000), blocked only by D's last 500 bytes; without D
/// [2000,10000) = 8000 opens), 7000 (exhaustion: 1000 bytes short), 3500 (collection would do).
pub(crate) fn story_db(dir: &Path) -> std::path::PathBuf {
    let first = dump(
        1,
        "periodic",
        vec![
            allocation(1, "instance", "valid", 0, 1000),
            allocation(2, "instance", "collectable", 1000, 2000),
            allocation(3, "instance", "collectable", 3000, 500),
            allocation(4, "deferred_buffer", "valid", 5000, 1000),
            allocation(5, "instance", "collectable", 8000, 500),
        ],
        vec![],
    );
    let second = dump(
        2,
        "oom",
        vec![
            allocation(1, "instance", "valid", 0, 1000),
            allocation(6, "instance", "valid", 1000, 1000),
            allocation(3, "instance", "pending_free", 3000, 500),
            allocation(4, "deferred_buffer", "valid", 5000, 1000),
            allocation(5, "instance", "collectable", 8000, 500),
        ],
        vec![
            json!({"size": 4500}),
            json!({"size": 7000}),
            json!({"size": 3500}),
        ],
    );
    let db = dir.join("story.db");
    import(
        &db,
        &[
            &write_json(dir, "1.json", &first),
            &write_json(dir, "2.json", &second),
        ],
        0,
    );
    db
}

#[test]
fn the_report_says_what_collection_freed_how_the_largest_hole_fell_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let db = story_db(dir.path());
    let findings = json_of(&db, &["oom"]);
    let findings = findings.as_array().unwrap();
    assert_eq!(findings.len(), 3);
    let by_size = |size: u64| {
        findings
            .iter()
            .find(|finding| finding["size"] == size)
            .unwrap_or_else(|| panic!("no finding of {size}"))
    };
    for finding in findings {
        assert_eq!(finding["previous_seq"], 1);
        assert_eq!(finding["collected_allocations"], 2, "B and C");
        assert_eq!(finding["collected_bytes"], 2500);
        let recent = finding["recent"].as_array().unwrap();
        assert_eq!(recent.len(), 2);
        assert_eq!(
            (
                recent[0]["seq"].as_i64(),
                recent[0]["free_bytes"].as_u64(),
                recent[0]["largest_hole"].as_u64()
            ),
            (Some(1), Some(5000), Some(2000))
        );
        assert_eq!(
            (
                recent[1]["seq"].as_i64(),
                recent[1]["free_bytes"].as_u64(),
                recent[1]["largest_hole"].as_u64()
            ),
            (Some(2), Some(6000), Some(2000))
        );
    }
    let fragmented = by_size(4500);
    assert_eq!(fragmented["verdict"], "fragmentation");
    assert_eq!(fragmented["solved_by_collection"], false);
    assert_eq!(fragmented["blockers"]["offset"], 5500);
    assert_eq!(fragmented["blockers"]["blocked_bytes"], 500);
    assert_eq!(
        fragmented["blockers"]["blocking"][0]["uid"],
        "0x0000000000000004"
    );
    let advice = fragmented["advice"].as_str().unwrap();
    assert!(
        advice.starts_with("move or free 0x0000000000000004 first")
            && advice.contains("7.8 KiB contiguous"),
        "{advice}"
    );
    assert!(
        fragmented["map_link"]
            .as_str()
            .unwrap()
            .ends_with("#memory=0x1e00000000000003&snapshot=2&range=4150:10000"),
        "window [5500,10000) and 30% around, within the memory"
    );
    let exhausted = by_size(7000);
    assert_eq!(exhausted["verdict"], "exhaustion");
    assert!(
        exhausted["advice"]
            .as_str()
            .unwrap()
            .contains("(1000 bytes) more"),
        "{}",
        exhausted["advice"]
    );
    let collectable = by_size(3500);
    assert_eq!(collectable["solved_by_collection"], true);
    assert!(
        collectable["advice"]
            .as_str()
            .unwrap()
            .starts_with("collection would make room"),
        "{}",
        collectable["advice"]
    );
    // The same for people.
    let text = text_of(&db, &["oom"]);
    assert!(
        text.contains("since seq 1 it freed 2.4 KiB in 2 collectable allocations"),
        "{text}"
    );
    assert!(
        text.contains("largest hole against the request (4.4 KiB) over the last snapshots:"),
        "{text}"
    );
    let rows: Vec<&str> = text
        .lines()
        .filter(|line| line.trim_start().starts_with("seq "))
        .collect();
    assert!(
        rows.len() == 6
            && rows
                .iter()
                .all(|row| row.ends_with("too small") || row.ends_with("fits")),
        "{rows:#?}"
    );
    assert!(
        text.contains("cheapest place  0x157c-0x2710 (4.4 KiB at 5.4 KiB)"),
        "the window in hex and human sizes: {text}"
    );
    assert!(
        text.contains("1 allocation in the way") && text.contains("moving or freeing it opens"),
        "{text}"
    );
    assert!(text.contains("map             memstate map --html map.html, then open map.html#memory=0x1e00000000000003&snapshot=2"), "{text}");
}

#[test]
fn the_first_snapshot_of_a_node_says_there_is_nothing_to_compare_with() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let finding = &json_of(&db, &["oom"])[0];
    assert_eq!(finding["previous_seq"], Value::Null);
    assert_eq!(finding["collected_bytes"], Value::Null);
    // The example's GPU: holes [393216,458752) [786432,819200) [823296,1048576): 323584 free,
    // largest 225280; the future 0x6a alone blocks the window at 0xa0000, and without it
    // [655360, 1048576) = 384 KiB is free of anything unmovable.
    assert_eq!(
        finding["recent"],
        json!([{"snapshot_id": 1, "seq": 3, "time_s": 1.5, "free_bytes": 323584, "largest_hole": 225280}])
    );
    let advice = finding["advice"].as_str().unwrap();
    assert!(
        advice.starts_with("move or free 0x000000000000006a first (future, 4 KiB at 0xc8000)")
            && advice.contains("opens 384 KiB"),
        "{advice}"
    );
    let text = text_of(&db, &["oom"]);
    assert!(
        text.contains("(no earlier snapshot of this node to compare with)"),
        "{text}"
    );
    assert!(
        text.contains("cheapest place  0xa0000-0xe93e0 (293 KiB at 640 KiB)"),
        "{text}"
    );
}

#[test]
fn many_small_blockers_are_grouped_unless_all_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    // Two 64 KiB instances, then 40 futures of 1 KiB every 2 KiB from 256 KiB. A request for the
    // whole memory is blocked by all 42: the 5 largest (both instances and the 3 lowest futures)
    // are listed, the other 37 futures grouped: 37 KiB between 256 KiB + 3 * 2 KiB = 0x41800 and
    // the end of the last, 256 KiB + 39 * 2 KiB + 1 KiB = 0x53c00.
    let mut allocations = vec![
        allocation(1, "instance", "valid", 0, 65536),
        allocation(2, "instance", "valid", 131072, 65536),
    ];
    for index in 0..40u64 {
        allocations.push(allocation(
            10 + index,
            "future",
            "valid",
            262144 + index * 2048,
            1024,
        ));
    }
    let dumped = json!({"format": "memstate-dump", "version": 1, "run": {"id": "futures", "node": 0},
        "snapshot": {"seq": 0, "time_ns": 0, "reason": "request"},
        "memories": [{"id": "0x1e00000000000003", "kind": "GPU_FB_MEM", "capacity": 1048576, "allocations": allocations}]});
    let db = dir.path().join("t.db");
    import(&db, &[&write_json(dir.path(), "d.json", &dumped)], 0);
    let text = text_of(&db, &["blockers", "--size", "1MiB"]);
    assert!(text.contains("42 allocations in the way"), "{text}");
    assert!(
        text.contains(
            "    and 37 more futures, 37 KiB, between 0x41800 and 0x53c00 (--all-blockers lists them)"
        ),
        "{text}"
    );
    let listed: Vec<&str> = text
        .lines()
        .filter(|line| line.trim_start().starts_with("0x00000000000000"))
        .collect();
    assert_eq!(listed.len(), 5, "{text}");
    assert!(
        listed.iter().all(|line| line.starts_with("    ")),
        "the table is indented under its heading: {text}"
    );
    for uid in [
        "0x0000000000000001",
        "0x0000000000000002",
        "0x000000000000000a",
        "0x000000000000000b",
        "0x000000000000000c",
    ] {
        assert!(
            listed.iter().any(|line| line.contains(uid)),
            "{uid} listed: {text}"
        );
    }
    let all = text_of(&db, &["blockers", "--size", "1MiB", "--all-blockers"]);
    assert_eq!(
        all.lines()
            .filter(|line| line.trim_start().starts_with("0x00000000000000"))
            .count(),
        42,
        "{all}"
    );
    assert!(!all.contains("more futures"));
    // The machine-readable form always has every blocker.
    let report = json_of(&db, &["blockers", "--size", "1MiB"]);
    assert_eq!(
        report[0]["blockers"]["blocking"].as_array().unwrap().len(),
        42
    );
}

/// The demo run's failure, found with SQL alone: (snapshot id, memory id, handle, node, seq, size).
pub(crate) fn demo_failure(conn: &Connection) -> (i64, i64, String, i64, i64, u64) {
    conn.query_row(
        "SELECT f.snapshot_id, f.memory_id, m.handle, s.node, s.seq, f.size FROM failed_requests f
         JOIN memories m USING (memory_id) JOIN snapshots s USING (snapshot_id) ORDER BY f.snapshot_id LIMIT 1",
        [],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get::<_, i64>(5)? as u64)),
    )
    .unwrap()
}

#[test]
fn the_demo_report_agrees_with_sql_over_the_views() {
    let dir = tempfile::tempdir().unwrap();
    let output = memstate()
        .arg("demo")
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let db = dir.path().join("memstate.db");
    let conn = Connection::open(&db).unwrap();
    let (snapshot_id, memory_id, handle, node, seq, size) = demo_failure(&conn);
    let finding = json_of(&db, &["oom"])[0].clone();
    assert_eq!(
        (
            finding["snapshot_id"].as_i64(),
            finding["handle"].as_str(),
            finding["size"].as_u64()
        ),
        (Some(snapshot_id), Some(handle.as_str()), Some(size))
    );
    // What collection freed: collectable at the node's previous snapshot, and gone or pending_free now.
    let previous: i64 = conn
        .query_row("SELECT snapshot_id FROM snapshots WHERE node = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT 1", [node, seq], |row| row.get(0))
        .unwrap();
    let (count, bytes): (i64, i64) = conn
        .query_row(
            "SELECT count(*), coalesce(sum(b.size), 0) FROM allocations b
             WHERE b.snapshot_id = ?1 AND b.memory_id = ?3 AND b.state = 'collectable'
               AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.snapshot_id = ?2 AND a.memory_id = ?3 AND a.uid = b.uid AND a.state <> 'pending_free')",
            [previous, snapshot_id, memory_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert!(count > 0, "the demo's collection ran before the failure");
    assert_eq!(
        (
            finding["collected_allocations"].as_i64(),
            finding["collected_bytes"].as_i64()
        ),
        (Some(count), Some(bytes))
    );
    // The last six snapshots' free bytes and largest hole, from the holes themselves.
    let mut statement = conn
        .prepare(
            "SELECT s.seq, sum(h.size), max(h.size) FROM holes h JOIN snapshots s USING (snapshot_id)
             WHERE h.memory_id = ?1 AND s.seq <= ?2 GROUP BY s.seq ORDER BY s.seq DESC LIMIT 6",
        )
        .unwrap();
    let mut expected: Vec<(i64, i64, i64)> = statement
        .query_map([memory_id, seq], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    expected.reverse();
    let recent: Vec<(i64, i64, i64)> = finding["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["seq"].as_i64().unwrap(),
                row["free_bytes"].as_i64().unwrap(),
                row["largest_hole"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(recent, expected);
    // The blockers are the valid and pending_alloc allocations overlapping the window.
    let window_start = finding["blockers"]["offset"].as_i64().unwrap();
    let window_end = window_start + size as i64;
    let mut statement = conn
        .prepare(
            "SELECT uid FROM allocations WHERE snapshot_id = ?1 AND memory_id = ?2 AND state IN ('valid', 'pending_alloc')
             AND offset < ?4 AND offset + size > ?3 ORDER BY offset",
        )
        .unwrap();
    let uids: Vec<String> = statement
        .query_map([snapshot_id, memory_id, window_start, window_end], |row| {
            row.get(0)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let reported: Vec<String> = finding["blockers"]["blocking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|blocker| blocker["uid"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(reported, uids);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("it freed ")
            && text.contains(&format!(" in {count} collectable allocations")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "map.html#memory={handle}&snapshot={snapshot_id}&range="
        )),
        "the demo links to the failure: {text}"
    );
}

/// Two memories of node 0. GPU_FB_MEM 0x1e00000000000003, 1 MiB: valid allocations [0, 256K) and
/// [512K, 768K), so two holes of 256 KiB, at 0x40000 and 0xc0000. SYSTEM_MEM 0x1e00000000000001,
/// 4 MiB, empty. At seq 1 a request of 5 MiB failed in SYSTEM_MEM.
fn placement_db(dir: &Path) -> std::path::PathBuf {
    let gpu = json!({"id": "0x1e00000000000003", "kind": "GPU_FB_MEM", "capacity": 1048576, "allocations": [
        allocation(1, "instance", "valid", 0, 262144),
        allocation(2, "instance", "valid", 524288, 262144)]});
    let system = json!({"id": "0x1e00000000000001", "kind": "SYSTEM_MEM", "capacity": 4194304, "allocations": []});
    let mut failing = system.clone();
    failing["failed_requests"] = json!([{"size": 5242880}]);
    let at = |seq: i64, memories: Value| {
        json!({"format": "memstate-dump", "version": 1, "run": {"id": "place", "node": 0},
               "snapshot": {"seq": seq, "time_ns": seq, "reason": "periodic"}, "memories": memories})
    };
    let db = dir.join("t.db");
    let first = write_json(dir, "d0.json", &at(0, json!([gpu.clone(), system])));
    let second = write_json(dir, "d1.json", &at(1, json!([gpu, failing])));
    import(&db, &[&first, &second], 0);
    db
}

#[test]
fn blockers_says_where_a_request_fits_now_and_looks_where_requests_fail() {
    let dir = tempfile::tempdir().unwrap();
    let db = placement_db(dir.path());
    // No failed request at seq 0: the GPU framebuffer only. 128 KiB fits in both 256 KiB holes;
    // the lower is taken.
    let text = text_of(&db, &["blockers", "--size", "128KiB", "-s", "place:0:0"]);
    assert!(
        text.contains("Looking at the GPU_FB_MEM memories (no request failed"),
        "{text}"
    );
    assert!(
        text.contains("GPU_FB_MEM 0x1e00000000000003: a request of 128 KiB fits now, at 0x40000 in the hole 0x40000-0x80000 (256 KiB at 256 KiB)"),
        "{text}"
    );
    assert!(!text.contains("SYSTEM_MEM"), "{text}");
    assert!(!text.contains("cannot be freed"), "{text}");
    // Aligned to 192 KiB (0x30000): the first multiple in the hole at 256 KiB is 384 KiB, and
    // 384 + 128 = 512 KiB still ends inside it.
    let report = json_of(
        &db,
        &[
            "blockers",
            "--size",
            "128KiB",
            "--alignment",
            "0x30000",
            "-s",
            "place:0:0",
        ],
    );
    let rows = report.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(rows[0]["fits_now"], json!(1));
    assert_eq!(rows[0]["hole_offset"], json!(262144));
    assert_eq!(rows[0]["hole_size"], json!(262144));
    assert_eq!(rows[0]["window_offset"], json!(393216));
    assert_eq!(rows[0]["blockers"], Value::Null);
    // 300 KiB fits in no GPU hole: the cheapest place is told as before.
    let text = text_of(&db, &["blockers", "--size", "300KiB", "-s", "place:0:0"]);
    assert!(
        text.contains("a request of 300 KiB (307200 bytes) does not fit now"),
        "{text}"
    );
    assert!(text.contains("cheapest place"), "{text}");
    assert!(text.contains("fits now in 0 of 1 memory"), "{text}");
    // --all: every memory; SYSTEM_MEM is empty, so it fits at its start.
    let text = text_of(
        &db,
        &["blockers", "--size", "300KiB", "-s", "place:0:0", "--all"],
    );
    assert!(
        text.contains("SYSTEM_MEM 0x1e00000000000001: a request of 300 KiB fits now, at 0x0 in the hole 0x0-0x400000 (4 MiB at 0 B)"),
        "{text}"
    );
    assert!(text.contains("fits now in 1 of 2 memories"), "{text}");
    // At seq 1 a request failed in SYSTEM_MEM: by default that kind is looked at.
    let text = text_of(&db, &["blockers", "--size", "128KiB", "-s", "place:0:1"]);
    assert!(
        text.contains("Looking at the SYSTEM_MEM memories (where a request failed"),
        "{text}"
    );
    assert!(
        text.contains("SYSTEM_MEM 0x1e00000000000001: a request of 128 KiB fits now"),
        "{text}"
    );
    assert!(!text.contains("GPU_FB_MEM"), "{text}");
    // --memory and --all do not go together.
    on_db(&db)
        .args(["blockers", "--size", "1", "--all", "--memory", "GPU_FB_MEM"])
        .assert()
        .code(2);
}

/// The story is a library room: its typed result is there without the command line.
#[test]
fn the_story_is_a_typed_result_of_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let db = story_db(dir.path());
    let database = memstate::db::open_read_only(&db).unwrap();
    let ids = memstate::query::select::oom_snapshots(database.connection(), None).unwrap();
    let stories = memstate::query::context::stories(database.connection(), &ids).unwrap();
    // The three requests of story_db's seq 2, worked out by hand above.
    let told: Vec<(u64, &str, bool)> = stories
        .iter()
        .map(|story| {
            (
                story.finding.size,
                story.finding.verdict.as_str(),
                story.finding.solved_by_collection,
            )
        })
        .collect();
    assert_eq!(
        told,
        [
            (4500, "fragmentation", false),
            (7000, "exhaustion", false),
            (3500, "fragmentation", true)
        ]
    );
    assert_eq!(
        stories[0]
            .previous
            .map(|(seq, collected)| (seq, collected.allocations, collected.bytes)),
        Some((1, 2, 2500))
    );
    assert_eq!(
        stories[0].finding.blockers.as_ref().map(|blockers| (
            blockers.offset,
            blockers.blocked_bytes,
            blockers.opens
        )),
        Some((5500, 500, 8000))
    );
}

/// A v1 dump's `device_free` (FORMAT.md, `failed_requests[]`): the cache is the memories whose names
/// share the failed memory's first word. By hand: `cuda:0` has two segments of 1000 bytes, one
/// holding 600 at 0 (free 400, largest 400), one holding nothing (free 1000); `cuda:1`'s 5000
/// free bytes are another device's. A 1500-byte request with 300 free outside: 1400 + 300, that
/// is 1700, is at least 1500, and 1500 is more than the largest block 1000: fragmentation; the empty segment's 1000 plus 300 is less than 1500, so
/// emptying the cache is not advised. With 600 outside instead, 1000 + 600 >= 1500: it is. A name
/// of one word makes the memory its own cache: 400 + 300 < 1500, exhaustion. (The follower's
/// line: follow.rs, follow_says_when_an_out_of_memory_dump_arrives.)
#[test]
fn device_free_makes_the_story_the_devices() {
    let dir = tempfile::tempdir().unwrap();
    let segment = |id: &str, name: &str, capacity: u64, allocations: Vec<Value>| json!({"id": id, "kind": "GPU_FB_MEM", "name": name, "capacity": capacity, "allocations": allocations});
    let case = |name: &str, device_free: u64, first_name: &str| {
        let mut failed = segment(
            "0x100",
            first_name,
            1000,
            vec![allocation(1, "block", "valid", 0, 600)],
        );
        failed["failed_requests"] = json!([{"size": 1500, "device_free": device_free}]);
        let mut value = small();
        value["snapshot"]["reason"] = json!("oom");
        value["memories"] = json!([
            failed,
            segment("0x200", "cuda:0 large pool segment", 1000, vec![]),
            segment("0x300", "cuda:1 large pool segment", 5000, vec![]),
        ]);
        let db = dir.path().join(format!("{name}.db"));
        import(
            &db,
            &[&write_json(dir.path(), &format!("{name}.json"), &value)],
            0,
        );
        let story = json_of(&db, &["oom"]);
        (db, story[0].clone())
    };
    let (db, story) = case("split", 300, "cuda:0 large pool segment");
    assert_eq!(story["verdict"], "fragmentation", "{story}");
    assert_eq!(
        story["cache"],
        json!({"device": "cuda:0", "segments": 2, "reserved": 2000, "cache_free": 1400,
               "largest_block": 1000, "empty_bytes": 1000, "device_free": 300})
    );
    assert!(!story["advice"].as_str().unwrap().contains("empty_cache"));
    assert_eq!(
        json_of(&db, &["sql", "SELECT device_free FROM failed_requests"]),
        json!([{"device_free": 300}])
    );
    let (_, story) = case("empty", 600, "cuda:0 large pool segment");
    assert!(
        story["advice"].as_str().unwrap().contains("empty_cache"),
        "{story}"
    );
    let (_, story) = case("alone", 300, "segment");
    assert_eq!(story["verdict"], "exhaustion", "{story}");
    assert_eq!(story["cache"]["segments"], 1);
    assert_eq!(story["cache"]["device"], "0x0000000000000100");
}
