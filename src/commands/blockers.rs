//! `memstate blockers --size N`: the cheapest place in a memory for a request, and what stands in
//! it. The description of a window is shared with `oom`.

use std::io::{self, Write};
use std::path::Path;

use memstate::analysis::{self, AllocationInfo, Blockers, Layout};
use memstate::query::output::{emit, Style};
use memstate::query::{load, select, Cell, Format, Report, Table};
use memstate::units::{hex_offset, human, visible};
use memstate::{db, Result};

use super::Printer;
use crate::cli::BlockersArgs;

/// Allocations as rows.
pub(super) fn allocation_table(allocations: &[AllocationInfo]) -> Table {
    let columns = ["uid", "kind", "state", "offset", "size", "provenance", "label", "objects"];
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
    Table::new(columns.iter().map(|column| column.to_string()).collect(), rows)
}

/// A window as people read it: `0xa0000-0xe0000 (256 KiB at 640 KiB)`.
pub(super) fn window_text(offset: u64, end: u64) -> String {
    format!("{}-{} ({} at {})", hex_offset(offset as i64), hex_offset(end as i64), human(end - offset), human(offset))
}

/// The cheapest place and its blockers, for people.
pub(super) fn describe_blockers(blockers: &Blockers, style: &Style, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "  cheapest place  {}: {} of it cannot be freed by collection ({} allocations in the way{})",
        window_text(blockers.offset, blockers.end()),
        human(blockers.blocked_bytes),
        blockers.blocking.len(),
        if blockers.unaccounted_bytes > 0 { format!(", {} held by the allocator", human(blockers.unaccounted_bytes)) } else { String::new() }
    )?;
    if !blockers.blocking.is_empty() {
        writeln!(out, "  moving or freeing them opens {} contiguous ({} bytes)", human(blockers.opens), blockers.opens)?;
        writeln!(out, "  blocking allocations:")?;
        emit(&Report::table(allocation_table(&blockers.blocking)), Format::Table, style, out)?;
    }
    if !blockers.to_collect.is_empty() {
        let bytes: u64 = blockers.to_collect.iter().map(|allocation| allocation.size).sum();
        writeln!(out, "  also in that place, freed by collection or pending releases: {} allocations, {}", blockers.to_collect.len(), human(bytes))?;
    }
    Ok(())
}

pub fn run(db_path: &Path, args: &BlockersArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = &database.conn;
    let mut found: Vec<(Layout, Option<Blockers>)> = Vec::new();
    for (snapshot_id, memory_id) in select::pairs(conn, &args.snapshot.snapshot, args.memory.memory.as_deref())? {
        let layout = load::layout(conn, snapshot_id, memory_id)?;
        let alignment = args.alignment.or(layout.alignment).unwrap_or(1).max(1);
        let blockers = analysis::blockers(&layout, args.size, alignment);
        found.push((layout, blockers));
    }
    let columns = ["snapshot_id", "run", "node", "seq", "handle", "size", "alignment", "window_offset", "blocked_bytes", "opens", "blockers"];
    let rows = found
        .iter()
        .map(|(layout, blockers)| {
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
                blockers.as_ref().map_or(Cell::Null, |blockers| Cell::Json(serde_json::to_value(blockers).unwrap_or_default())),
            ]
        })
        .collect();
    let table = Table::new(columns.iter().map(|column| column.to_string()).collect(), rows);
    let report = Report::told(table, |out, style| {
        for (layout, blockers) in &found {
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
                Some(blockers) => describe_blockers(blockers, style, out)?,
                None => writeln!(out, "  larger than the whole memory ({})", human(layout.capacity))?,
            }
            writeln!(out)?;
        }
        Ok(())
    });
    Printer::new(&args.output).print(&report)?;
    Ok(0)
}
