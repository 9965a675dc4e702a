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
//! The planning here is pure (lists in, a list of changes out) and works on lists sorted by key,
//! merged in one pass: a node's snapshot holds tens of thousands of things, and walking sorted
//! lists side by side costs far less than looking each one up. [`SpanTable`] reads and writes.

use std::cell::Cell;
use std::cmp::Ordering;
use std::iter::Peekable;
use std::rc::Rc;

/// Spans by key, sorted by key, each key once.
pub type SpanList<K, A> = Vec<(K, Span<A>)>;

/// The open spans of a node's latest snapshot, as the importer keeps them between dumps: key,
/// first snapshot and attributes (an open span has no last one: 16 bytes less a live allocation).
pub type OpenList<K, A> = Vec<(K, i64, A)>;

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
    /// The open span ends at the given seq: the same as deleting it and inserting it closed,
    /// which the writer defers (it records the end, see migrations/V8__span_ends.sql).
    End(K, Span<A>, i64),
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

/// Changes planned and not yet written: written in batches as they come, so that a dump of a
/// million new allocations is never a million planned changes in memory at once.
struct Batch<'a, K, A, E> {
    changes: Vec<Change<K, A>>,
    apply: Apply<'a, K, A, E>,
}

/// What writes a batch of changes.
pub type Apply<'a, K, A, E> = &'a mut dyn FnMut(&[Change<K, A>]) -> Result<(), E>;

/// Changes written at once (a batch holds at most this many).
const BATCH: usize = 4096;

impl<K: Copy, A: Clone, E> Batch<'_, K, A, E> {
    /// Insert a span; an open one is also kept in `open` (when the snapshot is the latest).
    fn insert(
        &mut self,
        open: Option<&mut OpenList<K, A>>,
        key: K,
        span: Span<A>,
    ) -> Result<(), E> {
        if let (Some(open), None) = (open, span.last) {
            open.push((key, span.first, span.attrs.clone()));
        }
        self.push(Change::Insert(key, span))
    }

    fn push(&mut self, change: Change<K, A>) -> Result<(), E> {
        self.changes.push(change);
        if self.changes.len() >= BATCH {
            (self.apply)(&self.changes)?;
            self.changes.clear();
        }
        Ok(())
    }

    fn finish(self) -> Result<(), E> {
        if self.changes.is_empty() {
            return Ok(());
        }
        (self.apply)(&self.changes)
    }
}

/// A list handed out from its front while giving its memory back as it goes: the spans of the
/// previous snapshot are consumed while the open spans of this one are built, and holding both
/// whole would double the importer's largest structure (a node's live allocations).
pub struct Draining<T> {
    /// The list in reverse order: its front is popped from the end.
    reversed: Vec<T>,
    taken: usize,
    /// Where the emptied list goes when the draining is dropped, to be filled again.
    hand_back: Option<Rc<Cell<Vec<T>>>>,
}

impl<T> Draining<T> {
    pub fn new(mut list: Vec<T>) -> Self {
        list.reverse();
        Draining {
            reversed: list,
            taken: 0,
            hand_back: None,
        }
    }

    /// Like [`Draining::new`], and when dropped, the emptied list (its memory already mapped)
    /// goes into `slot`: the importer builds the next dump's open spans in it instead of in fresh
    /// memory that the kernel maps and zeroes page by page.
    pub fn handing_back(list: Vec<T>, slot: Rc<Cell<Vec<T>>>) -> Self {
        let mut draining = Draining::new(list);
        draining.hand_back = Some(slot);
        draining
    }
}

impl<T> Drop for Draining<T> {
    fn drop(&mut self) {
        if let Some(slot) = &self.hand_back {
            let mut list = std::mem::take(&mut self.reversed);
            list.clear();
            slot.set(list);
        }
    }
}

impl<T> Iterator for Draining<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let item = self.reversed.pop()?;
        self.taken += 1;
        // Every 64Ki entries, give the spare end of the buffer back (for a large buffer the
        // allocator shrinks it in place, without copying).
        if self.taken.is_multiple_of(65536) {
            self.reversed.shrink_to_fit();
        }
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.reversed.len(), Some(self.reversed.len()))
    }
}

/// The next entry of a sorted list when it has `key`.
fn take_if<K: Ord, V, I: Iterator<Item = (K, V)>>(list: &mut Peekable<I>, key: &K) -> Option<V> {
    match list.peek() {
        Some((candidate, _)) if candidate == key => list.next().map(|(_, value)| value),
        _ => None,
    }
}

