//! Derived figures: the design's example against the figures worked out in small.expected.md,
//! hand-worked fixtures, and a byte-map model on random small memories.

use memstate::dump::figures::{figures, holes, MemoryFigures};
use memstate::dump::{parse_dump, Allocation, AllocationParts, Memory, Options, Range, State, Sym};
use memstate::sim::workload::Random;

use crate::common::{data, import, scalar};

fn load(name: &str) -> memstate::dump::Dump {
    let bytes = std::fs::read(data(name)).expect("fixture");
    parse_dump(&bytes, name, Options::default()).expect("fixture is valid")
}

fn figures_of(dump: &memstate::dump::Dump, id: u64) -> (MemoryFigures, Vec<Range>) {
    let memory = dump
        .memories
        .iter()
        .find(|memory| memory.id == id)
        .expect("memory in fixture");
    let holes = holes(memory);
    (figures(memory, &holes), holes)
}

/// The rows of the table in small.expected.md: (memory id, [capacity, used, free, holes,
/// largest_hole, fragmentation, reclaimable, largest_reclaimable, unaccounted]).
fn expected_rows() -> Vec<(u64, Vec<f64>)> {
    let text = std::fs::read_to_string(data("small.expected.md")).expect("small.expected.md");
    text.lines()
        .filter(|line| line.starts_with("| 0x"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let id = u64::from_str_radix(
                cells[0]
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .trim_start_matches("0x"),
                16,
            )
            .unwrap();
            (
                id,
                cells[1..]
                    .iter()
                    .map(|cell| cell.parse::<f64>().expect("a number"))
                    .collect(),
            )
        })
        .collect()
}

fn as_row(figures: &MemoryFigures) -> Vec<f64> {
    vec![
        figures.capacity as f64,
        figures.used_bytes as f64,
        figures.free_bytes as f64,
        figures.hole_count as f64,
        figures.largest_hole as f64,
        figures.fragmentation,
        figures.reclaimable_bytes as f64,
        figures.largest_reclaimable as f64,
        figures.unaccounted_bytes as f64,
    ]
}

fn assert_row_close(actual: &[f64], expected: &[f64], what: &str) {
    assert_eq!(actual.len(), expected.len());
    for (index, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= 5e-6,
            "{what} column {index}: got {a}, expected {e}"
        );
    }
}

#[test]
fn small_example_matches_expected_md() {
    let dump = load("small.json");
    let rows = expected_rows();
    assert_eq!(rows.len(), 2, "the expected table has both memories");
    for (id, expected) in rows {
        let (figures, _) = figures_of(&dump, id);
        assert_row_close(&as_row(&figures), &expected, &format!("memory {id:#x}"));
    }
    // "Holes of the GPU memory: [393216, +65536), [786432, +32768), [823296, +225280)."
    let (_, gpu_holes) = figures_of(&dump, 0x1e00000000000003);
    let expected: Vec<Range> = [(393216, 65536), (786432, 32768), (823296, 225280)]
        .iter()
        .map(|&(offset, size)| Range { offset, size })
        .collect();
    assert_eq!(gpu_holes, expected);
}

#[test]
fn small_example_figures_through_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    import(&db, &[&data("small.json")], 0);
    for (id, expected) in expected_rows() {
        let sql = format!(
            "SELECT json_array(capacity, used_bytes, free_bytes, hole_count, largest_hole, fragmentation, reclaimable_bytes, largest_reclaimable, unaccounted_bytes)
             FROM memory_trend WHERE handle = '0x{id:016x}'"
        );
        let row: String = scalar(&db, &sql);
        let actual: Vec<f64> = serde_json::from_str(&row).unwrap();
        assert_row_close(&actual, &expected, &format!("database memory {id:#x}"));
    }
    let holes: String = scalar(
        &db,
        "SELECT group_concat(offset || '+' || size, ' ') FROM (SELECT h.offset, h.size FROM holes h JOIN memories m USING (memory_id) WHERE m.handle = '0x1e00000000000003' ORDER BY h.offset)",
    );
    assert_eq!(holes, "393216+65536 786432+32768 823296+225280");
}

