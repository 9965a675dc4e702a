//! What the benchmarks share: running the binary while watching its peak memory, medians, and
//! one line per figure next to its target.

#![allow(dead_code)]

pub mod steady;

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const BINARY: &str = env!("CARGO_BIN_EXE_memstate");

/// What one run of the binary took: wall time, peak resident memory (MiB), exit status, stdout,
/// and from the kernel's account of the process (wait4): CPU time in user and system mode, and
/// the bytes it caused to be written to storage (`ru_oublock`, /proc/PID/io's write_bytes).
pub struct Ran {
    pub seconds: f64,
    pub peak_mib: f64,
    pub user_seconds: f64,
    pub system_seconds: f64,
    pub written_bytes: u64,
    pub ok: bool,
    pub stdout: String,
    pub timed_out: bool,
}

/// Run the binary with `args`, measuring its own peak resident memory: its VmHWM, read while it
/// runs (wait4's ru_maxrss would include this bench process's memory from before the exec).
pub fn run_binary(args: &[String], timeout: Duration) -> Ran {
    run(args, timeout, true)
}

/// [`run_binary`] with standard output thrown away (as `> /dev/null`): a command that prints
/// megabytes is timed without this process reading them on the same cores.
pub fn run_binary_quietly(args: &[String], timeout: Duration) -> Ran {
    run(args, timeout, false)
}

// The child is reaped with wait4 below, which clippy does not see.
#[allow(clippy::zombie_processes)]
fn run(args: &[String], timeout: Duration, keep_stdout: bool) -> Ran {
    let started = Instant::now();
    let mut child = Command::new(BINARY)
        .args(args)
        .stdout(if keep_stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::piped())
        .spawn()
        .expect("bench: spawn memstate");
    let status_file = format!("/proc/{}/status", child.id());
    let read_all = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = read_all(
        child
            .stdout
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn std::io::Read + Send>),
    );
    let stderr = read_all(
        child
            .stderr
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn std::io::Read + Send>),
    );
    let mut peak_kib = 0u64;
    let mut timed_out = false;
    // Reaped with wait4 (not Child::wait) to get the child's resource use.
    let pid = child.id() as libc::pid_t;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut reap = |options: libc::c_int| {
        let mut raw = 0;
        let reaped = unsafe { libc::wait4(pid, &mut raw, options, &mut usage) };
        (reaped == pid).then_some(raw)
    };
    let status = loop {
        if let Ok(text) = fs::read_to_string(&status_file) {
            if let Some(kib) = text
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
            {
                peak_kib = peak_kib.max(kib);
            }
        }
        if let Some(status) = reap(libc::WNOHANG) {
            break Some(status);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            reap(0);
            timed_out = true;
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let seconds = started.elapsed().as_secs_f64();
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let ok = status.is_some_and(|raw| libc::WIFEXITED(raw) && libc::WEXITSTATUS(raw) == 0);
    let time = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    if !ok && !timed_out {
        eprintln!("bench: memstate {} failed: {stderr}", args.join(" "));
    }
    Ran {
        seconds,
        peak_mib: peak_kib as f64 / 1024.0,
        user_seconds: time(usage.ru_utime),
        system_seconds: time(usage.ru_stime),
        written_bytes: (usage.ru_oublock.max(0) as u64) * 512,
        ok,
        stdout,
        timed_out,
    }
}

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

/// Print one figure next to its target.
pub fn report(name: &str, value: &str, target: &str, met: Option<bool>) {
    let mark = match met {
        Some(true) => "ok",
        Some(false) => "MISSED",
        None => "",
    };
    println!("  {name:<48} {value:>18}   target {target:<12} {mark}");
}
