//! The validated, in-memory form of one dump (format v1) and of one annotations file.
//!
//! A [`Dump`] only exists once every rule of docs/FORMAT.md holds: ids are canonical `u64`s, string
//! values are resolved, sizes fit in `i64`. Strings are interned per dump into [`Dump::strings`] and
//! referred to by [`Sym`], so that the importer maps each distinct string to a database id once per
//! dump instead of once per allocation. Allocations of each memory are sorted by offset.

use std::fmt;

/// An index into the dump's own string table ([`Dump::strings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(pub u32);

/// The state of an allocation (see docs/FORMAT.md, "States").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    Valid,
    Collectable,
    PendingFree,
    PendingAlloc,
}

impl State {
    pub const ALL: [State; 4] = [
        State::Valid,
        State::Collectable,
        State::PendingFree,
        State::PendingAlloc,
    ];

    /// The name used in dumps and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Valid => "valid",
            State::Collectable => "collectable",
            State::PendingFree => "pending_free",
            State::PendingAlloc => "pending_alloc",
        }
    }

    pub fn parse(text: &str) -> Option<State> {
        State::ALL.into_iter().find(|state| state.as_str() == text)
    }

    /// The integer the database stores a state as (its views decode it with the same table).
    pub fn code(self) -> i64 {
        match self {
            State::Valid => 0,
            State::Collectable => 1,
            State::PendingFree => 2,
            State::PendingAlloc => 3,
        }
    }

    /// The state stored as `code`.
    pub fn from_code(code: i64) -> Option<State> {
        State::ALL.into_iter().find(|state| state.code() == code)
    }

    /// Whether garbage collection plus the pending releases could never free these bytes.
    pub fn blocks_reuse(self) -> bool {
        matches!(self, State::Valid | State::PendingAlloc)
    }
}

impl serde::Serialize for State {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl std::str::FromStr for State {
    type Err = String;
    fn from_str(text: &str) -> Result<State, String> {
        State::parse(text).ok_or_else(|| {
            let names: Vec<&str> = State::ALL.iter().map(|state| state.as_str()).collect();
            format!("unknown state {text:?} (states: {})", names.join(", "))
        })
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a snapshot was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Periodic,
    Oom,
    Request,
    Exit,
}

impl Reason {
    pub const ALL: [Reason; 4] = [Reason::Periodic, Reason::Oom, Reason::Request, Reason::Exit];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Periodic => "periodic",
            Reason::Oom => "oom",
            Reason::Request => "request",
            Reason::Exit => "exit",
        }
    }

    pub fn parse(text: &str) -> Option<Reason> {
        Reason::ALL
            .into_iter()
            .find(|reason| reason.as_str() == text)
    }
}

/// A half-open byte range `[offset, offset + size)` inside a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Range {
    pub offset: u64,
    pub size: u64,
}

impl Range {
    pub fn end(self) -> u64 {
        // Validation guarantees offset + size <= capacity < 2^63, so this cannot overflow.
        self.offset + self.size
    }
}

/// One dump: a point in time of all memories of one node of a run.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Dump {
    pub version: u32,
    /// The dump's strings, each once; every [`Sym`] below indexes this table.
    pub strings: Vec<String>,
    /// `name version (commit)` of the runtime that wrote it, when given.
    pub producer: Option<Sym>,
    pub run: Run,
    pub snapshot: Snapshot,
    pub objects: Vec<Object>,
    pub memories: Vec<Memory>,
    /// Source locations (format v1's `frames`), each referred to by its index.
    pub frames: Vec<Frame>,
    /// Call stacks (format v1's `stacks`): frame indices, innermost first.
    pub stacks: Vec<Vec<u32>>,
}

/// One source location of a call stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    pub file: Sym,
    pub line: Option<i64>,
    pub name: Option<Sym>,
}

impl Dump {
    /// The text of an interned string.
    pub fn text(&self, sym: Sym) -> &str {
        // Syms are only created by the parser, which pushes the string first.
        self.strings
            .get(sym.0 as usize)
            .map(String::as_str)
            .unwrap_or("")
    }

    /// Total number of allocations over all memories.
    pub fn allocation_count(&self) -> usize {
        self.memories
            .iter()
            .map(|memory| memory.allocations.len())
            .sum()
    }
}

