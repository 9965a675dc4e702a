//! Turning the user's selectors into ids, through the public views; a selector that names nothing
//! is an error that lists what there is.
//!
//! A snapshot selector is `latest` (each node's latest snapshot, in every run), a snapshot id, or
//! `RUN:NODE:SEQ`. A memory selector is a Realm memory id (`0x1e00000000000003` or the bare
//! `1e00000000000003`) or a kind (`GPU_FB_MEM`: every memory of that kind).

use rusqlite::{params, Connection};

use super::query_error;
use crate::dump::parse::parse_id_text;
use crate::error::{Error, Result};

fn ids(conn: &Connection, sql: &str, parameters: impl rusqlite::Params) -> Result<Vec<i64>> {
    let mut statement = conn.prepare(sql).map_err(query_error)?;
    let rows = statement
        .query_map(parameters, |row| row.get(0))
        .map_err(query_error)?;
    rows.collect::<rusqlite::Result<Vec<i64>>>()
        .map_err(query_error)
}

fn texts(conn: &Connection, sql: &str, parameters: impl rusqlite::Params) -> Result<Vec<String>> {
    let mut statement = conn.prepare(sql).map_err(query_error)?;
    let rows = statement
        .query_map(parameters, |row| row.get(0))
        .map_err(query_error)?;
    rows.collect::<rusqlite::Result<Vec<String>>>()
        .map_err(query_error)
}

/// The snapshot ids a selector names, in (run, node, seq) order. Never empty.
pub fn snapshot_ids(conn: &Connection, selector: &str) -> Result<Vec<i64>> {
    let found = if selector == "latest" {
        ids(
            conn,
            "SELECT snapshot_id FROM snapshots s
             WHERE seq = (SELECT max(seq) FROM snapshots t WHERE t.run_id = s.run_id AND t.node = s.node)
             ORDER BY run, node",
            [],
        )?
    } else if let Ok(id) = selector.parse::<i64>() {
        ids(
            conn,
            "SELECT snapshot_id FROM snapshots WHERE snapshot_id = ?1",
            [id],
        )?
    } else {
        let mut parts = selector.rsplitn(3, ':');
        let (seq, node, run) = (parts.next(), parts.next(), parts.next());
        match (
            run,
            node.and_then(|node| node.parse::<i64>().ok()),
            seq.and_then(|seq| seq.parse::<i64>().ok()),
        ) {
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
        require_snapshots(conn)?;
        return Err(Error::NotFound(format!(
            "no snapshot matches {selector:?} (see memstate snapshots)"
        )));
    }
    Ok(found)
}

/// What a question about snapshots says of a database that holds none yet.
pub const NO_SNAPSHOTS_YET: &str =
    "the database holds no snapshots yet (import dumps with `memstate import PATH...`, or try `memstate demo`)";

/// An error saying so when the database holds no snapshot at all.
pub fn require_snapshots(conn: &Connection) -> Result<()> {
    let any: bool = conn
        .query_row("SELECT EXISTS (SELECT 1 FROM snapshots)", [], |row| {
            row.get(0)
        })
        .map_err(query_error)?;
    if any {
        Ok(())
    } else {
        Err(Error::NotFound(NO_SNAPSHOTS_YET.to_string()))
    }
}

/// The one snapshot a selector names.
pub fn one_snapshot(conn: &Connection, selector: &str) -> Result<i64> {
    match snapshot_ids(conn, selector)?.as_slice() {
        [one] => Ok(*one),
        several => Err(Error::Usage(format!(
            "{selector:?} names {} snapshots; name one (an id or RUN:NODE:SEQ)",
            several.len()
        ))),
    }
}

/// Which run, node and seq a snapshot is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotName {
    pub run: String,
    pub node: i64,
    pub seq: i64,
}

impl std::fmt::Display for SnapshotName {
    /// As a selector names it: `RUN:NODE:SEQ`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.run, self.node, self.seq)
    }
}

