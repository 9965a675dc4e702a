//! The stories memstate tells about a memory: why a request failed (verdict, what collection
//! freed before it and would free now, the largest hole against the request over the last
//! snapshots, what blocks the cheapest place, advice), and where a request of a given size would go
//! now. Each is computed once here as a typed result; the terminal ([`text`]), the rows of the
//! machine-readable formats ([`rows`]) and the HTML page ([`page`]) render it, and commands only
//! parse arguments and print.

pub mod page;
pub mod rows;
pub mod text;

use rusqlite::Connection;

use crate::analysis::{self, Blockers, Collected, Layout, OomFinding};
use crate::query::load::{self, Recent};
use crate::query::select;
use crate::Result;

/// How many snapshots of the failed memory the story looks back over.
const LOOK_BACK: u32 = 6;

/// The memory kind whose memories `blockers` looks at when no failed request names one.
pub const DEFAULT_KIND: &str = "GPU_FB_MEM";

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
        page::fragment(
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
/// in it at that snapshot: its layout, what collection freed since the node's previous snapshot,
/// and its recent figures.
struct FailedMemory {
    layout: Layout,
    previous: Option<(i64, Collected)>,
    recent: Vec<Recent>,
}

fn failed_memory(conn: &Connection, snapshot_id: i64, memory_id: i64) -> Result<FailedMemory> {
    let layout = load::layout(conn, snapshot_id, memory_id)?;
    let previous = match load::previous_snapshot(conn, snapshot_id)? {
        Some((previous_id, seq)) => {
            // The memory may be new at this snapshot: then nothing was collected in it.
            let before = match load::layout(conn, previous_id, memory_id) {
                Ok(before) => before.allocations,
                Err(crate::Error::Usage(_)) => Vec::new(),
                Err(error) => return Err(error),
            };
            Some((
                seq,
                analysis::collected_between(&before, &layout.allocations),
            ))
        }
        None => None,
    };
    let recent = load::recent_figures(conn, memory_id, snapshot_id, LOOK_BACK)?;
    Ok(FailedMemory {
        layout,
        previous,
        recent,
    })
}

/// The stories of the given snapshots' failed requests, in order.
pub fn stories(conn: &Connection, snapshot_ids: &[i64]) -> Result<Vec<Story>> {
    let mut stories = Vec::new();
    // Requests come by snapshot and memory: each memory is loaded once for all that failed in it.
    let mut loaded: Option<((i64, i64), FailedMemory)> = None;
    for request in load::failed_requests(conn, snapshot_ids)? {
        let key = (request.snapshot_id, request.memory_id);
        let memory = match loaded.take() {
            Some((seen, memory)) if seen == key => memory,
            _ => failed_memory(conn, request.snapshot_id, request.memory_id)?,
        };
        let mut finding = analysis::finding(&memory.layout, &request);
        let mut advice = analysis::advice(&finding, &memory.layout);
        // A caching allocator's failure is the device's, not one segment's: its verdict and
        // advice come from the cache's figures when they are all known.
        if let Some(device_free) = request.device_free {
            if let Some(cache) =
                load::cache_of(conn, request.snapshot_id, request.memory_id, device_free)?
            {
                finding.verdict = cache.verdict(finding.size);
                advice = cache.advice(finding.size);
                finding.cache = Some(cache);
            }
        }
        let mut story = Story {
            finding,
            previous: memory.previous,
            recent: memory.recent.clone(),
            advice,
            capacity: memory.layout.capacity,
            link: String::new(),
            snapshot_note: load::snapshot_note(conn, request.snapshot_id)?,
        };
        story.link = format!(
            "memstate map --html map.html, then open map.html{}",
            story.fragment()
        );
        stories.push(story);
        loaded = Some((key, memory));
    }
    Ok(stories)
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
        page::fragment(
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

/// Which memories a question about a request looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The memories a selector names (a handle or a kind).
    Named(String),
    /// Every memory.
    All,
    /// The memories of the kind a failed request in the snapshots named, else [`DEFAULT_KIND`].
    Default,
}

/// The memories a scope names.
#[derive(Debug, Clone, Default)]
pub struct Scoped {
    /// (snapshot, memory) pairs, by snapshot.
    pub pairs: Vec<(i64, i64)>,
    /// The memory kinds the default chose (empty for the other scopes, or when no memory has them
    /// and every memory is taken instead).
    pub kinds: Vec<String>,
}

/// The memories a scope names in the snapshots `snapshot` selects.
pub fn scope_pairs(conn: &Connection, snapshot: &str, scope: &Scope) -> Result<Scoped> {
    let every = |memory: Option<&str>| -> Result<Scoped> {
        Ok(Scoped {
            pairs: select::pairs(conn, snapshot, memory)?,
            kinds: Vec::new(),
        })
    };
    match scope {
        Scope::Named(selector) => every(Some(selector)),
        Scope::All => every(None),
        Scope::Default => {
            let snapshot_ids = select::snapshot_ids(conn, snapshot)?;
            let mut kinds = select::failed_kinds(conn, &snapshot_ids)?;
            if kinds.is_empty() {
                kinds.push(DEFAULT_KIND.to_string());
            }
            let mut pairs = Vec::new();
            for &snapshot_id in &snapshot_ids {
                for kind in &kinds {
                    for memory_id in select::memory_ids(conn, snapshot_id, Some(kind))? {
                        pairs.push((snapshot_id, memory_id));
                    }
                }
            }
            if pairs.is_empty() {
                return every(None);
            }
            pairs.sort_unstable();
            Ok(Scoped { pairs, kinds })
        }
    }
}

/// Where a request of `size` would go in each memory: `alignment` when given, else each
/// memory's own. With `keep_layouts`, each placement keeps its memory's allocations and holes
/// (to draw a page).
pub fn placements(
    conn: &Connection,
    pairs: &[(i64, i64)],
    size: u64,
    alignment: Option<u64>,
    keep_layouts: bool,
) -> Result<Vec<Placement>> {
    let mut found = Vec::new();
    for mut layout in load::layouts_of(conn, pairs, true)? {
        let alignment = alignment.or(layout.alignment).unwrap_or(1).max(1);
        let fits = fits_now(&layout, size, alignment);
        let blockers = match fits {
            Some(_) => None,
            None => analysis::blockers(&layout, size, alignment),
        };
        if !keep_layouts {
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
        found.push(placement);
    }
    Ok(found)
}

/// Point each placement's link into the page at `url`.
pub fn link_placements(placements: &mut [Placement], url: &str) {
    for placement in placements {
        placement.link = format!("{url}{}", placement.fragment());
    }
}