#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Run {
    pub id: String,
    pub node: i64,
    pub node_count: Option<i64>,
    pub host: Option<String>,
    pub pid: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Snapshot {
    pub seq: i64,
    pub time_ns: i64,
    pub wall_time: Option<String>,
    pub reason: Reason,
    pub note: Option<Sym>,
}

#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Memory {
    pub id: u64,
    pub kind: Sym,
    pub name: Option<Sym>,
    pub capacity: u64,
    pub alignment: Option<u64>,
    /// Sorted by (offset, size, uid).
    pub allocations: Vec<Allocation>,
    /// The allocator's own free list, sorted by offset, when the dump lists one.
    pub listed_holes: Option<Vec<Range>>,
    pub failed_requests: Vec<FailedRequest>,
    /// What the producer did not know about this memory (format v1's `unknown`).
    pub unknown: Unknown,
    /// The allocator's segments (format v1's `segments`): a level inside the memory, sorted by
    /// offset. Empty for a memory that is not carved into segments.
    pub segments: Vec<Segment>,
    /// What the device had free outside every allocator when the snapshot was taken.
    pub device_free: Option<u64>,
}

/// A segment of a caching allocator (PyTorch's): a range of the memory the allocator obtained
/// from the device at once, at `address` on the device, placed at `offset` in the memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Segment {
    pub offset: u64,
    pub size: u64,
    pub address: u64,
    pub pool: Option<Sym>,
    pub stream: Option<i64>,
    pub expandable: bool,
}

/// What a dump says it does not know about a memory: its figures that depend on it are unknown,
/// whatever stand-in values the dump writes to stay valid.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Unknown {
    /// The capacity written is a stand-in (at least the end of the last allocation).
    pub capacity: bool,
    /// The offsets written are stand-ins: where the allocations lie is not known.
    pub placement: bool,
    /// The allocations listed may not be all the memory holds.
    pub allocations: bool,
    /// Not a name of format v1: whether the dump lists the memory's holes. Listed holes are
    /// the allocator's own free list, facts even where the capacity is unknown (a caching
    /// allocator's free blocks inside its segments, the device's size not recorded).
    pub holes_listed: bool,
}

impl Unknown {
    /// The names format v1 writes, in order.
    pub const NAMES: [&'static str; 3] = ["capacity", "placement", "allocations"];

    pub fn any(self) -> bool {
        self.capacity || self.placement || self.allocations
    }

    /// Whether the holes (and so free bytes, the largest hole, fragmentation) are known: when
    /// nothing is unknown, or only the capacity and the holes are listed.
    pub fn holes_known(self) -> bool {
        !self.placement && !self.allocations && (!self.capacity || self.holes_listed)
    }

    /// Whether the free bytes in total are known: the holes are, or the capacity and the
    /// allocations are (then the free bytes are what the allocations leave).
    pub fn free_known(self) -> bool {
        self.holes_known() || (!self.capacity && !self.allocations)
    }

    pub fn names(self) -> Vec<&'static str> {
        let flags = [self.capacity, self.placement, self.allocations];
        Self::NAMES
            .iter()
            .zip(flags)
            .filter_map(|(name, set)| set.then_some(*name))
            .collect()
    }

    /// From format v1's names; `None` for a name it does not define.
    pub fn set(&mut self, name: &str) -> Option<()> {
        match name {
            "capacity" => self.capacity = true,
            "placement" => self.placement = true,
            "allocations" => self.allocations = true,
            _ => return None,
        }
        Some(())
    }

    /// As the database stores it: the names joined by commas, `None` when all is known.
    pub fn text(self) -> Option<String> {
        self.any().then(|| self.names().join(","))
    }
}

/// One allocation, packed: a dump holds millions of them, and an import holds a few dumps at a
/// time (one being written, the next parsed), so each byte here is megabytes of its peak memory.
/// The four optional numbers share one presence byte instead of taking 16 bytes each, and the
/// rarely given fields and attributes sit behind one pointer: 88 bytes where the plain struct
/// ([`AllocationParts`], which builds one) took 160. Read the packed values with the methods.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Allocation {
    pub uid: u64,
    pub offset: u64,
    pub size: u64,
    pub kind: Sym,
    pub state: State,
    /// Which of `optional` are given: bit i for `optional[i]`.
    present: u8,
    pub provenance: Option<Sym>,
    pub label: Option<Sym>,
    /// handle, alignment, created_ns, gc_priority (the signed ones as their bit patterns); 0
    /// where absent.
    optional: [u64; 4],
    extra: Option<Box<Extra>>,
}

