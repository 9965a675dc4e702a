//! The commands as a user runs them: folders, compression, streams, standard input, summaries,
//! machine-readable output, validation, where the database comes from, and exit statuses; what
//! the output looks like is tested in `cli_output`.

use std::io::Write;

use serde_json::{json, Value};

use crate::common::{data, import, memstate, on_db, scalar, set, small, write, write_json};

fn dump_with_seq(seq: i64) -> Value {
    set(small(), "/snapshot/seq", json!(seq))
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn ndjson(values: &[Value]) -> Vec<u8> {
    values
        .iter()
        .map(|value| serde_json::to_string(value).unwrap() + "\n")
        .collect::<String>()
        .into_bytes()
}

#[test]
fn a_folder_is_walked_recursively_and_other_files_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = dir.path().join("dumps");
    std::fs::create_dir_all(dumps.join("node1/deeper")).unwrap();
    write_json(&dumps, "a.json", &dump_with_seq(1));
    write(
        &dumps,
        "b.json.gz",
        &gzip(&serde_json::to_vec(&dump_with_seq(2)).unwrap()),
    );
    write(
        &dumps,
        "c.json.zst",
        &zstd::encode_all(&serde_json::to_vec(&dump_with_seq(3)).unwrap()[..], 3).unwrap(),
    );
    write(
        &dumps.join("node1"),
        "d.ndjson",
        &ndjson(&[dump_with_seq(4), dump_with_seq(5)]),
    );
    write(
        &dumps.join("node1/deeper"),
        "e.jsonl.gz",
        &gzip(&ndjson(&[dump_with_seq(6)])),
    );
    write(
        &dumps.join("node1/deeper"),
        "f.ndjson.zst",
        &zstd::encode_all(&ndjson(&[dump_with_seq(7)])[..], 3).unwrap(),
    );
    write(&dumps, "README.txt", b"not a dump");
    write(&dumps.join("node1"), "notes.md", b"not a dump either");
    let db = dir.path().join("t.db");
    let out = import(&db, &[&dumps], 0);
    assert!(
        out.starts_with("imported 7 dumps (49 allocations)"),
        "{out}"
    );
    assert!(
        out.contains("2 files skipped (none of the inputs memstate reads)")
            && out.contains("from 6 inputs"),
        "{out}"
    );
    assert_eq!(
        scalar::<String>(
            &db,
            "SELECT group_concat(seq, ',') FROM (SELECT seq FROM snapshots ORDER BY snapshot_id)"
        ),
        "1,2,3,4,5,6,7"
    );
    assert_eq!(
        scalar::<String>(&db, "SELECT source FROM snapshots WHERE seq = 5"),
        format!("{}:2", dumps.join("node1/d.ndjson").display())
    );
}

#[test]
fn a_bad_fifth_line_is_refused_and_the_other_lines_land() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<Value> = (0..8).map(dump_with_seq).collect();
    lines[4] = set(
        lines[4].clone(),
        "/memories/0/allocations/1/offset",
        json!(-5),
    );
    let stream = write(dir.path(), "run.ndjson", &ndjson(&lines));
    let db = dir.path().join("t.db");
    let output = on_db(&db).arg("import").arg(&stream).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "error: {}:5: memories[0].allocations[1].offset: expected a non-negative integer",
            stream.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        scalar::<String>(&db, "SELECT group_concat(seq, ',') FROM snapshots"),
        "0,1,2,3,5,6,7"
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("imported 7 dumps"));
}

#[test]
fn a_syntax_error_in_a_stream_names_the_line_and_the_rest_lands() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = ndjson(&[dump_with_seq(0), dump_with_seq(1)]);
    bytes.extend_from_slice(b"{\"format\": \"memstate-dump\", oops\n");
    bytes.extend_from_slice(&ndjson(&[dump_with_seq(3)]));
    let stream = write(dir.path(), "run.jsonl", &bytes);
    let db = dir.path().join("t.db");
    let output = on_db(&db).arg("import").arg(&stream).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("{}:3: line 1, column 29", stream.display())),
        "{stderr}"
    );
    assert_eq!(scalar::<i64>(&db, "SELECT count(*) FROM snapshots"), 3);
}

/// Corrupt a compressed file half-way through its bytes.
fn corrupt_half_way(mut bytes: Vec<u8>) -> Vec<u8> {
    let middle = bytes.len() / 2;
    for byte in &mut bytes[middle..middle + 16] {
        *byte ^= 0x5a;
    }
    bytes
}

