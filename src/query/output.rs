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
        format => {
            let mut stream = RowStream::start(&table.columns, format, Box::new(out))?;
            for row in &table.rows {
                stream.row(row)?;
            }
            stream.finish()
        }
    }
}

/// Exact, machine-readable output written row by row (csv, json, ndjson), so a result of any size
/// is never held in memory.
pub struct RowStream<'w> {
    columns: Vec<String>,
    format: Format,
    csv: Option<csv::Writer<Box<dyn Write + 'w>>>,
    out: Option<Box<dyn Write + 'w>>,
    rows: u64,
}

impl<'w> RowStream<'w> {
    /// Begin: the csv header, or the opening bracket of a json array. `format` must not be table.
    pub fn start(columns: &[String], format: Format, mut out: Box<dyn Write + 'w>) -> io::Result<RowStream<'w>> {
        let mut stream = RowStream { columns: columns.to_vec(), format, csv: None, out: None, rows: 0 };
        match format {
            Format::Csv => {
                let mut writer = csv::Writer::from_writer(out);
                writer.write_record(columns).map_err(io::Error::other)?;
                stream.csv = Some(writer);
            }
            Format::Json => {
                out.write_all(b"[\n")?;
                stream.out = Some(out);
            }
            Format::Ndjson | Format::Table => stream.out = Some(out),
        }
        Ok(stream)
    }

    pub fn row(&mut self, cells: &[Cell]) -> io::Result<()> {
        if let Some(writer) = self.csv.as_mut() {
            writer.write_record(cells.iter().map(cell_exact)).map_err(io::Error::other)?;
        } else if let Some(out) = self.out.as_mut() {
            let object = json_object(&self.columns, cells);
            match self.format {
                Format::Json => write!(out, "{}  {object}", if self.rows > 0 { ",\n" } else { "" })?,
                _ => writeln!(out, "{object}")?,
            }
        }
        self.rows += 1;
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<()> {
        if let Some(mut writer) = self.csv.take() {
            return writer.flush();
        }
        if let Some(out) = self.out.as_mut() {
            if self.format == Format::Json {
                out.write_all(if self.rows > 0 { b"\n]\n" } else { b"]\n" })?;
            }
            out.flush()?;
        }
        Ok(())
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
