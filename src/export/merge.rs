//! Run-level tables merged by the import's own rules, so that a dataset is the same whether a
//! run's nodes were exported together or apart: rows with the same key (a run table's
//! [`Level::Run`] `key`) are one row, and each other field is the greatest given, in SQLite's
//! order of values (an object's field given by one node fills in what another left out; where
//! two disagree the greater text wins, as the import's upsert keeps it).
//!
//! [`Level::Run`]: super::tables::Level::Run

use std::collections::BTreeMap;

use super::parquet_file::Value;
use super::tables::Table;

/// Rows of one run table merged by the import's rules as they are added, keyed by the table's
/// identity: `objects` by object_id, each other field the greatest given (NULL only when none
/// gives it); `allocation_objects` by (uid, field_id, object_id), field_size likewise. The rows
/// come out sorted by the key (NULL first), as the database's export reads them.
pub(super) struct Merged {
    key_columns: Vec<usize>,
    rows: BTreeMap<Vec<Key>, Vec<Value>>,
}

impl Merged {
    pub(super) fn new(table: &Table) -> Merged {
        Merged {
            key_columns: table.key_columns(),
            rows: BTreeMap::new(),
        }
    }

    pub(super) fn add(&mut self, row: Vec<Value>) {
        let key: Vec<Key> = self
            .key_columns
            .iter()
            .map(|index| Key(row[*index].clone()))
            .collect();
        match self.rows.get_mut(&key) {
            None => {
                self.rows.insert(key, row);
            }
            Some(kept) => {
                for (kept, given) in kept.iter_mut().zip(row) {
                    if sqlite_order(&given, kept).is_gt() {
                        *kept = given;
                    }
                }
            }
        }
    }

    /// The merged rows, sorted by key (NULL first), as the database's export reads them.
    pub(super) fn into_rows(self) -> impl Iterator<Item = Vec<Value>> {
        self.rows.into_values()
    }
}

/// A value ordered as SQLite orders them (see [`sqlite_order`]), for keys.
#[derive(Debug, Clone, PartialEq)]
struct Key(Value);

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        sqlite_order(&self.0, &other.0)
    }
}

/// SQLite's order of values: NULL first, then numbers, then text (by bytes).
fn sqlite_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    fn rank(value: &Value) -> u8 {
        match value {
            Value::Null => 0,
            Value::Int(_) | Value::Real(_) => 1,
            Value::Text(_) => 2,
        }
    }
    let number = |value: &Value| match value {
        Value::Int(number) => *number as f64,
        Value::Real(number) => *number,
        _ => 0.0,
    };
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => a.cmp(b),
        (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
        (a, b) if rank(a) == 1 && rank(b) == 1 => {
            number(a).partial_cmp(&number(b)).unwrap_or(Ordering::Equal)
        }
        (a, b) => rank(a).cmp(&rank(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tables;

    fn text(value: &str) -> Value {
        Value::Text(value.to_string())
    }

    /// [`Merged`] over a whole list of rows, in its order.
    fn merge(table: &Table, rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
        let mut merged = Merged::new(table);
        for row in rows {
            merged.add(row);
        }
        merged.into_rows().collect()
    }

    #[test]
    fn objects_merge_field_by_field_with_the_greater_text_winning() {
        let rows = vec![
            vec![
                text("7"),
                text("store"),
                Value::Null,
                text("[3]"),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ],
            vec![
                text("7"),
                Value::Null,
                text("x"),
                text("[30]"),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ],
            vec![
                text("10"),
                text("a"),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ],
        ];
        let merged = merge(&tables::OBJECTS, rows);
        // "10" sorts before "7" as text, as SQLite orders the view.
        assert_eq!(merged[0][0], text("10"));
        // By text, "[3]" is the greater: ']' (0x5d) sorts after '0' (0x30), as in SQLite.
        assert_eq!(
            merged[1][..4],
            [text("7"), text("store"), text("x"), text("[3]")]
        );
        assert_eq!(merged.len(), 2);
    }

    #[test]
    fn links_are_a_set_keyed_by_uid_field_and_object() {
        let uid = "0x0000000000000001";
        let rows = vec![
            vec![text(uid), Value::Int(0), Value::Null, text("7")],
            vec![text(uid), Value::Int(0), Value::Int(8), text("7")],
            vec![text(uid), Value::Null, Value::Null, text("7")],
            vec![text(uid), Value::Int(0), Value::Null, text("7")],
        ];
        let merged = merge(&tables::ALLOCATION_OBJECTS, rows);
        assert_eq!(
            merged,
            vec![
                vec![text(uid), Value::Null, Value::Null, text("7")],
                vec![text(uid), Value::Int(0), Value::Int(8), text("7")],
            ]
        );
    }
}
