//! Canned queries: golden tests on a small run whose answers are worked out by hand (the
//! derivations are in the comments), the same files run by the real sqlite3 program, and every
//! query documented.
//!
//! The fixture tests/data/run: node 0 has snapshots seq 0, 1, 2 (snapshot ids 1, 2, 3) of a GPU
//! memory (memory 1, capacity 1000) and a SYSTEM memory (memory 2, capacity 500: uid 10 valid at
//! [0,100), listed hole [200,500), so 100 unaccounted bytes); node 1 has seq 0 (snapshot 4) of a
//! GPU memory (memory 3, capacity 2000, one valid allocation of 500 bytes).
//!   seq 0: uid1 valid [0,100) a.py:1 (store-1), uid2 collectable [200,300) a.py:2, uid3 future valid [400,410) a.py:3
//!   seq 1: uid1, uid2 now pending_free, uid4 pending_alloc [200,250) a.py:4, uid3, uid5 valid [500,800) a.py:1 (store-5)
//!   seq 2: uid1, uid4 now valid, uid5 now collectable, uid6 valid [850,950) a.py:1; an OOM of 300 bytes aligned 100

use std::path::{Path, PathBuf};
use std::process::Command;

use memstate::present::Cell;
use memstate::query::canned::{self, ParamKind};

use crate::common::{data, import, json_of, memstate, on_db, text_of, write_json};

fn golden_db(dir: &Path) -> PathBuf {
    let db = dir.join("golden.db");
    let mut database = memstate::db::open(&db).unwrap();
    let summary = memstate::import::import(
        &mut database,
        &[data("run").display().to_string()],
        Default::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((summary.imported, summary.refused), (4, 0));
    db
}

fn run(db: &Path, name: &str, parameters: &[(&str, &str)]) -> (Vec<String>, Vec<Vec<Cell>>) {
    let database = memstate::db::open_read_only(db).unwrap();
    let query = canned::find(name).unwrap();
    let parameters: Vec<(String, String)> = parameters
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let table = canned::execute(database.connection(), &query, &parameters).unwrap();
    (table.columns, table.rows)
}

fn same(cell: &Cell, expected: &str) -> bool {
    match cell {
        Cell::Null => expected == "NULL",
        Cell::Integer(number) => expected.parse::<i64>() == Ok(*number),
        Cell::Real(number) => expected
            .parse::<f64>()
            .is_ok_and(|value| (value - number).abs() < 1e-9),
        Cell::Text(text) => text == expected,
        Cell::Blob(_) | Cell::Json(_) => false,
    }
}

fn check(db: &Path, name: &str, parameters: &[(&str, &str)], columns: &str, expected: &[&str]) {
    let (actual_columns, rows) = run(db, name, parameters);
    assert_eq!(actual_columns.join(","), columns, "{name}: columns");
    assert_eq!(rows.len(), expected.len(), "{name}: rows {rows:?}");
    for (index, (row, line)) in rows.iter().zip(expected).enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(row.len(), cells.len(), "{name} row {index}");
        for (cell, text) in row.iter().zip(&cells) {
            assert!(
                same(cell, text),
                "{name} row {index}: got {row:?}, expected {line}"
            );
        }
    }
}

