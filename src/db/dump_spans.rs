//! A dump's allocations and holes as span changes: what the spans must hold at the dump's seq,
//! the spans around it (from the writer's memory when the dump follows the node's latest
//! snapshot, else from the database), and the planned changes written as they come. An open span
//! that ends is recorded, not moved (see migrations/V8__span_ends.sql): [`Ends`] says how many.

use std::cell::Cell;
use std::rc::Rc;

use rusqlite::Connection;

use super::rows::{allocation_attrs, id_bits, node_memories, size_bits};
use super::span_tables::{move_all_ends, AllocationAttrs, AllocationSpans, HoleSpans, SpanTable};
use super::spans::{self, OpenList, Span, SpanList};
use crate::dump::{Prepared, Sym};

/// The open spans of a node's latest snapshot, as committed, and the emptied lists of the
/// snapshot before, in which the next dump's are made (see [`spans::Draining::handing_back`]).
pub(super) struct NodeSpans {
    pub(super) latest: i64,
    allocations: OpenList<(i64, i64), AllocationAttrs>,
    holes: OpenList<(i64, i64), i64>,
    spare_allocations: OpenList<(i64, i64), AllocationAttrs>,
    spare_holes: OpenList<(i64, i64), i64>,
}

/// A list of spans handed to the planner, its memory given back as it is read.
type Around<A> = Box<dyn Iterator<Item = ((i64, i64), Span<A>)>>;

fn around<A: 'static>(list: SpanList<(i64, i64), A>) -> Around<A> {
    Box::new(spans::Draining::new(list))
}

/// Where a drained list of open spans is handed back, emptied.
type HandBack<A> = Rc<Cell<OpenList<(i64, i64), A>>>;

fn around_open<A: 'static>(
    list: OpenList<(i64, i64), A>,
    hand_back: Option<HandBack<A>>,
) -> Around<A> {
    let draining = match hand_back {
        Some(slot) => spans::Draining::handing_back(list, slot),
        None => spans::Draining::new(list),
    };
    Box::new(draining.map(|(key, first, attrs)| {
        (
            key,
            Span {
                first,
                last: None,
                attrs,
            },
        )
    }))
}

/// A node's emptied lists of open spans are kept for the next dump (see [`NodeSpans`]) when both
/// take at most this many bytes.
const HAND_BACK_BYTES: usize = 16 << 20;

/// The memory a list takes.
fn bytes_of<T>(list: &Vec<T>) -> usize {
    list.capacity().saturating_mul(std::mem::size_of::<T>())
}

/// The span ends a dump recorded (see migrations/V8__span_ends.sql).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Ends {
    /// Whether all ends recorded before the dump were moved into the span tables first.
    pub(super) moved_before: bool,
    /// How many the dump recorded.
    pub(super) recorded: u64,
}

/// Recorded span ends move into the span tables when an import finishes, or once this many pile
/// up (a long import, `import --follow`): the views look each open span up among them, and a
/// dump's ends are written all over their table once it is many pages long.
pub(super) const MOST_PENDING_ENDS: u64 = 1 << 20;

