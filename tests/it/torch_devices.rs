//! PyTorch runs as their users see them (issue 60): a GPU is one memory with its segments a level
//! inside it, and every trace event kind replayed, expandable segments' `segment_map` and
//! `segment_unmap` included. The rebuilt snapshots are checked against a second replay written
//! here, forward from nothing over the fixture's events (the trace is whole, so that is allowed),
//! against memstate's, which undoes the events from the final state.

use std::collections::BTreeMap;

use crate::common::on_db;
use crate::sources::{fixture, rows};

const MIB: u64 = 1 << 20;
const E: u64 = 0x7f20_0000_0000;
const D1: u64 = 0x7f30_0000_0000;

/// The events of torch-expandable.pickle (make_torch_expandable.py), merged by time:
/// (device, action, addr, size).
fn events() -> Vec<(i64, &'static str, u64, u64)> {
    vec![
        (0, "segment_map", E, 20 * MIB),
        (0, "alloc", E, 8 * MIB),
        (1, "segment_alloc", D1, 2 * MIB),
        (0, "alloc", E + 8 * MIB, 10 * MIB),
        (1, "alloc", D1, MIB),
        (0, "segment_map", E + 20 * MIB, 20 * MIB),
        (0, "alloc", E + 18 * MIB, 16 * MIB),
        (0, "free_requested", E, 8 * MIB),
        (0, "free_completed", E, 8 * MIB),
        (1, "oom", 0, 4 * MIB),
        (0, "segment_unmap", E, 8 * MIB),
        (0, "snapshot", 0, 0),
    ]
}

/// torch-expandable.pickle imported with a snapshot after every event, into `dir`.
fn every_event(dir: &std::path::Path) -> std::path::PathBuf {
    let db = dir.join("t.db");
    on_db(&db)
        .args(["import", "--every", "1"])
        .arg(fixture("torch-expandable.pickle"))
        .assert()
        .success();
    db
}

/// The id of the snapshot rebuilt before the oom.
fn oom_snapshot(db: &std::path::Path) -> String {
    rows(db, "SELECT snapshot_id FROM snapshots WHERE reason = 'oom'")[0][0].clone()
}

/// A device's state in the second replay: mapped ranges (address -> (size, expandable)) and
/// blocks (address -> (size, pending free)).
#[derive(Default, Clone)]
struct Device {
    segments: BTreeMap<u64, (u64, bool)>,
    blocks: BTreeMap<u64, (u64, bool)>,
}

/// The state after the first `count` events, replayed forward: a map joins the mapped range it
/// touches, an unmap cuts one.
fn after(count: usize) -> BTreeMap<i64, Device> {
    let mut devices: BTreeMap<i64, Device> = BTreeMap::new();
    for (device, action, addr, size) in events().into_iter().take(count) {
        let state = devices.entry(device).or_default();
        match action {
            "segment_alloc" => {
                state.segments.insert(addr, (size, false));
            }
            "segment_map" => {
                let joined = state
                    .segments
                    .iter()
                    .find(|(&start, &(length, expandable))| expandable && start + length == addr)
                    .map(|(&start, _)| start);
                match joined {
                    Some(start) => state.segments.get_mut(&start).unwrap().0 += size,
                    None => {
                        state.segments.insert(addr, (size, true));
                    }
                }
            }
            "segment_unmap" => {
                let (&start, &(length, _)) = state
                    .segments
                    .iter()
                    .find(|(&start, &(length, _))| start <= addr && addr + size <= start + length)
                    .unwrap();
                state.segments.remove(&start);
                if addr > start {
                    state.segments.insert(start, (addr - start, true));
                }
                if addr + size < start + length {
                    state
                        .segments
                        .insert(addr + size, (start + length - addr - size, true));
                }
            }
            "alloc" => {
                state.blocks.insert(addr, (size, false));
            }
            "free_requested" => state.blocks.get_mut(&addr).unwrap().1 = true,
            "free_completed" => {
                state.blocks.remove(&addr);
            }
            _ => {}
        }
    }
    for device in [0, 1] {
        devices.entry(device).or_default();
    }
    devices
}

