//! Address bins: a memory cut into equal stretches, for pictures that summarize what is too
//! large to draw allocation by allocation (a page's map, a long history). Which bins a range
//! covers and how many of its bytes fall in each, which state holds most of a bin, how full it is.

/// A memory of `capacity` bytes cut into `count` bins of equal width (at least a byte each).
#[derive(Debug, Clone, Copy)]
pub struct AddressBins {
    pub count: usize,
    pub width: f64,
}

impl AddressBins {
    pub fn new(capacity: u64, count: usize) -> AddressBins {
        let count = count.max(1);
        AddressBins {
            count,
            width: (capacity.max(1) as f64 / count as f64).max(1.0),
        }
    }

    /// The bin holding byte `offset` (the last one for offsets past the capacity).
    pub fn of(&self, offset: u64) -> usize {
        ((offset as f64 / self.width) as usize).min(self.count - 1)
    }

    /// Where bin `bin` starts.
    pub fn start(&self, bin: usize) -> u64 {
        (bin as f64 * self.width) as u64
    }

    /// The bins `[offset, offset + size)` covers, each with how many of its bytes lie there.
    pub fn spread(&self, offset: u64, size: u64) -> impl Iterator<Item = (usize, f64)> + '_ {
        let end = offset.saturating_add(size);
        let (first, last) = (self.of(offset), self.of(end.saturating_sub(1)));
        (first..=last).map(move |bin| {
            let low = (bin as f64 * self.width).max(offset as f64);
            let high = ((bin + 1) as f64 * self.width).min(end as f64);
            (bin, (high - low).max(0.0))
        })
    }

    /// How full a bin holding `used` bytes is, in percent: 1 to 100 (a sliver stays visible).
    pub fn share_percent(&self, used: f64) -> u8 {
        ((used / self.width) * 100.0).ceil().clamp(1.0, 100.0) as u8
    }
}

/// The state (by code) holding the most bytes of a bin; the first of equals.
pub fn dominant(bytes: &[f64; 4]) -> usize {
    (1..4).fold(0, |best, state| {
        if bytes[state] > bytes[best] {
            state
        } else {
            best
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_spreads_its_bytes_over_the_bins_it_covers() {
        // 1,000 bytes in 10 bins of 100: [150, 420) is 50 + 100 + 100 + 20.
        let bins = AddressBins::new(1000, 10);
        let spread: Vec<(usize, f64)> = bins.spread(150, 270).collect();
        assert_eq!(spread, vec![(1, 50.0), (2, 100.0), (3, 100.0), (4, 20.0)]);
        assert_eq!(bins.of(999), 9);
        assert_eq!(bins.of(5000), 9);
        assert_eq!(bins.share_percent(50.0), 50);
        assert_eq!(bins.share_percent(0.1), 1);
        assert_eq!(dominant(&[1.0, 3.0, 3.0, 2.0]), 1);
    }
}
