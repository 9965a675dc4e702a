//! Export to a Parquet dataset: one database and its shards export the same dataset; exporting
//! shards one by one, or in parallel, gives it too; the spans and figures of the files agree with
//! the database's views; and what cannot be exported is refused before anything is written. The
//! portable queries run on the dataset are tested in `parquet_runner`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use memstate::export::parquet_file::{read, Value};
use rusqlite::Connection;
use serde_json::Value as Json;

use crate::common::{import, on_db};

pub(crate) const RUN: &str = "job/7:a";

/// A three-node run (its id holds '/' and ':') whose node 1 gives no wall time, imported into
/// one database and into shards. Returns (one.db, the shards).
pub(crate) fn run_in_one_and_in_shards(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
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

pub(crate) fn export(databases: &[&Path], out: &Path) {
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

/// Every partition of a dataset, by its folder inside it (`snapshots/run=R/node=N`): its file's
/// columns and rows. A node partition's file is the one its manifest names, and nothing else
/// lies in the partition folders: no other version, no staged or temporary file.
type Dataset = BTreeMap<String, (Vec<String>, Vec<Vec<Value>>)>;

pub(crate) fn dataset(root: &Path) -> Dataset {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let inside = path.strip_prefix(root).unwrap().display().to_string();
            if inside == "_memstate_nodes" || inside == "_memstate_exports" {
                continue;
            } else if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "parquet") {
                let partition = path.parent().unwrap().strip_prefix(root).unwrap();
                let key = partition.display().to_string();
                if partition.components().count() == 3 {
                    let (run, node) = partition_of(&inside);
                    let manifest = manifest(root, &run, node);
                    let table = key.split('/').next().unwrap();
                    assert_eq!(manifest["files"][table], inside, "a file no manifest names");
                } else {
                    assert_eq!(name, "part-0.parquet", "{inside}");
                }
                assert!(found.insert(key, read(&path).unwrap()).is_none());
            } else {
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

/// A node partition's manifest.
pub(crate) fn manifest(root: &Path, run: &str, node: i64) -> Json {
    let path = memstate::export::publish::manifest_path(root, run, node);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
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
    assert!(expected.contains_key("allocation_spans/run=job%2F7%3Aa/node=2"));
    assert_eq!(without_import_times(dataset(&from_shards)), expected);

    // Node 1 has no wall time of its own: it takes the run's earliest clock, in whichever
    // database of the call it is; exported alone, its shard has none to take.
    let snapshots = &expected["snapshots/run=job%2F7%3Aa/node=1"];
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
    let node1 = alone.get_mut("snapshots/run=job%2F7%3Aa/node=1").unwrap();
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

/// (run, node, seq, memory handle): one memory at one snapshot.
type Key = (String, i64, i64, String);

/// The dataset's allocation and hole spans expanded into the snapshots each covers: per memory
/// and snapshot, the allocations' (count, bytes) and the holes' (count, bytes, largest).
#[allow(clippy::type_complexity)]
fn expanded_spans(data: &Dataset) -> (BTreeMap<Key, (i64, i64)>, BTreeMap<Key, (i64, i64, i64)>) {
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
    // Expand every span into the snapshots it covers.
    let expand = |table: &str, mut add: Box<dyn FnMut(Key, i64) + '_>| {
        for (path, (columns, rows)) in data {
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

    (allocations, holes)
}

#[test]
fn spans_and_figures_of_the_dataset_agree_with_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let (one, _) = run_in_one_and_in_shards(dir.path());
    let out = dir.path().join("data");
    export(&[&one], &out);
    let data = dataset(&out);

    let (allocations, holes) = expanded_spans(&data);

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

/// Issue 27, item 8: a run id of `__HIVE_DEFAULT_PARTITION__` came back NULL from DuckDB (Hive's
/// readers take that partition value for NULL). The export refuses it by name (exit 2), saying
/// how to rename the run, and writes no partition of it.
#[test]
fn a_run_named_as_hives_null_partition_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut dump = crate::common::small();
    dump["run"]["id"] = serde_json::json!("__HIVE_DEFAULT_PARTITION__");
    let db = dir.path().join("t.db");
    import(
        &db,
        &[&crate::common::write_json(dir.path(), "d.json", &dump)],
        0,
    );
    let out = dir.path().join("dataset");
    let output = Command::new(env!("CARGO_BIN_EXE_memstate"))
        .args(["export", "-q", "--out"])
        .arg(&out)
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("__HIVE_DEFAULT_PARTITION__") && stderr.contains("run.id"),
        "{stderr}"
    );
    let written: Vec<_> = walk(&out);
    assert!(
        written.iter().all(|path| !path.contains("run=__HIVE")),
        "{written:?}"
    );
}

fn walk(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            found.push(path.display().to_string());
            if path.is_dir() {
                found.extend(walk(&path));
            }
        }
    }
    found
}
