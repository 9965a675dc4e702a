//! The forecast (issue 31): `memory_forecast` and `memstate forecast` on runs built by hand, the
//! figures worked out here from the layout, not by the code under test.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::{import, on_db, write_json};

const KIB: u64 = 1024;
const CAPACITY: u64 = 2048 * KIB;

/// Dump `i` of a run of one 2 MiB memory. Every dump a new 256 KiB temporary (a new uid) sits
/// at 0; when `growing`, dump i also holds i pinned 64 KiB allocations packed after it, each
/// appearing at its dump, so the largest hole (the tail) is 1792 KiB - 64 KiB x i.
fn dump(i: u64, growing: bool) -> Value {
    let mut allocations = vec![
        json!({"uid": 1000 + i, "kind": "instance", "state": "valid",
                                      "offset": 0, "size": 256 * KIB}),
    ];
    if growing {
        for j in 0..i {
            allocations.push(json!({"uid": 10 + j, "kind": "instance", "state": "valid",
                                    "offset": 256 * KIB + j * 64 * KIB, "size": 64 * KIB}));
        }
    }
    json!({"format": "memstate-dump", "version": 1, "run": {"id": "hand", "node": 0},
        "snapshot": {"seq": i, "time_ns": i * 1_000_000_000, "reason": "periodic"},
        "memories": [{"id": "0x1e00000000000001", "kind": "GPU_FB_MEM", "capacity": CAPACITY,
                      "allocations": allocations}]})
}

/// A run of `dumps` such dumps, imported.
fn run(dir: &Path, dumps: u64, growing: bool) -> PathBuf {
    let files: Vec<PathBuf> = (0..dumps)
        .map(|i| write_json(dir, &format!("dump-{i:02}.json"), &dump(i, growing)))
        .collect();
    let db = dir.join("run.db");
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    import(&db, &paths, 0);
    db
}

fn column(db: &Path, sql: &str) -> Vec<Option<i64>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut statement = conn.prepare(sql).unwrap();
    statement
        .query_map([], |row| row.get::<_, Option<f64>>(0))
        .unwrap()
        .map(|value| value.unwrap().map(|value| value.round() as i64))
        .collect()
}

#[test]
fn a_falling_hole_is_warned_about_at_the_dump_worked_out_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let db = run(dir.path(), 22, true);
    // Hole at dump i: 1792 - 64 i KiB; falling 64 KiB a dump; the largest request 256 KiB (the
    // temporary appearing every dump). Dumps left from dump 2 on (3 dumps for a slope):
    // (1792 - 64 i - 256) / 64 = 24 - i, and at the dump before 25 - i (from dump 3 on). Both at
    // most 5 from dump 20, and never before.
    let seqs = "FROM memory_forecast ORDER BY seq";
    let holes = column(&db, &format!("SELECT largest_hole {seqs}"));
    let expected: Vec<Option<i64>> = (0..22)
        .map(|i| Some(((1792 - 64 * i) * KIB) as i64))
        .collect();
    assert_eq!(holes, expected);
    let trend = column(&db, &format!("SELECT hole_trend {seqs}"));
    assert_eq!(trend[..2], [None, None], "a slope needs 3 dumps");
    assert!(
        trend[2..]
            .iter()
            .all(|slope| *slope == Some(-64 * KIB as i64)),
        "{trend:?}"
    );
    let request = column(&db, &format!("SELECT largest_request {seqs}"));
    assert!(
        request.iter().all(|size| *size == Some(256 * KIB as i64)),
        "{request:?}"
    );
    let left = column(&db, &format!("SELECT dumps_left {seqs}"));
    let expected: Vec<Option<i64>> = (0..22).map(|i| (i >= 2).then_some(24 - i)).collect();
    assert_eq!(left, expected);
    let before = column(&db, &format!("SELECT dumps_left_before {seqs}"));
    let expected: Vec<Option<i64>> = (0..22).map(|i| (i >= 3).then_some(25 - i)).collect();
    assert_eq!(before, expected);
    let warning = column(&db, &format!("SELECT warning {seqs}"));
    let expected: Vec<Option<i64>> = (0..22)
        .map(|i| (i >= 2).then_some(i64::from(i >= 20)))
        .collect();
    assert_eq!(warning, expected);

    // The command: the memory at the node's latest snapshot (dump 21): 3 dumps left, 4 before.
    let output = on_db(&db)
        .args(["forecast", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let warned: Value = serde_json::from_slice(&output.stdout).unwrap();
    let warned = warned.as_array().unwrap();
    assert_eq!(warned.len(), 1, "{warned:?}");
    let row = &warned[0];
    assert_eq!(row["handle"], "0x1e00000000000001");
    assert_eq!(row["node"], 0);
    assert_eq!(row["seq"], 21);
    assert_eq!(row["dumps_left"], 3);
    assert_eq!(row["dumps_left_before"], 4);
    assert_eq!(row["largest_hole"], (1792 - 64 * 21) * KIB);
    assert_eq!(row["largest_request"], 256 * KIB);
    assert_eq!(row["hole_trend"].as_f64(), Some(-65536.0));
    // Within 3 dumps: none (4 were left at the dump before); in words, or json's empty list.
    let none = on_db(&db)
        .args(["forecast", "--within", "3", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&none.stdout).unwrap(),
        json!([])
    );
    let said = on_db(&db)
        .args(["forecast", "--within", "3"])
        .output()
        .unwrap();
    let said = String::from_utf8(said.stdout).unwrap();
    assert!(
        said.contains("No memory's largest hole is forecast"),
        "{said}"
    );
    let table = on_db(&db).args(["forecast"]).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table.contains("memstate map --html map.html --snapshot 22 --memory 0x1e00000000000001"),
        "{table}"
    );
}