/// What few allocations have: client fields, free-form attributes, a call stack (PyTorch's
/// blocks: thousands in a dump, where a Legate report holds millions of instances without).
#[derive(Debug, Clone, PartialEq, Hash)]
struct Extra {
    fields: Vec<Field>,
    attrs: Option<String>,
    stack: Option<u32>,
}

const HANDLE: usize = 0;
const ALIGNMENT: usize = 1;
const CREATED_NS: usize = 2;
const GC_PRIORITY: usize = 3;

/// An allocation's every attribute, as named values: what [`Allocation`] is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocationParts {
    pub uid: u64,
    pub handle: Option<u64>,
    pub kind: Sym,
    pub state: State,
    pub offset: u64,
    pub size: u64,
    pub alignment: Option<u64>,
    pub created_ns: Option<i64>,
    pub provenance: Option<Sym>,
    pub label: Option<Sym>,
    pub gc_priority: Option<i64>,
    pub fields: Vec<Field>,
    /// Free-form attributes as canonical JSON text (keys sorted), when given.
    pub attrs: Option<String>,
    /// Its call stack: an index into the dump's `stacks`.
    pub stack: Option<u32>,
}

impl AllocationParts {
    /// An allocation with nothing optional said.
    pub fn new(uid: u64, kind: Sym, state: State, offset: u64, size: u64) -> AllocationParts {
        AllocationParts {
            uid,
            handle: None,
            kind,
            state,
            offset,
            size,
            alignment: None,
            created_ns: None,
            provenance: None,
            label: None,
            gc_priority: None,
            fields: Vec::new(),
            attrs: None,
            stack: None,
        }
    }
}

impl From<AllocationParts> for Allocation {
    fn from(parts: AllocationParts) -> Allocation {
        let mut allocation = Allocation {
            uid: parts.uid,
            offset: parts.offset,
            size: parts.size,
            kind: parts.kind,
            state: parts.state,
            present: 0,
            provenance: parts.provenance,
            label: parts.label,
            optional: [0; 4],
            extra: None,
        };
        allocation.give(HANDLE, parts.handle);
        allocation.give(ALIGNMENT, parts.alignment);
        allocation.give(CREATED_NS, parts.created_ns.map(|value| value as u64));
        allocation.give(GC_PRIORITY, parts.gc_priority.map(|value| value as u64));
        allocation.set_extra(parts.fields, parts.attrs, parts.stack);
        allocation
    }
}

impl Allocation {
    pub fn range(&self) -> Range {
        Range {
            offset: self.offset,
            size: self.size,
        }
    }

    fn get(&self, index: usize) -> Option<u64> {
        (self.present & (1 << index) != 0).then_some(self.optional[index])
    }

    /// Give the optional number `index` (of an allocation being built: absent until given).
    fn give(&mut self, index: usize, value: Option<u64>) {
        if let Some(value) = value {
            self.optional[index] = value;
            self.present |= 1 << index;
        }
    }

    fn set_extra(&mut self, fields: Vec<Field>, attrs: Option<String>, stack: Option<u32>) {
        self.extra = (!fields.is_empty() || attrs.is_some() || stack.is_some()).then(|| {
            Box::new(Extra {
                fields,
                attrs,
                stack,
            })
        });
    }

    pub fn handle(&self) -> Option<u64> {
        self.get(HANDLE)
    }

    pub fn alignment(&self) -> Option<u64> {
        self.get(ALIGNMENT)
    }

    pub fn created_ns(&self) -> Option<i64> {
        self.get(CREATED_NS).map(|value| value as i64)
    }

    pub fn gc_priority(&self) -> Option<i64> {
        self.get(GC_PRIORITY).map(|value| value as i64)
    }

    /// Its call stack, an index into the dump's `stacks`.
    pub fn stack(&self) -> Option<u32> {
        self.extra.as_deref().and_then(|extra| extra.stack)
    }

    /// The client objects the allocation's fields hold (empty when none was given).
    pub fn fields(&self) -> &[Field] {
        self.extra.as_deref().map_or(&[], |extra| &extra.fields)
    }

    /// Free-form attributes as canonical JSON text (keys sorted), when given.
    pub fn attrs(&self) -> Option<&str> {
        self.extra
            .as_deref()
            .and_then(|extra| extra.attrs.as_deref())
    }

