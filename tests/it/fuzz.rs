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
            let mut importer = database.writer("fuzz.db");
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
                .connection()
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
                .connection()
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
    // A run in which every mutation was refused would have checked no figure and imported
    // nothing: the mutations must leave some dumps whole.
    assert!(
        accepted > 0 && (executions < 100 || imported > 0),
        "no dump was accepted ({accepted}) or imported ({imported}): nothing was checked"
    );
}

/// The largest size or offset a dump may hold (FORMAT.md: below 2^63).
const MAX: i64 = i64::MAX;

/// Push one memory of a dump to the extremes the format allows, keeping it valid where it can:
/// every number of the memory scaled up to near 2^63, a capacity of 2^63-1 with the last
/// allocation moved to its end, failed requests as large as the memory, huge allocations.
fn stretch_memory(memory: &mut Value, random: &mut Random) {
    let capacity = memory["capacity"].as_i64().unwrap_or(1).max(1);
    match random.below(4) {
        // Scale every offset and size by the largest factor that keeps the capacity below 2^63.
        0 => {
            let factor = (MAX / capacity).max(1);
            let factor = if random.chance(0.5) {
                factor
            } else {
                1 << (63 - capacity.leading_zeros().min(62) - 1).min(40)
            };
            let scale = |value: &mut Value| {
                if let Some(number) = value.as_i64() {
                    *value = json!(number.saturating_mul(factor));
                }
            };
            scale(&mut memory["capacity"]);
            for list in ["allocations", "holes", "failed_requests"] {
                if let Some(items) = memory[list].as_array_mut() {
                    for item in items {
                        for key in ["offset", "size"] {
                            if item.get(key).is_some() {
                                scale(&mut item[key]);
                            }
                        }
                    }
                }
            }
        }
        // The largest capacity, the last allocation moved to its very end.
        1 => {
            memory["capacity"] = json!(MAX);
            if let Some(items) = memory["allocations"].as_array_mut() {
                if let Some(last) = items.last_mut() {
                    let size = last["size"].as_i64().unwrap_or(1).max(1);
                    last["offset"] = json!(MAX - size);
                }
            }
            memory.as_object_mut().unwrap().remove("holes");
        }
        // A failed request as large as the memory (or the largest there is).
        2 => {
            let size = if random.chance(0.5) {
                memory["capacity"].clone()
            } else {
                json!(MAX)
            };
            memory["failed_requests"] =
                json!([{"size": size, "kind": "instance", "provenance": "p"}]);
        }
        // One allocation filling the largest memory there is.
        _ => {
            memory["capacity"] = json!(MAX);
            memory["allocations"] = json!([
                {"uid": "0xf00", "kind": "instance", "state": if random.chance(0.5) { "valid" } else { "collectable" },
                 "offset": 0, "size": MAX, "provenance": "p", "label": "all of it"}
            ]);
            memory.as_object_mut().unwrap().remove("holes");
        }
    }
}

/// A dump with some of its memories at the extremes (and, sometimes, a copy of one so that a
/// provenance's bytes across memories pass 2^63).
fn extreme_dump(base: &Value, random: &mut Random, seq: i64) -> Value {
    let mut dump = base.clone();
    dump["snapshot"]["seq"] = json!(seq);
    dump["snapshot"]["time_ns"] = json!(seq * 1_000_000);
    dump["run"]["node"] = json!(0);
    dump["run"]["id"] = json!("extreme");
    let memories = dump["memories"].as_array_mut().unwrap();
    for memory in memories.iter_mut() {
        for _ in 0..random.below(3) {
            stretch_memory(memory, random);
        }
    }
    if random.chance(0.3) {
        let mut copy = memories[random.below(memories.len() as u64) as usize].clone();
        copy["id"] = json!("0x7777");
        memories.push(copy);
    }
    dump
}

/// Run one command on a database; it must answer (exit 0), never panic or fail with an overflow.
fn must_answer(db: &std::path::Path, args: &[&str], context: &str) {
    let output = crate::common::on_db(db).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.code() == Some(0),
        "{context}: `memstate {}` exited {:?}: {stderr}",
        args.join(" "),
        output.status.code()
    );
}

