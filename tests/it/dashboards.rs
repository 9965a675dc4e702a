//! Feeding dashboards: Unix time and series labels in the views (worked out by hand), `import
//! --follow` against a writer process, the Grafana dashboard's SQL through the sqlite3 program,
//! Datasette's metadata through a real Datasette, and the pandas example.

use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Value};

use crate::common::{import, write_json};

fn dump(run: &str, node: i64, seq: i64, time_ns: i64, wall_time: Option<&str>) -> Value {
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
    let paths: Vec<_> = dumps.iter().enumerate().map(|(index, value)| write_json(dir.path(), &format!("{index}.json"), value)).collect();
    let db = dir.path().join("t.db");
    // Imported newest first: the clocks do not depend on the order.
    let mut reversed: Vec<&Path> = paths.iter().map(|path| path.as_path()).collect();
    reversed.reverse();
    import(&db, &reversed, 0);
    let conn = Connection::open(&db).unwrap();
    let time_of = |run: &str, node: i64, seq: i64| -> Option<f64> {
        conn.query_row("SELECT time_unix FROM snapshots WHERE run = ?1 AND node = ?2 AND seq = ?3", rusqlite::params![run, node, seq], |row| row.get(0)).unwrap()
    };
    let close = |found: Option<f64>, expected: f64| found.is_some_and(|found| (found - expected).abs() < 1e-3);
    assert!(close(time_of("clocks", 0, 0), 1_796_119_201.0), "{:?}", time_of("clocks", 0, 0));
    assert!(close(time_of("clocks", 0, 1), 1_796_119_202.0), "{:?}", time_of("clocks", 0, 1));
    assert!(close(time_of("clocks", 1, 0), 1_796_119_205.25), "{:?}", time_of("clocks", 1, 0));
    assert!(close(time_of("clocks", 2, 0), 1_796_119_200.25), "{:?}", time_of("clocks", 2, 0));
    assert!(close(time_of("clocks", 2, 1), 1_796_119_203.25), "{:?}", time_of("clocks", 2, 1));
    assert!(close(time_of("clocks", 3, 0), 1_483_228_800.0), "{:?}", time_of("clocks", 3, 0));
    assert_eq!(time_of("noclock", 0, 0), None);
    // memory_trend: the same times, and the series label, as its last two columns.
    let mut statement = conn.prepare("SELECT * FROM memory_trend WHERE run = 'clocks' AND node = 2 ORDER BY seq").unwrap();
    let names: Vec<String> = statement.column_names().map(|name| name.to_string()).collect();
    assert_eq!(&names[names.len() - 2..], ["time_unix", "series"]);
    let rows: Vec<(f64, String)> = statement.query_map([], |row| Ok((row.get("time_unix")?, row.get("series")?))).unwrap().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    assert!((rows[1].0 - 1_796_119_203.25).abs() < 1e-3);
    assert_eq!(rows[0].1, "n2 GPU_FB_MEM 0x1e00000000000003");
    let series: String = conn.query_row("SELECT series FROM snapshots WHERE run = 'clocks' AND node = 3", [], |row| row.get(0)).unwrap();
    assert_eq!(series, "n3");
}

/// How many snapshots a database holds (0 while it does not exist yet).
fn snapshot_count(db: &Path) -> i64 {
    Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|conn| conn.query_row("SELECT count(*) FROM snapshots", [], |row| row.get(0)))
        .unwrap_or(0)
}

