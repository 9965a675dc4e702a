//! A run's figures for `memstate compare`: each memory over all its snapshots, each provenance's
//! and client object's peak bytes held, and each memory's points in time, from one database.

use std::collections::HashMap;

use rusqlite::{params, Connection};

use super::load::to_u64;
use super::{query_error, select};
use crate::analysis::compare::{MemoryFigures, RunFigures, TrendPoint};
use crate::error::Result;

/// The figures of `run` in this database (a run that is not there is an error that names the
/// runs that are).
pub fn run_figures(conn: &Connection, run: &str) -> Result<RunFigures> {
    select::check_run(conn, run)?;
    Ok(RunFigures {
        run: run.to_string(),
        memories: memories(conn, run)?,
        provenances: peaks(conn, run, BY_PROVENANCE)?,
        objects: peaks(conn, run, BY_OBJECT)?,
    })
}

/// Each memory of the run with its peaks over the run (a search of memory_stats by memory).
fn memories(conn: &Connection, run: &str) -> Result<Vec<MemoryFigures>> {
    let mut statement = conn
        .prepare(
            "SELECT m.node, m.kind, m.handle, m.memory_id,
                    row_number() OVER (PARTITION BY m.node, m.kind ORDER BY m.handle) - 1,
                    (SELECT max(ms.used_bytes) FROM memory_stats ms WHERE ms.memory_id = m.memory_id),
                    (SELECT min(ms.largest_hole) FROM memory_stats ms WHERE ms.memory_id = m.memory_id),
                    (SELECT max(ms.fragmentation) FROM memory_stats ms WHERE ms.memory_id = m.memory_id),
                    (SELECT count(*) FROM failed_request f WHERE f.memory_id = m.memory_id)
             FROM memories m
             WHERE m.run = ?1
             ORDER BY m.node, m.kind, m.handle",
        )
        .map_err(query_error)?;
    let rows = statement
        .query_map(params![run], |row| {
            Ok(MemoryFigures {
                node: row.get(0)?,
                kind: row.get(1)?,
                handle: row.get(2)?,
                memory_id: row.get(3)?,
                ordinal: row.get(4)?,
                peak_used: row.get::<_, Option<i64>>(5)?.map(to_u64),
                lowest_largest_hole: row.get::<_, Option<i64>>(6)?.map(to_u64),
                peak_fragmentation: row.get(7)?,
                failed_requests: to_u64(row.get(8)?),
            })
        })
        .map_err(query_error)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(query_error)?;
    Ok(rows)
}

/// The spans of a run with their provenance (a string id, NULL when none).
const BY_PROVENANCE: &str = "SELECT m.node, a.first_seq, a.last_seq, a.size, a.provenance
     FROM memory m JOIN run r ON r.id = m.run_id
     JOIN allocation_span a ON a.memory_id = m.id
     WHERE r.name = ?1 AND a.state <> 3";

/// The spans of a run once for each client object whose fields they hold (a search of
/// allocation_object by run and uid): an allocation's bytes count whole for every object it holds
/// a field of, since it keeps each of them in memory.
const BY_OBJECT: &str = "SELECT DISTINCT m.node, a.first_seq, a.last_seq, a.size, ao.object_key, a.memory_id, a.level, a.uid
     FROM memory m JOIN run r ON r.id = m.run_id
     JOIN allocation_span a ON a.memory_id = m.id
     JOIN allocation_object ao ON ao.run_id = r.id AND ao.uid = a.uid
     WHERE r.name = ?1 AND a.state <> 3";

