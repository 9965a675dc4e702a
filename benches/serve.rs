//! `memstate serve` at scale (issue 30): every endpoint's median and p99 latency next to its
//! target (100 ms), on
//! - (b) a long run: 1,000 dumps x 4 memories x 2,500 allocations (10 million allocation rows);
//! - (w) a wide node: one snapshot of 40,000 memories with 10 allocations each;
//!
//! plus the time from starting the server to its URL (target: under a second) and 8 clients
//! asking the API at once. The pages (the app, the map page `viz` renders) are timed too, against
//! the same target, though they are not API answers. Requests go over loopback from this process, as a browser's would.
//!
//! Knobs: `MEMSTATE_BENCH_SMALL=1` (a tenth of every size), `MEMSTATE_BENCH_REQUESTS` (per
//! endpoint, 50), `MEMSTATE_BENCH_KEEP=DIR` (keep the databases there, and reuse them when there:
//! for profiling one endpoint again without building 10 million rows again).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use common::steady::generate_steady;
use common::{median, report, BINARY};

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the server on `db`; how long it took to print its URL.
fn start(db: &Path) -> (Server, f64) {
    let started = Instant::now();
    let mut child = Command::new(BINARY)
        .args(["--db"])
        .arg(db)
        .args(["serve", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bench: start serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("bench: stdout"))
        .read_line(&mut line)
        .expect("bench: read URL");
    let seconds = started.elapsed().as_secs_f64();
    let port = line
        .trim()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("bench: no URL in {line:?}"));
    (Server { child, port }, seconds)
}

/// One GET: its status and size, the time it took.
fn get(port: u16, path: &str) -> (u16, usize, f64) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("bench: connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .expect("bench: send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("bench: read");
    let seconds = started.elapsed().as_secs_f64();
    let status = String::from_utf8_lossy(&answer[..answer.len().min(16)])
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, answer.len(), seconds)
}

fn percentile(mut values: Vec<f64>, share: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let index = ((values.len() as f64 * share).ceil() as usize).clamp(1, values.len()) - 1;
    values[index]
}

/// Ask `path` `requests` times; print its median and p99 against 100 ms.
fn endpoint(port: u16, label: &str, path: &str, requests: usize) {
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..requests {
        let (status, size, seconds) = get(port, path);
        assert_eq!(status, 200, "bench: {path} answered {status}");
        times.push(seconds);
        bytes = size;
    }
    let (middle, p99) = (median(times.clone()), percentile(times, 0.99));
    report(
        &format!("{label} ({} KiB)", bytes / 1024),
        &format!("median {:.1} ms, p99 {:.1} ms", middle * 1e3, p99 * 1e3),
        "<= 100 ms",
        Some(p99 <= 0.1),
    );
}

/// 8 clients at once, each asking every path in turn `rounds` times.
fn clients(port: u16, paths: &[String], rounds: usize) {
    let started = Instant::now();
    let handles: Vec<_> = (0..8)
        .map(|client| {
            let paths = paths.to_vec();
            std::thread::spawn(move || {
                let mut times = Vec::new();
                for round in 0..rounds {
                    for path in paths.iter().cycle().skip(client + round).take(paths.len()) {
                        let (status, _, seconds) = get(port, path);
                        assert_eq!(status, 200, "bench: {path}");
                        times.push(seconds);
                    }
                }
                times
            })
        })
        .collect();
    let times: Vec<f64> = handles
        .into_iter()
        .flat_map(|handle| handle.join().expect("bench: client"))
        .collect();
    let wall = started.elapsed().as_secs_f64();
    let count = times.len();
    report(
        "8 clients at once",
        &format!(
            "{count} requests in {wall:.2} s ({:.0}/s), median {:.1} ms, p99 {:.1} ms",
            count as f64 / wall,
            median(times.clone()) * 1e3,
            percentile(times.clone(), 0.99) * 1e3
        ),
        "p99 <= 100 ms",
        Some(percentile(times, 0.99) <= 0.1),
    );
}

fn import(db: &Path, folder: &Path) {
    let status = Command::new(BINARY)
        .args(["--db"])
        .arg(db)
        .args(["import", "--quiet"])
        .arg(folder)
        .stdout(Stdio::null())
        .status()
        .expect("bench: import");
    assert!(status.success(), "bench: import failed");
}

/// One snapshot of `memories` memories with 10 allocations each.
fn wide_dump(path: &Path, memories: usize) {
    let mut text = String::from(
        "{\"format\":\"memstate-dump\",\"version\":1,\"run\":{\"id\":\"wide\",\"node\":0},\"snapshot\":{\"seq\":0,\"time_ns\":0,\"reason\":\"periodic\"},\"memories\":[",
    );
    for memory in 0..memories {
        if memory > 0 {
            text.push(',');
        }
        text.push_str(&format!(
            "{{\"id\":\"0x{:016x}\",\"kind\":\"GPU_FB_MEM\",\"capacity\":1048576,\"allocations\":[",
            0x1e00_0000_0000_0000u64 + memory as u64
        ));
        for index in 0..10u64 {
            if index > 0 {
                text.push(',');
            }
            let uid = memory as u64 * 10 + index + 1;
            text.push_str(&format!(
                "{{\"uid\":\"0x{uid:x}\",\"kind\":\"instance\",\"state\":\"valid\",\"offset\":{},\"size\":{}}}",
                index * 65536 + (memory as u64 % 7) * 4096,
                16384 + index * 1024
            ));
        }
        text.push_str("]}");
    }
    text.push_str("]}\n");
    std::fs::write(path, text).expect("bench: write wide dump");
}

