//! PyTorch CUDA caching-allocator snapshots: the pickle `torch.cuda.memory._dump_snapshot` writes
//! (keys as in `torch/csrc/cuda/Module.cpp` and `torch/cuda/_memory_viz.py`), read by
//! [`super::pickle`], which never runs code.
//!
//! One memory per CUDA device (`cuda:N`), its segments a level inside it with their pool, stream
//! and address ([`layout`] says how they are placed). Blocks `active_allocated` are valid
//! allocations, `active_pending_free` (also spelled `active_awaiting_free`) pending_free ones; the
//! free ranges inside segments (`inactive` blocks) are listed holes. The segments are the final
//! snapshot (reason `request`, the highest seq).
//!
//! `device_traces`, merged by `time_us`, are replayed backwards from that final state, as
//! memory_viz does (traces are often truncated): `alloc` undone removes the block, `free_requested`
//! makes it active again, `free_completed` brings it back pending free, `segment_alloc` and
//! `segment_free` remove and restore segments, `segment_map` and `segment_unmap` shrink and grow
//! an expandable segment's mapped ranges. Each `oom` event gives a snapshot (reason `oom`) of
//! the state just before it, with a failed request of the event's size on that device's memory.
//! In rebuilt states an allocation still live at the end keeps its
//! final block size, any other its event size rounded up to a multiple of 512 (the allocator's
//! rounding). `every` adds a rebuilt snapshot every that many events. The trailing `snapshot`
//! entries make none of their own.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read};
use std::sync::Arc;

mod layout;
mod provenance;
mod recorder;
mod replay;
mod segments;
mod stacks;

use layout::memories;
use replay::{replay, Replayed, Stop};
use segments::segments;
use stacks::Stacks;

use super::pickle::{self, Pickle};
use super::{Found, Kind, Options, Source};
use crate::error::{Error, Result};
use crate::import::input::{self as input, Limits};

pub struct Torch;

impl Source for Torch {
    fn kind(&self) -> Kind {
        Kind::TorchSnapshot
    }
    fn name(&self) -> &'static str {
        "torch-snapshot"
    }
    fn described(&self) -> &'static str {
        "a PyTorch allocator snapshot (not a pickle)"
    }
    fn claims(&self, head: &[u8]) -> bool {
        looks_like(head)
    }
    /// A pickle is read whole (within `--max-dump-size`): its objects refer to each other.
    fn read_whole(
        &self,
        reader: &mut dyn BufRead,
        display: &str,
        limits: Limits,
        options: &Options,
        emit: &mut dyn FnMut(Found) -> Result<()>,
    ) -> Result<()> {
        let head = reader
            .fill_buf()
            .map_err(|error| bad(display, input::describe_io(&error)))?;
        if !looks_like(head) {
            return Ok(());
        }
        let limit = limits.max_pickle_size;
        let bytes = read_all(&mut reader.take(limit.saturating_add(1)))
            .map_err(|error| bad(display, input::describe_io(&error)))?;
        if bytes.len() as u64 > limit {
            return Err(bad(display, format!("larger than {limit} bytes once decompressed, the limit for a PyTorch snapshot; refused (raise it with --max-pickle-size)")));
        }
        let rows = match limits.max_row_ratio {
            0 => u64::MAX,
            ratio => (bytes.len() as u64)
                .saturating_mul(ratio)
                .max(input::ROW_FLOOR),
        };
        read(&bytes, display, options.every, rows, emit)
    }
}

/// All of a reader, the buffer grown by an eighth at a time (not doubled, as `read_to_end`
/// grows it): a pickle of 2 GiB then holds at most 2.25 GiB, not up to 4.
fn read_all(reader: &mut dyn Read) -> std::io::Result<Vec<u8>> {
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        bytes.reserve_exact((bytes.len() / 8).max(1 << 20));
        let spare = bytes.capacity() - bytes.len();
        // Up to the capacity reserved, never past it; fewer bytes than that is the end.
        let read = reader.take(spare as u64).read_to_end(&mut bytes)?;
        if read < spare {
            return Ok(bytes);
        }
    }
}

/// What a note says of strings whose bytes were not UTF-8 (none: nothing).
fn replaced_note(replaced: u64) -> String {
    match replaced {
        0 => String::new(),
        count => format!(
            "; {count} strings (file names) held bytes that are not UTF-8, replaced by U+FFFD"
        ),
    }
}

/// Whether bytes are a pickle (its PROTO opcode first).
pub fn looks_like(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0x80)
        && bytes
            .get(1)
            .is_some_and(|protocol| (2..=5).contains(protocol))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Active,
    PendingFree,
}

