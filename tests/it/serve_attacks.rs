//! `memstate serve` under the sixth audit's attacks (issue 59, items 1 to 9), each made small:
//! a huge declared body, an endless request line, idle and stalled connections, statements that
//! would change the connection for later requests, requests from pages of another origin, a
//! statement's memory and time, weak tokens, and a server bound beyond loopback. Each test
//! asserts the guarantee the issue gives: the server's peak memory (VmHWM) and threads read from
//! /proc, a status, or that the next ordinary request is answered.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::serve::{encode, get, get_as, run_db, serve, serve_with, Served};

/// A line of /proc/PID/status, in its unit (kB for memory).
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The server's peak resident memory, in MiB.
fn peak_mib(served: &Served) -> u64 {
    proc_status(served.pid(), "VmHWM") / 1024
}

/// Send raw bytes (ignoring a write the server refused part of) and read what comes back
/// within `wait`: the status of the answer, if one came.
fn raw_status(port: u16, bytes: &[u8], wait: Duration) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(wait)).ok()?;
    stream.set_write_timeout(Some(wait)).ok()?;
    let _ = stream.write_all(bytes);
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !memchr_crlf2(&answer) {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(read) => answer.extend_from_slice(&chunk[..read]),
        }
    }
    String::from_utf8_lossy(&answer)
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
}

fn memchr_crlf2(bytes: &[u8]) -> bool {
    bytes.windows(4).any(|window| window == b"\r\n\r\n")
}

fn sql(port: u16, statement: &str) -> crate::serve::Answer {
    get(port, &format!("/api/sql?q={}", encode(statement)))
}

/// Items 1 and 2: a declared body of 100 GB, with any Host and method, costs nothing and the
/// server goes on; a request line or headers past tens of KiB are refused with 414 and 431, and
/// the server's memory stays small even while a client keeps sending.
#[test]
fn a_declared_body_or_an_endless_head_costs_the_server_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let served = serve(&db, &[]);
    let port = served.port;
    let own = format!("127.0.0.1:{port}");
    for (method, host, expected) in [
        ("GET", "evil.example", 403),
        ("GET", own.as_str(), 200),
        ("POST", own.as_str(), 405),
        ("PUT", "evil.example", 403),
    ] {
        let head = format!(
            "{method} /api/limits HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100000000000\r\n\r\n"
        );
        let mut bytes = head.into_bytes();
        bytes.extend(std::iter::repeat_n(b'x', 64 << 10));
        assert_eq!(
            raw_status(port, &bytes, Duration::from_secs(10)),
            Some(expected),
            "{method} with Host {host}"
        );
    }
    let chunked = format!(
        "GET /api/limits HTTP/1.1\r\nHost: {own}\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffff\r\n"
    );
    assert_eq!(
        raw_status(port, chunked.as_bytes(), Duration::from_secs(10)),
        Some(200)
    );
    // A request line of 40 KiB, and 40 KiB of headers.
    let long_line = format!("GET /{} HTTP/1.1\r\n", "a".repeat(40 << 10));
    assert_eq!(
        raw_status(port, long_line.as_bytes(), Duration::from_secs(10)),
        Some(414)
    );
    let many = format!(
        "GET / HTTP/1.1\r\nHost: {own}\r\n{}\r\n",
        "X-Padding: 0123456789abcdef0123456789abcdef\r\n".repeat(1000)
    );
    assert_eq!(
        raw_status(port, many.as_bytes(), Duration::from_secs(10)),
        Some(431)
    );
    // A client that sends a request line for two seconds, as fast as it can.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let block = vec![b'a'; 1 << 20];
    let _ = stream.write_all(b"GET /");
    let started = Instant::now();
    let mut sent = 0usize;
    while started.elapsed() < Duration::from_secs(2) {
        match stream.write(&block) {
            Ok(written) => sent += written,
            Err(_) => break,
        }
    }
    drop(stream);
    assert_eq!(get(port, "/api/limits").status, 200, "after {sent} bytes");
    let peak = peak_mib(&served);
    assert!(peak < 128, "peak {peak} MiB after the heads and bodies");
}

