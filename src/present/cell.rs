//! One value of a result ([`Cell`]) and how it reads: as people read it ([`for_people`], by the
//! column's [`Unit`]) and exactly, for programs (csv text, JSON values).

use crate::units;

/// One value of a result.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
    /// A nested value (a list of blockers, say), held as its compact JSON text (a tenth of the
    /// memory of a `serde_json::Value` tree): nested in json output, that text in csv and tables.
    Json(String),
}

impl Cell {
    /// A nested value: anything that serializes (a value that does not becomes null).
    pub fn json(value: &impl serde::Serialize) -> Cell {
        Cell::Json(serde_json::to_string(value).unwrap_or_else(|_| "null".to_string()))
    }

    pub fn text(text: impl Into<String>) -> Cell {
        Cell::Text(text.into())
    }

    pub fn optional_text(text: Option<&str>) -> Cell {
        text.map_or(Cell::Null, |text| Cell::Text(text.to_string()))
    }

    /// A count or size (they fit in i64: sizes are below 2^63 by validation).
    pub fn count(value: u64) -> Cell {
        Cell::Integer(i64::try_from(value).unwrap_or(i64::MAX))
    }

    pub fn optional_count(value: Option<u64>) -> Cell {
        value.map_or(Cell::Null, Cell::count)
    }

    /// About how many bytes this value holds (what a bounded answer counts).
    pub fn held_bytes(&self) -> usize {
        let content = match self {
            Cell::Null | Cell::Integer(_) | Cell::Real(_) => 0,
            Cell::Text(text) | Cell::Json(text) => text.len(),
            Cell::Blob(bytes) => bytes.len(),
        };
        std::mem::size_of::<Cell>() + content
    }
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
    /// The word that declares this unit ([`Unit::named`]'s), `None` for none.
    pub fn word(self) -> Option<&'static str> {
        match self {
            Unit::Plain => None,
            Unit::Bytes => Some("bytes"),
            Unit::Offset => Some("offset"),
            Unit::Ratio => Some("ratio"),
            Unit::Seconds => Some("seconds"),
            Unit::Identifier => Some("id"),
        }
    }

    /// The unit a declaration names: `bytes`, `offset`, `ratio`, `seconds`, `id`; `count`, `text`,
    /// `-` or nothing for none. Views declare theirs in docs/SCHEMA.md, canned queries in their
    /// `@column` lines, and a command's own table with its columns. `None` for a word that is
    /// none of these (a test holds every declaration to them).
    pub fn named(word: &str) -> Option<Unit> {
        match word {
            "bytes" => Some(Unit::Bytes),
            "offset" => Some(Unit::Offset),
            "ratio" => Some(Unit::Ratio),
            "seconds" => Some(Unit::Seconds),
            "id" => Some(Unit::Identifier),
            "" | "-" | "count" | "integer" | "text" => Some(Unit::Plain),
            _ => None,
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

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

pub(super) fn cell_exact(cell: &Cell) -> String {
    match cell {
        Cell::Null => String::new(),
        Cell::Integer(number) => number.to_string(),
        Cell::Real(number) => number.to_string(),
        Cell::Text(text) => text.clone(),
        Cell::Blob(bytes) => hex(bytes),
        Cell::Json(text) => text.clone(),
    }
}

pub(super) fn cell_json(cell: &Cell) -> serde_json::Value {
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
