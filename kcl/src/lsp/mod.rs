//! `kcl lsp`: the KCL language server (LSP 3.17 over stdio).
//!
//! Built on `lsp-server` (rust-analyzer's scaffold) and `lsp-types`: a synchronous transport
//! with no async runtime, so the server owns its threads (a main loop, two request workers,
//! one diagnostics thread), which is what cancellation and panic isolation need; see the
//! crate README for the choice. Layout:
//!
//! - [`db`]: buffers over disk files, parsed files, compile units and their cached analyses;
//! - [`sema`]: the semantic model (definitions, references, types, scopes);
//! - [`ide`]: the features; [`server`]: the protocol loop; [`pos`]: positions;
//!   [`signatures`]: builtin and system-module signatures.
//!
//! Logs go to stderr (stdout is the protocol channel), filtered by `KCL_LSP_LOG` (tracing's
//! env-filter syntax, default `warn`).

pub mod db;
pub mod ide;
pub mod pos;
pub mod sema;
pub mod server;
pub mod signatures;

pub use server::{Options, PANICS, serve};

/// Runs the server on standard input and output until the client says `exit`.
pub fn run_stdio() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("KCL_LSP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    // a panic is logged (and answered) by the server; the default hook's text on stderr
    // would be a second, unstructured copy
    std::panic::set_hook(Box::new(|info| {
        tracing::error!("panic: {info}");
    }));
    let (conn, io) = lsp_server::Connection::stdio();
    serve(conn, Options::default())?;
    io.join()?;
    Ok(())
}
