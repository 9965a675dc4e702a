//! The Parquet runner (scripts/parquet_query.py): the portable queries give on DuckDB and Spark
//! what `memstate report` gives on the databases the dataset came from, parameters are bound as
//! values (a quote or backslash in them never becomes SQL), the folder named is the folder read
//! (glob characters in it are literal), and its table form escapes control characters as
//! `report` does.

use std::path::{Path, PathBuf};
use std::process::Command;

use rusqlite::Connection;

use crate::common::{import, on_db, python_with, succeeds};
use crate::export::{export, run_in_one_and_in_shards, RUN};

/// The canned and the portable form of each query: the same parameters and columns.
#[test]
fn every_canned_query_has_a_portable_form_with_its_parameters_and_columns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("queries");
    let doc = |path: &Path, tag: &str| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter_map(|line| line.strip_prefix(&format!("-- @{tag} ")))
            .map(|rest| rest.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let mut count = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "sql") {
            continue;
        }
        let portable = root.join("portable").join(path.file_name().unwrap());
        assert!(portable.exists(), "no portable form of {}", path.display());
        for tag in ["param", "column"] {
            assert_eq!(
                doc(&path, tag),
                doc(&portable, tag),
                "{} @{tag}",
                path.display()
            );
        }
        count += 1;
    }
    assert_eq!(
        count,
        std::fs::read_dir(root.join("portable")).unwrap().count()
    );
}

/// The queries to compare, each with the parameters that name its snapshot and memory the way
/// `report` and the runner both take them.
fn cases(db: &Path) -> Vec<(String, Vec<String>)> {
    let conn = Connection::open(db).unwrap();
    let (node, seq, memory): (i64, i64, String) = conn
        .query_row(
            "SELECT s.node, s.seq, m.handle FROM failed_requests f JOIN snapshots s USING (snapshot_id)
             JOIN memories m USING (memory_id) ORDER BY s.snapshot_id LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    let snapshot = format!("snapshot_id={RUN}:{node}:{seq}");
    let early = format!("snapshot_id={RUN}:2:8");
    let memory = format!("memory_id={memory}");
    let mut cases = Vec::new();
    for name in ["churn", "fragmentation-trend", "nodes"] {
        cases.push((name.to_string(), vec![]));
    }
    cases.push((
        "compare-runs".to_string(),
        vec![format!("a={RUN}"), format!("b={RUN}")],
    ));
    for name in ["growth", "long-lived"] {
        cases.push((name.to_string(), vec!["top=1000".to_string()]));
    }
    for name in [
        "live-allocations",
        "usage-by-kind",
        "usage-by-object",
        "usage-by-provenance",
        "usage-by-state",
    ] {
        for which in [&snapshot, &early] {
            let mut params = vec![which.clone()];
            if name == "live-allocations" {
                params.push("top=1000".to_string());
            }
            cases.push((name.to_string(), params));
        }
    }
    for name in ["hole-histogram", "largest-holes"] {
        let mut params = vec![snapshot.clone(), memory.clone()];
        if name == "largest-holes" {
            params.push("top=1000".to_string());
        }
        cases.push((name.to_string(), params));
    }
    cases
}

fn report_csv(db: &Path, name: &str, params: &[String]) -> String {
    let mut command = on_db(db);
    command.args(["report", name, "--format", "csv"]);
    for param in params {
        command.args(["-p", param]);
    }
    let output = command.output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{name} {params:?}: {output:?}"
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `report_csv` of a case that must give rows (an empty answer compares nothing).
fn report_rows(db: &Path, name: &str, params: &[String]) -> String {
    let text = report_csv(db, name, params);
    assert!(
        text.lines().count() > 1,
        "{name} {params:?}: no rows to compare"
    );
    text
}

/// The texts a query returns, one per row.
fn query_texts(conn: &Connection, sql: &str) -> Vec<String> {
    conn.prepare(sql)
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Each case run by the Parquet runner on DuckDB over `data` prints what `report` prints on `db`;
/// how many of them gave rows.
fn duckdb_equals_report(db: &Path, data: &Path, cases: &[(String, Vec<String>)]) -> usize {
    let mut with_rows = 0;
    for (name, params) in cases {
        let output = succeeds(
            parquet_query(data, name, params).args(["--engine", "duckdb", "--format", "csv"]),
        );
        let expected = report_csv(db, name, params);
        assert_eq!(
            String::from_utf8(output.stdout).unwrap(),
            expected,
            "{name} {params:?}"
        );
        with_rows += usize::from(expected.lines().count() > 1);
    }
    with_rows
}

/// `scripts/parquet-query --data DATA NAME -p PARAM...` (the engine its default, DuckDB, unless
/// the caller adds `--engine`).
fn parquet_query(data: &Path, name: &str, params: &[String]) -> Command {
    let mut command = Command::new("python3");
    command
        .arg(runner().join("parquet-query"))
        .arg("--data")
        .arg(data)
        .arg(name);
    for param in params {
        command.args(["-p", param]);
    }
    command
}

fn runner() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts")
}

#[test]
#[cfg_attr(
    not(has_duckdb),
    ignore = "DuckDB is not installed for python3 (.ci/run installs it: pip install duckdb)"
)]
fn every_portable_query_on_duckdb_equals_report() {
    if !python_with("duckdb", "to run the portable queries on DuckDB") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (one, _) = run_in_one_and_in_shards(dir.path());
    let out = dir.path().join("data");
    export(&[&one], &out);
    let cases = cases(&one);
    assert_eq!(
        cases
            .iter()
            .map(|(name, _)| name)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        13
    );
    assert_eq!(
        duckdb_equals_report(&one, &out, &cases),
        cases.len(),
        "every case of the simulated run gives rows"
    );
    // What the dataset does not hold is refused, as report refuses it, not answered with no rows.
    for params in [
        vec!["run=nope".to_string()],
        vec![format!("snapshot_id={RUN}:0:99999")],
    ] {
        let name = if params[0].starts_with("run") {
            "churn"
        } else {
            "usage-by-kind"
        };
        let output = parquet_query(&out, name, &params).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{params:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains("no such"),
            "{stderr}"
        );
    }
}

