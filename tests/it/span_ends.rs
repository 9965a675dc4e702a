//! Span ends that an import recorded and has not yet moved into the span tables (see
//! migrations/V8__span_ends.sql): a reader during an import, or after a killed one, reads every
//! view as after the move; a later import moves them; a dump that lands between two imported
//! ones is planned against the moved spans. Likewise the span indexes a bulk import defers (see
//! migrations/V10__deferred_indexes.sql): read the same without them, built as they were.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::common::{import, scalar};

/// The dumps of a simulated run, in (node, seq) order (their names sort so).
fn simulated_dumps(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let folder = dir.join("run");
    let config = memstate::sim::Config {
        steps: 300,
        continue_after_oom: true,
        intensity: 2.0,
        ..Default::default()
    };
    memstate::sim::simulate(&config, &folder, &mut |_| {}).unwrap();
    let mut files = Vec::new();
    let mut folders = vec![folder.clone()];
    while let Some(current) = folders.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 20, "{} dumps", files.len());
    (folder, files)
}

/// Import `files` through the library's writer, in order, without finishing the session: the
/// ends the dumps recorded stay where they are, as during an import.
fn import_unfinished(db: &Path, files: &[PathBuf]) {
    import_moving_ends_past(db, files, u64::MAX, &mut |_| {});
}

/// [`import_unfinished`], the writer moving the recorded ends once `most` pile up; `after` is
/// called after each dump.
fn import_moving_ends_past(db: &Path, files: &[PathBuf], most: u64, after: &mut dyn FnMut(&Path)) {
    let mut database = memstate::db::open(db).unwrap();
    let importer = database.writer("t.db").moving_ends_past(most);
    land_each(importer, db, files, after);
}

/// Land each of `files` through `importer`, calling `after` after each dump.
fn land_each(
    mut importer: memstate::db::Writer<'_>,
    db: &Path,
    files: &[PathBuf],
    after: &mut dyn FnMut(&Path),
) {
    for file in files {
        let text = std::fs::read(file).unwrap();
        let name = file.display().to_string();
        let dump = match memstate::dump::parse_document(&text, &name, Default::default()).unwrap() {
            memstate::dump::Document::Dump(dump) => *dump,
            _ => panic!("{name} is a dump"),
        };
        let outcome = importer
            .import(&memstate::dump::prepare(dump), &name, false)
            .unwrap();
        assert!(
            matches!(outcome, memstate::db::Outcome::Imported { .. }),
            "{name}: {outcome:?}"
        );
        after(db);
    }
}

/// The two databases' views are the same: else the first rows that differ, from each side.
fn assert_same_views(db: &Path, expected: &Path) {
    let (got, want) = (views(db), views(expected));
    if got != want {
        let only_got: Vec<&String> = got
            .iter()
            .filter(|row| !want.contains(row))
            .take(4)
            .collect();
        let only_want: Vec<&String> = want
            .iter()
            .filter(|row| !got.contains(row))
            .take(4)
            .collect();
        panic!(
            "{} rows against {}; only in {}: {only_got:#?}; only in {}: {only_want:#?}",
            got.len(),
            want.len(),
            db.display(),
            expected.display()
        );
    }
}

fn ends_recorded(db: &Path) -> i64 {
    scalar::<i64>(db, "SELECT count(*) FROM allocation_span_end")
        + scalar::<i64>(db, "SELECT count(*) FROM hole_span_end")
}

