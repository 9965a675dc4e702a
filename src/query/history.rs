//! A memory across its run, for the page's history view: the node's snapshots and the spans of
//! the memory's allocations, with level of detail when there are more spans than a page holds.

use rusqlite::{params, Connection};

use super::load::to_u64;
use super::query_error;
use crate::analysis::bins::{dominant, AddressBins};
use crate::analysis::{History, HistorySpan, HistorySummary};
use crate::dump::model::State;
use crate::error::Result;

/// The most allocation spans a history keeps whole; past it, a page would pass 20 MiB (and the
/// spans, loaded with their texts, hundreds of MiB), so the history is summarized.
pub const HISTORY_DETAIL_SPANS: u64 = 100_000;

/// The summary grid of a large history: time bins (at most) and address bins.
const HISTORY_TIME_BINS: usize = 600;
const HISTORY_ADDRESS_BINS: usize = 400;

/// A memory across its run: the node's snapshots and the spans of the memory's allocations, each
/// drawn from its first snapshot's time to the time of the snapshot after its last.
///
/// A memory with more than [`HISTORY_DETAIL_SPANS`] spans is summarized (level of detail): every
/// span goes into a grid of time and address bins in one streaming pass (nothing of it kept), and
/// only the spans crossing an address range around `focus` (the failed request's window; the
/// busiest addresses without one) are loaded whole, as many as fit. Memory and page size stay
/// bounded whatever the run's length.
pub fn history(conn: &Connection, memory_id: i64, focus: Option<(u64, u64)>) -> Result<History> {
    history_within(conn, memory_id, focus, HISTORY_DETAIL_SPANS)
}

/// [`history`] keeping at most `detail_spans` spans whole (a served page keeps few, and asks for
/// the spans of the addresses in view with [`spans_in`] as the user zooms).
pub fn history_within(
    conn: &Connection,
    memory_id: i64,
    focus: Option<(u64, u64)>,
    detail_spans: u64,
) -> Result<History> {
    let (run, node, handle, kind, run_id) = memory_of(conn, memory_id)?;
    let capacity: i64 = conn
        .query_row(
            "SELECT coalesce(max(capacity), 0) FROM memory_stats WHERE memory_id = ?1",
            [memory_id],
            |row| row.get(0),
        )
        .map_err(query_error)?;
    let capacity = to_u64(capacity);
    let timeline = Timeline::of(conn, run_id, node)?;
    // How many spans: a count on the span table itself (an index search by memory).
    let total: i64 = conn
        .query_row(
            "SELECT count(*) FROM allocation_span WHERE memory_id = ?1",
            [memory_id],
            |row| row.get(0),
        )
        .map_err(query_error)?;
    let mut summary = if to_u64(total) > detail_spans && !timeline.snapshots.is_empty() {
        Some(summarize_history(
            conn,
            memory_id,
            capacity,
            &timeline.seqs,
            &|index| timeline.end_at(index),
            &timeline.snapshots,
            focus,
            (to_u64(total), detail_spans),
        )?)
    } else {
        None
    };
    let (low, mut high) = summary.as_ref().map_or((0, i64::MAX), |summary| {
        (
            i64::try_from(summary.detail.0).unwrap_or(i64::MAX),
            i64::try_from(summary.detail.1).unwrap_or(i64::MAX),
        )
    });
    // One address bin can hold more spans than a page keeps (a long run in a few MiB of a large
    // memory): none are held whole then, rather than the first few of them, which would draw the
    // rest of that band empty. A served page asks for the spans of what it zooms to.
    if let Some(summary) = summary.as_mut() {
        if band_count(conn, memory_id, Band::addresses(low, high))? > detail_spans {
            summary.detail = (summary.detail.0, summary.detail.0);
            high = low;
        }
    }
    let spans = spans_between(
        conn,
        memory_id,
        run_id,
        Band::addresses(low, high),
        detail_spans,
        &timeline,
    )?;
    Ok(History {
        run,
        node,
        handle,
        kind,
        capacity,
        snapshots: timeline.snapshots,
        spans,
        summary,
    })
}

/// A memory's run, node, handle, kind and run id.
fn memory_of(conn: &Connection, memory_id: i64) -> Result<(String, i64, String, String, i64)> {
    conn.query_row(
        "SELECT run, node, handle, kind, run_id FROM memories WHERE memory_id = ?1",
        [memory_id],
        |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        },
    )
    .map_err(query_error)
}

