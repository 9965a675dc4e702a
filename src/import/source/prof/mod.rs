//! Legion Prof profiles: `legate --profile` writes `legate_N.prof` and `-lg:prof N` writes
//! `prof_N.gz`, one file per node, told by their first bytes (`FileType: BinaryLegionProf`).
//! Of all they record, two records hold a memory's history: `MemDesc {mem_id, kind, capacity}`
//! and `InstTimelineInfo {inst_id, mem_id, size, create, destroy, ...}` for every instance; the
//! node comes from `MachineDesc`. The layouts are read from the header ([`header`]) and the
//! records one at a time ([`records`]), so the memory held is the instances' lives (48 bytes
//! each), not the tasks, copies and events that make most of a profile.
//!
//! What becomes of them: for each memory with a capacity, snapshots of its live instances (handle
//! the instance id, size as recorded, valid, created at its create time), an instance live from
//! its `ready` time (Realm has placed it) to its `destroy` time. A profile records no
//! address, so placement is unknown (format v1's `unknown`): used bytes, trends, churn and
//! lifetimes answer; holes and fragmentation stay unknown. When the live sets change at most
//! [`SNAPSHOTS`] times, a snapshot follows each change; past that, [`SNAPSHOTS`] snapshots at a
//! regular step over the run (or every `--prof-step`), and always one at each memory's peak and
//! one at the last change. Timestamps are nanoseconds since Realm's zero time, the clock of the
//! Realm log's prefix, so a run's profile and its log line up in time.

mod header;
mod records;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::BufRead;

use super::{id_text, Found, Kind, Options, Source};
use crate::dump::write;
use crate::error::{Error, Result};
use crate::import::input::{self, Limits};
use records::{Instance, Record, Records};

pub use header::MAGIC;

/// Legion Prof's binary profile.
pub struct LegionProf;

/// Up to this many changes, a snapshot after each; past it, this many at a regular step.
pub const SNAPSHOTS: u64 = 200;

/// The most snapshots a `--prof-step` may ask for.
const MAX_STEPPED: u64 = 100_000;

/// Realm's memory kinds by number: `REALM_MEMORY_KINDS` in runtime/realm/realm_c.h, the same
/// list from legion-24.03.0 to legion-25.06.0 (Realm 25.06 in Legate 26.06).
const MEMORY_KINDS: [&str; 15] = [
    "NO_MEMKIND",
    "GLOBAL_MEM",
    "SYSTEM_MEM",
    "REGDMA_MEM",
    "SOCKET_MEM",
    "Z_COPY_MEM",
    "GPU_FB_MEM",
    "DISK_MEM",
    "HDF_MEM",
    "FILE_MEM",
    "LEVEL3_CACHE",
    "LEVEL2_CACHE",
    "LEVEL1_CACHE",
    "GPU_MANAGED_MEM",
    "GPU_DYNAMIC_MEM",
];

fn bad(display: &str, message: impl Into<String>) -> Error {
    Error::read(display, message.into())
}

impl Source for LegionProf {
    fn kind(&self) -> Kind {
        Kind::LegionProf
    }

    fn name(&self) -> &'static str {
        "legion-prof"
    }

    fn described(&self) -> &'static str {
        "a Legion Prof profile (FileType: BinaryLegionProf, from legate --profile or -lg:prof)"
    }

    fn claims(&self, head: &[u8]) -> bool {
        head.starts_with(MAGIC)
    }

    /// One file per node (`legate_0.prof`, `prof_1.gz`): the run is the name without the node.
    fn run_of_stem(&self, stem: String) -> String {
        match stem.rsplit_once('_') {
            Some((base, node))
                if !base.is_empty()
                    && !node.is_empty()
                    && node.bytes().all(|b| b.is_ascii_digit()) =>
            {
                base.to_string()
            }
            _ => stem,
        }
    }

    fn read_whole(
        &self,
        reader: &mut dyn BufRead,
        display: &str,
        limits: Limits,
        options: &Options,
        emit: &mut dyn FnMut(Found) -> Result<()>,
    ) -> Result<()> {
        let profile = read(reader).map_err(|why| bad(display, why))?;
        let rows = match limits.max_row_ratio {
            0 => u64::MAX,
            ratio => profile.bytes.saturating_mul(ratio).max(input::ROW_FLOOR),
        };
        let plan = plan(&profile, options.prof_step_ns).map_err(|why| bad(display, why))?;
        let planned = plan.rows(&profile);
        if planned > rows {
            return Err(bad(
                display,
                format!("its {} snapshots would hold {planned} rows, more than {rows} for a profile of {} bytes; refused (a larger --prof-step takes fewer snapshots; --max-row-ratio 0 lifts the limit)", plan.times.len(), profile.bytes),
            ));
        }
        plan.emit(&profile, emit)
    }
}

