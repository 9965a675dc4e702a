//! Reading what producers print today: Legate's out-of-memory report and Realm's allocator status,
//! from fixtures written by hand from the producers' format strings (each fixture's header names
//! the source file and version). The expected figures are worked out by hand in the comments.

use std::path::Path;

use rusqlite::Connection;

use crate::common::{data, import, on_db, small, write, write_json};

fn rows(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let conn = Connection::open(db).unwrap();
    let mut statement = conn.prepare(sql).unwrap();
    let count = statement.column_count();
    statement
        .query_map([], |row| {
            (0..count)
                .map(|index| {
                    let value: rusqlite::types::Value = row.get(index)?;
                    Ok(match value {
                        rusqlite::types::Value::Null => String::new(),
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

fn fixture(name: &str) -> std::path::PathBuf {
    data(&format!("sources/{name}"))
}

/// legate-25.log: two ranks interleaved. Node 0 failed 8388608 bytes in SYSTEM_MEM
/// 0x1e00000000000000 of 41943040 bytes; it lists instances ...03 (8388608), ...02 (8388608),
/// ...01 (8388592, listed twice: counted once) and ...00 (8388592), which sum to the 33554400
/// "reserving"; without addresses they lie end to end from 0: ...03 at 0, ...02 at 8388608, ...01
/// at 16777216, ...00 at 25165808. Node 1 failed 4096 bytes in GPU_FB_MEM 0x1e00010000000003 of
/// 16384, holding one instance of 12288 at 0, with no provenance ("unknown provenance").
#[test]
fn a_legate_report_becomes_a_snapshot_of_the_failed_memory() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&fixture("legate-25.log")], 0);
    assert_eq!(
        rows(
            &db,
            "SELECT run, node, seq, time_ns, reason, source FROM snapshots ORDER BY node"
        ),
        [
            [
                "legate-25",
                "0",
                "0",
                "2500000000",
                "oom",
                &format!("{}:6", fixture("legate-25.log").display())
            ],
            [
                "legate-25",
                "1",
                "0",
                "2600000000",
                "oom",
                &format!("{}:7", fixture("legate-25.log").display())
            ],
        ]
    );
    assert_eq!(
        rows(&db, "SELECT s.node, m.handle, m.kind, ms.capacity, ms.used_bytes, ms.allocation_count FROM memory_stats ms
                   JOIN memories m USING (memory_id) JOIN snapshots s USING (snapshot_id) ORDER BY s.node"),
        [
            ["0", "0x1e00000000000000", "SYSTEM_MEM", "41943040", "33554400", "4"],
            ["1", "0x1e00010000000003", "GPU_FB_MEM", "16384", "12288", "1"],
        ]
    );
    assert_eq!(
        rows(
            &db,
            "SELECT a.uid, a.offset, a.size, a.label, coalesce(a.provenance, '') FROM allocations a
                   JOIN snapshots s USING (snapshot_id) WHERE s.node = 0 ORDER BY a.offset"
        ),
        [
            [
                "0x4000000000000003",
                "0",
                "8388608",
                "oom.py:13",
                "oom.py:13"
            ],
            [
                "0x4000000000000002",
                "8388608",
                "8388608",
                "oom.py:7",
                "oom.py:13"
            ],
            [
                "0x4000000000000001",
                "16777216",
                "8388592",
                "oom.py:7",
                "oom.py:10"
            ],
            [
                "0x4000000000000000",
                "25165808",
                "8388592",
                "oom.py:4",
                "oom.py:10"
            ],
        ]
    );
    assert_eq!(
        rows(
            &db,
            "SELECT s.node, f.size, coalesce(f.provenance, ''), f.time_ns FROM failed_requests f
                   JOIN snapshots s USING (snapshot_id) ORDER BY s.node"
        ),
        [
            ["0", "8388608", "oom.py:16", "2500000000"],
            ["1", "4096", "", "2600000000"]
        ]
    );
    let notes = rows(&db, "SELECT note FROM snapshots");
    assert!(
        notes.iter().all(|note| note[0].contains("offsets unknown")),
        "{notes:?}"
    );
}

/// legate-26.log: digit-grouped sizes and addresses. The first report: capacity 4194304,
/// instances at 0x7f0000100000 (1048576) and 0x7f0000280000 (2097152); from the lowest address,
/// offsets 0 and 0x180000 = 1572864, so the holes are [1048576, 1572864) and [3670016, 4194304),
/// 524288 bytes each: 1048576 free, largest hole 524288 < the 1048576 asked: fragmentation. The
/// second report of the node, seq 1, holds only the first instance.
#[test]
fn a_legate_report_with_addresses_places_its_instances() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&fixture("legate-26.log")], 0);
    assert_eq!(
        rows(
            &db,
            "SELECT seq, ms.free_bytes, ms.largest_hole, ms.hole_count FROM memory_stats ms
                   JOIN snapshots USING (snapshot_id) ORDER BY seq"
        ),
        [
            ["0", "1048576", "524288", "2"],
            ["1", "3145728", "3145728", "1"]
        ]
    );
    assert_eq!(
        rows(
            &db,
            "SELECT a.offset, a.size, json_extract(a.attrs, '$.address') FROM allocations a
                   JOIN snapshots s USING (snapshot_id) WHERE s.seq = 0 ORDER BY a.offset"
        ),
        [
            ["0", "1048576", "0x7f0000100000"],
            ["1572864", "2097152", "0x7f0000280000"]
        ]
    );
    let text = crate::common::text_of(&db, &["oom", "--snapshot", "legate-26:0:0"]);
    assert!(text.contains("FRAGMENTATION"), "{text}");
}

/// realm.log: the first block, of memory 0x1e00000000000003 on node 0 (named by the mapper's
/// line after it): capacity 1536, allocated [0, 256) and [512, 1024), listed holes [256, 512) and
/// [1024, 1536); the mapper asked 600 bytes: 768 free, largest hole 512, fragmentation. The
/// second block (older line form), of 0x1e00010000000003 on node 1: capacity 1000, [0, 100)
/// allocated, [100, 1000) free; 950 asked.
#[test]
fn a_realm_allocator_status_becomes_a_snapshot_with_its_free_list() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&fixture("realm.log")], 0);
    assert_eq!(
        rows(&db, "SELECT s.node, s.time_ns, m.handle, ms.capacity, ms.used_bytes, ms.free_bytes, ms.largest_hole, ms.holes_listed
                   FROM memory_stats ms JOIN memories m USING (memory_id) JOIN snapshots s USING (snapshot_id) ORDER BY s.node"),
        [
            ["0", "5000000000", "0x1e00000000000003", "1536", "768", "768", "512", "1"],
            ["1", "6000000000", "0x1e00010000000003", "1000", "100", "900", "900", "1"],
        ]
    );
    assert_eq!(
        rows(&db, "SELECT h.offset, h.size FROM holes h JOIN snapshots s USING (snapshot_id) WHERE s.node = 0 ORDER BY h.offset"),
        [["256", "256"], ["1024", "512"]]
    );
    assert_eq!(
        rows(&db, "SELECT s.node, f.size FROM failed_requests f JOIN snapshots s USING (snapshot_id) ORDER BY s.node"),
        [["0", "600"], ["1", "950"]]
    );
    // Made-up uids are stable: the same file imported again changes nothing.
    let again = import(&db, &[&fixture("realm.log")], 0);
    assert!(
        again.contains("imported 0 dumps") && again.contains("2 unchanged"),
        "{again}"
    );
}

