//! Two canned queries answered in Rust as well as in SQL: `growth` and `long-lived`.
//!
//! Both read every span of a run and group them: growth by node, provenance and snapshot,
//! long-lived by allocation. SQLite has no hash aggregate, so each GROUP BY sorts every span
//! (0.22 s per sort at 10 million allocation rows, where reading the spans takes 0.02 s), and the
//! two queries took 2 to 2.3 times as long as the same portable query on DuckDB over the Parquet
//! export (issue 32). Here the spans are read once, in storage order, and grouped in hash maps.
//!
//! The SQL files (queries/growth.sql, queries/long-lived.sql) stay the definition: what sqlite3,
//! Datasette and the Parquet runner run. These functions give the same rows, cell for cell (the
//! tests compare both on the same databases), or decline and let the SQL answer: when the figures
//! come near the limits of 64-bit integers, where SQLite's arithmetic turns to reals, and when a
//! run holds so many groups that holding them would take more memory than SQLite's sorter.
//!
//! Like the SQL, they read memstate's private tables (span and snapshot rows by integer ids).

use std::cmp::Ordering;
use std::collections::HashMap;

use hashbrown::HashMap as FastMap;

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row};

use super::{parameter_value, query_error};
use crate::error::Result;
use crate::present::Cell;

/// More groups than this and the SQL answers (its sorter spills to disk; these maps do not).
const MOST_GROUPS: usize = 2_000_000;

/// Figures past this and the SQL answers: SQLite's integer arithmetic turns to reals on overflow,
/// and these stay exact integers only well inside 64 bits.
const LARGEST_FIGURE: i128 = 1 << 62;

/// The rows of canned query `name` with its bound parameters, or `None` when the SQL must answer
/// (not one of the two, or a run beyond what is answered here).
pub fn answer(
    conn: &Connection,
    name: &str,
    parameters: &[(String, String)],
) -> Result<Option<Vec<Vec<Cell>>>> {
    let value = |key: &str| {
        parameters
            .iter()
            .find(|(given, _)| given == key)
            .map(|(_, value)| parameter_value(value))
    };
    let (Some(run), Some(SqlValue::Integer(top))) = (value("run"), value("top")) else {
        return Ok(None);
    };
    // Only these two, asked with their two parameters, before anything is read.
    if !matches!(name, "growth" | "long-lived") || parameters.len() != 2 {
        return Ok(None);
    }
    let run_id: Option<i64> = conn
        .query_row("SELECT id FROM run WHERE name = ?1", [&run], |row| {
            row.get(0)
        })
        .optional()
        .map_err(query_error)?;
    let rows = match run_id {
        None => Some(Vec::new()),
        Some(run_id) if name == "growth" => growth(conn, run_id)?,
        Some(run_id) => long_lived(conn, run_id, top)?,
    };
    // LIMIT with a negative count is no limit, as in SQLite.
    Ok(rows.map(|mut rows| {
        if let Ok(top) = usize::try_from(top) {
            rows.truncate(top);
        }
        rows
    }))
}

/// Texts of the string table by id, each looked up once.
struct Texts<'c> {
    conn: &'c Connection,
    known: HashMap<i64, Cell>,
}

impl Texts<'_> {
    fn of(&mut self, id: Option<i64>) -> Result<Cell> {
        let Some(id) = id else {
            return Ok(Cell::Null);
        };
        if let Some(cell) = self.known.get(&id) {
            return Ok(cell.clone());
        }
        let mut statement = self
            .conn
            .prepare_cached("SELECT value FROM string WHERE id = ?1")
            .map_err(query_error)?;
        let mut rows = statement.query([id]).map_err(query_error)?;
        let cell = match rows.next().map_err(query_error)? {
            Some(row) => Cell::from(row.get_ref(0).map_err(query_error)?),
            None => Cell::Null,
        };
        self.known.insert(id, cell.clone());
        Ok(cell)
    }
}

