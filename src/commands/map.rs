//! `memstate map`: the layout of a snapshot's memories, as terminal bars or one HTML page (the
//! page is gathered by `memstate::query::pages` and drawn by `memstate::viz::page`).

use std::io::{self, IsTerminal, Write};
use std::path::Path;

use memstate::db::Database;
use memstate::present::wrap::Wrapping;
use memstate::present::{Cell, Format, Report, Table, Unit};
use memstate::query::pages;
use memstate::query::select;
use memstate::story::link;
use memstate::units::{counted, human, visible};
use memstate::viz::page::PageParts;
use memstate::viz::terminal;
use memstate::{Error, Result};

use super::{terminal_width, Printer};
use crate::cli::MapArgs;

/// The snapshots the user chose: `--snapshots`, else `--snapshot` (latest by default).
fn chosen_snapshots(database: &Database, args: &MapArgs) -> Result<Vec<i64>> {
    let conn = database.connection();
    match &args.snapshots {
        Some(list) => select::snapshot_list(conn, list),
        None => select::snapshot_ids(conn, args.snapshot.as_deref().unwrap_or("latest")),
    }
}

/// Write a page and say so, with the link to where it opens.
fn write_page(path: &Path, target: &Path, title: &str, parts: &PageParts) -> Result<()> {
    let page = parts.render(title);
    super::write_output(target, path, page.as_bytes())?;
    let frames = &parts.frames;
    let allocations: usize = frames
        .iter()
        .flat_map(|frame| frame.layouts.iter())
        .map(|layout| layout.allocations.len())
        .sum();
    let spans: usize = parts
        .histories
        .iter()
        .map(|history| history.spans.len())
        .sum();
    // Spans in all, when a long history is summarized (only some are drawn whole).
    let summarized: u64 = parts
        .histories
        .iter()
        .filter_map(|history| history.summary.as_ref())
        .map(|summary| summary.total_spans)
        .sum();
    let link = format!(
        "{}{}",
        link::file_url(path),
        parts.opening_fragment().unwrap_or_default()
    );
    let columns = [
        ("file", Unit::Plain),
        ("bytes", Unit::Bytes),
        ("snapshots", Unit::Plain),
        ("allocations", Unit::Plain),
        ("history_spans", Unit::Plain),
        ("link", Unit::Plain),
    ];
    let row = vec![
        Cell::text(path.display().to_string()),
        Cell::count(page.len() as u64),
        Cell::count(frames.len() as u64),
        Cell::count(allocations as u64),
        Cell::count(spans as u64),
        Cell::text(link.clone()),
    ];
    let table = Table::declared(&columns, vec![row]);
    let report = Report::told(table, |out, _| {
        let history = if summarized > 0 {
            format!(", history of {summarized} allocation spans summarized, {spans} of them drawn whole")
        } else if spans > 0 {
            format!(", history of {spans} allocation spans")
        } else {
            String::new()
        };
        writeln!(
            out,
            "wrote {} ({}, {}, {}{history})",
            visible(&path.display().to_string()),
            human(page.len() as u64),
            counted(frames.len() as u64, "snapshot"),
            counted(allocations as u64, "allocation")
        )?;
        writeln!(out, "open {}", visible(&link))
    });
    Printer::with_format(Format::Table).print(&report)
}

pub fn run(db_path: &Path, args: &MapArgs) -> Result<u8> {
    let (database, target) = super::open_for_page(db_path, args.html.as_ref())?;
    let conn = database.connection();
    let memory = args.memory.memory.as_deref();
    if let Some(memory) = memory {
        select::check_memory_selector(conn, memory)?;
    }
    if let (Some(path), Some(target)) = (&args.html, &target) {
        let named = args.snapshot.is_some() || args.snapshots.is_some();
        let snapshot_ids = chosen_snapshots(&database, args)?;
        let parts = pages::map_page(
            conn,
            &snapshot_ids,
            named,
            memory,
            pages::FILE_HISTORY.filter(|_| args.history),
        )?;
        if parts.frames.is_empty() {
            return Err(Error::Usage(format!(
                "no memory matches {:?} in the selected snapshots",
                memory.unwrap_or("")
            )));
        }
        let title = match parts.frames.as_slice() {
            [one] => format!("memstate map of {}", one.label),
            several => format!(
                "memstate map of {} snapshots, from {}",
                several.len(),
                several[0].label
            ),
        };
        write_page(path, target, &title, &parts)?;
        return Ok(0);
    }
    let frames = pages::frames(conn, &chosen_snapshots(&database, args)?, memory)?;
    if frames.is_empty() {
        return Err(Error::Usage(format!(
            "no memory matches {:?} in the selected snapshots",
            memory.unwrap_or("")
        )));
    }
    let range = args.range.as_deref().map(select::parse_range).transpose()?;
    let color =
        !args.no_color && io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let width = args
        .width
        .or_else(|| terminal_width().map(|width| width.saturating_sub(2)))
        .unwrap_or(100);
    let style = terminal::Style {
        width: width.clamp(10, 1000),
        color,
    };
    let mut stdout = io::stdout().lock();
    // The headers fitted to the width too (the bars are drawn to it).
    let fitted = args.width.is_some() || terminal_width().is_some();
    let mut out = Wrapping::new(
        &mut stdout,
        if fitted {
            width.max(10) + 2
        } else {
            usize::MAX
        },
    );
    writeln!(out, "{}", terminal::legend(style)).map_err(Error::Output)?;
    for frame in &frames {
        for layout in &frame.layouts {
            terminal::draw(layout, range, style, &mut out).map_err(Error::Output)?;
        }
    }
    out.finish().map_err(Error::Output)?;
    Ok(0)
}
