//! The interactive memory map: one self-contained HTML file (inline script and style, no network)
//! that draws each memory of one or more snapshots on a canvas, with zoom, pan, tooltips, a
//! legend, a memory chooser, a snapshot slider and the largest holes; a failed request's cheapest
//! window and its blockers marked, with the verdict in a panel; and optionally the history of a
//! memory: address against time, each allocation a rectangle over the snapshots it lived through.
//!
//! The data is embedded as compact JSON: repeated strings in one table, allocations as flat arrays
//! of 8 values (offset, size, state, kind, provenance, label, uid, objects) and history spans as
//! flat arrays of 12, so tens of thousands of them stay small and quick to load. The page draws
//! only what is in view and merges what is narrower than a pixel.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::analysis::bins::{dominant, AddressBins};
use crate::analysis::{History, Layout};
use crate::dump::State;

const TEMPLATE: &str = include_str!("map.html");

/// One snapshot's memories, as a step of the slider.
pub struct Frame {
    pub snapshot_id: i64,
    pub label: String,
    pub layouts: Vec<Layout>,
}

/// A request drawn on a memory: a failed one (an OOM) or one the user asked about (`blockers`).
#[derive(Debug, Clone)]
pub struct Marked {
    pub snapshot_id: i64,
    pub handle: String,
    pub size: u64,
    /// Whether the request failed (an OOM), rather than one asked about.
    pub failed: bool,
    /// The cheapest window for it, `[start, end)`.
    pub window: Option<(u64, u64)>,
    /// The uids of the allocations that block it there.
    pub blockers: Vec<String>,
    /// One line: what happened and what to do.
    pub verdict: String,
}

/// A page served by `memstate serve`: it holds a few allocations per memory (about what the
/// screen shows) and asks `window_api` for the allocations in view as the user zooms.
#[derive(Debug, Clone, Copy)]
pub struct Served<'a> {
    /// The path of the window endpoint (`/api/window`).
    pub window_api: &'a str,
    /// The most allocations the page holds one by one, over all its memories.
    pub detail_budget: usize,
}

/// What a page shows, and where it opens.
pub struct Page<'a> {
    pub title: &'a str,
    pub frames: &'a [Frame],
    pub marked: &'a [Marked],
    pub histories: &'a [History],
    /// The memory (handle) and snapshot the page opens on; without one, the most fragmented memory
    /// of the last snapshot.
    pub focus: Option<(String, i64)>,
    /// Served, with the API as a second source of allocations (`None`: a file that holds all it
    /// shows, up to [`PAGE_DETAIL_ALLOCATIONS`]).
    pub served: Option<Served<'a>>,
}

struct Strings {
    table: Vec<String>,
    index: HashMap<String, usize>,
}

impl Strings {
    /// The id of a text in the page's strings (-1 for none).
    fn index(&mut self, text: Option<&str>) -> i64 {
        match text {
            None => -1,
            Some(text) => {
                let next = self.table.len();
                let id = *self.index.entry(text.to_string()).or_insert(next);
                if id == next {
                    self.table.push(text.to_string());
                }
                i64::try_from(id).unwrap_or(i64::MAX)
            }
        }
    }

    fn id(&mut self, text: Option<&str>) -> Value {
        json!(self.index(text))
    }
}

/// A memory's key in the page: the same memory in another snapshot has the same key.
fn memory_key(run: &str, node: i64, handle: &str) -> String {
    format!("{run}/{node}/{handle}")
}

fn short_uid(uid: &str) -> String {
    let digits = uid.trim_start_matches("0x").trim_start_matches('0');
    if digits.is_empty() {
        "0".to_string()
    } else {
        digits.to_string()
    }
}

/// The most allocations a page draws one by one, over all its snapshots and memories: about 40
/// bytes each in the page, so a page stays under 20 MiB however large the memories are.
pub const PAGE_DETAIL_ALLOCATIONS: usize = 150_000;

