//! Keeping allocation and hole spans exact as snapshots come and go, in any order.
//!
//! A span is a maximal run of consecutive imported snapshots of one node (in seq order) in which
//! one thing (an allocation by memory and uid, a hole by memory and offset) is present with the
//! same attributes. It is stored as `[first_seq, last_seq]`, `last_seq` being `None` while the span
//! is open (it holds at the node's latest snapshot). The spans are a function of the set of
//! imported snapshots alone, so any import order, and any replacement, gives the same rows.
//!
//! Inserting snapshot `p` between its neighbours `prev` and `next` (either may be missing) only
//! touches spans that contain `prev` or `next`:
//! - a span that contains both (or is open, when `p` becomes the latest) passed over `p`: it keeps
//!   going when `p` holds the same thing, else it is cut into `[first, prev]` and `[next, last]`;
//! - a thing of `p` not carried by such a span extends the span that ends at `prev` or starts at
//!   `next` with the same attributes (joining them when both exist), or starts a new span.
//!
//! Removing `p` undoes this: spans that start or end at `p` shrink (or vanish), and a span ending
//! at `prev` joins the one starting at `next` when they hold the same thing; when `p` was the
//! latest, spans ending at `prev` become open again.
//!
//! The planning here is pure (maps in, a list of changes out); [`SpanTable`] reads and writes them.

use std::collections::HashMap;
use std::hash::Hash;

use rusqlite::{params, Connection};

/// The extent of a stored span; `last: None` means open.
#[derive(Debug, Clone, PartialEq)]
pub struct Span<A> {
    pub first: i64,
    pub last: Option<i64>,
    pub attrs: A,
}

impl<A> Span<A> {
    fn ends_at(&self, seq: i64) -> bool {
        self.last == Some(seq)
    }
    /// Whether the span reaches `seq` (an open span reaches every later snapshot).
    fn reaches(&self, seq: i64) -> bool {
        self.last.is_none_or(|last| last >= seq)
    }
}

/// One write to a span table.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<K, A> {
    Delete(K, Span<A>),
    Insert(K, Span<A>),
}

/// The level (length class) a span is stored under: the smallest L with `last - first < 4^L` for a
/// closed span (0 to 32), 64 for an open one (see migrations/V2__spans.sql).
pub fn level(first: i64, last: Option<i64>) -> i64 {
    match last {
        None => OPEN_LEVEL,
        Some(last) => {
            let bits = 64 - (last.saturating_sub(first).max(0) as u64).leading_zeros() as i64;
            (bits + 1) / 2
        }
    }
}

/// The level of open spans.
pub const OPEN_LEVEL: i64 = 64;

/// Every level a span may have.
pub fn levels() -> impl Iterator<Item = i64> {
    (0..=32).chain([OPEN_LEVEL])
}

/// `4^level - 1`: how far before `seq` a span of this level that contains `seq` may start.
pub fn reach(level: i64) -> i64 {
    if level >= 32 {
        i64::MAX
    } else {
        (1i64 << (2 * level)) - 1
    }
}

/// The changes that insert snapshot `seq` holding `things`, given the spans that contain its
/// neighbours. `things` must not repeat a key.
pub fn plan_insert<K: Copy + Eq + Hash, A: Clone + PartialEq>(
    seq: i64,
    prev: Option<i64>,
    next: Option<i64>,
    around_prev: &HashMap<K, Span<A>>,
    around_next: &HashMap<K, Span<A>>,
    things: impl IntoIterator<Item = (K, A)>,
) -> Vec<Change<K, A>> {
    // Spans passing over `seq`: they contain `prev` and reach on to `next` (or are open).
    let passes = |span: &Span<A>| match next {
        Some(next) => span.reaches(next),
        None => span.last.is_none(),
    };
    let mut changes = Vec::new();
    let mut kept: HashMap<K, bool> = HashMap::new();
    for (key, attrs) in things {
        if let Some(span) = around_prev.get(&key).filter(|span| passes(span)) {
            if span.attrs == attrs {
                kept.insert(key, true);
                continue;
            }
        }
        let left = prev.and_then(|prev| around_prev.get(&key).filter(|span| span.ends_at(prev) && span.attrs == attrs));
        let right = next.and_then(|next| around_next.get(&key).filter(|span| span.first == next && span.attrs == attrs));
        match (left, right) {
            (Some(left), Some(right)) => {
                changes.push(Change::Delete(key, left.clone()));
                changes.push(Change::Delete(key, right.clone()));
                changes.push(Change::Insert(key, Span { first: left.first, last: right.last, attrs }));
            }
            (Some(left), None) => {
                changes.push(Change::Delete(key, left.clone()));
                changes.push(Change::Insert(key, Span { first: left.first, last: Some(seq), attrs }));
            }
            (None, Some(right)) => {
                changes.push(Change::Delete(key, right.clone()));
                changes.push(Change::Insert(key, Span { first: seq, last: right.last, attrs }));
            }
            (None, None) => changes.push(Change::Insert(key, Span { first: seq, last: next.map(|_| seq), attrs })),
        }
    }
    // Spans passing over `seq` whose thing is absent or different at `seq`: cut them around it.
    if let Some(prev) = prev {
        for (key, span) in around_prev {
            if passes(span) && !kept.contains_key(key) {
                changes.push(Change::Delete(*key, span.clone()));
                changes.push(Change::Insert(*key, Span { first: span.first, last: Some(prev), attrs: span.attrs.clone() }));
                if let Some(next) = next {
                    changes.push(Change::Insert(*key, Span { first: next, last: span.last, attrs: span.attrs.clone() }));
                }
            }
        }
    }
    changes
}

