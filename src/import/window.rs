//! The import pipeline's window: how many records may be in flight between the reader and the
//! writer, and how many of their bytes, so that memory is bounded by the largest records, not by
//! how many there are.

use std::sync::{Arc, Condvar, Mutex};

/// How many records may be in flight (read, parsed, or waiting for the writer) at once, and how
/// many of their bytes: a record is read only while at most [`WINDOW_BYTES`] are in flight, so
/// large dumps go through one at a time (a dump costs about three times its text while it is
/// read, parsed and written, with the node's open spans beside it: two large ones at once would
/// pass four times the largest) while small ones overlap reading, parsing and writing.
pub(super) struct Window {
    state: Mutex<WindowState>,
    changed: Condvar,
    pub(super) size: usize,
}

#[derive(Default)]
struct WindowState {
    records: usize,
    bytes: u64,
    closed: bool,
}

/// Bytes of records in flight past which no other record is read until some leave.
const WINDOW_BYTES: u64 = 48 << 20;

impl Window {
    pub(super) fn new(size: usize) -> Arc<Window> {
        Arc::new(Window {
            state: Mutex::new(WindowState::default()),
            changed: Condvar::new(),
            size,
        })
    }

    /// Wait for room for one more record; false once the writer has stopped.
    pub(super) fn enter(&self) -> bool {
        let Ok(mut state) = self.state.lock() else {
            return false;
        };
        while (state.records >= self.size || state.bytes > WINDOW_BYTES) && !state.closed {
            state = match self.changed.wait(state) {
                Ok(state) => state,
                Err(_) => return false,
            };
        }
        state.records += 1;
        !state.closed
    }

    /// A record of `bytes` was read into the room taken for it.
    pub(super) fn weigh(&self, bytes: u64) {
        if let Ok(mut state) = self.state.lock() {
            state.bytes += bytes;
        }
    }

    /// One record of `bytes` gives its room back: the writer is done with it (or, with 0 bytes,
    /// the reader took room for a record its input did not have).
    pub(super) fn leave(&self, bytes: u64) {
        if let Ok(mut state) = self.state.lock() {
            state.records = state.records.saturating_sub(1);
            state.bytes = state.bytes.saturating_sub(bytes);
            self.changed.notify_all();
        }
    }

    /// The writer stops taking records.
    pub(super) fn close(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.closed = true;
            self.changed.notify_all();
        }
    }
}
