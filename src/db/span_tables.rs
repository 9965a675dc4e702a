//! Span rows in the database: the allocation and hole span tables, how the spans containing a
//! snapshot are read (by level, so a stab touches only the spans that can contain it), and how a
//! plan of changes from [`super::spans`] is written.

use rusqlite::{params, Connection, TransactionBehavior};

use super::spans::{level, levels, reach, Change, Span, SpanList, OPEN_LEVEL};

/// A span's key: the memory id and the table's key column (a uid, an offset).
pub type SpanKey = (i64, i64);

/// A table of spans: its columns, and from them how the spans containing a snapshot are read and
/// how changes are written (the same for every span table, keyed by memory id and one column).
pub trait SpanTable {
    type Attrs: Clone + PartialEq;

    /// The view that reads the spans (each stored span with its end), and the column that, after
    /// `memory_id`, keys a span.
    const TABLE: &'static str;
    const KEY_COLUMN: &'static str;
    /// The table of spans as stored, and the table of ends not yet moved into it (see
    /// migrations/V8__span_ends.sql).
    const STORED: &'static str;
    const ENDS: &'static str;
    /// What is read of a span, in [`SpanTable::row`]'s order.
    const COLUMNS: &'static str;
    /// Inserts a span: `?1` memory id, `?2` level, `?3` first_seq, `?4` key, `?5` last_seq, then
    /// the attributes.
    const INSERT: &'static str;

    /// The attributes of a span, read from the fifth column of [`SpanTable::COLUMNS`] on.
    fn attrs(row: &rusqlite::Row) -> rusqlite::Result<Self::Attrs>;

    /// A span as [`SpanTable::COLUMNS`] reads it: memory id, key, first_seq, last_seq, then the
    /// attributes.
    fn row(row: &rusqlite::Row) -> rusqlite::Result<(SpanKey, Span<Self::Attrs>)> {
        Ok((
            (row.get(0)?, row.get(1)?),
            Span {
                first: row.get(2)?,
                last: row.get(3)?,
                attrs: Self::attrs(row)?,
            },
        ))
    }
    fn insert(
        statement: &mut rusqlite::CachedStatement,
        key: SpanKey,
        span: &Span<Self::Attrs>,
    ) -> rusqlite::Result<()>;

    /// Every span of the given memories that contains `seq`, sorted by key.
    fn containing(
        conn: &Connection,
        memory_ids: &[i64],
        seq: i64,
    ) -> rusqlite::Result<SpanList<SpanKey, Self::Attrs>> {
        stab(
            conn,
            &format!(
                "SELECT {} FROM {} span
                 WHERE memory_id = ?1 AND level = ?2 AND first_seq BETWEEN ?3 AND ?4 AND (last_seq IS NULL OR last_seq >= ?4)",
                Self::COLUMNS,
                Self::TABLE
            ),
            memory_ids,
            seq,
            Self::row,
        )
    }

    /// The open spans of the given memories (those containing the node's latest snapshot), sorted.
    fn open(
        conn: &Connection,
        memory_ids: &[i64],
    ) -> rusqlite::Result<SpanList<SpanKey, Self::Attrs>> {
        rows_of(
            conn,
            &format!(
                "SELECT {} FROM {} span WHERE memory_id = ?1 AND level = {OPEN_LEVEL} AND last_seq IS NULL",
                Self::COLUMNS,
                Self::TABLE
            ),
            memory_ids,
            Self::row,
        )
    }

