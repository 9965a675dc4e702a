//! `memstate completions SHELL` and `memstate man`: generated from the clap definitions.

use std::io::{self, Write};

use clap::CommandFactory;
use memstate::{Error, Result};

use crate::cli::{Cli, CompletionsArgs};

pub fn completions(args: &CompletionsArgs) -> Result<u8> {
    let mut out = io::stdout().lock();
    clap_complete::generate(args.shell, &mut Cli::command(), "memstate", &mut out);
    out.flush().map_err(Error::Output)?;
    Ok(0)
}

pub fn man() -> Result<u8> {
    let mut out = io::stdout().lock();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(Error::Output)?;
    out.flush().map_err(Error::Output)?;
    Ok(0)
}
