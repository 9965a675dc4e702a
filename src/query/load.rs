//! Loading the analyses' inputs from the public views: a memory's layout at a snapshot, failed
//! requests, a snapshot's allocations for a diff, a figure's series across a run (a memory's
//! history for the page is in [`super::history`]). Every question here is about one snapshot,
//! one memory or one run, and the views answer it through indexes.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::{query_error, MemoryFilter};
use crate::analysis::{cache, AllocationInfo, FailedAt, Layout, OomMark, Placed, Request, Series};
use crate::dump::{Range, State, Unknown};
use crate::error::{Error, Result};

pub(super) fn to_u64(value: i64) -> u64 {
    value.max(0) as u64
}

/// A state read from a view (which only ever shows the four names).
pub(super) fn state(text: &str) -> rusqlite::Result<State> {
    State::parse(text).ok_or_else(|| {
        rusqlite::Error::InvalidColumnType(
            0,
            format!("state {text:?}"),
            rusqlite::types::Type::Text,
        )
    })
}

/// One memory at one snapshot: its figures, holes and allocations (with their client objects).
pub fn layout(conn: &Connection, snapshot_id: i64, memory_id: i64) -> Result<Layout> {
    layout_if_present(conn, snapshot_id, memory_id)?.ok_or_else(|| {
        Error::NotFound(format!(
            "memory {memory_id} is not in snapshot {snapshot_id}"
        ))
    })
}

/// [`layout`], or `None` when the memory is not in the snapshot (new after it, say).
pub fn layout_if_present(
    conn: &Connection,
    snapshot_id: i64,
    memory_id: i64,
) -> Result<Option<Layout>> {
    let present = conn
        .query_row(
            "SELECT 1 FROM memory_stats WHERE snapshot_id = ?1 AND memory_id = ?2",
            params![snapshot_id, memory_id],
            |_| Ok(()),
        )
        .optional()
        .map_err(query_error)?
        .is_some();
    if !present {
        return Ok(None);
    }
    Ok(layouts(conn, snapshot_id, &[memory_id])?.pop())
}

/// Several memories at one snapshot, in the order given: three queries whatever their number
/// (figures, allocations, holes of all of them), not three a memory, so that a node with
/// thousands of memories costs what its rows cost. A memory not in the snapshot is an error.
pub fn layouts(conn: &Connection, snapshot_id: i64, memory_ids: &[i64]) -> Result<Vec<Layout>> {
    load_layouts(conn, snapshot_id, memory_ids, true)
}

/// [`layouts`] without their allocations (figures and holes only), for questions about holes.
pub fn hole_layouts(
    conn: &Connection,
    snapshot_id: i64,
    memory_ids: &[i64],
) -> Result<Vec<Layout>> {
    load_layouts(conn, snapshot_id, memory_ids, false)
}

/// Up to this many memories are read one by one (an index search each); more, all at once with
/// the snapshot's rows filtered (SQLite plans a list of memory ids over the views as a scan of the
/// node's memories: as cheap as one memory's search only for one memory).
const ONE_BY_ONE: usize = 32;

/// The stored `unknown` names, back as flags (a name this build does not know is ignored).
fn unknown_of(text: Option<&str>) -> Unknown {
    let mut unknown = Unknown::default();
    for name in text.unwrap_or("").split(',') {
        let _ = unknown.set(name.trim());
    }
    unknown
}

