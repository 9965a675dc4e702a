//! The replay of an allocator trace back in time from the snapshot's final state: each event
//! undone in turn (an `alloc` met removes its block, a free puts it back), stopping where a
//! snapshot is rebuilt (before each `oom`, every `every` events).

use std::collections::BTreeMap;

use super::pickle::{self, Pickle};
use super::{event, Block, Segment, State};
use crate::error::Result;

/// The segment holding an address.
fn segment_of(segments: &mut BTreeMap<u64, Segment>, addr: u64) -> Option<(u64, &mut Segment)> {
    let (&start, segment) = segments.range_mut(..=addr).next_back()?;
    (addr < start.saturating_add(segment.total_size)).then_some((start, segment))
}

/// The largest free range of a segment in a state.
pub(super) fn largest_free(start: u64, segment: &Segment) -> u64 {
    let mut largest = 0;
    let mut at = start;
    for (&addr, block) in &segment.blocks {
        largest = largest.max(addr.saturating_sub(at));
        at = at.max(addr.saturating_add(block.size));
    }
    largest.max(start.saturating_add(segment.total_size).saturating_sub(at))
}

/// A state the replay stops at: the segments just before an `oom` event (with the failed
/// request's place) or after every `every` events.
pub(super) struct Stop<'s> {
    pub time_ns: i64,
    pub reason: &'static str,
    pub state: &'s BTreeMap<u64, Segment>,
    pub failed: Option<(u64, u64, i64, Option<u64>)>,
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
    pickle: &Pickle,
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
                let target = state
                    .iter()
                    .filter(|(_, segment)| segment.device == event.device)
                    .max_by_key(|(&start, segment)| {
                        (largest_free(start, segment), std::cmp::Reverse(start))
                    })
                    .map(|(&start, _)| start);
                stop(
                    index,
                    Stop {
                    time_ns,
                    reason: "oom",
                    state,
                    failed: target.map(|start| (start, event.size, time_ns, event.device_free)),
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
                    blocks: BTreeMap::new(),
                    holes: Vec::new(),
                });
            }
            _ => {} // snapshot, segment_map/unmap and others: no state of their own here
        }
    }
    Ok(())
}