/// Expected figures worked out by hand; the derivation is in the comments.
#[test]
fn hand_worked_fixtures() {
    let dump = load("figures.json");
    let check = |id: u64, expected: [f64; 9], expected_holes: &[(u64, u64)]| {
        let (figures, holes) = figures_of(&dump, id);
        assert_row_close(&as_row(&figures), &expected, &format!("memory {id}"));
        let holes: Vec<(u64, u64)> = holes.iter().map(|hole| (hole.offset, hole.size)).collect();
        assert_eq!(holes, expected_holes, "holes of memory {id}");
    };
    // 1: valid [0,100), pending_free [100,500) under pending_alloc [100,300), collectable [600,700).
    // used = 100 + 400 + 100 = 600 (the overlap counted once); holes [500,600) and [700,1000):
    // free 400, largest 300, fragmentation 1 - 300/400 = 0.25; reclaimable 400 + 100 = 500;
    // unmovable = valid + pending_alloc = [0,300), so the largest reclaimable range is [300,1000) = 700.
    check(
        1,
        [1000., 600., 400., 2., 300., 0.25, 500., 700., 0.],
        &[(500, 100), (700, 300)],
    );
    // 2: listed holes [200,300) and [700,900) (given out of order), valid [0,200), collectable [500,600).
    // used 300, free 300, largest 200, fragmentation 1 - 200/300; unaccounted = 1000 - 300 - 300 = 400
    // ([300,500), [600,700), [900,1000)); unmovable = [0,200) + unaccounted, so the free-able
    // ranges are [200,300), [500,600), [700,900): largest 200.
    check(
        2,
        [1000., 300., 300., 2., 200., 1. / 3., 100., 200., 400.],
        &[(200, 100), (700, 200)],
    );
    // 3: empty: one hole of the whole capacity.
    check(
        3,
        [4096., 0., 4096., 1., 4096., 0., 0., 4096., 0.],
        &[(0, 4096)],
    );
    // 4: full: valid [0,512), collectable [512,1024): no hole at all, fragmentation 0;
    // collecting frees [512,1024) = 512.
    check(4, [1024., 1024., 0., 0., 0., 0., 512., 512., 0.], &[]);
    // 5: given out of order: valid [600,700), collectable [0,100), valid [300,400).
    // holes [100,300), [400,600), [700,1000): free 700, largest 300, fragmentation 1 - 300/700;
    // reclaimable 100; unmovable [300,400) and [600,700): largest free-able [0,300) or [700,1000) = 300.
    check(
        5,
        [
            1000.,
            300.,
            700.,
            3.,
            300.,
            1. - 300. / 700.,
            100.,
            300.,
            0.,
        ],
        &[(100, 200), (400, 200), (700, 300)],
    );
    // And the allocations come out sorted by offset.
    let memory = dump.memories.iter().find(|memory| memory.id == 5).unwrap();
    let offsets: Vec<u64> = memory
        .allocations
        .iter()
        .map(|allocation| allocation.offset)
        .collect();
    assert_eq!(offsets, vec![0, 300, 600]);
}

fn allocation(uid: u64, state: State, offset: u64, size: u64) -> Allocation {
    AllocationParts::new(uid, Sym(0), state, offset, size).into()
}

/// A random valid memory: disjoint allocations, some pending_alloc placed over pending_free,
/// and sometimes a listed free list that leaves some free bytes unaccounted.
fn random_memory(random: &mut Random) -> Memory {
    let capacity = 1 + random.below(200);
    let mut allocations = Vec::new();
    let mut gaps = Vec::new();
    let mut cursor = 0;
    let mut uid = 0;
    while cursor < capacity {
        let gap = random.below(12).min(capacity - cursor);
        if gap > 0 {
            gaps.push((cursor, gap));
        }
        cursor += gap;
        if cursor >= capacity {
            break;
        }
        let size = (1 + random.below(20)).min(capacity - cursor);
        let state =
            [State::Valid, State::Collectable, State::PendingFree][random.below(3) as usize];
        allocations.push(allocation(uid, state, cursor, size));
        uid += 1;
        if state == State::PendingFree && random.below(2) == 0 {
            let start = cursor + random.below(size);
            let length = 1 + random.below(cursor + size - start);
            allocations.push(allocation(uid, State::PendingAlloc, start, length));
            uid += 1;
        }
        cursor += size;
    }
    let listed_holes = if random.below(2) == 0 {
        let mut listed = Vec::new();
        for (offset, size) in gaps {
            // Keep, shrink (leaving unaccounted bytes on the right) or drop each gap.
            match random.below(3) {
                0 => listed.push(Range { offset, size }),
                1 if size > 1 => listed.push(Range {
                    offset,
                    size: size - 1,
                }),
                _ => {}
            }
        }
        Some(listed)
    } else {
        None
    };
    // Shuffle the order the allocations are given in.
    for index in (1..allocations.len()).rev() {
        let other = random.below(index as u64 + 1) as usize;
        allocations.swap(index, other);
    }
    Memory {
        id: 1,
        kind: Sym(0),
        name: None,
        capacity,
        alignment: None,
        allocations,
        listed_holes,
        failed_requests: Vec::new(),
        unknown: Default::default(),
        segments: Vec::new(),
        device_free: None,
    }
}

