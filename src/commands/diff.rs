//! `memstate diff A B`: allocations that appeared, disappeared or changed between two snapshots.

use std::path::Path;

use memstate::analysis::{self, Change};
use memstate::query::{load, select, Cell, Report, Table};
use memstate::{db, Result};

use super::Printer;
use crate::cli::DiffArgs;

/// One row per change.
fn change_table(changes: &[Change]) -> Table {
    let columns = [
        "change",
        "handle",
        "uid",
        "kind",
        "provenance",
        "size",
        "offset",
        "state_before",
        "state_after",
    ];
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
    Table::new(
        columns.iter().map(|column| column.to_string()).collect(),
        rows,
    )
}

pub fn run(db_path: &Path, args: &DiffArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = &database.conn;
    let before = select::one_snapshot(conn, &args.before)?;
    let after = select::one_snapshot(conn, &args.after)?;
    // What the two snapshots share unchanged cannot differ: each side leaves it out.
    let changes = analysis::diff(
        &load::placed(conn, before, Some(after))?,
        &load::placed(conn, after, Some(before))?,
    );
    let report = Report::table(change_table(&changes)).when_empty(format!(
        "no allocation appeared, disappeared or changed between snapshots {before} and {after}"
    ));
    Printer::new(&args.output).print(&report)?;
    Ok(0)
}