#[test]
#[cfg_attr(
    not(has_duckdb),
    ignore = "DuckDB is not installed for python3 (.ci/run installs it: pip install duckdb)"
)]
fn portable_queries_on_what_producers_print_equal_report_on_duckdb() {
    if !python_with("duckdb", "to run the portable queries on DuckDB") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // What producers print today (tests/data/sources), several runs in one database: each
    // run's queries, and the per-snapshot ones at each of its snapshots. legate-26.01.log reports
    // instance 0x4000000000000010 twice, from train.py:2 at seq 0 and with no provenance at seq
    // 1: two rows of long-lived that tie on every key up to uid, ordered by first_seq.
    let producers = dir.path().join("producers.db");
    let sources = crate::common::data("sources");
    let inputs: Vec<PathBuf> = [
        "legate-23.11.log",
        "legate-24.11.log",
        "legate-25.10.log",
        "legate-26.01.log",
        "legate-pasted.log",
        "realm.log",
        "torch-snapshot.pickle",
    ]
    .iter()
    .map(|name| sources.join(name))
    .collect();
    import(
        &producers,
        &inputs.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        0,
    );
    let out = dir.path().join("producers");
    export(&[&producers], &out);
    let conn = Connection::open(&producers).unwrap();
    let mut cases = Vec::new();
    for run in query_texts(&conn, "SELECT run FROM runs ORDER BY run") {
        for name in [
            "churn",
            "fragmentation-trend",
            "nodes",
            "growth",
            "long-lived",
        ] {
            let mut params = vec![format!("run={run}")];
            if matches!(name, "growth" | "long-lived") {
                params.push("top=1000".to_string());
            }
            cases.push((name.to_string(), params));
        }
    }
    for snapshot in query_texts(
        &conn,
        "SELECT run || ':' || node || ':' || seq FROM snapshots ORDER BY snapshot_id",
    ) {
        for name in [
            "usage-by-kind",
            "usage-by-object",
            "usage-by-provenance",
            "usage-by-state",
        ] {
            cases.push((name.to_string(), vec![format!("snapshot_id={snapshot}")]));
        }
        cases.push((
            "live-allocations".to_string(),
            vec![format!("snapshot_id={snapshot}"), "top=1000".to_string()],
        ));
    }
    let long_lived = report_csv(
        &producers,
        "long-lived",
        &["run=legate-26.01".to_string(), "top=1000".to_string()],
    );
    let twice: Vec<&str> = long_lived
        .lines()
        .filter(|line| line.starts_with("0,0x4000000000000010,"))
        .collect();
    assert_eq!(twice.len(), 2, "{long_lived}");
    assert!(
        twice[0].contains(",train.py:2,") && twice[0].ends_with(",0,0,1,0"),
        "{long_lived}"
    );
    let with_rows = duckdb_equals_report(&producers, &out, &cases);
    assert!(
        with_rows * 2 > cases.len(),
        "{with_rows} of {} cases gave rows",
        cases.len()
    );
}

