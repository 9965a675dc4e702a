//! Export to a Parquet dataset: one database and its shards export the same dataset; exporting
//! shards one by one, or in parallel, gives it too; the spans and figures of the files agree with
//! the database's views; what cannot be exported is refused before anything is written; and the
//! portable queries give on DuckDB and Spark what `memstate report` gives.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use memstate::export::parquet_file::{read, Value};
use rusqlite::Connection;
use serde_json::Value as Json;

use crate::common::{import, on_db, python_with, succeeds};

const RUN: &str = "job/7:a";

/// A three-node run (its id holds '/' and ':') whose node 1 gives no wall time, imported into
/// one database and into shards. Returns (one.db, the shards).
fn run_in_one_and_in_shards(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let dumps = dir.join("dumps");
    memstate::sim::simulate(
        &memstate::sim::Config {
            run_id: RUN.to_string(),
            nodes: 3,
            steps: 400,
            dump_every: 8,
            continue_after_oom: true,
            ..Default::default()
        },
        &dumps,
        &mut |_| {},
    )
    .unwrap();
    for entry in std::fs::read_dir(dumps.join("node1")).unwrap() {
        let path = entry.unwrap().path();
        let mut dump: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        dump["snapshot"]
            .as_object_mut()
            .unwrap()
            .remove("wall_time");
        std::fs::write(&path, serde_json::to_vec(&dump).unwrap()).unwrap();
    }
    let one = dir.join("one.db");
    import(&one, &[&dumps], 0);
    let shards = dir.join("shards");
    let output = on_db(dir.join("unused.db"))
        .args(["import", "-q", "--jobs", "2", "--shard-dir"])
        .arg(&shards)
        .arg(&dumps)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&shards)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "db"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3);
    (one, files)
}

fn export(databases: &[&Path], out: &Path) {
    let output = on_db(databases[0])
        .args(["export", "-q", "--format", "parquet", "--out"])
        .arg(out)
        .args(databases)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "export {databases:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every Parquet file under a dataset, by path inside it: its columns and rows.
type Dataset = BTreeMap<String, (Vec<String>, Vec<Vec<Value>>)>;

fn dataset(root: &Path) -> Dataset {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "parquet") {
                let key = path.strip_prefix(root).unwrap().display().to_string();
                found.insert(key, read(&path).unwrap());
            } else {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                assert!(
                    name.starts_with("_memstate_"),
                    "a file that is not the dataset's: {}",
                    path.display()
                );
            }
        }
    }
    found
}

/// The dataset with the one column that differs between two imports of the same dumps (when
/// they were imported) blanked.
fn without_import_times(mut data: Dataset) -> Dataset {
    for (path, (columns, rows)) in data.iter_mut() {
        if path.starts_with("snapshots/") {
            let index = column(columns, "imported_at");
            for row in rows.iter_mut() {
                row[index] = Value::Null;
            }
        }
    }
    data
}

fn column(columns: &[String], name: &str) -> usize {
    columns
        .iter()
        .position(|column| column == name)
        .unwrap_or_else(|| panic!("no column {name} in {columns:?}"))
}

/// Hive's unescaping of a partition folder's value.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 3 <= bytes.len() {
            if let Ok(byte) = u8::from_str_radix(&text[index + 1..index + 3], 16) {
                out.push(byte);
                index += 3;
                continue;
            }
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8(out).unwrap()
}

/// (run, node) of a node partition's file path.
fn partition_of(path: &str) -> (String, i64) {
    let parts: Vec<&str> = path.split('/').collect();
    let run = unescape(parts[1].strip_prefix("run=").unwrap());
    let node = parts[2].strip_prefix("node=").unwrap().parse().unwrap();
    (run, node)
}