#[derive(Debug, Clone)]
struct Block {
    size: u64,
    state: State,
    /// Shared by the blocks allocated at the same place.
    provenance: Option<Arc<str>>,
    /// Its whole call stack, an index into the pickle's [`Stacks`].
    stack: Option<u32>,
}

#[derive(Debug, Clone)]
struct Segment {
    device: i64,
    total_size: u64,
    /// `large` or `small`, with a private pool's id (`large, private pool 1.0`); empty when not
    /// known (a segment the replay brought back from a `segment_free`).
    pool: String,
    stream: Option<i64>,
    /// An expandable segment's mapped range (`is_expandable`, PyTorch 2.1 on).
    expandable: bool,
    blocks: BTreeMap<u64, Block>,
}

/// The trace actions the replay knows (others are kept as `other` and change nothing).
const ACTIONS: &[&str] = &[
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "snapshot",
    "oom",
];

struct Event {
    device: i64,
    /// One of [`ACTIONS`], or `other`.
    action: &'static str,
    addr: u64,
    size: u64,
    time_us: i64,
    /// An `oom` event's: what the driver had free outside the cache.
    device_free: Option<u64>,
    /// Its `frames` list.
    frames: Option<pickle::Id>,
}

fn bad(display: &str, message: impl Into<String>) -> Error {
    Error::read(display, message.into())
}

/// A size or address of a segment or block: `None` when absent, an error saying what is wrong
/// with a value that is there but no unsigned 64-bit integer.
fn size_field(
    pickle: &Pickle,
    dict: pickle::Id,
    key: &str,
) -> std::result::Result<Option<u64>, String> {
    let Some(value) = pickle.get(dict, key) else {
        return Ok(None);
    };
    match pickle.int(value) {
        Some(number) if number < 0 => Err(format!("{key} is {number}, negative")),
        Some(number) => u64::try_from(number)
            .map(Some)
            .map_err(|_| format!("{key} is {number}, past 2^64")),
        None => Err(format!(
            "{key} is {}, not an integer",
            pickle.describe(value)
        )),
    }
}

fn unsigned(pickle: &Pickle, dict: pickle::Id, key: &str) -> Option<u64> {
    pickle
        .get(dict, key)
        .and_then(|value| pickle.int(value))
        .and_then(|value| u64::try_from(value).ok())
}

/// The trace's entries, each as (device, entry), merged by time (each device's own order kept
/// among equal times): 8 bytes an event, read into an [`Event`] when the replay comes to it.
/// A figure of an entry that is there but no unsigned 64-bit integer is refused, named by its
/// place in the pickle (`device_traces[D][I]`).
fn events(
    pickle: &Pickle,
    display: &str,
    budget: usize,
    stacks: &mut Stacks,
) -> Result<Vec<(u32, pickle::Id)>> {
    let mut order = Vec::new();
    let Some(traces) = pickle
        .get(pickle.root, "device_traces")
        .and_then(|traces| pickle.items(traces))
    else {
        return Ok(order);
    };
    for (device, &trace) in traces.iter().enumerate() {
        let device = u32::try_from(device).unwrap_or(u32::MAX);
        for (position, &entry) in pickle.items(trace).unwrap_or(&[]).iter().enumerate() {
            // A folded entry's figures were checked as it was folded; another dict's are here.
            if pickle.trace_entry(entry).is_none() && pickle.get(entry, "action").is_some() {
                for key in ["addr", "size", "device_free"] {
                    size_field(pickle, entry, key).map_err(|what| {
                        bad(
                            display,
                            format!("device_traces[{device}][{position}]: {what}"),
                        )
                    })?;
                }
            }
            if let Some(found) = event(pickle, (device, entry)) {
                if found.action == "oom" && found.size == 0 {
                    return Err(bad(
                        display,
                        format!("device_traces[{device}][{position}]: an oom event without a size (or of size 0): what was asked is not known"),
                    ));
                }
                if let (Some(list), "alloc" | "free_requested" | "free_completed") =
                    (found.frames, found.action)
                {
                    stacks.of(pickle, list).map_err(|why| {
                        bad(
                            display,
                            format!("device_traces[{device}][{position}]: {why}"),
                        )
                    })?;
                }
                order.push((device, entry));
                if order.len() > budget {
                    return Err(bad(
                        display,
                        format!(
                            "its traces tell more than {budget} events from {} bytes: the same events referred to over and over through the pickle's memo, not an allocator's trace (memstate reads up to one event per 8 bytes, plus a million)",
                            pickle.len()
                        ),
                    ));
                }
            }
        }
    }
    order.sort_by_key(|&slot| event(pickle, slot).map_or(0, |event| event.time_us));
    Ok(order)
}

