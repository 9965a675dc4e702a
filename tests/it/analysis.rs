//! The analysis commands: the OOM verdict and blockers of the design's example (as
//! small.expected.md states them), the golden run's OOM and diff worked out by hand, the other
//! commands as a user runs them, and the demo.

use crate::common::{data, import, json_of, memstate, on_db, simulated_db, text_of};

#[test]
fn the_example_oom_is_fragmentation_not_solved_by_collection_blocked_by_one_future() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let findings = json_of(&db, &["oom"]);
    let finding = &findings[0];
    assert_eq!(findings.as_array().unwrap().len(), 1);
    assert_eq!(finding["size"], 300000);
    assert_eq!(finding["free_bytes"], 323584);
    assert_eq!(finding["largest_hole"], 225280);
    assert_eq!(finding["verdict"], "fragmentation");
    assert_eq!(finding["solved_by_collection"], false);
    let blockers = &finding["blockers"];
    assert_eq!(blockers["offset"], 655360);
    assert_eq!(blockers["blocked_bytes"], 4096);
    assert_eq!(blockers["opens"], 393216);
    let blocking = blockers["blocking"].as_array().unwrap();
    assert_eq!(blocking.len(), 1);
    assert_eq!(blocking[0]["uid"], "0x000000000000006a");
    assert_eq!(blocking[0]["size"], 4096);
    assert_eq!(blocking[0]["kind"], "future");
    assert_eq!(blocking[0]["state"], "valid");
    // And the same in words for people.
    let text = text_of(&db, &["oom"]);
    assert!(
        text.contains("FRAGMENTATION")
            && text.contains("would NOT make room")
            && text.contains("0x000000000000006a"),
        "{text}"
    );
    // blockers for the same request, asked directly.
    let report = json_of(
        &db,
        &[
            "blockers",
            "--size",
            "300000",
            "--alignment",
            "512",
            "--memory",
            "0x1e00000000000003",
        ],
    );
    assert_eq!(report[0]["blockers"]["offset"], 655360);
    assert_eq!(
        report[0]["blockers"]["blocking"][0]["uid"],
        "0x000000000000006a"
    );
}

#[test]
fn the_golden_oom_would_be_solved_by_collection() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("run")], 0);
    let findings = json_of(&db, &["oom"]);
    let finding = &findings[0];
    // seq 2: 300 bytes aligned 100; holes total 450 but the largest is 250: fragmentation.
    // Unmovable [0,100), [200,250), [850,950): [250,850) = 600 after collection, so it would fit.
    assert_eq!(finding["verdict"], "fragmentation");
    assert_eq!(finding["solved_by_collection"], true);
    assert_eq!(finding["largest_reclaimable"], 600);
    // The first aligned window with nothing unmovable is [300,600); collectable uid 5 is in it.
    let blockers = &finding["blockers"];
    assert_eq!(blockers["offset"], 300);
    assert_eq!(blockers["blocked_bytes"], 0);
    assert_eq!(blockers["blocking"].as_array().unwrap().len(), 0);
    assert_eq!(blockers["to_collect"][0]["uid"], "0x0000000000000005");
    assert_eq!(blockers["opens"], 600);
}

#[test]
fn diff_lists_what_appeared_disappeared_and_changed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("run")], 0);
    // seq 0 → 1: uid 2 collectable → pending_free; uids 4 (pending_alloc) and 5 appear.
    let changes = json_of(&db, &["diff", "golden:0:0", "golden:0:1"]);
    let summary: Vec<String> = changes
        .as_array()
        .unwrap()
        .iter()
        .map(|change| {
            format!(
                "{} {} {} {}",
                change["change"].as_str().unwrap(),
                change["uid"].as_str().unwrap(),
                change["state_before"],
                change["state_after"]
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            "changed 0x0000000000000002 \"collectable\" \"pending_free\"",
            "appeared 0x0000000000000004 null \"pending_alloc\"",
            "appeared 0x0000000000000005 null \"valid\"",
        ]
    );
    // seq 1 → 2 by snapshot id: uids 2 and 3 disappear, 6 appears, 4 and 5 change state.
    let changes = json_of(&db, &["diff", "2", "3"]);
    let kinds: Vec<&str> = changes
        .as_array()
        .unwrap()
        .iter()
        .map(|change| change["change"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|kind| **kind == "disappeared").count(),
        2
    );
    assert_eq!(kinds.iter().filter(|kind| **kind == "appeared").count(), 1);
    assert_eq!(kinds.iter().filter(|kind| **kind == "changed").count(), 2);
    // Selecting several snapshots where one is needed is a usage error.
    on_db(&db).args(["diff", "latest", "1"]).assert().code(2);
}