/// The changes that remove snapshot `seq`, given the spans containing it and its neighbours.
pub fn plan_remove<K: Copy + Eq + Hash, A: Clone + PartialEq>(
    seq: i64,
    prev: Option<i64>,
    next: Option<i64>,
    around: &HashMap<K, Span<A>>,
    around_prev: &HashMap<K, Span<A>>,
    around_next: &HashMap<K, Span<A>>,
) -> Vec<Change<K, A>> {
    let mut changes = Vec::new();
    for (key, span) in around {
        let starts_here = span.first == seq;
        let ends_here = span.ends_at(seq);
        if !starts_here && !ends_here {
            continue; // it passes over `seq` and keeps doing so
        }
        changes.push(Change::Delete(*key, span.clone()));
        if starts_here && ends_here {
            continue;
        }
        if starts_here {
            if let Some(next) = next {
                changes.push(Change::Insert(*key, Span { first: next, last: span.last, attrs: span.attrs.clone() }));
            }
        } else if let Some(prev) = prev {
            changes.push(Change::Insert(*key, Span { first: span.first, last: Some(prev), attrs: span.attrs.clone() }));
        }
    }
    // What changed at `seq` may now be unchanged from `prev` to `next`: join those spans. When
    // `seq` was the latest, what ended at `prev` is present at the new latest: open again.
    if let Some(prev) = prev {
        for (key, left) in around_prev.iter().filter(|(_, span)| span.ends_at(prev)) {
            match next {
                Some(next) => {
                    if let Some(right) = around_next.get(key).filter(|span| span.first == next && span.attrs == left.attrs) {
                        changes.push(Change::Delete(*key, left.clone()));
                        changes.push(Change::Delete(*key, right.clone()));
                        changes.push(Change::Insert(*key, Span { first: left.first, last: right.last, attrs: left.attrs.clone() }));
                    }
                }
                None => {
                    changes.push(Change::Delete(*key, left.clone()));
                    changes.push(Change::Insert(*key, Span { first: left.first, last: None, attrs: left.attrs.clone() }));
                }
            }
        }
    }
    changes
}

/// A table of spans: how to read the spans containing a snapshot and how to write changes.
pub trait SpanTable {
    type Key: Copy + Eq + Hash;
    type Attrs: Clone + PartialEq;

    /// Every span of the given memories that contains `seq`, by key.
    fn containing(conn: &Connection, memory_ids: &[i64], seq: i64) -> rusqlite::Result<HashMap<Self::Key, Span<Self::Attrs>>>;

    /// The open spans of the given memories (those containing the node's latest snapshot).
    fn open(conn: &Connection, memory_ids: &[i64]) -> rusqlite::Result<HashMap<Self::Key, Span<Self::Attrs>>>;

    fn apply(conn: &Connection, changes: &[Change<Self::Key, Self::Attrs>]) -> rusqlite::Result<()>;
}

