//! Helpers shared by the integration tests: the binary, fixtures, mutations of the example dump,
//! and a snapshot of everything a database holds (to prove a refused input changed nothing).

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;

/// The `memstate` binary under test, with no database chosen from the environment.
pub fn memstate() -> assert_cmd::Command {
    let mut command =
        assert_cmd::Command::cargo_bin("memstate").expect("the memstate binary is built");
    command.env_remove("MEMSTATE_DB");
    command
}

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The design's example dump (tests/data/small.json, a copy of shared/design/examples/small.json).
pub fn small() -> Value {
    let text = std::fs::read_to_string(data("small.json")).expect("small.json is readable");
    serde_json::from_str(&text).expect("small.json is JSON")
}

/// Set the value at a JSON pointer, adding the member when the parent object lacks it.
pub fn set(mut value: Value, pointer: &str, new: Value) -> Value {
    if let Some(slot) = value.pointer_mut(pointer) {
        *slot = new;
        return value;
    }
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer with a parent");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(key.to_string(), new);
        }
        Some(Value::Array(items)) if key.parse::<usize>().ok() == Some(items.len()) => {
            items.push(new)
        }
        _ => panic!("{parent} is a container in the fixture"),
    }
    value
}

/// Remove the member at a JSON pointer.
pub fn remove(mut value: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer with a parent");
    let parent = value
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("{parent} exists in the fixture"));
    match parent {
        Value::Object(map) => {
            map.remove(key)
                .unwrap_or_else(|| panic!("{pointer} exists in the fixture"));
        }
        Value::Array(items) => {
            items.remove(key.parse::<usize>().expect("an array index"));
        }
        _ => panic!("{pointer}: parent is not a container"),
    }
    value
}

pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a test file");
    path
}

pub fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    write(
        dir,
        name,
        serde_json::to_string_pretty(value)
            .expect("serialise")
            .as_bytes(),
    )
}

/// Every row of every table of a database, as text: equal before and after means unchanged.
pub fn contents(db: &Path) -> String {
    let conn = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open the test database");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .and_then(|mut statement| statement.query_map([], |row| row.get(0))?.collect())
        .expect("list tables");
    let mut text = String::new();
    for table in tables {
        if table == "refinery_schema_history" {
            continue;
        }
        let mut statement = conn
            .prepare(&format!("SELECT * FROM \"{table}\" ORDER BY 1, 2"))
            .expect("select");
        let width = statement.column_count();
        let rows = statement
            .query_map([], |row| {
                (0..width)
                    .map(|index| {
                        row.get::<_, rusqlite::types::Value>(index)
                            .map(|value| format!("{value:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .expect("query")
            .collect::<Result<Vec<_>, _>>()
            .expect("rows");
        text.push_str(&format!("{table}: {rows:?}\n"));
    }
    text
}

/// One value from the database.
pub fn scalar<T: rusqlite::types::FromSql>(db: &Path, sql: &str) -> T {
    let conn = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open the test database");
    conn.query_row(sql, [], |row| row.get(0))
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
}

/// Import files into a database, asserting the exit status; returns stdout.
/// memstate on a database: `memstate --db DB`, arguments to follow.
pub fn on_db(db: impl AsRef<std::ffi::OsStr>) -> assert_cmd::Command {
    let mut command = memstate();
    command.arg("--db").arg(db);
    command
}

pub fn import(db: &Path, paths: &[&Path], expected_status: i32) -> String {
    let output = on_db(db)
        .arg("import")
        .args(paths)
        .output()
        .expect("run memstate");
    assert_eq!(
        output.status.code(),
        Some(expected_status),
        "import {paths:?}: stdout {} stderr {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Whether a program the test needs is on this machine. When it is not, the test says it was
/// skipped and why (and returns early); when `CI` is set it fails instead (.ci/run installs it).
pub fn have(program: &str, why: &str) -> bool {
    let found = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false);
    needed(found, program, why)
}

/// Whether python3 can import `modules` (`"pandas, matplotlib"`), skipped or failing as [`have`].
pub fn python_with(modules: &str, why: &str) -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false);
    needed(found, &format!("python3 with {modules}"), why)
}

pub fn needed(found: bool, what: &str, why: &str) -> bool {
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} is needed {why}; .ci/run installs it"
        );
        eprintln!("SKIPPED: {what} is not installed (needed {why}); .ci/run installs it");
    }
    found
}

/// Run a program, which must succeed; its output (the failure shows what it said on stderr).
pub fn succeeds(command: &mut std::process::Command) -> std::process::Output {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A command's rows in JSON (`--format json`), which must succeed.
pub fn json_of(db: &Path, args: &[&str]) -> Value {
    let output = on_db(db)
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| panic!("{args:?}: {error}"))
}

/// A command's output for people, which must succeed.
pub fn text_of(db: &Path, args: &[&str]) -> String {
    let output = on_db(db).args(args).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Simulate a run into `dir/run` and import it into `dir/t.db` (which must succeed); returns the
/// database.
pub fn simulated_db(dir: &Path, config: &memstate::sim::Config) -> PathBuf {
    let folder = dir.join("run");
    memstate::sim::simulate(config, &folder, &mut |_| {}).expect("simulate");
    let db = dir.join("t.db");
    import(&db, &[&folder], 0);
    db
}

/// A simulated run of 800 steps on 4 GPUs imported into `dir/t.db`: a file of about 2 MB, past
/// the sizes under which an import counts it as new (1 MiB) and never compacts it.
pub fn simulated_db_past_a_mebibyte(dir: &Path) -> PathBuf {
    let db = simulated_db(
        dir,
        &memstate::sim::Config {
            steps: 800,
            gpus_per_node: 4,
            continue_after_oom: true,
            ..Default::default()
        },
    );
    let size = std::fs::metadata(&db).expect("the database").len();
    assert!(size > 3 << 19, "the run is too small ({size} bytes)");
    db
}

/// Every `-- @TAG ...` declaration line of the canned queries (queries/ and queries/portable/):
/// the file, the line, and the words after the tag.
pub fn query_declarations(tag: &str) -> Vec<(PathBuf, String, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("queries");
    let mut found = Vec::new();
    for folder in [root.clone(), root.join("portable")] {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|ext| ext != "sql") {
                continue;
            }
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                if let Some(rest) = line.trim_start_matches("--").trim().strip_prefix(tag) {
                    let words = rest.split_whitespace().map(str::to_string).collect();
                    found.push((path.clone(), line.to_string(), words));
                }
            }
        }
    }
    found
}
