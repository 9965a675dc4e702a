//! What each command does: open what it needs through the library, run it, print the result.
//! Returns the exit status for outcomes that are not errors (1 when some input was refused).

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use memstate::ingest::{self, Event, IngestOptions, Summary};
use memstate::query::{self, output, Format};
use memstate::{db, Error, Result};

use memstate::analysis::{self, Blockers, OomFinding};
use memstate::query::{canned, listing, select, Table};

use crate::cli::{
    AllocationsArgs, BlockersArgs, Cli, Command, DemoArgs, DiffArgs, HolesArgs, MapArgs, OomArgs, PlotArgs, ReadArgs, ReportArgs, RunArgs,
    SimulateArgs, SqlArgs, StatsArgs, TrendArgs,
};

pub fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Import(args) => import(&cli.db, &args.read, args.replace),
        Command::Validate(args) => validate(&args.read),
        Command::Sql(args) => sql(&cli.db, &args),
        Command::Simulate(args) => simulate(&args),
        Command::Demo(args) => demo(&args),
        Command::Snapshots(args) => snapshots(&cli.db, &args),
        Command::Memories(args) => memories(&cli.db, &args),
        Command::Stats(args) => stats(&cli.db, &args),
        Command::Holes(args) => holes(&cli.db, &args),
        Command::Allocations(args) => allocations(&cli.db, &args),
        Command::Trend(args) => trend(&cli.db, &args),
        Command::Diff(args) => diff(&cli.db, &args),
        Command::Oom(args) => oom(&cli.db, &args),
        Command::Blockers(args) => blockers(&cli.db, &args),
        Command::Report(args) => report(&cli.db, &args),
        Command::Map(args) => map(&cli.db, &args),
        Command::Plot(args) => plot(&cli.db, &args),
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
            if summary.skipped > 0 {
                line.push_str(&format!(", {} entries skipped (not regular files, or links to folders)", summary.skipped));
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
    let options = IngestOptions { strict: args.strict, replace, limits: memstate::dump::read::Limits { max_dump_size: args.max_dump_size } };
    let summary = ingest::import(&mut database, &args.paths, options, &mut show_events(&bar));
    bar.finish_and_clear();
    let summary = summary?;
    database.finish()?;
    print_summary(&summary, "imported", args.format, Some(db_path))?;
    Ok(if summary.refused > 0 { 1 } else { 0 })
}

fn validate(args: &ReadArgs) -> Result<u8> {
    let bar = progress_bar(args.quiet);
    let options = IngestOptions { strict: args.strict, replace: false, limits: memstate::dump::read::Limits { max_dump_size: args.max_dump_size } };
    let summary = ingest::validate(&args.paths, options, &mut show_events(&bar));
    bar.finish_and_clear();
    let summary = summary?;
    print_summary(&summary, "valid:", args.format, None)?;
    Ok(if summary.refused > 0 { 1 } else { 0 })
}