/// Each key's peak (a provenance or a client object, by the spans `sql` gives with their key):
/// the most bytes its allocations (not those still pending) held at one snapshot of one node.
/// Swept over the allocation spans node by node (a span adds its bytes at its first snapshot and
/// takes them away after its last), so the cost is the run's spans, not its rows of every
/// allocation at every snapshot.
fn peaks(conn: &Connection, run: &str, sql: &str) -> Result<Vec<(Option<String>, u64)>> {
    let mut statement = conn.prepare(sql).map_err(query_error)?;
    // (node, seq, bytes added, key): a span's bytes come at its first seq and go at the
    // seq after its last.
    let mut changes: Vec<(i64, i64, i64, Option<i64>)> = Vec::new();
    let mut rows = statement.query(params![run]).map_err(query_error)?;
    while let Some(row) = rows.next().map_err(query_error)? {
        let node: i64 = row.get(0).map_err(query_error)?;
        let first: i64 = row.get(1).map_err(query_error)?;
        let last: Option<i64> = row.get(2).map_err(query_error)?;
        let size: i64 = row.get(3).map_err(query_error)?;
        let provenance: Option<i64> = row.get(4).map_err(query_error)?;
        changes.push((node, first, size, provenance));
        if let Some(last) = last {
            changes.push((node, last.saturating_add(1), -size, provenance));
        }
    }
    changes.sort_unstable_by_key(|&(node, seq, bytes, _)| (node, seq, bytes));
    let mut held: HashMap<(i64, Option<i64>), i64> = HashMap::new();
    let mut peaks: HashMap<Option<i64>, i64> = HashMap::new();
    let mut at = 0;
    while at < changes.len() {
        // Every change of one node at one seq, then the peaks of what they touched.
        let (node, seq) = (changes[at].0, changes[at].1);
        let end = changes[at..]
            .iter()
            .position(|change| (change.0, change.1) != (node, seq))
            .map_or(changes.len(), |offset| at + offset);
        for &(_, _, bytes, provenance) in &changes[at..end] {
            *held.entry((node, provenance)).or_insert(0) += bytes;
        }
        for &(_, _, _, provenance) in &changes[at..end] {
            let now = held.get(&(node, provenance)).copied().unwrap_or(0);
            let peak = peaks.entry(provenance).or_insert(0);
            *peak = (*peak).max(now);
        }
        at = end;
    }
    let mut names = conn
        .prepare("SELECT value FROM string WHERE id = ?1")
        .map_err(query_error)?;
    let mut out = Vec::with_capacity(peaks.len());
    for (provenance, peak) in peaks {
        let name = match provenance {
            Some(id) => names
                .query_row(params![id], |row| row.get::<_, String>(0))
                .map(Some)
                .map_err(query_error)?,
            None => None,
        };
        out.push((name, to_u64(peak)));
    }
    out.sort();
    Ok(out)
}

/// Each memory's points of `run` by memory id, in seq order: x is `x_column` of `memory_trend`
/// (`time_s` counted from the run's first snapshot, or `seq`).
pub fn trend_points(
    conn: &Connection,
    run: &str,
    x_column: &str,
) -> Result<HashMap<i64, Vec<TrendPoint>>> {
    let x = if x_column == "seq" { "seq" } else { "time_s" };
    let mut statement = conn
        .prepare(&format!(
            "SELECT memory_id, {x}, snapshot_id, seq, largest_hole, used_bytes FROM memory_trend
             WHERE run = ?1 ORDER BY memory_id, seq"
        ))
        .map_err(query_error)?;
    let mut rows = statement.query(params![run]).map_err(query_error)?;
    let mut by_memory: HashMap<i64, Vec<TrendPoint>> = HashMap::new();
    while let Some(row) = rows.next().map_err(query_error)? {
        let memory_id: i64 = row.get(0).map_err(query_error)?;
        by_memory.entry(memory_id).or_default().push(TrendPoint {
            x: row.get(1).map_err(query_error)?,
            snapshot_id: row.get(2).map_err(query_error)?,
            seq: row.get(3).map_err(query_error)?,
            largest_hole: row
                .get::<_, Option<i64>>(4)
                .map_err(query_error)?
                .map(to_u64),
            used: row
                .get::<_, Option<i64>>(5)
                .map_err(query_error)?
                .map(to_u64),
        });
    }
    if x == "time_s" {
        let start = by_memory
            .values()
            .flat_map(|points| points.iter().map(|point| point.x))
            .fold(f64::INFINITY, f64::min);
        for points in by_memory.values_mut() {
            for point in points.iter_mut() {
                point.x -= start;
            }
            // Seq order is time order within a node; said so, not assumed, for the search.
            points.sort_by(|p, q| p.x.total_cmp(&q.x));
        }
    }
    Ok(by_memory)
}
