//! The stories for people, in the terminal: a failed request told from its verdict to its
//! advice, a cheapest place and its blockers (small ones grouped), where a request fits now.

use std::io::{self, Write};

use super::rows::allocation_table;
use super::{Placement, Story};
use crate::analysis::{self, BlockerLine, Blockers, Verdict};
use crate::present::{emit, Style};
use crate::present::{Format, Report};
use crate::units::{counted, hex_offset, human, seconds, visible};

/// A memory at a snapshot, as the stories name it: `run node N seq S (snapshot ID), KIND HANDLE`.
fn memory_heading(
    run: &str,
    node: i64,
    seq: i64,
    snapshot_id: i64,
    kind: &str,
    handle: &str,
) -> String {
    format!(
        "{} node {node} seq {seq} (snapshot {snapshot_id}), {} {handle}",
        visible(run),
        visible(kind)
    )
}

/// The story of a failed request, for people.
pub fn describe_story(
    story: &Story,
    all: bool,
    style: &Style,
    out: &mut dyn Write,
) -> io::Result<()> {
    let finding = &story.finding;
    let verdict = match finding.verdict {
        Verdict::Exhaustion if finding.cache.is_some() => "EXHAUSTION: the cache and the device together have fewer free bytes than the request",
        Verdict::Fragmentation if finding.cache.is_some() => "FRAGMENTATION: enough free bytes in the cache and on the device, but no block or new segment holds the request",
        Verdict::Exhaustion => "EXHAUSTION: fewer free bytes than the request",
        Verdict::Fragmentation => "FRAGMENTATION: enough free bytes, but no hole is big enough",
        Verdict::Fits => "a hole is big enough now (the memory changed since the request failed)",
        Verdict::CannotTell if finding.cache.is_some() => "CANNOT TELL: by these figures the request could have been placed (see advice)",
        Verdict::CannotTell => "CANNOT TELL: the input does not say enough (see unknown)",
    };
    let collection = match finding.largest_reclaimable {
        Some(largest) if finding.solved_by_collection => format!("WOULD make room: collecting everything collectable and finishing pending releases gives a {} range", human(largest)),
        Some(largest) => format!("would NOT make room: the largest range it could make is {}", human(largest)),
        None => "unknown: where the allocations lie is not known".to_string(),
    };
    let known = |figure: Option<u64>| figure.map_or_else(|| "unknown".to_string(), human);
    writeln!(
        out,
        "Out of memory in {}:",
        memory_heading(
            &finding.run,
            finding.node,
            finding.seq,
            finding.snapshot_id,
            &finding.memory_kind,
            &finding.handle
        )
    )?;
    if let Some(note) = &story.snapshot_note {
        writeln!(out, "  snapshot note   {}", visible(note))?;
    }
    writeln!(
        out,
        "  request         {} ({} bytes, {}){}{}",
        human(finding.size),
        finding.size,
        finding.alignment.map_or_else(
            || "alignment not given".to_string(),
            |alignment| format!("aligned to {alignment}")
        ),
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
    if !finding.unknown.is_empty() {
        writeln!(
            out,
            "  unknown         {} (the input does not say)",
            finding.unknown.join(", ")
        )?;
        writeln!(
            out,
            "  capacity        {}; used {}",
            known(finding.capacity),
            known(finding.used_bytes)
        )?;
    }
    writeln!(
        out,
        "  free            {} {}; largest hole {}",
        known(finding.free_bytes),
        if finding.largest_hole.is_some() {
            "in holes"
        } else {
            "in total (where is unknown)"
        },
        known(finding.largest_hole)
    )?;
    if let Some(cache) = &finding.cache {
        writeln!(
            out,
            "  cache           {}: {} reserved in {}; {} free inside, largest free block {}",
            visible(&cache.device),
            human(cache.reserved),
            counted(cache.segments, "segment"),
            human(cache.cache_free),
            human(cache.largest_block)
        )?;
        writeln!(
            out,
            "  device free     {} outside the cache (the driver's, when the request failed)",
            human(cache.device_free)
        )?;
    }
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
            let fits = match recent.largest_hole {
                Some(largest) if largest >= finding.size => "fits",
                Some(_) => "too small",
                None => "unknown",
            };
            writeln!(
                out,
                "    seq {:>5}  {:>9} s  free {:>10}  largest hole {:>10}  {fits}",
                recent.seq,
                seconds(recent.time_s),
                known(recent.free_bytes),
                known(recent.largest_hole)
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

/// A window as people read it: `0xa0000-0xe0000 (256 KiB at 640 KiB)`.
pub fn window_text(offset: u64, end: u64) -> String {
    format!(
        "{}-{} ({} at {})",
        hex_offset(offset as i64),
        hex_offset(end as i64),
        human(end - offset),
        human(offset)
    )
}

/// The cheapest place and its blockers, for people: small ones grouped unless `all`.
pub fn describe_blockers(
    blockers: &Blockers,
    all: bool,
    style: &Style,
    out: &mut dyn Write,
) -> io::Result<()> {
    if blockers.blocking.is_empty() && blockers.unaccounted_bytes == 0 {
        writeln!(
            out,
            "  cheapest place  {}: nothing unmovable in it; it fits there once collection and pending releases have run",
            window_text(blockers.offset, blockers.end()),
        )?;
    } else {
        writeln!(
            out,
            "  cheapest place  {}: {} of it cannot be freed by collection ({} in the way{})",
            window_text(blockers.offset, blockers.end()),
            human(blockers.blocked_bytes),
            counted(blockers.blocking.len() as u64, "allocation"),
            if blockers.unaccounted_bytes > 0 {
                format!(
                    ", {} held by the allocator",
                    human(blockers.unaccounted_bytes)
                )
            } else {
                String::new()
            }
        )?;
    }
    if !blockers.blocking.is_empty() {
        writeln!(
            out,
            "  moving or freeing {} opens {} contiguous ({} bytes)",
            if blockers.blocking.len() == 1 {
                "it"
            } else {
                "them"
            },
            human(blockers.opens),
            blockers.opens
        )?;
        writeln!(out, "  blocking allocations:")?;
        let lines = analysis::blocker_lines(&blockers.blocking, all);
        let singles = lines.iter().filter_map(|line| match line {
            BlockerLine::One { allocation } => Some(*allocation),
            BlockerLine::Group { .. } => None,
        });
        // The table indented under its heading, fitted to what is left of the width.
        let mut table = Vec::new();
        let narrower = Style {
            width: style.width.map(|width| width.saturating_sub(4).max(40)),
            ..style.clone()
        };
        emit(
            &Report::table(allocation_table(singles)),
            Format::Table,
            &narrower,
            &mut table,
        )?;
        for line in String::from_utf8_lossy(&table).lines() {
            writeln!(out, "    {line}")?;
        }
        for line in &lines {
            if let BlockerLine::Group {
                kind,
                count,
                bytes,
                low,
                high,
            } = line
            {
                writeln!(
                    out,
                    "    and {count} more {}, {}, between {} and {} (--all-blockers lists them)",
                    visible(&plural_kind(kind, *count)),
                    human(*bytes),
                    hex_offset(*low as i64),
                    hex_offset(*high as i64)
                )?;
            }
        }
    }
    if !blockers.to_collect.is_empty() {
        let bytes: u64 = blockers
            .to_collect
            .iter()
            .map(|allocation| allocation.size)
            .fold(0, u64::saturating_add);
        writeln!(
            out,
            "  also in that place, freed by collection or pending releases: {}, {}",
            counted(blockers.to_collect.len() as u64, "allocation"),
            human(bytes)
        )?;
    }
    Ok(())
}

/// A kind as a noun for a count: `future` → `futures`, `deferred_buffer` → `deferred_buffers`;
/// a kind that is not one word (`0x12`, `my kind`) stays as it is with "of kind" before it.
fn plural_kind(kind: &str, count: u64) -> String {
    let word = !kind.is_empty() && kind.chars().all(|c| c.is_ascii_alphabetic() || c == '_');
    match (word, count) {
        (true, 1) => kind.to_string(),
        (true, _) if kind.ends_with('s') => kind.to_string(),
        (true, _) => format!("{kind}s"),
        (false, _) => format!("of kind {kind}"),
    }
}

/// Where a request would go in one memory, for people: one line when it fits now, else the
/// cheapest place and what stands in it.
pub fn describe_placement(
    placement: &Placement,
    all_blockers: bool,
    style: &Style,
    out: &mut dyn Write,
) -> io::Result<()> {
    let layout = &placement.layout;
    let memory = memory_heading(
        &layout.run,
        layout.node,
        layout.seq,
        layout.snapshot_id,
        &layout.kind,
        &layout.handle,
    );
    if let Some(fits) = &placement.fits_now {
        return writeln!(
            out,
            "{memory}: a request of {} fits now, at {} in the hole {}",
            human(placement.size),
            hex_offset(fits.offset as i64),
            window_text(fits.hole_offset, fits.hole_offset + fits.hole_size)
        );
    }
    writeln!(
        out,
        "{memory}: a request of {} ({} bytes) does not fit now",
        human(placement.size),
        placement.size
    )?;
    match &placement.blockers {
        Some(blockers) => describe_blockers(blockers, all_blockers, style, out)?,
        None => writeln!(
            out,
            "  larger than the whole memory ({})",
            human(layout.capacity)
        )?,
    }
    writeln!(out, "  map             {}", visible(&placement.link))
}
