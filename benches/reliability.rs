//! Reliability benchmark (issue 17): cost per memory and memory bounds, each figure next to its
//! target. `cargo bench --bench reliability` (a few minutes; `MEMSTATE_BENCH_SETS=memories,import,
//! history,bomb,follow` picks parts).
//!
//! - memories: one snapshot of 40,000 memories with 10 allocations each; `holes`, `blockers`,
//!   `map`, `stats` and `map --html` (median of 3) under 2 s each.
//! - import: one dump of 1.3M allocations (about 160 MiB), then three of them: peak memory at most
//!   4 times the largest dump plus 64 MiB.
//! - history: one memory over 1,000 snapshots with 1,000,000 spans: `map --html --history` under
//!   1 GiB and a page under 20 MiB.
//! - bomb: 1 GiB of spaces as zstd: refused with peak memory under 256 MiB.
//! - sql: `memstate sql` of 5M rows in the table format and in csv (both streamed: under 64 MiB),
//!   and an endless ORDER BY stopped at `--max-temp 256MiB` (under 256 MiB + 64 MiB + 64 MiB).
//! - follow: 5,000 dumps imported, then 10 s of idle `import --follow`, with events and with
//!   `--poll`: under 2% of a core.
//! - shards: a simulated run of 16 nodes imported into one database, then into one per node
//!   (`--shard-dir`, `--jobs 1` and `--jobs 2`): time (median of 3) and peak memory, the sharded
//!   import at most 1.1 times as slow as the plain one and its memory under 1.5 times plus 64 MiB
//!   (the reading side runs up to 100,000 allocation rows ahead of the writers, about 40 MiB of
//!   parsed dumps, so that every writer has work: that read-ahead is what the 64 MiB allows).

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{median, report, run_binary, run_binary_quietly, BINARY};

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| arg.to_string()).collect()
}

fn wanted(part: &str) -> bool {
    match std::env::var("MEMSTATE_BENCH_SETS") {
        Ok(sets) if !sets.is_empty() => sets.split(',').any(|set| set == part),
        _ => true,
    }
}

/// Write a dump as JSON text without building it in memory as a tree.
/// A memory of a generated dump: id, capacity, allocations (offset, size, state).
type GeneratedMemory<'s> = (u64, u64, Vec<(u64, u64, &'s str)>);

fn write_dump(path: &Path, run: &str, seq: u64, memories: &[GeneratedMemory], oom: bool) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("bench: create dump"));
    write!(out, r#"{{"format":"memstate-dump","version":1,"run":{{"id":"{run}","node":0}},"snapshot":{{"seq":{seq},"time_ns":{},"reason":"{}"}},"memories":["#,
        seq * 1_000_000, if oom { "oom" } else { "periodic" }).unwrap();
    for (index, (id, capacity, allocations)) in memories.iter().enumerate() {
        if index > 0 {
            out.write_all(b",").unwrap();
        }
        write!(
            out,
            r#"{{"id":"0x{id:x}","kind":"GPU_FB_MEM","capacity":{capacity},"allocations":["#
        )
        .unwrap();
        for (number, (offset, size, state)) in allocations.iter().enumerate() {
            if number > 0 {
                out.write_all(b",").unwrap();
            }
            write!(out, r#"{{"uid":{},"kind":"instance","state":"{state}","offset":{offset},"size":{size},"provenance":"bench.py:{}"}}"#,
                (id << 24) + seq * 1_000_000 + number as u64 + 1, number % 97).unwrap();
        }
        out.write_all(b"]").unwrap();
        if oom && index == 0 {
            out.write_all(br#","failed_requests":[{"size":65536,"kind":"instance"}]"#)
                .unwrap();
        }
        out.write_all(b"}").unwrap();
    }
    out.write_all(b"]}").unwrap();
}

fn import(db: &Path, paths: &[&Path]) -> (f64, f64) {
    let mut args = strings(&["--db", db.to_str().unwrap(), "import", "--quiet"]);
    args.extend(paths.iter().map(|path| path.display().to_string()));
    let ran = run_binary(&args, Duration::from_secs(1800));
    assert!(ran.ok, "bench: import");
    (ran.seconds, ran.peak_mib)
}