/// Item 3: connections held open are bounded (a thread each, at most a fixed number), the rest
/// are refused at once; once they close the server answers again, also after running out of
/// file descriptors.
#[test]
fn idle_connections_are_bounded_and_the_server_keeps_listening() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let served = serve(&db, &[]);
    let port = served.port;
    let idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert!(idle.len() > 200, "only {} connections made", idle.len());
    std::thread::sleep(Duration::from_millis(500));
    let threads = proc_status(served.pid(), "Threads");
    assert!(
        threads <= 80,
        "{threads} threads for {} idle connections",
        idle.len()
    );
    // A client meanwhile is answered (503 while the slots are full), never left hanging.
    let meanwhile = raw_status(
        port,
        format!("GET /api/limits HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
        Duration::from_secs(15),
    );
    assert!(
        matches!(meanwhile, Some(200 | 503)),
        "answered {meanwhile:?}"
    );
    drop(idle);
    assert_eq!(eventually_ok(port), 200);
    drop(served);

    // With few file descriptors, accept fails while the connections are held; it recovers.
    let limited = serve_with(&db, &[], |command| {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit in the child before exec touches nothing of the parent.
        unsafe {
            command.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 40,
                    rlim_max: 40,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    });
    let held: Vec<TcpStream> = (0..100)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", limited.port)).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    drop(held);
    assert_eq!(eventually_ok(limited.port), 200);
}

/// GET /api/limits until it is answered 200 (at most 20 s: idle connections the server still
/// holds end at its head time limit, 10 s).
fn eventually_ok(port: u16) -> u16 {
    let started = Instant::now();
    loop {
        let status = raw_status(
            port,
            format!(
                "GET /api/limits HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
            Duration::from_secs(5),
        );
        if status == Some(200) || started.elapsed() > Duration::from_secs(20) {
            return status.unwrap_or(0);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Item 4: sixteen clients that ask for a 14 MB answer and never read it hold no worker (an
/// ordinary request is answered meanwhile), and the answers they leave are held up to a fixed
/// total (128 MiB; the others get 503), so the server's peak stays bounded.
#[test]
fn clients_that_do_not_read_their_answers_block_no_worker() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let served = serve(&db, &[]);
    let port = served.port;
    let big = encode(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) SELECT x, printf('%.14000c', 'x') AS pad FROM c",
    );
    let stalled: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(
                stream,
                "GET /api/sql?q={big} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
            )
            .unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let asked = Instant::now();
    let answer = get(port, "/api/overview");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "answered after {:?} beside 16 stalled readers",
        asked.elapsed()
    );
    let peak = peak_mib(&served);
    assert!(peak < 512, "peak {peak} MiB beside 16 stalled readers");
    drop(stalled);
}

/// Item 5: no statement through the SQL box changes what later requests get, and an import into
/// the served file goes through and is followed.
#[test]
fn no_statement_changes_what_later_requests_see() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::common::write_json(dir.path(), "small.json", &crate::common::small());
    let db = dir.path().join("t.db");
    crate::common::import(&db, &[&path], 0);
    let served = serve(&db, &[]);
    let port = served.port;
    for statement in [
        "PRAGMA hard_heap_limit=100000",
        "PRAGMA soft_heap_limit=1000",
        "SELECT * FROM pragma_hard_heap_limit(100000)",
        "PRAGMA query_only=0",
        "PRAGMA temp_store=MEMORY",
        "PRAGMA cache_size=100000000",
        "PRAGMA busy_timeout=0",
        "PRAGMA writable_schema=1",
        "BEGIN",
        "BEGIN IMMEDIATE",
        "SAVEPOINT held",
        "ATTACH ':memory:' AS other",
    ] {
        // Four times, so that every worker's connection is asked.
        for _ in 0..4 {
            let answer = sql(port, statement);
            assert!(
                (400..500).contains(&answer.status),
                "{statement}: {} {}",
                answer.status,
                answer.body
            );
        }
    }
    // Describing the schema is still allowed.
    let described = sql(port, "PRAGMA table_info(snapshots)");
    assert_eq!(described.status, 200, "{}", described.body);
    assert!(described.body.contains("snapshot_id"), "{}", described.body);
    for _ in 0..8 {
        assert_eq!(get(port, "/api/overview").status, 200);
        assert_eq!(sql(port, "SELECT count(*) FROM snapshots").status, 200);
    }
    // An import into the served file lands at once, and the page sees it.
    let next = crate::common::set(
        crate::common::small(),
        "/snapshot/seq",
        serde_json::json!(77),
    );
    let later = crate::common::write_json(dir.path(), "later.json", &next);
    let started = Instant::now();
    crate::common::import(&db, &[&later], 0);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the import waited {:?}",
        started.elapsed()
    );
    let overview = get(port, "/api/overview").json();
    let seqs: Vec<i64> = overview["snapshots"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|row| row["seq"].as_i64())
        .collect();
    assert!(seqs.contains(&77), "{seqs:?}");
}

/// Item 6: what a page of another origin (another host, or another port of this one) asks is
/// refused, with or without a token, unless it opens a page; the page's own requests pass.
#[test]
fn requests_from_pages_of_another_origin_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let token = "0f3a9c1e77b2d4e5aa19";
    for args in [vec![], vec!["--token", token]] {
        let served = serve(&db, &args);
        let port = served.port;
        let cookie = format!("memstate_token_{port}={token}");
        let with = |extra: &[(&str, &str)]| -> Vec<(String, String)> {
            let mut headers: Vec<(String, String)> = extra
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect();
            if !args.is_empty() {
                headers.push(("Cookie".to_string(), cookie.clone()));
            }
            headers
        };
        let ask = |path: &str, extra: &[(&str, &str)]| {
            let headers = with(extra);
            let borrowed: Vec<(&str, &str)> = headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect();
            get_as(port, path, None, &borrowed).status
        };
        let statement = format!("/api/sql?q={}", encode("SELECT 1"));
        let other_port = format!("http://127.0.0.1:{}", port.wrapping_add(1).max(1));
        let referer = format!("{other_port}/attack.html");
        // What Chromium sends for <img src> from a page on another port: same-site, no-cors.
        for foreign in [
            vec![
                ("Sec-Fetch-Site", "same-site"),
                ("Sec-Fetch-Mode", "no-cors"),
                ("Sec-Fetch-Dest", "image"),
            ],
            vec![
                ("Sec-Fetch-Site", "cross-site"),
                ("Sec-Fetch-Mode", "no-cors"),
                ("Sec-Fetch-Dest", "image"),
            ],
            vec![("Origin", other_port.as_str())],
            vec![("Referer", referer.as_str())],
            vec![
                ("Sec-Fetch-Site", "cross-site"),
                ("Sec-Fetch-Mode", "navigate"),
                ("Sec-Fetch-Dest", "iframe"),
            ],
        ] {
            assert_eq!(ask(&statement, &foreign), 403, "{foreign:?} {args:?}");
            assert_eq!(ask("/api/overview", &foreign), 403, "{foreign:?} {args:?}");
        }
        // A link followed from elsewhere opens the page; the API is not opened that way.
        let navigate = [
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "navigate"),
            ("Sec-Fetch-Dest", "document"),
        ];
        assert_eq!(ask("/", &navigate), 200, "{args:?}");
        assert_eq!(ask(&statement, &navigate), 403, "{args:?}");
        // The page's own requests, and a program that sends none of these headers, pass.
        let own_origin = format!("http://127.0.0.1:{port}");
        let own_referer = format!("{own_origin}/");
        for own in [
            vec![
                ("Sec-Fetch-Site", "same-origin"),
                ("Sec-Fetch-Mode", "cors"),
            ],
            vec![("Origin", own_origin.as_str())],
            vec![("Referer", own_referer.as_str())],
            vec![],
        ] {
            assert_eq!(ask(&statement, &own), 200, "{own:?} {args:?}");
        }
    }
}

