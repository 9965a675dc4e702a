//! Import benchmark: generates a run of dumps, imports it with memstate (validation, holes,
//! figures, indexes), and imports the same files with a naive baseline (serde into structs, one
//! prepared INSERT per allocation, no validation, no holes, no indexes), then prints allocations per
//! second, database bytes per allocation, peak resident memory and the ratio of the two times.
//!
//! `cargo bench --bench import` runs the size: 50 dumps of 4 memories with 15,000
//! allocations each (3,000,000 allocations). Smaller: `MEMSTATE_BENCH_DUMPS=10
//! MEMSTATE_BENCH_ALLOCS=2000 cargo bench --bench import`. `MEMSTATE_BENCH_REPEAT` (default 3)
//! sets how many times each side runs; medians are printed.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::{params, Connection};
use serde::Deserialize;

// The memstate binary runs on mimalloc; so does this benchmark (both sides, in the same process).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

const KINDS: [&str; 5] = ["instance", "deferred_buffer", "future", "instance", "instance"];
const STATES: [&str; 4] = ["valid", "valid", "collectable", "pending_free"];

/// Write `dumps` dumps of 4 memories with `allocations` allocations each into `folder`.
fn generate(folder: &Path, dumps: usize, allocations: usize) -> u64 {
    // The simulator's SplitMix64 generator: every run benchmarks the same bytes.
    let mut random = memstate::sim::workload::Random::new(42);
    let mut total = 0;
    let mut uid = 1u64;
    for seq in 0..dumps {
        let mut text = String::with_capacity(allocations * 4 * 200);
        text.push_str(&format!(
            "{{\"format\":\"memstate-dump\",\"version\":1,\"run\":{{\"id\":\"bench\",\"node\":0}},\"snapshot\":{{\"seq\":{seq},\"time_ns\":{},\"reason\":\"periodic\"}},\"memories\":[",
            seq as u64 * 1_000_000
        ));
        for memory in 0..4 {
            if memory > 0 {
                text.push(',');
            }
            text.push_str(&format!(
                "{{\"id\":\"0x1e0000000000000{memory}\",\"kind\":\"GPU_FB_MEM\",\"name\":\"GPU {memory} framebuffer\",\"capacity\":{},\"allocations\":[",
                1u64 << 40
            ));
            let mut offset = 0u64;
            for index in 0..allocations {
                let size = 256 * (1 + random.below(64));
                offset += 256 * random.below(4);
                if index > 0 {
                    text.push(',');
                }
                text.push_str(&format!(
                    "{{\"uid\":\"0x{uid:x}\",\"handle\":\"0x40000000{:08x}\",\"kind\":\"{}\",\"state\":\"{}\",\"offset\":{offset},\"size\":{size},\"alignment\":256,\"created_ns\":{},\"provenance\":\"train.py:{}\"}}",
                    random.below(1 << 20),
                    KINDS[random.below(5) as usize],
                    STATES[random.below(4) as usize],
                    random.below(1 << 40),
                    random.below(300),
                ));
                offset += size;
                uid += 1;
            }
            text.push_str("]}");
            total += allocations as u64;
        }
        text.push_str("]}\n");
        let path = folder.join(format!("dump-{seq:04}.json"));
        let mut file = fs::File::create(&path).expect("bench: create dump file");
        file.write_all(text.as_bytes()).expect("bench: write dump file");
    }
    total
}

#[derive(Deserialize)]
struct NaiveDump {
    run: NaiveRun,
    snapshot: NaiveSnapshot,
    memories: Vec<NaiveMemory>,
}
#[derive(Deserialize)]
struct NaiveRun {
    id: String,
    node: i64,
}
#[derive(Deserialize)]
struct NaiveSnapshot {
    seq: i64,
}
#[derive(Deserialize)]
struct NaiveMemory {
    id: String,
    allocations: Vec<NaiveAllocation>,
}
#[derive(Deserialize)]
struct NaiveAllocation {
    uid: String,
    handle: Option<String>,
    kind: String,
    state: String,
    offset: i64,
    size: i64,
    provenance: Option<String>,
}

/// The naive baseline: parse each file into structs and insert row by row, no checks, no indexes.
fn naive_import(files: &[PathBuf], database: &Path) -> u64 {
    let mut conn = Connection::open(database).expect("bench: open baseline db");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE allocation (run TEXT, node INTEGER, seq INTEGER, memory TEXT, uid TEXT, handle TEXT,
                                  kind TEXT, state TEXT, offset INTEGER, size INTEGER, provenance TEXT);",
    )
    .expect("bench: baseline schema");
    let mut rows = 0;
    for file in files {
        let bytes = fs::read(file).expect("bench: read dump");
        let dump: NaiveDump = serde_json::from_slice(&bytes).expect("bench: parse dump");
        let transaction = conn.transaction().expect("bench: begin");
        {
            let mut insert = transaction
                .prepare("INSERT INTO allocation VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)")
                .expect("bench: prepare");
            for memory in &dump.memories {
                for allocation in &memory.allocations {
                    insert
                        .execute(params![
                            dump.run.id,
                            dump.run.node,
                            dump.snapshot.seq,
                            memory.id,
                            allocation.uid,
                            allocation.handle,
                            allocation.kind,
                            allocation.state,
                            allocation.offset,
                            allocation.size,
                            allocation.provenance
                        ])
                        .expect("bench: insert");
                    rows += 1;
                }
            }
        }
        transaction.commit().expect("bench: commit");
    }
    rows
}

