//! SQL as users write it (issue 16): a snapshot named by a literal, a subquery, `IN`, a join on
//! `snapshots` or `memories`, a CTE; a uid followed by `EXISTS`, `uid = (subquery)` or a
//! self-join; the same for `holes` and `memory_stats`; whole-run aggregates. Each query runs
//! twice with the same text: once through the views, once against plain tables that this test
//! expands from the dump files itself (TEMP tables of the same names shadow the views), and the
//! answers must be equal. The plans of the questions about one snapshot, one memory or one uid
//! must not scan span storage, and whole-run GROUP BY state or kind must not sort every row, in
//! the bundled SQLite and in the system's sqlite3 (the one that users' shells, Python and
//! Datasette link).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection};
use serde_json::Value;

use crate::common::have;

/// Simulate two runs (two nodes each), import them, and return (folder of dumps, database).
fn fixture(dir: &Path) -> (PathBuf, PathBuf) {
    let dumps = dir.join("dumps");
    for (run, seed) in [("alpha", 3), ("beta", 4)] {
        let config = memstate::sim::Config {
            seed,
            run_id: run.into(),
            steps: 150,
            dump_every: 5,
            continue_after_oom: true,
            intern: seed % 2 == 0,
            ..Default::default()
        };
        memstate::sim::simulate(&config, &dumps.join(run), &mut |_| {}).unwrap();
    }
    let db = dir.join("shapes.db");
    let mut database = memstate::db::open(&db).unwrap();
    let summary = memstate::import::import(
        &mut database,
        &[dumps.display().to_string()],
        Default::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(summary.refused, 0);
    database.finish().unwrap();
    (dumps, db)
}

fn json_files(folder: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            json_files(&path, found);
        } else if path
            .extension()
            .is_some_and(|extension| extension == "json")
        {
            found.push(path);
        }
    }
}

/// A string value of a dump: text, or an index into its `strings`.
fn text(value: &Value, strings: &[Value]) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(index) => Some(
            strings[index.as_u64().unwrap() as usize]
                .as_str()
                .unwrap()
                .to_string(),
        ),
        _ => None,
    }
}

/// An id in canonical form: `0x` and 16 lowercase hex digits.
fn canonical(value: &Value) -> String {
    let number = match value {
        Value::Number(number) => number.as_u64().unwrap(),
        Value::String(text) => {
            u64::from_str_radix(text.trim_start_matches("0x").trim_start_matches("0X"), 16).unwrap()
        }
        other => panic!("not an id: {other}"),
    };
    format!("0x{number:016x}")
}

/// The byte ranges `[start, end)` of a memory's allocations, by start.
fn taken(memory: &Value) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = memory["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["offset"].as_u64().unwrap(),
                a["offset"].as_u64().unwrap() + a["size"].as_u64().unwrap(),
            )
        })
        .collect();
    ranges.sort();
    ranges
}

/// The free ranges of a memory: its listed holes, else the gaps no allocation covers.
fn free_ranges(memory: &Value) -> Vec<(u64, u64)> {
    if let Some(listed) = memory["holes"].as_array() {
        return listed
            .iter()
            .map(|hole| {
                (
                    hole["offset"].as_u64().unwrap(),
                    hole["size"].as_u64().unwrap(),
                )
            })
            .collect();
    }
    let mut gaps = Vec::new();
    let mut at = 0;
    for (start, end) in taken(memory) {
        if start > at {
            gaps.push((at, start - at));
        }
        at = at.max(end);
    }
    let capacity = memory["capacity"].as_u64().unwrap();
    if capacity > at {
        gaps.push((at, capacity - at));
    }
    gaps
}

/// Bytes covered by the allocations, overlapping bytes once.
fn used_bytes(memory: &Value) -> u64 {
    let (mut used, mut at) = (0, 0);
    for (start, end) in taken(memory) {
        let start = start.max(at);
        if end > start {
            used += end - start;
        }
        at = at.max(end);
    }
    used
}

