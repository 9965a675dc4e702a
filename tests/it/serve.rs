//! `memstate serve` (issue 30): a server started on a free port and asked over plain HTTP. Its
//! answers are held to what the views hold (each figure read back with SQL of the test's own),
//! and its refusals to what the issue asks: another Host, a missing token, a write through the
//! SQL box, a statement that would run forever, bad parameters, unknown paths.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::scalar;

/// A server started for a test, stopped when dropped.
pub struct Served {
    child: Child,
    pub url: String,
    pub port: u16,
}

impl Served {
    /// The server's process id (for its peak memory and threads in /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `memstate serve --port 0 ARGS` on `db` and read the URL it prints.
pub fn serve(db: &Path, args: &[&str]) -> Served {
    serve_with(db, args, |_| {})
}

/// [`serve`], with the command set up further before it starts (a resource limit, say).
pub fn serve_with(db: &Path, args: &[&str], configure: impl FnOnce(&mut Command)) -> Served {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("memstate"));
    command
        .env_remove("MEMSTATE_DB")
        .args(["--db"])
        .arg(db)
        .args(["serve", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    configure(&mut command);
    let mut child = command.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("memstate serve: ")
        .unwrap_or_else(|| panic!("no URL printed: {line:?}"))
        .to_string();
    let port = url
        .trim_start_matches("http://")
        .split(['/', '?'])
        .next()
        .and_then(|host| host.rsplit(':').next())
        .and_then(|port| port.parse().ok())
        .unwrap();
    Served { child, url, port }
}

/// An answer: status, headers (as text) and body.
pub struct Answer {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| panic!("{error}: {}", self.body))
    }
}

/// GET `path` with a Host header (the server's own unless given) and extra headers.
pub fn get_as(port: u16, path: &str, host: Option<&str>, extra: &[(&str, &str)]) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let host = host.map_or(format!("127.0.0.1:{port}"), str::to_string);
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in extra {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status: {headers}"));
    Answer {
        status,
        headers: headers.to_string(),
        body: body.to_string(),
    }
}

pub fn get(port: u16, path: &str) -> Answer {
    get_as(port, path, None, &[])
}

/// A simulated run that ends in an out-of-memory error (the demo's seed and shape).
pub fn run_db(dir: &Path) -> std::path::PathBuf {
    crate::common::simulated_db(
        dir,
        &memstate::sim::Config {
            seed: 1,
            ..Default::default()
        },
    )
}

pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[test]
fn the_api_answers_what_the_views_hold() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let served = serve(&db, &[]);
    let port = served.port;
    assert_eq!(served.url, format!("http://127.0.0.1:{port}/"));
    let page = get(port, "/");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<title>memstate</title>"));

    let overview = get(port, "/api/overview").json();
    let snapshots = overview["snapshots"]["rows"].as_array().unwrap();
    assert_eq!(
        snapshots.len() as i64,
        scalar::<i64>(&db, "SELECT count(*) FROM snapshots")
    );
    let failures = overview["failures"]["rows"].as_array().unwrap();
    let failed: i64 = scalar(&db, "SELECT count(*) FROM failed_requests");
    assert!(failed > 0, "the run ends in an out-of-memory error");
    assert_eq!(failures.len() as i64, failed);
    let marked: i64 = snapshots
        .iter()
        .map(|row| row["failed"].as_i64().unwrap())
        .sum();
    assert_eq!(marked, failed);
    // Since the last one: nothing new.
    let last = snapshots
        .iter()
        .map(|row| row["snapshot_id"].as_i64().unwrap())
        .max()
        .unwrap();
    let since = get(port, &format!("/api/overview?since={last}")).json();
    assert_eq!(since["snapshots"]["rows"].as_array().unwrap().len(), 0);

    // The failed snapshot's memories, a page at a time: those where a request failed first,
    // then the most fragmented.
    let failure = &failures[0];
    let (snapshot, memory) = (
        failure["snapshot_id"].as_i64().unwrap(),
        failure["memory_id"].as_i64().unwrap(),
    );
    let memories = get(port, &format!("/api/memories?snapshot={snapshot}&limit=2")).json();
    let total: i64 = scalar(
        &db,
        &format!("SELECT count(*) FROM memory_stats WHERE snapshot_id = {snapshot}"),
    );
    assert_eq!(memories["total"].as_i64().unwrap(), total);
    let rows = memories["table"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2.min(total as usize));
    let most: f64 = scalar(
        &db,
        &format!("SELECT max(ms.fragmentation) FROM memory_stats ms JOIN failed_requests f USING (snapshot_id, memory_id)
                  WHERE ms.snapshot_id = {snapshot}"),
    );
    assert_eq!(rows[0]["fragmentation"].as_f64().unwrap(), most);
    let first = rows[0]["memory_id"].as_i64().unwrap();
    let failed_there: i64 = scalar(
        &db,
        &format!("SELECT count(*) FROM failed_requests WHERE snapshot_id = {snapshot} AND memory_id = {first}"),
    );
    assert!(
        failed_there > 0,
        "the first memory listed is one where a request failed"
    );

    // The trend: one row per snapshot of the memory, used bytes as the view has them.
    let trend = get(port, &format!("/api/trend?memory={memory}")).json();
    let trend_rows = trend["rows"].as_array().unwrap();
    let count: i64 = scalar(
        &db,
        &format!("SELECT count(*) FROM memory_stats WHERE memory_id = {memory}"),
    );
    assert_eq!(trend_rows.len() as i64, count);
    let used: i64 = scalar(
        &db,
        &format!("SELECT used_bytes FROM memory_stats WHERE memory_id = {memory} AND snapshot_id = {snapshot}"),
    );
    let at_failure = trend_rows
        .iter()
        .find(|row| row["snapshot_id"].as_i64() == Some(snapshot))
        .unwrap();
    assert_eq!(at_failure["used_bytes"].as_i64().unwrap(), used);

    // The story, as `oom --format json` tells it.
    let stories = get(port, &format!("/api/stories?snapshot={snapshot}")).json();
    let told = crate::common::json_of(&db, &["oom", "--snapshot", &snapshot.to_string()]);
    assert_eq!(stories["rows"], told);

    // A canned query: what `report` answers.
    let holes = get(
        port,
        &format!("/api/query/largest-holes?snapshot_id={snapshot}&memory_id={memory}&top=3"),
    )
    .json();
    let reported = crate::common::json_of(
        &db,
        &[
            "report",
            "largest-holes",
            "-p",
            &format!("snapshot_id={snapshot}"),
            "-p",
            &format!("memory_id={memory}"),
            "-p",
            "top=3",
        ],
    );
    assert_eq!(holes["table"]["rows"], reported);
    assert_eq!(holes["table"]["units"][0], "offset");

    // SQL: the rows, at most the row limit, and whether there were more.
    let sql = get(
        port,
        &format!(
            "/api/sql?q={}",
            encode("SELECT snapshot_id FROM snapshots ORDER BY snapshot_id")
        ),
    )
    .json();
    assert_eq!(
        sql["table"]["rows"].as_array().unwrap().len(),
        snapshots.len()
    );
    assert_eq!(sql["more"], false);
}

