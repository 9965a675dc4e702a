//! How the dump model becomes stored values: ids and sizes as SQLite integers, an allocation's
//! span attributes, a memory's figures. Shared by the importer and by the check of snapshots an
//! older memstate stored, so that both compute exactly what is written.

use rusqlite::types::Value;
use rusqlite::{params, Connection};

use super::span_tables::{AllocationAttrs, OptionalAttrs};
use crate::dump::{Allocation, Memory, MemoryFigures};

/// The 64-bit pattern of an id, as SQLite stores it.
pub(super) fn id_bits(id: u64) -> i64 {
    id as i64
}

/// Sizes are below 2^63 by validation.
pub(super) fn size_bits(size: u64) -> i64 {
    size as i64
}

/// A stored allocation's attributes, its texts given as string ids.
pub(super) fn allocation_attrs(
    allocation: &Allocation,
    kind: i64,
    provenance: Option<i64>,
    label: Option<i64>,
    stack: Option<i64>,
) -> AllocationAttrs {
    AllocationAttrs::new(
        size_bits(allocation.offset),
        size_bits(allocation.size),
        allocation.state.code() as u8, // 0 to 3
        kind,
        OptionalAttrs {
            handle: allocation.handle().map(id_bits),
            alignment: allocation.alignment().map(size_bits),
            created_ns: allocation.created_ns(),
            provenance,
            label,
            gc_priority: allocation.gc_priority(),
            stack,
        },
        allocation.attrs().map(str::to_string),
    )
}

/// A memory's stored figures at a snapshot, in the order of `memory_state`'s columns after its
/// key (capacity to holes_listed).
pub(super) fn figure_values(memory: &Memory, figures: &MemoryFigures) -> [Value; 13] {
    [
        Value::Integer(size_bits(figures.capacity)),
        memory.alignment.map_or(Value::Null, |alignment| {
            Value::Integer(size_bits(alignment))
        }),
        Value::Integer(size_bits(figures.allocation_count)),
        Value::Integer(size_bits(figures.used_bytes)),
        Value::Integer(size_bits(figures.free_bytes)),
        Value::Integer(size_bits(figures.hole_count)),
        Value::Integer(size_bits(figures.largest_hole)),
        Value::Real(figures.fragmentation),
        Value::Integer(size_bits(figures.reclaimable_bytes)),
        Value::Integer(size_bits(figures.largest_reclaimable)),
        Value::Integer(size_bits(figures.unaccounted_bytes)),
        Value::Integer(i64::from(memory.listed_holes.is_some())),
        memory.unknown.text().map_or(Value::Null, Value::Text),
    ]
}

/// Every memory a node has had.
pub(super) fn node_memories(
    conn: &Connection,
    run_id: i64,
    node: i64,
) -> rusqlite::Result<Vec<i64>> {
    let mut statement =
        conn.prepare_cached("SELECT id FROM memory WHERE run_id = ?1 AND node = ?2 ORDER BY id")?;
    let rows = statement.query_map(params![run_id, node], |row| row.get(0))?;
    rows.collect()
}

/// The imported seqs of a node just before and just after `seq`.
pub(super) fn neighbours(
    conn: &Connection,
    run_id: i64,
    node: i64,
    seq: i64,
) -> rusqlite::Result<(Option<i64>, Option<i64>)> {
    conn.query_row(
        "SELECT (SELECT max(seq) FROM snapshot WHERE run_id = ?1 AND node = ?2 AND seq < ?3),
                (SELECT min(seq) FROM snapshot WHERE run_id = ?1 AND node = ?2 AND seq > ?3)",
        params![run_id, node, seq],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

/// The highest level a closed span of a node can have: the level of the stretch from its first
/// seq to its last (migrations/V9__node_levels.sql), with `also` (a seq about to be added)
/// counted among them. `None` for a node with no snapshot.
pub(super) fn top_level(
    conn: &Connection,
    run_id: i64,
    node: i64,
    also: Option<i64>,
) -> rusqlite::Result<Option<i64>> {
    // Two subqueries: SQLite finds a lone min() or max() with one search of the index, but
    // reads every row of the node for both in one SELECT.
    let (first, last): (Option<i64>, Option<i64>) = conn.query_row(
        "SELECT (SELECT min(seq) FROM snapshot WHERE run_id = ?1 AND node = ?2),
                (SELECT max(seq) FROM snapshot WHERE run_id = ?1 AND node = ?2)",
        params![run_id, node],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    let first = first.into_iter().chain(also).min();
    let last = last.into_iter().chain(also).max();
    Ok(first
        .zip(last)
        .map(|(first, last)| super::spans::level(first, Some(last))))
}

/// Give every snapshot row of a node the top level `top` (those that have another).
pub(super) fn set_top_level(
    conn: &Connection,
    run_id: i64,
    node: i64,
    top: i64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE snapshot SET top_level = ?3 WHERE run_id = ?1 AND node = ?2 AND top_level <> ?3",
    )?
    .execute(params![run_id, node, top])?;
    Ok(())
}
