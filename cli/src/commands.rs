//! The dispatch: a parsed command line handed to the subcommand that runs it (one file each under
//! `cmd/`), and its error turned into an exit code.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use kusion_kernel::operation;
use kusion_kernel::policy as kpolicy;
use kusion_kernel::state::StateError;
use kusion_sdk::runtime::Runtime;
use serde_json::json;

use crate::args::{Cli, Command, Output, PluginCommand};
use crate::config::plugin_config;
use crate::context::{build_context, load_spec, require_stack};
use crate::interrupt::install_interrupt;
use crate::render::Styles;
use crate::{UsageError, exit};

// Old paths of what moved to `config.rs`, `context.rs` and `interrupt.rs`, still named by
// `opener.rs`, `cmd/server.rs` and `cmd/run.rs` (being changed on main by the server work);
// they go when those files name the new places.

/// Run a parsed command line; returns the exit code.
pub async fn run(cli: Cli, runtimes: Vec<Arc<dyn Runtime>>) -> u8 {
    let json = cli.global.output == Output::Json;
    match dispatch(cli, runtimes).await {
        Ok(code) => code,
        Err(e) => {
            let code = if e.downcast_ref::<UsageError>().is_some() {
                exit::USAGE
            } else if e
                .chain()
                .any(|c| c.downcast_ref::<kpolicy::PolicyBlocked>().is_some())
            {
                // `PolicyGuard::check(..)?` anywhere (e.g. before `run` changes something).
                exit::POLICY
            } else if e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<StateError>(),
                    Some(StateError::Locked { .. })
                )
            }) || e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<operation::OperationError>(),
                    Some(operation::OperationError::State(StateError::Locked { .. }))
                )
            }) {
                exit::LOCKED
            } else {
                exit::FAILED
            };
            if json {
                println!("{}", json!({"error": format!("{e:#}"), "exitCode": code}));
            } else if !crate::cmd::compile::report_kcl_failure(&e) {
                eprintln!("error: {e:#}");
            }
            code
        }
    }
}

