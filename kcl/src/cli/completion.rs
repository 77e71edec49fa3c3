//! `kcl completion SHELL`: a completion script generated from kcl's own command tree.

use std::process::ExitCode;

use clap::{Args, CommandFactory};

#[derive(Args, Debug)]
pub struct CompletionArgs {
    /// The shell to complete for (`source <(kcl completion bash)`).
    pub shell: clap_complete::Shell,
}

pub fn run(args: CompletionArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = super::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "kcl", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
