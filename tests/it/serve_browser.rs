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
    let snapshots: i64 = scalar(&db, "SELECT count(*) FROM snapshots");
    // The largest allocation of the most fragmented memory at the last snapshot of node 0.
    let (snapshot, memory, offset, size, uid): (i64, i64, i64, i64, String) = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row(
            "SELECT a.snapshot_id, a.memory_id, a.offset, a.size, a.uid FROM allocations a
             WHERE a.snapshot_id = (SELECT max(snapshot_id) FROM snapshots WHERE node = 0)
               AND a.memory_id = (SELECT memory_id FROM memory_stats WHERE snapshot_id = a.snapshot_id
                                  ORDER BY fragmentation DESC LIMIT 1)
             ORDER BY a.size DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)),
        )
        .unwrap()
    };
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
    assert!(said.contains("ok: its details are read"), "{said}");
}