/// Every row of the public views that hold spans, snapshots named by (node, seq) rather than
/// by id (snapshot ids follow the import order), sorted.
fn views(db: &Path) -> Vec<String> {
    let conn = Connection::open(db).unwrap();
    let mut lines = Vec::new();
    for (view, named) in [
        ("allocations", true),
        ("holes", true),
        ("memory_stats", true),
        ("allocation_spans", false),
        ("hole_spans", false),
    ] {
        let columns: Vec<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{view}')"))
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .filter(|column: &String| !column.ends_with("snapshot_id"))
            .map(|column| format!("v.\"{column}\""))
            .collect();
        let sql = if named {
            format!(
                "SELECT s.node, s.seq, {} FROM {view} v JOIN snapshots s ON s.snapshot_id = v.snapshot_id",
                columns.join(", ")
            )
        } else {
            format!("SELECT {} FROM {view} v", columns.join(", "))
        };
        let mut statement = conn.prepare(&sql).unwrap();
        let width = statement.column_count();
        let rows = statement
            .query_map([], |row| {
                Ok((0..width)
                    .map(|index| format!("{:?}", row.get::<_, rusqlite::types::Value>(index)))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap();
        let mut rows: Vec<String> = rows.map(|row| format!("{view}|{}", row.unwrap())).collect();
        assert!(!rows.is_empty(), "{view} is empty");
        rows.sort();
        lines.extend(rows);
    }
    lines
}

#[test]
fn recorded_ends_read_as_moved_ones_and_the_next_import_moves_them() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, files) = simulated_dumps(dir.path());
    let moved = dir.path().join("moved.db");
    import(&moved, &[&folder], 0);
    assert_eq!(
        ends_recorded(&moved),
        0,
        "an import that finished moves its ends"
    );

    let pending = dir.path().join("pending.db");
    import_unfinished(&pending, &files);
    let recorded = ends_recorded(&pending);
    assert!(recorded > 50, "only {recorded} ends were recorded");
    // Each end belongs to a span still stored open.
    let unmatched: i64 = scalar(
        &pending,
        "SELECT count(*) FROM allocation_span_end e
         WHERE NOT EXISTS (SELECT 1 FROM allocation_span_stored s
                           WHERE s.memory_id = e.memory_id AND s.level = 64 AND s.first_seq = e.first_seq
                             AND s.uid = e.uid AND s.last_seq IS NULL AND e.last_seq >= s.first_seq)",
    );
    assert_eq!(unmatched, 0);
    assert_same_views(&pending, &moved);

    // Every snapshot reads the allocations its dump holds, counted from the files themselves.
    for file in &files {
        let dump: serde_json::Value =
            serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        let expected: usize = dump["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|memory| memory["allocations"].as_array().map_or(0, Vec::len))
            .sum();
        let read: i64 = scalar(
            &pending,
            &format!(
                "SELECT count(*) FROM allocations a JOIN snapshots s ON s.snapshot_id = a.snapshot_id
                 WHERE s.node = {} AND s.seq = {}",
                dump["run"]["node"], dump["snapshot"]["seq"]
            ),
        );
        assert_eq!(read, expected as i64, "{}", file.display());
    }

    // The next import (here of nothing new) moves them, and the file reads the same.
    import(&pending, &[&folder], 0);
    assert_eq!(ends_recorded(&pending), 0);
    assert_same_views(&pending, &moved);
    assert_eq!(scalar::<String>(&pending, "PRAGMA integrity_check"), "ok");
}

#[test]
fn a_dump_landing_between_imported_ones_is_planned_against_moved_spans() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, files) = simulated_dumps(dir.path());
    let moved = dir.path().join("moved.db");
    import(&moved, &[&folder], 0);

    // All but one dump in the middle of node 0, ends left recorded; then that dump, which cuts the
    // spans passing over it (some of them ended by recorded ends).
    let middle = files.len() / 4;
    let skipped = vec![files[middle].clone()];
    let rest: Vec<PathBuf> = files
        .iter()
        .enumerate()
        .filter(|(index, _)| *index != middle)
        .map(|(_, path)| path.clone())
        .collect();
    let late = dir.path().join("late.db");
    import_unfinished(&late, &rest);
    assert!(ends_recorded(&late) > 0);
    import_unfinished(&late, &skipped);
    assert_eq!(
        ends_recorded(&late),
        0,
        "planning from the database moved them first"
    );
    assert_same_views(&late, &moved);
}

