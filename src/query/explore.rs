//! The questions a live explorer asks (`memstate serve`), each about what one screen shows: the
//! snapshots and failures after the last one seen, one snapshot's memories a page at a time, one
//! memory's figures over time, what lies in an address range at a snapshot (in at most so many
//! bins), and the first rows of the user's own SQL. Each reads one snapshot, one memory or the
//! snapshots table through the views' indexes, so its cost follows the screen, not the run.

use rusqlite::{params, Connection};
use serde::Serialize;

use super::{collect, query_error};
use crate::analysis::bins::AddressBins;
use crate::error::{Error, Result};
use crate::present::Table;

/// The snapshots imported after `since` (a snapshot id; 0 for all), in run, node and seq order,
/// each with how many requests failed in it.
pub fn snapshots_since(conn: &Connection, since: i64) -> Result<Table> {
    collect(
        conn,
        "SELECT s.snapshot_id, s.run, s.node, s.seq, s.time_s, s.reason,
                (SELECT count(*) FROM failed_requests f WHERE f.snapshot_id = s.snapshot_id) AS failed
         FROM snapshots s WHERE s.snapshot_id > :since ORDER BY s.run, s.node, s.seq",
        &[("since".to_string(), since.to_string())],
    )
}

/// The failed requests of the snapshots imported after `since`.
pub fn failures_since(conn: &Connection, since: i64) -> Result<Table> {
    collect(
        conn,
        "SELECT f.snapshot_id, s.run, s.node, s.seq, f.memory_id, m.handle, m.kind, f.size
         FROM failed_requests f JOIN snapshots s ON s.snapshot_id = f.snapshot_id
              JOIN memories m ON m.memory_id = f.memory_id
         WHERE f.snapshot_id > :since ORDER BY f.snapshot_id, f.memory_id",
        &[("since".to_string(), since.to_string())],
    )
}

/// One snapshot's memories with their figures: those where a request failed first (the failing
/// device of a PyTorch OOM), then the most fragmented (then by id), `limit` of them from
/// `offset`; and how many the snapshot holds (a snapshot id a selector resolved).
pub fn memories_at(
    conn: &Connection,
    snapshot_id: i64,
    limit: u64,
    offset: u64,
) -> Result<(Table, u64)> {
    let total: i64 = conn
        .query_row(
            "SELECT count(*) FROM memory_stats WHERE snapshot_id = ?1",
            [snapshot_id],
            |row| row.get(0),
        )
        .map_err(query_error)?;
    let table = collect(
        conn,
        "SELECT st.memory_id, m.node, m.handle, m.kind, m.name, st.capacity, st.used_bytes,
                st.free_bytes, st.largest_hole, st.fragmentation, st.allocation_count, st.hole_count
         FROM memory_stats st JOIN memories m ON m.memory_id = st.memory_id
         WHERE st.snapshot_id = :snapshot
         ORDER BY EXISTS (SELECT 1 FROM failed_requests f
                          WHERE f.snapshot_id = st.snapshot_id AND f.memory_id = st.memory_id) DESC,
                  st.fragmentation IS NULL, st.fragmentation DESC, st.memory_id
         LIMIT :limit OFFSET :offset",
        &[
            ("snapshot".to_string(), snapshot_id.to_string()),
            ("limit".to_string(), limit.to_string()),
            ("offset".to_string(), offset.to_string()),
        ],
    )?;
    Ok((table, u64::try_from(total).unwrap_or(0)))
}

/// One memory's figures at each of its snapshots, in time order.
pub fn trend(conn: &Connection, memory_id: i64) -> Result<Table> {
    memory_handle(conn, memory_id)?;
    collect(
        conn,
        "SELECT snapshot_id, seq, time_s, reason, capacity, used_bytes, free_bytes, largest_hole,
                fragmentation, reclaimable_bytes
         FROM memory_trend WHERE memory_id = :memory ORDER BY seq",
        &[("memory".to_string(), memory_id.to_string())],
    )
}

/// A memory's handle, or not found.
pub fn memory_handle(conn: &Connection, memory_id: i64) -> Result<String> {
    use rusqlite::OptionalExtension;
    conn.query_row(
        "SELECT handle FROM memories WHERE memory_id = ?1",
        [memory_id],
        |row| row.get(0),
    )
    .optional()
    .map_err(query_error)?
    .ok_or_else(|| {
        Error::NotFound(format!(
            "no memory has the id {memory_id} (see memstate memories)"
        ))
    })
}

/// The memory with `handle` on the node of `snapshot_id`, or not found.
pub fn memory_at(conn: &Connection, snapshot_id: i64, handle: &str) -> Result<i64> {
    use rusqlite::OptionalExtension;
    conn.query_row(
        "SELECT m.memory_id FROM memories m JOIN snapshots s ON s.run = m.run AND s.node = m.node
         WHERE s.snapshot_id = ?1 AND m.handle = ?2",
        params![snapshot_id, handle],
        |row| row.get(0),
    )
    .optional()
    .map_err(query_error)?
    .ok_or_else(|| {
        Error::NotFound(format!(
            "no memory {handle} on the node of snapshot {snapshot_id}"
        ))
    })
}