async fn dispatch(cli: Cli, runtimes: Vec<Arc<dyn Runtime>>) -> Result<u8> {
    // Compiling and scaffolding need no runtimes or state.
    let workdir = || match &cli.global.workdir {
        Some(d) => Ok(d.clone()),
        None => std::env::current_dir().context("reading the current directory"),
    };
    if let Some(dir) = &cli.global.workdir
        && !dir.is_dir()
    {
        return Err(UsageError(if dir.exists() {
            format!("-C {}: not a directory", dir.display())
        } else {
            format!("-C {}: no such directory", dir.display())
        })
        .into());
    }
    let wants_stack = match &cli.command {
        Command::Preview { spec, .. }
        | Command::Apply { spec, .. }
        | Command::Destroy { spec, .. } => spec.spec.is_none(),
        Command::Import {
            spec,
            terraform_state,
            ..
        } => spec.spec.is_none() && terraform_state.is_none(),
        Command::Rollback { .. } => true,
        Command::Graph { spec, .. } => spec.is_none(),
        Command::State { state, .. } => {
            state.state_dir.is_none() && state.state_backend.trim() == "local"
        }
        _ => false,
    };
    if wants_stack {
        require_stack(&workdir()?, cli.global.workdir.as_deref())?;
    }
    match &cli.command {
        Command::Completion { shell } => return crate::completion::completion(*shell),
        #[cfg(feature = "controller")]
        Command::Controller(args) => {
            return crate::cmd::controller::run(args, &cli.global, runtimes).await;
        }
        #[cfg(feature = "server")]
        Command::Server(args) => {
            return crate::cmd::server::run(args, &cli.global, runtimes).await;
        }
        #[cfg(feature = "server")]
        Command::Worker(args) => {
            return crate::cmd::server::run_worker(args, &cli.global, runtimes).await;
        }
        Command::Manpages { dir } => return crate::completion::manpages(dir),
        Command::Compile {
            all,
            root,
            jobs,
            force,
            ..
        } => {
            // Plugins load on a program's first `kcl_plugin.*` call only.
            let config = plugin_config(&cli);
            let plugins = crate::kcl_plugins::LazyPlugins::new(move || {
                Ok(kusion_kernel::plugin::load_plugins(&config?))
            });
            return crate::cmd::compile::compile(
                &workdir()?,
                Arc::new(plugins),
                cli.global.output,
                *all,
                root.clone(),
                *jobs,
                *force,
            );
        }
        Command::Init {
            template,
            project,
            stacks,
            ..
        } => {
            return crate::cmd::compile::init(
                &workdir()?,
                cli.global.output,
                template,
                project.clone(),
                stacks,
            );
        }
        Command::Plugin {
            command: PluginCommand::Keygen { key_file },
        } => return crate::cmd::plugin::keygen(key_file),
        Command::Plugin {
            command:
                PluginCommand::Sign {
                    manifest,
                    key,
                    publisher,
                },
        } => return crate::cmd::plugin::sign(manifest, key, publisher),
        Command::Plugin {
            command:
                PluginCommand::Test {
                    path,
                    sample,
                    dirs,
                    writable,
                    network,
                    http,
                    wall_clock_ms,
                },
        } => {
            return crate::cmd::plugin_test::run(&crate::cmd::plugin_test::TestArgs {
                path: path.clone(),
                sample: sample.clone(),
                dirs: dirs.clone(),
                writable: *writable,
                network: *network,
                http: http.clone(),
                wall_clock_ms: *wall_clock_ms,
            });
        }
        _ => {}
    }
    let ctx = build_context(&cli, runtimes)?;
    let cancel = Arc::new(AtomicBool::new(false));
    install_interrupt(cancel.clone(), ctx.output == Output::Json);
    match cli.command {
        Command::Preview {
            spec,
            plan,
            detail,
            detailed_exitcode,
            ..
        } => crate::cmd::apply::preview(
            &ctx,
            &cli.global,
            &spec.spec,
            &plan,
            detail,
            detailed_exitcode,
            cancel,
        ),
        Command::Apply {
            spec, plan, apply, ..
        } => crate::cmd::apply::apply(&ctx, &cli.global, &spec.spec, &plan, &apply, cancel).await,
        Command::Destroy {
            spec, plan, yes, ..
        } => crate::cmd::apply::destroy(&ctx, &cli.global, &spec.spec, &plan, yes, cancel).await,
        Command::Graph { spec, format, .. } => crate::cmd::graph::run(&ctx, &spec, format),
        Command::State { command, .. } => {
            crate::cmd::state::run(&ctx, &cli.global, command, cancel)
        }
        Command::Rollback {
            to, plan, apply, ..
        } => crate::cmd::rollback::run(&ctx, &cli.global, to, &plan, &apply, cancel).await,
        Command::Drift {
            ignore_fields,
            concurrency,
            timeout,
            ..
        } => {
            let options = crate::cmd::drift::options(&ignore_fields, concurrency, timeout)?;
            tokio::task::block_in_place(|| {
                crate::cmd::drift::run(&ctx, &cli.global, &options, &cancel)
            })
        }
        Command::Import {
            id,
            live_id,
            terraform_state,
            provider_config,
            provider_version,
            spec_out,
            spec_format,
            spec,
            timeout,
            ..
        } => match (terraform_state, id) {
            (Some(source), _) => {
                let args = crate::cmd::tfstate::MigrateArgs {
                    source,
                    provider_config,
                    provider_versions: provider_version,
                    spec_out,
                    format: spec_format,
                    timeout,
                };
                tokio::task::block_in_place(|| crate::cmd::tfstate::run(&ctx, args, cancel))
            }
            (None, Some(id)) => {
                let spec = load_spec(&ctx, &spec.spec)?;
                tokio::task::block_in_place(|| {
                    crate::cmd::import::run(&ctx, &spec, &id, live_id.as_deref(), timeout, cancel)
                })
            }
            (None, None) => {
                Err(UsageError("import: name a resource ID or --terraform-state".into()).into())
            }
        },
        // normally handed over before parsing (see cmd::kcl::intercept)
        Command::Kcl { args } => Ok(match crate::cmd::kcl::run(&args) {
            c if c == std::process::ExitCode::SUCCESS => exit::OK,
            _ => exit::FAILED,
        }),
        Command::Plugin {
            command: PluginCommand::List { .. },
        } => crate::cmd::plugin::list(&ctx),
        Command::Plugin { .. } => unreachable!("handled before the context is built"),
        Command::Run(args) => {
            let policy =
                crate::policy::guard(&cli.global, &ctx.workdir, &ctx.plugins, &args.policy_exempt)?;
            let env = crate::cmd::run::RunEnv {
                policy,
                registry: &ctx.stack.registry,
                store: ctx.stack.store.clone(),
                workdir: &ctx.workdir,
                json: ctx.output == Output::Json,
                styles: Styles {
                    color: ctx.styles.color,
                },
                config_file: cli.global.config.clone(),
                runtime_config: cli.global.runtime_config.clone(),
                plugin: Some(crate::kcl_plugins::plugin_hook(&ctx.plugins)),
            };
            crate::cmd::run::run(env, args, cancel).await
        }
        Command::Version { .. } => crate::version::run(&ctx.plugins, ctx.output == Output::Json),
        Command::Cmdb { command, .. } => crate::cmdb::run(
            &ctx.plugins,
            &ctx.workdir,
            command,
            ctx.output == Output::Json,
        ),
        // Dispatched before the runtimes load (see the top of `run`).
        Command::Compile { .. } => Err(dispatched_early("compile")),
        Command::Init { .. } => Err(dispatched_early("init")),
        Command::Completion { .. } | Command::Manpages { .. } => {
            Err(dispatched_early("completion"))
        }
        #[cfg(feature = "controller")]
        Command::Controller(_) => Err(dispatched_early("controller")),
        #[cfg(feature = "server")]
        Command::Server(_) | Command::Worker(_) => Err(dispatched_early("server")),
    }
}

/// A command that `run` hands off before the runtimes load reached the dispatch after it.
fn dispatched_early(command: &str) -> anyhow::Error {
    anyhow::anyhow!("internal: {command} is handled before the runtimes load")
}