/// The most memories a page holds in all its snapshots (each costs about 700 bytes of the page
/// before its allocations); past it, the page keeps those with a marked request, the one it opens
/// on and the most fragmented, and says how many it left out.
pub const PAGE_MEMORIES: usize = 10_000;

/// The memories (by key) a page keeps when its frames hold more than [`PAGE_MEMORIES`].
fn kept_memories(page: &Page) -> Option<std::collections::HashSet<String>> {
    let total: usize = page.frames.iter().map(|frame| frame.layouts.len()).sum();
    if total <= PAGE_MEMORIES {
        return None;
    }
    let per_frame = (PAGE_MEMORIES / page.frames.len().max(1)).max(1);
    let mut wanted: Vec<(bool, f64, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for frame in page.frames {
        for layout in &frame.layouts {
            let key = memory_key(&layout.run, layout.node, &layout.handle);
            if !seen.insert(key.clone()) {
                continue;
            }
            let chosen = page
                .marked
                .iter()
                .any(|marked| marked.handle == layout.handle)
                || page
                    .focus
                    .as_ref()
                    .is_some_and(|(handle, _)| handle == &layout.handle);
            wanted.push((chosen, layout.fragmentation(), key));
        }
    }
    wanted.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(&b.2)));
    Some(
        wanted
            .into_iter()
            .take(per_frame)
            .map(|(_, _, key)| key)
            .collect(),
    )
}

/// A memory with at most this many allocations is always drawn whole.
const ALWAYS_WHOLE: usize = 64;

/// Address bins of a summarized memory, and the holes it keeps (its largest) outside the range
/// drawn whole.
const MAP_BINS: usize = 1024;
const SUMMARY_HOLES: usize = 100;

/// How many allocations of each layout (frame by frame) the page draws one by one: all of them
/// while the page's budget allows; else every layout gets the same share, small ones all theirs.
fn detail_caps(frames: &[Frame], budget: usize) -> Vec<Vec<usize>> {
    let counts: Vec<usize> = frames
        .iter()
        .flat_map(|frame| frame.layouts.iter().map(|layout| layout.allocations.len()))
        .collect();
    let total: usize = counts.iter().sum();
    let cap = if total <= budget {
        usize::MAX
    } else {
        // Water filling: the share that spends the budget when small layouts keep all of theirs.
        let mut sorted = counts.clone();
        sorted.sort_unstable();
        let mut left = budget;
        let mut share = ALWAYS_WHOLE;
        for (index, &count) in sorted.iter().enumerate() {
            let rest = sorted.len() - index;
            let fair = left / rest;
            if count > fair {
                share = fair.max(ALWAYS_WHOLE);
                break;
            }
            left -= count;
        }
        share
    };
    frames
        .iter()
        .map(|frame| {
            frame
                .layouts
                .iter()
                .map(|layout| layout.allocations.len().min(cap.max(ALWAYS_WHOLE)))
                .collect()
        })
        .collect()
}

/// A memory with more allocations than it may draw: the allocations kept whole (a stretch of
/// `cap` of them around `focus`), and the rest summarized in address bins (the state holding
/// most bytes, how full, how many allocations).
fn summarize_layout<'l>(
    layout: &'l Layout,
    ordered: &[&'l crate::analysis::AllocationInfo],
    cap: usize,
    focus: u64,
) -> (std::ops::Range<usize>, Value) {
    let at = ordered.partition_point(|allocation| allocation.offset < focus);
    let first = at
        .saturating_sub(cap / 2)
        .min(ordered.len().saturating_sub(cap));
    let kept = first..(first + cap).min(ordered.len());
    let low = ordered
        .get(kept.start)
        .map_or(0, |allocation| allocation.offset);
    let high = ordered[kept.clone()]
        .iter()
        .map(|allocation| allocation.offset.saturating_add(allocation.size))
        .max()
        .unwrap_or(low);
    let address = AddressBins::new(layout.capacity, MAP_BINS);
    let mut bins = vec![([0f64; 4], 0u32); MAP_BINS];
    for (index, allocation) in ordered.iter().enumerate() {
        if kept.contains(&index) {
            continue;
        }
        bins[address.of(allocation.offset)].1 += 1;
        for (bin, bytes) in address.spread(allocation.offset, allocation.size) {
            bins[bin].0[allocation.state.code() as usize] += bytes;
        }
    }
    let mut flat = Vec::new();
    for (bin, (bytes, count)) in bins.iter().enumerate() {
        let used: f64 = bytes.iter().sum();
        if used <= 0.0 {
            continue;
        }
        flat.extend([
            bin as f64,
            dominant(bytes) as f64,
            f64::from(address.share_percent(used)),
            f64::from(*count),
        ]);
    }
    let summary = json!({
        "total": ordered.len(),
        "detail": [low, high],
        "bins": MAP_BINS,
        "c": flat,
    });
    (kept, summary)
}