/// The same figures computed byte by byte, straight from FORMAT.md's definitions.
fn byte_model(memory: &Memory) -> (Vec<f64>, Vec<(u64, u64)>) {
    let capacity = memory.capacity as usize;
    let mut allocated = vec![false; capacity];
    let mut unmovable = vec![false; capacity];
    let mut listed = vec![false; capacity];
    for allocation in &memory.allocations {
        for byte in allocation.offset..allocation.offset + allocation.size {
            allocated[byte as usize] = true;
            if matches!(allocation.state, State::Valid | State::PendingAlloc) {
                unmovable[byte as usize] = true;
            }
        }
    }
    if let Some(holes) = &memory.listed_holes {
        for hole in holes {
            for byte in hole.offset..hole.offset + hole.size {
                listed[byte as usize] = true;
            }
        }
    }
    let free: Vec<bool> = match &memory.listed_holes {
        Some(_) => listed.clone(),
        None => allocated.iter().map(|&taken| !taken).collect(),
    };
    let unaccounted: Vec<bool> = match &memory.listed_holes {
        Some(_) => (0..capacity)
            .map(|byte| !allocated[byte] && !listed[byte])
            .collect(),
        None => vec![false; capacity],
    };
    let runs = |set: &dyn Fn(usize) -> bool| {
        let mut runs = Vec::new();
        let mut start = None;
        for byte in 0..=capacity {
            let inside = byte < capacity && set(byte);
            match (inside, start) {
                (true, None) => start = Some(byte),
                (false, Some(begin)) => {
                    runs.push((begin as u64, (byte - begin) as u64));
                    start = None;
                }
                _ => {}
            }
        }
        runs
    };
    // Listed holes are runs of listed bytes, except that two listed holes may touch: use the list.
    let holes: Vec<(u64, u64)> = match &memory.listed_holes {
        Some(holes) => {
            let mut holes: Vec<(u64, u64)> =
                holes.iter().map(|hole| (hole.offset, hole.size)).collect();
            holes.sort();
            holes
        }
        None => runs(&|byte| free[byte]),
    };
    let used = allocated.iter().filter(|&&taken| taken).count() as f64;
    let free_bytes = free.iter().filter(|&&byte| byte).count() as f64;
    let largest = holes.iter().map(|hole| hole.1).max().unwrap_or(0) as f64;
    let fragmentation = if free_bytes == 0.0 {
        0.0
    } else {
        1.0 - largest / free_bytes
    };
    let reclaimable: u64 = memory
        .allocations
        .iter()
        .filter(|allocation| matches!(allocation.state, State::Collectable | State::PendingFree))
        .map(|allocation| allocation.size)
        .sum();
    let largest_reclaimable = runs(&|byte| !unmovable[byte] && !unaccounted[byte])
        .iter()
        .map(|run| run.1)
        .max()
        .unwrap_or(0);
    let unaccounted_bytes = unaccounted.iter().filter(|&&byte| byte).count() as f64;
    (
        vec![
            memory.capacity as f64,
            used,
            free_bytes,
            holes.len() as f64,
            largest,
            fragmentation,
            reclaimable as f64,
            largest_reclaimable as f64,
            unaccounted_bytes,
        ],
        holes,
    )
}

#[test]
fn figures_agree_with_a_byte_map_on_random_memories() {
    let mut random = Random::new(7);
    for case in 0..2000 {
        let mut memory = random_memory(&mut random);
        let (expected, expected_holes) = byte_model(&memory);
        // The parser sorts allocations and listed holes; do the same as it would.
        memory
            .allocations
            .sort_by_key(|allocation| (allocation.offset, allocation.size, allocation.uid));
        if let Some(listed) = &mut memory.listed_holes {
            listed.sort();
        }
        let holes = holes(&memory);
        let actual = figures(&memory, &holes);
        assert_row_close(
            &as_row(&actual),
            &expected,
            &format!("case {case}: {memory:?}"),
        );
        let holes: Vec<(u64, u64)> = holes.iter().map(|hole| (hole.offset, hole.size)).collect();
        assert_eq!(holes, expected_holes, "case {case}");
    }
}
