//! Hardening, the second half: databases memstate may only read (read-only folders, files and
//! file systems, foreign and newer schemas), readers beside a running import, inputs that must
//! land the same however they come, markup in dump strings, and Ctrl-C during an import.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use rusqlite::Connection;
use serde_json::json;

use crate::common::{
    contents, data, have, import, memstate, on_db, scalar, set, small, write, write_json,
};
use crate::hardening::{binary, sha};

/// A command for the unprivileged `nobody` when the tests run as root (root ignores permissions).
fn as_reader(program: &Path) -> Command {
    let mut command = Command::new(program);
    if unsafe { libc::geteuid() } == 0 {
        command.uid(65534).gid(65534);
    }
    command
}

#[test]
fn a_database_in_a_read_only_folder_or_file_is_read_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("shared");
    std::fs::create_dir(&folder).unwrap();
    let db = folder.join("run.db");
    import(&db, &[&data("run"), &data("small.json")], 0);
    for suffix in ["-wal", "-shm", "-journal"] {
        assert!(
            !Path::new(&format!("{}{suffix}", db.display())).exists(),
            "{suffix} left after the import"
        );
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).unwrap();
    // The reader runs a copy of the binary in the shared temporary folder: the checkout (and its
    // target/) may sit in a folder the unprivileged user cannot enter, as root's home is.
    let program = dir.path().join("memstate");
    std::fs::copy(binary(), &program).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = sha(&db);
    for args in [
        vec!["snapshots"],
        vec!["oom"],
        vec!["sql", "SELECT count(*) FROM allocations"],
        vec!["report", "churn", "-p", "run=golden"],
    ] {
        let output = as_reader(&program)
            .arg("--db")
            .arg(&db)
            .args(&args)
            .env_remove("MEMSTATE_DB")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(
        std::fs::read_dir(&folder).unwrap().count(),
        1,
        "files appeared beside the database"
    );
    assert_eq!(sha(&db), before);
    if have("sqlite3", "to read the database as a plain reader") {
        let output = as_reader(Path::new("sqlite3"))
            .arg(&db)
            .arg("SELECT count(*) FROM allocations")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "23");
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 1);
    }
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn readers_work_while_an_import_runs() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let config = memstate::sim::Config {
        steps: 400,
        continue_after_oom: true,
        intensity: 3.0,
        ..Default::default()
    };
    memstate::sim::simulate(&config, &folder, &mut |_| {}).unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let mut importer = Command::new(binary())
        .arg("--db")
        .arg(&db)
        .args(["import", "--quiet"])
        .arg(&folder)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut reads = 0;
    while importer.try_wait().unwrap().is_none() {
        let output = on_db(&db)
            .args(["sql", "SELECT count(*) FROM snapshots"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "a read during the import failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        reads += 1;
    }
    assert!(importer.wait().unwrap().success());
    assert!(reads > 0);
}

fn refused_untouched(db: &Path, words: &str) {
    let before = sha(db);
    let output = on_db(db)
        .arg("import")
        .arg(data("small.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(words), "{stderr} lacks {words:?}");
    let output = on_db(db).args(["sql", "SELECT 1"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(sha(db), before, "{} changed", db.display());
    for suffix in ["-wal", "-shm"] {
        assert!(
            !Path::new(&format!("{}{suffix}", db.display())).exists(),
            "{suffix} appeared"
        );
    }
}

#[test]
fn foreign_and_newer_databases_are_refused_byte_for_byte_untouched() {
    let dir = tempfile::tempdir().unwrap();
    // Another application that happens to use refinery and to have a `snapshot` table.
    let db = dir.path().join("other.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE refinery_schema_history (version INT4 PRIMARY KEY, name VARCHAR(255), applied_on VARCHAR(255), checksum VARCHAR(255));
             INSERT INTO refinery_schema_history VALUES (1, 'create_snapshots', '2026-01-01T00:00:00Z', '42');
             CREATE TABLE snapshot (id INTEGER PRIMARY KEY, taken TEXT); INSERT INTO snapshot VALUES (1, 'yesterday');",
        )
        .unwrap();
    refused_untouched(&db, "not a memstate database");
    // A database holding only a view.
    let db = dir.path().join("view.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE VIEW answer AS SELECT 42;")
        .unwrap();
    refused_untouched(&db, "not a memstate database");
    // A memstate database whose user_version says a newer memstate wrote it.
    let db = dir.path().join("newer.db");
    import(&db, &[&data("small.json")], 0);
    Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA user_version = 77;")
        .unwrap();
    refused_untouched(&db, "newer memstate (schema version 77");
}

#[test]
fn the_same_dump_reordered_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let before = contents(&db);
    let mut dump = small();
    dump["memories"].as_array_mut().unwrap().reverse();
    dump["memories"][1]["allocations"]
        .as_array_mut()
        .unwrap()
        .reverse();
    // The same strings, interned in another order.
    let reordered = write_json(dir.path(), "reordered.json", &dump);
    let out = import(&db, &[&reordered], 0);
    assert!(out.contains("1 unchanged"), "{out}");
    assert_eq!(contents(&db), before);
}

#[test]
fn small_input_rules() {
    let dir = tempfile::tempdir().unwrap();
    let check = |name: &str, bytes: &[u8], code: i32, words: &str| {
        let path = write(dir.path(), name, bytes);
        let output = memstate().arg("validate").arg(&path).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{name}: {stderr}");
        assert!(stderr.contains(words), "{name}: {stderr} lacks {words:?}");
    };
    let text = serde_json::to_string(&small()).unwrap();
    // -0 is zero (JSON Schema's integer admits it).
    check(
        "minus-zero.json",
        text.replacen("\"offset\":0,", "\"offset\":-0,", 1)
            .as_bytes(),
        0,
        "",
    );
    check(
        "small-negative.json",
        text.replacen("\"offset\":0,", "\"offset\":-99999999999999999999,", 1)
            .as_bytes(),
        1,
        "too small",
    );
    // A UTF-8 byte order mark is accepted.
    check(
        "bom.json",
        &[b"\xEF\xBB\xBF".as_slice(), text.as_bytes()].concat(),
        0,
        "",
    );
    // A key written twice is refused, by name.
    check(
        "twice.json",
        text.replacen("\"size\":262144,", "\"size\":262144,\"size\":1,", 1)
            .as_bytes(),
        1,
        "memories[0].allocations[0].size: the key \"size\" is written more than once",
    );
    check(
        "twice-top.json",
        text.replacen(
            "\"format\":\"memstate-dump\",",
            "\"format\":\"memstate-dump\",\"format\":\"memstate-dump\",",
            1,
        )
        .as_bytes(),
        1,
        "format: the key \"format\" is written more than once",
    );
    // An annotations file needs a run id.
    check(
        "empty-run.json",
        br#"{"format": "memstate-annotations", "version": 1, "run": {"id": ""}, "links": []}"#,
        1,
        "run.id: expected a non-empty run id",
    );
    // Corrupt zstd data says so (here a frame header that asks for a dictionary).
    let mut zst = zstd::stream::encode_all(text.as_bytes(), 3).unwrap();
    zst[4] ^= 0x03;
    check(
        "corrupt.json.zst",
        &zst,
        1,
        "corrupt or truncated compressed data",
    );
}

#[test]
fn allocations_of_a_snapshot_with_more_memories_than_sqlite_has_variables() {
    let dir = tempfile::tempdir().unwrap();
    let memories: Vec<serde_json::Value> = (0..33_000u64)
        .map(|index| json!({"id": index + 1, "kind": "SYSTEM_MEM", "capacity": 64, "allocations": [{"uid": index + 1, "kind": "internal", "state": "valid", "offset": 0, "size": 8}]}))
        .collect();
    let dump = json!({"format": "memstate-dump", "version": 1, "run": {"id": "wide", "node": 0}, "snapshot": {"seq": 0, "time_ns": 0, "reason": "request"}, "memories": memories});
    let path = write_json(dir.path(), "wide.json", &dump);
    let db = dir.path().join("t.db");
    import(&db, &[&path], 0);
    let output = on_db(&db)
        .args(["allocations", "--by", "kind", "--format", "csv"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(",internal,33000,264000,8"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn markup_in_dump_strings_reaches_the_map_page_inert() {
    let dir = tempfile::tempdir().unwrap();
    let dump = set(
        small(),
        "/memories/0/allocations/5/label",
        json!("<!--<script>alert(1)</script>"),
    );
    let path = write_json(dir.path(), "markup.json", &dump);
    let db = dir.path().join("t.db");
    import(&db, &[&path], 0);
    let page = dir.path().join("map.html");
    let output = on_db(&db)
        .args(["map", "--html"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(output.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    let data = &html[html.find("const DATA = ").unwrap()..];
    let data = &data[..data.find("</script>").unwrap()];
    assert!(
        !data.contains('<'),
        "a '<' of the data reached the page: {}",
        &data[..200.min(data.len())]
    );
    assert!(
        data.contains("\\u003c!--\\u003cscript"),
        "the label is in the data, escaped"
    );
}

/// Ctrl-C during a plain import (here while it waits for more of a slow input, a named pipe):
/// exit 130 at once, a summary line that says what landed and how to go on, the database
/// checkpointed and closed (no -wal or -shm left) and whole; the same command again goes on
/// (issue 17, item 9: it used to die with no summary and leave -wal/-shm behind).
#[test]
fn ctrl_c_during_an_import_rolls_back_reports_and_closes() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("slow.ndjson");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let db = dir.path().join("t.db");
    let child = std::process::Command::new(binary())
        .arg("--db")
        .arg(&db)
        .args(["import", "--quiet"])
        .arg(&fifo)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let line = |seq: i64| {
        let mut text = serde_json::to_vec(&set(small(), "/snapshot/seq", json!(seq))).unwrap();
        text.push(b'\n');
        text
    };
    // Two dumps, then the writer stalls with the pipe still open.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    writer.write_all(&line(1)).unwrap();
    writer.write_all(&line(2)).unwrap();
    writer.flush().unwrap();
    let started = std::time::Instant::now();
    loop {
        let landed =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .and_then(|conn| {
                    conn.query_row("SELECT count(*) FROM snapshots", [], |row| {
                        row.get::<_, i64>(0)
                    })
                })
                .unwrap_or(0);
        if landed == 2 {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 30,
            "the two dumps did not land"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) with the pid of a child this test started and has not waited for.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let output = child.wait_with_output().unwrap();
    drop(writer);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stdout}{stderr}");
    assert!(stdout.contains("interrupted: imported 2 dumps"), "{stdout}");
    assert!(stderr.contains("run the same command again"), "{stderr}");
    for companion in ["t.db-wal", "t.db-shm", "t.db-journal"] {
        assert!(
            !dir.path().join(companion).exists(),
            "{companion} left behind"
        );
    }
    assert_eq!(scalar::<String>(&db, "PRAGMA integrity_check"), "ok");
    // Going on: the dumps that landed are skipped, the rest imported.
    let rest = dir.path().join("rest.ndjson");
    std::fs::write(&rest, [line(1), line(2), line(3)].concat()).unwrap();
    let stdout = import(&db, &[&rest], 0);
    assert!(
        stdout.contains("imported 1 dump (") && stdout.contains("2 unchanged"),
        "{stdout}"
    );
}

/// Issue 27, item 9: a database on a read-only file system said "cannot switch to WAL mode";
/// importing into it now says the file system is mounted read-only, and reading it still works.
/// Needs a private mount namespace (root, `unshare -m`): ignored with the reason where the
/// machine does not allow one (build.rs looks), and run, failing if it cannot mount, under `CI`.
#[test]
#[cfg_attr(
    not(has_private_mount),
    ignore = "no private read-only mount here (needs root and unshare -m)"
)]
fn a_database_on_a_read_only_file_system_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let script = format!(
        "mount --bind {dir} {dir} && mount -o remount,bind,ro {dir} || exit 99; \
         {bin} --db {db} import -q {input}; echo \"import=$?\"; \
         {bin} --db {db} sql 'SELECT count(*) FROM snapshots' --format csv",
        dir = dir.path().display(),
        bin = binary().display(),
        db = db.display(),
        input = data("figures.json").display(),
    );
    let output = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output();
    let output = output.expect("unshare runs (build.rs found it)");
    assert!(
        output.status.code() != Some(99) && (output.status.success() || !output.stdout.is_empty()),
        "a private read-only mount could not be made: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stdout.contains("import=2"), "{stdout} {stderr}");
    assert!(
        stderr.contains("t.db: the file system holding it") && stderr.contains("mounted read-only"),
        "{stderr}"
    );
    assert!(stdout.contains("count(*)\n1\n"), "{stdout} {stderr}");
}