fn frame_json(frame: &Frame, caps: &[usize], marked: &[Marked], strings: &mut Strings) -> Value {
    let memories: Vec<Value> = frame
        .layouts
        .iter()
        .zip(caps)
        .map(|(layout, &cap)| {
            // By offset, and a pending_alloc after the pending_free it shares a start with, so the
            // page draws it on top.
            let mut ordered: Vec<_> = layout.allocations.iter().collect();
            ordered.sort_by_key(|allocation| (allocation.offset, allocation.state == State::PendingAlloc));
            // Too many to draw one by one: a stretch around the request marked on it (else its
            // largest hole) kept whole, the rest summarized.
            let (kept, summary) = if cap < ordered.len() {
                let focus = marked
                    .iter()
                    .filter(|marked| marked.snapshot_id == frame.snapshot_id && marked.handle == layout.handle)
                    .find_map(|marked| marked.window)
                    .map(|(start, end)| start + (end - start) / 2)
                    .or_else(|| layout.holes.iter().max_by_key(|hole| hole.size).map(|hole| hole.offset))
                    .unwrap_or(0);
                let (kept, summary) = summarize_layout(layout, &ordered, cap, focus);
                (kept, Some(summary))
            } else {
                (0..ordered.len(), None)
            };
            let mut flat = Vec::with_capacity(kept.len() * 8);
            for allocation in &ordered[kept] {
                let objects = (!allocation.objects.is_empty()).then(|| allocation.objects.join(", "));
                flat.push(json!(allocation.offset));
                flat.push(json!(allocation.size));
                flat.push(json!(allocation.state.code()));
                flat.push(strings.id(Some(&allocation.kind)));
                flat.push(strings.id(allocation.provenance.as_deref()));
                flat.push(strings.id(allocation.label.as_deref()));
                flat.push(json!(short_uid(&allocation.uid)));
                flat.push(strings.id(objects.as_deref()));
            }
            // A summarized memory keeps the holes in the range drawn whole and its largest.
            let holes: Vec<u64> = match &summary {
                None => layout.holes.iter().flat_map(|hole| [hole.offset, hole.size]).collect(),
                Some(summary) => {
                    let (low, high) = (summary["detail"][0].as_u64().unwrap_or(0), summary["detail"][1].as_u64().unwrap_or(0));
                    let mut largest: Vec<_> = layout.holes.iter().collect();
                    largest.sort_by(|a, b| b.size.cmp(&a.size).then(a.offset.cmp(&b.offset)));
                    let mut kept: Vec<_> = largest.iter().take(SUMMARY_HOLES).copied()
                        .chain(layout.holes.iter().filter(|hole| hole.offset < high && hole.offset.saturating_add(hole.size) > low))
                        .collect();
                    kept.sort_by_key(|hole| hole.offset);
                    kept.dedup_by_key(|hole| hole.offset);
                    kept.iter().flat_map(|hole| [hole.offset, hole.size]).collect()
                }
            };
            let unaccounted: Vec<u64> = layout.unaccounted().iter().flat_map(|range| [range.offset, range.size]).collect();
            json!({
                "key": memory_key(&layout.run, layout.node, &layout.handle),
                "handle": layout.handle,
                "label": format!("node {} · {} · {} · seq {}", layout.node, layout.handle, layout.kind, layout.seq),
                "capacity": layout.capacity,
                "used": layout.used_bytes(),
                "free": layout.known_free(),
                "largest": layout.known_largest_hole(),
                "fragmentation": layout.unknown.holes_known().then(|| layout.fragmentation()),
                "reclaimable": layout.known_largest_reclaimable(),
                "unknown": layout.unknown.names(),
                "h": holes,
                "hc": layout.holes.len(),
                "u": unaccounted,
                "a": flat,
                "g": summary,
            })
        })
        .collect();
    json!({"snapshot": frame.snapshot_id, "label": frame.label, "time": frame.layouts.first().map(|layout| layout.time_ns as f64 / 1e9), "memories": memories})
}