/// The attributes an allocation span keeps, as stored (strings as string ids).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllocationAttrs {
    pub offset: i64,
    pub size: i64,
    pub state: i64,
    pub kind: i64,
    pub handle: Option<i64>,
    pub alignment: Option<i64>,
    pub created_ns: Option<i64>,
    pub provenance: Option<i64>,
    pub label: Option<i64>,
    pub gc_priority: Option<i64>,
    pub attrs: Option<String>,
}

/// Allocation spans, keyed by (memory id, uid).
pub struct AllocationSpans;

const ALLOCATION_COLUMNS: &str =
    "memory_id, uid, first_seq, last_seq, offset, size, state, kind, handle, alignment, created_ns, provenance, label, gc_priority, attrs";

fn allocation_row(row: &rusqlite::Row) -> rusqlite::Result<((i64, i64), Span<AllocationAttrs>)> {
    Ok((
        (row.get(0)?, row.get(1)?),
        Span {
            first: row.get(2)?,
            last: row.get(3)?,
            attrs: AllocationAttrs {
                offset: row.get(4)?,
                size: row.get(5)?,
                state: row.get(6)?,
                kind: row.get(7)?,
                handle: row.get(8)?,
                alignment: row.get(9)?,
                created_ns: row.get(10)?,
                provenance: row.get(11)?,
                label: row.get(12)?,
                gc_priority: row.get(13)?,
                attrs: row.get(14)?,
            },
        },
    ))
}

/// Run `select` (with `?1` memory id, `?2` level, `?3`..`?4` the first_seq range and `?4` the seq
/// the span must reach) for every memory and level, collecting the rows by key.
fn stab<K: Eq + Hash, A>(
    conn: &Connection,
    select: &str,
    memory_ids: &[i64],
    seq: i64,
    row: impl Fn(&rusqlite::Row) -> rusqlite::Result<(K, Span<A>)>,
) -> rusqlite::Result<HashMap<K, Span<A>>> {
    let mut statement = conn.prepare_cached(select)?;
    let mut found = HashMap::new();
    for &memory_id in memory_ids {
        for level in levels() {
            let low = seq.saturating_sub(reach(level));
            let mut rows = statement.query(params![memory_id, level, low, seq])?;
            while let Some(current) = rows.next()? {
                let (key, span) = row(current)?;
                found.insert(key, span);
            }
        }
    }
    Ok(found)
}

impl SpanTable for AllocationSpans {
    type Key = (i64, i64);
    type Attrs = AllocationAttrs;

    fn containing(conn: &Connection, memory_ids: &[i64], seq: i64) -> rusqlite::Result<HashMap<Self::Key, Span<Self::Attrs>>> {
        stab(
            conn,
            &format!(
                "SELECT {ALLOCATION_COLUMNS} FROM allocation_span
                 WHERE memory_id = ?1 AND level = ?2 AND first_seq BETWEEN ?3 AND ?4 AND (last_seq IS NULL OR last_seq >= ?4)"
            ),
            memory_ids,
            seq,
            allocation_row,
        )
    }

    fn open(conn: &Connection, memory_ids: &[i64]) -> rusqlite::Result<HashMap<Self::Key, Span<Self::Attrs>>> {
        let mut statement = conn.prepare_cached(&format!("SELECT {ALLOCATION_COLUMNS} FROM allocation_span WHERE memory_id = ?1 AND level = 64"))?;
        let mut found = HashMap::new();
        for &memory_id in memory_ids {
            let mut rows = statement.query([memory_id])?;
            while let Some(row) = rows.next()? {
                let (key, span) = allocation_row(row)?;
                found.insert(key, span);
            }
        }
        Ok(found)
    }

    fn apply(conn: &Connection, changes: &[Change<Self::Key, Self::Attrs>]) -> rusqlite::Result<()> {
        let mut delete = conn.prepare_cached("DELETE FROM allocation_span WHERE memory_id = ?1 AND level = ?2 AND first_seq = ?3 AND uid = ?4")?;
        let mut insert = conn.prepare_cached(
            "INSERT INTO allocation_span (memory_id, level, first_seq, uid, last_seq, offset, size, state, kind, handle, alignment,
                                          created_ns, provenance, label, gc_priority, attrs)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )?;
        for change in changes {
            match change {
                Change::Delete((memory_id, uid), span) => {
                    delete.execute(params![memory_id, level(span.first, span.last), span.first, uid])?;
                }
                Change::Insert((memory_id, uid), span) => {
                    let a = &span.attrs;
                    insert.execute(params![
                        memory_id,
                        level(span.first, span.last),
                        span.first,
                        uid,
                        span.last,
                        a.offset,
                        a.size,
                        a.state,
                        a.kind,
                        a.handle,
                        a.alignment,
                        a.created_ns,
                        a.provenance,
                        a.label,
                        a.gc_priority,
                        a.attrs,
                    ])?;
                }
            }
        }
        Ok(())
    }
}