/// A long import moves the ends once enough pile up, between two dumps (2^20 of them; here one):
/// none is left recorded after a dump, and the writer goes on from the open spans it keeps, which
/// the move leaves as they are. The file then reads as an import that moved them at its end.
#[test]
fn ends_moved_between_dumps_leave_what_the_views_read_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, files) = simulated_dumps(dir.path());
    let moved = dir.path().join("moved.db");
    import(&moved, &[&folder], 0);

    let often = dir.path().join("often.db");
    let mut left = Vec::new();
    import_moving_ends_past(&often, &files, 1, &mut |db| left.push(ends_recorded(db)));
    assert_eq!(left.len(), files.len());
    assert!(
        left.iter().all(|&ends| ends == 0),
        "ends left after each dump: {left:?}"
    );
    // The dumps did end spans: moved, they sit at their closed levels.
    let closed: i64 = scalar(
        &often,
        "SELECT count(*) FROM allocation_span_stored WHERE level < 64 AND last_seq IS NOT NULL",
    );
    assert!(closed > 50, "only {closed} spans closed");
    assert_same_views(&often, &moved);
    assert_eq!(scalar::<String>(&often, "PRAGMA integrity_check"), "ok");
}

/// The four span indexes that a bulk import defers.
const DEFERRABLE: [&str; 4] = [
    "allocation_span_by_kind",
    "allocation_span_by_state",
    "allocation_span_by_uid",
    "hole_span_by_offset",
];

/// Every index of the file with its statement, and every row of sqlite_stat1, sorted.
fn indexes_and_statistics(db: &Path) -> Vec<String> {
    let conn = Connection::open(db).unwrap();
    let mut lines: Vec<String> = conn
        .prepare("SELECT 'index ' || name || ': ' || sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    lines.extend(
        conn.prepare(
            "SELECT 'stat ' || tbl || ' ' || coalesce(idx, '-') || ': ' || stat FROM sqlite_stat1",
        )
        .unwrap()
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap),
    );
    lines.sort();
    lines
}

/// How many of the four deferrable span indexes the file has.
fn span_indexes(db: &Path) -> usize {
    let conn = Connection::open(db).unwrap();
    DEFERRABLE
        .iter()
        .filter(|name| {
            conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = ?1)",
                [name],
                |row| row.get::<_, bool>(0),
            )
            .unwrap()
        })
        .count()
}

