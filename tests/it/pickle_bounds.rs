//! Issue 46, items 1-5 and part of 11: small pickles that cost far more than their size (a file
//! name referred to thousands of times, a dict whose keys are one long memoized string, a stack
//! of marks, one `oom` event referred to thousands of times) and blocks that say impossible
//! things. Each input is written here opcode by opcode, as `pickle.dump` writes plain data
//! (protocol 4, memo entries by BINPUT/BINGET), and each is read or refused within its budget.

use crate::common::{memstate, on_db, scalar, write};
use crate::pickles::{block, pickled, segment, text, Py};

/// A pickle written opcode by opcode, for memo references `Py` cannot spell.
struct Raw(Vec<u8>);

impl Raw {
    fn new() -> Raw {
        Raw(vec![0x80, 4])
    }
    fn op(&mut self, bytes: &[u8]) -> &mut Raw {
        self.0.extend_from_slice(bytes);
        self
    }
    fn str(&mut self, value: &str) -> &mut Raw {
        self.0.push(b'X');
        self.0
            .extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.0.extend_from_slice(value.as_bytes());
        self
    }
    fn int(&mut self, value: u64) -> &mut Raw {
        self.0.extend_from_slice(&[0x8a, 8]);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }
    /// LONG_BINPUT: remember the top of the stack as memo entry `key`.
    fn put(&mut self, key: u32) -> &mut Raw {
        self.0.push(b'r');
        self.0.extend_from_slice(&key.to_le_bytes());
        self
    }
    /// LONG_BINGET: memo entry `key` again.
    fn get(&mut self, key: u32) -> &mut Raw {
        self.0.push(b'j');
        self.0.extend_from_slice(&key.to_le_bytes());
        self
    }
    fn finish(&mut self) -> Vec<u8> {
        self.0.push(b'.');
        std::mem::take(&mut self.0)
    }
}

/// `memstate import` of `bytes` as `name` into a fresh database, under an address-space limit
/// of `limit_mib` (bash's `ulimit -v`): (status, stderr, database).
fn import_limited(
    dir: &std::path::Path,
    name: &str,
    bytes: &[u8],
    limit_mib: u64,
    timeout_secs: u64,
) -> (Option<i32>, String, std::path::PathBuf) {
    let path = write(dir, name, bytes);
    let db = dir.join(format!("{name}.db"));
    let binary = assert_cmd::cargo::cargo_bin("memstate");
    let script = format!(
        "ulimit -v {}; exec \"$0\" --db \"$1\" import --quiet \"$2\"",
        limit_mib * 1024
    );
    let output = std::process::Command::new("timeout")
        .arg(timeout_secs.to_string())
        .args(["bash", "-c", &script])
        .arg(binary)
        .arg(&db)
        .arg(&path)
        .output()
        .expect("run bash");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        db,
    )
}

/// A segment with one block whose frames are one frame referred to `refs` more times through
/// the memo; the frame's file name is `name_len` bytes (not a `.py`, so every frame is looked
/// at before the innermost is chosen).
fn frames_referred_again(name_len: usize, refs: u32) -> Vec<u8> {
    let name = format!("/{}", "n".repeat(name_len - 1));
    let mut p = Raw::new();
    p.op(b"}(").str("segments").op(b"](").op(b"}(");
    p.str("device").int(0).str("address").int(0x7f00_0000_0000);
    p.str("total_size")
        .int(1 << 21)
        .str("segment_type")
        .str("large");
    p.str("blocks").op(b"](").op(b"}(");
    p.str("address").int(0x7f00_0000_0000).str("size").int(4096);
    p.str("state").str("active_allocated");
    p.str("frames").op(b"](");
    p.op(b"}(")
        .str("filename")
        .str(&name)
        .str("line")
        .int(7)
        .op(b"u")
        .put(0);
    for _ in 0..refs {
        p.get(0);
    }
    p.op(b"eu"); // the frames, the block
    p.op(b"eu"); // the blocks, the segment
    p.op(b"eu"); // the segments, the snapshot
    p.finish()
}

