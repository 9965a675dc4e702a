//! Feeding dashboards: Unix time and series labels in the views (worked out by hand), the Grafana
//! dashboard's SQL through the sqlite3 program (panels and figures), and the pandas example.
//! Datasette is in `datasette`.

use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Value};

use crate::common::{import, write_json};

pub fn dump(run: &str, node: i64, seq: i64, time_ns: i64, wall_time: Option<&str>) -> Value {
    let mut snapshot = json!({"seq": seq, "time_ns": time_ns, "reason": "periodic"});
    if let Some(wall_time) = wall_time {
        snapshot["wall_time"] = json!(wall_time);
    }
    json!({"format": "memstate-dump", "version": 1, "run": {"id": run, "node": node}, "snapshot": snapshot,
           "memories": [{"id": "0x1e00000000000003", "kind": "GPU_FB_MEM", "capacity": 4096,
                         "allocations": [{"uid": 1 + seq as u64 + 10 * node as u64, "kind": "instance", "state": "valid", "offset": 0, "size": 1024}]}]})
}

#[test]
fn views_give_unix_time_from_wall_clocks_and_a_label_per_series() {
    let dir = tempfile::tempdir().unwrap();
    // 2026-12-01T10:00:02Z is 1796112000 (08:00, `date -u -d ... +%s`) + 7202 = 1796119202.
    // node 0: seq 1 has a wall time 2 s into its clock, so its clock starts at 1796119200 and
    //   seq 0 (1 s) is 1796119201.
    // node 1: no wall time at all: the run's earliest wall-timed dump by time_ns is node 2's
    //   seq 0 (time_ns 0, 11:00:00.25+01:00 = 1796119200.25), so 5 s is 1796119205.25.
    // node 2: seq 1 (3 s) has no wall time: its own node's clock (seq 0) gives 1796119203.25.
    // node 3: a leap second, 2016-12-31T23:59:60Z, reads as 2017-01-01T00:00:00Z = 1483228800.
    // Another run with no wall time at all: NULL.
    let dumps = [
        dump("clocks", 0, 0, 1_000_000_000, None),
        dump("clocks", 0, 1, 2_000_000_000, Some("2026-12-01T10:00:02Z")),
        dump("clocks", 1, 0, 5_000_000_000, None),
        dump("clocks", 2, 0, 0, Some("2026-12-01T11:00:00.250+01:00")),
        dump("clocks", 2, 1, 3_000_000_000, None),
        dump("clocks", 3, 0, 7_000_000_000, Some("2016-12-31T23:59:60Z")),
        dump("noclock", 0, 0, 1_000_000_000, None),
    ];
    let paths: Vec<_> = dumps
        .iter()
        .enumerate()
        .map(|(index, value)| write_json(dir.path(), &format!("{index}.json"), value))
        .collect();
    let db = dir.path().join("t.db");
    // Imported newest first: the clocks do not depend on the order.
    let mut reversed: Vec<&Path> = paths.iter().map(|path| path.as_path()).collect();
    reversed.reverse();
    import(&db, &reversed, 0);
    let conn = Connection::open(&db).unwrap();
    let time_of = |run: &str, node: i64, seq: i64| -> Option<f64> {
        conn.query_row(
            "SELECT time_unix FROM snapshots WHERE run = ?1 AND node = ?2 AND seq = ?3",
            rusqlite::params![run, node, seq],
            |row| row.get(0),
        )
        .unwrap()
    };
    let close = |found: Option<f64>, expected: f64| {
        found.is_some_and(|found| (found - expected).abs() < 1e-3)
    };
    assert!(
        close(time_of("clocks", 0, 0), 1_796_119_201.0),
        "{:?}",
        time_of("clocks", 0, 0)
    );
    assert!(
        close(time_of("clocks", 0, 1), 1_796_119_202.0),
        "{:?}",
        time_of("clocks", 0, 1)
    );
    assert!(
        close(time_of("clocks", 1, 0), 1_796_119_205.25),
        "{:?}",
        time_of("clocks", 1, 0)
    );
    assert!(
        close(time_of("clocks", 2, 0), 1_796_119_200.25),
        "{:?}",
        time_of("clocks", 2, 0)
    );
    assert!(
        close(time_of("clocks", 2, 1), 1_796_119_203.25),
        "{:?}",
        time_of("clocks", 2, 1)
    );
    assert!(
        close(time_of("clocks", 3, 0), 1_483_228_800.0),
        "{:?}",
        time_of("clocks", 3, 0)
    );
    assert_eq!(time_of("noclock", 0, 0), None);
    // memory_trend: the same times, and the series label, before `unknown` (V6).
    let mut statement = conn
        .prepare("SELECT * FROM memory_trend WHERE run = 'clocks' AND node = 2 ORDER BY seq")
        .unwrap();
    let names: Vec<String> = statement
        .column_names()
        .map(|name| name.to_string())
        .collect();
    assert_eq!(
        &names[names.len() - 3..],
        ["time_unix", "series", "unknown"]
    );
    let rows: Vec<(f64, String)> = statement
        .query_map([], |row| Ok((row.get("time_unix")?, row.get("series")?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2);
    assert!((rows[1].0 - 1_796_119_203.25).abs() < 1e-3);
    assert_eq!(rows[0].1, "n2 GPU_FB_MEM 0x1e00000000000003");
    let series: String = conn
        .query_row(
            "SELECT series FROM snapshots WHERE run = 'clocks' AND node = 3",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(series, "n3");
}

/// The demo's database, made once per test that needs it.
pub(crate) fn demo_db(dir: &Path) -> std::path::PathBuf {
    let output = crate::common::memstate()
        .arg("demo")
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    dir.join("memstate.db")
}

/// Run SQL with the sqlite3 program (as Grafana's plugin would, outside memstate): rows as JSON.
fn sqlite3_rows(db: &Path, sql: &str) -> Vec<serde_json::Map<String, Value>> {
    // On standard input: an argument starting with "--" (a comment) would be taken for an option.
    let mut child = std::process::Command::new("sqlite3")
        .arg("-readonly")
        .arg("-json")
        .arg(db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(sql.as_bytes()).unwrap();
        stdin.write_all(b";\n").unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "sqlite3 refused:\n{sql}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    if text.trim().is_empty() {
        return Vec::new();
    }
    serde_json::from_str::<Vec<serde_json::Map<String, Value>>>(&text)
        .unwrap_or_else(|error| panic!("{error}: {text}"))
}

/// A Grafana variable's query or a panel's SQL with the variables as Grafana fills them.
fn substitute(sql: &str, values: &[(String, Vec<String>)], from_ms: i64, to_ms: i64) -> String {
    let mut sql = sql
        .replace("$__from", &from_ms.to_string())
        .replace("$__to", &to_ms.to_string());
    for (name, chosen) in values {
        let quoted: Vec<String> = chosen
            .iter()
            .map(|value| format!("'{}'", value.replace('\'', "''")))
            .collect();
        sql = sql
            .replace(&format!("${{{name}:singlequote}}"), &quoted.join(","))
            .replace(&format!("${{{name}}}"), &chosen.join(","))
            .replace(&format!("${name}"), &chosen.join(","));
    }
    assert!(!sql.contains('$'), "a variable left in:\n{sql}");
    sql
}

/// The demo database with the Grafana dashboard's variables filled and its SQL targets gathered.
struct Grafana {
    _dir: tempfile::TempDir,
    db: std::path::PathBuf,
    conn: Connection,
    values: Vec<(String, Vec<String>)>,
    targets: Vec<(String, Value)>,
    /// The run's first and last Unix times, and the dashboard's range around them.
    first: f64,
    last: f64,
    from_ms: i64,
    to_ms: i64,
}

impl Grafana {
    /// A target's SQL with the variables filled.
    fn sql(&self, target: usize) -> String {
        substitute(
            self.targets[target].1["rawQueryText"].as_str().unwrap(),
            &self.values,
            self.from_ms,
            self.to_ms,
        )
    }
}

/// None when the sqlite3 program is missing (and CI is not set).
fn grafana() -> Option<Grafana> {
    if !crate::common::have(
        "sqlite3",
        "to run the Grafana dashboard's SQL as its data source would",
    ) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = demo_db(dir.path());
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards/grafana/memstate.json"),
        )
        .unwrap(),
    )
    .unwrap();
    // The variables as Grafana fills them: each variable's own query gives its choices (the first
    // is taken, or all for a multi-value one with All).
    let mut values: Vec<(String, Vec<String>)> = Vec::new();
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        let name = variable["name"].as_str().unwrap().to_string();
        assert_eq!(variable["datasource"]["type"], "frser-sqlite-datasource");
        let sql = substitute(
            variable["query"]["rawQueryText"].as_str().unwrap(),
            &values,
            0,
            0,
        );
        let rows = sqlite3_rows(&db, &sql);
        assert!(!rows.is_empty(), "variable {name} has no choices:\n{sql}");
        let choices: Vec<String> = rows
            .iter()
            .map(|row| {
                row.values()
                    .next()
                    .unwrap()
                    .to_string()
                    .trim_matches('"')
                    .to_string()
            })
            .collect();
        let chosen = if variable["includeAll"] == true {
            choices
        } else {
            vec![choices[0].clone()]
        };
        values.push((name, chosen));
    }
    assert_eq!(
        values
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["run", "node", "memory_kind"]
    );
    // The time range: the demo's run, which happened just now (its wall times start now).
    let conn = Connection::open(&db).unwrap();
    let (first, last): (f64, f64) = conn
        .query_row(
            "SELECT min(time_unix), max(time_unix) FROM snapshots",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (now - first).abs() < 600.0,
        "the demo's run happened now: {first} vs {now}"
    );
    let (from_ms, to_ms) = (
        (first * 1000.0) as i64 - 1000,
        (last * 1000.0) as i64 + 1000,
    );
    let mut targets: Vec<(String, Value)> = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            targets.push((panel["title"].as_str().unwrap().to_string(), target.clone()));
        }
    }
    for annotation in dashboard["annotations"]["list"].as_array().unwrap() {
        if annotation["datasource"]["type"] == "frser-sqlite-datasource" {
            targets.push((
                annotation["name"].as_str().unwrap().to_string(),
                annotation["target"].clone(),
            ));
        }
    }
    assert_eq!(targets.len(), 6, "five panels and the OOM annotations");
    Some(Grafana {
        _dir: dir,
        db,
        conn,
        values,
        targets,
        first,
        last,
        from_ms,
        to_ms,
    })
}

