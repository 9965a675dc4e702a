//! The pages `map --html`, `oom --html` and the demo write, gathered from the database: the
//! frames (each selected memory of each snapshot), the failures marked on them, and the
//! histories; drawn by [`crate::viz::page`].

use rusqlite::Connection;

use super::{context, history, load, select};
use crate::analysis::History;
use crate::story::Story;
use crate::viz::html;
use crate::viz::page::{frame_label, marked_failure, most_fragmented, PageParts};
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

/// The history a page written to a file draws: up to [`history::HISTORY_DETAIL_SPANS`] spans
/// whole (a page's `history` argument is the most spans it keeps whole, `None` for no history).
pub const FILE_HISTORY: Option<u64> = Some(history::HISTORY_DETAIL_SPANS);

/// The page about failures: each failing node's last snapshots (the memories `memory` names), every
/// failure marked, opening on the first; with `history`, each failed memory over its run.
pub fn failure_page(
    conn: &Connection,
    stories: &[Story],
    memory: Option<&str>,
    history: Option<u64>,
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
    let histories = if let Some(spans) = history {
        let memory_ids = stories
            .iter()
            .map(|story| story.finding.memory_id)
            .collect();
        histories(conn, memory_ids, &frames, &marked, spans)?
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
    spans: u64,
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
        .map(|memory_id| history::history_within(conn, memory_id, window_of(memory_id), spans))
        .collect()
}

/// A page of chosen snapshots: the failures among them marked, opening on the first failure, else
/// on the most fragmented memory of the last snapshot.
fn snapshot_page(
    conn: &Connection,
    snapshot_ids: &[i64],
    stories: &[Story],
    memory: Option<&str>,
    history: Option<u64>,
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
    let histories = if let Some(spans) = history {
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
        histories(conn, memory_ids, &frames, &marked, spans)?
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
    history: Option<u64>,
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
    let stories = context::stories(conn, &failed)?;
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