/// The smallest key at the head of the lists.
fn smallest<'k, K: Ord>(keys: impl IntoIterator<Item = Option<&'k K>>) -> Option<&'k K> {
    keys.into_iter().flatten().min_by(|a, b| a.cmp(b))
}

/// The changes that insert snapshot `seq` holding `things`, given the spans that contain its
/// neighbours, handed to `apply` in batches as they are planned. `things` and both lists are
/// sorted by key with each key once. Returns, when `seq` is the node's latest snapshot, its open
/// spans (what the next dump starts from), made in `spare`'s memory.
#[allow(clippy::too_many_arguments)]
pub fn plan_insert<K: Copy + Ord, A: Clone + PartialEq, E>(
    seq: i64,
    prev: Option<i64>,
    next: Option<i64>,
    around_prev: impl Iterator<Item = (K, Span<A>)>,
    around_next: &[(K, Span<A>)],
    things: impl IntoIterator<Item = (K, A)>,
    spare: OpenList<K, A>,
    apply: Apply<'_, K, A, E>,
) -> Result<Option<OpenList<K, A>>, E> {
    // Spans passing over `seq`: they contain `prev` and reach on to `next` (or are open).
    let passes = |span: &Span<A>| match next {
        Some(next) => span.reaches(next),
        None => span.last.is_none(),
    };
    let things = things.into_iter();
    let mut changes = Batch {
        changes: Vec::new(),
        apply,
    };
    let room = around_prev.size_hint().0.max(things.size_hint().0);
    let mut open = next.is_none().then(|| {
        let mut list = spare;
        list.clear();
        list.reserve(room);
        list
    });
    let mut before = around_prev.peekable();
    let mut after = around_next
        .iter()
        .map(|(key, span)| (*key, span))
        .peekable();
    let mut things = things.peekable();
    while let Some(&key) = smallest([
        before.peek().map(|(key, _)| key),
        things.peek().map(|(key, _)| key),
    ]) {
        // Spans around `next` only matter for keys present before or at `seq`.
        while after
            .peek()
            .is_some_and(|(candidate, _)| candidate.cmp(&key) == Ordering::Less)
        {
            after.next();
        }
        let left = take_if(&mut before, &key);
        let right = take_if(&mut after, &key);
        let thing = take_if(&mut things, &key);
        let passing = left.as_ref().filter(|span| passes(span));
        match (passing, thing) {
            (Some(span), Some(attrs)) if span.attrs == attrs => {
                // Unchanged over `seq`: nothing to write.
                if let (Some(open), Some(span)) = (open.as_mut(), left) {
                    open.push((key, span.first, span.attrs));
                }
            }
            (Some(span), thing) => {
                // Absent or different at `seq`: cut around it. An open span that `seq` follows
                // (it passes over `seq` only by being open) just ends at `prev`.
                let span = span.clone();
                match (prev, next) {
                    (Some(prev), None) => changes.push(Change::End(key, span, prev))?,
                    _ => {
                        changes.push(Change::Delete(key, span.clone()))?;
                        if let Some(prev) = prev {
                            changes.push(Change::Insert(
                                key,
                                Span {
                                    first: span.first,
                                    last: Some(prev),
                                    attrs: span.attrs.clone(),
                                },
                            ))?;
                        }
                        if let Some(next) = next {
                            changes.push(Change::Insert(
                                key,
                                Span {
                                    first: next,
                                    last: span.last,
                                    attrs: span.attrs,
                                },
                            ))?;
                        }
                    }
                }
                if let Some(attrs) = thing {
                    let new = Span {
                        first: seq,
                        last: next.map(|_| seq),
                        attrs,
                    };
                    changes.insert(open.as_mut(), key, new)?;
                }
            }
            (None, Some(attrs)) => {
                let joins_left = prev
                    .and_then(|prev| left.filter(|span| span.ends_at(prev) && span.attrs == attrs));
                let joins_right = next.and_then(|next| {
                    right.filter(|span| span.first == next && span.attrs == attrs)
                });
                let new = match (joins_left, joins_right) {
                    (Some(left), Some(right)) => {
                        changes.push(Change::Delete(key, left.clone()))?;
                        changes.push(Change::Delete(key, right.clone()))?;
                        Span {
                            first: left.first,
                            last: right.last,
                            attrs,
                        }
                    }
                    (Some(left), None) => {
                        changes.push(Change::Delete(key, left.clone()))?;
                        Span {
                            first: left.first,
                            last: Some(seq),
                            attrs,
                        }
                    }
                    (None, Some(right)) => {
                        changes.push(Change::Delete(key, right.clone()))?;
                        Span {
                            first: seq,
                            last: right.last,
                            attrs,
                        }
                    }
                    (None, None) => Span {
                        first: seq,
                        last: next.map(|_| seq),
                        attrs,
                    },
                };
                changes.insert(open.as_mut(), key, new)?;
            }
            (None, None) => {} // a span that ended at `prev`, with nothing at `seq`
        }
    }
    changes.finish()?;
    Ok(open)
}

