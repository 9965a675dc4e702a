//! `growth` and `long-lived` are answered in Rust (`query::native`) as well as by their SQL
//! files: on the same databases both give the same rows, cell for cell and in the same order.

use std::path::Path;

use memstate::present::Cell;
use memstate::query::{canned, collect, native};
use rusqlite::{Connection, OpenFlags};

use crate::common::{import, simulated_db};

/// The rows of `name` from Rust (None when it leaves the question to SQL) and from its SQL file.
fn both(db: &Path, name: &str, run: &str, top: &str) -> (Option<Vec<Vec<Cell>>>, Vec<Vec<Cell>>) {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let query = canned::find(name).unwrap();
    let bound = vec![
        ("run".to_string(), run.to_string()),
        ("top".to_string(), top.to_string()),
    ];
    let rows = native::answer(&conn, name, &bound).unwrap();
    (rows, collect(&conn, query.sql, &bound).unwrap().rows)
}

/// Both ways agree on `run` for every limit; returns how many rows all of them gave.
fn agree(db: &Path, run: &str) -> usize {
    let mut all = 0;
    for name in ["growth", "long-lived"] {
        for top in ["-1", "0", "1", "7", "20"] {
            let (rows, sql) = both(db, name, run, top);
            let rows = rows.unwrap_or_else(|| panic!("{name} {run} top {top}: left to SQL"));
            assert_eq!(rows, sql, "{name}, run {run}, top {top}");
            if top == "-1" {
                all += rows.len();
            }
        }
    }
    all
}

fn config(seed: u64, run: &str) -> memstate::sim::Config {
    memstate::sim::Config {
        seed,
        run_id: run.to_string(),
        steps: 900,
        ..memstate::sim::Config::default()
    }
}

#[test]
fn simulated_runs_give_the_same_rows_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    for seed in [1, 7] {
        let case = dir.path().join(format!("seed{seed}"));
        std::fs::create_dir_all(&case).unwrap();
        let db = simulated_db(&case, &config(seed, "sim"));
        let rows = agree(&db, "sim");
        assert!(rows > 20, "seed {seed}: only {rows} rows compared");
        // A run that is not there: no rows either way.
        let (rows, sql) = both(&db, "growth", "nope", "20");
        assert_eq!(rows, Some(Vec::new()));
        assert!(sql.is_empty());
    }
}

#[test]
fn runs_imported_together_and_out_of_order_give_the_same_rows_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let forward = dir.path().join("forward");
    let backward = dir.path().join("backward.db");
    std::fs::create_dir_all(&forward).unwrap();
    // Two runs in one database; the second imported file by file from its last dump back, so
    // that its spans are planned around the snapshots after them.
    let db = simulated_db(&forward, &config(3, "one"));
    let other = dir.path().join("other");
    memstate::sim::simulate(&config(4, "two"), &other, &mut |_| {}).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&other)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files.reverse();
    for file in &files {
        import(&db, &[file], 0);
        import(&backward, &[file], 0);
    }
    assert!(agree(&db, "one") > 20);
    assert!(agree(&db, "two") > 20);
    // The run imported backwards alone answers as it does beside the other run.
    for name in ["growth", "long-lived"] {
        let (together, _) = both(&db, name, "two", "-1");
        let (alone, _) = both(&backward, name, "two", "-1");
        assert_eq!(together, alone, "{name}");
    }
}

/// One uid under two provenances in two snapshots: two rows of long-lived, equal in snapshots,
/// lifetime, node and uid, ordered by their first snapshot (the example dump, then the same
/// dump one snapshot later with allocation 0x65's provenance changed).
#[test]
fn rows_tied_down_to_the_uid_come_in_the_order_of_their_first_snapshot() {
    use crate::common::{set, small, write_json};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let first = write_json(dir.path(), "a.json", &small());
    let later = set(small(), "/snapshot/seq", serde_json::json!(4));
    let later = set(
        later,
        "/snapshot/time_ns",
        serde_json::json!(2_000_000_000i64),
    );
    let later = set(
        later,
        "/memories/0/allocations/0/provenance",
        serde_json::json!(3),
    );
    let later = write_json(dir.path(), "b.json", &later);
    import(&db, &[&first, &later], 0);
    let (rows, sql) = both(&db, "long-lived", "example-run", "-1");
    assert_eq!(rows.as_ref(), Some(&sql));
    let tied: Vec<(Cell, Cell)> = sql
        .iter()
        .filter(|row| row[1] == Cell::Text("0x0000000000000065".into()))
        .map(|row| (row[3].clone(), row[5].clone()))
        .collect();
    assert_eq!(
        tied,
        [
            (Cell::Text("train.py:12".into()), Cell::Integer(3)),
            (Cell::Text("train.py:57".into()), Cell::Integer(4)),
        ]
    );
}
