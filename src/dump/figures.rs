//! Holes and the derived figures of one memory, exactly as docs/FORMAT.md defines them.
//!
//! Everything here works on sorted, half-open byte ranges: merge them into their union, take the
//! gaps of a union inside `[0, capacity)`, add up lengths. The importer stores the results, so the
//! SQL views never recompute them.

use super::model::{Memory, Range, State};

/// The derived figures of one memory in one snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryFigures {
    pub capacity: u64,
    pub allocation_count: u64,
    /// Sum of allocation sizes, overlapping bytes counted once.
    pub used_bytes: u64,
    /// Sum of hole sizes.
    pub free_bytes: u64,
    pub hole_count: u64,
    pub largest_hole: u64,
    /// `1 - largest_hole / free_bytes`, 0 when nothing is free.
    pub fragmentation: f64,
    /// Sum of sizes of `collectable` and `pending_free` allocations.
    pub reclaimable_bytes: u64,
    /// The largest hole that collecting everything and finishing pending releases could produce.
    pub largest_reclaimable: u64,
    /// `capacity - used - free` when the dump lists holes, else 0.
    pub unaccounted_bytes: u64,
}

/// The union of `ranges` as sorted, disjoint, non-touching ranges.
pub fn merge(ranges: impl IntoIterator<Item = Range>) -> Vec<Range> {
    let mut sorted: Vec<Range> = ranges.into_iter().filter(|range| range.size > 0).collect();
    sorted.sort_unstable();
    let mut merged: Vec<Range> = Vec::with_capacity(sorted.len());
    for range in sorted {
        match merged.last_mut() {
            Some(last) if range.offset <= last.end() => {
                let end = last.end().max(range.end());
                last.size = end - last.offset;
            }
            _ => merged.push(range),
        }
    }
    merged
}

/// The parts of `[0, capacity)` that a merged (sorted, disjoint) list of ranges leaves uncovered.
pub fn gaps(merged: &[Range], capacity: u64) -> Vec<Range> {
    let mut gaps = Vec::with_capacity(merged.len() + 1);
    let mut cursor = 0;
    for range in merged {
        if range.offset > cursor {
            gaps.push(Range {
                offset: cursor,
                size: range.offset - cursor,
            });
        }
        cursor = cursor.max(range.end());
    }
    if capacity > cursor {
        gaps.push(Range {
            offset: cursor,
            size: capacity - cursor,
        });
    }
    gaps
}

/// The parts of sorted, disjoint `ranges` inside `window`.
pub fn intersect(ranges: &[Range], window: Range) -> Vec<Range> {
    ranges
        .iter()
        .filter_map(|range| {
            let start = range.offset.max(window.offset);
            let end = range.end().min(window.end());
            (end > start).then(|| Range {
                offset: start,
                size: end - start,
            })
        })
        .collect()
}

/// `ranges` less the bytes of `cut` (merged, as from [`merge`]): the gaps of `cut` inside each range.
pub fn subtract(ranges: &[Range], cut: &[Range]) -> Vec<Range> {
    ranges
        .iter()
        .flat_map(|range| intersect(&gaps(cut, range.end()), *range))
        .collect()
}

/// The bytes each of the memory's segments gives its allocations (the parts of allocations that
/// lie in it, overlapping bytes counted once), in the order of `memory.segments`.
pub fn segment_usage(memory: &Memory) -> Vec<u64> {
    let used = merge(
        memory
            .allocations
            .iter()
            .map(|allocation| allocation.range()),
    );
    memory
        .segments
        .iter()
        .map(|segment| {
            let within = Range {
                offset: segment.offset,
                size: segment.size,
            };
            let first = used.partition_point(|range| range.end() <= segment.offset);
            used[first..]
                .iter()
                .take_while(|range| range.offset < within.end())
                .map(|range| range.end().min(within.end()) - range.offset.max(within.offset))
                .sum()
        })
        .collect()
}

/// The memory's holes: its listed free list, or else the gaps no allocation of any state covers.
pub fn holes(memory: &Memory) -> Vec<Range> {
    // Holes between stand-in places or up to a stand-in capacity would be made up.
    if !memory.unknown.holes_known() {
        return Vec::new();
    }
    match &memory.listed_holes {
        Some(listed) => listed.clone(),
        None => gaps(
            &merge(
                memory
                    .allocations
                    .iter()
                    .map(|allocation| allocation.range()),
            ),
            memory.capacity,
        ),
    }
}

/// Byte ranges held by nothing: neither an allocation nor a listed hole (none when the holes are
/// derived, since then every byte is one or the other).
pub fn unaccounted_ranges(
    allocations: impl Iterator<Item = Range>,
    listed_holes: Option<&[Range]>,
    capacity: u64,
) -> Vec<Range> {
    match listed_holes {
        Some(listed) => gaps(&merge(allocations.chain(listed.iter().copied())), capacity),
        None => Vec::new(),
    }
}