#[test]
#[cfg_attr(
    not(has_duckdb),
    ignore = "DuckDB is not installed for python3 (.ci/run installs it: pip install duckdb)"
)]
fn a_dataset_without_dumps_has_nothing_to_ask() {
    if !python_with("duckdb", "to run the portable queries on DuckDB") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A dataset exported from a database without dumps is a dataset, but has nothing to ask.
    let empty = dir.path().join("empty.db");
    drop(memstate::db::open(&empty).unwrap());
    let nothing = dir.path().join("nothing");
    export(&[&empty], &nothing);
    let output = parquet_query(&nothing, "churn", &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("holds no snapshots yet"), "{stderr}");
}

#[test]
#[cfg_attr(
    not(has_spark),
    ignore = "PySpark or Java is not installed (.ci/run installs them)"
)]
fn churn_growth_and_snapshot_queries_on_spark_equal_report() {
    if !python_with("pyspark", "to run the portable queries on Spark")
        || !crate::common::have("java", "to run Spark in local mode")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (one, shards) = run_in_one_and_in_shards(dir.path());
    // The shards' dataset: Spark reads what a cluster's export writes.
    let out = dir.path().join("data");
    let shard_refs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    export(&shard_refs, &out);
    let chosen: Vec<(String, Vec<String>)> = cases(&one)
        .into_iter()
        .filter(|(name, _)| {
            [
                "churn",
                "growth",
                "usage-by-kind",
                "largest-holes",
                "compare-runs",
            ]
            .contains(&name.as_str())
        })
        .take(5)
        .collect();
    let mut calls: Vec<Vec<String>> = chosen
        .iter()
        .map(|(name, params)| runner_argv(&out, name, params))
        .collect();
    // The same session answers the awkward dataset: a run id with a quote and a backslash, in a
    // folder whose name is a glob pattern matching its sibling, and hostile parameters.
    let (awkward_db, awkward) = awkward_dataset(dir.path());
    let hostile = hostile_cases();
    calls.push(runner_argv(&awkward, "nodes", &[]));
    for (name, params, _) in &hostile {
        calls.push(runner_argv(&awkward, name, params));
    }
    let answers = spark_answers(dir.path(), &calls);
    for ((name, params), (code, stdout, stderr)) in chosen.iter().zip(&answers) {
        assert_eq!(*code, 0, "spark {name} {params:?}: {stderr}");
        assert_eq!(
            *stdout,
            report_rows(&one, name, params),
            "spark {name} {params:?}"
        );
    }
    let (code, stdout, stderr) = &answers[chosen.len()];
    assert_eq!(*code, 0, "{stderr}");
    assert_eq!(*stdout, report_rows(&awkward_db, "nodes", &[]));
    for ((name, params, refusal), (code, _, stderr)) in
        hostile.iter().zip(&answers[chosen.len() + 1..])
    {
        assert_eq!(*code, 2, "spark {name} {params:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(refusal),
            "spark {name} {params:?}: {stderr}"
        );
    }
}

/// The runner's arguments for a query over `data` in csv (the engine is the caller's to add).
fn runner_argv(data: &Path, name: &str, params: &[String]) -> Vec<String> {
    let mut argv = vec![
        "--format".to_string(),
        "csv".to_string(),
        "--data".to_string(),
        data.display().to_string(),
        name.to_string(),
    ];
    for param in params {
        argv.push("-p".to_string());
        argv.push(param.clone());
    }
    argv
}