    /// Write planned changes. They must be planned from spans read after [`SpanTable::move_ends`]
    /// (or kept by the writer since): a span is deleted at the level its extent gives.
    fn apply(conn: &Connection, changes: &[Change<SpanKey, Self::Attrs>]) -> rusqlite::Result<()> {
        let mut delete = conn.prepare_cached(&format!(
            "DELETE FROM {} WHERE memory_id = ?1 AND level = ?2 AND first_seq = ?3 AND {} = ?4",
            Self::STORED,
            Self::KEY_COLUMN
        ))?;
        let mut insert = conn.prepare_cached(Self::INSERT)?;
        let mut end = conn.prepare_cached(&format!(
            "INSERT INTO {} (memory_id, first_seq, {}, last_seq) VALUES (?1, ?2, ?3, ?4)",
            Self::ENDS,
            Self::KEY_COLUMN
        ))?;
        for change in changes {
            match change {
                Change::Delete((memory_id, column), span) => {
                    delete.execute(params![
                        memory_id,
                        level(span.first, span.last),
                        span.first,
                        column
                    ])?;
                }
                Change::Insert(key, span) => Self::insert(&mut insert, *key, span)?,
                Change::End((memory_id, column), span, last) => {
                    end.execute(params![memory_id, span.first, column, last])?;
                }
            }
        }
        Ok(())
    }

    /// Move every recorded end into the span table: each span that ended leaves the open level
    /// for its closed one, with its last_seq. What the views read does not change.
    fn move_ends(conn: &Connection) -> rusqlite::Result<()> {
        // In place: SQLite moves the row and its index entries to the new level itself, without
        // the span's columns travelling out and back. An end without its open span (a stale
        // record) changes nothing: there is nothing to close. The ends are read as they are
        // closed, not gathered first: a long import moves up to 2^20 at once.
        let mut close = conn.prepare_cached(&format!(
            "UPDATE {} SET level = ?4, last_seq = ?5
             WHERE memory_id = ?1 AND level = {OPEN_LEVEL} AND first_seq = ?2 AND {} = ?3",
            Self::STORED,
            Self::KEY_COLUMN
        ))?;
        let mut ends = conn.prepare(&format!(
            "SELECT memory_id, first_seq, {}, last_seq FROM {} ORDER BY memory_id, first_seq, {}",
            Self::KEY_COLUMN,
            Self::ENDS,
            Self::KEY_COLUMN
        ))?;
        let mut rows = ends.query([])?;
        let mut any = false;
        while let Some(row) = rows.next()? {
            any = true;
            let (memory_id, first, column, last): (i64, i64, i64, i64) =
                (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?);
            close.execute(params![
                memory_id,
                first,
                column,
                level(first, Some(last)),
                last
            ])?;
        }
        drop(rows);
        if any {
            conn.execute(&format!("DELETE FROM {}", Self::ENDS), [])?;
        }
        Ok(())
    }
}

/// Move the recorded ends of both span tables into them (see [`SpanTable::move_ends`]), within
/// the transaction `conn` is in.
pub fn move_all_ends(conn: &Connection) -> rusqlite::Result<()> {
    AllocationSpans::move_ends(conn)?;
    HoleSpans::move_ends(conn)
}

/// [`move_all_ends`] in a transaction of its own, between dumps or when an import finishes.
pub fn move_all_ends_alone(conn: &mut Connection) -> rusqlite::Result<()> {
    let transaction = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    move_all_ends(&transaction)?;
    transaction.commit()
}

/// The attributes an allocation span keeps, as stored (strings as string ids). The importer
/// holds one per live allocation of a node (twice while a dump is planned), so the optional
/// integers are packed: a presence bit each and the values, 104 bytes instead of 152.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllocationAttrs {
    pub offset: i64,
    pub size: i64,
    pub kind: i64,
    pub state: u8,
    present: u8,
    /// handle, alignment, created_ns, provenance, label, gc_priority, stack; 0 where absent.
    optional: [i64; 7],
    pub attrs: Option<String>,
}

/// An allocation's optional attributes as stored, each named (texts as string ids): what
/// [`AllocationAttrs::new`] packs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptionalAttrs {
    pub handle: Option<i64>,
    pub alignment: Option<i64>,
    pub created_ns: Option<i64>,
    pub provenance: Option<i64>,
    pub label: Option<i64>,
    pub gc_priority: Option<i64>,
    /// The stack's id (`stack`).
    pub stack: Option<i64>,
}

