//! An export is whole or absent, node by node: killed at each of its renames, out of disk at a
//! write, or beside another export of the same (run, node), every node partition of the dataset
//! is one export's six tables (byte for byte a clean export's rows), an export that did not
//! finish is visible as such, and the next export leaves nothing behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use memstate::export::parquet_file::{read, Value};

use crate::common::{have, import, python_with};

fn binary() -> PathBuf {
    assert_cmd::cargo::cargo_bin("memstate")
}
use crate::export::{dataset, manifest};

const RUN: &str = "whole";
const NODES: [i64; 2] = [0, 1];
const NODE_TABLES: [&str; 6] = [
    "snapshots",
    "memories",
    "memory_stats",
    "allocation_spans",
    "hole_spans",
    "failed_requests",
];

type Tables = Vec<(Vec<String>, Vec<Vec<Value>>)>;

/// A two-node run of one seed, in its own database.
fn database(dir: &Path, seed: u64, steps: u64) -> PathBuf {
    let dumps = dir.join(format!("dumps{seed}"));
    memstate::sim::simulate(
        &memstate::sim::Config {
            seed,
            run_id: RUN.to_string(),
            nodes: NODES.len(),
            steps,
            dump_every: 10,
            continue_after_oom: true,
            ..Default::default()
        },
        &dumps,
        &mut |_| {},
    )
    .unwrap();
    let db = dir.join(format!("seed{seed}.db"));
    import(&db, &[&dumps], 0);
    db
}

fn export_command(db: &Path, out: &Path) -> Command {
    let mut command = Command::new(binary());
    command
        .arg("--db")
        .arg(db)
        .args(["export", "-q", "--format", "parquet", "--out"])
        .arg(out);
    command
}

/// A node's six tables as its manifest names them now (strays allowed).
fn node_tables(root: &Path, node: i64) -> Tables {
    let manifest = manifest(root, RUN, node);
    NODE_TABLES
        .iter()
        .map(|table| {
            let file = manifest["files"][table].as_str().unwrap().to_string();
            read(&root.join(file)).unwrap()
        })
        .collect()
}

/// The records of exports that are not running (their lock is free).
fn dead_records(root: &Path) -> Vec<PathBuf> {
    use std::os::fd::AsRawFd;
    let Ok(entries) = std::fs::read_dir(root.join("_memstate_exports")) else {
        return Vec::new();
    };
    entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .filter(|path| {
            let file = std::fs::File::open(path).unwrap();
            // SAFETY: flock on a descriptor this test owns.
            unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) == 0 }
        })
        .collect()
}

fn copy_folder(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Each node of `root` is wholly `old`'s or wholly `new`'s; which, per node.
fn whole_nodes(
    root: &Path,
    old: &BTreeMap<i64, Tables>,
    new: &BTreeMap<i64, Tables>,
    when: &str,
) -> Vec<&'static str> {
    NODES
        .iter()
        .map(|node| {
            let held = node_tables(root, *node);
            if held == old[node] {
                "old"
            } else if held == new[node] {
                "new"
            } else {
                panic!("{when}: node {node} holds neither export whole")
            }
        })
        .collect()
}

/// After an export that did not finish, the next export of the same database finishes it: the
/// nodes are the new export's, nothing but the manifests' files lies in the partitions, and no
/// record of a dead export is left.
fn finish_and_check(root: &Path, new_db: &Path, new: &BTreeMap<i64, Tables>, when: &str) {
    let output = export_command(new_db, root).output().unwrap();
    assert!(output.status.success(), "{when}: {output:?}");
    for node in NODES {
        assert_eq!(&node_tables(root, node), &new[&node], "{when}: node {node}");
    }
    // `dataset` fails on any file the manifests do not name.
    let partitions = dataset(root);
    assert!(partitions.contains_key(&format!("snapshots/run={RUN}/node=1")));
    assert!(dead_records(root).is_empty(), "{when}");
    let leftovers: Vec<_> = walk(root)
        .into_iter()
        .filter(|path| path.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{when}: {leftovers:?}");
}

fn walk(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path.display().to_string());
        }
    }
    found
}

fn clean(dir: &Path, db: &Path, name: &str) -> (PathBuf, BTreeMap<i64, Tables>) {
    let out = dir.join(name);
    let output = export_command(db, &out).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let tables = NODES
        .iter()
        .map(|node| (*node, node_tables(&out, *node)))
        .collect();
    (out, tables)
}