fn sql(db_path: &Path, args: &SqlArgs) -> Result<u8> {
    let parameters = args.params.iter().map(|text| query::parse_parameter(text)).collect::<Result<Vec<_>>>()?;
    let database = db::open_read_only(db_path)?;
    if args.format == Format::Table {
        let table = query::run(&database.conn, &args.query, &parameters)?;
        output::render(&table, args.format, &mut io::stdout().lock()).map_err(write_error)?;
        return Ok(0);
    }
    // Machine-readable output streams: a query over millions of allocations is never held in memory.
    let mut stream: Option<output::RowStream> = None;
    query::for_each_row(&database.conn, &args.query, &parameters, &mut |event| match event {
        query::RowEvent::Columns(columns) => {
            stream = Some(output::RowStream::start(columns, args.format, Box::new(io::stdout().lock())).map_err(write_error)?);
            Ok(())
        }
        query::RowEvent::Row(cells) => match stream.as_mut() {
            Some(writer) => writer.row(&cells).map_err(write_error),
            None => Ok(()),
        },
    })?;
    if let Some(writer) = stream {
        writer.finish().map_err(write_error)?;
    }
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

fn print(table: &Table, format: Format) -> Result<()> {
    output::render(table, format, &mut io::stdout().lock()).map_err(write_error)
}

fn snapshots(db_path: &Path, args: &RunArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    print(&listing::snapshots(&database.conn, args.run.as_deref())?, args.format.format)?;
    Ok(0)
}

fn memories(db_path: &Path, args: &RunArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    print(&listing::memories(&database.conn, args.run.as_deref())?, args.format.format)?;
    Ok(0)
}

/// Every (snapshot, memory) pair the selectors name; an error when there is none.
fn selected_pairs(conn: &rusqlite::Connection, snapshot: &str, memory: Option<&str>) -> Result<Vec<(i64, i64)>> {
    let mut pairs = Vec::new();
    for snapshot_id in select::snapshots(conn, snapshot)? {
        for memory_id in select::memories(conn, snapshot_id, memory)? {
            pairs.push((snapshot_id, memory_id));
        }
    }
    if pairs.is_empty() {
        return Err(Error::Usage(format!("no memory matches {:?} in snapshot {snapshot:?} (see memstate memories)", memory.unwrap_or(""))));
    }
    Ok(pairs)
}

fn stats(db_path: &Path, args: &StatsArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let pairs = selected_pairs(&database.conn, &args.snapshot.snapshot, args.memory.memory.as_deref())?;
    print(&listing::stats(&database.conn, &pairs)?, args.format.format)?;
    Ok(0)
}

/// Prepend identifying columns to every row of a table.
fn with_columns(mut table: Table, names: &[&str], values: &[query::Cell]) -> Table {
    let mut columns: Vec<String> = names.iter().map(|name| name.to_string()).collect();
    columns.append(&mut table.columns);
    let mut sizes = vec![false; names.len()];
    sizes.append(&mut table.size_columns);
    let rows = table.rows.into_iter().map(|row| values.iter().cloned().chain(row).collect()).collect();
    Table { columns, rows, size_columns: sizes }
}

fn append(into: &mut Option<Table>, table: Table) {
    match into {
        Some(existing) => existing.rows.extend(table.rows),
        None => *into = Some(table),
    }
}

fn holes(db_path: &Path, args: &HolesArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = &database.conn;
    let query = canned::find("largest-holes")?;
    let mut combined = None;
    for (snapshot_id, memory_id) in selected_pairs(conn, &args.snapshot.snapshot, args.memory.memory.as_deref())? {
        let layout = analysis::load_layout(conn, snapshot_id, memory_id)?;
        let parameters = vec![
            ("snapshot_id".to_string(), snapshot_id.to_string()),
            ("memory_id".to_string(), memory_id.to_string()),
            ("top".to_string(), args.top.to_string()),
        ];
        let table = canned::run(conn, &query, &parameters)?;
        if args.format.format == Format::Table {
            let fragmentation = if layout.free_bytes == 0 { 0.0 } else { 1.0 - layout.largest_hole as f64 / layout.free_bytes as f64 };
            println!(
                "{} node {} seq {} (snapshot {snapshot_id}), {} {}: {} free in {} holes, largest {}, fragmentation {:.3}",
                layout.run,
                layout.node,
                layout.seq,
                layout.kind,
                layout.handle,
                output::human_size(layout.free_bytes as i64),
                layout.holes.len(),
                output::human_size(layout.largest_hole as i64),
                fragmentation
            );
            print(&table, Format::Table)?;
            println!();
        } else {
            append(
                &mut combined,
                with_columns(table, &["snapshot_id", "handle"], &[query::Cell::Integer(snapshot_id), query::Cell::Text(layout.handle.clone())]),
            );
        }
    }
    if let Some(table) = combined {
        print(&table, args.format.format)?;
    }
    Ok(0)
}

fn allocations(db_path: &Path, args: &AllocationsArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = &database.conn;
    let filter = listing::AllocationFilter { kind: args.kind.clone(), state: args.state.clone(), provenance: args.provenance.clone() };
    let mut combined = None;
    for snapshot_id in select::snapshots(conn, &args.snapshot.snapshot)? {
        let memory_ids = select::memories(conn, snapshot_id, args.memory.memory.as_deref())?;
        let table = listing::allocations(conn, snapshot_id, &memory_ids, &filter, args.by, args.top)?;
        append(&mut combined, with_columns(table, &["snapshot_id"], &[query::Cell::Integer(snapshot_id)]));
    }
    if let Some(table) = combined {
        print(&table, args.format.format)?;
    }
    Ok(0)
}

fn trend(db_path: &Path, args: &TrendArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    print(&listing::trend(&database.conn, args.memory.memory.as_deref(), args.run.as_deref())?, args.format.format)?;
    Ok(0)
}

fn one_snapshot(conn: &rusqlite::Connection, selector: &str) -> Result<i64> {
    match select::snapshots(conn, selector)?.as_slice() {
        [one] => Ok(*one),
        several => Err(Error::Usage(format!("{selector:?} names {} snapshots; name one (an id or RUN:NODE:SEQ)", several.len()))),
    }
}

/// Serialisable rows as a table (their JSON field order), for csv/json/ndjson output.
fn table_of<T: serde::Serialize>(rows: &[T], sizes: &[&str]) -> Result<Table> {
    // Through an order-keeping map, so the columns come in the struct's field order.
    let values: Vec<indexmap::IndexMap<String, serde_json::Value>> = rows
        .iter()
        .map(|row| serde_json::to_string(row).and_then(|text| serde_json::from_str(&text)).map_err(|error| Error::Usage(error.to_string())))
        .collect::<Result<_>>()?;
    let columns: Vec<String> = values.first().map(|map| map.keys().cloned().collect()).unwrap_or_default();
    let cells = values
        .iter()
        .map(|value| {
            columns
                .iter()
                .map(|column| match value.get(column).unwrap_or(&serde_json::Value::Null) {
                    serde_json::Value::Null => query::Cell::Null,
                    serde_json::Value::Bool(flag) => query::Cell::Integer(i64::from(*flag)),
                    serde_json::Value::Number(number) if number.is_f64() => query::Cell::Real(number.as_f64().unwrap_or(0.0)),
                    serde_json::Value::Number(number) => query::Cell::Integer(number.as_i64().unwrap_or(i64::MAX)),
                    serde_json::Value::String(text) => query::Cell::Text(text.clone()),
                    other => query::Cell::Text(other.to_string()),
                })
                .collect()
        })
        .collect();
    Ok(Table::new(columns, cells).with_sizes(sizes))
}

fn diff(db_path: &Path, args: &DiffArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let before = one_snapshot(&database.conn, &args.before)?;
    let after = one_snapshot(&database.conn, &args.after)?;
    let changes = analysis::diff(&database.conn, before, after)?;
    if changes.is_empty() && args.format.format == Format::Table {
        println!("no allocation appeared, disappeared or changed between snapshots {before} and {after}");
        return Ok(0);
    }
    print(&table_of(&changes, &["size"])?, args.format.format)?;
    Ok(0)
}

fn allocation_table(allocations: &[analysis::AllocationInfo]) -> Result<Table> {
    #[derive(serde::Serialize)]
    struct Row<'a> {
        uid: &'a str,
        kind: &'a str,
        state: &'a str,
        offset: u64,
        size: u64,
        provenance: Option<&'a str>,
        label: Option<&'a str>,
        objects: String,
    }
    let rows: Vec<Row> = allocations
        .iter()
        .map(|allocation| Row {
            uid: &allocation.uid,
            kind: &allocation.kind,
            state: &allocation.state,
            offset: allocation.offset,
            size: allocation.size,
            provenance: allocation.provenance.as_deref(),
            label: allocation.label.as_deref(),
            objects: allocation.objects.join(", "),
        })
        .collect();
    table_of(&rows, &["size"])
}

