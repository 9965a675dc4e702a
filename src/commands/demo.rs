//! `memstate demo`: simulate a run that ends in an out-of-memory error, import it, and tell what
//! happened: the OOM report, the failed memory's trend, the map and the chart, and what to try next.

use std::path::Path;

use memstate::import::{self, IngestOptions};
use memstate::present::{Cell, Format, Report, Table};
use memstate::query::{context, pages};
use memstate::query::{listing, select};
use memstate::story::{self, link, rows, text};
use memstate::units::{counted, visible};
use memstate::viz::plot;
use memstate::{db, sim, Error, Result};

use super::{say, Printer};
use crate::cli::DemoArgs;

/// How to run memstate again from here: `memstate` when installed, else the cargo command that
/// built this binary (after `cargo run` the binary is not on the PATH).
fn invocation() -> String {
    let exe = std::env::current_exe()
        .ok()
        .map(|path| path.display().to_string())
        .unwrap_or_default();
    if exe.contains("/target/release/") {
        "cargo run --release --".to_string()
    } else if exe.contains("/target/debug/") {
        "cargo run --".to_string()
    } else {
        "memstate".to_string()
    }
}

pub fn run(args: &DemoArgs, db: Option<&Path>) -> Result<u8> {
    let dumps = args.dir.join("dumps");
    let db_path = db.map_or_else(|| args.dir.join("memstate.db"), Path::to_path_buf);
    // The run happens now, so a dashboard's default time range (the last hours) shows it; run
    // again, the demo replaces its earlier run.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(sim::DEFAULT_WALL_START, |elapsed| elapsed.as_secs() as i64);
    let config = sim::Config {
        seed: args.seed,
        run_id: format!("demo-seed{}", args.seed),
        wall_start_unix: now,
        ..Default::default()
    };
    let simulated = sim::simulate(&config, &dumps, &mut |_| {})?;
    say(&[format!(
        "Simulated run {}: {} x {}, {}, {} ({}) written to {}",
        config.run_id,
        counted(config.nodes as u64, "node"),
        counted(config.gpus_per_node as u64, "GPU"),
        counted(simulated.steps, "step"),
        counted(simulated.dumps, "dump"),
        counted(simulated.allocations, "allocation"),
        visible(&dumps.display().to_string())
    )])?;
    let mut database = db::open(&db_path)?;
    let summary = import::import(
        &mut database,
        &[dumps.display().to_string()],
        IngestOptions {
            replace: true,
            ..IngestOptions::default()
        },
        &mut |_| {},
    )?;
    say(&[format!(
        "Imported {} ({}){}{} into {}",
        counted(summary.imported + summary.replaced, "dump"),
        counted(summary.allocations, "allocation"),
        if summary.replaced > 0 {
            format!(
                ", {} of them replacing the previous demo run's",
                summary.replaced
            )
        } else {
            String::new()
        },
        if summary.unchanged > 0 {
            format!(
                ", {} unchanged since the previous demo run",
                summary.unchanged
            )
        } else {
            String::new()
        },
        visible(&db_path.display().to_string())
    )])?;
    if summary.refused > 0 {
        return Err(Error::Internal {
            file: dumps.display().to_string(),
            message: format!("{} simulated dumps were refused", summary.refused),
        });
    }
    database.finish()?;
    let database = db::open_read_only(&db_path)?;
    let conn = database.connection();
    let mut stories: Vec<_> = context::stories(conn, &select::oom_snapshots(conn, None)?)?
        .into_iter()
        .filter(|story| story.finding.run == config.run_id)
        .collect();
    // The map of the failure, with the failed memory's history, so the report can link into it.
    let map_path = args.dir.join("map.html");
    let parts = pages::failure_page(conn, &stories, Some("GPU_FB_MEM"), pages::FILE_HISTORY)?;
    if !parts.frames.is_empty() {
        let page = parts.render(&format!(
            "memstate map of run {}: the out-of-memory error",
            config.run_id
        ));
        let target = super::output_target(&database, &map_path)?;
        super::write_output(&target, &map_path, page.as_bytes())?;
        story::link_stories(&mut stories, &link::file_url(&map_path));
    }
    say(&[String::new()])?;
    Printer::with_format(Format::Table).print(&Report::told(
        rows::story_table(&stories),
        |out, style| {
            for story in &stories {
                text::describe_story(story, false, style, out)?;
                writeln!(out)?;
            }
            Ok(())
        },
    ))?;
    let Some(finding) = stories.first().map(|story| &story.finding) else {
        say(&["(this seed ended without an out-of-memory error)".to_string()])?;
        return Ok(0);
    };
    // The failed memory's figures over the node's last snapshots.
    let trend = listing::trend_table(conn, Some(&finding.handle), Some(&config.run_id))?;
    // The title names the node; at 80 columns the fragmentation and the largest hole go first.
    let wanted = [
        "seq",
        "time_s",
        "fragmentation",
        "largest_hole",
        "free_bytes",
        "used_bytes",
        "hole_count",
        "largest_reclaimable",
    ];
    let indices: Vec<usize> = wanted
        .iter()
        .filter_map(|name| trend.column(name))
        .collect();
    let node_column = trend.column("node");
    let rows: Vec<Vec<Cell>> = trend
        .rows
        .iter()
        .filter(|row| node_column.is_some_and(|index| row[index] == Cell::Integer(finding.node)))
        .map(|row| indices.iter().map(|&index| row[index].clone()).collect())
        .collect();
    let shown: Vec<Vec<Cell>> = rows
        .iter()
        .skip(rows.len().saturating_sub(8))
        .cloned()
        .collect();
    let units = indices.iter().map(|&index| trend.units[index]).collect();
    let table = Table::with_units(
        indices
            .iter()
            .map(|&index| trend.columns[index].clone())
            .collect(),
        units,
        shown,
    );
    say(&[format!(
        "Fragmentation trend of {} on node {} (last {} snapshots):",
        finding.handle,
        finding.node,
        table.rows.len()
    )])?;
    Printer::with_format(Format::Table).print(&Report::table(table))?;
    say(&[String::new()])?;
    // The pictures: the memory map of the run's last snapshots and the fragmentation trend.
    let plot_path = args.dir.join("fragmentation.svg");
    let gpus = select::run_memory_ids(conn, &config.run_id, Some("GPU_FB_MEM"))?;
    let (series, ooms) = memstate::query::load::trend_series(
        conn,
        &config.run_id,
        Some(&gpus),
        plot::Metric::Fragmentation.column(),
        plot::XAxis::Time.column(),
    )?;
    let svg = plot::render_svg(
        &config.run_id,
        &series,
        &ooms,
        plot::Metric::Fragmentation,
        plot::XAxis::Time,
    )?;
    let target = super::output_target(&database, &plot_path)?;
    super::write_output(&target, &plot_path, svg.as_bytes())?;
    say(&[
        format!(
            "Open {} (the memory map, opening on the failed request, and the failed memory's history: zoom, pan, hover) and {} (fragmentation over time).",
            visible(&format!("{}{}", link::file_url(&map_path), parts.opening_fragment().unwrap_or_default())),
            visible(&plot_path.display().to_string())
        ),
        String::new(),
    ])?;
    let me = invocation();
    let db = visible(&db_path.display().to_string()).into_owned();
    // Each command under what it answers, the database named once, so that a line stays within
    // 80 columns.
    let mut next = vec![
        "Try next (in a shell, from here):".to_string(),
        format!("  export MEMSTATE_DB={db}"),
    ];
    for (what, command) in [
        ("the report above, also --format json", format!("{me} oom")),
        (
            "largest holes of every GPU",
            format!("{me} holes --memory GPU_FB_MEM"),
        ),
        (
            "who holds the memory",
            format!("{me} allocations --by provenance"),
        ),
        (
            "the failed memory's figures over time, as CSV",
            format!("{me} trend --memory GPU_FB_MEM --format csv"),
        ),
        (
            "the layout in the terminal",
            format!("{me} map --memory GPU_FB_MEM"),
        ),
        ("the canned queries", format!("{me} report --list")),
        (
            "or any SQL over the views",
            format!("sqlite3 {db} 'SELECT * FROM memory_trend LIMIT 5'"),
        ),
    ] {
        next.push(format!("  # {what}"));
        next.push(format!("  {command}"));
    }
    say(&next)?;
    Ok(0)
}
