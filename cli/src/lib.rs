//! `kusionctl`: the command line of kusion-rs. The binary is a thin `main`; tests and the
//! test bed build their own binaries around [`main_with`] with extra runtimes.

mod args;
mod cmd;
mod cmdb;
mod commands;
pub mod compile;
mod completion;
mod config;
mod context;
mod diff_view;
mod interrupt;
pub mod kcl_plugins;
#[cfg(feature = "controller")]
mod opener;
mod policy;
mod progress;
pub mod project;
mod render;
pub mod version;

pub mod readiness;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use kusion_sdk::runtime::Runtime;

pub use args::Cli;

/// Exit codes: 0 ok, 1 failed, 2 usage error, 3 lock held, 4 blocked by policy; with
/// `preview --detailed-exitcode` and `drift`, 2 means changes (terraform's convention).
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    /// `preview --detailed-exitcode` and `drift`: something differs.
    pub const CHANGES: u8 = 2;
    pub const LOCKED: u8 = 3;
    pub const POLICY: u8 = 4;
}

/// A usage error found after argument parsing (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The runtimes compiled into the shipped binary. Runtime plugins are loaded at run time by the
/// plugin host; none are compiled in.
pub fn builtin_runtimes() -> Vec<Arc<dyn Runtime>> {
    Vec::new()
}

/// Parse the command line and run it with `runtimes` available.
pub fn main_with(runtimes: Vec<Arc<dyn Runtime>>) -> ExitCode {
    if let Some(code) = cmd::kcl::intercept() {
        return code;
    }
    let mut cli = Cli::parse();
    if let Err(message) = cli.resolve() {
        use clap::CommandFactory;
        Cli::command()
            .error(clap::error::ErrorKind::InvalidValue, message)
            .exit();
    }
    init_tracing(cli.global.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let code = runtime.block_on(commands::run(cli, runtimes));
    ExitCode::from(code)
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("KUSION_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}