/// The allocation and hole spans with this snapshot in them; the node's open spans after it
/// when this is the node's latest snapshot.
pub(super) fn write_spans(
    tx: &Connection,
    prepared: &Prepared,
    run_id: i64,
    (ids, stacks): (&[i64], &[i64]),
    memory_of: &[i64],
    (prev, next): (Option<i64>, Option<i64>),
    cache: Option<NodeSpans>,
) -> rusqlite::Result<(Option<NodeSpans>, Ends)> {
    let dump = &prepared.dump;
    let (node, seq) = (dump.run.node, dump.snapshot.seq);
    let sym = |sym: Sym| ids[sym.0 as usize];
    let opt = |value: Option<Sym>| value.map(sym);
    // What the spans must hold at `seq`, in key order (memory id, then uid or offset), made as
    // the planner asks for it.
    let mut memories_in_order: Vec<usize> = (0..dump.memories.len()).collect();
    memories_in_order.sort_unstable_by_key(|&index| memory_of[index]);
    let allocations = memories_in_order.iter().flat_map(|&index| {
        let (memory, memory_id) = (&dump.memories[index], memory_of[index]);
        prepared.by_uid[index].iter().map(move |&position| {
            let allocation = &memory.allocations[position as usize];
            (
                (memory_id, id_bits(allocation.uid)),
                allocation_attrs(
                    allocation,
                    sym(allocation.kind),
                    opt(allocation.provenance),
                    opt(allocation.label),
                    allocation
                        .stack()
                        .and_then(|stack| stacks.get(stack as usize).copied()),
                ),
            )
        })
    });
    let holes = memories_in_order.iter().flat_map(|&index| {
        let memory_id = memory_of[index];
        prepared.holes[index]
            .iter()
            .map(move |hole| ((memory_id, size_bits(hole.offset)), size_bits(hole.size)))
    });
    // The spans around `seq`: from memory when `seq` follows the node's latest snapshot that
    // this writer wrote, else from the database.
    let memory_ids = node_memories(tx, run_id, node)?;
    let appended = next.is_none() && prev.is_some();
    let cache = cache.filter(|spans| appended && Some(spans.latest) == prev);
    let moved_before = cache.is_none();
    if moved_before {
        // Spans read from the database are planned against where they are stored: ends
        // recorded by earlier dumps move into the span tables first.
        move_all_ends(tx)?;
    }
    let recorded = Cell::new(0u64);
    // The lists the cached spans are drained from come back empty, for the dump after this one.
    let drained_allocations = Rc::new(Cell::new(Vec::new()));
    let drained_holes = Rc::new(Cell::new(Vec::new()));
    let (mut spare_allocations, mut spare_holes) = (Vec::new(), Vec::new());
    let (prev_allocations, prev_holes) = match (cache, prev) {
        (Some(spans), _) => {
            // Only a node whose open spans are small keeps a spare pair of lists: for one whose
            // lists take more, holding a second pair between dumps would raise the import's peak.
            let small = bytes_of(&spans.allocations) + bytes_of(&spans.holes) <= HAND_BACK_BYTES;
            spare_allocations = spans.spare_allocations;
            spare_holes = spans.spare_holes;
            (
                around_open(
                    spans.allocations,
                    small.then(|| drained_allocations.clone()),
                ),
                around_open(spans.holes, small.then(|| drained_holes.clone())),
            )
        }
        (None, Some(_)) if appended => (
            around(AllocationSpans::open(tx, &memory_ids)?),
            around(HoleSpans::open(tx, &memory_ids)?),
        ),
        (None, Some(prev)) => (
            around(AllocationSpans::containing(tx, &memory_ids, prev)?),
            around(HoleSpans::containing(tx, &memory_ids, prev)?),
        ),
        (None, None) => (around(Vec::new()), around(Vec::new())),
    };
    let (next_allocations, next_holes) = match next {
        Some(next) => (
            AllocationSpans::containing(tx, &memory_ids, next)?,
            HoleSpans::containing(tx, &memory_ids, next)?,
        ),
        None => (Vec::new(), Vec::new()),
    };
    // Changes are written in batches while they are planned (see spans::plan_insert).
    let open_allocations = spans::plan_insert(
        seq,
        prev,
        next,
        prev_allocations,
        &next_allocations,
        allocations,
        spare_allocations,
        &mut |changes| {
            recorded.set(recorded.get() + ends_in(changes));
            AllocationSpans::apply(tx, changes)
        },
    )?;
    let open_holes = spans::plan_insert(
        seq,
        prev,
        next,
        prev_holes,
        &next_holes,
        holes,
        spare_holes,
        &mut |changes| {
            recorded.set(recorded.get() + ends_in(changes));
            HoleSpans::apply(tx, changes)
        },
    )?;
    // When `seq` is the node's latest snapshot, its open spans are what the next dump needs.
    let open = match (open_allocations, open_holes) {
        (Some(allocations), Some(holes)) => Some(NodeSpans {
            latest: seq,
            allocations,
            holes,
            spare_allocations: drained_allocations.take(),
            spare_holes: drained_holes.take(),
        }),
        _ => None,
    };
    let ends = Ends {
        moved_before,
        recorded: recorded.get(),
    };
    Ok((open, ends))
}

/// How many of `changes` record a span's end.
fn ends_in<K, A>(changes: &[spans::Change<K, A>]) -> u64 {
    changes
        .iter()
        .filter(|change| matches!(change, spans::Change::End(..)))
        .count() as u64
}
