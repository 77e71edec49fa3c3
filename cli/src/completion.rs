//! Shell completions and man pages, both generated from the same clap command trees the binaries
//! parse with, so they cannot drift from the real options.

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::exit;

/// `kusionctl completion SHELL`: the script on standard output.
pub fn completion(shell: clap_complete::Shell) -> Result<u8> {
    let mut cmd = crate::Cli::command();
    clap_complete::generate(shell, &mut cmd, "kusionctl", &mut std::io::stdout());
    Ok(exit::OK)
}

/// `kusionctl manpages DIR`: `kusionctl.1`, `kusionctl-<sub>.1`, ... and the same for `kcl`.
pub fn manpages(dir: &Path) -> Result<u8> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = 0;
    for mut cmd in [
        crate::Cli::command(),
        kusion_kcl::cli::Cli::command().name("kcl"),
    ] {
        // Built, a subcommand carries the global options it accepts (`-C`, `--state-dir`).
        cmd.build();
        written += write_pages(dir, cmd, "")?;
    }
    eprintln!("{written} man pages written to {}", dir.display());
    Ok(exit::OK)
}

/// One page per command and subcommand (`kusionctl-state-list.1`), as git names its pages.
fn write_pages(dir: &Path, cmd: clap::Command, prefix: &str) -> Result<usize> {
    let name = if prefix.is_empty() {
        cmd.get_name().to_string()
    } else {
        format!("{prefix}-{}", cmd.get_name())
    };
    // clap names are `&'static str` without its `string` feature; this runs once per page in a
    // short-lived process, so leaking the few names is cheaper than the feature for every build.
    let static_name: &'static str = Box::leak(name.clone().into_boxed_str());
    let cmd = cmd.name(static_name).bin_name(name.replace('-', " "));
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut page)
        .with_context(|| format!("rendering the man page of {name}"))?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    let mut written = 1;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        written += write_pages(dir, sub.clone(), &name)?;
    }
    Ok(written)
}
