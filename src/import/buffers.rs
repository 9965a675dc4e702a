//! Text buffers handed back after parsing and reused for the next record read whole.
//!
//! A record's text is read into a fresh buffer, and a buffer of a few MiB is memory the kernel
//! maps and zeroes page by page as it is first touched: on the scale bench's run (i) (50 dumps of
//! 7.6 MB) that was 93,000 page faults, most of `validate`'s system time and a third of the
//! importer's. Buffers handed back once their record is parsed are kept (at most [`KEPT_BYTES`]
//! in all, so an idle importer holds little) and the next record is read into one of them.

use std::sync::Mutex;

/// At most this many bytes of buffers are kept (a buffer larger than this is never kept).
const KEPT_BYTES: usize = 32 << 20;

/// Buffers kept for reuse, smallest first.
#[derive(Default)]
struct Kept {
    buffers: Vec<Vec<u8>>,
}

impl Kept {
    /// An empty buffer: the largest kept one, else a new one.
    fn take(&mut self) -> Vec<u8> {
        self.buffers.pop().unwrap_or_default()
    }

    /// Keep `buffer` (emptied) when it fits within [`KEPT_BYTES`] with the others.
    fn give_back(&mut self, mut buffer: Vec<u8>) {
        buffer.clear();
        let held: usize = self.buffers.iter().map(Vec::capacity).sum();
        if buffer.capacity() > 0 && held + buffer.capacity() <= KEPT_BYTES {
            self.buffers.push(buffer);
            self.buffers.sort_unstable_by_key(Vec::capacity);
        }
    }
}

static KEPT: Mutex<Kept> = Mutex::new(Kept {
    buffers: Vec::new(),
});

/// An empty buffer to read a record into, one handed back earlier when there is one.
pub(crate) fn take() -> Vec<u8> {
    KEPT.lock().map(|mut kept| kept.take()).unwrap_or_default()
}

/// Hand a record's buffer back once its text is parsed.
pub(crate) fn give_back(buffer: Vec<u8>) {
    if let Ok(mut kept) = KEPT.lock() {
        kept.give_back(buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_largest_first_and_bounded() {
        let mut kept = Kept::default();
        assert_eq!(kept.take().capacity(), 0);
        let mut small = Vec::with_capacity(1000);
        small.extend_from_slice(&[1; 1000]);
        kept.give_back(small);
        kept.give_back(Vec::with_capacity(5000));
        let reused = kept.take();
        assert!(reused.is_empty());
        assert_eq!(reused.capacity(), 5000);
        assert_eq!(kept.take().capacity(), 1000);
        // What would pass the bound is not kept.
        kept.give_back(Vec::with_capacity(KEPT_BYTES - 10));
        kept.give_back(Vec::with_capacity(100));
        kept.give_back(Vec::with_capacity(KEPT_BYTES + 1));
        assert_eq!(kept.buffers.len(), 1);
        assert_eq!(kept.take().capacity(), KEPT_BYTES - 10);
    }
}
