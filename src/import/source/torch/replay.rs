//! The replay of an allocator trace back in time from the snapshot's final state: each event
//! undone in turn (an `alloc` met removes its block, a free puts it back, a `segment_alloc`
//! removes its segment and a `segment_free` brings it back, a `segment_map` takes its range out
//! of the expandable segment that holds it and a `segment_unmap` puts its range back, joined
//! to the mapped ranges beside it), stopping where a snapshot is rebuilt (before each `oom`,
//! every `every` events). The expandable segments' rules are MemoryViz's (PyTorch
//! `torch/utils/viz/MemoryViz.js`, `simulate_memory`: `map_segment` and `unmap_segment`), as
//! the snapshot reports them: one segment per contiguous mapped range (`c10/cuda/
//! CUDACachingAllocator.cpp`, `DeviceCachingAllocator::snapshot`).

use std::collections::BTreeMap;

use super::layout::Failed;
use super::pickle::{self, Pickle};
use super::stacks::Stacks;
use super::{event, Block, Segment, State};
use crate::error::Result;

/// The segment holding an address.
fn segment_of(segments: &mut BTreeMap<u64, Segment>, addr: u64) -> Option<(u64, &mut Segment)> {
    let (&start, segment) = segments.range_mut(..=addr).next_back()?;
    (addr < start.saturating_add(segment.total_size)).then_some((start, segment))
}

/// Undo a `segment_map`: take `[addr, addr + size)` out of the mapped range that holds it (its
/// start, its end, or its middle, which leaves two ranges), the blocks staying with the range
/// they lie in. A range no segment holds whole changes nothing.
fn unmap(state: &mut BTreeMap<u64, Segment>, addr: u64, size: u64) {
    let end = addr.saturating_add(size);
    let Some((start, segment)) = segment_of(state, addr) else {
        return;
    };
    let segment_end = start.saturating_add(segment.total_size);
    if size == 0 || end > segment_end {
        return;
    }
    let Some(mut whole) = state.remove(&start) else {
        return;
    };
    let mut after = whole.blocks.split_off(&addr);
    let tail = after.split_off(&end);
    let with = |total_size: u64, blocks: BTreeMap<u64, Block>, like: &Segment| Segment {
        device: like.device,
        total_size,
        pool: like.pool.clone(),
        stream: like.stream,
        expandable: like.expandable,
        blocks,
    };
    if end < segment_end {
        state.insert(end, with(segment_end - end, tail, &whole));
    }
    if addr > start {
        whole.total_size = addr - start;
        state.insert(start, whole);
    }
}

/// Undo a `segment_unmap`: put `[addr, addr + size)` back as a mapped range, joined to a mapped
/// range of the same device (and stream, where known) that ends where it starts or starts where
/// it ends. A range that overlaps a segment changes nothing.
fn map(state: &mut BTreeMap<u64, Segment>, device: i64, addr: u64, size: u64) {
    let end = addr.saturating_add(size);
    if size == 0
        || state
            .range(..end)
            .next_back()
            .is_some_and(|(&start, segment)| start.saturating_add(segment.total_size) > addr)
    {
        return;
    }
    let joins = |segment: &Segment, stream: Option<i64>| {
        segment.device == device
            && segment.expandable
            && (stream.is_none() || segment.stream.is_none() || segment.stream == stream)
    };
    let before = state
        .range(..addr)
        .next_back()
        .filter(|(&start, segment)| {
            start.saturating_add(segment.total_size) == addr && joins(segment, None)
        })
        .map(|(&start, _)| start);
    let stream = before
        .and_then(|start| state.get(&start))
        .and_then(|segment| segment.stream);
    let after = state
        .get(&end)
        .filter(|segment| joins(segment, stream))
        .map(|_| end);
    let mut joined = match before.and_then(|start| state.remove(&start).map(|s| (start, s))) {
        Some((start, mut segment)) => {
            segment.total_size = end - start;
            (start, segment)
        }
        None => (
            addr,
            Segment {
                device,
                total_size: size,
                pool: String::new(),
                stream: None,
                expandable: true,
                blocks: BTreeMap::new(),
            },
        ),
    };
    if let Some(next) = after.and_then(|end| state.remove(&end)) {
        joined.1.total_size = joined.1.total_size.saturating_add(next.total_size);
        if joined.1.pool.is_empty() {
            joined.1.pool = next.pool.clone();
        }
        joined.1.stream = joined.1.stream.or(next.stream);
        joined.1.blocks.extend(next.blocks);
    }
    state.insert(joined.0, joined.1);
}

