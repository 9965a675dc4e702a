//! Turning the user's snapshot and memory selectors into ids, through the public views.
//!
//! A snapshot selector is `latest` (each node's latest snapshot, in every run), a snapshot id, or
//! `RUN:NODE:SEQ`. A memory selector is a Realm memory id (`0x1e00000000000003` or the bare
//! `1e00000000000003`) or a kind (`GPU_FB_MEM`: every memory of that kind).

use rusqlite::{params, Connection};

use crate::dump::parse::parse_id_text;
use crate::error::{Error, Result};

fn query_error(error: rusqlite::Error) -> Error {
    Error::Query(error.to_string())
}

fn ids(conn: &Connection, sql: &str, parameters: impl rusqlite::Params) -> Result<Vec<i64>> {
    let mut statement = conn.prepare(sql).map_err(query_error)?;
    let rows = statement.query_map(parameters, |row| row.get(0)).map_err(query_error)?;
    rows.collect::<rusqlite::Result<Vec<i64>>>().map_err(query_error)
}

/// The snapshot ids a selector names, in (run, node, seq) order. Never empty.
pub fn snapshots(conn: &Connection, selector: &str) -> Result<Vec<i64>> {
    let found = if selector == "latest" {
        ids(
            conn,
            "SELECT snapshot_id FROM snapshots s
             WHERE seq = (SELECT max(seq) FROM snapshots t WHERE t.run_id = s.run_id AND t.node = s.node)
             ORDER BY run, node",
            [],
        )?
    } else if let Ok(id) = selector.parse::<i64>() {
        ids(conn, "SELECT snapshot_id FROM snapshots WHERE snapshot_id = ?1", [id])?
    } else {
        let mut parts = selector.rsplitn(3, ':');
        let (seq, node, run) = (parts.next(), parts.next(), parts.next());
        match (run, node.and_then(|node| node.parse::<i64>().ok()), seq.and_then(|seq| seq.parse::<i64>().ok())) {
            (Some(run), Some(node), Some(seq)) => ids(
                conn,
                "SELECT snapshot_id FROM snapshots WHERE run = ?1 AND node = ?2 AND seq = ?3",
                params![run, node, seq],
            )?,
            _ => {
                return Err(Error::Usage(format!(
                    "snapshot {selector:?}: expected latest, a snapshot id, or RUN:NODE:SEQ"
                )))
            }
        }
    };
    if found.is_empty() {
        return Err(Error::Usage(format!("no snapshot matches {selector:?} (see memstate snapshots)")));
    }
    Ok(found)
}

/// The memory ids of a snapshot that a selector names (all of them without a selector).
pub fn memories(conn: &Connection, snapshot_id: i64, selector: Option<&str>) -> Result<Vec<i64>> {
    let all = "SELECT m.memory_id FROM memory_stats ms JOIN memories m ON m.memory_id = ms.memory_id
               WHERE ms.snapshot_id = ?1";
    match selector {
        None => ids(conn, &format!("{all} ORDER BY m.handle"), [snapshot_id]),
        Some(text) => match memory_handle(text) {
            Some(handle) => ids(conn, &format!("{all} AND m.handle = ?2 ORDER BY m.handle"), params![snapshot_id, handle]),
            None => ids(conn, &format!("{all} AND m.kind = ?2 ORDER BY m.handle"), params![snapshot_id, text]),
        },
    }
}

/// The snapshot ids from `low` to `high` (inclusive).
pub fn snapshots_between(conn: &Connection, low: i64, high: i64) -> Result<Vec<i64>> {
    ids(conn, "SELECT snapshot_id FROM snapshots WHERE snapshot_id BETWEEN ?1 AND ?2 ORDER BY snapshot_id", [low, high])
}

/// The canonical handle a memory selector names, when it is an id rather than a kind: `0x` and
/// hex digits, or 16 bare hex digits as Realm prints them (so a kind like `FACE` stays a kind).
pub fn memory_handle(selector: &str) -> Option<String> {
    parse_id_text(selector)
        .filter(|_| selector.starts_with("0x") || selector.starts_with("0X") || selector.len() == 16)
        .map(crate::dump::format_id)
}