fn deferred_names(db: &Path) -> Vec<String> {
    Connection::open(db)
        .unwrap()
        .prepare("SELECT name FROM deferred_index ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A bulk import drops the four span indexes with its first dump; a reader meanwhile (or after
/// the import is killed) reads every view as from a file whose indexes were kept up to date all
/// along; the next writer to open the file builds them, with their statements and statistics as
/// they were; and an import that finishes builds them itself.
#[test]
fn a_bulk_import_defers_the_span_indexes_and_they_come_back_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, files) = simulated_dumps(dir.path());
    // Indexes kept up to date dump by dump: `import --follow`'s writer.
    let kept = dir.path().join("kept.db");
    {
        let mut database = memstate::db::open(&kept).unwrap();
        land_each(database.writer("kept.db"), &kept, &files, &mut |_| {});
        database.finish().unwrap();
    }
    let expected = indexes_and_statistics(&kept);
    for name in DEFERRABLE {
        assert!(
            expected
                .iter()
                .any(|line| line.starts_with(&format!("index {name}: "))),
            "{name} in {expected:#?}"
        );
        assert!(
            expected
                .iter()
                .any(|line| line.contains(&format!(" {name}: ")) && line.starts_with("stat ")),
            "statistics of {name} in {expected:#?}"
        );
    }
    assert!(deferred_names(&kept).is_empty());

    // A bulk import, after each dump and after it is killed (the session never finished).
    let bulk = dir.path().join("bulk.db");
    {
        let mut database = memstate::db::open(&bulk).unwrap();
        let mut seen = Vec::new();
        land_each(database.bulk_writer("bulk.db"), &bulk, &files, &mut |db| {
            seen.push(deferred_names(db))
        });
        assert!(seen.iter().all(|names| names == &DEFERRABLE), "{seen:?}");
    }
    assert_eq!(span_indexes(&bulk), 0, "the deferred indexes are dropped");
    assert_same_views(&bulk, &kept);
    // One uid's spans, as a user asks for them: the same rows without the index.
    let uid_rows = |db: &Path| -> Vec<String> {
        let conn = Connection::open(db).unwrap();
        let uid: String = conn
            .query_row(
                "SELECT uid FROM allocation_spans ORDER BY uid LIMIT 1 OFFSET 7",
                [],
                |row| row.get(0),
            )
            .unwrap();
        let mut statement = conn
            .prepare("SELECT memory_id, first_seq, last_seq, offset, size FROM allocation_spans WHERE uid = ?1 ORDER BY first_seq")
            .unwrap();
        let rows = statement
            .query_map([&uid], |row| {
                Ok(format!(
                    "{uid} {:?} {:?} {:?} {:?} {:?}",
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, Option<i64>>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, i64>(4)?
                ))
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    let uid_expected = uid_rows(&kept);
    assert!(!uid_expected.is_empty());
    assert_eq!(uid_rows(&bulk), uid_expected);

    // The next writer to open it builds them (here one that then imports nothing).
    memstate::db::open(&bulk).unwrap().finish().unwrap();
    assert!(deferred_names(&bulk).is_empty());
    assert_eq!(indexes_and_statistics(&bulk), expected);
    assert_eq!(ends_recorded(&bulk), 0);
    assert_same_views(&bulk, &kept);
    assert_eq!(scalar::<String>(&bulk, "PRAGMA integrity_check"), "ok");

    // The command's import defers them too, and builds them as it finishes.
    let command = dir.path().join("command.db");
    import(&command, &[&folder], 0);
    assert!(deferred_names(&command).is_empty());
    assert_eq!(indexes_and_statistics(&command), expected);
    assert_same_views(&command, &kept);
}

/// Only a bulk import defers: `import --follow`'s writer keeps the indexes up to date for the
/// readers that follow along, and an import that adds a little to a file of some size (under a
/// third of it) keeps them too.
#[test]
fn follow_and_a_small_import_keep_the_span_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = simulated_dumps(dir.path());
    let followed = dir.path().join("followed.db");
    {
        let mut database = memstate::db::open(&followed).unwrap();
        land_each(
            database.writer("followed.db"),
            &followed,
            &files,
            &mut |db| assert_eq!(span_indexes(db), 4),
        );
    }
    assert!(deferred_names(&followed).is_empty());

    // A file past the size that counts as new (1 MiB), then one more node's dump landed in bulk
    // mode, the session left open: it grew the file by far less than a third.
    let big = crate::common::simulated_db_past_a_mebibyte(dir.path());
    let mut database = memstate::db::open(&big).unwrap();
    land_each(
        database.bulk_writer("t.db"),
        &big,
        &[crate::common::data("small.json")],
        &mut |db| assert_eq!(span_indexes(db), 4),
    );
    assert!(deferred_names(&big).is_empty());
}

/// A bulk import that finishes while a reader is on the file builds the deferred indexes all the
/// same, in WAL mode (it cannot leave it then), and the reader's view does not change under it.
#[test]
fn a_bulk_import_finishing_beside_a_reader_builds_its_indexes_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = simulated_dumps(dir.path());
    let bulk = dir.path().join("bulk.db");
    let mut database = memstate::db::open(&bulk).unwrap();
    land_each(database.bulk_writer("bulk.db"), &bulk, &files, &mut |_| {});
    let reader = Connection::open(&bulk).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let count = |conn: &Connection| -> i64 {
        conn.query_row("SELECT count(*) FROM allocation_spans", [], |row| {
            row.get(0)
        })
        .unwrap()
    };
    let before = count(&reader);
    database.finish().unwrap();
    assert_eq!(count(&reader), before, "the reader's view changed under it");
    reader.execute_batch("COMMIT").unwrap();
    assert!(deferred_names(&bulk).is_empty());
    assert_eq!(
        reader
            .query_row("PRAGMA journal_mode", [], |row| row.get::<_, String>(0))
            .unwrap(),
        "wal"
    );
    assert_eq!(count(&reader), before);
    drop(reader);
    assert_eq!(span_indexes(&bulk), 4);
}
