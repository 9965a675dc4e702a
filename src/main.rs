//! The `memstate` binary: parse the arguments, call the library, and map errors to exit codes
//! (0 ok, 1 some input refused, 2 usage or environment error).

mod cli;
mod commands;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    limit_retained_memory();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { 2 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    match commands::dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        // `memstate holes | head`: the reader has what it wanted.
        Err(error) if error.is_closed_output() => ExitCode::SUCCESS,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "{}", commands::error_line(&error));
            ExitCode::from(error.exit_code() as u8)
        }
    }
}

/// Dumps are read into buffers of several MiB by parallel threads and freed by another. glibc
/// would raise its mmap threshold after the first such free and then keep the buffers in
/// per-thread arenas, so a long import's resident memory grew with the number of threads; a fixed
/// threshold returns large buffers to the system as soon as they are freed. Fixing it also fixes
/// the heap's trim threshold at 128 KiB, which made the heap shrink and grow around every small
/// dump (thousands of brk calls): the heap keeps up to 16 MiB free instead.
fn limit_retained_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc tunables; it is called before any other thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 16 << 20);
    }
}