/// A node's snapshots in time, and when a span drawn from them ends.
struct Timeline {
    /// (snapshot id, time in seconds, whether an OOM dump), by seq.
    snapshots: Vec<(i64, f64, bool)>,
    seqs: Vec<i64>,
    last_interval: f64,
}

impl Timeline {
    fn of(conn: &Connection, run_id: i64, node: i64) -> Result<Timeline> {
        let mut statement = conn
            .prepare("SELECT snapshot_id, time_s, reason = 'oom', seq FROM snapshots WHERE run_id = ?1 AND node = ?2 ORDER BY seq")
            .map_err(query_error)?;
        let rows: Vec<(i64, f64, bool, i64)> = statement
            .query_map(params![run_id, node], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })
            .map_err(query_error)?
            .collect::<rusqlite::Result<_>>()
            .map_err(query_error)?;
        let snapshots: Vec<(i64, f64, bool)> =
            rows.iter().map(|row| (row.0, row.1, row.2)).collect();
        let last_interval = match snapshots.as_slice() {
            [.., (_, before, _), (_, last, _)] => (last - before).max(1e-9),
            _ => 1.0,
        };
        Ok(Timeline {
            seqs: rows.iter().map(|row| row.3).collect(),
            snapshots,
            last_interval,
        })
    }

    /// When a span whose last snapshot is the `index`-th ends: the next snapshot's time, or one
    /// interval past the last one.
    fn end_at(&self, index: usize) -> f64 {
        match self.snapshots.get(index + 1) {
            Some(next) => next.1,
            None => self
                .snapshots
                .get(index)
                .map_or(0.0, |this| this.1 + self.last_interval),
        }
    }

    /// The index of the snapshot of `seq` (of the last one before it when there is none).
    fn index_of(&self, seq: i64) -> usize {
        let after = self.seqs.partition_point(|&known| known <= seq);
        after.saturating_sub(1)
    }

    fn time_at(&self, index: usize) -> f64 {
        self.snapshots.get(index).map_or(0.0, |snapshot| snapshot.1)
    }

    fn id_at(&self, index: usize) -> i64 {
        self.snapshots.get(index).map_or(0, |snapshot| snapshot.0)
    }
}

/// Which spans of a memory: those crossing the addresses `[low, high)` that lived at some
/// snapshot with seq in `[since_seq, until_seq]`.
#[derive(Debug, Clone, Copy)]
struct Band {
    low: i64,
    high: i64,
    since_seq: i64,
    until_seq: i64,
}

impl Band {
    /// The spans crossing `[low, high)` at any time.
    fn addresses(low: i64, high: i64) -> Band {
        Band {
            low,
            high,
            since_seq: i64::MIN,
            until_seq: i64::MAX,
        }
    }
}

/// The condition of a [`Band`] on `allocation_span`, its parameters numbered from `?2`.
const BAND: &str = "memory_id = ?1 AND offset < ?3 AND offset + size > ?2
                    AND first_seq <= ?5 AND coalesce(last_seq, 9223372036854775807) >= ?4";

/// How many spans of `memory_id` lie in `band` (a search of the memory's spans by its key).
fn band_count(conn: &Connection, memory_id: i64, band: Band) -> Result<u64> {
    let total: i64 = conn
        .query_row(
            &format!("SELECT count(*) FROM allocation_span WHERE {BAND}"),
            params![
                memory_id,
                band.low,
                band.high,
                band.since_seq,
                band.until_seq
            ],
            |row| row.get(0),
        )
        .map_err(query_error)?;
    Ok(to_u64(total))
}