/// Ranges that neither garbage collection nor pending releases can free: allocations whose state
/// blocks reuse (`valid`, `pending_alloc`), and unaccounted bytes. Merged and sorted.
pub fn unmovable_ranges(
    allocations: impl Iterator<Item = (Range, State)>,
    unaccounted: &[Range],
) -> Vec<Range> {
    merge(
        allocations
            .filter(|(_, state)| state.blocks_reuse())
            .map(|(range, _)| range)
            .chain(unaccounted.iter().copied()),
    )
}

/// Bytes covered by allocations, overlapping bytes counted once.
pub fn used_bytes(allocations: impl Iterator<Item = Range>) -> u64 {
    total(&merge(allocations))
}

/// `1 - largest_hole / free_bytes`, 0 when nothing is free: how much of the free memory is not in
/// its largest hole.
pub fn fragmentation(largest_hole: u64, free_bytes: u64) -> f64 {
    if free_bytes == 0 {
        0.0
    } else {
        1.0 - largest_hole as f64 / free_bytes as f64
    }
}

fn unaccounted(memory: &Memory) -> Vec<Range> {
    unaccounted_ranges(
        memory
            .allocations
            .iter()
            .map(|allocation| allocation.range()),
        memory.listed_holes.as_deref(),
        memory.capacity,
    )
}

fn unmovable(memory: &Memory) -> Vec<Range> {
    unmovable_ranges(
        memory
            .allocations
            .iter()
            .map(|allocation| (allocation.range(), allocation.state)),
        &unaccounted(memory),
    )
}

fn total(ranges: &[Range]) -> u64 {
    ranges.iter().map(|range| range.size).sum()
}

fn largest(ranges: &[Range]) -> u64 {
    ranges.iter().map(|range| range.size).max().unwrap_or(0)
}

/// The figures of `memory`, given its `holes` (from [`holes`]).
pub fn figures(memory: &Memory, holes: &[Range]) -> MemoryFigures {
    let used_bytes = used_bytes(
        memory
            .allocations
            .iter()
            .map(|allocation| allocation.range()),
    );
    let free_bytes = total(holes);
    let largest_hole = largest(holes);
    let fragmentation = fragmentation(largest_hole, free_bytes);
    let reclaimable_bytes = memory
        .allocations
        .iter()
        .filter(|allocation| matches!(allocation.state, State::Collectable | State::PendingFree))
        .map(|allocation| allocation.size)
        .sum();
    let largest_reclaimable = largest(&gaps(&unmovable(memory), memory.capacity));
    let unaccounted_bytes = match memory.listed_holes {
        Some(_) => memory
            .capacity
            .saturating_sub(used_bytes)
            .saturating_sub(free_bytes),
        None => 0,
    };
    if !memory.unknown.holes_known() {
        // What the dump does not know is no figure: only the free bytes in total, when capacity
        // and allocations are known (the database shows the rest as NULL, by `unknown`).
        return MemoryFigures {
            capacity: memory.capacity,
            allocation_count: memory.allocations.len() as u64,
            used_bytes,
            free_bytes: memory.capacity.saturating_sub(used_bytes),
            hole_count: 0,
            largest_hole: 0,
            fragmentation: 0.0,
            reclaimable_bytes,
            largest_reclaimable: 0,
            unaccounted_bytes: 0,
        };
    }
    MemoryFigures {
        capacity: memory.capacity,
        allocation_count: memory.allocations.len() as u64,
        used_bytes,
        free_bytes,
        hole_count: holes.len() as u64,
        largest_hole,
        fragmentation,
        reclaimable_bytes,
        largest_reclaimable,
        unaccounted_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(offset: u64, size: u64) -> Range {
        Range { offset, size }
    }

    #[test]
    fn merge_joins_overlapping_and_touching_ranges() {
        let merged = merge([
            range(10, 5),
            range(0, 4),
            range(4, 2),
            range(12, 10),
            range(30, 1),
        ]);
        assert_eq!(merged, vec![range(0, 6), range(10, 12), range(30, 1)]);
    }

    #[test]
    fn subtract_and_intersect() {
        let cut = merge([range(2, 2), range(6, 1), range(20, 5)]);
        assert_eq!(
            subtract(&[range(0, 10)], &cut),
            vec![range(0, 2), range(4, 2), range(7, 3)]
        );
        assert_eq!(
            subtract(&[range(3, 2), range(21, 2)], &cut),
            vec![range(4, 1)]
        );
        assert_eq!(subtract(&[range(0, 5)], &[]), vec![range(0, 5)]);
        assert_eq!(intersect(&cut, range(3, 4)), vec![range(3, 1), range(6, 1)]);
    }

    #[test]
    fn gaps_cover_the_rest_of_the_memory() {
        assert_eq!(
            gaps(&[range(2, 3), range(7, 1)], 10),
            vec![range(0, 2), range(5, 2), range(8, 2)]
        );
        assert_eq!(gaps(&[], 10), vec![range(0, 10)]);
        assert_eq!(gaps(&[range(0, 10)], 10), vec![]);
    }
}
