//! `memstate simulate`: write a realistic run of dumps.

use std::time::Instant;

use memstate::present::{Cell, Report, Table, Unit};
use memstate::sim::{self, SimulationEvent};
use memstate::units::{counted, human, visible};
use memstate::Result;

use super::{progress_bar, Printer};
use crate::cli::SimulateArgs;

pub fn run(args: &SimulateArgs) -> Result<u8> {
    let config = sim::Config {
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
        layout: args.layout.into(),
        compression: args.compression.into(),
        continue_after_oom: args.continue_after_oom,
        wall_start_unix: args.wall_start,
        pace: args.pace.unwrap_or_default(),
    };
    let bar = progress_bar(
        args.quiet,
        "{spinner} [{elapsed_precise}] {bar:30} step {pos}/{len}",
    );
    let started = Instant::now();
    let summary = sim::simulate(&config, &args.out, &mut |event| match event {
        SimulationEvent::Started { steps } => bar.set_length(steps),
        SimulationEvent::Step { step } => bar.set_position(step),
    });
    bar.finish_and_clear();
    let summary = summary?;
    let seconds = started.elapsed().as_secs_f64();
    let table = Table::record(vec![
        ("run", Cell::text(summary.run_id.clone())),
        ("dumps", Cell::count(summary.dumps)),
        ("allocations", Cell::count(summary.allocations)),
        ("bytes", Cell::count(summary.bytes)),
        ("steps", Cell::count(summary.steps)),
        ("oom_dumps", Cell::count(summary.oom_dumps)),
        ("collections", Cell::count(summary.collections)),
        (
            "deferred_allocations",
            Cell::count(summary.deferred_allocations),
        ),
        ("seconds", Cell::Real(seconds)),
    ])
    .with_unit(&["bytes"], Unit::Bytes);
    let report = Report::told(table, |out, _| {
        writeln!(
            out,
            "wrote {} ({}, {}) of run {} to {} in {:.2} s: {}, {}, {} collected, {}",
            counted(summary.dumps, "dump"),
            counted(summary.allocations, "allocation"),
            human(summary.bytes),
            visible(&summary.run_id),
            visible(&args.out.display().to_string()),
            seconds,
            counted(summary.steps, "step"),
            counted(summary.oom_dumps, "oom dump"),
            counted(summary.collections, "instance"),
            counted(summary.deferred_allocations, "deferred allocation"),
        )
    });
    Printer::with_format(args.format).print(&report)?;
    Ok(0)
}
