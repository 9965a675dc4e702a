//! Issue 46, item 9: one rule for `latest` where one snapshot is meant (the README's "Snapshot
//! selectors"), and every implementation of it (`memstate report` in Rust, Datasette's SQL, the
//! Parquet runner in Python) tried against the same table of cases. The golden run has node 0
//! (seq 0-2, memories 0x1e00000000000003 and 0x1e00000000000000) and node 1 (seq 0, memory
//! 0x1e00010000000003), node 1's dump imported last; a second database holds node 0 alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{data, import, on_db, python_with};

/// One case: the query, its `snapshot_id`, its `memory_id`, and the snapshot the rule names
/// (`None`: none, with several nodes and no memory to name one).
struct Case {
    query: &'static str,
    snapshot: &'static str,
    memory: Option<&'static str>,
    names: Option<&'static str>,
}

const TWO_NODES: &[Case] = &[
    // A memory of node 0 names node 0, whose latest is seq 2.
    Case {
        query: "largest-holes",
        snapshot: "latest",
        memory: Some("0x1e00000000000003"),
        names: Some("golden:0:2"),
    },
    // A memory of node 1 names node 1 (seq 0), though node 0 has later seqs.
    Case {
        query: "largest-holes",
        snapshot: "latest",
        memory: Some("0x1e00010000000003"),
        names: Some("golden:1:0"),
    },
    // No memory, two nodes: `latest` names none (before, Datasette took the node imported last).
    Case {
        query: "usage-by-kind",
        snapshot: "latest",
        memory: None,
        names: None,
    },
    // RUN:NODE:SEQ names itself, whatever the memory.
    Case {
        query: "largest-holes",
        snapshot: "golden:0:1",
        memory: Some("0x1e00000000000003"),
        names: Some("golden:0:1"),
    },
];

const ONE_NODE: &[Case] = &[
    // No memory, one node: its latest.
    Case {
        query: "usage-by-kind",
        snapshot: "latest",
        memory: None,
        names: Some("golden:0:2"),
    },
];

fn databases(dir: &Path) -> (PathBuf, PathBuf) {
    let two = dir.join("two.db");
    import(&two, &[&data("run")], 0);
    let one = dir.join("one.db");
    let node0: Vec<PathBuf> = ["n0-s0.json", "n0-s1.json", "n0-s2.json"]
        .iter()
        .map(|name| data(&format!("run/{name}")))
        .collect();
    import(
        &one,
        &node0.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        0,
    );
    (two, one)
}

fn params(case: &Case, snapshot: &str) -> Vec<String> {
    let mut params = vec![format!("snapshot_id={snapshot}")];
    if let Some(memory) = case.memory {
        params.push(format!("memory_id={memory}"));
    }
    params
}

/// `memstate report` as csv, or `None` when refused (exit 2).
fn by_report(db: &Path, case: &Case, snapshot: &str) -> Option<String> {
    let mut command = on_db(db);
    command.args(["report", case.query, "--format", "csv"]);
    for param in params(case, snapshot) {
        command.args(["-p", &param]);
    }
    answered(command.output().unwrap())
}

/// What a command printed as csv, or `None` when it refused the selector (exit 2, saying why).
fn answered(output: std::process::Output) -> Option<String> {
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => Some(String::from_utf8_lossy(&output.stdout).into_owned()),
        Some(2) => {
            assert!(stderr.contains("latest"), "{stderr}");
            None
        }
        other => panic!("exited {other:?}: {stderr}"),
    }
}

/// Datasette's SQL for the query run as Datasette runs it, its rows as text.
fn by_datasette(db: &Path, case: &Case, snapshot: &str) -> Vec<Vec<String>> {
    let query = memstate::query::canned::find(case.query).unwrap();
    let sql = memstate::query::datasette::datasette_sql(&query);
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut statement = conn.prepare(&sql).unwrap();
    let mut values: Vec<(String, String)> = vec![(":snapshot_id".into(), snapshot.into())];
    if let Some(memory) = case.memory {
        values.push((":memory_id".into(), memory.into()));
    }
    for index in 1..=statement.parameter_count() {
        let name = statement.parameter_name(index).unwrap().to_string();
        if !values.iter().any(|(given, _)| *given == name) {
            values.push((name, String::new()));
        }
    }
    let bound: Vec<(&str, &dyn rusqlite::ToSql)> = values
        .iter()
        .map(|(name, value)| (name.as_str(), value as &dyn rusqlite::ToSql))
        .collect();
    let width = statement.column_count();
    let rows = statement
        .query_map(bound.as_slice(), |row| {
            (0..width)
                .map(|index| {
                    let value: rusqlite::types::Value = row.get(index)?;
                    Ok(format!("{value:?}"))
                })
                .collect()
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

/// The Parquet runner on DuckDB as csv, or `None` when refused (exit 2).
fn by_runner(data_dir: &Path, case: &Case, snapshot: &str) -> Option<String> {
    let mut command = Command::new("python3");
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/parquet-query"))
        .arg("--data")
        .arg(data_dir)
        .arg(case.query)
        .args(["--format", "csv"]);
    for param in params(case, snapshot) {
        command.args(["-p", &param]);
    }
    answered(command.output().unwrap())
}

#[test]
fn latest_names_the_same_snapshot_in_report_and_in_datasette() {
    let dir = tempfile::tempdir().unwrap();
    let (two, one) = databases(dir.path());
    for (db, cases) in [(&two, TWO_NODES), (&one, ONE_NODE)] {
        for case in cases {
            let context = format!("{} {:?} {:?}", case.query, case.snapshot, case.memory);
            match case.names {
                Some(names) => {
                    let explicit = by_report(db, case, names).expect("explicit snapshot");
                    assert!(explicit.lines().count() > 1, "{context}: rows to compare");
                    assert_eq!(
                        by_report(db, case, case.snapshot),
                        Some(explicit),
                        "{context}"
                    );
                    let served = by_datasette(db, case, names);
                    assert!(!served.is_empty(), "{context}");
                    assert_eq!(by_datasette(db, case, case.snapshot), served, "{context}");
                }
                None => {
                    assert_eq!(by_report(db, case, case.snapshot), None, "{context}");
                    assert!(
                        by_datasette(db, case, case.snapshot).is_empty(),
                        "{context}"
                    );
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(has_duckdb),
    ignore = "DuckDB is not installed for python3 (.ci/run installs it: pip install duckdb)"
)]
fn latest_names_the_same_snapshot_in_the_parquet_runner() {
    if !python_with("duckdb", "to run the portable queries on DuckDB") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (two, one) = databases(dir.path());
    for (db, cases) in [(&two, TWO_NODES), (&one, ONE_NODE)] {
        let out = dir.path().join(format!(
            "data-{}",
            db.file_stem().unwrap().to_string_lossy()
        ));
        crate::export::export(&[db], &out);
        for case in cases {
            let context = format!("{} {:?} {:?}", case.query, case.snapshot, case.memory);
            match case.names {
                Some(names) => {
                    let explicit = by_runner(&out, case, names).expect("explicit snapshot");
                    assert!(explicit.lines().count() > 1, "{context}: rows to compare");
                    assert_eq!(
                        by_runner(&out, case, case.snapshot),
                        Some(explicit),
                        "{context}"
                    );
                }
                None => assert_eq!(by_runner(&out, case, case.snapshot), None, "{context}"),
            }
        }
    }
}
