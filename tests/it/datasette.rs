//! Datasette on the demo database: memstate's metadata and plugin served (descriptions, sizes in
//! binary units, offsets in hex), every view equal to `memstate sql`, and every canned query, with
//! its parameters given in each form or left to their defaults, equal to `memstate report`.

use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Value};

use memstate::query::canned::ParamKind;

use crate::dashboards::demo_db;

/// GET a URL of a local server (HTTP/1.0, no keep-alive): the status and the body.
fn http_get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

fn query_string(pairs: &[(&str, String)]) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|byte| match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (byte as char).to_string()
                }
                other => format!("%{other:02X}"),
            })
            .collect()
    };
    pairs
        .iter()
        .map(|(key, value)| format!("{}={}", encode(key), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A Datasette server on a free local port, stopped when dropped.
struct Datasette(std::process::Child, u16);

impl Drop for Datasette {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The demo database served by Datasette with memstate's metadata and plugin.
struct ServedDemo {
    _dir: tempfile::TempDir,
    db: std::path::PathBuf,
    metadata: Value,
    server: Datasette,
}

impl ServedDemo {
    /// A JSON page of the server, which must answer 200.
    fn get_json(&self, path: &str) -> Value {
        let (status, body) = http_get(self.server.1, path);
        assert_eq!(status, 200, "{path}: {body:.500}");
        serde_json::from_str(&body).unwrap_or_else(|error| panic!("{path}: {error}: {body:.300}"))
    }
}

/// None when Datasette is missing (and CI is not set).
fn serve_demo() -> Option<ServedDemo> {
    serve_made(demo_db)
}

/// Datasette serving the database `make` writes into a temporary folder, with memstate's
/// metadata.
fn serve_made(make: impl FnOnce(&Path) -> std::path::PathBuf) -> Option<ServedDemo> {
    if !crate::common::have("datasette", "to serve the demo database with memstate's metadata (.ci/run installs it from PyPI in a virtual environment)") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = make(dir.path());
    let metadata_path = dir.path().join("metadata.json");
    let output = crate::common::on_db(&db)
        .args(["datasette-metadata", "--out"])
        .arg(&metadata_path)
        .arg("--plugins-dir")
        .arg(dir.path().join("plugins"))
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value =
        serde_json::from_str(&std::fs::read_to_string(&metadata_path).unwrap()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new("datasette")
        .arg("serve")
        .arg(&db)
        .arg("-m")
        .arg(&metadata_path)
        .arg("--plugins-dir")
        .arg(dir.path().join("plugins"))
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "--setting",
            "max_returned_rows",
            "100000",
            "--setting",
            "sql_time_limit_ms",
            "20000",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let server = Datasette(child, port);
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", server.1)).is_err() {
        assert!(started.elapsed().as_secs() < 60, "datasette did not start");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Some(ServedDemo {
        _dir: dir,
        db,
        metadata,
        server,
    })
}

#[test]
#[cfg_attr(
    not(has_datasette),
    ignore = "Datasette is not installed (.ci/run installs it from PyPI)"
)]
fn datasette_serves_the_metadata_and_shows_sizes_as_memstate_does() {
    let Some(served) = serve_demo() else {
        return;
    };
    let (db, metadata, port) = (&served.db, &served.metadata, served.server.1);
    let get_json = |path: &str| served.get_json(path);
    // Datasette took the metadata: the views' descriptions and column meanings are served.
    let served = get_json("/-/metadata.json");
    assert_eq!(
        served["databases"]["memstate"]["tables"]["memory_trend"]["description"],
        metadata["databases"]["memstate"]["tables"]["memory_trend"]["description"]
    );
    let (_, page) = http_get(port, "/memstate/memory_trend");
    assert!(
        page.contains("flattened with its snapshot and memory")
            && page.contains("seconds since the Unix epoch"),
        "the view's page shows its description and columns"
    );
    // Sizes in binary units, as the command line prints them (the exact bytes in the tooltip),
    // offsets in hex; the SQL box opens on a public view, not a private table.
    let plugins = get_json("/-/plugins.json");
    assert!(
        plugins.to_string().contains("memstate_datasette"),
        "{plugins}"
    );
    let capacity: i64 = conn_value(db, "SELECT max(capacity) FROM memory_stats");
    let (_, page) = http_get(
        port,
        &format!("/memstate/memory_stats?capacity={capacity}&_size=5"),
    );
    assert!(
        page.contains(&format!(
            "<span title=\"{} bytes\">{}</span>",
            grouped(capacity),
            memstate::units::human_size(capacity).replace(' ', "&nbsp;")
        )),
        "the capacity in binary units: {page:.3000}"
    );
    assert!(
        page.contains("iB</span>") && !page.contains("&nbsp;MB"),
        "{page:.3000}"
    );
    let (_, page) = http_get(port, "/memstate");
    assert!(
        page.contains("select * from snapshots order by snapshot_id desc limit 100"),
        "{page:.3000}"
    );
}

#[test]
#[cfg_attr(
    not(has_datasette),
    ignore = "Datasette is not installed (.ci/run installs it from PyPI)"
)]
fn datasette_serves_every_view_as_memstate_sql_gives_it() {
    let Some(served) = serve_demo() else {
        return;
    };
    let (db, metadata) = (&served.db, &served.metadata);
    let get_json = |path: &str| served.get_json(path);
    // Every view, through the JSON API, holds the rows memstate sql gives.
    let views = metadata["databases"]["memstate"]["tables"]
        .as_object()
        .unwrap();
    let mut checked = 0;
    for (name, table) in views {
        if table.get("hidden") == Some(&json!(true)) {
            continue;
        }
        let from_datasette = get_json(&format!(
            "/memstate/{name}.json?_shape=array&_nocount=1&_size=max"
        ));
        let output = crate::common::on_db(db)
            .args(["sql", "--format", "json", &format!("SELECT * FROM {name}")])
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let from_memstate: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
        let served_rows = from_datasette.as_array().unwrap();
        // Served up to max_returned_rows (100,000 here, more than the demo's largest view): the
        // same rows, in whatever order.
        let sorted = |rows: &[Value]| -> Vec<String> {
            let mut texts: Vec<String> = rows.iter().map(|row| row.to_string()).collect();
            texts.sort();
            texts
        };
        assert!(
            from_memstate.len() < 100_000,
            "{name}: the demo's views fit one page"
        );
        assert_eq!(
            sorted(served_rows),
            sorted(&from_memstate),
            "{name}: Datasette and memstate sql differ"
        );
        checked += 1;
    }
    assert!(checked >= 12, "{checked} views");
}

