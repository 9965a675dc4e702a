//! `memstate compare` (issue 31) on two small runs built by hand: the figures worked out here from
//! the layouts, both directions, a memory on one side only, and runs from two databases.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::{import, on_db, write_json};

const KIB: i64 = 1024;

/// An allocation of `size` KiB at `offset` KiB.
fn at(uid: u64, offset: i64, size: i64, provenance: &str) -> Value {
    json!({"uid": uid, "kind": "instance", "state": "valid", "offset": offset * KIB,
           "size": size * KIB, "provenance": provenance})
}

/// An allocation holding field 1 of the client object `object`.
fn of(mut allocation: Value, object: &str) -> Value {
    allocation["fields"] = json!([{"id": 1, "size": 4, "object": object}]);
    allocation
}

fn memory(id: &str, allocations: Vec<Value>, failed: Option<i64>) -> Value {
    let mut memory = json!({"id": id, "kind": "GPU_FB_MEM", "capacity": 1024 * KIB,
                            "allocations": allocations});
    if let Some(size) = failed {
        memory["failed_requests"] = json!([{"size": size * KIB, "kind": "instance"}]);
    }
    memory
}

fn dump(run: &str, seq: i64, oom: bool, memories: Vec<Value>) -> Value {
    json!({"format": "memstate-dump", "version": 1, "run": {"id": run, "node": 0},
           "snapshot": {"seq": seq, "time_ns": seq * 1_000_000_000, "reason": if oom { "oom" } else { "periodic" }},
           "memories": memories})
}

const GPU0: &str = "0x1e00000000000002";
const GPU1: &str = "0x1e00000000000003";

/// Run `before`: two GPUs. GPU0 holds 256 KiB at 0 (of object x), then also 256 KiB at 512 KiB
/// (of y), then also 64 KiB at 320 KiB (of x), where a request of 400 KiB fails. GPU1 holds
/// 128 KiB throughout (of no object).
fn before(dir: &Path) -> Vec<PathBuf> {
    let gpu1 = || memory(GPU1, vec![at(10, 0, 128, "p.py:2")], None);
    let a1 = || of(at(1, 0, 256, "p.py:1"), "x");
    let a2 = || of(at(2, 512, 256, "p.py:1"), "y");
    vec![
        write_json(
            dir,
            "before-0.json",
            &dump(
                "before",
                0,
                false,
                vec![memory(GPU0, vec![a1()], None), gpu1()],
            ),
        ),
        write_json(
            dir,
            "before-1.json",
            &dump(
                "before",
                1,
                false,
                vec![memory(GPU0, vec![a1(), a2()], None), gpu1()],
            ),
        ),
        write_json(
            dir,
            "before-2.json",
            &dump(
                "before",
                2,
                true,
                vec![
                    memory(
                        GPU0,
                        vec![a1(), a2(), of(at(3, 320, 64, "p.py:3"), "x")],
                        Some(400),
                    ),
                    gpu1(),
                ],
            ),
        ),
    ]
}

/// Run `after`: GPU0 alone, the same allocations packed (256 KiB at 0 and 256, 64 KiB at 512),
/// the last one now of object z.
fn after(dir: &Path) -> Vec<PathBuf> {
    let a1 = || of(at(1, 0, 256, "p.py:1"), "x");
    let a2 = || of(at(2, 256, 256, "p.py:1"), "y");
    vec![
        write_json(
            dir,
            "after-0.json",
            &dump("after", 0, false, vec![memory(GPU0, vec![a1()], None)]),
        ),
        write_json(
            dir,
            "after-1.json",
            &dump(
                "after",
                1,
                false,
                vec![memory(GPU0, vec![a1(), a2()], None)],
            ),
        ),
        write_json(
            dir,
            "after-2.json",
            &dump(
                "after",
                2,
                false,
                vec![memory(
                    GPU0,
                    vec![a1(), a2(), of(at(3, 512, 64, "p.py:3"), "z")],
                    None,
                )],
            ),
        ),
    ]
}