/// Item 1: a 1 MiB file name referred to 5,000 times. Before, provenance made every frame's text
/// (5 GiB) before choosing one, and the process aborted under a 2 GiB limit; now the frame is
/// chosen from the names as they stand and one text is made: the block lands with it.
#[test]
fn a_long_file_name_referred_to_thousands_of_times_is_made_once() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = frames_referred_again(1 << 20, 5000);
    assert!(bytes.len() < (1 << 20) + 64 * 1024);
    let (status, stderr, db) = import_limited(dir.path(), "frames.pickle", &bytes, 2048, 120);
    assert_eq!(status, Some(0), "{stderr}");
    let provenance: String = scalar(&db, "SELECT provenance FROM allocations");
    // The innermost frame, as the pickle names it: `/nnn...n:7`.
    assert_eq!(provenance.len(), (1 << 20) + 2);
    assert!(provenance.starts_with("/nnn") && provenance.ends_with("n:7"));
}

/// Item 2: a dict of 200,000 entries whose keys are one memoized 1 MiB string (2.2 MB of
/// pickle). Before, indexing the dict copied and hashed every key: minutes. Now each key value
/// is read once; the pickle, no snapshot, is refused by name well within the time allowed.
#[test]
fn a_dict_keyed_by_one_long_memoized_string_is_indexed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Raw::new();
    p.op(b"}(").str(&"k".repeat(1 << 20)).put(0).op(b"N");
    for _ in 0..200_000 {
        p.get(0).op(b"N");
    }
    p.op(b"u");
    let bytes = p.finish();
    let (status, stderr, _) = import_limited(dir.path(), "keys.pickle", &bytes, 2048, 60);
    assert_eq!(status, Some(1), "timed out or crashed: {stderr}");
    assert!(
        stderr.contains("keys.pickle: not a PyTorch allocator snapshot: no `segments` list"),
        "{stderr}"
    );
}

/// Item 3: the stack is counted like the values. 40 MB of MARK (or of DUP over one value) is a
/// stack of 40M entries, 320 MiB, past three times the pickle plus 32 MiB: refused by name for
/// what it builds (before, the stack was not counted: it grew to 320 MiB and more, and the
/// pickle was refused only at its end, for a stack without a value).
#[test]
fn a_stack_of_marks_or_copies_is_counted_against_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let marks = Raw::new().op(&vec![b'('; 40_000_000]).finish();
    let copies = Raw::new().op(b"N").op(&vec![b'2'; 40_000_000]).finish();
    for (name, bytes) in [("marks.pickle", marks), ("copies.pickle", copies)] {
        let (status, stderr, _) = import_limited(dir.path(), name, &bytes, 4096, 120);
        assert_eq!(status, Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("{name}: byte "))
                && stderr.contains(
                    "the pickle builds more values than a PyTorch snapshot of its size could"
                ),
            "{name}: {stderr}"
        );
    }
}

/// A segment of `blocks` valid blocks of 4 KiB, and a trace of one `oom` event referred to
/// `refs` more times through the memo.
fn one_oom_referred_again(blocks: u64, refs: u32) -> Vec<u8> {
    let base = 0x7f00_0000_0000u64;
    let mut p = Raw::new();
    p.op(b"}(").str("segments").op(b"](").op(b"}(");
    p.str("device").int(0).str("address").int(base);
    p.str("total_size")
        .int(blocks * 4096 + 4096)
        .str("segment_type")
        .str("large");
    p.str("blocks").op(b"](");
    for index in 0..blocks {
        p.op(b"}(")
            .str("address")
            .int(base + index * 4096)
            .str("size")
            .int(4096);
        p.str("state").str("active_allocated").op(b"u");
    }
    p.op(b"eu"); // the blocks, the segment
    p.op(b"e"); // the segments
    p.str("device_traces").op(b"](").op(b"](");
    p.op(b"}(")
        .str("action")
        .str("oom")
        .str("size")
        .int(1 << 30);
    p.str("device_free")
        .int(0)
        .str("time_us")
        .int(1000)
        .op(b"u")
        .put(0);
    for _ in 0..refs {
        p.get(0);
    }
    p.op(b"e").op(b"e"); // the trace, the traces
    p.op(b"u");
    p.finish()
}

