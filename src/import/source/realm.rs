//! Realm's range allocator status, and Legion's default mapper's failed allocation.
//!
//! The status is what `BasicRangeAllocator::dump_allocator_status` writes to stderr (legion
//! `runtime/realm/mem_impl.inl`) in a debug build, without a log prefix:
//!
//! ```text
//! ordered_range_idx:I first:F last:L size:S gap:G prev_free:.. next_free:.. prev:.. next:..
//! allocated_range_idx:I first:F last:L prev:.. next:.. prev_free:.. next_free:.. range_size:S total:T
//! free_range_idx:I first:F last:L prev:.. next:.. size:S gap:G
//! %%Stats%% total_size:T total_used_size:U largest_used_blocksize:.. total_free_size:.. ...
//! ```
//!
//! Fields are read by name, so both line forms it has had (`size:` or `range_size:` on allocated
//! ranges) read alike; the printed `gap` is ignored (it wraps around in the source). A block is its
//! lines up to `%%Stats%%`. The block does not name its memory: the default mapper's line after it
//! does (legion `runtime/mappers/default_mapper.cc`, logger `default_mapper`):
//!
//! ```text
//! Default mapper failed allocation of size %zd bytes for region  requirement %d of task %s (UID %lld) in memory IDFMT (%s) for processor IDFMT (%s). ...
//! ```
//!
//! (also `for region requirement of inline mapping in task` and `of partition in task`; releases
//! before 20.06 print no kinds). Its memory id (hex), the kind in parentheses after it, the node
//! and time of its prefix, and its size as a failed request make the snapshot (reason `oom`):
//! capacity `total_size`, the allocated ranges as valid allocations (uids made up from the memory
//! and offset, so stable from one block to the next), the free ranges as listed holes. The mapper's
//! line without a status before it is a snapshot of its own that knows the memory, its kind and
//! the request only: capacity and allocations unknown (format v1's `unknown`). A block no line
//! names keeps memory id 0 and kind `unknown`, said in its note.

use crate::dump::write;

use super::log::{self, LogLine};
use super::{grouped_number, id_text, Found, Kind, LineReader, Source};
use crate::dump::parse::parse_id_text;
use crate::error::{Error, Result};

const STATS: &str = "%%Stats%%";
const DEFAULT_MAPPER: &str = "Default mapper failed allocation of size ";

pub struct Realm;

impl Source for Realm {
    fn kind(&self) -> Kind {
        Kind::RealmAllocator
    }
    fn name(&self) -> &'static str {
        "realm-allocator"
    }
    fn described(&self) -> &'static str {
        "a Realm allocator status or Legion default mapper failure (no \"%%Stats%%\" or \"Default mapper failed allocation\" line)"
    }
    fn line_reader(&self) -> Option<Box<dyn LineReader>> {
        Some(Box::<Reader>::default())
    }
}

/// A `name:value` field of a status line, from its marker on: `None` when it is not there, an
/// error naming it when its value is no 64-bit number.
fn field(text: &str, name: &str) -> std::result::Result<Option<u64>, String> {
    let Some(value) = text
        .split_whitespace()
        .find_map(|word| word.strip_prefix(name)?.strip_prefix(':'))
    else {
        return Ok(None);
    };
    match grouped_number(value) {
        Some(number) => Ok(Some(number)),
        None if !value.is_empty()
            && value
                .bytes()
                .all(|byte| byte.is_ascii_digit() || byte == b',') =>
        {
            Err(format!("{name} {value:?} is past 2^64"))
        }
        None => Err(format!("{name} {value:?} is not a number")),
    }
}

#[derive(Debug, Default)]
struct Block {
    line: usize,
    allocated: Vec<(u64, u64)>,
    free: Vec<(u64, u64)>,
    total: Option<u64>,
}

/// What the default mapper's line (or, for a status, another line naming `in memory HEX`) says.
#[derive(Debug, Clone)]
struct Named {
    memory: u64,
    kind: Option<String>,
    node: i64,
    time_ns: i64,
    size: Option<u64>,
    asked: Option<String>,
}

