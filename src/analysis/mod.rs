//! Answers computed from what was loaded of one or two snapshots: the layout of a memory, the
//! allocations that block a request ([`window`] finds the cheapest place), the verdict on a failed
//! request, the difference between two snapshots ([`diff`]) and the shape of a memory's history
//! across a run ([`history`]). Nothing here reads the database:
//! the loaders of `query::load` fill these types from the public views, so every answer here can
//! be worked out by hand from a fixture.

pub mod bins;
pub mod cache;
pub mod compare;
pub mod diff;
pub mod history;
pub mod window;

use serde::Serialize;

use crate::dump::figures::{self, gaps, merge};
use crate::dump::model::Unknown;
use crate::dump::{Range, State};
pub use diff::{diff, Change, ChangeKind, Placed};
pub use history::{History, HistorySpan, HistorySummary};
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
        Range {
            offset: self.offset,
            size: self.size,
        }
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
    /// What the dump did not know: the figures that depend on it are stand-ins, not facts.
    #[serde(skip)]
    pub unknown: Unknown,
}

impl Layout {
    /// Bytes held by neither an allocation nor a listed hole.
    pub fn unaccounted(&self) -> Vec<Range> {
        figures::unaccounted_ranges(
            self.allocations.iter().map(AllocationInfo::range),
            self.holes_listed.then_some(&self.holes[..]),
            self.capacity,
        )
    }

    /// What neither collection nor pending releases can free: valid and pending_alloc
    /// allocations, and unaccounted bytes. Merged and sorted.
    pub fn unmovable(&self) -> Vec<Range> {
        figures::unmovable_ranges(
            self.allocations
                .iter()
                .map(|allocation| (allocation.range(), allocation.state)),
            &self.unaccounted(),
        )
    }

    /// Bytes covered by allocations.
    pub fn used_bytes(&self) -> u64 {
        figures::used_bytes(self.allocations.iter().map(AllocationInfo::range))
    }

    pub fn fragmentation(&self) -> f64 {
        figures::fragmentation(self.largest_hole, self.free_bytes)
    }

    /// The capacity, when the dump knows it.
    pub fn known_capacity(&self) -> Option<u64> {
        (!self.unknown.capacity).then_some(self.capacity)
    }

    /// Bytes used, when the dump lists every allocation.
    pub fn known_used(&self) -> Option<u64> {
        (!self.unknown.allocations).then(|| self.used_bytes())
    }

    /// Free bytes in total, when capacity and allocations are known (placement need not be).
    pub fn known_free(&self) -> Option<u64> {
        self.unknown.free_known().then_some(self.free_bytes)
    }

    /// The largest hole, when where everything lies is known.
    pub fn known_largest_hole(&self) -> Option<u64> {
        self.unknown.holes_known().then_some(self.largest_hole)
    }

