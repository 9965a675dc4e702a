//! Shard import: a multi-node run imported once into one database and once into one database per
//! node gives the same rows for every node, and importing again changes nothing.

use std::path::Path;

use rusqlite::Connection;

use crate::common::{import, on_db};

fn rows(db: &Path, sql: &str) -> Vec<String> {
    let conn = Connection::open(db).unwrap();
    let mut statement = conn.prepare(sql).unwrap();
    let mut rows: Vec<String> = statement
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort();
    rows
}

/// Every row of a node, ids of the database left out.
fn node_rows(db: &Path, node: Option<i64>) -> Vec<String> {
    let filter = node.map_or(String::new(), |node| format!("WHERE s.node = {node}"));
    let mut all = rows(db, &format!(
        "SELECT 's ' || s.run || ' ' || s.node || ' ' || s.seq || ' ' || s.time_ns || ' ' || s.reason FROM snapshots s {filter}"
    ));
    all.extend(rows(db, &format!(
        "SELECT 'm ' || s.seq || ' ' || m.handle || ' ' || ms.capacity || ' ' || ms.used_bytes || ' ' || ms.free_bytes || ' ' || ms.hole_count || ' ' || ms.largest_hole
         FROM memory_stats ms JOIN memories m USING (memory_id) JOIN snapshots s USING (snapshot_id) {filter}"
    )));
    all.extend(rows(db, &format!(
        "SELECT 'a ' || s.seq || ' ' || m.handle || ' ' || a.uid || ' ' || a.offset || ' ' || a.size || ' ' || a.state || ' ' || a.kind
         FROM allocations a JOIN memories m USING (memory_id) JOIN snapshots s USING (snapshot_id) {filter}"
    )));
    all.extend(rows(db, &format!(
        "SELECT 'f ' || s.seq || ' ' || f.size FROM failed_requests f JOIN snapshots s USING (snapshot_id) {filter}"
    )));
    all
}

#[test]
fn shards_hold_what_one_database_holds_node_by_node() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    memstate::sim::simulate(
        &memstate::sim::Config {
            nodes: 3,
            steps: 80,
            dump_every: 8,
            continue_after_oom: true,
            ..Default::default()
        },
        &run,
        &mut |_| {},
    )
    .unwrap();
    let one = dir.path().join("one.db");
    import(&one, &[&run], 0);
    let shards = dir.path().join("shards");
    let output = on_db(dir.path().join("unused.db"))
        .args(["import", "--jobs", "2", "--shard-dir"])
        .arg(&shards)
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut names: Vec<String> = std::fs::read_dir(&shards)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".db"))
        .collect();
    names.sort();
    let run_id: String = rows(&one, "SELECT DISTINCT run FROM snapshots").remove(0);
    assert_eq!(
        names,
        (0..3)
            .map(|node| format!("{run_id}-n{node}.db"))
            .collect::<Vec<_>>()
    );
    assert!(
        !dir.path().join("unused.db").exists(),
        "--db is not written"
    );
    for node in 0..3 {
        let shard = shards.join(format!("{run_id}-n{node}.db"));
        let expected = node_rows(&one, Some(node));
        assert!(expected.len() > 50, "node {node}: {}", expected.len());
        assert_eq!(node_rows(&shard, None), expected, "node {node}");
    }
    // Again: every dump recognised, nothing changes.
    let output = on_db(dir.path().join("unused.db"))
        .args(["import", "--format", "json", "--shard-dir"])
        .arg(&shards)
        .arg(&run)
        .output()
        .unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary[0]["imported"], 0, "{summary}");
    assert!(summary[0]["unchanged"].as_u64().unwrap() > 10, "{summary}");
}

#[test]
fn shard_names_are_safe_and_distinct() {
    let dir = Path::new("/shards");
    let plain = memstate::import::shards::shard_path(dir, "job-7.a_b", 3);
    assert_eq!(plain, dir.join("job-7.a_b-n3.db"));
    let slash = memstate::import::shards::shard_path(dir, "a/b", 0);
    let underscore = memstate::import::shards::shard_path(dir, "a_b", 0);
    assert_ne!(slash, underscore);
    assert_eq!(slash.parent(), Some(dir));
    let dots = memstate::import::shards::shard_path(dir, "../..", 1);
    assert_eq!(dots.parent(), Some(dir));
    assert!(!dots.file_name().unwrap().to_string_lossy().starts_with('.'));
    // Issue 46, item 11: a run id starting with `-` names no file a command takes for an option,
    // and stays apart from the same id without the dash.
    for run in ["-rf", "--", "-"] {
        let path = memstate::import::shards::shard_path(dir, run, 0);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !name.starts_with('-') && !name.starts_with('.'),
            "{run}: {name}"
        );
        assert_eq!(path.parent(), Some(dir));
    }
    assert_ne!(
        memstate::import::shards::shard_path(dir, "-rf", 0),
        memstate::import::shards::shard_path(dir, "rf", 0)
    );
}

