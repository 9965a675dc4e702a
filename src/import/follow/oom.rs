//! What the follower says the moment an out-of-memory dump lands: each failed request with its
//! memory and a verdict from the dump's own figures, the same as `oom` gives once it is imported
//! (for a caching allocator's request, the device's figures, as [`crate::analysis::cache`] reads
//! them).

use crate::analysis::cache::{self, Cache};
use crate::analysis::Verdict;
use crate::dump;

/// The failed requests of a dump, each with its memory and what the dump's figures say of it.
pub(super) fn failures(prepared: &dump::Prepared) -> Vec<(String, u64, &'static str)> {
    let dump = &prepared.dump;
    let mut found = Vec::new();
    for (memory, figures) in dump.memories.iter().zip(&prepared.figures) {
        for request in &memory.failed_requests {
            let unknown = memory.unknown;
            let free_known = unknown.free_known();
            let cached = request
                .device_free
                .and_then(|device_free| cache_in(prepared, memory, device_free));
            let verdict = if let Some(cache) = cached {
                match cache.verdict(request.size) {
                    Verdict::Exhaustion => "exhaustion: the cache and the device together have fewer free bytes than asked for",
                    Verdict::Fragmentation => "fragmentation: enough free bytes in the cache and on the device, but no block or new segment holds it",
                    _ => "cannot tell: by the device's figures it could have been placed",
                }
            } else if free_known && figures.free_bytes < request.size {
                "exhaustion: fewer free bytes than asked for"
            } else if !unknown.holes_known() {
                "cannot tell: the dump does not say where its free bytes lie, or how many there are"
            } else if figures.largest_hole < request.size {
                "fragmentation: enough free bytes, but no hole big enough"
            } else {
                "a hole is big enough now"
            };
            let label = format!("{} {}", dump.text(memory.kind), dump::format_id(memory.id));
            found.push((label, request.size, verdict));
        }
    }
    found
}

/// The cache a memory of a dump belongs to (as [`crate::query::load::cache_of`] finds it in the
/// database): the memories whose names share its device word, else the memory alone.
fn cache_in(prepared: &dump::Prepared, failed: &dump::Memory, device_free: u64) -> Option<Cache> {
    let dump = &prepared.dump;
    // A memory carved into segments (a GPU, PyTorch's) is its cache by itself.
    if !failed.segments.is_empty() {
        let figures = dump
            .memories
            .iter()
            .zip(&prepared.figures)
            .find(|(memory, _)| memory.id == failed.id)?
            .1;
        if !failed.unknown.holes_known() {
            return None;
        }
        let usage = dump::figures::segment_usage(failed);
        return Some(Cache {
            device: failed.name.map_or_else(
                || dump::format_id(failed.id),
                |name| dump.text(name).to_string(),
            ),
            segments: failed.segments.len() as u64,
            reserved: failed.segments.iter().map(|segment| segment.size).sum(),
            cache_free: figures.free_bytes,
            largest_block: figures.largest_hole,
            empty_bytes: failed
                .segments
                .iter()
                .zip(usage)
                .filter(|(_, used)| *used == 0)
                .map(|(segment, _)| segment.size)
                .sum(),
            device_free,
        });
    }
    let word = failed
        .name
        .map(|name| dump.text(name))
        .and_then(cache::device_word);
    let mut found = Cache {
        device: word.map_or_else(|| dump::format_id(failed.id), str::to_string),
        segments: 0,
        reserved: 0,
        cache_free: 0,
        largest_block: 0,
        empty_bytes: 0,
        device_free,
    };
    for (memory, figures) in dump.memories.iter().zip(&prepared.figures) {
        let same = match word {
            Some(word) => {
                memory
                    .name
                    .and_then(|name| cache::device_word(dump.text(name)))
                    == Some(word)
            }
            None => memory.id == failed.id,
        };
        if !same {
            continue;
        }
        if memory.unknown.any() {
            return None;
        }
        found.segments += 1;
        found.reserved = found.reserved.saturating_add(figures.capacity);
        found.cache_free = found.cache_free.saturating_add(figures.free_bytes);
        found.largest_block = found.largest_block.max(figures.largest_hole);
        if figures.allocation_count == 0 {
            found.empty_bytes = found.empty_bytes.saturating_add(figures.capacity);
        }
    }
    Some(found)
}
