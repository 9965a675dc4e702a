//! Exact, machine-readable output, written row by row so a result of any size is never held in
//! memory. Each format is a [`RowWriter`] registered once in [`ROW_FORMATS`]: the command line's
//! `--format` values, their help and [`super::emit`] all come from that list, so a new format is
//! one writer and one entry there.

use std::io::{self, Write};

use super::cell::{cell_exact, cell_json};
use super::Cell;

/// Writes the rows of one result in one format.
pub trait RowWriter {
    fn row(&mut self, cells: &[Cell]) -> io::Result<()>;
    /// The end of the result (a closing bracket, a flush).
    fn finish(self: Box<Self>) -> io::Result<()>;
}

/// Starts a writer: the result's column names, and where to write.
type Start = for<'w> fn(&[String], Box<dyn Write + 'w>) -> io::Result<Box<dyn RowWriter + 'w>>;

/// A machine-readable format.
pub struct RowFormat {
    /// Its `--format` value.
    pub name: &'static str,
    /// What it is, for `--help`.
    pub about: &'static str,
    start: Start,
}

impl std::fmt::Debug for RowFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every machine-readable format, in the order `--help` lists them.
pub static ROW_FORMATS: &[RowFormat] = &[
    RowFormat {
        name: "csv",
        about: "Comma-separated values with a header row; exact numbers",
        start: Csv::start,
    },
    RowFormat {
        name: "json",
        about: "One JSON array of objects; exact numbers, NULL as null",
        start: Json::start,
    },
    RowFormat {
        name: "ndjson",
        about: "One JSON object per line; exact numbers, NULL as null",
        start: Ndjson::start,
    },
];

/// A result's rows on their way out in one format.
pub struct RowStream<'w> {
    writer: Box<dyn RowWriter + 'w>,
}

impl<'w> RowStream<'w> {
    /// Begin: the csv header, or the opening bracket of a json array.
    pub fn start(
        columns: &[String],
        format: &RowFormat,
        out: impl Write + 'w,
    ) -> io::Result<RowStream<'w>> {
        Ok(RowStream {
            writer: (format.start)(columns, Box::new(out))?,
        })
    }

    pub fn row(&mut self, cells: &[Cell]) -> io::Result<()> {
        self.writer.row(cells)
    }

    pub fn finish(self) -> io::Result<()> {
        self.writer.finish()
    }
}

struct Csv<'w> {
    writer: csv::Writer<Box<dyn Write + 'w>>,
}

impl Csv<'_> {
    fn start<'w>(
        columns: &[String],
        out: Box<dyn Write + 'w>,
    ) -> io::Result<Box<dyn RowWriter + 'w>> {
        let mut writer = csv::Writer::from_writer(out);
        writer.write_record(columns).map_err(csv_error)?;
        Ok(Box::new(Csv { writer }))
    }
}

impl RowWriter for Csv<'_> {
    fn row(&mut self, cells: &[Cell]) -> io::Result<()> {
        self.writer
            .write_record(cells.iter().map(cell_exact))
            .map_err(csv_error)
    }

    fn finish(mut self: Box<Self>) -> io::Result<()> {
        self.writer.flush()
    }
}

/// csv wraps I/O errors: unwrap them, so that a closed pipe is still seen as one.
fn csv_error(error: csv::Error) -> io::Error {
    match error.into_kind() {
        csv::ErrorKind::Io(error) => error,
        other => io::Error::other(format!("{other:?}")),
    }
}

struct Json<'w> {
    columns: Vec<String>,
    out: Box<dyn Write + 'w>,
    rows: u64,
}

impl Json<'_> {
    fn start<'w>(
        columns: &[String],
        mut out: Box<dyn Write + 'w>,
    ) -> io::Result<Box<dyn RowWriter + 'w>> {
        out.write_all(b"[\n")?;
        Ok(Box::new(Json {
            columns: columns.to_vec(),
            out,
            rows: 0,
        }))
    }
}

impl RowWriter for Json<'_> {
    fn row(&mut self, cells: &[Cell]) -> io::Result<()> {
        let object = json_object(&self.columns, cells);
        let between = if self.rows > 0 { ",\n" } else { "" };
        self.rows += 1;
        write!(self.out, "{between}  {object}")
    }

    fn finish(mut self: Box<Self>) -> io::Result<()> {
        self.out
            .write_all(if self.rows > 0 { b"\n]\n" } else { b"]\n" })?;
        self.out.flush()
    }
}

struct Ndjson<'w> {
    columns: Vec<String>,
    out: Box<dyn Write + 'w>,
}

impl Ndjson<'_> {
    fn start<'w>(
        columns: &[String],
        out: Box<dyn Write + 'w>,
    ) -> io::Result<Box<dyn RowWriter + 'w>> {
        Ok(Box::new(Ndjson {
            columns: columns.to_vec(),
            out,
        }))
    }
}

impl RowWriter for Ndjson<'_> {
    fn row(&mut self, cells: &[Cell]) -> io::Result<()> {
        writeln!(self.out, "{}", json_object(&self.columns, cells))
    }

    fn finish(mut self: Box<Self>) -> io::Result<()> {
        self.out.flush()
    }
}

/// A whole table as one JSON object: `{"columns": [...], "units": [...], "rows": [{...}]}`,
/// the rows as the json format writes them and each column's unit (`bytes`, `offset`, `ratio`,
/// `seconds`, `id` or null) for a page that shows them as the command line does.
pub fn table_json(table: &super::Table) -> String {
    let units: Vec<Option<&str>> = table.units.iter().map(|unit| unit.word()).collect();
    let mut text = format!(
        "{{\"columns\":{},\"units\":{},\"rows\":[",
        serde_json::Value::from(table.columns.clone()),
        serde_json::to_string(&units).unwrap_or_else(|_| "[]".to_string())
    );
    for (index, row) in table.rows.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push_str(&json_object(&table.columns, row));
    }
    text.push_str("]}");
    text
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