/// What a profile holds that memstate uses.
#[derive(Debug, Default)]
pub struct Profile {
    pub node: Option<u64>,
    /// By memory id: (kind, capacity).
    pub memories: BTreeMap<u64, (u64, u64)>,
    pub instances: Vec<Instance>,
    /// Records read, and the (decompressed) bytes.
    pub records: u64,
    pub bytes: u64,
    pub producer: Option<String>,
}

/// Read a whole profile, one record at a time.
pub fn read(reader: &mut dyn BufRead) -> std::result::Result<Profile, String> {
    let header = header::read(reader)?;
    let mut records = Records::new(&header)?;
    let mut profile = Profile {
        producer: header.producer.clone(),
        ..Profile::default()
    };
    while let Some(record) = records.next(reader)? {
        profile.records += 1;
        match record {
            Record::Machine { node } => profile.node = Some(node),
            Record::Memory { id, kind, capacity } => {
                profile.memories.insert(id, (kind, capacity));
            }
            Record::Instance(instance) => profile.instances.push(instance),
            Record::MaxDim(_) | Record::Other => {}
        }
    }
    profile.bytes = records.offset;
    Ok(profile)
}

/// When the snapshots are taken, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Ascending, each with the memories whose peak it is.
    pub times: Vec<(u64, Vec<u64>)>,
    /// The step between regular snapshots, when not one after each change.
    pub step: Option<u64>,
    /// Instances of a memory the profile does not describe (or of capacity 0), left out.
    pub unplaced: u64,
    /// Instances whose destroy time is before their ready time: live to the end.
    pub open: u64,
}

/// When an instance holds its bytes: from `ready` (Realm has placed it) to `destroy`, destroy
/// `u64::MAX` when the profile gives none after it. From `create` to `ready` it waits for room (a
/// deferred allocation, often for the bytes of an instance being destroyed) and holds none: with
/// `create` the committed Legate fixture under pressure holds 36.7 MB in its 33.5 MB memory, with
/// `ready` exactly 33.5 MB at its fullest.
fn life(instance: &Instance) -> (u64, u64) {
    let start = instance.ready.max(instance.create);
    if instance.destroy < start {
        (start, u64::MAX)
    } else {
        (start, instance.destroy)
    }
}

/// The instances that are drawn: those of a memory with a capacity.
fn drawn<'p>(profile: &'p Profile) -> impl Iterator<Item = &'p Instance> + 'p {
    profile.instances.iter().filter(|instance| {
        profile
            .memories
            .get(&instance.memory)
            .is_some_and(|&(_, capacity)| capacity > 0)
    })
}

