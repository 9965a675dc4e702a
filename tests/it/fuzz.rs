//! A fuzz target on stable Rust (cargo fuzz needs nightly): mutate the fixtures, bytes and JSON
//! structure, and check that the reader never panics, that what it accepts has consistent figures,
//! and that an accepted dump imports and reads back. Ignored by default; run it with
//!
//! ```sh
//! MEMSTATE_FUZZ_EXECUTIONS=200000 cargo test --release fuzz -- --ignored --nocapture
//! ```
//! (`MEMSTATE_FUZZ_SEED` picks another sequence of mutations.)

use std::panic::{catch_unwind, AssertUnwindSafe};

use memstate::dump::{self, parse_document, Document, Options};
use memstate::sim::workload::Random;
use serde_json::{json, Value};

use crate::common::data;

fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![
        std::fs::read(data("small.json")).unwrap(),
        std::fs::read(data("figures.json")).unwrap(),
    ];
    for name in ["n0-s0.json", "n0-s1.json", "n0-s2.json", "n1-s0.json"] {
        seeds.push(std::fs::read(data("run").join(name)).unwrap());
    }
    seeds
}

/// Replacement values that stress the reader: wrong types, extremes, markup, control characters.
fn odd_value(random: &mut Random) -> Value {
    match random.below(16) {
        0 => json!(null),
        1 => json!(-1),
        2 => json!(0),
        3 => json!(i64::MAX),
        4 => json!(u64::MAX),
        5 => json!(1.5),
        6 => json!(-0.0),
        7 => json!("0x"),
        8 => json!("<!--<script>\u{1b}[2J"),
        9 => json!([]),
        10 => json!({}),
        11 => json!(true),
        12 => json!(random.below(1 << 20)),
        13 => json!("ffffffffffffffff"),
        14 => json!(1e300),
        _ => json!("valid"),
    }
}

/// Change one random place of a JSON value.
fn mutate_value(value: &mut Value, random: &mut Random, depth: u32) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = keys[random.below(keys.len() as u64) as usize].clone();
            match random.below(6) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    map.insert(key, odd_value(random));
                }
                2 => {
                    map.insert(format!("{key}_extra"), odd_value(random));
                }
                _ if depth < 8 => mutate_value(map.get_mut(&key).unwrap(), random, depth + 1),
                _ => {
                    map.insert(key, odd_value(random));
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let index = random.below(items.len() as u64) as usize;
            match random.below(5) {
                0 => {
                    items.remove(index);
                }
                1 => {
                    let copy = items[index].clone();
                    items.push(copy);
                }
                2 => {
                    let other = random.below(items.len() as u64) as usize;
                    items.swap(index, other);
                }
                _ if depth < 8 => mutate_value(&mut items[index], random, depth + 1),
                _ => items[index] = odd_value(random),
            }
        }
        other => *other = odd_value(random),
    }
}

/// Change bytes: flip, cut, repeat a stretch.
fn mutate_bytes(bytes: &mut Vec<u8>, random: &mut Random) {
    if bytes.is_empty() {
        return;
    }
    let at = random.below(bytes.len() as u64) as usize;
    match random.below(5) {
        0 => bytes[at] ^= 1 << random.below(8),
        1 => bytes.truncate(at),
        2 => {
            let end = (at + 1 + random.below(64) as usize).min(bytes.len());
            let stretch = bytes[at..end].to_vec();
            bytes.splice(at..at, stretch);
        }
        3 => {
            bytes[at] = [b'{', b'}', b'[', b']', b'"', b',', b':', b'\\', 0, 0xff]
                [random.below(10) as usize]
        }
        _ => {
            bytes.remove(at);
        }
    }
}

