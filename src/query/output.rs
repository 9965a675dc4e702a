//! Printing result tables: a readable table (prettytable-rs, sizes made human), or exact,
//! machine-readable csv, json (an array of objects) and ndjson (one object per line).
//!
//! This is the only module that knows about prettytable. In csv and json every number is exact
//! (sizes in bytes, reals with full precision) and NULL is empty (csv) or `null` (json).

use std::io::{self, Write};

use super::Cell;

/// How to print a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// An aligned table for people; byte sizes shown as 1.5 GiB.
    #[default]
    Table,
    /// Comma-separated values with a header row; exact numbers.
    Csv,
    /// One JSON array of objects; exact numbers, NULL as null.
    Json,
    /// One JSON object per line; exact numbers, NULL as null.
    Ndjson,
}

/// A result: named columns and rows of cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    /// Columns holding byte counts, shown human-readable in the table format.
    pub size_columns: Vec<bool>,
}

impl Table {
    pub fn new(columns: Vec<String>, rows: Vec<Vec<Cell>>) -> Table {
        let size_columns = vec![false; columns.len()];
        Table { columns, rows, size_columns }
    }

    /// Mark the named columns as byte sizes.
    pub fn with_sizes(mut self, names: &[&str]) -> Table {
        for (index, column) in self.columns.iter().enumerate() {
            if names.contains(&column.as_str()) {
                self.size_columns[index] = true;
            }
        }
        self
    }

    /// The index of a column by name.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|column| column == name)
    }
}

/// `1536` → `1.5 KiB`; below 1 KiB the exact count of bytes.
pub fn human_size(bytes: i64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let magnitude = bytes.unsigned_abs();
    if magnitude < 1024 {
        return format!("{bytes} B");
    }
    let mut value = magnitude as f64;
    let mut unit = 0;
    value /= 1024.0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let sign = if bytes < 0 { "-" } else { "" };
    let shown = if value >= 100.0 || (value.fract() * 10.0).round() == 0.0 || (value.fract() * 10.0).round() == 10.0 {
        format!("{:.0}", value)
    } else {
        format!("{:.1}", value)
    };
    format!("{sign}{shown} {}", UNITS[unit])
}

fn real_for_people(number: f64) -> String {
    let text = format!("{number:.5}");
    let trimmed = text.trim_end_matches('0').trim_end_matches('.');
    if trimmed.is_empty() || trimmed == "-" {
        "0".to_string()
    } else {
        trimmed.to_string()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn cell_for_people(cell: &Cell, is_size: bool) -> String {
    match cell {
        Cell::Null => String::new(),
        Cell::Integer(number) if is_size => human_size(*number),
        Cell::Integer(number) => number.to_string(),
        Cell::Real(number) => real_for_people(*number),
        Cell::Text(text) => text.clone(),
        Cell::Blob(bytes) => hex(bytes),
    }
}

fn cell_exact(cell: &Cell) -> String {
    match cell {
        Cell::Null => String::new(),
        Cell::Integer(number) => number.to_string(),
        Cell::Real(number) => number.to_string(),
        Cell::Text(text) => text.clone(),
        Cell::Blob(bytes) => hex(bytes),
    }
}

fn cell_json(cell: &Cell) -> serde_json::Value {
    match cell {
        Cell::Null => serde_json::Value::Null,
        Cell::Integer(number) => serde_json::Value::from(*number),
        Cell::Real(number) => serde_json::Number::from_f64(*number).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null),
        Cell::Text(text) => serde_json::Value::String(text.clone()),
        Cell::Blob(bytes) => serde_json::Value::String(hex(bytes)),
    }
}

/// One row as a JSON object, keys in column order.
fn json_object(columns: &[String], row: &[Cell]) -> String {
    let mut text = String::from("{");
    for (index, (column, cell)) in columns.iter().zip(row).enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push_str(&serde_json::Value::String(column.clone()).to_string());
        text.push(':');
        text.push_str(&cell_json(cell).to_string());
    }
    text.push('}');
    text
}

/// Print `table` in `format`.
pub fn render(table: &Table, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => {
            use prettytable::format::{FormatBuilder, LinePosition, LineSeparator};
            use prettytable::{Cell as PrettyCell, Row};
            let mut pretty = prettytable::Table::new();
            pretty.set_format(
                FormatBuilder::new()
                    .column_separator(' ')
                    .separator(LinePosition::Title, LineSeparator::new('-', ' ', ' ', ' '))
                    .padding(0, 1)
                    .build(),
            );
            pretty.set_titles(Row::new(table.columns.iter().map(|column| PrettyCell::new(column)).collect()));
            for row in &table.rows {
                let cells = row
                    .iter()
                    .zip(&table.size_columns)
                    .map(|(cell, &is_size)| {
                        let text = cell_for_people(cell, is_size);
                        match cell {
                            Cell::Integer(_) | Cell::Real(_) => PrettyCell::new_align(&text, prettytable::format::Alignment::RIGHT),
                            _ => PrettyCell::new(&text),
                        }
                    })
                    .collect();
                pretty.add_row(Row::new(cells));
            }
            if table.rows.is_empty() {
                writeln!(out, "(no rows)")
            } else {
                pretty.print(out).map(|_| ())
            }
        }
        Format::Csv => {
            let mut writer = csv::Writer::from_writer(out);
            writer.write_record(&table.columns).map_err(io::Error::other)?;
            for row in &table.rows {
                writer.write_record(row.iter().map(cell_exact)).map_err(io::Error::other)?;
            }
            writer.flush()
        }
        Format::Json => {
            writeln!(out, "[")?;
            for (index, row) in table.rows.iter().enumerate() {
                let separator = if index + 1 < table.rows.len() { "," } else { "" };
                writeln!(out, "  {}{separator}", json_object(&table.columns, row))?;
            }
            writeln!(out, "]")
        }
        Format::Ndjson => {
            for row in &table.rows {
                writeln!(out, "{}", json_object(&table.columns, row))?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1024), "1 KiB");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
        assert_eq!(human_size(225280), "220 KiB");
        assert_eq!(human_size(-2048), "-2 KiB");
    }
}