#[test]
fn one_database_and_its_shards_export_the_same_dataset_together_apart_or_in_parallel() {
    let dir = tempfile::tempdir().unwrap();
    let (one, shards) = run_in_one_and_in_shards(dir.path());
    let shard_refs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();

    let from_one = dir.path().join("from-one");
    export(&[&one], &from_one);
    let from_shards = dir.path().join("from-shards");
    export(&shard_refs, &from_shards);
    let expected = without_import_times(dataset(&from_one));
    assert_eq!(expected.len(), 3 * 6 + 2, "{:?}", expected.keys());
    assert!(expected.contains_key("allocation_spans/run=job%2F7%3Aa/node=2/part-0.parquet"));
    assert_eq!(without_import_times(dataset(&from_shards)), expected);

    // Node 1 has no wall time of its own: it takes the run's earliest clock, in whichever
    // database of the call it is; exported alone, its shard has none to take.
    let snapshots = &expected["snapshots/run=job%2F7%3Aa/node=1/part-0.parquet"];
    let time_unix = column(&snapshots.0, "time_unix");
    assert!(snapshots
        .1
        .iter()
        .all(|row| matches!(row[time_unix], Value::Real(_))));
    let from_view: f64 = Connection::open(&one)
        .unwrap()
        .query_row(
            "SELECT time_unix FROM snapshots WHERE node = 1 ORDER BY seq LIMIT 1",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(snapshots.1[0][time_unix], Value::Real(from_view));

    // One by one into one folder: the node partitions of each, and the run's objects merged.
    let one_by_one = dir.path().join("one-by-one");
    for shard in &shards {
        export(&[shard], &one_by_one);
    }
    let mut alone = expected.clone();
    let node1 = alone
        .get_mut("snapshots/run=job%2F7%3Aa/node=1/part-0.parquet")
        .unwrap();
    for row in node1.1.iter_mut() {
        row[time_unix] = Value::Null;
    }
    assert_eq!(without_import_times(dataset(&one_by_one)), alone);

    // In parallel: three exports at once into one folder, racing for the run's tables.
    let parallel = dir.path().join("parallel");
    let children: Vec<_> = shards
        .iter()
        .map(|shard| {
            Command::new(env!("CARGO_BIN_EXE_memstate"))
                .args(["export", "-q", "--out"])
                .arg(&parallel)
                .arg(shard)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(without_import_times(dataset(&parallel)), alone);

    // Exporting again replaces the partitions: the same dataset, no stray files.
    export(&shard_refs, &from_shards);
    assert_eq!(without_import_times(dataset(&from_shards)), expected);
}

#[test]
fn spans_and_figures_of_the_dataset_agree_with_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let (one, _) = run_in_one_and_in_shards(dir.path());
    let out = dir.path().join("data");
    export(&[&one], &out);
    let data = dataset(&out);

    // The seqs of each node, from the dataset's snapshots.
    let mut seqs: BTreeMap<(String, i64), Vec<i64>> = BTreeMap::new();
    for (path, (columns, rows)) in data.range("snapshots/".to_string()..) {
        if !path.starts_with("snapshots/") {
            break;
        }
        let seq = column(columns, "seq");
        for row in rows {
            let Value::Int(value) = row[seq] else {
                panic!()
            };
            seqs.entry(partition_of(path)).or_default().push(value);
        }
    }
    type Key = (String, i64, i64, String);
    // Expand every span into the snapshots it covers.
    let expand = |table: &str, mut add: Box<dyn FnMut(Key, i64) + '_>| {
        for (path, (columns, rows)) in &data {
            if !path.starts_with(&format!("{table}/")) {
                continue;
            }
            let (run, node) = partition_of(path);
            let [memory, first, last, size] =
                ["memory", "first_seq", "last_seq", "size"].map(|name| column(columns, name));
            for row in rows {
                let (Value::Text(handle), Value::Int(first), Value::Int(last), Value::Int(size)) =
                    (&row[memory], &row[first], &row[last], &row[size])
                else {
                    panic!("{row:?}")
                };
                for seq in &seqs[&(run.clone(), node)] {
                    if first <= seq && seq <= last {
                        add((run.clone(), node, *seq, handle.clone()), *size);
                    }
                }
            }
        }
    };
    let mut allocations: BTreeMap<Key, (i64, i64)> = BTreeMap::new();
    expand(
        "allocation_spans",
        Box::new(|key, size| {
            let entry = allocations.entry(key).or_default();
            entry.0 += 1;
            entry.1 += size;
        }),
    );
    let mut holes: BTreeMap<Key, (i64, i64, i64)> = BTreeMap::new();
    expand(
        "hole_spans",
        Box::new(|key, size| {
            let entry = holes.entry(key).or_default();
            entry.0 += 1;
            entry.1 += size;
            entry.2 = entry.2.max(size);
        }),
    );

    // The allocations view, counted and summed per snapshot and memory.
    let conn = Connection::open(&one).unwrap();
    let mut statement = conn
        .prepare(
            "SELECT s.run, s.node, s.seq, m.handle, count(*), sum(a.size)
             FROM allocations a JOIN snapshots s USING (snapshot_id) JOIN memories m USING (memory_id)
             GROUP BY s.run, s.node, s.seq, m.handle",
        )
        .unwrap();
    let from_view: BTreeMap<Key, (i64, i64)> = statement
        .query_map([], |row| {
            Ok((
                (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?),
                (row.get(4)?, row.get(5)?),
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(from_view.len() > 50, "{}", from_view.len());
    assert_eq!(allocations, from_view);

    // memory_stats of the dataset: its counts agree with the expanded spans, and its largest
    // hole with the database's.
    let mut stats_rows = 0;
    for (path, (columns, rows)) in &data {
        if !path.starts_with("memory_stats/") {
            continue;
        }
        let (run, node) = partition_of(path);
        let [seq, memory, count, free, hole_count, largest] = [
            "seq",
            "memory",
            "allocation_count",
            "free_bytes",
            "hole_count",
            "largest_hole",
        ]
        .map(|name| column(columns, name));
        for row in rows {
            let (Value::Int(seq), Value::Text(handle)) = (&row[seq], &row[memory]) else {
                panic!()
            };
            let key = (run.clone(), node, *seq, handle.clone());
            let spans = allocations.get(&key).map_or(0, |(count, _)| *count);
            assert_eq!(row[count], Value::Int(spans), "{key:?}");
            let (number, bytes, widest) = holes.get(&key).copied().unwrap_or_default();
            assert_eq!(row[free], Value::Int(bytes), "{key:?}");
            assert_eq!(row[hole_count], Value::Int(number), "{key:?}");
            assert_eq!(row[largest], Value::Int(widest), "{key:?}");
            let in_database: i64 = conn
                .query_row(
                    "SELECT ms.largest_hole FROM memory_stats ms JOIN snapshots s USING (snapshot_id)
                     JOIN memories m USING (memory_id) WHERE s.run = ?1 AND s.node = ?2 AND s.seq = ?3 AND m.handle = ?4",
                    rusqlite::params![key.0, key.1, key.2, key.3],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(in_database, widest, "{key:?}");
            stats_rows += 1;
        }
    }
    let in_database: i64 = conn
        .query_row("SELECT count(*) FROM memory_stats", [], |row| row.get(0))
        .unwrap();
    assert_eq!(stats_rows, in_database);
}

#[test]
fn what_cannot_be_exported_is_refused_by_name_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (one, shards) = run_in_one_and_in_shards(dir.path());
    let refused = |databases: &[&Path], out: &Path, says: &str| {
        let output = on_db(databases[0])
            .args(["export", "-q", "--out"])
            .arg(out)
            .args(databases)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{databases:?}: {stderr}");
        assert!(stderr.contains(says), "{databases:?}: {stderr}");
        stderr.into_owned()
    };
    let out = dir.path().join("never");

    let text = dir.path().join("notes.db");
    std::fs::write(&text, "not a database\n").unwrap();
    let said = refused(&[&one, &text], &out, "notes.db");
    assert!(said.starts_with("error: "), "{said}");

    let foreign = dir.path().join("foreign.db");
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    refused(&[&foreign], &out, "foreign.db");

    let newer = dir.path().join("newer.db");
    std::fs::copy(&one, &newer).unwrap();
    Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 999;")
        .unwrap();
    refused(&[&newer], &out, "newer.db");

    let locked = dir.path().join("locked.db");
    std::fs::copy(&one, &locked).unwrap();
    let holder = Connection::open(&locked).unwrap();
    holder
        .execute_batch("PRAGMA journal_mode = DELETE; BEGIN EXCLUSIVE; DELETE FROM string WHERE 0;")
        .unwrap();
    refused(&[&locked], &out, "locked.db");
    drop(holder);

    let shard0 = shards[0].as_path();
    refused(&[&one, shard0], &out, "node 0 is in both");

    // A run id too long for one folder name (the Hive layout keeps it whole): refused before
    // anything is written. 250 characters fit: `run=` and 250 make 254 bytes; 252 do not.
    let mut dump: Json =
        serde_json::from_slice(&std::fs::read(crate::common::data("small.json")).unwrap()).unwrap();
    for (length, fits) in [(250, true), (252, false)] {
        dump["run"]["id"] = Json::from("r".repeat(length));
        let folder = dir.path().join(format!("long-{length}"));
        std::fs::create_dir(&folder).unwrap();
        crate::common::write_json(&folder, "dump.json", &dump);
        let db = folder.join("t.db");
        import(&db, &[&folder.join("dump.json")], 0);
        if fits {
            export(&[&db], &folder.join("out"));
        } else {
            refused(&[&db], &out, &format!("run id of {length} bytes"));
        }
    }
    assert!(!out.exists(), "a refused export created its folder");

    // A folder that holds other things is not taken over without --force.
    let busy = dir.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("thesis.txt"), "mine\n").unwrap();
    refused(&[shard0], &busy, "not a memstate dataset");
    assert_eq!(std::fs::read_dir(&busy).unwrap().count(), 1);
    let output = on_db(shard0)
        .args(["export", "-q", "--force", "--out"])
        .arg(&busy)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(busy.join("thesis.txt")).unwrap(),
        "mine\n"
    );
    // The marker makes the folder a dataset: a copy of it is one too.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(
        busy.join("_memstate_dataset.json"),
        copy.join("_memstate_dataset.json"),
    )
    .unwrap();
    std::fs::write(copy.join("other.txt"), "x").unwrap();
    export(&[shard0], &copy);
}

/// The canned and the portable form of each query: the same parameters and columns.
#[test]
fn every_canned_query_has_a_portable_form_with_its_parameters_and_columns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("queries");
    let doc = |path: &Path, tag: &str| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter_map(|line| line.strip_prefix(&format!("-- @{tag} ")))
            .map(|rest| rest.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let mut count = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "sql") {
            continue;
        }
        let portable = root.join("portable").join(path.file_name().unwrap());
        assert!(portable.exists(), "no portable form of {}", path.display());
        for tag in ["param", "column"] {
            assert_eq!(
                doc(&path, tag),
                doc(&portable, tag),
                "{} @{tag}",
                path.display()
            );
        }
        count += 1;
    }
    assert_eq!(
        count,
        std::fs::read_dir(root.join("portable")).unwrap().count()
    );
}

