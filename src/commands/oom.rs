//! `memstate oom`: for each failed request, exhaustion or fragmentation, what collection would
//! give, and the allocations in the way (the story is told by `memstate::story`).

use std::path::Path;

use memstate::present::Report;
use memstate::query::select;
use memstate::query::{context, pages};
use memstate::story::{self, link, rows, text};
use memstate::units::counted;
use memstate::Result;

use super::Printer;
use crate::cli::OomArgs;

pub fn run(db_path: &Path, args: &OomArgs) -> Result<u8> {
    let (database, target) = super::open_for_page(db_path, args.html.as_ref())?;
    let snapshot_ids = select::oom_snapshots(database.connection(), args.snapshot.as_deref())?;
    let mut stories = context::stories(database.connection(), &snapshot_ids)?;
    if let (Some(path), Some(target)) = (&args.html, &target) {
        if !stories.is_empty() {
            let parts =
                pages::failure_page(database.connection(), &stories, None, pages::FILE_HISTORY)?;
            let title = format!(
                "memstate: {} out of memory",
                counted(stories.len() as u64, "request")
            );
            super::write_output(target, path, parts.render(&title).as_bytes())?;
            story::link_stories(&mut stories, &link::file_url(path));
        }
    }
    let report = Report::told(rows::story_table(&stories), |out, style| {
        if stories.is_empty() {
            writeln!(
                out,
                "no failed request in the selected snapshots{}",
                if args.html.is_some() {
                    " (no page written)"
                } else {
                    ""
                }
            )?;
        }
        for story in &stories {
            text::describe_story(story, args.all_blockers, style, out)?;
            writeln!(out)?;
        }
        Ok(())
    });
    Printer::new(&args.output).print(&report)?;
    Ok(0)
}
