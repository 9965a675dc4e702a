//! The database: what opening refuses (and leaves untouched), the schema's markers, idempotent and
//! conflicting imports, concurrent importers, and `sql` that cannot write.

use std::path::Path;

use rusqlite::Connection;
use serde_json::json;

use crate::common::{
    contents, data, import, on_db, scalar, set, simulated_db_past_a_mebibyte, small, write_json,
};

fn bytes_of(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

fn assert_refused_untouched(db: &Path, words: &str) {
    let before = bytes_of(db);
    let output = on_db(db)
        .arg("import")
        .arg(data("small.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr {stderr}");
    assert!(
        stderr.contains(&format!("error: {}: ", db.display())),
        "{stderr}"
    );
    assert!(stderr.contains(words), "{stderr} lacks {words:?}");
    assert_eq!(bytes_of(db), before, "the file changed");
    assert!(
        !Path::new(&format!("{}-wal", db.display())).exists(),
        "a WAL file appeared"
    );
    // The read-only path refuses too.
    let output = on_db(db).args(["sql", "SELECT 1"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(bytes_of(db), before, "the file changed under sql");
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.db");
    std::fs::write(&db, "these are my notes, not a database\n").unwrap();
    assert_refused_untouched(&db, "not a SQLite database");
}

#[test]
fn a_foreign_sqlite_database_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("other.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'a');").unwrap();
    drop(conn);
    assert_refused_untouched(&db, "not a memstate database");
}

#[test]
fn a_database_from_a_newer_memstate_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("figures.json")], 0);
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) VALUES (99, 'future', '2030-01-01', '0');
         PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;",
    )
    .unwrap();
    drop(conn);
    assert_refused_untouched(
        &db,
        &format!(
            "newer memstate (schema version 99; this memstate knows up to {})",
            memstate::db::schema_version()
        ),
    );
}

#[test]
fn a_new_database_is_marked_and_left_for_plain_readers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let version = memstate::db::schema_version();
    assert!(version >= 2);
    // After the import the write-ahead log is folded in and the file is in rollback-journal mode,
    // so that readers in read-only places need no -wal/-shm files.
    for suffix in ["-wal", "-shm"] {
        assert!(
            !Path::new(&format!("{}{suffix}", db.display())).exists(),
            "{suffix} left behind"
        );
    }
    assert_eq!(
        scalar::<i64>(&db, "PRAGMA application_id"),
        memstate::db::APPLICATION_ID as i64
    );
    assert_eq!(scalar::<i64>(&db, "PRAGMA user_version"), version);
    assert_eq!(scalar::<String>(&db, "PRAGMA journal_mode"), "delete");
    assert_eq!(
        scalar::<i64>(&db, "SELECT max(version) FROM refinery_schema_history"),
        version
    );
    // Every public view of PRODUCT.md exists with its documented columns.
    for (view, columns) in [
        ("strings", "string_id, value"),
        ("runs", "run_id, run, node_count, producer"),
        ("snapshots", "snapshot_id, run, node, seq, time_ns, wall_time, reason, note, source, format_version, imported_at"),
        ("memories", "memory_id, run, node, handle, kind, name"),
        ("memory_stats", "snapshot_id, memory_id, capacity, allocation_count, used_bytes, free_bytes, hole_count, largest_hole, fragmentation, reclaimable_bytes, largest_reclaimable, unaccounted_bytes"),
        ("memory_trend", "run, node, seq, time_ns, time_s, wall_time, handle, kind, capacity, allocation_count, used_bytes, free_bytes, hole_count, largest_hole, fragmentation, reclaimable_bytes, largest_reclaimable, unaccounted_bytes"),
        ("allocations", "snapshot_id, memory_id, uid, handle, kind, state, offset, size, alignment, created_ns, provenance, label, gc_priority"),
        ("holes", "snapshot_id, memory_id, offset, size"),
        ("failed_requests", "snapshot_id, memory_id, size, alignment, kind, provenance, time_ns, note"),
        ("objects", "run, object_id, kind, name, shape, dtype, transform, partition, provenance"),
        ("allocation_objects", "run, uid, field_id, field_size, object_id"),
    ] {
        let conn = Connection::open(&db).unwrap();
        let statement = conn.prepare(&format!("SELECT {columns} FROM {view}")).unwrap_or_else(|error| panic!("{view}: {error}"));
        assert!(statement.column_count() > 1, "{view}");
    }
}

