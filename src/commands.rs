//! What each command does: open what it needs through the library, run it, print the result.
//! Returns the exit status for outcomes that are not errors (1 when some input was refused).

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use memstate::ingest::{self, Event, IngestOptions, Summary};
use memstate::query::{self, output, Format};
use memstate::{db, Error, Result};

use crate::cli::{Cli, Command, ReadArgs, SimulateArgs, SqlArgs};

pub fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Import(args) => import(&cli.db, &args.read, args.replace),
        Command::Validate(args) => validate(&args.read),
        Command::Sql(args) => sql(&cli.db, &args),
        Command::Simulate(args) => simulate(&args),
    }
}

fn write_error(error: io::Error) -> Error {
    Error::Usage(format!("cannot write the output: {error}"))
}

/// A progress bar on stderr; indicatif hides it when stderr is not a terminal.
fn progress_bar(quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} inputs  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Feed pipeline events to a progress bar; refusals are printed above it as they happen.
fn show_events(bar: &ProgressBar) -> impl FnMut(Event) + '_ {
    move |event| match event {
        Event::Inputs { count } => bar.set_length(count),
        Event::InputDone => bar.inc(1),
        Event::Progress { summary } => bar.set_message(format!(
            "{} dumps, {} allocations, {} refused",
            summary.imported + summary.replaced + summary.unchanged,
            summary.allocations,
            summary.refused
        )),
        Event::Refused { error } => bar.suspend(|| eprintln!("error: {error}")),
    }
}

fn print_summary(summary: &Summary, verb: &str, format: Format, db_path: Option<&Path>) -> Result<()> {
    let mut out = io::stdout().lock();
    match format {
        Format::Table => {
            let mut line = format!("{verb} {} dumps ({} allocations)", summary.imported + summary.replaced, summary.allocations);
            if summary.replaced > 0 {
                line.push_str(&format!(", {} of them replacing earlier ones", summary.replaced));
            }
            line.push_str(&format!(
                ", {} unchanged (skipped), {} refused",
                summary.unchanged, summary.refused
            ));
            if summary.annotations > 0 {
                line.push_str(&format!(", {} annotations files", summary.annotations));
            }
            if summary.ignored_files > 0 {
                line.push_str(&format!(", {} non-dump files ignored", summary.ignored_files));
            }
            line.push_str(&format!(" from {} inputs in {:.2} s", summary.inputs, summary.seconds));
            if let Some(path) = db_path {
                line.push_str(&format!(" into {}", path.display()));
            }
            writeln!(out, "{line}").map_err(write_error)
        }
        _ => {
            let value = serde_json::to_value(summary).map_err(|error| Error::Usage(error.to_string()))?;
            let columns: Vec<String> = value.as_object().map(|map| map.keys().cloned().collect()).unwrap_or_default();
            let row = columns
                .iter()
                .map(|key| match &value[key] {
                    serde_json::Value::Number(number) if number.is_f64() => query::Cell::Real(number.as_f64().unwrap_or(0.0)),
                    serde_json::Value::Number(number) => query::Cell::Integer(number.as_i64().unwrap_or(0)),
                    other => query::Cell::Text(other.to_string()),
                })
                .collect();
            let table = query::Table::new(columns, vec![row]);
            output::render(&table, format, &mut out).map_err(write_error)
        }
    }
}

fn import(db_path: &Path, args: &ReadArgs, replace: bool) -> Result<u8> {
    let mut database = db::open(db_path)?;
    let bar = progress_bar(args.quiet);
    let options = IngestOptions { strict: args.strict, replace };
    let summary = ingest::import(&mut database, &args.paths, options, &mut show_events(&bar));
    bar.finish_and_clear();
    let summary = summary?;
    print_summary(&summary, "imported", args.format, Some(db_path))?;
    Ok(if summary.refused > 0 { 1 } else { 0 })
}

fn validate(args: &ReadArgs) -> Result<u8> {
    let bar = progress_bar(args.quiet);
    let options = IngestOptions { strict: args.strict, replace: false };
    let summary = ingest::validate(&args.paths, options, &mut show_events(&bar));
    bar.finish_and_clear();
    print_summary(&summary, "valid:", args.format, None)?;
    Ok(if summary.refused > 0 { 1 } else { 0 })
}

fn sql(db_path: &Path, args: &SqlArgs) -> Result<u8> {
    let parameters = args.params.iter().map(|text| query::parse_parameter(text)).collect::<Result<Vec<_>>>()?;
    let database = db::open_read_only(db_path)?;
    let table = query::run(&database.conn, &args.query, &parameters)?;
    output::render(&table, args.format, &mut io::stdout().lock()).map_err(write_error)?;
    Ok(0)
}

fn simulate(args: &SimulateArgs) -> Result<u8> {
    let config = memstate::sim::Config {
        seed: args.seed,
        run_id: args.run_id.clone(),
        nodes: args.nodes,
        gpus_per_node: args.gpus,
        gpu_capacity: args.gpu_capacity,
        system_capacity: args.system_capacity,
        zcopy_capacity: args.zcopy_capacity,
        steps: args.steps,
        dump_every: args.dump_every,
        intensity: args.intensity,
        intern: !args.no_intern,
        layout: args.layout,
        compression: args.compression,
        continue_after_oom: args.continue_after_oom,
    };
    let bar = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(0) };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} step {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let started = std::time::Instant::now();
    let summary = memstate::sim::simulate(&config, &args.out, &mut |event| match event {
        memstate::sim::Event::Started { steps } => bar.set_length(steps),
        memstate::sim::Event::Step { step } => bar.set_position(step),
    });
    bar.finish_and_clear();
    let summary = summary?;
    let mut out = io::stdout().lock();
    match args.format {
        Format::Table => writeln!(
            out,
            "wrote {} dumps ({} allocations, {}) of run {} to {} in {:.2} s: {} steps, {} oom dumps, {} instances collected, {} deferred allocations",
            summary.dumps,
            summary.allocations,
            output::human_size(summary.bytes as i64),
            summary.run_id,
            args.out.display(),
            started.elapsed().as_secs_f64(),
            summary.steps,
            summary.oom_dumps,
            summary.collections,
            summary.deferred_allocations,
        )
        .map_err(write_error)?,
        _ => {
            let value = serde_json::to_string(&summary).map_err(|error| Error::Usage(error.to_string()))?;
            writeln!(out, "{value}").map_err(write_error)?;
        }
    }
    Ok(0)
}
