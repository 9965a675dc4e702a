//! Every HTML page memstate writes is assembled here and rendered by [`crate::viz::html`]: the
//! frames (each selected memory of each snapshot), the requests marked on them (failed ones, or
//! one asked about), the histories, and where the page opens, with the deep link to a memory,
//! snapshot and range of it.

use std::path::Path;

use rusqlite::Connection;

use super::{Placement, Story};
use crate::analysis::{Blockers, History, Layout, Verdict};
use crate::query::{history, load, select};
use crate::units::human;
use crate::viz::html;
use crate::Result;

/// How many snapshots of the failing node a page about a failure holds, the failure's last.
pub const FAILURE_FRAMES: u32 = 10;

/// Every selected memory of each snapshot, as the slider's frames.
pub fn frames(
    conn: &Connection,
    snapshot_ids: &[i64],
    memory: Option<&str>,
) -> Result<Vec<html::Frame>> {
    let mut frames = Vec::new();
    for &snapshot_id in snapshot_ids {
        let memory_ids = select::memory_ids(conn, snapshot_id, memory)?;
        let layouts = load::layouts(conn, snapshot_id, &memory_ids)?;
        if let Some(first) = layouts.first() {
            frames.push(html::Frame {
                snapshot_id,
                label: frame_label(first),
                layouts,
            });
        }
    }
    Ok(frames)
}

/// A failed request as the page marks it.
pub fn marked_failure(story: &Story) -> html::Marked {
    let finding = &story.finding;
    let verdict = match finding.verdict {
        Verdict::Exhaustion => "Exhaustion",
        Verdict::Fragmentation => "Fragmentation",
        Verdict::Fits => "Fits now",
        Verdict::CannotTell => "Cannot tell",
    };
    html::Marked {
        snapshot_id: finding.snapshot_id,
        handle: finding.handle.clone(),
        size: finding.size,
        window: finding
            .blockers
            .as_ref()
            .map(|blockers| (blockers.offset, blockers.end())),
        blockers: blocker_uids(finding.blockers.as_ref()),
        failed: true,
        verdict: format!("{verdict}. {}", capitalized(&story.advice)),
    }
}

/// A request the user asked about (`blockers --size`) as the page marks it.
pub fn marked_request(placement: &Placement) -> html::Marked {
    let size = placement.size;
    let verdict = match (&placement.fits_now, &placement.blockers) {
        (Some(fits), _) => format!(
            "a request of {} fits now, in a free hole of {}",
            human(size),
            human(fits.hole_size)
        ),
        (None, Some(blockers)) if blockers.blocking.is_empty() && blockers.unaccounted_bytes == 0 => {
            format!("a request of {} fits here once collection and pending releases have run", human(size))
        }
        (None, Some(blockers)) => format!(
            "{} of the cheapest place cannot be freed by collection; moving or freeing its {} blocking allocations opens {}",
            human(blockers.blocked_bytes),
            blockers.blocking.len(),
            human(blockers.opens)
        ),
        (None, None) => format!(
            "a request of {} is larger than the whole memory ({})",
            human(size),
            human(placement.layout.capacity)
        ),
    };
    html::Marked {
        snapshot_id: placement.layout.snapshot_id,
        handle: placement.layout.handle.clone(),
        size,
        window: placement.window(),
        blockers: blocker_uids(placement.blockers.as_ref()),
        failed: false,
        verdict: capitalized(&verdict),
    }
}

