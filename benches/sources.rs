//! Reading producers' outputs at the size people have them (issue 26, deliverable 6), each figure
//! next to its target. `cargo bench --bench sources` (a few minutes; `MEMSTATE_BENCH_SETS=log,
//! pickle` picks parts, `MEMSTATE_BENCH_LOG_MIB` and `MEMSTATE_BENCH_PICKLE_MIB` set the sizes).
//!
//! - log: a Legion log of 2 GiB (unrelated lines with Realm's prefix, one Legate 26.01 report near
//!   its end) imported: time (median of 3) at most 3 times `grep -c 'Failed to allocate'` over
//!   it, and peak memory under 100 MiB whatever the log's length.
//! - pickle: a PyTorch allocator snapshot of 512 MiB (segments of blocks with frames, a trace
//!   of alloc / free events that share their frames, as torch memoizes them) imported: peak memory
//!   against the target of twice its size plus 64 MiB; and whether the default limits take a
//!   2 GiB one.
//!
//! Both inputs are written here, as their producers write them, into a temporary folder.

mod common;

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{median, report, run_binary_quietly};

fn wanted(part: &str) -> bool {
    match std::env::var("MEMSTATE_BENCH_SETS") {
        Ok(sets) if !sets.is_empty() => sets.split(',').any(|set| set == part),
        _ => true,
    }
}

fn size_mib(variable: &str, default: u64) -> u64 {
    std::env::var(variable)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

const MIB: u64 = 1 << 20;

/// The report of tests/data/sources/legate-26.01.log, as legate 26.01 prints it.
const REPORT: &str = include_str!("../tests/data/sources/legate-26.01.log");

/// A log of about `bytes`: Realm-prefixed lines of several loggers, the report at 95 %.
fn write_log(path: &Path, bytes: u64) {
    let mut out = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(path).expect("bench: create log"),
    );
    let mut written = 0u64;
    let mut reported = false;
    let mut line = 0u64;
    while written < bytes {
        if !reported && written >= bytes / 20 * 19 {
            out.write_all(REPORT.as_bytes()).expect("bench: write log");
            written += REPORT.len() as u64;
            reported = true;
        }
        let seconds = line as f64 * 1e-5;
        let text = match line % 4 {
            0 => format!("[0 - 7f5dd0a3b780] {seconds:>12.6} {{3}}{{legion}}: task 0x{line:x} mapped onto processor 1d00000000000003 (variant 7)\n"),
            1 => format!("[0 - 7f5dd0a3c8c0] {seconds:>12.6} {{2}}{{legate.mapper}}: mapping store {line} of task cupynumeric::MatMul to memory 1e00000000000002\n"),
            2 => format!("[0 - 7f5dd0a3b780] {seconds:>12.6} {{4}}{{realm}}: instance 4000000000{line:06x} created in memory 1e00000000000002 of size {}\n", line % 65536 * 512),
            _ => format!("iteration {line}: loss = {:.6}\n", 1.0 / (line as f64 + 1.0)),
        };
        out.write_all(text.as_bytes()).expect("bench: write log");
        written += text.len() as u64;
        line += 1;
    }
    out.flush().expect("bench: write log");
}

/// A pickle writer for the few opcodes a snapshot needs (protocol 4), memoizing strings and the
/// frame lists as Python's pickler does.
struct Pickler<W: Write> {
    out: W,
    memo: std::collections::HashMap<String, u32>,
    next: u32,
}