/// The map window: each allocation and hole when few enough, else bins whose bytes add up to
/// what the views hold in the range.
#[test]
fn a_window_holds_what_lies_in_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let served = serve(&db, &[]);
    let (snapshot, memory): (i64, i64) = (
        scalar(&db, "SELECT snapshot_id FROM failed_requests LIMIT 1"),
        scalar(&db, "SELECT memory_id FROM failed_requests LIMIT 1"),
    );
    let count: i64 = scalar(
        &db,
        &format!("SELECT count(*) FROM allocations WHERE snapshot_id = {snapshot} AND memory_id = {memory}"),
    );
    let used: i64 = scalar(
        &db,
        &format!("SELECT sum(size) FROM allocations WHERE snapshot_id = {snapshot} AND memory_id = {memory}"),
    );
    let free: i64 = scalar(
        &db,
        &format!("SELECT free_bytes FROM memory_stats WHERE snapshot_id = {snapshot} AND memory_id = {memory}"),
    );
    // Few bins: summarized; every byte of every allocation and hole lands in some bin.
    let binned = get(
        served.port,
        &format!("/api/window?snapshot={snapshot}&memory={memory}&bins=8"),
    )
    .json();
    assert_eq!(binned["allocation_count"].as_i64().unwrap(), count);
    let bins = binned["bins"]["bytes"].as_array().unwrap();
    assert_eq!(bins.len(), 8);
    let sum = |slots: std::ops::Range<usize>| -> f64 {
        bins.iter()
            .map(|bin| {
                slots
                    .clone()
                    .map(|slot| bin[slot].as_f64().unwrap())
                    .sum::<f64>()
            })
            .sum()
    };
    assert!(
        (sum(0..4) - used as f64).abs() < 1.0,
        "{} vs {used}",
        sum(0..4)
    );
    assert!(
        (sum(4..5) - free as f64).abs() < 1.0,
        "{} vs {free}",
        sum(4..5)
    );
    // Zoomed in on one allocation: that allocation alone, whole.
    let (uid, offset, size): (String, i64, i64) = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row(
            &format!("SELECT uid, offset, size FROM allocations WHERE snapshot_id = {snapshot} AND memory_id = {memory} ORDER BY size DESC LIMIT 1"),
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap()
    };
    let inside = get(
        served.port,
        &format!(
            "/api/window?snapshot={snapshot}&memory={memory}&from={}&to={}&bins=100",
            offset + 1,
            offset + size - 1
        ),
    )
    .json();
    assert!(inside["bins"].is_null());
    // The same memory named by its handle on the snapshot's node, as a map page names it.
    let handle: String = scalar(
        &db,
        &format!("SELECT handle FROM memories WHERE memory_id = {memory}"),
    );
    let by_handle = get(
        served.port,
        &format!(
            "/api/window?snapshot={snapshot}&handle={handle}&from={}&to={}&bins=100",
            offset + 1,
            offset + size - 1
        ),
    )
    .json();
    assert_eq!(by_handle, inside);
    let unknown = get(
        served.port,
        &format!("/api/window?snapshot={snapshot}&handle=0x1234"),
    );
    assert_eq!(unknown.status, 404);
    // The memory's spans over the run: each, or only how many when past the limit.
    let spans_total: i64 = scalar(
        &db,
        &format!("SELECT count(*) FROM allocation_spans WHERE memory_id = {memory}"),
    );
    let all = get(
        served.port,
        &format!("/api/spans?snapshot={snapshot}&memory={memory}&limit=20000"),
    )
    .json();
    assert_eq!(all["total"].as_i64().unwrap(), spans_total);
    assert_eq!(all["spans"].as_array().unwrap().len() as i64, spans_total);
    let few = get(
        served.port,
        &format!("/api/spans?snapshot={snapshot}&handle={handle}&limit=1"),
    )
    .json();
    assert_eq!(few["total"].as_i64().unwrap(), spans_total);
    assert!(few["spans"].is_null());
    // Those crossing the one allocation's range: each of them crosses it.
    let band = get(
        served.port,
        &format!(
            "/api/spans?snapshot={snapshot}&memory={memory}&from={offset}&to={}",
            offset + size
        ),
    )
    .json();
    let crossing: i64 = scalar(
        &db,
        &format!("SELECT count(*) FROM allocation_spans WHERE memory_id = {memory} AND offset < {} AND offset + size > {offset}", offset + size),
    );
    assert_eq!(band["spans"].as_array().unwrap().len() as i64, crossing);
    assert!(band["spans"]
        .as_array()
        .unwrap()
        .iter()
        .any(|span| span["uid"] == uid.as_str()));
    // A time window: the spans whose drawn extent (first snapshot's time to the next snapshot's
    // after the last) meets [since, until), counted from the view by a second method.
    let (since, until): (f64, f64) = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row(
            &format!(
                "WITH t AS (SELECT s.time_s, row_number() OVER (ORDER BY s.seq) AS k
                            FROM snapshots s JOIN memories m ON m.run = s.run AND m.node = s.node
                            WHERE m.memory_id = {memory})
                 SELECT (SELECT time_s FROM t WHERE k = 3) + 1e-6, (SELECT time_s FROM t WHERE k = 6)"
            ),
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap()
    };
    let in_time: i64 = scalar(
        &db,
        &format!(
            "SELECT count(*) FROM allocation_spans s
             WHERE s.memory_id = {memory} AND s.first_time_ns / 1e9 < {until}
               AND coalesce((SELECT min(n.time_ns) FROM snapshots n
                             WHERE n.run = s.run AND n.node = s.node AND n.seq > s.last_seq) / 1e9,
                            1e300) > {since}"
        ),
    );
    let windowed = get(
        served.port,
        &format!("/api/spans?snapshot={snapshot}&memory={memory}&since={since}&until={until}&limit=20000"),
    )
    .json();
    assert_eq!(windowed["total"].as_i64().unwrap(), in_time);
    assert!(
        in_time > 0 && in_time < spans_total,
        "{in_time} of {spans_total}"
    );
    for span in windowed["spans"].as_array().unwrap() {
        let (from_s, to_s) = (
            span["from_s"].as_f64().unwrap(),
            span["to_s"].as_f64().unwrap(),
        );
        assert!(from_s < until && to_s > since, "{span}");
    }
    let backwards = get(
        served.port,
        &format!("/api/spans?snapshot={snapshot}&memory={memory}&since=5&until=1"),
    );
    assert_eq!(backwards.status, 400, "{}", backwards.body);
    let allocations = inside["allocations"].as_array().unwrap();
    assert_eq!(allocations.len(), 1);
    assert_eq!(allocations[0]["uid"], uid.as_str());
    assert_eq!(allocations[0]["size"].as_i64().unwrap(), size);
}