    /// The largest range collection could make, when where everything lies and the capacity
    /// are known (what lies past the listed holes counts against it).
    pub fn known_largest_reclaimable(&self) -> Option<u64> {
        (!self.unknown.any()).then_some(self.largest_reclaimable)
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

/// The stretches free of anything unmovable if the allocations `gone` names were gone: what stays
/// is the other unmovable allocations and the unaccounted ranges given (held by the allocator).
fn gaps_without(
    layout: &Layout,
    unaccounted: &[Range],
    gone: &dyn Fn(&AllocationInfo) -> bool,
) -> Vec<Range> {
    let remaining = merge(
        layout
            .allocations
            .iter()
            .filter(|allocation| allocation.blocks() && !gone(allocation))
            .map(AllocationInfo::range)
            .chain(unaccounted.iter().copied()),
    );
    gaps(&remaining, layout.capacity)
}

/// The contiguous free stretch that would hold `span` if the given allocations were gone: the gap
/// around it among what stays (unmovable allocations other than `gone`, and unaccounted bytes
/// outside the span).
fn opening(layout: &Layout, span: Range, gone: &dyn Fn(&AllocationInfo) -> bool) -> u64 {
    let unaccounted: Vec<Range> = layout
        .unaccounted()
        .into_iter()
        .filter(|range| overlap(*range, span) == 0)
        .collect();
    gaps_without(layout, &unaccounted, gone)
        .into_iter()
        .find(|gap| gap.offset <= span.offset && gap.end() >= span.end())
        .map(|gap| gap.size)
        .unwrap_or(0)
}

/// Where a request of `size` bytes aligned to `alignment` would cost the least, and what blocks it.
pub fn blockers(layout: &Layout, size: u64, alignment: u64) -> Option<Blockers> {
    let unmovable = layout.unmovable();
    let window = cheapest_window(layout.capacity, &unmovable, size, alignment)?;
    let span = Range {
        offset: window.offset,
        size,
    };
    let in_window = |allocation: &&AllocationInfo| overlap(allocation.range(), span) > 0;
    let blocking: Vec<AllocationInfo> = layout
        .allocations
        .iter()
        .filter(in_window)
        .filter(|a| a.blocks())
        .cloned()
        .collect();
    let to_collect: Vec<AllocationInfo> = layout
        .allocations
        .iter()
        .filter(in_window)
        .filter(|a| !a.blocks())
        .cloned()
        .collect();
    let unaccounted_bytes = layout
        .unaccounted()
        .iter()
        .map(|range| overlap(*range, span))
        .sum();
    // Without the blockers, the window lies in one stretch free of anything unmovable.
    let opens = opening(layout, span, &|allocation| {
        overlap(allocation.range(), span) > 0
    })
    .max(size);
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
    let span = Range {
        offset: blockers.offset,
        size: blockers.size,
    };
    let unaccounted = layout.unaccounted();
    blockers
        .blocking
        .iter()
        .map(|candidate| {
            // Everything unmovable stays but this one (and what collection frees).
            let opens = gaps_without(layout, &unaccounted, &|allocation| {
                allocation.uid == candidate.uid
            })
            .into_iter()
            .filter(|gap| overlap(*gap, candidate.range()) > 0)
            .map(|gap| gap.size)
            .max()
            .unwrap_or(0);
            (candidate.clone(), opens)
        })
        .max_by(|a, b| {
            a.1.cmp(&b.1)
                .then_with(|| b.0.size.cmp(&a.0.size))
                .then_with(|| overlap(b.0.range(), span).cmp(&overlap(a.0.range(), span)))
        })
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
    /// The input does not say enough to tell (its capacity, or where its allocations lie, is
    /// unknown) and the known figures decide nothing.
    #[serde(rename = "cannot-tell")]
    CannotTell,
}

impl Verdict {
    /// From the known figures only: fewer free bytes in total than the request is exhaustion
    /// whatever the placement; otherwise, without the holes, it cannot be told.
    pub fn of(layout: &Layout, size: u64) -> Verdict {
        match (layout.known_free(), layout.known_largest_hole()) {
            (Some(free), _) if free < size => Verdict::Exhaustion,
            (Some(_), Some(largest)) if largest < size => Verdict::Fragmentation,
            (Some(_), Some(_)) => Verdict::Fits,
            _ => Verdict::CannotTell,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Exhaustion => "exhaustion",
            Verdict::Fragmentation => "fragmentation",
            Verdict::Fits => "fits",
            Verdict::CannotTell => "cannot-tell",
        }
    }
}

/// A memory's free bytes and largest hole at one snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recent {
    pub snapshot_id: i64,
    pub seq: i64,
    pub time_s: f64,
    /// `None` where the dump did not know.
    pub free_bytes: Option<u64>,
    pub largest_hole: Option<u64>,
}

/// A request a memory could not satisfy, as loaded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Request {
    pub snapshot_id: i64,
    pub memory_id: i64,
    pub size: u64,
    /// `None` when the input does not say (a Legate report prints none).
    pub alignment: Option<u64>,
    pub kind: Option<String>,
    pub provenance: Option<String>,
    pub time_ns: Option<i64>,
    pub note: Option<String>,
    /// What the device had free outside the allocator (PyTorch's `device_free`).
    pub device_free: Option<u64>,
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
    /// The request's alignment; `None` (JSON null) when the input does not say. The cheapest
    /// window is then looked for at any byte (alignment 1: the least the request could need).
    pub alignment: Option<u64>,
    pub kind: Option<String>,
    pub provenance: Option<String>,
    pub note: Option<String>,
    /// The figures the input knows; `None` (JSON null) for what it does not say.
    pub capacity: Option<u64>,
    pub used_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub largest_hole: Option<u64>,
    pub largest_reclaimable: Option<u64>,
    /// What the input does not say about the memory (format v1's `unknown`).
    pub unknown: Vec<&'static str>,
    pub verdict: Verdict,
    /// Whether collecting every collectable allocation and finishing the pending releases would
    /// make a range big enough.
    pub solved_by_collection: bool,
    pub blockers: Option<Blockers>,
    /// For an allocator that caches device memory (the request says what the device had free
    /// outside it): the device's figures, from which the verdict then follows.
    pub cache: Option<cache::Cache>,
}

