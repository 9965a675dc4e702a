//! Reading producers' outputs at the size people have them (issue 26, deliverable 6), each figure
//! next to its target. `cargo bench --bench sources` (a few minutes; `MEMSTATE_BENCH_SETS=log,
//! pickle` picks parts, `MEMSTATE_BENCH_LOG_MIB` and `MEMSTATE_BENCH_PICKLE_MIB` set the sizes).
//!
//! - log: a Legion log of 2 GiB (unrelated lines with Realm's prefix, one Legate 26.01 report near
//!   its end) imported: time (median of 3) at most 3 times `grep -c 'Failed to allocate'` over
//!   it, and peak memory under 100 MiB whatever the log's length.
//! - pickle: a PyTorch allocator snapshot of 512 MiB (segments of blocks with frames, a trace
//!   of alloc / free events that share their frames, as torch memoizes them) imported: peak memory
//!   against the target of twice its size plus 64 MiB; reading it (`validate`) against Python's
//!   own `pickle.load` of the file (issue 32: at most half its time); and whether the default
//!   limits take a 2 GiB one.
//!
//! - bounds (issue 27, item 5): inputs that grew memory far past their size, each imported with
//!   its peak memory against 4 times the input plus 64 MiB: a pickle of 50 MB of EMPTY_LIST
//!   opcodes; 5,000 blocks with 500 `oom` events (500 rebuilt snapshots); one 6,000-event trace
//!   referenced 6,000 times through the memo; 5M trace events; a Legate report of 1M instances;
//!   a Realm status of 1M ranges.
//!
//! - prof (issue 47): a Legion Prof profile of 1 GiB (`MEMSTATE_BENCH_PROF_MIB`) in Legate
//!   26.06's form (the header of tests/data/legion-prof/26.06/pressure, then task records with
//!   an instance record every hundred, each instance living while the next hundred are made)
//!   imported: time (median of 3) at most 3 times `wc -l` over it (reading it once), and peak
//!   memory under 100 MiB.
//!
//! The inputs are written here, as their producers write them, into a temporary folder.

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
    /// A string of any length (BINUNICODE), memoized.
    fn long_str(&mut self, text: &str) -> u32 {
        let mut bytes = vec![b'X'];
        bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
        bytes.extend_from_slice(text.as_bytes());
        self.op(&bytes);
        self.memoize()
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

fn pickler(path: &Path) -> Pickler<BufWriter<std::fs::File>> {
    let file = std::fs::File::create(path).expect("bench: create pickle");
    let mut pickler = Pickler {
        out: BufWriter::with_capacity(1 << 20, file),
        memo: Default::default(),
        next: 0,
    };
    pickler.op(&[0x80, 4]);
    pickler
}

fn finish(mut pickler: Pickler<BufWriter<std::fs::File>>) {
    pickler.op(b".");
    pickler.out.flush().expect("bench: write pickle");
}

/// One segment of `blocks` blocks of 4 KiB, all allocated, as a snapshot's `segments`.
fn segment_of_blocks(p: &mut Pickler<BufWriter<std::fs::File>>, blocks: u64) {
    p.str("segments");
    p.list(|p| {
        p.dict(|p| {
            for (key, value) in [
                ("device", 0),
                ("address", 0x7f00_0000_0000),
                ("total_size", blocks * 4096),
            ] {
                p.str(key);
                p.int(value);
            }
            p.str("blocks");
            p.list(|p| {
                for block in 0..blocks {
                    p.dict(|p| {
                        p.str("address");
                        p.int(0x7f00_0000_0000 + block * 4096);
                        p.str("size");
                        p.int(4096);
                        p.str("state");
                        p.str("active_allocated");
                    });
                }
            });
        });
    });
}

/// A pickle of `start`, then `bytes` of one opcode over and over.
fn one_opcode_over_and_over(
    dir: &Path,
    name: &str,
    start: &[u8],
    opcode: u8,
    bytes: usize,
) -> std::path::PathBuf {
    let path = dir.join(name);
    let mut p = pickler(&path);
    p.op(start);
    for _ in 0..bytes / 4096 {
        p.op(&[opcode; 4096]);
    }
    finish(p);
    path
}

/// The inputs of issue 27, item 5, each written to `dir`: (what, path).
fn bound_inputs(dir: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    let mut inputs = Vec::new();
    let path = one_opcode_over_and_over(dir, "empty-lists.pickle", b"", b']', 50_000_000);
    inputs.push(("pickle of 50 MB of EMPTY_LIST", path));

    let path = dir.join("ooms.pickle");
    let mut p = pickler(&path);
    p.dict(|p| {
        segment_of_blocks(p, 5000);
        p.str("device_traces");
        p.list(|p| {
            p.list(|p| {
                for event in 0..500u64 {
                    p.dict(|p| {
                        p.str("action");
                        p.str("oom");
                        p.str("size");
                        p.int(1 << 30);
                        p.str("device_free");
                        p.int(0);
                        p.str("time_us");
                        p.int(1_000 + event);
                    });
                }
            });
        });
    });
    finish(p);
    inputs.push(("5,000 blocks x 500 oom events", path));

    let path = dir.join("memo.pickle");
    let mut p = pickler(&path);
    p.dict(|p| {
        segment_of_blocks(p, 16);
        p.str("device_traces");
        p.list(|p| {
            let trace = p.list(|p| {
                for event in 0..6000u64 {
                    p.dict(|p| {
                        p.str("action");
                        p.str(if event % 2 == 0 {
                            "alloc"
                        } else {
                            "free_completed"
                        });
                        p.str("addr");
                        p.int(0x7f00_0000_0000 + (event % 16) * 4096);
                        p.str("size");
                        p.int(4096);
                        p.str("time_us");
                        p.int(event);
                    });
                }
            });
            for _ in 1..6000 {
                p.get(trace);
            }
        });
    });
    finish(p);
    inputs.push(("one 6,000-event trace referenced 6,000 times", path));

    let path = dir.join("events.pickle");
    write_pickle(&path, 5_000_000 * 60);
    inputs.push(("5M trace events", path));

    let path = dir.join("instances.log");
    let mut out = BufWriter::new(std::fs::File::create(&path).expect("bench: create log"));
    let prefix = "[0 - 7f00aa000700]    3.000300 {5}{legate.mapper}:";
    writeln!(out, "[0 - 7f00aa000000]    0.000287 {{4}}{{threads}}: reservation ('utility proc 1d00000000000000') cannot be satisfied").unwrap();
    writeln!(out, "[0 - 7f00aa000700]    3.000000 {{5}}{{legate.mapper}}: Failed to allocate 1,048,576 bytes on memory 1e00000000000003 (of kind GPU_FB_MEM) for region requirement(s) {{0}} of Task Foo[train.py:7] (UID 21)").unwrap();
    writeln!(out, "{prefix} There is not enough space because Legate is reserving 4,096,000,000 of the available 4,194,304,000 bytes for the following LogicalStores:").unwrap();
    writeln!(out, "{prefix} LogicalStore allocated at train.py:2:").unwrap();
    for instance in 0..1_000_000u64 {
        writeln!(
            out,
            "{prefix}   Instance 40000000{instance:08x} at address {:x} of size 4,096 covering elements <0>..<1023> ",
            0x7f00_0000_0000u64 + instance * 4096
        )
        .unwrap();
    }
    out.flush().unwrap();
    inputs.push(("Legate report of 1M instances", path));

    let path = dir.join("ranges.log");
    let mut out = BufWriter::new(std::fs::File::create(&path).expect("bench: create log"));
    writeln!(out, "[0 - 7f4400a1c000]    0.000211 {{4}}{{threads}}: reservation ('utility proc 1d00000000000000') cannot be satisfied").unwrap();
    let ranges = 1_000_000u64;
    for range in 1..=ranges {
        let (first, last) = ((range - 1) * 256, range * 256);
        if range % 2 == 1 {
            writeln!(out, "allocated_range_idx:{range} first:{first} last:{last} prev:{} next:{} prev_free:0 next_free:0 range_size:256 total:{last}", range - 1, range + 1).unwrap();
        } else {
            writeln!(
                out,
                "free_range_idx:{range} first:{first} last:{last} prev:{} next:{} size:256 gap:0",
                range - 1,
                range + 1
            )
            .unwrap();
        }
    }
    writeln!(out, "%%Stats%% total_size:{} total_used_size:{} largest_used_blocksize:256 total_free_size:{} large_free_blocksize:256 max_defrag_block:256", ranges * 256, ranges * 128, ranges * 128).unwrap();
    writeln!(out, "[0 - 7f4400a1c700]    5.000000 {{5}}{{default_mapper}}: Default mapper failed allocation of size 600 bytes for region  requirement 0 of task foo (UID 3) in memory 1e00000000000003 (GPU_FB_MEM) for processor 1d00000000000001 ").unwrap();
    out.flush().unwrap();
    inputs.push(("Realm status of 1M ranges", path));
    inputs.extend(issue_46_inputs(dir));
    inputs
}

/// The inputs of issue 46, items 1-4: small pickles that cost far more than their size.
fn issue_46_inputs(dir: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    let mut inputs = Vec::new();
    let path = dir.join("frames.pickle");
    let mut p = pickler(&path);
    p.dict(|p| {
        p.str("segments");
        p.list(|p| {
            p.dict(|p| {
                for (key, value) in [
                    ("device", 0),
                    ("address", 0x7f00_0000_0000),
                    ("total_size", 1 << 21),
                ] {
                    p.str(key);
                    p.int(value);
                }
                p.str("blocks");
                p.list(|p| {
                    p.dict(|p| {
                        for (key, value) in [("address", 0x7f00_0000_0000), ("size", 4096)] {
                            p.str(key);
                            p.int(value);
                        }
                        p.str("state");
                        p.str("active_allocated");
                        p.str("frames");
                        p.list(|p| {
                            p.op(b"}");
                            let frame = p.memoize();
                            p.op(b"(");
                            p.str("filename");
                            p.long_str(&format!("/{}", "n".repeat((1 << 20) - 1)));
                            p.str("line");
                            p.int(7);
                            p.op(b"u");
                            for _ in 0..20_000 {
                                p.get(frame);
                            }
                        });
                    });
                });
            });
        });
    });
    finish(p);
    inputs.push(("a 1 MiB file name referred to by 20,000 frames", path));

    let path = dir.join("keys.pickle");
    let mut p = pickler(&path);
    p.op(b"}");
    p.memoize();
    p.op(b"(");
    let key = p.long_str(&"k".repeat(1 << 20));
    p.op(b"N");
    for _ in 0..100_000 {
        p.get(key);
        p.op(b"N");
    }
    p.op(b"u");
    finish(p);
    inputs.push(("a dict of 100,000 keys, one memoized 1 MiB string", path));

    let path = one_opcode_over_and_over(dir, "marks.pickle", b"", b'(', 100_000_000);
    inputs.push(("100 MB of MARK", path));
    let path = one_opcode_over_and_over(dir, "dups.pickle", b"N", b'2', 50_000_000);
    inputs.push(("50 MB of DUP", path));

    let path = dir.join("one-oom.pickle");
    let mut p = pickler(&path);
    p.dict(|p| {
        segment_of_blocks(p, 1000);
        p.str("device_traces");
        p.list(|p| {
            p.list(|p| {
                let event = p.next;
                p.dict(|p| {
                    p.str("action");
                    p.str("oom");
                    p.str("size");
                    p.int(1 << 30);
                    p.str("time_us");
                    p.int(1_000);
                });
                for _ in 0..10_000 {
                    p.get(event);
                }
            });
        });
    });
    finish(p);
    inputs.push(("one oom event referred to 10,000 times, 1,000 blocks", path));
    inputs
}

/// A Legion Prof profile of about `bytes`: the real header, a machine, a memory, then TaskInfo
/// records (id 18, 80 bytes each after the id) with an InstTimelineInfo (id 22) every hundred.
fn write_profile(path: &Path, bytes: u64) -> u64 {
    let real = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/legion-prof/26.06/pressure/legate_0.prof"
    ))
    .expect("bench: the profile fixture");
    let end = real
        .windows(2)
        .position(|pair| pair == b"\n\n")
        .expect("bench: the fixture's header")
        + 2;
    let mut out = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(path).expect("bench: create profile"),
    );
    let mut put = |bytes: &[u8]| out.write_all(bytes).expect("bench: write profile");
    put(&real[..end]);
    // MachineDesc {id:10, node_id, num_nodes, hostname, host_id, process_id}
    put(&10u32.to_le_bytes());
    put(&0u32.to_le_bytes());
    put(&1u32.to_le_bytes());
    put(b"bench\0");
    put(&7u64.to_le_bytes());
    put(&1u32.to_le_bytes());
    // MemDesc {id:7, mem_id, kind 2 (SYSTEM_MEM), capacity 64 GiB}
    put(&7u32.to_le_bytes());
    put(&0x1e00_0000_0000_0000u64.to_le_bytes());
    put(&2u32.to_le_bytes());
    put(&(64u64 << 30).to_le_bytes());
    let mut written = end as u64 + 50;
    let (mut record, mut instances) = (0u64, 0u64);
    while written < bytes {
        record += 1;
        if record % 100 == 0 {
            instances += 1;
            let time = record * 1000;
            put(&22u32.to_le_bytes());
            for value in [
                instances,
                0x4000_0000_0000_0000 | instances,
                0x1e00_0000_0000_0000,
                4096 * (1 + instances % 16),
                record,
                time,
                time + 10,
                time + 100_000,
                0,
            ] {
                put(&value.to_le_bytes());
            }
            written += 76;
        } else {
            put(&18u32.to_le_bytes());
            put(&record.to_le_bytes());
            put(&7u32.to_le_bytes());
            put(&1u32.to_le_bytes());
            for value in [
                0x1d00_0000_0000_0002u64,
                record,
                record,
                record,
                record,
                0,
                0,
                record,
            ] {
                put(&value.to_le_bytes());
            }
            written += 84;
        }
    }
    out.flush().expect("bench: write profile");
    instances
}