/// A history as the page holds it. Typed, not a `Value`: a summarized history has up to 240,000
/// cells and 100,000 spans, and a `Value` per number made the served map page 150 ms of JSON.
#[derive(serde::Serialize)]
struct HistoryData {
    key: String,
    label: String,
    capacity: u64,
    /// (snapshot id, time in seconds, whether an OOM dump).
    snapshots: Vec<(i64, f64, bool)>,
    /// Twelve numbers a span: from, to, offset, size, state, kind, provenance, label, uid,
    /// objects, first snapshot, last snapshot (texts as ids into the page's strings).
    s: FlatSpans,
    g: Option<GridData>,
}

/// The spans of a history, flattened as the page reads them.
struct FlatSpans(Vec<FlatSpan>);

/// One span as the page reads it: its numbers, and its texts as ids into the page's strings.
struct FlatSpan {
    from_s: f64,
    to_s: f64,
    offset: u64,
    size: u64,
    state: i64,
    kind: i64,
    provenance: i64,
    label: i64,
    uid: String,
    objects: i64,
    first_snapshot_id: i64,
    last_snapshot_id: i64,
}

impl serde::Serialize for FlatSpans {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.0.len() * 12))?;
        for span in &self.0 {
            seq.serialize_element(&span.from_s)?;
            seq.serialize_element(&span.to_s)?;
            seq.serialize_element(&span.offset)?;
            seq.serialize_element(&span.size)?;
            seq.serialize_element(&span.state)?;
            seq.serialize_element(&span.kind)?;
            seq.serialize_element(&span.provenance)?;
            seq.serialize_element(&span.label)?;
            seq.serialize_element(&span.uid)?;
            seq.serialize_element(&span.objects)?;
            seq.serialize_element(&span.first_snapshot_id)?;
            seq.serialize_element(&span.last_snapshot_id)?;
        }
        seq.end()
    }
}

/// A summarized history's grid, and where its spans are whole.
#[derive(serde::Serialize)]
struct GridData {
    total: u64,
    detail: [u64; 2],
    times: Vec<f64>,
    bins: usize,
    extent: u64,
    /// Four numbers a cell: time bin, address bin, state, share allocated in percent.
    c: Vec<u16>,
}

fn history_json(history: &History, strings: &mut Strings) -> HistoryData {
    let spans = history
        .spans
        .iter()
        .map(|span| FlatSpan {
            from_s: span.from_s,
            to_s: span.to_s,
            offset: span.offset,
            size: span.size,
            state: span.state.code(),
            kind: strings.index(Some(&span.kind)),
            provenance: strings.index(span.provenance.as_deref()),
            label: strings.index(span.label.as_deref()),
            uid: short_uid(&span.uid),
            objects: strings.index(span.objects.as_deref()),
            first_snapshot_id: span.first_snapshot_id,
            last_snapshot_id: span.last_snapshot_id,
        })
        .collect();
    let grid = history.summary.as_ref().map(|summary| GridData {
        total: summary.total_spans,
        detail: [summary.detail.0, summary.detail.1],
        times: summary.time_edges.clone(),
        bins: summary.address_bins,
        extent: summary.extent,
        c: summary
            .cells
            .iter()
            .flat_map(|&(time, address, state, share)| {
                [time, address, u16::from(state), u16::from(share)]
            })
            .collect(),
    });
    HistoryData {
        key: memory_key(&history.run, history.node, &history.handle),
        label: format!(
            "node {} · {} · {}",
            history.node, history.handle, history.kind
        ),
        capacity: history.capacity,
        snapshots: history.snapshots.clone(),
        s: FlatSpans(spans),
        g: grid,
    }
}

