//! The interactive memory map: one self-contained HTML file (inline script and style, no network)
//! that draws each memory of one or more snapshots on a canvas, with zoom, pan, tooltips, a
//! legend, a memory chooser, a snapshot slider and the largest holes.
//!
//! The data is embedded as compact JSON: repeated strings in one table, allocations as flat arrays
//! of 8 values (offset, size, state, kind, provenance, label, uid, objects), so tens of thousands
//! of allocations stay small and quick to load. The page draws only what is in view and merges
//! allocations narrower than a pixel.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::analysis::Layout;
use crate::dump::State;

const TEMPLATE: &str = include_str!("map.html");

/// One snapshot's memories, as a step of the slider.
pub struct Frame {
    pub label: String,
    pub layouts: Vec<Layout>,
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

/// The page for `frames`, titled `title`.
pub fn render(title: &str, frames: &[Frame]) -> String {
    let mut strings = Strings { table: Vec::new(), index: HashMap::new() };
    let snapshots: Vec<Value> = frames
        .iter()
        .map(|frame| {
            let memories: Vec<Value> = frame
                .layouts
                .iter()
                .map(|layout| {
                    let mut flat = Vec::with_capacity(layout.allocations.len() * 8);
                    // By offset, and a pending_alloc after the pending_free it shares a start with,
                    // so the page draws it on top.
                    let mut ordered: Vec<_> = layout.allocations.iter().collect();
                    ordered.sort_by_key(|allocation| (allocation.offset, allocation.state == State::PendingAlloc));
                    for allocation in ordered {
                        let uid = allocation.uid.trim_start_matches("0x").trim_start_matches('0');
                        let objects = (!allocation.objects.is_empty()).then(|| allocation.objects.join(", "));
                        flat.push(json!(allocation.offset));
                        flat.push(json!(allocation.size));
                        flat.push(json!(allocation.state.code()));
                        flat.push(strings.id(Some(&allocation.kind)));
                        flat.push(strings.id(allocation.provenance.as_deref()));
                        flat.push(strings.id(allocation.label.as_deref()));
                        flat.push(json!(if uid.is_empty() { "0" } else { uid }));
                        flat.push(strings.id(objects.as_deref()));
                    }
                    let holes: Vec<u64> = layout.holes.iter().flat_map(|hole| [hole.offset, hole.size]).collect();
                    let unaccounted: Vec<u64> = layout.unaccounted().iter().flat_map(|range| [range.offset, range.size]).collect();
                    let used = layout.used_bytes();
                    json!({
                        "key": format!("{}/{}/{}", layout.run, layout.node, layout.handle),
                        "label": format!("node {} · {} · {} · seq {}", layout.node, layout.handle, layout.kind, layout.seq),
                        "capacity": layout.capacity,
                        "used": used,
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
            json!({"label": frame.label, "memories": memories})
        })
        .collect();
    let data = json!({"title": title, "strings": strings.table, "snapshots": snapshots});
    // Inside a <script> element "</script" would close it and "<!--" would change how the rest is
    // parsed: no "<" of the data reaches the page as such (JSON reads \u003c as the same "<").
    let embedded = data.to_string().replace('<', "\\u003c");
    TEMPLATE.replacen("__MEMSTATE_DATA__", &embedded, 1).replacen("<title>memstate map</title>", &format!("<title>{}</title>", escape(title)), 1)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
