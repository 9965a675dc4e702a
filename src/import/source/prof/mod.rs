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
//! regular step over the run (or every `--prof-step`), one at each memory's peak and one at the
//! last change. Timestamps are nanoseconds since Realm's zero time, the clock of the Realm log's
//! prefix, so a run's profile and its log line up in time.
//!
//! Bounded by the input, as every source is: the decompressed bytes by `--max-dump-size`, the
//! header to 1 MiB, the instances held to 3 times the bytes read (and 48 MiB), the snapshots'
//! rows to half a row per byte ([`ROW_BUDGET_FLOOR`] at least: a profile of many memories gets
//! fewer snapshots, the fullest memories' peaks kept, and says how many fall between), and a
//! profile whose live instances would pass 4 times its size and 64 MiB on their way through the
//! import is refused by name (`--max-row-ratio 0` lifts both). An instance recorded again while
//! the first lives (the same `inst_uid`) is kept apart under a uid of its own and named by its
//! record's byte offset.

mod header;
mod plan;
mod records;

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

use super::{id_text, Found, Kind, Options, Source};
use crate::dump::write;
use crate::error::{Error, Result};
use crate::import::input::{self, Limits};
use plan::Plan;
pub use plan::{plan, REPEAT_UIDS};
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
        let profile = read(reader, limits.max_dump_size).map_err(|why| bad(display, why))?;
        let rows = match limits.max_row_ratio {
            0 => u64::MAX,
            ratio => profile.bytes.saturating_mul(ratio).max(input::ROW_FLOOR),
        };
        let budget = match limits.max_row_ratio {
            0 => u64::MAX,
            _ => (profile.bytes / 2).max(ROW_BUDGET_FLOOR),
        };
        let plan = plan(&profile, options.prof_step_ns, budget).map_err(|why| bad(display, why))?;
        // A snapshot goes through the import as text, parsed, and written (up to three at once,
        // each holding every live instance): with what reading held, past the bound every source
        // keeps it is refused, not imported at whatever it costs.
        let held = (profile.instances.len() as u64)
            .saturating_mul(HELD_PER_INSTANCE)
            .saturating_add(plan.most_live.saturating_mul(IN_FLIGHT_PER_LIVE));
        let bound = profile.bytes.saturating_mul(4).saturating_add(64 << 20);
        if limits.max_row_ratio != 0 && held > bound {
            return Err(bad(
                display,
                format!("{} of its instances are live at once: importing its snapshots would hold about {} MiB, more than 4 times its {} bytes and 64 MiB; refused (--max-row-ratio 0 lifts the limit)", plan.most_live, held >> 20, profile.bytes),
            ));
        }
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

/// What the snapshots of a profile may hold together, in rows (a snapshot 64, each memory and
/// live instance in it one), when memstate chooses them: half a row per byte of profile, and at
/// least this many. Real profiles hold far fewer rows than bytes (the tasks, copies and events
/// that make most of a profile become none); a profile of many memories gets fewer snapshots,
/// so that its rows, time and database grow with its size, not with its memories squared.
pub const ROW_BUDGET_FLOOR: u64 = 50_000;

/// What reading and planning take per instance record, in bytes: the record as held (64), its
/// two places in the time-ordered lists (32), and its share of the live sets.
const HELD_PER_INSTANCE: u64 = 160;

/// What one live instance of a snapshot costs while the snapshot goes through the import: its
/// text, its parsed form and its place in the writer, for the up to three snapshots in flight
/// (measured: a 26 MB profile with 170,000 instances live at once peaked at 200 MiB, 54 of them
/// its instances as read).
const IN_FLIGHT_PER_LIVE: u64 = 800;

/// Reading a profile holds at most this many times the bytes read, and [`HELD_FLOOR`] more, for
/// its instances: with the rest of an import, a profile stays within 4 times its decompressed
/// size and 64 MiB.
const HELD_PER_BYTE: u64 = 3;
const HELD_FLOOR: u64 = 48 << 20;