/// Snapshots across the shards of a folder, counted while an import may be writing them (a
/// shard not yet made, or without its tables yet, counts none).
fn snapshots_in(shards: &Path) -> i64 {
    let Ok(entries) = std::fs::read_dir(shards) else {
        return 0;
    };
    entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "db"))
        .map(|path| {
            Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .and_then(|conn| {
                    conn.query_row("SELECT count(*) FROM snapshots", [], |row| row.get(0))
                })
                .unwrap_or(0)
        })
        .sum()
}

/// A shard import killed while it writes leaves every shard whole (each dump in or out), and run
/// again it finishes the job: the shards then hold what one database holds, nothing twice.
#[test]
fn a_killed_shard_import_resumes_to_the_same_shards() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let written = memstate::sim::simulate(
        &memstate::sim::Config {
            nodes: 4,
            steps: 600,
            dump_every: 2,
            continue_after_oom: true,
            ..Default::default()
        },
        &run,
        &mut |_| {},
    )
    .unwrap();
    let dumps = written.dumps as i64;
    let one = dir.path().join("one.db");
    import(&one, &[&run], 0);
    let shards = dir.path().join("shards");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"))
        .args([
            "--db",
            "unused.db",
            "import",
            "--quiet",
            "--jobs",
            "2",
            "--shard-dir",
        ])
        .arg(&shards)
        .arg(&run)
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once a quarter of the dumps have landed, with hundreds still to come.
    let started = std::time::Instant::now();
    while snapshots_in(&shards) < dumps / 4 {
        assert!(
            started.elapsed().as_secs() < 60,
            "a quarter of the dumps had not landed in 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let landed = snapshots_in(&shards);
    assert!(
        landed < dumps,
        "the import was to be killed part-way: {landed} of {dumps} dumps had landed"
    );
    eprintln!("shard import killed with {landed} of {dumps} dumps landed");
    for entry in std::fs::read_dir(&shards).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "db") {
            continue;
        }
        let conn = Connection::open(&path).unwrap();
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(check, "ok", "{}", path.display());
        // Every snapshot there is whole: its allocations match the figures stored with it.
        let broken: i64 = conn
            .query_row(
                "SELECT count(*) FROM memory_stats ms
                 WHERE ms.allocation_count != (SELECT count(*) FROM allocations a
                     WHERE a.snapshot_id = ms.snapshot_id AND a.memory_id = ms.memory_id)",
                [],
                |row| row.get(0),
            )
            .unwrap_or(0);
        assert_eq!(broken, 0, "{}", path.display());
    }
    // Run again: what landed is recognised, the rest lands.
    let output = on_db(dir.path().join("unused.db"))
        .args(["import", "--format", "json", "--jobs", "2", "--shard-dir"])
        .arg(&shards)
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (
            summary[0]["imported"].as_i64().unwrap(),
            summary[0]["unchanged"].as_i64().unwrap()
        ),
        (dumps - landed, landed),
        "{summary}"
    );
    let run_id: String = rows(&one, "SELECT DISTINCT run FROM snapshots").remove(0);
    for node in 0..4 {
        let shard = shards.join(format!("{run_id}-n{node}.db"));
        assert_eq!(
            node_rows(&shard, None),
            node_rows(&one, Some(node)),
            "node {node}"
        );
    }
}

/// Issue 27, item 6: a file that is not a memstate database under one node's shard name stopped
/// the whole shard import (exit 2, no summary, the other nodes never imported). Now that node is
/// refused by name, its file left byte for byte, the other two nodes imported as a plain import
/// of their dumps has them, the summary printed, exit 1. By hand: 3 nodes, dumps every 8 of 80
/// steps: each node's dumps land in its shard except node 1's, all refused.
#[test]
fn a_garbage_shard_refuses_its_node_and_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let config = memstate::sim::Config {
        nodes: 3,
        steps: 80,
        dump_every: 8,
        ..Default::default()
    };
    memstate::sim::simulate(&config, &run, &mut |_| {}).unwrap();
    let one = dir.path().join("one.db");
    import(&one, &[&run], 0);
    let shards = dir.path().join("shards");
    std::fs::create_dir(&shards).unwrap();
    let garbage = memstate::import::shards::shard_path(&shards, &config.run_id, 1);
    std::fs::write(&garbage, b"not a database at all\n").unwrap();
    for jobs in ["1", "2"] {
        let output = on_db(dir.path().join("unused.db"))
            .args(["import", "--jobs", jobs, "--shard-dir"])
            .arg(&shards)
            .arg(&run)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "jobs {jobs}: {stderr}");
        let named = stderr
            .lines()
            .filter(|line| line.contains(&garbage.display().to_string()))
            .count();
        assert_eq!(named, 1, "the node is refused once, by name: {stderr}");
        let node1: i64 =
            crate::common::scalar(&one, "SELECT count(*) FROM snapshots WHERE node = 1");
        assert!(
            stdout.contains(&format!("{node1} refused"))
                || stderr.contains(&format!("{node1} refused")),
            "every dump of node 1 counted refused ({node1}): {stdout} {stderr}"
        );
        assert_eq!(std::fs::read(&garbage).unwrap(), b"not a database at all\n");
        for node in [0, 2] {
            let shard = memstate::import::shards::shard_path(&shards, &config.run_id, node);
            assert_eq!(node_rows(&shard, Some(node)), node_rows(&one, Some(node)));
        }
    }
}