#[test]
fn a_gzip_file_corrupt_half_way_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Big enough that the corruption is well inside the deflate stream.
    let mut value = small();
    let allocations: Vec<Value> = (0..2000)
        .map(|index| json!({"uid": 10_000 + index, "kind": "future", "state": "valid", "offset": index * 64, "size": 64, "label": format!("future {index}")}))
        .collect();
    value = set(value, "/memories/1/capacity", json!(1 << 20));
    value = set(value, "/memories/1/holes", Value::Null);
    value = set(value, "/memories/1/allocations", Value::Array(allocations));
    let file = write(
        dir.path(),
        "big.json.gz",
        &corrupt_half_way(gzip(&serde_json::to_vec(&value).unwrap())),
    );
    let db = dir.path().join("t.db");
    let output = on_db(&db).arg("import").arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("error: {}", file.display())) && stderr.contains("corrupt"),
        "{stderr}"
    );
    assert_eq!(scalar::<i64>(&db, "SELECT count(*) FROM snapshots"), 0);

    // In a compressed stream, the lines before the corruption land.
    let lines: Vec<Value> = (0..40)
        .map(|seq| set(value.clone(), "/snapshot/seq", json!(seq)))
        .collect();
    let stream = write(
        dir.path(),
        "run.ndjson.gz",
        &corrupt_half_way(gzip(&ndjson(&lines))),
    );
    let output = on_db(&db).arg("import").arg(&stream).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let landed: i64 = scalar(&db, "SELECT count(*) FROM snapshots");
    assert!(landed > 0 && landed < 40, "{landed} of 40 lines landed");
}

#[test]
fn standard_input_takes_a_stream_or_a_document() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let output = on_db(&db)
        .args(["import", "-"])
        .write_stdin(ndjson(&[dump_with_seq(1), dump_with_seq(2)]))
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pretty = serde_json::to_vec_pretty(&dump_with_seq(3)).unwrap();
    let output = on_db(&db)
        .args(["import", "-"])
        .write_stdin(pretty)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        scalar::<String>(&db, "SELECT group_concat(source, ' ') FROM snapshots"),
        "-:1 -:2 -"
    );
    let compressed = gzip(&serde_json::to_vec(&dump_with_seq(4)).unwrap());
    let output = on_db(&db)
        .args(["import", "-"])
        .write_stdin(compressed)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(scalar::<i64>(&db, "SELECT count(*) FROM snapshots"), 4);
}

#[test]
fn the_database_comes_from_the_option_the_environment_or_the_default() {
    let dir = tempfile::tempdir().unwrap();
    memstate()
        .current_dir(dir.path())
        .args(["import", "--db", "after.db"])
        .arg(data("small.json"))
        .assert()
        .success();
    memstate()
        .current_dir(dir.path())
        .env("MEMSTATE_DB", "env.db")
        .arg("import")
        .arg(data("small.json"))
        .assert()
        .success();
    memstate()
        .current_dir(dir.path())
        .arg("import")
        .arg(data("small.json"))
        .assert()
        .success();
    for name in ["after.db", "env.db", "memstate.db"] {
        assert_eq!(
            scalar::<i64>(&dir.path().join(name), "SELECT count(*) FROM snapshots"),
            1,
            "{name}"
        );
    }
}

#[test]
fn sql_prints_exact_machine_readable_output() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let query = "SELECT uid, size, label, fragmentation FROM allocations JOIN memory_stats USING (snapshot_id, memory_id) WHERE size IN (4096, 262144) AND state = :state ORDER BY size";
    let run = |format: &str| {
        let output = on_db(&db)
            .args(["sql", query, "-p", "state=valid", "--format", format])
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let frag = 1.0 - 225280.0 / 323584.0;
    assert_eq!(
        run("csv"),
        format!("uid,size,label,fragmentation\n0x000000000000006a,4096,future 0 of task 42,{frag}\n0x0000000000000065,262144,,{frag}\n")
    );
    let json: Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(json[1]["label"], Value::Null);
    assert_eq!(json[1]["size"], json!(262144));
    assert_eq!(json[0]["fragmentation"].as_f64(), Some(frag));
    let lines: Vec<Value> = run("ndjson")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines, json.as_array().unwrap().clone());
    let table = run("table");
    // For people: sizes human, ratios with three decimals.
    assert!(
        table.contains("uid")
            && table.contains("future 0 of task 42")
            && table.contains("256 KiB")
            && table.contains("0.304"),
        "{table}"
    );
    // A parameter the query needs but was not given is a usage error.
    on_db(&db).args(["sql", query]).assert().code(2);
}

#[test]
fn validate_checks_without_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write_json(
        dir.path(),
        "bad.json",
        &set(small(), "/memories/0/capacity", json!(0)),
    );
    memstate()
        .current_dir(dir.path())
        .arg("validate")
        .arg(data("small.json"))
        .assert()
        .success();
    let output = memstate()
        .current_dir(dir.path())
        .arg("validate")
        .arg(data("small.json"))
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("memories[0].capacity: expected a size above 0"));
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        out.contains("1 dump (7 allocations)") && out.contains("1 refused"),
        "{out}"
    );
    assert!(
        !dir.path().join("memstate.db").exists(),
        "validate created a database"
    );
    // --strict reports unknown fields.
    let extra = write_json(
        dir.path(),
        "extra.json",
        &set(small(), "/run/cluster", json!("perlmutter")),
    );
    memstate().arg("validate").arg(&extra).assert().success();
    memstate()
        .arg("validate")
        .arg("--strict")
        .arg(&extra)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("run.cluster: unknown field"));
}

