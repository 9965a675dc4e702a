//! What a database file holds, and bringing its schema up to date all or nothing.
//!
//! The migrations are refinery's (`migrations/V*.sql`, embedded at build time) and the applied
//! ones are listed in refinery's `refinery_schema_history` table, but they are applied here, not
//! by refinery's runner: refinery creates its history table, runs a migration and records it in
//! three separate transactions, so a process killed in between left a database that no later
//! command could open. Here one `BEGIN IMMEDIATE` transaction holds the history table, every
//! pending migration, its history row, `application_id` and `user_version`: a killed or
//! concurrent creation leaves either nothing or a whole schema.
//!
//! Classifying a file only reads it, so a file that is not memstate's is left byte for byte as
//! it was. A memstate database is recognised by its application id and schema history only.

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OptionalExtension};

use super::span_tables::{AllocationSpans, HoleSpans, SpanTable};
use crate::error::{Because, Error, Result};

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// `PRAGMA application_id` of a memstate database: "mems".
pub const APPLICATION_ID: i32 = 0x6d65_6d73;

const HISTORY: &str = "refinery_schema_history";

/// The page size of a new file: SQLite's default. Each dump's transaction writes every page it
/// changes into the write-ahead log, and a dump changes a few rows on many pages (a span whose
/// state changed sits beside its uid's older spans in the uid index). With pages of 16 KiB the
/// scale bench's 2.2M-row run wrote 215 MB for a 9.4 MB file; with 4 KiB, 131 MB for a 9.1 MB
/// file, in the same time.
pub(super) const PAGE_SIZE: i64 = 4096;

/// One embedded migration.
#[derive(Debug, Clone)]
pub struct Migration {
    pub version: i64,
    pub name: String,
    pub sql: String,
    pub checksum: u64,
}

/// The embedded migrations, oldest first.
pub fn migrations() -> &'static [Migration] {
    static ALL: OnceLock<Vec<Migration>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<Migration> = embedded::migrations::runner()
            .get_migrations()
            .iter()
            .map(|migration| Migration {
                version: i64::from(migration.version()),
                name: migration.name().to_string(),
                sql: migration.sql().unwrap_or_default().to_string(),
                checksum: migration.checksum(),
            })
            .collect();
        all.sort_by_key(|migration| migration.version);
        all
    })
}

/// The schema version this build writes: the newest embedded migration.
pub fn schema_version() -> i64 {
    migrations()
        .last()
        .map(|migration| migration.version)
        .unwrap_or(0)
}

/// The schema every migration leaves, as one script a new file runs instead of the migrations
/// one after another: each object's statement (tables, their indexes, views), then the rows the
/// migrations put in `span_level` and `sqlite_stat1`. Run one by one, the migrations cost 30 ms
/// of parsing (each rename or changed view makes SQLite read the whole schema again), paid by
/// every new database, each shard of a shard import included; this script costs a tenth.
///
/// It is generated from the migrations, and a test holds it to what they leave
/// (`MEMSTATE_BLESS=1 cargo test --release --lib final_schema` writes it again after a new
/// migration). Its first line names the version it was made at: a build whose newest migration
/// is another runs the migrations.
const FINAL_SCHEMA: &str = include_str!("final_schema.sql");

/// [`FINAL_SCHEMA`], when it was made at this build's schema version.
fn final_schema() -> Option<&'static str> {
    let version = FINAL_SCHEMA
        .lines()
        .next()?
        .strip_prefix("-- schema version ")?
        .trim()
        .parse::<i64>()
        .ok()?;
    (version == schema_version()).then_some(FINAL_SCHEMA)
}

/// What a file turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No schema at all: a new or empty file.
    New,
    /// A memstate database at this version.
    Memstate { version: i64 },
    /// A memstate schema that an interrupted first import of an older memstate left behind: part
    /// of memstate's tables and views, no data, no application id. It is rebuilt.
    HalfMade,
}

fn read_error(display: &str) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |error| Error::database(display, Because::context("cannot read the database", error))
}

/// The names of every table, view and index any prefix of the migrations creates (the objects a
/// half-made schema may hold), found by running the migrations on an in-memory database.
fn known_objects() -> &'static BTreeSet<String> {
    static KNOWN: OnceLock<BTreeSet<String>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let mut known = BTreeSet::from([HISTORY.to_string()]);
        if let Ok(conn) = Connection::open_in_memory() {
            for migration in migrations() {
                if conn.execute_batch(&migration.sql).is_err() {
                    break;
                }
                if let Ok(names) = object_names(&conn) {
                    known.extend(names.into_iter().map(|(_, name)| name));
                }
            }
        }
        known
    })
}