/// The changes that remove snapshot `seq`, given the spans containing it and its neighbours.
pub fn plan_remove<K: Copy + Ord, A: Clone + PartialEq>(
    seq: i64,
    prev: Option<i64>,
    next: Option<i64>,
    around: &[(K, Span<A>)],
    around_prev: &[(K, Span<A>)],
    around_next: &[(K, Span<A>)],
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
                changes.push(Change::Insert(
                    *key,
                    Span {
                        first: next,
                        last: span.last,
                        attrs: span.attrs.clone(),
                    },
                ));
            }
        } else if let Some(prev) = prev {
            changes.push(Change::Insert(
                *key,
                Span {
                    first: span.first,
                    last: Some(prev),
                    attrs: span.attrs.clone(),
                },
            ));
        }
    }
    // What changed at `seq` may now be unchanged from `prev` to `next`: join those spans. When
    // `seq` was the latest, what ended at `prev` is present at the new latest: open again.
    if let Some(prev) = prev {
        for (key, left) in around_prev.iter().filter(|(_, span)| span.ends_at(prev)) {
            match next {
                Some(next) => {
                    let right = around_next
                        .binary_search_by(|(candidate, _)| candidate.cmp(key))
                        .ok()
                        .map(|index| &around_next[index].1);
                    if let Some(right) =
                        right.filter(|span| span.first == next && span.attrs == left.attrs)
                    {
                        changes.push(Change::Delete(*key, left.clone()));
                        changes.push(Change::Delete(*key, right.clone()));
                        changes.push(Change::Insert(
                            *key,
                            Span {
                                first: left.first,
                                last: right.last,
                                attrs: left.attrs.clone(),
                            },
                        ));
                    }
                }
                None => {
                    changes.push(Change::Delete(*key, left.clone()));
                    changes.push(Change::Insert(
                        *key,
                        Span {
                            first: left.first,
                            last: None,
                            attrs: left.attrs.clone(),
                        },
                    ));
                }
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_span(first: i64, attrs: char) -> Span<char> {
        Span {
            first,
            last: None,
            attrs,
        }
    }

    #[test]
    fn the_next_dump_ends_what_changed_and_builds_its_open_spans_in_the_spare_list() {
        // Snapshot 2 follows snapshot 1 (the latest): key 1 is unchanged, key 2 is gone, key 3
        // is new. The spare list still holds a stale entry, which must not survive.
        let around = vec![(1, open_span(1, 'a')), (2, open_span(1, 'b'))];
        let mut changes = Vec::new();
        let open = plan_insert::<i32, char, ()>(
            2,
            Some(1),
            None,
            around.into_iter(),
            &[],
            [(1, 'a'), (3, 'c')],
            vec![(9, 0, 'z')],
            &mut |batch| {
                changes.extend_from_slice(batch);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(open, Some(vec![(1, 1, 'a'), (3, 2, 'c')]));
        assert_eq!(
            changes,
            vec![
                Change::End(2, open_span(1, 'b'), 1),
                Change::Insert(3, open_span(2, 'c')),
            ]
        );
    }

    #[test]
    fn a_drained_list_is_handed_back_empty_with_its_memory() {
        let slot = Rc::new(Cell::new(Vec::new()));
        let list: Vec<u64> = (0..1000).collect();
        let first: Vec<u64> = Draining::handing_back(list, slot.clone())
            .take(10)
            .collect();
        assert_eq!(first, (0..10).collect::<Vec<_>>());
        let back = slot.take();
        assert!(back.is_empty());
        assert!(back.capacity() >= 1000, "{}", back.capacity());
        // A plain draining hands nothing back.
        drop(Draining::new(vec![1u64, 2, 3]));
        assert_eq!(slot.take().capacity(), 0);
    }

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
        for (first, last) in [
            (0, 0),
            (3, 10),
            (7, 1000),
            (0, i64::MAX),
            (1 << 40, (1 << 41) + 3),
        ] {
            let level = level(first, Some(last));
            assert!(
                last - first <= reach(level),
                "{first}..{last} fits its level"
            );
            assert!(
                level == 0 || last - first > reach(level - 1),
                "{first}..{last} is in the smallest level"
            );
            assert!(levels().any(|known| known == level));
        }
    }
}