/// The uids of the allocations in the way, outlined on the page.
fn blocker_uids(blockers: Option<&Blockers>) -> Vec<String> {
    blockers.map_or_else(Vec::new, |blockers| {
        blockers
            .blocking
            .iter()
            .map(|allocation| allocation.uid.clone())
            .collect()
    })
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The fragment that opens a page on a memory of a snapshot, zoomed to a window and some of its
/// surroundings (within the memory's `capacity`) when there is one:
/// `#memory=0x1e00000000000002&snapshot=34&range=A:B`.
pub fn fragment(
    handle: &str,
    snapshot_id: i64,
    window: Option<(u64, u64)>,
    capacity: u64,
) -> String {
    let mut fragment = format!("#memory={handle}&snapshot={snapshot_id}");
    if let Some((start, end)) = window {
        // Computed wide: a window may span almost all of a memory of nearly 2^63 bytes.
        let margin = (u128::from(end.saturating_sub(start)) * 3 / 10) as u64;
        fragment.push_str(&format!(
            "&range={}:{}",
            start.saturating_sub(margin),
            end.saturating_add(margin).min(capacity.max(end))
        ));
    }
    fragment
}

/// A page's file as a `file://` URL a terminal or browser opens (absolute, unsafe bytes escaped).
pub fn file_url(path: &Path) -> String {
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut url = String::from("file://");
    for byte in absolute.display().to_string().bytes() {
        match byte {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'/'
            | b'-'
            | b'_'
            | b'.'
            | b'~'
            | b'+'
            | b','
            | b'='
            | b'@'
            | b':' => url.push(byte as char),
            other => url.push_str(&format!("%{other:02X}")),
        }
    }
    url
}

/// What a page holds and where it opens.
pub struct PageParts {
    pub frames: Vec<html::Frame>,
    pub marked: Vec<html::Marked>,
    pub histories: Vec<History>,
    pub focus: Option<(String, i64)>,
}

impl PageParts {
    pub fn render(&self, title: &str) -> String {
        html::render(&html::Page {
            title,
            frames: &self.frames,
            marked: &self.marked,
            histories: &self.histories,
            focus: self.focus.clone(),
        })
    }

    /// The link to where the page opens: the failure's window, else the focused memory.
    pub fn opening_fragment(&self) -> Option<String> {
        let (handle, snapshot_id) = self.focus.as_ref()?;
        let window = self
            .marked
            .iter()
            .find(|marked| &marked.handle == handle && marked.snapshot_id == *snapshot_id)
            .and_then(|marked| marked.window);
        let capacity = self
            .frames
            .iter()
            .filter(|frame| frame.snapshot_id == *snapshot_id)
            .flat_map(|frame| frame.layouts.iter())
            .find(|layout| &layout.handle == handle)
            .map_or(u64::MAX, |layout| layout.capacity);
        Some(fragment(handle, *snapshot_id, window, capacity))
    }
}

/// The page about failures: each failing node's last snapshots (the memories `memory` names), every
/// failure marked, opening on the first; with `history`, each failed memory over its run.
pub fn failure_page(
    conn: &Connection,
    stories: &[Story],
    memory: Option<&str>,
    history: bool,
) -> Result<PageParts> {
    let mut ids = Vec::new();
    for story in stories {
        ids.extend(select::node_snapshots_up_to(
            conn,
            story.finding.snapshot_id,
            FAILURE_FRAMES,
        )?);
    }
    ids.sort_unstable();
    ids.dedup();
    let frames = frames(conn, &ids, memory)?;
    let marked: Vec<html::Marked> = stories.iter().map(marked_failure).collect();
    let focus = stories
        .first()
        .map(|story| (story.finding.handle.clone(), story.finding.snapshot_id));
    let histories = if history {
        let memory_ids = stories
            .iter()
            .map(|story| story.finding.memory_id)
            .collect();
        histories(conn, memory_ids, &frames, &marked)?
    } else {
        Vec::new()
    };
    Ok(PageParts {
        frames,
        marked,
        histories,
        focus,
    })
}

/// The history of each memory, each once; a history too long to draw span by span keeps its
/// spans whole around the request marked on that memory (see [`history::history`]).
fn histories(
    conn: &Connection,
    mut memory_ids: Vec<i64>,
    frames: &[html::Frame],
    marked: &[html::Marked],
) -> Result<Vec<History>> {
    memory_ids.sort_unstable();
    memory_ids.dedup();
    let window_of = |memory_id: i64| {
        let handle = frames
            .iter()
            .flat_map(|frame| frame.layouts.iter())
            .find(|layout| layout.memory_id == memory_id)
            .map(|layout| layout.handle.as_str())?;
        marked
            .iter()
            .filter(|marked| marked.handle == handle)
            .find_map(|marked| marked.window)
    };
    memory_ids
        .into_iter()
        .map(|memory_id| history::history(conn, memory_id, window_of(memory_id)))
        .collect()
}

/// The memory with the highest fragmentation in the last frame: where a page without a failure opens.
fn most_fragmented(frames: &[html::Frame]) -> Option<&Layout> {
    frames
        .last()?
        .layouts
        .iter()
        .fold(None, |best: Option<&Layout>, layout| match best {
            Some(best) if best.fragmentation() >= layout.fragmentation() => Some(best),
            _ => Some(layout),
        })
}

/// A page of chosen snapshots: the failures among them marked, opening on the first failure, else
/// on the most fragmented memory of the last snapshot.
fn snapshot_page(
    conn: &Connection,
    snapshot_ids: &[i64],
    stories: &[Story],
    memory: Option<&str>,
    history: bool,
) -> Result<PageParts> {
    let frames = frames(conn, snapshot_ids, memory)?;
    let in_frames = |handle: &str, snapshot_id: i64| {
        frames.iter().any(|frame| {
            frame.snapshot_id == snapshot_id
                && frame.layouts.iter().any(|layout| layout.handle == handle)
        })
    };
    let stories: Vec<&Story> = stories
        .iter()
        .filter(|story| in_frames(&story.finding.handle, story.finding.snapshot_id))
        .collect();
    let marked: Vec<html::Marked> = stories.iter().map(|story| marked_failure(story)).collect();
    let focus = match stories.first() {
        Some(story) => Some((story.finding.handle.clone(), story.finding.snapshot_id)),
        None => most_fragmented(&frames).map(|layout| (layout.handle.clone(), layout.snapshot_id)),
    };
    let histories = if history {
        // The memory the page opens on, and with --memory every memory it names in the last frame.
        let mut memory_ids: Vec<i64> = Vec::new();
        let focused = focus.as_ref().and_then(|(handle, snapshot_id)| {
            frames
                .iter()
                .find(|frame| frame.snapshot_id == *snapshot_id)?
                .layouts
                .iter()
                .find(|layout| &layout.handle == handle)
        });
        memory_ids.extend(focused.map(|layout| layout.memory_id));
        if memory.is_some() {
            memory_ids.extend(
                frames
                    .last()
                    .into_iter()
                    .flat_map(|frame| frame.layouts.iter().map(|layout| layout.memory_id)),
            );
        }
        histories(conn, memory_ids, &frames, &marked)?
    } else {
        Vec::new()
    };
    Ok(PageParts {
        frames,
        marked,
        histories,
        focus,
    })
}

/// Whether a memory selector (an id or a kind) names this memory.
fn selector_matches(selector: &str, handle: &str, kind: &str) -> bool {
    match select::memory_handle(selector) {
        Some(wanted) => wanted == handle,
        None => selector == kind,
    }
}

/// The page `map --html` writes: with no snapshot named (`named` false), the failures in the
/// database among the memories `memory` names, else the snapshots given; with snapshots named,
/// those snapshots with any failure among them marked.
pub fn map_page(
    conn: &Connection,
    snapshot_ids: &[i64],
    named: bool,
    memory: Option<&str>,
    history: bool,
) -> Result<PageParts> {
    let failed = select::oom_snapshots(conn, None)?;
    let failed: Vec<i64> = if named {
        failed
            .into_iter()
            .filter(|id| snapshot_ids.contains(id))
            .collect()
    } else {
        failed
    };
    let stories = super::stories(conn, &failed)?;
    if !named {
        let shown: Vec<Story> = stories
            .into_iter()
            .filter(|story| {
                memory.is_none_or(|memory| {
                    selector_matches(memory, &story.finding.handle, &story.finding.memory_kind)
                })
            })
            .collect();
        if !shown.is_empty() {
            return failure_page(conn, &shown, memory, history);
        }
        // No failure among the memories asked for: the snapshots given, nothing marked.
        return snapshot_page(conn, snapshot_ids, &[], memory, history);
    }
    snapshot_page(conn, snapshot_ids, &stories, memory, history)
}

/// The page about a request asked about (`blockers --size`): each memory looked at, a frame per
/// snapshot, where the request fits now or its cheapest place marked, opening on the first.
pub fn request_page(placements: &[Placement]) -> PageParts {
    let mut frames: Vec<html::Frame> = Vec::new();
    for placement in placements {
        let layout = &placement.layout;
        match frames
            .iter_mut()
            .find(|frame| frame.snapshot_id == layout.snapshot_id)
        {
            Some(frame) => frame.layouts.push(layout.clone()),
            None => frames.push(html::Frame {
                snapshot_id: layout.snapshot_id,
                label: frame_label(layout),
                layouts: vec![layout.clone()],
            }),
        }
    }
    PageParts {
        frames,
        marked: placements.iter().map(marked_request).collect(),
        histories: Vec::new(),
        focus: placements.first().map(|placement| {
            (
                placement.layout.handle.clone(),
                placement.layout.snapshot_id,
            )
        }),
    }
}

/// A frame's label: `run node N seq S (snapshot ID)`.
fn frame_label(layout: &Layout) -> String {
    format!(
        "{} node {} seq {} (snapshot {})",
        layout.run, layout.node, layout.seq, layout.snapshot_id
    )
}
