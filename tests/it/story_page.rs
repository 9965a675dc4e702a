//! The map page the OOM story writes: opening on the demo's failure with its window and blockers
//! marked, every deep link form, opening on the most fragmented memory without a failure, the
//! history view on a run of 1,000 snapshots, the links `oom` and `blockers` print, and the charts.

use rusqlite::Connection;
use serde_json::json;

use crate::common::{import, json_of, memstate, on_db, small, text_of, write, write_json};
use crate::story::{allocation, demo_failure, story_db};
use crate::viz::{body_attribute, browser, dom_of, screenshot};

/// The demo run written to a temporary folder, with what `blockers` says of its failure.
struct DemoPage {
    dir: tempfile::TempDir,
    page: std::path::PathBuf,
    conn: Connection,
    snapshot_id: i64,
    handle: String,
    node: i64,
    seq: i64,
    size: u64,
    window_start: u64,
    blockers: Vec<String>,
}

fn demo_page() -> DemoPage {
    let dir = tempfile::tempdir().unwrap();
    let output = memstate()
        .arg("demo")
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let db = dir.path().join("memstate.db");
    let page = dir.path().join("map.html");
    let conn = Connection::open(&db).unwrap();
    let (snapshot_id, _, handle, node, seq, size) = demo_failure(&conn);
    // What `blockers` lists for the same request at the same place.
    let alignment: i64 = conn
        .query_row(
            "SELECT coalesce(alignment, 1) FROM failed_requests WHERE snapshot_id = ?1",
            [snapshot_id],
            |row| row.get(0),
        )
        .unwrap();
    let asked = json_of(
        &db,
        &[
            "blockers",
            "--size",
            &size.to_string(),
            "--alignment",
            &alignment.to_string(),
            "-s",
            &snapshot_id.to_string(),
            "-m",
            &handle,
        ],
    );
    let window_start = asked[0]["blockers"]["offset"].as_u64().unwrap();
    let blockers: Vec<String> = asked[0]["blockers"]["blocking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|blocker| blocker["uid"].as_str().unwrap().to_string())
        .collect();
    assert!(!blockers.is_empty());

    DemoPage {
        dir,
        page,
        conn,
        snapshot_id,
        handle,
        node,
        seq,
        size,
        window_start,
        blockers,
    }
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "headless Chromium is not installed (.ci/run installs it)"
)]
fn the_demo_page_opens_on_the_failure_with_its_window_and_blockers_marked() {
    if browser().is_none() {
        return;
    }
    let DemoPage {
        dir,
        page,
        snapshot_id,
        handle,
        size,
        window_start,
        blockers,
        ..
    } = demo_page();
    let dom = dom_of(&page, "");
    screenshot(&page, "", &dir.path().join("demo-map.png"));
    assert_eq!(body_attribute(&dom, "data-error"), None, "script error");
    assert_eq!(
        body_attribute(&dom, "data-memory").as_deref(),
        Some(handle.as_str()),
        "opens on the failed memory"
    );
    assert_eq!(
        body_attribute(&dom, "data-snapshot"),
        Some(snapshot_id.to_string()),
        "and the failed snapshot"
    );
    assert_eq!(
        body_attribute(&dom, "data-window"),
        Some(format!("{window_start}:{}", window_start + size)),
        "the request's window is marked"
    );
    assert_eq!(
        body_attribute(&dom, "data-blockers"),
        Some(blockers.join(" ")),
        "the blockers are outlined"
    );
    assert!(
        body_attribute(&dom, "data-verdict")
            .unwrap()
            .starts_with("Fragmentation."),
        "{dom:.0}"
    );
    assert!(
        dom.contains("Out of memory: a request of"),
        "the verdict panel"
    );
    let rects: u64 = body_attribute(&dom, "data-history-rects")
        .expect("the history is drawn")
        .parse()
        .unwrap();
    assert!(rects > 10, "{rects} history rectangles");
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "headless Chromium is not installed (.ci/run installs it)"
)]
fn every_deep_link_form_of_the_demo_page_lands_or_says_why_not() {
    if browser().is_none() {
        return;
    }
    let DemoPage {
        dir,
        page,
        conn,
        snapshot_id,
        handle,
        node,
        seq,
        blockers,
        ..
    } = demo_page();
    // memory + snapshot: another GPU of the node, at the node's first snapshot on the page.
    let (other, earlier): (String, i64) = conn
        .query_row(
            "SELECT m.handle, (SELECT min(snapshot_id) FROM (SELECT snapshot_id FROM snapshots WHERE node = ?1 AND seq <= ?2 ORDER BY seq DESC LIMIT 10))
             FROM memories m WHERE m.node = ?1 AND m.kind = 'GPU_FB_MEM' AND m.handle <> ?3",
            rusqlite::params![node, seq, handle],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    let dom = dom_of(&page, &format!("#memory={other}&snapshot={earlier}"));
    assert_eq!(
        (
            body_attribute(&dom, "data-memory"),
            body_attribute(&dom, "data-snapshot")
        ),
        (Some(other.clone()), Some(earlier.to_string()))
    );
    assert_eq!(body_attribute(&dom, "data-message"), None);
    // The handle as Realm prints it (16 bare digits), a range and a probe on the first blocker.
    let first: (u64, u64) = conn
        .query_row(
            "SELECT offset, size FROM allocations WHERE snapshot_id = ?1 AND uid = ?2",
            rusqlite::params![snapshot_id, blockers[0]],
            |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, i64>(1)? as u64)),
        )
        .unwrap();
    let bare = handle.trim_start_matches("0x");
    let dom = dom_of(
        &page,
        &format!(
            "#memory={bare}&snapshot={snapshot_id}&range={}:{}&probe={}",
            first.0,
            first.0 + first.1,
            first.0 + first.1 / 2
        ),
    );
    assert_eq!(
        body_attribute(&dom, "data-memory").as_deref(),
        Some(handle.as_str())
    );
    assert_eq!(
        body_attribute(&dom, "data-view"),
        Some(format!("{}:{}", first.0, first.0 + first.1))
    );
    let probe = body_attribute(&dom, "data-probe").unwrap();
    assert!(
        probe.contains(&format!("uid {}", blockers[0])) && probe.contains("BLOCKS the request"),
        "{probe}"
    );
    // time=: the snapshot current at a time (here the earlier snapshot's own time).
    let time: f64 = conn
        .query_row(
            "SELECT time_s FROM snapshots WHERE snapshot_id = ?1",
            [earlier],
            |row| row.get(0),
        )
        .unwrap();
    let dom = dom_of(&page, &format!("#time={time}"));
    assert_eq!(
        body_attribute(&dom, "data-jumped"),
        Some(earlier.to_string())
    );
    // A handle or snapshot that is not on the page: a message, not another memory.
    let dom = dom_of(&page, "#memory=0x1e00000000000077&snapshot=1");
    let message = body_attribute(&dom, "data-message").expect("a message");
    assert!(
        message.contains("No memory 0x1e00000000000077") || message.contains("no snapshot 1"),
        "{message}"
    );
    let dom = dom_of(
        &page,
        &format!("#memory=0x1e00000000000077&snapshot={snapshot_id}"),
    );
    assert!(
        body_attribute(&dom, "data-message")
            .unwrap()
            .contains("No memory 0x1e00000000000077"),
        "{dom:.0}"
    );
    assert!(
        dom.contains("data-hidden=\"1\""),
        "nothing else is drawn in its place"
    );
    screenshot(
        &page,
        "#memory=0x1e00000000000077",
        &dir.path().join("demo-wrong.png"),
    );
    let dom = dom_of(&page, "#snapshot=999999");
    assert!(body_attribute(&dom, "data-message")
        .unwrap()
        .contains("no snapshot 999999"));
    let dom = dom_of(&page, "#range=9:3");
    assert!(body_attribute(&dom, "data-message")
        .unwrap()
        .contains("not START:END"));
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "headless Chromium is not installed (.ci/run installs it)"
)]
fn without_a_failure_the_page_opens_on_the_most_fragmented_memory() {
    if browser().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The example without its failed request, the SYSTEM memory listed first: SYSTEM has one
    // listed hole (fragmentation 0), the GPU 1 - 225280 / 323584 = 0.30.
    let mut value = small();
    let memories = value["memories"].as_array_mut().unwrap();
    memories.reverse();
    for memory in memories.iter_mut() {
        memory.as_object_mut().unwrap().remove("failed_requests");
    }
    value["snapshot"]["reason"] = json!("periodic");
    let db = dir.path().join("t.db");
    import(&db, &[&write_json(dir.path(), "quiet.json", &value)], 0);
    let page = dir.path().join("quiet.html");
    let output = on_db(&db)
        .args(["map", "--html"])
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains("#memory=0x1e00000000000003&snapshot=1"),
        "{said}"
    );
    let dom = dom_of(&page, "");
    assert_eq!(
        body_attribute(&dom, "data-memory").as_deref(),
        Some("0x1e00000000000003")
    );
    assert_eq!(
        body_attribute(&dom, "data-window"),
        None,
        "no request marked"
    );
    // Issue 29, item 11: the help's example link is this page's own, not the demo's
    // (#memory=0x1e00000000000002&snapshot=34 on every page before).
    assert!(
        dom.contains("#memory=0x1e00000000000003&amp;snapshot=1&amp;range=START:END")
            && !dom.contains("snapshot=34"),
        "{}",
        &dom[dom.find("Links:").unwrap_or(0)..][..300.min(dom.len())]
    );
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "headless Chromium is not installed (.ci/run installs it)"
)]
fn the_history_of_a_thousand_snapshots_draws_and_tells_what_lived_where() {
    if browser().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 1,000 snapshots, 10 ms apart, of a 1 GiB memory: one allocation pinned in the middle
    // (uid 1, [512 MiB, 528 MiB), valid throughout) and 50 others that each live one snapshot:
    // 50,001 spans.
    let mut lines = String::new();
    for seq in 0..1000u64 {
        let mut allocations = vec![allocation(1, "instance", "valid", 512 << 20, 16 << 20)];
        for slot in 0..50u64 {
            let state = if slot % 3 == 0 {
                "collectable"
            } else {
                "valid"
            };
            allocations.push(allocation(
                2 + seq * 50 + slot,
                "deferred_buffer",
                state,
                slot * (8 << 20),
                4 << 20,
            ));
        }
        let dumped = json!({"format": "memstate-dump", "version": 1, "run": {"id": "long", "node": 0},
            "snapshot": {"seq": seq, "time_ns": seq * 10_000_000, "reason": "periodic"},
            "memories": [{"id": "0x1e00000000000003", "kind": "GPU_FB_MEM", "capacity": 1u64 << 30, "allocations": allocations}]});
        lines.push_str(&dumped.to_string());
        lines.push('\n');
    }
    let run = write(dir.path(), "long.ndjson", lines.as_bytes());
    let db = dir.path().join("t.db");
    import(&db, &[&run], 0);
    let conn = Connection::open(&db).unwrap();
    let (first, last): (i64, i64) = conn
        .query_row(
            "SELECT min(snapshot_id), max(snapshot_id) FROM snapshots",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    let page = dir.path().join("history.html");
    let output = on_db(&db)
        .args(["map", "--html"])
        .arg(&page)
        .args(["--history", "-m", "0x1e00000000000003"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("history of 50001 allocation spans"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // At 5 s, 520 MiB: the pinned allocation, from the first snapshot to the last.
    let dom = dom_of(&page, &format!("#at=5:{}", 520u64 << 20));
    assert_eq!(body_attribute(&dom, "data-error"), None);
    let rects: u64 = body_attribute(&dom, "data-history-rects")
        .unwrap()
        .parse()
        .unwrap();
    assert!(rects > 1000, "{rects} rectangles drawn");
    let first_draw = body_attribute(&dom, "data-history-first-draw-ms").unwrap();
    eprintln!("history of 1,000 snapshots and 50,001 spans: first draw {first_draw} ms, {rects} rectangles, page {} bytes", std::fs::metadata(&page).unwrap().len());
    let probe = body_attribute(&dom, "data-history-probe").unwrap();
    assert!(
        probe.contains("uid 0x0000000000000001")
            && probe.contains(&format!("snapshots {first} to {last}"))
            && probe.contains("instance, valid"),
        "{probe}"
    );
    // At 5.005 s, 2 MiB: the slot-0 allocation of snapshot 500 (uid 2 + 500 * 50), collectable.
    let dom = dom_of(&page, &format!("#at=5.005:{}", 2u64 << 20));
    let probe = body_attribute(&dom, "data-history-probe").unwrap();
    assert!(
        probe.contains(&format!("uid 0x{:016x}", 2 + 500 * 50)) && probe.contains("collectable"),
        "{probe}"
    );
    // Between slots (6 MiB lies in [4 MiB, 8 MiB), free throughout): nothing.
    let dom = dom_of(&page, &format!("#at=5:{}", 6u64 << 20));
    assert_eq!(
        body_attribute(&dom, "data-history-probe").as_deref(),
        Some("nothing")
    );
    screenshot(&page, "", &dir.path().join("history.png"));
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "headless Chromium is not installed (.ci/run installs it)"
)]
fn oom_and_blockers_write_the_page_and_print_links_into_it() {
    if browser().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = story_db(dir.path());
    let page = dir.path().join("oom.html");
    let text = text_of(&db, &["oom", "--html", page.to_str().unwrap()]);
    let links: Vec<&str> = text
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("map             "))
        .collect();
    assert_eq!(links.len(), 3, "{text}");
    for link in &links {
        assert!(
            link.starts_with("file://")
                && link.contains("oom.html#memory=0x1e00000000000003&snapshot=2"),
            "{link}"
        );
    }
    // The link of the 4500-byte request opens on its window, [5500, 10000).
    let fragment = links
        .iter()
        .find(|link| link.contains("range=4150:10000"))
        .unwrap()
        .split_once('#')
        .unwrap()
        .1;
    let dom = dom_of(&page, &format!("#{fragment}"));
    assert_eq!(
        body_attribute(&dom, "data-window").as_deref(),
        Some("5500:10000")
    );
    assert_eq!(
        body_attribute(&dom, "data-blockers").as_deref(),
        Some("0x0000000000000004")
    );
    let view = body_attribute(&dom, "data-view").unwrap();
    assert!(view.starts_with("4150:"), "{view}");
    // blockers --html: the asked-about request marked.
    let asked = dir.path().join("asked.html");
    let text = text_of(
        &db,
        &[
            "blockers",
            "--size",
            "4500",
            "-s",
            "1",
            "--html",
            asked.to_str().unwrap(),
        ],
    );
    assert!(
        text.contains("asked.html#memory=0x1e00000000000003&snapshot=1&range="),
        "{text}"
    );
    let dom = dom_of(&asked, "");
    assert!(
        body_attribute(&dom, "data-window").is_some()
            && body_attribute(&dom, "data-snapshot").as_deref() == Some("1"),
        "{dom:.0}"
    );
    assert!(
        dom.contains("A request of 4.4 KiB."),
        "the panel says it was asked, not failed"
    );
}

#[test]
fn the_charts_name_the_failed_memory_and_draw_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let db = story_db(dir.path());
    let svg_path = dir.path().join("largest.svg");
    text_of(
        &db,
        &[
            "plot",
            "--metric",
            "largest-hole",
            "--x",
            "seq",
            "--out",
            svg_path.to_str().unwrap(),
        ],
    );
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(
        svg.contains("OOM: node 0 0x1e00000000000003"),
        "the OOM mark names the memory"
    );
    assert!(
        svg.contains("(out of memory)"),
        "the failed memory's line is named in the legend"
    );
    for size in ["4.4 KiB", "6.8 KiB", "3.4 KiB"] {
        assert!(
            svg.contains(&format!("failed request: {size}")),
            "a line for the {size} request"
        );
    }
    assert!(
        svg.contains("stroke-width=\"5\""),
        "the failed memory's line is thick"
    );
    assert!(
        !svg.to_lowercase().contains("#f0e442") && !svg.contains("rgb(240,228,66)"),
        "no faint yellow"
    );
    // Figures a request does not compare with get no request line.
    let frag = dir.path().join("frag.svg");
    text_of(
        &db,
        &[
            "plot",
            "--metric",
            "fragmentation",
            "--out",
            frag.to_str().unwrap(),
        ],
    );
    assert!(!std::fs::read_to_string(&frag)
        .unwrap()
        .contains("failed request"));
    // A PNG is refused, naming the file; nothing is written.
    let png = dir.path().join("x.png");
    let output = on_db(&db)
        .args(["plot", "--out"])
        .arg(&png)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("x.png") && !png.exists());
}
