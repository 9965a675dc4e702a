//! The listings behind the `snapshots`, `memories`, `stats`, `allocations` and `trend` commands:
//! SQL over the public views; the columns' units come from their names (see `output::Unit`).

use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;

use super::{query_error, Cell, MemoryFilter, Table};
use crate::dump::State;
use crate::error::{Error, Result};
use crate::present::Unit;

/// The figures of a memory people see first, after what names the memory and the snapshot.
pub const FIGURES: &[&str] = &[
    "used_bytes",
    "free_bytes",
    "hole_count",
    "largest_hole",
    "fragmentation",
    "largest_reclaimable",
];

/// Run SQL with positional parameters and collect a table.
fn table(conn: &Connection, sql: &str, parameters: &[SqlValue]) -> Result<Table> {
    let mut statement = conn.prepare(sql).map_err(query_error)?;
    let columns: Vec<String> = statement.column_names().map(str::to_string).collect();
    let width = columns.len();
    let mut rows = Vec::new();
    let mut cursor = statement
        .query(rusqlite::params_from_iter(parameters))
        .map_err(query_error)?;
    while let Some(row) = cursor.next().map_err(query_error)? {
        let mut cells = Vec::with_capacity(width);
        for index in 0..width {
            cells.push(Cell::from(row.get_ref(index).map_err(query_error)?));
        }
        rows.push(cells);
    }
    Ok(super::columns::declared_table(columns, rows))
}

fn optional_text(value: Option<&str>) -> SqlValue {
    value.map_or(SqlValue::Null, |value| SqlValue::Text(value.to_string()))
}

/// A listing of one run's (or every run's) rows: [`snapshot_table`], [`memory_table`].
pub type RunListing = fn(&Connection, Option<&str>) -> Result<Table>;

/// Every snapshot (of one run, or of all), with how many memories and allocations it holds.
pub fn snapshot_table(conn: &Connection, run: Option<&str>) -> Result<Table> {
    table(
        conn,
        "SELECT s.snapshot_id, s.run, s.node, s.seq, s.time_s, s.reason,
                (SELECT count(*) FROM memory_stats m WHERE m.snapshot_id = s.snapshot_id) AS memories,
                (SELECT sum(allocation_count) FROM memory_stats m WHERE m.snapshot_id = s.snapshot_id) AS allocations,
                (SELECT count(*) FROM failed_requests f WHERE f.snapshot_id = s.snapshot_id) AS failed_requests,
                s.note, s.source
         FROM snapshots s
         WHERE ?1 IS NULL OR s.run = ?1
         ORDER BY s.run, s.node, s.seq",
        &[optional_text(run)],
    )
}

/// Every memory (of one run, or of all), with its capacity and how many snapshots show it.
pub fn memory_table(conn: &Connection, run: Option<&str>) -> Result<Table> {
    table(
        conn,
        "SELECT m.memory_id, m.run, m.node, m.handle, m.kind, m.name,
                (SELECT max(capacity) FROM memory_stats ms WHERE ms.memory_id = m.memory_id) AS capacity,
                (SELECT count(*) FROM memory_stats ms WHERE ms.memory_id = m.memory_id) AS snapshots,
                (SELECT max(unknown) FROM memory_stats ms WHERE ms.memory_id = m.memory_id) AS unknown
         FROM memories m
         WHERE ?1 IS NULL OR m.run = ?1
         ORDER BY m.run, m.node, m.handle",
        &[optional_text(run)],
    )
}