/// The page.
/// What the page's script reads as `DATA`.
#[derive(serde::Serialize)]
struct PageData<'a> {
    title: &'a str,
    strings: &'a [String],
    snapshots: Vec<Value>,
    marked: Vec<Value>,
    histories: Vec<HistoryData>,
    focus: Option<Value>,
    omitted: usize,
    api: Option<&'a str>,
}

pub fn render(page: &Page) -> String {
    let mut strings = Strings {
        table: Vec::new(),
        index: HashMap::new(),
    };
    // Too many memories for one page: the frames keep the ones that matter.
    let kept = kept_memories(page);
    let trimmed: Vec<Frame>;
    let mut omitted = 0usize;
    let page = match &kept {
        None => page,
        Some(kept) => {
            trimmed = page
                .frames
                .iter()
                .map(|frame| Frame {
                    snapshot_id: frame.snapshot_id,
                    label: frame.label.clone(),
                    layouts: frame
                        .layouts
                        .iter()
                        .filter(|layout| {
                            let keep = kept.contains(&memory_key(
                                &layout.run,
                                layout.node,
                                &layout.handle,
                            ));
                            omitted += usize::from(!keep);
                            keep
                        })
                        .cloned()
                        .collect(),
                })
                .collect();
            &Page {
                title: page.title,
                frames: &trimmed,
                marked: page.marked,
                histories: page.histories,
                focus: page.focus.clone(),
                served: page.served,
            }
        }
    };
    let budget = page
        .served
        .map_or(PAGE_DETAIL_ALLOCATIONS, |served| served.detail_budget);
    let caps = detail_caps(page.frames, budget);
    let snapshots: Vec<Value> = page
        .frames
        .iter()
        .zip(&caps)
        .map(|(frame, caps)| frame_json(frame, caps, page.marked, &mut strings))
        .collect();
    let histories: Vec<HistoryData> = page
        .histories
        .iter()
        .map(|history| history_json(history, &mut strings))
        .collect();
    let marked: Vec<Value> = page
        .marked
        .iter()
        .map(|marked| {
            json!({
                "snapshot": marked.snapshot_id,
                "handle": marked.handle,
                "size": marked.size,
                "failed": marked.failed,
                "window": marked.window.map(|(start, end)| vec![start, end]),
                "blockers": marked.blockers.iter().map(|uid| short_uid(uid)).collect::<Vec<_>>(),
                "verdict": marked.verdict,
            })
        })
        .collect();
    let focus = page
        .focus
        .as_ref()
        .map(|(handle, snapshot)| json!({"handle": handle, "snapshot": snapshot}));
    let api = page.served.map(|served| served.window_api);
    let data = PageData {
        title: page.title,
        strings: &strings.table,
        snapshots,
        marked,
        histories,
        focus,
        omitted,
        api,
    };
    // Inside a <script> element "</script" would close it and "<!--" would change how the rest is
    // parsed: no "<" of the data reaches the page as such (JSON reads \u003c as the same "<").
    let embedded = serde_json::to_string(&data)
        .unwrap_or_else(|_| "null".to_string())
        .replace('<', "\\u003c");
    TEMPLATE
        .replacen("__MEMSTATE_DATA__", &embedded, 1)
        .replacen(
            "<title>memstate map</title>",
            &format!(
                "<title>{}</title>",
                crate::present::html::escape(page.title)
            ),
            1,
        )
}

/// A page of frames alone (no request marked, no history).
pub fn render_frames(title: &str, frames: &[Frame]) -> String {
    render(&Page {
        title,
        frames,
        marked: &[],
        histories: &[],
        focus: None,
        served: None,
    })
}