#[test]
fn the_example_lands_in_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    assert_eq!(
        scalar::<String>(
            &db,
            "SELECT run || ' ' || node_count || ' ' || producer FROM runs"
        ),
        "example-run 1 legion 25.03.0"
    );
    assert_eq!(
        scalar::<String>(&db, "SELECT run || ':' || node || ':' || seq || ' ' || reason || ' ' || note || ' ' || wall_time FROM snapshots"),
        "example-run:0:3 oom default mapper: map_task failed 2026-12-01T10:00:01.5Z"
    );
    assert_eq!(scalar::<String>(&db, "SELECT group_concat(handle || '=' || kind, ' ') FROM (SELECT * FROM memories ORDER BY handle)"), "0x1e00000000000000=SYSTEM_MEM 0x1e00000000000003=GPU_FB_MEM");
    assert_eq!(
        scalar::<String>(&db, "SELECT uid || ' ' || handle || ' ' || state || ' ' || provenance FROM allocations WHERE offset = 0 AND size = 262144"),
        "0x0000000000000065 0x4000000000c00004 valid train.py:12"
    );
    assert_eq!(
        scalar::<String>(
            &db,
            "SELECT uid FROM allocations WHERE state = 'pending_alloc'"
        ),
        "0x0000000000000069"
    );
    assert_eq!(scalar::<String>(&db, "SELECT size || ' ' || alignment || ' ' || kind || ' ' || provenance FROM failed_requests"), "300000 512 instance train.py:57");
    assert_eq!(scalar::<String>(&db, "SELECT object_id || ' ' || name || ' ' || shape || ' ' || dtype || ' ' || provenance FROM objects"), "store-17 x [300,150] float64 train.py:12");
    assert_eq!(scalar::<String>(&db, "SELECT uid || ' ' || field_id || ' ' || field_size || ' ' || object_id FROM allocation_objects"), "0x0000000000000065 101 8 store-17");
    assert_eq!(scalar::<i64>(&db, "SELECT count(*) FROM holes"), 4);
}

#[test]
fn the_same_dump_twice_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let before = contents(&db);
    let out = import(&db, &[&data("small.json")], 0);
    assert!(
        out.contains("imported 0 dumps") && out.contains("1 unchanged"),
        "{out}"
    );
    assert_eq!(contents(&db), before);
}

#[test]
fn a_different_dump_with_the_same_identity_needs_replace() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let before = contents(&db);
    let changed = write_json(
        dir.path(),
        "changed.json",
        &set(small(), "/memories/0/allocations/5/size", json!(8192)),
    );
    let output = on_db(&db).arg("import").arg(&changed).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("already imported") && stderr.contains("--replace"),
        "{stderr}"
    );
    assert_eq!(contents(&db), before);

    let output = on_db(&db)
        .args(["import", "--replace"])
        .arg(&changed)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).contains("replacing"));
    assert_eq!(scalar::<i64>(&db, "SELECT count(*) FROM snapshots"), 1);
    assert_eq!(
        scalar::<i64>(
            &db,
            "SELECT size FROM allocations WHERE uid = '0x000000000000006a'"
        ),
        8192
    );
    assert_eq!(scalar::<i64>(&db, "SELECT count(*) FROM allocations"), 7);
}