#[test]
fn a_flat_run_is_not_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let db = run(dir.path(), 12, false);
    // The hole stays 1792 KiB: a slope of 0, never a warning.
    let trend = column(&db, "SELECT hole_trend FROM memory_forecast ORDER BY seq");
    assert!(
        trend[2..].iter().all(|slope| *slope == Some(0)),
        "{trend:?}"
    );
    let warning = column(&db, "SELECT warning FROM memory_forecast ORDER BY seq");
    assert!(
        warning[2..].iter().all(|warned| *warned == Some(0)),
        "{warning:?}"
    );
    assert!(column(&db, "SELECT dumps_left FROM memory_forecast")
        .iter()
        .all(Option::is_none));
    let output = on_db(&db)
        .args(["forecast", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&output.stdout).unwrap(),
        json!([])
    );
    // A run named that is not there is refused.
    let missing = on_db(&db)
        .args(["forecast", "--run", "nope"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
}

/// A question about one snapshot or one memory searches: no step scans the figures or the spans
/// (only the grouped rows of that snapshot or memory, and the run table, are read whole).
#[test]
fn one_snapshot_or_memory_is_a_search() {
    let dir = tempfile::tempdir().unwrap();
    let db = run(dir.path(), 4, true);
    let conn = rusqlite::Connection::open(&db).unwrap();
    for filter in [
        "snapshot_id = 3",
        "memory_id = 1",
        "snapshot_id = 3 AND memory_id = 1",
    ] {
        let sql = format!("EXPLAIN QUERY PLAN SELECT * FROM memory_forecast WHERE {filter}");
        let mut statement = conn.prepare(&sql).unwrap();
        let steps: Vec<String> = statement
            .query_map([], |row| row.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let scans: Vec<&String> = steps
            .iter()
            .filter(|step| {
                step.starts_with("SCAN ")
                    && !step.starts_with("SCAN g")
                    && !step.starts_with("SCAN r ")
            })
            .collect();
        assert!(scans.is_empty(), "{filter}: {steps:?}");
        assert!(
            steps.iter().any(|step| step
                .contains("SEARCH a USING PRIMARY KEY (memory_id=? AND level=? AND first_seq=?)")),
            "{filter}: {steps:?}"
        );
    }
}

/// `import --follow` warns at the dump worked out by hand (20: 4 dumps left, 5 at the one before),
/// not before, and once while the hole keeps falling.
#[test]
fn the_follower_warns_once_at_the_dump_worked_out_by_hand() {
    use crate::follow::{follow_on, wait_for, Follower};
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let db = dir.path().join("t.db");
    let follower = Follower::watch(follow_on(
        &db,
        &[],
        &["import", "--follow", "--quiet", "--interval", "50ms"],
        &docs,
    ));
    for i in 0..22u64 {
        write_json(&docs, &format!("dump-{i:02}.json"), &dump(i, true));
        wait_for(&db, i as i64 + 1, "each dump in turn");
        if i == 20 {
            follower.wait_for_stderr("the forecast warning", |printed| {
                printed.contains("warning:")
            });
        }
    }
    let (code, _, stderr) = follower.stop();
    assert_eq!(code, Some(0), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    let warning = warnings[0];
    for said in [
        "hand node 0 seq 20, GPU_FB_MEM 0x1e00000000000001",
        "the largest hole (512 KiB, falling 64 KiB a dump)",
        "the largest recent request (256 KiB) within 4 dumps",
        "map --html map.html --snapshot hand:0:20 --memory 0x1e00000000000001",
    ] {
        assert!(warning.contains(said), "{said}: {warning}");
    }
}
