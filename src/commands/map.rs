//! `memstate map`: the layout of a snapshot's memories, as terminal bars or one HTML page.

use std::io::{self, IsTerminal, Write};
use std::path::Path;

use memstate::analysis::Layout;
use memstate::query::{load, select, Cell, Report, Table};
use memstate::units::{human, visible};
use memstate::viz::{html, terminal};
use memstate::{db, Error, Result};
use rusqlite::Connection;

use super::{terminal_width, Printer};
use crate::cli::{FormatArg, MapArgs};

/// Every selected memory of each snapshot, as the slider's frames.
pub(super) fn frames(conn: &Connection, snapshot_ids: &[i64], memory: Option<&str>) -> Result<Vec<html::Frame>> {
    let mut frames = Vec::new();
    for &snapshot_id in snapshot_ids {
        let layouts = select::memory_ids(conn, snapshot_id, memory)?
            .into_iter()
            .map(|memory_id| load::layout(conn, snapshot_id, memory_id))
            .collect::<Result<Vec<Layout>>>()?;
        if let Some(first) = layouts.first() {
            let label = format!("{} node {} seq {} (snapshot {snapshot_id})", first.run, first.node, first.seq);
            frames.push(html::Frame { label, layouts });
        }
    }
    Ok(frames)
}

/// Write a page and say so.
pub(super) fn write_page(path: &Path, page: &str, frames: &[html::Frame]) -> Result<()> {
    std::fs::write(path, page.as_bytes()).map_err(|error| Error::write(path, error))?;
    let allocations: usize = frames.iter().flat_map(|frame| frame.layouts.iter()).map(|layout| layout.allocations.len()).sum();
    let columns = ["file", "bytes", "snapshots", "allocations"];
    let row = vec![Cell::text(path.display().to_string()), Cell::count(page.len() as u64), Cell::count(frames.len() as u64), Cell::count(allocations as u64)];
    let table = Table::new(columns.iter().map(|column| column.to_string()).collect(), vec![row]);
    let report = Report::told(table, |out, _| {
        writeln!(out, "wrote {} ({}, {} snapshots, {allocations} allocations)", visible(&path.display().to_string()), human(page.len() as u64), frames.len())
    });
    Printer::with_format(FormatArg::Table).print(&report)
}

pub fn run(db_path: &Path, args: &MapArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = &database.conn;
    if let Some(memory) = &args.memory.memory {
        select::check_memory_selector(conn, memory)?;
    }
    let snapshot_ids = match &args.snapshots {
        Some(list) => select::snapshot_list(conn, list)?,
        None => select::snapshot_ids(conn, &args.snapshot.snapshot)?,
    };
    let frames = frames(conn, &snapshot_ids, args.memory.memory.as_deref())?;
    if frames.is_empty() {
        return Err(Error::Usage(format!("no memory matches {:?} in the selected snapshots", args.memory.memory.as_deref().unwrap_or(""))));
    }
    if let Some(path) = &args.html {
        let title = match frames.as_slice() {
            [one] => format!("memstate map of {}", one.label),
            several => format!("memstate map of {} snapshots, from {}", several.len(), several[0].label),
        };
        write_page(path, &html::render(&title, &frames), &frames)?;
        return Ok(0);
    }
    let range = args.range.as_deref().map(select::parse_range).transpose()?;
    let color = !args.no_color && io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let width = args.width.or_else(|| terminal_width().map(|width| width.saturating_sub(2))).unwrap_or(100);
    let style = terminal::Style { width: width.clamp(10, 1000), color };
    let mut out = io::stdout().lock();
    writeln!(out, "{}", terminal::legend(style)).map_err(Error::Output)?;
    for frame in &frames {
        for layout in &frame.layouts {
            terminal::draw(layout, range, style, &mut out).map_err(Error::Output)?;
        }
    }
    out.flush().map_err(Error::Output)?;
    Ok(0)
}