/// Item 7: what one statement may make the server hold is bounded (a 4xx past it, the server
/// goes on), over four requests at once, and a statement stops within twice its time limit.
#[test]
fn a_statement_is_held_to_bounded_memory_and_twice_its_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let served = serve(&db, &["--time-limit", "2"]);
    let port = served.port;
    let rows = |n: u64| {
        format!("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {n})")
    };
    // One value of 60 MB, and twenty of 5 MB (each within the value limit, not together).
    assert_eq!(sql(port, "SELECT zeroblob(60000000)").status, 413);
    let twenty = sql(
        port,
        &format!("{} SELECT zeroblob(5000000) FROM c", rows(20)),
    );
    assert_eq!(twenty.status, 400, "{}", twenty.body);
    // Four heavy statements at once: a large sort, a giant string, an endless recursion, a
    // wide grouping. Each is answered (200 within the limit, 408 past it, 413 past memory).
    let heavy = [
        format!(
            "{} SELECT x, randomblob(300) AS b FROM c ORDER BY b LIMIT 1",
            rows(5_000_000)
        ),
        format!(
            "{} SELECT length(group_concat(hex(randomblob(1000)))) FROM c",
            rows(1_000_000)
        ),
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
            .to_string(),
        format!(
            "{} SELECT x, count(*) FROM c GROUP BY randomblob(64) LIMIT 1",
            rows(5_000_000)
        ),
    ];
    let askers: Vec<_> = heavy
        .into_iter()
        .map(|statement| {
            std::thread::spawn(move || {
                let started = Instant::now();
                let answer = sql(port, &statement);
                (statement, answer.status, answer.body, started.elapsed())
            })
        })
        .collect();
    for asker in askers {
        let (statement, status, body, took) = asker.join().unwrap();
        assert!(
            matches!(status, 200 | 408 | 413),
            "{statement}: {status} {body}"
        );
        assert!(
            took < Duration::from_secs(4),
            "{statement}: answered {status} after {took:?} with a 2 s limit"
        );
    }
    assert_eq!(get(port, "/api/overview").status, 200);
    let peak = peak_mib(&served);
    assert!(peak < 512, "peak {peak} MiB");
}