#[test]
fn bad_requests_are_refused_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let served = serve(&db, &["--time-limit", "1", "--row-limit", "7"]);
    let port = served.port;
    let status = |path: &str| get(port, path).status;
    // The limits the page says before anything is run are those the server was given.
    let limits = get(port, "/api/limits").json();
    assert_eq!(limits["time_limit_s"].as_f64(), Some(1.0), "{limits}");
    assert_eq!(limits["row_limit"].as_u64(), Some(7), "{limits}");
    let capped = get(
        port,
        &format!("/api/sql?q={}", encode("SELECT snapshot_id FROM snapshots")),
    )
    .json();
    assert_eq!(capped["table"]["rows"].as_array().unwrap().len(), 7);
    assert_eq!(capped["more"], true);
    assert_eq!(status("/no/such/page"), 404);
    assert_eq!(status("/api/spans?snapshot=1&memory=1&since=x"), 400);
    assert_eq!(status("/api/memories?snapshot=9999"), 404);
    assert_eq!(status("/api/memories?snapshot=a:b"), 400);
    assert_eq!(status("/api/memories"), 400);
    assert_eq!(status("/api/trend?memory=-1"), 400);
    assert_eq!(status("/api/trend?memory=99999"), 404);
    assert_eq!(status("/api/window?snapshot=1&memory=1&from=5&to=5"), 400);
    assert_eq!(status("/api/query/no-such-query"), 404);
    assert_eq!(
        status("/api/query/largest-holes?snapshot_id=1&nonsense=1"),
        400
    );
    // Another site's name for this address: refused (DNS rebinding).
    let rebound = get_as(
        port,
        "/api/overview",
        Some(&format!("evil.example:{port}")),
        &[],
    );
    assert_eq!(rebound.status, 403);
    assert!(rebound.body.contains("Host"), "{}", rebound.body);
    // The SQL box cannot write, and a statement without end is stopped at the limit.
    let write = get(
        port,
        &format!("/api/sql?q={}", encode("CREATE TABLE mine(x)")),
    );
    assert_eq!(write.status, 400, "{}", write.body);
    let wrote: i64 = scalar(
        &db,
        "SELECT count(*) FROM sqlite_master WHERE name = 'mine'",
    );
    assert_eq!(wrote, 0);
    // Nothing attached, no extension loaded.
    let attach = get(
        port,
        &format!(
            "/api/sql?q={}",
            encode("ATTACH DATABASE ':memory:' AS other")
        ),
    );
    // Refused as it is prepared: nothing changes what later requests see (issue 59).
    assert_eq!(attach.status, 403, "{}", attach.body);
    let extension = get(
        port,
        &format!(
            "/api/sql?q={}",
            encode("SELECT load_extension('/tmp/nothing')")
        ),
    );
    assert_eq!(extension.status, 400, "{}", extension.body);
    let started = Instant::now();
    let forever = get(
        port,
        &format!("/api/sql?q={}", encode("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")),
    );
    assert_eq!(forever.status, 408, "{}", forever.body);
    assert!(started.elapsed() < Duration::from_secs(30));
    // The server goes on answering after all of that.
    assert_eq!(status("/api/overview?since=0"), 200);
    let errors = get(port, "/api/memories?snapshot=9999").json();
    assert!(
        errors["error"].as_str().unwrap().contains("9999"),
        "{errors}"
    );
}