/// What must hold of an accepted dump.
fn check_figures(dump: &dump::Dump) {
    let prepared = dump::prepare(dump.clone());
    for (memory, figures) in dump.memories.iter().zip(&prepared.figures) {
        assert!(figures.used_bytes <= memory.capacity);
        assert!(figures.free_bytes <= memory.capacity);
        assert!(figures.largest_hole <= figures.free_bytes);
        assert!((0.0..=1.0).contains(&figures.fragmentation));
        assert!(
            figures.largest_reclaimable >= figures.largest_hole,
            "a hole is reclaimable space"
        );
        assert_eq!(figures.allocation_count, memory.allocations.len() as u64);
        if memory.listed_holes.is_some() {
            assert_eq!(
                figures.used_bytes + figures.free_bytes + figures.unaccounted_bytes,
                memory.capacity
            );
        } else {
            assert_eq!(figures.used_bytes + figures.free_bytes, memory.capacity);
        }
    }
}

#[test]
#[ignore = "a long fuzz run: MEMSTATE_FUZZ_EXECUTIONS=200000 cargo test --release fuzz -- --ignored"]
fn fuzz_the_reader_and_the_importer() {
    let executions: u64 = std::env::var("MEMSTATE_FUZZ_EXECUTIONS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(20_000);
    let seed: u64 = std::env::var("MEMSTATE_FUZZ_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1);
    let mut random = Random::new(seed);
    let seeds = seeds();
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("fuzz.db");
    let mut database = memstate::db::open(&db_path).unwrap();
    let (mut accepted, mut imported) = (0u64, 0u64);
    for execution in 0..executions {
        let base = &seeds[random.below(seeds.len() as u64) as usize];
        let mut bytes = if random.chance(0.5) {
            let mut value: Value = serde_json::from_slice(base).unwrap();
            for _ in 0..=random.below(3) {
                mutate_value(&mut value, &mut random, 0);
            }
            serde_json::to_vec(&value).unwrap()
        } else {
            base.clone()
        };
        for _ in 0..random.below(3) {
            mutate_bytes(&mut bytes, &mut random);
        }
        let parsed = catch_unwind(AssertUnwindSafe(|| {
            parse_document(&bytes, "fuzz.json", Options::default())
        }));
        let parsed = parsed.unwrap_or_else(|_| {
            panic!(
                "execution {execution}: the reader panicked on {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        let Ok(Document::Dump(dump)) = parsed else {
            continue;
        };
        accepted += 1;
        check_figures(&dump);
        // Every tenth accepted dump goes through the importer and back through the views.
        if accepted % 10 == 0 {
            let mut dump = *dump;
            dump.snapshot.seq = execution as i64;
            let prepared = dump::prepare(dump);
            let mut importer = memstate::db::Importer::new(&mut database.conn, "fuzz.db");
            let outcome = importer
                .import(&prepared, "fuzz.json", true)
                .unwrap_or_else(|error| panic!("execution {execution}: {error}"));
            let again = importer.import(&prepared, "fuzz.json", false).unwrap();
            assert!(
                matches!(again, memstate::db::Outcome::Unchanged { .. }),
                "execution {execution}: not idempotent"
            );
            let snapshot_id = match outcome {
                memstate::db::Outcome::Imported { snapshot_id, .. }
                | memstate::db::Outcome::Replaced { snapshot_id, .. } => snapshot_id,
                memstate::db::Outcome::Unchanged { snapshot_id } => snapshot_id,
            };
            let rows: i64 = database
                .conn
                .query_row(
                    "SELECT count(*) FROM allocations WHERE snapshot_id = ?1",
                    [snapshot_id],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(
                rows as usize,
                prepared.dump.allocation_count(),
                "execution {execution}: allocations read back"
            );
            let holes: i64 = database
                .conn
                .query_row(
                    "SELECT count(*) FROM holes WHERE snapshot_id = ?1",
                    [snapshot_id],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(
                holes as usize,
                prepared.holes.iter().map(Vec::len).sum::<usize>(),
                "execution {execution}: holes read back"
            );
            imported += 1;
        }
    }
    eprintln!("fuzz: {executions} executions (seed {seed}): {accepted} accepted with consistent figures, {imported} imported and read back");
}
