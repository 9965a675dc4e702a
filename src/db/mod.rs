//! The database: the one place where a memstate database is opened.
//!
//! Opening checks what the file is before anything writes to it (not SQLite at all, SQLite but not
//! memstate's, written by a newer memstate: each refused and left untouched), then sets the pragmas
//! (WAL, busy timeout) and runs the refinery migrations from `migrations/`. Readers that must not
//! write get a second, read-only connection, so SQLite itself refuses any write.

pub mod import;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};

pub use import::{Importer, Outcome};

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// `PRAGMA application_id` of a memstate database: "mems".
pub const APPLICATION_ID: i32 = 0x6d65_6d73;

/// How long a writer waits for another writer before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The schema version this build writes: the newest embedded migration.
pub fn schema_version() -> i64 {
    embedded::migrations::runner().get_migrations().iter().map(|migration| i64::from(migration.version())).max().unwrap_or(0)
}

/// An open memstate database.
pub struct Database {
    pub conn: Connection,
    pub path: PathBuf,
}

impl Database {
    /// The path as the user gave it, for messages.
    pub fn display(&self) -> String {
        self.path.display().to_string()
    }
}

/// What a file turned out to be before it was opened for writing.
enum Found {
    New,
    Memstate { version: i64 },
}

const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Refuse a non-empty file that is not SQLite, without opening it through SQLite at all.
fn check_header(path: &Path) -> Result<()> {
    use std::io::Read;
    let display = path.display().to_string();
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(Error::database(display, format!("cannot open: {error}"))),
    };
    let mut header = [0u8; 16];
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..]) {
            Ok(0) => break,
            Ok(count) => read += count,
            Err(error) => return Err(Error::database(display, format!("cannot read: {error}"))),
        }
    }
    if read == 0 || &header == SQLITE_HEADER {
        Ok(())
    } else {
        Err(Error::database(display, "not a SQLite database (left untouched)"))
    }
}

/// Inspect an opened connection without writing: is it new, memstate's (which version), or foreign?
fn inspect(conn: &Connection, display: &str) -> Result<Found> {
    let sql_error = |error: rusqlite::Error| Error::database(display, format!("cannot read the database: {error}"));
    let application_id: i32 = conn.query_row("PRAGMA application_id", [], |row| row.get(0)).map_err(sql_error)?;
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .and_then(|mut statement| statement.query_map([], |row| row.get(0))?.collect())
        .map_err(sql_error)?;
    let has_history = tables.iter().any(|name| name == "refinery_schema_history");
    if application_id == 0 && tables.is_empty() {
        return Ok(Found::New);
    }
    if application_id != APPLICATION_ID && !(application_id == 0 && has_history && tables.iter().any(|name| name == "snapshot")) {
        let shown: Vec<&str> = tables.iter().map(String::as_str).take(5).collect();
        return Err(Error::database(
            display,
            format!(
                "a SQLite database, but not a memstate database (application id {application_id:#x}, tables: {}); left untouched",
                if shown.is_empty() { "none".to_string() } else { shown.join(", ") }
            ),
        ));
    }
    let version: i64 = if has_history {
        conn.query_row("SELECT max(version) FROM refinery_schema_history", [], |row| row.get::<_, Option<i64>>(0))
            .map_err(sql_error)?
            .unwrap_or(0)
    } else {
        0
    };
    Ok(Found::Memstate { version })
}

fn refuse_newer(version: i64, display: &str) -> Result<()> {
    let known = schema_version();
    if version > known {
        return Err(Error::database(
            display,
            format!(
                "written by a newer memstate (schema version {version}; this memstate knows up to {known}); upgrade memstate to read it (left untouched)"
            ),
        ));
    }
    Ok(())
}

fn set_pragmas(conn: &Connection, display: &str) -> Result<()> {
    let journal: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(|error| Error::database(display, format!("cannot switch to WAL mode: {error}")))?;
    if !journal.eq_ignore_ascii_case("wal") {
        return Err(Error::database(display, format!("cannot switch to WAL mode (journal mode stays {journal})")));
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA cache_size = -16384; PRAGMA temp_store = MEMORY;")
        .map_err(|error| Error::database(display, error))
}

/// Open (creating if needed) the database at `path` for reading and writing, migrated to the
/// newest schema.
pub fn open(path: &Path) -> Result<Database> {
    let display = path.display().to_string();
    check_header(path)?;
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|error| Error::database(&display, format!("cannot open: {error}")))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|error| Error::database(&display, error))?;
    let found = inspect(&conn, &display)?;
    if let Found::Memstate { version } = found {
        refuse_newer(version, &display)?;
    }
    if matches!(found, Found::New) {
        // Larger pages make bulk inserts of allocation rows cheaper; only settable before the
        // first table exists.
        conn.execute_batch("PRAGMA page_size = 16384;").map_err(|error| Error::database(&display, error))?;
    }
    set_pragmas(&conn, &display)?;
    migrate(&mut conn, &display)?;
    Ok(Database { conn, path: path.to_path_buf() })
}

/// Bring the schema up to date. Two processes may create the same new database at once; the one
/// that loses the race finds the migrations applied and carries on.
fn migrate(conn: &mut Connection, display: &str) -> Result<()> {
    let current = match inspect(conn, display)? {
        Found::New => 0,
        Found::Memstate { version } => version,
    };
    if current < schema_version() {
        if let Err(error) = embedded::migrations::runner().run(conn) {
            std::thread::sleep(Duration::from_millis(200));
            match inspect(conn, display)? {
                Found::Memstate { version } if version >= schema_version() => {}
                _ => return Err(Error::database(display, format!("cannot migrate the schema: {error}"))),
            }
        }
    }
    let version = schema_version();
    conn.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {version};"))
        .map_err(|error| Error::database(display, error))
}

/// Open an existing database so that nothing through this connection can change it: SQLite
/// refuses every write (the connection is opened read-only and cannot attach other databases).
/// An older database is migrated first, through a separate read-write connection.
pub fn open_read_only(path: &Path) -> Result<Database> {
    let display = path.display().to_string();
    if !path.exists() {
        return Err(Error::database(
            display,
            "no database here; import dumps first (memstate import PATH...) or name one with --db",
        ));
    }
    check_header(path)?;
    {
        let probe = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(|error| Error::database(&display, format!("cannot open: {error}")))?;
        probe.busy_timeout(BUSY_TIMEOUT).map_err(|error| Error::database(&display, error))?;
        match inspect(&probe, &display)? {
            Found::Memstate { version } if version == schema_version() => {}
            Found::Memstate { version } if version > schema_version() => refuse_newer(version, &display)?,
            Found::New => {
                return Err(Error::database(display, "an empty database; import dumps first (memstate import PATH...)"))
            }
            // Older: migrate in place through a writer, then read.
            Found::Memstate { .. } => drop(open(path)?),
        }
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|error| Error::database(&display, format!("cannot open: {error}")))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|error| Error::database(&display, error))?;
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_ATTACHED, 0)
        .map_err(|error| Error::database(&display, error))?;
    Ok(Database { conn, path: path.to_path_buf() })
}
