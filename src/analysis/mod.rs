//! Answers computed from what was loaded of one or two snapshots: the layout of a memory, the
//! allocations that block a request ([`window`] finds the cheapest place), the verdict on a failed
//! request, and the difference between two snapshots. Nothing here reads the database: the loaders
//! of `query::load` fill these types from the public views, so every answer here can be worked out
//! by hand from a fixture.

pub mod window;

use serde::Serialize;

use crate::dump::figures::{self, gaps, merge};
use crate::dump::{Range, State};
pub use window::{cheapest_window, Window};

/// An allocation as the analyses show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocationInfo {
    pub uid: String,
    pub handle: Option<String>,
    pub kind: String,
    pub state: State,
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
        self.state.blocks_reuse()
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
    pub time_ns: i64,
    pub handle: String,
    pub kind: String,
    pub capacity: u64,
    pub alignment: Option<u64>,
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
        figures::unaccounted_ranges(self.allocations.iter().map(AllocationInfo::range), self.holes_listed.then_some(&self.holes[..]), self.capacity)
    }

    /// What neither collection nor pending releases can free: valid and pending_alloc
    /// allocations, and unaccounted bytes. Merged and sorted.
    pub fn unmovable(&self) -> Vec<Range> {
        figures::unmovable_ranges(self.allocations.iter().map(|allocation| (allocation.range(), allocation.state)), &self.unaccounted())
    }

    /// Bytes covered by allocations.
    pub fn used_bytes(&self) -> u64 {
        figures::used_bytes(self.allocations.iter().map(AllocationInfo::range))
    }

    pub fn fragmentation(&self) -> f64 {
        figures::fragmentation(self.largest_hole, self.free_bytes)
    }
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

impl Blockers {
    /// The window's end.
    pub fn end(&self) -> u64 {
        self.offset + self.size
    }
}

fn overlap(a: Range, b: Range) -> u64 {
    a.end().min(b.end()).saturating_sub(a.offset.max(b.offset))
}

/// The contiguous free stretch that would hold `span` if the given allocations were gone: the gap
/// around it among what stays (unmovable allocations other than `gone`, and unaccounted bytes).
fn opening(layout: &Layout, span: Range, gone: &dyn Fn(&AllocationInfo) -> bool) -> u64 {
    let unaccounted = layout.unaccounted();
    let remaining = merge(
        layout
            .allocations
            .iter()
            .filter(|allocation| allocation.blocks() && !gone(allocation))
            .map(AllocationInfo::range)
            .chain(unaccounted.into_iter().filter(|range| overlap(*range, span) == 0)),
    );
    gaps(&remaining, layout.capacity).into_iter().find(|gap| gap.offset <= span.offset && gap.end() >= span.end()).map(|gap| gap.size).unwrap_or(0)
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
    let opens = opening(layout, span, &|allocation| overlap(allocation.range(), span) > 0).max(size);
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

/// Among the blockers of a window, the one whose removal alone opens the largest contiguous
/// stretch around the window, and that stretch: what to move or free first.
pub fn first_to_move(layout: &Layout, blockers: &Blockers) -> Option<(AllocationInfo, u64)> {
    let span = Range { offset: blockers.offset, size: blockers.size };
    blockers
        .blocking
        .iter()
        .map(|candidate| {
            // Everything unmovable stays but this one (and what collection frees).
            let opens = {
                let unaccounted = layout.unaccounted();
                let remaining = merge(
                    layout
                        .allocations
                        .iter()
                        .filter(|allocation| allocation.blocks() && allocation.uid != candidate.uid)
                        .map(AllocationInfo::range)
                        .chain(unaccounted),
                );
                gaps(&remaining, layout.capacity)
                    .into_iter()
                    .filter(|gap| overlap(*gap, candidate.range()) > 0)
                    .map(|gap| gap.size)
                    .max()
                    .unwrap_or(0)
            };
            (candidate.clone(), opens)
        })
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.size.cmp(&a.0.size)).then_with(|| overlap(b.0.range(), span).cmp(&overlap(a.0.range(), span))))
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Fewer free bytes than the request: more memory is needed.
    Exhaustion,
    /// Enough free bytes, but no hole big enough.
    Fragmentation,
    /// A hole is big enough now (the memory changed since the request failed).
    Fits,
}

impl Verdict {
    pub fn of(layout: &Layout, size: u64) -> Verdict {
        if layout.free_bytes < size {
            Verdict::Exhaustion
        } else if layout.largest_hole < size {
            Verdict::Fragmentation
        } else {
            Verdict::Fits
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Exhaustion => "exhaustion",
            Verdict::Fragmentation => "fragmentation",
            Verdict::Fits => "fits",
        }
    }
}

