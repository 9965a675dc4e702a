//! `memstate serve`: start the live explorer, print its URL, serve until Ctrl-C.

use std::path::Path;
use std::time::Duration;

use memstate::serve::{self, Options};
use memstate::{Error, Result};

use crate::cli::ServeArgs;

pub fn run(db_path: &Path, args: &ServeArgs) -> Result<u8> {
    if !(args.time_limit.is_finite() && args.time_limit > 0.0) {
        return Err(Error::Usage(format!(
            "--time-limit {}: expected a positive number of seconds",
            args.time_limit
        )));
    }
    let options = Options {
        bind: args.bind,
        port: args.port,
        token: args.token.clone(),
        time_limit: Duration::from_secs_f64(args.time_limit.min(3600.0)),
        row_limit: args.row_limit.max(1),
        ..Options::default()
    };
    serve::limit_sqlite_heap();
    let running = serve::start(db_path, options)?;
    let stop = running.stopper();
    ctrlc::set_handler(stop)
        .map_err(|error| Error::Usage(format!("cannot catch Ctrl-C to stop cleanly: {error}")))?;
    println!("memstate serve: {}", running.url);
    eprintln!("serving {} read-only; Ctrl-C stops", db_path.display());
    if args.open {
        // Best effort: the URL is printed either way.
        let _ = std::process::Command::new("xdg-open")
            .arg(&running.url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    running.wait();
    Ok(0)
}
