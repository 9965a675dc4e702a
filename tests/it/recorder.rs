//! `memstate.torch.Recorder` (issue 45): a training loop driven against a stand-in torch
//! (tests/python/standin, on sys.path in this test only) writes the allocator's state every two
//! steps and at the failed allocation; memstate imports them in step order, node = the rank.

use std::path::Path;
use std::process::Command;

use crate::common::{have, import, on_db, succeeds};

const MIB: i64 = 1 << 20;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether python3 is here to run the Recorder (skipped, or failing under CI, when not).
fn python() -> bool {
    have(
        "python3",
        "to run memstate.torch.Recorder against the stand-in torch",
    )
}

/// Run tests/python/train_with_recorder.py into `runs`, with the stand-in torch and memstate's
/// Python package on its path.
fn train(runs: &Path) {
    let path =
        std::env::join_paths([root().join("tests/python/standin"), root().join("python")]).unwrap();
    succeeds(
        Command::new("python3")
            .arg(root().join("tests/python/train_with_recorder.py"))
            .arg(runs)
            .env("PYTHONPATH", &path),
    );
}

/// The stand-in's figures by hand: 2 MiB of weights and an activation of (k % 3 + 1) MiB in one
/// 8 MiB segment, the rest one inactive block (a listed hole). Steps 2, 4, 6, 8 and 10 are due
/// (every=2): activations 3, 2, 1, 3 and 2 MiB. The 7 MiB request fails during step 11
/// (activation 3 MiB): used 5 MiB, the largest hole 3 MiB, fewer free bytes than asked. The
/// device is one memory, cuda:0, whose capacity is what `torch.cuda.mem_get_info` says (10 MiB,
/// 0 free: the stand-in's), 8 MiB of it reserved in the one segment.
#[test]
fn ten_steps_every_two_give_five_snapshots_and_the_oom_one_in_order() {
    if !python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("exp1");
    train(&runs);
    // The visible files (the hidden lock the Recorder holds is not memstate's to read).
    assert_eq!(
        visible_files(&runs.join("rank-3")),
        [
            "step-000000002.pickle",
            "step-000000004.pickle",
            "step-000000006.pickle",
            "step-000000008.pickle",
            "step-000000010.pickle",
            "step-000000011-oom.pickle",
        ]
    );
    let db = dir.path().join("r.db");
    import(&db, &[&runs], 0);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut statement = conn
        .prepare(
            "SELECT s.run, s.node, s.seq, s.reason, m.used_bytes, m.largest_hole, s.wall_time IS NOT NULL
             FROM snapshots s JOIN memory_stats m USING (snapshot_id) ORDER BY s.seq",
        )
        .unwrap();
    let rows: Vec<(String, i64, i64, String, i64, i64, bool)> = statement
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
                row.get(6)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let expected: Vec<(String, i64, i64, String, i64, i64, bool)> = [
        (2, "periodic", 5, 3),
        (4, "periodic", 4, 4),
        (6, "periodic", 3, 5),
        (8, "periodic", 5, 3),
        (10, "periodic", 4, 4),
        (11, "oom", 5, 3),
    ]
    .iter()
    .map(|&(seq, reason, used, hole)| {
        (
            "exp1".to_string(),
            3,
            seq,
            reason.to_string(),
            used * MIB,
            hole * MIB,
            true,
        )
    })
    .collect();
    assert_eq!(rows, expected);
    let failed: (i64, Option<i64>) = conn
        .query_row("SELECT size, device_free FROM failed_requests", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap();
    assert_eq!(failed, (7 * MIB, Some(0)));
    let devices: Vec<(String, i64, i64, i64)> = conn
        .prepare(
            "SELECT DISTINCT m.name, ms.capacity, ms.device_free,
                    (SELECT sum(g.size) FROM segments g WHERE g.snapshot_id = ms.snapshot_id AND g.memory_id = ms.memory_id)
             FROM memory_stats ms JOIN memories m USING (memory_id)",
        )
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(devices, [("cuda:0".to_string(), 10 * MIB, 0, 8 * MIB)]);
    let story = on_db(&db).arg("oom").output().unwrap();
    let told = String::from_utf8_lossy(&story.stdout);
    assert!(
        told.contains("Out of memory in exp1 node 3 seq 11"),
        "{told}"
    );
    // Importing again changes nothing; the hidden files a writer renames are never read.
    std::fs::write(
        runs.join("rank-3").join(".step-000000012.pickle.1.tmp"),
        b"\x80\x04half",
    )
    .unwrap();
    let again = import(&db, &[&runs], 0);
    assert!(
        again.contains("0 dumps") && again.contains("6 unchanged"),
        "{again}"
    );
}

/// A `memstate` entry that is not a Recorder's as this memstate reads it is refused by its key.
#[test]
fn a_recorder_entry_this_memstate_does_not_read_is_refused_by_its_key() {
    if !have("python3", "to write pickles as torch writes them") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
import pickle, sys
segment = {'device': 0, 'address': 4096, 'total_size': 4096,
           'blocks': [{'address': 4096, 'size': 4096, 'state': 'inactive', 'frames': []}]}
recorder = {'format': 'memstate-torch-recorder', 'version': 1}
for name, entry in [('format', {'format': 'other', 'version': 1}),
                    ('version', dict(recorder, version=2)),
                    ('rank', dict(recorder, step=1, time_ns=0)),
                    ('step', dict(recorder, rank=0, step=-1, time_ns=0))]:
    with open(sys.argv[1] + '/' + name + '.pickle', 'wb') as out:
        pickle.dump({'segments': [segment], 'memstate': entry}, out, protocol=4)
"#;
    succeeds(Command::new("python3").args(["-c", script]).arg(dir.path()));
    for key in ["format", "version", "rank", "step"] {
        let file = dir.path().join(format!("{key}.pickle"));
        let output = on_db(dir.path().join(format!("{key}.db")))
            .arg("import")
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{key}");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains(&format!("memstate.{key}:")), "{key}: {said}");
    }
}

/// `import --follow` on the Recorder's folder while the loop runs: the same six snapshots, in
/// step order, none of them read half-written.
#[test]
fn a_follower_reads_the_recorders_snapshots_as_they_come() {
    if !python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("exp1");
    std::fs::create_dir(&runs).unwrap();
    let db = dir.path().join("f.db");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"))
        .env_remove("MEMSTATE_DB")
        .arg("--db")
        .arg(&db)
        .args([
            "import",
            "--follow",
            "--interval",
            "100ms",
            "--settle",
            "1s",
        ])
        .arg(&runs)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let follower = crate::follow::Follower::watch(child);
    train(&runs);
    crate::follow::wait_for(&db, 6, "the Recorder's six snapshots");
    let (_, _, stderr) = follower.stop();
    assert!(!stderr.contains("refused"), "{stderr}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let seqs: Vec<i64> = conn
        .prepare("SELECT seq FROM snapshots WHERE node = 3 ORDER BY seq")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(seqs, [2, 4, 6, 8, 10, 11]);
}

/// `python3 -c SCRIPT ARGS` with the stand-in torch (torch.distributed not initialized: a
/// process before `init_process_group`) and memstate's package on its path, and no rank in the
/// environment.
fn python_before_init(script: &str, args: &[&Path]) -> Command {
    let path =
        std::env::join_paths([root().join("tests/python/standin"), root().join("python")]).unwrap();
    let mut command = Command::new("python3");
    command
        .args(["-c", script])
        .args(args)
        .env("PYTHONPATH", &path)
        .env("STANDIN_DISTRIBUTED", "off");
    for name in [
        "RANK",
        "SLURM_PROCID",
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
    ] {
        command.env_remove(name);
    }
    command
}

/// The files a folder holds that memstate would read (not the hidden ones), sorted.
fn visible_files(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| !name.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Issue 59, item 13: two processes of one job recording into one folder before
/// torch.distributed is initialized (both rank 0) keep all their snapshots: the second is told
/// at once and records apart, and every snapshot imports.
#[test]
fn two_processes_of_rank_zero_keep_both_their_snapshots() {
    if !python() {
        return;
    }
    // Each makes its Recorder, says it is ready, waits for the other, then records 4 steps.
    let script = r#"
import os, sys, time, torch
from memstate.torch import Recorder
folder, me, other = sys.argv[1], sys.argv[2], sys.argv[3]
rec = Recorder(folder, every=1)
open(me, "w").close()
deadline = time.time() + 30
while not os.path.exists(other) and time.time() < deadline:
    time.sleep(0.01)
for step in range(1, 5):
    torch.advance(step)
    rec.step()
rec.close()
"#;
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("exp2");
    let (a, b) = (dir.path().join("a.ready"), dir.path().join("b.ready"));
    let first = python_before_init(script, &[&runs, &a, &b])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let second = python_before_init(script, &[&runs, &b, &a])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let outputs = [
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    ];
    let mut warned = 0;
    for output in &outputs {
        assert!(output.status.success(), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("another Recorder is recording run 'exp2' rank 0") {
            warned += 1;
        }
    }
    assert_eq!(warned, 1, "exactly the second is told");
    // Rank 0's folder, and the second's beside it: 4 snapshots each.
    let mut folders = visible_files(&runs);
    assert_eq!(folders.len(), 2, "{folders:?}");
    folders.sort();
    assert_eq!(folders[0], "rank-0");
    assert!(folders[1].starts_with("rank-0-p"), "{folders:?}");
    for folder in &folders {
        assert_eq!(
            visible_files(&runs.join(folder)),
            [
                "step-000000001.pickle",
                "step-000000002.pickle",
                "step-000000003.pickle",
                "step-000000004.pickle"
            ],
            "{folder}"
        );
    }
    let db = dir.path().join("two.db");
    import(&db, &[&runs], 0);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let per_run: Vec<(String, i64)> = conn
        .prepare("SELECT run, count(*) FROM snapshots GROUP BY run ORDER BY run")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(per_run.len(), 2, "{per_run:?}");
    assert_eq!(per_run[0], ("exp2".to_string(), 4));
    assert!(per_run[1].0.starts_with("exp2-p"), "{per_run:?}");
    assert_eq!(per_run[1].1, 4);
}

/// Issue 59, item 13 too: a launcher's rank in the environment (torchrun's RANK) tells two
/// processes apart before torch.distributed is initialized.
#[test]
fn a_launchers_rank_names_the_folder_before_torch_distributed_is_initialized() {
    if !python() {
        return;
    }
    let script = r#"
import sys, torch
from memstate.torch import Recorder
rec = Recorder(sys.argv[1], every=1)
torch.advance(1)
rec.step()
rec.close()
"#;
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("exp3");
    for rank in ["0", "1"] {
        succeeds(python_before_init(script, &[&runs]).env("RANK", rank));
    }
    assert_eq!(visible_files(&runs), ["rank-0", "rank-1"]);
}

/// Issue 59, item 14: a Recorder that cannot write (here each write past 100 bytes fails, as on
/// a full disk: RLIMIT_FSIZE with SIGXFSZ ignored gives EFBIG) does not stop the job: it says so
/// once, leaves no partial file, and the loop runs to its end.
#[test]
fn a_recorder_that_cannot_write_says_so_once_and_the_job_goes_on() {
    if !python() {
        return;
    }
    let script = r#"
import resource, signal, sys, torch
from memstate.torch import Recorder
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
rec = Recorder(sys.argv[1], every=1)
resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))
for step in range(1, 6):
    torch.advance(step)
    rec.step()
torch.advance(6)
torch.fail(7 * torch.MIB)
rec.close()
print("trained to the end")
"#;
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("exp4");
    let output = succeeds(&mut python_before_init(script, &[&runs]));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("trained to the end"),
        "{output:?}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.matches("memstate Recorder: cannot write").count(),
        1,
        "{stderr}"
    );
    // Nothing half-written: no pickle, no hidden temporary (the lock file alone).
    let left: Vec<String> = std::fs::read_dir(runs.join("rank-0"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, [".memstate-recorder.lock"], "{left:?}");
}
