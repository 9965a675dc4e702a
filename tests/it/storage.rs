//! Storage v2 (allocations and holes kept as spans): the public views keep their columns (as
//! docs/SCHEMA.md lists them) and their rows (a v1 database upgrades with every view unchanged),
//! any import order gives the same views, questions about one snapshot, memory or uid use indexes,
//! and the span-based canned queries agree with the per-snapshot formulations they replaced.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use memstate::present::Cell;
use memstate::query::canned;
use rusqlite::Connection;

use crate::common::{data, on_db};

/// (view, columns in order) as docs/SCHEMA.md lists them.
fn documented_views() -> Vec<(String, Vec<String>)> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/SCHEMA.md"))
            .unwrap();
    let mut views: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line
            .strip_prefix("## `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            views.push((name.to_string(), Vec::new()));
        } else if let (Some(row), Some((_, columns))) = (line.strip_prefix("| `"), views.last_mut())
        {
            let cell = row.split(" |").next().unwrap();
            columns.extend(
                cell.split(", ")
                    .map(|column| column.trim_matches('`').to_string()),
            );
        }
    }
    views
}

fn view_columns(conn: &Connection, view: &str) -> Vec<String> {
    let statement = conn
        .prepare(&format!("SELECT * FROM {view}"))
        .unwrap_or_else(|error| panic!("{view}: {error}"));
    statement.column_names().map(str::to_string).collect()
}

/// The paths imported into `db`, none refused; the database is left open, unfinished.
fn import_into(db: &Path, paths: &[PathBuf]) -> memstate::db::Database {
    let mut database = memstate::db::open(db).unwrap();
    let paths: Vec<String> = paths
        .iter()
        .map(|path| path.display().to_string())
        .collect();
    let summary =
        memstate::import::import(&mut database, &paths, Default::default(), &mut |_| {}).unwrap();
    assert_eq!(summary.refused, 0);
    database
}

/// `paths` imported as the command does: the session finished, so the recorded span ends move
/// to their levels and the indexes a bulk import defers are built.
fn import_finished(db: &Path, paths: &[PathBuf]) {
    import_into(db, paths).finish().unwrap();
}

fn imported(dir: &Path, paths: &[PathBuf]) -> PathBuf {
    let db = dir.join("t.db");
    import_finished(&db, paths);
    db
}

#[test]
fn every_view_has_the_columns_schema_md_lists_in_that_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = imported(dir.path(), &[data("small.json")]);
    let conn = Connection::open(&db).unwrap();
    let documented = documented_views();
    assert!(documented.len() >= 12, "{documented:?}");
    for (view, columns) in &documented {
        assert_eq!(
            &view_columns(&conn, view),
            columns,
            "view {view}: columns against docs/SCHEMA.md"
        );
    }
    let views: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // The views that are private storage (the span tables as readers see them) are not public.
    let private = memstate::db::storage_tables();
    assert!(private.iter().any(|name| name == "allocation_span"));
    for view in views.iter().filter(|view| !private.contains(view)) {
        assert!(
            documented.iter().any(|(name, _)| name == view),
            "view {view} is not documented in docs/SCHEMA.md"
        );
    }
}

/// What `memstate sql --format csv` prints for every v1 view (v1's columns, all columns sorted),
/// in the layout of tests/data/v1/views.csv.gz.
fn v1_views_as_printed(db: &Path) -> String {
    let gz = std::fs::read(data("v1/views.csv.gz")).unwrap();
    let mut golden = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut golden)
        .unwrap();
    let mut printed = String::new();
    let mut lines = golden.lines().peekable();
    while let Some(line) = lines.next() {
        let view = line.strip_prefix("## ").expect("a section header");
        let header = lines.next().expect("a header row");
        while lines.peek().is_some_and(|next| !next.starts_with("## ")) {
            lines.next();
        }
        let columns = header.replace(',', ", ");
        let order: Vec<String> = (1..=header.split(',').count())
            .map(|index| index.to_string())
            .collect();
        let output = on_db(db)
            .args([
                "sql",
                "--format",
                "csv",
                &format!("SELECT {columns} FROM {view} ORDER BY {}", order.join(", ")),
            ])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{view}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        printed.push_str(&format!(
            "## {view}\n{}",
            String::from_utf8(output.stdout).unwrap()
        ));
    }
    assert_eq!(
        printed.lines().count(),
        golden.lines().count(),
        "rows per view differ"
    );
    for (index, (now, then)) in printed.lines().zip(golden.lines()).enumerate() {
        assert_eq!(
            now,
            then,
            "line {} of the views differs after the upgrade",
            index + 1
        );
    }
    printed
}