/// What is none of the kinds, or not the kind forced, is refused whole: exit 1, the file named,
/// nothing imported; `--run` names the run.
#[test]
fn inputs_of_no_known_kind_are_refused_and_the_run_can_be_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let garbage = write(
        dir.path(),
        "noise.log",
        b"hello\nthis is no report at all\n",
    );
    let refused = |args: &[&str], path: &Path, words: &str| {
        let output = on_db(&db)
            .arg("import")
            .args(args)
            .arg(path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&path.display().to_string()) && stderr.contains(words),
            "{stderr}"
        );
    };
    refused(
        &[],
        &garbage,
        "not a memstate dump, a Legate out-of-memory report, a Realm allocator status or a PyTorch allocator snapshot",
    );
    refused(
        &["--source", "realm-allocator"],
        &fixture("legate-25.log"),
        "not a Realm allocator status",
    );
    refused(
        &["--source", "legate-oom"],
        &fixture("realm.log"),
        "not a Legate out-of-memory report",
    );
    let dump = write_json(dir.path(), "d.json", &small());
    refused(
        &["--source", "legate-oom"],
        &dump,
        "not a Legate out-of-memory report",
    );
    let truncated = write(
        dir.path(),
        "cut.log",
        &std::fs::read(fixture("realm.log")).unwrap()[..700],
    );
    refused(&[], &truncated, "not a memstate dump");
    refused(
        &["--source", "torch-snapshot"],
        &fixture("realm.log"),
        "not a PyTorch allocator snapshot",
    );
    assert!(!db.exists() || rows(&db, "SELECT count(*) FROM snapshots") == [["0"]]);
    // --run names the run of a log's snapshots; a forced kind that fits reads as auto does.
    on_db(&db)
        .args(["import", "--source", "legate-oom", "--run", "job-42"])
        .arg(fixture("legate-26.log"))
        .assert()
        .success();
    assert_eq!(
        rows(&db, "SELECT DISTINCT run FROM snapshots"),
        [["job-42"]]
    );
}

