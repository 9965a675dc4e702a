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
    /// Per memory, in the order of `dump.memories`: its holes (sorted by offset) as a JSON array
    /// of `[offset, size]` pairs, as the database stores them.
    pub holes_json: Vec<String>,
    /// Per memory: its derived figures.
    pub figures: Vec<MemoryFigures>,
    /// A digest of the dump's content (not its bytes): the same dump written with or without
    /// interned strings, compressed or not, gets the same digest.
    pub digest: [u8; 16],
}

/// Derive holes, figures and the content digest of a validated dump.
pub fn prepare(dump: Dump) -> Prepared {
    let mut holes_json = Vec::with_capacity(dump.memories.len());
    let mut memory_figures = Vec::with_capacity(dump.memories.len());
    for memory in &dump.memories {
        let holes = figures::holes(memory);
        memory_figures.push(figures::figures(memory, &holes));
        holes_json.push(ranges_json(&holes));
    }
    let digest = content_digest(&dump);
    Prepared { dump, holes_json, figures: memory_figures, digest }
}

/// The content digest of a dump. It feeds the model's derived `Hash` (field by field, lengths
/// first) into XXH3-128; strings are interned in order of first use, so the digest does not depend
/// on whether or how the file interned them.
pub fn content_digest(dump: &Dump) -> [u8; 16] {
    let mut hasher = Xxh3::new();
    dump.hash(&mut hasher);
    hasher.digest128().to_le_bytes()
}

/// `[[offset,size],...]` for a list of ranges.
pub fn ranges_json(ranges: &[Range]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(2 + ranges.len() * 24);
    text.push('[');
    for (index, range) in ranges.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        let _ = write!(text, "[{},{}]", range.offset, range.size);
    }
    text.push(']');
    text
}
