//! The database: the one place where a memstate database is opened.
//!
//! Opening first checks what the file is without writing to it (not SQLite at all, SQLite but not
//! memstate's, written by a newer memstate: each refused and left untouched, see [`schema`]), then
//! brings the schema up to date in one transaction and sets the pragmas (WAL while writing, busy
//! timeout). Readers get a read-only connection, so SQLite itself refuses any write; they can
//! read a database in a read-only folder or on a read-only mount. A writer that is done
//! ([`Database::finish`]) checkpoints and leaves the file in rollback-journal mode, so that
//! plain readers (sqlite3, Datasette, Grafana) open it without creating `-wal`/`-shm` files.
//!
//! The storage behind the public views is private to this module and `migrations/`: [`writer`]
//! writes it, [`spans`] keeps its allocation and hole spans exact, [`legacy`] recognises dumps
//! that memstate 1 imported.

mod deferred;
mod dump_spans;
mod legacy;
mod remove;
mod rows;
pub mod schema;
mod span_tables;
mod spans;
mod stacks;
pub mod writer;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Because, Error, Result};
use deferred::Deferral;

pub use schema::{schema_version, storage_tables, APPLICATION_ID};
pub use writer::{Outcome, Writer};

/// How long a writer waits for another writer before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// An open memstate database.
pub struct Database {
    conn: Connection,
    pub path: PathBuf,
    /// Pages in the file when it was opened for writing (None for readers): a writer that grew
    /// the file by a third or more compacts it when done, see [`Database::finish`].
    pages_at_open: Option<i64>,
    /// When a bulk import defers the secondary indexes (None for readers), see [`deferred`].
    deferral: Option<Deferral>,
}

/// Stops the statement a [`Database`] is running, from any thread: see [`Database::interrupter`].
pub struct Interrupter(rusqlite::InterruptHandle);

impl Interrupter {
    /// Stop the running statement (it fails as interrupted); nothing happens when none runs.
    pub fn interrupt(&self) {
        self.0.interrupt();
    }
}

/// The PRAGMAs [`Database::refuse_state_changes`] lets through: each only describes the schema,
/// the file or SQLite, whatever its argument (a table's name), and sets nothing.
const DESCRIBING_PRAGMAS: &[&str] = &[
    "table_info",
    "table_xinfo",
    "table_list",
    "index_info",
    "index_xinfo",
    "index_list",
    "foreign_key_list",
    "database_list",
    "collation_list",
    "function_list",
    "module_list",
    "pragma_list",
    "compile_options",
    "page_size",
    "page_count",
    "freelist_count",
    "encoding",
    "user_version",
    "application_id",
    "schema_version",
    "data_version",
];

/// A writing session that left a file of at least this many bytes, a third more pages than it
/// found, compacts.
const COMPACT_MIN_BYTES: i64 = 1 << 20;

/// The write-ahead log is copied into the database once it holds this many bytes of pages, not
/// SQLite's default 1,000 pages. Each dump's transaction rewrites most of the pages its spans
/// touch, so with 1,000 pages of 16 KiB a checkpoint followed nearly every dump and wrote the same
/// pages into the file again and again: on the scale bench's 2.2M-row run (50 dumps) the file
/// took 217 MB of checkpoints for a 9.4 MB result; with 128 MiB, 40 MB. The log file grows to
/// this size while importing (readers read it as before) and is folded in and removed when the
/// import ends.
const CHECKPOINT_BYTES: i64 = 128 << 20;