#[test]
fn concurrent_importers_both_land() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let mut files = Vec::new();
    for seq in 0..6 {
        files.push(write_json(
            dir.path(),
            &format!("d{seq}.json"),
            &set(small(), "/snapshot/seq", json!(seq)),
        ));
    }
    let spawn = |files: &[std::path::PathBuf]| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"))
            .arg("--db")
            .arg(&db)
            .arg("import")
            .args(files)
            .output()
            .unwrap()
    };
    let (first, second) = std::thread::scope(|scope| {
        let a = scope.spawn(|| spawn(&files[..3]));
        let b = scope.spawn(|| spawn(&files[3..]));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(scalar::<i64>(&db, "SELECT count(*) FROM snapshots"), 6);
    assert_eq!(
        scalar::<i64>(
            &db,
            "SELECT count(*) FROM strings WHERE value = 'GPU_FB_MEM'"
        ),
        1
    );
}

#[test]
fn sql_cannot_change_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let before = contents(&db);
    for statement in [
        "DELETE FROM string",
        "DROP VIEW allocations",
        "INSERT INTO run (name) VALUES ('x')",
        "PRAGMA user_version = 7",
        "CREATE TABLE mine (x)",
        "ATTACH DATABASE 'other.db' AS other",
        "PRAGMA query_only = 0; DELETE FROM string",
    ] {
        let output = on_db(&db).args(["sql", statement]).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{statement}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        assert_eq!(contents(&db), before, "{statement} changed the database");
    }
    assert!(!dir.path().join("other.db").exists());
    // Issue 46, item 8: VACUUM INTO, which SQLite runs on a read-only connection by attaching
    // its target (refused before as "too many attached databases - max 0"), is refused for what
    // it is: a statement that writes. No copy is made.
    let copy = dir.path().join("copy.db");
    let statement = format!("VACUUM INTO '{}'", copy.display());
    let output = on_db(&db).args(["sql", &statement]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the statement writes, and memstate opens the database read-only"),
        "{stderr}"
    );
    assert!(!copy.exists());
    // Item 11: a parameter given twice is refused, not the last one kept.
    let output = on_db(&db)
        .args(["sql", "SELECT :x AS x", "-p", "x=1", "-p", "x=2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("parameter \"x\" is given twice"),
        "{stderr}"
    );
}

#[test]
fn a_killed_import_leaves_only_whole_dumps() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let config = memstate::sim::Config {
        steps: 400,
        continue_after_oom: true,
        intensity: 2.0,
        ..Default::default()
    };
    let written = memstate::sim::simulate(&config, &folder, &mut |_| {}).unwrap();
    let db = dir.path().join("t.db");
    // A database with a schema and one snapshot first.
    import(&db, &[&data("small.json")], 0);
    // Kill the importer part-way, at a few different moments.
    for delay_ms in [40u64, 90, 160] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"))
            .arg("--db")
            .arg(&db)
            .args(["import", "--quiet"])
            .arg(&folder)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(scalar::<String>(&db, "PRAGMA integrity_check"), "ok");
        // Every snapshot that is there is whole: its allocations match the figures stored with it.
        let broken: i64 = scalar(
            &db,
            "SELECT count(*) FROM memory_stats ms
             WHERE ms.allocation_count != (SELECT count(*) FROM allocations a WHERE a.snapshot_id = ms.snapshot_id AND a.memory_id = ms.memory_id)",
        );
        assert_eq!(broken, 0);
        let incomplete: i64 = scalar(&db, "SELECT count(*) FROM snapshots s WHERE (SELECT count(*) FROM memory_stats m WHERE m.snapshot_id = s.snapshot_id) = 0");
        assert_eq!(incomplete, 0);
    }
    // Importing again completes the run: the landed dumps are unchanged, the others land.
    import(&db, &[&folder], 0);
    assert_eq!(
        scalar::<i64>(&db, "SELECT count(*) FROM snapshots"),
        written.dumps as i64 + 1
    );
}

