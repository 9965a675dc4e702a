//! When a profile's snapshots are taken ([`plan`]) and what is live at each ([`Plan::sweep`]):
//! the changes walked in time order, the snapshots held to a row budget, each memory's peak, and
//! instance records that repeat an id while the first lives, kept apart.

use std::collections::{BTreeMap, HashMap};

use super::records::Instance;
use super::{Profile, MAX_STEPPED, SNAPSHOTS};
use crate::error::Result;
use crate::import::input;
use crate::import::source::id_text;

/// When the snapshots are taken, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Ascending, each with the memories whose peak it is.
    pub times: Vec<(u64, Vec<u64>)>,
    /// The step between regular snapshots, when not one after each change.
    pub step: Option<u64>,
    /// Instances whose destroy time is before their ready time: live to the end.
    pub open: u64,
    /// Memories whose peak falls between snapshots (past the row budget).
    pub peaks_between: u64,
    /// The most instances live at once.
    pub most_live: u64,
    /// Instance records that repeat the id of another live at the same time, by record
    /// offset, with the uid that keeps each apart ([`REPEAT_UIDS`] and the record's offset).
    pub repeats: HashMap<u64, u64>,
}

/// When an instance holds its bytes: from `ready` (Realm has placed it) to `destroy`, destroy
/// `u64::MAX` when the profile gives none after it. From `create` to `ready` it waits for room (a
/// deferred allocation, often for the bytes of an instance being destroyed) and holds none: with
/// `create` the committed Legate fixture under pressure holds 36.7 MB in its 33.5 MB memory, with
/// `ready` exactly 33.5 MB at its fullest.
fn life(instance: &Instance) -> (u64, u64) {
    let start = instance.ready;
    if instance.destroy < start {
        (start, u64::MAX)
    } else {
        (start, instance.destroy)
    }
}

/// Moments of instances' lives by time: (time, index into the profile's instances).
type Moments = Vec<(u64, u32)>;

/// The instances' starts and ends, by time.
fn timeline(profile: &Profile) -> (Moments, Moments) {
    let mut starts = Vec::with_capacity(profile.instances.len());
    let mut ends = Vec::with_capacity(profile.instances.len());
    for (index, instance) in profile.instances.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let (start, end) = life(instance);
        starts.push((start, index));
        if end != u64::MAX {
            ends.push((end, index));
        }
    }
    starts.sort_unstable();
    ends.sort_unstable();
    (starts, ends)
}

/// The uids of repeated instance records (see [`repeats`]): these high bits and the record's
/// byte offset (an `inst_uid` is a count from 1, Realm's instance ids start 0x4000...).
pub const REPEAT_UIDS: u64 = 0xfe00_0000_0000_0000;

/// Instance records whose key is that of another instance live at the same time (a profile
/// that repeats a record, or an id reused while the first lives): each after the first is
/// given its own uid, [`REPEAT_UIDS`] and its record's byte offset, so that all are kept apart.
fn repeats(profile: &Profile) -> HashMap<u64, u64> {
    let mut order: Vec<(u64, u64, u64, u64)> = profile
        .instances
        .iter()
        .map(|instance| {
            let (start, end) = life(instance);
            (instance.key, start, end, instance.offset)
        })
        .collect();
    order.sort_unstable();
    let mut repeats = HashMap::new();
    let mut at = 0;
    while at < order.len() {
        let key = order[at].0;
        let mut until = order[at].2;
        at += 1;
        while at < order.len() && order[at].0 == key {
            let (_, start, end, offset) = order[at];
            if start < until {
                repeats.insert(offset, REPEAT_UIDS | (offset & !REPEAT_UIDS));
            }
            until = until.max(end);
            at += 1;
        }
    }
    repeats
}

