//! Cluster-shape benchmark (issue 20): a run of 1,000 nodes x 10 dumps x 2 memories x 500
//! allocations (10 million allocation rows), shard-imported with `--jobs 1` and `--jobs 2` (the
//! speed-up printed), exported to Parquet (the dataset's bytes against the SQLite files'), and
//! churn, growth and one per-snapshot query timed on DuckDB over the dataset with
//! scripts/parquet-query (skipped, and said, when python3 cannot import duckdb).
//!
//! `cargo bench --bench cluster` (about ten minutes on two cores); `MEMSTATE_CLUSTER_NODES=100`
//! runs a tenth of it.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{median, report, run_binary_quietly};

const DUMPS_PER_NODE: u64 = 10;
const MEMORIES: u64 = 2;
const ALLOCATIONS: u64 = 500;
const RUN: &str = "cluster-bench";

/// A small deterministic generator (xorshift64*), so every run of the benchmark sees the same dumps.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// One node's dumps as one zstd-compressed stream: every dump keeps 90% of the allocations of
/// the one before and replaces the rest (new uids, other sizes), so spans and churn are real.
fn write_node(folder: &Path, node: u64, nodes: u64) -> u64 {
    let path = folder.join(format!("{RUN}-node{node}.ndjson.zst"));
    let file = std::fs::File::create(&path).expect("bench: create stream");
    let mut out = zstd::stream::write::Encoder::new(file, 1)
        .expect("bench: zstd")
        .auto_finish();
    let mut random = Random(0x9e37_79b9_7f4a_7c15 ^ (node + 1));
    let mut next_uid = node << 32;
    // Per memory: slots of (uid, size, provenance); offsets follow from the sizes in order.
    let mut slots: Vec<Vec<(u64, u64, u64)>> = (0..MEMORIES)
        .map(|_| {
            (0..ALLOCATIONS)
                .map(|_| {
                    next_uid += 1;
                    (next_uid, (1 + random.below(16)) << 20, random.below(40))
                })
                .collect()
        })
        .collect();
    let mut rows = 0;
    for seq in 0..DUMPS_PER_NODE {
        if seq > 0 {
            for memory in slots.iter_mut() {
                for slot in memory.iter_mut() {
                    if random.below(10) == 0 {
                        next_uid += 1;
                        *slot = (next_uid, (1 + random.below(16)) << 20, random.below(40));
                    }
                }
            }
        }
        let time_ns = seq * 5_000_000_000 + node * 1000;
        write!(
            out,
            r#"{{"format":"memstate-dump","version":1,"run":{{"id":"{RUN}","node":{node},"node_count":{nodes}}},"snapshot":{{"seq":{seq},"time_ns":{time_ns},"wall_time":"2026-12-01T08:00:{:02}Z","reason":"periodic"}},"memories":["#,
            seq * 5
        )
        .unwrap();
        for (index, memory) in slots.iter().enumerate() {
            if index > 0 {
                out.write_all(b",").unwrap();
            }
            write!(
                out,
                r#"{{"id":"0x1e{node:06x}{index:08x}","kind":"GPU_FB_MEM","capacity":{},"allocations":["#,
                16u64 << 30
            )
            .unwrap();
            let mut offset = 0;
            for (number, (uid, size, provenance)) in memory.iter().enumerate() {
                if number > 0 {
                    out.write_all(b",").unwrap();
                }
                let state = if uid % 7 == 0 { "collectable" } else { "valid" };
                write!(
                    out,
                    r#"{{"uid":{uid},"kind":"instance","state":"{state}","offset":{offset},"size":{size},"provenance":"train.py:{provenance}"}}"#
                )
                .unwrap();
                offset += size + (1 << 20);
                rows += 1;
            }
            out.write_all(b"]}").unwrap();
        }
        out.write_all(b"]}\n").unwrap();
    }
    rows
}

/// Run the binary once, which must succeed; its time and peak memory printed as a reference.
fn timed(name: &str, args: &[&str]) -> f64 {
    timed_within(name, args, None)
}

/// [`timed`], its peak memory held to at most `most_mib` when given.
fn timed_within(name: &str, args: &[&str], most_mib: Option<f64>) -> f64 {
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    let ran = run_binary_quietly(&args, Duration::from_secs(3600));
    assert!(ran.ok, "bench: {name}");
    let target = most_mib.map_or_else(
        || "(reference)".to_string(),
        |most| format!("<= {most:.0} MiB"),
    );
    report(
        name,
        &format!("{:.1} s, {:.0} MiB", ran.seconds, ran.peak_mib),
        &target,
        most_mib.map(|most| ran.peak_mib <= most),
    );
    ran.seconds
}