impl Database {
    /// The connection, for the rooms that read (query/, export/). A database opened for reading
    /// hands out a read-only connection, so SQLite itself refuses any write made through it;
    /// writing goes through [`Database::writer`] alone.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The one way to write dumps into this database (import/): `display` names it in messages.
    pub fn writer<'a>(&'a mut self, display: impl Into<String>) -> Writer<'a> {
        Writer::new(&mut self.conn, display)
    }

    /// [`Database::writer`] for a bulk import (`import`, shards, `demo`; not `import --follow`):
    /// once the import is seen to be bulk (a new file, or one grown by a third), it drops the
    /// span tables' secondary indexes, and [`Database::finish`] builds them again (see
    /// migrations/V10__deferred_indexes.sql).
    pub fn bulk_writer<'a>(&'a mut self, display: impl Into<String>) -> Writer<'a> {
        let writer = Writer::new(&mut self.conn, display);
        match self.deferral.as_mut() {
            Some(deferral) => writer.deferring(deferral),
            None => writer,
        }
    }

    /// Give back the memory this connection holds for pages it read or wrote (up to its 8 MiB
    /// cache), for a database left open but idle: a shard writer keeps several shards open, and
    /// their caches together outweighed the import. Pages needed again are read again.
    pub fn release_memory(&self) -> Result<()> {
        self.conn
            .execute_batch("PRAGMA shrink_memory")
            .map_err(|error| Error::database(self.display(), error))
    }

    /// Stop any statement when `stop` says so: SQLite asks it every 10,000 steps of its virtual
    /// machine, and a statement stopped fails as interrupted (a server's time limit).
    pub fn stop_statements_when(
        &mut self,
        stop: impl FnMut() -> bool + Send + 'static,
    ) -> Result<()> {
        let display = self.display();
        self.conn
            .progress_handler(10_000, Some(stop))
            .map_err(|error| Error::database(display, error))
    }

    /// Refuse, when a statement is prepared, whatever would change what later statements on
    /// this connection see: a PRAGMA that sets something (`hard_heap_limit`, `query_only`, ...;
    /// those that only describe the schema or the file may be read), a transaction or savepoint
    /// left open, ATTACH and DETACH. For a server's connections, where the SQL box runs what
    /// anyone sends and the next request must find the connection as it was.
    pub fn refuse_state_changes(&mut self) -> Result<()> {
        use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
        let display = self.display();
        self.conn
            .authorizer(Some(|context: AuthContext<'_>| match context.action {
                AuthAction::Pragma { pragma_name, .. } => {
                    if DESCRIBING_PRAGMAS.contains(&pragma_name.to_ascii_lowercase().as_str()) {
                        Authorization::Allow
                    } else {
                        Authorization::Deny
                    }
                }
                AuthAction::Transaction { .. }
                | AuthAction::Savepoint { .. }
                | AuthAction::Attach { .. }
                | AuthAction::Detach { .. } => Authorization::Deny,
                _ => Authorization::Allow,
            }))
            .map_err(|error| Error::database(display, error))
    }

    /// What stops the statement this database is running from another thread (Ctrl-C).
    pub fn interrupter(&self) -> Interrupter {
        Interrupter(self.conn.get_interrupt_handle())
    }

    /// The path as the user gave it, for messages.
    pub fn display(&self) -> String {
        self.path.display().to_string()
    }

    /// End a writing session: checkpoint the write-ahead log into the file and switch it back to
    /// rollback-journal mode, so readers in read-only places need no `-wal`/`-shm` files. When
    /// another connection is using the file (an importer, a reader) this is left to the last one:
    /// the file stays in WAL mode, which every reader handles too.
    ///
    /// The span ends the session's dumps recorded move into the span tables first (see
    /// migrations/V8__span_ends.sql), and the indexes a bulk import deferred are built (see
    /// migrations/V10__deferred_indexes.sql), out of WAL mode when no other connection is on the
    /// file, so that their new pages are written once. A session that grew the file by a third or more
    /// with its indexes kept up to date (`import --follow`) also rewrites it compactly (VACUUM, a
    /// fraction of a second for tens of MB): the spans that ended land all over their tables and
    /// indexes as they move, which leaves B-tree pages part full; rewritten, the same data takes
    /// about a fifth less (run (i) of the scale bench: 12.1 MB, 9.4 MB after). After a bulk
    /// import only the span tables keep that slack (their pages are about 70% full; on run (i),
    /// 10.7 MB rather than 9.1 MB, 4.8 B an allocation row), and compacting would write the
    /// file three times more (VACUUM into a temporary file, then the log, then the file): it is
    /// left, unless a quarter of the file is free pages. The cost stays in proportion to what
    /// was imported, since the file must have grown by a third each time. When another
    /// connection holds the file, compaction waits for a later session.
    pub fn finish(self) -> Result<()> {
        self.finish_with(true)
    }

    /// [`Database::finish`] without compacting: after Ctrl-C, when the user wants to be done.
    pub fn finish_now(mut self) -> Result<()> {
        self.pages_at_open = None;
        self.finish_with(false)
    }

    fn finish_with(self, compact: bool) -> Result<()> {
        let display = self.display();
        let mut conn = self.conn;
        let db_error = |error| Error::database(&display, error);
        // Indexes a bulk import deferred are built again even when the user stops it: without
        // them a question by uid reads a whole span table. The span ends move first, in WAL
        // mode as every dump was written. Then a writer alone with the file leaves WAL mode
        // (the log is folded into the file, each page once) and builds the indexes in
        // rollback-journal mode: their pages, new at the end of the file, are written once,
        // where in WAL mode each went to the log and then again to the file. On the scale
        // bench's run (i), the import wrote 43.7 MB for a 10.7 MB file that way, 38.9 MB this
        // way. (With another connection on the file, it stays in WAL mode and builds them there.)
        if deferred::any(&conn).map_err(db_error)? {
            unless_busy(
                span_tables::move_all_ends_alone(&mut conn),
                &display,
                "cannot move the recorded span ends",
            )?;
            conn.busy_timeout(Duration::ZERO).map_err(db_error)?;
            let _alone = conn.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()));
            conn.busy_timeout(BUSY_TIMEOUT).map_err(db_error)?;
        }
        let built = build_deferred_indexes(&mut conn, &display)?;
        conn.busy_timeout(Duration::ZERO).map_err(db_error)?;
        if let Some(pages_at_open) = self.pages_at_open.filter(|_| compact) {
            // The ends that this session's dumps recorded move into the span tables, once for the
            // whole import (see migrations/V8__span_ends.sql). When another writer holds the
            // file, a later session moves them; until then the views read them where they are.
            unless_busy(
                span_tables::move_all_ends_alone(&mut conn),
                &display,
                "cannot move the recorded span ends",
            )?;
            let pages: i64 = conn
                .query_row("PRAGMA page_count", [], |row| row.get(0))
                .unwrap_or(0);
            let free: i64 = conn
                .query_row("PRAGMA freelist_count", [], |row| row.get(0))
                .unwrap_or(0);
            let grew = pages.saturating_mul(page_size(&conn)) >= COMPACT_MIN_BYTES
                && pages.saturating_mul(3) >= pages_at_open.saturating_mul(4);
            // Indexes built once are packed already, and the span tables keep their slack (see
            // the comment above): rewriting the whole file for it would write it three times
            // more. Free pages a quarter of the file are worth it still.
            if grew && (!built || free.saturating_mul(4) >= pages) {
                // VACUUM copies the whole database into a temporary one: in a file, not in
                // memory (a copy of a large database would be). FILE, not DEFAULT: the bundled
                // SQLite is built with SQLITE_TEMP_STORE=2, whose default is memory.
                unless_busy(
                    conn.execute_batch("PRAGMA temp_store = FILE; VACUUM"),
                    &display,
                    "cannot compact",
                )?;
            }
        }
        unless_busy(
            conn.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(())),
            &display,
            "cannot leave WAL mode",
        )
    }
}