/// torch-snapshot.pickle (see make_torch_snapshot.py beside it). Final state, the last snapshot
/// (reason request): segment A (2 MiB) holds 1 MiB valid at 0 (train.py:10, the user's frame
/// under torch's own) and 512 KiB pending free at 1.5 MiB, its inactive block [1, 1.5) MiB a
/// listed hole; B (2 MiB) is one listed hole. Replayed backwards: undoing the last free_requested
/// makes A's last block valid again; that is the state before the oom (at 1070 us, 70 us after
/// the first event): 1.5 MiB used in A (free 512 KiB), B empty (free 2 MiB, the device's largest
/// free range), so the 3 MiB request fails on B: exhaustion. With --every 4 the state after the
/// 4th event (30 us) is added: A holds 1 MiB at 0 and, pending free, the block of the 500000-byte
/// request at 1 MiB, not live at the end, so rounded up to 977 * 512 = 500224 bytes; B is not
/// mapped yet. The 8th event is the oom: after it, the same state as before it.
#[test]
fn a_pytorch_snapshot_gives_its_final_state_and_the_states_its_trace_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&fixture("torch-snapshot.pickle")], 0);
    assert_eq!(
        rows(
            &db,
            "SELECT seq, time_ns, reason FROM snapshots ORDER BY seq"
        ),
        [["0", "70000", "oom"], ["1", "90000", "request"]]
    );
    assert_eq!(
        rows(&db, "SELECT s.seq, m.handle, ms.used_bytes, ms.free_bytes, ms.holes_listed FROM memory_stats ms
                   JOIN memories m USING (memory_id) JOIN snapshots s USING (snapshot_id) ORDER BY s.seq, m.handle"),
        [
            ["0", "0x00007f0000000000", "1572864", "524288", "0"],
            ["0", "0x00007f0000200000", "0", "2097152", "0"],
            ["1", "0x00007f0000000000", "1572864", "524288", "1"],
            ["1", "0x00007f0000200000", "0", "2097152", "1"],
        ]
    );
    assert_eq!(
        rows(
            &db,
            "SELECT s.seq, a.offset, a.size, a.state, coalesce(a.provenance, '') FROM allocations a
                   JOIN snapshots s USING (snapshot_id) ORDER BY s.seq, a.offset"
        ),
        [
            ["0", "0", "1048576", "valid", "train.py:10"],
            ["0", "1572864", "524288", "valid", ""],
            ["1", "0", "1048576", "valid", "train.py:10"],
            ["1", "1572864", "524288", "pending_free", ""],
        ]
    );
    assert_eq!(
        rows(&db, "SELECT s.seq, m.handle, f.size FROM failed_requests f JOIN snapshots s USING (snapshot_id)
                   JOIN memories m USING (memory_id)"),
        [["0", "0x00007f0000200000", "3145728"]]
    );
    assert!(crate::common::text_of(&db, &["oom"]).contains("EXHAUSTION"));
    // --every 4: the state after the 4th event first, and after the 8th beside the oom.
    let every = dir.path().join("every.db");
    on_db(&every)
        .args(["import", "--every", "4"])
        .arg(fixture("torch-snapshot.pickle"))
        .assert()
        .success();
    assert_eq!(
        rows(
            &every,
            "SELECT seq, time_ns, reason FROM snapshots ORDER BY seq"
        ),
        [
            ["0", "30000", "periodic"],
            ["1", "70000", "oom"],
            ["2", "70000", "periodic"],
            ["3", "90000", "request"]
        ]
    );
    assert_eq!(
        rows(&every, "SELECT a.offset, a.size, a.state FROM allocations a JOIN snapshots s USING (snapshot_id)
                      WHERE s.seq = 0 ORDER BY a.offset"),
        [["0", "1048576", "valid"], ["1048576", "500224", "pending_free"]]
    );
}

/// A pickle that would run code is refused before anything runs, and a cut one is refused whole.
#[test]
fn a_malicious_or_truncated_pickle_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let marker = dir.path().join("pwned");
    // Protocol 0: GLOBAL os.system, a string, REDUCE: what "unpickling runs code" means.
    let evil = format!("cos\nsystem\n(S'touch {}'\ntR.", marker.display());
    let mut bytes = vec![0x80, 0x02];
    bytes.extend_from_slice(evil.as_bytes());
    let evil = write(dir.path(), "evil.pickle", &bytes);
    let output = on_db(&db).arg("import").arg(&evil).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("evil.pickle") && stderr.contains("GLOBAL"),
        "{stderr}"
    );
    assert!(!marker.exists(), "nothing ran");
    // Protocol 4's STACK_GLOBAL too.
    let stacked = write(
        dir.path(),
        "stacked.pickle",
        &[
            0x80, 0x04, 0x8c, 0x02, b'o', b's', 0x8c, 0x06, b's', b'y', b's', b't', b'e', b'm',
            0x93, b'.',
        ],
    );
    let output = on_db(&db).arg("import").arg(&stacked).output().unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("STACK_GLOBAL"));
    let whole = std::fs::read(fixture("torch-snapshot.pickle")).unwrap();
    let cut = write(dir.path(), "cut.pickle", &whole[..whole.len() / 2]);
    let output = on_db(&db).arg("import").arg(&cut).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cut.pickle") && stderr.contains("truncated"),
        "{stderr}"
    );
    assert!(!db.exists() || rows(&db, "SELECT count(*) FROM snapshots") == [["0"]]);
}