/// What a profile holds that memstate uses.
#[derive(Debug, Default)]
pub struct Profile {
    pub node: Option<u64>,
    /// By memory id: (kind, capacity).
    pub memories: BTreeMap<u64, (u64, u64)>,
    /// The instances of memories described with a capacity, in record order.
    pub instances: Vec<Instance>,
    /// Instances of a memory the profile does not describe (or of capacity 0), left out.
    pub unplaced: u64,
    /// Records read, and the (decompressed) bytes.
    pub records: u64,
    pub bytes: u64,
    pub producer: Option<String>,
}

/// Read a whole profile, one record at a time, refusing one larger than `max_bytes` once
/// decompressed, or whose instances would take more memory than its size allows.
pub fn read(reader: &mut dyn BufRead, max_bytes: u64) -> std::result::Result<Profile, String> {
    let header = header::read(reader)?;
    let mut records = Records::new(&header)?;
    let mut profile = Profile {
        producer: header.producer.clone(),
        ..Profile::default()
    };
    loop {
        let start = records.offset;
        if start > max_bytes {
            return Err(format!(
                "larger than {max_bytes} bytes once decompressed, the limit for one input; refused (raise it with --max-dump-size)"
            ));
        }
        let Some(record) = records.next(reader)? else {
            break;
        };
        profile.records += 1;
        match record {
            Record::Machine { node } => profile.node = Some(node),
            Record::Memory { id, kind, capacity } => {
                profile.memories.insert(id, (kind, capacity));
            }
            Record::Instance(instance) => {
                let held = (profile.instances.len() as u64 + 1).saturating_mul(HELD_PER_INSTANCE);
                if held > records.offset.saturating_mul(HELD_PER_BYTE) + HELD_FLOOR {
                    return Err(format!(
                        "byte offset {start}: {} instance records in its first {} bytes ({} bytes each on average; Legion writes 60 or more): holding them would take more than {HELD_PER_BYTE} times the profile's size and {} MiB; refused",
                        profile.instances.len() + 1,
                        records.offset,
                        records.offset / (profile.instances.len() as u64 + 1),
                        HELD_FLOOR >> 20
                    ));
                }
                profile.instances.push(instance);
            }
            Record::MaxDim(_) | Record::Other => {}
        }
    }
    profile.bytes = records.offset;
    // Only the instances of a memory with a capacity are drawn (MemDesc may come after them).
    let before = profile.instances.len();
    let memories = &profile.memories;
    profile.instances.retain(|instance| {
        memories
            .get(&instance.memory)
            .is_some_and(|&(_, capacity)| capacity > 0)
    });
    profile.instances.shrink_to_fit();
    profile.unplaced = (before - profile.instances.len()) as u64;
    Ok(profile)
}

impl Plan {
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
        if profile.instances.is_empty() && profile.unplaced == 0 {
            said.push("it holds no instance records (Legion writes them as it flushes; a run that aborts may leave none): the memories and their capacities only".to_string());
        }
        if profile.unplaced > 0 {
            said.push(format!(
                "{} instances of memories it does not describe with a capacity are left out",
                profile.unplaced
            ));
        }
        if self.open > 0 {
            said.push(format!(
                "{} instances destroyed before they were ready (as recorded) are taken as live to the end",
                self.open
            ));
        }
        if let Some(first) = self.repeats.keys().min() {
            said.push(format!(
                "{} instance records repeat the id of another live at the same time (the first at byte offset {first}): each is kept, under the uid 0x{REPEAT_UIDS:x} plus its record's byte offset (the handle stays the instance id)",
                self.repeats.len()
            ));
        }
        if let Some(step) = self.step {
            said.push(format!(
                "a snapshot every {step} ns and at each memory's peak"
            ));
        } else {
            said.push("a snapshot after each change".to_string());
        }
        if self.peaks_between > 0 {
            said.push(format!(
                "the peaks of {} memories fall between snapshots (the fullest memories' peaks are kept; a smaller --prof-step keeps them all)",
                self.peaks_between
            ));
        }
        let common = said.join("; ");
        // By memory, the stand-in offset of each live instance (by its record) at the last
        // snapshot.
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
                    .map(|instance| (instance.offset, instance.size))
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
                    let mut allocation = write::Allocation::new(
                        self.uid(instance),
                        "instance".into(),
                        "valid",
                        offsets.get(&instance.offset).copied().unwrap_or(0),
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
                calls: Default::default(),
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