/// The spans of `memory_id` in `band`, in time then address order. Every caller has counted the
/// band and asks only for one that fits `limit` (a summary's detail band, or a served page's
/// window), so the limit only guards and SQL need not sort.
///
/// Reads memstate's private span table and places each span with the `timeline` (times and
/// snapshot ids by seq): the public view's joins and SQL's sort, run for every span of the
/// memory, cost 90 ms for 8,000 spans of a 37,000-span memory; this, 9 ms. The texts
/// (provenance, label, objects) are looked up only for the spans kept.
fn spans_between(
    conn: &Connection,
    memory_id: i64,
    run_id: i64,
    band: Band,
    limit: u64,
    timeline: &Timeline,
) -> Result<Vec<HistorySpan>> {
    let mut statement = conn
        .prepare(&format!(
            "SELECT a.first_seq, a.last_seq, a.offset, a.size, a.state, a.kind,
                    (SELECT p.value FROM string p WHERE p.id = a.provenance),
                    (SELECT lb.value FROM string lb WHERE lb.id = a.label),
                    printf('0x%016x', a.uid),
                    (SELECT group_concat(DISTINCT o.value)
                     FROM allocation_object ao JOIN string o ON o.id = ao.object_key
                     WHERE ao.run_id = ?6 AND ao.uid = a.uid)
             FROM (SELECT first_seq, last_seq, offset, size, state, kind, provenance, label, uid
                   FROM allocation_span WHERE {BAND} LIMIT ?7) a"
        ))
        .map_err(query_error)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let last_index = timeline.snapshots.len().saturating_sub(1);
    let mut spans = statement
        .query_map(
            params![
                memory_id,
                band.low,
                band.high,
                band.since_seq,
                band.until_seq,
                run_id,
                limit
            ],
            |row| {
                let first_seq: i64 = row.get(0)?;
                let first = timeline.index_of(first_seq);
                let last = row
                    .get::<_, Option<i64>>(1)?
                    .map_or(last_index, |seq| timeline.index_of(seq));
                let code: i64 = row.get(4)?;
                Ok((
                    first_seq,
                    HistorySpan {
                        from_s: timeline.time_at(first),
                        to_s: timeline.end_at(last),
                        offset: to_u64(row.get(2)?),
                        size: to_u64(row.get(3)?),
                        state: State::from_code(code).unwrap_or(State::PendingAlloc),
                        kind: row.get(5)?,
                        provenance: row.get(6)?,
                        label: row.get(7)?,
                        uid: row.get(8)?,
                        objects: row.get(9)?,
                        first_snapshot_id: timeline.id_at(first),
                        last_snapshot_id: timeline.id_at(last),
                    },
                ))
            },
        )
        .map_err(query_error)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(query_error)?;
    spans.sort_by_key(|(first_seq, span)| (*first_seq, span.offset));
    Ok(spans.into_iter().map(|(_, span)| span).collect())
}

/// One streaming pass over a memory's spans: the grid of a [`HistorySummary`], and the address
/// range around `focus` whose spans fit [`HISTORY_DETAIL_SPANS`]. Reads memstate's private span
/// table (integer states, sequence numbers): the public view's joins would cost seconds a million
/// spans, for columns this pass does not need.
#[allow(clippy::too_many_arguments)]
fn summarize_history(
    conn: &Connection,
    memory_id: i64,
    capacity: u64,
    seqs: &[i64],
    end_at: &dyn Fn(usize) -> f64,
    snapshots: &[(i64, f64, bool)],
    focus: Option<(u64, u64)>,
    (total, detail_spans): (u64, u64),
) -> Result<HistorySummary> {
    let count = seqs.len();
    let time_bins = count.clamp(1, HISTORY_TIME_BINS);
    let highest: Option<i64> = conn
        .query_row(
            "SELECT max(offset + size) FROM allocation_span WHERE memory_id = ?1",
            [memory_id],
            |row| row.get(0),
        )
        .map_err(query_error)?;
    let extent = match highest.map(to_u64) {
        Some(highest) if highest > 0 => highest,
        _ => capacity.max(1),
    };
    let address = AddressBins::new(extent, HISTORY_ADDRESS_BINS);
    let address_bins = address.count;
    let time_bin = |index: usize| index * time_bins / count.max(1);
    // Bytes a state holds in each cell, through a difference array in time (a span adds its
    // bytes at its first time bin and takes them away after its last), and spans starting in
    // each address bin (to choose the detail range).
    let cells = time_bins * address_bins;
    let mut change = vec![[0f64; 4]; (time_bins + 1) * address_bins];
    let mut starting = vec![0u64; address_bins];
    let index_of = |seq: i64| seqs.partition_point(|&known| known < seq).min(count - 1);
    let mut statement = conn
        .prepare("SELECT first_seq, last_seq, offset, size, state FROM allocation_span WHERE memory_id = ?1")
        .map_err(query_error)?;
    let mut rows = statement.query([memory_id]).map_err(query_error)?;
    while let Some(row) = rows.next().map_err(query_error)? {
        let first: i64 = row.get(0).map_err(query_error)?;
        let last: Option<i64> = row.get(1).map_err(query_error)?;
        let offset = to_u64(row.get(2).map_err(query_error)?);
        let size = to_u64(row.get(3).map_err(query_error)?);
        let state = (row.get::<_, i64>(4).map_err(query_error)?).clamp(0, 3) as usize;
        let (from, to) = (
            time_bin(index_of(first)),
            time_bin(last.map_or(count - 1, index_of)),
        );
        starting[address.of(offset)] += 1;
        for (bin, bytes) in address.spread(offset, size) {
            change[from * address_bins + bin][state] += bytes;
            change[(to + 1) * address_bins + bin][state] -= bytes;
        }
    }
    let mut running = vec![[0f64; 4]; address_bins];
    let mut out = Vec::new();
    for time in 0..time_bins {
        for bin in 0..address_bins {
            for state in 0..4 {
                running[bin][state] += change[time * address_bins + bin][state];
            }
            let held = &running[bin];
            let used: f64 = held.iter().map(|bytes| bytes.max(0.0)).sum();
            if used <= 0.5 {
                continue;
            }
            let share = address.share_percent(used);
            out.push((time as u16, bin as u16, dominant(held) as u8, share));
        }
    }
    debug_assert!(out.len() <= cells);
    // The detail range: address bins grown from the focus (or the bin where most spans start)
    // while the spans starting in them fit.
    let centre = match focus {
        Some((start, end)) => address.of(start + (end.saturating_sub(start)) / 2),
        None => (0..address_bins)
            .max_by_key(|&bin| starting[bin])
            .unwrap_or(0),
    };
    let (mut low, mut high) = (centre, centre);
    let mut kept = starting[centre];
    loop {
        let left = (low > 0).then(|| starting[low - 1]);
        let right = (high + 1 < address_bins).then(|| starting[high + 1]);
        let grow_left = match (left, right) {
            (Some(l), Some(r)) => l <= r,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let add = if grow_left { left } else { right }.unwrap_or(0);
        if kept + add > detail_spans {
            break;
        }
        kept += add;
        if grow_left {
            low -= 1;
        } else {
            high += 1;
        }
    }
    let detail = (
        address.start(low),
        if high + 1 == address_bins {
            extent
        } else {
            address.start(high + 1)
        },
    );
    let mut time_edges: Vec<f64> = (0..time_bins)
        .map(|bin| {
            let index = (bin * count).div_ceil(time_bins);
            snapshots
                .get(index.min(count - 1))
                .map_or(0.0, |snapshot| snapshot.1)
        })
        .collect();
    time_edges.push(end_at(count - 1));
    Ok(HistorySummary {
        total_spans: total,
        detail,
        time_edges,
        address_bins,
        extent,
        cells: out,
    })
}

/// The spans of a memory's allocations that cross `[from, to)` and live in the time window
/// `[since_s, until_s)`: all of them when at most `limit`, else only how many there are.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanWindow {
    pub from: u64,
    pub to: u64,
    pub since_s: Option<f64>,
    pub until_s: Option<f64>,
    pub total: u64,
    pub spans: Option<Vec<HistorySpan>>,
}

