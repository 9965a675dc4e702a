//! What people see in a terminal: each command run on a pseudo-terminal of 80 and of 120
//! columns (the width a terminal reports), every line of its output within the width, with
//! the columns it hid named.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;

use crate::common::simulated_db;

/// Run memstate with its standard output on a terminal `columns` wide; what it printed there,
/// colour escapes and carriage returns taken out.
fn in_terminal(db: &Path, columns: u16, args: &[&str]) -> String {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 50,
        ws_col: columns,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills two descriptors it opens; the pointers are to locals that live on.
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(opened, 0, "openpty");
    // SAFETY: the descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memstate"))
        .env_remove("MEMSTATE_DB")
        .env_remove("COLUMNS")
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(slave))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::fs::File::from(master);
    let mut bytes = Vec::new();
    // Read until the terminal closes (EIO once the child and every copy of the slave are gone).
    let mut chunk = [0u8; 65536];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(count) => bytes.extend_from_slice(&chunk[..count]),
        }
    }
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{args:?}: {stderr}");
    let text = String::from_utf8_lossy(&bytes).replace('\r', "");
    let mut plain = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for next in chars.by_ref() {
                if next.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

#[test]
fn every_command_fits_a_terminal_of_80_and_of_120_columns() {
    let dir = tempfile::tempdir().unwrap();
    let db = simulated_db(
        dir.path(),
        &memstate::sim::Config {
            nodes: 2,
            ..Default::default()
        },
    );
    let failures: i64 = crate::common::scalar(&db, "SELECT count(*) FROM failed_requests");
    assert!(failures > 0, "the simulated run should fail a request");
    let commands: &[&[&str]] = &[
        &["stats"],
        &["oom"],
        &["map"],
        &["trend"],
        &["snapshots"],
        &["holes"],
        &["allocations"],
        &["memories"],
        &["blockers", "--size", "1GiB"],
        &["report", "nodes"],
    ];
    for columns in [80u16, 120] {
        for args in commands {
            let text = in_terminal(&db, columns, args);
            assert!(text.lines().count() > 1, "{args:?} printed little: {text}");
            for line in text.lines() {
                assert!(
                    line.chars().count() <= usize::from(columns),
                    "{args:?} at {columns} columns: a line of {} characters:\n{line}\n\n{text}",
                    line.chars().count()
                );
            }
        }
    }
    // What was hidden to fit is named, and --wide shows it.
    let narrow = in_terminal(&db, 80, &["stats"]);
    let joined = narrow.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(joined.contains("hidden to fit the terminal:"), "{narrow}");
    let wide = in_terminal(&db, 80, &["stats", "--wide"]);
    assert!(wide.contains("largest_reclaimable"), "{wide}");
}
