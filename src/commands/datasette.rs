//! `memstate datasette-metadata`: Datasette metadata from the project's own documentation, to
//! standard output or a file.

use std::io::Write;
use std::path::Path;

use memstate::error::Because;
use memstate::query::datasette;
use memstate::units::visible;
use memstate::{db, Error, Result};

use crate::cli::DatasetteArgs;

pub fn run(db_path: &Path, args: &DatasetteArgs) -> Result<u8> {
    let name = match &args.database {
        Some(name) => name.clone(),
        None => db_path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_else(|| "memstate".to_string()),
    };
    let metadata = datasette::metadata(&name, &db::storage_tables());
    // The database need not exist yet; when it does, its dumps are protected too.
    let protected = || {
        db::open_read_only(db_path)
            .and_then(|database| database.protected())
            .unwrap_or_else(|_| memstate::files::Protected::new(db_path, &[]))
    };
    if let Some(dir) = &args.plugins_dir {
        std::fs::create_dir_all(dir).map_err(|error| {
            Error::write(dir, Because::context("cannot create the folder", error))
        })?;
        let path = dir.join(datasette::PLUGIN_FILE);
        let target = protected().check(&path)?;
        super::write_output(&target, &path, datasette::plugin(&name).as_bytes())?;
        note!("wrote {}", visible(&path.display().to_string()));
    }
    let text = serde_json::to_string_pretty(&metadata).map_err(|error| Error::Internal {
        file: String::new(),
        message: error.to_string(),
    })? + "\n";
    match &args.out {
        Some(path) => {
            let target = protected().check(path)?;
            super::write_output(&target, path, text.as_bytes())?;
            let plugins = args.plugins_dir.as_ref().map_or(String::new(), |dir| {
                format!(" --plugins-dir {}", visible(&dir.display().to_string()))
            });
            note!(
                "wrote {} (serve with: datasette {} -m {}{plugins})",
                visible(&path.display().to_string()),
                visible(&db_path.display().to_string()),
                visible(&path.display().to_string())
            );
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .map_err(Error::Output)?;
        }
    }
    Ok(0)
}