/// Choose the snapshot times (see the module's comment): their rows held to `budget` unless
/// `step` is given.
pub fn plan(
    profile: &Profile,
    step: Option<u64>,
    budget: u64,
) -> std::result::Result<Plan, String> {
    let capacities: BTreeMap<u64, u64> = profile
        .memories
        .iter()
        .filter(|(_, &(_, capacity))| capacity > 0)
        .map(|(&memory, &(_, capacity))| (memory, capacity))
        .collect();
    if capacities.is_empty() {
        return Err(
            "it describes no memory with a capacity (no MemDesc record): nothing to tell"
                .to_string(),
        );
    }
    let repeats = repeats(profile);
    let (starts, ends) = timeline(profile);
    let open = (starts.len() - ends.len()) as u64;
    let (Some(&(first_start, _)), Some(&(last_start, _))) = (starts.first(), starts.last()) else {
        // No instance: one snapshot of the memories, empty.
        return Ok(Plan {
            times: vec![(0, Vec::new())],
            step: None,
            open,
            peaks_between: 0,
            most_live: 0,
            repeats,
        });
    };
    // An instance ends after it starts, so the first change is a start.
    let first = first_start;
    let last = last_start.max(ends.last().map_or(0, |end| end.0));
    // Walk the changes in time order: how many there are, how many instances are live at most,
    // and each memory's peak (the first time its live bytes are at their most).
    let mut held: HashMap<u64, i128> = HashMap::new();
    let mut peaks: BTreeMap<u64, (i128, u64)> = BTreeMap::new();
    let (mut changes, mut live, mut most_live) = (0u64, 0u64, 0u64);
    let (mut s, mut e) = (0, 0);
    let mut changed: Vec<u64> = Vec::new();
    let mut sample: Vec<u64> = Vec::new();
    while s < starts.len() || e < ends.len() {
        let time = match (starts.get(s), ends.get(e)) {
            (Some(start), Some(end)) => start.0.min(end.0),
            (Some(start), None) => start.0,
            (None, Some(end)) => end.0,
            (None, None) => break,
        };
        changed.clear();
        while let Some(&(_, index)) = starts.get(s).filter(|start| start.0 == time) {
            let instance = &profile.instances[index as usize];
            *held.entry(instance.memory).or_insert(0) += i128::from(instance.size);
            changed.push(instance.memory);
            live += 1;
            s += 1;
        }
        while let Some(&(_, index)) = ends.get(e).filter(|end| end.0 == time) {
            let instance = &profile.instances[index as usize];
            *held.entry(instance.memory).or_insert(0) -= i128::from(instance.size);
            changed.push(instance.memory);
            live = live.saturating_sub(1);
            e += 1;
        }
        most_live = most_live.max(live);
        changes += 1;
        if changes <= SNAPSHOTS {
            sample.push(time);
        }
        for memory in &changed {
            let now = held.get(memory).copied().unwrap_or(0);
            let peak = peaks.entry(*memory).or_insert((0, time));
            if now > peak.0 {
                *peak = (now, time);
            }
        }
    }
    // Snapshots the budget allows, each counted at its fullest.
    let per_snapshot = input::SNAPSHOT_ROWS + capacities.len() as u64 + most_live;
    let allowed = (budget / per_snapshot.max(1)).max(2);
    let peaks: Vec<(u64, u64, i128)> = peaks
        .into_iter()
        .filter(|(_, (bytes, _))| *bytes > 0)
        .map(|(memory, (bytes, time))| (memory, time, bytes))
        .collect();
    let (mut times, step, kept_peaks): (BTreeMap<u64, Vec<u64>>, Option<u64>, usize) = match step {
        None if changes <= SNAPSHOTS.min(allowed) => (
            sample.iter().map(|&time| (time, Vec::new())).collect(),
            None,
            peaks.len(),
        ),
        chosen => {
            // With a step of the user's, every peak; else at most half the snapshots allowed
            // go to peaks, the fullest memories' first.
            let kept_peaks = match chosen {
                Some(_) => peaks.len(),
                None => peaks
                    .len()
                    .min(usize::try_from(allowed / 2).unwrap_or(usize::MAX)),
            };
            let regular = allowed
                .saturating_sub(kept_peaks as u64)
                .clamp(1, SNAPSHOTS);
            let step = chosen
                .unwrap_or_else(|| (last - first).div_ceil(regular))
                .max(1);
            let count = (last - first) / step + 1;
            if count > MAX_STEPPED {
                return Err(format!(
                    "a step of {step} ns over its {} ns would take {count} snapshots, more than {MAX_STEPPED}: choose a larger --prof-step",
                    last - first
                ));
            }
            let mut times: BTreeMap<u64, Vec<u64>> =
                (0..count).map(|k| (first + k * step, Vec::new())).collect();
            times.insert(last, Vec::new());
            (times, Some(step), kept_peaks)
        }
    };
    // The fullest memories' peaks first (by the share of their capacity they reach).
    let mut by_fullness = peaks;
    by_fullness.sort_by(|a, b| {
        let share = |&(memory, _, bytes): &(u64, u64, i128)| {
            bytes as f64 / capacities.get(&memory).copied().unwrap_or(1).max(1) as f64
        };
        share(b).total_cmp(&share(a)).then(a.0.cmp(&b.0))
    });
    let peaks_between = by_fullness.len().saturating_sub(kept_peaks) as u64;
    for &(memory, time, _) in by_fullness.iter().take(kept_peaks) {
        times.entry(time).or_default().push(memory);
    }
    Ok(Plan {
        times: times
            .into_iter()
            .map(|(time, mut memories)| {
                memories.sort_unstable();
                (time, memories)
            })
            .collect(),
        step,
        open,
        peaks_between,
        most_live,
        repeats,
    })
}