#[test]
fn listing_commands_select_snapshots_and_memories() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("run")], 0);
    let snapshots = json_of(&db, &["snapshots"]);
    assert_eq!(snapshots.as_array().unwrap().len(), 4);
    assert_eq!(snapshots[2]["failed_requests"], 1);
    assert_eq!(
        json_of(&db, &["memories", "--run", "golden"])
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // latest = each node's latest: node 0 seq 2 and node 1 seq 0; GPU_FB_MEM is one memory in each.
    let stats = json_of(&db, &["stats", "--memory", "GPU_FB_MEM"]);
    let rows: Vec<(i64, i64, i64)> = stats
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["node"].as_i64().unwrap(),
                row["seq"].as_i64().unwrap(),
                row["free_bytes"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, vec![(0, 2, 450), (1, 0, 1500)]);
    let stats = json_of(
        &db,
        &[
            "stats",
            "--snapshot",
            "golden:0:1",
            "--memory",
            "1e00000000000003",
        ],
    );
    assert_eq!(stats[0]["largest_hole"], 200);
    let holes = json_of(
        &db,
        &[
            "holes",
            "--snapshot",
            "3",
            "--memory",
            "GPU_FB_MEM",
            "--top",
            "2",
        ],
    );
    let sizes: Vec<i64> = holes
        .as_array()
        .unwrap()
        .iter()
        .map(|hole| hole["size"].as_i64().unwrap())
        .collect();
    assert_eq!(sizes, vec![250, 100]);
    let text = text_of(&db, &["holes", "--snapshot", "3", "--memory", "GPU_FB_MEM"]);
    assert!(
        text.contains("450 B free in 4 holes, largest 250 B"),
        "{text}"
    );
    let by_state = json_of(&db, &["allocations", "--snapshot", "3", "--by", "state"]);
    assert_eq!(by_state[0]["state"], "valid");
    assert_eq!(by_state[0]["bytes"], 350);
    let valid_gpu = json_of(
        &db,
        &[
            "allocations",
            "--snapshot",
            "3",
            "--memory",
            "GPU_FB_MEM",
            "--state",
            "valid",
            "--provenance",
            "a.py:%",
        ],
    );
    assert_eq!(valid_gpu.as_array().unwrap().len(), 3);
    let trend = json_of(&db, &["trend", "--memory", "0x1e00000000000003"]);
    let largest: Vec<i64> = trend
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["largest_hole"].as_i64().unwrap())
        .collect();
    assert_eq!(largest, vec![590, 200, 250]);
    let table = text_of(&db, &["stats", "--snapshot", "4"]);
    assert!(
        table.contains("1.5 KiB") || table.contains("1500 B"),
        "{table}"
    );
    on_db(&db)
        .args(["stats", "--snapshot", "golden:9:9"])
        .assert()
        .code(2);
    on_db(&db)
        .args(["stats", "--snapshot", "nonsense"])
        .assert()
        .code(2);
}

#[test]
fn report_lists_and_runs_canned_queries() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("run")], 0);
    let list = text_of(&db, &["report", "--list"]);
    for name in [
        "largest-holes",
        "hole-histogram",
        "fragmentation-trend",
        "live-allocations",
        "usage-by-kind",
        "usage-by-state",
        "usage-by-provenance",
        "usage-by-object",
        "long-lived",
        "churn",
        "growth",
        "nodes",
    ] {
        assert!(list.contains(name), "{name} missing from {list}");
    }
    let rows = json_of(
        &db,
        &[
            "report",
            "hole-histogram",
            "-p",
            "snapshot_id=3",
            "-p",
            "memory_id=1",
        ],
    );
    assert_eq!(rows.as_array().unwrap().len(), 3);
    on_db(&db)
        .args(["report", "no-such-query"])
        .assert()
        .code(2);
    on_db(&db)
        .args(["report", "nodes", "-p", "color=blue"])
        .assert()
        .code(2);
    // A parameter without a default is asked for (a run would default to the only one).
    on_db(&db)
        .args(["report", "largest-holes"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("-p snapshot_id="));
}

