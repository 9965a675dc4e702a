//! Snapshots written by `memstate.torch.Recorder` (python/memstate/torch.py): the dict PyTorch's
//! `torch.cuda.memory._snapshot()` gives, pickled as `_dump_snapshot` pickles it, with one key
//! more, `memstate`, holding what torch does not say:
//!
//! ```text
//! {"format": "memstate-torch-recorder", "version": 1,
//!  "run": "exp1", "rank": 0, "step": 50,
//!  "time_ns": 1234567,           # since the Recorder was made
//!  "wall_time_ns": 1796112000123456789,
//!  "oom": None or {"device": 0, "alloc": 2097152, "device_alloc": ..., "device_free": ...},
//!  "devices": [{"device": 0, "free": ..., "total": ...}]}   # torch.cuda.mem_get_info
//! ```
//!
//! One snapshot per file: node = rank, seq = step, the segments as torch gave them (the trace,
//! when history recording is on, is not replayed: the Recorder's snapshots are the history).
//! With `oom`, the request that failed (`alloc` bytes on `device`, with the driver's free bytes)
//! goes on that device's memory, as for an `oom` event of a trace. `devices` (absent before
//! memstate 0.7) gives each device's capacity (`total`) and what it had free (`free`).

use std::collections::{BTreeMap, BTreeSet};

use super::layout::{DeviceMemory, Failed};
use super::pickle::Pickle;
use super::stacks::Stacks;
use super::{bad, memories, Segment};
use crate::error::Result;
use crate::import::source::Found;

/// The format name a Recorder writes, and the version this reader reads.
const FORMAT: &str = "memstate-torch-recorder";
const VERSION: i128 = 1;

/// What the Recorder added.
pub(super) struct Recorded {
    run: Option<String>,
    rank: i64,
    step: u64,
    time_ns: i64,
    wall_time_ns: Option<i64>,
    /// (device, bytes asked, the driver's free bytes).
    oom: Option<(i64, u64, Option<u64>)>,
    /// Each device's free and total bytes, by device.
    devices: BTreeMap<i64, DeviceMemory>,
}

/// The Recorder's entry of a snapshot, if it has one; an entry that is not a Recorder's as this
/// reader knows it is refused, naming the key.
pub(super) fn recorded(pickle: &Pickle, display: &str) -> Result<Option<Recorded>> {
    let Some(entry) = pickle.get(pickle.root, "memstate") else {
        return Ok(None);
    };
    let text = |key: &str| pickle.get(entry, key).and_then(|value| pickle.str(value));
    let int = |key: &str| pickle.get(entry, key).and_then(|value| pickle.int(value));
    if text("format") != Some(FORMAT) {
        return Err(bad(
            display,
            format!("memstate.format: not {FORMAT:?}: the `memstate` entry is no Recorder's"),
        ));
    }
    if int("version") != Some(VERSION) {
        return Err(bad(
            display,
            format!("memstate.version: this memstate reads a Recorder's version {VERSION}"),
        ));
    }
    let whole = |key: &str| -> Result<i128> {
        int(key)
            .filter(|value| (0..=i128::from(i64::MAX)).contains(value))
            .ok_or_else(|| {
                bad(
                    display,
                    format!("memstate.{key}: expected an integer from 0 to 2^63 - 1"),
                )
            })
    };
    let oom = match pickle.get(entry, "oom") {
        Some(oom) if pickle.get(oom, "alloc").is_some() => {
            let value = |key: &str| pickle.get(oom, key).and_then(|value| pickle.int(value));
            let size = value("alloc")
                .and_then(|size| u64::try_from(size).ok())
                .ok_or_else(|| bad(display, "memstate.oom.alloc: expected a size in bytes"))?;
            let device = value("device")
                .and_then(|device| i64::try_from(device).ok())
                .ok_or_else(|| bad(display, "memstate.oom.device: expected a device number"))?;
            let free = value("device_free").and_then(|free| u64::try_from(free).ok());
            Some((device, size, free))
        }
        _ => None,
    };
    let mut devices = BTreeMap::new();
    let listed = pickle.get(entry, "devices");
    for (index, &device) in listed
        .and_then(|list| pickle.items(list))
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let value = |key: &str| pickle.get(device, key).and_then(|value| pickle.int(value));
        let number = value("device")
            .and_then(|number| i64::try_from(number).ok())
            .filter(|&number| number >= 0)
            .ok_or_else(|| {
                bad(
                    display,
                    format!("memstate.devices[{index}].device: expected a device number"),
                )
            })?;
        let size = |key: &str| -> Result<Option<u64>> {
            match pickle.get(device, key) {
                None => Ok(None),
                Some(found) => pickle
                    .int(found)
                    .and_then(|value| u64::try_from(value).ok())
                    .map(Some)
                    .ok_or_else(|| {
                        bad(
                            display,
                            format!("memstate.devices[{index}].{key}: expected a size in bytes"),
                        )
                    }),
            }
        };
        devices.insert(
            number,
            DeviceMemory {
                total: size("total")?.filter(|&total| total > 0),
                free: size("free")?,
            },
        );
    }
    Ok(Some(Recorded {
        devices,
        run: text("run")
            .filter(|run| !run.is_empty())
            .map(str::to_string),
        rank: whole("rank")? as i64,
        step: whole("step")? as u64,
        time_ns: whole("time_ns")? as i64,
        wall_time_ns: int("wall_time_ns").and_then(|value| i64::try_from(value).ok()),
        oom,
    }))
}

/// The one snapshot of a Recorder's file.
pub(super) fn emit(
    state: &BTreeMap<u64, Segment>,
    stacks: &Stacks,
    recorded: Recorded,
    note_after: &str,
    emit: &mut dyn FnMut(Found) -> Result<()>,
) -> Result<()> {
    let failed = recorded.oom.map(|(device, size, device_free)| Failed {
        device,
        size,
        time_ns: recorded.time_ns,
        device_free,
    });
    let devices: BTreeSet<i64> = state
        .values()
        .map(|segment| segment.device)
        .chain(recorded.devices.keys().copied())
        .collect();
    let (memories, strings, calls) = memories(state, &devices, &recorded.devices, failed, stacks);
    let mut note = format!(
        "PyTorch allocator state recorded by memstate.torch.Recorder at step {} of rank {}",
        recorded.step, recorded.rank
    );
    if let Some((device, size, _)) = recorded.oom {
        note.push_str(&format!(
            "; an allocation of {size} bytes failed on cuda:{device}"
        ));
    }
    note.push_str(note_after);
    let wall_time = recorded.wall_time_ns.map(|ns| {
        crate::units::rfc3339_utc(
            ns.div_euclid(1_000_000_000),
            ns.rem_euclid(1_000_000_000) as u32,
        )
    });
    emit(Found {
        line: usize::try_from(recorded.step)
            .unwrap_or(usize::MAX)
            .saturating_add(1),
        node: recorded.rank,
        time_ns: recorded.time_ns,
        reason: if recorded.oom.is_some() {
            "oom"
        } else {
            "periodic"
        },
        note: Some(note),
        memories,
        strings,
        calls,
        run: recorded.run,
        wall_time,
    })
}
