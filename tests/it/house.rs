//! The shape of the source tree: no file too long to read, and no two modules that lean on each
//! other. Read from the source itself, so a change that breaks the shape fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a source file may be.
const MAX_LINES: usize = 700;

fn source_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.sort();
    files
}

/// A file's module path under src/: `src/db/writer.rs` is `["db", "writer"]`, a folder's
/// `mod.rs` is the folder.
fn module_of(path: &Path) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let relative = path.strip_prefix(&src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts
}

/// The code of a file without its comments (a `//` comment may name another module).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names a path prefix is followed by: `super::map` gives `map`, `super::{map, oom::Story}`
/// gives `map` and `oom`.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    names.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// A cycle in a graph of named nodes, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|seen| seen == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The rooms that compute and draw read nothing: a story is told, an analysis made and a page or
/// chart drawn from what `query` gathered (issue 28: one loader, pure stories). None of their
/// files names SQLite or a connection.
#[test]
fn the_rooms_that_compute_and_draw_read_no_database() {
    let pure = ["story", "analysis", "viz", "present", "dump", "units"];
    let reading: Vec<String> = source_files()
        .iter()
        .filter(|path| {
            module_of(path)
                .first()
                .is_some_and(|room| pure.contains(&room.as_str()))
        })
        .filter(|path| {
            let code = code_of(&std::fs::read_to_string(path).unwrap());
            code.contains("rusqlite") || code.contains("Connection")
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(reading.is_empty(), "these read the database: {reading:?}");
}

/// The commands ask the rooms that read (issue 28): a command holds a [`memstate::db::Database`],
/// whose connection is private, and runs no SQL of its own.
#[test]
fn the_commands_hold_no_connection_and_run_no_sql() {
    let commands = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands");
    let mut offending = Vec::new();
    for entry in std::fs::read_dir(&commands).unwrap() {
        let path = entry.unwrap().path();
        let code = code_of(&std::fs::read_to_string(&path).unwrap());
        for sign in [
            "rusqlite",
            "Connection",
            ".prepare(",
            ".query_row(",
            ".execute_batch(",
        ] {
            if code.contains(sign) {
                offending.push(format!("{}: {sign}", path.display()));
            }
        }
    }
    assert!(offending.is_empty(), "SQL in commands/: {offending:?}");
}

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let long: Vec<String> = source_files()
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).unwrap().lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", path.display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:?}");
}

#[test]
fn no_two_modules_lean_on_each_other() {
    let files = source_files();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|path| module_of(path)).collect();
    // The library's rooms (src/db, src/query, ...); the binary's files (main, cli, commands) use
    // them as `memstate::ROOM` and are left out of this graph.
    let binary = ["main", "cli", "commands"];
    let rooms: BTreeSet<String> = modules
        .iter()
        .filter(|module| {
            !module.is_empty() && module[0] != "lib" && !binary.contains(&module[0].as_str())
        })
        .map(|module| module[0].clone())
        .collect();
    let mut room_graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut sibling_graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let module = module_of(path);
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        if module.is_empty() {
            continue;
        }
        // Between rooms of the library.
        if rooms.contains(&module[0]) {
            for used in names_after(&code, "crate::") {
                if rooms.contains(&used) && used != module[0] {
                    room_graph
                        .entry(module[0].clone())
                        .or_default()
                        .insert(used);
                }
            }
        }
        // Between files of one folder (a folder's mod.rs is its parent, not a sibling).
        let is_folder = path.file_name().is_some_and(|name| name == "mod.rs");
        if module.len() >= 2 && !is_folder {
            let folder = &module[..module.len() - 1];
            let name = |leaf: &str| format!("{}/{leaf}", folder.join("/"));
            let mut used = names_after(&code, "super::");
            let in_crate = format!("crate::{}::", folder.join("::"));
            used.extend(names_after(&code, &in_crate));
            for leaf in used {
                let mut sibling = folder.to_vec();
                sibling.push(leaf.clone());
                if modules.contains(&sibling) && leaf != module[module.len() - 1] {
                    sibling_graph
                        .entry(name(&module[module.len() - 1]))
                        .or_default()
                        .insert(name(&leaf));
                }
            }
        }
    }
    assert!(
        room_graph
            .get("db")
            .is_some_and(|used| used.contains("dump")),
        "the reading of the source found no use at all: {room_graph:?}"
    );
    assert_eq!(
        cycle(&room_graph),
        None,
        "rooms that use each other: {room_graph:?}"
    );
    assert_eq!(
        cycle(&sibling_graph),
        None,
        "files of one folder that use each other: {sibling_graph:?}"
    );
}

#[test]
fn the_reading_of_uses_finds_groups_and_cycles() {
    let code = "use super::{map, oom::Story, Printer};\nlet x = super::blockers::f();";
    let names = names_after(code, "super::");
    let expected: BTreeSet<String> = ["map", "oom", "Printer", "blockers"]
        .iter()
        .map(|name| name.to_string())
        .collect();
    assert_eq!(names, expected);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle(&graph), None);
    graph.entry("c".into()).or_default().insert("a".into());
    assert!(cycle(&graph).is_some());
}
