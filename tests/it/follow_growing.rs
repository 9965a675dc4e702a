//! Issue 46, item 6: a follower never loses a report it caught half written. A Legate log
//! holding the first lines of a report was imported at once (no instances, one "unlisted"
//! stand-in), and the whole report, once written, was refused as "a different dump ... already
//! imported". A pickle rewritten in place clashed by seq. Now a report still open at the end of
//! a file waits for `--settle`, and a file read before that changes replaces what it gave.

use std::path::Path;

use rusqlite::Connection;

use crate::follow::{append, follow_on, rewrite_in_place, wait_for, Follower};
use crate::pickles::{block, pickled, segment, text, Py};

/// A follower of `path`, scanning every 100 ms, waiting `settle` for a file that does not read.
fn following(db: &Path, path: &Path, settle: &str) -> Follower {
    let args = [
        "import",
        "--follow",
        "--quiet",
        "--interval",
        "100ms",
        "--settle",
        settle,
    ];
    Follower::watch(follow_on(db, &[], &args, path))
}

fn rows(db: &Path, sql: &str) -> String {
    let conn = Connection::open(db).unwrap();
    conn.query_row(sql, [], |row| row.get(0)).unwrap()
}

/// legate-26.01.log's first report, cut after its "reserving" line (the instances still to
/// come), then written whole. It lists instances 0x4000000000000010 (1,048,576 bytes) and
/// 0x4000000000000011 (2,097,152): the snapshot that lands holds both, nothing stands in for
/// them, and nothing is refused.
#[test]
fn a_report_caught_half_written_lands_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let log = dir.path().join("job.log");
    let fixture = std::fs::read_to_string(crate::common::data("sources/legate-26.01.log")).unwrap();
    let cut = fixture
        .find("LogicalStore allocated at train.py:2:")
        .unwrap();
    let cut = fixture[..cut].rfind('\n').unwrap() + 1;
    let second = fixture.find("[0 - 7f00aa000700]    4.000000").unwrap();
    std::fs::write(&log, &fixture[..cut]).unwrap();
    let follower = following(&db, &log, "3s");
    // Well inside --settle: the open report is waited for, not taken as it stands.
    std::thread::sleep(std::time::Duration::from_millis(800));
    append(&log, &fixture.as_bytes()[cut..second]);
    wait_for(&db, 1, "the first report, whole");
    let (code, _, stderr) = follower.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("refused"), "{stderr}");
    assert_eq!(
        rows(
            &db,
            "SELECT group_concat(uid || ':' || size, ' ') FROM (SELECT * FROM allocations ORDER BY uid)"
        ),
        "0x4000000000000010:1048576 0x4000000000000011:2097152"
    );
}

/// A PyTorch snapshot pickle followed, then written again in place by a later
/// `_dump_snapshot` of the same run (the same name): first one segment with one block and no
/// trace (one snapshot, seq 0), then the same segment with a second block and an `oom` event (the
/// state before it, seq 0, and the final state, seq 1). The second version replaces what the
/// first gave: two snapshots, the failed request among them, nothing refused.
#[test]
fn a_snapshot_rewritten_in_place_replaces_what_it_gave() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let path = dir.path().join("snapshot.pickle");
    let base = 0x7f00_0000_0000i128;
    let first = pickled(&Py::Dict(vec![(
        "segments",
        Py::List(vec![segment(
            base,
            1 << 20,
            vec![block(base, 4096, "active_allocated", vec![])],
        )]),
    )]));
    let second = pickled(&Py::Dict(vec![
        (
            "segments",
            Py::List(vec![segment(
                base,
                1 << 20,
                vec![
                    block(base, 4096, "active_allocated", vec![]),
                    block(base + 4096, 8192, "active_allocated", vec![]),
                ],
            )]),
        ),
        (
            "device_traces",
            Py::List(vec![Py::List(vec![Py::Dict(vec![
                ("action", text("oom")),
                ("size", Py::Int(1 << 30)),
                ("device_free", Py::Int(0)),
                ("time_us", Py::Int(10)),
            ])])]),
        ),
    ]));
    std::fs::write(&path, &first).unwrap();
    let follower = following(&db, &path, "1s");
    wait_for(&db, 1, "the first version");
    rewrite_in_place(&path, &second);
    wait_for(&db, 2, "the second version");
    let (code, _, stderr) = follower.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("refused"), "{stderr}");
    assert_eq!(
        rows(
            &db,
            "SELECT group_concat(seq || ':' || reason || ':' || (SELECT count(*) FROM allocations a WHERE a.snapshot_id = s.snapshot_id), ' ')
             FROM (SELECT * FROM snapshots ORDER BY seq) s"
        ),
        "0:oom:2 1:request:2"
    );
    assert_eq!(
        rows(&db, "SELECT CAST(count(*) AS TEXT) FROM failed_requests"),
        "1"
    );
}
