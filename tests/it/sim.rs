//! The simulator: deterministic from its seed, every dump it writes is valid and imports, and the
//! default run shows what the demo needs (holes, deferred allocation, collection, a fragmentation OOM).

use std::path::{Path, PathBuf};

use memstate::sim::{simulate, Compression, Config, FileLayout};

use crate::common::scalar;

fn files_under(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn run(config: &Config, folder: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    simulate(config, folder, &mut |_| {}).unwrap();
    files_under(folder)
        .into_iter()
        .map(|path| {
            (
                path.strip_prefix(folder).unwrap().to_path_buf(),
                std::fs::read(&path).unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_same_seed_gives_byte_identical_output_and_another_seed_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        steps: 120,
        ..Config::default()
    };
    let first = run(&config, &dir.path().join("a"));
    let second = run(&config, &dir.path().join("b"));
    assert!(first.len() > 10);
    assert_eq!(first, second);
    let other = run(&Config { seed: 2, ..config }, &dir.path().join("c"));
    assert_ne!(first, other);
}

#[test]
fn every_layout_and_encoding_validates_and_imports() {
    let dir = tempfile::tempdir().unwrap();
    for (index, (layout, compression, intern)) in [
        (FileLayout::Files, Compression::None, true),
        (FileLayout::Files, Compression::Gzip, false),
        (FileLayout::Stream, Compression::Zstd, true),
        (FileLayout::Stream, Compression::None, false),
    ]
    .into_iter()
    .enumerate()
    {
        let folder = dir.path().join(format!("run{index}"));
        let config = Config {
            steps: 150,
            layout,
            compression,
            intern,
            nodes: 2,
            gpus_per_node: 3,
            continue_after_oom: true,
            ..Config::default()
        };
        let summary = simulate(&config, &folder, &mut |_| {}).unwrap();
        let paths = vec![folder.display().to_string()];
        let validated = memstate::import::validate(&paths, Default::default(), &mut |event| {
            if let memstate::import::ImportEvent::Refused { error } = event {
                panic!("{error}");
            }
        })
        .unwrap();
        assert_eq!(validated.refused, 0);
        assert_eq!(validated.imported, summary.dumps);
        assert_eq!(validated.allocations, summary.allocations);
        let db_path = dir.path().join(format!("run{index}.db"));
        let mut database = memstate::db::open(&db_path).unwrap();
        let imported =
            memstate::import::import(&mut database, &paths, Default::default(), &mut |_| {})
                .unwrap();
        assert_eq!((imported.refused, imported.imported), (0, summary.dumps));
        // Strict mode too: the simulator writes nothing outside the format.
        let strict = memstate::import::validate(
            &paths,
            memstate::import::IngestOptions {
                strict: true,
                ..Default::default()
            },
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(strict.refused, 0);
    }
}

#[test]
fn the_default_run_shows_holes_deferred_allocation_collection_and_a_fragmentation_oom() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let summary = simulate(&Config::default(), &folder, &mut |_| {}).unwrap();
    assert_eq!(summary.oom_dumps, 1);
    let db = dir.path().join("t.db");
    let mut database = memstate::db::open(&db).unwrap();
    memstate::import::import(
        &mut database,
        &[folder.display().to_string()],
        Default::default(),
        &mut |_| {},
    )
    .unwrap();
    drop(database);
    // Several holes in GPU memories.
    let holes: i64 = scalar(
        &db,
        "SELECT max(hole_count) FROM memory_trend WHERE kind = 'GPU_FB_MEM'",
    );
    assert!(holes >= 5, "at most {holes} holes");
    // A pending_alloc placed over a pending_free.
    let over: i64 = scalar(
        &db,
        "SELECT count(*) FROM allocations a JOIN allocations b ON a.snapshot_id = b.snapshot_id AND a.memory_id = b.memory_id
         WHERE a.state = 'pending_alloc' AND b.state = 'pending_free' AND a.offset < b.end_offset AND b.offset < a.end_offset",
    );
    assert!(over >= 1);
    // Collected instances on their way out.
    let collected: i64 = scalar(&db, "SELECT count(*) FROM allocations WHERE kind = 'instance' AND state = 'pending_free' AND json_extract(attrs, '$.collected')");
    assert!(collected >= 1);
    // The run ends with an oom dump whose failed request is larger than the largest hole but
    // smaller than the free bytes: fragmentation.
    let row: String = scalar(
        &db,
        "SELECT json_array(f.size, m.largest_hole, m.free_bytes, s.reason, (SELECT max(snapshot_id) FROM snapshots WHERE node = s.node))
         FROM failed_requests f JOIN memory_stats m USING (snapshot_id, memory_id) JOIN snapshots s USING (snapshot_id)",
    );
    let row: Vec<serde_json::Value> = serde_json::from_str(&row).unwrap();
    let (size, largest_hole, free) = (
        row[0].as_i64().unwrap(),
        row[1].as_i64().unwrap(),
        row[2].as_i64().unwrap(),
    );
    assert_eq!(row[3], "oom");
    assert!(
        size > largest_hole && size < free,
        "request {size}, largest hole {largest_hole}, free {free}"
    );
}

#[test]
fn bad_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for config in [
        Config {
            nodes: 0,
            ..Config::default()
        },
        Config {
            dump_every: 0,
            ..Config::default()
        },
        Config {
            intensity: 0.0,
            ..Config::default()
        },
        Config {
            gpu_capacity: 1000,
            ..Config::default()
        },
    ] {
        assert!(
            simulate(&config, dir.path(), &mut |_| {}).is_err(),
            "{config:?}"
        );
    }
    crate::common::memstate()
        .args(["simulate", "--out"])
        .arg(dir.path())
        .args(["--gpu-capacity", "lots"])
        .assert()
        .code(2);
}

/// With `--pace`, each dump's wall_time is when it was written, so dumps written 300 ms apart say
/// so (issue 18, item 9: they were 10 ms apart, the simulated step).
#[test]
fn paced_dumps_carry_the_time_they_were_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("paced");
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    crate::common::memstate()
        .args([
            "simulate",
            "--nodes",
            "1",
            "--gpus",
            "1",
            "--steps",
            "30",
            "--dump-every",
            "10",
            "--pace",
            "300ms",
            "--out",
        ])
        .arg(&out)
        .assert()
        .code(0);
    let mut files: Vec<_> = files_under(&out)
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let times: Vec<f64> = files
        .iter()
        .map(|path| {
            let dump: serde_json::Value =
                serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            let text = dump["snapshot"]["wall_time"].as_str().unwrap().to_string();
            // Whole seconds from the library's reader; the fraction by hand (".nnnnnnnnnZ").
            let fraction: f64 = text
                .split_once('.')
                .map(|(_, rest)| format!("0.{}", rest.trim_end_matches('Z')).parse().unwrap())
                .unwrap_or(0.0);
            memstate::units::unix_seconds(&text).unwrap() as f64 + fraction
        })
        .collect();
    assert!(times.len() >= 3, "{files:?}");
    assert!(
        times[0] >= started - 1.0,
        "written now, not at the default start"
    );
    for pair in times.windows(2) {
        assert!(pair[1] - pair[0] >= 0.25, "{times:?}");
    }
}