/// The memories at each of the given snapshots with their figures there: used bytes (every
/// allocation, pending frees included), reserved bytes (the sum of a memory's segments, NULL for
/// a memory not carved into segments), free bytes (its holes: for a GPU, the free blocks inside
/// its segments), the largest hole, and what the device had free outside when recorded.
pub fn memories_at(conn: &Connection, snapshot_ids: &[i64], run: Option<&str>) -> Result<Table> {
    let mut result: Option<Table> = None;
    for &snapshot_id in snapshot_ids {
        let found = table(
            conn,
            "SELECT ms.snapshot_id, m.memory_id, m.run, m.node, m.handle, m.kind, m.name, ms.capacity,
                    ms.used_bytes,
                    (SELECT sum(g.size) FROM segments g
                     WHERE g.snapshot_id = ms.snapshot_id AND g.memory_id = ms.memory_id) AS reserved_bytes,
                    (SELECT count(*) FROM segments g
                     WHERE g.snapshot_id = ms.snapshot_id AND g.memory_id = ms.memory_id) AS segments,
                    ms.free_bytes, ms.largest_hole, ms.device_free, ms.unknown
             FROM memory_stats ms JOIN memories m ON m.memory_id = ms.memory_id
             WHERE ms.snapshot_id = ?1 AND (?2 IS NULL OR m.run = ?2)
             ORDER BY m.node, m.handle",
            &[SqlValue::Integer(snapshot_id), optional_text(run)],
        )?;
        match &mut result {
            None => result = Some(found),
            Some(all) => all.rows.extend(found.rows),
        }
    }
    match result {
        Some(table) => Ok(table),
        None => Err(Error::NotFound(
            "no snapshot matches (see memstate snapshots)".into(),
        )),
    }
}

/// The figures of the given memories at the given snapshots (pairs of snapshot and memory ids).
pub fn stats_table(conn: &Connection, pairs: &[(i64, i64)]) -> Result<Table> {
    // One query a snapshot for all its memories (not one a memory: thousands of memories would
    // cost seconds), put back in the order of the pairs.
    let mut result: Option<Table> = None;
    for (snapshot_id, memory_ids) in super::select::by_snapshot(pairs) {
        let memories = MemoryFilter::of(&memory_ids, 2);
        let sql = format!(
            "SELECT t.snapshot_id, t.run, t.node, t.seq, t.handle, t.kind, t.capacity, t.allocation_count,
                    t.used_bytes, t.free_bytes, t.hole_count, t.largest_hole, t.fragmentation,
                    t.reclaimable_bytes, t.largest_reclaimable, t.unaccounted_bytes, t.unknown, t.memory_id
             FROM memory_trend t
             WHERE t.snapshot_id = ?1 AND t.memory_id {}",
            memories.sql
        );
        let mut found = table(
            conn,
            &sql,
            &[SqlValue::Integer(snapshot_id), memories.value],
        )?;
        let last = found.columns.len() - 1;
        let mut by_memory: std::collections::HashMap<i64, Vec<Cell>> = found
            .rows
            .drain(..)
            .map(|mut row| {
                let id = match row.pop() {
                    Some(Cell::Integer(id)) => id,
                    _ => -1,
                };
                (id, row)
            })
            .collect();
        found.columns.truncate(last);
        found.units.truncate(last);
        found.rows = memory_ids
            .iter()
            .filter_map(|id| by_memory.remove(id))
            .collect();
        match result.as_mut() {
            Some(all) => all.extend(found),
            None => result = Some(found),
        }
    }
    let result = result.ok_or_else(|| Error::Usage("no memory selected".to_string()))?;
    let shown = [
        &["snapshot_id", "node", "seq", "handle", "kind"],
        FIGURES,
        unknown_shown(&result),
    ]
    .concat();
    Ok(result.compact(&shown))
}

/// The `unknown` column, for the compact text form, when any row has one (its figures then
/// read as blanks: the input does not say them).
fn unknown_shown(table: &Table) -> &'static [&'static str] {
    let any = table.column("unknown").is_some_and(|column| {
        table
            .rows
            .iter()
            .any(|row| !matches!(row.get(column), None | Some(Cell::Null)))
    });
    if any {
        &["unknown"]
    } else {
        &[]
    }
}

/// Filters of the `allocations` command.
#[derive(Debug, Clone, Default)]
pub struct AllocationFilter {
    pub kind: Option<String>,
    pub state: Option<State>,
    /// A SQL LIKE pattern (`train.py:%`).
    pub provenance: Option<String>,
}

