//! `memstate completions SHELL` and `memstate man [COMMAND | --all DIR]`: generated from the clap
//! definitions (completions offer the canned queries' names after `report`).

use std::io::{self, Write};

use clap::CommandFactory;
use memstate::{Error, Result};

use crate::cli::{Cli, CompletionsArgs, ManArgs};

pub fn completions(args: &CompletionsArgs) -> Result<u8> {
    // clap_complete panics when its writer fails (`memstate completions zsh | head -3` closes
    // the pipe early): the script is made in memory, then written, a closed pipe ending quietly.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "memstate", &mut script);
    let mut out = io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .map_err(Error::Output)?;
    Ok(0)
}

/// A command's page: the top-level one, or a subcommand's named `memstate-NAME`.
fn page(command: clap::Command) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut bytes)
        .map_err(Error::Output)?;
    Ok(bytes)
}

fn subcommand_page(top: &clap::Command, sub: &clap::Command) -> Result<Vec<u8>> {
    // clap names commands with static text; a page or two a run is all this leaks.
    let name: &'static str =
        Box::leak(format!("{}-{}", top.get_name(), sub.get_name()).into_boxed_str());
    page(sub.clone().name(name).bin_name(name))
}

pub fn man(args: &ManArgs) -> Result<u8> {
    let mut top = Cli::command();
    top.build();
    if let Some(folder) = &args.all {
        std::fs::create_dir_all(folder).map_err(|error| Error::write(folder, error))?;
        let mut pages = vec![("memstate.1".to_string(), page(top.clone())?)];
        for sub in top.get_subcommands().filter(|sub| sub.get_name() != "help") {
            pages.push((
                format!("memstate-{}.1", sub.get_name()),
                subcommand_page(&top, sub)?,
            ));
        }
        for (name, bytes) in &pages {
            let path = folder.join(name);
            memstate::files::write_atomically(&path, bytes, &path)?;
        }
        note!(
            "wrote {} manual pages into {}",
            pages.len(),
            memstate::units::visible(&folder.display().to_string())
        );
        return Ok(0);
    }
    let bytes = match &args.command {
        None => page(top)?,
        Some(name) => {
            let sub = top.find_subcommand(name).ok_or_else(|| {
                let names: Vec<&str> = top
                    .get_subcommands()
                    .map(|sub| sub.get_name())
                    .filter(|name| *name != "help")
                    .collect();
                Error::Usage(format!(
                    "no command {name:?}; there are: {}",
                    names.join(", ")
                ))
            })?;
            subcommand_page(&top, sub)?
        }
    };
    let mut out = io::stdout().lock();
    out.write_all(&bytes).map_err(Error::Output)?;
    out.flush().map_err(Error::Output)?;
    Ok(0)
}