    /// The allocation's every attribute, as named values.
    pub fn parts(&self) -> AllocationParts {
        AllocationParts {
            uid: self.uid,
            handle: self.handle(),
            kind: self.kind,
            state: self.state,
            offset: self.offset,
            size: self.size,
            alignment: self.alignment(),
            created_ns: self.created_ns(),
            provenance: self.provenance,
            label: self.label,
            gc_priority: self.gc_priority(),
            fields: self.fields().to_vec(),
            attrs: self.attrs().map(str::to_string),
            stack: self.stack(),
        }
    }
}

/// Which client object one field of an allocation holds.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Field {
    pub id: i64,
    pub size: Option<u64>,
    pub object: Sym,
}

#[derive(Debug, Clone, PartialEq, Hash)]
pub struct FailedRequest {
    pub size: u64,
    pub alignment: Option<u64>,
    pub kind: Option<Sym>,
    pub provenance: Option<Sym>,
    pub time_ns: Option<i64>,
    pub note: Option<Sym>,
    /// Bytes the device had free outside this allocator when the request failed (PyTorch's
    /// `oom` event's `device_free`).
    pub device_free: Option<u64>,
}

/// A client-level object (a Legate store, say) that allocations' fields refer to.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Object {
    pub id: Sym,
    pub kind: Option<Sym>,
    pub name: Option<Sym>,
    /// The shape as JSON text (`[300,150]`), when given.
    pub shape: Option<String>,
    pub dtype: Option<Sym>,
    pub transform: Option<Sym>,
    pub partition: Option<Sym>,
    pub provenance: Option<Sym>,
    pub attrs: Option<String>,
}

/// A side annotations file: client objects and allocation links joined to a run by `uid`.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Annotations {
    pub version: u32,
    pub strings: Vec<String>,
    pub run_id: String,
    pub objects: Vec<Object>,
    pub links: Vec<Link>,
}

/// One (allocation, field, object) link of an annotations file.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Link {
    pub uid: u64,
    pub field: Option<i64>,
    pub object: Sym,
}

/// Either kind of document a reader may meet.
#[derive(Debug, Clone)]
pub enum Document {
    Dump(Box<Dump>),
    Annotations(Box<Annotations>),
}

/// The canonical text form of an id: `0x` and 16 lowercase hex digits.
pub fn format_id(id: u64) -> String {
    format!("0x{id:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(uid: u64) -> AllocationParts {
        AllocationParts::new(uid, Sym(3), State::Collectable, 4096, 256)
    }

    #[test]
    fn an_allocation_gives_back_every_part_it_was_built_from() {
        let field = Field {
            id: -7,
            size: Some(64),
            object: Sym(9),
        };
        let cases = [
            parts(1),
            // Zero given is not zero absent; signed values keep their sign.
            AllocationParts {
                handle: Some(0),
                alignment: Some(0),
                created_ns: Some(0),
                gc_priority: Some(0),
                ..parts(2)
            },
            AllocationParts {
                handle: Some(u64::MAX),
                alignment: Some(1 << 63),
                created_ns: Some(-1),
                gc_priority: Some(i64::MIN),
                provenance: Some(Sym(0)),
                label: Some(Sym(u32::MAX)),
                ..parts(3)
            },
            AllocationParts {
                fields: vec![field.clone()],
                ..parts(4)
            },
            AllocationParts {
                attrs: Some(r#"{"a":1}"#.into()),
                ..parts(5)
            },
            AllocationParts {
                created_ns: Some(i64::MAX),
                fields: vec![field],
                attrs: Some("{}".into()),
                ..parts(6)
            },
        ];
        for case in cases {
            let allocation = Allocation::from(case.clone());
            assert_eq!(allocation.parts(), case);
            assert_eq!(allocation.handle(), case.handle);
            assert_eq!(allocation.gc_priority(), case.gc_priority);
            assert_eq!(allocation.fields(), case.fields.as_slice());
            assert_eq!(allocation.attrs(), case.attrs.as_deref());
        }
    }

    #[test]
    fn an_allocation_is_packed_into_88_bytes() {
        // Two dumps' allocations are in memory at once while importing: 200,000 a dump on the
        // scale bench's 10M-row run, where the plain struct's 160 bytes were 32 MB a dump.
        assert!(std::mem::size_of::<Allocation>() <= 88);
    }
}
