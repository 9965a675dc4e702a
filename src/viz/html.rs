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

/// What a page shows, and where it opens.
pub struct Page<'a> {
    pub title: &'a str,
    pub frames: &'a [Frame],
    pub marked: &'a [Marked],
    pub histories: &'a [History],
    /// The memory (handle) and snapshot the page opens on; without one, the most fragmented memory
    /// of the last snapshot.
    pub focus: Option<(String, i64)>,
}

struct Strings {
    table: Vec<String>,
    index: HashMap<String, usize>,
}

impl Strings {
    fn id(&mut self, text: Option<&str>) -> Value {
        match text {
            None => json!(-1),
            Some(text) => {
                let next = self.table.len();
                let id = *self.index.entry(text.to_string()).or_insert(next);
                if id == next {
                    self.table.push(text.to_string());
                }
                json!(id)
            }
        }
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

fn frame_json(frame: &Frame, strings: &mut Strings) -> Value {
    let memories: Vec<Value> = frame
        .layouts
        .iter()
        .map(|layout| {
            let mut flat = Vec::with_capacity(layout.allocations.len() * 8);
            // By offset, and a pending_alloc after the pending_free it shares a start with, so the
            // page draws it on top.
            let mut ordered: Vec<_> = layout.allocations.iter().collect();
            ordered.sort_by_key(|allocation| (allocation.offset, allocation.state == State::PendingAlloc));
            for allocation in ordered {
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
            let holes: Vec<u64> = layout.holes.iter().flat_map(|hole| [hole.offset, hole.size]).collect();
            let unaccounted: Vec<u64> = layout.unaccounted().iter().flat_map(|range| [range.offset, range.size]).collect();
            json!({
                "key": memory_key(&layout.run, layout.node, &layout.handle),
                "handle": layout.handle,
                "label": format!("node {} · {} · {} · seq {}", layout.node, layout.handle, layout.kind, layout.seq),
                "capacity": layout.capacity,
                "used": layout.used_bytes(),
                "free": layout.free_bytes,
                "largest": layout.largest_hole,
                "fragmentation": layout.fragmentation(),
                "reclaimable": layout.largest_reclaimable,
                "h": holes,
                "u": unaccounted,
                "a": flat,
            })
        })
        .collect();
    json!({"snapshot": frame.snapshot_id, "label": frame.label, "time": frame.layouts.first().map(|layout| layout.time_ns as f64 / 1e9), "memories": memories})
}

fn history_json(history: &History, strings: &mut Strings) -> Value {
    let mut flat = Vec::with_capacity(history.spans.len() * 12);
    for span in &history.spans {
        flat.push(json!(span.from_s));
        flat.push(json!(span.to_s));
        flat.push(json!(span.offset));
        flat.push(json!(span.size));
        flat.push(json!(span.state.code()));
        flat.push(strings.id(Some(&span.kind)));
        flat.push(strings.id(span.provenance.as_deref()));
        flat.push(strings.id(span.label.as_deref()));
        flat.push(json!(short_uid(&span.uid)));
        flat.push(strings.id(span.objects.as_deref()));
        flat.push(json!(span.first_snapshot_id));
        flat.push(json!(span.last_snapshot_id));
    }
    let snapshots: Vec<Value> = history
        .snapshots
        .iter()
        .map(|(id, time, oom)| json!([id, time, oom]))
        .collect();
    json!({
        "key": memory_key(&history.run, history.node, &history.handle),
        "label": format!("node {} · {} · {}", history.node, history.handle, history.kind),
        "capacity": history.capacity,
        "snapshots": snapshots,
        "s": flat,
    })
}

/// The page.
pub fn render(page: &Page) -> String {
    let mut strings = Strings {
        table: Vec::new(),
        index: HashMap::new(),
    };
    let snapshots: Vec<Value> = page
        .frames
        .iter()
        .map(|frame| frame_json(frame, &mut strings))
        .collect();
    let histories: Vec<Value> = page
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
    let data = json!({"title": page.title, "strings": strings.table, "snapshots": snapshots, "marked": marked, "histories": histories, "focus": focus});
    // Inside a <script> element "</script" would close it and "<!--" would change how the rest is
    // parsed: no "<" of the data reaches the page as such (JSON reads \u003c as the same "<").
    let embedded = data.to_string().replace('<', "\\u003c");
    TEMPLATE
        .replacen("__MEMSTATE_DATA__", &embedded, 1)
        .replacen(
            "<title>memstate map</title>",
            &format!("<title>{}</title>", escape(page.title)),
            1,
        )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A page of frames alone (no request marked, no history).
pub fn render_frames(title: &str, frames: &[Frame]) -> String {
    render(&Page {
        title,
        frames,
        marked: &[],
        histories: &[],
        focus: None,
    })
}