/// The figures of an input read as a stream: the time of a tool that reads it once, the import's
/// time against at most 3 times that, and its peak memory against 100 MiB.
fn report_streamed(tool: &str, baseline: f64, import: f64, peak: f64) {
    report(
        &format!("{tool} (median of 3)"),
        &format!("{baseline:.2} s"),
        "",
        None,
    );
    report("import (median of 3)", &format!("{import:.2} s"), "", None);
    let ratio = import / baseline;
    report(
        &format!("import / {}", tool.split(' ').next().unwrap_or(tool)),
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
}

/// Import `input` three times, each into a new database: the median time and the peak memory.
fn import_three_times(dir: &Path, input: &Path, timeout: Duration) -> (f64, f64) {
    let mut times = Vec::new();
    let mut peak: f64 = 0.0;
    for round in 0..3 {
        let db = dir.join(format!("three-{round}.db"));
        let _ = std::fs::remove_file(&db);
        let ran = run_binary_quietly(
            &[
                "--db".into(),
                db.display().to_string(),
                "import".into(),
                "--quiet".into(),
                // A profile of 1 GiB is past the default limit for one input (1 GiB).
                "--max-dump-size".into(),
                "8589934592".into(),
                input.display().to_string(),
            ],
            timeout,
        );
        assert!(ran.ok, "bench: importing {} failed", input.display());
        times.push(ran.seconds);
        peak = peak.max(ran.peak_mib);
    }
    (median(times), peak)
}

fn wc_seconds(path: &Path) -> f64 {
    let started = Instant::now();
    let output = Command::new("wc")
        .arg("-l")
        .arg(path)
        .output()
        .expect("bench: run wc");
    assert!(output.status.success(), "bench: wc failed");
    started.elapsed().as_secs_f64()
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
        let (import, peak) = import_three_times(dir.path(), &log, timeout);
        report_streamed("grep -c 'Failed to allocate'", grep, import, peak);
        let _ = std::fs::remove_file(&log);
    }
    if wanted("prof") {
        let mib = size_mib("MEMSTATE_BENCH_PROF_MIB", 1024);
        let profile = dir.path().join("legate_0.prof");
        let instances = write_profile(&profile, mib * MIB);
        println!("prof: {mib} MiB Legion Prof profile, {instances} instances");
        let wc = median((0..3).map(|_| wc_seconds(&profile)).collect());
        let (import, peak) = import_three_times(dir.path(), &profile, timeout);
        report_streamed("wc -l", wc, import, peak);
        let _ = std::fs::remove_file(&profile);
    }
    if wanted("bounds") {
        println!("bounds: peak memory of each source against 4x its input + 64 MiB");
        for (what, path) in bound_inputs(dir.path()) {
            let size_mib =
                std::fs::metadata(&path).map(|meta| meta.len()).unwrap_or(0) as f64 / MIB as f64;
            let db = dir.path().join("bounds.db");
            let _ = std::fs::remove_file(&db);
            let ran = run_binary_quietly(
                &[
                    "--db".into(),
                    db.display().to_string(),
                    "import".into(),
                    "--quiet".into(),
                    path.display().to_string(),
                ],
                timeout,
            );
            let target = 4.0 * size_mib + 64.0;
            report(
                &format!(
                    "{what} ({size_mib:.1} MiB, {}, {:.1} s)",
                    if ran.ok { "read" } else { "refused" },
                    ran.seconds
                ),
                &format!("{:.0} MiB", ran.peak_mib),
                &format!("<= {target:.0} MiB"),
                Some(ran.peak_mib <= target),
            );
            let _ = std::fs::remove_file(&path);
        }
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
        // Issue 32: reading the pickle (validate: read and checked, no database) and importing
        // it, against Python's own `pickle.load` of the same file (the interpreter's start
        // included, as memstate's is).
        let read = run_binary_quietly(&["validate".into(), pickle.display().to_string()], timeout);
        assert!(read.ok, "bench: validate of the pickle failed");
        let started = std::time::Instant::now();
        let loaded = std::process::Command::new("python3")
            .args([
                "-c",
                "import pickle, sys\nwith open(sys.argv[1], 'rb') as f: pickle.load(f)",
            ])
            .arg(&pickle)
            .status();
        let python = started.elapsed().as_secs_f64();
        if loaded.is_ok_and(|status| status.success()) {
            report(
                "reading (validate) / Python's pickle.load",
                &format!(
                    "{:.2} ({:.2} s / {python:.2} s)",
                    read.seconds / python,
                    read.seconds
                ),
                "<= 0.5",
                Some(read.seconds <= 0.5 * python),
            );
            report(
                "import / Python's pickle.load",
                &format!("{:.2}", ran.seconds / python),
                "(reported)",
                None,
            );
        } else {
            println!("  (pickle.load not measured: python3 did not load the file)");
        }
        let limit = memstate::import::input::DEFAULT_MAX_PICKLE_SIZE;
        report(
            "default --max-pickle-size",
            &format!("{} MiB", limit / MIB),
            ">= 2048 MiB",
            Some(limit >= 2048 * MIB),
        );
    }
}
