//! Answers computed from one or two snapshots: the layout of a memory, the allocations that block
//! a request ([`window`] finds the cheapest place), the out-of-memory verdicts, and the difference
//! between two snapshots. Everything is read through the public views.

pub mod window;

use rusqlite::{params, Connection};
use serde::Serialize;

use crate::dump::figures::{gaps, merge};
use crate::dump::Range;
use crate::error::{Error, Result};
pub use window::{cheapest_window, Window};

fn query_error(error: rusqlite::Error) -> Error {
    Error::Query(error.to_string())
}

/// An allocation as the analyses show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocationInfo {
    pub uid: String,
    pub handle: Option<String>,
    pub kind: String,
    pub state: String,
    pub offset: u64,
    pub size: u64,
    pub provenance: Option<String>,
    pub label: Option<String>,
    /// Client objects whose fields it holds (`object_id (name)`).
    pub objects: Vec<String>,
}

impl AllocationInfo {
    pub fn range(&self) -> Range {
        Range { offset: self.offset, size: self.size }
    }
    fn blocks(&self) -> bool {
        self.state == "valid" || self.state == "pending_alloc"
    }
}

/// One memory at one snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct Layout {
    pub snapshot_id: i64,
    pub memory_id: i64,
    pub run: String,
    pub node: i64,
    pub seq: i64,
    pub handle: String,
    pub kind: String,
    pub capacity: u64,
    pub free_bytes: u64,
    pub largest_hole: u64,
    pub largest_reclaimable: u64,
    pub holes_listed: bool,
    pub holes: Vec<Range>,
    /// Sorted by offset.
    pub allocations: Vec<AllocationInfo>,
}

impl Layout {
    /// Bytes held by neither an allocation nor a listed hole.
    pub fn unaccounted(&self) -> Vec<Range> {
        if !self.holes_listed {
            return Vec::new();
        }
        gaps(&merge(self.allocations.iter().map(AllocationInfo::range).chain(self.holes.iter().copied())), self.capacity)
    }

    /// What neither collection nor pending releases can free: valid and pending_alloc
    /// allocations, and unaccounted bytes. Merged and sorted.
    pub fn unmovable(&self) -> Vec<Range> {
        merge(self.allocations.iter().filter(|allocation| allocation.blocks()).map(AllocationInfo::range).chain(self.unaccounted()))
    }
}

fn to_u64(value: i64) -> u64 {
    value.max(0) as u64
}

/// Read one memory at one snapshot.
pub fn load_layout(conn: &Connection, snapshot_id: i64, memory_id: i64) -> Result<Layout> {
    let mut layout = conn
        .query_row(
            "SELECT s.run, s.node, s.seq, m.handle, m.kind, ms.capacity, ms.free_bytes, ms.largest_hole,
                    ms.largest_reclaimable, ms.holes_listed
             FROM memory_stats ms
             JOIN snapshots s ON s.snapshot_id = ms.snapshot_id
             JOIN memories m ON m.memory_id = ms.memory_id
             WHERE ms.snapshot_id = ?1 AND ms.memory_id = ?2",
            params![snapshot_id, memory_id],
            |row| {
                Ok(Layout {
                    snapshot_id,
                    memory_id,
                    run: row.get(0)?,
                    node: row.get(1)?,
                    seq: row.get(2)?,
                    handle: row.get(3)?,
                    kind: row.get(4)?,
                    capacity: to_u64(row.get(5)?),
                    free_bytes: to_u64(row.get(6)?),
                    largest_hole: to_u64(row.get(7)?),
                    largest_reclaimable: to_u64(row.get(8)?),
                    holes_listed: row.get(9)?,
                    holes: Vec::new(),
                    allocations: Vec::new(),
                })
            },
        )
        .map_err(query_error)?;
    let mut statement = conn
        .prepare(
            "SELECT a.uid, a.handle, a.kind, a.state, a.offset, a.size, a.provenance, a.label,
                    (SELECT group_concat(o.object_id || coalesce(' (' || ob.name || ')', ''), ', ')
                     FROM (SELECT DISTINCT object_id FROM allocation_objects ao WHERE ao.run = ?3 AND ao.uid = a.uid) o
                     LEFT JOIN objects ob ON ob.run = ?3 AND ob.object_id = o.object_id)
             FROM allocations a
             WHERE a.snapshot_id = ?1 AND a.memory_id = ?2
             ORDER BY a.offset, a.size",
        )
        .map_err(query_error)?;
    layout.allocations = statement
        .query_map(params![snapshot_id, memory_id, layout.run], |row| {
            let objects: Option<String> = row.get(8)?;
            Ok(AllocationInfo {
                uid: row.get(0)?,
                handle: row.get(1)?,
                kind: row.get(2)?,
                state: row.get(3)?,
                offset: to_u64(row.get(4)?),
                size: to_u64(row.get(5)?),
                provenance: row.get(6)?,
                label: row.get(7)?,
                objects: objects.map(|text| text.split(", ").map(str::to_string).collect()).unwrap_or_default(),
            })
        })
        .map_err(query_error)?
        .collect::<rusqlite::Result<_>>()
        .map_err(query_error)?;
    let mut statement = conn
        .prepare("SELECT offset, size FROM holes WHERE snapshot_id = ?1 AND memory_id = ?2 ORDER BY offset")
        .map_err(query_error)?;
    layout.holes = statement
        .query_map(params![snapshot_id, memory_id], |row| Ok(Range { offset: to_u64(row.get(0)?), size: to_u64(row.get(1)?) }))
        .map_err(query_error)?
        .collect::<rusqlite::Result<_>>()
        .map_err(query_error)?;
    Ok(layout)
}

