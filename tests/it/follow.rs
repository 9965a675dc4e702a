//! `import --follow` against a writer process: each dump taken once complete, refusals that do not
//! stop it, rewritten streams, and resumption without duplicates.

use std::path::Path;

use rusqlite::Connection;
use serde_json::Value;

use crate::common::write_json;
use crate::dashboards::dump;

/// How many snapshots a database holds (0 while it does not exist yet).
pub(crate) fn snapshot_count(db: &Path) -> i64 {
    Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|conn| conn.query_row("SELECT count(*) FROM snapshots", [], |row| row.get(0)))
        .unwrap_or(0)
}

/// Wait until the database holds `count` snapshots; how long that took. Fails after 30 s (a
/// bound for a broken follower, not a measure of speed).
pub(crate) fn wait_for(db: &Path, count: i64, what: &str) -> std::time::Duration {
    let started = std::time::Instant::now();
    while snapshot_count(db) < count {
        assert!(
            started.elapsed().as_secs() < 30,
            "{what}: still {} snapshots after 30 s",
            snapshot_count(db)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    started.elapsed()
}

pub(crate) fn append(path: &Path, bytes: &[u8]) {
    write_to(path, bytes, false);
}

/// Write `bytes` over a file in place: the same inode, truncated and written again.
pub(crate) fn rewrite_in_place(path: &Path, bytes: &[u8]) {
    write_to(path, bytes, true);
}

fn write_to(path: &Path, bytes: &[u8], truncate: bool) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(!truncate)
        .write(true)
        .truncate(truncate)
        .open(path)
        .unwrap();
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

/// `memstate --db DB ARGS... PATH` with `env` set, its output piped.
pub(crate) fn follow_on(
    db: &Path,
    env: &[(&str, &str)],
    args: &[&str],
    path: &Path,
) -> std::process::Child {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"));
    command.env_remove("MEMSTATE_DB");
    for (key, value) in env {
        command.env(key, value);
    }
    command
        .arg("--db")
        .arg(db)
        .args(args)
        .arg(path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A running follower: its standard error read as it comes (so a test can wait for what it
/// printed instead of sleeping for it), stopped with SIGTERM for its exit code and output.
pub(crate) struct Follower {
    child: std::process::Child,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    stderr_reader: std::thread::JoinHandle<()>,
}

impl Follower {
    /// Start `import --follow` on the folder and the two streams.
    fn start(db: &Path, dir: &Path, extra: &[&str]) -> Follower {
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"))
            .env_remove("MEMSTATE_DB")
            .arg("--db")
            .arg(db)
            .args([
                "import",
                "--follow",
                "--interval",
                "100ms",
                "--settle",
                "2s",
            ])
            .args(extra)
            .arg(dir.join("docs"))
            .arg(dir.join("stream.ndjson"))
            .arg(dir.join("packed.ndjson.gz"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        Follower::watch(child)
    }

    /// Read a started follower's output from threads.
    pub(crate) fn watch(mut child: std::process::Child) -> Follower {
        use std::io::Read;
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let printed = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let into = printed.clone();
        Follower {
            child,
            stdout: std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stdout.read_to_string(&mut text);
                text
            }),
            stderr: printed,
            stderr_reader: std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(count @ 1..) = stderr.read(&mut chunk) {
                    into.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&chunk[..count]));
                }
            }),
        }
    }

    /// Wait until the follower's standard error satisfies `done`. Fails after 30 s (a bound
    /// for a broken follower, not a measure of speed).
    pub(crate) fn wait_for_stderr(&self, what: &str, done: impl Fn(&str) -> bool) {
        let started = std::time::Instant::now();
        loop {
            let printed = self.stderr.lock().unwrap().clone();
            if done(&printed) {
                return;
            }
            assert!(
                started.elapsed().as_secs() < 30,
                "{what}: not printed after 30 s:\n{printed}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub(crate) fn stop(mut self) -> (Option<i32>, String, String) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with the pid of a child this test started and has not waited for.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = self.child.wait().unwrap();
        let stdout = self.stdout.join().unwrap();
        self.stderr_reader.join().unwrap();
        let stderr = self.stderr.lock().unwrap().clone();
        (status.code(), stdout, stderr)
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
    append(
        &packed,
        &gzip_member(&line(&dump("live", 2, 1, 1_000_000_000, None))),
    );
    latencies.push(wait_for(&db, 6, "the next compressed line"));
    // A bad line, and a document that stays broken: each refused once.
    append(
        &stream,
        b"{\"format\": \"memstate-dump\", \"version\": 1}\n",
    );
    std::fs::write(docs.join("broken.json"), b"{\"format\": \"memstate-du").unwrap();
    follower.wait_for_stderr("both refusals", |printed| {
        printed.contains("stream.ndjson:3:") && printed.contains("broken.json")
    });
    // Given time to refuse either again (it must not).
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let (code, stdout, stderr) = follower.stop();
    eprintln!("follow: each dump landed after {:?}", latencies);
    assert_eq!(code, Some(1), "something was refused: {stderr}");
    assert!(
        stdout.contains("followed: imported 6 dumps") && stdout.contains("2 refused"),
        "{stdout}"
    );
    assert_eq!(
        stderr.matches("stream.ndjson:3:").count(),
        1,
        "the bad line is refused once: {stderr}"
    );
    assert_eq!(
        stderr.matches("broken.json").count(),
        1,
        "the broken document is refused once: {stderr}"
    );
    assert!(
        !stderr.contains("b.json"),
        "the half-written document was waited for: {stderr}"
    );
    let conn = Connection::open(&db).unwrap();
    let sources: Vec<String> = conn
        .prepare("SELECT source FROM snapshots ORDER BY node, seq")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        sources[3].ends_with("stream.ndjson:2") && sources[5].ends_with("packed.ndjson.gz:2"),
        "{sources:?}"
    );
    drop(conn);
    // Started again (scanning only this time): everything is recognised, nothing doubles.
    let follower = Follower::start(&db, dir.path(), &["--poll"]);
    append(&stream, &line(&dump("live", 1, 2, 2_000_000_000, None)));
    wait_for(&db, 7, "a line after the restart");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (_, stdout, _) = follower.stop();
    assert!(
        stdout.contains("followed: imported 1 dump (") && stdout.contains("6 unchanged"),
        "{stdout}"
    );
    assert_eq!(snapshot_count(&db), 7);
}

/// A string over the documented limit (16 MiB per string, docs/FORMAT.md) is refused by
/// `validate` and `import` with the file and its place, the rest of the folder imports, and a
/// follower keeps going past it (issue 17, item 5: a 1000 MiB label passed validate, then stopped
/// the import with "string or blob too big" and ended follow).
#[test]
fn a_string_over_the_limit_is_refused_by_name_and_follow_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let limit = memstate::dump::MAX_STRING_BYTES;
    let mut huge = dump("live", 0, 0, 0, None);
    huge["memories"][0]["allocations"][0]["label"] = Value::from("x".repeat(limit + 1));
    let mut at_limit = dump("live", 0, 1, 1, None);
    at_limit["memories"][0]["allocations"][0]["provenance"] = Value::from("p".repeat(limit));
    let huge_path = write_json(&docs, "a-huge.json", &huge);
    write_json(&docs, "b-at-limit.json", &at_limit);
    let output = crate::common::memstate()
        .args(["validate", "--quiet"])
        .arg(&huge_path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("a-huge.json: memories[0].allocations[0].label:")
            && stderr.contains("16 MiB"),
        "{stderr}"
    );
    let db = dir.path().join("t.db");
    let stdout = crate::common::import(&db, &[&docs], 1);
    assert!(stdout.contains("imported 1 dump"), "{stdout}");
    let stored: i64 = Connection::open(&db)
        .unwrap()
        .query_row("SELECT length(provenance) FROM allocations", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(
        stored as usize, limit,
        "a string at the limit is stored whole"
    );
    // Following: the huge dump is refused, and the dump written after it still lands.
    let followed = dir.path().join("followed");
    std::fs::create_dir(&followed).unwrap();
    let db = dir.path().join("follow.db");
    let follower = follow_on(
        &db,
        &[],
        &[
            "import",
            "--follow",
            "--interval",
            "100ms",
            "--settle",
            "300ms",
        ],
        &followed,
    );
    let follower = Follower::watch(follower);
    write_json(&followed, "a-huge.json", &huge);
    std::thread::sleep(std::time::Duration::from_millis(500));
    write_json(&followed, "c.json", &dump("live", 0, 2, 2, None));
    wait_for(&db, 1, "the dump after the refused one");
    // The refused document is refused once it has stayed unchanged for --settle.
    follower.wait_for_stderr("the refusal of the huge document", |printed| {
        printed.contains("a-huge.json: memories[0].allocations[0].label:")
    });
    let (code, _, stderr) = follower.stop();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("a-huge.json: memories[0].allocations[0].label:"),
        "{stderr}"
    );
}

/// A stream truncated and written again in place (same inode, as long or longer), plain and
/// gzip-compressed, is read again from its start: the new dumps land, those already imported are
/// skipped (issue 17, item 3: 11 of 18 dumps were missed).
#[test]
fn follow_reads_a_stream_rewritten_in_place() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    let stream = dir.path().join("stream.ndjson");
    let packed = dir.path().join("packed.ndjson.gz");
    let lines = |node: i64, seqs: &[i64]| -> Vec<u8> {
        seqs.iter()
            .flat_map(|&seq| line(&dump("again", node, seq, seq * 1_000, None)))
            .collect()
    };
    std::fs::write(&stream, lines(1, &[0, 1])).unwrap();
    std::fs::write(&packed, gzip_member(&lines(2, &[0, 1]))).unwrap();
    let inodes = (
        std::fs::metadata(&stream).unwrap().ino(),
        std::fs::metadata(&packed).unwrap().ino(),
    );
    let db = dir.path().join("t.db");
    let follower = Follower::start(&db, dir.path(), &[]);
    wait_for(&db, 4, "the first two lines of each stream");
    // Written again: the first line kept, others new; longer than before.
    rewrite_in_place(&stream, &lines(1, &[0, 5, 6]));
    rewrite_in_place(&packed, &gzip_member(&lines(2, &[0, 7, 8])));
    assert_eq!(
        inodes,
        (
            std::fs::metadata(&stream).unwrap().ino(),
            std::fs::metadata(&packed).unwrap().ino()
        ),
        "rewritten in place"
    );
    wait_for(&db, 8, "the rewritten streams' new lines");
    let (code, stdout, stderr) = follower.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("imported 8 dumps"), "{stdout}");
    let seqs: Vec<(i64, i64)> = Connection::open(&db)
        .unwrap()
        .prepare("SELECT node, seq FROM snapshots ORDER BY node, seq")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        seqs,
        vec![
            (1, 0),
            (1, 1),
            (1, 5),
            (1, 6),
            (2, 0),
            (2, 1),
            (2, 7),
            (2, 8)
        ]
    );
}

