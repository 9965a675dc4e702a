//! Memory map benchmark: one memory with 50,000 allocations (mixed states, some holes), imported,
//! then the HTML map written 5 times (load the layout through the views, render, write); prints
//! the median time and the file's bytes per allocation. `cargo bench --bench map`.

use std::time::Instant;

use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let count: u64 = std::env::var("MEMSTATE_BENCH_ALLOCS").ok().and_then(|value| value.parse().ok()).unwrap_or(50_000);
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
    let summary = memstate::ingest::import(&mut database, &[file.display().to_string()], Default::default(), &mut |_| {}).expect("bench: import");
    assert_eq!(summary.refused, 0, "bench: the generated dump is valid");
    drop(database);
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let database = memstate::db::open_read_only(&db_path).expect("bench: open read-only");
        let snapshot = memstate::query::select::snapshot_ids(&database.conn, "latest").expect("bench: snapshot")[0];
        let memory = memstate::query::select::memory_ids(&database.conn, snapshot, None).expect("bench: memory")[0];
        let layout = memstate::query::load::layout(&database.conn, snapshot, memory).expect("bench: layout");
        let page = memstate::viz::html::render("bench", &[memstate::viz::html::Frame { label: "bench".into(), layouts: vec![layout] }]);
        std::fs::write(dir.path().join("map.html"), &page).expect("bench: write page");
        times.push(started.elapsed().as_secs_f64());
        bytes = page.len();
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "map --html of {count} allocations: median {:.3} s (min {:.3}, max {:.3}), {} bytes ({:.1} bytes per allocation)",
        times[2],
        times[0],
        times[4],
        bytes,
        bytes as f64 / count as f64
    );
}
