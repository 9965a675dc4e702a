//! The presenting room: the one way results leave memstate. A [`Report`] is rows (a [`Table`]
//! of typed [`Cell`]s) plus, where a table is not the best way to tell it, a rendering for people.
//! [`emit`] writes it as a table (or that rendering) for people, or in one of the exact formats
//! for programs registered in [`rows::ROW_FORMATS`] (csv, json, ndjson).
//!
//! For people every figure goes through [`crate::units`]: sizes are human (`1.5 GiB`), offsets hex,
//! ratios three decimals, and text is made visible (a dump cannot send escape sequences to the
//! terminal). Tables fit the terminal: a compact set of columns unless asked for all, and long text
//! shortened: [`layout`] chooses the columns, their widths and what to shorten, and prettytable
//! prints the table (columns padded to their widest cell); prose is fitted by
//! [`wrap`]. In the exact formats every number is exact (sizes in bytes, reals with full
//! precision) and NULL is empty (csv) or `null` (json).

use std::io::{self, Write};

mod cell;
pub mod html;
mod layout;
pub mod parallel;
pub mod rows;
mod table;
pub mod wrap;

use layout::write_table;

pub use cell::{for_people, Cell, Unit};
pub use layout::{TableStream, PLANNED_ROWS};
pub use rows::{table_json, RowFormat, RowStream, ROW_FORMATS};
pub use table::Table;

/// How to print a result: a table for people, or one of the registered exact formats.
#[derive(Debug, Clone, Copy, Default)]
pub enum Format {
    /// An aligned table for people; byte sizes shown as 1.5 GiB.
    #[default]
    Table,
    /// Exact rows for programs.
    Rows(&'static RowFormat),
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Format {}

impl Format {
    /// What the table for people is, for `--help`.
    pub const TABLE_ABOUT: &'static str =
        "An aligned table for people: sizes as 1.5 GiB, offsets in hex, fitted to the terminal";

    /// Its `--format` value.
    pub fn name(&self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Rows(format) => format.name,
        }
    }

    /// The format of a `--format` value.
    pub fn named(name: &str) -> Option<Format> {
        if name == "table" {
            return Some(Format::Table);
        }
        ROW_FORMATS
            .iter()
            .find(|format| format.name == name)
            .map(Format::Rows)
    }

    /// Every format's name and what it is: the table first, then the registered ones.
    pub fn all() -> impl Iterator<Item = (&'static str, &'static str)> {
        std::iter::once(("table", Format::TABLE_ABOUT))
            .chain(ROW_FORMATS.iter().map(|format| (format.name, format.about)))
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
/// The indices of the columns `--columns` names among `columns`, in its order; an error that
/// names the unknown ones and lists the columns there are.
pub fn chosen_columns(columns: &[String], chosen: &[String]) -> Result<Vec<usize>, String> {
    let unknown: Vec<&String> = chosen
        .iter()
        .filter(|name| !columns.contains(name))
        .collect();
    if !unknown.is_empty() || chosen.is_empty() {
        let named: Vec<String> = unknown.iter().map(|name| format!("{name:?}")).collect();
        return Err(format!(
            "--columns: {} not a column here; the columns are: {}",
            if named.is_empty() {
                "no name given is".to_string()
            } else {
                format!("{} is", named.join(", "))
            },
            columns.join(",")
        ));
    }
    Ok(chosen
        .iter()
        .filter_map(|name| columns.iter().position(|column| column == name))
        .collect())
}

pub fn emit(report: &Report, format: Format, style: &Style, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => match &report.human {
            Some(human) => match style.width {
                Some(width) => {
                    let mut wrapped = wrap::Wrapping::new(out, width);
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
        Format::Rows(format) => {
            let mut stream = RowStream::start(&report.table.columns, format, out)?;
            for row in &report.table.rows {
                stream.row(row)?;
            }
            stream.finish()
        }
    }
}