fn load_layouts(
    conn: &Connection,
    snapshot_id: i64,
    memory_ids: &[i64],
    with_allocations: bool,
) -> Result<Vec<Layout>> {
    if memory_ids.len() > 1 && memory_ids.len() <= ONE_BY_ONE {
        let mut all = Vec::with_capacity(memory_ids.len());
        for &memory_id in memory_ids {
            all.extend(load_layouts(
                conn,
                snapshot_id,
                &[memory_id],
                with_allocations,
            )?);
        }
        return Ok(all);
    }
    let filter = MemoryFilter::of(memory_ids, 2);
    let wanted = &filter.value;
    let mut statement = conn
        .prepare(&format!(
            "SELECT s.run, s.node, s.seq, s.time_ns, m.handle, m.kind, ms.capacity, ms.alignment, ms.free_bytes, ms.largest_hole,
                    ms.largest_reclaimable, ms.holes_listed, s.run_id, ms.memory_id, ms.unknown
             FROM memory_stats ms
             JOIN snapshots s ON s.snapshot_id = ms.snapshot_id
             JOIN memories m ON m.memory_id = ms.memory_id
             WHERE ms.snapshot_id = ?1 AND ms.memory_id {}",
            filter.sql
        ))
        .map_err(query_error)?;
    let mut run_id = 0;
    let mut found: HashMap<i64, Layout> = HashMap::with_capacity(memory_ids.len());
    let rows = statement
        .query_map(params![snapshot_id, wanted], |row| {
            Ok((
                Layout {
                    snapshot_id,
                    memory_id: row.get(13)?,
                    run: row.get(0)?,
                    node: row.get(1)?,
                    seq: row.get(2)?,
                    time_ns: row.get(3)?,
                    handle: row.get(4)?,
                    kind: row.get(5)?,
                    // NULL where the dump did not know (see `unknown`): 0 stands in.
                    capacity: row.get::<_, Option<i64>>(6)?.map_or(0, to_u64),
                    alignment: row.get::<_, Option<i64>>(7)?.map(to_u64),
                    free_bytes: row.get::<_, Option<i64>>(8)?.map_or(0, to_u64),
                    largest_hole: row.get::<_, Option<i64>>(9)?.map_or(0, to_u64),
                    largest_reclaimable: row.get::<_, Option<i64>>(10)?.map_or(0, to_u64),
                    holes_listed: row.get(11)?,
                    holes: Vec::new(),
                    allocations: Vec::new(),
                    unknown: Unknown {
                        holes_listed: row.get(11)?,
                        ..unknown_of(row.get::<_, Option<String>>(14)?.as_deref())
                    },
                },
                row.get::<_, i64>(12)?,
            ))
        })
        .map_err(query_error)?;
    for row in rows {
        let (layout, run) = row.map_err(query_error)?;
        run_id = run;
        found.insert(layout.memory_id, layout);
    }
    if let Some(missing) = memory_ids.iter().find(|id| !found.contains_key(id)) {
        return Err(Error::NotFound(format!(
            "memory {missing} is not in snapshot {snapshot_id}"
        )));
    }
    if with_allocations {
        load_allocations(conn, snapshot_id, &filter, run_id, &mut found)?;
    }
    let mut statement = conn
        .prepare(&format!(
            "SELECT memory_id, offset, size FROM holes WHERE snapshot_id = ?1 AND memory_id {}",
            filter.sql
        ))
        .map_err(query_error)?;
    let rows = statement
        .query_map(params![snapshot_id, wanted], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                Range {
                    offset: to_u64(row.get(1)?),
                    size: to_u64(row.get(2)?),
                },
            ))
        })
        .map_err(query_error)?;
    for row in rows {
        let (memory_id, hole) = row.map_err(query_error)?;
        if let Some(layout) = found.get_mut(&memory_id) {
            layout.holes.push(hole);
        }
    }
    // Sorted here rather than by SQLite: each memory's rows come out of its own spans.
    let mut layouts = Vec::with_capacity(memory_ids.len());
    for memory_id in memory_ids {
        if let Some(mut layout) = found.remove(memory_id) {
            layout
                .allocations
                .sort_by_key(|allocation| (allocation.offset, allocation.size));
            layout.holes.sort_by_key(|hole| hole.offset);
            if layout.unknown.capacity {
                // A stand-in to draw against: the end of what is known to be there.
                layout.capacity = layout
                    .allocations
                    .iter()
                    .map(|allocation| allocation.offset.saturating_add(allocation.size))
                    .max()
                    .unwrap_or(0)
                    .max(1);
            }
            layouts.push(layout);
        }
    }
    Ok(layouts)
}