/// How to group allocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Kind,
    State,
    Provenance,
    Object,
}

/// Allocations of the given memories at one snapshot, filtered, largest first (or grouped).
pub fn allocation_table(
    conn: &Connection,
    snapshot_id: i64,
    memory_ids: &[i64],
    filter: &AllocationFilter,
    group: Option<GroupBy>,
    top: i64,
) -> Result<Table> {
    // Only the filters given become SQL, so that the one-snapshot search of the allocations view
    // stays a plain index search; memories are joined after the limit, objects only where shown.
    let memories = MemoryFilter::of(memory_ids, 4);
    let mut parameters = vec![
        SqlValue::Integer(snapshot_id),
        SqlValue::Integer(top),
        SqlValue::Null,
        memories.value,
    ];
    let run_id: i64 = conn
        .query_row(
            "SELECT run_id FROM snapshots WHERE snapshot_id = ?1",
            [snapshot_id],
            |row| row.get(0),
        )
        .map_err(query_error)?;
    parameters[2] = SqlValue::Integer(run_id);
    let mut conditions = format!("a.snapshot_id = ?1 AND a.memory_id {}", memories.sql);
    let state = filter.state.map(|state| state.as_str().to_string());
    for (column, operator, value) in [
        ("kind", "=", &filter.kind),
        ("state", "=", &state),
        ("provenance", "LIKE", &filter.provenance),
    ] {
        if let Some(value) = value {
            parameters.push(SqlValue::Text(value.clone()));
            conditions.push_str(&format!(" AND a.{column} {operator} ?{}", parameters.len()));
        }
    }
    let objects = "(SELECT group_concat(DISTINCT ao.object_id) FROM allocation_objects ao WHERE ao.run_id = ?3 AND ao.uid = a.uid)";
    let bytes = exact_sum("size");
    let sql = match group {
        None => format!(
            "SELECT m.handle, a.uid, a.kind, a.state, a.offset, a.size, a.provenance, a.label, {objects} AS objects
             FROM (SELECT a.memory_id, a.uid, a.kind, a.state, a.offset, a.size, a.provenance, a.label
                   FROM allocations a WHERE {conditions}
                   ORDER BY a.size DESC, a.memory_id, a.offset LIMIT ?2) a
             JOIN memories m ON m.memory_id = a.memory_id
             ORDER BY a.size DESC, m.handle, a.offset"
        ),
        Some(GroupBy::Object) => format!(
            "SELECT coalesce(objects, '{NONE_RECORDED}') AS object, count(*) AS allocation_count, {bytes} AS bytes, max(size) AS largest
             FROM (SELECT a.size, {objects} AS objects FROM allocations a WHERE {conditions})
             GROUP BY objects ORDER BY bytes DESC, objects LIMIT ?2"
        ),
        Some(group) => {
            let key = match group {
                GroupBy::Kind => "kind",
                GroupBy::State => "state",
                _ => "provenance",
            };
            // The allocations whose input names no kind or provenance (PyTorch blocks without
            // frames) form a group named as such, not a blank row.
            format!(
                "SELECT coalesce(a.{key}, '{NONE_RECORDED}') AS {key}, count(*) AS allocation_count, {bytes} AS bytes, max(a.size) AS largest
                 FROM allocations a WHERE {conditions} GROUP BY a.{key} ORDER BY bytes DESC, a.{key} LIMIT ?2"
            )
        }
    };
    table(conn, &sql, &parameters)
}

/// What a group of allocations whose input names none (no kind, no provenance, no object) is
/// called in `allocations --by`.
pub const NONE_RECORDED: &str = "(none recorded)";