/// Each call of the runner on Spark, in one Spark session (a JVM start each would take a
/// minute): the runner's main() called in turn with its output and errors caught. Returns each
/// call's (exit status, stdout, stderr).
fn spark_answers(dir: &Path, calls: &[Vec<String>]) -> Vec<(i32, String, String)> {
    let mut driver = String::from("import contextlib, sys\n");
    driver.push_str(&format!(
        "sys.path.insert(0, {:?})\n",
        runner().display().to_string()
    ));
    driver.push_str("import parquet_query\n");
    let file = |index: usize, what: &str| dir.join(format!("spark-{index}.{what}"));
    for (index, argv) in calls.iter().enumerate() {
        let mut argv = argv.clone();
        argv.splice(0..0, ["--engine".to_string(), "spark".to_string()]);
        driver.push_str(&format!(
            "with open({:?}, 'w') as out, open({:?}, 'w') as err, \
             contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n    \
             code = parquet_query.main({})\n\
             with open({:?}, 'w') as f:\n    f.write(str(code))\n",
            file(index, "out").display().to_string(),
            file(index, "err").display().to_string(),
            serde_json::to_string(&argv).unwrap(),
            file(index, "code").display().to_string(),
        ));
    }
    let script = dir.join("driver.py");
    std::fs::write(&script, driver).unwrap();
    succeeds(Command::new("python3").arg(&script));
    (0..calls.len())
        .map(|index| {
            let read = |what| std::fs::read_to_string(file(index, what)).unwrap();
            (read("code").parse().unwrap(), read("out"), read("err"))
        })
        .collect()
}

/// The awkward run's id: a quote, a backslash and a double quote, each of which ends or escapes a
/// string literal in one SQL dialect or another.
const AWKWARD_RUN: &str = "it's\\ \"q\"";

/// A small run with [`AWKWARD_RUN`] for its id and a provenance that sets the terminal's title
/// and clears the screen, exported into a folder named `ref[A]`, beside `refA`: a dataset of
/// another run, which the folder's name read as a glob pattern would match. Returns (the
/// database, the dataset).
fn awkward_dataset(dir: &Path) -> (PathBuf, PathBuf) {
    let mut made = Vec::new();
    for (run, folder) in [(AWKWARD_RUN, "ref[A]"), ("the-sibling", "refA")] {
        let dumps = dir.join(format!("{folder}-dumps"));
        memstate::sim::simulate(
            &memstate::sim::Config {
                run_id: run.to_string(),
                nodes: 1,
                steps: 60,
                dump_every: 20,
                continue_after_oom: true,
                ..Default::default()
            },
            &dumps,
            &mut |_| {},
        )
        .unwrap();
        for entry in std::fs::read_dir(dumps.join("node0")).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            // The escape sequences as JSON writes them: ESC ] 0 ; title BEL, ESC [ 2 J.
            let text = text.replace(
                "\"script.py:31\"",
                "\"script.py:31\\u001b]0;pwned\\u0007\\u001b[2J\"",
            );
            std::fs::write(&path, text).unwrap();
        }
        let db = dir.join(format!("{folder}.db"));
        import(&db, &[&dumps], 0);
        let data = dir.join(folder);
        export(&[&db], &data);
        made.push((db, data));
    }
    made.swap_remove(0)
}

/// Parameters that try to become SQL (closing a literal with a quote, or with Spark's backslash
/// escape, to call `reflect`), or are not of their type: each query, its parameters and the
/// refusal each must meet.
fn hostile_cases() -> Vec<(&'static str, Vec<String>, &'static str)> {
    let snapshot = format!("snapshot_id={AWKWARD_RUN}:0:0");
    vec![
        (
            "churn",
            vec![
                r#"run=\' OR reflect("java.io.File","createTempFile","x",".txt") IS NOT NULL --"#
                    .to_string(),
            ],
            "no such run",
        ),
        (
            "churn",
            vec!["run=\\' OR 1=1 --".to_string()],
            "no such run",
        ),
        ("churn", vec!["run=x' OR '1'='1".to_string()], "no such run"),
        (
            "usage-by-kind",
            vec!["snapshot_id=\\' OR 1=1 --:0:0".to_string()],
            "no such snapshot",
        ),
        (
            "usage-by-kind",
            vec![format!("{snapshot} OR 1=1")],
            "not a whole number",
        ),
        (
            "growth",
            vec![format!("run={AWKWARD_RUN}"), "top=1 OR 1=1".to_string()],
            "not a whole number",
        ),
        (
            "largest-holes",
            vec![snapshot.clone(), "memory_id=0x1' OR '1'='1".to_string()],
            "not a memory id",
        ),
    ]
}