/// An idle follower of many files sleeps: its own scans (which open folders and files) do not
/// wake it, and scans back off while nothing changes (issue 17, item 3: 54-61% of a core with
/// 5,000 files). Counted in scans, not in time: a follower that wakes itself scans without end.
#[test]
fn an_idle_follower_does_not_wake_itself() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    for seq in 0..200 {
        write_json(
            &docs,
            &format!("d{seq:03}.json"),
            &dump("idle", 0, seq, seq, None),
        );
    }
    let db = dir.path().join("t.db");
    let mut database = memstate::db::open(&db).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let options = memstate::import::follow::FollowOptions {
        ingest: Default::default(),
        interval: std::time::Duration::from_millis(100),
        settle: std::time::Duration::from_secs(2),
        events: true,
        forecast_within: Some(5),
    };
    let started = std::time::Instant::now();
    let (mut scans, mut idle_scans) = (0u32, 0u32);
    let paths = [docs.display().to_string()];
    let summary =
        memstate::import::follow::follow(&mut database, &paths, options, &stop, &mut |event| {
            if let memstate::import::follow::FollowEvent::Scanned { summary, .. } = event {
                scans += 1;
                if summary.imported == 200 {
                    idle_scans += 1;
                }
                if started.elapsed() > std::time::Duration::from_secs(4) {
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
        })
        .unwrap();
    assert_eq!(summary.imported, 200);
    // 4 s of idling at 100 ms backing off to 800 ms is about 8 scans; waking itself, hundreds.
    assert!(idle_scans <= 20, "{idle_scans} idle scans of {scans}");
}

/// A followed dump with a failed request says so at once, in one line: node, memory, request,
/// verdict and the command that tells the story (issue 18, item 8). The design's example: 300000
/// bytes asked of a GPU memory with 323584 free and a largest hole of 225280 (fragmentation).
#[test]
fn follow_says_when_an_out_of_memory_dump_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let db = dir.path().join("t.db");
    let follower = follow_on(
        &db,
        &[],
        &["import", "--follow", "--quiet", "--interval", "100ms"],
        &docs,
    );
    let follower = Follower::watch(follower);
    write_json(&docs, "small.json", &crate::common::small());
    wait_for(&db, 1, "the example dump");
    follower.wait_for_stderr("the out-of-memory line", |printed| {
        printed.contains("out of memory:")
    });
    // A caching allocator's failure (device_free): the verdict is the device's, as `oom` gives it
    // (story.rs, device_free_makes_the_story_the_devices): the failed segment alone has 400 free
    // of the 1500 asked, but with the other cuda:0 segment and 300 outside it is fragmentation.
    let mut cached = crate::common::small();
    cached["run"]["id"] = serde_json::json!("torch-run");
    cached["memories"] = serde_json::json!([
        {"id": "0x100", "kind": "GPU_FB_MEM", "name": "cuda:0 large pool segment", "capacity": 1000,
         "allocations": [{"uid": 1, "kind": "block", "state": "valid", "offset": 0, "size": 600}],
         "failed_requests": [{"size": 1500, "device_free": 300}]},
        {"id": "0x200", "kind": "GPU_FB_MEM", "name": "cuda:0 large pool segment", "capacity": 1000, "allocations": []},
    ]);
    write_json(&docs, "cached.json", &cached);
    follower.wait_for_stderr("the caching allocator's line", |printed| {
        printed.contains("torch-run node 0")
    });
    let (code, _, stderr) = follower.stop();
    assert!(
        stderr.contains("a request of 1.5 KiB failed (fragmentation: enough free bytes in the cache and on the device"),
        "{stderr}"
    );
    assert_eq!(code, Some(0), "{stderr}");
    let line = stderr
        .lines()
        .find(|line| line.starts_with("out of memory:"))
        .unwrap_or_else(|| panic!("no out-of-memory line: {stderr}"));
    assert!(
        line.contains("example-run node 0 seq 3, GPU_FB_MEM 0x1e00000000000003: a request of 293 KiB failed (fragmentation")
            && line.ends_with(&format!("memstate --db {} oom --snapshot example-run:0:3", db.display())),
        "{line}"
    );
}

