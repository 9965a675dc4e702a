//! A Realm-like range allocator for one memory: first fit over an address-ordered free list,
//! alignment padding split off as its own free range, freed ranges merged with free neighbours.
//!
//! It only tracks free space; who owns the allocated ranges (and in which state) is the
//! simulator's business. `allocate_at` takes a given range out of the free list, which is how a
//! deferred allocation reserves the free parts of the place it was given.

use std::collections::BTreeMap;

use crate::dump::Range;

#[derive(Debug, Clone)]
pub struct RangeAllocator {
    capacity: u64,
    /// Free ranges: offset → size; disjoint and never touching (neighbours are merged).
    free: BTreeMap<u64, u64>,
}

/// Round `value` up to a multiple of `alignment` (alignment 0 or 1 means none).
pub fn align_up(value: u64, alignment: u64) -> u64 {
    if alignment <= 1 {
        value
    } else {
        value.div_ceil(alignment) * alignment
    }
}

/// First fit of `size` bytes aligned to `alignment` in sorted, disjoint `ranges`.
pub fn first_fit(
    ranges: impl IntoIterator<Item = Range>,
    size: u64,
    alignment: u64,
) -> Option<u64> {
    ranges.into_iter().find_map(|range| {
        let start = align_up(range.offset, alignment);
        (start.checked_add(size)? <= range.end()).then_some(start)
    })
}

impl RangeAllocator {
    pub fn new(capacity: u64) -> Self {
        let mut free = BTreeMap::new();
        if capacity > 0 {
            free.insert(0, capacity);
        }
        RangeAllocator { capacity, free }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The free ranges in address order.
    pub fn free_ranges(&self) -> impl Iterator<Item = Range> + '_ {
        self.free
            .iter()
            .map(|(&offset, &size)| Range { offset, size })
    }

    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }

    pub fn largest_free(&self) -> u64 {
        self.free.values().copied().max().unwrap_or(0)
    }

    /// First fit: the lowest free range that holds `size` bytes at an aligned start. The padding
    /// before the start stays a free range of its own, as in Realm.
    pub fn allocate(&mut self, size: u64, alignment: u64) -> Option<u64> {
        if size == 0 {
            return None;
        }
        let start = first_fit(self.free_ranges(), size, alignment)?;
        self.allocate_at(start, size).then_some(start)
    }

    /// Take exactly `[offset, offset + size)` out of the free list; false (and no change) when
    /// any byte of it is not free.
    pub fn allocate_at(&mut self, offset: u64, size: u64) -> bool {
        let Some(end) = offset.checked_add(size) else {
            return false;
        };
        let Some((&range_offset, &range_size)) = self.free.range(..=offset).next_back() else {
            return false;
        };
        let range_end = range_offset + range_size;
        if size == 0 || end > range_end {
            return false;
        }
        self.free.remove(&range_offset);
        if offset > range_offset {
            self.free.insert(range_offset, offset - range_offset);
        }
        if range_end > end {
            self.free.insert(end, range_end - end);
        }
        true
    }

    /// Return `[offset, offset + size)` to the free list, merged with free neighbours. Returns
    /// false (and changes nothing) when any byte of it is already free or outside the memory.
    pub fn free(&mut self, offset: u64, size: u64) -> bool {
        let Some(end) = offset.checked_add(size) else {
            return false;
        };
        if size == 0 || end > self.capacity {
            return false;
        }
        let before = self.free.range(..offset).next_back().map(|(&o, &s)| (o, s));
        let after = self.free.range(offset..).next().map(|(&o, &s)| (o, s));
        if before.is_some_and(|(o, s)| o + s > offset) || after.is_some_and(|(o, _)| o < end) {
            return false;
        }
        let mut start = offset;
        let mut stop = end;
        if let Some((o, s)) = before {
            if o + s == offset {
                self.free.remove(&o);
                start = o;
            }
        }
        if let Some((o, s)) = after {
            if o == end {
                self.free.remove(&o);
                stop = o + s;
            }
        }
        self.free.insert(start, stop - start);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference model: one flag per byte.
    struct ByteMap {
        used: Vec<bool>,
    }

    impl ByteMap {
        fn first_fit(&self, size: u64, alignment: u64) -> Option<u64> {
            let capacity = self.used.len() as u64;
            // The first free run (in address order) whose aligned start leaves room.
            let mut offset = 0;
            while offset < capacity {
                if self.used[offset as usize] {
                    offset += 1;
                    continue;
                }
                let mut end = offset;
                while end < capacity && !self.used[end as usize] {
                    end += 1;
                }
                let start = align_up(offset, alignment);
                if start + size <= end {
                    return Some(start);
                }
                offset = end;
            }
            None
        }
        fn free_runs(&self) -> Vec<Range> {
            let mut runs = Vec::new();
            let mut offset = 0;
            let capacity = self.used.len() as u64;
            while offset < capacity {
                if self.used[offset as usize] {
                    offset += 1;
                    continue;
                }
                let start = offset;
                while offset < capacity && !self.used[offset as usize] {
                    offset += 1;
                }
                runs.push(Range {
                    offset: start,
                    size: offset - start,
                });
            }
            runs
        }
    }

    struct Random(u64);
    impl Random {
        fn below(&mut self, bound: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % bound
        }
    }

    #[test]
    fn matches_a_byte_map_under_random_allocate_and_free() {
        let mut random = Random(0x2545_f491_4f6c_dd1d);
        for _ in 0..200 {
            let capacity = 64 + random.below(400);
            let mut allocator = RangeAllocator::new(capacity);
            let mut model = ByteMap {
                used: vec![false; capacity as usize],
            };
            let mut live: Vec<(u64, u64)> = Vec::new();
            for _ in 0..300 {
                if live.is_empty() || random.below(3) > 0 {
                    let size = 1 + random.below(40);
                    let alignment = [1, 2, 8, 16, 64][random.below(5) as usize];
                    let expected = model.first_fit(size, alignment);
                    assert_eq!(
                        allocator.allocate(size, alignment),
                        expected,
                        "allocate {size} aligned {alignment}"
                    );
                    if let Some(offset) = expected {
                        model.used[offset as usize..(offset + size) as usize]
                            .iter_mut()
                            .for_each(|byte| *byte = true);
                        live.push((offset, size));
                    }
                } else {
                    let (offset, size) = live.swap_remove(random.below(live.len() as u64) as usize);
                    assert!(allocator.free(offset, size));
                    model.used[offset as usize..(offset + size) as usize]
                        .iter_mut()
                        .for_each(|byte| *byte = false);
                }
                // Free list = the byte map's free runs: padding is free, neighbours are merged.
                assert_eq!(
                    allocator.free_ranges().collect::<Vec<_>>(),
                    model.free_runs()
                );
            }
        }
    }

    #[test]
    fn refuses_double_free_and_foreign_ranges() {
        let mut allocator = RangeAllocator::new(100);
        let offset = allocator.allocate(10, 1).unwrap();
        assert!(allocator.free(offset, 10));
        assert!(!allocator.free(offset, 10), "double free");
        assert!(!allocator.free(95, 10), "past the end");
        assert!(allocator.allocate_at(20, 10));
        assert!(!allocator.allocate_at(25, 10), "already taken");
        assert_eq!(
            allocator.free_ranges().collect::<Vec<_>>(),
            vec![
                Range {
                    offset: 0,
                    size: 20
                },
                Range {
                    offset: 30,
                    size: 70
                }
            ]
        );
    }
}