/// One trace entry (folded by the pickle reader, or a dict of another shape), if it has an action.
fn event(pickle: &Pickle, (device, entry): (u32, pickle::Id)) -> Option<Event> {
    let known = |action: pickle::Id| pickle.one_of(action, ACTIONS).unwrap_or("other");
    if let Some(folded) = pickle.trace_entry(entry) {
        pickle.str_len(folded.action)?;
        return Some(Event {
            device: i64::from(device),
            action: known(folded.action),
            addr: folded.addr.unwrap_or(0),
            size: folded.size.unwrap_or(0),
            time_us: folded.time_us.unwrap_or(0),
            device_free: folded.device_free,
            frames: folded.frames,
        });
    }
    let action = pickle.get(entry, "action")?;
    pickle.str_len(action)?;
    Some(Event {
        device: i64::from(device),
        action: known(action),
        addr: unsigned(pickle, entry, "addr").unwrap_or(0),
        size: unsigned(pickle, entry, "size").unwrap_or(0),
        time_us: pickle
            .get(entry, "time_us")
            .and_then(|t| pickle.int(t))
            .and_then(|t| i64::try_from(t).ok())
            .unwrap_or(0),
        device_free: unsigned(pickle, entry, "device_free"),
        frames: pickle.get(entry, "frames"),
    })
}

/// What a snapshot of `state` counts as against `--max-row-ratio`: [`input::SNAPSHOT_ROWS`], a
/// row per memory and allocation, and one per 128 bytes of the provenance texts it writes.
fn rows_of(state: &BTreeMap<u64, Segment>) -> u64 {
    let mut texts: std::collections::HashSet<*const u8> = std::collections::HashSet::new();
    let mut rows = input::SNAPSHOT_ROWS;
    for segment in state.values() {
        rows = rows.saturating_add(1 + segment.blocks.len() as u64);
        for block in segment.blocks.values() {
            if let Some(text) = &block.provenance {
                if texts.insert(text.as_ptr()) {
                    rows = rows.saturating_add(text.len() as u64 / 128);
                }
            }
        }
    }
    rows
}

/// How many trace events a pickle of `bytes` bytes may tell, counting each time a memoized trace
/// is referred to: a pickled event takes 30 bytes or more, so a trace of more is the same events
/// referred to over and over (one 6,000-event trace referred to 6,000 times is 36M events from
/// 0.2 MiB), which would cost memory and time out of all proportion to the input.
fn event_budget(bytes: usize) -> usize {
    bytes / 8 + 1_000_000
}

