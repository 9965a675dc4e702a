//! The dump format v1: the validated model, its parser and checks, its writer, and the holes and
//! figures derived from a memory. Reading files, folders and compressed streams is the import
//! room's ([`crate::import::input`]); this module sees only bytes. docs/FORMAT.md is the contract
//! this module implements.

pub mod figures;
pub mod json;
pub mod model;
pub mod parse;
pub mod write;

use xxhash_rust::xxh3::Xxh3;

pub use figures::MemoryFigures;
pub use model::*;
pub use parse::{parse_document, parse_dump, Options, FORMAT_VERSION, MAX_STRING_BYTES};

/// A validated dump with everything the importer stores beside it, computed off the writer's thread.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub dump: Dump,
    /// Per memory, in the order of `dump.memories`: its holes, sorted by offset (listed or derived).
    pub holes: Vec<Vec<Range>>,
    /// Per memory: its derived figures.
    pub figures: Vec<MemoryFigures>,
    /// Per memory: the positions of its allocations in the order of their uids' 64-bit patterns
    /// as signed integers (the order the database keys them in).
    pub by_uid: Vec<Vec<u32>>,
    /// A digest of the dump's content (not its bytes): the same dump written with or without
    /// interned strings, compressed or not, with its memories, allocations, holes or objects in
    /// another order, gets the same digest.
    pub digest: [u8; 16],
}

/// Derive holes, figures and the content digest of a validated dump.
pub fn prepare(dump: Dump) -> Prepared {
    let mut all_holes = Vec::with_capacity(dump.memories.len());
    let mut memory_figures = Vec::with_capacity(dump.memories.len());
    for memory in &dump.memories {
        let holes = figures::holes(memory);
        memory_figures.push(figures::figures(memory, &holes));
        all_holes.push(holes);
    }
    let by_uid = dump
        .memories
        .iter()
        .map(|memory| {
            let mut order: Vec<u32> = (0..memory.allocations.len() as u32).collect();
            order.sort_unstable_by_key(|&index| memory.allocations[index as usize].uid as i64);
            order
        })
        .collect();
    let digest = content_digest(&dump);
    Prepared {
        dump,
        holes: all_holes,
        figures: memory_figures,
        by_uid,
        digest,
    }
}