/// The cheapest place for a request and what stands in it.
#[derive(Debug, Clone, Serialize)]
pub struct Blockers {
    pub size: u64,
    pub alignment: u64,
    /// The window's start; it ends at `offset + size`.
    pub offset: u64,
    /// Bytes of valid and pending_alloc allocations and unaccounted bytes inside the window.
    pub blocked_bytes: u64,
    /// The contiguous bytes that would be free once the blockers (and everything collectable or
    /// pending release) were gone: the window's surroundings.
    pub opens: u64,
    /// Valid and pending_alloc allocations overlapping the window.
    pub blocking: Vec<AllocationInfo>,
    /// Collectable and pending_free allocations in the window: collection and releases free them.
    pub to_collect: Vec<AllocationInfo>,
    /// Bytes of the window held by the allocator itself.
    pub unaccounted_bytes: u64,
}

fn overlap(a: Range, b: Range) -> u64 {
    a.end().min(b.end()).saturating_sub(a.offset.max(b.offset))
}

/// Where a request of `size` bytes aligned to `alignment` would cost the least, and what blocks it.
pub fn blockers(layout: &Layout, size: u64, alignment: u64) -> Option<Blockers> {
    let unmovable = layout.unmovable();
    let window = cheapest_window(layout.capacity, &unmovable, size, alignment)?;
    let span = Range { offset: window.offset, size };
    let in_window = |allocation: &&AllocationInfo| overlap(allocation.range(), span) > 0;
    let blocking: Vec<AllocationInfo> = layout.allocations.iter().filter(in_window).filter(|a| a.blocks()).cloned().collect();
    let to_collect: Vec<AllocationInfo> = layout.allocations.iter().filter(in_window).filter(|a| !a.blocks()).cloned().collect();
    let unaccounted_bytes = layout.unaccounted().iter().map(|range| overlap(*range, span)).sum();
    // Without the blockers, the window lies in one stretch free of anything unmovable.
    let remaining = merge(
        layout
            .allocations
            .iter()
            .filter(|allocation| allocation.blocks() && overlap(allocation.range(), span) == 0)
            .map(AllocationInfo::range)
            .chain(layout.unaccounted().into_iter().filter(|range| overlap(*range, span) == 0)),
    );
    let opens = gaps(&remaining, layout.capacity)
        .into_iter()
        .find(|gap| gap.offset <= span.offset && gap.end() >= span.end())
        .map(|gap| gap.size)
        .unwrap_or(size);
    Some(Blockers {
        size,
        alignment: alignment.max(1),
        offset: window.offset,
        blocked_bytes: window.blocked_bytes,
        opens,
        blocking,
        to_collect,
        unaccounted_bytes,
    })
}

/// One failed request and what explains it.
#[derive(Debug, Clone, Serialize)]
pub struct OomFinding {
    pub snapshot_id: i64,
    pub run: String,
    pub node: i64,
    pub seq: i64,
    pub memory_id: i64,
    pub handle: String,
    pub memory_kind: String,
    pub size: u64,
    pub alignment: u64,
    pub kind: Option<String>,
    pub provenance: Option<String>,
    pub note: Option<String>,
    pub free_bytes: u64,
    pub largest_hole: u64,
    pub largest_reclaimable: u64,
    /// `exhaustion` (not enough free bytes at all), `fragmentation` (enough free bytes, no hole big
    /// enough) or `fits` (a hole is big enough now).
    pub verdict: &'static str,
    /// Whether collecting every collectable allocation and finishing the pending releases would
    /// make a range big enough.
    pub solved_by_collection: bool,
    pub blockers: Option<Blockers>,
}

