//! Format v1 as a producer writes it: typed structs that serialize to a dump, shared by every
//! source that turns foreign output into dumps and by the simulator, so that no one builds dump
//! JSON by hand. Optional fields left `None` (or empty) are not written; names and kinds are
//! [`Text`], a string or an index into the dump's `strings` table. The reader
//! ([`super::parse`]) is the one judge of what is valid: this only spells it.

use serde::Serialize;
use serde_json::Value;

/// A string field: the text, or its index in `strings` (format v1's interning).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Text {
    Str(String),
    Index(usize),
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text::Str(text.to_string())
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text::Str(text)
    }
}

/// One dump.
#[derive(Debug, Clone)]
pub struct Dump {
    pub format: &'static str,
    pub version: u32,
    pub producer: Option<Producer>,
    pub run: Run,
    pub snapshot: Snapshot,
    pub objects: Vec<Object>,
    pub memories: Vec<Memory>,
    pub strings: Vec<String>,
    /// Source locations (FORMAT.md, `frames`).
    pub frames: Vec<Frame>,
    /// Call stacks: indices into `frames`, innermost first.
    pub stacks: Vec<Vec<usize>>,
}

/// One source location of a call stack.
#[derive(Debug, Clone, Serialize)]
pub struct Frame {
    pub file: Text,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<Text>,
}

/// The members of a dump before `memories`, in the order a dump is written.
#[derive(Serialize)]
struct DumpHead<'a> {
    format: &'static str,
    version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    producer: &'a Option<Producer>,
    run: &'a Run,
    snapshot: &'a Snapshot,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    objects: &'a Vec<Object>,
}

/// The members after `memories`.
#[derive(Serialize)]
struct DumpTail<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    strings: &'a Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    frames: &'a Vec<Frame>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    stacks: &'a Vec<Vec<usize>>,
}

impl Dump {
    /// A dump of `memories` at one snapshot of one node of a run.
    pub fn new(run: Run, snapshot: Snapshot, memories: Vec<Memory>) -> Dump {
        Dump {
            format: "memstate-dump",
            version: 1,
            producer: None,
            run,
            snapshot,
            objects: Vec::new(),
            memories,
            strings: Vec::new(),
            frames: Vec::new(),
            stacks: Vec::new(),
        }
    }

    /// The dump as JSON text, its memories' allocations moved into it (and freed) one chunk at
    /// a time: the text and a second copy of the allocations are never both held whole.
    pub fn into_json(self) -> Vec<u8> {
        let head = object_text(&DumpHead {
            format: self.format,
            version: self.version,
            producer: &self.producer,
            run: &self.run,
            snapshot: &self.snapshot,
            objects: &self.objects,
        });
        let tail = object_text(&DumpTail {
            strings: &self.strings,
            frames: &self.frames,
            stacks: &self.stacks,
        });
        let mut memories: Vec<(Vec<u8>, Allocations, Vec<u8>)> = Vec::new();
        for memory in self.memories {
            let head = object_text(&MemoryHead {
                id: &memory.id,
                kind: &memory.kind,
                name: &memory.name,
                capacity: memory.capacity,
                alignment: memory.alignment,
                unknown: &memory.unknown,
            });
            let tail = object_text(&MemoryTail {
                holes: &memory.holes,
                failed_requests: &memory.failed_requests,
                segments: &memory.segments,
                device_free: memory.device_free,
            });
            memories.push((head, memory.allocations, tail));
        }
        let length = head.len()
            + tail.len()
            + 16
            + memories
                .iter()
                .map(|(head, allocations, tail)| {
                    head.len() + allocations.text_len() + tail.len() + 20
                })
                .sum::<usize>();
        let mut out = Vec::with_capacity(length);
        open_object(&mut out, &head, b"\"memories\":[");
        for (index, (head, allocations, tail)) in memories.into_iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            open_object(&mut out, &head, b"\"allocations\":[");
            allocations.move_into(&mut out);
            out.push(b']');
            close_object(&mut out, &tail);
        }
        out.push(b']');
        close_object(&mut out, &tail);
        out
    }
}

/// `value` as a JSON object's text. Serializing these types cannot fail: every key is a
/// string, every number finite or written as given.
fn object_text<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec())
}

/// Append `object` (`{...}`) left open, then `member`: the start of one more member, written
/// by the caller.
fn open_object(out: &mut Vec<u8>, object: &[u8], member: &[u8]) {
    let open = object.strip_suffix(b"}").unwrap_or(b"{");
    out.extend_from_slice(open);
    if open.len() > 1 {
        out.push(b',');
    }
    out.extend_from_slice(member);
}

/// Close an object left open by [`open_object`] with the members of `tail` (`{...}`).
fn close_object(out: &mut Vec<u8>, tail: &[u8]) {
    let members = tail
        .strip_prefix(b"{")
        .and_then(|rest| rest.strip_suffix(b"}"))
        .unwrap_or(b"");
    if !members.is_empty() {
        out.push(b',');
        out.extend_from_slice(members);
    }
    out.push(b'}');
}