impl<W: Write> Pickler<W> {
    fn op(&mut self, bytes: &[u8]) {
        self.out.write_all(bytes).expect("bench: write pickle");
    }
    fn memoize(&mut self) -> u32 {
        self.op(&[0x94]);
        self.next += 1;
        self.next - 1
    }
    fn get(&mut self, index: u32) {
        if index < 256 {
            self.op(&[b'h', index as u8]);
        } else {
            let mut bytes = vec![b'j'];
            bytes.extend_from_slice(&index.to_le_bytes());
            self.op(&bytes);
        }
    }
    fn str(&mut self, text: &str) {
        if let Some(&index) = self.memo.get(text) {
            return self.get(index);
        }
        let mut bytes = vec![0x8c, text.len() as u8];
        bytes.extend_from_slice(text.as_bytes());
        self.op(&bytes);
        let index = self.memoize();
        self.memo.insert(text.to_string(), index);
    }
    fn int(&mut self, value: u64) {
        if value < 1 << 31 {
            let mut bytes = vec![b'J'];
            bytes.extend_from_slice(&(value as i32).to_le_bytes());
            self.op(&bytes);
        } else {
            // LONG1: little-endian two's complement, 8 bytes and a sign byte.
            let mut bytes = vec![0x8a, 9];
            bytes.extend_from_slice(&value.to_le_bytes());
            bytes.push(0);
            self.op(&bytes);
        }
    }
    /// `{key: value, ...}` with the values written by `items`.
    fn dict(&mut self, items: impl FnOnce(&mut Self)) {
        self.op(b"}");
        self.memoize();
        self.op(b"(");
        items(self);
        self.op(b"u");
    }
    fn list(&mut self, items: impl FnOnce(&mut Self)) -> u32 {
        self.op(b"]");
        let index = self.memoize();
        self.op(b"(");
        items(self);
        self.op(b"e");
        index
    }
}

/// A snapshot of about `bytes`: 64 segments of 64 MiB (device 0), each with its blocks, and a
/// trace filling the rest, its events sharing 1,000 frame lists.
fn write_pickle(path: &Path, bytes: u64) -> u64 {
    let file = std::fs::File::create(path).expect("bench: create pickle");
    let mut pickler = Pickler {
        out: BufWriter::with_capacity(1 << 20, file),
        memo: Default::default(),
        next: 0,
    };
    const BASE: u64 = 0x7f00_0000_0000;
    const SEGMENT: u64 = 64 * MIB;
    const BLOCK: u64 = 2 * MIB;
    pickler.op(&[0x80, 4]);
    let mut frames: Vec<u32> = Vec::new();
    // Each trace event pickles to about 60 bytes.
    let events = bytes / 60;
    pickler.dict(|p| {
        p.str("segments");
        p.list(|p| {
            for segment in 0..64u64 {
                let address = BASE + segment * SEGMENT;
                p.dict(|p| {
                    for (key, value) in [
                        ("device", 0),
                        ("address", address),
                        ("total_size", SEGMENT),
                        ("stream", 0),
                    ] {
                        p.str(key);
                        p.int(value);
                    }
                    p.str("segment_type");
                    p.str("large");
                    p.str("blocks");
                    p.list(|p| {
                        for block in 0..SEGMENT / BLOCK {
                            p.dict(|p| {
                                p.str("address");
                                p.int(address + block * BLOCK);
                                p.str("size");
                                p.int(BLOCK);
                                p.str("state");
                                p.str(if block % 3 == 0 {
                                    "inactive"
                                } else {
                                    "active_allocated"
                                });
                            });
                        }
                    });
                });
            }
        });
        p.str("device_traces");
        p.list(|p| {
            p.list(|p| {
                for event in 0..events {
                    let segment = event % 64;
                    let block = (event / 64) % (SEGMENT / BLOCK);
                    p.dict(|p| {
                        p.str("action");
                        p.str(if event % 2 == 0 {
                            "alloc"
                        } else {
                            "free_completed"
                        });
                        p.str("addr");
                        p.int(BASE + segment * SEGMENT + block * BLOCK);
                        p.str("size");
                        p.int(BLOCK - 512 * (event % 7));
                        p.str("stream");
                        p.int(0);
                        p.str("time_us");
                        p.int(1_700_000_000_000_000 + event);
                        p.str("frames");
                        let which = (event % 1000) as usize;
                        if which < frames.len() {
                            p.get(frames[which]);
                        } else {
                            let index = p.list(|p| {
                                p.dict(|p| {
                                    p.str("filename");
                                    p.str(&format!("model_{which}.py"));
                                    p.str("name");
                                    p.str("forward");
                                    p.str("line");
                                    p.int(event % 500);
                                });
                            });
                            frames.push(index);
                        }
                    });
                }
            });
        });
    });
    pickler.op(b".");
    pickler.out.flush().expect("bench: write pickle");
    std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
}