/// The readers of foreign inputs answer any input with dumps or an error, never a panic:
/// each fixture mangled a few hundred ways (bytes changed, lines dropped, doubled or cut, numbers
/// made huge), every result checked only for not panicking, and what they make still validated
/// by the one parser when imported elsewhere.
#[test]
fn the_source_readers_never_panic_on_mangled_inputs() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for name in [
        "legate-25.log",
        "legate-26.log",
        "realm.log",
        "torch-snapshot.pickle",
    ] {
        let original = std::fs::read(fixture(name)).unwrap();
        for round in 0..300 {
            let mut bytes = original.clone();
            match round % 5 {
                0 => {
                    for _ in 0..1 + next() % 8 {
                        let at = (next() as usize) % bytes.len();
                        bytes[at] = next() as u8;
                    }
                }
                1 => bytes.truncate((next() as usize) % bytes.len()),
                2 => {
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    let mut lines: Vec<&str> = text.lines().collect();
                    let at = (next() as usize) % lines.len().max(1);
                    if next() % 2 == 0 && !lines.is_empty() {
                        lines.remove(at);
                    } else if !lines.is_empty() {
                        lines.insert(at, lines[at]);
                    }
                    bytes = lines.join("\n").into_bytes();
                }
                3 => {
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    bytes = text
                        .replacen("1,048,576", "99999999999999999999999", 1)
                        .replacen("8388608", "18446744073709551615", 1)
                        .replacen("last:1536", "last:18446744073709551615", 1)
                        .into_bytes();
                }
                _ => {
                    let at = (next() as usize) % bytes.len();
                    let length = (next() as usize) % 64;
                    let copy: Vec<u8> = bytes[at..(at + length).min(bytes.len())].to_vec();
                    let to = (next() as usize) % bytes.len();
                    bytes.splice(to..to, copy);
                }
            }
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let outcome = std::panic::catch_unwind(|| {
                let _ = memstate::source::legate::read(&text, name);
                let _ = memstate::source::realm::read(&text, name);
                let _ = memstate::source::torch::read(&bytes, name, Some(1 + round as u64 % 3));
                let _ = memstate::source::pickle::read(&bytes);
            });
            assert!(outcome.is_ok(), "{name}, round {round}: a reader panicked");
        }
    }
}