/// Build the indexes a bulk import deferred (see [`deferred`]), when any wait: the span ends it
/// recorded move into the span tables first (their index entries are then written once, where
/// they end up), then each index is built, in one transaction. Another writer holding the file
/// for longer than the busy timeout leaves it to the next one that opens it.
fn build_deferred_indexes(conn: &mut Connection, display: &str) -> Result<bool> {
    let waiting = deferred::any(conn).map_err(|error| Error::database(display, error))?;
    if !waiting {
        return Ok(false);
    }
    // BEGIN IMMEDIATE waits for another writer as long as the connection's busy timeout. Each
    // index is sorted as it is built: past the page cache's size the sort goes on in temporary
    // files, not in memory (where the cluster bench's run of 10 million rows took its plain
    // import from 180 to 752 MiB), and back to memory for the statements after. FILE, not
    // DEFAULT: the bundled SQLite is built with SQLITE_TEMP_STORE=2, whose default is memory.
    let build = |conn: &mut Connection| -> rusqlite::Result<()> {
        conn.execute_batch("PRAGMA temp_store = FILE")?;
        let built = (|| {
            let transaction =
                conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            span_tables::move_all_ends(&transaction)?;
            deferred::restore(&transaction)?;
            transaction.commit()
        })();
        conn.execute_batch("PRAGMA temp_store = MEMORY")?;
        built
    };
    // Stopped by Ctrl-C (the import interrupts the running statement), the build is left to the
    // next writer too: the dumps are in.
    let built = build(conn).or_else(|error| match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::OperationInterrupted) => Ok(()),
        _ => Err(error),
    });
    unless_busy(built, display, "cannot build the deferred indexes")?;
    deferred::any(conn)
        .map(|waiting| !waiting)
        .map_err(|error| Error::database(display, error))
}

