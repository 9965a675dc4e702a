//! `memstate blockers --size N`: the cheapest place in a memory for a request, and what stands in
//! it. The description of a window is shared with `oom`.

use std::io::{self, Write};
use std::path::Path;

use memstate::analysis::{self, AllocationInfo, BlockerLine, Blockers, Layout};
use memstate::query::output::{emit, Style};
use memstate::query::{load, select, Cell, Format, Report, Table};
use memstate::units::{counted, hex_offset, human, visible};
use memstate::viz::html;
use memstate::{db, Result};

use super::{map, Printer};
use crate::cli::BlockersArgs;

/// Allocations as rows.
pub(super) fn allocation_table(allocations: &[AllocationInfo]) -> Table {
    let columns = [
        "uid",
        "kind",
        "state",
        "offset",
        "size",
        "provenance",
        "label",
        "objects",
    ];
    let rows = allocations
        .iter()
        .map(|allocation| {
            vec![
                Cell::text(allocation.uid.clone()),
                Cell::text(allocation.kind.clone()),
                Cell::text(allocation.state.as_str()),
                Cell::count(allocation.offset),
                Cell::count(allocation.size),
                Cell::optional_text(allocation.provenance.as_deref()),
                Cell::optional_text(allocation.label.as_deref()),
                Cell::text(allocation.objects.join(", ")),
            ]
        })
        .collect();
    Table::new(
        columns.iter().map(|column| column.to_string()).collect(),
        rows,
    )
}

/// A window as people read it: `0xa0000-0xe0000 (256 KiB at 640 KiB)`.
pub(super) fn window_text(offset: u64, end: u64) -> String {
    format!(
        "{}-{} ({} at {})",
        hex_offset(offset as i64),
        hex_offset(end as i64),
        human(end - offset),
        human(offset)
    )
}

/// The cheapest place and its blockers, for people: small ones grouped unless `all`.
pub(super) fn describe_blockers(
    blockers: &Blockers,
    all: bool,
    style: &Style,
    out: &mut dyn Write,
) -> io::Result<()> {
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
        let singles: Vec<AllocationInfo> = lines
            .iter()
            .filter_map(|line| match line {
                BlockerLine::One { allocation } => Some(allocation.clone()),
                BlockerLine::Group { .. } => None,
            })
            .collect();
        // The table indented under its heading, fitted to what is left of the width.
        let mut table = Vec::new();
        let narrower = Style {
            width: style.width.map(|width| width.saturating_sub(4).max(40)),
            ..style.clone()
        };
        emit(
            &Report::table(allocation_table(&singles)),
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
                    "    and {count} more {}, {}, between {} and {} (--all lists them)",
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

pub fn run(db_path: &Path, args: &BlockersArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let target = args
        .html
        .as_ref()
        .map(|path| super::output_target(&database, path))
        .transpose()?;
    let conn = &database.conn;
    let mut found: Vec<(Layout, Option<Blockers>)> = Vec::new();
    let pairs = select::pairs(conn, &args.snapshot.snapshot, args.memory.memory.as_deref())?;
    for mut layout in load::layouts_of(conn, &pairs, true)? {
        let alignment = args.alignment.or(layout.alignment).unwrap_or(1).max(1);
        let blockers = analysis::blockers(&layout, args.size, alignment);
        // Without a page to draw, a layout's allocations and holes are done with here.
        if args.html.is_none() {
            layout.allocations = Vec::new();
            layout.holes = Vec::new();
        }
        found.push((layout, blockers));
    }
    // Each memory's link into the page (written with --html), or how to write one.
    let url = match (&args.html, &target) {
        (Some(path), Some(target)) => {
            let mut frames: Vec<html::Frame> = Vec::new();
            for (layout, _) in &found {
                match frames
                    .iter_mut()
                    .find(|frame| frame.snapshot_id == layout.snapshot_id)
                {
                    Some(frame) => frame.layouts.push(layout.clone()),
                    None => frames.push(html::Frame {
                        snapshot_id: layout.snapshot_id,
                        label: format!(
                            "{} node {} seq {} (snapshot {})",
                            layout.run, layout.node, layout.seq, layout.snapshot_id
                        ),
                        layouts: vec![layout.clone()],
                    }),
                }
            }
            let marked = found
                .iter()
                .map(|(layout, blockers)| map::marked_request(layout, args.size, blockers.as_ref()))
                .collect();
            let focus = found
                .first()
                .map(|(layout, _)| (layout.handle.clone(), layout.snapshot_id));
            let parts = map::PageParts {
                frames,
                marked,
                histories: Vec::new(),
                focus,
            };
            let title = format!("memstate: where a request of {} would go", human(args.size));
            super::write_output(target, path, parts.render(&title).as_bytes())?;
            Some(map::file_url(path))
        }
        _ => None,
    };
    let links: Vec<String> = found
        .iter()
        .map(|(layout, blockers)| {
            let fragment = map::fragment(
                &layout.handle,
                layout.snapshot_id,
                blockers
                    .as_ref()
                    .map(|blockers| (blockers.offset, blockers.end())),
                layout.capacity,
            );
            match &url {
                Some(url) => format!("{url}{fragment}"),
                None => format!("add --html map.html, then open map.html{fragment}"),
            }
        })
        .collect();
    let columns = [
        "snapshot_id",
        "run",
        "node",
        "seq",
        "handle",
        "size",
        "alignment",
        "window_offset",
        "blocked_bytes",
        "opens",
        "blockers",
        "map_link",
    ];
    // The machine-readable rows (with each memory's blockers as JSON) only when they are printed.
    let printer = Printer::new(&args.output);
    let for_people = printer.format() == memstate::query::Format::Table;
    let rows = found
        .iter()
        .zip(&links)
        .filter(|_| !for_people)
        .map(|((layout, blockers), link)| {
            vec![
                Cell::Integer(layout.snapshot_id),
                Cell::text(layout.run.clone()),
                Cell::Integer(layout.node),
                Cell::Integer(layout.seq),
                Cell::text(layout.handle.clone()),
                Cell::count(args.size),
                Cell::optional_count(blockers.as_ref().map(|blockers| blockers.alignment)),
                Cell::optional_count(blockers.as_ref().map(|blockers| blockers.offset)),
                Cell::optional_count(blockers.as_ref().map(|blockers| blockers.blocked_bytes)),
                Cell::optional_count(blockers.as_ref().map(|blockers| blockers.opens)),
                blockers.as_ref().map_or(Cell::Null, Cell::json),
                Cell::text(link.clone()),
            ]
        })
        .collect();
    let table = Table::new(
        columns.iter().map(|column| column.to_string()).collect(),
        rows,
    );
    let report = Report::told(table, |out, style| {
        for ((layout, blockers), link) in found.iter().zip(&links) {
            writeln!(
                out,
                "{} node {} seq {} (snapshot {}), {} {}: a request of {} ({} bytes)",
                visible(&layout.run),
                layout.node,
                layout.seq,
                layout.snapshot_id,
                visible(&layout.kind),
                layout.handle,
                human(args.size),
                args.size
            )?;
            match blockers {
                Some(blockers) => describe_blockers(blockers, args.all, style, out)?,
                None => writeln!(
                    out,
                    "  larger than the whole memory ({})",
                    human(layout.capacity)
                )?,
            }
            writeln!(out, "  map             {}", visible(link))?;
            writeln!(out)?;
        }
        Ok(())
    });
    printer.print(&report)?;
    Ok(0)
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
