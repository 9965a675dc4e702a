//! A page as memstate draws it, from what a story or a placement tells and the frames and
//! histories loaded for it (see `crate::query::pages`): the requests marked (failed ones, or one
//! asked about), where the page opens, and the page rendered by [`super::html`].

use crate::analysis::{Blockers, History, Layout, Verdict};
use crate::story::{link, Placement, Story};
use crate::units::human;

use super::html;

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

/// What a page holds and where it opens.
pub struct PageParts {
    pub frames: Vec<html::Frame>,
    pub marked: Vec<html::Marked>,
    pub histories: Vec<History>,
    pub focus: Option<(String, i64)>,
}

impl PageParts {
    pub fn render(&self, title: &str) -> String {
        self.render_as(title, None)
    }

    /// The page as `memstate serve` serves it: `served` says where it asks for allocations.
    pub fn render_as(&self, title: &str, served: Option<html::Served>) -> String {
        html::render(&html::Page {
            title,
            frames: &self.frames,
            marked: &self.marked,
            histories: &self.histories,
            focus: self.focus.clone(),
            served,
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
        Some(link::fragment(handle, *snapshot_id, window, capacity))
    }
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

/// The memory with the highest fragmentation in the last frame: where a page without a failure opens.
pub fn most_fragmented(frames: &[html::Frame]) -> Option<&Layout> {
    frames
        .last()?
        .layouts
        .iter()
        .fold(None, |best: Option<&Layout>, layout| match best {
            Some(best) if best.fragmentation() >= layout.fragmentation() => Some(best),
            _ => Some(layout),
        })
}

/// A frame's label: `run node N seq S (snapshot ID)`.
pub fn frame_label(layout: &Layout) -> String {
    format!(
        "{} node {} seq {} (snapshot {})",
        layout.run, layout.node, layout.seq, layout.snapshot_id
    )
}