/// The run, node and seq of the snapshot `snapshot_id` (one [`one_snapshot`] gave).
pub fn snapshot_name(conn: &Connection, snapshot_id: i64) -> Result<SnapshotName> {
    conn.query_row(
        "SELECT run, node, seq FROM snapshots WHERE snapshot_id = ?1",
        [snapshot_id],
        |row| {
            Ok(SnapshotName {
                run: row.get(0)?,
                node: row.get(1)?,
                seq: row.get(2)?,
            })
        },
    )
    .map_err(query_error)
}

/// The snapshots of a list: `A..B` (ids, inclusive) or comma-separated selectors.
pub fn snapshot_list(conn: &Connection, text: &str) -> Result<Vec<i64>> {
    if let Some((low, high)) = text.split_once("..") {
        let (low, high) = match (low.trim().parse::<i64>(), high.trim().parse::<i64>()) {
            (Ok(low), Ok(high)) if low <= high => (low, high),
            _ => {
                return Err(Error::Usage(format!(
                    "{text:?}: expected A..B with snapshot ids A <= B"
                )))
            }
        };
        let found = snapshots_between(conn, low, high)?;
        if found.is_empty() {
            return Err(Error::NotFound(format!(
                "no snapshot between {low} and {high}"
            )));
        }
        return Ok(found);
    }
    let mut found = Vec::new();
    for selector in text.split(',') {
        found.extend(snapshot_ids(conn, selector.trim())?);
    }
    Ok(found)
}

/// The snapshot ids from `low` to `high` (inclusive).
pub fn snapshots_between(conn: &Connection, low: i64, high: i64) -> Result<Vec<i64>> {
    ids(conn, "SELECT snapshot_id FROM snapshots WHERE snapshot_id BETWEEN ?1 AND ?2 ORDER BY snapshot_id", [low, high])
}

/// The last `count` snapshots of `snapshot_id`'s run and node up to and including it, by seq.
pub fn node_snapshots_up_to(conn: &Connection, snapshot_id: i64, count: u32) -> Result<Vec<i64>> {
    let mut found = ids(
        conn,
        "SELECT p.snapshot_id FROM snapshots s JOIN snapshots p ON p.run_id = s.run_id AND p.node = s.node AND p.seq <= s.seq
         WHERE s.snapshot_id = ?1 ORDER BY p.seq DESC LIMIT ?2",
        params![snapshot_id, count],
    )?;
    found.reverse();
    Ok(found)
}

/// The snapshots with a failed request (every one when `selector` is `None`).
pub fn oom_snapshots(conn: &Connection, selector: Option<&str>) -> Result<Vec<i64>> {
    match selector {
        Some(selector) => snapshot_ids(conn, selector),
        None => {
            let found = ids(
                conn,
                "SELECT DISTINCT snapshot_id FROM failed_requests ORDER BY snapshot_id",
                [],
            )?;
            if found.is_empty() {
                require_snapshots(conn)?;
            }
            Ok(found)
        }
    }
}

/// The kinds of the memories where a request failed in the given snapshots, each once, sorted.
pub fn failed_kinds(conn: &Connection, snapshot_ids: &[i64]) -> Result<Vec<String>> {
    let read = || -> rusqlite::Result<Vec<String>> {
        let mut statement = conn.prepare_cached(
            "SELECT DISTINCT m.kind FROM failed_requests f
             JOIN memories m ON m.memory_id = f.memory_id WHERE f.snapshot_id = ?1",
        )?;
        let mut kinds = std::collections::BTreeSet::new();
        for snapshot_id in snapshot_ids {
            for kind in statement.query_map([snapshot_id], |row| row.get::<_, String>(0))? {
                kinds.insert(kind?);
            }
        }
        Ok(kinds.into_iter().collect())
    };
    read().map_err(query_error)
}

/// The canonical handle a memory selector names, when it is an id rather than a kind: `0x` and
/// hex digits, or 16 bare hex digits as Realm prints them (so a kind like `FACE` stays a kind).
pub fn memory_handle(selector: &str) -> Option<String> {
    parse_id_text(selector)
        .filter(|_| {
            selector.starts_with("0x") || selector.starts_with("0X") || selector.len() == 16
        })
        .map(crate::dump::format_id)
}

