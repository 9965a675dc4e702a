//! `memstate oom`: for each failed request, exhaustion or fragmentation, what collection would
//! give, and the allocations in the way.

use std::io::{self, Write};
use std::path::Path;

use memstate::analysis::{self, Collected, OomFinding, Verdict};
use memstate::query::load::Recent;
use memstate::query::output::Style;
use memstate::query::{load, select, Cell, Report, Table};
use memstate::units::{counted, human, seconds, visible};
use memstate::{db, Result};
use rusqlite::Connection;

use super::blockers::describe_blockers;
use super::{map, Printer};
use crate::cli::OomArgs;

/// How many snapshots of the failed memory the story looks back over.
const LOOK_BACK: u32 = 6;

/// A failed request and how it came about.
pub(super) struct Story {
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
}

impl Story {
    /// The fragment of a map page that opens on this failure's window.
    pub fn fragment(&self) -> String {
        let window = self
            .finding
            .blockers
            .as_ref()
            .map(|blockers| (blockers.offset, blockers.end()));
        map::fragment(
            &self.finding.handle,
            self.finding.snapshot_id,
            window,
            self.capacity,
        )
    }
}

/// Point each story's link into the page at `url`.
pub(super) fn link_stories(stories: &mut [Story], url: &str) {
    for story in stories {
        story.link = format!("{url}{}", story.fragment());
    }
}