/// The cheapest place and its blockers, for people.
fn describe_blockers(blockers: &Blockers, out: &mut dyn Write) -> Result<()> {
    let human = |bytes: u64| output::human_size(bytes as i64);
    writeln!(
        out,
        "  cheapest place  [{}, {}): {} of it cannot be freed by collection ({} allocations in the way{})",
        blockers.offset,
        blockers.offset + blockers.size,
        human(blockers.blocked_bytes),
        blockers.blocking.len(),
        if blockers.unaccounted_bytes > 0 { format!(", {} held by the allocator", human(blockers.unaccounted_bytes)) } else { String::new() }
    )
    .map_err(write_error)?;
    if !blockers.blocking.is_empty() {
        writeln!(out, "  moving or freeing them opens {} contiguous ({} bytes)", human(blockers.opens), blockers.opens).map_err(write_error)?;
        writeln!(out, "  blocking allocations:").map_err(write_error)?;
        output::render(&allocation_table(&blockers.blocking)?, Format::Table, out).map_err(write_error)?;
    }
    if !blockers.to_collect.is_empty() {
        writeln!(out, "  also in that place, freed by collection or pending releases: {} allocations, {}", blockers.to_collect.len(), human(blockers.to_collect.iter().map(|a| a.size).sum())).map_err(write_error)?;
    }
    Ok(())
}