/// Refuse a memory selector that names no memory anywhere, listing the kinds there are.
pub fn check_memory_selector(conn: &Connection, selector: &str) -> Result<()> {
    let kinds = texts(conn, "SELECT DISTINCT kind FROM memories ORDER BY kind", [])?;
    match memory_handle(selector) {
        Some(handle) => {
            let found = ids(
                conn,
                "SELECT memory_id FROM memories WHERE handle = ?1 LIMIT 1",
                [&handle],
            )?;
            if found.is_empty() {
                return Err(Error::NotFound(format!(
                    "no memory has the id {handle} (see memstate memories)"
                )));
            }
        }
        None if !kinds.iter().any(|kind| kind == selector) => {
            let hint = kinds
                .iter()
                .find(|kind| kind.eq_ignore_ascii_case(selector))
                .map(|kind| format!("; did you mean {kind}?"))
                .unwrap_or_default();
            return Err(Error::Usage(format!(
                "--memory {selector:?} is neither a memory id nor a memory kind here{hint} (kinds: {}; or a memory id, see memstate memories)",
                if kinds.is_empty() { "none".to_string() } else { kinds.join(", ") }
            )));
        }
        None => {}
    }
    Ok(())
}

/// The memory ids `all` (SQL over `memories m`, with `?1` bound to `scope`) selects, narrowed by a
/// memory selector: a handle or a kind.
fn narrowed(
    conn: &Connection,
    all: &str,
    order: &str,
    scope: &dyn rusqlite::ToSql,
    selector: Option<&str>,
) -> Result<Vec<i64>> {
    match selector {
        None => ids(conn, &format!("{all} ORDER BY {order}"), params![scope]),
        Some(text) => match memory_handle(text) {
            Some(handle) => ids(
                conn,
                &format!("{all} AND m.handle = ?2 ORDER BY {order}"),
                params![scope, handle],
            ),
            None => ids(
                conn,
                &format!("{all} AND m.kind = ?2 ORDER BY {order}"),
                params![scope, text],
            ),
        },
    }
}

/// The memory ids of a snapshot that a selector names (all of them without a selector).
pub fn memory_ids(conn: &Connection, snapshot_id: i64, selector: Option<&str>) -> Result<Vec<i64>> {
    let all = "SELECT m.memory_id FROM memory_stats ms JOIN memories m ON m.memory_id = ms.memory_id WHERE ms.snapshot_id = ?1";
    narrowed(conn, all, "m.handle", &snapshot_id, selector)
}

/// Every (snapshot, memory) pair the selectors name; an error when there is none.
pub fn pairs(conn: &Connection, snapshot: &str, memory: Option<&str>) -> Result<Vec<(i64, i64)>> {
    if let Some(memory) = memory {
        check_memory_selector(conn, memory)?;
    }
    let mut found = Vec::new();
    for snapshot_id in snapshot_ids(conn, snapshot)? {
        for memory_id in memory_ids(conn, snapshot_id, memory)? {
            found.push((snapshot_id, memory_id));
        }
    }
    if found.is_empty() {
        return Err(Error::NotFound(format!(
            "no memory matches {:?} in snapshot {snapshot:?} (see memstate memories)",
            memory.unwrap_or("")
        )));
    }
    Ok(found)
}

/// (snapshot, memory) pairs grouped by snapshot, keeping their order: one question a snapshot
/// for all its memories.
pub fn by_snapshot(pairs: &[(i64, i64)]) -> Vec<(i64, Vec<i64>)> {
    let mut groups: Vec<(i64, Vec<i64>)> = Vec::new();
    for &(snapshot_id, memory_id) in pairs {
        match groups.last_mut() {
            Some((last, memory_ids)) if *last == snapshot_id => memory_ids.push(memory_id),
            _ => groups.push((snapshot_id, vec![memory_id])),
        }
    }
    groups
}