/// Choose the snapshot times (see the module's comment).
pub fn plan(profile: &Profile, step: Option<u64>) -> std::result::Result<Plan, String> {
    if !profile.memories.values().any(|&(_, capacity)| capacity > 0) {
        return Err(
            "it describes no memory with a capacity (no MemDesc record): nothing to tell"
                .to_string(),
        );
    }
    let drawn: Vec<&Instance> = drawn(profile).collect();
    let unplaced = (profile.instances.len() - drawn.len()) as u64;
    let open = drawn
        .iter()
        .filter(|instance| life(instance).1 == u64::MAX)
        .count() as u64;
    // Every change: +size at create, -size at destroy, by time.
    let mut events: Vec<(u64, u64, i128)> = Vec::with_capacity(drawn.len() * 2);
    for instance in &drawn {
        let (create, destroy) = life(instance);
        events.push((create, instance.memory, i128::from(instance.size)));
        if destroy != u64::MAX {
            events.push((destroy, instance.memory, -i128::from(instance.size)));
        }
    }
    events.sort_unstable();
    let changes: BTreeSet<u64> = events.iter().map(|event| event.0).collect();
    let (Some(&first), Some(&last)) = (changes.first(), changes.last()) else {
        // No instance: one snapshot of the memories, empty.
        return Ok(Plan {
            times: vec![(0, Vec::new())],
            step: None,
            unplaced,
            open,
        });
    };
    // Each memory's peak: the first time its live bytes are at their most.
    let mut held: BTreeMap<u64, i128> = BTreeMap::new();
    let mut peaks: BTreeMap<u64, (i128, u64)> = BTreeMap::new();
    let mut at = 0;
    while at < events.len() {
        let time = events[at].0;
        let end = at + events[at..].partition_point(|event| event.0 == time);
        for &(_, memory, bytes) in &events[at..end] {
            *held.entry(memory).or_insert(0) += bytes;
        }
        for &(_, memory, _) in &events[at..end] {
            let now = held.get(&memory).copied().unwrap_or(0);
            let peak = peaks.entry(memory).or_insert((0, time));
            if now > peak.0 {
                *peak = (now, time);
            }
        }
        at = end;
    }
    let (mut times, step): (BTreeMap<u64, Vec<u64>>, Option<u64>) = match step {
        None if changes.len() as u64 <= SNAPSHOTS => (
            changes.iter().map(|&time| (time, Vec::new())).collect(),
            None,
        ),
        chosen => {
            let step = chosen
                .unwrap_or_else(|| (last - first).div_ceil(SNAPSHOTS))
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
            (times, Some(step))
        }
    };
    for (memory, (bytes, time)) in peaks {
        if bytes > 0 {
            times.entry(time).or_default().push(memory);
        }
    }
    Ok(Plan {
        times: times.into_iter().collect(),
        step,
        unplaced,
        open,
    })
}

/// By memory, its live instances by (create time, key).
type Live<'p> = BTreeMap<u64, BTreeMap<(u64, u64), &'p Instance>>;

/// What [`Plan::sweep`] hands each snapshot: its ordinal, time, the memories whose peak it is,
/// and what is live.
type Visit<'v> = dyn FnMut(usize, u64, &[u64], &Live<'_>) -> Result<()> + 'v;

impl Plan {
    /// Visit each snapshot's live instances by memory (in create order), in time order.
    fn sweep(&self, profile: &Profile, visit: &mut Visit<'_>) -> Result<()> {
        let drawn: Vec<&Instance> = drawn(profile).collect();
        let mut creates: Vec<(u64, usize)> = drawn
            .iter()
            .enumerate()
            .map(|(index, instance)| (life(instance).0, index))
            .collect();
        let mut destroys: Vec<(u64, usize)> = drawn
            .iter()
            .enumerate()
            .filter(|(_, instance)| life(instance).1 != u64::MAX)
            .map(|(index, instance)| (life(instance).1, index))
            .collect();
        creates.sort_unstable();
        destroys.sort_unstable();
        let mut live: Live<'_> = profile
            .memories
            .iter()
            .filter(|(_, &(_, capacity))| capacity > 0)
            .map(|(&memory, _)| (memory, BTreeMap::new()))
            .collect();
        let key = |index: usize| {
            let instance = drawn[index];
            (instance.create, instance.uid.unwrap_or(instance.id))
        };
        let (mut created, mut destroyed) = (0, 0);
        for (ordinal, (time, peaks)) in self.times.iter().enumerate() {
            // Created at or before the time, and not destroyed by it (a destroy at the time is gone).
            while created < creates.len() && creates[created].0 <= *time {
                let index = creates[created].1;
                if let Some(memory) = live.get_mut(&drawn[index].memory) {
                    memory.insert(key(index), drawn[index]);
                }
                created += 1;
            }
            while destroyed < destroys.len() && destroys[destroyed].0 <= *time {
                let index = destroys[destroyed].1;
                if let Some(memory) = live.get_mut(&drawn[index].memory) {
                    memory.remove(&key(index));
                }
                destroyed += 1;
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
            rows = rows.saturating_add(64 + live.len() as u64 + instances as u64);
            Ok(())
        });
        rows
    }

