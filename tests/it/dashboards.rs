//! Feeding dashboards: Unix time and series labels in the views (worked out by hand), `import
//! --follow` against a writer process, the Grafana dashboard's SQL through the sqlite3 program,
//! Datasette's metadata through a real Datasette, and the pandas example.

use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Value};

use crate::common::{import, write_json};

fn dump(run: &str, node: i64, seq: i64, time_ns: i64, wall_time: Option<&str>) -> Value {
    let mut snapshot = json!({"seq": seq, "time_ns": time_ns, "reason": "periodic"});
    if let Some(wall_time) = wall_time {
        snapshot["wall_time"] = json!(wall_time);
    }
    json!({"format": "memstate-dump", "version": 1, "run": {"id": run, "node": node}, "snapshot": snapshot,
           "memories": [{"id": "0x1e00000000000003", "kind": "GPU_FB_MEM", "capacity": 4096,
                         "allocations": [{"uid": 1 + seq as u64 + 10 * node as u64, "kind": "instance", "state": "valid", "offset": 0, "size": 1024}]}]})
}

#[test]
fn views_give_unix_time_from_wall_clocks_and_a_label_per_series() {
    let dir = tempfile::tempdir().unwrap();
    // 2026-12-01T10:00:02Z is 1796112000 (08:00, `date -u -d ... +%s`) + 7202 = 1796119202.
    // node 0: seq 1 has a wall time 2 s into its clock, so its clock starts at 1796119200 and
    //   seq 0 (1 s) is 1796119201.
    // node 1: no wall time at all: the run's earliest wall-timed dump by time_ns is node 2's
    //   seq 0 (time_ns 0, 11:00:00.25+01:00 = 1796119200.25), so 5 s is 1796119205.25.
    // node 2: seq 1 (3 s) has no wall time: its own node's clock (seq 0) gives 1796119203.25.
    // node 3: a leap second, 2016-12-31T23:59:60Z, reads as 2017-01-01T00:00:00Z = 1483228800.
    // Another run with no wall time at all: NULL.
    let dumps = [
        dump("clocks", 0, 0, 1_000_000_000, None),
        dump("clocks", 0, 1, 2_000_000_000, Some("2026-12-01T10:00:02Z")),
        dump("clocks", 1, 0, 5_000_000_000, None),
        dump("clocks", 2, 0, 0, Some("2026-12-01T11:00:00.250+01:00")),
        dump("clocks", 2, 1, 3_000_000_000, None),
        dump("clocks", 3, 0, 7_000_000_000, Some("2016-12-31T23:59:60Z")),
        dump("noclock", 0, 0, 1_000_000_000, None),
    ];
    let paths: Vec<_> = dumps.iter().enumerate().map(|(index, value)| write_json(dir.path(), &format!("{index}.json"), value)).collect();
    let db = dir.path().join("t.db");
    // Imported newest first: the clocks do not depend on the order.
    let mut reversed: Vec<&Path> = paths.iter().map(|path| path.as_path()).collect();
    reversed.reverse();
    import(&db, &reversed, 0);
    let conn = Connection::open(&db).unwrap();
    let time_of = |run: &str, node: i64, seq: i64| -> Option<f64> {
        conn.query_row("SELECT time_unix FROM snapshots WHERE run = ?1 AND node = ?2 AND seq = ?3", rusqlite::params![run, node, seq], |row| row.get(0)).unwrap()
    };
    let close = |found: Option<f64>, expected: f64| found.is_some_and(|found| (found - expected).abs() < 1e-3);
    assert!(close(time_of("clocks", 0, 0), 1_796_119_201.0), "{:?}", time_of("clocks", 0, 0));
    assert!(close(time_of("clocks", 0, 1), 1_796_119_202.0), "{:?}", time_of("clocks", 0, 1));
    assert!(close(time_of("clocks", 1, 0), 1_796_119_205.25), "{:?}", time_of("clocks", 1, 0));
    assert!(close(time_of("clocks", 2, 0), 1_796_119_200.25), "{:?}", time_of("clocks", 2, 0));
    assert!(close(time_of("clocks", 2, 1), 1_796_119_203.25), "{:?}", time_of("clocks", 2, 1));
    assert!(close(time_of("clocks", 3, 0), 1_483_228_800.0), "{:?}", time_of("clocks", 3, 0));
    assert_eq!(time_of("noclock", 0, 0), None);
    // memory_trend: the same times, and the series label, as its last two columns.
    let mut statement = conn.prepare("SELECT * FROM memory_trend WHERE run = 'clocks' AND node = 2 ORDER BY seq").unwrap();
    let names: Vec<String> = statement.column_names().map(|name| name.to_string()).collect();
    assert_eq!(&names[names.len() - 2..], ["time_unix", "series"]);
    let rows: Vec<(f64, String)> = statement.query_map([], |row| Ok((row.get("time_unix")?, row.get("series")?))).unwrap().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    assert!((rows[1].0 - 1_796_119_203.25).abs() < 1e-3);
    assert_eq!(rows[0].1, "n2 GPU_FB_MEM 0x1e00000000000003");
    let series: String = conn.query_row("SELECT series FROM snapshots WHERE run = 'clocks' AND node = 3", [], |row| row.get(0)).unwrap();
    assert_eq!(series, "n3");
}