impl AllocationAttrs {
    pub fn new(
        offset: i64,
        size: i64,
        state: u8,
        kind: i64,
        optional: OptionalAttrs,
        attrs: Option<String>,
    ) -> Self {
        // The order of `optional`'s slots, which the getters below read back.
        let optional = [
            optional.handle,
            optional.alignment,
            optional.created_ns,
            optional.provenance,
            optional.label,
            optional.gc_priority,
            optional.stack,
        ];
        let mut present = 0u8;
        let mut values = [0i64; 7];
        for (index, value) in optional.iter().enumerate() {
            if let Some(value) = value {
                present |= 1 << index;
                values[index] = *value;
            }
        }
        AllocationAttrs {
            offset,
            size,
            kind,
            state,
            present,
            optional: values,
            attrs,
        }
    }

    fn get(&self, index: usize) -> Option<i64> {
        (self.present & (1 << index) != 0).then(|| self.optional[index])
    }
    pub fn handle(&self) -> Option<i64> {
        self.get(0)
    }
    pub fn alignment(&self) -> Option<i64> {
        self.get(1)
    }
    pub fn created_ns(&self) -> Option<i64> {
        self.get(2)
    }
    pub fn provenance(&self) -> Option<i64> {
        self.get(3)
    }
    pub fn label(&self) -> Option<i64> {
        self.get(4)
    }
    pub fn gc_priority(&self) -> Option<i64> {
        self.get(5)
    }
    pub fn stack(&self) -> Option<i64> {
        self.get(6)
    }
}

/// Allocation spans, keyed by (memory id, uid).
pub struct AllocationSpans;

/// The stored columns, in the order [`SpanTable::row`] and [`AllocationSpans`]'s `attrs` read
/// them. The table keeps the kind as text (so that the views can give rows in kind order, see
/// migrations/V4__flat_views.sql); spans in memory carry its string id like every other text, so
/// it is looked up both ways here.
const ALLOCATION_COLUMNS: &str = "memory_id, uid, first_seq, last_seq, offset, size, state,
     (SELECT k.id FROM string k WHERE k.value = span.kind), handle, alignment, created_ns, provenance, label, gc_priority, attrs, stack_id";

/// Run `select` (with `?1` memory id, `?2` level, `?3`..`?4` the first_seq range and `?4` the seq
/// the span must reach) for every memory and level, collecting the rows by key.
fn stab<K: Ord, A>(
    conn: &Connection,
    select: &str,
    memory_ids: &[i64],
    seq: i64,
    row: impl Fn(&rusqlite::Row) -> rusqlite::Result<(K, Span<A>)>,
) -> rusqlite::Result<SpanList<K, A>> {
    let each = memory_ids.iter().flat_map(|&memory_id| {
        levels().map(move |level| (memory_id, level, seq.saturating_sub(reach(level)), seq))
    });
    rows_sorted(conn, select, each, row)
}

/// Every row of `select` (with `?1` a memory id) for each memory, sorted by key.
fn rows_of<K: Ord, A>(
    conn: &Connection,
    select: &str,
    memory_ids: &[i64],
    row: impl Fn(&rusqlite::Row) -> rusqlite::Result<(K, Span<A>)>,
) -> rusqlite::Result<SpanList<K, A>> {
    rows_sorted(
        conn,
        select,
        memory_ids.iter().map(|&memory_id| (memory_id,)),
        row,
    )
}

/// The rows of `select` run once with each of `each`'s parameters, sorted by key.
fn rows_sorted<K: Ord, A, P: rusqlite::Params>(
    conn: &Connection,
    select: &str,
    each: impl IntoIterator<Item = P>,
    row: impl Fn(&rusqlite::Row) -> rusqlite::Result<(K, Span<A>)>,
) -> rusqlite::Result<SpanList<K, A>> {
    let mut statement = conn.prepare_cached(select)?;
    let mut found = Vec::new();
    for parameters in each {
        let mut rows = statement.query(parameters)?;
        while let Some(current) = rows.next()? {
            found.push(row(current)?);
        }
    }
    found.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
    Ok(found)
}

impl SpanTable for AllocationSpans {
    type Attrs = AllocationAttrs;