fn main() {
    let small = std::env::var("MEMSTATE_BENCH_SMALL").is_ok();
    let scale = |n: usize| if small { (n / 10).max(1) } else { n };
    let requests = std::env::var("MEMSTATE_BENCH_REQUESTS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(50usize);
    let temporary = tempfile::tempdir().expect("bench: temp dir");
    let kept = std::env::var_os("MEMSTATE_BENCH_KEEP").map(std::path::PathBuf::from);
    let work = kept.as_deref().unwrap_or(temporary.path());
    std::fs::create_dir_all(work).expect("bench: work dir");

    // (b) 1,000 snapshots, 10 million allocation rows.
    let folder = work.join("b");
    let dumps = scale(1000);
    let db = work.join("b.db");
    if kept.is_some() && db.exists() {
        println!("(b) long run: reusing {}", db.display());
    } else {
        let started = Instant::now();
        let rows = generate_steady(&folder, "long", dumps, 2500, 0.02);
        import(&db, &folder);
        std::fs::remove_dir_all(&folder).ok();
        println!(
            "(b) long run: {dumps} dumps x 4 memories, {rows} allocation rows (built in {:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }
    let (server, startup) = start(&db);
    report(
        "serve: start to URL",
        &format!("{startup:.3} s"),
        "< 1 s",
        Some(startup < 1.0),
    );
    let port = server.port;
    let middle = dumps as i64 / 2;
    let last = dumps as i64;
    let paths: Vec<(&str, String)> = vec![
        ("the app page", "/".to_string()),
        ("overview, every snapshot", "/api/overview".to_string()),
        ("overview since the last seen (the live poll)", format!("/api/overview?since={}", last - 1)),
        ("one snapshot's memories", format!("/api/memories?snapshot={middle}&limit=100")),
        ("one memory's trend (every snapshot)", "/api/trend?memory=2".to_string()),
        ("window, whole memory in 1,000 bins", format!("/api/window?snapshot={middle}&memory=2&bins=1000")),
        ("window, zoomed to 64 KiB", format!("/api/window?snapshot={middle}&memory=2&from=1048576&to=1114112&bins=1000")),
        ("history spans, zoomed to 64 KiB", format!("/api/spans?snapshot={middle}&memory=2&from=1048576&to=1114112")),
        ("history spans, 4 MiB over a tenth of the run", format!("/api/spans?snapshot={middle}&memory=2&from=0&to=4194304&since={}&until={}", dumps * 4 / 10, dumps / 2)),
        ("stories of a snapshot", format!("/api/stories?snapshot={middle}")),
        ("canned query largest-holes", format!("/api/query/largest-holes?snapshot_id={middle}&memory_id=2")),
        ("SQL box, one snapshot's count", format!("/api/sql?q=SELECT%20count(*)%20FROM%20allocations%20WHERE%20snapshot_id%20%3D%20{middle}")),
        ("map page of one memory", format!("/map?snapshot={middle}&memory=2")),
    ];
    for (label, path) in &paths {
        endpoint(port, &format!("(b) {label}"), path, requests);
    }
    let mix: Vec<String> = paths
        .iter()
        // The API a page asks while one is open: not the pages themselves.
        .filter(|(_, path)| path.starts_with("/api/") && !path.ends_with("/api/overview"))
        .map(|(_, path)| path.clone())
        .collect();
    clients(port, &mix, scale(10).max(2));
    drop(server);

    // (w) one node with 40,000 memories.
    let wide = work.join("wide.json");
    let memories = scale(40_000);
    let db = work.join("w.db");
    if !(kept.is_some() && db.exists()) {
        wide_dump(&wide, memories);
        import(&db, &wide);
    }
    println!("(w) wide node: {memories} memories x 10 allocations");
    let (server, startup) = start(&db);
    report(
        "(w) serve: start to URL",
        &format!("{startup:.3} s"),
        "< 1 s",
        Some(startup < 1.0),
    );
    for (label, path) in [
        ("overview", "/api/overview".to_string()),
        (
            "memories, first page of 100",
            "/api/memories?snapshot=1&limit=100".to_string(),
        ),
        (
            "memories, last page",
            format!(
                "/api/memories?snapshot=1&limit=100&offset={}",
                memories.saturating_sub(100)
            ),
        ),
        (
            "window of one memory",
            format!("/api/window?snapshot=1&memory={}&bins=1000", memories / 2),
        ),
        (
            "trend of one memory",
            format!("/api/trend?memory={}", memories / 2),
        ),
    ] {
        endpoint(server.port, &format!("(w) {label}"), &path, requests);
    }
}
