//! A state of the allocator as format v1's memories: one per segment, blocks as allocations
//! (active valid, pending ones pending_free), inactive blocks as listed holes, a failed request on
//! the segment given.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{Segment, State};
use crate::dump::write;

/// The memories of a state, as format v1 writes them, and the dump's `strings`: each
/// provenance written once per dump, however many blocks share it.
pub(super) fn memories(
    segments: &BTreeMap<u64, Segment>,
    failed: Option<(u64, u64, i64, Option<u64>)>,
    listed_holes: bool,
) -> (Vec<write::Memory>, Vec<String>) {
    let mut strings: Vec<String> = Vec::new();
    let mut interned: HashMap<*const u8, usize> = HashMap::new();
    let mut intern = |text: &Arc<str>| {
        *interned.entry(text.as_ptr()).or_insert_with(|| {
            strings.push(text.to_string());
            strings.len() - 1
        })
    };
    let memories = segments
        .iter()
        .map(|(&start, segment)| {
            let allocations = segment
                .blocks
                .iter()
                .map(|(&addr, block)| {
                    let state = if block.state == State::Active {
                        "valid"
                    } else {
                        "pending_free"
                    };
                    let mut allocation = write::Allocation::new(
                        format!("0x{addr:016x}"),
                        "block".into(),
                        state,
                        addr.saturating_sub(start),
                        block.size,
                    );
                    allocation.provenance = block
                        .provenance
                        .as_ref()
                        .map(|text| write::Text::Index(intern(text)));
                    allocation
                })
                .collect();
            let pool = if segment.pool.is_empty() {
                "caching"
            } else {
                &segment.pool
            };
            let mut memory = write::Memory::new(
                format!("0x{start:016x}"),
                "GPU_FB_MEM".into(),
                segment.total_size,
            );
            memory.name = Some(format!("cuda:{} {pool} pool segment", segment.device).into());
            memory.allocations = allocations;
            if listed_holes {
                memory.holes = Some(
                    segment
                        .holes
                        .iter()
                        .map(|&(offset, size)| write::Range { offset, size })
                        .collect(),
                );
            }
            if let Some((segment_start, size, time_ns, device_free)) = failed {
                if segment_start == start {
                    memory.failed_requests.push(write::FailedRequest {
                        size,
                        time_ns: Some(time_ns),
                        kind: Some("cuda caching allocator".into()),
                        note: Some(format!("cuda:{}: no cached block held the request and the driver gave no new segment", segment.device).into()),
                        device_free,
                        ..write::FailedRequest::default()
                    });
                }
            }
            memory
        })
        .collect();
    (memories, strings)
}
