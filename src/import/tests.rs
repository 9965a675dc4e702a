//! A failure inside the parser (a bug) while importing: it stops `import` and `import --follow`
//! alike with an error naming the record, never taken for the end of the input, and the records
//! before it are kept. The failure is injected through [`super::PANIC_ON`], which only test builds
//! have; each test names an input under its own temporary folder, so tests running beside it are
//! not touched.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{import, IngestOptions, PANIC_ON};
use crate::db;
use crate::error::Error;
use crate::import::follow::{follow, FollowOptions};

/// The example dump of the tests with another seq, written as `name` under `folder`.
fn write_dump(folder: &Path, name: &str, seq: i64) {
    let text = include_str!("../../tests/data/small.json");
    let mut dump: serde_json::Value = serde_json::from_str(text).unwrap();
    dump["snapshot"]["seq"] = serde_json::json!(seq);
    std::fs::write(folder.join(name), dump.to_string()).unwrap();
}

/// A folder `run` under `dir` holding `count` copies of the example dump, seqs 0 to count - 1,
/// named `d00.json` on in seq order.
fn folder_of_dumps(dir: &Path, count: i64) -> PathBuf {
    let folder = dir.join("run");
    std::fs::create_dir(&folder).unwrap();
    for seq in 0..count {
        write_dump(&folder, &format!("d{seq:02}.json"), seq);
    }
    folder
}

fn panic_on(path: &Path) {
    PANIC_ON.lock().unwrap().push(path.display().to_string());
}

fn snapshots(path: &Path) -> i64 {
    let database = db::open_read_only(path).unwrap();
    database
        .connection()
        .query_row("SELECT count(*) FROM snapshots", [], |row| row.get(0))
        .unwrap()
}

/// The error a crashed record must be: memstate's own failure (exit status 2), naming the file.
fn assert_names_the_bug(error: &Error, file: &Path) {
    match error {
        Error::Internal {
            file: named,
            message,
        } => {
            assert_eq!(named, &file.display().to_string(), "{error}");
            assert!(message.contains("a bug"), "{error}");
        }
        other => panic!("not memstate's own failure: {other:?}"),
    }
    assert_eq!(error.exit_code(), 2);
}

#[test]
fn a_failure_inside_the_reader_is_an_error_naming_the_file_not_the_end_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let folder = folder_of_dumps(dir.path(), 5);
    let crashing = folder.join("d02.json");
    panic_on(&crashing);
    let path = dir.path().join("t.db");
    let mut database = db::open(&path).unwrap();
    let outcome = import(
        &mut database,
        &[folder.display().to_string()],
        IngestOptions::default(),
        &mut |_| {},
    );
    let error = outcome.expect_err("the import went on past a record whose parsing failed");
    assert_names_the_bug(&error, &crashing);
}

/// Follow lands records through the same function as `import`: it stops at the record whose
/// parsing failed, with the same error, and keeps the one before it.
#[test]
fn follow_takes_records_the_way_import_does() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("docs");
    std::fs::create_dir(&folder).unwrap();
    write_dump(&folder, "d1.json", 3);
    write_dump(&folder, "d2.json", 4);
    let crashing = folder.join("d2.json");
    panic_on(&crashing);
    let path = dir.path().join("t.db");
    let mut database = db::open(&path).unwrap();
    let options = FollowOptions {
        ingest: IngestOptions::default(),
        interval: Duration::from_millis(100),
        settle: Duration::from_secs(1),
        events: false,
        forecast_within: None,
    };
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| {
        // A bound for a broken follower, not a measure of speed.
        scope.spawn(|| {
            let started = Instant::now();
            while !done.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, Ordering::SeqCst);
        });
        let outcome = follow(
            &mut database,
            &[folder.display().to_string()],
            options,
            &stop,
            &mut |_| {},
        );
        done.store(true, Ordering::SeqCst);
        outcome
    });
    let error = outcome.expect_err("follow went on past a record whose parsing failed");
    assert_names_the_bug(&error, &crashing);
    drop(database);
    assert_eq!(snapshots(&path), 1, "the record before the failure is kept");
}

/// The window lets in as many records as it has places: an input's end marker takes none. Were it
/// to take one, each single-record input would hold two places, and of two parsers one would wait
/// for the writer instead of parsing the next input.
#[test]
fn the_window_lets_in_one_record_per_place_whatever_the_ends_of_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let folder = folder_of_dumps(dir.path(), 12);
    let pipeline = super::start(&[folder.display().to_string()], IngestOptions::default());
    let places = pipeline.window.size;
    assert!(
        places < 12,
        "the test needs more inputs than places: {places}"
    );
    // No record is handed to a writer, so none gives its place back: what arrives is what the
    // window let in, once a second passes with nothing more.
    let mut records = 0;
    while let Ok((_, item, _)) = pipeline.results.recv_timeout(Duration::from_secs(1)) {
        if matches!(item, super::Item::Record(_)) {
            records += 1;
        }
    }
    assert_eq!(records, places);
    pipeline.window.close();
}
