//! `memstate blockers --size N`: where a request of N bytes would go in each memory looked at:
//! the hole it fits in now, else the cheapest place and what stands in it. By default the
//! memories of the kind a failed request named (else GPU framebuffers); `--memory` names others,
//! `--all` takes every memory. The computation is `memstate::story::place`.

use std::path::Path;

use memstate::present::{parallel, Format, Report};
use memstate::query::context::{self, Scope, Scoped};
use memstate::story::{self, link, rows, text};
use memstate::units::human;
use memstate::viz::page;
use memstate::Result;

use super::Printer;
use crate::cli::BlockersArgs;

pub fn run(db_path: &Path, args: &BlockersArgs) -> Result<u8> {
    let (database, target) = super::open_for_page(db_path, args.html.as_ref())?;
    let conn = database.connection();
    let scope = match (&args.memory, args.all) {
        (Some(selector), _) => Scope::Named(selector.clone()),
        (None, true) => Scope::All,
        (None, false) => Scope::Default,
    };
    let Scoped {
        pairs,
        kinds,
        failed,
    } = context::scope_pairs(conn, &args.snapshot.snapshot, &scope)?;
    let mut placements =
        context::placements(conn, &pairs, args.size, args.alignment, args.html.is_some())?;
    if let (Some(path), Some(target)) = (&args.html, &target) {
        let parts = page::request_page(&placements);
        let title = format!("memstate: where a request of {} would go", human(args.size));
        super::write_output(target, path, parts.render(&title).as_bytes())?;
        story::link_placements(&mut placements, &link::file_url(path));
    }
    let printer = Printer::new(&args.output);
    // People read the story below. The rows, with every blocker list as JSON, are for the exact
    // formats; for people only their columns are needed (`--columns` names them).
    let tabled = match printer.format() {
        Format::Table => &placements[..0],
        Format::Rows(_) => &placements[..],
    };
    let report = Report::told(rows::placement_table(tabled), |out, style| {
        if !kinds.is_empty() {
            writeln!(
                out,
                "Looking at the {} memories ({}; --memory names others, --all takes every memory).",
                kinds.join(" and "),
                if failed {
                    "where a request failed in these snapshots"
                } else {
                    "no request failed in these snapshots"
                }
            )?;
        }
        let fitting = placements
            .iter()
            .filter(|placement| placement.fits_now.is_some())
            .count() as u64;
        let total = placements.len();
        writeln!(
            out,
            "A request of {} fits now in {fitting} of {total} {}.",
            human(args.size),
            if total == 1 { "memory" } else { "memories" }
        )?;
        writeln!(out)?;
        // Each memory's text depends on it alone: written by every core (40,000 memories'
        // blocker tables took a second on one).
        parallel::write_each(&placements, out, |placement, out| {
            text::describe_placement(placement, args.all_blockers, style, out)?;
            if placement.fits_now.is_none() {
                writeln!(out)?;
            }
            Ok(())
        })
    });
    printer.print(&report)?;
    Ok(0)
}