#[test]
fn a_token_is_needed_when_set_and_when_bound_beyond_this_machine() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let token = "k3y-of-this-test-0f9a";
    let served = serve(&db, &["--token", token]);
    let port = served.port;
    assert!(
        served.url.ends_with(&format!("/?token={token}")),
        "{}",
        served.url
    );
    assert_eq!(get(port, "/api/overview").status, 401);
    assert_eq!(get(port, "/api/overview?token=wrong").status, 401);
    let with_token = get(port, &format!("/?token={token}"));
    assert_eq!(with_token.status, 200);
    // The cookie is named for the port (cookies reach every port of a host).
    let cookie_name = format!("memstate_token_{port}");
    assert!(
        with_token
            .headers
            .contains(&format!("{cookie_name}={token}")),
        "{}",
        with_token.headers
    );
    let cookie = format!("{cookie_name}={token}");
    let cookie = get_as(port, "/api/overview", None, &[("Cookie", &cookie)]);
    assert_eq!(cookie.status, 200);
    let header = get_as(port, "/api/overview", None, &[("X-Memstate-Token", token)]);
    assert_eq!(header.status, 200);
    drop(served);
    // Bound to every address without a token: one is made and printed in the URL.
    let open = serve(&db, &["--bind", "0.0.0.0"]);
    let token = open.url.rsplit("token=").next().unwrap().to_string();
    assert_eq!(token.len(), 32, "{}", open.url);
    assert_eq!(get(open.port, "/api/overview").status, 401);
    assert_eq!(
        get(open.port, &format!("/api/overview?token={token}")).status,
        200
    );
}

/// While an import adds a snapshot, the overview shows it to the next poll.
#[test]
fn a_snapshot_imported_meanwhile_is_seen_within_two_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::common::write_json(dir.path(), "small.json", &crate::common::small());
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&path], 0);
    let served = serve(&db, &[]);
    let before = get(served.port, "/api/overview").json();
    let last = before["snapshots"]["rows"][0]["snapshot_id"]
        .as_i64()
        .unwrap();
    let next = crate::common::set(
        crate::common::small(),
        "/snapshot/seq",
        serde_json::json!(99),
    );
    let later = crate::common::write_json(dir.path(), "later.json", &next);
    crate::common::import(&db, &[&later], 0);
    let imported = Instant::now();
    loop {
        let news = get(served.port, &format!("/api/overview?since={last}")).json();
        if let Some(row) = news["snapshots"]["rows"]
            .as_array()
            .and_then(|rows| rows.first())
        {
            assert_eq!(row["seq"], 99);
            break;
        }
        assert!(
            imported.elapsed() < Duration::from_secs(2),
            "not seen in 2 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ctrl-C (SIGINT) and SIGTERM end the server at once, with status 0.
#[test]
fn a_signal_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::common::write_json(dir.path(), "small.json", &crate::common::small());
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&path], 0);
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let mut served = serve(&db, &[]);
        assert_eq!(get(served.port, "/api/overview").status, 200);
        // SAFETY: sends a signal to the child this test started.
        unsafe {
            libc::kill(served.child.id() as libc::pid_t, signal);
        }
        let asked = Instant::now();
        let status = loop {
            if let Some(status) = served.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                asked.elapsed() < Duration::from_secs(5),
                "still serving after signal {signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(0), "signal {signal}");
    }
}
