//! Sources: what memstate reads besides its own format. Each module turns one kind of input that
//! producers print today into dumps of format v1 (as JSON text), and every dump then goes through
//! the one parser and validator of [`crate::dump`], as a dump written by a runtime would: parsing
//! a foreign input and validating what it says stay apart (as atuin's importers do).
//!
//! - [`legate`]: Legate's out-of-memory report (the base mapper's `report_failed_mapping`).
//! - [`realm`]: Realm's range allocator status (`BasicRangeAllocator::dump_allocator_status`).
//! - [`torch`]: PyTorch's CUDA allocator snapshots (the pickle `_dump_snapshot` writes), read by
//!   [`pickle`], which never runs code.
//!
//! The kind is found from the content (`--source auto`), or forced. Common rules: one snapshot per
//! report or status block; the node from Realm's log prefix (0 without one); seq increasing in
//! file order per node; the run from `--run`, else the file's stem; `snapshots.source` names the
//! file and line. An input that is none of these, or not the kind forced, is refused whole.

pub mod legate;
mod log;
pub mod pickle;
pub mod realm;
pub mod torch;

use std::collections::HashMap;
use std::io::Read;

use serde_json::Value;

use crate::dump::read::{self, Input, Limits, Record};
use crate::error::{Error, Result};

/// What kind of input a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// Found from the content.
    #[default]
    Auto,
    /// memstate's own format v1 (a document or a stream).
    Memstate,
    LegateOom,
    RealmAllocator,
    TorchSnapshot,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Auto => "auto",
            Kind::Memstate => "memstate",
            Kind::LegateOom => "legate-oom",
            Kind::RealmAllocator => "realm-allocator",
            Kind::TorchSnapshot => "torch-snapshot",
        }
    }

    /// What the refusal of an input that is not of this kind says it is not.
    fn described(self) -> &'static str {
        match self {
            Kind::Auto => "a memstate dump, a Legate out-of-memory report, a Realm allocator status or a PyTorch allocator snapshot",
            Kind::Memstate => "a memstate dump",
            Kind::LegateOom => {
                "a Legate out-of-memory report (no \"Failed to allocate N bytes on memory\" line)"
            }
            Kind::RealmAllocator => {
                "a Realm allocator status (no \"allocated_range_idx:\" and \"%%Stats%%\" lines)"
            }
            Kind::TorchSnapshot => "a PyTorch allocator snapshot (not a pickle)",
        }
    }
}

/// How to read foreign inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub kind: Kind,
    /// The run of dumps whose input names none (default: the file's stem).
    pub run: Option<String>,
    /// For a PyTorch snapshot: also a rebuilt snapshot every this many trace events.
    pub every: Option<u64>,
}

/// A snapshot a source found, before its run and seq are given.
#[derive(Debug, Clone)]
pub struct Found {
    /// The line (1-based) it is told from, for `snapshots.source` and messages.
    pub line: usize,
    pub node: i64,
    pub time_ns: i64,
    pub reason: &'static str,
    pub note: Option<String>,
    /// Format v1's `memories`.
    pub memories: Vec<Value>,
}

/// The run an input's dumps belong to: `--run`, else the file's stem (`job.log` -> `job`).
fn run_of(display: &str, options: &Options) -> String {
    if let Some(run) = &options.run {
        return run.clone();
    }
    let name = std::path::Path::new(display)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.split('.').next().unwrap_or("").to_string();
    if stem.is_empty() || display == "-" {
        "stdin".to_string()
    } else {
        stem
    }
}

