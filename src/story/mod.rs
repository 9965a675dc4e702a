//! The stories memstate tells about a memory: why a request failed (verdict, what collection
//! freed before it and would free now, the largest hole against the request over the last
//! snapshots, what blocks the cheapest place, advice), and where a request of a given size would go
//! now. Each is computed once here as a typed result, from what the database holds of it gathered
//! beforehand (`crate::query::context`: this room reads nothing); the terminal ([`text`]), the
//! rows of the machine-readable formats ([`rows`]) and the HTML page (`crate::viz::page`) render
//! it, and commands only parse arguments and print.

pub mod link;
pub mod rows;
pub mod text;

use crate::analysis::cache::Cache;
use crate::analysis::{
    self, AllocationInfo, Blockers, Collected, Layout, OomFinding, Recent, Request,
};

/// A failed request and how it came about.
#[derive(Debug, Clone)]
pub struct Story {
    pub finding: OomFinding,
    /// The node's snapshot before the failure, and what collection freed since (none for a
    /// node's first snapshot).
    pub previous: Option<(i64, Collected)>,
    /// The memory's free bytes and largest hole at its last snapshots, the failure's last.
    pub recent: Vec<Recent>,
    pub advice: String,
    /// The failed memory's capacity.
    pub capacity: u64,
    /// Where to see it: the page's URL and fragment, or how to write the page and the fragment.
    pub link: String,
    /// What the snapshot itself says (a source that could not tell everything says so here).
    pub snapshot_note: Option<String>,
}

impl Story {
    /// The fragment of a map page that opens on this failure's window.
    pub fn fragment(&self) -> String {
        let window = self
            .finding
            .blockers
            .as_ref()
            .map(|blockers| (blockers.offset, blockers.end()));
        link::fragment(
            &self.finding.handle,
            self.finding.snapshot_id,
            window,
            self.capacity,
        )
    }
}

/// Point each story's link into the page at `url`.
pub fn link_stories(stories: &mut [Story], url: &str) {
    for story in stories {
        story.link = format!("{url}{}", story.fragment());
    }
}

/// What a story tells of the memory a request failed in, the same for every request that failed
/// in it at that snapshot: its layout, the allocations of the node's previous snapshot in it (with
/// that snapshot's seq; none for a node's first snapshot), and its recent figures.
#[derive(Debug, Clone)]
pub struct FailedMemory {
    pub layout: Layout,
    pub previous: Option<(i64, Vec<AllocationInfo>)>,
    pub recent: Vec<Recent>,
}

/// Everything a failed request's story is told from, gathered from the database beforehand.
#[derive(Debug, Clone)]
pub struct Failure<'m> {
    pub request: Request,
    pub memory: &'m FailedMemory,
    /// For a caching allocator's failure (the request says what the device had free outside
    /// it): the device's figures, when they are all known.
    pub cache: Option<Cache>,
    /// What the snapshot itself says.
    pub snapshot_note: Option<String>,
}

/// The story of one failed request.
pub fn tell(failure: &Failure<'_>) -> Story {
    let memory = failure.memory;
    let mut finding = analysis::finding(&memory.layout, &failure.request);
    let mut advice = analysis::advice(&finding, &memory.layout);
    // A caching allocator's failure is the device's, not one segment's: its verdict and advice
    // come from the cache's figures when they are all known.
    if let Some(cache) = &failure.cache {
        finding.verdict = cache.verdict(finding.size);
        advice = cache.advice(finding.size);
        finding.cache = Some(cache.clone());
    }
    let previous = memory.previous.as_ref().map(|(seq, before)| {
        (
            *seq,
            analysis::collected_between(before, &memory.layout.allocations),
        )
    });
    let mut story = Story {
        finding,
        previous,
        recent: memory.recent.clone(),
        advice,
        capacity: memory.layout.capacity,
        link: String::new(),
        snapshot_note: failure.snapshot_note.clone(),
    };
    story.link = format!(
        "memstate map --html map.html, then open map.html{}",
        story.fragment()
    );
    story
}

/// Where a request would go in one memory now.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The memory (its allocations and holes only when a page is drawn from it).
    pub layout: Layout,
    pub size: u64,
    pub alignment: u64,
    /// The hole it fits in now, the smallest that does (as a best-fit allocator would take it),
    /// and where in it the request would start.
    pub fits_now: Option<FitsNow>,
    /// The cheapest place and what stands in it (`None` when the request is larger than the
    /// memory). Not looked for when it fits now.
    pub blockers: Option<Blockers>,
    /// Where to see it: the page's URL and fragment, or how to write the page and the fragment.
    pub link: String,
}

/// A hole a request fits in as the memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FitsNow {
    pub offset: u64,
    pub hole_offset: u64,
    pub hole_size: u64,
}

impl Placement {
    /// The window the page opens on: where it fits now, else the cheapest place.
    pub fn window(&self) -> Option<(u64, u64)> {
        match (&self.fits_now, &self.blockers) {
            (Some(fits), _) => Some((fits.offset, fits.offset + self.size)),
            (None, Some(blockers)) => Some((blockers.offset, blockers.end())),
            (None, None) => None,
        }
    }

    pub fn fragment(&self) -> String {
        link::fragment(
            &self.layout.handle,
            self.layout.snapshot_id,
            self.window(),
            self.layout.capacity,
        )
    }
}

/// The smallest hole of a memory a request of `size` aligned to `alignment` fits in now, and
/// where in it the request starts (the lowest such hole among equals).
pub fn fits_now(layout: &Layout, size: u64, alignment: u64) -> Option<FitsNow> {
    let alignment = alignment.max(1);
    layout
        .holes
        .iter()
        .filter_map(|hole| {
            let start = hole.offset.checked_next_multiple_of(alignment)?;
            let end = start.checked_add(size)?;
            (end <= hole.offset.saturating_add(hole.size)).then_some(FitsNow {
                offset: start,
                hole_offset: hole.offset,
                hole_size: hole.size,
            })
        })
        .min_by_key(|fits| (fits.hole_size, fits.hole_offset))
}

/// Where a request of `size` would go in a memory: `alignment` when given, else the memory's
/// own. With `keep_layout`, the placement keeps the memory's allocations and holes (to draw a
/// page).
pub fn place(
    mut layout: Layout,
    size: u64,
    alignment: Option<u64>,
    keep_layout: bool,
) -> Placement {
    let alignment = alignment.or(layout.alignment).unwrap_or(1).max(1);
    let fits = fits_now(&layout, size, alignment);
    let blockers = match fits {
        Some(_) => None,
        None => analysis::blockers(&layout, size, alignment),
    };
    if !keep_layout {
        layout.allocations = Vec::new();
        layout.holes = Vec::new();
    }
    let mut placement = Placement {
        layout,
        size,
        alignment,
        fits_now: fits,
        blockers,
        link: String::new(),
    };
    placement.link = format!(
        "add --html map.html, then open map.html{}",
        placement.fragment()
    );
    placement
}

/// Point each placement's link into the page at `url`.
pub fn link_placements(placements: &mut [Placement], url: &str) {
    for placement in placements {
        placement.link = format!("{url}{}", placement.fragment());
    }
}