/// TEMP tables `allocations`, `holes` and `memory_stats` (the columns the shapes read), filled
/// from the dump files: one row per allocation, hole or memory per snapshot. Snapshot and memory
/// ids come from the `snapshots` and `memories` views by their natural keys.
fn expand(conn: &Connection, dumps: &Path) -> usize {
    let mut snapshot_ids = BTreeMap::new();
    let mut statement = conn
        .prepare("SELECT run, node, seq, snapshot_id FROM snapshots")
        .unwrap();
    let mut rows = statement.query([]).unwrap();
    while let Some(row) = rows.next().unwrap() {
        snapshot_ids.insert(
            (
                row.get::<_, String>(0).unwrap(),
                row.get::<_, i64>(1).unwrap(),
                row.get::<_, i64>(2).unwrap(),
            ),
            row.get::<_, i64>(3).unwrap(),
        );
    }
    let mut memory_ids = BTreeMap::new();
    let mut statement = conn
        .prepare("SELECT run, node, handle, memory_id FROM memories")
        .unwrap();
    let mut rows = statement.query([]).unwrap();
    while let Some(row) = rows.next().unwrap() {
        memory_ids.insert(
            (
                row.get::<_, String>(0).unwrap(),
                row.get::<_, i64>(1).unwrap(),
                row.get::<_, String>(2).unwrap(),
            ),
            row.get::<_, i64>(3).unwrap(),
        );
    }
    conn.execute_batch(
        "CREATE TEMP TABLE allocations (snapshot_id INTEGER, memory_id INTEGER, uid TEXT, handle TEXT, kind TEXT, state TEXT,
                                        offset INTEGER, size INTEGER, provenance TEXT, label TEXT);
         CREATE TEMP TABLE holes (snapshot_id INTEGER, memory_id INTEGER, offset INTEGER, size INTEGER);
         CREATE TEMP TABLE memory_stats (snapshot_id INTEGER, memory_id INTEGER, capacity INTEGER, allocation_count INTEGER,
                                         used_bytes INTEGER, free_bytes INTEGER, hole_count INTEGER, largest_hole INTEGER);",
    )
    .unwrap();
    let mut files = Vec::new();
    json_files(dumps, &mut files);
    let mut allocation_rows = 0;
    for file in files {
        let dump: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let strings = dump["strings"].as_array().cloned().unwrap_or_default();
        let run = dump["run"]["id"].as_str().unwrap().to_string();
        let node = dump["run"]["node"].as_i64().unwrap();
        let snapshot_id =
            snapshot_ids[&(run.clone(), node, dump["snapshot"]["seq"].as_i64().unwrap())];
        for memory in dump["memories"].as_array().unwrap() {
            let memory_id = memory_ids[&(run.clone(), node, canonical(&memory["id"]))];
            let allocations = memory["allocations"].as_array().unwrap();
            for a in allocations {
                conn.execute(
                    "INSERT INTO temp.allocations VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    params![
                        snapshot_id,
                        memory_id,
                        canonical(&a["uid"]),
                        a.get("handle").map(canonical),
                        text(&a["kind"], &strings),
                        a["state"].as_str().unwrap(),
                        a["offset"].as_i64().unwrap(),
                        a["size"].as_i64().unwrap(),
                        a.get("provenance").and_then(|value| text(value, &strings)),
                        a.get("label").and_then(|value| text(value, &strings)),
                    ],
                )
                .unwrap();
                allocation_rows += 1;
            }
            let free = free_ranges(memory);
            for (offset, size) in &free {
                conn.execute(
                    "INSERT INTO temp.holes VALUES (?1, ?2, ?3, ?4)",
                    params![snapshot_id, memory_id, *offset as i64, *size as i64],
                )
                .unwrap();
            }
            conn.execute(
                "INSERT INTO temp.memory_stats VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    snapshot_id,
                    memory_id,
                    memory["capacity"].as_i64().unwrap(),
                    allocations.len() as i64,
                    used_bytes(memory) as i64,
                    free.iter().map(|(_, size)| *size as i64).sum::<i64>(),
                    free.len() as i64,
                    free.iter().map(|(_, size)| *size as i64).max().unwrap_or(0),
                ],
            )
            .unwrap();
        }
    }
    allocation_rows
}

