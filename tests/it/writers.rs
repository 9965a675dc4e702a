//! The writers producers call (writers/cpp, writers/python): each example writes a run of three
//! dumps of two memories into an empty directory, nothing else is left there, and memstate reads
//! what it wrote. The C++ example is built with every warning an error and with the address and
//! undefined-behaviour sanitizers.
//!
//! Both examples write, at seq 0, 1 and 2, seq + 1 instances of 1 MiB, 2 MiB apart, in a 16 MiB
//! GPU memory, and one 4 KiB future in a 64 MiB system memory; at seq 2 (reason oom) a request of
//! 15 MiB failed. So the GPU memory has one hole of 15 MiB at seq 0, two at seq 1 ([1, 2) and
//! [3, 16) MiB, the largest 13), and at seq 2 3 MiB used, 13 MiB free in 3 holes ([1, 2), [3, 4)
//! and [5, 16) MiB), the largest 11 MiB: exhaustion.

use std::path::Path;

use crate::common::{have, import, scalar, succeeds};

fn check_the_run(dir: &Path, run: &str) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        (0..3)
            .map(|seq| format!("{run}-n0-s{seq}.json"))
            .collect::<Vec<_>>(),
        "three dumps and nothing else"
    );
    let db = dir.parent().unwrap().join(format!("{run}.db"));
    import(&db, &[dir], 0);
    let mib = 1i64 << 20;
    let figures: String = scalar(
        &db,
        "SELECT group_concat(s.seq || ':' || s.reason || ':' || ms.used_bytes || ':' || ms.free_bytes || ':' || ms.hole_count || ':' || ms.largest_hole, ' ')
         FROM memory_stats ms JOIN snapshots s USING (snapshot_id) JOIN memories m USING (memory_id)
         WHERE m.kind = 'GPU_FB_MEM' ORDER BY s.seq",
    );
    assert_eq!(
        figures,
        format!(
            "0:periodic:{}:{}:1:{} 1:periodic:{}:{}:2:{} 2:oom:{}:{}:3:{}",
            mib,
            15 * mib,
            15 * mib,
            2 * mib,
            14 * mib,
            13 * mib,
            3 * mib,
            13 * mib,
            11 * mib
        )
    );
    let system: i64 = scalar(
        &db,
        "SELECT sum(used_bytes) FROM memory_stats JOIN memories USING (memory_id) WHERE kind = 'SYSTEM_MEM'",
    );
    assert_eq!(system, 3 * 4096);
    let verdict = crate::common::text_of(&db, &["oom"]);
    assert!(verdict.contains("EXHAUSTION"), "{verdict}");
}

#[test]
#[cfg_attr(not(has_gxx), ignore = "g++ is not installed (.ci/run installs it)")]
fn the_cpp_writer_example_builds_clean_under_sanitizers_and_its_run_reads() {
    if !have("g++", "to build the C++ writer's example") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("writers/cpp");
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("example");
    succeeds(
        std::process::Command::new("g++")
            .args([
                "-std=c++17",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsanitize=address,undefined",
                "-fno-sanitize-recover=all",
                "-I",
            ])
            .arg(&root)
            .arg(root.join("example.cpp"))
            .arg("-o")
            .arg(&binary),
    );
    let out = dir.path().join("dumps");
    std::fs::create_dir(&out).unwrap();
    let ran = succeeds(std::process::Command::new(&binary).arg(&out));
    assert!(
        ran.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    check_the_run(&out, "cpp-example");
}

#[test]
#[cfg_attr(not(has_python3), ignore = "python3 is not installed")]
fn the_python_writer_example_writes_a_run_memstate_reads() {
    if !have("python3", "to run the Python writer's example") {
        return;
    }
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("writers/python");
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dumps");
    std::fs::create_dir(&out).unwrap();
    succeeds(
        std::process::Command::new("python3")
            .arg(example.join("example.py"))
            .arg(&out),
    );
    check_the_run(&out, "python-example");
    // A dump left unfinished by an exception leaves nothing behind.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let script = "import sys; sys.path.insert(0, sys.argv[1]); from memstate.writer import DumpWriter\n\
                  try:\n    with DumpWriter(sys.argv[2], run='r', node=0, seq=0, time_ns=0) as d:\n        d.memory(1, 'SYSTEM_MEM', 10)\n        raise RuntimeError('boom')\nexcept RuntimeError:\n    pass\n";
    succeeds(
        std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&package)
            .arg(&empty),
    );
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}