fn grep_seconds(path: &Path) -> f64 {
    let started = Instant::now();
    let output = Command::new("grep")
        .args(["-c", "Failed to allocate"])
        .arg(path)
        .output()
        .expect("bench: run grep");
    assert!(output.status.success(), "bench: grep found no report");
    started.elapsed().as_secs_f64()
}

fn main() {
    let dir = tempfile::tempdir().expect("bench: temporary folder");
    let timeout = Duration::from_secs(1800);
    if wanted("log") {
        let mib = size_mib("MEMSTATE_BENCH_LOG_MIB", 2048);
        let log = dir.path().join("job.log");
        write_log(&log, mib * MIB);
        println!("log: {mib} MiB, one Legate 26.01 report at 95 %");
        let grep = median((0..3).map(|_| grep_seconds(&log)).collect());
        let mut times = Vec::new();
        let mut peak: f64 = 0.0;
        for round in 0..3 {
            let db = dir.path().join(format!("log-{round}.db"));
            let ran = run_binary_quietly(
                &[
                    "--db".into(),
                    db.display().to_string(),
                    "import".into(),
                    "--quiet".into(),
                    log.display().to_string(),
                ],
                timeout,
            );
            assert!(ran.ok, "bench: the log import failed");
            times.push(ran.seconds);
            peak = peak.max(ran.peak_mib);
        }
        let import = median(times);
        report(
            "grep -c 'Failed to allocate' (median of 3)",
            &format!("{grep:.2} s"),
            "",
            None,
        );
        report("import (median of 3)", &format!("{import:.2} s"), "", None);
        let ratio = import / grep;
        report(
            "import / grep",
            &format!("{ratio:.2}x"),
            "<= 3x",
            Some(ratio <= 3.0),
        );
        report(
            "import peak memory",
            &format!("{peak:.0} MiB"),
            "< 100 MiB",
            Some(peak < 100.0),
        );
        let _ = std::fs::remove_file(&log);
    }
    if wanted("pickle") {
        let mib = size_mib("MEMSTATE_BENCH_PICKLE_MIB", 512);
        let pickle = dir.path().join("snapshot.pickle");
        let size = write_pickle(&pickle, mib * MIB);
        let size_mib = size as f64 / MIB as f64;
        println!("pickle: {size_mib:.0} MiB, 64 segments, a trace of alloc and free events");
        let db = dir.path().join("pickle.db");
        let ran = run_binary_quietly(
            &[
                "--db".into(),
                db.display().to_string(),
                "import".into(),
                "--quiet".into(),
                pickle.display().to_string(),
            ],
            timeout,
        );
        assert!(ran.ok, "bench: the pickle import failed");
        let target = 2.0 * size_mib + 64.0;
        report("import", &format!("{:.2} s", ran.seconds), "", None);
        report(
            "import peak memory",
            &format!("{:.0} MiB ({:.1}x)", ran.peak_mib, ran.peak_mib / size_mib),
            &format!("<= {target:.0} MiB"),
            Some(ran.peak_mib <= target),
        );
        let limit = memstate::dump::read::DEFAULT_MAX_PICKLE_SIZE;
        report(
            "default --max-pickle-size",
            &format!("{} MiB", limit / MIB),
            ">= 2048 MiB",
            Some(limit >= 2048 * MIB),
        );
    }
}