/// The allocations of the memories `filter` names at one snapshot, into their
/// layouts.
fn load_allocations(
    conn: &Connection,
    snapshot_id: i64,
    filter: &MemoryFilter,
    run_id: i64,
    found: &mut HashMap<i64, Layout>,
) -> Result<()> {
    // The client objects of each allocation, when the run links any (the subquery makes a small
    // temporary table per allocation: most of the time of this query on a run without objects).
    let linked: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM allocation_object WHERE run_id = ?1)",
            [run_id],
            |row| row.get(0),
        )
        .map_err(query_error)?;
    let objects = if linked {
        "(SELECT group_concat(o.object_id || coalesce(' (' || ob.name || ')', ''), ', ')
          FROM (SELECT DISTINCT object_id FROM allocation_objects ao WHERE ao.run_id = ?3 AND ao.uid = a.uid) o
          LEFT JOIN objects ob ON ob.run_id = ?3 AND ob.object_id = o.object_id)"
    } else {
        "NULLIF(?3, ?3)"
    };
    let mut statement = conn
        .prepare(&format!(
            "SELECT a.memory_id, a.uid, a.handle, a.kind, a.state, a.offset, a.size, a.provenance, a.label,
                    {objects}
             FROM allocations a
             WHERE a.snapshot_id = ?1 AND a.memory_id {}",
            filter.sql
        ))
        .map_err(query_error)?;
    let rows = statement
        .query_map(params![snapshot_id, filter.value, run_id], |row| {
            let objects: Option<String> = row.get(9)?;
            Ok((
                row.get::<_, i64>(0)?,
                AllocationInfo {
                    uid: row.get(1)?,
                    handle: row.get(2)?,
                    kind: row.get(3)?,
                    state: state(&row.get::<_, String>(4)?)?,
                    offset: to_u64(row.get(5)?),
                    size: to_u64(row.get(6)?),
                    provenance: row.get(7)?,
                    label: row.get(8)?,
                    objects: objects
                        .map(|text| text.split(", ").map(str::to_string).collect())
                        .unwrap_or_default(),
                },
            ))
        })
        .map_err(query_error)?;
    for row in rows {
        let (memory_id, allocation) = row.map_err(query_error)?;
        if let Some(layout) = found.get_mut(&memory_id) {
            layout.allocations.push(allocation);
        }
    }
    Ok(())
}

/// The layouts of (snapshot, memory) pairs, in their order: one [`layouts`] a snapshot (or
/// [`hole_layouts`], without allocations).
pub fn layouts_of(
    conn: &Connection,
    pairs: &[(i64, i64)],
    with_allocations: bool,
) -> Result<Vec<Layout>> {
    let mut all = Vec::with_capacity(pairs.len());
    for (snapshot_id, memory_ids) in super::select::by_snapshot(pairs) {
        all.extend(load_layouts(
            conn,
            snapshot_id,
            &memory_ids,
            with_allocations,
        )?);
    }
    Ok(all)
}

/// A snapshot's own note, if it has one.
pub fn snapshot_note(conn: &Connection, snapshot_id: i64) -> Result<Option<String>> {
    conn.prepare_cached("SELECT note FROM snapshots WHERE snapshot_id = ?1")
        .and_then(|mut statement| {
            statement
                .query_row([snapshot_id], |row| row.get::<_, Option<String>>(0))
                .optional()
        })
        .map(Option::flatten)
        .map_err(query_error)
}

/// Every failed request of the given snapshots, in order.
pub fn failed_requests(conn: &Connection, snapshot_ids: &[i64]) -> Result<Vec<Request>> {
    let mut statement = conn
        .prepare(
            "SELECT memory_id, size, alignment, kind, provenance, time_ns, note, device_free FROM failed_requests
             WHERE snapshot_id = ?1 ORDER BY memory_id, ordinal",
        )
        .map_err(query_error)?;
    let mut requests = Vec::new();
    for &snapshot_id in snapshot_ids {
        let rows = statement
            .query_map([snapshot_id], |row| {
                Ok(Request {
                    snapshot_id,
                    memory_id: row.get(0)?,
                    size: to_u64(row.get(1)?),
                    alignment: row.get::<_, Option<i64>>(2)?.map(to_u64),
                    kind: row.get(3)?,
                    provenance: row.get(4)?,
                    time_ns: row.get(5)?,
                    note: row.get(6)?,
                    device_free: row.get::<_, Option<i64>>(7)?.map(to_u64),
                })
            })
            .map_err(query_error)?;
        for row in rows {
            requests.push(row.map_err(query_error)?);
        }
    }
    Ok(requests)
}

/// A snapshot's allocations with their memory's handle (what a diff compares). With `other`,
/// a snapshot of the same node, the allocations present and unchanged in both are left out
/// (their stretch of unchanged snapshots holds both): they cannot differ, and a diff of two
/// snapshots of a big run then reads what changed, not everything. A snapshot of another node
/// shares nothing, and leaves everything in.
pub fn placed(conn: &Connection, snapshot_id: i64, other: Option<i64>) -> Result<Vec<Placed>> {
    let mut statement = conn
        .prepare(
            "WITH shared AS MATERIALIZED (
                 SELECT o.seq FROM snapshots s JOIN snapshots o ON o.run_id = s.run_id AND o.node = s.node
                 WHERE s.snapshot_id = ?1 AND o.snapshot_id = ?2)
             SELECT m.handle, a.uid, a.kind, a.state, a.offset, a.size, a.provenance
             FROM allocations a JOIN memories m ON m.memory_id = a.memory_id
             WHERE a.snapshot_id = ?1
               AND NOT EXISTS (SELECT 1 FROM shared WHERE a.span_first_seq <= shared.seq AND shared.seq <= a.span_last_seq)",
        )
        .map_err(query_error)?;
    let rows = statement
        .query_map(rusqlite::params![snapshot_id, other], |row| {
            Ok(Placed {
                handle: row.get(0)?,
                allocation: AllocationInfo {
                    uid: row.get(1)?,
                    handle: None,
                    kind: row.get(2)?,
                    state: state(&row.get::<_, String>(3)?)?,
                    offset: to_u64(row.get(4)?),
                    size: to_u64(row.get(5)?),
                    provenance: row.get(6)?,
                    label: None,
                    objects: Vec::new(),
                },
            })
        })
        .map_err(query_error)?;
    rows.collect::<rusqlite::Result<_>>().map_err(query_error)
}