#[test]
fn a_version_1_database_upgrades_in_place_with_every_view_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v1.db");
    std::fs::copy(data("v1/memstate-v1.db"), &db).unwrap();
    let before: i64 = Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT max(version) FROM refinery_schema_history",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(before, 1);
    v1_views_as_printed(&db);
    let conn = Connection::open(&db).unwrap();
    let version: i64 = conn
        .query_row(
            "SELECT max(version) FROM refinery_schema_history",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(version, memstate::db::schema_version());
    let user_version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(user_version, version);
    // The v1 rows now live as spans: far fewer rows than allocation rows, the same content.
    let spans: i64 = conn
        .query_row("SELECT count(*) FROM allocation_spans", [], |row| {
            row.get(0)
        })
        .unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM allocations", [], |row| row.get(0))
        .unwrap();
    let covered: i64 = conn
        .query_row(
            "SELECT sum(snapshot_count) FROM allocation_spans",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(covered, rows);
    assert!(spans * 2 < rows, "{spans} spans for {rows} rows");
    // Importing more into the upgraded database goes on from there: the run it was made of (the
    // fixture as it was then, before its allocations had call stacks) is unchanged.
    drop(conn);
    let then = dir.path().join("run");
    std::fs::create_dir(&then).unwrap();
    for entry in std::fs::read_dir(data("run")).unwrap() {
        let path = entry.unwrap().path();
        let mut dump: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let top = dump.as_object_mut().unwrap();
        top.remove("frames");
        top.remove("stacks");
        for memory in top["memories"].as_array_mut().unwrap() {
            for allocation in memory["allocations"].as_array_mut().unwrap() {
                allocation.as_object_mut().unwrap().remove("stack");
            }
        }
        std::fs::write(then.join(path.file_name().unwrap()), dump.to_string()).unwrap();
    }
    let output = on_db(&db).arg("import").arg(&then).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("4 unchanged"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn an_upgrade_that_fails_leaves_the_version_1_database_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v1.db");
    std::fs::copy(data("v1/memstate-v1.db"), &db).unwrap();
    // A table in the way of migration 2, created by hand: the upgrade fails half-way through.
    Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE hole_span (x);")
        .unwrap();
    let bytes = std::fs::read(&db).unwrap();
    let output = on_db(&db)
        .args(["sql", "SELECT count(*) FROM allocations"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot apply migration V2__spans"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        bytes,
        "the failed upgrade changed the file"
    );
    let version: i64 = Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT max(version) FROM refinery_schema_history",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(version, 1);
}

/// Every public view's rows with integer ids replaced by what they stand for, sorted: equal for
/// two databases that hold the same dumps, whatever order they came in.
fn canonical_views(db: &Path) -> BTreeMap<String, Vec<String>> {
    let conn = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let lookup = |sql: &str| -> BTreeMap<i64, String> {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let snapshots = lookup("SELECT snapshot_id, run || ':' || node || ':' || seq FROM snapshots");
    let memories = lookup("SELECT memory_id, run || ':' || node || ':' || handle FROM memories");
    let runs = lookup("SELECT run_id, run FROM runs");
    let strings = lookup("SELECT string_id, value FROM strings");
    let mut views = BTreeMap::new();
    for (view, columns) in documented_views() {
        let mut statement = conn.prepare(&format!("SELECT * FROM {view}")).unwrap();
        let rows = statement
            .query_map([], |row| {
                let mut cells = Vec::new();
                for (index, column) in columns.iter().enumerate() {
                    let value: rusqlite::types::Value = row.get(index)?;
                    let id = match value {
                        rusqlite::types::Value::Integer(id) => Some(id),
                        _ => None,
                    };
                    let shown = match (column.as_str(), id) {
                        ("imported_at", _) => continue,
                        ("snapshot_id" | "first_snapshot_id" | "last_snapshot_id", Some(id)) => {
                            snapshots[&id].clone()
                        }
                        ("memory_id", Some(id)) => memories[&id].clone(),
                        ("run_id", Some(id)) => runs[&id].clone(),
                        ("string_id", Some(id)) => strings[&id].clone(),
                        _ => format!("{value:?}"),
                    };
                    cells.push(shown);
                }
                Ok(cells.join("|"))
            })
            .unwrap();
        let mut rows: Vec<String> = rows.map(Result::unwrap).collect();
        rows.sort();
        views.insert(view, rows);
    }
    views
}

/// A dump changed in ways that keep its identity: an allocation's state and size, another gone.
fn altered(path: &Path, seed: u64) -> Vec<u8> {
    let mut dump: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut random = memstate::sim::workload::Random::new(seed);
    for memory in dump["memories"].as_array_mut().unwrap() {
        let allocations = memory["allocations"].as_array_mut().unwrap();
        if allocations.len() < 2 {
            continue;
        }
        let index = random.below(allocations.len() as u64) as usize;
        let allocation = &mut allocations[index];
        allocation["state"] = serde_json::json!(if allocation["state"] == "valid" {
            "collectable"
        } else {
            "valid"
        });
        allocations.remove((index + 1) % allocations.len());
        memory.as_object_mut().unwrap().remove("holes");
    }
    serde_json::to_vec(&dump).unwrap()
}

#[test]
fn any_import_order_and_any_replacement_give_the_same_views() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let config = memstate::sim::Config {
        steps: 120,
        dump_every: 4,
        intern: false,
        continue_after_oom: true,
        ..Default::default()
    };
    memstate::sim::simulate(&config, &folder, &mut |_| {}).unwrap();
    let mut files: Vec<PathBuf> = Vec::new();
    for node in std::fs::read_dir(&folder).unwrap() {
        for file in std::fs::read_dir(node.unwrap().path()).unwrap() {
            files.push(file.unwrap().path());
        }
    }
    files.sort();
    assert!(files.len() >= 40, "{} dumps", files.len());
    let in_order_dir = dir.path().join("in-order");
    std::fs::create_dir(&in_order_dir).unwrap();
    let expected = canonical_views(&imported(&in_order_dir, &files));
    assert!(
        expected["allocation_spans"].len() * 2 < expected["allocations"].len(),
        "the run has long spans"
    );
    let mut random = memstate::sim::workload::Random::new(7);
    for round in 0..8 {
        let mut order = files.clone();
        for index in (1..order.len()).rev() {
            order.swap(index, random.below(index as u64 + 1) as usize);
        }
        let round_dir = dir.path().join(format!("round{round}"));
        std::fs::create_dir(&round_dir).unwrap();
        let db = round_dir.join("t.db");
        let mut database = memstate::db::open(&db).unwrap();
        // Some dumps come first in an altered form and are replaced by the real one later.
        let mut replace_later = Vec::new();
        for (index, file) in order.iter().enumerate() {
            if random.chance(0.2) {
                let fake = round_dir.join(format!("altered-{index}.json"));
                std::fs::write(&fake, altered(file, index as u64)).unwrap();
                let summary = memstate::import::import(
                    &mut database,
                    &[fake.display().to_string()],
                    Default::default(),
                    &mut |_| {},
                )
                .unwrap();
                assert_eq!(
                    (summary.imported, summary.refused),
                    (1, 0),
                    "{}",
                    fake.display()
                );
                replace_later.push(file.clone());
            } else {
                let summary = memstate::import::import(
                    &mut database,
                    &[file.display().to_string()],
                    Default::default(),
                    &mut |_| {},
                )
                .unwrap();
                assert_eq!(summary.refused, 0);
            }
        }
        let replace = memstate::import::IngestOptions {
            replace: true,
            ..Default::default()
        };
        let paths: Vec<String> = replace_later
            .iter()
            .rev()
            .map(|file| file.display().to_string())
            .collect();
        let summary =
            memstate::import::import(&mut database, &paths, replace, &mut |_| {}).unwrap();
        assert_eq!(summary.replaced as usize, replace_later.len());
        drop(database);
        let actual = canonical_views(&db);
        for (view, rows) in &expected {
            assert_eq!(
                actual[view].len(),
                rows.len(),
                "round {round}, view {view}: row count"
            );
            for (got, want) in actual[view].iter().zip(rows) {
                assert_eq!(got, want, "round {round}, view {view}");
            }
        }
    }
}

fn plan(conn: &Connection, sql: &str) -> Vec<String> {
    let mut statement = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
    let count = statement.parameter_count();
    let parameters: Vec<rusqlite::types::Value> = (0..count)
        .map(|_| rusqlite::types::Value::Integer(1))
        .collect();
    statement
        .query_map(rusqlite::params_from_iter(parameters), |row| {
            row.get::<_, String>(3)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn questions_about_one_snapshot_memory_or_uid_search_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let db = imported(dir.path(), &[data("run"), data("small.json")]);
    let conn = Connection::open(&db).unwrap();
    let mut questions: Vec<String> = [
        "SELECT * FROM allocations WHERE snapshot_id = 1",
        "SELECT kind, count(*), sum(size) FROM allocations WHERE snapshot_id = 1 GROUP BY kind",
        "SELECT * FROM allocations WHERE snapshot_id = 1 AND memory_id = 1 ORDER BY offset",
        "SELECT * FROM allocations WHERE memory_id = 1",
        "SELECT * FROM allocations WHERE uid = '0x0000000000000001'",
        "SELECT * FROM holes WHERE snapshot_id = 1 AND memory_id = 1",
        "SELECT * FROM holes WHERE memory_id = 1",
        "SELECT * FROM memory_stats WHERE snapshot_id = 1",
        "SELECT * FROM memory_trend WHERE memory_id = 1",
        "SELECT * FROM memory_trend WHERE snapshot_id = 1",
        "SELECT * FROM allocation_spans WHERE uid = '0x0000000000000001'",
        "SELECT * FROM allocation_spans WHERE memory_id = 1",
        "SELECT * FROM allocation_objects WHERE run = 'golden' AND uid = '0x0000000000000001'",
    ]
    .iter()
    .map(|sql| sql.to_string())
    .collect();
    // The canned questions about one snapshot (their parameters bound to 1); those of a whole run
    // (a run parameter, whatever its name) read every snapshot of it.
    for query in canned::all().iter().filter(|query| {
        query
            .params
            .iter()
            .all(|param| param.kind != canned::ParamKind::Run)
    }) {
        questions.push(query.sql.to_string());
    }
    // What a plan may scan: a constant row, and what is built for the question (its own CTEs
    // and subqueries, and those of the views it reads), never a table stored in the database,
    // whatever its alias.
    let views: Vec<String> = {
        let mut statement = conn
            .prepare("SELECT sql FROM sqlite_master WHERE type = 'view'")
            .unwrap();
        let rows = statement.query_map([], |row| row.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    };
    let stored: Vec<String> = {
        let mut statement = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .unwrap();
        let rows = statement.query_map([], |row| row.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    };
    for sql in &questions {
        let steps = plan(&conn, sql);
        assert!(!steps.is_empty(), "{sql}: no plan");
        let mut built = built_here(sql);
        for view in &views {
            built.extend(built_here(view));
        }
        for step in &steps {
            let Some(rest) = step.strip_prefix("SCAN ") else {
                continue;
            };
            let scanned = rest.split(' ').next().unwrap_or_default();
            let allowed = scanned == "CONSTANT"
                || scanned.starts_with("(subquery")
                || (built.iter().any(|name| name == scanned)
                    && !stored
                        .iter()
                        .any(|name| name == scanned && name != "span_level"));
            assert!(
                allowed,
                "{sql}\nscans {scanned}, which is not built for the question:\n{}",
                steps.join("\n")
            );
        }
    }
}

/// Stored tables a plan may scan, whose rows do not grow with the data: `span_level`, one row
/// per span level (a constant of the schema), and `run`, one row per run (a handful; the views
/// look a memory's run up by name).
const SMALL_TABLES: [&str; 2] = ["span_level", "run"];

/// The names a statement builds for itself: its CTEs (`name AS (`, `name(cols) AS (`) and its
/// subqueries' aliases (`) AS name`); and the aliases of the [`SMALL_TABLES`].
fn built_here(sql: &str) -> Vec<String> {
    let spaced = sql
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace(',', " , ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut names = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        let next = |step: usize| tokens.get(index + step).copied().unwrap_or_default();
        if SMALL_TABLES.contains(token) {
            names.push(next(1).to_string());
        }
        // A built name's alias (`FROM power p`, `JOIN holes AS h`).
        if names.iter().any(|name| name == token) {
            let alias = if next(1).eq_ignore_ascii_case("AS") {
                next(2)
            } else {
                next(1)
            };
            let keyword = [
                "WHERE", "JOIN", "ON", "LEFT", "INNER", "CROSS", "GROUP", "ORDER", "LIMIT",
                "UNION", "SELECT", "AS", "(", ")", ",",
            ]
            .iter()
            .any(|word| word.eq_ignore_ascii_case(alias));
            if !keyword && alias.chars().all(|c| c.is_alphanumeric() || c == '_') {
                names.push(alias.to_string());
            }
        }
        if next(1).eq_ignore_ascii_case("AS") && next(2) == "(" {
            names.push(token.to_string());
        }
        if *token == ")" && next(1).eq_ignore_ascii_case("AS") && next(2) != "(" {
            names.push(next(2).to_string());
        }
        // `name(a, b) AS (`
        if next(1) == "(" {
            if let Some(close) = tokens[index + 1..].iter().position(|t| *t == ")") {
                let after = index + 1 + close;
                if tokens
                    .get(after + 1)
                    .is_some_and(|t| t.eq_ignore_ascii_case("AS"))
                    && tokens.get(after + 2) == Some(&"(")
                {
                    names.push(token.to_string());
                }
            }
        }
    }
    names
}

/// The per-snapshot formulations the span-based canned queries replaced (v1's queries/*.sql), as
/// a second way to the same answers.
const REFERENCE: [(&str, &str); 3] = [
    (
        "long-lived",
        "SELECT s.node, a.uid, a.kind, a.provenance, max(a.size) AS size, min(s.seq) AS first_seq, max(s.seq) AS last_seq,
                count(*) AS snapshots, (max(s.time_ns) - min(s.time_ns)) / 1e9 AS lifetime_s
         FROM allocations a JOIN snapshots s ON s.snapshot_id = a.snapshot_id
         WHERE s.run = :run
         GROUP BY s.node, a.uid, a.kind, a.provenance
         ORDER BY snapshots DESC, lifetime_s DESC, s.node, a.uid
         LIMIT :top",
    ),
    (
        "churn",
        "WITH ordered AS (
             SELECT snapshot_id, node, seq,
                    lag(snapshot_id) OVER (PARTITION BY node ORDER BY seq) AS previous_id,
                    lag(seq) OVER (PARTITION BY node ORDER BY seq) AS previous_seq
             FROM snapshots WHERE run = :run)
         SELECT o.node, o.previous_seq AS from_seq, o.seq AS to_seq,
                (SELECT count(*) FROM allocations n WHERE n.snapshot_id = o.snapshot_id
                   AND n.uid NOT IN (SELECT uid FROM allocations p WHERE p.snapshot_id = o.previous_id)) AS appeared,
                (SELECT coalesce(sum(size), 0) FROM allocations n WHERE n.snapshot_id = o.snapshot_id
                   AND n.uid NOT IN (SELECT uid FROM allocations p WHERE p.snapshot_id = o.previous_id)) AS appeared_bytes,
                (SELECT count(*) FROM allocations p WHERE p.snapshot_id = o.previous_id
                   AND p.uid NOT IN (SELECT uid FROM allocations n WHERE n.snapshot_id = o.snapshot_id)) AS disappeared,
                (SELECT coalesce(sum(size), 0) FROM allocations p WHERE p.snapshot_id = o.previous_id
                   AND p.uid NOT IN (SELECT uid FROM allocations n WHERE n.snapshot_id = o.snapshot_id)) AS disappeared_bytes
         FROM ordered o WHERE o.previous_id IS NOT NULL ORDER BY o.node, o.seq",
    ),
    (
        "growth",
        "WITH per_snapshot AS (
             SELECT s.node, s.seq, a.provenance, sum(a.size) AS bytes
             FROM allocations a JOIN snapshots s ON s.snapshot_id = a.snapshot_id
             WHERE s.run = :run AND a.state IN ('valid', 'collectable', 'pending_alloc')
             GROUP BY s.node, s.seq, a.provenance),
         bounds AS (SELECT node, min(seq) AS first_seq, max(seq) AS last_seq FROM snapshots WHERE run = :run GROUP BY node),
         provenances AS (SELECT DISTINCT node, provenance FROM per_snapshot),
         figures AS (
             SELECT p.node, p.provenance,
                    coalesce((SELECT bytes FROM per_snapshot f WHERE f.node = p.node AND f.provenance IS p.provenance AND f.seq = b.first_seq), 0) AS first_bytes,
                    coalesce((SELECT bytes FROM per_snapshot l WHERE l.node = p.node AND l.provenance IS p.provenance AND l.seq = b.last_seq), 0) AS last_bytes,
                    (SELECT max(bytes) FROM per_snapshot m WHERE m.node = p.node AND m.provenance IS p.provenance) AS peak_bytes
             FROM provenances p JOIN bounds b ON b.node = p.node)
         SELECT node, provenance, first_bytes, last_bytes, last_bytes - first_bytes AS growth_bytes, peak_bytes
         FROM figures WHERE last_bytes - first_bytes > 0
         ORDER BY growth_bytes DESC, node, provenance LIMIT :top",
    ),
];

#[test]
fn span_based_canned_queries_agree_with_their_per_snapshot_formulations() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let config = memstate::sim::Config {
        steps: 200,
        dump_every: 5,
        continue_after_oom: true,
        run_id: "check".into(),
        ..Default::default()
    };
    memstate::sim::simulate(&config, &folder, &mut |_| {}).unwrap();
    let db = imported(dir.path(), &[folder]);
    let database = memstate::db::open_read_only(&db).unwrap();
    for (name, reference) in REFERENCE {
        let query = canned::find(name).unwrap();
        let mut parameters = vec![("run".to_string(), "check".to_string())];
        if query.params.iter().any(|param| param.name == "top") {
            parameters.push(("top".to_string(), "100000".to_string()));
        }
        let ours = canned::execute(database.connection(), &query, &parameters).unwrap();
        let theirs =
            memstate::query::collect(database.connection(), reference, &parameters).unwrap();
        assert!(
            ours.rows.len() > 5,
            "{name}: the run gives too few rows to compare ({})",
            ours.rows.len()
        );
        assert_eq!(ours.columns, theirs.columns, "{name}");
        assert_eq!(ours.rows.len(), theirs.rows.len(), "{name}: rows");
        for (index, (a, b)) in ours.rows.iter().zip(&theirs.rows).enumerate() {
            let same = a.iter().zip(b).all(|pair| match pair {
                (Cell::Real(x), Cell::Real(y)) => (x - y).abs() < 1e-9,
                (x, y) => x == y,
            });
            assert!(
                same,
                "{name} row {index}: spans give {a:?}, snapshots give {b:?}"
            );
        }
    }
}

/// `hole_spans` (the holes' spans, the Parquet export's view): expanding its rows over the seqs
/// they cover gives exactly the rows of `holes`, snapshot by snapshot (checked both ways: every
/// hole lies in a span covering its snapshot, and the spans cover as many rows as there are).
#[test]
fn hole_spans_expand_to_the_holes() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::common::simulated_db(
        dir.path(),
        &memstate::sim::Config {
            nodes: 2,
            steps: 120,
            dump_every: 6,
            continue_after_oom: true,
            ..Default::default()
        },
    );
    let holes: i64 = crate::common::scalar(&db, "SELECT count(*) FROM holes");
    let covered: i64 = crate::common::scalar(&db, "SELECT sum(snapshot_count) FROM hole_spans");
    assert!(holes > 100, "{holes}");
    assert_eq!(covered, holes);
    let uncovered: i64 = crate::common::scalar(
        &db,
        "SELECT count(*) FROM holes h JOIN snapshots s USING (snapshot_id)
         WHERE NOT EXISTS (SELECT 1 FROM hole_spans x WHERE x.memory_id = h.memory_id
                           AND x.offset = h.offset AND x.size = h.size
                           AND s.seq BETWEEN x.first_seq AND x.last_seq)",
    );
    assert_eq!(uncovered, 0);
    let open_last: i64 = crate::common::scalar(
        &db,
        "SELECT count(*) FROM hole_spans x WHERE x.open AND x.last_seq <>
           (SELECT max(seq) FROM snapshots s WHERE s.run = x.run AND s.node = x.node)",
    );
    assert_eq!(open_last, 0);
}

/// The views search a node's span levels only up to the level of its stretch of seqs
/// (migrations/V9__node_levels.sql). Counted by hand: allocation 0xa is in the dumps of seqs 0
/// to 4 and not in 5, so its span [0, 4] lasts 4 seqs, which is level 2 (4 <= 4 < 16); 0xb is in
/// every dump. Seqs 0 to 5 stretch 5 (level 2); with seq 20 the node stretches 20 (level 3:
/// 16 <= 20 < 64), and every snapshot row of the node says so, in either import order.
#[test]
fn the_views_skip_only_span_levels_a_node_cannot_have() {
    let dump = |seq: u64, with_a: bool| {
        let mut allocations = vec![serde_json::json!(
            {"uid": "0xb", "kind": "instance", "state": "valid", "offset": 4096, "size": 4096})];
        if with_a {
            allocations.push(serde_json::json!(
                {"uid": "0xa", "kind": "instance", "state": "valid", "offset": 0, "size": 4096}));
        }
        serde_json::json!({
            "format": "memstate-dump", "version": 1,
            "run": {"id": "levels", "node": 0},
            "snapshot": {"seq": seq, "time_ns": seq * 1000, "reason": "periodic"},
            "memories": [{"id": "0x1", "kind": "GPU_FB_MEM", "capacity": 65536,
                          "allocations": allocations}]
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for seq in 0..=5u64 {
        let path = dir.path().join(format!("d{seq}.json"));
        std::fs::write(&path, dump(seq, seq < 5).to_string()).unwrap();
        paths.push(path);
    }
    let late = dir.path().join("d20.json");
    std::fs::write(&late, dump(20, false).to_string()).unwrap();

    let counts = |db: &Path| -> Vec<(i64, i64, i64)> {
        let conn = Connection::open(db).unwrap();
        let mut statement = conn
            .prepare(
                "SELECT s.seq, s.top_level, (SELECT count(*) FROM allocations a WHERE a.snapshot_id = s.id)
                 FROM snapshot s ORDER BY s.seq",
            )
            .unwrap();
        let rows = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    let db = dir.path().join("first.db");
    import_finished(&db, &paths);
    let expected: Vec<(i64, i64, i64)> = (0..=5)
        .map(|seq| (seq, 2, if seq < 5 { 2 } else { 1 }))
        .collect();
    assert_eq!(counts(&db), expected);
    let conn = Connection::open(&db).unwrap();
    let a_level: i64 = conn
        .query_row(
            "SELECT level FROM allocation_span_stored WHERE uid = 10",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(a_level, 2, "0xa's span is at the node's top level");
    drop(conn);

    let mut wider = expected
        .iter()
        .map(|&(seq, _, count)| (seq, 3, count))
        .collect::<Vec<_>>();
    wider.push((20, 3, 1));
    import_finished(&db, std::slice::from_ref(&late));
    assert_eq!(counts(&db), wider);

    let second = dir.path().join("second.db");
    let mut reversed = vec![late.clone()];
    reversed.extend(paths.iter().rev().cloned());
    import_finished(&second, &reversed);
    assert_eq!(counts(&second), wider);
}