/// What a story tells of the memory a request failed in, the same for every request that failed
/// in it at that snapshot: its layout, what collection freed since the node's previous snapshot,
/// and its recent figures.
struct FailedMemory {
    layout: analysis::Layout,
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
                Err(memstate::Error::Usage(_)) => Vec::new(),
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

/// The stories of the given snapshots' failed requests.
pub(super) fn stories(conn: &Connection, snapshot_ids: &[i64]) -> Result<Vec<Story>> {
    let mut stories = Vec::new();
    // Requests come by snapshot and memory: each memory is loaded once for all that failed in it.
    let mut loaded: Option<((i64, i64), FailedMemory)> = None;
    for request in load::failed_requests(conn, snapshot_ids)? {
        let key = (request.snapshot_id, request.memory_id);
        let memory = match loaded.take() {
            Some((seen, memory)) if seen == key => memory,
            _ => failed_memory(conn, request.snapshot_id, request.memory_id)?,
        };
        let finding = analysis::finding(&memory.layout, &request);
        let advice = analysis::advice(&finding, &memory.layout);
        let mut story = Story {
            finding,
            previous: memory.previous,
            recent: memory.recent.clone(),
            advice,
            capacity: memory.layout.capacity,
            link: String::new(),
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

/// One row per finding; the blockers and the recent figures as nested values.
pub(super) fn story_table(stories: &[Story]) -> Table {
    let columns = [
        "snapshot_id",
        "run",
        "node",
        "seq",
        "memory_id",
        "handle",
        "memory_kind",
        "size",
        "alignment",
        "kind",
        "provenance",
        "note",
        "free_bytes",
        "largest_hole",
        "largest_reclaimable",
        "verdict",
        "solved_by_collection",
        "blockers",
        "previous_seq",
        "collected_allocations",
        "collected_bytes",
        "recent",
        "advice",
        "map_link",
    ];
    let rows = stories
        .iter()
        .map(|story| {
            let finding = &story.finding;
            let mut row = vec![
                Cell::Integer(finding.snapshot_id),
                Cell::text(finding.run.clone()),
                Cell::Integer(finding.node),
                Cell::Integer(finding.seq),
                Cell::Integer(finding.memory_id),
                Cell::text(finding.handle.clone()),
                Cell::text(finding.memory_kind.clone()),
                Cell::count(finding.size),
                Cell::count(finding.alignment),
                Cell::optional_text(finding.kind.as_deref()),
                Cell::optional_text(finding.provenance.as_deref()),
                Cell::optional_text(finding.note.as_deref()),
                Cell::count(finding.free_bytes),
                Cell::count(finding.largest_hole),
                Cell::count(finding.largest_reclaimable),
                Cell::text(finding.verdict.as_str()),
                Cell::json(&finding.solved_by_collection),
                finding.blockers.as_ref().map_or(Cell::Null, Cell::json),
            ];
            row.push(
                story
                    .previous
                    .map_or(Cell::Null, |(seq, _)| Cell::Integer(seq)),
            );
            row.push(story.previous.map_or(Cell::Null, |(_, collected)| {
                Cell::count(collected.allocations)
            }));
            row.push(
                story
                    .previous
                    .map_or(Cell::Null, |(_, collected)| Cell::count(collected.bytes)),
            );
            row.push(Cell::json(&story.recent));
            row.push(Cell::text(story.advice.clone()));
            row.push(Cell::text(story.link.clone()));
            row
        })
        .collect();
    Table::new(
        columns.iter().map(|column| column.to_string()).collect(),
        rows,
    )
}

/// The story of a failed request, for people.
pub(super) fn describe_story(
    story: &Story,
    all: bool,
    style: &Style,
    out: &mut dyn Write,
) -> io::Result<()> {
    let finding = &story.finding;
    let verdict = match finding.verdict {
        Verdict::Exhaustion => "EXHAUSTION: fewer free bytes than the request",
        Verdict::Fragmentation => "FRAGMENTATION: enough free bytes, but no hole is big enough",
        Verdict::Fits => "a hole is big enough now (the memory changed since the request failed)",
    };
    let collection = if finding.solved_by_collection {
        format!("WOULD make room: collecting everything collectable and finishing pending releases gives a {} range", human(finding.largest_reclaimable))
    } else {
        format!(
            "would NOT make room: the largest range it could make is {}",
            human(finding.largest_reclaimable)
        )
    };
    writeln!(
        out,
        "Out of memory in {} node {} seq {} (snapshot {}), {} {}:",
        visible(&finding.run),
        finding.node,
        finding.seq,
        finding.snapshot_id,
        visible(&finding.memory_kind),
        finding.handle
    )?;
    writeln!(
        out,
        "  request         {} ({} bytes, aligned to {}){}{}",
        human(finding.size),
        finding.size,
        finding.alignment,
        finding
            .kind
            .as_deref()
            .map(|kind| format!(", {}", visible(kind)))
            .unwrap_or_default(),
        finding
            .provenance
            .as_deref()
            .map(|provenance| format!(" from {}", visible(provenance)))
            .unwrap_or_default()
    )?;
    writeln!(
        out,
        "  free            {} in holes; largest hole {}",
        human(finding.free_bytes),
        human(finding.largest_hole)
    )?;
    writeln!(out, "  verdict         {verdict}")?;
    match story.previous {
        Some((seq, collected)) if collected.allocations > 0 => writeln!(
            out,
            "  already freed   collection ran before the failure: since seq {seq} it freed {} in {}",
            human(collected.bytes),
            counted(collected.allocations, "collectable allocation")
        )?,
        Some((seq, _)) => writeln!(out, "  already freed   nothing was collected in this memory since seq {seq}")?,
        None => writeln!(out, "  already freed   (no earlier snapshot of this node to compare with)")?,
    }
    writeln!(out, "  collection      {collection}")?;
    if story.recent.len() > 1 {
        writeln!(
            out,
            "  largest hole against the request ({}) over the last snapshots:",
            human(finding.size)
        )?;
        for recent in &story.recent {
            let fits = if recent.largest_hole >= finding.size {
                "fits"
            } else {
                "too small"
            };
            writeln!(
                out,
                "    seq {:>5}  {:>9} s  free {:>10}  largest hole {:>10}  {fits}",
                recent.seq,
                seconds(recent.time_s),
                human(recent.free_bytes),
                human(recent.largest_hole)
            )?;
        }
    }
    if let Some(blockers) = &finding.blockers {
        describe_blockers(blockers, all, style, out)?;
    }
    writeln!(out, "  advice          {}", story.advice)?;
    writeln!(out, "  map             {}", visible(&story.link))?;
    Ok(())
}

pub fn run(db_path: &Path, args: &OomArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let target = args
        .html
        .as_ref()
        .map(|path| super::output_target(&database, path))
        .transpose()?;
    let snapshot_ids = select::oom_snapshots(&database.conn, args.snapshot.as_deref())?;
    let mut stories = stories(&database.conn, &snapshot_ids)?;
    if let (Some(path), Some(target)) = (&args.html, &target) {
        if !stories.is_empty() {
            let parts = map::failure_page(&database.conn, &stories, None, true)?;
            let title = format!(
                "memstate: {} out of memory",
                counted(stories.len() as u64, "request")
            );
            super::write_output(target, path, parts.render(&title).as_bytes())?;
            link_stories(&mut stories, &map::file_url(path));
        }
    }
    let report = Report::told(story_table(&stories), |out, style| {
        if stories.is_empty() {
            writeln!(
                out,
                "no failed request in the selected snapshots{}",
                if args.html.is_some() {
                    " (no page written)"
                } else {
                    ""
                }
            )?;
        }
        for story in &stories {
            describe_story(story, args.all, style, out)?;
            writeln!(out)?;
        }
        Ok(())
    });
    Printer::new(&args.output).print(&report)?;
    Ok(0)
}