fn memories(dir: &Path) {
    println!("cost per memory: one snapshot of 40,000 memories with 10 allocations each");
    let memories: Vec<GeneratedMemory> = (0..40_000u64)
        .map(|m| {
            (
                0x1e00_0000_0000_0000 + m,
                1 << 20,
                (0..10u64)
                    .map(|a| {
                        (
                            a * 2048,
                            1024,
                            if a % 3 == 0 { "collectable" } else { "valid" },
                        )
                    })
                    .collect(),
            )
        })
        .collect();
    let file = dir.join("memories.json");
    write_dump(&file, "memories", 0, &memories, true);
    let db = dir.join("memories.db");
    import(&db, &[&file]);
    let html = dir.join("memories.html");
    for (name, args) in [
        ("holes", vec!["holes"]),
        ("blockers --size 1MiB", vec!["blockers", "--size", "1MiB"]),
        ("map", vec!["map"]),
        ("stats", vec!["stats"]),
        ("map --html", vec!["map", "--html", html.to_str().unwrap()]),
    ] {
        let mut times = Vec::new();
        let mut peak = 0f64;
        for _ in 0..3 {
            let mut all = strings(&["--db", db.to_str().unwrap()]);
            all.extend(strings(&args));
            let ran = run_binary_quietly(&all, Duration::from_secs(600));
            assert!(ran.ok, "bench: {name}");
            times.push(ran.seconds);
            peak = peak.max(ran.peak_mib);
        }
        let seconds = median(times);
        report(
            &format!("{name} (peak {peak:.0} MiB)"),
            &format!("{seconds:.2} s"),
            "< 2 s",
            Some(seconds < 2.0),
        );
    }
    let size = std::fs::metadata(&html).map(|meta| meta.len()).unwrap_or(0) as f64 / 1048576.0;
    report(
        "map --html page size",
        &format!("{size:.1} MiB"),
        "< 20 MiB",
        Some(size < 20.0),
    );
}

fn big_imports(dir: &Path) {
    println!("import memory: dumps of 1.3M allocations");
    let allocations: Vec<(u64, u64, &str)> = (0..325_000u64)
        .map(|i| {
            (
                i * 4096,
                1024 + (i % 5) * 512,
                ["valid", "collectable", "valid", "pending_free"][(i % 4) as usize],
            )
        })
        .collect();
    let memories: Vec<GeneratedMemory> = (0..4u64)
        .map(|m| {
            (
                0x1e00_0000_0000_0000 + m,
                325_000 * 4096 + 4096,
                allocations.clone(),
            )
        })
        .collect();
    let folder = dir.join("big");
    std::fs::create_dir_all(&folder).unwrap();
    for seq in 0..3 {
        write_dump(
            &folder.join(format!("d{seq}.json")),
            "big",
            seq,
            &memories,
            false,
        );
    }
    let size = std::fs::metadata(folder.join("d0.json")).unwrap().len() as f64 / 1048576.0;
    let target = 4.0 * size + 64.0;
    let (seconds, peak) = import(&dir.join("big1.db"), &[&folder.join("d0.json")]);
    report(
        &format!("one dump of {size:.0} MiB: peak ({seconds:.1} s)"),
        &format!("{peak:.0} MiB"),
        &format!("<= {target:.0} MiB"),
        Some(peak <= target),
    );
    let (seconds, peak) = import(&dir.join("big3.db"), &[&folder]);
    report(
        &format!("three such dumps: peak ({seconds:.1} s)"),
        &format!("{peak:.0} MiB"),
        &format!("<= {target:.0} MiB"),
        Some(peak <= target),
    );
}