#[test]
fn the_demo_runs_and_shows_the_oom() {
    let dir = tempfile::tempdir().unwrap();
    let output = memstate()
        .current_dir(dir.path())
        .arg("demo")
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    for words in [
        "Simulated run demo-seed1",
        "Imported",
        "Out of memory",
        "FRAGMENTATION",
        "blocking allocations",
        "Fragmentation trend",
        "Try next",
        "memstate-demo/memstate.db",
    ] {
        assert!(
            text.contains(words),
            "{words:?} missing from the demo:\n{text}"
        );
    }
    assert!(
        text.lines().count() < 60,
        "the demo fits one screen:\n{text}"
    );
    // Again: the run happens anew (now) and replaces the earlier one; one run stays.
    let again = memstate()
        .current_dir(dir.path())
        .arg("demo")
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let said = String::from_utf8_lossy(&again.stdout);
    let imported = text
        .split("Imported ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    // (Run within the same second as the first, the dumps are the same and stay unchanged.)
    assert!(
        said.contains(&format!("Imported {imported} dumps")) && said.contains(&format!("{imported} of them replacing the previous demo run's"))
            || said.contains(&format!("Imported 0 dumps (0 allocations), {imported} unchanged since the previous demo run")),
        "{said}"
    );
    let db = dir.path().join("memstate-demo/memstate.db");
    let snapshots = on_db(&db)
        .args(["sql", "--format", "csv", "SELECT count(*) FROM snapshots"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&snapshots.stdout).lines().nth(1),
        Some(imported.as_str())
    );
}

/// `diff` of two snapshots of one node leaves out what their spans share; the answer must be the
/// one that comparing every allocation of both gives.
#[test]
fn diff_of_one_nodes_snapshots_equals_comparing_every_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let db = simulated_db(
        dir.path(),
        &memstate::sim::Config {
            steps: 120,
            dump_every: 5,
            continue_after_oom: true,
            ..Default::default()
        },
    );
    let database = memstate::db::open_read_only(&db).unwrap();
    let conn = database.connection();
    let ids: Vec<i64> = conn
        .prepare("SELECT snapshot_id FROM snapshots WHERE node = 0 ORDER BY seq")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(ids.len() > 10);
    let mut compared = 0;
    for (before, after) in [
        (ids[0], ids[ids.len() - 1]),
        (ids[3], ids[4]),
        (ids[9], ids[2]),
        (ids[5], ids[5]),
    ] {
        let full = memstate::analysis::diff(
            &memstate::query::load::placed(conn, before, None).unwrap(),
            &memstate::query::load::placed(conn, after, None).unwrap(),
        );
        let shown = json_of(&db, &["diff", &before.to_string(), &after.to_string()]);
        let shown: Vec<String> = shown
            .as_array()
            .unwrap()
            .iter()
            .map(|change| {
                format!(
                    "{} {} {} {}",
                    change["change"].as_str().unwrap(),
                    change["handle"].as_str().unwrap(),
                    change["uid"].as_str().unwrap(),
                    change["offset"]
                )
            })
            .collect();
        let expected: Vec<String> = full
            .iter()
            .map(|change| {
                format!(
                    "{} {} {} {}",
                    change.change.as_str(),
                    change.handle,
                    change.uid,
                    change.offset
                )
            })
            .collect();
        assert_eq!(shown, expected, "diff {before} {after}");
        compared += expected.len();
    }
    assert!(
        compared > 50,
        "the pairs compared too few changes to mean anything ({compared})"
    );
}

