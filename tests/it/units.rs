//! Units are declared with the columns that carry them (issue 28): docs/SCHEMA.md beside each
//! view column, a canned query's `@column` lines. Every declaration names a known unit, a name
//! means one unit everywhere, and results of ad hoc SQL are shown by it.

use std::collections::BTreeMap;
use std::path::Path;

use memstate::present::Unit;

/// Each row of a view's column table in docs/SCHEMA.md: (columns named, unit cell).
fn schema_rows() -> Vec<(Vec<String>, String)> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/SCHEMA.md"))
            .unwrap();
    let mut rows = Vec::new();
    for line in text.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let names = cells[1]
            .split(',')
            .map(|name| name.trim().trim_matches('`').to_string())
            .collect();
        rows.push((names, cells[2].to_string()));
    }
    rows
}

#[test]
fn every_view_column_declares_a_known_unit_one_per_column_or_one_for_all() {
    let rows = schema_rows();
    assert!(rows.len() > 80, "only {} column rows", rows.len());
    for (names, cell) in &rows {
        let words: Vec<&str> = cell.split(',').map(str::trim).collect();
        assert!(
            words.len() == 1 || words.len() == names.len(),
            "{names:?}: {} units for {} columns",
            words.len(),
            names.len()
        );
        for word in words {
            assert!(
                Unit::named(word).is_some(),
                "{names:?}: unknown unit {word:?}"
            );
        }
    }
    // The figures users read most carry theirs.
    let unit_of = |column: &str| {
        rows.iter()
            .find(|(names, _)| names == &[column.to_string()])
            .map(|(_, cell)| cell.clone())
    };
    assert_eq!(unit_of("largest_hole").as_deref(), Some("bytes"));
    assert_eq!(unit_of("fragmentation").as_deref(), Some("ratio"));
    assert_eq!(unit_of("uid").as_deref(), Some("id"));
}

#[test]
fn every_canned_query_column_declares_a_known_unit() {
    let declared = crate::common::query_declarations("@column");
    for (path, line, words) in &declared {
        assert!(
            words.len() >= 2 && Unit::named(&words[1]).is_some(),
            "{}: {line:?} declares no known unit",
            path.display()
        );
    }
    let declared = declared.len();
    assert!(declared >= 60, "only {declared} @column lines found");
}

#[test]
fn a_column_name_means_one_unit_everywhere() {
    let mut seen: BTreeMap<String, (Unit, String)> = BTreeMap::new();
    let mut conflicts = Vec::new();
    for (name, unit, place) in memstate::query::columns::declarations() {
        match seen.get(&name) {
            Some((first, where_first)) if *first != unit => conflicts.push(format!(
                "{name}: {first:?} in {where_first}, {unit:?} in {place}"
            )),
            Some(_) => {}
            None => {
                seen.insert(name, (unit, place));
            }
        }
    }
    assert!(conflicts.is_empty(), "{conflicts:#?}");
    assert_eq!(memstate::query::columns::unit_of("free_bytes"), Unit::Bytes);
    assert_eq!(memstate::query::columns::unit_of("offset"), Unit::Offset);
    assert_eq!(
        memstate::query::columns::unit_of("made_up_name"),
        Unit::Plain
    );
}

/// Ad hoc SQL: a column named as a view's is shown in its unit, one named otherwise as it is.
#[test]
fn ad_hoc_sql_shows_columns_by_their_declared_units() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::common::write_json(dir.path(), "small.json", &crate::common::small());
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&path], 0);
    let out = crate::common::text_of(
        &db,
        &[
            "sql",
            "SELECT 3 * 1048576 AS free_bytes, 3 * 1048576 AS plain_number, 4096 AS offset, 0.25 AS fragmentation",
        ],
    );
    // By hand: 3 MiB in binary units, the same number plain, 4096 in hex, a ratio to 3 places.
    assert!(out.contains("3.0 MiB") || out.contains("3 MiB"), "{out}");
    assert!(out.contains("3145728"), "{out}");
    assert!(out.contains("0x1000"), "{out}");
    assert!(out.contains("0.250"), "{out}");
}
