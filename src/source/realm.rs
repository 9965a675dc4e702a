//! Realm's range allocator status: what `BasicRangeAllocator::dump_allocator_status` writes to
//! stderr (legion `runtime/realm/mem_impl.inl`) when an allocation fails in a debug build:
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
//! lines up to `%%Stats%%`. The block does not name its memory: the memory is the first Realm
//! memory id on a later line (the default mapper's "Failed allocation of size N bytes ... in
//! memory HEX" line), and the node and time that line's prefix. One block is one snapshot (reason
//! `oom`): capacity `total_size`, the allocated ranges as valid allocations (uids made up from the
//! memory and offset, so stable from one block to the next), the free ranges as listed holes, and
//! the mapper's request, when its line gives a size, as a failed request.

use serde_json::json;

use super::log;
use super::{grouped_number, id_text, Found};
use crate::dump::parse::parse_id_text;
use crate::error::{Error, Result};

const STATS: &str = "%%Stats%%";

/// Whether a text holds a Realm allocator status.
pub fn looks_like(text: &str) -> bool {
    text.contains(STATS)
        && (text.contains("allocated_range_idx:")
            || text.contains("free_range_idx:")
            || text.contains("ordered_range_idx:"))
}

/// `name:value` fields of a status line, from its marker on.
fn field(text: &str, name: &str) -> Option<u64> {
    text.split_whitespace()
        .find_map(|word| word.strip_prefix(name)?.strip_prefix(':'))
        .and_then(grouped_number)
}

#[derive(Debug, Default)]
struct Block {
    line: usize,
    allocated: Vec<(u64, u64)>,
    free: Vec<(u64, u64)>,
    total: Option<u64>,
}

/// The memory a later line names: `in memory HEX` (also `memory HEX` or `0x...`), with its
/// line's prefix and the request's size when the line gives one.
struct Named {
    memory: u64,
    node: i64,
    time_ns: i64,
    size: Option<u64>,
}

fn named(raw: &str) -> Option<Named> {
    let line = log::parse(raw);
    let message = line.message;
    let lower = message.to_ascii_lowercase();
    let at = lower.find("in memory ").map(|at| at + "in memory ".len())?;
    let id: String = message[at..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit() || *c == 'x' || *c == 'X')
        .collect();
    let memory = parse_id_text(&id)?;
    let size = lower
        .find("allocation of size ")
        .map(|at| &message[at + "allocation of size ".len()..])
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(grouped_number);
    Some(Named {
        memory,
        node: line.node.unwrap_or(0),
        time_ns: log::time_ns(line.seconds),
        size,
    })
}

/// A made-up uid for an allocated range, the same for the same memory and offset in every block.
fn uid(memory: u64, first: u64) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&memory.to_le_bytes());
    bytes[8..].copy_from_slice(&first.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

/// Every status block of a log, in file order.
pub fn read(text: &str, display: &str) -> Result<Vec<Found>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks: Vec<(Block, usize)> = Vec::new();
    let mut block = Block::default();
    for (index, raw) in lines.iter().enumerate() {
        let message = log::parse(raw).message;
        let range = |marker: &str| -> Option<(u64, u64)> {
            let at = message.find(marker)?;
            let rest = &message[at..];
            Some((field(rest, "first")?, field(rest, "last")?))
        };
        if let Some(at) = message.find(STATS) {
            block.total = field(&message[at..], "total_size");
            let done = std::mem::take(&mut block);
            if done.line == 0 {
                continue; // stats without ranges: nothing to tell
            }
            blocks.push((done, index + 1));
            continue;
        }
        let found = if let Some(found) = range("allocated_range_idx:") {
            Some((found, true))
        } else {
            range("free_range_idx:").map(|found| (found, false))
        };
        if let Some(((first, last), allocated)) = found {
            if block.line == 0 {
                block.line = index + 1;
            }
            let list = if allocated {
                &mut block.allocated
            } else {
                &mut block.free
            };
            if last < first {
                return Err(Error::input(
                    format!("{display}:{}", index + 1),
                    "",
                    format!("a range from {first} to {last} ends before it starts"),
                ));
            }
            if last > first {
                list.push((first, last));
            }
        } else if message.contains("ordered_range_idx:") && block.line == 0 {
            block.line = index + 1;
        }
    }
    let mut found = Vec::new();
    for (position, (block, end)) in blocks.iter().enumerate() {
        // The memory: the first id on a later line, before the next block.
        let next_start = blocks
            .get(position + 1)
            .map_or(lines.len(), |(next, _)| next.line - 1);
        let named = lines[*end..next_start.max(*end)]
            .iter()
            .find_map(|raw| named(raw));
        let mut notes = vec!["Realm allocator status".to_string()];
        let (memory, node, time_ns, size) = match &named {
            Some(named) => (named.memory, named.node, named.time_ns, named.size),
            None => {
                notes.push("no later line names the memory: memory id 0 stands for it".to_string());
                (0, 0, 0, None)
            }
        };
        let end_of = |ranges: &[(u64, u64)]| ranges.iter().map(|range| range.1).max().unwrap_or(0);
        let capacity = block
            .total
            .filter(|&total| total > 0)
            .unwrap_or_else(|| end_of(&block.allocated).max(end_of(&block.free)).max(1));
        let allocations: Vec<_> = block
            .allocated
            .iter()
            .map(|&(first, last)| {
                json!({
                    "uid": id_text(uid(memory, first)),
                    "kind": "instance",
                    "state": "valid",
                    "offset": first,
                    "size": last - first,
                })
            })
            .collect();
        let holes: Vec<_> = block
            .free
            .iter()
            .map(|&(first, last)| json!({"offset": first, "size": last - first}))
            .collect();
        let mut value = json!({
            "id": id_text(memory),
            "kind": "UNKNOWN_MEM",
            "name": "a Realm memory (the allocator status does not say its kind)",
            "capacity": capacity,
            "allocations": allocations,
            "holes": holes,
        });
        if let Some(size) = size.filter(|&size| size > 0) {
            value["failed_requests"] = json!([{"size": size, "time_ns": time_ns}]);
        }
        found.push(Found {
            line: block.line,
            node,
            time_ns,
            reason: "oom",
            note: Some(notes.join("; ")),
            memories: vec![value],
        });
    }
    Ok(found)
}