/// SQLite's order of two values of a column (NULL first, numbers, then text by bytes).
fn sqlite_order(a: &Cell, b: &Cell) -> Ordering {
    fn rank(cell: &Cell) -> u8 {
        match cell {
            Cell::Null => 0,
            Cell::Integer(_) | Cell::Real(_) => 1,
            Cell::Text(_) | Cell::Json(_) => 2,
            Cell::Blob(_) => 3,
        }
    }
    match (a, b) {
        (Cell::Integer(x), Cell::Integer(y)) => x.cmp(y),
        (Cell::Real(x), Cell::Real(y)) => x.total_cmp(y),
        (Cell::Integer(x), Cell::Real(y)) => (*x as f64).total_cmp(y),
        (Cell::Real(x), Cell::Integer(y)) => x.total_cmp(&(*y as f64)),
        (Cell::Text(x), Cell::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Cell::Blob(x), Cell::Blob(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// The nodes of a run that have snapshots: first and last seq of each.
fn nodes(conn: &Connection, run_id: i64) -> Result<FastMap<i64, (i64, i64)>> {
    let mut statement = conn
        .prepare("SELECT node, min(seq), max(seq) FROM snapshot WHERE run_id = ?1 GROUP BY node")
        .map_err(query_error)?;
    let found = statement
        .query_map([run_id], |row| {
            Ok((row.get(0)?, (row.get(1)?, row.get(2)?)))
        })
        .map_err(query_error)?
        .collect::<rusqlite::Result<FastMap<i64, (i64, i64)>>>()
        .map_err(query_error)?;
    Ok(found)
}

/// The spans of a run's memories on nodes that have snapshots, as both queries' `spans` read
/// them: `visit` gets each row (its columns after the first three are `columns`), its node, its
/// first seq and its last (an open span's is its node's last snapshot), and says whether to go
/// on. False when `visit` stopped.
fn each_span(
    conn: &Connection,
    run_id: i64,
    nodes: &FastMap<i64, (i64, i64)>,
    columns: &str,
    filter: &str,
    visit: &mut dyn FnMut(&Row, i64, i64, i64) -> Result<bool>,
) -> Result<bool> {
    let mut statement = conn
        .prepare(&format!(
            "SELECT m.node, a.first_seq, a.last_seq, {columns}
             FROM memory m JOIN allocation_span a ON a.memory_id = m.id
             WHERE m.run_id = ?1 {filter}"
        ))
        .map_err(query_error)?;
    let mut rows = statement.query([run_id]).map_err(query_error)?;
    while let Some(row) = rows.next().map_err(query_error)? {
        let node: i64 = row.get(0).map_err(query_error)?;
        let Some(&(_, node_last)) = nodes.get(&node) else {
            continue;
        };
        let first: i64 = row.get(1).map_err(query_error)?;
        let last: i64 = row
            .get::<_, Option<i64>>(2)
            .map_err(query_error)?
            .unwrap_or(node_last);
        if !visit(row, node, first, last)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A node, a provenance (a string id, or none) and a seq.
type At = (i64, Option<i64>, i64);

/// What starts and ends at one snapshot for one provenance: sizes summed in halves, as the SQL
/// sums them (high 32 bits, low 32 bits), so that the answer is the SQL's.
#[derive(Default, Clone, Copy)]
struct Moves {
    starting_high: i128,
    starting_low: i128,
    ending_high: i128,
    ending_low: i128,
}

/// `growth`: per node and provenance, the live bytes at the first and the last snapshot and at
/// the peak, for those that grew; biggest growth first.
fn growth(conn: &Connection, run_id: i64) -> Result<Option<Vec<Vec<Cell>>>> {
    let nodes = nodes(conn, run_id)?;
    let mut moves: FastMap<At, Moves> = FastMap::new();
    let whole = each_span(
        conn,
        run_id,
        &nodes,
        "a.provenance, a.size",
        "AND a.state IN (0, 1, 3)",
        &mut |row, node, first, last| {
            let provenance: Option<i64> = row.get(3).map_err(query_error)?;
            let size: i64 = row.get(4).map_err(query_error)?;
            let (high, low) = (i128::from(size >> 32), i128::from(size & 0xffff_ffff));
            let starting = moves.entry((node, provenance, first)).or_default();
            starting.starting_high += high;
            starting.starting_low += low;
            let ending = moves.entry((node, provenance, last)).or_default();
            ending.ending_high += high;
            ending.ending_low += low;
            Ok(moves.len() <= MOST_GROUPS)
        },
    )?;
    if !whole {
        return Ok(None);
    }
    let mut ordered: Vec<(At, Moves)> = moves.into_iter().collect();
    ordered.sort_unstable_by_key(|(key, _)| *key);
    // Per (node, provenance): first, last and peak bytes.
    let mut figures: Vec<(i64, Option<i64>, i128, i128, i128)> = Vec::new();
    let mut index = 0;
    while index < ordered.len() {
        let ((node, provenance, _), _) = ordered[index];
        let Some(&(node_first, node_last)) = nodes.get(&node) else {
            return Ok(None);
        };
        // coalesce(max(CASE WHEN seq = first THEN bytes END), 0), and the same at the last.
        let (mut first_bytes, mut last_bytes, mut peak) = (None, None, i128::MIN);
        let mut sums = Moves::default();
        while index < ordered.len()
            && (ordered[index].0 .0, ordered[index].0 .1) == (node, provenance)
        {
            let ((_, _, seq), here) = ordered[index];
            sums.starting_high += here.starting_high;
            sums.starting_low += here.starting_low;
            sums.ending_high += here.ending_high;
            sums.ending_low += here.ending_low;
            // Started up to here, less ended before here.
            let high = sums.starting_high - sums.ending_high + here.ending_high;
            let low = sums.starting_low - sums.ending_low + here.ending_low;
            if high.abs() >= 1 << 29 {
                return Ok(None);
            }
            let bytes = high * 4_294_967_296 + low;
            if bytes.abs() >= LARGEST_FIGURE {
                return Ok(None);
            }
            if seq == node_first {
                first_bytes = first_bytes.max(Some(bytes));
            }
            if seq == node_last {
                last_bytes = last_bytes.max(Some(bytes));
            }
            peak = peak.max(bytes);
            index += 1;
        }
        let (first_bytes, last_bytes) = (first_bytes.unwrap_or(0), last_bytes.unwrap_or(0));
        if last_bytes - first_bytes > 0 {
            figures.push((node, provenance, first_bytes, last_bytes, peak));
        }
    }
    let mut texts = Texts {
        conn,
        known: HashMap::new(),
    };
    let mut rows: Vec<(i128, i64, Cell, Vec<Cell>)> = Vec::with_capacity(figures.len());
    for (node, provenance, first_bytes, last_bytes, peak) in figures {
        let text = texts.of(provenance)?;
        let growth = last_bytes - first_bytes;
        let cells =
            [first_bytes, last_bytes, growth, peak].map(|figure| Cell::Integer(figure as i64));
        let mut row = vec![Cell::Integer(node), text.clone()];
        row.extend(cells);
        rows.push((growth, node, text, row));
    }
    // ORDER BY growth_bytes DESC, f.node, p.value
    rows.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then_with(|| sqlite_order(&a.2, &b.2))
    });
    Ok(Some(rows.into_iter().map(|(_, _, _, row)| row).collect()))
}

/// One allocation of `long-lived` (a uid with one kind and provenance on one node).
struct Life {
    size: i64,
    first: i64,
    last: i64,
    snapshots: i128,
}

/// `long-lived`: allocations followed by uid, the longest-lived first.
fn long_lived(conn: &Connection, run_id: i64, top: i64) -> Result<Option<Vec<Vec<Cell>>>> {
    let nodes = nodes(conn, run_id)?;
    // Each snapshot's ordinal and time, by node, sorted by seq (looked up by binary search).
    let mut snapshots: FastMap<i64, Vec<(i64, i64, i64)>> = FastMap::new();
    {
        let mut statement = conn
            .prepare(
                "SELECT node, seq, ordinal, time_ns FROM snapshot WHERE run_id = ?1 ORDER BY node, seq",
            )
            .map_err(query_error)?;
        let mut rows = statement.query([run_id]).map_err(query_error)?;
        while let Some(row) = rows.next().map_err(query_error)? {
            snapshots
                .entry(row.get(0).map_err(query_error)?)
                .or_default()
                .push((
                    row.get(1).map_err(query_error)?,
                    row.get(2).map_err(query_error)?,
                    row.get(3).map_err(query_error)?,
                ));
        }
    }
    let snapshot = |node: i64, seq: i64| -> Option<(i64, i64)> {
        let of_node = snapshots.get(&node)?;
        let index = of_node
            .binary_search_by_key(&seq, |&(seq, _, _)| seq)
            .ok()?;
        Some((of_node[index].1, of_node[index].2))
    };
    // Kinds are a short vocabulary: found by comparing while they are few, by a map past that
    // (a producer may write many).
    let mut kinds: Vec<String> = Vec::new();
    let mut kind_index: HashMap<String, usize> = HashMap::new();
    let mut lives: FastMap<(i64, i64, usize, Option<i64>), Life> = FastMap::new();
    let whole = each_span(
        conn,
        run_id,
        &nodes,
        "a.uid, a.kind, a.provenance, a.size",
        "",
        &mut |row, node, first, last| {
            let uid: i64 = row.get(3).map_err(query_error)?;
            // A kind that is not text is left to the SQL.
            let kind = match row.get_ref(4).map_err(query_error)? {
                ValueRef::Text(text) => match std::str::from_utf8(text) {
                    Ok(text) => text,
                    Err(_) => return Ok(false),
                },
                _ => return Ok(false),
            };
            let found = if kinds.len() <= 16 {
                kinds.iter().position(|known| known == kind)
            } else {
                kind_index.get(kind).copied()
            };
            let kind = match found {
                Some(index) => index,
                None => {
                    kinds.push(kind.to_string());
                    kind_index.insert(kind.to_string(), kinds.len() - 1);
                    kinds.len() - 1
                }
            };
            let provenance: Option<i64> = row.get(5).map_err(query_error)?;
            let size: i64 = row.get(6).map_err(query_error)?;
            // The SQL joins both ends to their snapshots: a span whose end names none drops out.
            let (Some((first_ordinal, _)), Some((last_ordinal, _))) =
                (snapshot(node, first), snapshot(node, last))
            else {
                return Ok(true);
            };
            let stretch = i128::from(last_ordinal) - i128::from(first_ordinal) + 1;
            lives
                .entry((node, uid, kind, provenance))
                .and_modify(|life| {
                    life.size = life.size.max(size);
                    life.first = life.first.min(first);
                    life.last = life.last.max(last);
                    life.snapshots += stretch;
                })
                .or_insert(Life {
                    size,
                    first,
                    last,
                    snapshots: stretch,
                });
            Ok(lives.len() <= MOST_GROUPS)
        },
    )?;
    if !whole {
        return Ok(None);
    }
    // Texts are ranked once (kinds and provenances are a short vocabulary), so that the sort
    // compares integers and only the rows shown are made.
    let mut texts = Texts {
        conn,
        known: HashMap::new(),
    };
    let mut provenances: Vec<Option<i64>> = lives.keys().map(|key| key.3).collect();
    provenances.sort_unstable();
    provenances.dedup();
    let mut provenance_cells = Vec::with_capacity(provenances.len());
    for provenance in &provenances {
        provenance_cells.push((texts.of(*provenance)?, *provenance));
    }
    provenance_cells.sort_by(|a, b| sqlite_order(&a.0, &b.0));
    let provenance_rank: HashMap<Option<i64>, usize> = provenance_cells
        .iter()
        .enumerate()
        .map(|(rank, (_, id))| (*id, rank))
        .collect();
    let mut kind_order: Vec<usize> = (0..kinds.len()).collect();
    kind_order.sort_by(|a, b| kinds[*a].as_bytes().cmp(kinds[*b].as_bytes()));
    let mut kind_rank = vec![0; kinds.len()];
    for (rank, kind) in kind_order.into_iter().enumerate() {
        kind_rank[kind] = rank;
    }
    struct Ranked {
        snapshots: i64,
        lifetime: f64,
        node: i64,
        uid: u64,
        first: i64,
        kind: usize,
        provenance: usize,
        key: (i64, i64, usize, Option<i64>),
    }
    let mut ranked = Vec::with_capacity(lives.len());
    for (&(node, uid, kind, provenance), life) in &lives {
        let Ok(count) = i64::try_from(life.snapshots) else {
            return Ok(None);
        };
        let (Some((_, first_time)), Some((_, last_time))) =
            (snapshot(node, life.first), snapshot(node, life.last))
        else {
            continue;
        };
        let Some(elapsed) = last_time.checked_sub(first_time) else {
            return Ok(None);
        };
        ranked.push(Ranked {
            snapshots: count,
            lifetime: elapsed as f64 / 1e9,
            node,
            uid: uid as u64,
            first: life.first,
            kind: kind_rank[kind],
            provenance: provenance_rank.get(&provenance).copied().unwrap_or(0),
            key: (node, uid, kind, provenance),
        });
    }
    // ORDER BY v.snapshots DESC, lifetime_s DESC, v.node, uid, v.first_seq, v.kind, provenance
    let order = |a: &Ranked, b: &Ranked| {
        b.snapshots
            .cmp(&a.snapshots)
            .then(b.lifetime.total_cmp(&a.lifetime))
            .then(a.node.cmp(&b.node))
            .then(a.uid.cmp(&b.uid))
            .then(a.first.cmp(&b.first))
            .then(a.kind.cmp(&b.kind))
            .then(a.provenance.cmp(&b.provenance))
    };
    if let Ok(top) = usize::try_from(top) {
        if top < ranked.len() {
            ranked.select_nth_unstable_by(top, order);
            ranked.truncate(top);
        }
    }
    ranked.sort_by(order);
    let mut rows = Vec::with_capacity(ranked.len());
    for one in ranked {
        let (node, uid, kind, provenance) = one.key;
        let Some(life) = lives.get(&one.key) else {
            continue;
        };
        rows.push(vec![
            Cell::Integer(node),
            Cell::Text(format!("0x{:016x}", uid as u64)),
            Cell::Text(kinds[kind].clone()),
            texts.of(provenance)?,
            Cell::Integer(life.size),
            Cell::Integer(life.first),
            Cell::Integer(life.last),
            Cell::Integer(one.snapshots),
            Cell::Real(one.lifetime),
        ]);
    }
    Ok(Some(rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_order_as_sqlite_orders_them() {
        let mut cells = vec![
            Cell::Text("b".into()),
            Cell::Integer(3),
            Cell::Null,
            Cell::Text("B".into()),
            Cell::Real(2.5),
        ];
        cells.sort_by(sqlite_order);
        assert_eq!(
            cells,
            [
                Cell::Null,
                Cell::Real(2.5),
                Cell::Integer(3),
                Cell::Text("B".into()),
                Cell::Text("b".into())
            ]
        );
    }
}
