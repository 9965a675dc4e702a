//! `memstate oom`: for each failed request, exhaustion or fragmentation, what collection would
//! give, and the allocations in the way.

use std::io::{self, Write};
use std::path::Path;

use memstate::analysis::{self, OomFinding, Verdict};
use memstate::query::output::Style;
use memstate::query::{load, select, Cell, Report, Table};
use memstate::units::{human, visible};
use memstate::{db, Result};
use rusqlite::Connection;

use super::blockers::describe_blockers;
use super::Printer;
use crate::cli::OomArgs;

/// The findings of the given snapshots' failed requests.
pub(super) fn findings(conn: &Connection, snapshot_ids: &[i64]) -> Result<Vec<OomFinding>> {
    let mut findings = Vec::new();
    for request in load::failed_requests(conn, snapshot_ids)? {
        let layout = load::layout(conn, request.snapshot_id, request.memory_id)?;
        findings.push(analysis::finding(&layout, &request));
    }
    Ok(findings)
}

/// One row per finding; the blockers as a nested value.
pub(super) fn finding_table(findings: &[OomFinding]) -> Table {
    let columns = [
        "snapshot_id", "run", "node", "seq", "memory_id", "handle", "memory_kind", "size", "alignment", "kind", "provenance", "note",
        "free_bytes", "largest_hole", "largest_reclaimable", "verdict", "solved_by_collection", "blockers",
    ];
    let rows = findings
        .iter()
        .map(|finding| {
            vec![
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
                Cell::Json(serde_json::Value::Bool(finding.solved_by_collection)),
                finding.blockers.as_ref().map_or(Cell::Null, |blockers| Cell::Json(serde_json::to_value(blockers).unwrap_or_default())),
            ]
        })
        .collect();
    Table::new(columns.iter().map(|column| column.to_string()).collect(), rows)
}

pub(super) fn describe_finding(finding: &OomFinding, style: &Style, out: &mut dyn Write) -> io::Result<()> {
    let verdict = match finding.verdict {
        Verdict::Exhaustion => "EXHAUSTION: fewer free bytes than the request",
        Verdict::Fragmentation => "FRAGMENTATION: enough free bytes, but no hole is big enough",
        Verdict::Fits => "a hole is big enough now (the memory changed since the request failed)",
    };
    let collection = if finding.solved_by_collection {
        format!("WOULD make room: collecting everything collectable and finishing pending releases gives a {} range", human(finding.largest_reclaimable))
    } else {
        format!("would NOT make room: the largest range it could make is {}", human(finding.largest_reclaimable))
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
        finding.kind.as_deref().map(|kind| format!(", {}", visible(kind))).unwrap_or_default(),
        finding.provenance.as_deref().map(|provenance| format!(" from {}", visible(provenance))).unwrap_or_default()
    )?;
    writeln!(out, "  free            {} in holes; largest hole {}", human(finding.free_bytes), human(finding.largest_hole))?;
    writeln!(out, "  verdict         {verdict}")?;
    writeln!(out, "  collection      {collection}")?;
    if let Some(blockers) = &finding.blockers {
        describe_blockers(blockers, style, out)?;
    }
    Ok(())
}

pub fn run(db_path: &Path, args: &OomArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let snapshot_ids = select::oom_snapshots(&database.conn, args.snapshot.as_deref())?;
    let findings = findings(&database.conn, &snapshot_ids)?;
    let report = Report::told(finding_table(&findings), |out, style| {
        if findings.is_empty() {
            writeln!(out, "no failed request in the selected snapshots")?;
        }
        for finding in &findings {
            describe_finding(finding, style, out)?;
            writeln!(out)?;
        }
        Ok(())
    });
    Printer::new(&args.output).print(&report)?;
    Ok(0)
}
