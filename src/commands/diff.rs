//! `memstate diff A B`: allocations that appeared, disappeared or changed between two snapshots.

use std::path::Path;

use memstate::analysis::{self, Change};
use memstate::query::{load, select, Cell, Report, Table};
use memstate::{db, Result};

use super::Printer;
use crate::cli::DiffArgs;

/// One row per change.
fn change_table(changes: &[Change]) -> Table {
    let columns = ["change", "handle", "uid", "kind", "provenance", "size", "offset", "state_before", "state_after"];
    let rows = changes
        .iter()
        .map(|change| {
            vec![
                Cell::text(change.change.as_str()),
                Cell::text(change.handle.clone()),
                Cell::text(change.uid.clone()),
                Cell::text(change.kind.clone()),
                Cell::optional_text(change.provenance.as_deref()),
                Cell::count(change.size),
                Cell::count(change.offset),
                Cell::optional_text(change.state_before.map(|state| state.as_str())),
                Cell::optional_text(change.state_after.map(|state| state.as_str())),
            ]
        })
        .collect();
    Table::new(columns.iter().map(|column| column.to_string()).collect(), rows)
}

pub fn run(db_path: &Path, args: &DiffArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = &database.conn;
    let before = select::one_snapshot(conn, &args.before)?;
    let after = select::one_snapshot(conn, &args.after)?;
    // Two snapshots of one node share what is unchanged between them; leave that out of both.
    let (before_node, after_node) = (load::snapshot_node(conn, before)?, load::snapshot_node(conn, after)?);
    let same_node = before_node.0 == after_node.0 && before_node.1 == after_node.1;
    let (before_shared, after_shared) = if same_node { (Some(after_node.2), Some(before_node.2)) } else { (None, None) };
    let changes = analysis::diff(&load::placed(conn, before, before_shared)?, &load::placed(conn, after, after_shared)?);
    let report = Report::table(change_table(&changes))
        .when_empty(format!("no allocation appeared, disappeared or changed between snapshots {before} and {after}"));
    Printer::new(&args.output).print(&report)?;
    Ok(0)
}
