//! `memstate import` and `memstate validate`: read dumps (with a progress bar on a terminal and
//! refusals printed as they happen), then a one-line summary or its exact machine form; and
//! `import --follow`, with a live status line until Ctrl-C or SIGTERM.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use indicatif::ProgressBar;
use memstate::import::follow::{FollowEvent, FollowOptions};
use memstate::import::input::Limits;
use memstate::import::{self, ImportEvent, ImportSummary, IngestOptions};
use memstate::present::{Cell, Report, Table};
use memstate::units::{counted, human, visible};
use memstate::{db, Result};

use super::{error_line, progress_bar, skipped_line, Printer};
use crate::cli::{ImportArgs, ReadArgs, ValidateArgs};

const BAR: &str = "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} inputs  {msg}";

/// Feed pipeline events to a progress bar; refusals are printed above it as they happen.
fn show_events(bar: &ProgressBar) -> impl FnMut(ImportEvent) + '_ {
    move |event| match event {
        ImportEvent::Inputs { count } => bar.set_length(count),
        ImportEvent::InputDone => bar.inc(1),
        ImportEvent::Progress { summary } => bar.set_message(format!(
            "{}, {}, {} refused",
            counted(
                summary.imported + summary.replaced + summary.unchanged,
                "dump"
            ),
            counted(summary.allocations, "allocation"),
            summary.refused
        )),
        ImportEvent::Refused { error } => bar.suspend(|| note!("{}", error_line(error))),
        ImportEvent::Skipped { error } => bar.suspend(|| note!("{}", skipped_line(error))),
    }
}

fn options(args: &ReadArgs, replace: bool) -> IngestOptions {
    IngestOptions {
        strict: args.strict,
        replace,
        limits: Limits {
            max_dump_size: args.max_dump_size,
            max_pickle_size: args.max_pickle_size,
            max_ratio: args.max_ratio,
            max_row_ratio: args.max_row_ratio,
        },
        source: memstate::import::source::Options {
            kind: args.source.into(),
            run: args.run.clone(),
            every: args.every,
            prof_step_ns: args
                .prof_step
                .map(|step| u64::try_from(step.as_nanos()).unwrap_or(u64::MAX)),
            seq_by_time: args.seq_by == crate::cli::SeqBy::Time,
            wait_for_open_reports: false,
            // One for the whole import (or --follow session): its inputs share it.
            seqs_taken: Default::default(),
        },
    }
}

/// The summary: one row for programs, one line for people.
fn summary_report<'r>(
    summary: &'r ImportSummary,
    verb: &'r str,
    db: Option<&'r Path>,
) -> Report<'r> {
    let table = Table::record(vec![
        ("inputs", Cell::count(summary.inputs)),
        ("imported", Cell::count(summary.imported)),
        ("replaced", Cell::count(summary.replaced)),
        ("unchanged", Cell::count(summary.unchanged)),
        ("refused", Cell::count(summary.refused)),
        ("annotations", Cell::count(summary.annotations)),
        ("allocations", Cell::count(summary.allocations)),
        ("ignored_files", Cell::count(summary.ignored_files)),
        ("skipped", Cell::count(summary.skipped)),
        ("seconds", Cell::Real(summary.seconds)),
    ]);
    Report::told(table, move |out, _| {
        let mut line = format!(
            "{verb} {} ({})",
            counted(summary.imported + summary.replaced, "dump"),
            counted(summary.allocations, "allocation")
        );
        if summary.replaced > 0 {
            line.push_str(&format!(
                ", {} of them replacing earlier ones",
                summary.replaced
            ));
        }
        // Only an import can find a dump already there.
        if db.is_some() {
            line.push_str(&format!(", {} unchanged (skipped)", summary.unchanged));
        }
        line.push_str(&format!(", {} refused", summary.refused));
        if summary.annotations > 0 {
            line.push_str(&format!(
                ", {}",
                counted(summary.annotations, "annotations file")
            ));
        }
        if summary.ignored_files > 0 {
            line.push_str(&format!(
                ", {} skipped (none of the inputs memstate reads)",
                counted(summary.ignored_files, "file")
            ));
        }
        if summary.skipped > 0 {
            let entries = if summary.skipped == 1 {
                "entry"
            } else {
                "entries"
            };
            line.push_str(&format!(
                ", {} {entries} skipped (not regular files, or links to folders)",
                summary.skipped
            ));
        }
        line.push_str(&format!(
            " from {} in {:.2} s",
            counted(summary.inputs, "input"),
            summary.seconds
        ));
        if let Some(path) = db {
            line.push_str(&format!(
                " into {}",
                memstate::units::visible(&path.display().to_string())
            ));
        }
        writeln!(out, "{line}")
    })
}

