//! Embeds every canned query of queries/ into the binary (a generated list of include_str!), and
//! rebuilds when a query or a migration changes.

use std::fs;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=queries");
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let folder = Path::new(&root).join("queries");
    let mut names: Vec<String> = fs::read_dir(&folder)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".sql"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut code = String::from("/// (name, SQL text) of every file in queries/, sorted by name.\npub static SOURCES: &[(&str, &str)] = &[\n");
    for name in names {
        let path = folder.join(&name);
        println!("cargo:rerun-if-changed={}", path.display());
        code.push_str(&format!("    ({:?}, include_str!({:?})),\n", name.trim_end_matches(".sql"), path.display().to_string()));
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("queries.rs");
    fs::write(out, code).expect("write the generated list of queries");
}
