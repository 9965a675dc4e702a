//! Reading what producers print today, beside the log forms of `logs.rs`: PyTorch's allocator
//! snapshots, refusals of inputs of no known kind, and readers that never panic. Fixtures are
//! described in tests/data/sources/README.md; expected figures are worked out by hand. Pickles
//! written here, for inputs no fixture has, are in `pickles`.

use std::path::Path;

use rusqlite::Connection;

use crate::common::{data, import, on_db, small, write, write_json};

pub(crate) fn rows(db: &Path, sql: &str) -> Vec<Vec<String>> {
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

pub(crate) fn fixture(name: &str) -> std::path::PathBuf {
    data(&format!("sources/{name}"))
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
    refused(&[], &garbage, "not an input memstate reads");
    refused(
        &["--source", "realm-allocator"],
        &fixture("legate-24.11.log"),
        "a Realm allocator status",
    );
    refused(
        &["--source", "legate-oom"],
        &fixture("realm.log"),
        "a Legate out-of-memory report",
    );
    let dump = write_json(dir.path(), "d.json", &small());
    refused(
        &["--source", "legate-oom"],
        &dump,
        "a Legate out-of-memory report",
    );
    // Cut inside the first status block, before any line that makes a snapshot.
    let truncated = write(
        dir.path(),
        "cut.log",
        &std::fs::read(fixture("realm.log")).unwrap()[..700],
    );
    refused(&[], &truncated, "a memstate dump");
    refused(
        &["--source", "torch-snapshot"],
        &fixture("realm.log"),
        "a PyTorch allocator snapshot",
    );
    assert!(!db.exists() || rows(&db, "SELECT count(*) FROM snapshots") == [["0"]]);
    // --run names the run of a log's snapshots; a forced kind that fits reads as auto does.
    on_db(&db)
        .args(["import", "--source", "legate-oom", "--run", "job-42"])
        .arg(fixture("legate-26.01.log"))
        .assert()
        .success();
    assert_eq!(
        rows(&db, "SELECT DISTINCT run FROM snapshots"),
        [["job-42"]]
    );
}

/// torch-snapshot.pickle (see make_torch_snapshot.py beside it). Device 0 is one memory, `cuda:0`
/// (id 0), its capacity unknown (the pickle does not say the device's size), its two segments
/// (both `large`, stream 0) placed by address: A at 0, B at 2 MiB. Final state, the last snapshot
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
        rows(&db, "SELECT s.seq, m.handle, m.name, coalesce(ms.capacity, 'unknown'), ms.used_bytes, ms.free_bytes,
                          ms.hole_count, ms.largest_hole, ms.holes_listed FROM memory_stats ms
                   JOIN memories m USING (memory_id) JOIN snapshots s USING (snapshot_id) ORDER BY s.seq, m.handle"),
        [
            ["0", "0x0000000000000000", "cuda:0", "unknown", "1572864", "2621440", "2", "2097152", "1"],
            ["1", "0x0000000000000000", "cuda:0", "unknown", "1572864", "2621440", "2", "2097152", "1"],
        ]
    );
    assert_eq!(
        rows(&db, "SELECT s.seq, g.offset, g.size, g.address, g.pool, g.stream, g.expandable, g.allocated_bytes
                   FROM segments g JOIN snapshots s USING (snapshot_id) ORDER BY s.seq, g.offset"),
        [
            ["0", "0", "2097152", "0x00007f0000000000", "large", "0", "0", "1572864"],
            ["0", "2097152", "2097152", "0x00007f0000200000", "large", "0", "0", "0"],
            ["1", "0", "2097152", "0x00007f0000000000", "large", "0", "0", "1572864"],
            ["1", "2097152", "2097152", "0x00007f0000200000", "large", "0", "0", "0"],
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
        [["0", "0x0000000000000000", "3145728"]]
    );
    // The device's story (device_free 0): 512 KiB + 2 MiB free in the cache, 0 outside, less
    // than 3 MiB: exhaustion; B holds no block, so 2 MiB would go back on emptying the cache.
    let story = crate::common::json_of(&db, &["oom"]);
    assert_eq!(story[0]["verdict"], "exhaustion", "{story}");
    assert_eq!(
        story[0]["cache"],
        serde_json::json!({"device": "cuda:0", "segments": 2, "reserved": 4194304,
            "cache_free": 2621440, "largest_block": 2097152, "empty_bytes": 2097152, "device_free": 0})
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
    // B is not mapped yet: the device reserves A alone, and the hole after the pending block
    // runs to A's end (2 MiB - 1 MiB - 500224 bytes = 548352).
    assert_eq!(
        rows(
            &every,
            "SELECT (SELECT count(*) FROM segments g WHERE g.snapshot_id = s.snapshot_id),
                             ms.used_bytes, ms.free_bytes, ms.largest_hole
                      FROM memory_stats ms JOIN snapshots s USING (snapshot_id) WHERE s.seq = 0"
        ),
        [["1", "1548800", "548352", "548352"]]
    );
}

/// torch-2.0.pickle (see make_torch_2_0.py beside it): PyTorch 2.0's form, blocks without
/// `address` (placed one after another, as MemoryViz places them), provenance from the first
/// `history` entry's frames, a trace without `time_us` and an `oom` entry with `device_free` and no
/// `addr` (torch/csrc/cuda/Module.cpp, v2.0.0, `THCPModule_memorySnapshot`). By hand: two memories,
/// cuda:0 (id 0) with S1 at 0 and S2 at 20 MiB, and cuda:1 (id 1) with its one segment. S1 holds
/// 8 MiB at 0 (train.py:20) and 8 MiB at 12 MiB (train.py:21); S2 10 MiB at 20 + 6 = 26 MiB
/// (train.py:31); cuda:1 nothing. The oom is the trace's last event, so the state before it is the
/// final one; it lands on cuda:0.
/// The story is the device's: cuda:0 reserves 20 + 20 = 40 MiB, 4 + 6 + 4 = 14 MiB free inside,
/// largest block 6 MiB, 2 MiB free outside; 14 MiB >= 12 MiB > 6 MiB: fragmentation, and the
/// advice is expandable segments. No device-0 segment is empty, so emptying the cache is not
/// advised. Device 1's 40 MiB free block is another device's: counted, it would read "fits".
#[test]
fn a_pytorch_2_0_snapshot_is_read_and_its_oom_told_from_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&fixture("torch-2.0.pickle")], 0);
    assert_eq!(
        rows(&db, "SELECT seq, reason FROM snapshots ORDER BY seq"),
        [["0", "oom"], ["1", "request"]]
    );
    const MIB: u64 = 1 << 20;
    let expected: Vec<Vec<String>> = [
        (0u64, 0, 8 * MIB, "train.py:20"),
        (0, 12 * MIB, 8 * MIB, "train.py:21"),
        (0, 26 * MIB, 10 * MIB, "train.py:31"),
    ]
    .iter()
    .map(|(handle, offset, size, provenance)| {
        vec![
            format!("0x{handle:016x}"),
            offset.to_string(),
            size.to_string(),
            provenance.to_string(),
        ]
    })
    .collect();
    assert_eq!(
        rows(
            &db,
            "SELECT m.handle, a.offset, a.size, a.provenance FROM allocations a JOIN memories m USING (memory_id)
             JOIN snapshots s USING (snapshot_id) WHERE s.seq = 1 ORDER BY m.handle, a.offset"
        ),
        expected
    );
    // Free inside the segments: S1 4 MiB, S2 6 + 4 MiB; cuda:1 its 40 MiB.
    assert_eq!(
        rows(&db, "SELECT m.name, ms.used_bytes, ms.free_bytes, ms.hole_count, ms.largest_hole, ms.capacity IS NULL
                   FROM memory_stats ms JOIN memories m USING (memory_id) JOIN snapshots s USING (snapshot_id)
                   WHERE s.seq = 1 ORDER BY m.name"),
        [
            ["cuda:0", (26 * MIB).to_string().as_str(), (14 * MIB).to_string().as_str(), "3", (6 * MIB).to_string().as_str(), "1"],
            ["cuda:1", "0", (40 * MIB).to_string().as_str(), "1", (40 * MIB).to_string().as_str(), "1"],
        ]
    );
    assert_eq!(
        rows(&db, "SELECT m.handle, m.name, f.size, f.device_free FROM failed_requests f JOIN memories m USING (memory_id)"),
        [[
            "0x0000000000000000".to_string(),
            "cuda:0".to_string(),
            (12 * MIB).to_string(),
            (2 * MIB).to_string()
        ]]
    );
    let story = crate::common::json_of(&db, &["oom"]);
    let story = &story[0];
    assert_eq!(story["verdict"], "fragmentation", "{story}");
    assert_eq!(
        story["cache"],
        serde_json::json!({
            "device": "cuda:0",
            "segments": 2,
            "reserved": 40 * MIB,
            "cache_free": 14 * MIB,
            "largest_block": 6 * MIB,
            "empty_bytes": 0,
            "device_free": 2 * MIB,
        })
    );
    let advice = story["advice"].as_str().unwrap();
    assert!(advice.contains("expandable_segments:True"), "{advice}");
    assert!(!advice.contains("empty_cache"), "{advice}");
    let text = crate::common::text_of(&db, &["oom"]);
    assert!(
        text.contains(
            "cuda:0: 40 MiB reserved in 2 segments; 14 MiB free inside, largest free block 6 MiB"
        ) && text.contains("2 MiB outside the cache"),
        "{text}"
    );
}

/// torch-segments.pickle: `torch.cuda.memory_snapshot()` pickled, a bare list of segments, read as
/// `_memory_viz.py`'s `_read` reads it (`{"segments": data, "traces": []}`): one snapshot, one
/// 4 MiB segment with 1 MiB valid at 0 (train.py:40) and its 3 MiB inactive block a listed hole,
/// in the memory of device 0, whose capacity the list does not say.
#[test]
fn a_pickled_bare_list_of_segments_is_one_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&fixture("torch-segments.pickle")], 0);
    assert_eq!(
        rows(&db, "SELECT m.name, coalesce(ms.capacity, 'unknown'), ms.used_bytes, ms.free_bytes, ms.holes_listed, a.offset, a.size, a.provenance
                   FROM memory_stats ms JOIN memories m USING (memory_id) JOIN allocations a USING (snapshot_id, memory_id)"),
        [["cuda:0", "unknown", "1048576", "3145728", "1", "0", "1048576", "train.py:40"]]
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
        "legate-23.11.log",
        "legate-24.11.log",
        "legate-26.01.log",
        "legate-pasted.log",
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
                use memstate::import::source::{legate::Legate, read_log_as, realm::Realm};
                let _ = read_log_as(&Legate, &mut text.as_bytes(), name);
                let _ = read_log_as(&Realm, &mut text.as_bytes(), name);
                let _ = memstate::import::source::torch::read(
                    &bytes,
                    name,
                    Some(1 + round as u64 % 3),
                    memstate::import::input::ROW_FLOOR,
                    &mut |_| Ok(()),
                );
                let _ = memstate::import::source::pickle::read(&bytes);
            });
            assert!(outcome.is_ok(), "{name}, round {round}: a reader panicked");
        }
    }
}