/// A log of today's producers given to --follow lands its reports as they are appended: the file
/// is read again when it changes, the reports already imported are unchanged, a new one lands.
#[test]
fn follow_reads_a_producers_log_as_it_grows() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let log = dir.path().join("job.log");
    let fixture = std::fs::read_to_string(crate::common::data("sources/legate-26.01.log")).unwrap();
    // legate-26.01.log holds two reports of node 0; the second starts with its "Failed" line at 4.0 s.
    let second = fixture.find("[0 - 7f00aa000700]    4.000000").unwrap();
    std::fs::write(&log, &fixture[..second]).unwrap();
    let follower = follow_on(
        &db,
        &[],
        &[
            "import",
            "--follow",
            "--quiet",
            "--interval",
            "100ms",
            "--settle",
            "1s",
        ],
        &log,
    );
    let follower = Follower::watch(follower);
    wait_for(&db, 1, "the first report");
    append(&log, &fixture.as_bytes()[second..]);
    wait_for(&db, 2, "the second report");
    let (code, _, stderr) = follower.stop();
    assert_eq!(code, Some(0), "{stderr}");
    let conn = Connection::open(&db).unwrap();
    let runs: String = conn
        .query_row("SELECT group_concat(run || ':' || seq || ':' || reason, ' ') FROM (SELECT * FROM snapshots ORDER BY seq)", [], |row| row.get(0))
        .unwrap();
    assert_eq!(runs, "job:0:oom job:1:oom");
    assert!(!stderr.contains("refused"), "{stderr}");
}