/// A state the replay stops at: the segments just before an `oom` event (with the failed
/// request's place) or after every `every` events.
pub(super) struct Stop<'s> {
    pub time_ns: i64,
    pub reason: &'static str,
    pub state: &'s BTreeMap<u64, Segment>,
    pub failed: Option<Failed>,
    pub note: String,
}

/// The replay's state: the segments as they stand at the event reached, and the trace entries
/// left out on the way.
#[derive(Clone)]
pub(super) struct Replayed {
    pub state: BTreeMap<u64, Segment>,
    pub dropped: u64,
}

/// Replay events `order[range]` from `replayed` (the state just after them) back in time,
/// stopping at each `oom` event (and every `every` events) for `stop`, given the event's index.
#[allow(clippy::too_many_arguments)]
pub(super) fn replay(
    (pickle, stacks): (&Pickle, &Stacks),
    order: &[(u32, pickle::Id)],
    range: std::ops::Range<usize>,
    replayed: &mut Replayed,
    every: Option<u64>,
    ns: &dyn Fn(i64) -> i64,
    stop: &mut dyn FnMut(usize, Stop<'_>) -> Result<()>,
) -> Result<()> {
    let Replayed { state, dropped } = replayed;
    let end = range.end.min(order.len());
    let floor = range.start.min(end);
    for (index, &slot) in order[..end].iter().enumerate().skip(floor).rev() {
        let Some(event) = event(pickle, slot) else {
            continue;
        };
        let time_ns = ns(event.time_us);
        if let Some(every) = every {
            if (index as u64 + 1).is_multiple_of(every) && event.action != "snapshot" {
                stop(
                    index,
                    Stop {
                        time_ns,
                        reason: "periodic",
                        state,
                        failed: None,
                        note: format!(
                            "rebuilt from the allocator's trace, after event {}",
                            index + 1
                        ),
                    },
                )?;
            }
        }
        let rounded = event.size.div_ceil(512).saturating_mul(512).max(512);
        match event.action {
            "oom" => {
                stop(
                    index,
                    Stop {
                    time_ns,
                    reason: "oom",
                    state,
                    failed: Some(Failed {
                        device: event.device,
                        size: event.size,
                        time_ns,
                        device_free: event.device_free,
                    }),
                    note: format!(
                        "rebuilt from the allocator's trace: the state just before an out-of-memory on cuda:{} ({} bytes asked)",
                        event.device, event.size
                    ),
                },
                )?;
            }
            "alloc" => {
                if let Some((_, segment)) = segment_of(state, event.addr) {
                    segment.blocks.remove(&event.addr);
                }
            }
            "free_requested" | "free_completed" => {
                let pending = event.action == "free_completed";
                match segment_of(state, event.addr) {
                    Some((start, segment)) => match segment.blocks.get_mut(&event.addr) {
                        Some(block) => {
                            block.state = if pending {
                                State::PendingFree
                            } else {
                                State::Active
                            }
                        }
                        None => {
                            // Not live at the end: its size from the event, as the allocator rounds it.
                            let end = event.addr.saturating_add(rounded);
                            let clear = end <= start.saturating_add(segment.total_size)
                                && segment.blocks.range(..end).next_back().is_none_or(
                                    |(&addr, block)| addr.saturating_add(block.size) <= event.addr,
                                );
                            if clear {
                                segment.blocks.insert(
                                    event.addr,
                                    Block {
                                        size: rounded,
                                        state: if pending {
                                            State::PendingFree
                                        } else {
                                            State::Active
                                        },
                                        provenance: None,
                                        // As MemoryViz does: the free event's frames, which
                                        // are the allocation's unless the trace recorded
                                        // every context (`context="all"`).
                                        stack: stacks.known(event.frames),
                                    },
                                );
                            } else {
                                *dropped += 1;
                            }
                        }
                    },
                    None => *dropped += 1,
                }
            }
            "segment_alloc" => {
                state.remove(&event.addr);
            }
            "segment_free" => {
                state.entry(event.addr).or_insert(Segment {
                    device: event.device,
                    total_size: event.size.max(1),
                    pool: String::new(),
                    stream: None,
                    expandable: false,
                    blocks: BTreeMap::new(),
                });
            }
            "segment_map" => unmap(state, event.addr, event.size),
            "segment_unmap" => map(state, event.device, event.addr, event.size),
            _ => {} // snapshot and others: no state of their own here
        }
    }
    Ok(())
}