#[test]
#[cfg_attr(
    not(has_strace),
    ignore = "strace is not installed (.ci/run installs it)"
)]
fn an_export_killed_at_any_rename_or_out_of_disk_leaves_every_node_whole() {
    if !have("strace", "to kill the export at every rename") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let old_db = database(dir.path(), 1, 300);
    let new_db = database(dir.path(), 2, 400);
    let (old_dataset, old) = clean(dir.path(), &old_db, "old");
    let (_, new) = clean(dir.path(), &new_db, "new");
    assert_ne!(old, new);
    let runner = python_with("duckdb", "to see the runner refuse an unfinished export");

    let mut kills = 0;
    let mut seen_mixed = false;
    let mut refused_by_runner = 0;
    for rename in 1.. {
        let work = dir.path().join(format!("kill{rename}"));
        copy_folder(&old_dataset, &work);
        let mut command = Command::new("strace");
        command.args([
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            &format!("inject=rename,renameat,renameat2:signal=KILL:when={rename}"),
        ]);
        let export = export_command(&new_db, &work);
        command.arg(export.get_program()).args(export.get_args());
        let output = command.output().unwrap();
        let when = format!("killed at rename {rename}");
        let states = whole_nodes(&work, &old, &new, &when);
        if output.status.success() {
            assert_eq!(states, ["new", "new"], "{when}: finished");
            assert!(dead_records(&work).is_empty());
            break;
        }
        kills += 1;
        seen_mixed |= states[0] != states[1];
        // Killed: unless nothing had started (every node the old export's), the export is
        // visible as one that did not finish.
        let dead = dead_records(&work);
        assert!(
            !dead.is_empty() || states == ["old", "old"],
            "{when}: {states:?} and no record says the export did not finish"
        );
        if runner && !dead.is_empty() && refused_by_runner < 3 {
            let output = Command::new("python3")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/parquet-query"))
                .arg("--data")
                .arg(&work)
                .arg("nodes")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{when}: {stderr}");
            assert!(stderr.contains("an export did not finish"), "{stderr}");
            assert!(stderr.contains("run 'whole' node 0"), "{stderr}");
            refused_by_runner += 1;
        }
        finish_and_check(&work, &new_db, &new, &when);
        std::fs::remove_dir_all(&work).unwrap();
        assert!(rename < 200, "the export never finished");
    }
    assert!(kills >= 20, "only {kills} renames were tried");
    assert!(seen_mixed, "no kill fell between the two nodes' switches");

    // A full disk at a few writes: refused with a message, each node whole, finished next time.
    // (The one write that fails may be a line on standard error, which is not the export's
    // work: then the export finishes.)
    let mut full = 0;
    for write in [2, 6, 12, 20, 28] {
        let work = dir.path().join(format!("full{write}"));
        copy_folder(&old_dataset, &work);
        let export = export_command(&new_db, &work);
        let output = Command::new("strace")
            .args([
                "-f",
                "-qq",
                "-o",
                "/dev/null",
                "-e",
                &format!("inject=write,pwrite64:error=ENOSPC:when={write}"),
            ])
            .arg(export.get_program())
            .args(export.get_args())
            .output()
            .unwrap();
        let when = format!("out of disk at write {write}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.success() {
            assert_eq!(whole_nodes(&work, &old, &new, &when), ["new", "new"]);
            assert!(dead_records(&work).is_empty(), "{when}");
            continue;
        }
        full += 1;
        assert_eq!(output.status.code(), Some(2), "{when}: {stderr}");
        assert!(
            stderr.contains("No space left on device"),
            "{when}: {stderr}"
        );
        let states = whole_nodes(&work, &old, &new, &when);
        assert!(
            !dead_records(&work).is_empty() || states == ["old", "old"],
            "{when}"
        );
        finish_and_check(&work, &new_db, &new, &when);
    }
    assert!(full >= 4, "only {full} writes failed the export");
    eprintln!(
        "an export was killed at each of its {kills} renames and ran out of disk at {full} writes: every node was whole, the runner refused {refused_by_runner} unfinished exports"
    );
}

#[test]
fn two_exports_of_one_node_at_once_leave_one_of_them_whole() {
    let dir = tempfile::tempdir().unwrap();
    let first = database(dir.path(), 3, 300);
    let second = database(dir.path(), 4, 300);
    let (_, one) = clean(dir.path(), &first, "one");
    let (_, two) = clean(dir.path(), &second, "two");
    for round in 0..6 {
        let out = dir.path().join(format!("both{round}"));
        let children: Vec<_> = [&first, &second]
            .iter()
            .map(|db| export_command(db, &out).spawn().unwrap())
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success(), "round {round}");
        }
        let when = format!("round {round}");
        whole_nodes(&out, &one, &two, &when);
        dataset(&out);
        assert!(dead_records(&out).is_empty(), "{when}");
    }
}

/// A dataset of layout 1 (one `part-0.parquet` per partition, no manifests), made here from a
/// clean export: exported into again, it becomes layout 2 with nothing of layout 1 left.
#[test]
fn a_layout_1_dataset_is_upgraded_by_the_next_export() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), 5, 200);
    let (out, tables) = clean(dir.path(), &db, "old-layout");
    for node in NODES {
        let manifest = manifest(&out, RUN, node);
        for table in NODE_TABLES {
            let file = out.join(manifest["files"][table].as_str().unwrap());
            std::fs::rename(&file, file.with_file_name("part-0.parquet")).unwrap();
        }
    }
    std::fs::remove_dir_all(out.join("_memstate_nodes")).unwrap();
    std::fs::remove_dir_all(out.join("_memstate_exports")).unwrap();
    let marker = out.join("_memstate_dataset.json");
    let text = std::fs::read_to_string(&marker).unwrap();
    std::fs::write(
        &marker,
        text.replace("\"layout_version\": 2", "\"layout_version\": 1"),
    )
    .unwrap();
    assert!(std::fs::read_to_string(&marker)
        .unwrap()
        .contains("\"layout_version\": 1"));

    let output = export_command(&db, &out).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    for node in NODES {
        assert_eq!(node_tables(&out, node), tables[&node]);
    }
    dataset(&out);
    let marker: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&marker).unwrap()).unwrap();
    assert_eq!(marker["layout_version"], 2);
}