/// With `--every 1`, each rebuilt snapshot holds exactly the state after its event: the device's
/// segments (address, size, expandable), its blocks (uid = address, size, state), its reserved
/// and used bytes, as the forward replay gives them. The snapshot before the oom is the state
/// after the 9th event; the final one the state after all 12.
#[test]
fn every_rebuilt_snapshot_of_an_expandable_run_is_the_state_after_its_event() {
    let dir = tempfile::tempdir().unwrap();
    let db = every_event(dir.path());
    let mut expected_points: Vec<(&str, usize)> = (1..=9).map(|k| ("periodic", k)).collect();
    expected_points.extend([
        ("oom", 9),
        ("periodic", 10),
        ("periodic", 11),
        ("request", 12),
    ]);
    let snapshots = rows(
        &db,
        "SELECT snapshot_id, reason FROM snapshots ORDER BY seq",
    );
    assert_eq!(
        snapshots
            .iter()
            .map(|row| row[1].as_str())
            .collect::<Vec<_>>(),
        expected_points
            .iter()
            .map(|(reason, _)| *reason)
            .collect::<Vec<_>>()
    );
    for (row, &(_, count)) in snapshots.iter().zip(&expected_points) {
        let id = &row[0];
        let state = after(count);
        for (device, expected) in state {
            let name = format!("cuda:{device}");
            let segments = rows(
                &db,
                &format!("SELECT g.address, g.size, g.expandable FROM segments g JOIN memories m USING (memory_id)
                          WHERE g.snapshot_id = {id} AND m.name = '{name}' ORDER BY g.address"),
            );
            let want: Vec<Vec<String>> = expected
                .segments
                .iter()
                .map(|(address, (size, expandable))| {
                    vec![
                        format!("0x{address:016x}"),
                        size.to_string(),
                        u8::from(*expandable).to_string(),
                    ]
                })
                .collect();
            assert_eq!(segments, want, "{name} after {count} events");
            let blocks = rows(
                &db,
                &format!("SELECT a.uid, a.size, a.state FROM allocations a JOIN memories m USING (memory_id)
                          WHERE a.snapshot_id = {id} AND m.name = '{name}' ORDER BY a.uid"),
            );
            let want: Vec<Vec<String>> = expected
                .blocks
                .iter()
                .map(|(address, (size, pending))| {
                    vec![
                        format!("0x{address:016x}"),
                        size.to_string(),
                        if *pending { "pending_free" } else { "valid" }.to_string(),
                    ]
                })
                .collect();
            assert_eq!(blocks, want, "{name} after {count} events");
            let reserved: u64 = expected.segments.values().map(|(size, _)| size).sum();
            let used: u64 = expected.blocks.values().map(|(size, _)| size).sum();
            let figures = rows(
                &db,
                &format!("SELECT ms.used_bytes, ms.free_bytes FROM memory_stats ms JOIN memories m USING (memory_id)
                          WHERE ms.snapshot_id = {id} AND m.name = '{name}'"),
            );
            assert_eq!(
                figures,
                [[used.to_string(), (reserved - used).to_string()]],
                "{name} after {count} events"
            );
        }
    }
}

/// A device is one memory: `memories --snapshot ID --format json` gives each device's used and
/// reserved bytes at any snapshot. At the oom (after 9 events): cuda:0 reserves 40 MiB and uses
/// 26 MiB; cuda:1 reserves 2 MiB and uses 1 MiB, and holds the failed 4 MiB request.
#[test]
fn memories_of_any_snapshot_give_each_devices_used_and_reserved_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = every_event(dir.path());
    let oom = &oom_snapshot(&db);
    let output = on_db(&db)
        .args(["memories", "--snapshot", oom, "--format", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let by_name: BTreeMap<String, (u64, u64)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| {
            (
                memory["name"].as_str().unwrap().to_string(),
                (
                    memory["used_bytes"].as_u64().unwrap(),
                    memory["reserved_bytes"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(
        by_name,
        BTreeMap::from([
            ("cuda:0".to_string(), (26 * MIB, 40 * MIB)),
            ("cuda:1".to_string(), (MIB, 2 * MIB)),
        ])
    );
    assert_eq!(
        rows(&db, &format!("SELECT m.name, f.size, f.device_free FROM failed_requests f JOIN memories m USING (memory_id)
                            WHERE f.snapshot_id = {oom}")),
        [["cuda:1".to_string(), (4 * MIB).to_string(), MIB.to_string()]]
    );
}

/// A frame as `torch/csrc/cuda/Module.cpp` writes it.
fn frame(file: &str, line: i128, name: &str) -> crate::pickles::Py {
    use crate::pickles::{text, Py};
    Py::Dict(vec![
        ("filename", text(file)),
        ("line", Py::Int(line)),
        ("name", text(name)),
    ])
}

/// Whole stacks, with shared prefixes, kept and summed by frame. One 16 MiB segment holds A
/// (1 MiB: linear.py:10 < model.py:20 < train.py:5 < main.py:1), B (2 MiB: conv.py:30 <
/// model.py:21 < train.py:5 < main.py:1), C (4 MiB: optim.py:40 < train.py:6 < main.py:1), D
/// (512 KiB pending free, A's stack again) and E (1 MiB: f.py:1 < f.py:1 < main.py:1, a
/// recursion). By hand: main.py:1 holds all 8.5 MiB (5 blocks); train.py:5 A, B and D (3.5 MiB);
/// optim.py:40 and train.py:6 C's 4 MiB (optim.py:40 innermost: self 4 MiB); model.py:21 and
/// conv.py:30 B's 2 MiB; linear.py:10 and model.py:20 A and D's 1.5 MiB; f.py:1 E's 1 MiB,
/// counted once though it is twice in E's stack. Nine frames, four stacks (A and D share one).
#[test]
fn whole_stacks_are_kept_and_live_bytes_summed_by_frame() {
    use crate::pickles::{block, pickled, segment, text, Py};
    const S: i128 = 0x7f00_0000_0000;
    const M: i128 = 1 << 20;
    let a_stack = || {
        vec![
            frame(
                "/usr/lib/python3/site-packages/torch/nn/linear.py",
                10,
                "forward",
            ),
            frame("model.py", 20, "forward"),
            frame("train.py", 5, "step"),
            frame("main.py", 1, "main"),
        ]
    };
    let blocks = vec![
        block(S, M, "active_allocated", a_stack()),
        block(
            S + M,
            2 * M,
            "active_allocated",
            vec![
                frame("conv.py", 30, "forward"),
                frame("model.py", 21, "forward"),
                frame("train.py", 5, "step"),
                frame("main.py", 1, "main"),
            ],
        ),
        block(
            S + 3 * M,
            4 * M,
            "active_allocated",
            vec![
                frame("optim.py", 40, "step"),
                frame("train.py", 6, "step"),
                frame("main.py", 1, "main"),
            ],
        ),
        block(S + 7 * M, M / 2, "active_pending_free", a_stack()),
        block(
            S + 7 * M + M / 2,
            M,
            "active_allocated",
            vec![
                frame("f.py", 1, "rec"),
                frame("f.py", 1, "rec"),
                frame("main.py", 1, "main"),
            ],
        ),
        block(S + 8 * M + M / 2, 7 * M + M / 2, "inactive", vec![]),
    ];
    let snapshot = Py::Dict(vec![
        ("segments", Py::List(vec![segment(S, 16 * M, blocks)])),
        ("device_traces", Py::List(vec![Py::List(vec![])])),
        (
            "allocator_settings",
            Py::Dict(vec![("PYTORCH_CUDA_ALLOC_CONF", text(""))]),
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = crate::common::write(dir.path(), "stacks.pickle", &pickled(&snapshot));
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&path], 0);
    assert_eq!(
        rows(&db, "SELECT (SELECT count(*) FROM frames), (SELECT count(DISTINCT stack_id) FROM stack_frames)"),
        [["9", "4"]]
    );
    let mib = |tenths: u64| (tenths * MIB / 10).to_string();
    let expected: Vec<Vec<String>> = [
        ("main.py:1 main", 85, 0, 5),
        ("optim.py:40 step", 40, 40, 1),
        ("train.py:6 step", 40, 0, 1),
        ("train.py:5 step", 35, 0, 3),
        ("conv.py:30 forward", 20, 20, 1),
        ("model.py:21 forward", 20, 0, 1),
        (
            "/usr/lib/python3/site-packages/torch/nn/linear.py:10 forward",
            15,
            15,
            2,
        ),
        ("model.py:20 forward", 15, 0, 2),
        ("f.py:1 rec", 10, 10, 1),
    ]
    .iter()
    .map(|&(frame, bytes, own, count)| {
        vec![frame.to_string(), mib(bytes), mib(own), count.to_string()]
    })
    .collect();
    for memory in [None, Some("memory_id=0x0")] {
        let mut command = on_db(&db);
        command.args([
            "report",
            "live-by-frame",
            "-p",
            "snapshot_id=latest",
            "--format",
            "csv",
        ]);
        if let Some(memory) = memory {
            command.args(["-p", memory]);
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{output:?}");
        let text = String::from_utf8(output.stdout).unwrap();
        let got: Vec<Vec<String>> = text
            .lines()
            .skip(1)
            .map(|line| line.split(',').map(str::to_string).collect())
            .collect();
        assert_eq!(got, expected, "{memory:?}");
    }
    // Provenance stays the first frame that is not torch's own.
    assert_eq!(
        rows(
            &db,
            "SELECT provenance FROM allocations ORDER BY offset LIMIT 1"
        ),
        [["model.py:20"]]
    );
}

/// The explorer lists the failing device first: at the oom, cuda:1 failed a 4 MiB request, though
/// cuda:0 is the more fragmented (holes of 8 and 6 MiB: 1 - 8/14 against cuda:1's one hole, 0).
#[test]
fn the_explorer_opens_on_the_failing_device() {
    let dir = tempfile::tempdir().unwrap();
    let db = every_event(dir.path());
    let oom = &oom_snapshot(&db);
    assert_eq!(
        rows(&db, &format!("SELECT m.name, round(ms.fragmentation, 4) FROM memory_stats ms JOIN memories m USING (memory_id)
                            WHERE ms.snapshot_id = {oom} ORDER BY m.name")),
        [
            ["cuda:0".to_string(), format!("{}", ((1.0 - 8.0 / 14.0) * 10000.0f64).round() / 10000.0)],
            ["cuda:1".to_string(), "0".to_string()],
        ]
    );
    let served = crate::serve::serve(&db, &[]);
    let memories = crate::serve::get(served.port, &format!("/api/memories?snapshot={oom}")).json();
    let names: Vec<&str> = memories["table"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cuda:1", "cuda:0"]);
}