fn describe_finding(finding: &OomFinding, out: &mut dyn Write) -> Result<()> {
    let human = |bytes: u64| output::human_size(bytes as i64);
    let verdict = match finding.verdict {
        "exhaustion" => "EXHAUSTION: fewer free bytes than the request",
        "fragmentation" => "FRAGMENTATION: enough free bytes, but no hole is big enough",
        _ => "a hole is big enough now (the memory changed since the request failed)",
    };
    let collection = if finding.solved_by_collection {
        format!("WOULD make room: collecting everything collectable and finishing pending releases gives a {} range", human(finding.largest_reclaimable))
    } else {
        format!("would NOT make room: the largest range it could make is {}", human(finding.largest_reclaimable))
    };
    writeln!(
        out,
        "Out of memory in {} node {} seq {} (snapshot {}), {} {}:",
        finding.run, finding.node, finding.seq, finding.snapshot_id, finding.memory_kind, finding.handle
    )
    .map_err(write_error)?;
    writeln!(
        out,
        "  request         {} ({} bytes, aligned to {}){}{}",
        human(finding.size),
        finding.size,
        finding.alignment,
        finding.kind.as_deref().map(|kind| format!(", {kind}")).unwrap_or_default(),
        finding.provenance.as_deref().map(|provenance| format!(" from {provenance}")).unwrap_or_default()
    )
    .map_err(write_error)?;
    writeln!(out, "  free            {} in holes; largest hole {}", human(finding.free_bytes), human(finding.largest_hole)).map_err(write_error)?;
    writeln!(out, "  verdict         {verdict}").map_err(write_error)?;
    writeln!(out, "  collection      {collection}").map_err(write_error)?;
    if let Some(blockers) = &finding.blockers {
        describe_blockers(blockers, out)?;
    }
    Ok(())
}