#[test]
fn golden_holes_and_fragmentation_worked_out_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let db = golden_db(dir.path());
    let third = 1.0 / 9.0;
    // seq 2 GPU holes: [100,200) 100, [250,500) 250, [800,850) 50, [950,1000) 50; free 450.
    // Largest first, ties by offset, top 3: running totals 250, 350, 400.
    check(
        &db,
        "largest-holes",
        &[("snapshot_id", "3"), ("memory_id", "1"), ("top", "3")],
        "offset,size,running_total,share_of_free",
        &[
            &format!("250,250,250,{}", 250.0 / 450.0),
            &format!("100,100,350,{}", 100.0 / 450.0),
            &format!("800,50,400,{third}"),
        ],
    );
    // 50, 50 → class 32; 100 → class 64; 250 → class 128.
    check(
        &db,
        "hole-histogram",
        &[("snapshot_id", "3"), ("memory_id", "1")],
        "size_class,hole_count,bytes",
        &["32,2,100", "64,1,100", "128,1,250"],
    );
    // Per memory per seq, from the fixture: GPU seq 0 used 210, holes 100+100+590, largest reclaimable
    // 590 (unmovable [0,100), [400,410)); seq 1 used 510 (the pending_alloc inside the pending_free),
    // holes 100+100+90+200, unmovable adds [200,250) and [500,800): largest free-able 200; seq 2
    // used 550, holes 450, unmovable [0,100), [200,250), [850,950): largest free-able [250,850) = 600.
    check(&db, "fragmentation-trend", &[("run", "golden")], "node,handle,kind,seq,time_s,used_bytes,free_bytes,hole_count,largest_hole,fragmentation,reclaimable_bytes,largest_reclaimable", &[
        "0,0x1e00000000000000,SYSTEM_MEM,0,0,100,300,1,300,0,0,300",
        "0,0x1e00000000000000,SYSTEM_MEM,1,1,100,300,1,300,0,0,300",
        "0,0x1e00000000000000,SYSTEM_MEM,2,2,100,300,1,300,0,0,300",
        &format!("0,0x1e00000000000003,GPU_FB_MEM,0,0,210,790,3,590,{},100,590", 1.0 - 590.0 / 790.0),
        &format!("0,0x1e00000000000003,GPU_FB_MEM,1,1,510,490,4,200,{},100,200", 1.0 - 200.0 / 490.0),
        &format!("0,0x1e00000000000003,GPU_FB_MEM,2,2,550,450,4,250,{},300,600", 1.0 - 250.0 / 450.0),
        "1,0x1e00010000000003,GPU_FB_MEM,0,0.000000005,500,1500,1,1500,0,0,1500",
    ]);
    // The run against itself: per memory its peaks over the run (the trend above: GPU 0 peaks at
    // 550 used, its lowest largest hole 200 at seq 1, where fragmentation is highest), no change.
    check(&db, "compare-runs", &[("a", "golden"), ("b", "golden")], "node,kind,ordinal,handle_a,handle_b,peak_used_a,peak_used_b,peak_used_change,lowest_largest_hole_a,lowest_largest_hole_b,lowest_largest_hole_change,peak_fragmentation_a,peak_fragmentation_b,peak_fragmentation_change,failed_requests_a,failed_requests_b,failed_requests_change", &[
        &format!("0,GPU_FB_MEM,0,0x1e00000000000003,0x1e00000000000003,550,550,0,200,200,0,{0},{0},0,1,1,0", 1.0 - 200.0 / 490.0),
        "0,SYSTEM_MEM,0,0x1e00000000000000,0x1e00000000000000,100,100,0,300,300,0,0,0,0,0,0,0",
        "1,GPU_FB_MEM,0,0x1e00010000000003,0x1e00010000000003,500,500,0,1500,1500,0,0,0,0,0,0,0",
    ]);
    check(&db, "nodes", &[("run", "golden")], "node,seq,handle,kind,capacity,used_bytes,free_bytes,largest_hole,fragmentation,reclaimable_bytes,largest_reclaimable", &[
        "0,2,0x1e00000000000000,SYSTEM_MEM,500,100,300,300,0,0,300",
        &format!("0,2,0x1e00000000000003,GPU_FB_MEM,1000,550,450,250,{},300,600", 1.0 - 250.0 / 450.0),
        "1,0,0x1e00010000000003,GPU_FB_MEM,2000,500,1500,1500,0,0,1500",
    ]);
}

