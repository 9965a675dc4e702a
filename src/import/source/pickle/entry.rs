//! Allocator trace entries folded as they are read: a snapshot's trace holds millions of small
//! dicts of the same keys (`torch/csrc/cuda/Module.cpp`), which as dicts of the arena cost three
//! times the pickle's own bytes; folded, each is one record of the numbers memstate reads.

use super::{grow, Id, Node, Reader};
use super::{CONTAINER_BYTES, FOLDED_BYTES, NODE_BYTES};

/// An allocator trace entry (`{action, addr, size, stream, time_us, device_free, frames, ...}`
/// of `torch/csrc/cuda/Module.cpp`), kept as the numbers memstate reads instead of a dict: a
/// snapshot holds millions of them, and as dicts they cost three times the pickle's bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceEntry {
    /// The action's string value.
    pub action: Id,
    pub addr: Option<u64>,
    pub size: Option<u64>,
    pub time_us: Option<i64>,
    pub device_free: Option<u64>,
    /// The entry's `frames` list, when it has one.
    pub frames: Option<Id>,
}

/// A [`TraceEntry`] as the arena keeps it, in 32 bytes: which numbers are present (bits 0-3:
/// addr, size, time_us, device_free) and the first three (`device_free`, which only an `oom`
/// entry has, is kept apart in [`Pickle::device_free`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Folded {
    pub(super) action: Id,
    pub(super) present: u8,
    pub(super) numbers: [u64; 3],
    /// The `frames` list (`Id::MAX` when none).
    pub(super) frames: Id,
}

impl Folded {
    pub(super) fn number(&self, which: usize) -> Option<u64> {
        (self.present & (1 << which) != 0).then(|| self.numbers.get(which).copied().unwrap_or(0))
    }
}

/// The keys a trace entry may have; a dict with another key, or a value of another kind than
/// these keys take, stays a dict.
const ENTRY_KEYS: &[&str] = &[
    "action",
    "addr",
    "size",
    "stream",
    "time_us",
    "device_free",
    "frames",
    "cpp_frames",
    "compile_context",
    "user_metadata",
];

/// The length of the longest of [`ENTRY_KEYS`].
const LONGEST_KEY: usize = {
    let mut longest = 0;
    let mut index = 0;
    while index < ENTRY_KEYS.len() {
        if ENTRY_KEYS[index].len() > longest {
            longest = ENTRY_KEYS[index].len();
        }
        index += 1;
    }
    longest
};

impl Reader<'_> {
    /// A key as short as the keys of a trace entry are, read; a longer string (however long:
    /// a memoized one may be met a million times) is not read at all.
    fn short_key(&self, index: Id) -> Option<&str> {
        match self.arena.nodes[index as usize] {
            Node::Str { start, len } if len as usize <= LONGEST_KEY => std::str::from_utf8(
                self.bytes
                    .get(start as usize..start as usize + len as usize)?,
            )
            .ok(),
            _ => None,
        }
    }

    /// Fold an empty dict filled at once with a trace entry's items into a [`TraceEntry`],
    /// dropping the integer values it consumed when nothing else can refer to them (they are the
    /// last values made and no memo entry reaches them). Whether it was folded.
    pub(super) fn fold(&mut self, dict: Id, values: &[Id]) -> bool {
        let Node::Dict(at) = self.arena.nodes[dict as usize] else {
            return false;
        };
        if !self.arena.dicts[at as usize].is_empty() || !values.len().is_multiple_of(2) {
            return false;
        }
        let mut entry = TraceEntry {
            action: Id::MAX,
            addr: None,
            size: None,
            time_us: None,
            device_free: None,
            frames: None,
        };
        for pair in values.chunks(2) {
            let Some(key) = self.short_key(pair[0]) else {
                return false;
            };
            if !ENTRY_KEYS.contains(&key) {
                return false;
            }
            let number = match self.arena.nodes[pair[1] as usize] {
                Node::Int(number) => Some(number),
                _ => None,
            };
            match key {
                // A string node holds UTF-8 checked when it was read.
                "action" if matches!(self.arena.nodes[pair[1] as usize], Node::Str { .. }) => {
                    entry.action = pair[1]
                }
                "addr" | "size" | "device_free" => {
                    let Some(value) = number.and_then(|number| u64::try_from(number).ok()) else {
                        return false;
                    };
                    match key {
                        "addr" => entry.addr = Some(value),
                        "size" => entry.size = Some(value),
                        _ => entry.device_free = Some(value),
                    }
                }
                "time_us" if number.is_some() => entry.time_us = number,
                "frames" => entry.frames = Some(pair[1]),
                "stream" | "cpp_frames" | "compile_context" | "user_metadata" => {}
                _ => return false,
            }
        }
        if entry.action == Id::MAX {
            return false;
        }
        // The dict's node becomes the entry (a memo may refer to it); the dicts table keeps an
        // empty slot, which costs no heap.
        let mut folded = Folded {
            action: entry.action,
            present: 0,
            numbers: [0; 3],
            frames: entry.frames.unwrap_or(Id::MAX),
        };
        let numbers = [
            entry.addr,
            entry.size,
            entry.time_us.map(|time| time as u64),
            entry.device_free,
        ];
        for (which, number) in numbers.into_iter().enumerate() {
            if let Some(number) = number {
                folded.present |= 1 << which;
                match folded.numbers.get_mut(which) {
                    Some(slot) => *slot = number,
                    None => {
                        self.arena
                            .device_free
                            .insert(self.arena.entries.len() as u32, number);
                    }
                }
            }
        }
        grow(&mut self.arena.entries);
        self.arena.entries.push(folded);
        self.held = self.held.saturating_add(FOLDED_BYTES);
        self.arena.nodes[dict as usize] = Node::Entry(self.arena.entries.len() as u32 - 1);
        if at as usize + 1 == self.arena.dicts.len() {
            self.arena.dicts.pop();
            self.held = self.held.saturating_sub(CONTAINER_BYTES);
        }
        let mut numbers: Vec<Id> = values
            .chunks(2)
            .map(|pair| pair[1])
            .filter(|&value| matches!(self.arena.nodes[value as usize], Node::Int(_)))
            .collect();
        numbers.sort_unstable();
        if let Some(&first) = numbers.first() {
            let tail = numbers.len() == self.arena.nodes.len() - first as usize
                && numbers.windows(2).all(|pair| pair[1] == pair[0] + 1);
            if tail && self.memo_high.is_none_or(|high| high < first) && first > dict {
                let dropped = self.arena.nodes.len() - first as usize;
                self.arena.nodes.truncate(first as usize);
                self.held = self.held.saturating_sub(dropped * NODE_BYTES);
            }
        }
        true
    }
}