/// The id after `in memory ` and the kind in parentheses after it.
fn in_memory(message: &str) -> Option<(u64, Option<String>, usize)> {
    let at = message.find("in memory ")? + "in memory ".len();
    let rest = &message[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_hexdigit() || c == 'x' || c == 'X'))
        .unwrap_or(rest.len());
    let memory = parse_id_text(&rest[..end])?;
    let kind = rest[end..]
        .strip_prefix(" (")
        .and_then(|kind| kind.split_once(')'))
        .map(|(kind, _)| kind.trim().to_string())
        .filter(|kind| !kind.is_empty() && !kind.contains(' '));
    Some((memory, kind, at))
}

fn named(line: &LogLine) -> Option<Named> {
    let message = line.message;
    let (memory, kind, at) = in_memory(message)?;
    let (size, asked) = match message.find(DEFAULT_MAPPER) {
        Some(start) => {
            let rest = &message[start + DEFAULT_MAPPER.len()..];
            let size = rest.split_whitespace().next().and_then(grouped_number);
            // `for region  requirement 1 of task NAME (UID U)`, up to ` in memory`.
            let asked = rest
                .split_once(" bytes ")
                .map(|(_, asked)| asked)
                .and_then(|asked| asked.get(..asked.find(" in memory ")?))
                .map(|asked| asked.trim().trim_start_matches("for ").replace("  ", " "));
            (size, asked)
        }
        None => (None, None),
    };
    let _ = at;
    Some(Named {
        memory,
        kind,
        node: line.node.unwrap_or(0),
        time_ns: log::time_ns(line.seconds),
        size,
        asked,
    })
}

