//! An out-of-memory in an allocator that caches device memory in segments (PyTorch's CUDA caching
//! allocator): no free block of the cache held the request, and the driver gave no new segment.
//! One segment's holes do not explain that; the device does: what the cache reserves, what is free
//! inside it and its largest free block, and what the driver still had outside it (the failed
//! request's `device_free`). The verdict and the advice follow from those four figures only.

use serde::Serialize;

use super::Verdict;
use crate::units::human;

/// The device's figures at the failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// The first word the cache's memories' names share (`cuda:0`), or the one memory's handle.
    pub device: String,
    /// How many segments (memories) the cache holds.
    pub segments: u64,
    /// Their capacities summed: what the cache reserves from the driver.
    pub reserved: u64,
    /// Their free bytes summed: free inside the cache.
    pub cache_free: u64,
    /// The largest free block in any of them.
    pub largest_block: u64,
    /// The capacities of the segments that hold no block: what `torch.cuda.empty_cache()` would
    /// give back to the driver.
    pub empty_bytes: u64,
    /// What the driver had free outside the cache.
    pub device_free: u64,
}

/// The name word that groups memories into one device's cache: the first word of a name such as
/// `cuda:0 large pool segment`, when there is a second.
pub fn device_word(name: &str) -> Option<&str> {
    let (word, rest) = name.split_once(' ')?;
    (!word.is_empty() && !rest.trim().is_empty()).then_some(word)
}

impl Cache {
    /// Why a request of `size` failed, from the device's figures.
    pub fn verdict(&self, size: u64) -> Verdict {
        if self.largest_block >= size || self.device_free >= size {
            // A block or the driver could hold it by these figures: something they do not show
            // (a stream's or pool's own blocks, a memory fraction limit) refused it.
            Verdict::CannotTell
        } else if self.cache_free.saturating_add(self.device_free) < size {
            Verdict::Exhaustion
        } else {
            Verdict::Fragmentation
        }
    }

    /// What to do about it, in one line.
    pub fn advice(&self, size: u64) -> String {
        let free = self.cache_free.saturating_add(self.device_free);
        let figures = format!(
            "{} free inside the cache's {} ({} reserved, largest free block {}) and {} free on the device outside it",
            human(self.cache_free),
            if self.segments == 1 { "1 segment".to_string() } else { format!("{} segments", self.segments) },
            human(self.reserved),
            human(self.largest_block),
            human(self.device_free)
        );
        let asked = format!(
            "the caching allocator found no free block for the {} request and asked the driver for a new segment, which it could not give",
            human(size)
        );
        match self.verdict(size) {
            Verdict::Exhaustion => format!(
                "{asked}: the device is full, {figures}, together {} less than the request; free tensors that are no longer needed (or use smaller batches): no allocator setting makes room that is not there",
                human(size.saturating_sub(free))
            ),
            Verdict::Fragmentation => {
                let whole = self.empty_bytes.saturating_add(self.device_free);
                let empty = if self.empty_bytes > 0 && whole >= size {
                    format!("; torch.cuda.empty_cache() would give the driver back the {} of segments that hold no block, and it would then have {}, enough", human(self.empty_bytes), human(whole))
                } else {
                    String::new()
                };
                let split = if self.cache_free >= size {
                    "its free bytes would hold the request but no single block does"
                } else {
                    "neither the cache nor the driver holds the request alone, together they would"
                };
                format!(
                    "{asked}: the free bytes are fragmented, {figures}; {split}: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, so the allocator maps memory into segments that grow and gives unused pages back instead of keeping split blocks{empty}"
                )
            }
            _ if self.largest_block >= size => format!(
                "cannot tell why: {figures}; a free block is big enough by these figures, but the allocator keeps blocks per stream and per pool (small requests apart from large ones), which the snapshot does not say of this request"
            ),
            _ => format!(
                "cannot tell why: {figures}; the driver reports enough free for the request, so a limit the snapshot does not show (torch.cuda.set_per_process_memory_fraction, another process allocating at the same moment) refused it"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(cache_free: u64, largest_block: u64, device_free: u64) -> Cache {
        Cache {
            device: "cuda:0".into(),
            segments: 3,
            reserved: 1000,
            cache_free,
            largest_block,
            empty_bytes: 0,
            device_free,
        }
    }

    #[test]
    fn the_verdict_follows_the_four_figures() {
        // 100 asked: 40 + 50 free is too little; 80 + 30 is enough but split; 120 in pieces of 60.
        assert_eq!(cache(40, 20, 50).verdict(100), Verdict::Exhaustion);
        assert_eq!(cache(80, 60, 30).verdict(100), Verdict::Fragmentation);
        assert_eq!(cache(120, 60, 0).verdict(100), Verdict::Fragmentation);
        assert_eq!(cache(120, 100, 0).verdict(100), Verdict::CannotTell);
        assert_eq!(cache(0, 0, 100).verdict(100), Verdict::CannotTell);
        assert!(cache(120, 60, 0)
            .advice(100)
            .contains("expandable_segments:True"));
        assert!(cache(80, 60, 30)
            .advice(100)
            .contains("together they would"));
        // No segment is wholly free: emptying the cache gives nothing back, so it is not advised.
        assert!(!cache(120, 60, 0).advice(100).contains("empty_cache"));
        let empty = Cache {
            empty_bytes: 70,
            ..cache(120, 60, 30)
        };
        assert!(empty.advice(100).contains("empty_cache"));
        assert!(!cache(40, 20, 50).advice(100).contains("expandable"));
    }

    #[test]
    fn device_words() {
        assert_eq!(device_word("cuda:0 large pool segment"), Some("cuda:0"));
        assert_eq!(device_word("cuda:0"), None);
        assert_eq!(device_word(" x"), None);
    }
}