/// Item 8: an empty or guessable token is refused before anything listens, exit 2.
#[test]
fn an_empty_or_guessable_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    for token in ["", "s3cret", "aaaaaaaaaaaaaaaaaaaaaaaa"] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"))
            .env_remove("MEMSTATE_DB")
            .arg("--db")
            .arg(&db)
            .args(["serve", "--port", "0", "--token", token])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A server that took the token listens until stopped: ended here after 10 s.
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(2), "--token {token:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--token"), "{stderr}");
        assert!(output.stdout.is_empty(), "it listened: {:?}", output.stdout);
    }
}

/// Item 9: bound beyond loopback, a browser on another machine that opens the printed URL (by
/// the machine's address or name) with the token is served; without the token it is not.
#[test]
fn bound_beyond_loopback_the_token_opens_it_by_any_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = run_db(dir.path());
    let served = serve(&db, &["--bind", "0.0.0.0"]);
    let port = served.port;
    assert!(
        !served.url.starts_with("http://0.0.0.0"),
        "the printed URL names no address another machine can open: {}",
        served.url
    );
    let token = served.url.rsplit("token=").next().unwrap().to_string();
    for host in [
        format!("192.0.2.7:{port}"),
        format!("gpu-node-3.example:{port}"),
    ] {
        let opened = get_as(port, &format!("/?token={token}"), Some(&host), &[]);
        assert_eq!(opened.status, 200, "Host {host}: {}", opened.body);
        let without = get_as(port, "/api/overview", Some(&host), &[]);
        assert_eq!(without.status, 401, "Host {host}");
    }
    // Loopback without a token still refuses a foreign Host (DNS rebinding).
    drop(served);
    let local = serve(&db, &[]);
    let rebound = get_as(local.port, "/api/overview", Some("rebind.example:80"), &[]);
    assert_eq!(rebound.status, 403);
}