#[test]
#[cfg_attr(
    not(has_datasette),
    ignore = "Datasette is not installed (.ci/run installs it from PyPI)"
)]
fn datasette_answers_every_canned_query_as_memstate_report_does() {
    let Some(served) = serve_demo() else {
        return;
    };
    // The demo's allocations carry no call stacks: the queries about them are asked of the
    // golden run, whose allocations do (tests/data/run).
    let stacks = |db: &Path| conn_value(db, "SELECT count(*) FROM stack_frames") > 0;
    assert!(!stacks(&served.db));
    let about_stacks = ["live-by-frame"];
    let asked = canned_queries_agree(&served, "demo-seed1", |name| !about_stacks.contains(&name));
    assert_eq!(
        asked + about_stacks.len(),
        memstate::query::canned::all().len()
    );
    let Some(golden) = serve_made(|dir| {
        // Named as the demo's is: Datasette names a database by its file.
        let db = dir.join("memstate.db");
        crate::common::import(&db, &[&crate::common::data("run")], 0);
        db
    }) else {
        return;
    };
    assert!(stacks(&golden.db));
    let asked = canned_queries_agree(&golden, "golden", |name| about_stacks.contains(&name));
    assert_eq!(asked, about_stacks.len());
}

/// Every canned query `wanted` picks, asked of Datasette with parameters left blank, given as
/// ids and given in the other forms the command line takes, equals `memstate report`'s answer,
/// which is not empty. How many were asked.
fn canned_queries_agree(served: &ServedDemo, run: &str, wanted: impl Fn(&str) -> bool) -> usize {
    let (db, metadata) = (&served.db, &served.metadata);
    let get_json = |path: &str| served.get_json(path);
    let mut asked = 0;
    // Every canned query, with parameters and with defaults left blank, equals memstate report.
    let conn = Connection::open(db).unwrap();
    let (snapshot_id, memory_id, snapshot_name, handle): (i64, i64, String, String) = conn
        .query_row(
            "SELECT f.snapshot_id, f.memory_id, s.run || ':' || s.node || ':' || s.seq, m.handle
             FROM failed_requests f JOIN snapshots s USING (snapshot_id) JOIN memories m USING (memory_id)
             LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .unwrap();
    let queries = metadata["databases"]["memstate"]["queries"]
        .as_object()
        .unwrap();
    assert_eq!(queries.len(), memstate::query::canned::all().len());
    for (name, query) in queries {
        if !wanted(name) {
            continue;
        }
        asked += 1;
        let params: Vec<&str> = query["params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|param| param.as_str().unwrap())
            .collect();
        // Defaults left blank (the run too: the demo holds one), every parameter given as an id,
        // and given in the other forms the command line takes (RUN:NODE:SEQ, a memory's 0x id).
        for variant in ["defaults", "given", "forms"] {
            let mut pairs: Vec<(&str, String)> = vec![("_shape", "array".to_string())];
            let mut report = vec![
                "report".to_string(),
                name.clone(),
                "--format".to_string(),
                "json".to_string(),
            ];
            for param in &params {
                // What to give is decided by the kind the query's header declares.
                let declared = memstate::query::canned::find(name)
                    .unwrap()
                    .params
                    .into_iter()
                    .find(|declared| declared.name == *param)
                    .unwrap_or_else(|| panic!("{name}: {param} is served but not declared"));
                let value = match declared.kind {
                    ParamKind::Run if variant == "defaults" => String::new(),
                    ParamKind::Run => run.to_string(),
                    ParamKind::Snapshot if variant == "forms" => snapshot_name.clone(),
                    ParamKind::Snapshot => snapshot_id.to_string(),
                    ParamKind::Memory if variant == "forms" => handle.clone(),
                    ParamKind::Memory => memory_id.to_string(),
                    ParamKind::Limit if variant == "given" => "3".to_string(),
                    ParamKind::Limit => String::new(),
                    other => {
                        panic!("{name}: {param} is of a kind this test does not give: {other:?}")
                    }
                };
                if !value.is_empty() {
                    report.push("-p".to_string());
                    report.push(format!("{param}={value}"));
                }
                pairs.push((param, value));
            }
            let from_datasette =
                get_json(&format!("/memstate/{name}.json?{}", query_string(&pairs)));
            let output = crate::common::on_db(db).args(&report).output().unwrap();
            assert_eq!(
                output.status.code(),
                Some(0),
                "{report:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            let from_memstate: Value = serde_json::from_slice(&output.stdout).unwrap();
            assert!(
                !from_memstate.as_array().unwrap().is_empty(),
                "{name} ({variant}) gives rows on {run}"
            );
            assert_eq!(
                from_datasette, from_memstate,
                "{name} ({variant}): Datasette and memstate report differ"
            );
        }
    }
    asked
}

/// One value of a query on the database.
fn conn_value(db: &Path, sql: &str) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row(sql, [], |row| row.get(0))
        .unwrap()
}

/// A count with thousands separated by commas, as the plugin's tooltip writes it.
fn grouped(count: i64) -> String {
    let digits = count.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}