/// A query's rows as sorted text (the row order of a query without ORDER BY is not an answer).
fn answer(conn: &Connection, sql: &str) -> Vec<String> {
    let mut statement = conn
        .prepare(sql)
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
    let columns = statement.column_count();
    let mut rows = statement.query([]).unwrap();
    let mut found = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let cells: Vec<String> = (0..columns)
            .map(|index| match row.get::<_, SqlValue>(index).unwrap() {
                SqlValue::Null => "NULL".to_string(),
                SqlValue::Integer(value) => value.to_string(),
                SqlValue::Real(value) => format!("{value:.9}"),
                SqlValue::Text(value) => value,
                SqlValue::Blob(value) => format!("{value:?}"),
            })
            .collect();
        found.push(cells.join("|"));
    }
    found.sort();
    found
}

/// The shapes: (name, whether it asks about one snapshot, memory or uid, SQL). `{S1}`, `{S2}`
/// are two snapshot ids of one node, `{SEQ}` a seq, `{RUN}`, `{NODE}`, `{HANDLE}` and `{UID}`
/// name things that exist.
const SHAPES: &[(&str, bool, &str)] = &[
    ("literal snapshot", true, "SELECT count(*), sum(size) FROM allocations WHERE snapshot_id = {S2}"),
    ("scalar subquery", true, "SELECT count(*), sum(size) FROM allocations WHERE snapshot_id = (SELECT max(snapshot_id) FROM snapshots)"),
    ("IN subquery", true, "SELECT snapshot_id, count(*) FROM allocations WHERE snapshot_id IN (SELECT snapshot_id FROM snapshots WHERE seq = {SEQ} AND node = {NODE}) GROUP BY snapshot_id"),
    ("join by seq", true, "SELECT s.run, a.kind, count(*), sum(a.size) FROM allocations a JOIN snapshots s ON s.snapshot_id = a.snapshot_id WHERE s.seq = {SEQ} GROUP BY s.run, a.kind"),
    ("join by run, node, seq", true, "SELECT a.uid, a.state, a.offset FROM allocations a JOIN snapshots s USING (snapshot_id) WHERE s.run = '{RUN}' AND s.node = {NODE} AND s.seq = {SEQ}"),
    ("join by time_s", true, "SELECT count(*), sum(a.size) FROM allocations a JOIN snapshots s USING (snapshot_id) WHERE s.run = '{RUN}' AND s.node = {NODE} AND s.time_s = (SELECT time_s FROM snapshots WHERE snapshot_id = {S1})"),
    ("join memories by handle", true, "SELECT a.state, count(*) FROM allocations a JOIN memories m USING (memory_id) JOIN snapshots s USING (snapshot_id) WHERE m.handle = '{HANDLE}' AND m.run = '{RUN}' AND s.seq = {SEQ} GROUP BY a.state"),
    ("one memory across snapshots", true, "SELECT a.snapshot_id, count(*) FROM allocations a JOIN memories m USING (memory_id) WHERE m.run = '{RUN}' AND m.node = {NODE} AND m.handle = '{HANDLE}' GROUP BY a.snapshot_id"),
    ("CTE", true, "WITH last AS (SELECT snapshot_id FROM snapshots WHERE run = '{RUN}' ORDER BY seq DESC, node LIMIT 1) SELECT a.provenance, count(*) FROM allocations a, last WHERE a.snapshot_id = last.snapshot_id GROUP BY a.provenance"),
    ("self-join by uid", true, "SELECT a.uid, a.state, b.state, b.offset - a.offset FROM allocations a JOIN allocations b ON b.uid = a.uid WHERE a.snapshot_id = {S1} AND b.snapshot_id = {S2}"),
    ("NOT EXISTS by uid", true, "SELECT a.uid, a.size FROM allocations a WHERE a.snapshot_id = {S2} AND NOT EXISTS (SELECT 1 FROM allocations b WHERE b.snapshot_id = {S1} AND b.uid = a.uid)"),
    ("EXISTS by uid", true, "SELECT a.uid FROM allocations a WHERE a.snapshot_id = (SELECT snapshot_id FROM snapshots WHERE snapshot_id = {S1}) AND EXISTS (SELECT 1 FROM allocations b WHERE b.uid = a.uid AND b.snapshot_id = {S2} AND b.state <> a.state)"),
    ("uid literal", true, "SELECT snapshot_id, state, offset FROM allocations WHERE uid = '{UID}'"),
    ("uid = subquery", true, "SELECT snapshot_id, state FROM allocations WHERE uid = (SELECT uid FROM allocations WHERE snapshot_id = {S1} ORDER BY size DESC, uid LIMIT 1)"),
    ("holes by subquery", true, "SELECT count(*), sum(size), max(size) FROM holes WHERE snapshot_id = (SELECT min(snapshot_id) FROM snapshots WHERE run = '{RUN}')"),
    ("holes joined by seq", true, "SELECT s.node, h.memory_id, count(*), max(h.size) FROM holes h JOIN snapshots s USING (snapshot_id) WHERE s.run = '{RUN}' AND s.seq = {SEQ} GROUP BY s.node, h.memory_id"),
    ("holes in a CTE", true, "WITH pick AS (SELECT snapshot_id FROM snapshots WHERE snapshot_id IN ({S1}, {S2})) SELECT h.snapshot_id, h.offset, h.size FROM holes h JOIN pick USING (snapshot_id)"),
    ("holes self-join", true, "SELECT a.memory_id, a.offset, a.size FROM holes a JOIN holes b ON b.memory_id = a.memory_id AND b.offset = a.offset AND b.size = a.size WHERE a.snapshot_id = {S1} AND b.snapshot_id = {S2}"),
    ("memory_stats by subquery", true, "SELECT memory_id, used_bytes, free_bytes, largest_hole FROM memory_stats WHERE snapshot_id = (SELECT max(snapshot_id) FROM snapshots WHERE run = '{RUN}')"),
    ("memory_stats joined", true, "SELECT s.seq, ms.used_bytes, ms.hole_count FROM memory_stats ms JOIN snapshots s USING (snapshot_id) JOIN memories m USING (memory_id) WHERE m.handle = '{HANDLE}' AND m.run = '{RUN}' AND m.node = {NODE}"),
    ("whole run: count and sum", false, "SELECT count(*), sum(size) FROM allocations"),
    ("whole run: by state", false, "SELECT state, count(*), sum(size) FROM allocations GROUP BY state"),
    ("whole run: by kind", false, "SELECT kind, count(*), sum(size) FROM allocations GROUP BY kind"),
    ("whole run: holes", false, "SELECT count(*), sum(size), max(size) FROM holes"),
];

