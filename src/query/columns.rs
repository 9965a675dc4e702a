//! The units of the columns memstate documents: every public view's (docs/SCHEMA.md declares
//! them beside each column) and every canned query's (its `@column` lines). A result of ad hoc
//! SQL, or of a listing that selects from the views, shows a column by the unit declared for its
//! name; a name declared nowhere is shown as it is. A test holds the declarations to one unit per
//! name, so a name means the same everywhere.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::{canned, datasette};
use crate::present::{Table, Unit};

/// Every declared column name and its unit.
fn catalogue() -> &'static HashMap<String, Unit> {
    static CATALOGUE: OnceLock<HashMap<String, Unit>> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        declarations()
            .into_iter()
            .map(|(name, unit, _)| (name, unit))
            .collect()
    })
}

/// Each declaration of a column's unit: (column, unit, where it is declared), views first.
pub fn declarations() -> Vec<(String, Unit, String)> {
    let mut declared = Vec::new();
    for view in datasette::views() {
        for ((name, _), unit) in view.columns.iter().zip(&view.units) {
            declared.push((name.clone(), *unit, format!("view {}", view.name)));
        }
    }
    for query in canned::all() {
        for column in &query.columns {
            declared.push((
                column.name.clone(),
                column.shown_as,
                format!("query {}", query.name),
            ));
        }
    }
    declared
}

/// The unit declared for a column name (none when it is declared nowhere).
pub fn unit_of(name: &str) -> Unit {
    catalogue().get(name).copied().unwrap_or(Unit::Plain)
}

/// A table whose columns are shown by the units their names are declared with.
pub fn declared_table(columns: Vec<String>, rows: Vec<Vec<crate::present::Cell>>) -> Table {
    let units = columns.iter().map(|name| unit_of(name)).collect();
    Table::with_units(columns, units, rows)
}