fn history(dir: &Path) {
    println!("history: one memory over 1,000 snapshots, 1,000,000 allocation spans");
    let folder = dir.join("history");
    std::fs::create_dir_all(&folder).unwrap();
    for seq in 0..1000u64 {
        let allocations: Vec<(u64, u64, &str)> = (0..1000u64)
            .map(|i| {
                (
                    i * 4096 + (seq % 7) * 512,
                    2048,
                    if i % 2 == 0 { "valid" } else { "collectable" },
                )
            })
            .collect();
        write_dump(
            &folder.join(format!("d{seq:04}.json")),
            "history",
            seq,
            &[(0x1e00_0000_0000_0003, 1000 * 4096 + 65536, allocations)],
            seq == 999,
        );
    }
    let db = dir.join("history.db");
    let (seconds, _) = import(&db, &[&folder]);
    println!("  (imported in {seconds:.1} s)");
    let page = dir.join("history.html");
    let ran = run_binary(
        &strings(&[
            "--db",
            db.to_str().unwrap(),
            "map",
            "--html",
            page.to_str().unwrap(),
            "--history",
        ]),
        Duration::from_secs(600),
    );
    assert!(ran.ok, "bench: map --history");
    report(
        &format!("map --html --history: peak ({:.1} s)", ran.seconds),
        &format!("{:.0} MiB", ran.peak_mib),
        "< 1024 MiB",
        Some(ran.peak_mib < 1024.0),
    );
    let size = std::fs::metadata(&page).map(|meta| meta.len()).unwrap_or(0) as f64 / 1048576.0;
    report(
        "its page",
        &format!("{size:.1} MiB"),
        "< 20 MiB",
        Some(size < 20.0),
    );
}

fn bomb(dir: &Path) {
    println!("decompression bomb: 1 GiB of spaces");
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    let spaces = vec![b' '; 1 << 20];
    for _ in 0..1024 {
        encoder.write_all(&spaces).unwrap();
    }
    let file = dir.join("bomb.json.zst");
    std::fs::write(&file, encoder.finish().unwrap()).unwrap();
    let ran = run_binary(
        &strings(&[
            "--db",
            dir.join("bomb.db").to_str().unwrap(),
            "import",
            "--quiet",
            file.to_str().unwrap(),
        ]),
        Duration::from_secs(600),
    );
    report(
        &format!("refused ({:.2} s)", ran.seconds),
        &format!("{:.0} MiB", ran.peak_mib),
        "< 256 MiB",
        Some(!ran.ok && ran.peak_mib < 256.0),
    );
}

/// `memstate sql` holds no result: 5M rows in every format, and an endless sort stopped.
fn sql(dir: &Path) {
    println!("memstate sql: 5,000,000 rows; an endless ORDER BY");
    let db = dir.join("sql.db");
    let small = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/small.json");
    run_binary_quietly(
        &strings(&[
            "--db",
            db.to_str().unwrap(),
            "import",
            "-q",
            small.to_str().unwrap(),
        ]),
        Duration::from_secs(60),
    );
    let rows = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) SELECT x AS n, 'label ' || x AS label, x * 4096 AS size FROM c";
    for format in ["table", "csv"] {
        let ran = run_binary_quietly(
            &strings(&[
                "--db",
                db.to_str().unwrap(),
                "sql",
                rows,
                "--format",
                format,
            ]),
            Duration::from_secs(600),
        );
        report(
            &format!("{format}: peak memory ({:.1} s)", ran.seconds),
            &format!("{:.0} MiB", ran.peak_mib),
            "< 64 MiB",
            Some(ran.ok && ran.peak_mib < 64.0),
        );
    }
    let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x, randomblob(100) FROM c ORDER BY x DESC";
    let ran = run_binary_quietly(
        &strings(&[
            "--db",
            db.to_str().unwrap(),
            "sql",
            "--max-temp",
            "256MiB",
            endless,
            "--format",
            "csv",
        ]),
        Duration::from_secs(600),
    );
    report(
        &format!("endless sort stopped ({:.1} s)", ran.seconds),
        &format!("{:.0} MiB", ran.peak_mib),
        "< 384 MiB",
        Some(!ran.ok && ran.peak_mib < 384.0),
    );
}

/// CPU seconds a process has used (user + system), from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|field| field.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the command's name: state is field 0, utime 11 and stime 12.
    (ticks(11) + ticks(12)) / 100.0
}

