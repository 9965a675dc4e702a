//! The dump format v1: the validated model, the reader of files and streams, the checks, and the
//! holes and figures derived from a memory. docs/FORMAT.md is the contract this module implements.

pub mod figures;
pub mod json;
pub mod model;
pub mod parse;
pub mod read;

use std::hash::Hash;

use xxhash_rust::xxh3::Xxh3;

pub use figures::MemoryFigures;
pub use model::*;
pub use parse::{parse_document, parse_dump, Options, FORMAT_VERSION};

/// A validated dump with everything the importer stores beside it, computed off the writer's thread.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub dump: Dump,
    /// Per memory, in the order of `dump.memories`: its holes, sorted by offset (listed or derived).
    pub holes: Vec<Vec<Range>>,
    /// Per memory: its derived figures.
    pub figures: Vec<MemoryFigures>,
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
    let digest = content_digest(&dump);
    Prepared { dump, holes: all_holes, figures: memory_figures, digest }
}

/// The content digest of a dump: XXH3-128 over its content in a canonical order, every string by
/// its text (so interning does not matter). Memories are taken by id, objects by id, allocations by
/// (offset, size, uid) as the parser sorts them, fields by (id, object, size); failed requests keep
/// their order, which the database stores.
pub fn content_digest(dump: &Dump) -> [u8; 16] {
    let mut hasher = Xxh3::new();
    let text = |sym: Sym| dump.text(sym);
    let optional = |sym: Option<Sym>| sym.map(text);
    (dump.version, optional(dump.producer)).hash(&mut hasher);
    let run = &dump.run;
    (&run.id, run.node, run.node_count, &run.host, run.pid).hash(&mut hasher);
    let snapshot = &dump.snapshot;
    (snapshot.seq, snapshot.time_ns, &snapshot.wall_time, snapshot.reason.as_str(), optional(snapshot.note)).hash(&mut hasher);
    let mut objects: Vec<&Object> = dump.objects.iter().collect();
    objects.sort_by_key(|object| text(object.id));
    objects.len().hash(&mut hasher);
    for object in objects {
        (text(object.id), optional(object.kind), optional(object.name), &object.shape, optional(object.dtype)).hash(&mut hasher);
        (optional(object.transform), optional(object.partition), optional(object.provenance), &object.attrs).hash(&mut hasher);
    }
    let mut memories: Vec<&Memory> = dump.memories.iter().collect();
    memories.sort_by_key(|memory| memory.id);
    memories.len().hash(&mut hasher);
    for memory in memories {
        (memory.id, text(memory.kind), optional(memory.name), memory.capacity, memory.alignment).hash(&mut hasher);
        memory.allocations.len().hash(&mut hasher);
        for allocation in &memory.allocations {
            let a = allocation;
            (a.uid, a.handle, text(a.kind), a.state, a.offset, a.size, a.alignment, a.created_ns).hash(&mut hasher);
            (optional(a.provenance), optional(a.label), a.gc_priority, &a.attrs).hash(&mut hasher);
            let mut fields: Vec<(i64, &str, Option<u64>)> = a.fields.iter().map(|field| (field.id, text(field.object), field.size)).collect();
            fields.sort_unstable();
            fields.hash(&mut hasher);
        }
        memory.listed_holes.hash(&mut hasher);
        memory.failed_requests.len().hash(&mut hasher);
        for request in &memory.failed_requests {
            (request.size, request.alignment, optional(request.kind), optional(request.provenance), request.time_ns, optional(request.note)).hash(&mut hasher);
        }
    }
    hasher.digest128().to_le_bytes()
}