/// By memory, its live instances by (create time, key, record offset).
type Live<'p> = BTreeMap<u64, BTreeMap<(u64, u64, u64), &'p Instance>>;

/// What [`Plan::sweep`] hands each snapshot: its ordinal, time, the memories whose peak it is,
/// and what is live.
type Visit<'v> = dyn FnMut(usize, u64, &[u64], &Live<'_>) -> Result<()> + 'v;

impl Plan {
    /// Visit each snapshot's live instances by memory (in create order), in time order.
    pub(super) fn sweep(&self, profile: &Profile, visit: &mut Visit<'_>) -> Result<()> {
        let (starts, ends) = timeline(profile);
        let mut live: Live<'_> = profile
            .memories
            .iter()
            .filter(|(_, &(_, capacity))| capacity > 0)
            .map(|(&memory, _)| (memory, BTreeMap::new()))
            .collect();
        let key = |instance: &Instance| (instance.create, instance.key, instance.offset);
        let (mut started, mut ended) = (0, 0);
        for (ordinal, (time, peaks)) in self.times.iter().enumerate() {
            // Started at or before the time, and not ended by it (an end at the time is gone).
            while started < starts.len() && starts[started].0 <= *time {
                let instance = &profile.instances[starts[started].1 as usize];
                if let Some(memory) = live.get_mut(&instance.memory) {
                    memory.insert(key(instance), instance);
                }
                started += 1;
            }
            while ended < ends.len() && ends[ended].0 <= *time {
                let instance = &profile.instances[ends[ended].1 as usize];
                if let Some(memory) = live.get_mut(&instance.memory) {
                    memory.remove(&key(instance));
                }
                ended += 1;
            }
            visit(ordinal, *time, peaks, &live)?;
        }
        Ok(())
    }

    /// The rows the snapshots would take (each 64, each memory and instance one).
    pub fn rows(&self, profile: &Profile) -> u64 {
        let mut rows = 0u64;
        let _ = self.sweep(profile, &mut |_, _, _, live| {
            let instances: usize = live.values().map(BTreeMap::len).sum();
            rows = rows.saturating_add(input::SNAPSHOT_ROWS + live.len() as u64 + instances as u64);
            Ok(())
        });
        rows
    }

    /// The uid an instance is written with: its key, or its own when it repeats one live.
    pub(super) fn uid(&self, instance: &Instance) -> String {
        id_text(
            self.repeats
                .get(&instance.offset)
                .copied()
                .unwrap_or(instance.key),
        )
    }
}