/// The dumps of what a source found: seq in file order per node, as format v1 text.
fn dumps(found: Vec<Found>, display: &str, options: &Options) -> Vec<Record> {
    let run = run_of(display, options);
    let mut found = found;
    found.sort_by_key(|found| found.line);
    let mut next_seq: HashMap<i64, i64> = HashMap::new();
    found
        .into_iter()
        .map(|found| {
            let seq = next_seq.entry(found.node).or_insert(0);
            let mut snapshot = serde_json::json!({
                "seq": *seq,
                "time_ns": found.time_ns,
                "reason": found.reason,
            });
            *seq += 1;
            if let Some(note) = &found.note {
                snapshot["note"] = Value::String(note.clone());
            }
            let dump = serde_json::json!({
                "format": "memstate-dump",
                "version": 1,
                "run": {"id": run, "node": found.node},
                "snapshot": snapshot,
                "memories": found.memories,
            });
            Record {
                source: format!("{display}:{}", found.line),
                text: dump.to_string().into_bytes(),
            }
        })
        .collect()
}

/// The kind a foreign input's content says it is (`None`: none known).
fn detect(bytes: &[u8]) -> Option<Kind> {
    let text = String::from_utf8_lossy(bytes);
    if torch::looks_like(bytes) {
        Some(Kind::TorchSnapshot)
    } else if realm::looks_like(&text) {
        Some(Kind::RealmAllocator)
    } else if legate::looks_like(&text) {
        Some(Kind::LegateOom)
    } else {
        None
    }
}

/// Convert a foreign input of `kind` (not memstate's own) into dumps.
fn convert(kind: Kind, bytes: &[u8], display: &str, options: &Options) -> Result<Vec<Record>> {
    let found = match kind {
        Kind::TorchSnapshot if torch::looks_like(bytes) => {
            torch::read(bytes, display, options.every)?
        }
        Kind::LegateOom => legate::read(&String::from_utf8_lossy(bytes), display)?,
        Kind::RealmAllocator => realm::read(&String::from_utf8_lossy(bytes), display)?,
        Kind::TorchSnapshot | Kind::Auto | Kind::Memstate => Vec::new(),
    };
    if found.is_empty() {
        return Err(not_of_kind(display, kind));
    }
    Ok(dumps(found, display, options))
}

fn not_of_kind(display: &str, kind: Kind) -> Error {
    Error::Read {
        file: display.to_string(),
        message: format!("not {}; nothing of it is imported", kind.described()),
    }
}

/// The records of one input, whatever its kind: memstate's own are read as they come (a stream
/// of any length), a foreign one is read whole (within `--max-dump-size`) and converted.
pub fn open(
    input: &Input,
    limits: Limits,
    options: &Options,
) -> Result<Box<dyn Iterator<Item = Result<Record>> + Send>> {
    let mut records = read::open(input, limits)?;
    let kind = match options.kind {
        Kind::Memstate => return Ok(Box::new(records)),
        // A file named as a dump (.json, .ndjson, .jsonl) is one; other names are told by content.
        Kind::Auto if input.form != read::Form::Sniff => return Ok(Box::new(records)),
        Kind::Auto => {
            let head = records.peek().map_err(|error| Error::Read {
                file: input.display.clone(),
                message: read::describe_io(&error),
            })?;
            let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
            let first = head.iter().find(|byte| !byte.is_ascii_whitespace());
            if matches!(first, None | Some(b'{') | Some(b'[')) {
                return Ok(Box::new(records));
            }
            Kind::Auto
        }
        forced => forced,
    };
    let mut bytes = Vec::new();
    let limit = limits.max_dump_size;
    records
        .reader()
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|error| Error::Read {
            file: input.display.clone(),
            message: read::describe_io(&error),
        })?;
    if bytes.len() as u64 > limit {
        return Err(read::too_large(input.display.clone(), limits));
    }
    let kind = match kind {
        Kind::Auto => detect(&bytes).ok_or_else(|| not_of_kind(&input.display, Kind::Auto))?,
        forced => forced,
    };
    let dumps = convert(kind, &bytes, &input.display, options)?;
    Ok(Box::new(dumps.into_iter().map(Ok)))
}

/// A size printed with its digits grouped or not: `1,048,576` or `1048576`.
pub(crate) fn grouped_number(text: &str) -> Option<u64> {
    let digits: String = text.chars().filter(|c| *c != ',' && *c != '\'').collect();
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// An id as format v1 writes it.
pub(crate) fn id_text(id: u64) -> String {
    format!("0x{id:016x}")
}