/// Layouts, holes and figures of many memories load in a few statements, not a few a memory
/// (issue 17, item 7: 2,000 memories took 20 ms each), and give what one memory's own
/// questions to the views give.
#[test]
fn many_memories_load_in_a_few_statements() {
    let dir = tempfile::tempdir().unwrap();
    let memories: Vec<serde_json::Value> = (0..300u64)
        .map(|m| {
            let allocations: Vec<serde_json::Value> = (0..4u64)
                .map(|a| serde_json::json!({"uid": m * 10 + a + 1, "kind": "instance",
                    "state": if a % 2 == 0 { "valid" } else { "collectable" },
                    "offset": a * 2048 + m, "size": 1024 + a}))
                .collect();
            serde_json::json!({"id": 0x1000 + m, "kind": "GPU_FB_MEM", "capacity": 1 << 16, "allocations": allocations})
        })
        .collect();
    let dump = serde_json::json!({"format": "memstate-dump", "version": 1, "run": {"id": "many", "node": 0},
        "snapshot": {"seq": 0, "time_ns": 0, "reason": "periodic"}, "memories": memories});
    let path = crate::common::write_json(dir.path(), "many.json", &dump);
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&path], 0);
    // A connection of the test's own, traced: memstate's is private to its database.
    let mut conn =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let statements = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = statements.clone();
    conn.trace_v2(
        rusqlite::trace::TraceEventCodes::SQLITE_TRACE_STMT,
        Some(move |_: rusqlite::trace::TraceEvent<'_>| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }),
    )
    .unwrap();
    let conn = &conn;
    let pairs = memstate::query::select::pairs(conn, "latest", None).unwrap();
    assert_eq!(pairs.len(), 300);
    let before = statements.load(std::sync::atomic::Ordering::SeqCst);
    let layouts = memstate::query::load::layouts_of(conn, &pairs, true).unwrap();
    let stats = memstate::query::listing::stats_table(conn, &pairs).unwrap();
    let used = statements.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert!(used <= 10, "{used} statements for 300 memories");
    // The same as each memory's own rows in the views, in the order of the pairs.
    assert_eq!(stats.rows.len(), 300);
    for (index, (layout, &(snapshot_id, memory_id))) in layouts.iter().zip(&pairs).enumerate() {
        assert_eq!(
            (layout.snapshot_id, layout.memory_id),
            (snapshot_id, memory_id)
        );
        let count = |sql: &str| -> i64 {
            conn.query_row(sql, [snapshot_id, memory_id], |row| row.get(0))
                .unwrap()
        };
        assert_eq!(
            layout.allocations.len() as i64,
            count("SELECT count(*) FROM allocations WHERE snapshot_id = ?1 AND memory_id = ?2")
        );
        assert_eq!(
            layout.holes.len() as i64,
            count("SELECT count(*) FROM holes WHERE snapshot_id = ?1 AND memory_id = ?2")
        );
        let offsets: Vec<u64> = layout.allocations.iter().map(|a| a.offset).collect();
        // By hand: allocation a of memory m lies at a * 2048 + m, in offset order.
        let m = index as u64;
        assert_eq!(offsets, vec![m, 2048 + m, 4096 + m, 6144 + m]);
        let handle = stats.column("handle").unwrap();
        assert_eq!(
            stats.rows[index][handle],
            memstate::present::Cell::text(layout.handle.clone())
        );
    }
}

/// `diff` says so when a comparison may mislead (two nodes, or backwards in time) and refuses one
/// that means nothing (two runs, whose uids have nothing in common) (issue 18, item 6).
#[test]
fn diff_warns_across_nodes_and_backwards_and_refuses_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&crate::common::data("run")], 0);
    let diff = |a: &str, b: &str| {
        crate::common::on_db(&db)
            .args(["diff", a, b])
            .output()
            .unwrap()
    };
    let forward = diff("golden:0:0", "golden:0:1");
    assert_eq!(forward.status.code(), Some(0));
    assert!(
        forward.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&forward.stderr)
    );
    let backward = diff("golden:0:1", "golden:0:0");
    assert_eq!(backward.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&backward.stderr);
    assert!(
        stderr.contains("warning: golden:0:0 (snapshot 1) comes before golden:0:1 (snapshot 2)"),
        "{stderr}"
    );
    let across = diff("golden:0:0", "golden:1:0");
    assert_eq!(across.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&across.stderr);
    assert!(
        stderr.contains("are on different nodes") && stderr.contains("golden:1:0"),
        "{stderr}"
    );
    let other = crate::common::set(
        crate::common::small(),
        "/run/id",
        serde_json::json!("other"),
    );
    let file = crate::common::write_json(dir.path(), "other.json", &other);
    crate::common::import(&db, &[&file], 0);
    let runs = diff("golden:0:0", "other:0:3");
    assert_eq!(runs.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&runs.stderr).contains("different runs"));
}

/// Issue 29, item 8: `blockers` said "no request failed in these snapshots" when the request that
/// failed was on GPU_FB_MEM, the default kind (it compared the kinds chosen with the default). In
/// small.json a 300000-byte request failed on GPU_FB_MEM 0x1e00000000000003; a database of a
/// dump without failures (its failed request removed) is where none failed.
#[test]
fn blockers_says_whether_a_request_failed_when_it_failed_on_the_default_kind() {
    let dir = tempfile::tempdir().unwrap();
    let failed = dir.path().join("failed.db");
    import(&failed, &[&data("small.json")], 0);
    let text = text_of(&failed, &["blockers", "--size", "1KiB"]);
    assert!(
        text.contains(
            "Looking at the GPU_FB_MEM memories (where a request failed in these snapshots;"
        ),
        "{text}"
    );
    let calm = dir.path().join("calm.db");
    let dump = crate::common::set(
        crate::common::small(),
        "/memories/0/failed_requests",
        serde_json::json!([]),
    );
    let path = crate::common::write_json(dir.path(), "calm.json", &dump);
    import(&calm, &[&path], 0);
    let text = text_of(&calm, &["blockers", "--size", "1KiB"]);
    assert!(
        text.contains("Looking at the GPU_FB_MEM memories (no request failed in these snapshots;"),
        "{text}"
    );
}