/// What lies in an address range of a memory at a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    pub snapshot_id: i64,
    pub memory_id: i64,
    pub capacity: Option<u64>,
    /// The range asked about, cut to the capacity when it is known.
    pub from: u64,
    pub to: u64,
    /// How many allocations and holes reach into it.
    pub allocation_count: u64,
    pub hole_count: u64,
    /// Each of them, when there are at most as many as bins (else empty).
    pub allocations: Vec<WindowAllocation>,
    pub holes: Vec<(u64, u64)>,
    /// Else the range in equal bins: each bin's allocated bytes by state (valid, collectable,
    /// pending_free, pending_alloc) and free bytes.
    pub bins: Option<WindowBins>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowAllocation {
    pub uid: String,
    pub offset: u64,
    pub size: u64,
    pub state: String,
    pub kind: String,
    pub provenance: Option<String>,
    pub label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowBins {
    pub width: f64,
    /// Per bin: bytes of each state, then free bytes.
    pub bytes: Vec<[f64; 5]>,
}

/// What lies in `[from, to)` of `memory_id` at `snapshot_id`: every allocation and hole when
/// there are at most `bins` of them, else the range cut into `bins` equal bins. Read in one pass
/// over the memory's rows at that snapshot (an index lookup), nothing kept beyond the answer.
pub fn window(
    conn: &Connection,
    snapshot_id: i64,
    memory_id: i64,
    from: u64,
    to: u64,
    bins: usize,
) -> Result<Window> {
    use rusqlite::OptionalExtension;
    let capacity: Option<Option<i64>> = conn
        .query_row(
            "SELECT capacity FROM memory_stats WHERE snapshot_id = ?1 AND memory_id = ?2",
            params![snapshot_id, memory_id],
            |row| row.get(0),
        )
        .optional()
        .map_err(query_error)?;
    let Some(capacity) = capacity else {
        return Err(Error::NotFound(format!(
            "memory {memory_id} is not in snapshot {snapshot_id}"
        )));
    };
    let capacity = capacity.and_then(|capacity| u64::try_from(capacity).ok());
    let to = capacity.map_or(to, |capacity| to.min(capacity.max(from + 1)));
    let (low, high) = (clamp_i64(from), clamp_i64(to));
    let mut window = Window {
        snapshot_id,
        memory_id,
        capacity,
        from,
        to,
        allocation_count: 0,
        hole_count: 0,
        allocations: Vec::new(),
        holes: Vec::new(),
        bins: None,
    };
    let address = AddressBins::new(to - from, bins);
    let mut binned = vec![[0f64; 5]; address.count];
    let mut spread = |offset: u64, size: u64, slot: usize| {
        let start = offset.max(from);
        let end = offset.saturating_add(size).min(to);
        if end > start {
            for (bin, bytes) in address.spread(start - from, end - start) {
                binned[bin][slot] += bytes;
            }
        }
    };
    let range = params![snapshot_id, memory_id, low, high];
    each_in_range(
        conn,
        "SELECT uid, offset, size, state, kind, provenance, label FROM allocations",
        range,
        &mut |row| {
            let allocation = WindowAllocation {
                uid: row.get(0)?,
                offset: to_u64(row.get(1)?),
                size: to_u64(row.get(2)?),
                state: row.get(3)?,
                kind: row.get(4)?,
                provenance: row.get(5)?,
                label: row.get(6)?,
            };
            window.allocation_count += 1;
            let slot = ["valid", "collectable", "pending_free", "pending_alloc"]
                .iter()
                .position(|state| *state == allocation.state)
                .unwrap_or(0);
            spread(allocation.offset, allocation.size, slot);
            if window.allocations.len() <= bins {
                window.allocations.push(allocation);
            }
            Ok(())
        },
    )?;
    each_in_range(conn, "SELECT offset, size FROM holes", range, &mut |row| {
        let (offset, size) = (to_u64(row.get(0)?), to_u64(row.get(1)?));
        window.hole_count += 1;
        spread(offset, size, 4);
        if window.holes.len() <= bins {
            window.holes.push((offset, size));
        }
        Ok(())
    })?;
    if window.allocation_count + window.hole_count > bins as u64 {
        window.allocations.clear();
        window.holes.clear();
        window.bins = Some(WindowBins {
            width: address.width,
            bytes: binned,
        });
    }
    Ok(window)
}

/// Each row of `select` (from a per-snapshot view) of one memory at one snapshot that crosses
/// `[low, high)`, in address order: `range` binds snapshot, memory, low and high.
fn each_in_range(
    conn: &Connection,
    select: &str,
    range: &[&dyn rusqlite::ToSql],
    visit: &mut dyn FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<()>,
) -> Result<()> {
    let mut statement = conn
        .prepare(&format!(
            "{select} WHERE snapshot_id = ?1 AND memory_id = ?2 AND offset < ?4 AND offset + size > ?3 ORDER BY offset"
        ))
        .map_err(query_error)?;
    let mut rows = statement.query(range).map_err(query_error)?;
    while let Some(row) = rows.next().map_err(query_error)? {
        visit(row).map_err(query_error)?;
    }
    Ok(())
}

fn clamp_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