/// The live status line of --follow: counts, and the latest snapshot of each node.
fn follow_status(
    summary: &ImportSummary,
    latest: &BTreeMap<(String, i64), i64>,
    last: Option<&(String, i64, i64, Instant)>,
) -> String {
    let mut nodes: Vec<String> = latest
        .iter()
        .take(8)
        .map(|((run, node), seq)| format!("{} n{node} seq {seq}", visible(run)))
        .collect();
    if latest.len() > 8 {
        nodes.push(format!("{} more", latest.len() - 8));
    }
    let last = last
        .map(|(run, node, seq, when)| {
            format!(
                " · last {} n{node} seq {seq}, {:.0} s ago",
                visible(run),
                when.elapsed().as_secs_f64()
            )
        })
        .unwrap_or_default();
    format!(
        "{} ({} new), {}, {} refused{last}{}",
        counted(
            summary.imported + summary.replaced + summary.unchanged,
            "dump"
        ),
        summary.imported + summary.replaced,
        counted(summary.allocations, "allocation"),
        summary.refused,
        if nodes.is_empty() {
            String::new()
        } else {
            format!(" · latest by node: {}", nodes.join(", "))
        }
    )
}

/// `import --follow`: until Ctrl-C or SIGTERM.
fn follow(db_path: &Path, args: &ImportArgs) -> Result<u8> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).map_err(|error| {
        memstate::Error::Usage(format!(
            "cannot catch Ctrl-C and SIGTERM to stop cleanly: {error}"
        ))
    })?;
    let mut database = db::open(db_path)?;
    // wide_msg: the line is cut to the terminal's width, never wrapped.
    let bar = progress_bar(args.read.quiet, "{spinner} {prefix} · {wide_msg}");
    let mut last_landed: Option<(String, i64, i64, Instant)> = None;
    let options = FollowOptions {
        ingest: options(&args.read, args.replace),
        interval: args.interval,
        settle: args.settle,
        events: !args.poll,
        forecast_within: (args.forecast_within > 0).then_some(args.forecast_within),
    };
    let summary = memstate::import::follow::follow(
        &mut database,
        &args.read.paths,
        options,
        &stop,
        &mut |event| {
            match event {
            FollowEvent::Watching { how } => {
                let paths = if args.read.paths.len() == 1 {
                    "1 path".to_string()
                } else {
                    format!("{} paths", args.read.paths.len())
                };
                bar.set_prefix(format!("following {paths} (Ctrl-C stops)"));
                if bar.is_hidden() && !args.read.quiet {
                    note!(
                        "following {} by {how}; Ctrl-C or SIGTERM stops",
                        args.read.paths.join(" ")
                    );
                }
            }
            FollowEvent::Landed { run, node, seq, .. } => {
                last_landed = Some((run.to_string(), node, seq, Instant::now()))
            }
            FollowEvent::Refused { error } => bar.suspend(|| note!("{}", error_line(error))),
            FollowEvent::Skipped { error } => bar.suspend(|| note!("{}", skipped_line(error))),
            FollowEvent::OutOfMemory {
                run,
                node,
                seq,
                memory,
                request,
                verdict,
            } => bar.suspend(|| {
                // Said even with --quiet: it is what the user is waiting for.
                note!(
                    "out of memory: {} node {node} seq {seq}, {}: a request of {} failed ({verdict}); the story: memstate --db {} oom --snapshot {}",
                    visible(run),
                    visible(&memory),
                    human(request),
                    visible(&db_path.display().to_string()),
                    visible(&format!("{run}:{node}:{seq}"))
                )
            }),
            FollowEvent::Forecast {
                run,
                node,
                seq,
                forecast,
            } => bar.suspend(|| {
                // Said even with --quiet, as an out-of-memory error is: it comes before one.
                let falling = forecast
                    .hole_trend
                    .map(|slope| format!(", falling {} a dump", human((-slope).max(0.0) as u64)))
                    .unwrap_or_default();
                note!(
                    "warning: {} node {node} seq {seq}, {} {}: the largest hole ({}{falling}) is forecast to fall below the largest recent request ({}) {}; the map: memstate --db {} map --html map.html --snapshot {} --memory {}",
                    visible(run),
                    visible(&forecast.kind),
                    forecast.handle,
                    forecast.largest_hole.map_or_else(|| "unknown".to_string(), human),
                    human(forecast.largest_request),
                    match forecast.dumps_left {
                        Some(0) => "already".to_string(),
                        Some(1) => "within 1 dump".to_string(),
                        Some(left) => format!("within {left} dumps"),
                        None => String::new(),
                    },
                    visible(&db_path.display().to_string()),
                    visible(&format!("{run}:{node}:{seq}")),
                    forecast.handle
                )
            }),
            FollowEvent::Scanned { summary, latest } => {
                bar.set_message(follow_status(summary, latest, last_landed.as_ref()))
            }
        }
        },
    );
    bar.finish_and_clear();
    let summary = summary?;
    database.finish()?;
    Printer::with_format(args.read.format).print(&summary_report(
        &summary,
        "followed: imported",
        Some(db_path),
    ))?;
    Ok(if summary.refused > 0 { 1 } else { 0 })
}