/// A step of [`Database::finish`] that another connection keeps from running (it holds the file)
/// is left to a later session; any other failure is an error.
fn unless_busy(result: rusqlite::Result<()>, display: &str, what: &str) -> Result<()> {
    match result {
        Err(error) if !schema::is_busy(&error) => {
            Err(Error::database(display, Because::context(what, error)))
        }
        _ => Ok(()),
    }
}

/// SQLITE_READONLY_ROLLBACK: a read-only connection met a hot journal (a writer died mid-transaction)
/// that only a writer can roll back.
const READONLY_ROLLBACK: i32 = 776;

/// Whether classifying failed only because a hot journal needs a writer to roll it back.
fn needs_rollback(conn: &Connection) -> bool {
    matches!(conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get::<_, i64>(0)),
        Err(rusqlite::Error::SqliteFailure(failure, _)) if failure.extended_code == READONLY_ROLLBACK)
}

const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Refuse a non-empty file that is not SQLite, without opening it through SQLite at all.
fn check_header(path: &Path) -> Result<()> {
    use std::io::Read;
    let display = path.display().to_string();
    // Look before opening: opening a FIFO waits for a writer, forever.
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => {
            return Err(Error::database(
                display,
                "not a regular file (a FIFO, socket, device or folder); name a database file",
            ))
        }
        _ => {}
    }
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(Error::database(
                display,
                Because::context("cannot open", error),
            ))
        }
    };
    if !file.metadata().map(|meta| meta.is_file()).unwrap_or(false) {
        return Err(Error::database(display, "not a regular file"));
    }
    let mut header = [0u8; 16];
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..]) {
            Ok(0) => break,
            Ok(count) => read += count,
            Err(error) => {
                return Err(Error::database(
                    display,
                    Because::context("cannot read", error),
                ))
            }
        }
    }
    if read == 0 || &header == SQLITE_HEADER {
        Ok(())
    } else {
        Err(Error::database(
            display,
            "not a SQLite database (left untouched)",
        ))
    }
}

fn open_connection(path: &Path, flags: OpenFlags) -> Result<Connection> {
    open_connection_waiting(path, flags, BUSY_TIMEOUT)
}

fn open_connection_waiting(
    path: &Path,
    flags: OpenFlags,
    patience: Duration,
) -> Result<Connection> {
    let display = path.display().to_string();
    let conn = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|error| Error::database(&display, Because::context("cannot open", error)))?;
    conn.busy_timeout(patience)
        .map_err(|error| Error::database(&display, error))?;
    Ok(conn)
}

/// Why a database cannot be written, in the user's terms, when the reason is the file system or
/// permissions (SQLite says only "attempt to write a readonly database" or "cannot switch to WAL
/// mode"): a read-only mount, a file that is not writable, or a folder where SQLite cannot make
/// the `-wal` and `-shm` files it writes beside the database.
fn unwritable(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    let c_path = |path: &Path| std::ffi::CString::new(path.as_os_str().as_bytes()).ok();
    let folder_c = c_path(folder)?;
    // SAFETY: statvfs fills the struct it is given; both pointers are valid for the call.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    let read_only_mount = unsafe { libc::statvfs(folder_c.as_ptr(), &mut stats) } == 0
        && stats.f_flag & libc::ST_RDONLY != 0;
    // SAFETY: access only reads the NUL-terminated path.
    let writable = |path: &std::ffi::CStr| unsafe { libc::access(path.as_ptr(), libc::W_OK) } == 0;
    let file_writable = c_path(path).is_some_and(|file| !path.exists() || writable(&file));
    why_unwritable(read_only_mount, file_writable, writable(&folder_c), folder)
}

/// The message for what [`unwritable`] found (apart, so that each case is tested).
fn why_unwritable(
    read_only_mount: bool,
    file_writable: bool,
    folder_writable: bool,
    folder: &Path,
) -> Option<String> {
    if read_only_mount {
        Some(format!(
            "the file system holding it ({}) is mounted read-only, and importing writes the database (and its -wal and -shm files beside it); copy the database to a writable place, or read it with `memstate sql`/`report`, which open it read-only",
            folder.display()
        ))
    } else if !file_writable {
        Some("the file is not writable (its permissions); importing writes it".to_string())
    } else if !folder_writable {
        Some(format!(
            "its folder {} is not writable, and SQLite writes the -wal and -shm files beside the database there",
            folder.display()
        ))
    } else {
        None
    }
}