/// One line per memory of `run` (those `memory_ids` when given) of the figure in column `y` of
/// `memory_trend` against column `x`, and a mark for each `oom` snapshot with the requests that
/// failed there (in any memory of the run, plotted or not).
pub fn trend_series(
    conn: &Connection,
    run: &str,
    memory_ids: Option<&[i64]>,
    y: &str,
    x: &str,
) -> Result<(Vec<Series>, Vec<OomMark>)> {
    let column = y;
    let ids = memory_ids.map(|ids| serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_string()));
    let sql = format!(
        "SELECT node, handle, kind, {x}, {column}, reason FROM memory_trend
         WHERE run = ?1 AND (?2 IS NULL OR memory_id IN (SELECT value FROM json_each(?2)))
         ORDER BY node, handle, seq"
    );
    let mut statement = conn.prepare(&sql).map_err(query_error)?;
    let rows = statement
        .query_map(params![run, ids], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, f64>(3)?,
                row.get::<_, f64>(4)?,
                row.get::<_, String>(5)?,
            ))
        })
        .map_err(query_error)?;
    let mut series: Vec<Series> = Vec::new();
    let mut oom_xs = Vec::new();
    for row in rows {
        let (node, handle, kind, x, y, reason) = row.map_err(query_error)?;
        match series.last_mut() {
            Some(last) if last.node == node && last.handle == handle => last.points.push((x, y)),
            _ => series.push(Series {
                node,
                handle,
                kind,
                points: vec![(x, y)],
            }),
        }
        if reason == "oom" && !oom_xs.contains(&x) {
            oom_xs.push(x);
        }
    }
    let mut statement = conn
        .prepare(&format!(
            "SELECT t.{x}, t.node, t.handle, fr.size FROM failed_requests fr
             JOIN memory_trend t ON t.snapshot_id = fr.snapshot_id AND t.memory_id = fr.memory_id
             WHERE t.run = ?1 ORDER BY t.{x}, fr.ordinal"
        ))
        .map_err(query_error)?;
    let failures = statement
        .query_map([run], |row| {
            Ok((
                row.get::<_, f64>(0)?,
                FailedAt {
                    node: row.get(1)?,
                    handle: row.get(2)?,
                    size: to_u64(row.get(3)?),
                },
            ))
        })
        .map_err(query_error)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(query_error)?;
    let mut marks: Vec<OomMark> = failures
        .into_iter()
        .map(|(x, failed)| OomMark {
            x,
            failed: Some(failed),
        })
        .collect();
    for x in oom_xs {
        if !marks.iter().any(|mark| mark.x == x) {
            marks.push(OomMark { x, failed: None });
        }
    }
    marks.sort_by(|a, b| a.x.total_cmp(&b.x));
    Ok((series, marks))
}

