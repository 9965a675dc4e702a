//! Memory map benchmark: one memory with 50,000 allocations (mixed states, some holes), imported,
//! then the HTML map written 5 times (load the layout through the views, render, write); and the
//! history of a memory over 1,000 snapshots with 50,001 spans (one pinned allocation, 50 that
//! live one snapshot each), loaded and rendered 5 times. Prints medians, bytes per allocation or
//! span, and the targets. `cargo bench --bench map`.

use std::time::Instant;

use serde_json::json;

fn main() {
    let count: u64 = std::env::var("MEMSTATE_BENCH_ALLOCS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(50_000);
    let dir = tempfile::tempdir().expect("bench: temp dir");
    let allocations: Vec<serde_json::Value> = (0..count)
        .map(|index| {
            let state = ["valid", "collectable", "pending_free", "valid", "collectable"][(index % 5) as usize];
            let kind = ["instance", "future", "deferred_buffer"][(index % 3) as usize];
            json!({"uid": index + 1, "handle": format!("40000000{index:08x}"), "kind": kind,
                   "state": state, "offset": index * 8192 + (index % 7) * 512, "size": 1024 + (index % 9) * 512,
                   "provenance": format!("train.py:{}", index % 211), "label": format!("tile {}", index % 64)})
        })
        .collect();
    let dump = json!({"format": "memstate-dump", "version": 1, "run": {"id": "map-bench", "node": 0},
        "snapshot": {"seq": 0, "time_ns": 0, "reason": "request"},
        "memories": [{"id": "0x1e00000000000003", "kind": "GPU_FB_MEM", "capacity": count * 8192 + 65536, "allocations": allocations}]});
    let file = dir.path().join("dump.json");
    std::fs::write(&file, dump.to_string()).expect("bench: write dump");
    let db_path = dir.path().join("map.db");
    let mut database = memstate::db::open(&db_path).expect("bench: open db");
    let summary = memstate::import::import(
        &mut database,
        &[file.display().to_string()],
        Default::default(),
        &mut |_| {},
    )
    .expect("bench: import");
    assert_eq!(summary.refused, 0, "bench: the generated dump is valid");
    drop(database);
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let database = memstate::db::open_read_only(&db_path).expect("bench: open read-only");
        let snapshot = memstate::query::select::snapshot_ids(database.connection(), "latest")
            .expect("bench: snapshot")[0];
        let memory = memstate::query::select::memory_ids(database.connection(), snapshot, None)
            .expect("bench: memory")[0];
        let layout = memstate::query::load::layout(database.connection(), snapshot, memory)
            .expect("bench: layout");
        let frames = [memstate::viz::html::Frame {
            snapshot_id: snapshot,
            label: "bench".into(),
            layouts: vec![layout],
        }];
        let page = memstate::viz::html::render_frames("bench", &frames);
        std::fs::write(dir.path().join("map.html"), &page).expect("bench: write page");
        times.push(started.elapsed().as_secs_f64());
        bytes = page.len();
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "map --html of {count} allocations: median {:.3} s (min {:.3}, max {:.3}), {} bytes ({:.1} bytes per allocation)  [target: under 1 s, under 80 bytes]",
        times[2],
        times[0],
        times[4],
        bytes,
        bytes as f64 / count as f64
    );
    history(dir.path());
}

/// The history view's data: 1,000 snapshots of one memory, 50,001 spans.
fn history(dir: &std::path::Path) {
    let mut lines = String::new();
    for seq in 0..1000u64 {
        let mut allocations = vec![
            json!({"uid": 1, "kind": "instance", "state": "valid", "offset": 512u64 << 20, "size": 16u64 << 20}),
        ];
        for slot in 0..50u64 {
            allocations.push(json!({"uid": 2 + seq * 50 + slot, "kind": "deferred_buffer", "state": if slot % 3 == 0 { "collectable" } else { "valid" },
                                    "offset": slot * (8u64 << 20), "size": 4u64 << 20, "provenance": format!("step.py:{slot}")}));
        }
        let dump = json!({"format": "memstate-dump", "version": 1, "run": {"id": "history-bench", "node": 0},
            "snapshot": {"seq": seq, "time_ns": seq * 10_000_000, "reason": if seq == 999 { "oom" } else { "periodic" }},
            "memories": [{"id": "0x1e00000000000003", "kind": "GPU_FB_MEM", "capacity": 1u64 << 30, "allocations": allocations}]});
        lines.push_str(&dump.to_string());
        lines.push('\n');
    }
    let file = dir.join("history.ndjson");
    std::fs::write(&file, lines).expect("bench: write run");
    let db_path = dir.join("history.db");
    let mut database = memstate::db::open(&db_path).expect("bench: open db");
    let summary = memstate::import::import(
        &mut database,
        &[file.display().to_string()],
        Default::default(),
        &mut |_| {},
    )
    .expect("bench: import");
    assert_eq!(summary.refused, 0, "bench: the generated run is valid");
    drop(database);
    let mut times = Vec::new();
    let (mut bytes, mut spans) = (0, 0);
    for _ in 0..5 {
        let started = Instant::now();
        let database = memstate::db::open_read_only(&db_path).expect("bench: open read-only");
        let memory = memstate::query::select::memory_ids(database.connection(), 1, None)
            .expect("bench: memory")[0];
        let history = memstate::query::history::history(database.connection(), memory, None)
            .expect("bench: history");
        spans = history.spans.len();
        let page = memstate::viz::html::render(&memstate::viz::html::Page {
            title: "bench",
            frames: &[],
            marked: &[],
            histories: &[history],
            focus: None,
            served: None,
        });
        std::fs::write(dir.join("history.html"), &page).expect("bench: write page");
        times.push(started.elapsed().as_secs_f64());
        bytes = page.len();
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "history of 1000 snapshots, {spans} spans: load and render median {:.3} s (min {:.3}, max {:.3}), {bytes} bytes ({:.1} bytes per span)  [target: under 1 s, under 80 bytes]",
        times[2],
        times[0],
        times[4],
        bytes as f64 / spans.max(1) as f64
    );
}