/// Every analysis command answers on the databases of accepted dumps pushed to the extremes the
/// format allows (sizes near 2^63, a memory filled to its last byte, requests as large as the
/// memory, a provenance holding more than 2^63 bytes in all). Bounded for CI: a fixed number of
/// databases (`MEMSTATE_ANALYSIS_FUZZ_DATABASES`, default 12) of three snapshots each.
#[test]
fn analysis_commands_answer_on_extreme_dumps() {
    let databases: u64 = std::env::var("MEMSTATE_ANALYSIS_FUZZ_DATABASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(12);
    let seed: u64 = std::env::var("MEMSTATE_FUZZ_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1);
    let mut random = Random::new(seed);
    let bases: Vec<Value> = seeds()
        .iter()
        .map(|bytes| serde_json::from_slice(bytes).unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (mut refused, mut accepted) = (0u64, 0u64);
    for round in 0..databases {
        let base = &bases[random.below(bases.len() as u64) as usize];
        let folder = dir.path().join(format!("dumps{round}"));
        std::fs::create_dir_all(&folder).unwrap();
        let mut written = 0;
        let mut tries = 0;
        while written < 3 && tries < 200 {
            tries += 1;
            let dump = extreme_dump(base, &mut random, written);
            let bytes = serde_json::to_vec(&dump).unwrap();
            match parse_document(&bytes, "extreme.json", Options::default()) {
                Ok(Document::Dump(_)) => {
                    std::fs::write(folder.join(format!("s{written}.json")), &bytes).unwrap();
                    written += 1;
                    accepted += 1;
                }
                _ => refused += 1,
            }
        }
        let db = dir.path().join(format!("extreme{round}.db"));
        let context = format!("round {round} (seed {seed}, dumps in {})", folder.display());
        must_answer(
            &db,
            &["import", "--quiet", folder.to_str().unwrap()],
            &context,
        );
        let html = dir.path().join(format!("page{round}.html"));
        let html = html.to_str().unwrap();
        let svg = dir.path().join(format!("plot{round}.svg"));
        let svg = svg.to_str().unwrap();
        for args in [
            vec!["oom"],
            vec!["oom", "--html", html],
            vec!["map"],
            vec!["map", "--html", html],
            vec!["map", "--html", html, "--history"],
            vec!["blockers", "--size", "9223372036854775807"],
            vec!["blockers", "--size", "1"],
            vec!["holes"],
            vec!["allocations"],
            vec!["stats"],
            vec!["trend"],
            vec!["snapshots"],
            vec!["memories"],
            vec!["diff", "extreme:0:0", "extreme:0:2"],
            vec!["plot", "--out", svg],
            vec!["report", "churn", "-p", "run=extreme"],
            vec!["report", "growth", "-p", "run=extreme"],
            vec!["report", "long-lived", "-p", "run=extreme"],
            vec!["report", "fragmentation-trend", "-p", "run=extreme"],
            vec!["report", "nodes", "-p", "run=extreme"],
            vec!["report", "live-allocations", "-p", "snapshot_id=3"],
            vec!["report", "usage-by-kind", "-p", "snapshot_id=3"],
            vec!["report", "usage-by-state", "-p", "snapshot_id=3"],
            vec!["report", "usage-by-provenance", "-p", "snapshot_id=3"],
            vec!["report", "usage-by-object", "-p", "snapshot_id=3"],
            vec![
                "report",
                "largest-holes",
                "-p",
                "snapshot_id=3",
                "-p",
                "memory_id=1",
            ],
            vec![
                "report",
                "hole-histogram",
                "-p",
                "snapshot_id=3",
                "-p",
                "memory_id=1",
            ],
        ] {
            must_answer(&db, &args, &context);
        }
    }
    eprintln!("analysis fuzz: {databases} databases of {accepted} extreme dumps (seed {seed}; {refused} variants refused by the reader) answered by every command");
    assert!(
        accepted > 0 && databases > 0,
        "no extreme dump was accepted: no command was asked anything"
    );
}

/// Numbers a producer never writes but a hostile or broken file may: past 64 bits, negative,
/// 20 digits, zero.
const ODD_NUMBERS: [&str; 7] = [
    "18446744073709551616",
    "99999999999999999999",
    "-1",
    "0",
    "9223372036854775808",
    "0xffffffffffffffffff",
    "1e30",
];

/// In a log, a run of digits (or a hex number) swapped for an odd number.
fn mutate_number(bytes: &mut Vec<u8>, random: &mut Random) {
    if bytes.is_empty() {
        return;
    }
    let mut at = random.below(bytes.len() as u64) as usize;
    while at < bytes.len() && !bytes[at].is_ascii_digit() {
        at += 1;
    }
    let mut end = at;
    while end < bytes.len() && bytes[end].is_ascii_hexdigit() {
        end += 1;
    }
    let odd = ODD_NUMBERS[random.below(ODD_NUMBERS.len() as u64) as usize];
    bytes.splice(at..end, odd.bytes());
}

/// The foreign sources (issue 27, item 4): every fixture of tests/data/sources (and the Legion Prof
/// profiles of tests/data/legion-prof) mutated, bytes and
/// numbers, read as `import` reads it. Nothing panics; what a source accepts is a dump format v1
/// reads with consistent figures. A short run here, a long one with
/// `MEMSTATE_FUZZ_SOURCE_EXECUTIONS`.
#[test]
fn fuzz_the_sources() {
    let executions: u64 = std::env::var("MEMSTATE_FUZZ_SOURCE_EXECUTIONS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(400);
    let mut random = Random::new(
        std::env::var("MEMSTATE_FUZZ_SEED")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(7),
    );
    let mut fixtures: Vec<(String, Vec<u8>)> = std::fs::read_dir(data("sources"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "log" || ext == "pickle")
        })
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    // The Legion Prof profiles (issue 47), each named by its release and folder.
    for release in ["26.06", "25.03"] {
        for folder in ["pressure", "oom"] {
            let path = data("legion-prof")
                .join(release)
                .join(folder)
                .join("legate_0.prof");
            if let Ok(bytes) = std::fs::read(&path) {
                fixtures.push((format!("{release}-{folder}_0.prof"), bytes));
            }
        }
    }
    fixtures.sort();
    assert!(
        fixtures.len() >= 12,
        "{:?}",
        fixtures.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let dir = tempfile::tempdir().unwrap();
    let (mut accepted, mut dumps) = (0u64, 0u64);
    for execution in 0..executions {
        let (name, original) = &fixtures[random.below(fixtures.len() as u64) as usize];
        let mut bytes = original.clone();
        for _ in 0..1 + random.below(3) {
            if name.ends_with(".log") && random.below(2) == 0 {
                mutate_number(&mut bytes, &mut random);
            } else {
                mutate_bytes(&mut bytes, &mut random);
            }
        }
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let input = memstate::import::input::Input {
            path: Some(path.clone()),
            display: name.clone(),
            form: memstate::import::input::Form::Sniff,
            folder: None,
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| -> memstate::Result<Vec<Document>> {
            let records = memstate::import::source::open(
                &input,
                memstate::import::input::Limits::default(),
                &memstate::import::source::Options::default(),
            )?;
            let mut found = Vec::new();
            for record in records {
                let record = record?;
                found.push(parse_document(
                    &record.text,
                    &record.source,
                    Options::default(),
                )?);
            }
            Ok(found)
        }));
        match outcome {
            Err(_) => {
                let kept = dir.path().join(format!("panic-{execution}-{name}"));
                std::fs::write(&kept, &bytes).unwrap();
                panic!(
                    "reading a mutated {name} panicked (kept as {})",
                    kept.display()
                );
            }
            Ok(Ok(documents)) => {
                accepted += 1;
                for document in documents {
                    if let Document::Dump(dump) = document {
                        check_figures(&dump);
                        dumps += 1;
                    }
                }
            }
            Ok(Err(error)) => {
                let message = error.to_string();
                assert!(message.contains(name.as_str()), "{message}");
            }
        }
    }
    eprintln!("{executions} mutated source files: {accepted} accepted ({dumps} dumps), the rest refused by name");
    assert!(accepted > 0 && accepted < executions);
}