#[derive(Debug, Clone, Serialize)]
pub struct Producer {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub id: String,
    pub node: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub seq: i64,
    pub time_ns: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_time: Option<String>,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<Text>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Object {
    pub id: Text,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtype: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Text>,
}

#[derive(Debug, Clone)]
pub struct Memory {
    /// Hex, with or without `0x`.
    pub id: String,
    pub kind: Text,
    pub name: Option<Text>,
    pub capacity: u64,
    pub alignment: Option<u64>,
    /// What the producer does not know (FORMAT.md, "What a dump does not know").
    pub unknown: Vec<&'static str>,
    pub allocations: Allocations,
    /// The allocator's free list, when the producer has it.
    pub holes: Option<Vec<Range>>,
    pub failed_requests: Vec<FailedRequest>,
    /// A caching allocator's segments, the level inside the memory (FORMAT.md, `segments`).
    pub segments: Vec<Segment>,
    /// What the device had free outside every allocator.
    pub device_free: Option<u64>,
}

/// One segment of a memory (FORMAT.md, `memories[].segments[]`).
#[derive(Debug, Clone, Serialize)]
pub struct Segment {
    pub offset: u64,
    pub size: u64,
    /// Hex, with `0x`: where the segment lies on the device.
    pub address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<i64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub expandable: bool,
}

/// The members of a memory before `allocations`, in the order a dump is written.
#[derive(Serialize)]
struct MemoryHead<'a> {
    id: &'a String,
    kind: &'a Text,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: &'a Option<Text>,
    capacity: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    alignment: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unknown: &'a Vec<&'static str>,
}

/// The members after `allocations`.
#[derive(Serialize)]
struct MemoryTail<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    holes: &'a Option<Vec<Range>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    failed_requests: &'a Vec<FailedRequest>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    segments: &'a Vec<Segment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_free: Option<u64>,
}

impl Memory {
    /// A memory with nothing optional said.
    pub fn new(id: String, kind: Text, capacity: u64) -> Memory {
        Memory {
            id,
            kind,
            name: None,
            capacity,
            alignment: None,
            unknown: Vec::new(),
            allocations: Allocations::default(),
            holes: None,
            failed_requests: Vec::new(),
            segments: Vec::new(),
            device_free: None,
        }
    }
}

/// A memory's allocations, each written as JSON when it is pushed. A source that turns a
/// million foreign instances into a dump then holds the dump's text (about 230 bytes an
/// allocation), not also a million structs (about 670 bytes each with their strings): a Legate
/// report of 1M instances peaked at 1.1 GB when the structs were kept until the dump was written.
/// The text is kept in chunks of at most [`CHUNK`] bytes, each given back as it is moved into the
/// dump's text.
#[derive(Debug, Clone)]
pub struct Allocations {
    chunks: Vec<Vec<u8>>,
    count: usize,
    scratch: Vec<u8>,
    /// [`CHUNK`], but in tests.
    chunk: usize,
}

impl Default for Allocations {
    fn default() -> Self {
        Allocations {
            chunks: Vec::new(),
            count: 0,
            scratch: Vec::new(),
            chunk: CHUNK,
        }
    }
}

/// Large enough that a chunk is its own mapping, given back to the system when freed (the
/// binary fixes glibc's mmap threshold at 4 MiB, and 32 MiB is past the largest it would pick
/// itself), small enough that one more chunk is little beside the text.
const CHUNK: usize = 32 << 20;

impl Allocations {
    /// Write `allocation` after the others.
    pub fn push(&mut self, allocation: &Allocation) {
        self.scratch.clear();
        if self.count > 0 {
            self.scratch.push(b',');
        }
        if serde_json::to_writer(&mut self.scratch, allocation).is_err() {
            // Cannot happen (see `object_text`); an allocation is whole or absent.
            return;
        }
        self.count += 1;
        let mut text = self.scratch.as_slice();
        while !text.is_empty() {
            let room = match self.chunks.last() {
                Some(chunk) if chunk.len() < self.chunk => self.chunk - chunk.len(),
                _ => {
                    // The first chunk grows as it fills (a small memory stays small); the ones
                    // after a full one are taken whole.
                    let capacity = if self.chunks.is_empty() {
                        0
                    } else {
                        self.chunk
                    };
                    self.chunks.push(Vec::with_capacity(capacity));
                    self.chunk
                }
            };
            let (now, later) = text.split_at(room.min(text.len()));
            if let Some(chunk) = self.chunks.last_mut() {
                chunk.extend_from_slice(now);
            }
            text = later;
        }
    }

    /// How many allocations are written.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn text_len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    /// Append the allocations' text to `out`, freeing each chunk once copied.
    fn move_into(self, out: &mut Vec<u8>) {
        for chunk in self.chunks {
            out.extend_from_slice(&chunk);
        }
    }
}