#[test]
fn golden_usage_at_a_snapshot_worked_out_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let db = golden_db(dir.path());
    check(
        &db,
        "live-allocations",
        &[("snapshot_id", "3"), ("top", "10")],
        "handle,uid,kind,state,offset,size,provenance,label",
        &[
            "0x1e00000000000003,0x0000000000000005,instance,collectable,500,300,a.py:1,NULL",
            "0x1e00000000000000,0x000000000000000a,internal,valid,0,100,runtime,NULL",
            "0x1e00000000000003,0x0000000000000001,instance,valid,0,100,a.py:1,NULL",
            "0x1e00000000000003,0x0000000000000006,instance,valid,850,100,a.py:1,NULL",
            "0x1e00000000000003,0x0000000000000004,instance,valid,200,50,a.py:4,NULL",
        ],
    );
    // seq 2 holds 650 bytes: instances 1, 4, 5, 6 (550) and the internal 10 (100).
    check(
        &db,
        "usage-by-kind",
        &[("snapshot_id", "3")],
        "kind,allocation_count,bytes,share",
        &[
            &format!("instance,4,550,{}", 550.0 / 650.0),
            &format!("internal,1,100,{}", 100.0 / 650.0),
        ],
    );
    check(
        &db,
        "usage-by-state",
        &[("snapshot_id", "3")],
        "state,allocation_count,bytes,share",
        &[
            &format!("valid,4,350,{}", 350.0 / 650.0),
            &format!("collectable,1,300,{}", 300.0 / 650.0),
        ],
    );
    check(
        &db,
        "usage-by-provenance",
        &[("snapshot_id", "3")],
        "provenance,allocation_count,bytes,share",
        &[
            &format!("a.py:1,3,500,{}", 500.0 / 650.0),
            &format!("runtime,1,100,{}", 100.0 / 650.0),
            &format!("a.py:4,1,50,{}", 50.0 / 650.0),
        ],
    );
    // Stacks at seq 2 (frames a.py:1 alloc, model.py:10 forward, train.py:3 step, model.py:20
    // backward): uids 1 and 6 (100 each) alloc < forward < step, uid 5 (300) alloc < backward <
    // step, uid 4 (50) backward < step; uid 10 none. By hand: train.py:3 holds all four (550),
    // a.py:1 uids 1, 5, 6 (500, innermost in each), model.py:20 uids 5 and 4 (350, innermost in
    // uid 4: 50), model.py:10 uids 1 and 6 (200). Memory 1 (0x1e00000000000003) alone: the same.
    for memory in [None, Some(("memory_id", "1"))] {
        let mut parameters = vec![("snapshot_id", "3")];
        parameters.extend(memory);
        check(
            &db,
            "live-by-frame",
            &parameters,
            "frame,bytes,self_bytes,allocation_count",
            &[
                "train.py:3 step,550,0,4",
                "a.py:1 alloc,500,500,3",
                "model.py:20 backward,350,50,2",
                "model.py:10 forward,200,0,2",
            ],
        );
    }
    // uid 5 holds store-5 (y), uid 1 store-1 (x); uids 4, 6 and 10 hold no object (250 bytes).
    check(
        &db,
        "usage-by-object",
        &[("snapshot_id", "3")],
        "object_id,name,allocation_count,bytes",
        &["store-5,y,1,300", "NULL,NULL,3,250", "store-1,x,1,100"],
    );
}

#[test]
fn golden_lifetimes_churn_and_growth_worked_out_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let db = golden_db(dir.path());
    // uid 1 and 10 are in all three snapshots of node 0; uids 2, 3 (seq 0-1) and 4, 5 (seq 1-2) in two.
    check(
        &db,
        "long-lived",
        &[("run", "golden"), ("top", "5")],
        "node,uid,kind,provenance,size,first_seq,last_seq,snapshots,lifetime_s",
        &[
            "0,0x0000000000000001,instance,a.py:1,100,0,2,3,2",
            "0,0x000000000000000a,internal,runtime,100,0,2,3,2",
            "0,0x0000000000000002,instance,a.py:2,100,0,1,2,1",
            "0,0x0000000000000003,future,a.py:3,10,0,1,2,1",
            "0,0x0000000000000004,instance,a.py:4,50,1,2,2,1",
        ],
    );
    // 0→1: uids 4 (50) and 5 (300) appear; 1→2: uid 6 (100) appears, uids 2 (100) and 3 (10) go.
    check(
        &db,
        "churn",
        &[("run", "golden")],
        "node,from_seq,to_seq,appeared,appeared_bytes,disappeared,disappeared_bytes",
        &["0,0,1,2,350,0,0", "0,1,2,1,100,2,110"],
    );
    // Live bytes of a.py:1: 100 at seq 0, 400 at seq 1, 500 at seq 2; a.py:4: 0, 50 (pending_alloc), 50;
    // a.py:2 and a.py:3 shrink to 0, runtime stays at 100.
    check(
        &db,
        "growth",
        &[("run", "golden"), ("top", "10")],
        "node,provenance,first_bytes,last_bytes,growth_bytes,peak_bytes",
        &["0,a.py:1,100,500,400,500", "0,a.py:4,0,50,50,50"],
    );
}

