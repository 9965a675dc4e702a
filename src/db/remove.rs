//! Removing a snapshot for `import --replace`: its own rows go, and the spans that cover it are
//! cut or joined so that every other snapshot reads exactly as before.

use rusqlite::{params, Connection};

use super::rows::{neighbours, node_memories, set_top_level, top_level};
use super::span_tables::{move_all_ends, AllocationSpans, HoleSpans, SpanTable};
use super::spans;

/// Remove a snapshot and everything that is only its (for `--replace`), keeping the spans exact.
pub(super) fn remove_snapshot(
    conn: &Connection,
    snapshot_id: i64,
    run_id: i64,
    node: i64,
    seq: i64,
) -> rusqlite::Result<()> {
    // The spans are planned against where they are stored: recorded ends move in first.
    move_all_ends(conn)?;
    let (prev, next) = neighbours(conn, run_id, node, seq)?;
    let memory_ids = node_memories(conn, run_id, node)?;
    fn remove<T: SpanTable>(
        conn: &Connection,
        memory_ids: &[i64],
        seq: i64,
        prev: Option<i64>,
        next: Option<i64>,
    ) -> rusqlite::Result<()> {
        let here = T::containing(conn, memory_ids, seq)?;
        let before = match prev {
            Some(prev) => T::containing(conn, memory_ids, prev)?,
            None => Vec::new(),
        };
        let after = match next {
            Some(next) => T::containing(conn, memory_ids, next)?,
            None => Vec::new(),
        };
        T::apply(
            conn,
            &spans::plan_remove(seq, prev, next, &here, &before, &after),
        )
    }
    remove::<AllocationSpans>(conn, &memory_ids, seq, prev, next)?;
    remove::<HoleSpans>(conn, &memory_ids, seq, prev, next)?;
    conn.execute(
        "DELETE FROM failed_request WHERE snapshot_id = ?1",
        [snapshot_id],
    )?;
    conn.execute("DELETE FROM segment WHERE snapshot_id = ?1", [snapshot_id])?;
    conn.execute(
        "DELETE FROM memory_state WHERE snapshot_id = ?1",
        [snapshot_id],
    )?;
    conn.execute("DELETE FROM snapshot WHERE id = ?1", [snapshot_id])?;
    conn.execute(
        "UPDATE snapshot SET ordinal = ordinal - 1 WHERE run_id = ?1 AND node = ?2 AND seq > ?3",
        params![run_id, node, seq],
    )?;
    // Without its first or last snapshot, the node's stretch may fall to a lower level.
    if let Some(top) = top_level(conn, run_id, node, None)? {
        set_top_level(conn, run_id, node, top)?;
    }
    Ok(())
}