fn imported(db: &Path, files: &[PathBuf]) {
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    import(db, &paths, 0);
}

fn json_rows(db: &Path, args: &[&str]) -> Vec<Value> {
    let output = on_db(db)
        .arg("compare")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice::<Value>(&output.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn said(db: &Path, args: &[&str]) -> String {
    let output = on_db(db).arg("compare").args(args).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn two_runs_compare_by_hand_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("both.db");
    imported(&db, &before(dir.path()));
    imported(&db, &after(dir.path()));
    // GPU0 before: used 256, 512, 576 KiB; largest hole 768 (after 256), 256 (two of 256), 256
    // (holes 64, 128, 256 KiB); fragmentation 1 - 256/512 = 0.5 at its peak; 1 failed request.
    // GPU0 after: used the same; largest hole 768, 512, 448 KiB; never fragmented.
    // GPU1 before: 128 KiB used, its largest hole 896 KiB; not in after.
    let rows = json_rows(&db, &["before", "after"]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let gpu0 = &rows[0];
    assert_eq!(
        (
            gpu0["node"].clone(),
            gpu0["kind"].clone(),
            gpu0["ordinal"].clone()
        ),
        (json!(0), json!("GPU_FB_MEM"), json!(0))
    );
    assert_eq!(
        (gpu0["handle_a"].clone(), gpu0["handle_b"].clone()),
        (json!(GPU0), json!(GPU0))
    );
    assert_eq!(gpu0["peak_used_a"], 576 * KIB);
    assert_eq!(gpu0["peak_used_b"], 576 * KIB);
    assert_eq!(gpu0["peak_used_change"], 0);
    assert_eq!(gpu0["lowest_largest_hole_a"], 256 * KIB);
    assert_eq!(gpu0["lowest_largest_hole_b"], 448 * KIB);
    assert_eq!(gpu0["lowest_largest_hole_change"], 192 * KIB);
    assert_eq!(gpu0["peak_fragmentation_a"].as_f64(), Some(0.5));
    assert_eq!(gpu0["peak_fragmentation_b"].as_f64(), Some(0.0));
    assert_eq!(
        (
            gpu0["failed_requests_a"].clone(),
            gpu0["failed_requests_b"].clone()
        ),
        (json!(1), json!(0))
    );
    // GPU1 has no match in `after`: its B side is empty.
    let gpu1 = &rows[1];
    assert_eq!(
        (
            gpu1["ordinal"].clone(),
            gpu1["handle_a"].clone(),
            gpu1["handle_b"].clone()
        ),
        (json!(1), json!(GPU1), Value::Null)
    );
    assert_eq!(gpu1["lowest_largest_hole_a"], 896 * KIB);
    assert!(
        gpu1["lowest_largest_hole_b"].is_null() && gpu1["lowest_largest_hole_change"].is_null()
    );
    // By provenance: p.py:1 peaks at 512 KiB in both, p.py:3 at 64 KiB, p.py:2 (GPU1) only before.
    let provenances = json_rows(&db, &["before", "after", "--by", "provenance"]);
    let peaks: Vec<(Value, Value, Value, Value)> = provenances
        .iter()
        .map(|row| {
            (
                row["provenance"].clone(),
                row["peak_bytes_a"].clone(),
                row["peak_bytes_b"].clone(),
                row["peak_bytes_change"].clone(),
            )
        })
        .collect();
    assert_eq!(
        peaks,
        [
            (
                json!("p.py:2"),
                json!(128 * KIB),
                json!(0),
                json!(-128 * KIB)
            ),
            (
                json!("p.py:1"),
                json!(512 * KIB),
                json!(512 * KIB),
                json!(0)
            ),
            (json!("p.py:3"), json!(64 * KIB), json!(64 * KIB), json!(0)),
        ]
    );
    // By client object: x held 256 KiB, then 320 KiB with the 64 KiB allocation before, 256 KiB
    // after; y 256 KiB in both; z only after, 64 KiB. Largest change first, then by name.
    let objects: Vec<(Value, Value, Value, Value)> =
        json_rows(&db, &["before", "after", "--by", "object"])
            .iter()
            .map(|row| {
                (
                    row["object"].clone(),
                    row["peak_bytes_a"].clone(),
                    row["peak_bytes_b"].clone(),
                    row["peak_bytes_change"].clone(),
                )
            })
            .collect();
    assert_eq!(
        objects,
        [
            (
                json!("x"),
                json!(320 * KIB),
                json!(256 * KIB),
                json!(-64 * KIB)
            ),
            (json!("z"), json!(0), json!(64 * KIB), json!(64 * KIB)),
            (json!("y"), json!(256 * KIB), json!(256 * KIB), json!(0)),
        ]
    );
    // The verdict, both ways, and how the memories matched.
    let forward = said(&db, &["before", "after"]);
    assert!(forward.starts_with(&format!(
        "after fixed the out-of-memory error of before (GPU_FB_MEM {GPU0} on node 0): its largest hole stays above 448 KiB where the other's fell to 256 KiB; peak used is the same."
    )), "{forward}");
    assert!(
        forward.contains("1 in both, 1 only in A, 0 only in B"),
        "{forward}"
    );
    let backward = said(&db, &["after", "before"]);
    assert!(backward.starts_with(&format!(
        "before ran out of memory where after did not (GPU_FB_MEM {GPU0} on node 0): its largest hole fell to 256 KiB where the other's stayed above 448 KiB; peak used is the same."
    )), "{backward}");
    assert!(
        backward.contains("1 in both, 0 only in A, 1 only in B"),
        "{backward}"
    );
    // The canned query gives the same rows, for dashboards and Datasette.
    let report = on_db(&db)
        .args([
            "report",
            "compare-runs",
            "-p",
            "a=before",
            "-p",
            "b=after",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        report.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&report.stdout).unwrap(),
        Value::Array(rows.clone())
    );
    let reversed = json_rows(&db, &["after", "before"]);
    assert_eq!(reversed[0]["lowest_largest_hole_change"], -192 * KIB);
    assert!(reversed[1]["handle_a"].is_null() && reversed[1]["handle_b"] == GPU1);
}

#[test]
fn runs_from_two_databases_compare_as_from_one() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new, both) = (
        dir.path().join("old.db"),
        dir.path().join("new.db"),
        dir.path().join("both.db"),
    );
    imported(&old, &before(dir.path()));
    imported(&new, &after(dir.path()));
    imported(&both, &before(dir.path()));
    imported(&both, &after(dir.path()));
    let expected = json_rows(&both, &["before", "after"]);
    assert_eq!(
        json_rows(&old, &["before", "after", "--other", new.to_str().unwrap()]),
        expected
    );
    let named = [
        format!("before@{}", old.display()),
        format!("after@{}", new.display()),
    ];
    assert_eq!(json_rows(&both, &[&named[0], &named[1]]), expected);
    // A run missing from its database is refused with the runs it has (exit 2).
    let missing = on_db(&old)
        .args(["compare", "before", "after"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no run \"after\" (runs: before)"));
}

/// `--out FILE.svg`: both runs in one chart, a panel per kind and figure (largest hole, used),
/// each memory's line in the legend with its run's letter, A's failed memory named at its mark.
#[test]
fn the_chart_draws_both_runs_per_kind_and_figure() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("both.db");
    imported(&db, &before(dir.path()));
    imported(&db, &after(dir.path()));
    let chart = dir.path().join("compare.svg");
    let output = on_db(&db)
        .args(["compare", "before", "after", "--out"])
        .arg(&chart)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("wrote"));
    let svg = std::fs::read_to_string(&chart).unwrap();
    let texts: Vec<String> = svg
        .split("<text")
        .skip(1)
        .filter_map(|rest| {
            Some(
                rest.split_once('>')?
                    .1
                    .split_once("</text>")?
                    .0
                    .trim()
                    .to_string(),
            )
        })
        .collect();
    assert!(
        texts
            .iter()
            .any(|text| text == "A = before (solid), B = after (dashed)"),
        "{texts:?}"
    );
    // One kind (GPU_FB_MEM), two figures: two panels.
    assert_eq!(
        texts.iter().filter(|text| *text == "GPU_FB_MEM").count(),
        2,
        "{texts:?}"
    );
    // In each panel's legend: before's two GPUs, after's one.
    let legend = |letter: &str| {
        texts
            .iter()
            .filter(|text| text.starts_with("node 0 GPU_FB_MEM") && text.contains(letter))
            .count()
    };
    assert_eq!((legend("(A)"), legend("(B)")), (4, 2), "{texts:?}");
    assert!(
        texts.iter().any(
            |text| text.starts_with(&format!("node 0 GPU_FB_MEM {GPU0} (A)"))
                && text.contains("out of memory")
        ),
        "{texts:?}"
    );
    // A chart that is not SVG is refused before anything is written.
    let png = dir.path().join("compare.png");
    let refused = on_db(&db)
        .args(["compare", "before", "after", "--out"])
        .arg(&png)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(!png.exists());
}