/// Flat rows of findings for csv/json/ndjson: one per failed request, blockers as a list.
fn print_findings(findings: &[OomFinding], format: Format) -> Result<()> {
    let mut out = io::stdout().lock();
    match format {
        Format::Table => {
            if findings.is_empty() {
                writeln!(out, "no failed request in the selected snapshots").map_err(write_error)?;
            }
            for finding in findings {
                describe_finding(finding, &mut out)?;
                writeln!(out).map_err(write_error)?;
            }
            Ok(())
        }
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(findings).map_err(|error| Error::Usage(error.to_string()))?).map_err(write_error),
        Format::Ndjson => {
            for finding in findings {
                writeln!(out, "{}", serde_json::to_string(finding).map_err(|error| Error::Usage(error.to_string()))?).map_err(write_error)?;
            }
            Ok(())
        }
        Format::Csv => {
            #[derive(serde::Serialize)]
            struct Flat<'a> {
                snapshot_id: i64,
                run: &'a str,
                node: i64,
                seq: i64,
                handle: &'a str,
                size: u64,
                alignment: u64,
                free_bytes: u64,
                largest_hole: u64,
                largest_reclaimable: u64,
                verdict: &'a str,
                solved_by_collection: bool,
                window_offset: Option<u64>,
                blocked_bytes: Option<u64>,
                blockers: String,
            }
            let rows: Vec<Flat> = findings
                .iter()
                .map(|finding| Flat {
                    snapshot_id: finding.snapshot_id,
                    run: &finding.run,
                    node: finding.node,
                    seq: finding.seq,
                    handle: &finding.handle,
                    size: finding.size,
                    alignment: finding.alignment,
                    free_bytes: finding.free_bytes,
                    largest_hole: finding.largest_hole,
                    largest_reclaimable: finding.largest_reclaimable,
                    verdict: finding.verdict,
                    solved_by_collection: finding.solved_by_collection,
                    window_offset: finding.blockers.as_ref().map(|blockers| blockers.offset),
                    blocked_bytes: finding.blockers.as_ref().map(|blockers| blockers.blocked_bytes),
                    blockers: finding
                        .blockers
                        .as_ref()
                        .map(|blockers| blockers.blocking.iter().map(|a| a.uid.clone()).collect::<Vec<_>>().join(" "))
                        .unwrap_or_default(),
                })
                .collect();
            output::render(&table_of(&rows, &[])?, Format::Csv, &mut out).map_err(write_error)
        }
    }
}

fn oom_snapshots(conn: &rusqlite::Connection, selector: Option<&str>) -> Result<Vec<i64>> {
    match selector {
        Some(selector) => select::snapshots(conn, selector),
        None => {
            let mut statement = conn
                .prepare("SELECT DISTINCT snapshot_id FROM failed_requests ORDER BY snapshot_id")
                .map_err(|error| Error::Query(error.to_string()))?;
            let ids = statement.query_map([], |row| row.get(0)).map_err(|error| Error::Query(error.to_string()))?;
            ids.collect::<rusqlite::Result<Vec<i64>>>().map_err(|error| Error::Query(error.to_string()))
        }
    }
}

fn oom(db_path: &Path, args: &OomArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let snapshot_ids = oom_snapshots(&database.conn, args.snapshot.as_deref())?;
    let findings = analysis::oom(&database.conn, &snapshot_ids)?;
    print_findings(&findings, args.format.format)?;
    Ok(0)
}

fn blockers(db_path: &Path, args: &BlockersArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = &database.conn;
    let mut reports = Vec::new();
    for (snapshot_id, memory_id) in selected_pairs(conn, &args.snapshot.snapshot, args.memory.memory.as_deref())? {
        let layout = analysis::load_layout(conn, snapshot_id, memory_id)?;
        let alignment: u64 = match args.alignment {
            Some(alignment) => alignment,
            None => conn
                .query_row("SELECT coalesce(alignment, 1) FROM memory_stats WHERE snapshot_id = ?1 AND memory_id = ?2", [snapshot_id, memory_id], |row| row.get::<_, i64>(0))
                .map_err(|error| Error::Query(error.to_string()))?
                .max(1) as u64,
        };
        let found = analysis::blockers(&layout, args.size, alignment);
        reports.push((layout, found));
    }
    let mut out = io::stdout().lock();
    match args.format.format {
        Format::Table => {
            for (layout, found) in &reports {
                writeln!(out, "{} node {} seq {} (snapshot {}), {} {}: a request of {} ({} bytes)", layout.run, layout.node, layout.seq, layout.snapshot_id, layout.kind, layout.handle, output::human_size(args.size as i64), args.size).map_err(write_error)?;
                match found {
                    Some(blockers) => describe_blockers(blockers, &mut out)?,
                    None => writeln!(out, "  larger than the whole memory ({})", output::human_size(layout.capacity as i64)).map_err(write_error)?,
                }
                writeln!(out).map_err(write_error)?;
            }
        }
        format => {
            #[derive(serde::Serialize)]
            struct Report<'a> {
                snapshot_id: i64,
                handle: &'a str,
                blockers: Option<&'a Blockers>,
            }
            let rows: Vec<Report> = reports.iter().map(|(layout, found)| Report { snapshot_id: layout.snapshot_id, handle: &layout.handle, blockers: found.as_ref() }).collect();
            match format {
                Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&rows).map_err(|error| Error::Usage(error.to_string()))?).map_err(write_error)?,
                Format::Ndjson => {
                    for row in &rows {
                        writeln!(out, "{}", serde_json::to_string(row).map_err(|error| Error::Usage(error.to_string()))?).map_err(write_error)?;
                    }
                }
                _ => {
                    // csv: one row per blocking allocation.
                    let mut combined = None;
                    for (layout, found) in &reports {
                        if let Some(blockers) = found {
                            let table = allocation_table(&blockers.blocking)?;
                            append(&mut combined, with_columns(table, &["snapshot_id", "handle", "window_offset"], &[query::Cell::Integer(layout.snapshot_id), query::Cell::Text(layout.handle.clone()), query::Cell::Integer(blockers.offset as i64)]));
                        }
                    }
                    if let Some(table) = combined {
                        output::render(&table, Format::Csv, &mut out).map_err(write_error)?;
                    }
                }
            }
        }
    }
    Ok(0)
}