/// The findings for every failed request of the given snapshots.
pub fn oom(conn: &Connection, snapshot_ids: &[i64]) -> Result<Vec<OomFinding>> {
    let mut findings = Vec::new();
    let mut statement = conn
        .prepare(
            "SELECT memory_id, size, coalesce(alignment, 1), kind, provenance, note FROM failed_requests
             WHERE snapshot_id = ?1 ORDER BY memory_id, ordinal",
        )
        .map_err(query_error)?;
    for &snapshot_id in snapshot_ids {
        let requests: Vec<(i64, i64, i64, Option<String>, Option<String>, Option<String>)> = statement
            .query_map([snapshot_id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?)))
            .map_err(query_error)?
            .collect::<rusqlite::Result<_>>()
            .map_err(query_error)?;
        for (memory_id, size, alignment, kind, provenance, note) in requests {
            let layout = load_layout(conn, snapshot_id, memory_id)?;
            let (size, alignment) = (to_u64(size), to_u64(alignment).max(1));
            let verdict = if layout.free_bytes < size {
                "exhaustion"
            } else if layout.largest_hole < size {
                "fragmentation"
            } else {
                "fits"
            };
            findings.push(OomFinding {
                snapshot_id,
                run: layout.run.clone(),
                node: layout.node,
                seq: layout.seq,
                memory_id,
                handle: layout.handle.clone(),
                memory_kind: layout.kind.clone(),
                size,
                alignment,
                kind,
                provenance,
                note,
                free_bytes: layout.free_bytes,
                largest_hole: layout.largest_hole,
                largest_reclaimable: layout.largest_reclaimable,
                verdict,
                solved_by_collection: layout.largest_reclaimable >= size,
                blockers: blockers(&layout, size, alignment),
            });
        }
    }
    Ok(findings)
}

/// How an allocation differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// `appeared`, `disappeared` or `changed` (state, place or size).
    pub change: &'static str,
    pub handle: String,
    pub uid: String,
    pub kind: String,
    pub provenance: Option<String>,
    pub size: u64,
    pub offset: u64,
    pub state_before: Option<String>,
    pub state_after: Option<String>,
}

/// Allocations that appeared, disappeared or changed from snapshot `before` to snapshot `after`
/// (matched by memory handle and uid).
pub fn diff(conn: &Connection, before: i64, after: i64) -> Result<Vec<Change>> {
    let load = |snapshot_id: i64| -> Result<std::collections::BTreeMap<(String, String), AllocationInfo>> {
        let mut statement = conn
            .prepare(
                "SELECT m.handle, a.uid, a.kind, a.state, a.offset, a.size, a.provenance
                 FROM allocations a JOIN memories m ON m.memory_id = a.memory_id WHERE a.snapshot_id = ?1",
            )
            .map_err(query_error)?;
        let rows = statement
            .query_map([snapshot_id], |row| {
                let handle: String = row.get(0)?;
                Ok((
                    handle,
                    AllocationInfo {
                        uid: row.get(1)?,
                        handle: None,
                        kind: row.get(2)?,
                        state: row.get(3)?,
                        offset: to_u64(row.get(4)?),
                        size: to_u64(row.get(5)?),
                        provenance: row.get(6)?,
                        label: None,
                        objects: Vec::new(),
                    },
                ))
            })
            .map_err(query_error)?;
        let mut map = std::collections::BTreeMap::new();
        for row in rows {
            let (handle, allocation) = row.map_err(query_error)?;
            map.insert((handle, allocation.uid.clone()), allocation);
        }
        Ok(map)
    };
    let (old, new) = (load(before)?, load(after)?);
    let mut changes = Vec::new();
    let change = |kind: &'static str, handle: &str, shown: &AllocationInfo, before: Option<&AllocationInfo>, after: Option<&AllocationInfo>| Change {
        change: kind,
        handle: handle.to_string(),
        uid: shown.uid.clone(),
        kind: shown.kind.clone(),
        provenance: shown.provenance.clone(),
        size: shown.size,
        offset: shown.offset,
        state_before: before.map(|allocation| allocation.state.clone()),
        state_after: after.map(|allocation| allocation.state.clone()),
    };
    for ((handle, _), allocation) in &old {
        if !new.contains_key(&(handle.clone(), allocation.uid.clone())) {
            changes.push(change("disappeared", handle, allocation, Some(allocation), None));
        }
    }
    for ((handle, uid), allocation) in &new {
        match old.get(&(handle.clone(), uid.clone())) {
            None => changes.push(change("appeared", handle, allocation, None, Some(allocation))),
            Some(earlier) if (earlier.state.as_str(), earlier.offset, earlier.size) != (allocation.state.as_str(), allocation.offset, allocation.size) => {
                changes.push(change("changed", handle, allocation, Some(earlier), Some(allocation)))
            }
            Some(_) => {}
        }
    }
    changes.sort_by(|a, b| (a.handle.as_str(), a.offset, a.uid.as_str()).cmp(&(b.handle.as_str(), b.offset, b.uid.as_str())));
    Ok(changes)
}
