//! Logs as people have them: Legate's out-of-memory report in every released form and Legion's
//! default mapper line after a Realm allocator status, each fixture written from the producer's
//! format string (quoted below with its file, line and release; tests/data/sources/README.md
//! says the same beside the files), starting as a real log starts. Expected figures by hand.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;

use crate::common::{data, import, json_of, on_db, text_of, write};

fn fixture(name: &str) -> PathBuf {
    data(&format!("sources/{name}"))
}

/// Rows of a query as text, NULL as "NULL".
fn rows(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let conn = Connection::open(db).unwrap();
    let mut statement = conn.prepare(sql).unwrap();
    let count = statement.column_count();
    statement
        .query_map([], |row| {
            (0..count)
                .map(|index| {
                    Ok(match row.get::<_, rusqlite::types::Value>(index)? {
                        rusqlite::types::Value::Null => "NULL".to_string(),
                        rusqlite::types::Value::Integer(number) => number.to_string(),
                        rusqlite::types::Value::Real(number) => number.to_string(),
                        rusqlite::types::Value::Text(text) => text,
                        rusqlite::types::Value::Blob(_) => "blob".to_string(),
                    })
                })
                .collect()
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn imported(dir: &Path, name: &str) -> PathBuf {
    let db = dir.join(format!("{name}.db"));
    import(&db, &[&fixture(name)], 0);
    db
}

const STATS: &str =
    "SELECT s.node, s.seq, m.handle, m.kind, ms.capacity, ms.used_bytes, ms.free_bytes,
                            ms.largest_hole, ms.unknown
                     FROM memory_stats ms JOIN memories m USING (memory_id)
                     JOIN snapshots s USING (snapshot_id) ORDER BY s.node, s.seq";

const REQUESTS: &str = "SELECT s.node, s.seq, f.size, coalesce(f.provenance, 'NULL'), f.time_ns
                        FROM failed_requests f JOIN snapshots s USING (snapshot_id)
                        ORDER BY s.node, s.seq";

fn verdicts(db: &Path) -> Vec<String> {
    let Value::Array(findings) = json_of(db, &["oom"]) else {
        panic!("oom --format json gives an array")
    };
    findings
        .iter()
        .map(|finding| finding["verdict"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Row 1: every fixture's first line carries Realm's prefix `[0 - 7f..]`, which starts with `[`
/// as JSON does. Read without `--source`, as a log.
#[test]
fn a_log_whose_first_line_has_the_realm_prefix_is_read_as_a_log() {
    let dir = tempfile::tempdir().unwrap();
    for (name, snapshots) in [
        ("legate-23.11.log", 1),
        ("legate-24.06.log", 1),
        ("legate-24.11.log", 2),
        ("legate-25.10.log", 2),
        ("legate-26.01.log", 2),
        ("realm.log", 3),
    ] {
        let first = std::fs::read_to_string(fixture(name)).unwrap();
        assert!(
            first.starts_with("[0 - 7f") || first.starts_with("[1 - 7f"),
            "{name}"
        );
        let db = imported(dir.path(), name);
        assert_eq!(
            rows(&db, "SELECT count(*) FROM snapshots"),
            [[snapshots.to_string()]],
            "{name}"
        );
    }
}

/// Row 2: legate 26.01.00 `src/cpp/legate/mapping/detail/base_mapper.cc:1342`
/// (`"  Instance {:x} at address {:x} of size {} covering elements {} {}"`, the address in hex
/// without 0x, before the size; the same in 26.06.01 at line 1424). Capacity 4,194,304;
/// instances at 0x7f0000100000 (1,048,576) and 0x7f0000280000 (2,097,152): from the lowest
/// address, offsets 0 and 0x180000 = 1572864, so holes [1048576, 1572864) and [3670016, 4194304),
/// 524288 each: 1048576 free, largest hole 524288 < the 1,048,576 asked: fragmentation. The second
/// report (seq 1) holds the first instance only: by it, 3145728 would be free in one hole, which
/// would hold the 2,097,152 asked; the request failed all the same, so the report lists less than
/// the memory held (issue 46, item 12): what it holds is unknown, and so are used and free.
#[test]
fn legate_26_instances_are_placed_from_their_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let db = imported(dir.path(), "legate-26.01.log");
    assert_eq!(
        rows(&db, STATS),
        [
            [
                "0",
                "0",
                "0x1e00000000000003",
                "GPU_FB_MEM",
                "4194304",
                "3145728",
                "1048576",
                "524288",
                "NULL"
            ],
            [
                "0",
                "1",
                "0x1e00000000000003",
                "GPU_FB_MEM",
                "4194304",
                "NULL",
                "NULL",
                "NULL",
                "allocations"
            ],
        ]
    );
    assert_eq!(
        rows(&db, "SELECT a.offset, a.size, json_extract(a.attrs, '$.address'), a.provenance FROM allocations a
                   JOIN snapshots s USING (snapshot_id) WHERE s.seq = 0 ORDER BY a.offset"),
        [
            ["0", "1048576", "0x7f0000100000", "train.py:2"],
            ["1572864", "2097152", "0x7f0000280000", "NULL"]
        ]
    );
    // The second report leaves 3,145,728 bytes free in one range by what it lists, yet the
    // 2,097,152 asked failed: the listing is short of what the memory held (issue 46, item 12),
    // so no verdict is drawn from it.
    assert_eq!(verdicts(&db), ["fragmentation", "cannot-tell"]);
}

/// Issue 46, item 12: legate 26.06.01 (`base_mapper.cc:1353-1424`, the same statements as
/// 26.01's), run on CPUs with `--sysmem 40`: four live inline-mapped 8 MiB stores, then a
/// 12 MiB request fails. The report says "reserving 0 of the available 41,943,040 bytes" and
/// lists nothing (inline mappings are not among its LogicalStores). By what it lists, 40 MiB
/// are free in one range, more than the 12,582,912 asked: the failure proves the listing
/// incomplete. What the memory holds is unknown, the verdict cannot-tell, never "fits".
#[test]
fn a_report_that_lists_less_than_the_memory_held_gets_no_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = "[0 - 7f3c2c0b4000]    2.104511 {5}{legate.mapper}:";
    let log = format!(
        "[0 - 7f3c2c0b8000]    0.000212 {{4}}{{threads}}: reservation ('utility proc 1d00000000000000') cannot be satisfied\n\
         inline-mapped 4 stores of 8 MiB\n\
         {prefix} Failed to allocate 12,582,912 bytes on memory 1e00000000000000 (of kind SYSTEM_MEM) for region requirement(s) {{0}} of Task fill[inline.py:14] (UID 41)\n\
         {prefix} NOTE: Rerun with LEGATE_CONFIG=\"--provenance\" to get more information on allocation sites.\n\
         {prefix} There is not enough space because Legate is reserving 0 of the available 41,943,040 bytes for the following LogicalStores:\n\
         [0 - 7f3c2c0b4000]    2.104600 {{5}}{{legate}}: Legate called abort at /tmp/legate/src/cpp/legate/mapping/detail/base_mapper.cc:1421 in report_failed_mapping_(): Out of memory\n"
    );
    let path = write(dir.path(), "inline.log", log.as_bytes());
    let db = dir.path().join("inline.db");
    import(&db, &[&path], 0);
    assert_eq!(verdicts(&db), ["cannot-tell"]);
    let unknown: String = crate::common::scalar(&db, "SELECT unknown FROM memory_stats");
    assert!(unknown.contains("allocations"), "{unknown}");
    let note: String = crate::common::scalar(&db, "SELECT note FROM snapshots");
    assert!(
        note.contains("the report lists less than the memory held: by what it lists, a free range of 41943040 bytes would have held the 12582912-byte request that failed"),
        "{note}"
    );
    let oom = text_of(&db, &["oom"]);
    assert!(!oom.contains("retrying it would succeed"), "{oom}");
    // The report prints no alignment: unknown, not 1.
    assert!(oom.contains("12582912 bytes, alignment not given"), "{oom}");
    assert!(json_of(&db, &["oom"])[0]["alignment"].is_null());
}

/// Row 3: legate.core 23.11.00 `src/core/mapping/base_mapper.cc:778` (`logger.error("Mapper %s
/// failed to allocate %zd bytes on memory " IDFMT " (of kind %s: %s) for %s of %s%s[%s] (UID
/// %lld).\nThis means ...")`, the mapper named `LIB on Node N` at line 86, the logger `LIB.mapper`
/// at line 122) and legate 24.06.01 `src/core/mapping/detail/base_mapper.cc:889` (the same through
/// `LEGATE_ABORT`, printed after "Legate called abort at FILE:LINE in report_failed_mapping_(): ",
/// with `target_memory.id` streamed in decimal: 2161728920649465859 = 0x1e00010000000003). Neither
/// prints a capacity or what the memory holds: both unknown, the verdict cannot-tell.
#[test]
fn legate_23_and_24_06_reports_are_one_snapshot_each() {
    let dir = tempfile::tempdir().unwrap();
    let old = imported(dir.path(), "legate-23.11.log");
    assert_eq!(
        rows(&old, STATS),
        [[
            "0",
            "0",
            "0x1e00000000000003",
            "GPU_FB_MEM",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "capacity,allocations"
        ]]
    );
    assert_eq!(
        rows(&old, REQUESTS),
        [["0", "0", "3600000000", "examples/gemm.py:52", "2473642000"]]
    );
    assert_eq!(verdicts(&old), ["cannot-tell"]);
    let abort = imported(dir.path(), "legate-24.06.log");
    assert_eq!(
        rows(&abort, STATS),
        [[
            "1",
            "0",
            "0x1e00010000000003",
            "SYSTEM_MEM",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            "capacity,allocations"
        ]]
    );
    assert_eq!(
        rows(&abort, "SELECT size, note FROM failed_requests"),
        [["805306368", "reduction (3) requirement 0 of Task cunumeric::ScalarUnaryRedTask[sum.py:8] (UID 4021)"]]
    );
    // Pasted without the prefix (as in an issue), the node comes from "on Node 1".
    let text = std::fs::read_to_string(fixture("legate-24.06.log")).unwrap();
    let bare: String = text
        .lines()
        .map(|line| match line.find("}: ") {
            Some(at) if line.starts_with('[') => &line[at + 3..],
            _ => line,
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let pasted = write(dir.path(), "pasted-24.06.txt", bare.as_bytes());
    let db = dir.path().join("pasted.db");
    import(&db, &[&pasted], 0);
    assert_eq!(
        rows(&db, "SELECT s.node, s.time_ns, m.handle FROM snapshots s JOIN memory_stats ms USING (snapshot_id) JOIN memories m USING (memory_id)"),
        [["1", "0", "0x1e00010000000003"]]
    );
}

/// Row 4: a 25.08 report (legate 25.08.00 `src/cpp/legate/mapping/detail/base_mapper.cc:1224`,
/// one `logger().error()` per line) pasted into an issue: no prefix, a shell line and a
/// traceback before it, `region requirement(s) 0` without braces, and two of its lines joined
/// into one each time. Capacity 1000000; instances 500000 and 200000 (= the 700000 reserved), no
/// addresses: 300000 free in total < the 600000 asked: exhaustion whatever the placement. Also
/// the 24.11 log's two ranks interleaved (grouped by node and thread) on logger `legate.mapper`,
/// and 25.10's `reduction (7) requirement(s) {2}`.
#[test]
fn reports_pasted_joined_interleaved_or_reduced_are_all_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = imported(dir.path(), "legate-pasted.log");
    assert_eq!(
        rows(&db, STATS),
        [[
            "0",
            "0",
            "0x1e00000000000003",
            "GPU_FB_MEM",
            "1000000",
            "700000",
            "300000",
            "NULL",
            "placement"
        ]]
    );
    assert_eq!(
        rows(&db, "SELECT a.uid, a.size, a.label, coalesce(a.provenance, 'NULL') FROM allocations a ORDER BY a.uid"),
        [
            ["0x4000000000000001", "500000", "run.py:2", "run.py:2"],
            ["0x4000000000000002", "200000", "run.py:3", "NULL"]
        ]
    );
    assert_eq!(
        rows(&db, "SELECT size, note FROM failed_requests"),
        [["600000", "region requirement(s) 0 of Task cupynumeric::ConvertTask[run.py:5] (UID 41); the LogicalStore allocated at run.py:5"]]
    );
    assert_eq!(verdicts(&db), ["exhaustion"]);
    // 24.11: node 1's report holds its one instance only, whatever node 0 printed between.
    let ranks = imported(dir.path(), "legate-24.11.log");
    assert_eq!(
        rows(&ranks, "SELECT s.node, a.uid, a.size FROM allocations a JOIN snapshots s USING (snapshot_id) WHERE s.node = 1"),
        [["1", "0x4000010000000001", "12288"]]
    );
    let reduced = imported(dir.path(), "legate-25.10.log");
    assert_eq!(
        rows(&reduced, "SELECT size, note FROM failed_requests ORDER BY size"),
        [
            ["1024", "reduction (7) requirement(s) {2} of Task legate::SumTask[bench.py:40] (UID 90)"],
            ["2147483648", "region requirement(s) {0, 1} of Task legate::TransposeTask[bench.py:31] (UID 77); the LogicalStore allocated at bench.py:12, bench.py:13"]
        ]
    );
}

/// Rows 5 and 6: legate 25.10.00 `src/cpp/legate/mapping/detail/base_mapper.cc:1261` (fmt,
/// `fmt::group_digits`). The first report reserves 5,071,753,728 of 31,457,280,000 bytes and
/// lists no instance: the memory holds one `unlisted` allocation of 5071753728 bytes, placed
/// nowhere known; 26385526272 free in total >= the 2 GiB asked: cannot tell. The second report is
/// its first line only: capacity and contents unknown (NULL), never made up.
#[test]
fn reserved_bytes_stay_held_and_a_missing_capacity_stays_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let db = imported(dir.path(), "legate-25.10.log");
    assert_eq!(
        rows(&db, STATS),
        [
            [
                "0",
                "0",
                "0x1e00000000000002",
                "GPU_FB_MEM",
                "31457280000",
                "5071753728",
                "26385526272",
                "NULL",
                "placement"
            ],
            [
                "0",
                "1",
                "0x1e00000000000002",
                "GPU_FB_MEM",
                "NULL",
                "NULL",
                "NULL",
                "NULL",
                "capacity,allocations"
            ],
        ]
    );
    assert_eq!(
        rows(&db, "SELECT a.kind, a.size FROM allocations a JOIN snapshots s USING (snapshot_id) WHERE s.seq = 0"),
        [["unlisted", "5071753728"]]
    );
    assert_eq!(rows(&db, "SELECT count(*) FROM holes"), [["0"]]);
    let Value::Array(findings) = json_of(&db, &["oom"]) else {
        panic!("an array")
    };
    assert_eq!(findings[1]["verdict"], "cannot-tell");
    assert_eq!(findings[1]["capacity"], Value::Null);
    assert_eq!(findings[1]["free_bytes"], Value::Null);
    assert_eq!(
        findings[1]["unknown"],
        serde_json::json!(["capacity", "allocations"])
    );
    assert_eq!(findings[0]["free_bytes"], 26385526272u64);
    // What people see says unknown, not a number.
    let stats = text_of(&db, &["stats", "--snapshot", "legate-25.10:0:1"]);
    assert!(stats.contains("capacity,allocations"), "{stats}");
    let story = text_of(&db, &["oom", "--snapshot", "legate-25.10:0:1"]);
    assert!(story.contains("capacity        unknown"), "{story}");
    let map = text_of(&db, &["map", "--snapshot", "legate-25.10:0:0"]);
    assert!(
        map.contains("largest hole unknown") && map.contains("unknown: placement"),
        "{map}"
    );
    let memories = text_of(&db, &["memories"]);
    assert!(memories.contains("placement"), "{memories}");
}

/// Row 7: legate 24.11.00 `src/cpp/legate/mapping/detail/base_mapper.cc:1191` (iostream, no
/// addresses; "(minus the eager pool allocation)" at line 1231). Node 0: four instances of about
/// 8 MiB, 8388608 + 8388608 + 8388592 + 8388592 = 33554400 reserved of 41943040: 8388640 free in
/// total >= the 8388608 asked, but where is not printed: cannot tell (not "fits", not "retry").
/// Node 1: 12288 of 16384 reserved, 4096 free < the 8192 asked: exhaustion.
#[test]
fn without_addresses_the_story_cannot_tell_and_says_what_would() {
    let dir = tempfile::tempdir().unwrap();
    let db = imported(dir.path(), "legate-24.11.log");
    assert_eq!(
        rows(&db, STATS),
        [
            [
                "0",
                "0",
                "0x1e00000000000000",
                "SYSTEM_MEM",
                "41943040",
                "33554400",
                "8388640",
                "NULL",
                "placement"
            ],
            [
                "1",
                "0",
                "0x1e00010000000003",
                "GPU_FB_MEM",
                "16384",
                "12288",
                "4096",
                "NULL",
                "placement"
            ],
        ]
    );
    assert_eq!(
        rows(&db, REQUESTS),
        [
            ["0", "0", "8388608", "oom.py:16", "2500000000"],
            ["1", "0", "8192", "NULL", "2600000000"]
        ]
    );
    assert_eq!(verdicts(&db), ["cannot-tell", "exhaustion"]);
    let story = text_of(&db, &["oom", "--snapshot", "legate-24.11:0:0"]);
    assert!(
        story.contains("CANNOT TELL") && story.contains("addresses"),
        "{story}"
    );
    assert!(!story.contains("retrying it would succeed"), "{story}");
}

/// Row 8: legion `runtime/mappers/default_mapper.cc:2629` (legion-25.06.0 and HEAD; line 2584 in
/// legion-24.06.0:
/// "Default mapper failed allocation of size %zd bytes for region  requirement %d of task %s (UID
/// %lld) in memory " IDFMT " (%s) for processor " IDFMT " (%s)", logger `default_mapper`) and the
/// inline-mapping form at line 2853 (2808), after `BasicRangeAllocator::dump_allocator_status`
/// (`runtime/realm/mem_impl.inl:327`, to stderr without a prefix). First block: capacity 1536,
/// allocated [0, 256) and [512, 1024), listed holes [256, 512) and [1024, 1536): 768 free, largest
/// 512 < 600 asked: fragmentation, in the memory and kind the mapper names. Second: capacity
/// 1000, 100 used, 900 free < 950: exhaustion, node 1 from the prefix. The inline mapping line
/// has no status before it: memory 0x1e00010000000002, GPU_FB_MEM, 805347328 asked, capacity and
/// contents unknown.
#[test]
fn the_default_mappers_line_names_the_memory_its_kind_and_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let db = imported(dir.path(), "realm.log");
    assert_eq!(
        rows(&db, STATS),
        [
            [
                "0",
                "0",
                "0x1e00000000000003",
                "GPU_FB_MEM",
                "1536",
                "768",
                "768",
                "512",
                "NULL"
            ],
            [
                "1",
                "0",
                "0x1e00010000000001",
                "SYSTEM_MEM",
                "1000",
                "100",
                "900",
                "900",
                "NULL"
            ],
            [
                "1",
                "1",
                "0x1e00010000000002",
                "GPU_FB_MEM",
                "NULL",
                "NULL",
                "NULL",
                "NULL",
                "capacity,allocations"
            ],
        ]
    );
    assert_eq!(
        rows(&db, REQUESTS),
        [
            ["0", "0", "600", "NULL", "5000000000"],
            ["1", "0", "950", "NULL", "6000000000"],
            ["1", "1", "805347328", "NULL", "7250000000"]
        ]
    );
    assert_eq!(
        rows(&db, "SELECT h.offset, h.size FROM holes h JOIN snapshots s USING (snapshot_id) WHERE s.node = 0 ORDER BY h.offset"),
        [["256", "256"], ["1024", "512"]]
    );
    assert_eq!(
        verdicts(&db),
        ["fragmentation", "exhaustion", "cannot-tell"]
    );
    // Made-up uids are stable: the same file imported again changes nothing.
    let again = import(&db, &[&fixture("realm.log")], 0);
    assert!(
        again.contains("imported 0 dumps") && again.contains("3 unchanged"),
        "{again}"
    );
}

/// Deliver 1: a file of no known kind is refused once, by name, with the kinds tried, exit 1;
/// a line that starts like JSON but is not (`[rank0]: ...`) is such a file, while a cut memstate
/// document still gets memstate's own precise error.
#[test]
fn a_file_of_no_known_kind_is_refused_once_naming_the_kinds_tried() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let refused = |path: &Path| -> String {
        let output = on_db(&db).arg("import").arg(path).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        stderr
    };
    let noise = write(
        dir.path(),
        "noise.log",
        b"[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 3\nerror\n",
    );
    let stderr = refused(&noise);
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    for kind in [
        "memstate dump",
        "Legate out-of-memory report",
        "Realm allocator status",
        "PyTorch",
    ] {
        assert!(
            errors[0].contains(kind) && errors[0].contains("noise.log"),
            "{stderr}"
        );
    }
    let cut = write(
        dir.path(),
        "cut.dump",
        br#"{"format": "memstate-dump", "version": 1, "run": {"id": "r", "node": 0}, "snapshot": {"seq": 0, "#,
    );
    let stderr = refused(&cut);
    assert!(!stderr.contains("Legate"), "memstate's own error: {stderr}");
    assert!(!db.exists() || rows(&db, "SELECT count(*) FROM snapshots") == [["0"]]);
}

/// Lines no reader needs are passed over by a byte search (source/lines.rs), not read one by one;
/// what is found must not change with that, nor with where the reader's buffer ends. Every
/// fixture read through buffers of 3 bytes, 17 bytes and 8 KiB gives what one read whole gives, and a
/// report after 200,000 lines of noise is found with its own line number: the fixture's header
/// line plus the noise lines, counted here by a plain scan of the text.
#[test]
fn skipping_unneeded_lines_changes_nothing_found() {
    use memstate::import::source::{legate::Legate, read_log_as, realm::Realm, Source};
    let sources: [&dyn Source; 2] = [&Legate, &Realm];
    let found = |source: &dyn Source, text: &[u8], capacity: usize| {
        let mut reader = std::io::BufReader::with_capacity(capacity, text);
        read_log_as(source, &mut reader, "log")
            .map(|found| format!("{found:?}"))
            .map_err(|error| error.to_string())
    };
    for name in [
        "legate-23.11.log",
        "legate-24.06.log",
        "legate-24.11.log",
        "legate-25.10.log",
        "legate-26.01.log",
        "legate-pasted.log",
        "realm.log",
    ] {
        let text = std::fs::read(fixture(name)).unwrap();
        for source in sources {
            let whole = found(source, &text, text.len() + 1);
            for capacity in [3, 17, 8192] {
                assert_eq!(
                    found(source, &text, capacity),
                    whole,
                    "{name}, buffer {capacity}"
                );
            }
        }
    }
    let report = std::fs::read_to_string(fixture("legate-26.01.log")).unwrap();
    let mut text = String::new();
    for line in 0..200_000 {
        text.push_str(&format!(
            "[0 - 7f5dd0a3b780]    {line}.000001 {{3}}{{legion}}: task {line} mapped\n"
        ));
    }
    text.push_str(&report);
    let headers: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| line.contains("ailed to allocate "))
        .map(|(index, _)| index + 1)
        .collect();
    let mut reader = std::io::BufReader::new(text.as_bytes());
    let lines: Vec<usize> = read_log_as(&Legate, &mut reader, "log")
        .unwrap()
        .iter()
        .map(|found| found.line)
        .collect();
    assert_eq!(lines, headers);
    assert_eq!(headers[0], 200_003);
}

/// Issue 27, item 9: a figure of a Legate report or a Realm status that is no 64-bit number, or
/// a memory or instance id that is no id, is refused naming the file, the line and the field (it
/// was "not a Legate out-of-memory report", or the line was passed over and the figure unknown).
#[test]
fn a_log_figure_that_is_no_number_is_refused_naming_its_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    for (fixture_name, from, to, line, words) in [
        (
            "legate-23.11.log",
            "failed to allocate 3600000000 bytes",
            "failed to allocate 36000000000000000000000 bytes",
            3,
            "request size \"36000000000000000000000\" is past 2^64",
        ),
        (
            "legate-23.11.log",
            "on memory 1e00000000000003 (of kind GPU_FB_MEM: Frame",
            "on memory 1e000000000zz003 (of kind GPU_FB_MEM: Frame",
            3,
            "memory \"1e000000000zz003\" is not a memory id",
        ),
        (
            "legate-26.01.log",
            "Failed to allocate 1,048,576 bytes",
            "Failed to allocate 99,999,999,999,999,999,999 bytes",
            3,
            "request size \"99,999,999,999,999,999,999\" is past 2^64",
        ),
        (
            "legate-26.01.log",
            "of size 2,097,152 covering",
            "of size 99999999999999999999 covering",
            10,
            "its size \"99999999999999999999\" is past 2^64",
        ),
        (
            "legate-26.01.log",
            "Instance 4000000000000011 at address 7f0000280000",
            "Instance 4000000000000011 at address 7f00002800000000000",
            10,
            "its address \"7f00002800000000000\" is not a 64-bit hex address",
        ),
        (
            "legate-25.10.log",
            "reserving 5,071,753,728 of",
            "reserving 5,071,753,728,000,000,000,000 of",
            6,
            "reserved bytes \"5,071,753,728,000,000,000,000\" is past 2^64",
        ),
        (
            "legate-25.10.log",
            "of the available 31,457,280,000 bytes",
            "of the available 31,457,280,000,000,000,000,000 bytes",
            6,
            "available bytes \"31,457,280,000,000,000,000,000\" is past 2^64",
        ),
        (
            "realm.log",
            "allocated_range_idx:3 first:512 last:1024",
            "allocated_range_idx:3 first:512 last:99999999999999999999",
            7,
            "a Realm status line's last \"99999999999999999999\" is past 2^64",
        ),
        (
            "realm.log",
            "%%Stats%% total_size:1536",
            "%%Stats%% total_size:15x6",
            10,
            "a Realm status line's total_size \"15x6\" is not a number",
        ),
        (
            "realm.log",
            "failed allocation of size 600 bytes",
            "failed allocation of size 60000000000000000000000 bytes",
            11,
            "the default mapper's request size \"60000000000000000000000\" is no 64-bit number",
        ),
    ] {
        let text = std::fs::read_to_string(fixture(fixture_name)).unwrap();
        assert_eq!(text.matches(from).count(), 1, "{from}");
        let name = format!("odd-{line}-{}", fixture_name);
        let path = write(dir.path(), &name, text.replace(from, to).as_bytes());
        let output = on_db(dir.path().join(format!("{name}.db")))
            .args(["import", "-q"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{to}: {stderr}");
        assert!(
            stderr.contains(&format!("{name}:{line}: ")) && stderr.contains(words),
            "{to}: {stderr}"
        );
    }
}