/// Wait until the database holds `count` snapshots; how long that took. Fails after 30 s (a
/// bound for a broken follower, not a measure of speed).
fn wait_for(db: &Path, count: i64, what: &str) -> std::time::Duration {
    let started = std::time::Instant::now();
    while snapshot_count(db) < count {
        assert!(started.elapsed().as_secs() < 30, "{what}: still {} snapshots after 30 s", snapshot_count(db));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    started.elapsed()
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
    file.sync_all().unwrap();
}

fn line(value: &Value) -> Vec<u8> {
    let mut text = value.to_string().into_bytes();
    text.push(b'\n');
    text
}

fn gzip_member(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// Start `import --follow` on the folder and the two streams; stop it with SIGTERM and return
/// its exit code, standard output and standard error.
struct Follower(std::process::Child);

impl Follower {
    fn start(db: &Path, dir: &Path, extra: &[&str]) -> Follower {
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"))
            .env_remove("MEMSTATE_DB")
            .arg("--db")
            .arg(db)
            .args(["import", "--follow", "--interval", "100ms", "--settle", "2s"])
            .args(extra)
            .arg(dir.join("docs"))
            .arg(dir.join("stream.ndjson"))
            .arg(dir.join("packed.ndjson.gz"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        Follower(child)
    }

    fn stop(self) -> (Option<i32>, String, String) {
        let pid = self.0.id() as libc::pid_t;
        // SAFETY: kill(2) with the pid of a child this test started and has not waited for.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let output = self.0.wait_with_output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn import_follow_takes_each_dump_once_it_is_complete_and_resumes_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let stream = dir.path().join("stream.ndjson");
    let packed = dir.path().join("packed.ndjson.gz");
    let db = dir.path().join("follow.db");
    let follower = Follower::start(&db, dir.path(), &[]);
    let mut latencies = Vec::new();
    // A document, written whole.
    write_json(&docs, "a.json", &dump("live", 0, 0, 0, None));
    latencies.push(wait_for(&db, 1, "a whole document"));
    // A document written in two halves, the second well after the first: waited for, not refused.
    let text = serde_json::to_vec(&dump("live", 0, 1, 1_000_000_000, None)).unwrap();
    let (first, second) = text.split_at(text.len() / 2);
    append(&docs.join("b.json"), first);
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert_eq!(snapshot_count(&db), 1, "half a document is not a dump");
    append(&docs.join("b.json"), second);
    latencies.push(wait_for(&db, 2, "the rest of the document"));
    // Stream lines: one whole, one in two halves.
    append(&stream, &line(&dump("live", 1, 0, 0, None)));
    latencies.push(wait_for(&db, 3, "a stream line"));
    let text = line(&dump("live", 1, 1, 1_000_000_000, None));
    let (first, second) = text.split_at(text.len() / 2);
    append(&stream, first);
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert_eq!(snapshot_count(&db), 3, "half a line is not a dump");
    append(&stream, second);
    latencies.push(wait_for(&db, 4, "the rest of the line"));
    // A compressed stream growing by gzip members.
    append(&packed, &gzip_member(&line(&dump("live", 2, 0, 0, None))));
    latencies.push(wait_for(&db, 5, "a compressed line"));
    append(&packed, &gzip_member(&line(&dump("live", 2, 1, 1_000_000_000, None))));
    latencies.push(wait_for(&db, 6, "the next compressed line"));
    // A bad line, and a document that stays broken: each refused once.
    append(&stream, b"{\"format\": \"memstate-dump\", \"version\": 1}\n");
    std::fs::write(docs.join("broken.json"), b"{\"format\": \"memstate-du").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let (code, stdout, stderr) = follower.stop();
    eprintln!("follow: each dump landed after {:?}", latencies);
    assert_eq!(code, Some(1), "something was refused: {stderr}");
    assert!(stdout.contains("followed: imported 6 dumps") && stdout.contains("2 refused"), "{stdout}");
    assert_eq!(stderr.matches("stream.ndjson:3:").count(), 1, "the bad line is refused once: {stderr}");
    assert_eq!(stderr.matches("broken.json").count(), 1, "the broken document is refused once: {stderr}");
    assert!(!stderr.contains("b.json"), "the half-written document was waited for: {stderr}");
    let conn = Connection::open(&db).unwrap();
    let sources: Vec<String> =
        conn.prepare("SELECT source FROM snapshots ORDER BY node, seq").unwrap().query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect();
    assert!(sources[3].ends_with("stream.ndjson:2") && sources[5].ends_with("packed.ndjson.gz:2"), "{sources:?}");
    drop(conn);
    // Started again (scanning only this time): everything is recognised, nothing doubles.
    let follower = Follower::start(&db, dir.path(), &["--poll"]);
    append(&stream, &line(&dump("live", 1, 2, 2_000_000_000, None)));
    wait_for(&db, 7, "a line after the restart");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (_, stdout, _) = follower.stop();
    assert!(stdout.contains("followed: imported 1 dumps") && stdout.contains("6 unchanged"), "{stdout}");
    assert_eq!(snapshot_count(&db), 7);
}