/// The memory ids of a run that a selector names (all without one).
pub fn run_memory_ids(conn: &Connection, run: &str, selector: Option<&str>) -> Result<Vec<i64>> {
    narrowed(
        conn,
        "SELECT m.memory_id FROM memories m WHERE m.run = ?1",
        "m.node, m.handle",
        &run,
        selector,
    )
}

/// The runs of a database, when a question needs one.
pub enum Runs {
    None,
    One(String),
    /// Several: their names as a message lists them (`"a", "b"`, at most 20 and `...`).
    Several(String),
}

/// Whether the database holds no run, one, or several (listed).
pub fn runs(conn: &Connection) -> Result<Runs> {
    let runs = texts(conn, "SELECT run FROM runs ORDER BY run LIMIT 21", [])?;
    Ok(match runs.as_slice() {
        [] => Runs::None,
        [only] => Runs::One(only.clone()),
        several => {
            let shown: Vec<String> = several
                .iter()
                .take(20)
                .map(|run| format!("{run:?}"))
                .collect();
            let more = if several.len() > 20 { ", ..." } else { "" };
            Runs::Several(format!("{}{more}", shown.join(", ")))
        }
    })
}

/// The database's only run; with several, an error that lists them and suggests `--run` (a
/// chart of one run is not chosen for the user by which was imported last).
pub fn only_run(conn: &Connection) -> Result<String> {
    match runs(conn)? {
        Runs::None => Err(Error::NotFound(NO_SNAPSHOTS_YET.to_string())),
        Runs::One(only) => Ok(only),
        Runs::Several(listed) => Err(Error::Usage(format!(
            "the database holds several runs ({listed}): choose one with --run"
        ))),
    }
}

/// Refuse a run that is not in the database, listing the runs there are.
pub fn check_run(conn: &Connection, run: &str) -> Result<()> {
    let runs = texts(conn, "SELECT run FROM runs ORDER BY run", [])?;
    if runs.iter().any(|known| known == run) {
        return Ok(());
    }
    Err(Error::NotFound(format!(
        "no run {run:?} (runs: {})",
        if runs.is_empty() {
            "none".to_string()
        } else {
            runs.join(", ")
        }
    )))
}

/// The allocation kinds of FORMAT.md's vocabulary (others are stored as given).
pub const KNOWN_KINDS: [&str; 9] = [
    "instance",
    "external_instance",
    "deferred_buffer",
    "deferred_value",
    "deferred_reduction",
    "future",
    "pool",
    "eager_pool",
    "internal",
];

/// Refuse an allocation kind that is neither in the format's vocabulary nor found in the given
/// snapshots, listing the kinds they hold.
pub fn check_allocation_kind(conn: &Connection, snapshot_ids: &[i64], kind: &str) -> Result<()> {
    if KNOWN_KINDS.contains(&kind) {
        return Ok(());
    }
    let mut present = Vec::new();
    for &snapshot_id in snapshot_ids {
        present.extend(texts(
            conn,
            "SELECT DISTINCT kind FROM allocations WHERE snapshot_id = ?1",
            [snapshot_id],
        )?);
    }
    present.sort();
    present.dedup();
    if present.iter().any(|known| known == kind) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "--kind {kind:?} is not an allocation kind here (in these snapshots: {}; the format's kinds: {})",
        if present.is_empty() { "none".to_string() } else { present.join(", ") },
        KNOWN_KINDS.join(", ")
    )))
}

/// A byte range `START:END` of a memory (sizes in bytes or human: `0:64MiB`).
pub fn parse_range(text: &str) -> Result<(u64, u64)> {
    let (start, end) = text
        .split_once(':')
        .ok_or_else(|| Error::Usage(format!("--range {text:?}: expected START:END")))?;
    let size = |part: &str| {
        crate::units::parse_size(part)
            .map_err(|message| Error::Usage(format!("--range {text:?}: {message}")))
    };
    let (start, end) = (size(start)?, size(end)?);
    if end <= start {
        return Err(Error::Usage(format!(
            "--range {text:?}: END must be above START"
        )));
    }
    Ok((start, end))
}