/// Spans land all over their tables and indexes as they close, which leaves B-tree pages part
/// full. A first (bulk) import builds its secondary indexes once, packed, when it is done (see
/// migrations/V10__deferred_indexes.sql), and leaves the span tables as they are: rewriting the
/// whole file would gain a little and write it three times over. An import that adds little to
/// a big file does not rewrite it either.
#[test]
fn a_bulk_import_leaves_the_file_nearly_compact_and_a_small_one_leaves_it_be() {
    let dir = tempfile::tempdir().unwrap();
    let db = simulated_db_past_a_mebibyte(dir.path());
    let size = std::fs::metadata(&db).unwrap().len();
    assert_eq!(
        scalar::<i64>(&db, "SELECT count(*) FROM deferred_index"),
        0,
        "the deferred indexes are built"
    );
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    Connection::open(&copy)
        .unwrap()
        .execute_batch("VACUUM")
        .unwrap();
    let rewritten = std::fs::metadata(&copy).unwrap().len();
    // At most a sixth of the file is slack.
    assert!(
        rewritten * 6 >= size * 5,
        "the import left {size} bytes that a rewrite makes {rewritten}"
    );
    // One more small dump: the file is not rewritten (its inode's pages stay where they were).
    let before = std::fs::metadata(&db).unwrap();
    import(&db, &[&data("small.json")], 0);
    let after = std::fs::metadata(&db).unwrap();
    assert!(
        after.len() >= before.len(),
        "a small import rewrote the file ({} -> {} bytes)",
        before.len(),
        after.len()
    );
}

/// A `--db` that names a FIFO (or another file that is not a regular one) is refused at once:
/// opening a FIFO would wait for a writer forever.
#[test]
fn a_db_that_is_a_fifo_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("db.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for args in [
        &["snapshots"][..],
        &["sql", "SELECT 1"],
        &["import", data("small.json").to_str().unwrap()],
    ] {
        let output = on_db(&fifo)
            .args(args)
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("not a regular file"),
            "{args:?}"
        );
    }
}

/// A dump whose writing Ctrl-C interrupts is rolled back, not committed; the importer says
/// `Interrupted`, and the database holds what it held before.
#[test]
fn an_interrupted_dump_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let text = std::fs::read(crate::common::data("small.json")).unwrap();
    let dump =
        match memstate::dump::parse_document(&text, "small.json", Default::default()).unwrap() {
            memstate::dump::Document::Dump(dump) => *dump,
            _ => unreachable!("small.json is a dump"),
        };
    let prepared = memstate::dump::prepare(dump);
    let mut database = memstate::db::open(&db).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(true);
    let mut importer = database.writer("t.db").stop_on(&stop);
    let outcome = importer.import(&prepared, "small.json", false);
    assert!(
        matches!(outcome, Err(memstate::Error::Interrupted)),
        "{outcome:?}"
    );
    let count: i64 = database
        .connection()
        .query_row("SELECT count(*) FROM allocation_span", [], |row| row.get(0))
        .unwrap();
    assert_eq!(count, 0, "nothing of the dump was committed");
    stop.store(false, std::sync::atomic::Ordering::SeqCst);
    let mut importer = database.writer("t.db").stop_on(&stop);
    assert!(importer.import(&prepared, "small.json", false).is_ok());
}

/// Two dumps of a run describe one object differently: each field keeps the greater text (by
/// bytes), a field one of them leaves out takes the other's, and the import order does not
/// matter. Expected values by hand: "store" > "alpha", "int8" > "float64", "x" from the dump that
/// names it, "train.py:57" > "train.py:12".
#[test]
fn an_object_described_twice_keeps_the_greater_text_in_either_order() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_json(dir.path(), "first.json", &small());
    let mut second = set(small(), "/snapshot/seq", json!(4));
    second = set(second, "/objects/0/kind", json!("alpha"));
    second = set(second, "/objects/0/dtype", json!("int8"));
    second = set(second, "/objects/0/provenance", json!(3));
    if let Some(object) = second
        .pointer_mut("/objects/0")
        .and_then(|v| v.as_object_mut())
    {
        object.remove("name");
    }
    let second = write_json(dir.path(), "second.json", &second);
    let mut seen = Vec::new();
    for (name, order) in [("ab.db", [&first, &second]), ("ba.db", [&second, &first])] {
        let db = dir.path().join(name);
        import(&db, &[order[0].as_path()], 0);
        import(&db, &[order[1].as_path()], 0);
        seen.push(scalar::<String>(
            &db,
            "SELECT object_id || ' ' || kind || ' ' || name || ' ' || dtype || ' ' || provenance FROM objects",
        ));
    }
    assert_eq!(seen[0], "store-17 store x int8 train.py:57");
    assert_eq!(seen[1], seen[0]);
}