/// Storage a plan must not scan for a question about one snapshot, memory or uid: the span
/// tables and the figures (the view aliases them `a`, `h`, and memory_state by name).
fn scans_storage(step: &str) -> bool {
    let Some(rest) = step.strip_prefix("SCAN ") else {
        return false;
    };
    let table = rest.split(' ').next().unwrap_or_default();
    [
        "a",
        "b",
        "h",
        "allocation_span",
        "hole_span",
        "memory_state",
    ]
    .contains(&table)
}

/// Whole-run GROUP BY state or kind: SQLite has no hash aggregate, so without an index in that
/// order it sorts every allocation row of the run (seconds at 10 million rows).
fn sorts_every_row_unless_indexed(name: &str) -> bool {
    matches!(name, "whole run: by state" | "whole run: by kind")
}

struct Names {
    replacements: Vec<(&'static str, String)>,
}

impl Names {
    fn find(conn: &Connection) -> Names {
        let one = |sql: &str| -> String {
            conn.query_row(sql, [], |row| row.get::<_, SqlValue>(0))
                .map(|value| match value {
                    SqlValue::Integer(number) => number.to_string(),
                    SqlValue::Text(text) => text,
                    other => panic!("{sql}: {other:?}"),
                })
                .unwrap_or_else(|error| panic!("{sql}: {error}"))
        };
        // Two snapshots some way apart on node 1 of the second run, so that things changed between.
        let s1 = one("SELECT snapshot_id FROM snapshots WHERE run = 'beta' AND node = 1 ORDER BY seq LIMIT 1 OFFSET 10");
        let s2 = one("SELECT snapshot_id FROM snapshots WHERE run = 'beta' AND node = 1 ORDER BY seq LIMIT 1 OFFSET 20");
        let seq = one(&format!(
            "SELECT seq FROM snapshots WHERE snapshot_id = {s2}"
        ));
        let handle = one("SELECT handle FROM memories WHERE run = 'beta' AND node = 1 AND kind = 'GPU_FB_MEM' ORDER BY handle LIMIT 1");
        let uid = one(&format!(
            "SELECT uid FROM allocations WHERE snapshot_id = {s1} ORDER BY size DESC, uid LIMIT 1"
        ));
        Names {
            replacements: vec![
                ("{S1}", s1),
                ("{S2}", s2),
                ("{SEQ}", seq),
                ("{RUN}", "beta".into()),
                ("{NODE}", "1".into()),
                ("{HANDLE}", handle),
                ("{UID}", uid),
            ],
        }
    }