/// On DuckDB: the awkward dataset answers as `report` does on its database (the run found by
/// its id, quote and backslash and all, and `ref[A]` read, not `refA`), every hostile parameter
/// is refused, and the table form shows the provenance's escapes as text.
#[test]
#[cfg_attr(
    not(has_duckdb),
    ignore = "DuckDB is not installed for python3 (.ci/run installs it: pip install duckdb)"
)]
fn the_runner_binds_values_and_reads_the_folder_it_is_given_on_duckdb() {
    if !python_with("duckdb", "to run the portable queries on DuckDB") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (db, data) = awkward_dataset(dir.path());
    let run = format!("run={AWKWARD_RUN}");
    let snapshot = format!("snapshot_id={AWKWARD_RUN}:0:0");
    let cases = vec![
        ("nodes".to_string(), vec![]),
        ("churn".to_string(), vec![run.clone()]),
        ("growth".to_string(), vec![run, "top=5".to_string()]),
        ("usage-by-provenance".to_string(), vec![snapshot.clone()]),
    ];
    assert_eq!(duckdb_equals_report(&db, &data, &cases), cases.len());
    for (name, params, refusal) in hostile_cases() {
        let output = parquet_query(&data, name, &params).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name} {params:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(refusal),
            "{name} {params:?}: {stderr}"
        );
    }
    let output = succeeds(&mut parquet_query(
        &data,
        "usage-by-provenance",
        &[snapshot],
    ));
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(
        !table.bytes().any(|byte| byte == 0x1b || byte == 0x07),
        "{table:?}"
    );
    assert!(
        table.contains(r"script.py:31\x1b]0;pwned\x07\x1b[2J"),
        "{table}"
    );
}

/// The runner prints reals as memstate does (Rust's shortest round-trip digits, never an
/// exponent), splits a snapshot from the right, renames only the markers outside quoted text
/// (their values go to the engine) and escapes controls as `report` does: checked against Rust's
/// own formatting of the same numbers and memstate's own escaping of the same text.
#[test]
fn the_runner_writes_numbers_as_memstate_and_reads_parameters_as_report() {
    if !crate::common::have("python3", "to run scripts/parquet_query.py") {
        return;
    }
    let reals = [
        1e-7,
        1e21,
        0.1 + 0.2,
        123456789.125,
        5e-324,
        f64::MAX,
        -0.0,
        1.0,
        0.5169805233924434,
        2.5e15,
        1.5e16,
    ];
    let listed: Vec<String> = reals.iter().map(|real| format!("{real:e}")).collect();
    // What report's table shows of a value with controls in it (units::visible), against the
    // runner's own escaping of the same text.
    let controlled = "tab\there\u{1b}]0;title\u{7}\u{1b}[2J\u{85}\u{202e}end\r\n";
    let program = format!(
        "import sys\nsys.path.insert(0, {:?})\nimport parquet_query as q\n\
         for text in {:?}:\n    print(q.exact(float(text)))\n\
         print(q.snapshot_parts(None, 'job/7:a:3:41'))\n\
         print(q.markers(\"SELECT ':run', :run -- :top\\n\", {{'run': \"'x'\"}}, '$'))\n\
         print(q.visible(sys.argv[1]))\n",
        runner().display().to_string(),
        listed,
    );
    let output = succeeds(Command::new("python3").args(["-c", &program, controlled]));
    let printed = String::from_utf8(output.stdout).unwrap();
    let mut expected: Vec<String> = reals.iter().map(|real| real.to_string()).collect();
    expected.push("('job/7:a', '3', '41')".to_string());
    expected.push(r#"("SELECT ':run', $run -- :top\n", {'run': "'x'"})"#.to_string());
    expected.push(memstate::units::visible(controlled).into_owned());
    assert_eq!(printed.lines().collect::<Vec<_>>(), expected);
}