fn full_import(folder: &Path, database: &Path) -> u64 {
    let mut db = memstate::db::open(database).expect("bench: open memstate db");
    let paths = vec![folder.display().to_string()];
    let summary = memstate::ingest::import(&mut db, &paths, Default::default(), &mut |_| {}).expect("bench: import");
    assert_eq!(summary.refused, 0, "bench: generated dumps must all import");
    db.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").expect("bench: checkpoint");
    summary.allocations
}

/// Reset the peak resident set size of this process (Linux: writing 5 to clear_refs).
fn reset_peak_memory() {
    let _ = fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set size since the last reset, in MiB.
fn peak_memory_mib() -> f64 {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
        .unwrap_or(f64::NAN)
}

fn database_bytes(path: &Path) -> u64 {
    ["", "-wal"]
        .iter()
        .map(|suffix| fs::metadata(format!("{}{suffix}", path.display())).map(|meta| meta.len()).unwrap_or(0))
        .sum()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn main() {
    let dumps = env_number("MEMSTATE_BENCH_DUMPS", 50);
    let allocations = env_number("MEMSTATE_BENCH_ALLOCS", 15_000);
    let repeat = env_number("MEMSTATE_BENCH_REPEAT", 3).max(1);
    let work = tempfile::tempdir().expect("bench: temp dir");
    let folder = work.path().join("dumps");
    fs::create_dir_all(&folder).expect("bench: dump folder");
    let total = generate(&folder, dumps, allocations);
    if let Ok(keep) = std::env::var("MEMSTATE_BENCH_GENERATE_ONLY") {
        // For profiling by hand: leave the generated dumps in the named folder and stop.
        fs::create_dir_all(&keep).expect("bench: output folder");
        for entry in fs::read_dir(&folder).expect("bench: list") {
            let path = entry.expect("entry").path();
            fs::copy(&path, Path::new(&keep).join(path.file_name().expect("file name"))).expect("bench: copy");
        }
        println!("generated {total} allocations into {keep}");
        return;
    }
    let mut files: Vec<PathBuf> = fs::read_dir(&folder).expect("bench: list").map(|entry| entry.expect("entry").path()).collect();
    files.sort();
    let input_bytes: u64 = files.iter().map(|file| fs::metadata(file).map(|meta| meta.len()).unwrap_or(0)).sum();
    println!(
        "data: {dumps} dumps x 4 memories x {allocations} allocations = {total} allocations, {:.1} MiB of JSON",
        input_bytes as f64 / 1048576.0
    );

    let mut full_times = Vec::new();
    let mut naive_times = Vec::new();
    let mut full_bytes = 0;
    let mut naive_bytes = 0;
    let mut full_peak: f64 = 0.0;
    for round in 0..repeat {
        // Alternate the order so neither side always runs on a warmer cache.
        for side in if round % 2 == 0 { ["full", "naive"] } else { ["naive", "full"] } {
            let database = work.path().join(format!("{side}-{round}.db"));
            reset_peak_memory();
            let started = Instant::now();
            let rows = if side == "full" { full_import(&folder, &database) } else { naive_import(&files, &database) };
            let seconds = started.elapsed().as_secs_f64();
            assert_eq!(rows, total, "bench: {side} imported every allocation");
            if side == "full" {
                full_times.push(seconds);
                full_bytes = database_bytes(&database);
                full_peak = full_peak.max(peak_memory_mib());
            } else {
                naive_times.push(seconds);
                naive_bytes = database_bytes(&database);
            }
            println!("  round {round} {side:5}: {seconds:.2} s");
            let _ = fs::remove_file(&database);
            let _ = fs::remove_file(format!("{}-wal", database.display()));
            let _ = fs::remove_file(format!("{}-shm", database.display()));
        }
    }
    // Peak memory against the number of dumps: import only the first fifth of the run.
    let fifth: Vec<PathBuf> = files.iter().take((dumps / 5).max(1)).cloned().collect();
    let small_folder = work.path().join("fifth");
    fs::create_dir_all(&small_folder).expect("bench: fifth folder");
    for file in &fifth {
        fs::copy(file, small_folder.join(file.file_name().expect("file name"))).expect("bench: copy");
    }
    reset_peak_memory();
    full_import(&small_folder, &work.path().join("fifth.db"));
    let fifth_peak = peak_memory_mib();

    let full = median(full_times);
    let naive = median(naive_times);
    println!("memstate import (validation, holes, figures, indexes):");
    println!("  median time           {full:.2} s ({:.0} allocations/s)", total as f64 / full);
    println!("  database bytes/alloc  {:.1}", full_bytes as f64 / total as f64);
    println!("  peak resident memory  {full_peak:.0} MiB for {dumps} dumps, {fifth_peak:.0} MiB for {} dumps", fifth.len());
    println!("naive baseline (structs, INSERT per allocation, no checks, no holes, no indexes):");
    println!("  median time           {naive:.2} s ({:.0} allocations/s)", total as f64 / naive);
    println!("  database bytes/alloc  {:.1}", naive_bytes as f64 / total as f64);
    println!("ratio full / naive: {:.2} (target <= 1.00)", full / naive);
}
