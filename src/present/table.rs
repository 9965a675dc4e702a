//! A result: named columns, each with its [`Unit`], and rows of [`Cell`]s.

use super::{Cell, Unit};

/// A result: named columns with their units, and rows of cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub units: Vec<Unit>,
    pub rows: Vec<Vec<Cell>>,
    /// The columns people see by default (all when `None`); `--wide` or `--columns` show others.
    pub compact: Option<Vec<String>>,
}

impl Table {
    /// A table of columns each declared with its unit.
    pub fn declared(columns: &[(&str, Unit)], rows: Vec<Vec<Cell>>) -> Table {
        let (columns, units) = columns
            .iter()
            .map(|(name, unit)| (name.to_string(), *unit))
            .unzip();
        Table::with_units(columns, units, rows)
    }

    /// A table of named columns with their units (as many units as columns).
    pub fn with_units(columns: Vec<String>, units: Vec<Unit>, rows: Vec<Vec<Cell>>) -> Table {
        debug_assert_eq!(columns.len(), units.len());
        Table {
            columns,
            units,
            rows,
            compact: None,
        }
    }

    /// A table whose columns carry no unit (their values are shown as they are).
    pub fn plain(columns: Vec<String>, rows: Vec<Vec<Cell>>) -> Table {
        let units = vec![Unit::Plain; columns.len()];
        Table::with_units(columns, units, rows)
    }

    /// A table of one row, from (column, value) pairs: a command's summary. Its columns carry
    /// no unit until [`Table::with_unit`] gives them one.
    pub fn record(fields: Vec<(&str, Cell)>) -> Table {
        let (columns, row): (Vec<String>, Vec<Cell>) = fields
            .into_iter()
            .map(|(name, cell)| (name.to_string(), cell))
            .unzip();
        Table::plain(columns, vec![row])
    }

    /// Give the named columns a unit.
    pub fn with_unit(mut self, names: &[&str], unit: Unit) -> Table {
        for (index, column) in self.columns.iter().enumerate() {
            if names.contains(&column.as_str()) {
                self.units[index] = unit;
            }
        }
        self
    }

    /// The columns to show people by default.
    pub fn compact(mut self, names: &[&str]) -> Table {
        self.compact = Some(names.iter().map(|name| name.to_string()).collect());
        self
    }

    /// Only the columns at `indices`, in that order (`--columns` in an exact format).
    pub fn projected(&self, indices: &[usize]) -> Table {
        Table {
            columns: indices.iter().map(|&i| self.columns[i].clone()).collect(),
            units: indices.iter().map(|&i| self.units[i]).collect(),
            rows: self
                .rows
                .iter()
                .map(|row| indices.iter().map(|&i| row[i].clone()).collect())
                .collect(),
            compact: None,
        }
    }

    /// The index of a column by name.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|column| column == name)
    }

    /// Put columns with these values in front of every row.
    pub fn prefixed(mut self, names: &[(&str, Unit)], values: &[Cell]) -> Table {
        let mut columns: Vec<String> = names.iter().map(|(name, _)| name.to_string()).collect();
        columns.append(&mut self.columns);
        let mut units: Vec<Unit> = names.iter().map(|(_, unit)| *unit).collect();
        units.append(&mut self.units);
        let rows = self
            .rows
            .into_iter()
            .map(|row| values.iter().cloned().chain(row).collect())
            .collect();
        Table {
            columns,
            units,
            rows,
            compact: self.compact,
        }
    }

    /// Add another table's rows (same columns).
    pub fn extend(&mut self, other: Table) {
        self.rows.extend(other.rows);
    }
}
