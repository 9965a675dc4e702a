//! Simulator benchmark: a run of 4 nodes x 4 GPUs, 500 steps (going on after out-of-memory errors),
//! written as plain files and as zstd streams; prints the median time of 3 runs and the output size.
//! `cargo bench --bench simulate`.

use std::time::Instant;

use memstate::sim::{simulate, Compression, Config, FileLayout};

fn main() {
    for (layout, compression) in [
        (FileLayout::Files, Compression::None),
        (FileLayout::Stream, Compression::Zstd),
    ] {
        let config = Config {
            nodes: 4,
            gpus_per_node: 4,
            steps: 500,
            continue_after_oom: true,
            layout,
            compression,
            ..Config::default()
        };
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("bench: temp dir");
            let started = Instant::now();
            let summary = simulate(&config, dir.path(), &mut |_| {}).expect("bench: simulate");
            times.push(started.elapsed().as_secs_f64());
            last = Some(summary);
        }
        times.sort_by(|a, b| a.total_cmp(b));
        let summary = last.expect("at least one run");
        println!(
            "{layout:?}/{compression:?}: median {:.2} s for {} dumps, {} allocations, {:.1} MiB ({:.0} bytes per allocation), {} oom dumps",
            times[1],
            summary.dumps,
            summary.allocations,
            summary.bytes as f64 / 1048576.0,
            summary.bytes as f64 / summary.allocations.max(1) as f64,
            summary.oom_dumps
        );
    }
}