    const TABLE: &'static str = "allocation_span";
    const KEY_COLUMN: &'static str = "uid";
    const STORED: &'static str = "allocation_span_stored";
    const ENDS: &'static str = "allocation_span_end";
    const COLUMNS: &'static str = ALLOCATION_COLUMNS;
    const INSERT: &'static str =
        "INSERT INTO allocation_span_stored (memory_id, level, first_seq, uid, last_seq, offset, size, state, kind, handle, alignment,
                                      created_ns, provenance, label, gc_priority, attrs, stack)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, (SELECT k.value FROM string k WHERE k.id = ?9), ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";

    fn attrs(row: &rusqlite::Row) -> rusqlite::Result<Self::Attrs> {
        Ok(AllocationAttrs::new(
            row.get(4)?,
            row.get(5)?,
            row.get(6)?,
            row.get(7)?,
            OptionalAttrs {
                handle: row.get(8)?,
                alignment: row.get(9)?,
                created_ns: row.get(10)?,
                provenance: row.get(11)?,
                label: row.get(12)?,
                gc_priority: row.get(13)?,
                stack: row.get(15)?,
            },
            row.get(14)?,
        ))
    }

    fn insert(
        statement: &mut rusqlite::CachedStatement,
        (memory_id, uid): SpanKey,
        span: &Span<Self::Attrs>,
    ) -> rusqlite::Result<()> {
        let a = &span.attrs;
        statement.execute(params![
            memory_id,
            level(span.first, span.last),
            span.first,
            uid,
            span.last,
            a.offset,
            a.size,
            a.state,
            a.kind,
            a.handle(),
            a.alignment(),
            a.created_ns(),
            a.provenance(),
            a.label(),
            a.gc_priority(),
            a.attrs,
            a.stack(),
        ])?;
        Ok(())
    }
}

/// Hole spans, keyed by (memory id, offset); the attribute is the size.
pub struct HoleSpans;

impl SpanTable for HoleSpans {
    type Attrs = i64;

    const TABLE: &'static str = "hole_span";
    const KEY_COLUMN: &'static str = "offset";
    const STORED: &'static str = "hole_span_stored";
    const ENDS: &'static str = "hole_span_end";
    const COLUMNS: &'static str = "memory_id, offset, first_seq, last_seq, size";
    const INSERT: &'static str = "INSERT INTO hole_span_stored (memory_id, level, first_seq, offset, last_seq, size) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

    fn attrs(row: &rusqlite::Row) -> rusqlite::Result<Self::Attrs> {
        row.get(4)
    }

    fn insert(
        statement: &mut rusqlite::CachedStatement,
        (memory_id, offset): SpanKey,
        span: &Span<Self::Attrs>,
    ) -> rusqlite::Result<()> {
        statement.execute(params![
            memory_id,
            level(span.first, span.last),
            span.first,
            offset,
            span.last,
            span.attrs
        ])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_attributes_keep_absent_apart_from_zero() {
        let with =
            |[handle, alignment, created_ns, provenance, label, gc_priority, stack]: [Option<i64>;
                 7]| {
                let optional = OptionalAttrs {
                    handle,
                    alignment,
                    created_ns,
                    provenance,
                    label,
                    gc_priority,
                    stack,
                };
                AllocationAttrs::new(0, 1, 2, 3, optional, None)
            };
        let absent = with([None; 7]);
        let zeros = with([Some(0); 7]);
        assert_ne!(absent, zeros);
        assert_eq!(absent.handle(), None);
        assert_eq!(zeros.gc_priority(), Some(0));
        assert_eq!(zeros.stack(), Some(0));
        let mixed = with([
            Some(-1),
            None,
            Some(i64::MIN),
            Some(7),
            None,
            Some(i64::MAX),
            Some(12),
        ]);
        assert_eq!(
            [
                mixed.handle(),
                mixed.alignment(),
                mixed.created_ns(),
                mixed.provenance(),
                mixed.label(),
                mixed.gc_priority(),
                mixed.stack()
            ],
            [
                Some(-1),
                None,
                Some(i64::MIN),
                Some(7),
                None,
                Some(i64::MAX),
                Some(12)
            ]
        );
        assert_ne!(
            mixed,
            with([
                Some(-1),
                None,
                Some(i64::MIN),
                Some(7),
                None,
                Some(i64::MAX),
                None
            ])
        );
    }
}