/// The flag Ctrl-C (or SIGTERM) sets to stop an import cleanly, interrupting the statement running
/// through `interrupt` when given; a second one does not wait.
fn stop_on_ctrl_c(interrupt: Option<memstate::db::Interrupter>) -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        if let Some(interrupt) = &interrupt {
            interrupt.interrupt();
        }
    })
    .map_err(|error| {
        memstate::Error::Usage(format!(
            "cannot catch Ctrl-C and SIGTERM to stop cleanly: {error}"
        ))
    })?;
    Ok(stop)
}

pub fn import(db_path: &Path, args: &ImportArgs) -> Result<u8> {
    if args.follow {
        return follow(db_path, args);
    }
    if let Some(dir) = &args.shard_dir {
        return import_shards(dir, args);
    }
    // Nothing to read at all (every path missing): said, and no database made for it.
    let missing: Vec<&String> = args
        .read
        .paths
        .iter()
        .filter(|path| *path != "-" && std::fs::symlink_metadata(path).is_err())
        .collect();
    if missing.len() == args.read.paths.len() {
        for path in missing {
            note!("error: {}: no such file or folder", visible(path));
        }
        note!(
            "nothing imported; {} was left as it was",
            visible(&db_path.display().to_string())
        );
        return Ok(1);
    }
    let mut database = db::open(db_path)?;
    // Ctrl-C (or SIGTERM) stops the import cleanly: the statement running is interrupted, the
    // dump in progress rolled back, the database checkpointed and closed. A second one does not
    // wait for that.
    let stop = stop_on_ctrl_c(Some(database.interrupter()))?;
    let bar = progress_bar(args.read.quiet, BAR);
    let summary = import::import_until(
        &mut database,
        &args.read.paths,
        options(&args.read, args.replace),
        Some(&stop),
        &mut show_events(&bar),
    );
    bar.finish_and_clear();
    let summary = summary?;
    if summary.interrupted {
        database.finish_now()?;
    } else {
        database.finish()?;
    }
    print_outcome(args, &summary, db_path)
}

/// The summary of an import, and its exit status: 130 when interrupted (and how to go on), 1 when
/// anything was refused.
fn print_outcome(args: &ImportArgs, summary: &ImportSummary, target: &Path) -> Result<u8> {
    let verb = if summary.interrupted {
        "interrupted: imported"
    } else {
        "imported"
    };
    Printer::with_format(args.read.format).print(&summary_report(summary, verb, Some(target)))?;
    if summary.interrupted {
        note!("interrupted: the dump in progress was rolled back; run the same command again to import the rest (dumps already imported are skipped)");
        return Ok(130);
    }
    Ok(if summary.refused > 0 { 1 } else { 0 })
}

/// `import --shard-dir`: one database per (run, node).
fn import_shards(dir: &Path, args: &ImportArgs) -> Result<u8> {
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |count| count.get()),
        |jobs| jobs as usize,
    );
    let stop = stop_on_ctrl_c(None)?;
    let bar = progress_bar(args.read.quiet, BAR);
    let summary = memstate::import::shards::import_shards(
        dir,
        jobs,
        &args.read.paths,
        options(&args.read, args.replace),
        Some(&stop),
        &mut show_events(&bar),
    );
    bar.finish_and_clear();
    print_outcome(args, &summary?, dir)
}

pub fn validate(args: &ValidateArgs) -> Result<u8> {
    let bar = progress_bar(args.read.quiet, BAR);
    let summary = import::validate(
        &args.read.paths,
        options(&args.read, false),
        &mut show_events(&bar),
    );
    bar.finish_and_clear();
    let summary = summary?;
    Printer::with_format(args.read.format).print(&summary_report(&summary, "valid:", None))?;
    Ok(if summary.refused > 0 { 1 } else { 0 })
}