/// The queries to compare, each with the parameters that name its snapshot and memory the way
/// `report` and the runner both take them.
fn cases(db: &Path) -> Vec<(String, Vec<String>)> {
    let conn = Connection::open(db).unwrap();
    let (node, seq, memory): (i64, i64, String) = conn
        .query_row(
            "SELECT s.node, s.seq, m.handle FROM failed_requests f JOIN snapshots s USING (snapshot_id)
             JOIN memories m USING (memory_id) ORDER BY s.snapshot_id LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    let snapshot = format!("snapshot_id={RUN}:{node}:{seq}");
    let early = format!("snapshot_id={RUN}:2:8");
    let memory = format!("memory_id={memory}");
    let mut cases = Vec::new();
    for name in ["churn", "fragmentation-trend", "nodes"] {
        cases.push((name.to_string(), vec![]));
    }
    for name in ["growth", "long-lived"] {
        cases.push((name.to_string(), vec!["top=1000".to_string()]));
    }
    for name in [
        "live-allocations",
        "usage-by-kind",
        "usage-by-object",
        "usage-by-provenance",
        "usage-by-state",
    ] {
        for which in [&snapshot, &early] {
            let mut params = vec![which.clone()];
            if name == "live-allocations" {
                params.push("top=1000".to_string());
            }
            cases.push((name.to_string(), params));
        }
    }
    for name in ["hole-histogram", "largest-holes"] {
        let mut params = vec![snapshot.clone(), memory.clone()];
        if name == "largest-holes" {
            params.push("top=1000".to_string());
        }
        cases.push((name.to_string(), params));
    }
    cases
}

fn report_csv(db: &Path, name: &str, params: &[String]) -> String {
    let mut command = on_db(db);
    command.args(["report", name, "--format", "csv"]);
    for param in params {
        command.args(["-p", param]);
    }
    let output = command.output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{name} {params:?}: {output:?}"
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `report_csv` of a case that must give rows (an empty answer compares nothing).
fn report_rows(db: &Path, name: &str, params: &[String]) -> String {
    let text = report_csv(db, name, params);
    assert!(
        text.lines().count() > 1,
        "{name} {params:?}: no rows to compare"
    );
    text
}

/// The texts a query returns, one per row.
fn query_texts(conn: &Connection, sql: &str) -> Vec<String> {
    conn.prepare(sql)
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Each case run by the Parquet runner on DuckDB over `data` prints what `report` prints on `db`;
/// how many of them gave rows.
fn duckdb_equals_report(db: &Path, data: &Path, cases: &[(String, Vec<String>)]) -> usize {
    let mut with_rows = 0;
    for (name, params) in cases {
        let output = succeeds(
            parquet_query(data, name, params).args(["--engine", "duckdb", "--format", "csv"]),
        );
        let expected = report_csv(db, name, params);
        assert_eq!(
            String::from_utf8(output.stdout).unwrap(),
            expected,
            "{name} {params:?}"
        );
        with_rows += usize::from(expected.lines().count() > 1);
    }
    with_rows
}

/// `scripts/parquet-query --data DATA NAME -p PARAM...` (the engine its default, DuckDB, unless
/// the caller adds `--engine`).
fn parquet_query(data: &Path, name: &str, params: &[String]) -> Command {
    let mut command = Command::new("python3");
    command
        .arg(runner().join("parquet-query"))
        .arg("--data")
        .arg(data)
        .arg(name);
    for param in params {
        command.args(["-p", param]);
    }
    command
}

fn runner() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts")
}

#[test]
fn every_portable_query_on_duckdb_equals_report() {
    if !python_with("duckdb", "to run the portable queries on DuckDB") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (one, _) = run_in_one_and_in_shards(dir.path());
    let out = dir.path().join("data");
    export(&[&one], &out);
    let cases = cases(&one);
    assert_eq!(
        cases
            .iter()
            .map(|(name, _)| name)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        12
    );
    assert_eq!(
        duckdb_equals_report(&one, &out, &cases),
        cases.len(),
        "every case of the simulated run gives rows"
    );
    // What producers print today (tests/data/sources), several runs in one database: each
    // run's queries, and the per-snapshot ones at each of its snapshots. legate-26.log reports
    // instance 0x4000000000000010 twice, from train.py:2 at seq 0 and with no provenance at seq
    // 1: two rows of long-lived that tie on every key up to uid, ordered by first_seq.
    let producers = dir.path().join("producers.db");
    let sources = crate::common::data("sources");
    let inputs: Vec<PathBuf> = [
        "legate-25.log",
        "legate-26.log",
        "realm.log",
        "torch-snapshot.pickle",
    ]
    .iter()
    .map(|name| sources.join(name))
    .collect();
    import(
        &producers,
        &inputs.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        0,
    );
    let out = dir.path().join("producers");
    export(&[&producers], &out);
    let conn = Connection::open(&producers).unwrap();
    let mut cases = Vec::new();
    for run in query_texts(&conn, "SELECT run FROM runs ORDER BY run") {
        for name in [
            "churn",
            "fragmentation-trend",
            "nodes",
            "growth",
            "long-lived",
        ] {
            let mut params = vec![format!("run={run}")];
            if matches!(name, "growth" | "long-lived") {
                params.push("top=1000".to_string());
            }
            cases.push((name.to_string(), params));
        }
    }
    for snapshot in query_texts(
        &conn,
        "SELECT run || ':' || node || ':' || seq FROM snapshots ORDER BY snapshot_id",
    ) {
        for name in [
            "usage-by-kind",
            "usage-by-object",
            "usage-by-provenance",
            "usage-by-state",
        ] {
            cases.push((name.to_string(), vec![format!("snapshot_id={snapshot}")]));
        }
        cases.push((
            "live-allocations".to_string(),
            vec![format!("snapshot_id={snapshot}"), "top=1000".to_string()],
        ));
    }
    let long_lived = report_csv(
        &producers,
        "long-lived",
        &["run=legate-26".to_string(), "top=1000".to_string()],
    );
    let twice: Vec<&str> = long_lived
        .lines()
        .filter(|line| line.starts_with("0,0x4000000000000010,"))
        .collect();
    assert_eq!(twice.len(), 2, "{long_lived}");
    assert!(
        twice[0].contains(",train.py:2,") && twice[0].ends_with(",0,0,1,0"),
        "{long_lived}"
    );
    let with_rows = duckdb_equals_report(&producers, &out, &cases);
    assert!(
        with_rows * 2 > cases.len(),
        "{with_rows} of {} cases gave rows",
        cases.len()
    );
    // What the dataset does not hold is refused, as report refuses it, not answered with no rows.
    for params in [
        vec!["run=nope".to_string()],
        vec![format!("snapshot_id={RUN}:0:99999")],
    ] {
        let name = if params[0].starts_with("run") {
            "churn"
        } else {
            "usage-by-kind"
        };
        let output = parquet_query(&out, name, &params).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{params:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains("no such"),
            "{stderr}"
        );
    }
    // A dataset exported from a database without dumps is a dataset, but has nothing to ask.
    let empty = dir.path().join("empty.db");
    drop(memstate::db::open(&empty).unwrap());
    let nothing = dir.path().join("nothing");
    export(&[&empty], &nothing);
    let output = parquet_query(&nothing, "churn", &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("holds no snapshots yet"), "{stderr}");
}

#[test]
fn churn_growth_and_snapshot_queries_on_spark_equal_report() {
    if !python_with("pyspark", "to run the portable queries on Spark")
        || !crate::common::have("java", "to run Spark in local mode")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (one, shards) = run_in_one_and_in_shards(dir.path());
    // The shards' dataset: Spark reads what a cluster's export writes.
    let out = dir.path().join("data");
    let shard_refs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    export(&shard_refs, &out);
    let chosen: Vec<(String, Vec<String>)> = cases(&one)
        .into_iter()
        .filter(|(name, _)| {
            ["churn", "growth", "usage-by-kind", "largest-holes"].contains(&name.as_str())
        })
        .take(4)
        .collect();
    // One Spark session for all of them (a JVM start each would take a minute): the runner's
    // main() called in turn, each writing its own file.
    let mut driver = String::from("import contextlib, sys\n");
    driver.push_str(&format!(
        "sys.path.insert(0, {:?})\n",
        runner().display().to_string()
    ));
    driver.push_str("import parquet_query\n");
    for (index, (name, params)) in chosen.iter().enumerate() {
        let mut argv = vec![
            "--engine".to_string(),
            "spark".to_string(),
            "--format".to_string(),
            "csv".to_string(),
            "--data".to_string(),
            out.display().to_string(),
            name.clone(),
        ];
        for param in params {
            argv.push("-p".to_string());
            argv.push(param.clone());
        }
        let target = dir.path().join(format!("spark-{index}.csv"));
        driver.push_str(&format!(
            "with open({:?}, 'w') as f, contextlib.redirect_stdout(f):\n    code = parquet_query.main({})\nif code:\n    sys.exit(code)\n",
            target.display().to_string(),
            serde_json::to_string(&argv).unwrap()
        ));
    }
    let script = dir.path().join("driver.py");
    std::fs::write(&script, driver).unwrap();
    succeeds(Command::new("python3").arg(&script));
    for (index, (name, params)) in chosen.iter().enumerate() {
        let got = std::fs::read_to_string(dir.path().join(format!("spark-{index}.csv"))).unwrap();
        assert_eq!(
            got,
            report_rows(&one, name, params),
            "spark {name} {params:?}"
        );
    }
}

/// The runner prints reals as memstate does (Rust's shortest round-trip digits, never an
/// exponent), splits a snapshot from the right and leaves quoted text alone: checked against
/// Rust's own formatting of the same numbers.
#[test]
fn the_runner_writes_numbers_as_memstate_and_reads_parameters_as_report() {
    if !crate::common::have("python3", "to run scripts/parquet_query.py") {
        return;
    }
    let reals = [
        1e-7,
        1e21,
        0.1 + 0.2,
        123456789.125,
        5e-324,
        f64::MAX,
        -0.0,
        1.0,
        0.5169805233924434,
        2.5e15,
        1.5e16,
    ];
    let listed: Vec<String> = reals.iter().map(|real| format!("{real:e}")).collect();
    let program = format!(
        "import sys\nsys.path.insert(0, {:?})\nimport parquet_query as q\n\
         for text in {:?}:\n    print(q.exact(float(text)))\n\
         print(q.snapshot_parts(None, 'job/7:a:3:41'))\n\
         print(q.substitute(\"SELECT ':run', :run -- :top\\n\", {{'run': \"'x'\"}}), end='')\n",
        runner().display().to_string(),
        listed
    );
    let output = succeeds(Command::new("python3").args(["-c", &program]));
    let printed = String::from_utf8(output.stdout).unwrap();
    let mut expected: Vec<String> = reals.iter().map(|real| real.to_string()).collect();
    expected.push("('job/7:a', '3', '41')".to_string());
    expected.push("SELECT ':run', 'x' -- :top".to_string());
    assert_eq!(printed.lines().collect::<Vec<_>>(), expected);
}
