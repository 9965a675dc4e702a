//! A steady-state run written as dump files: a few memories whose allocations mostly survive
//! from one dump to the next (the scale and serve benchmarks build their databases from it).

use std::fs;
use std::io::Write;
use std::path::Path;

use memstate::sim::workload::Random;

const KINDS: [&str; 5] = [
    "instance",
    "deferred_buffer",
    "future",
    "instance",
    "instance",
];

/// One live allocation of the generator.
#[derive(Clone)]
struct Live {
    uid: u64,
    handle: u64,
    kind: &'static str,
    state: &'static str,
    offset: u64,
    size: u64,
    created_ns: u64,
    provenance: u64,
}

/// A steady-state run: `dumps` dumps of 4 memories holding about `allocations` allocations each;
/// between dumps `change` of them change (a third freed, a third allocated into a gap that fits
/// or past the end, a third change state). Returns the total allocation rows written.
pub fn generate_steady(
    folder: &Path,
    run: &str,
    dumps: usize,
    allocations: usize,
    change: f64,
) -> u64 {
    fs::create_dir_all(folder).expect("bench: folder");
    let mut random = Random::new(42);
    let mut next_uid = 1u64;
    let mut memories: Vec<Vec<Live>> = Vec::new();
    for _ in 0..4 {
        let mut live = Vec::with_capacity(allocations);
        let mut offset = 0;
        for _ in 0..allocations {
            offset += 256 * random.below(4);
            let size = 256 * (1 + random.below(64));
            live.push(Live {
                uid: next_uid,
                handle: 0x4000_0000_0000_0000 | random.below(1 << 20),
                kind: KINDS[random.below(5) as usize],
                state: if random.chance(0.8) {
                    "valid"
                } else {
                    "collectable"
                },
                offset,
                size,
                created_ns: 0,
                provenance: random.below(300),
            });
            next_uid += 1;
            offset += size;
        }
        memories.push(live);
    }
    let mut total = 0;
    for seq in 0..dumps {
        let time_ns = seq as u64 * 1_000_000_000;
        if seq > 0 {
            for live in memories.iter_mut() {
                let changes = ((live.len() as f64 * change).round() as usize).max(1);
                for _ in 0..changes {
                    match random.below(3) {
                        0 if live.len() > 1 => {
                            let index = random.below(live.len() as u64) as usize;
                            live.remove(index);
                        }
                        1 => {
                            let size = 256 * (1 + random.below(64));
                            // A gap that fits, tried at a few random places; else past the end.
                            let mut placed = None;
                            for _ in 0..8 {
                                let index = random.below(live.len() as u64) as usize;
                                let start = if index == 0 {
                                    0
                                } else {
                                    live[index - 1].offset + live[index - 1].size
                                };
                                if live[index].offset >= start + size {
                                    placed = Some((index, start));
                                    break;
                                }
                            }
                            let (index, offset) = placed.unwrap_or_else(|| {
                                let end =
                                    live.last().map(|last| last.offset + last.size).unwrap_or(0);
                                (live.len(), end + 256 * random.below(4))
                            });
                            live.insert(
                                index,
                                Live {
                                    uid: next_uid,
                                    handle: 0x4000_0000_0000_0000 | random.below(1 << 20),
                                    kind: KINDS[random.below(5) as usize],
                                    state: "valid",
                                    offset,
                                    size,
                                    created_ns: time_ns,
                                    provenance: random.below(300),
                                },
                            );
                            next_uid += 1;
                        }
                        _ => {
                            let index = random.below(live.len() as u64) as usize;
                            let allocation = &mut live[index];
                            allocation.state = match allocation.state {
                                "valid" => "collectable",
                                "collectable" => "pending_free",
                                _ => "valid",
                            };
                        }
                    }
                }
            }
        }
        let rows: usize = memories.iter().map(Vec::len).sum();
        let mut text = String::with_capacity(rows * 180);
        text.push_str(&format!(
            "{{\"format\":\"memstate-dump\",\"version\":1,\"run\":{{\"id\":\"{run}\",\"node\":0}},\"snapshot\":{{\"seq\":{seq},\"time_ns\":{time_ns},\"reason\":\"periodic\"}},\"memories\":["
        ));
        for (index, live) in memories.iter().enumerate() {
            if index > 0 {
                text.push(',');
            }
            text.push_str(&format!(
                "{{\"id\":\"0x1e0000000000000{index}\",\"kind\":\"GPU_FB_MEM\",\"name\":\"GPU {index} framebuffer\",\"capacity\":{},\"allocations\":[",
                1u64 << 40
            ));
            for (position, allocation) in live.iter().enumerate() {
                if position > 0 {
                    text.push(',');
                }
                text.push_str(&format!(
                    "{{\"uid\":\"0x{:x}\",\"handle\":\"0x{:x}\",\"kind\":\"{}\",\"state\":\"{}\",\"offset\":{},\"size\":{},\"alignment\":256,\"created_ns\":{},\"provenance\":\"train.py:{}\"}}",
                    allocation.uid, allocation.handle, allocation.kind, allocation.state, allocation.offset, allocation.size, allocation.created_ns, allocation.provenance
                ));
            }
            text.push_str("]}");
        }
        text.push_str("]}\n");
        total += rows as u64;
        let path = folder.join(format!("dump-{seq:05}.json"));
        fs::File::create(&path)
            .and_then(|mut file| file.write_all(text.as_bytes()))
            .expect("bench: write dump");
    }
    total
}