/// Switch to WAL mode (concurrent readers while importing). The switch takes a lock SQLite does not
/// wait for by itself, so it is retried for as long as the busy timeout.
fn enter_wal(conn: &Connection, path: &Path, display: &str) -> Result<()> {
    let journal: String = schema::retry_busy(BUSY_TIMEOUT, || {
        conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
    })
    .map_err(|error| {
        Error::database(
            display,
            unwritable(path).unwrap_or_else(|| format!("cannot switch to WAL mode: {error}")),
        )
    })?;
    if !journal.eq_ignore_ascii_case("wal") {
        return Err(Error::database(
            display,
            unwritable(path).unwrap_or_else(|| {
                format!("cannot switch to WAL mode (journal mode stays {journal})")
            }),
        ));
    }
    let checkpoint_pages = CHECKPOINT_BYTES / page_size(conn);
    // The journal of a statement (the pages one statement changed, kept until it ends so that it
    // alone can be undone) stays in memory while importing: on disk it was a temporary file
    // written for each dump, 8 MB on the scale bench's 2.2M-row run. It is a few pages a
    // statement; the compaction that ends an import goes back to files (see `finish_with`).
    conn.execute_batch(&format!(
        "PRAGMA synchronous = NORMAL; PRAGMA cache_size = -8192; PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = {checkpoint_pages};"
    ))
        .map_err(|error| Error::database(display, error))
}

/// The file's page size in bytes: 4 KiB for the files memstate creates, 16 KiB for older ones.
fn page_size(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA page_size", [], |row| row.get::<_, i64>(0))
        .unwrap_or(schema::PAGE_SIZE)
        .max(512)
}