/// Item 4: one `oom` event referred to 10,000 times (about 90 KB of pickle) would rebuild 10,000
/// snapshots of 500 blocks: 5M rows (and 10,000 dumps) from a file of that size. Refused before
/// anything is written, naming the option that lifts the limit. The same trace referred to 20
/// times rebuilds its 21 snapshots, whose rows were counted by hand: 21 x 500 allocations and
/// the final snapshot's 500.
#[test]
fn one_oom_event_referred_to_thousands_of_times_is_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = one_oom_referred_again(500, 10_000);
    assert!(bytes.len() < 100_000, "{}", bytes.len());
    let (status, stderr, db) = import_limited(dir.path(), "ooms.pickle", &bytes, 4096, 120);
    assert_eq!(status, Some(1), "{stderr}");
    assert!(
        stderr.contains("ooms.pickle: its trace rebuilds more than 4000000 rows")
            && stderr.contains("--max-row-ratio"),
        "{stderr}"
    );
    let snapshots: i64 = scalar(&db, "SELECT count(*) FROM snapshots");
    assert_eq!(snapshots, 0, "nothing lands from a refused pickle");

    let few = one_oom_referred_again(500, 20);
    let (status, stderr, db) = import_limited(dir.path(), "few.pickle", &few, 4096, 120);
    assert_eq!(status, Some(0), "{stderr}");
    let rows: i64 = scalar(&db, "SELECT count(*) FROM allocations");
    assert_eq!(rows, 21 * 500 + 500);
    let failed: i64 = scalar(&db, "SELECT count(*) FROM failed_requests");
    assert_eq!(failed, 21);
}

/// Item 5 and item 11's device: two blocks at one address are refused like other overlaps
/// (before, the second silently replaced the first), and a segment's device that is no CUDA
/// device index (-2^70, before read as device 0) is refused by its place.
#[test]
fn two_blocks_at_one_address_and_an_impossible_device_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = 0x7f00_0000_0000i128;
    let twice = pickled(&Py::Dict(vec![(
        "segments",
        Py::List(vec![segment(
            base,
            1 << 20,
            vec![
                block(base, 4096, "active_allocated", vec![]),
                block(base, 8192, "active_allocated", vec![]),
            ],
        )]),
    )]));
    let device = pickled(&Py::Dict(vec![(
        "segments",
        Py::List(vec![Py::Dict(vec![
            ("device", Py::Int(-(1i128 << 70))),
            ("address", Py::Int(base)),
            ("total_size", Py::Int(1 << 20)),
            ("segment_type", text("large")),
            ("blocks", Py::List(vec![])),
        ])]),
    )]));
    let cases = [
        (
            "twice.pickle",
            twice,
            "twice.pickle: segments[0]: a second block at 0x7f0000000000: two blocks cannot share an address",
        ),
        (
            "device.pickle",
            device,
            "device.pickle: segments[0]: device is the integer -1180591620717411303424, not a CUDA device's index",
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = write(dir.path(), name, &bytes);
        let db = dir.path().join(format!("{name}.db"));
        let output = on_db(&db)
            .args(["import", "--quiet"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    // The first, read alone, lands: the refusal is the second block's.
    let once = pickled(&Py::Dict(vec![(
        "segments",
        Py::List(vec![segment(
            base,
            1 << 20,
            vec![block(base, 4096, "active_allocated", vec![])],
        )]),
    )]));
    let path = write(dir.path(), "once.pickle", &once);
    memstate()
        .arg("--db")
        .arg(dir.path().join("once.db"))
        .args(["import", "--quiet"])
        .arg(&path)
        .assert()
        .success();
}