/// Views that are private storage too: they give the stored spans their recorded ends (see
/// migrations/V8__span_ends.sql), under the names the span tables had, for the public views.
const STORAGE_VIEWS: [&str; 2] = [AllocationSpans::TABLE, HoleSpans::TABLE];

/// The private storage tables and views of the current schema (and the migration history): what
/// readers such as Datasette should hide, found by running the migrations on an in-memory
/// database.
pub fn storage_tables() -> Vec<String> {
    let mut tables = vec![HISTORY.to_string()];
    if let Ok(conn) = Connection::open_in_memory() {
        let applied = migrations()
            .iter()
            .all(|migration| conn.execute_batch(&migration.sql).is_ok());
        if applied {
            if let Ok(names) = object_names(&conn) {
                tables.extend(
                    names
                        .into_iter()
                        .filter(|(kind, name)| {
                            kind == "table" || STORAGE_VIEWS.contains(&name.as_str())
                        })
                        .map(|(_, name)| name),
                );
            }
        }
    }
    tables.sort();
    tables
}

/// (type, name) of every schema object but SQLite's own.
fn object_names(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut statement = conn.prepare("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// The history rows (version, name), read without trusting their types.
fn history(conn: &Connection) -> rusqlite::Result<Vec<(Option<i64>, Option<String>)>> {
    let mut statement = conn.prepare(&format!(
        "SELECT version, name FROM {HISTORY} ORDER BY version"
    ))?;
    let rows = statement.query_map([], |row| {
        let version = match row.get_ref(0)? {
            rusqlite::types::ValueRef::Integer(version) => Some(version),
            _ => None,
        };
        let name = match row.get_ref(1)? {
            rusqlite::types::ValueRef::Text(text) => {
                Some(String::from_utf8_lossy(text).into_owned())
            }
            _ => None,
        };
        Ok((version, name))
    })?;
    rows.collect()
}

/// Whether every history row names one of the embedded migrations.
fn history_is_ours(rows: &[(Option<i64>, Option<String>)]) -> bool {
    rows.iter().all(|(version, name)| {
        migrations().iter().any(|migration| {
            Some(migration.version) == *version && name.as_deref() == Some(migration.name.as_str())
        })
    })
}

fn foreign(display: &str, why: String) -> Error {
    Error::database(display, format!("{why}; left untouched"))
}

/// Classify an open database by reading it (nothing is written). A database from a newer
/// memstate, or that is not memstate's, is refused with an error that says which. All reads see
/// one snapshot of the file (another process may be creating it at the same moment).
pub fn classify(conn: &Connection, display: &str) -> Result<Found> {
    if !conn.is_autocommit() {
        return classify_now(conn, display);
    }
    conn.execute_batch("BEGIN DEFERRED")
        .map_err(read_error(display))?;
    let found = classify_now(conn, display);
    let _ = conn.execute_batch("COMMIT");
    found
}

fn classify_now(conn: &Connection, display: &str) -> Result<Found> {
    let error = read_error(display);
    let application_id: i32 = conn
        .query_row("PRAGMA application_id", [], |row| row.get(0))
        .map_err(&error)?;
    let user_version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(&error)?;
    let objects = object_names(conn).map_err(&error)?;
    let shown = || {
        let names: Vec<&str> = objects
            .iter()
            .map(|(_, name)| name.as_str())
            .take(5)
            .collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    if objects.is_empty() {
        return if application_id == 0 || application_id == APPLICATION_ID {
            Ok(Found::New)
        } else {
            Err(foreign(display, format!("an empty SQLite database of another application (application id {application_id:#x})")))
        };
    }
    let has_history = objects
        .iter()
        .any(|(kind, name)| kind == "table" && name == HISTORY);
    let rows = if has_history {
        history(conn).map_err(&error)?
    } else {
        Vec::new()
    };
    let latest = schema_version();
    if application_id == APPLICATION_ID {
        let recorded = rows.iter().filter_map(|(version, _)| *version).max();
        let newest = recorded.unwrap_or(0).max(user_version);
        if newest > latest {
            return Err(Error::database(
                display,
                format!(
                    "written by a newer memstate (schema version {newest}; this memstate knows up to {latest}); upgrade memstate to read it (left untouched)"
                ),
            ));
        }
        if let Some(version) = recorded.filter(|_| history_is_ours(&rows)) {
            return Ok(Found::Memstate { version });
        }
    } else if application_id != 0 {
        return Err(foreign(display, format!("a SQLite database, but not a memstate database (application id {application_id:#x}, tables: {})", shown())));
    }
    // No application id (or no usable history): only a schema that memstate itself left half made,
    // holding no data, is taken over.
    let known = known_objects();
    if let Some((_, stranger)) = objects.iter().find(|(_, name)| !known.contains(name)) {
        return Err(foreign(
            display,
            format!(
                "a SQLite database, but not a memstate database (it has {stranger:?}; tables: {})",
                shown()
            ),
        ));
    }
    if !history_is_ours(&rows) {
        return Err(foreign(display, format!("a SQLite database, but not a memstate database (foreign schema history; tables: {})", shown())));
    }
    for (kind, name) in &objects {
        if kind == "table" && name != HISTORY && name != "span_level" {
            let holds_data: bool = conn
                .query_row(
                    &format!("SELECT EXISTS (SELECT 1 FROM \"{name}\")"),
                    [],
                    |row| row.get(0),
                )
                .map_err(&error)?;
            if holds_data {
                return Err(foreign(display, format!("a damaged memstate database: its table {name} holds data but the schema is not marked as memstate's")));
            }
        }
    }
    Ok(Found::HalfMade)
}

/// Whether `error` is SQLite's "database is locked" (another connection holds the file).
pub(super) fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(failure, _) if matches!(failure.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Run `step` until it does not fail with "database is locked" or `patience` has passed. SQLite
/// does not call the busy handler for every lock (changing the journal mode, for one), so the
/// callers that meet those locks retry here.
pub fn retry_busy<T>(
    patience: Duration,
    mut step: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        match step() {
            Err(error) if is_busy(&error) && started.elapsed() < patience => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// Bring the schema up to date in one transaction: create it in a new or half-made file, or apply
/// the pending migrations to an older one. Another process doing the same at the same moment
/// waits for the write lock and then finds the work done.
pub fn bring_up_to_date(conn: &mut Connection, display: &str, patience: Duration) -> Result<()> {
    let latest = schema_version();
    match classify(conn, display)? {
        Found::Memstate { version } if version == latest => return Ok(()),
        Found::New => {
            // Only settable before the first table.
            conn.execute_batch(&format!("PRAGMA page_size = {PAGE_SIZE};"))
                .map_err(|error| Error::database(display, error))?;
        }
        _ => {}
    }
    let db_error = |error: rusqlite::Error| {
        Error::database(
            display,
            Because::context("cannot create or upgrade the schema", error),
        )
    };
    retry_busy(patience, || conn.execute_batch("BEGIN IMMEDIATE")).map_err(db_error)?;
    let result = (|| -> Result<()> {
        // With the write lock held, look again: another process may have done it meanwhile.
        let from = match classify(conn, display)? {
            Found::Memstate { version } => version,
            Found::New => 0,
            Found::HalfMade => {
                drop_everything(conn).map_err(db_error)?;
                0
            }
        };
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {HISTORY} (version INT4 PRIMARY KEY, name VARCHAR(255), applied_on VARCHAR(255), checksum VARCHAR(255));"
        ))
        .map_err(db_error)?;
        let pending: Vec<&Migration> = migrations()
            .iter()
            .filter(|migration| migration.version > from)
            .collect();
        // A file with no schema takes the final one at once; an older one, each migration it
        // lacks. Either way every migration is recorded.
        match final_schema().filter(|_| from == 0) {
            Some(script) => conn.execute_batch(script).map_err(db_error)?,
            None => {
                for migration in &pending {
                    conn.execute_batch(&migration.sql).map_err(|error| {
                        Error::database(
                            display,
                            format!(
                                "cannot apply migration V{}__{}: {error}",
                                migration.version, migration.name
                            ),
                        )
                    })?;
                }
            }
        }
        for migration in &pending {
            conn.execute(
                &format!("INSERT INTO {HISTORY} (version, name, applied_on, checksum) VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?3)"),
                rusqlite::params![migration.version, migration.name, migration.checksum.to_string()],
            )
            .map_err(db_error)?;
        }
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {latest};"
        ))
        .map_err(db_error)?;
        Ok(())
    })();
    match result {
        Ok(()) => conn.execute_batch("COMMIT").map_err(db_error),
        Err(error) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(error)
        }
    }
}

/// Remove a half-made schema (it holds no data): views first, then tables with their indexes.
fn drop_everything(conn: &Connection) -> rusqlite::Result<()> {
    let objects = object_names(conn)?;
    for (kind, name) in objects.iter().filter(|(kind, _)| kind == "view") {
        conn.execute_batch(&format!(
            "DROP {} IF EXISTS \"{name}\";",
            kind.to_uppercase()
        ))?;
    }
    for (_, name) in objects.iter().filter(|(kind, _)| kind == "table") {
        conn.execute_batch(&format!("DROP TABLE IF EXISTS \"{name}\";"))?;
    }
    Ok(())
}

/// The schema version recorded in a memstate database (for messages and tests).
pub fn recorded_version(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.query_row(&format!("SELECT max(version) FROM {HISTORY}"), [], |row| {
        row.get(0)
    })
    .optional()
    .map(Option::flatten)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema the migrations leave in an empty database, written as [`FINAL_SCHEMA`] is.
    fn script_of(conn: &Connection) -> String {
        let lines = |sql: &str| -> Vec<String> {
            let mut statement = conn.prepare(sql).unwrap();
            let rows = statement.query_map([], |row| row.get(0)).unwrap();
            rows.map(Result::unwrap).collect()
        };
        let mut script = format!(
            "-- schema version {}\n-- Generated from migrations/ by the test final_schema_is_what_the_migrations_leave\n-- (src/db/schema.rs): not edited by hand.\n\n",
            schema_version()
        );
        for statement in lines(
            "SELECT sql FROM sqlite_master
             WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
             ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, rowid",
        ) {
            script.push_str(&statement);
            script.push_str(";\n\n");
        }
        for row in lines(
            "SELECT 'INSERT INTO span_level (level, reach) VALUES (' || level || ', ' || reach || ');'
             FROM span_level ORDER BY level",
        ) {
            script.push_str(&row);
            script.push('\n');
        }
        // sqlite_stat1 cannot be created by name: analysing a table makes it.
        script.push_str("\nANALYZE span_level;\nDELETE FROM sqlite_stat1;\n");
        for row in lines(
            "SELECT 'INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES (' || quote(tbl) || ', ' || quote(idx) || ', ' || quote(stat) || ');'
             FROM sqlite_stat1 ORDER BY rowid",
        ) {
            script.push_str(&row);
            script.push('\n');
        }
        script
    }

    fn migrated() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        for migration in migrations() {
            conn.execute_batch(&migration.sql).unwrap();
        }
        conn
    }

    /// Everything a schema holds but the history: its objects and the rows of the tables the
    /// migrations fill.
    fn everything(conn: &Connection) -> Vec<String> {
        let mut all = Vec::new();
        for sql in [
            "SELECT type || ' ' || name || ' on ' || tbl_name || ': ' || coalesce(sql, '') FROM sqlite_master
             WHERE tbl_name <> 'refinery_schema_history'",
            "SELECT 'level ' || level || ' ' || reach FROM span_level",
            "SELECT 'stat ' || tbl || ' ' || coalesce(idx, '-') || ' ' || stat FROM sqlite_stat1",
        ] {
            let mut statement = conn.prepare(sql).unwrap();
            let rows = statement.query_map([], |row| row.get::<_, String>(0)).unwrap();
            all.extend(rows.map(Result::unwrap));
        }
        all.sort();
        all
    }

    /// The script is what the migrations leave, and running it gives a database with the same
    /// objects (by type, name, table and statement) and rows as running them. With
    /// MEMSTATE_BLESS set, a stale script is written again instead.
    #[test]
    fn final_schema_is_what_the_migrations_leave() {
        let from_migrations = migrated();
        let expected = script_of(&from_migrations);
        if FINAL_SCHEMA != expected {
            if std::env::var_os("MEMSTATE_BLESS").is_some() {
                let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/db/final_schema.sql");
                std::fs::write(path, &expected).unwrap();
                return;
            }
            panic!("src/db/final_schema.sql is stale: MEMSTATE_BLESS=1 cargo test --release --lib final_schema");
        }
        assert!(final_schema().is_some(), "made at this schema version");
        let from_script = Connection::open_in_memory().unwrap();
        from_script.execute_batch(FINAL_SCHEMA).unwrap();
        assert_eq!(everything(&from_script), everything(&from_migrations));
        assert!(everything(&from_script).len() > 80);
    }

    /// A new file made through the script is recorded with every migration in its history and
    /// is found up to date.
    #[test]
    fn a_new_file_is_made_at_once_and_recorded_as_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let mut conn = Connection::open(&path).unwrap();
        bring_up_to_date(&mut conn, "new.db", Duration::from_secs(1)).unwrap();
        let versions: Vec<i64> = conn
            .prepare(&format!("SELECT version FROM {HISTORY} ORDER BY version"))
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let all: Vec<i64> = migrations()
            .iter()
            .map(|migration| migration.version)
            .collect();
        assert_eq!(versions, all);
        assert_eq!(
            classify(&conn, "new.db").unwrap(),
            Found::Memstate {
                version: schema_version()
            }
        );
        assert_eq!(everything(&conn), everything(&migrated()));
    }
}