/// The finding for a request that failed in `layout`.
pub fn finding(layout: &Layout, request: &Request) -> OomFinding {
    let (size, alignment) = (request.size, request.alignment.unwrap_or(1).max(1));
    OomFinding {
        snapshot_id: layout.snapshot_id,
        run: layout.run.clone(),
        node: layout.node,
        seq: layout.seq,
        memory_id: layout.memory_id,
        handle: layout.handle.clone(),
        memory_kind: layout.kind.clone(),
        size,
        alignment: request.alignment,
        kind: request.kind.clone(),
        provenance: request.provenance.clone(),
        note: request.note.clone(),
        capacity: layout.known_capacity(),
        used_bytes: layout.known_used(),
        free_bytes: layout.known_free(),
        largest_hole: layout.known_largest_hole(),
        largest_reclaimable: layout.known_largest_reclaimable(),
        unknown: layout.unknown.names(),
        verdict: Verdict::of(layout, size),
        solved_by_collection: layout
            .known_largest_reclaimable()
            .is_some_and(|largest| largest >= size),
        blockers: if layout.unknown.holes_known() {
            blockers(layout, size, alignment)
        } else {
            None
        },
        cache: None,
    }
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

/// An out-of-memory snapshot on a trend chart: where on the x axis, and the request that failed
/// there (none when the dump lists no request).
#[derive(Debug, Clone, PartialEq)]
pub struct OomMark {
    pub x: f64,
    pub failed: Option<FailedAt>,
}

/// The memory a request failed in, and the request's size.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedAt {
    pub node: i64,
    pub handle: String,
    pub size: u64,
}

/// What garbage collection had already freed when a request failed: allocations that were
/// `collectable` in the memory's previous snapshot and are gone, or `pending_free`, in the one
/// where the request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Collected {
    pub allocations: u64,
    pub bytes: u64,
}

/// Collection between `before` and `after` (the same memory at two snapshots).
pub fn collected_between(before: &[AllocationInfo], after: &[AllocationInfo]) -> Collected {
    use std::collections::HashMap;
    let now: HashMap<&str, State> = after
        .iter()
        .map(|allocation| (allocation.uid.as_str(), allocation.state))
        .collect();
    let freed = before.iter().filter(|allocation| {
        allocation.state == State::Collectable
            && now
                .get(allocation.uid.as_str())
                .is_none_or(|state| *state == State::PendingFree)
    });
    freed.fold(
        Collected {
            allocations: 0,
            bytes: 0,
        },
        |total, allocation| Collected {
            allocations: total.allocations + 1,
            bytes: total.bytes + allocation.size,
        },
    )
}

/// A line of a blocker list: one allocation, or many small ones of a kind together.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "line", rename_all = "lowercase")]
pub enum BlockerLine<'a> {
    One {
        allocation: &'a AllocationInfo,
    },
    Group {
        kind: &'a str,
        count: u64,
        bytes: u64,
        low: u64,
        high: u64,
    },
}

