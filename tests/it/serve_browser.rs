//! `memstate serve` in a real browser (issue 30): headless Chromium driven by Playwright
//! (tests/browser/serve_page.py) loads the page, sees a snapshot with an out-of-memory error
//! appear while an import runs, follows the OOM link to the story, zooms the map into one
//! allocation and reads its details. Skipped, saying why, where Chromium or Playwright is
//! missing; failing under CI (.ci/run installs both).

use std::path::Path;

use crate::common::{python_with, scalar};
use crate::serve::serve;

#[test]
fn the_page_follows_a_run_and_zooms_to_one_allocation() {
    if crate::viz::browser().is_none() || !python_with("playwright", "to drive the served page") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    memstate::sim::simulate(
        &memstate::sim::Config {
            seed: 1,
            ..Default::default()
        },
        &run,
        &mut |_| {},
    )
    .unwrap();
    // The dump with the out-of-memory error is held back, to be imported while the page is open.
    let mut oom_dump = None;
    for node in std::fs::read_dir(&run).unwrap() {
        for dump in std::fs::read_dir(node.unwrap().path()).unwrap() {
            let path = dump.unwrap().path();
            if std::fs::read_to_string(&path)
                .unwrap()
                .contains("\"reason\":\"oom\"")
            {
                oom_dump = Some(path);
            }
        }
    }
    let oom_dump = oom_dump.expect("the run ends in an out-of-memory error");
    let later = dir.path().join("later.json");
    std::fs::rename(&oom_dump, &later).unwrap();
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&run], 0);
    // A memory too large for the page to hold (9,000 allocations, past the served page's 4,000,
    // and 9,000 spans, past its 8,000): the page is given those nearest its largest hole (at the
    // start) and asks the server for the others as it zooms. The one to zoom to is far from them.
    let big = big_memory_dump(9000);
    let big_path = crate::common::write_json(dir.path(), "big.json", &big);
    crate::common::import(&db, &[&big_path], 0);
    let snapshots: i64 = scalar(&db, "SELECT count(*) FROM snapshots");
    let (snapshot, memory): (i64, i64) = (
        scalar(&db, "SELECT snapshot_id FROM snapshots WHERE run = 'big'"),
        scalar(&db, "SELECT memory_id FROM memories WHERE run = 'big'"),
    );
    let target = 8500u64;
    let (offset, size, uid) = (
        BIG_START + target * BIG_STRIDE,
        BIG_SIZE,
        format!("0x{:016x}", BIG_UID + target),
    );
    // The history keeps whole the spans where most start, grown from the memory's end (all bins
    // are alike here): the one to zoom to in the history is near the start.
    let in_history = 300u64;
    let (history_offset, history_uid) = (
        BIG_START + in_history * BIG_STRIDE,
        format!("0x{:016x}", BIG_UID + in_history),
    );
    let served = serve(&db, &[]);
    let shots = std::env::var_os("MEMSTATE_SHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().to_path_buf());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/serve_page.py");
    let output = std::process::Command::new("python3")
        .arg(script)
        .arg(&served.url)
        .arg(assert_cmd::cargo::cargo_bin("memstate"))
        .arg(&db)
        .arg(&later)
        .args([
            snapshots.to_string(),
            snapshot.to_string(),
            memory.to_string(),
            offset.to_string(),
            size.to_string(),
            uid,
            history_offset.to_string(),
            history_uid,
        ])
        .arg(&shots)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for step in [
        "ok: its details are read",
        "ok: the shared link opens the history on the window",
        "ok: a node's name shows it alone",
    ] {
        assert!(said.contains(step), "{step}: {said}");
    }
    if std::env::var_os("MEMSTATE_SHOTS").is_some() {
        println!("{said}");
    }
}

const BIG_START: u64 = 1 << 20;
const BIG_STRIDE: u64 = 8192;
const BIG_SIZE: u64 = 4096;
const BIG_UID: u64 = 0x7000_0000_0000_0000;

/// One snapshot of run `big`: one memory whose `count` allocations of 4 KiB sit every 8 KiB after
/// a first free MiB (its largest hole).
fn big_memory_dump(count: u64) -> serde_json::Value {
    let allocations: Vec<serde_json::Value> = (0..count)
        .map(|index| {
            serde_json::json!({
                "uid": format!("0x{:016x}", BIG_UID + index),
                "kind": "instance",
                "state": "valid",
                "offset": BIG_START + index * BIG_STRIDE,
                "size": BIG_SIZE,
                "provenance": format!("big.py:{index}"),
            })
        })
        .collect();
    serde_json::json!({
        "format": "memstate-dump", "version": 1,
        "run": {"id": "big", "node": 0},
        "snapshot": {"seq": 0, "time_ns": 0, "reason": "periodic"},
        "memories": [{"id": "0x1e00000000000009", "kind": "GPU_FB_MEM",
                      "capacity": BIG_START + count * BIG_STRIDE, "allocations": allocations}],
    })
}

/// Issue 59, item 6, in a real browser: a page served on another port of 127.0.0.1 asks the SQL
/// box and the overview with <img> tags (with the token's cookie set, when the server has one);
/// Chromium sends them, and each is refused (403), while the page's own request is answered.
#[test]
fn a_page_on_another_port_cannot_use_the_api() {
    if crate::viz::browser().is_none() || !python_with("playwright", "to drive Chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = crate::serve::run_db(dir.path());
    for args in [vec![], vec!["--token", "0f3a9c1e77b2d4e5aa19"]] {
        let served = serve(&db, &args);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/cross_origin.py");
        let output = std::process::Command::new("python3")
            .arg(script)
            .arg(&served.url)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{args:?}: {said}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            said.contains("ok: every request of the other page was refused"),
            "{said}"
        );
    }
}
