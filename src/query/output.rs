//! The one way results leave memstate: a [`Report`] is rows (a [`Table`] of typed cells) plus,
//! where a table is not the best way to tell it, a rendering for people. [`emit`] writes it as a
//! table (or that rendering) for people, or as exact csv, json or ndjson for programs.
//!
//! For people every figure goes through [`crate::units`]: sizes are human (`1.5 GiB`), offsets hex,
//! ratios three decimals, and text is made visible (a dump cannot send escape sequences to the
//! terminal). Tables fit the terminal: a compact set of columns unless asked for all, and long text
//! shortened, laid out by [`layout`] (columns padded to their widest cell). In csv and json every
//! number is exact (sizes in bytes, reals with full precision) and NULL is empty (csv) or `null`
//! (json).

use std::io::{self, Write};

mod layout;

use layout::write_table;
pub use layout::{for_people, TableStream, PLANNED_ROWS};

use super::Cell;

/// How to print a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

/// How a column's values are shown to people (machine formats are always exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Plain,
    /// Bytes: `1.5 GiB`.
    Bytes,
    /// An address inside a memory: hex.
    Offset,
    /// 0 to 1 (fragmentation, a share): three decimals.
    Ratio,
    /// Seconds: three decimals.
    Seconds,
    /// An identifier (a uid, a handle): shown whole, never shortened to fit.
    Identifier,
}

impl Unit {
    /// The unit a column name announces, for results whose columns are not described otherwise
    /// (ad hoc SQL over the views uses these names).
    pub fn of_column(name: &str) -> Unit {
        match name {
            "capacity"
            | "used_bytes"
            | "free_bytes"
            | "largest_hole"
            | "reclaimable_bytes"
            | "largest_reclaimable"
            | "unaccounted_bytes"
            | "size"
            | "bytes"
            | "largest"
            | "running_total"
            | "appeared_bytes"
            | "disappeared_bytes"
            | "first_bytes"
            | "last_bytes"
            | "growth_bytes"
            | "peak_bytes"
            | "request_size"
            | "blocked_bytes"
            | "opens"
            | "freed_bytes"
            | "size_class" => Unit::Bytes,
            "offset" | "end_offset" | "window_offset" | "window_end" => Unit::Offset,
            "fragmentation" | "share" | "share_of_free" => Unit::Ratio,
            "time_s" | "lifetime_s" => Unit::Seconds,
            "uid" | "handle" | "memory_handle" | "allocation_handle" => Unit::Identifier,
            _ => Unit::Plain,
        }
    }

    /// The unit of a canned query's documented column unit (`bytes`, `ratio`, ...).
    pub fn of_doc(unit: &str, name: &str) -> Unit {
        match unit {
            "bytes" if Unit::of_column(name) == Unit::Offset => Unit::Offset,
            "bytes" => Unit::Bytes,
            "ratio" => Unit::Ratio,
            "seconds" => Unit::Seconds,
            _ => Unit::of_column(name),
        }
    }
}

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
    /// A table whose units come from its column names.
    pub fn new(columns: Vec<String>, rows: Vec<Vec<Cell>>) -> Table {
        let units = columns.iter().map(|name| Unit::of_column(name)).collect();
        Table {
            columns,
            units,
            rows,
            compact: None,
        }
    }

    /// A table of one row, from (column, value) pairs: a command's summary.
    pub fn record(fields: Vec<(&str, Cell)>) -> Table {
        let (columns, row): (Vec<String>, Vec<Cell>) = fields
            .into_iter()
            .map(|(name, cell)| (name.to_string(), cell))
            .unzip();
        Table::new(columns, vec![row])
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

    /// The index of a column by name.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|column| column == name)
    }

    /// Put columns with these values in front of every row.
    pub fn prefixed(mut self, names: &[&str], values: &[Cell]) -> Table {
        let mut columns: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        columns.append(&mut self.columns);
        let mut units: Vec<Unit> = names.iter().map(|name| Unit::of_column(name)).collect();
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

/// How people's tables are laid out.
#[derive(Debug, Clone, Default)]
pub struct Style {
    /// The terminal's width, when writing to one: tables are fitted to it.
    pub width: Option<usize>,
    /// Every column, not the compact set.
    pub wide: bool,
    /// Exactly these columns.
    pub columns: Option<Vec<String>>,
}

/// What people read instead of the table, when a report is better told another way.
pub type Human<'r> = Box<dyn Fn(&mut dyn Write, &Style) -> io::Result<()> + 'r>;

/// A result for any format.
pub struct Report<'r> {
    pub table: Table,
    pub human: Option<Human<'r>>,
    /// What people read when there are no rows (default: "(no rows)").
    pub empty: Option<String>,
}

