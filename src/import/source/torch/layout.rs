//! A state of the allocator as format v1's memories: one per CUDA device (`cuda:N`, kind
//! `GPU_FB_MEM`), its segments a level inside it (`segments`), placed side by side in the memory
//! grouped by pool and stream, then by address, with no gap between them. Blocks are allocations
//! (active valid, pending ones pending_free) at their segment's place plus their offset in it;
//! the free ranges inside segments are the listed holes (what the caching allocator could hand
//! out). The device's memory outside its segments is no hole: the capacity is the device's total
//! when recorded, else unknown (the segments' sum stands in, FORMAT.md "What a dump does not
//! know"), and what the device had free is kept beside it when recorded.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::stacks::{DumpCalls, Stacks};
use super::{Segment, State};
use crate::dump::write;
use crate::import::source::Calls;

/// What was recorded of a device outside the allocator (`torch.cuda.mem_get_info`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DeviceMemory {
    pub total: Option<u64>,
    pub free: Option<u64>,
}

/// A request that failed: the device, the bytes asked, when, and what the driver had free.
#[derive(Debug, Clone, Copy)]
pub(super) struct Failed {
    pub device: i64,
    pub size: u64,
    pub time_ns: i64,
    pub device_free: Option<u64>,
}

/// The name of device `device`'s memory, as PyTorch names devices.
pub(super) fn device_name(device: i64) -> String {
    format!("cuda:{device}")
}

/// The order segments are placed in within their device: pool, stream, address.
fn placement_key(start: u64, segment: &Segment) -> (&str, Option<i64>, u64) {
    (&segment.pool, segment.stream, start)
}

/// The memories of a state (one per device in `devices`, and the failed request's), as format
/// v1 writes them, the dump's `strings` (each provenance written once per dump, however many
/// blocks share it), and its `frames` and `stacks` (those its blocks use).
pub(super) fn memories(
    segments: &BTreeMap<u64, Segment>,
    devices: &BTreeSet<i64>,
    recorded: &BTreeMap<i64, DeviceMemory>,
    failed: Option<Failed>,
    stacks: &Stacks,
) -> (Vec<write::Memory>, Vec<String>, Calls) {
    let mut calls = DumpCalls::new(stacks);
    let mut strings: Vec<String> = Vec::new();
    let mut interned: HashMap<*const u8, usize> = HashMap::new();
    let mut intern = |text: &Arc<str>| {
        *interned.entry(text.as_ptr()).or_insert_with(|| {
            strings.push(text.to_string());
            strings.len() - 1
        })
    };
    let mut by_device: BTreeMap<i64, Vec<(u64, &Segment)>> = devices
        .iter()
        .chain(failed.as_ref().map(|failed| &failed.device))
        .map(|&device| (device, Vec::new()))
        .collect();
    for (&start, segment) in segments {
        by_device
            .entry(segment.device)
            .or_default()
            .push((start, segment));
    }
    let memories = by_device
        .into_iter()
        .map(|(device, mut placed)| {
            placed.sort_by(|a, b| placement_key(a.0, a.1).cmp(&placement_key(b.0, b.1)));
            let mut memory = write::Memory::new(
                format!("0x{device:016x}"),
                "GPU_FB_MEM".into(),
                1,
            );
            memory.name = Some(device_name(device).into());
            let mut allocations = write::Allocations::default();
            let mut holes = Vec::new();
            let mut offset = 0u64;
            for &(start, segment) in &placed {
                let mut free_from = 0u64;
                for (&addr, block) in &segment.blocks {
                    let within = addr.saturating_sub(start);
                    if within > free_from {
                        holes.push(write::Range {
                            offset: offset + free_from,
                            size: within - free_from,
                        });
                    }
                    free_from = free_from.max(within.saturating_add(block.size));
                    let state = if block.state == State::Active {
                        "valid"
                    } else {
                        "pending_free"
                    };
                    let mut allocation = write::Allocation::new(
                        format!("0x{addr:016x}"),
                        "block".into(),
                        state,
                        offset + within,
                        block.size,
                    );
                    allocation.provenance = block
                        .provenance
                        .as_ref()
                        .map(|text| write::Text::Index(intern(text)));
                    allocation.stack = block.stack.and_then(|stack| calls.stack(stack));
                    allocations.push(&allocation);
                }
                if segment.total_size > free_from {
                    holes.push(write::Range {
                        offset: offset + free_from,
                        size: segment.total_size - free_from,
                    });
                }
                memory.segments.push(write::Segment {
                    offset,
                    size: segment.total_size,
                    address: format!("0x{start:016x}"),
                    pool: (!segment.pool.is_empty()).then(|| segment.pool.clone().into()),
                    stream: segment.stream,
                    expandable: segment.expandable,
                });
                offset = offset.saturating_add(segment.total_size);
            }
            let known = recorded.get(&device).copied().unwrap_or_default();
            match known.total {
                Some(total) if total >= offset && total > 0 => memory.capacity = total,
                _ => {
                    memory.capacity = offset.max(1);
                    memory.unknown.push("capacity");
                }
            }
            memory.device_free = known.free;
            memory.allocations = allocations;
            memory.holes = Some(holes);
            if let Some(failed) = failed.filter(|failed| failed.device == device) {
                memory.failed_requests.push(write::FailedRequest {
                    size: failed.size,
                    time_ns: Some(failed.time_ns),
                    kind: Some("cuda caching allocator".into()),
                    note: Some(format!("{}: no cached block held the request and the driver gave no new segment", device_name(device)).into()),
                    device_free: failed.device_free,
                    ..write::FailedRequest::default()
                });
            }
            memory
        })
        .collect();
    (memories, strings, calls.finish())
}
