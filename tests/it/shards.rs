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
    let plain = memstate::shards::shard_path(dir, "job-7.a_b", 3);
    assert_eq!(plain, dir.join("job-7.a_b-n3.db"));
    let slash = memstate::shards::shard_path(dir, "a/b", 0);
    let underscore = memstate::shards::shard_path(dir, "a_b", 0);
    assert_ne!(slash, underscore);
    assert_eq!(slash.parent(), Some(dir));
    let dots = memstate::shards::shard_path(dir, "../..", 1);
    assert_eq!(dots.parent(), Some(dir));
    assert!(!dots.file_name().unwrap().to_string_lossy().starts_with('.'));
}