#[test]
fn every_query_has_a_golden_test_and_documents_its_parameters_and_columns() {
    let source =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/queries.rs"))
            .unwrap();
    let compact: String = source.chars().filter(|c| !c.is_whitespace()).collect();
    let dir = tempfile::tempdir().unwrap();
    let db = golden_db(dir.path());
    let queries = canned::all();
    assert!(queries.len() >= 12);
    for query in queries {
        assert!(
            // Compared without white space: rustfmt may break a call over lines.
            compact.contains(&format!("check(&db,\"{}\"", query.name)),
            "{} has no golden test",
            query.name
        );
        assert!(
            query.description.len() > 40,
            "{}: describe the question it answers",
            query.name
        );
        assert!(
            query.params.iter().all(|param| !param.doc.is_empty()),
            "{}: document every parameter",
            query.name
        );
        for param in &query.params {
            assert!(
                query.sql.contains(&format!(":{}", param.name)),
                "{}: documents :{} but does not use it",
                query.name,
                param.name
            );
        }
        let parameters: Vec<(&str, &str)> = query
            .params
            .iter()
            .map(|param| {
                (
                    param.name.as_str(),
                    match param.kind {
                        ParamKind::Run => "golden",
                        ParamKind::Memory => "1",
                        ParamKind::Limit => "100",
                        _ => "3",
                    },
                )
            })
            .collect();
        let (columns, _) = run(&db, query.name, &parameters);
        let documented: Vec<String> = query
            .columns
            .iter()
            .map(|column| column.name.clone())
            .collect();
        assert_eq!(
            columns, documented,
            "{}: @column lines must match the output",
            query.name
        );
        let upper = query.sql.to_uppercase();
        for word in [
            "INSERT ", "UPDATE ", "DELETE ", "DROP ", "CREATE ", "ALTER ", "REPLACE ",
        ] {
            assert!(
                !upper.contains(word),
                "{} changes data ({word})",
                query.name
            );
        }
    }
}

