//! The final state of a PyTorch snapshot as its `segments` list gives it: each segment (device,
//! address, size, pool, stream, expandable) with its active and pending blocks and their
//! provenance and call stacks, every figure checked and a bad one named by its place
//! (`segments[I]`). Blocks without `address` (PyTorch 2.0) are placed one after another.

use std::collections::BTreeMap;

use super::pickle::{self, Pickle};
use super::provenance::{self, Provenances};
use super::stacks::Stacks;
use super::{bad, size_field, Block, Segment, State};
use crate::error::Result;

/// The longest pool name (`segment_type`) read: PyTorch writes `large` or `small`.
const LONGEST_POOL: usize = 64;

pub(super) fn segments(
    pickle: &Pickle,
    display: &str,
    stacks: &mut Stacks,
) -> Result<BTreeMap<u64, Segment>> {
    let mut provenances = Provenances::new(pickle.len());
    // A pickled bare list is the segments alone (`torch.cuda.memory_snapshot()`), which
    // `_memory_viz.py`'s `_read` takes as `{"segments": data, "traces": []}`.
    let list = pickle
        .get(pickle.root, "segments")
        .and_then(|list| pickle.items(list))
        .or_else(|| pickle.items(pickle.root))
        .ok_or_else(|| {
            bad(
                display,
                "not a PyTorch allocator snapshot: no `segments` list",
            )
        })?;
    let mut found = BTreeMap::new();
    for (position, &segment) in list.iter().enumerate() {
        let place = |what: &str| bad(display, format!("segments[{position}]: {what}"));
        let field = |dict, key: &str| size_field(pickle, dict, key).map_err(|what| place(&what));
        let address = field(segment, "address")?.ok_or_else(|| place("no address"))?;
        let total_size = field(segment, "total_size")?.ok_or_else(|| place("no total_size"))?;
        // A device's addresses are 64 bits: a segment may end at 2^64, not past it.
        if u128::from(address) + u128::from(total_size) > 1u128 << 64 {
            return Err(place(&format!(
                "out of range: address 0x{address:x} + total_size {total_size} runs past 2^64"
            )));
        }
        let device = match pickle.get(segment, "device") {
            None => 0,
            Some(value) => pickle
                .int(value)
                .and_then(|value| i64::try_from(value).ok())
                .filter(|&device| device >= 0)
                .ok_or_else(|| {
                    place(&format!(
                        "device is {}, not a CUDA device's index",
                        pickle.describe(value)
                    ))
                })?,
        };
        let pool = match pickle.get(segment, "segment_type") {
            None => String::new(),
            Some(value) => match pickle.str_len(value) {
                Some(length) if length > LONGEST_POOL => {
                    return Err(place(&format!(
                        "segment_type is a string of {length} bytes, not a pool's name"
                    )))
                }
                _ => pickle.str(value).unwrap_or("").to_string(),
            },
        };
        let pool = match pickle
            .get(segment, "segment_pool_id")
            .and_then(|id| pickle.items(id))
        {
            Some(&[a, b]) => match (pickle.int(a), pickle.int(b)) {
                (Some(0), Some(0)) | (None, _) | (_, None) => pool,
                (Some(a), Some(b)) => format!("{pool}, private pool {a}.{b}"),
            },
            _ => pool,
        };
        let stream = pickle
            .get(segment, "stream")
            .and_then(|value| pickle.int(value))
            .and_then(|value| i64::try_from(value).ok());
        let expandable = pickle
            .get(segment, "is_expandable")
            .and_then(|value| pickle.int(value))
            == Some(1);
        let mut blocks = BTreeMap::new();
        // Blocks tile their segment in order: one without `address` (PyTorch 2.0) starts where
        // the one before it ends, as MemoryViz's `annotate_snapshot` places them.
        let mut next = address;
        for &block in pickle
            .get(segment, "blocks")
            .and_then(|blocks| pickle.items(blocks))
            .unwrap_or(&[])
        {
            let Some(size) = field(block, "size")? else {
                return Err(place("a block without a size"));
            };
            let at = field(block, "address")?.unwrap_or(next);
            next = at.saturating_add(size);
            if size == 0 {
                continue;
            }
            at.checked_sub(address)
                .filter(|offset| {
                    offset
                        .checked_add(size)
                        .is_some_and(|end| end <= total_size)
                })
                .ok_or_else(|| place(&format!("a block at 0x{at:x} lies outside the segment")))?;
            let state = pickle.get(block, "state").map(|value| {
                let known = [
                    "active_allocated",
                    "active_pending_free",
                    "active_awaiting_free",
                    "inactive",
                ];
                (value, pickle.one_of(value, &known))
            });
            let state = match state {
                Some((_, Some("active_allocated"))) => State::Active,
                Some((_, Some("active_pending_free" | "active_awaiting_free"))) => {
                    State::PendingFree
                }
                Some((_, Some(_))) => continue,
                Some((value, None)) => {
                    return Err(place(&format!(
                        "a block in an unknown state {}",
                        shown(pickle, value)
                    )))
                }
                None => return Err(place("a block without a state")),
            };
            if blocks.contains_key(&at) {
                return Err(place(&format!(
                    "a second block at 0x{at:x}: two blocks cannot share an address"
                )));
            }
            let provenance = provenances.of(pickle, block).map_err(|why| place(&why))?;
            let stack = match provenance::frames_of(pickle, block) {
                Some(list) => stacks.of(pickle, list).map_err(|why| place(&why))?,
                None => None,
            };
            blocks.insert(
                at,
                Block {
                    size,
                    state,
                    provenance,
                    stack,
                },
            );
        }
        if found.contains_key(&address) {
            return Err(place(&format!(
                "a second segment at 0x{address:x}: two segments cannot share an address"
            )));
        }
        found.insert(
            address,
            Segment {
                device,
                total_size,
                pool,
                stream,
                expandable,
                blocks,
            },
        );
    }
    Ok(found)
}

/// A value for a message: a short string quoted, anything else described.
fn shown(pickle: &Pickle, value: pickle::Id) -> String {
    match (pickle.str_len(value), pickle.str(value)) {
        (Some(length), Some(text)) if length <= 64 => format!("{text:?}"),
        _ => pickle.describe(value),
    }
}