fn follow(dir: &Path) {
    println!("idle follow: 5,000 dump files, nothing changing, for 10 s");
    let folder = dir.join("follow");
    std::fs::create_dir_all(&folder).unwrap();
    for seq in 0..5000u64 {
        write_dump(
            &folder.join(format!("d{seq:05}.json")),
            "follow",
            seq,
            &[(0x1e00_0000_0000_0003, 1 << 20, vec![(0, 1024, "valid")])],
            false,
        );
    }
    let db = dir.join("follow.db");
    import(&db, &[&folder]);
    for (mode, extra) in [("events", None), ("--poll", Some("--poll"))] {
        let mut command = Command::new(BINARY);
        command.args([
            "--db",
            db.to_str().unwrap(),
            "import",
            "--follow",
            "--quiet",
        ]);
        command.args(extra);
        let mut child = command
            .arg(&folder)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("bench: follow");
        std::thread::sleep(Duration::from_secs(5));
        let (started, before) = (Instant::now(), cpu_seconds(child.id()));
        std::thread::sleep(Duration::from_secs(10));
        let share = (cpu_seconds(child.id()) - before) / started.elapsed().as_secs_f64() * 100.0;
        let _ = child.kill();
        let _ = child.wait();
        report(
            &format!("idle follow, {mode}"),
            &format!("{share:.1}% of a core"),
            "< 2%",
            Some(share < 2.0),
        );
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("bench: temp dir");
    if wanted("memories") {
        memories(dir.path());
    }
    if wanted("import") {
        big_imports(dir.path());
    }
    if wanted("history") {
        history(dir.path());
    }
    if wanted("bomb") {
        bomb(dir.path());
    }
    if wanted("follow") {
        follow(dir.path());
    }
    if wanted("sql") {
        sql(dir.path());
    }
    if wanted("shards") {
        shards(dir.path());
    }
}

/// Plain import against shard import of one multi-node run.
fn shards(dir: &Path) {
    let run = dir.join("shard-run");
    let config = memstate::sim::Config {
        nodes: 16,
        gpus_per_node: 4,
        steps: 3000,
        dump_every: 20,
        continue_after_oom: true,
        ..Default::default()
    };
    let written = memstate::sim::simulate(&config, &run, &mut |_| {}).expect("bench: simulate");
    println!(
        "shards: {} dumps of {} nodes, {} allocations",
        written.dumps, config.nodes, written.allocations
    );
    let measure = |extra: &[&str], name: &str| -> (f64, f64) {
        let mut seconds = Vec::new();
        let mut peak = 0.0f64;
        for round in 0..3 {
            let target = dir.join(format!("{name}-{round}"));
            let mut args = strings(&["--db"]);
            args.push(target.with_extension("db").display().to_string());
            args.push("import".to_string());
            args.push("--quiet".to_string());
            args.extend(strings(extra));
            if !extra.is_empty() {
                args.push("--shard-dir".to_string());
                args.push(target.display().to_string());
            }
            args.push(run.display().to_string());
            let ran = run_binary_quietly(&args, Duration::from_secs(1800));
            assert!(ran.ok, "bench: {name} failed");
            seconds.push(ran.seconds);
            peak = peak.max(ran.peak_mib);
        }
        (median(seconds), peak)
    };
    let (plain, plain_peak) = measure(&[], "plain");
    report(
        "shards: plain import",
        &format!("{plain:.2} s, {plain_peak:.0} MiB"),
        "(reference)",
        None,
    );
    for jobs in ["1", "2"] {
        let (time, peak) = measure(&["--jobs", jobs], &format!("jobs{jobs}"));
        report(
            &format!("shards: --shard-dir --jobs {jobs}"),
            &format!("{time:.2} s ({:.2}x plain), {peak:.0} MiB", time / plain),
            "<= 1.1x plain time, < 1.5x plain memory + 64 MiB",
            Some(time <= plain * 1.1 && peak < plain_peak * 1.5 + 64.0),
        );
    }
}
