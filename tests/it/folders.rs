//! Issue 46, items 7 and 10: every file by its content. A folder of pickles and logs, kept as
//! users keep them (`memory_snapshot.json` is a pickle: people call `_dump_snapshot("x.json")`),
//! imports like the same files named one by one; a file in it that no source reads is named once
//! as skipped; a folder that yields nothing says so with exit 1.

use std::path::Path;

use crate::common::{on_db, scalar, write};
use crate::sources::fixture;

/// (status, stdout, stderr) of `memstate --db DB ARGS... PATHS...`.
fn run(db: &Path, args: &[&str], paths: &[&Path]) -> (Option<i32>, String, String) {
    let output = on_db(db).args(args).args(paths).output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The snapshots a database holds, as `source|reason|allocations`, in a stable order with the
/// folder's path cut off, so that a folder's import compares with the files named one by one.
fn snapshots(db: &Path, cut: &Path) -> Vec<String> {
    let cut = format!("{}/", cut.display());
    crate::sources::rows(
        db,
        "SELECT s.source, s.reason, (SELECT count(*) FROM allocations a WHERE a.snapshot_id = s.snapshot_id)
         FROM snapshots s ORDER BY s.source, s.seq",
    )
    .into_iter()
    .map(|row| row.join("|").replace(&cut, ""))
    .collect()
}

#[test]
fn a_folder_of_snapshots_and_logs_imports_like_its_files_named_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("mem_snapshots");
    let deeper = folder.join("rank1");
    std::fs::create_dir_all(&deeper).unwrap();
    let copy = |from: &str, to: &Path| {
        std::fs::copy(fixture(from), to).unwrap();
        to.to_path_buf()
    };
    // As users keep them: a pickle under a .json name, one under .pickle, a Legate log, a
    // Realm log without an extension; and beside them a script and notes.
    let files = [
        copy(
            "torch-snapshot.pickle",
            &folder.join("memory_snapshot.json"),
        ),
        copy("torch-2.0.pickle", &deeper.join("snapshot_rank1.pickle")),
        copy("legate-26.01.log", &folder.join("legate_0.log")),
        copy("realm.log", &deeper.join("stderr")),
    ];
    write(&folder, "train.py", b"import torch\nprint('hello')\n");
    write(&deeper, "NOTES.md", b"# what I tried\n\nsmaller batch\n");

    // Each file named alone, into its own database: all four import.
    let by_name = dir.path().join("by-name.db");
    for file in &files {
        let (status, _, stderr) = run(&by_name, &["import", "--quiet"], &[file]);
        assert_eq!(status, Some(0), "{}: {stderr}", file.display());
    }

    let by_folder = dir.path().join("by-folder.db");
    let (status, stdout, stderr) = run(&by_folder, &["import", "--quiet"], &[&folder]);
    assert_eq!(status, Some(0), "{stderr}");
    assert_eq!(snapshots(&by_folder, &folder), snapshots(&by_name, &folder));
    assert!(!snapshots(&by_folder, &folder).is_empty());
    // The two files no source reads are each named once as skipped, and counted.
    assert_eq!(stderr.matches("skipped: ").count(), 2, "{stderr}");
    for name in ["train.py", "NOTES.md"] {
        assert_eq!(stderr.matches(name).count(), 1, "{name}: {stderr}");
    }
    assert!(!stderr.contains("error:"), "{stderr}");
    assert!(
        stdout.contains("2 files skipped") && stdout.contains("from 4 inputs"),
        "{stdout}"
    );

    // validate reads the folder the same way.
    let (status, stdout, stderr) = run(&by_folder, &["validate"], &[&folder]);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stdout.contains("from 4 inputs"), "{stdout}");
}

#[test]
fn a_pickle_named_as_a_dump_is_read_as_a_pickle() {
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join("memory_snapshot.json");
    std::fs::copy(fixture("torch-snapshot.pickle"), &named).unwrap();
    let plain = dir.path().join("memory_snapshot.pickle");
    std::fs::copy(fixture("torch-snapshot.pickle"), &plain).unwrap();
    let db_named = dir.path().join("named.db");
    let db_plain = dir.path().join("plain.db");
    let (status, _, stderr) = run(&db_named, &["import", "--quiet"], &[&named]);
    assert_eq!(status, Some(0), "{stderr}");
    let (status, _, stderr) = run(&db_plain, &["import", "--quiet"], &[&plain]);
    assert_eq!(status, Some(0), "{stderr}");
    let count = |db: &Path| -> (i64, i64) {
        (
            scalar(db, "SELECT count(*) FROM snapshots"),
            scalar(db, "SELECT count(*) FROM allocations"),
        )
    };
    assert_eq!(count(&db_named), count(&db_plain));
    assert!(count(&db_named).0 > 0);
}

#[test]
fn a_folder_that_yields_nothing_says_so_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    write(&notes, "README.txt", b"nothing to see\n");
    write(&notes, "blob.bin", &[0u8, 1, 2, 3, 0, 0, 7]);
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let db = dir.path().join("t.db");
    for (folder, words) in [
        (&notes, "no file in it is an input memstate reads"),
        (&empty, "the folder holds no file"),
    ] {
        let (status, _, stderr) = run(&db, &["import", "--quiet"], &[folder]);
        assert_eq!(status, Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("error: {}: {words}", folder.display())),
            "{stderr}"
        );
        let (status, _, stderr) = run(&db, &["validate"], &[folder]);
        assert_eq!(status, Some(1), "validate: {stderr}");
    }
    // The files of the first were each named as skipped, the binary one without being read
    // through as a log.
    let (_, _, stderr) = run(&db, &["import", "--quiet"], &[&notes]);
    assert!(
        stderr.contains("skipped: ")
            && stderr.contains("blob.bin")
            && stderr.contains("binary data"),
        "{stderr}"
    );
}