#[test]
fn summaries_in_json_and_missing_paths() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let output = on_db(&db)
        .args(["import", "--format", "json"])
        .arg(data("small.json"))
        .arg(dir.path().join("missing.json"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("missing.json: no such file or folder")
    );
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary[0]["imported"], json!(1));
    assert_eq!(summary[0]["refused"], json!(1));
    assert_eq!(summary[0]["allocations"], json!(7));
}

#[test]
fn usage_errors_exit_2_and_help_explains() {
    memstate().arg("import").assert().code(2);
    memstate().arg("frobnicate").assert().code(2);
    memstate()
        .args(["sql", "SELECT 1", "--format", "xml"])
        .assert()
        .code(2);
    let help = memstate().args(["import", "--help"]).output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("--replace") && text.contains("transaction") && text.contains("--db"),
        "{text}"
    );
}

#[test]
fn annotations_join_objects_to_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let annotations = json!({
        "format": "memstate-annotations", "version": 1, "run": {"id": "example-run"},
        "strings": ["store-18"],
        "objects": [{"id": 0, "kind": "store", "name": "y", "shape": [10], "dtype": "int32"}],
        "links": [{"uid": "0x6a", "object": 0}, {"uid": "0x66", "field": 7, "object": "store-18"}]
    });
    let file = write_json(dir.path(), "side.json", &annotations);
    let out = import(&db, &[&file], 0);
    assert!(
        out.contains("1 annotations file,") || out.contains("1 annotations file "),
        "{out}"
    );
    assert_eq!(
        scalar::<String>(&db, "SELECT group_concat(uid || '/' || coalesce(field_id, '-') || '/' || object_id, ' ') FROM (SELECT * FROM allocation_objects ORDER BY uid)"),
        "0x0000000000000065/101/store-17 0x0000000000000066/7/store-18 0x000000000000006a/-/store-18"
    );
    assert_eq!(
        scalar::<String>(
            &db,
            "SELECT name || dtype FROM objects WHERE object_id = 'store-18'"
        ),
        "yint32"
    );
}

/// Issue 29, item 10: `memstate completions zsh | head -3` panicked (exit 101) in 2 of 5 tries,
/// clap_complete failing on the closed pipe. Each of these finds its output closed: the command
/// ends quietly, exit 0.
#[test]
fn a_closed_pipe_ends_completions_and_man_quietly() {
    for args in [
        ["completions", "zsh"],
        ["completions", "bash"],
        ["man", "import"],
    ] {
        for _ in 0..5 {
            let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"))
                .args(args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            // Closed before the command writes: its first write finds no reader.
            drop(child.stdout.take());
            let output = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
            assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        }
    }
}

/// Issue 29, item 9: on a database that holds no snapshot yet, `stats` and `map` said `no
/// snapshot matches "latest"` and `oom` "no failed request" (exit 0); each now says the database
/// holds none yet and how to import. `import missing.json` made the database file anyway and
/// said "1 refused from 0 inputs": it now says the path is missing and makes no file.
#[test]
fn an_empty_database_says_so_and_a_missing_path_makes_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let missing = dir.path().join("missing.json");
    let output = on_db(&db).arg("import").arg(&missing).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("missing.json: no such file or folder"),
        "{stderr}"
    );
    assert!(!db.exists(), "a database was made for nothing");
    // A database with its schema and no snapshot: every dump refused.
    let bad = write(dir.path(), "bad.json", b"{}");
    import(&db, &[&bad], 1);
    for args in [
        vec!["stats"],
        vec!["map"],
        vec!["oom"],
        vec!["holes"],
        vec!["blockers", "--size", "1MiB"],
    ] {
        let output = on_db(&db).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(
                "the database holds no snapshots yet (import dumps with `memstate import PATH...`"
            ),
            "{args:?}: {stderr}"
        );
    }
}

/// Issue 29, item 7: with several runs, `trend` interleaved them with no run column, and `plot`
/// silently drew the run imported last. small.json imported as runs "a" and "b": the trend table
/// shows each row's run; `plot` refuses, listing the runs and naming `--run`, and draws with it.
#[test]
fn several_runs_are_told_apart_or_one_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    for run in ["a", "b"] {
        let dump = set(small(), "/run/id", json!(run));
        let path = write_json(dir.path(), &format!("{run}.json"), &dump);
        import(&db, &[&path], 0);
    }
    let trend = crate::common::text_of(&db, &["trend", "--wide"]);
    let header = trend.lines().next().unwrap_or_default();
    assert!(header.split_whitespace().next() == Some("run"), "{trend}");
    let compact = crate::common::text_of(&db, &["trend"]);
    assert!(
        compact
            .lines()
            .next()
            .unwrap_or_default()
            .starts_with("run "),
        "{compact}"
    );
    let chart = dir.path().join("chart.svg");
    let output = on_db(&db)
        .arg("plot")
        .arg("--out")
        .arg(&chart)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("several runs (\"a\", \"b\"): choose one with --run"),
        "{stderr}"
    );
    assert!(!chart.exists());
    on_db(&db)
        .args(["plot", "--run", "a", "--out"])
        .arg(&chart)
        .assert()
        .success();
    assert!(chart.exists());
}