/// The plain import's memory, with room: 386 MiB at 5050b1e, most of it the open spans the
/// writer keeps for each of the 1,000 nodes between their dumps. Building the span indexes at
/// the end must not add to it: sorted in memory, their entries took it to 752 MiB.
const PLAIN_IMPORT_MIB: f64 = 448.0;

fn folder_bytes(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).expect("bench: read folder") {
            let entry = entry.expect("bench: entry");
            let meta = entry.metadata().expect("bench: metadata");
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let nodes: u64 = std::env::var("MEMSTATE_CLUSTER_NODES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1000);
    let dir = tempfile::tempdir().expect("bench: temp dir");
    let dumps = dir.path().join("dumps");
    std::fs::create_dir_all(&dumps).expect("bench: dumps folder");
    let started = Instant::now();
    let rows: u64 = (0..nodes).map(|node| write_node(&dumps, node, nodes)).sum();
    println!(
        "cluster: {nodes} nodes x {DUMPS_PER_NODE} dumps x {MEMORIES} memories x {ALLOCATIONS} allocations = {rows} allocation rows ({:.0} MiB of zstd streams, written in {:.1} s)",
        mib(folder_bytes(&dumps)),
        started.elapsed().as_secs_f64()
    );

    let plain_db = dir.path().join("plain.db");
    let dumps_arg = dumps.display().to_string();
    timed_within(
        "plain import into one database",
        &[
            "--db",
            &plain_db.display().to_string(),
            "import",
            "--quiet",
            &dumps_arg,
        ],
        Some(PLAIN_IMPORT_MIB),
    );
    let _ = std::fs::remove_file(&plain_db);

    let mut times = Vec::new();
    let mut shard_dir = PathBuf::new();
    for jobs in ["1", "2"] {
        shard_dir = dir.path().join(format!("shards-{jobs}"));
        let shards_arg = shard_dir.display().to_string();
        times.push(timed(
            &format!("shard import --jobs {jobs}"),
            &[
                "import",
                "--quiet",
                "--jobs",
                jobs,
                "--shard-dir",
                &shards_arg,
                &dumps_arg,
            ],
        ));
    }
    report(
        "shard import speed-up, --jobs 2 over --jobs 1",
        &format!("{:.2}x", times[0] / times[1]),
        "> 1x",
        Some(times[0] > times[1]),
    );

    let databases: Vec<String> = std::fs::read_dir(&shard_dir)
        .expect("bench: shards")
        .map(|entry| entry.expect("bench: shard").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "db"))
        .map(|path| path.display().to_string())
        .collect();
    let sqlite_bytes: u64 = databases
        .iter()
        .map(|path| std::fs::metadata(path).map_or(0, |meta| meta.len()))
        .sum();
    let data = dir.path().join("dataset");
    let data_arg = data.display().to_string();
    let mut args = vec!["export", "--quiet", "--out", &data_arg];
    args.extend(databases.iter().map(String::as_str));
    timed("export of every shard", &args);
    let dataset_bytes = folder_bytes(&data);
    report(
        "dataset bytes / SQLite shards' bytes",
        &format!(
            "{:.0} / {:.0} MiB = {:.2}",
            mib(dataset_bytes),
            mib(sqlite_bytes),
            dataset_bytes as f64 / sqlite_bytes as f64
        ),
        "< 1",
        Some(dataset_bytes < sqlite_bytes),
    );

    duckdb_queries(&data, nodes);
}

/// churn, growth and usage-by-kind of one snapshot on DuckDB, through the runner (median of 3,
/// each a fresh process: Python, DuckDB and the views' registration included).
fn duckdb_queries(data: &Path, nodes: u64) {
    let has_duckdb = Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_duckdb {
        println!("  DuckDB queries skipped: python3 cannot import duckdb (pip install duckdb)");
        return;
    }
    let runner = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/parquet-query");
    let snapshot = format!("snapshot_id={RUN}:{}:5", nodes / 2);
    for (name, params) in [
        ("churn", vec![]),
        ("growth", vec!["top=20"]),
        ("usage-by-kind", vec![snapshot.as_str()]),
    ] {
        let mut seconds = Vec::new();
        let mut rows = 0;
        for _ in 0..3 {
            let started = Instant::now();
            let mut command = Command::new("python3");
            command
                .arg(&runner)
                .args(["--engine", "duckdb", "--format", "csv", "--data"])
                .arg(data)
                .arg(name);
            for param in &params {
                command.args(["-p", param]);
            }
            let output = command.output().expect("bench: parquet-query");
            assert!(
                output.status.success(),
                "bench: {name}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            seconds.push(started.elapsed().as_secs_f64());
            rows = output.stdout.iter().filter(|byte| **byte == b'\n').count() - 1;
        }
        let time = median(seconds);
        report(
            &format!("DuckDB {name} ({rows} rows)"),
            &format!("{time:.2} s"),
            "< 10 s",
            Some(time < 10.0),
        );
    }
}
