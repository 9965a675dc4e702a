//! The cheapest place for a request: the aligned window of `size` bytes that overlaps the fewest
//! blocked bytes, ties to the lowest offset.
//!
//! The blocked bytes inside a window are a piecewise-linear function of its start, with corners
//! only where a window edge meets a blocked range's edge. So the best aligned start is an aligned
//! neighbour of one of those corners (or of the ends of the memory): a sweep over O(ranges)
//! candidates, each costed in O(log ranges) with prefix sums, instead of a scan of every offset.

use crate::dump::Range;

/// A window and the blocked bytes it overlaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub offset: u64,
    pub size: u64,
    pub blocked_bytes: u64,
}

fn align_down(value: u64, alignment: u64) -> u64 {
    value / alignment * alignment
}

fn align_up(value: u64, alignment: u64) -> Option<u64> {
    value
        .checked_add(alignment - 1)
        .map(|value| value / alignment * alignment)
}

/// Blocked bytes in `[0, x)`, given merged sorted ranges and the prefix sums of their sizes.
fn covered(blocked: &[Range], prefix: &[u64], x: u64) -> u64 {
    // Ranges starting before x.
    let count = blocked.partition_point(|range| range.offset < x);
    if count == 0 {
        return 0;
    }
    let last = blocked[count - 1];
    prefix[count - 1] + last.size.min(x - last.offset)
}

/// The cheapest aligned window of `size` bytes in `[0, capacity)`, where `blocked` is merged
/// (sorted, disjoint). `None` when the request is larger than the memory.
pub fn cheapest_window(
    capacity: u64,
    blocked: &[Range],
    size: u64,
    alignment: u64,
) -> Option<Window> {
    let alignment = alignment.max(1);
    if size == 0 || size > capacity {
        return None;
    }
    let last_start = align_down(capacity - size, alignment);
    let mut prefix = Vec::with_capacity(blocked.len());
    let mut total = 0;
    for range in blocked {
        prefix.push(total);
        total += range.size;
    }
    let cost =
        |start: u64| covered(blocked, &prefix, start + size) - covered(blocked, &prefix, start);
    let mut corners: Vec<i128> = vec![0, i128::from(last_start)];
    for range in blocked {
        let (start, end) = (i128::from(range.offset), i128::from(range.end()));
        corners.extend([start, end, start - i128::from(size), end - i128::from(size)]);
    }
    let mut best: Option<Window> = None;
    for corner in corners {
        if corner < 0 || corner > i128::from(last_start) {
            continue;
        }
        let corner = corner as u64;
        for start in [
            Some(align_down(corner, alignment)),
            align_up(corner, alignment),
        ]
        .into_iter()
        .flatten()
        {
            if start > last_start {
                continue;
            }
            let blocked_bytes = cost(start);
            let better = match best {
                None => true,
                Some(current) => (blocked_bytes, start) < (current.blocked_bytes, current.offset),
            };
            if better {
                best = Some(Window {
                    offset: start,
                    size,
                    blocked_bytes,
                });
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::figures::merge;

    fn brute_force(capacity: u64, blocked: &[Range], size: u64, alignment: u64) -> Option<Window> {
        let mut best: Option<Window> = None;
        let mut start = 0;
        while start + size <= capacity {
            let cost: u64 = blocked
                .iter()
                .map(|range| {
                    let low = range.offset.max(start);
                    let high = range.end().min(start + size);
                    high.saturating_sub(low)
                })
                .sum();
            if best.is_none_or(|current| cost < current.blocked_bytes) {
                best = Some(Window {
                    offset: start,
                    size,
                    blocked_bytes: cost,
                });
            }
            start += alignment;
        }
        best
    }

    #[test]
    fn agrees_with_brute_force_on_random_memories() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut below = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        for case in 0..3000 {
            let capacity = 1 + below(300);
            let ranges: Vec<Range> = (0..below(8))
                .map(|_| {
                    let offset = below(capacity);
                    Range {
                        offset,
                        size: 1 + below((capacity - offset).min(40)),
                    }
                })
                .collect();
            let blocked = merge(ranges);
            let size = 1 + below(capacity + 10);
            let alignment = [1, 2, 4, 16, 64][below(5) as usize];
            assert_eq!(
                cheapest_window(capacity, &blocked, size, alignment),
                brute_force(capacity, &blocked, size, alignment),
                "case {case}: capacity {capacity}, size {size}, alignment {alignment}, blocked {blocked:?}"
            );
        }
    }

    #[test]
    fn the_design_example_window() {
        // small.json's GPU memory: valid [0,262144), [458752,524288), [819200,823296);
        // pending_alloc [524288,655360). A 300000-byte request aligned to 512.
        let blocked = merge([
            Range {
                offset: 0,
                size: 262144,
            },
            Range {
                offset: 458752,
                size: 65536,
            },
            Range {
                offset: 524288,
                size: 131072,
            },
            Range {
                offset: 819200,
                size: 4096,
            },
        ]);
        let window = cheapest_window(1048576, &blocked, 300000, 512).unwrap();
        assert_eq!(
            window,
            Window {
                offset: 655360,
                size: 300000,
                blocked_bytes: 4096
            }
        );
    }
}