/// The snapshots a PyTorch allocator snapshot tells, handed to `emit` one at a time, earliest
/// first (a snapshot of 5,000 blocks with 500 `oom` events rebuilds 2.5M allocations, never
/// held at once): one per `oom` event (and one every `every` events), rebuilt from the traces,
/// then the final state. The replay runs from the final state back in time, so a first pass
/// counts the trace entries left out and keeps the state at the start of each chunk of about
/// the square root of the stops; the second replays the chunks from the earliest, handing each
/// chunk's snapshots over in time order (an import in time order is about 4 times faster than
/// one backwards: 3.2 s against 12.5 s for those 500).
pub fn read(
    bytes: &[u8],
    display: &str,
    every: Option<u64>,
    max_rows: u64,
    emit: &mut dyn FnMut(Found) -> Result<()>,
) -> Result<()> {
    let pickle = pickle::read(bytes)
        .map_err(|error| bad(display, format!("byte {}: {}", error.at, error.message)))?;
    let mut stacks = Stacks::new(bytes.len());
    let final_state = segments(&pickle, display, &mut stacks)?;
    let mut devices: BTreeSet<i64> = final_state.values().map(|segment| segment.device).collect();
    if let Some(recorded) = recorder::recorded(&pickle, display)? {
        return recorder::emit(
            &final_state,
            &stacks,
            recorded,
            &replaced_note(pickle.replaced),
            emit,
        );
    }
    let order = events(&pickle, display, event_budget(bytes.len()), &mut stacks)?;
    let stacks = stacks;
    // Every device the trace tells of has its memory in every snapshot, empty or not.
    devices.extend(order.iter().map(|&(device, _)| i64::from(device)));
    let recorded_devices = BTreeMap::new();
    let replaced = pickle.replaced;
    let time_of = |slot: Option<&(u32, pickle::Id)>| {
        slot.and_then(|&slot| event(&pickle, slot))
            .map_or(0, |event| event.time_us)
    };
    let t0 = time_of(order.first());
    let ns = |time_us: i64| time_us.saturating_sub(t0).saturating_mul(1000);
    let end_ns = ns(time_of(order.last()));
    let every = every.filter(|&every| every > 0);
    // The stops, counted without replaying, and the chunks the second pass hands over. What is
    // held is a state per chunk and one chunk's snapshots, and a snapshot made for the import
    // weighs about four states: chunks of the square root of a quarter of the stops hold the
    // least (500 stops over 5,000 blocks: 64 MiB at the peak; half or twice the chunk, 68 and
    // 108 MiB).
    let stops = order
        .iter()
        .enumerate()
        .filter_map(|(index, &slot)| Some((index, event(&pickle, slot)?)))
        .map(|(index, event)| {
            let periodic = every.is_some_and(|every| {
                (index as u64 + 1).is_multiple_of(every) && event.action != "snapshot"
            });
            usize::from(periodic) + usize::from(event.action == "oom")
        })
        .sum::<usize>();
    let chunk = (stops as f64 / 4.0).sqrt().ceil().max(1.0) as usize;
    let start = Replayed {
        state: final_state.clone(),
        dropped: 0,
    };
    // First pass, from the end back: the state at the first stop of each chunk (the replay
    // resumes there), and the trace entries left out in all.
    let mut checkpoints: Vec<(usize, Replayed)> = vec![(order.len(), start.clone())];
    let mut counted = 0usize;
    let mut last_index = usize::MAX;
    let mut replayed = start;
    // What the rebuilt snapshots hold, counted as the first pass meets them (it stops once past
    // the limit, so that counting costs no more than the limit allows).
    let mut rows = rows_of(&final_state);
    {
        let mut at_stop = |index: usize, stop: Stop<'_>| {
            rows = rows.saturating_add(rows_of(stop.state));
            if rows > max_rows {
                return Err(bad(
                    display,
                    format!(
                        "its trace rebuilds more than {max_rows} rows ({} snapshots so far) from {} bytes of pickle: the same events referred to over and over through the pickle's memo, or far more snapshots than a trace of its size tells; refused before any is written (raise the limit with --max-row-ratio, 0 for none)",
                        counted + 1,
                        bytes.len()
                    ),
                ));
            }
            if counted > 0 && counted.is_multiple_of(chunk) && index != last_index {
                checkpoints.push((
                    index + 1,
                    Replayed {
                        state: stop.state.clone(),
                        dropped: 0,
                    },
                ));
            }
            counted += 1;
            last_index = index;
            Ok(())
        };
        // The state handed to a stop is the one before the event's own effect, as resuming
        // at `index + 1` finds it.
        replay(
            (&pickle, &stacks),
            &order,
            0..order.len(),
            &mut replayed,
            every,
            &ns,
            &mut at_stop,
        )?;
    }
    let dropped = replayed.dropped;
    drop(replayed);
    // Second pass: chunk by chunk from the earliest, each replayed from its checkpoint and its
    // snapshots handed over earliest first.
    let mut line_after = 0usize;
    let mut bounds: Vec<usize> = checkpoints.iter().map(|(end, _)| *end).collect();
    bounds.push(0);
    for position in (0..checkpoints.len()).rev() {
        let Some((end, mut replayed)) = checkpoints.pop() else {
            break;
        };
        let floor = bounds[position + 1];
        let mut held: Vec<Found> = Vec::new();
        let mut hold = |_: usize, stop: Stop<'_>| {
            let mut note = stop.note;
            if dropped > 0 {
                note.push_str(&format!(
                    "; {dropped} trace entries of blocks that no longer fit were left out"
                ));
            }
            note.push_str(&replaced_note(replaced));
            let (memories, strings, calls) = memories(
                stop.state,
                &devices,
                &recorded_devices,
                stop.failed,
                &stacks,
            );
            held.push(Found {
                run: None,
                wall_time: None,
                line: 0,
                node: 0,
                time_ns: stop.time_ns,
                reason: stop.reason,
                note: Some(note),
                memories,
                strings,
                calls,
            });
            Ok(())
        };
        replay(
            (&pickle, &stacks),
            &order,
            floor..end,
            &mut replayed,
            every,
            &ns,
            &mut hold,
        )?;
        for mut found in held.into_iter().rev() {
            line_after += 1;
            found.line = line_after;
            emit(found)?;
        }
    }
    let (memories, strings, calls) =
        memories(&final_state, &devices, &recorded_devices, None, &stacks);
    emit(Found {
        run: None,
        wall_time: None,
        line: stops + 1,
        node: 0,
        time_ns: end_ns,
        reason: "request",
        note: Some(format!(
            "PyTorch allocator snapshot: the segments as they were when it was taken{}",
            replaced_note(replaced)
        )),
        memories,
        strings,
        calls,
    })
}