/// The snapshot of the same run and node just before `snapshot_id` (by seq), if any: its id and seq.
pub fn previous_snapshot(conn: &Connection, snapshot_id: i64) -> Result<Option<(i64, i64)>> {
    conn.query_row(
        "SELECT p.snapshot_id, p.seq FROM snapshots s JOIN snapshots p ON p.run_id = s.run_id AND p.node = s.node AND p.seq < s.seq
         WHERE s.snapshot_id = ?1 ORDER BY p.seq DESC LIMIT 1",
        [snapshot_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .map(Some)
    .or_else(|error| match error {
        rusqlite::Error::QueryReturnedNoRows => Ok(None),
        other => Err(query_error(other)),
    })
}

pub use crate::analysis::Recent;

/// A memory's figures at its last `count` snapshots up to and including `snapshot_id`, oldest first.
pub fn recent_figures(
    conn: &Connection,
    memory_id: i64,
    snapshot_id: i64,
    count: u32,
) -> Result<Vec<Recent>> {
    let mut statement = conn
        .prepare(
            "SELECT snapshot_id, seq, time_s, free_bytes, largest_hole FROM memory_trend
             WHERE memory_id = ?1 AND seq <= (SELECT seq FROM snapshots WHERE snapshot_id = ?2)
             ORDER BY seq DESC LIMIT ?3",
        )
        .map_err(query_error)?;
    let rows = statement
        .query_map(params![memory_id, snapshot_id, count], |row| {
            Ok(Recent {
                snapshot_id: row.get(0)?,
                seq: row.get(1)?,
                time_s: row.get(2)?,
                free_bytes: row.get::<_, Option<i64>>(3)?.map(to_u64),
                largest_hole: row.get::<_, Option<i64>>(4)?.map(to_u64),
            })
        })
        .map_err(query_error)?;
    let mut recent: Vec<Recent> = rows.collect::<rusqlite::Result<_>>().map_err(query_error)?;
    recent.reverse();
    Ok(recent)
}

/// The cache a failed request's memory belongs to at a snapshot: the memories of its node whose
/// names share its device word (see [`cache::device_word`]), else the memory alone; `None` when
/// a figure of one of them is unknown.
pub fn cache_of(
    conn: &Connection,
    snapshot_id: i64,
    memory_id: i64,
    device_free: u64,
) -> Result<Option<cache::Cache>> {
    let (name, handle): (Option<String>, String) = conn
        .query_row(
            "SELECT name, handle FROM memories WHERE memory_id = ?1",
            params![memory_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .map_err(query_error)?;
    // A memory carved into segments (a GPU, PyTorch's) is its cache by itself.
    let carved = conn
        .query_row(
            "SELECT count(*), sum(sg.size), sum(CASE WHEN sg.allocated_bytes = 0 THEN sg.size ELSE 0 END),
                    ms.free_bytes, ms.largest_hole
             FROM segment sg JOIN memory_stats ms ON ms.snapshot_id = sg.snapshot_id AND ms.memory_id = sg.memory_id
             WHERE sg.snapshot_id = ?1 AND sg.memory_id = ?2",
            params![snapshot_id, memory_id],
            |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, Option<i64>>(1)?,
                    row.get::<_, Option<i64>>(2)?,
                    row.get::<_, Option<i64>>(3)?,
                    row.get::<_, Option<i64>>(4)?,
                ))
            },
        )
        .map_err(query_error)?;
    if let (count @ 1.., Some(reserved), Some(empty), free, largest) = carved {
        return Ok(free.zip(largest).map(|(free, largest)| cache::Cache {
            device: name.clone().unwrap_or(handle.clone()),
            segments: to_u64(count),
            reserved: to_u64(reserved),
            cache_free: to_u64(free),
            largest_block: to_u64(largest),
            empty_bytes: to_u64(empty),
            device_free,
        }));
    }
    let word = name.as_deref().and_then(cache::device_word);
    // One snapshot's memories (its index), those of the device chosen by name.
    let mut statement = conn
        .prepare(
            "SELECT count(*), count(ms.capacity), count(ms.free_bytes), count(ms.largest_hole),
                    sum(ms.capacity), sum(ms.free_bytes), max(ms.largest_hole),
                    sum(CASE WHEN ms.allocation_count = 0 THEN ms.capacity ELSE 0 END)
             FROM memory_stats ms JOIN memories m ON m.memory_id = ms.memory_id
             WHERE ms.snapshot_id = ?1
               AND CASE WHEN ?2 IS NULL THEN ms.memory_id = ?3
                        ELSE substr(m.name, 1, length(?2) + 1) = ?2 || ' ' END",
        )
        .map_err(query_error)?;
    let figures = statement
        .query_row(params![snapshot_id, word, memory_id], |row| {
            let counts: [i64; 4] = [row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?];
            let known = counts[0] > 0 && counts.iter().all(|&count| count == counts[0]);
            Ok(known.then(|| -> rusqlite::Result<_> {
                Ok((
                    counts[0],
                    row.get::<_, i64>(4)?,
                    row.get::<_, i64>(5)?,
                    row.get::<_, i64>(6)?,
                    row.get::<_, i64>(7)?,
                ))
            }))
        })
        .map_err(query_error)?
        .transpose()
        .map_err(query_error)?;
    Ok(figures.map(
        |(segments, reserved, cache_free, largest_block, empty)| cache::Cache {
            device: word.map_or(handle, str::to_string),
            segments: to_u64(segments),
            reserved: to_u64(reserved),
            cache_free: to_u64(cache_free),
            largest_block: to_u64(largest_block),
            empty_bytes: to_u64(empty),
            device_free,
        },
    ))
}
