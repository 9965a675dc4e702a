//! The stories as rows, for the machine-readable formats (JSON, NDJSON, CSV): one row per failed
//! request or per memory asked about, nested parts (blockers, recent figures) as JSON values.

use super::{Placement, Story};
use crate::analysis::AllocationInfo;
use crate::present::{Cell, Table, Unit};

/// One row per finding; the blockers and the recent figures as nested values.
pub fn story_table(stories: &[Story]) -> Table {
    let columns = [
        ("snapshot_id", Unit::Plain),
        ("run", Unit::Plain),
        ("node", Unit::Plain),
        ("seq", Unit::Plain),
        ("memory_id", Unit::Plain),
        ("handle", Unit::Identifier),
        ("memory_kind", Unit::Plain),
        ("size", Unit::Bytes),
        ("alignment", Unit::Plain),
        ("kind", Unit::Plain),
        ("provenance", Unit::Plain),
        ("note", Unit::Plain),
        ("free_bytes", Unit::Bytes),
        ("largest_hole", Unit::Bytes),
        ("largest_reclaimable", Unit::Bytes),
        ("verdict", Unit::Plain),
        ("solved_by_collection", Unit::Plain),
        ("blockers", Unit::Plain),
        ("previous_seq", Unit::Plain),
        ("collected_allocations", Unit::Plain),
        ("collected_bytes", Unit::Plain),
        ("recent", Unit::Plain),
        ("advice", Unit::Plain),
        ("map_link", Unit::Plain),
        ("snapshot_note", Unit::Plain),
        ("capacity", Unit::Bytes),
        ("used_bytes", Unit::Bytes),
        ("unknown", Unit::Plain),
        ("cache", Unit::Plain),
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
                Cell::optional_count(finding.alignment),
                Cell::optional_text(finding.kind.as_deref()),
                Cell::optional_text(finding.provenance.as_deref()),
                Cell::optional_text(finding.note.as_deref()),
                Cell::optional_count(finding.free_bytes),
                Cell::optional_count(finding.largest_hole),
                Cell::optional_count(finding.largest_reclaimable),
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
            row.push(Cell::optional_text(story.snapshot_note.as_deref()));
            row.push(Cell::optional_count(finding.capacity));
            row.push(Cell::optional_count(finding.used_bytes));
            row.push(Cell::json(&finding.unknown));
            row.push(finding.cache.as_ref().map_or(Cell::Null, Cell::json));
            row
        })
        .collect();
    Table::declared(&columns, rows)
}

/// Allocations as rows.
pub fn allocation_table<'a>(allocations: impl IntoIterator<Item = &'a AllocationInfo>) -> Table {
    let columns = [
        ("uid", Unit::Identifier),
        ("kind", Unit::Plain),
        ("state", Unit::Plain),
        ("offset", Unit::Offset),
        ("size", Unit::Bytes),
        ("provenance", Unit::Plain),
        ("label", Unit::Plain),
        ("objects", Unit::Plain),
    ];
    let rows = allocations
        .into_iter()
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
    Table::declared(&columns, rows)
}

/// One row per memory asked about: where the request fits now, else its cheapest place.
pub fn placement_table(placements: &[Placement]) -> Table {
    let columns = [
        ("snapshot_id", Unit::Plain),
        ("run", Unit::Plain),
        ("node", Unit::Plain),
        ("seq", Unit::Plain),
        ("handle", Unit::Identifier),
        ("memory_kind", Unit::Plain),
        ("size", Unit::Bytes),
        ("alignment", Unit::Plain),
        ("fits_now", Unit::Plain),
        ("hole_offset", Unit::Plain),
        ("hole_size", Unit::Plain),
        ("window_offset", Unit::Offset),
        ("blocked_bytes", Unit::Bytes),
        ("opens", Unit::Bytes),
        ("blockers", Unit::Plain),
        ("map_link", Unit::Plain),
    ];
    let rows = placements
        .iter()
        .map(|placement| {
            let layout = &placement.layout;
            let blockers = placement.blockers.as_ref();
            let fits = placement.fits_now.as_ref();
            vec![
                Cell::Integer(layout.snapshot_id),
                Cell::text(layout.run.clone()),
                Cell::Integer(layout.node),
                Cell::Integer(layout.seq),
                Cell::text(layout.handle.clone()),
                Cell::text(layout.kind.clone()),
                Cell::count(placement.size),
                Cell::count(placement.alignment),
                Cell::Integer(i64::from(fits.is_some())),
                Cell::optional_count(fits.map(|fits| fits.hole_offset)),
                Cell::optional_count(fits.map(|fits| fits.hole_size)),
                Cell::optional_count(placement.window().map(|(start, _)| start)),
                Cell::optional_count(blockers.map(|blockers| blockers.blocked_bytes)),
                Cell::optional_count(blockers.map(|blockers| blockers.opens)),
                blockers.map_or(Cell::Null, Cell::json),
                Cell::text(placement.link.clone()),
            ]
        })
        .collect();
    Table::declared(&columns, rows)
}