fn report(db_path: &Path, args: &ReportArgs) -> Result<u8> {
    if args.list {
        let queries = canned::all();
        match args.format.format {
            Format::Table => {
                let mut out = io::stdout().lock();
                for query in &queries {
                    let params: Vec<String> = query.params.iter().map(|param| format!("-p {}=…", param.name)).collect();
                    writeln!(out, "{}  {}\n    {}\n", query.name, params.join(" "), query.description).map_err(write_error)?;
                }
            }
            format => {
                let rows: Vec<serde_json::Value> = queries.iter().map(|query| serde_json::json!({"name": query.name, "description": query.description, "params": query.params.iter().map(|p| p.name.clone()).collect::<Vec<_>>().join(" ")})).collect();
                print(&table_of(&rows, &[])?, format)?;
            }
        }
        return Ok(0);
    }
    let name = args.name.as_deref().ok_or_else(|| Error::Usage("name a canned query (see memstate report --list)".into()))?;
    let query = canned::find(name)?;
    let parameters = args.params.iter().map(|text| query::parse_parameter(text)).collect::<Result<Vec<_>>>()?;
    let database = db::open_read_only(db_path)?;
    print(&canned::run(&database.conn, &query, &parameters)?, args.format.format)?;
    Ok(0)
}

fn demo(args: &DemoArgs) -> Result<u8> {
    let dumps = args.dir.join("dumps");
    let db_path = args.dir.join("memstate.db");
    let config = memstate::sim::Config { seed: args.seed, run_id: format!("demo-seed{}", args.seed), ..Default::default() };
    let simulated = memstate::sim::simulate(&config, &dumps, &mut |_| {})?;
    println!(
        "Simulated run {}: {} nodes x {} GPUs, {} steps, {} dumps ({} allocations) written to {}",
        config.run_id, config.nodes, config.gpus_per_node, simulated.steps, simulated.dumps, simulated.allocations, dumps.display()
    );
    let mut database = db::open(&db_path)?;
    let summary = ingest::import(&mut database, &[dumps.display().to_string()], IngestOptions::default(), &mut |_| {})?;
    print_summary(&summary, "Imported", Format::Table, Some(&db_path))?;
    println!();
    let conn = &database.conn;
    let run_snapshots = oom_snapshots(conn, None)?;
    let findings: Vec<OomFinding> = analysis::oom(conn, &run_snapshots)?.into_iter().filter(|finding| finding.run == config.run_id).collect();
    print_findings(&findings, Format::Table)?;
    if let Some(finding) = findings.first() {
        let trend = listing::trend(conn, Some(&finding.handle), Some(&config.run_id))?;
        let keep = |name: &str| trend.column(name);
        let wanted = ["node", "seq", "time_s", "used_bytes", "free_bytes", "hole_count", "largest_hole", "fragmentation", "largest_reclaimable"];
        let indices: Vec<usize> = wanted.iter().filter_map(|name| keep(name)).collect();
        let node_column = keep("node");
        let rows: Vec<Vec<query::Cell>> = trend
            .rows
            .iter()
            .filter(|row| node_column.is_some_and(|index| row[index] == query::Cell::Integer(finding.node)))
            .map(|row| indices.iter().map(|&index| row[index].clone()).collect())
            .collect();
        let shown: Vec<Vec<query::Cell>> = rows.iter().skip(rows.len().saturating_sub(8)).cloned().collect();
        let table = Table::new(wanted.iter().map(|name| name.to_string()).collect(), shown).with_sizes(&["used_bytes", "free_bytes", "largest_hole", "largest_reclaimable"]);
        println!("Fragmentation trend of {} on node {} (last {} snapshots):", finding.handle, finding.node, table.rows.len());
        print(&table, Format::Table)?;
        println!();
    }
    // The pictures: the memory map of the run's last snapshots and the fragmentation trend.
    let map_path = args.dir.join("map.html");
    let plot_path = args.dir.join("fragmentation.svg");
    if let Some(finding) = findings.first() {
        let ids = select::snapshots_between(conn, finding.snapshot_id.saturating_sub(10), finding.snapshot_id)?;
        let mut frames = Vec::new();
        for snapshot_id in ids {
            let layouts = select::memories(conn, snapshot_id, Some("GPU_FB_MEM"))?
                .into_iter()
                .map(|memory_id| analysis::load_layout(conn, snapshot_id, memory_id))
                .collect::<Result<Vec<_>>>()?;
            if let Some(first) = layouts.first() {
                frames.push(memstate::viz::html::Frame { label: format!("{} node {} seq {} (snapshot {snapshot_id})", first.run, first.node, first.seq), layouts });
            }
        }
        let page = memstate::viz::html::render(&format!("memstate map of run {} up to the OOM", config.run_id), &frames);
        std::fs::write(&map_path, page).map_err(|error| Error::Usage(format!("{}: cannot write: {error}", map_path.display())))?;
        let (series, ooms) = memstate::viz::plot::load(conn, &config.run_id, Some("GPU_FB_MEM"), memstate::viz::plot::Metric::Fragmentation, memstate::viz::plot::XAxis::Time)?;
        let svg = memstate::viz::plot::render_svg(&config.run_id, &series, &ooms, memstate::viz::plot::Metric::Fragmentation, memstate::viz::plot::XAxis::Time)?;
        std::fs::write(&plot_path, svg).map_err(|error| Error::Usage(format!("{}: cannot write: {error}", plot_path.display())))?;
        println!("Open {} (memory map: zoom, pan, hover) and {} (fragmentation over time).", map_path.display(), plot_path.display());
        println!();
    }
    let db = db_path.display();
    println!("Try next:");
    println!("  memstate --db {db} oom                                  # the report above, also --format json");
    println!("  memstate --db {db} holes --memory GPU_FB_MEM            # largest holes of every GPU");
    println!("  memstate --db {db} allocations --by provenance          # who holds the memory");
    println!("  memstate --db {db} trend --memory GPU_FB_MEM --format csv");
    println!("  memstate --db {db} map --memory GPU_FB_MEM              # the layout in the terminal");
    println!("  memstate --db {db} report --list                        # canned queries");
    println!("  sqlite3 {db} 'SELECT * FROM memory_trend LIMIT 5'       # or any SQL over the views");
    Ok(0)
}