    fn fill(&self, sql: &str) -> String {
        self.replacements
            .iter()
            .fold(sql.to_string(), |sql, (name, value)| {
                sql.replace(name, value)
            })
    }
}

fn plan(conn: &Connection, sql: &str) -> Vec<String> {
    let mut statement = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
    statement
        .query_map([], |row| row.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn every_shape_answers_as_a_plain_table_and_plans_without_scanning_spans_or_sorting_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let (dumps, db) = fixture(dir.path());
    let conn = Connection::open(&db).unwrap();
    let names = Names::find(&conn);
    let queries: Vec<(&str, bool, String)> = SHAPES
        .iter()
        .map(|(name, focused, sql)| (*name, *focused, names.fill(sql)))
        .collect();

    // Through the views first (the plans too), then the same text against the plain tables.
    let mut through_views = Vec::new();
    for (name, focused, sql) in &queries {
        through_views.push(answer(&conn, sql));
        if *focused {
            let steps = plan(&conn, sql);
            assert!(
                !steps.iter().any(|step| scans_storage(step)),
                "{name}: scans span storage\n{sql}\n{}",
                steps.join("\n")
            );
        }
        if sorts_every_row_unless_indexed(name) {
            let steps = plan(&conn, sql);
            assert!(
                !steps.iter().any(|step| step.contains("TEMP B-TREE")),
                "{name}: sorts every row\n{sql}\n{}",
                steps.join("\n")
            );
        }
    }
    let expanded = expand(&conn, &dumps);
    assert!(
        expanded > 5_000,
        "the fixture is too small to mean anything: {expanded} allocation rows"
    );
    let mut distinct_answers = BTreeSet::new();
    for ((name, _, sql), ours) in queries.iter().zip(&through_views) {
        let plain = answer(&conn, sql);
        assert!(
            !plain.is_empty() && plain != vec!["0|NULL".to_string()],
            "{name}: the plain table answers nothing; the shape tests nothing\n{sql}"
        );
        assert_eq!(
            ours, &plain,
            "{name}: the views and the plain tables differ\n{sql}"
        );
        distinct_answers.insert(plain);
    }
    assert!(
        distinct_answers.len() == queries.len(),
        "some shapes give the same answer: the names do not pick distinct things"
    );
}

#[test]
#[cfg_attr(
    not(has_sqlite3),
    ignore = "sqlite3 is not installed (.ci/run installs it)"
)]
fn the_system_sqlite3_plans_every_shape_without_scanning_spans_or_sorting_every_row() {
    if !have(
        "sqlite3",
        "to check the plans in the SQLite that users' shells, Python and Datasette link",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, db) = fixture(dir.path());
    let names = Names::find(&Connection::open(&db).unwrap());
    for (name, focused, sql) in SHAPES {
        if !focused && !sorts_every_row_unless_indexed(name) {
            continue;
        }
        let sql = names.fill(sql);
        let output = std::process::Command::new("sqlite3")
            .arg("-readonly")
            .arg(&db)
            .arg(format!("EXPLAIN QUERY PLAN {sql}"))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8_lossy(&output.stdout);
        // The shell draws the plan as a tree: "|--SCAN a ..." or "`--SCAN a ...".
        let steps: Vec<&str> = text
            .lines()
            .map(|line| line.trim_start_matches(['|', '`', '-', ' ']))
            .collect();
        if *focused {
            assert!(
                !steps.iter().any(|step| scans_storage(step)),
                "{name}: sqlite3 scans span storage\n{sql}\n{text}"
            );
        } else {
            assert!(
                !steps.iter().any(|step| step.contains("TEMP B-TREE")),
                "{name}: sqlite3 sorts every row\n{sql}\n{text}"
            );
        }
    }
}
