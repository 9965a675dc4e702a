//! Snapshots imported by memstate 1 carry a content digest this memstate cannot recompute (it
//! depended on the order of allocations). When such a dump is imported again, what is stored is
//! compared with what the dump would store instead, and a match gets the current digest.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension};

use super::rows::{allocation_attrs, figure_values, id_bits, node_memories, size_bits};
use super::span_tables::{AllocationAttrs, AllocationSpans, HoleSpans, SpanTable};
use crate::dump::{Prepared, Sym};

/// Whether a stored snapshot holds what `prepared` would store: the snapshot's own fields, each
/// memory's figures, allocations, holes and failed requests. (Descriptions of memories and objects
/// are kept per run, not per snapshot, so they are not compared.) Nothing is written.
pub(super) fn stored_matches(
    conn: &Connection,
    snapshot_id: i64,
    run_id: i64,
    node: i64,
    prepared: &Prepared,
) -> rusqlite::Result<bool> {
    let dump = &prepared.dump;
    // Texts to their ids, without interning: a text the database lacks cannot be stored.
    let mut ids: Vec<Option<i64>> = Vec::with_capacity(dump.strings.len());
    let mut find = conn.prepare_cached("SELECT id FROM string WHERE value = ?1")?;
    for text in &dump.strings {
        ids.push(find.query_row([text], |row| row.get(0)).optional()?);
    }
    let sym = |sym: Sym| ids[sym.0 as usize];
    let opt = |value: Option<Sym>| value.map(|value| ids[value.0 as usize]);
    let text_id = |value: Option<Sym>| -> Option<Option<i64>> {
        match value {
            None => Some(None),
            Some(value) => ids[value.0 as usize].map(Some),
        }
    };
    type SnapshotRow = (
        i64,
        Option<String>,
        String,
        Option<i64>,
        Option<i64>,
        Option<String>,
        Option<i64>,
        i64,
    );
    let stored: SnapshotRow = conn.query_row(
        "SELECT time_ns, wall_time, reason, note, producer, host, pid, format_version FROM snapshot WHERE id = ?1",
        [snapshot_id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?, row.get(6)?, row.get(7)?)),
    )?;
    let (Some(note), Some(producer)) = (text_id(dump.snapshot.note), text_id(dump.producer)) else {
        return Ok(false);
    };
    let wanted: SnapshotRow = (
        dump.snapshot.time_ns,
        dump.snapshot.wall_time.clone(),
        dump.snapshot.reason.as_str().to_string(),
        note,
        producer,
        dump.run.host.clone(),
        dump.run.pid,
        i64::from(dump.version),
    );
    if stored != wanted {
        return Ok(false);
    }
    // Memories and their figures.
    let mut memories: HashMap<i64, (i64, Vec<rusqlite::types::Value>)> = HashMap::new();
    let mut statement = conn.prepare(
        "SELECT m.handle, m.id, ms.capacity, ms.alignment, ms.allocation_count, ms.used_bytes, ms.free_bytes, ms.hole_count,
                ms.largest_hole, ms.fragmentation, ms.reclaimable_bytes, ms.largest_reclaimable, ms.unaccounted_bytes, ms.holes_listed, ms.unknown
         FROM memory_state ms JOIN memory m ON m.id = ms.memory_id WHERE ms.snapshot_id = ?1",
    )?;
    let mut rows = statement.query([snapshot_id])?;
    while let Some(row) = rows.next()? {
        let figures = (2..15)
            .map(|index| row.get::<_, rusqlite::types::Value>(index))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        memories.insert(row.get(0)?, (row.get(1)?, figures));
    }
    if memories.len() != dump.memories.len() {
        return Ok(false);
    }
    let mut wanted_allocations = Vec::new();
    let mut wanted_holes = Vec::new();
    for ((memory, figures), holes) in dump
        .memories
        .iter()
        .zip(&prepared.figures)
        .zip(&prepared.holes)
    {
        let Some((memory_id, stored)) = memories.get(&id_bits(memory.id)) else {
            return Ok(false);
        };
        if stored[..] != figure_values(memory, figures)[..] {
            return Ok(false);
        }
        for allocation in &memory.allocations {
            let (Some(kind), Some(provenance), Some(label)) = (
                sym(allocation.kind),
                text_id(allocation.provenance),
                text_id(allocation.label),
            ) else {
                return Ok(false);
            };
            wanted_allocations.push((
                (*memory_id, id_bits(allocation.uid)),
                // An older memstate stored no stack: a dump with one is not the same.
                allocation_attrs(
                    allocation,
                    kind,
                    provenance,
                    label,
                    allocation.stack().map(|_| -1),
                ),
            ));
        }
        wanted_holes.extend(
            holes
                .iter()
                .map(|hole| ((*memory_id, size_bits(hole.offset)), size_bits(hole.size))),
        );
    }
    let seq = dump.snapshot.seq;
    let memory_ids = node_memories(conn, run_id, node)?;
    let stored_allocations: Vec<((i64, i64), AllocationAttrs)> =
        AllocationSpans::containing(conn, &memory_ids, seq)?
            .into_iter()
            .map(|(key, span)| (key, span.attrs))
            .collect();
    let stored_holes: Vec<((i64, i64), i64)> = HoleSpans::containing(conn, &memory_ids, seq)?
        .into_iter()
        .map(|(key, span)| (key, span.attrs))
        .collect();
    wanted_allocations.sort_by_key(|(key, _)| *key);
    wanted_holes.sort_by_key(|(key, _)| *key);
    if stored_allocations != wanted_allocations || stored_holes != wanted_holes {
        return Ok(false);
    }
    // Failed requests, in order.
    let mut statement = conn.prepare(
        "SELECT memory_id, size, alignment, kind, provenance, time_ns, note, device_free FROM failed_request WHERE snapshot_id = ?1 ORDER BY memory_id, ordinal",
    )?;
    type RequestRow = (
        i64,
        i64,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
    );
    let stored: Vec<RequestRow> = statement
        .query_map([snapshot_id], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
                row.get(6)?,
                row.get(7)?,
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut wanted: Vec<RequestRow> = Vec::new();
    for memory in &dump.memories {
        let memory_id = memories[&id_bits(memory.id)].0;
        for request in &memory.failed_requests {
            if [request.kind, request.provenance, request.note]
                .iter()
                .any(|value| text_id(*value).is_none())
            {
                return Ok(false);
            }
            wanted.push((
                memory_id,
                size_bits(request.size),
                request.alignment.map(size_bits),
                opt(request.kind).flatten(),
                opt(request.provenance).flatten(),
                request.time_ns,
                opt(request.note).flatten(),
                request.device_free.map(size_bits),
            ));
        }
    }
    wanted.sort_by_key(|row| row.0);
    Ok(stored == wanted)
}
