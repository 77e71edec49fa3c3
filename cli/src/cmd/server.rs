//! `kusionctl server`: the REST API of `kusion-server` over the Konfig checkout in the current
//! folder, with this command line's way of opening a stack (the code `kusionctl apply -C
//! <stack>` runs) behind the server's `StackSource`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::StateStore;
use kusion_sdk::runtime::Runtime;
use kusion_server::{Prepared, SourceError, StackRef, StackSource};
use serde_json::Value;

use crate::args::{ConfigArgs, Global};
use crate::exit;
use crate::opener::{StackOpener, StateChoice};

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Where the server keeps its tokens (hashed) and audit log (default:
    /// <checkout>/.kusion/server).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Runtime configuration: a YAML or JSON mapping from runtime name to its settings.
    #[arg(long, env = "KUSION_RUNTIME_CONFIG", value_name = "FILE")]
    pub runtime_config: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// The stacks below the checkout's root, opened as `kusionctl apply -C <stack>` opens them,
/// with each stack's own state (its `stack.yaml`, else `<stack>/.kusion/state`).
struct Checkout {
    root: PathBuf,
    opener: StackOpener,
}

fn local() -> StateChoice<'static> {
    StateChoice {
        state_dir: None,
        backend: "local",
    }
}

fn source_error(e: anyhow::Error) -> SourceError {
    SourceError(format!("{e:#}"))
}

impl StackSource for Checkout {
    fn stacks(&self) -> Result<Vec<StackRef>, SourceError> {
        let dirs = crate::project::discover_stacks(&self.root).map_err(source_error)?;
        let mut out = Vec::new();
        for dir in dirs {
            match crate::project::open_stack(&dir) {
                Ok(s) => out.push(StackRef {
                    project: s.project.name,
                    stack: s.config.name,
                    dir: s.dir,
                    description: s.config.description,
                    require_approval: s.config.require_approval,
                }),
                // One broken stack.yaml must not hide the others.
                Err(e) => tracing::warn!("skipping {}: {e:#}", dir.display()),
            }
        }
        Ok(out)
    }

    fn compile(&self, stack: &StackRef) -> Result<Spec, SourceError> {
        self.opener.compile(&stack.dir).map_err(source_error)
    }

    fn state(&self, stack: &StackRef) -> Result<Arc<dyn StateStore>, SourceError> {
        self.opener
            .state_store(&stack.dir, local())
            .map_err(source_error)
    }

    fn open(&self, stack: &StackRef) -> Result<Prepared, SourceError> {
        self.opener
            .open(&stack.dir, local(), &[], false)
            .map(|(spec, stack, guard)| Prepared { spec, stack, guard })
            .map_err(source_error)
    }
}

pub(crate) async fn run(
    args: &ServerArgs,
    global: &Global,
    runtimes: Vec<Arc<dyn Runtime>>,
) -> Result<u8> {
    let root = match &global.workdir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let root = std::path::absolute(&root).unwrap_or(root);
    let runtime_config = match &global.runtime_config {
        Some(path) => crate::commands::read_runtime_config(path)?,
        None => Value::Null,
    };
    let plugin_config = crate::commands::plugin_config_from(global.config.clone(), &global.set)?;
    let plugins = kusion_kernel::plugin::load_plugins(&plugin_config);
    let checkout = Checkout {
        root: root.clone(),
        opener: StackOpener {
            plugins,
            runtimes,
            config_file: StackOpener::default_config_file(global.config.clone()),
            set: global.set.clone(),
            runtime_config,
        },
    };
    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| root.join(".kusion").join("server"));
    let options = kusion_server::ServeOptions {
        listen: args.listen,
        data_dir,
        workers: 1,
    };
    let bound = kusion_server::bind(
        &options,
        Arc::new(checkout),
        Arc::new(kusion_server::InProcessQueue::default()),
    )
    .await?;
    print_banner(&root, &bound);
    kusion_server::serve(bound, options.workers).await?;
    Ok(exit::OK)
}

fn print_banner(root: &Path, bound: &kusion_server::Bound) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // Printed here only: the token is stored as its hash and never logged.
    let _ = writeln!(
        out,
        "kusion server listening on http://{} serving {}",
        bound.address,
        root.display()
    );
    let _ = writeln!(
        out,
        "admin token (shown once; valid until the next start): {}",
        bound.admin_token
    );
    let _ = out.flush();
}
