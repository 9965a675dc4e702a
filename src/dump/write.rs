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
#[derive(Debug, Clone, Serialize)]
pub struct Dump {
    pub format: &'static str,
    pub version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer: Option<Producer>,
    pub run: Run,
    pub snapshot: Snapshot,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<Object>,
    pub memories: Vec<Memory>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub strings: Vec<String>,
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
        }
    }

    /// The dump as JSON text.
    pub fn to_json(&self) -> String {
        // Serializing these types cannot fail: every key is a string, every number finite or
        // written as given.
        serde_json::to_string(self).unwrap_or_default()
    }
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

#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    /// Hex, with or without `0x`.
    pub id: String,
    pub kind: Text,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<Text>,
    pub capacity: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alignment: Option<u64>,
    /// What the producer does not know (FORMAT.md, "What a dump does not know").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<&'static str>,
    pub allocations: Vec<Allocation>,
    /// The allocator's free list, when the producer has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holes: Option<Vec<Range>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_requests: Vec<FailedRequest>,
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
            allocations: Vec::new(),
            holes: None,
            failed_requests: Vec::new(),
        }
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

    /// What is written reads back: a dump with every kind of field through the one parser.
    #[test]
    fn a_written_dump_reads_back() {
        let mut memory = Memory::new("1e00000000000003".into(), "GPU_FB_MEM".into(), 4096);
        memory.unknown = vec!["placement"];
        let mut allocation = Allocation::new("0x1".into(), Text::Index(0), "valid", 0, 1024);
        allocation.attrs.insert("store", Value::from("x"));
        memory.allocations.push(allocation);
        memory.failed_requests.push(FailedRequest {
            size: 4000,
            device_free: Some(12),
            ..FailedRequest::default()
        });
        let run = Run {
            id: "r".into(),
            node: 0,
            node_count: None,
            host: None,
            pid: None,
        };
        let snapshot = Snapshot {
            seq: 0,
            time_ns: 5,
            wall_time: None,
            reason: "oom".into(),
            note: Some("n".into()),
        };
        let mut dump = Dump::new(run, snapshot, vec![memory]);
        dump.strings = vec!["instance".into()];
        let text = dump.to_json();
        let parsed = crate::dump::parse::parse_dump(text.as_bytes(), "written", Default::default())
            .unwrap_or_else(|error| panic!("{error}: {text}"));
        let memory = &parsed.memories[0];
        assert_eq!(parsed.text(memory.allocations[0].kind), "instance");
        assert_eq!(memory.failed_requests[0].device_free, Some(12));
        assert!(memory.unknown.placement && !memory.unknown.capacity);
    }
}