/// A request a memory could not satisfy, as loaded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Request {
    pub snapshot_id: i64,
    pub memory_id: i64,
    pub size: u64,
    pub alignment: u64,
    pub kind: Option<String>,
    pub provenance: Option<String>,
    pub time_ns: Option<i64>,
    pub note: Option<String>,
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
    pub verdict: Verdict,
    /// Whether collecting every collectable allocation and finishing the pending releases would
    /// make a range big enough.
    pub solved_by_collection: bool,
    pub blockers: Option<Blockers>,
}

/// The finding for a request that failed in `layout`.
pub fn finding(layout: &Layout, request: &Request) -> OomFinding {
    let (size, alignment) = (request.size, request.alignment.max(1));
    OomFinding {
        snapshot_id: layout.snapshot_id,
        run: layout.run.clone(),
        node: layout.node,
        seq: layout.seq,
        memory_id: layout.memory_id,
        handle: layout.handle.clone(),
        memory_kind: layout.kind.clone(),
        size,
        alignment,
        kind: request.kind.clone(),
        provenance: request.provenance.clone(),
        note: request.note.clone(),
        free_bytes: layout.free_bytes,
        largest_hole: layout.largest_hole,
        largest_reclaimable: layout.largest_reclaimable,
        verdict: Verdict::of(layout, size),
        solved_by_collection: layout.largest_reclaimable >= size,
        blockers: blockers(layout, size, alignment),
    }
}

/// How an allocation differs between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Appeared,
    Disappeared,
    /// Its state, place or size changed.
    Changed,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Appeared => "appeared",
            ChangeKind::Disappeared => "disappeared",
            ChangeKind::Changed => "changed",
        }
    }
}

/// An allocation of one snapshot, keyed for a diff by its memory's handle and its uid.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub handle: String,
    pub allocation: AllocationInfo,
}

/// How an allocation differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub change: ChangeKind,
    pub handle: String,
    pub uid: String,
    pub kind: String,
    pub provenance: Option<String>,
    pub size: u64,
    pub offset: u64,
    pub state_before: Option<State>,
    pub state_after: Option<State>,
}

/// Allocations that appeared, disappeared or changed (state, place or size) from `before` to
/// `after`, matched by memory handle and uid; sorted by handle, offset and uid.
pub fn diff(before: &[Placed], after: &[Placed]) -> Vec<Change> {
    use std::collections::BTreeMap;
    let index = |placed: &[Placed]| -> BTreeMap<(String, String), AllocationInfo> {
        placed.iter().map(|one| ((one.handle.clone(), one.allocation.uid.clone()), one.allocation.clone())).collect()
    };
    let (old, new) = (index(before), index(after));
    let change = |kind: ChangeKind, handle: &str, shown: &AllocationInfo, before: Option<&AllocationInfo>, after: Option<&AllocationInfo>| Change {
        change: kind,
        handle: handle.to_string(),
        uid: shown.uid.clone(),
        kind: shown.kind.clone(),
        provenance: shown.provenance.clone(),
        size: shown.size,
        offset: shown.offset,
        state_before: before.map(|allocation| allocation.state),
        state_after: after.map(|allocation| allocation.state),
    };
    let mut changes = Vec::new();
    for ((handle, uid), allocation) in &old {
        if !new.contains_key(&(handle.clone(), uid.clone())) {
            changes.push(change(ChangeKind::Disappeared, handle, allocation, Some(allocation), None));
        }
    }
    for ((handle, uid), allocation) in &new {
        match old.get(&(handle.clone(), uid.clone())) {
            None => changes.push(change(ChangeKind::Appeared, handle, allocation, None, Some(allocation))),
            Some(earlier) if (earlier.state, earlier.offset, earlier.size) != (allocation.state, allocation.offset, allocation.size) => {
                changes.push(change(ChangeKind::Changed, handle, allocation, Some(earlier), Some(allocation)))
            }
            Some(_) => {}
        }
    }
    changes.sort_by(|a, b| (a.handle.as_str(), a.offset, a.uid.as_str()).cmp(&(b.handle.as_str(), b.offset, b.uid.as_str())));
    changes
}

/// One line of a trend chart: a figure of one memory over a run's snapshots.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub node: i64,
    pub handle: String,
    pub kind: String,
    /// (x, y): time in seconds or seq, and the figure.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn label(&self) -> String {
        format!("node {} {} {}", self.node, self.kind, self.handle)
    }
}