/// Blockers as people can read them: every one when there are few (or `all`); else the largest
/// one by one and the rest grouped by kind, with the address range they lie in.
pub fn blocker_lines(blocking: &[AllocationInfo], all: bool) -> Vec<BlockerLine<'_>> {
    const FEW: usize = 8;
    const LARGEST: usize = 5;
    if all || blocking.len() <= FEW {
        return blocking
            .iter()
            .map(|allocation| BlockerLine::One { allocation })
            .collect();
    }
    let mut by_size: Vec<&AllocationInfo> = blocking.iter().collect();
    by_size.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.offset.cmp(&b.offset)));
    let mut lines: Vec<BlockerLine> = by_size[..LARGEST]
        .iter()
        .map(|&allocation| BlockerLine::One { allocation })
        .collect();
    let mut groups: Vec<(&str, u64, u64, u64, u64)> = Vec::new();
    for allocation in &by_size[LARGEST..] {
        match groups.iter_mut().find(|group| group.0 == allocation.kind) {
            Some(group) => {
                group.1 += 1;
                // Allocations may overlap (pending_alloc over pending_free): never past u64.
                group.2 = group.2.saturating_add(allocation.size);
                group.3 = group.3.min(allocation.offset);
                group.4 = group.4.max(allocation.range().end());
            }
            None => groups.push((
                allocation.kind.as_str(),
                1,
                allocation.size,
                allocation.offset,
                allocation.range().end(),
            )),
        }
    }
    groups.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(b.0)));
    lines.extend(
        groups
            .into_iter()
            .map(|(kind, count, bytes, low, high)| BlockerLine::Group {
                kind,
                count,
                bytes,
                low,
                high,
            }),
    );
    lines
}

/// What to do about a failed request, in one line, from its verdict.
pub fn advice(finding: &OomFinding, layout: &Layout) -> String {
    use crate::units::{hex_offset, human};
    if finding.verdict == Verdict::Fits {
        return "a hole is big enough now: the memory changed after the request failed; retrying it would succeed".to_string();
    }
    if finding.verdict == Verdict::CannotTell {
        return cannot_tell(finding, layout);
    }
    if finding.solved_by_collection {
        return format!(
            "collection would make room: freeing the collectable allocations and finishing the pending releases gives a {} range; collect before retrying (or lower what keeps them cached)",
            human(finding.largest_reclaimable.unwrap_or(0))
        );
    }
    if finding.verdict == Verdict::Exhaustion {
        let missing = finding.size.saturating_sub(finding.free_bytes.unwrap_or(0));
        return format!(
            "the memory is too small for this: it would need at least {} ({missing} bytes) more free, even with no fragmentation; give it more capacity or free other allocations",
            human(missing)
        );
    }
    match finding.blockers.as_ref().and_then(|blockers| first_to_move(layout, blockers).map(|first| (blockers, first))) {
        Some((blockers, (first, opens))) if opens >= finding.size => format!(
            "move or free {} first ({}, {} at {}{}): that alone opens {} contiguous, enough for the request",
            first.uid,
            first.kind,
            human(first.size),
            hex_offset(first.offset as i64),
            first.provenance.as_deref().map(|provenance| format!(", from {provenance}")).unwrap_or_default(),
            human(opens.max(blockers.size)),
        ),
        Some((blockers, (first, opens))) => format!(
            "no single allocation is enough: {} ({}, {}) opens the most alone ({}); moving or freeing all {} blockers opens {}",
            first.uid,
            first.kind,
            human(first.size),
            human(opens),
            blockers.blocking.len(),
            human(blockers.opens)
        ),
        None => "the request is larger than the whole memory".to_string(),
    }
}

/// What a "cannot tell" finding says: which figures are known, what they leave open, and what
/// input would tell.
fn cannot_tell(finding: &OomFinding, layout: &Layout) -> String {
    use crate::units::human;
    let _ = layout;
    let tell = "a report that prints the instances' addresses (Legate 26.01 or later), or a memstate dump of this memory, would tell";
    match finding.free_bytes {
        Some(free) => format!(
            "cannot tell why: {} are free in total, enough for the {} request, but the input does not say where they lie, so fragmentation, alignment or per-instance overhead could each explain the failure; {tell}",
            human(free),
            human(finding.size)
        ),
        None if finding.capacity.is_none() => format!(
            "cannot tell why: the input does not print the memory's capacity{}, so how much of it was free is unknown; an input that prints the capacity and what the memory holds (Legate's whole report, from 24.11 on; a Realm allocator status), or a memstate dump of this memory, would tell",
            finding.used_bytes.map(|used| format!(" ({} are known to be held)", human(used))).unwrap_or_default()
        ),
        None => "cannot tell why: the input does not list everything the memory holds (it was cut off, or it lists less than the memory held: see the snapshot's note), so how much of it was free is unknown; a memstate dump of this memory would tell".to_string(),
    }
}