impl<'r> Report<'r> {
    pub fn table(table: Table) -> Report<'r> {
        Report {
            table,
            human: None,
            empty: None,
        }
    }

    pub fn told(
        table: Table,
        human: impl Fn(&mut dyn Write, &Style) -> io::Result<()> + 'r,
    ) -> Report<'r> {
        Report {
            table,
            human: Some(Box::new(human)),
            empty: None,
        }
    }

    pub fn when_empty(mut self, message: impl Into<String>) -> Report<'r> {
        self.empty = Some(message.into());
        self
    }
}

/// Write `report` in `format`.
pub fn emit(report: &Report, format: Format, style: &Style, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => match &report.human {
            Some(human) => match style.width {
                Some(width) => {
                    let mut wrapped = super::wrap::Wrapping::new(out, width);
                    human(&mut wrapped, style)?;
                    wrapped.finish()
                }
                None => human(out, style),
            },
            None if report.table.rows.is_empty() => {
                writeln!(out, "{}", report.empty.as_deref().unwrap_or("(no rows)"))
            }
            None => write_table(&report.table, style, out),
        },
        format => {
            let mut stream = RowStream::start(&report.table.columns, format, out)?;
            for row in &report.table.rows {
                stream.row(row)?;
            }
            stream.finish()
        }
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn cell_exact(cell: &Cell) -> String {
    match cell {
        Cell::Null => String::new(),
        Cell::Integer(number) => number.to_string(),
        Cell::Real(number) => number.to_string(),
        Cell::Text(text) => text.clone(),
        Cell::Blob(bytes) => hex(bytes),
        Cell::Json(text) => text.clone(),
    }
}

fn cell_json(cell: &Cell) -> serde_json::Value {
    match cell {
        Cell::Null => serde_json::Value::Null,
        Cell::Integer(number) => serde_json::Value::from(*number),
        Cell::Real(number) => serde_json::Number::from_f64(*number)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        Cell::Text(text) => serde_json::Value::String(text.clone()),
        Cell::Blob(bytes) => serde_json::Value::String(hex(bytes)),
        Cell::Json(text) => serde_json::from_str(text).unwrap_or(serde_json::Value::Null),
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
        match cell {
            // Already compact JSON: written as it is.
            Cell::Json(json) => text.push_str(json),
            cell => text.push_str(&cell_json(cell).to_string()),
        }
    }
    text.push('}');
    text
}

/// Exact, machine-readable output written row by row (csv, json, ndjson), so a result of any size
/// is never held in memory.
pub struct RowStream<W: Write> {
    columns: Vec<String>,
    format: Format,
    csv: Option<csv::Writer<W>>,
    out: Option<W>,
    rows: u64,
}

impl<W: Write> RowStream<W> {
    /// Begin: the csv header, or the opening bracket of a json array. A table format is written as
    /// ndjson (callers that stream do not print tables).
    pub fn start(columns: &[String], format: Format, mut out: W) -> io::Result<RowStream<W>> {
        let mut stream = RowStream {
            columns: columns.to_vec(),
            format,
            csv: None,
            out: None,
            rows: 0,
        };
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
            writer
                .write_record(cells.iter().map(cell_exact))
                .map_err(csv_error)?;
        } else if let Some(out) = self.out.as_mut() {
            let object = json_object(&self.columns, cells);
            match self.format {
                Format::Json => {
                    write!(out, "{}  {object}", if self.rows > 0 { ",\n" } else { "" })?
                }
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

/// csv wraps I/O errors: unwrap them, so that a closed pipe is still seen as one.
fn csv_error(error: csv::Error) -> io::Error {
    match error.into_kind() {
        csv::ErrorKind::Io(error) => error,
        other => io::Error::other(format!("{other:?}")),
    }
}
