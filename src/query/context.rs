//! The one loader of what a story is told from: for each failed request, the memory it failed
//! in (its layout, the node's previous snapshot of it, its recent figures), the device's cache
//! figures and the snapshot's note, handed over one at a time for `crate::story` to tell; and the
//! memories a question about a request looks at, with their layouts for `story::place`.

use rusqlite::Connection;

use super::{load, select};
use crate::story::{self, FailedMemory, Failure, Placement, Story};
use crate::Result;

/// How many snapshots of the failed memory the story looks back over.
const LOOK_BACK: u32 = 6;

/// The memory kind whose memories `blockers` looks at when no failed request names one.
pub const DEFAULT_KIND: &str = "GPU_FB_MEM";

fn failed_memory(conn: &Connection, snapshot_id: i64, memory_id: i64) -> Result<FailedMemory> {
    let layout = load::layout(conn, snapshot_id, memory_id)?;
    let previous = match load::previous_snapshot(conn, snapshot_id)? {
        Some((previous_id, seq)) => {
            // The memory may be new at this snapshot: then nothing was collected in it.
            let before = load::layout_if_present(conn, previous_id, memory_id)?
                .map(|before| before.allocations)
                .unwrap_or_default();
            Some((seq, before))
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

/// Each failed request of the given snapshots, in order, with what its story is told from,
/// handed to `visit`. Requests come by snapshot and memory: each memory is loaded once for all
/// that failed in it, and held only while they are visited.
pub fn each_failure(
    conn: &Connection,
    snapshot_ids: &[i64],
    visit: &mut dyn FnMut(&Failure<'_>) -> Result<()>,
) -> Result<()> {
    let mut loaded: Option<((i64, i64), FailedMemory)> = None;
    for request in load::failed_requests(conn, snapshot_ids)? {
        let key = (request.snapshot_id, request.memory_id);
        let memory = match loaded.take() {
            Some((seen, memory)) if seen == key => memory,
            _ => failed_memory(conn, request.snapshot_id, request.memory_id)?,
        };
        let cache = match request.device_free {
            Some(device_free) => {
                load::cache_of(conn, request.snapshot_id, request.memory_id, device_free)?
            }
            None => None,
        };
        let snapshot_note = load::snapshot_note(conn, request.snapshot_id)?;
        visit(&Failure {
            request,
            memory: &memory,
            cache,
            snapshot_note,
        })?;
        loaded = Some((key, memory));
    }
    Ok(())
}

/// The stories of the given snapshots' failed requests, in order.
pub fn stories(conn: &Connection, snapshot_ids: &[i64]) -> Result<Vec<Story>> {
    let mut stories = Vec::new();
    each_failure(conn, snapshot_ids, &mut |failure| {
        stories.push(story::tell(failure));
        Ok(())
    })?;
    Ok(stories)
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
    /// Whether those kinds are where requests failed in the snapshots (else [`DEFAULT_KIND`],
    /// no request having failed there).
    pub failed: bool,
}

/// The memories a scope names in the snapshots `snapshot` selects.
pub fn scope_pairs(conn: &Connection, snapshot: &str, scope: &Scope) -> Result<Scoped> {
    let every = |memory: Option<&str>| -> Result<Scoped> {
        Ok(Scoped {
            pairs: select::pairs(conn, snapshot, memory)?,
            kinds: Vec::new(),
            failed: false,
        })
    };
    match scope {
        Scope::Named(selector) => every(Some(selector)),
        Scope::All => every(None),
        Scope::Default => {
            let snapshot_ids = select::snapshot_ids(conn, snapshot)?;
            let mut kinds = select::failed_kinds(conn, &snapshot_ids)?;
            let failed = !kinds.is_empty();
            if !failed {
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
            Ok(Scoped {
                pairs,
                kinds,
                failed,
            })
        }
    }
}

/// Where a request of `size` would go in each of the (snapshot, memory) pairs: `alignment` when
/// given, else each memory's own. With `keep_layouts`, each placement keeps its memory's
/// allocations and holes (to draw a page).
pub fn placements(
    conn: &Connection,
    pairs: &[(i64, i64)],
    size: u64,
    alignment: Option<u64>,
    keep_layouts: bool,
) -> Result<Vec<Placement>> {
    Ok(load::layouts_of(conn, pairs, true)?
        .into_iter()
        .map(|layout| story::place(layout, size, alignment, keep_layouts))
        .collect())
}