/// The figures of the matching memories across every snapshot (of one run, or of all).
pub fn trend_table(conn: &Connection, memory: Option<&str>, run: Option<&str>) -> Result<Table> {
    let handle = memory.and_then(super::select::memory_handle);
    let result = table(
        conn,
        "SELECT run, node, seq, time_s, reason, handle, kind, used_bytes, free_bytes, hole_count,
                largest_hole, fragmentation, reclaimable_bytes, largest_reclaimable, unknown
         FROM memory_trend
         WHERE (?1 IS NULL OR run = ?1)
           AND (?2 IS NULL OR (handle = ?3 OR (?3 IS NULL AND kind = ?2)))
         ORDER BY run, node, handle, seq",
        &[
            optional_text(run),
            optional_text(memory),
            optional_text(handle.as_deref()),
        ],
    )?;
    // Several runs in the answer: each row says its run (their nodes and seqs repeat).
    let mut runs: Vec<&Cell> = result
        .column("run")
        .map(|index| result.rows.iter().map(|row| &row[index]).collect())
        .unwrap_or_default();
    runs.dedup(); // the rows come ordered by run
    let run: &[&str] = if runs.len() > 1 { &["run"] } else { &[] };
    let shown = [
        run,
        &["node", "seq", "time_s", "handle", "kind"],
        FIGURES,
        unknown_shown(&result),
    ]
    .concat();
    Ok(result.compact(&shown))
}

/// The SQL for the sum of an integer column that may pass 2^63 - 1 (sizes reach it): summed in
/// two halves and put together, exact while the total fits in 64 bits and a real number beyond,
/// where SQLite's `sum()` stops with "integer overflow". The canned queries spell out the same.
pub fn exact_sum(column: &str) -> String {
    format!("(sum({column} >> 32) * 4294967296 + sum({column} & 4294967295))")
}

/// A memory's holes at one snapshot, largest first: what the `largest-holes` canned query gives
/// for one memory (same columns, same order, running total and share of free bytes), computed
/// from a layout already loaded, so that `holes` over thousands of memories runs no query per
/// memory.
pub fn largest_holes(layout: &crate::analysis::Layout, top: u32) -> Table {
    let mut holes = layout.holes.clone();
    holes.sort_by(|a, b| b.size.cmp(&a.size).then(a.offset.cmp(&b.offset)));
    let mut running_total: u64 = 0;
    let rows = holes
        .iter()
        .take(top as usize)
        .map(|hole| {
            running_total = running_total.saturating_add(hole.size);
            // SQLite's x / 0 is NULL: a memory without free bytes has no holes anyway.
            let share = match layout.free_bytes {
                0 => Cell::Null,
                free => Cell::Real(hole.size as f64 / free as f64),
            };
            vec![
                Cell::count(hole.offset),
                Cell::count(hole.size),
                Cell::count(running_total),
                share,
            ]
        })
        .collect();
    Table::declared(
        &[
            ("offset", Unit::Offset),
            ("size", Unit::Bytes),
            ("running_total", Unit::Bytes),
            ("share_of_free", Unit::Ratio),
        ],
        rows,
    )
}

/// The memories `memory_forecast` warns about at each node's latest snapshot (of one run, or of
/// all): their largest hole forecast to fall below their recent requests within `within` dumps,
/// at that dump and the one before, soonest first.
pub fn forecast_table(conn: &Connection, run: Option<&str>, within: u32) -> Result<Table> {
    table(
        conn,
        "SELECT f.run, f.node, f.seq, f.handle, f.kind, f.largest_hole, f.hole_trend,
                f.largest_request, f.dumps_left, f.dumps_left_before, f.dumps, f.snapshot_id, f.memory_id
         FROM (SELECT (SELECT t.id FROM snapshot t WHERE t.run_id = g.run_id AND t.node = g.node
                       ORDER BY t.seq DESC LIMIT 1) AS snapshot_id
               FROM (SELECT DISTINCT s.run_id, s.node FROM snapshot s JOIN run r ON r.id = s.run_id
                     WHERE ?1 IS NULL OR r.name = ?1) g) latest
         JOIN memory_forecast f ON f.snapshot_id = latest.snapshot_id
         WHERE f.dumps_left <= ?2 AND f.dumps_left_before <= ?2
         ORDER BY f.dumps_left, f.run, f.node, f.handle",
        &[optional_text(run), SqlValue::Integer(i64::from(within))],
    )
}