/// The snapshots of `--snapshots`: `A..B` (ids, inclusive) or a comma list of selectors.
fn snapshot_list(conn: &rusqlite::Connection, text: &str) -> Result<Vec<i64>> {
    if let Some((low, high)) = text.split_once("..") {
        let (low, high) = match (low.trim().parse::<i64>(), high.trim().parse::<i64>()) {
            (Ok(low), Ok(high)) if low <= high => (low, high),
            _ => return Err(Error::Usage(format!("--snapshots {text:?}: expected A..B with snapshot ids A <= B"))),
        };
        let ids = select::snapshots_between(conn, low, high)?;
        if ids.is_empty() {
            return Err(Error::Usage(format!("no snapshot between {low} and {high}")));
        }
        return Ok(ids);
    }
    let mut ids = Vec::new();
    for selector in text.split(',') {
        ids.extend(select::snapshots(conn, selector.trim())?);
    }
    Ok(ids)
}

fn parse_range(text: &str) -> Result<(u64, u64)> {
    let (start, end) = text.split_once(':').ok_or_else(|| Error::Usage(format!("--range {text:?}: expected START:END")))?;
    let size = |part: &str| if part.trim() == "0" { Ok(0) } else { memstate::sim::parse_size(part).map_err(Error::Usage) };
    let (start, end) = (size(start)?, size(end)?);
    if end <= start {
        return Err(Error::Usage(format!("--range {text:?}: END must be above START")));
    }
    Ok((start, end))
}