/// Open (creating if needed) the database at `path` for reading and writing, migrated to the
/// newest schema. What is not memstate's is refused before anything is written.
pub fn open(path: &Path) -> Result<Database> {
    let display = path.display().to_string();
    check_header(path)?;
    {
        // Classify through a read-only connection first when the file exists: it cannot write,
        // not even a checkpoint of someone else's write-ahead log when it closes.
        // (A hot journal left by a killed writer cannot be read read-only: the writer below rolls
        // it back, restoring the file's last committed state, and classifies then.)
        if path.exists() {
            let probe = open_connection(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
            if !needs_rollback(&probe) {
                schema::classify(&probe, &display)?;
            }
        }
    }
    let mut conn = open_connection(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
    )?;
    // Counted before any migration: an upgrade that rebuilds a table is a bulk write too.
    let pages_at_open = conn
        .query_row("PRAGMA page_count", [], |row| row.get(0))
        .map_err(|error| Error::database(&display, error))?;
    schema::bring_up_to_date(&mut conn, &display, BUSY_TIMEOUT)?;
    enter_wal(&conn, path, &display)?;
    // A bulk import that was killed left its deferred indexes unbuilt: build them now.
    build_deferred_indexes(&mut conn, &display)?;
    let deferral = Deferral::new(pages_at_open, page_size(&conn));
    Ok(Database {
        conn,
        path: path.to_path_buf(),
        pages_at_open: Some(pages_at_open),
        deferral: Some(deferral),
    })
}

/// `file:` URI of a path, for SQLite's URI parameters.
fn uri(path: &Path, parameters: &str) -> String {
    let encoded = crate::units::percent_escaped(&path.display().to_string(), b"/");
    format!("file:{encoded}?{parameters}")
}

/// Whether the folder holding `path` can be written by this process (a writer could be at work).
fn folder_writable(path: &Path) -> bool {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(text) = std::ffi::CString::new(folder.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // access(2) answers for this process's user and mount (EROFS), which is what SQLite meets.
    // SAFETY: a valid NUL-terminated path that access only reads.
    unsafe { libc::access(text.as_ptr(), libc::W_OK) == 0 }
}

/// Open an existing database so that nothing through this connection can change it: SQLite
/// refuses every write (the connection is opened read-only and cannot attach other databases).
/// An older database is migrated first, through a separate writer; a database in a read-only
/// place is read as it is.
pub fn open_read_only(path: &Path) -> Result<Database> {
    open_read_only_waiting(path, BUSY_TIMEOUT)
}

/// [`open_read_only`], waiting at most `patience` for a writer that holds the file locked (the
/// export gives up soon and says so, rather than wait half a minute per database).
pub fn open_read_only_waiting(path: &Path, patience: Duration) -> Result<Database> {
    let display = path.display().to_string();
    if !path.exists() {
        return Err(Error::database(
            display,
            "no database here; import dumps first (memstate import PATH...) or name one with --db",
        ));
    }
    check_header(path)?;
    let mut conn = open_connection_waiting(path, OpenFlags::SQLITE_OPEN_READ_ONLY, patience)?;
    if needs_rollback(&conn) && folder_writable(path) {
        // A writer died mid-transaction: a short writer connection rolls its journal back.
        drop(conn);
        let writer = open_connection_waiting(path, OpenFlags::SQLITE_OPEN_READ_WRITE, patience)?;
        schema::classify(&writer, &display)?;
        drop(writer);
        conn = open_connection_waiting(path, OpenFlags::SQLITE_OPEN_READ_ONLY, patience)?;
    }
    let found = match schema::classify(&conn, &display) {
        Ok(found) => found,
        Err(error) if !folder_writable(path) => {
            // A database left in WAL mode without its -shm file, in a place nobody can write: no
            // writer can be at work, so it is read as an immutable file, unless a write-ahead log
            // with content is there (that content could not be read without writing).
            let wal = PathBuf::from(format!("{display}-wal"));
            if std::fs::metadata(&wal)
                .map(|meta| meta.len() > 0)
                .unwrap_or(false)
            {
                return Err(Error::database(
                    display,
                    format!("{error}; its write-ahead log ({}) holds changes that can only be read where the folder is writable", wal.display()),
                ));
            }
            conn = Connection::open_with_flags(
                uri(path, "immutable=1"),
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|error| Error::database(&display, Because::context("cannot open", error)))?;
            schema::classify(&conn, &display)?
        }
        Err(error) => return Err(error),
    };
    match found {
        schema::Found::Memstate { version } if version == schema_version() => {}
        schema::Found::New => {
            return Err(Error::database(
                display,
                "an empty database; import dumps first (memstate import PATH...)",
            ));
        }
        schema::Found::HalfMade => {
            return Err(Error::database(display, "holds no data yet (an interrupted first import); import dumps first (memstate import PATH...)"));
        }
        schema::Found::Memstate { version } => {
            // Older: migrate in place through a writer, then read.
            drop(conn);
            let writer = open(path).map_err(|error| match error {
                Error::Database { file, message, source } => Error::Database {
                    file,
                    message: format!("written by an older memstate (schema version {version}) and cannot be upgraded here: {message}"),
                    source,
                },
                other => other,
            })?;
            writer.finish()?;
            conn = open_connection_waiting(path, OpenFlags::SQLITE_OPEN_READ_ONLY, patience)?;
        }
    }
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_ATTACHED, 0)
        .map_err(|error| Error::database(&display, error))?;
    Ok(Database {
        conn,
        path: path.to_path_buf(),
        pages_at_open: None,
        deferral: None,
    })
}

impl Database {
    /// What a file the command writes must not overwrite: this database, its companions and every
    /// dump it recorded as a snapshot's source (see [`crate::files`]).
    pub fn protected(&self) -> Result<crate::files::Protected> {
        let sources = self
            .conn
            .prepare("SELECT DISTINCT source FROM snapshot")
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| row.get::<_, String>(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()
            })
            .map_err(|error| Error::database(self.display(), error))?;
        Ok(crate::files::Protected::new(&self.path, &sources))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritable_database_says_why_in_the_users_terms() {
        let folder = Path::new("/data/run");
        let said = |mount, file, dir| why_unwritable(mount, file, dir, folder);
        assert!(said(true, true, true)
            .is_some_and(|why| why.contains("/data/run) is mounted read-only")));
        assert!(said(false, false, true).is_some_and(|why| why.contains("file is not writable")));
        assert!(said(false, true, false)
            .is_some_and(|why| why.contains("folder /data/run is not writable")));
        assert_eq!(said(false, true, true), None);
    }
}