/// `--html FILE`: the page names the moment GPU0's largest hole differs most, worked out by hand
/// (at 1 s: 256 KiB before, 512 KiB after; at 0 s both 768 KiB, at 2 s 256 against 448 KiB), and
/// links into each run's map page, written beside it, at that memory and snapshot. GPU1 is in
/// one run only: no moment.
#[test]
fn the_page_links_into_each_runs_map_where_they_differ_most() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("both.db");
    imported(&db, &before(dir.path()));
    imported(&db, &after(dir.path()));
    let page = dir.path().join("compare.html");
    let printed = said(&db, &["before", "after", "--html", page.to_str().unwrap()]);
    assert!(printed.contains("compare-a-map.html"), "{printed}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("after fixed the out-of-memory error of before"),
        "the verdict is on the page"
    );
    let snapshot = |run: &str, seq: i64| -> i64 {
        rusqlite::Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT snapshot_id FROM snapshots WHERE run = ?1 AND seq = ?2",
                rusqlite::params![run, seq],
                |row| row.get(0),
            )
            .unwrap()
    };
    let moments = html
        .split("<table id=\"moments\">")
        .nth(1)
        .and_then(|rest| rest.split("</table>").next())
        .expect("a table of moments");
    let rows: Vec<&str> = moments.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 1, "{moments}");
    let cells: Vec<&str> = rows[0]
        .split("<td")
        .skip(1)
        .map(|cell| {
            let text = cell.split_once('>').unwrap().1;
            text.split("</td>").next().unwrap()
        })
        .collect();
    assert_eq!(
        &cells[..8],
        [
            "0",
            "GPU_FB_MEM",
            "0",
            "1.000 s",
            "256 KiB",
            "512 KiB",
            "512 KiB",
            "512 KiB"
        ],
        "{cells:?}"
    );
    let link_a = format!(
        "href=\"compare-a-map.html#memory={GPU0}&amp;snapshot={}\"",
        snapshot("before", 1)
    );
    let link_b = format!(
        "href=\"compare-b-map.html#memory={GPU0}&amp;snapshot={}\"",
        snapshot("after", 1)
    );
    assert!(cells[8].contains(&link_a), "{cells:?} lacks {link_a}");
    assert!(cells[9].contains(&link_b), "{cells:?} lacks {link_b}");
    // Each map page holds its run's snapshot of that moment.
    for (letter, run) in [("a", "before"), ("b", "after")] {
        let map =
            std::fs::read_to_string(dir.path().join(format!("compare-{letter}-map.html"))).unwrap();
        assert!(
            map.contains(&format!("{run} ({})", letter.to_uppercase())),
            "the map names its run"
        );
        assert!(map.contains(GPU0));
    }
    // The chart is on the page.
    assert!(html.contains("A = before (solid), B = after (dashed)"));
    // A page that is not HTML is refused before anything is written.
    let text = dir.path().join("compare.txt");
    let refused = on_db(&db)
        .args(["compare", "before", "after", "--html"])
        .arg(&text)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(!text.exists());
}