/// The content digest of a dump: XXH3-128 over its content in a canonical order, every string by
/// its text (so interning does not matter). Memories are taken by id, objects by id, allocations by
/// (offset, size, uid) as the parser sorts them, fields by (id, object, size); failed requests keep
/// their order, which the database stores. Each item is packed into a buffer and hashed at once.
pub fn content_digest(dump: &Dump) -> [u8; 16] {
    let mut hasher = Xxh3::new();
    let mut packed = Packed(Vec::with_capacity(256));
    let text = |sym: Sym| dump.text(sym);
    let optional = |sym: Option<Sym>| sym.map(text);
    let run = &dump.run;
    let snapshot = &dump.snapshot;
    packed
        .number(dump.version)
        .text(optional(dump.producer))
        .text(Some(&run.id))
        .number(run.node);
    packed
        .number(run.node_count)
        .text(run.host.as_deref())
        .number(run.pid);
    packed
        .number(snapshot.seq)
        .number(snapshot.time_ns)
        .text(snapshot.wall_time.as_deref());
    packed
        .text(Some(snapshot.reason.as_str()))
        .text(optional(snapshot.note));
    packed.flush(&mut hasher);
    let mut objects: Vec<&Object> = dump.objects.iter().collect();
    objects.sort_by_key(|object| text(object.id));
    packed.number(objects.len() as u64).flush(&mut hasher);
    for object in objects {
        packed
            .text(Some(text(object.id)))
            .text(optional(object.kind))
            .text(optional(object.name))
            .text(object.shape.as_deref());
        packed
            .text(optional(object.dtype))
            .text(optional(object.transform))
            .text(optional(object.partition));
        packed
            .text(optional(object.provenance))
            .text(object.attrs.as_deref())
            .flush(&mut hasher);
    }
    let frame_digests: Vec<[u64; 2]> = dump
        .frames
        .iter()
        .map(|frame| {
            let mut one = Packed(Vec::new());
            one.text(Some(text(frame.file)))
                .number(frame.line)
                .text(optional(frame.name));
            let digest = xxhash_rust::xxh3::xxh3_128(&one.0);
            [digest as u64, (digest >> 64) as u64]
        })
        .collect();
    let mut memories: Vec<&Memory> = dump.memories.iter().collect();
    memories.sort_by_key(|memory| memory.id);
    packed.number(memories.len() as u64).flush(&mut hasher);
    for memory in memories {
        packed
            .number(memory.id)
            .text(Some(text(memory.kind)))
            .text(optional(memory.name))
            .number(memory.capacity);
        packed
            .number(memory.alignment)
            .number(memory.allocations.len() as u64)
            .flush(&mut hasher);
        for a in &memory.allocations {
            packed
                .number(a.uid)
                .number(a.handle())
                .text(Some(text(a.kind)))
                .text(Some(a.state.as_str()))
                .number(a.offset);
            packed
                .number(a.size)
                .number(a.alignment())
                .number(a.created_ns())
                .text(optional(a.provenance))
                .text(optional(a.label));
            packed.number(a.gc_priority()).text(a.attrs());
            let mut fields: Vec<(i64, &str, Option<u64>)> = a
                .fields()
                .iter()
                .map(|field| (field.id, text(field.object), field.size))
                .collect();
            fields.sort_unstable();
            packed.number(fields.len() as u64);
            for (id, object, size) in fields {
                packed.number(id).text(Some(object)).number(size);
            }
            // By its frames' texts (interning does not matter), each frame by its own digest
            // (a long file name in a deep stack is hashed once), only when given.
            if let Some(stack) = a.stack().and_then(|stack| dump.stacks.get(stack as usize)) {
                packed.text(Some("stack")).number(stack.len() as u64);
                for &frame in stack {
                    let [low, high] = frame_digests.get(frame as usize).copied().unwrap_or([0, 0]);
                    packed.number(low).number(high);
                }
            }
            packed.flush(&mut hasher);
        }
        match &memory.listed_holes {
            Some(holes) => {
                packed.number(holes.len() as u64);
                for hole in holes {
                    packed.number(hole.offset).number(hole.size);
                }
            }
            None => {
                packed.text(None);
            }
        }
        packed.number(memory.failed_requests.len() as u64);
        for request in &memory.failed_requests {
            packed
                .number(request.size)
                .number(request.alignment)
                .text(optional(request.kind));
            packed
                .text(optional(request.provenance))
                .number(request.time_ns)
                .text(optional(request.note));
            if let Some(device_free) = request.device_free {
                packed.text(Some("device_free")).number(device_free);
            }
        }
        // Only when set, so digests of dumps that know everything stay as they were.
        if let Some(unknown) = memory.unknown.text() {
            packed.text(Some("unknown")).text(Some(&unknown));
        }
        if let Some(device_free) = memory.device_free {
            packed.text(Some("device_free")).number(device_free);
        }
        if !memory.segments.is_empty() {
            packed
                .text(Some("segments"))
                .number(memory.segments.len() as u64);
            for segment in &memory.segments {
                packed
                    .number(segment.offset)
                    .number(segment.size)
                    .number(segment.address)
                    .text(optional(segment.pool))
                    .number(segment.stream)
                    .number(u64::from(segment.expandable));
            }
        }
        packed.flush(&mut hasher);
    }
    hasher.digest128().to_le_bytes()
}

/// An unambiguous byte encoding of values, hashed in one call: each value is tagged (absent or
/// present) and texts carry their length.
struct Packed(Vec<u8>);

/// A value [`Packed`] can encode.
trait PackedNumber {
    fn bits(self) -> Option<u64>;
}
impl PackedNumber for u64 {
    fn bits(self) -> Option<u64> {
        Some(self)
    }
}
impl PackedNumber for i64 {
    fn bits(self) -> Option<u64> {
        Some(self as u64)
    }
}
impl PackedNumber for u32 {
    fn bits(self) -> Option<u64> {
        Some(u64::from(self))
    }
}
impl<T: PackedNumber> PackedNumber for Option<T> {
    fn bits(self) -> Option<u64> {
        self.and_then(PackedNumber::bits)
    }
}

impl Packed {
    fn number(&mut self, value: impl PackedNumber) -> &mut Self {
        match value.bits() {
            Some(bits) => {
                self.0.push(1);
                self.0.extend_from_slice(&bits.to_le_bytes());
            }
            None => self.0.push(0),
        }
        self
    }

    fn text(&mut self, value: Option<&str>) -> &mut Self {
        match value {
            Some(text) => {
                self.0.push(2);
                self.0.extend_from_slice(&(text.len() as u64).to_le_bytes());
                self.0.extend_from_slice(text.as_bytes());
            }
            None => self.0.push(0),
        }
        self
    }

    fn flush(&mut self, hasher: &mut Xxh3) {
        hasher.update(&self.0);
        self.0.clear();
    }
}