    /// Hand each snapshot to `emit`, in time order.
    fn emit(&self, profile: &Profile, emit: &mut dyn FnMut(Found) -> Result<()>) -> Result<()> {
        let node = i64::try_from(profile.node.unwrap_or(0)).unwrap_or(i64::MAX);
        let mut said = vec![match profile.node {
            Some(_) => "from a Legion Prof profile".to_string(),
            None => "from a Legion Prof profile without a MachineDesc record (node 0)".to_string(),
        }];
        if let Some(producer) = &profile.producer {
            said.push(format!("written by {producer}"));
        }
        said.push("the profile records no addresses: placement unknown".to_string());
        said.push("an instance holds its bytes from ready to destroy".to_string());
        if profile.instances.is_empty() {
            said.push("it holds no instance records (Legion writes them as it flushes; a run that aborts may leave none): the memories and their capacities only".to_string());
        }
        if self.unplaced > 0 {
            said.push(format!(
                "{} instances of memories it does not describe with a capacity are left out",
                self.unplaced
            ));
        }
        if self.open > 0 {
            said.push(format!(
                "{} instances destroyed before they were ready (as recorded) are taken as live to the end",
                self.open
            ));
        }
        if let Some(step) = self.step {
            said.push(format!(
                "a snapshot every {step} ns and at each memory's peak"
            ));
        } else {
            said.push("a snapshot after each change".to_string());
        }
        let common = said.join("; ");
        // By memory, the stand-in offset of each live instance (by its key) at the last snapshot.
        let mut placed: HashMap<u64, HashMap<u64, u64>> = HashMap::new();
        self.sweep(profile, &mut |ordinal, time, peaks, live| {
            let mut memories = Vec::with_capacity(live.len());
            for (&memory, instances) in live {
                let (kind, capacity) = profile.memories.get(&memory).copied().unwrap_or((0, 0));
                let kind_name = usize::try_from(kind)
                    .ok()
                    .and_then(|kind| MEMORY_KINDS.get(kind))
                    .map_or_else(|| format!("memory kind {kind}"), |name| name.to_string());
                let mut written =
                    write::Memory::new(id_text(memory), kind_name.as_str().into(), capacity);
                written.unknown = vec!["placement"];
                let lives: Vec<(u64, u64)> = instances
                    .values()
                    .map(|instance| (instance.uid.unwrap_or(instance.id), instance.size))
                    .collect();
                let total = lives
                    .iter()
                    .fold(0u64, |total, &(_, size)| total.saturating_add(size));
                if total > capacity {
                    // More live than the memory holds, as recorded: the capacity is not to be
                    // trusted here (the stand-in is what the instances take).
                    written.capacity = total;
                    written.unknown.push("capacity");
                }
                let offsets = stand_in_offsets(placed.get(&memory), &lives, written.capacity);
                for instance in instances.values() {
                    let key = instance.uid.unwrap_or(instance.id);
                    let mut allocation = write::Allocation::new(
                        id_text(key),
                        "instance".into(),
                        "valid",
                        offsets.get(&key).copied().unwrap_or(0),
                        instance.size,
                    );
                    allocation.handle = Some(id_text(instance.id));
                    allocation.created_ns = i64::try_from(instance.create).ok();
                    written.allocations.push(&allocation);
                }
                placed.insert(memory, offsets);
                memories.push(written);
            }
            let mut note = common.clone();
            for memory in peaks {
                let (kind, _) = profile.memories.get(memory).copied().unwrap_or((0, 0));
                let kind = usize::try_from(kind)
                    .ok()
                    .and_then(|kind| MEMORY_KINDS.get(kind))
                    .copied()
                    .unwrap_or("memory");
                note.push_str(&format!("; the peak of {kind} {}", id_text(*memory)));
            }
            emit(Found {
                run: None,
                wall_time: None,
                line: ordinal + 1,
                node,
                time_ns: i64::try_from(time).unwrap_or(i64::MAX),
                reason: "periodic",
                note: Some(note),
                memories,
                strings: Vec::new(),
            })
        })
    }
}