fn map(db_path: &Path, args: &MapArgs) -> Result<u8> {
    use std::io::IsTerminal;
    let database = db::open_read_only(db_path)?;
    let conn = &database.conn;
    let snapshot_ids = match &args.snapshots {
        Some(list) => snapshot_list(conn, list)?,
        None => select::snapshots(conn, &args.snapshot.snapshot)?,
    };
    let mut frames = Vec::new();
    for &snapshot_id in &snapshot_ids {
        let memory_ids = select::memories(conn, snapshot_id, args.memory.memory.as_deref())?;
        let layouts = memory_ids.iter().map(|&memory_id| analysis::load_layout(conn, snapshot_id, memory_id)).collect::<Result<Vec<_>>>()?;
        if let Some(first) = layouts.first() {
            let label = format!("{} node {} seq {} (snapshot {snapshot_id})", first.run, first.node, first.seq);
            frames.push(memstate::viz::html::Frame { label, layouts });
        }
    }
    if frames.is_empty() {
        return Err(Error::Usage(format!("no memory matches {:?} in the selected snapshots", args.memory.memory.as_deref().unwrap_or(""))));
    }
    if let Some(path) = &args.html {
        let title = match frames.as_slice() {
            [one] => format!("memstate map of {}", one.label),
            several => format!("memstate map of {} snapshots, from {}", several.len(), several[0].label),
        };
        let page = memstate::viz::html::render(&title, &frames);
        std::fs::write(path, page.as_bytes()).map_err(|error| Error::Usage(format!("{}: cannot write: {error}", path.display())))?;
        let allocations: usize = frames.iter().flat_map(|frame| frame.layouts.iter()).map(|layout| layout.allocations.len()).sum();
        println!("wrote {} ({}, {} snapshots, {allocations} allocations)", path.display(), output::human_size(page.len() as i64), frames.len());
        return Ok(0);
    }
    let range = args.range.as_deref().map(parse_range).transpose()?;
    let color = !args.no_color && io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let style = memstate::viz::terminal::Style { width: args.width.clamp(10, 1000), color };
    let mut out = io::stdout().lock();
    writeln!(out, "{}", memstate::viz::terminal::legend(style)).map_err(write_error)?;
    for frame in &frames {
        for layout in &frame.layouts {
            memstate::viz::terminal::draw(layout, range, style, &mut out).map_err(write_error)?;
        }
    }
    Ok(0)
}

fn plot(db_path: &Path, args: &PlotArgs) -> Result<u8> {
    let database = db::open_read_only(db_path)?;
    let conn = &database.conn;
    let run = match &args.run {
        Some(run) => run.clone(),
        None => conn
            .query_row("SELECT run FROM snapshots ORDER BY snapshot_id DESC LIMIT 1", [], |row| row.get(0))
            .map_err(|_| Error::Usage("the database holds no snapshot".to_string()))?,
    };
    let (series, ooms) = memstate::viz::plot::load(conn, &run, args.memory.memory.as_deref(), args.metric, args.x_axis)?;
    let svg = memstate::viz::plot::render_svg(&run, &series, &ooms, args.metric, args.x_axis)?;
    std::fs::write(&args.out, svg.as_bytes()).map_err(|error| Error::Usage(format!("{}: cannot write: {error}", args.out.display())))?;
    println!("wrote {} ({} lines, {} oom marks)", args.out.display(), series.len(), ooms.len());
    Ok(0)
}
