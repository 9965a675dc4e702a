//! A memory across a run, as the history page draws it: its node's snapshots and the spans of
//! its allocations placed in time, or, for a memory with more spans than a page holds, a summary
//! on a grid of time and address bins. `query::history` fills these from the database.

use crate::dump::State;

/// One allocation over the snapshots it lived through unchanged (a span), placed in time.
#[derive(Debug, Clone, PartialEq)]
pub struct HistorySpan {
    /// From the time of its first snapshot to the time of the snapshot after its last (seconds).
    pub from_s: f64,
    pub to_s: f64,
    pub offset: u64,
    pub size: u64,
    pub state: State,
    pub kind: String,
    pub provenance: Option<String>,
    pub label: Option<String>,
    pub uid: String,
    pub objects: Option<String>,
    pub first_snapshot_id: i64,
    pub last_snapshot_id: i64,
}

/// A memory across a run: its node's snapshots and the spans of its allocations.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub run: String,
    pub node: i64,
    pub handle: String,
    pub kind: String,
    pub capacity: u64,
    /// Each snapshot of the node: (snapshot id, time in seconds, whether it was an OOM dump).
    pub snapshots: Vec<(i64, f64, bool)>,
    pub spans: Vec<HistorySpan>,
    /// When the memory has more spans than a page holds: `spans` are those crossing one address
    /// range, and the whole history is summarized on a grid.
    pub summary: Option<HistorySummary>,
}

/// A history too large to draw span by span, summarized: the address range whose spans are kept
/// whole, and a grid of (time bin, address bin) cells, each with the state holding most of its
/// bytes and how full it is.
#[derive(Debug, Clone, PartialEq)]
pub struct HistorySummary {
    /// Every span of the memory, kept or not.
    pub total_spans: u64,
    /// `[start, end)`: the addresses whose spans are in `History::spans`.
    pub detail: (u64, u64),
    /// The time bins' edges in seconds (one more than there are bins).
    pub time_edges: Vec<f64>,
    /// How many address bins split `[0, extent)`.
    pub address_bins: usize,
    /// The bytes the address bins cover: up to the highest byte any span reaches (a run that
    /// uses 50 MiB of a 1 TiB memory is binned in those 50 MiB, not in 2.7 GB bins).
    pub extent: u64,
    /// (time bin, address bin, state code, share of the cell allocated in percent 1-100).
    pub cells: Vec<(u16, u16, u8, u8)>,
}