/// The same query files, run by the sqlite3 program after `.parameter set`, give the same rows.
#[test]
#[cfg_attr(
    not(has_sqlite3),
    ignore = "sqlite3 is not installed (.ci/run installs it)"
)]
fn queries_run_unchanged_in_the_sqlite3_shell() {
    if !crate::common::have("sqlite3", "to run the canned queries in the sqlite3 shell") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = golden_db(dir.path());
    for query in canned::all() {
        let mut script = String::from(".parameter init\n");
        let mut parameters = Vec::new();
        for param in &query.params {
            let value = match param.kind {
                ParamKind::Run => "golden",
                ParamKind::Memory => "1",
                ParamKind::Limit => "100",
                _ => "3",
            };
            parameters.push((param.name.as_str(), value));
            let literal = if !param.kind.is_integer() {
                format!("\"'{value}'\"")
            } else {
                value.to_string()
            };
            script.push_str(&format!(".parameter set :{} {literal}\n", param.name));
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("queries")
            .join(format!("{}.sql", query.name));
        script.push_str(&format!(".mode json\n.read {}\n", path.display()));
        let output = {
            use std::io::Write;
            let mut child = Command::new("sqlite3")
                .arg("-bail")
                .arg(&db)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(script.as_bytes())
                .unwrap();
            child.wait_with_output().unwrap()
        };
        assert!(
            output.status.success(),
            "{}: {}",
            query.name,
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8_lossy(&output.stdout);
        let shell_rows: Vec<serde_json::Map<String, serde_json::Value>> = if text.trim().is_empty()
        {
            Vec::new()
        } else {
            serde_json::from_str(&text)
                .unwrap_or_else(|error| panic!("{}: {error}: {text}", query.name))
        };
        let (columns, rows) = run(&db, query.name, &parameters);
        assert_eq!(shell_rows.len(), rows.len(), "{}", query.name);
        assert!(
            !rows.is_empty(),
            "{}: the fixture gives no rows",
            query.name
        );
        for (shell, row) in shell_rows.iter().zip(&rows) {
            for (column, cell) in columns.iter().zip(row) {
                let value = &shell[column];
                let agrees = match cell {
                    Cell::Null => value.is_null(),
                    Cell::Integer(number) => value.as_i64() == Some(*number),
                    Cell::Real(number) => value
                        .as_f64()
                        .is_some_and(|shown| (shown - number).abs() < 1e-9),
                    Cell::Text(text) => value.as_str() == Some(text.as_str()),
                    Cell::Blob(_) | Cell::Json(_) => false,
                };
                assert!(
                    agrees,
                    "{} column {column}: sqlite3 says {value}, memstate {cell:?}",
                    query.name
                );
            }
        }
    }
}

/// Bytes of one provenance across memories may pass 2^63 - 1 (each size is below 2^63): the
/// reports sum them exactly while the total fits in 64-bit integers, and as a real number beyond,
/// never stopping with "integer overflow" (issue 17, item 2).
#[test]
fn sums_past_the_largest_integer_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    const MAX: i64 = i64::MAX;
    let memory = |id: &str, size: i64, uid: u64| {
        serde_json::json!({"id": id, "kind": "GPU_FB_MEM", "capacity": MAX, "allocations": [
            {"uid": uid, "kind": "instance", "state": "valid", "offset": 0, "size": size, "provenance": "p"}]})
    };
    let dump = |seq: i64, memories: Vec<serde_json::Value>| {
        serde_json::json!({"format": "memstate-dump", "version": 1, "run": {"id": "wide", "node": 0},
            "snapshot": {"seq": seq, "time_ns": seq, "reason": "periodic"}, "memories": memories})
    };
    // Snapshot 0: 2^62 + (2^62 - 1) = 2^63 - 1 exactly, which a float could not hold.
    // Snapshot 1: two allocations of 2^63 - 1, 2^64 - 2 in all.
    let first = dump(
        0,
        vec![memory("0x1", 1 << 62, 1), memory("0x2", (1 << 62) - 1, 2)],
    );
    let second = dump(1, vec![memory("0x1", MAX, 3), memory("0x2", MAX, 4)]);
    let a = write_json(dir.path(), "a.json", &first);
    let b = write_json(dir.path(), "b.json", &second);
    let db = dir.path().join("t.db");
    import(&db, &[&a, &b], 0);
    for name in ["usage-by-provenance", "usage-by-kind", "usage-by-state"] {
        let rows = json_of(&db, &["report", name, "-p", "snapshot_id=1"]);
        assert_eq!(
            rows[0]["bytes"],
            serde_json::json!(MAX),
            "{name}: exact below 2^64"
        );
        let rows = json_of(&db, &["report", name, "-p", "snapshot_id=2"]);
        let bytes = rows[0]["bytes"].as_f64().unwrap();
        assert_eq!(bytes, 2.0 * MAX as f64, "{name}: a real number past it");
        assert_eq!(rows[0]["share"].as_f64(), Some(1.0));
    }
    let rows = json_of(
        &db,
        &[
            "allocations",
            "--by",
            "provenance",
            "--snapshot",
            "wide:0:1",
        ],
    );
    assert_eq!(rows[0]["bytes"].as_f64(), Some(2.0 * MAX as f64));
    // growth: from 2^63 - 1 to 2^64 - 2, a growth of 2^63 - 1 (as a real, like the last figure).
    let rows = json_of(&db, &["report", "growth", "-p", "run=wide"]);
    assert_eq!(rows[0]["first_bytes"], serde_json::json!(MAX));
    assert_eq!(rows[0]["last_bytes"].as_f64(), Some(2.0 * MAX as f64));
    assert_eq!(rows[0]["peak_bytes"].as_f64(), Some(2.0 * MAX as f64));
    // churn: two appeared, two disappeared, 2^64 - 2 and 2^63 - 1 bytes.
    let rows = json_of(&db, &["report", "churn", "-p", "run=wide"]);
    assert_eq!(rows[0]["appeared"], 2);
    assert_eq!(rows[0]["appeared_bytes"].as_f64(), Some(2.0 * MAX as f64));
    assert_eq!(rows[0]["disappeared_bytes"], serde_json::json!(MAX));
    let text = text_of(
        &db,
        &["report", "usage-by-provenance", "-p", "snapshot_id=2"],
    );
    assert!(text.contains("16 EiB"), "{text}");
}

/// A canned query's run defaults to the database's only run; with several, the error lists them
/// (issue 18, item 5).
#[test]
fn the_run_parameter_defaults_to_the_only_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    let given = json_of(&db, &["report", "nodes", "-p", "run=example-run"]);
    let defaulted = json_of(&db, &["report", "nodes"]);
    assert_eq!(given, defaulted);
    assert!(!given.as_array().unwrap().is_empty());
    let other = crate::common::set(
        crate::common::small(),
        "/run/id",
        serde_json::json!("second-run"),
    );
    let file = write_json(dir.path(), "second.json", &other);
    import(&db, &[&file], 0);
    let output = crate::common::on_db(&db)
        .args(["report", "nodes"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("needs -p run=VALUE") && stderr.contains("\"example-run\", \"second-run\""),
        "{stderr}"
    );
}

/// `snapshot_id=latest` given a memory is the latest snapshot of that memory's node, in
/// `memstate report` and in Datasette's forms alike. Node 1's dump (snapshot 4) is imported
/// last: before, Datasette's `latest` meant snapshot 4 for every memory, and memory 1 (node 0)
/// answered nothing; the CLI refused `latest` on a database of two nodes.
#[test]
fn latest_given_a_memory_is_the_latest_snapshot_of_its_node() {
    let dir = tempfile::tempdir().unwrap();
    let db = golden_db(dir.path());
    let report = |snapshot: &str, memory: &str| {
        json_of(
            &db,
            &[
                "report",
                "largest-holes",
                "-p",
                &format!("snapshot_id={snapshot}"),
                "-p",
                &format!("memory_id={memory}"),
            ],
        )
    };
    // Node 0's latest is seq 2, snapshot 3 (memory 1); node 1's is seq 0, snapshot 4 (memory 3).
    for (memory, snapshot) in [("1", "3"), ("3", "4")] {
        let explicit = report(snapshot, memory);
        assert!(!explicit.as_array().unwrap().is_empty(), "memory {memory}");
        assert_eq!(report("latest", memory), explicit, "memory {memory}");
    }
    let query = canned::find("largest-holes").unwrap();
    let sql = memstate::query::datasette::datasette_sql(&query);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let served = |snapshot: &str, memory: &str| -> Vec<(i64, i64)> {
        let mut statement = conn.prepare(&sql).unwrap();
        let rows = statement
            .query_map(
                rusqlite::named_params! {":snapshot_id": snapshot, ":memory_id": memory, ":top": ""},
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    };
    for (memory, snapshot) in [("1", "3"), ("3", "4")] {
        let explicit = served(snapshot, memory);
        assert!(!explicit.is_empty(), "memory {memory}");
        assert_eq!(served("latest", memory), explicit, "memory {memory}");
    }
    // A memory id no memory has answers nothing.
    assert!(served("latest", "99").is_empty());
    // With no memory to name a node (a query without memory_id) and two nodes, `latest` names
    // none (issue 46, item 9: one rule, see tests/it/selectors.rs), though each node's latest
    // holds allocations.
    let by_kind =
        memstate::query::datasette::datasette_sql(&canned::find("usage-by-kind").unwrap());
    let kinds = |snapshot: &str| -> Vec<(String, i64)> {
        let mut statement = conn.prepare(&by_kind).unwrap();
        let rows = statement
            .query_map(rusqlite::named_params! {":snapshot_id": snapshot}, |row| {
                Ok((
                    row.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    row.get(1)?,
                ))
            })
            .unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    };
    assert!(!kinds("3").is_empty() && !kinds("4").is_empty());
    assert!(kinds("latest").is_empty());
}

/// Every `@param` line of every query file (the canned ones and the portable ones) declares a
/// kind memstate knows: read from the files here, not through the parser, which would take an
/// unknown word for text.
#[test]
fn every_parameter_kind_is_known() {
    let declared = crate::common::query_declarations("@param");
    for (path, line, words) in &declared {
        assert!(
            words.len() >= 2 && ParamKind::parse(&words[1]).is_some(),
            "{}: {line:?} declares no known kind",
            path.display()
        );
    }
    let declared = declared.len();
    assert!(declared >= 20, "only {declared} @param lines found");
}

/// Issue 29, item 12: `report --list` spoke of sums "in two halves", lag/lead costs and the
/// private span table, and Datasette's pages showed raw Markdown links. What a query answers is
/// its first paragraph; the "why" stays in the SQL's comments; links read as words.
#[test]
fn descriptions_say_what_is_answered_without_internals_or_markdown() {
    let listed = String::from_utf8_lossy(
        &memstate()
            .args(["report", "--list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    for internal in [
        "two halves",
        "lag/lead",
        "span table",
        "integer ids",
        "2 us",
    ] {
        assert!(!listed.contains(internal), "{internal}: {listed}");
    }
    assert!(listed.contains("fragmentation in the making"), "{listed}");
    let dir = tempfile::tempdir().unwrap();
    let db = golden_db(dir.path());
    let metadata = dir.path().join("metadata.json");
    on_db(&db)
        .args(["datasette-metadata", "-o"])
        .arg(&metadata)
        .assert()
        .success();
    let text = std::fs::read_to_string(&metadata).unwrap();
    assert!(!text.contains("]("), "a Markdown link in the metadata");
    assert!(
        text.contains("defined in docs/FORMAT.md"),
        "the link's document named"
    );
}