/// The spans of `memory_id` crossing `[from, to)` (the address band a served page zoomed to),
/// each placed in time as [`history`] places them; with `times`, only those whose drawn extent
/// meets that window of seconds (`[since, until)`).
pub fn spans_in(
    conn: &Connection,
    memory_id: i64,
    (from, to): (u64, u64),
    times: Option<(f64, f64)>,
    limit: u64,
) -> Result<SpanWindow> {
    let (_, node, _, _, run_id) = memory_of(conn, memory_id)?;
    let timeline = Timeline::of(conn, run_id, node)?;
    let mut band = Band::addresses(
        i64::try_from(from).unwrap_or(i64::MAX),
        i64::try_from(to).unwrap_or(i64::MAX),
    );
    if let Some((since, until)) = times {
        // A span is drawn from its first snapshot's time to the next snapshot after its last: it
        // meets [since, until) when its first snapshot is before `until` and its last is at or
        // after the last snapshot at or before `since` (any, when none is).
        let last_seq = |keep: &dyn Fn(f64) -> bool| {
            timeline
                .snapshots
                .iter()
                .zip(&timeline.seqs)
                .filter(|((_, at, _), _)| keep(*at))
                .map(|(_, seq)| *seq)
                .next_back()
        };
        band.since_seq = last_seq(&|at| at <= since).unwrap_or(i64::MIN);
        band.until_seq = last_seq(&|at| at < until).unwrap_or(i64::MIN);
    }
    let mut window = SpanWindow {
        from,
        to,
        since_s: times.map(|(since, _)| since),
        until_s: times.map(|(_, until)| until),
        total: band_count(conn, memory_id, band)?,
        spans: None,
    };
    if window.total <= limit {
        window.spans = Some(spans_between(
            conn, memory_id, run_id, band, limit, &timeline,
        )?);
    }
    Ok(window)
}
