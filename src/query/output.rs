//! The one way results leave memstate: a [`Report`] is rows (a [`Table`] of typed cells) plus,
//! where a table is not the best way to tell it, a rendering for people. [`emit`] writes it as a
//! table (or that rendering) for people, or as exact csv, json or ndjson for programs.
//!
//! For people every figure goes through [`crate::units`]: sizes are human (`1.5 GiB`), offsets hex,
//! ratios three decimals, and text is made visible (a dump cannot send escape sequences to the
//! terminal). Tables fit the terminal: a compact set of columns unless asked for all, and long text
//! shortened, laid out here (columns padded to their widest cell). In csv and json every number
//! is exact (sizes in bytes, reals with full precision) and NULL is empty (csv) or `null` (json).

use std::io::{self, Write};

use super::Cell;
use crate::units;

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

/// A cell as people read it.
pub fn for_people(cell: &Cell, unit: Unit) -> String {
    match (cell, unit) {
        (Cell::Null, _) => String::new(),
        (Cell::Integer(number), Unit::Bytes) => units::human_size(*number),
        (Cell::Integer(number), Unit::Offset) => units::hex_offset(*number),
        (Cell::Integer(number), _) => number.to_string(),
        (Cell::Real(number), Unit::Ratio) => units::ratio(*number),
        (Cell::Real(number), Unit::Seconds) => units::seconds(*number),
        (Cell::Real(number), Unit::Bytes) => units::human_size_real(*number),
        (Cell::Real(number), _) => {
            let text = format!("{number:.3}");
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        (Cell::Text(text), _) => units::visible(text).into_owned(),
        (Cell::Blob(bytes), _) => hex(bytes),
        (Cell::Json(text), _) => units::visible(text).into_owned(),
    }
}

/// The indices of the columns people see.
fn shown_columns(table: &Table, style: &Style) -> Vec<usize> {
    let pick = |names: &[String]| -> Vec<usize> {
        names.iter().filter_map(|name| table.column(name)).collect()
    };
    match (&style.columns, &table.compact) {
        (Some(names), _) => pick(names),
        (None, Some(names)) if !style.wide => pick(names),
        _ => (0..table.columns.len()).collect(),
    }
}

/// Shorten `text` to `width` characters, marking the cut.
fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{kept}…")
}

