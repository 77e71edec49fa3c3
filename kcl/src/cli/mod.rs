//! The `kcl` binary's subcommands. Each lives in its own file so the front end (`fmt`,
//! `parse`) and the evaluator (`run`) can grow independently.

pub mod completion;
pub mod fmt;
pub mod import;
pub mod parse;
pub mod run;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// KCL language tool.
#[derive(Parser, Debug)]
#[command(name = "kcl", version, about = "KCL configuration language tool")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Format KCL files in place (or check them with --check).
    Fmt(fmt::FmtArgs),
    /// Parse KCL files and report syntax errors.
    Parse(parse::ParseArgs),
    /// Evaluate KCL files and print the result.
    Run(run::RunArgs),
    /// Generate KCL schemas from an OpenAPI v2 document and/or CRD YAML.
    Import(import::ImportArgs),
    /// Print a shell completion script.
    Completion(completion::CompletionArgs),
}

/// Entry point of the `kcl` binary: exit code 0 on success, 1 on errors.
pub fn main() -> ExitCode {
    dispatch(Cli::parse())
}

/// Entry point for embedding (`kusionctl kcl ...`): `args` includes the program name.
pub fn main_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::try_parse_from(args) {
        Ok(cli) => dispatch(cli),
        Err(e) => {
            // --help/--version print and succeed; usage errors exit 2 like the binary
            let _ = e.print();
            ExitCode::from(if e.use_stderr() { 2 } else { 0 })
        }
    }
}

fn dispatch(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Fmt(a) => fmt::run(a),
        Command::Parse(a) => parse::run(a),
        Command::Run(a) => run::run(a),
        Command::Import(a) => import::run(a),
        Command::Completion(a) => completion::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