/// Issue 27, item 4: a PyTorch snapshot whose segment runs past 2^64, with a trace event in it,
/// made `start + total_size` overflow and panic: a plain import then lost every other input of
/// its command line (exit 2) and a follower died (exit 101). Now it is refused by name as out of
/// range; the other inputs are imported and the follower goes on to the next dump.
#[test]
fn a_snapshot_out_of_range_is_refused_and_the_rest_imports_or_is_followed() {
    use crate::pickles::{block, pickled, segment, text, Py};
    let dir = tempfile::tempdir().unwrap();
    let top: i128 = (1i128 << 64) - 4096;
    let past = pickled(&Py::Dict(vec![
        (
            "segments",
            Py::List(vec![segment(
                top,
                8192,
                vec![block(top, 8192, "active_allocated", vec![])],
            )]),
        ),
        (
            "device_traces",
            Py::List(vec![Py::List(vec![Py::Dict(vec![
                ("action", text("free_completed")),
                ("addr", Py::Int(top)),
                ("size", Py::Int(8192)),
                ("time_us", Py::Int(10)),
            ])])]),
        ),
    ]));
    let bad = crate::common::write(dir.path(), "past.pickle", &past);
    let good = write_json(dir.path(), "good.json", &dump("live", 0, 0, 0, None));
    let db = dir.path().join("plain.db");
    let output = crate::common::on_db(&db)
        .arg("import")
        .arg(&bad)
        .arg(&good)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("past.pickle") && stderr.contains("segments[0]") && stderr.contains("2^64"),
        "{stderr}"
    );
    assert_eq!(
        crate::common::scalar::<i64>(&db, "SELECT count(*) FROM snapshots"),
        1
    );

    // Following the snapshot and a folder: the snapshot is refused, the folder's dump lands.
    let followed = dir.path().join("followed");
    std::fs::create_dir(&followed).unwrap();
    let db = dir.path().join("follow.db");
    let shown = bad.display().to_string();
    let follower = Follower::watch(follow_on(
        &db,
        &[],
        &[
            "import",
            "--follow",
            "--interval",
            "100ms",
            "--settle",
            "300ms",
            &shown,
        ],
        &followed,
    ));
    follower.wait_for_stderr("the refusal of the snapshot", |printed| {
        printed.contains("past.pickle: segments[0]")
    });
    write_json(&followed, "b-good.json", &dump("live", 0, 1, 1, None));
    wait_for(&db, 1, "the dump after the refused snapshot");
    let (code, _, stderr) = follower.stop();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
