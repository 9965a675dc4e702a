//! Secondary indexes that a bulk import drops while it writes and builds again when it is done
//! (see migrations/V10__deferred_indexes.sql): [`Deferral`] decides when, [`defer`] drops and
//! records them, [`restore`] builds them again from the record.

use rusqlite::{Connection, OptionalExtension};

/// The indexes a bulk import defers: those whose keys each dump's new spans scatter over the
/// whole index (a uid, an offset) or over long runs of it (a kind, a state). The others (the
/// snapshot and memory-state indexes) grow at their end and stay.
pub const DEFERRABLE: [&str; 4] = [
    "allocation_span_by_uid",
    "allocation_span_by_kind",
    "allocation_span_by_state",
    "hole_span_by_offset",
];

/// Below this many bytes at open, a file counts as new: nothing a reader needs an index for.
const NEW_FILE_BYTES: i64 = 1 << 20;

/// When a writing session defers the indexes: once the file it writes is new or has grown by a
/// third since it was opened, the import is bulk, and building the indexes once costs less than
/// keeping them up to date dump by dump.
#[derive(Debug, Clone, Copy)]
pub struct Deferral {
    pages_at_open: i64,
    page_size: i64,
    /// Set once this session's deferral is committed, or found done by another writer.
    done: bool,
}

impl Deferral {
    pub fn new(pages_at_open: i64, page_size: i64) -> Self {
        Deferral {
            pages_at_open,
            page_size,
            done: false,
        }
    }

    /// Whether the next dump's transaction should defer the indexes.
    pub fn due(&self, conn: &Connection) -> rusqlite::Result<bool> {
        if self.done {
            return Ok(false);
        }
        if self.pages_at_open.saturating_mul(self.page_size) < NEW_FILE_BYTES {
            return Ok(true);
        }
        let pages: i64 = conn.query_row("PRAGMA page_count", [], |row| row.get(0))?;
        Ok(pages.saturating_mul(3) >= self.pages_at_open.saturating_mul(4))
    }

    /// The deferral was committed with a dump: not asked again this session.
    pub fn done(&mut self) {
        self.done = true;
    }
}

/// Drop the deferrable indexes that exist, recording each (statement and statistics) in
/// `deferred_index`, within the transaction `conn` is in.
pub fn defer(conn: &Connection) -> rusqlite::Result<()> {
    for name in DEFERRABLE {
        let Some((table, sql)) = conn
            .query_row(
                "SELECT tbl_name, sql FROM sqlite_schema WHERE type = 'index' AND name = ?1",
                [name],
                |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)),
            )
            .optional()?
        else {
            continue;
        };
        let stat: Option<String> = conn
            .query_row(
                "SELECT stat FROM sqlite_stat1 WHERE idx = ?1",
                [name],
                |row| row.get(0),
            )
            .optional()?;
        conn.execute(
            "INSERT OR REPLACE INTO deferred_index (name, tbl, sql, stat) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![name, table, sql, stat],
        )?;
        conn.execute_batch(&format!("DROP INDEX \"{name}\""))?;
    }
    Ok(())
}

/// Whether any index waits to be built again.
pub fn any(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row("SELECT EXISTS (SELECT 1 FROM deferred_index)", [], |row| {
        row.get(0)
    })
}

/// Build every recorded index again, with its statistics, and forget the record, within the
/// transaction `conn` is in. Each index is built from its table sorted, so its pages are full and
/// written once.
pub fn restore(conn: &Connection) -> rusqlite::Result<()> {
    let deferred: Vec<(String, String, String, Option<String>)> = {
        let mut statement =
            conn.prepare("SELECT name, tbl, sql, stat FROM deferred_index ORDER BY name")?;
        let rows = statement.query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (name, table, sql, stat) in deferred {
        let exists: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = ?1)",
            [&name],
            |row| row.get(0),
        )?;
        if !exists {
            conn.execute_batch(&sql)?;
        }
        if let Some(stat) = stat {
            conn.execute("DELETE FROM sqlite_stat1 WHERE idx = ?1", [&name])?;
            conn.execute(
                "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES (?1, ?2, ?3)",
                rusqlite::params![table, name, stat],
            )?;
        }
        conn.execute("DELETE FROM deferred_index WHERE name = ?1", [&name])?;
    }
    Ok(())
}