/// A made-up uid for an allocated range, the same for the same memory and offset in every block.
fn uid(memory: u64, first: u64) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&memory.to_le_bytes());
    bytes[8..].copy_from_slice(&first.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

/// Blocks being read: the open one, the last one closed and not yet named, what was found.
#[derive(Default)]
struct Reader {
    block: Block,
    waiting: Option<Block>,
    found: Vec<Found>,
}

impl Reader {
    /// The snapshot of a closed block, named by a line or not.
    fn block_done(&mut self, block: Block, named: Option<&Named>) {
        let mut notes = vec!["Realm allocator status".to_string()];
        let (memory, kind, node, time_ns, size) = match named {
            Some(named) => (
                named.memory,
                named.kind.clone(),
                named.node,
                named.time_ns,
                named.size,
            ),
            None => {
                notes.push("no later line names the memory: memory id 0 stands for it".to_string());
                (0, None, 0, 0, None)
            }
        };
        let end_of = |ranges: &[(u64, u64)]| ranges.iter().map(|range| range.1).max().unwrap_or(0);
        let capacity = block
            .total
            .filter(|&total| total > 0)
            .unwrap_or_else(|| end_of(&block.allocated).max(end_of(&block.free)).max(1));
        let allocations: write::Allocations = block
            .allocated
            .iter()
            .map(|&(first, last)| {
                write::Allocation::new(
                    id_text(uid(memory, first)),
                    "instance".into(),
                    "valid",
                    first,
                    last.saturating_sub(first),
                )
            })
            .collect();
        let holes: Vec<_> = block
            .free
            .iter()
            .map(|&(first, last)| write::Range {
                offset: first,
                size: last.saturating_sub(first),
            })
            .collect();
        let kind = kind.unwrap_or_else(|| "unknown".to_string());
        let mut value = write::Memory::new(id_text(memory), kind.into(), capacity);
        value.allocations = allocations;
        value.holes = Some(holes);
        value
            .failed_requests
            .extend(named.and_then(|named| request(named, size)));
        self.found.push(Found {
            calls: Default::default(),
            run: None,
            wall_time: None,
            line: block.line,
            node,
            time_ns,
            reason: "oom",
            note: Some(notes.join("; ")),
            memories: vec![value],
            strings: Vec::new(),
        });
    }

    /// The default mapper's line with no status before it: the memory, its kind, the request.
    fn mapper_alone(&mut self, number: usize, named: &Named) {
        let kind = named.kind.clone().unwrap_or_else(|| "unknown".to_string());
        let mut value = write::Memory::new(id_text(named.memory), kind.into(), 1);
        value.unknown = vec!["capacity", "allocations"];
        value.failed_requests.extend(request(named, named.size));
        self.found.push(Found {
            calls: Default::default(),
            run: None,
            wall_time: None,
            line: number,
            node: named.node,
            time_ns: named.time_ns,
            reason: "oom",
            note: Some("Legion default mapper's failed allocation: the memory's capacity and contents are not printed".to_string()),
            memories: vec![value],
            strings: Vec::new(),
        });
    }
}

fn request(named: &Named, size: Option<u64>) -> Option<write::FailedRequest> {
    let size = size.filter(|&size| size > 0)?;
    Some(write::FailedRequest {
        size,
        time_ns: Some(named.time_ns),
        note: named.asked.clone().map(write::Text::from),
        ..write::FailedRequest::default()
    })
}

impl LineReader for Reader {
    fn line(&mut self, number: usize, line: &LogLine, display: &str) -> Result<()> {
        let message = line.message;
        let place = |what: String| {
            Error::whole_input(
                format!("{display}:{number}"),
                format!("a Realm status line's {what}"),
            )
        };
        if let Some(start) = message.find(DEFAULT_MAPPER) {
            let word = message[start + DEFAULT_MAPPER.len()..]
                .split_whitespace()
                .next()
                .unwrap_or("");
            if word.starts_with(|c: char| c.is_ascii_digit()) && grouped_number(word).is_none() {
                return Err(Error::whole_input(
                    format!("{display}:{number}"),
                    format!("the default mapper's request size {word:?} is no 64-bit number"),
                ));
            }
        }
        if message.contains(DEFAULT_MAPPER)
            || (self.waiting.is_some() && message.contains("in memory "))
        {
            if let Some(named) = named(line) {
                match self.waiting.take() {
                    Some(block) => self.block_done(block, Some(&named)),
                    None if message.contains(DEFAULT_MAPPER) => self.mapper_alone(number, &named),
                    None => {}
                }
                return Ok(());
            }
        }
        if let Some(at) = message.find(STATS) {
            self.block.total = field(&message[at..], "total_size").map_err(place)?;
            let done = std::mem::take(&mut self.block);
            if done.line != 0 {
                if let Some(waiting) = self.waiting.replace(done) {
                    self.block_done(waiting, None);
                }
            }
            return Ok(());
        }
        let range = |marker: &str| -> Result<Option<(u64, u64)>> {
            let Some(at) = message.find(marker) else {
                return Ok(None);
            };
            let rest = &message[at..];
            let first = field(rest, "first").map_err(place)?;
            let last = field(rest, "last").map_err(place)?;
            Ok(first.zip(last))
        };
        let found = if let Some(found) = range("allocated_range_idx:")? {
            Some((found, true))
        } else {
            range("free_range_idx:")?.map(|found| (found, false))
        };
        if let Some(((first, last), allocated)) = found {
            if self.block.line == 0 {
                self.block.line = number;
            }
            if last < first {
                return Err(Error::whole_input(
                    format!("{display}:{number}"),
                    format!("a range from {first} to {last} ends before it starts"),
                ));
            }
            let list = if allocated {
                &mut self.block.allocated
            } else {
                &mut self.block.free
            };
            if last > first {
                list.push((first, last));
            }
        } else if message.contains("ordered_range_idx:") && self.block.line == 0 {
            self.block.line = number;
        }
        Ok(())
    }

    fn markers(&self) -> Option<&'static [&'static str]> {
        const IDLE: &[&str] = &[
            DEFAULT_MAPPER,
            STATS,
            "allocated_range_idx:",
            "free_range_idx:",
            "ordered_range_idx:",
        ];
        const WAITING: &[&str] = &[
            DEFAULT_MAPPER,
            STATS,
            "allocated_range_idx:",
            "free_range_idx:",
            "ordered_range_idx:",
            "in memory ",
        ];
        Some(if self.waiting.is_some() {
            WAITING
        } else {
            IDLE
        })
    }

    /// A status block still waiting for the mapper's line that names its memory.
    fn open_at_end(&self) -> bool {
        self.waiting.is_some()
    }

    fn finish(mut self: Box<Self>, _display: &str) -> Result<Vec<Found>> {
        if let Some(waiting) = self.waiting.take() {
            self.block_done(waiting, None);
        }
        Ok(self.found)
    }
}