fn write_table(table: &Table, style: &Style, out: &mut dyn Write) -> io::Result<()> {
    let mut shown = shown_columns(table, style);
    let mut cells: Vec<Vec<String>> = table
        .rows
        .iter()
        .map(|row| {
            shown
                .iter()
                .map(|&index| for_people(&row[index], table.units[index]))
                .collect()
        })
        .collect();
    let mut titles: Vec<String> = shown
        .iter()
        .map(|&index| table.columns[index].clone())
        .collect();
    let mut hidden: Vec<(usize, String)> = Vec::new();
    // Fit the terminal. Text columns can shrink to 12 characters; when the table would not fit
    // even so (and the user chose no columns), hide columns, text ones first, from the right,
    // keeping the first, and say which. Then shorten the widest text columns until it fits.
    if let Some(width) = style.width {
        let mut widths: Vec<usize> = titles.iter().map(|title| title.chars().count()).collect();
        for row in &cells {
            for (column, text) in row.iter().enumerate() {
                widths[column] = widths[column].max(text.chars().count());
            }
        }
        let total = |widths: &[usize]| widths.iter().map(|width| width + 2).sum::<usize>();
        // A column of text can be shortened; numbers (whatever their unit) cannot. Found once,
        // kept beside the other per-column lists as columns are hidden.
        let mut text: Vec<bool> = shown
            .iter()
            .map(|&index| {
                table.units[index] == Unit::Plain
                    && table.rows.iter().any(|row| {
                        matches!(row[index], Cell::Text(_) | Cell::Json(_) | Cell::Blob(_))
                    })
            })
            .collect();
        // The least a column can take: a text column 12 characters, or its title when longer.
        let least = |text: &[bool], titles: &[String], widths: &[usize], column: usize| {
            if text[column] {
                widths[column].min(titles[column].chars().count().max(12))
            } else {
                widths[column]
            }
        };
        let floor = |text: &[bool], titles: &[String], widths: &[usize]| -> usize {
            (0..widths.len())
                .map(|column| least(text, titles, widths, column) + 2)
                .sum()
        };
        // Text columns go first (they can be looked up), then figures from the right; the
        // first column (what a row is about) stays.
        while floor(&text, &titles, &widths) > width && style.columns.is_none() && !style.wide {
            let text_column = (1..widths.len()).rev().find(|&column| text[column]);
            let Some(column) = text_column.or((widths.len() > 1).then(|| widths.len() - 1)) else {
                break;
            };
            hidden.push((shown[column], titles.remove(column)));
            widths.remove(column);
            shown.remove(column);
            text.remove(column);
            for row in &mut cells {
                row.remove(column);
            }
        }
        while total(&widths) > width {
            let widest = (0..widths.len())
                .filter(|&column| widths[column] > least(&text, &titles, &widths, column))
                .max_by_key(|&column| widths[column]);
            let Some(column) = widest else { break };
            let excess = total(&widths) - width;
            let title = titles[column].chars().count().max(12);
            widths[column] = widths[column].saturating_sub(excess).max(title);
            for row in &mut cells {
                row[column] = shorten(&row[column], widths[column]);
            }
        }
    }
    // Columns padded to their widest cell, one space after each and one between: numbers to the
    // right, text to the left, a line of dashes under the titles. Written straight out (a table
    // a memory for 40,000 memories is a lot of small tables).
    let mut widths: Vec<usize> = titles.iter().map(|title| title.chars().count()).collect();
    for row in &cells {
        for (column, text) in row.iter().enumerate() {
            widths[column] = widths[column].max(text.chars().count());
        }
    }
    let mut line = String::new();
    let pad = |line: &mut String, text: &str, width: usize, right: bool| {
        let fill = width.saturating_sub(text.chars().count());
        if right {
            line.extend(std::iter::repeat_n(' ', fill));
            line.push_str(text);
        } else {
            line.push_str(text);
            line.extend(std::iter::repeat_n(' ', fill));
        }
        line.push(' ');
    };
    for (column, title) in titles.iter().enumerate() {
        if column > 0 {
            line.push(' ');
        }
        pad(&mut line, title, widths[column], false);
    }
    line.push('\n');
    for (column, width) in widths.iter().enumerate() {
        if column > 0 {
            line.push(' ');
        }
        line.extend(std::iter::repeat_n('-', width + 1));
    }
    line.push('\n');
    out.write_all(line.as_bytes())?;
    for (row, texts) in table.rows.iter().zip(&cells) {
        line.clear();
        for (column, (&index, text)) in shown.iter().zip(texts).enumerate() {
            if column > 0 {
                line.push(' ');
            }
            let right = matches!(row[index], Cell::Integer(_) | Cell::Real(_));
            pad(&mut line, text, widths[column], right);
        }
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    if !hidden.is_empty() {
        hidden.sort();
        let hidden: Vec<String> = hidden.into_iter().map(|(_, title)| title).collect();
        let note = format!(
            "({} hidden to fit the terminal: {}; --wide shows every column)",
            if hidden.len() == 1 {
                "1 column"
            } else {
                "columns"
            },
            hidden.join(", ")
        );
        for line in super::wrap::wrap_line(&note, style.width.unwrap_or(usize::MAX)) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A table far wider than the terminal: text columns are hidden from the right (and named)
    /// until the rest fits at 12 characters a text column, then the first is shortened to fit.
    #[test]
    fn a_terminal_narrower_than_the_table_hides_then_shortens_text_columns() {
        let long = "a".repeat(30);
        let columns: Vec<String> = ["name", "other", "size", "offset", "capacity"]
            .iter()
            .map(|name| name.to_string())
            .collect();
        let rows = vec![vec![
            Cell::text(long.clone()),
            Cell::text(long.clone()),
            Cell::Integer(1),
            Cell::Integer(2),
            Cell::Integer(3),
        ]];
        let table = Table::new(columns, rows);
        let mut out = Vec::new();
        // At the floor 14 + 14 + (4 + 2) + (6 + 2) + (8 + 2) = 52: "other" goes (text first);
        // 38 still exceeds 20: then figures from the right, capacity (28) and offset (20); the
        // first column is cut to 12 (14 + 6 = 20).
        let style = Style {
            width: Some(20),
            ..Style::default()
        };
        write_table(&table, &style, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines()
                .nth(2)
                .unwrap()
                .matches(&format!("{}…", "a".repeat(11)))
                .count(),
            1,
            "{text}"
        );
        assert!(
            text.lines().all(|line| line.chars().count() <= 20),
            "{text}"
        );
        let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            joined.contains(
                "(columns hidden to fit the terminal: other, offset, capacity; --wide shows every column)"
            ),
            "{text}"
        );
        // Wide enough for both at their floor: both kept, both shortened as little as needed.
        let mut out = Vec::new();
        let style = Style {
            width: Some(60),
            ..Style::default()
        };
        write_table(&table, &style, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("hidden"), "{text}");
        // 88 wide: one cut by the excess of 28 (to its floor of 12), the other by the 10 still
        // in excess, to 20.
        let mut cut: Vec<usize> = text
            .lines()
            .nth(2)
            .unwrap()
            .split_whitespace()
            .take(2)
            .map(|word| word.chars().count())
            .collect();
        cut.sort_unstable();
        assert_eq!(cut, [12, 20], "{text}");
        // --wide: nothing hidden however narrow.
        let mut out = Vec::new();
        let style = Style {
            width: Some(20),
            wide: true,
            ..Style::default()
        };
        write_table(&table, &style, &mut out).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("hidden"));
    }
}