impl FromIterator<Allocation> for Allocations {
    fn from_iter<I: IntoIterator<Item = Allocation>>(allocations: I) -> Self {
        let mut written = Allocations::default();
        for allocation in allocations {
            written.push(&allocation);
        }
        written
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Allocation {
    pub uid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    pub kind: Text,
    /// `valid`, `collectable`, `pending_free` or `pending_alloc`.
    pub state: &'static str,
    pub offset: u64,
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alignment: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_ns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc_priority: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Field>,
    #[serde(skip_serializing_if = "Attrs::is_empty")]
    pub attrs: Attrs,
    /// Its call stack: an index into the dump's `stacks`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<usize>,
}

/// An allocation's `attrs`: a few named values, written as a JSON object with its keys in order
/// (as a map writes them). A list, not a map: a million Legate instances with three attrs each
/// held 650 bytes apiece in a `serde_json::Map`'s tree nodes, and 150 so.
#[derive(Debug, Clone, Default)]
pub struct Attrs(Vec<(&'static str, Value)>);

impl Attrs {
    /// Set `key` (replacing a value it had).
    pub fn insert(&mut self, key: &'static str, value: Value) {
        match self.0.iter_mut().find(|(held, _)| *held == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Attrs {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut sorted: Vec<&(&'static str, Value)> = self.0.iter().collect();
        sorted.sort_by_key(|(key, _)| *key);
        let mut map = serializer.serialize_map(Some(sorted.len()))?;
        for (key, value) in sorted {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl Allocation {
    /// An allocation with nothing optional said.
    pub fn new(uid: String, kind: Text, state: &'static str, offset: u64, size: u64) -> Allocation {
        Allocation {
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
            attrs: Attrs::default(),
            stack: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Field {
    pub id: i64,
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Text>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Range {
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct FailedRequest {
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alignment: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_free: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump of one memory at seq 0 of node 0 of run `r`.
    fn dump_of(memory: Memory, time_ns: i64, reason: &str, note: Option<&str>) -> Dump {
        let run = Run {
            id: "r".into(),
            node: 0,
            node_count: None,
            host: None,
            pid: None,
        };
        let snapshot = Snapshot {
            seq: 0,
            time_ns,
            wall_time: None,
            reason: reason.into(),
            note: note.map(Text::from),
        };
        Dump::new(run, snapshot, vec![memory])
    }

    /// What is written reads back: a dump with every kind of field through the one parser.
    #[test]
    fn a_written_dump_reads_back() {
        let mut memory = Memory::new("1e00000000000003".into(), "GPU_FB_MEM".into(), 4096);
        memory.unknown = vec!["placement"];
        let mut allocation = Allocation::new("0x1".into(), Text::Index(0), "valid", 0, 1024);
        allocation.attrs.insert("store", Value::from("x"));
        memory.allocations.push(&allocation);
        memory.failed_requests.push(FailedRequest {
            size: 4000,
            device_free: Some(12),
            ..FailedRequest::default()
        });
        let mut dump = dump_of(memory, 5, "oom", Some("n"));
        dump.strings = vec!["instance".into()];
        let text = String::from_utf8(dump.into_json()).unwrap();
        let parsed = crate::dump::parse::parse_dump(text.as_bytes(), "written", Default::default())
            .unwrap_or_else(|error| panic!("{error}: {text}"));
        let memory = &parsed.memories[0];
        assert_eq!(parsed.text(memory.allocations[0].kind), "instance");
        assert_eq!(memory.failed_requests[0].device_free, Some(12));
        assert!(memory.unknown.placement && !memory.unknown.capacity);
    }

    /// Allocations cut across chunks (7 bytes here, 32 MiB in use) read back whole, and spell
    /// what serializing them as one list spells.
    #[test]
    fn allocations_across_chunks_are_the_list_they_spell() {
        let listed: Vec<Allocation> = (0..5u64)
            .map(|uid| {
                let mut allocation = Allocation::new(
                    format!("0x{uid:x}"),
                    "instance".into(),
                    "valid",
                    uid * 64,
                    64,
                );
                allocation.provenance = Some(format!("train.py:{uid}").into());
                allocation
            })
            .collect();
        let mut memory = Memory::new("1".into(), "SYSTEM_MEM".into(), 4096);
        memory.allocations.chunk = 7;
        for allocation in &listed {
            memory.allocations.push(allocation);
        }
        assert_eq!(memory.allocations.len(), 5);
        assert!(memory.allocations.chunks.len() > 5);
        memory.holes = Some(vec![Range {
            offset: 320,
            size: 3776,
        }]);
        let text = String::from_utf8(dump_of(memory, 0, "periodic", None).into_json()).unwrap();
        let list = serde_json::to_string(&listed).unwrap();
        assert!(
            text.contains(&format!("\"allocations\":{list},\"holes\"")),
            "{text}"
        );
        let parsed = crate::dump::parse::parse_dump(text.as_bytes(), "chunked", Default::default())
            .unwrap_or_else(|error| panic!("{error}: {text}"));
        let offsets: Vec<u64> = parsed.memories[0]
            .allocations
            .iter()
            .map(|a| a.offset)
            .collect();
        assert_eq!(offsets, vec![0, 64, 128, 192, 256]);
    }
}