/// Stand-in offsets for a memory's live instances, `lives` as (key, size) in create order: the
/// profile records no address, so these only keep the format's rules (no overlap, within
/// `capacity`) and keep each instance at one offset while it lives (one allocation span, so
/// lifetimes and churn read as they are). An instance keeps its offset of the last snapshot; a
/// new one goes after the last, else into the first gap that holds it; when none does, all are
/// packed end to end again (they fit: their total is at most `capacity`).
fn stand_in_offsets(
    previous: Option<&HashMap<u64, u64>>,
    lives: &[(u64, u64)],
    capacity: u64,
) -> HashMap<u64, u64> {
    let mut offsets: HashMap<u64, u64> = HashMap::with_capacity(lives.len());
    // (offset, end) of what is placed, by offset.
    let mut taken: BTreeMap<u64, u64> = BTreeMap::new();
    let mut new = Vec::new();
    for &(key, size) in lives {
        match previous.and_then(|previous| previous.get(&key)) {
            Some(&offset) => {
                offsets.insert(key, offset);
                taken.insert(offset, offset.saturating_add(size));
            }
            None => new.push((key, size)),
        }
    }
    let packed = |lives: &[(u64, u64)]| {
        let mut offset = 0u64;
        let mut offsets = HashMap::with_capacity(lives.len());
        for &(key, size) in lives {
            offsets.insert(key, offset);
            offset = offset.saturating_add(size);
        }
        offsets
    };
    // A capacity smaller than at the last snapshot (it was a stand-in there) may leave an
    // instance past its end.
    if taken
        .values()
        .next_back()
        .is_some_and(|&end| end > capacity)
    {
        return packed(lives);
    }
    for (key, size) in new {
        let end = taken.values().next_back().copied().unwrap_or(0);
        let place = if capacity.saturating_sub(end) >= size {
            Some(end)
        } else {
            let mut cursor = 0u64;
            let mut found = None;
            for (&offset, &stop) in &taken {
                if offset.saturating_sub(cursor) >= size {
                    found = Some(cursor);
                    break;
                }
                cursor = cursor.max(stop);
            }
            found
        };
        match place {
            Some(offset) => {
                offsets.insert(key, offset);
                taken.insert(offset, offset.saturating_add(size));
            }
            // No room as they lie: every instance end to end, in create order.
            None => return packed(lives),
        }
    }
    offsets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stand_in_offsets_keep_their_place_and_fill_gaps() {
        // A (4) and B (4) end to end in 10; A goes, C (3) comes: after B (at 8) is too far, so
        // into A's gap at 0; then D (4) fits nowhere as they lie: all packed again.
        let first = stand_in_offsets(None, &[(1, 4), (2, 4)], 10);
        assert_eq!((first[&1], first[&2]), (0, 4));
        let second = stand_in_offsets(Some(&first), &[(2, 4), (3, 3)], 10);
        assert_eq!((second[&2], second[&3]), (4, 0));
        let third = stand_in_offsets(Some(&second), &[(2, 4), (3, 3), (4, 3)], 10);
        assert_eq!((third[&2], third[&3], third[&4]), (0, 4, 7));
    }
}