#[test]
#[cfg_attr(
    not(has_sqlite3),
    ignore = "sqlite3 is not installed (.ci/run installs it)"
)]
fn every_grafana_panel_query_returns_rows_with_its_time_column() {
    let Some(grafana) = grafana() else {
        return;
    };
    let Grafana {
        db,
        values,
        targets,
        first,
        last,
        from_ms,
        to_ms,
        ..
    } = &grafana;
    let (first, last, from_ms, to_ms) = (*first, *last, *from_ms, *to_ms);
    for (title, target) in targets.iter() {
        assert_eq!(
            target["datasource"]["uid"], "memstate",
            "{title}: the provisioned data source"
        );
        let sql = substitute(
            target["rawQueryText"].as_str().unwrap(),
            values,
            from_ms,
            to_ms,
        );
        let rows = sqlite3_rows(db, &sql);
        assert!(!rows.is_empty(), "{title}: no rows:\n{sql}");
        let time_columns: Vec<&str> = target["timeColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|column| column.as_str().unwrap())
            .collect();
        assert!(
            !time_columns.is_empty(),
            "{title}: declares its time column"
        );
        for row in &rows {
            for column in &time_columns {
                let time = row
                    .get(*column)
                    .and_then(Value::as_f64)
                    .unwrap_or_else(|| panic!("{title}: no Unix time in {column}: {row:?}"));
                assert!(
                    time >= first - 1e-3 && time <= last + 1e-3,
                    "{title}: {column} = {time} is outside the run [{first}, {last}]"
                );
            }
        }
        eprintln!("grafana: {title}: {} rows", rows.len());
    }
}

#[test]
#[cfg_attr(
    not(has_sqlite3),
    ignore = "sqlite3 is not installed (.ci/run installs it)"
)]
fn grafana_panel_figures_agree_with_sql_over_the_views() {
    let Some(grafana) = grafana() else {
        return;
    };
    let Grafana {
        db, conn, values, ..
    } = &grafana;
    let db = db.as_path();
    // The provenance table, checked by a second method: the allocations view at that snapshot.
    let table = grafana.sql(3);
    let listed: i64 = sqlite3_rows(db, &table)
        .iter()
        .map(|row| row["allocations"].as_i64().unwrap())
        .sum();
    let live = sqlite3_rows(db, &format!("SELECT count(*) AS n FROM allocations WHERE state IN ('valid', 'pending_alloc') AND snapshot_id = (SELECT snapshot_id FROM snapshots WHERE run = 'demo-seed1' AND node = {} ORDER BY seq DESC LIMIT 1)", values[1].1[0]));
    assert!(
        listed > 0 && listed <= live[0]["n"].as_i64().unwrap(),
        "the 25 biggest holders are among the live allocations"
    );
    // The stacked kinds, checked by a second method: at the node's last snapshot, each kind's
    // last step equals the sum over that snapshot's allocations.
    let by_kind = grafana.sql(2);
    let steps = sqlite3_rows(db, &by_kind);
    let mut last_step: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    for row in &steps {
        last_step.insert(
            row["kind"].as_str().unwrap().to_string(),
            row["bytes"].as_i64().unwrap(),
        );
    }
    last_step.retain(|_, bytes| *bytes != 0);
    let node = &values[1].1[0];
    let summed = sqlite3_rows(
        db,
        &format!(
            "SELECT kind, sum(size) AS bytes FROM allocations WHERE state <> 'pending_alloc' AND snapshot_id =
               (SELECT snapshot_id FROM snapshots WHERE run = 'demo-seed1' AND node = {node} ORDER BY seq DESC LIMIT 1) GROUP BY kind"
        ),
    );
    let summed: std::collections::BTreeMap<String, i64> = summed
        .iter()
        .map(|row| {
            (
                row["kind"].as_str().unwrap().to_string(),
                row["bytes"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(last_step, summed, "bytes by kind at the last snapshot");
    // The annotations are the OOM snapshots, one row each, naming the failed request.
    let ooms: i64 = conn
        .query_row(
            "SELECT count(*) FROM snapshots WHERE reason = 'oom'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    // The forecast: one point per memory and snapshot where the view knows the dumps left, counted
    // from the view by a second query.
    let kinds: Vec<String> = values[2].1.iter().map(|kind| format!("'{kind}'")).collect();
    let forecast = sqlite3_rows(db, &grafana.sql(4));
    let known = sqlite3_rows(
        db,
        &format!(
            "SELECT count(*) AS n FROM memory_forecast WHERE run = 'demo-seed1' AND node = {node}
               AND kind IN ({}) AND dumps_left IS NOT NULL",
            kinds.join(", ")
        ),
    );
    assert_eq!(forecast.len() as i64, known[0]["n"].as_i64().unwrap());
    assert!(forecast
        .iter()
        .all(|row| row["dumps"].as_i64().is_some_and(|dumps| dumps >= 0)));
    let annotation = grafana.sql(5);
    let rows = sqlite3_rows(db, &annotation);
    assert_eq!(rows.len() as i64, ooms);
    assert!(
        rows[0]["text"]
            .as_str()
            .unwrap()
            .contains("bytes in GPU_FB_MEM 0x1e"),
        "{rows:?}"
    );
}

#[test]
#[cfg_attr(
    not(has_pandas),
    ignore = "python3 with pandas and matplotlib is not installed (.ci/run installs them)"
)]
fn the_pandas_example_reads_the_views_and_plots() {
    if !crate::common::python_with("pandas, matplotlib", "to run examples/pandas_trend.py") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = demo_db(dir.path());
    let png = dir.path().join("fragmentation.png");
    let output = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pandas_trend.py"))
        .arg(&db)
        .arg(&png)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<Vec<&str>> = printed
        .lines()
        .map(|line| line.split('\t').collect())
        .collect();
    let find = |key: &str| {
        lines
            .iter()
            .filter(|fields| fields[0] == key)
            .cloned()
            .collect::<Vec<_>>()
    };
    // The same figures by SQL, without pandas.
    let conn = Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM memory_trend", [], |row| row.get(0))
        .unwrap();
    assert_eq!(find("trend_rows")[0][1], rows.to_string());
    for fields in find("max_fragmentation") {
        let expected: f64 = conn
            .query_row(
                "SELECT max(fragmentation) FROM memory_trend WHERE series = ?1",
                [fields[1]],
                |row| row.get(0),
            )
            .unwrap();
        assert!(
            (fields[2].parse::<f64>().unwrap() - expected).abs() < 1e-6,
            "{fields:?} against {expected}"
        );
    }
    assert_eq!(
        find("max_fragmentation").len() as i64,
        conn.query_row(
            "SELECT count(DISTINCT series) FROM memory_trend",
            [],
            |row| row.get::<_, i64>(0)
        )
        .unwrap()
    );
    let oom: i64 = conn
        .query_row(
            "SELECT snapshot_id FROM snapshots WHERE reason = 'oom' ORDER BY time_s DESC LIMIT 1",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(
        find("snapshot")[0][1],
        oom.to_string(),
        "the example looks at the OOM snapshot"
    );
    let (count, bytes): (i64, i64) = conn
        .query_row(
            "SELECT count(*), sum(size) FROM allocations WHERE snapshot_id = ?1",
            [oom],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        find("allocations")[0][1..],
        [count.to_string(), bytes.to_string()]
    );
    let picture = std::fs::read(&png).unwrap();
    assert!(
        picture.starts_with(b"\x89PNG") && picture.len() > 10_000,
        "a PNG chart"
    );
}