/// Hole spans, keyed by (memory id, offset); the attribute is the size.
pub struct HoleSpans;

fn hole_row(row: &rusqlite::Row) -> rusqlite::Result<((i64, i64), Span<i64>)> {
    Ok(((row.get(0)?, row.get(1)?), Span { first: row.get(2)?, last: row.get(3)?, attrs: row.get(4)? }))
}

impl SpanTable for HoleSpans {
    type Key = (i64, i64);
    type Attrs = i64;

    fn containing(conn: &Connection, memory_ids: &[i64], seq: i64) -> rusqlite::Result<HashMap<Self::Key, Span<Self::Attrs>>> {
        stab(
            conn,
            "SELECT memory_id, offset, first_seq, last_seq, size FROM hole_span
             WHERE memory_id = ?1 AND level = ?2 AND first_seq BETWEEN ?3 AND ?4 AND (last_seq IS NULL OR last_seq >= ?4)",
            memory_ids,
            seq,
            hole_row,
        )
    }

    fn open(conn: &Connection, memory_ids: &[i64]) -> rusqlite::Result<HashMap<Self::Key, Span<Self::Attrs>>> {
        let mut statement = conn.prepare_cached("SELECT memory_id, offset, first_seq, last_seq, size FROM hole_span WHERE memory_id = ?1 AND level = 64")?;
        let mut found = HashMap::new();
        for &memory_id in memory_ids {
            let mut rows = statement.query([memory_id])?;
            while let Some(row) = rows.next()? {
                let (key, span) = hole_row(row)?;
                found.insert(key, span);
            }
        }
        Ok(found)
    }

    fn apply(conn: &Connection, changes: &[Change<Self::Key, Self::Attrs>]) -> rusqlite::Result<()> {
        let mut delete = conn.prepare_cached("DELETE FROM hole_span WHERE memory_id = ?1 AND level = ?2 AND first_seq = ?3 AND offset = ?4")?;
        let mut insert =
            conn.prepare_cached("INSERT INTO hole_span (memory_id, level, first_seq, offset, last_seq, size) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?;
        for change in changes {
            match change {
                Change::Delete((memory_id, offset), span) => {
                    delete.execute(params![memory_id, level(span.first, span.last), span.first, offset])?;
                }
                Change::Insert((memory_id, offset), span) => {
                    insert.execute(params![memory_id, level(span.first, span.last), span.first, offset, span.last, span.attrs])?;
                }
            }
        }
        Ok(())
    }
}

/// Apply `changes` to a map of open spans (the importer's cache of the node's latest snapshot).
/// A key's new span may be inserted before its old one is deleted, so a delete removes only the
/// span it names.
pub fn update_open<K: Copy + Eq + Hash, A: Clone>(open: &mut HashMap<K, Span<A>>, changes: &[Change<K, A>]) {
    for change in changes {
        match change {
            Change::Delete(key, span) if span.last.is_none() => {
                if open.get(key).is_some_and(|stored| stored.first == span.first) {
                    open.remove(key);
                }
            }
            Change::Insert(key, span) if span.last.is_none() => {
                open.insert(*key, span.clone());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_reaches_cover_every_length() {
        assert_eq!(level(5, None), 64);
        assert_eq!(level(5, Some(5)), 0);
        assert_eq!(level(5, Some(6)), 1);
        assert_eq!(level(5, Some(8)), 1);
        assert_eq!(level(5, Some(9)), 2);
        assert_eq!(level(5, Some(20)), 2);
        assert_eq!(level(5, Some(21)), 3);
        assert_eq!(level(0, Some(i64::MAX)), 32);
        for (first, last) in [(0, 0), (3, 10), (7, 1000), (0, i64::MAX), (1 << 40, (1 << 41) + 3)] {
            let level = level(first, Some(last));
            assert!(last - first <= reach(level), "{first}..{last} fits its level");
            assert!(level == 0 || last - first > reach(level - 1), "{first}..{last} is in the smallest level");
            assert!(levels().any(|known| known == level));
        }
    }
}
