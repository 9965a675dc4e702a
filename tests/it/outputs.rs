//! Files the commands write (pages, charts, metadata) never replace the database, its companions
//! or a dump it imported, however the path is spelled, and are written whole (issue 17, item 1).

use std::path::Path;

use crate::common::{data, import, memstate};

/// Every command that writes a file, with the option that names it.
const WRITERS: [&[&str]; 5] = [
    &["map", "--html"],
    &["oom", "--html"],
    &["blockers", "--size", "1", "--html"],
    &["datasette-metadata", "-o"],
    &["plot", "--out"],
];

fn digest(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn outputs_never_overwrite_the_database_or_an_imported_dump() {
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path();
    // A database whose name ends in .svg, so that `plot --out` (which wants .svg) can name it.
    let db = here.join("X.svg");
    let dump = here.join("d.json");
    std::fs::copy(data("small.json"), &dump).unwrap();
    let stream = here.join("s.ndjson");
    let mut line = serde_json::to_vec(&crate::common::set(
        crate::common::small(),
        "/snapshot/seq",
        serde_json::json!(9),
    ))
    .unwrap();
    line.push(b'\n');
    std::fs::write(&stream, &line).unwrap();
    import(&db, &[&dump, &stream], 0);
    std::os::unix::fs::symlink("X.svg", here.join("link.svg")).unwrap();
    std::os::unix::fs::symlink("d.json", here.join("dl")).unwrap();
    std::fs::create_dir(here.join("sub")).unwrap();
    let before = (digest(&db), digest(&dump), digest(&stream));
    let absolute = db.to_str().unwrap().to_string();
    for output in [
        "X.svg",
        "./X.svg",
        "sub/../X.svg",
        absolute.as_str(),
        "X.svg-wal",
        "X.svg-shm",
        "X.svg-journal",
        "link.svg",
        "d.json",
        "./d.json",
        "dl",
        "s.ndjson",
    ] {
        for writer in WRITERS {
            // plot only writes .svg: the dumps' names are refused earlier for it, also with exit 2.
            let assert = memstate()
                .current_dir(here)
                .args(["--db", "X.svg"])
                .args(writer)
                .arg(output)
                .assert()
                .code(2);
            let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
            assert!(
                stderr.contains("refusing to write over it") || writer[0] == "plot",
                "{writer:?} {output}: {stderr}"
            );
        }
    }
    assert!(
        before == (digest(&db), digest(&dump), digest(&stream)),
        "nothing changed"
    );
    for companion in ["X.svg-wal", "X.svg-shm", "X.svg-journal"] {
        assert!(
            !here.join(companion).exists(),
            "{companion} was not created"
        );
    }
    // The database is still a database, and other outputs are written, whole, with no leftovers.
    for writer in WRITERS {
        let output = if writer[0] == "plot" {
            "out.svg"
        } else {
            "out.html"
        };
        memstate()
            .current_dir(here)
            .args(["--db", "X.svg"])
            .args(writer)
            .arg(output)
            .assert()
            .code(0);
        assert!(std::fs::metadata(here.join(output)).unwrap().len() > 0);
    }
    let leftovers: Vec<_> = std::fs::read_dir(here)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn an_output_keeps_its_permissions_and_replaces_a_link_target() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path();
    let db = here.join("t.db");
    import(&db, &[&data("small.json")], 0);
    let page = here.join("pages").join("page.html");
    std::fs::create_dir(here.join("pages")).unwrap();
    std::fs::write(&page, "old").unwrap();
    std::fs::set_permissions(&page, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("pages/page.html", here.join("latest.html")).unwrap();
    memstate()
        .current_dir(here)
        .args(["--db", "t.db", "map", "--html", "latest.html"])
        .assert()
        .code(0);
    // The link still points at the page, which holds the new map with its old permissions.
    assert!(std::fs::symlink_metadata(here.join("latest.html"))
        .unwrap()
        .file_type()
        .is_symlink());
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains("<html"), "{}", &text[..text.len().min(80)]);
    let mode = std::fs::metadata(&page).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}
