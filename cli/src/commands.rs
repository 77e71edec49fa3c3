//! What each subcommand does.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use kusion_kernel::apply::{ApplyOptions, Event, Outcome};
use kusion_kernel::graph::Dag;
use kusion_kernel::operation::{self, Applied, Stack};
use kusion_kernel::plan::{PlanOptions, PlanView};
use kusion_kernel::registry::Registry;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::StateError;
use kusion_sdk::FieldPath;
use kusion_sdk::runtime::{Health, Runtime};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::args::{Cli, Command, GraphFormat, Output, PlanArgs, PluginCommand};
use crate::render::{self, Styles};
use crate::{UsageError, exit};
use kusion_kernel::plugin::{LoadedPlugins, PluginConfig};
use kusion_kernel::policy::{self as kpolicy, Guarded, PolicyGuard, PolicyReport};

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

/// What every stack-level command works with: the loaded plugins, the stack folder, how to
/// print, and the stack (its state store and runtimes).
pub(crate) struct CommandContext {
    pub(crate) plugins: LoadedPlugins,
    pub(crate) workdir: PathBuf,
    pub(crate) output: Output,
    pub(crate) styles: Styles,
    pub(crate) stack: Stack,
}

fn build_context(cli: &Cli, runtimes: Vec<Arc<dyn Runtime>>) -> Result<CommandContext> {
    let workdir = match &cli.global.workdir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let config = match &cli.global.runtime_config {
        Some(path) => read_runtime_config(path)?,
        None => Value::Null,
    };
    let force_conflicts = match &cli.command {
        Command::Preview { plan, .. }
        | Command::Apply { plan, .. }
        | Command::Destroy { plan, .. }
        | Command::Rollback { plan, .. } => plan.force_conflicts,
        _ => false,
    };
    let settings = stack_settings(
        &workdir,
        cli.global.state_dir.clone(),
        cli.global.state_backend.clone(),
        config,
        force_conflicts,
    )?;
    let plugin_config = plugin_config(cli)?;
    let plugins = kusion_kernel::plugin::load_plugins(&plugin_config);
    let stack = open_stack(&workdir, settings, &plugins, runtimes)?;
    let color = !cli.global.no_color
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none();
    Ok(CommandContext {
        plugins,
        workdir,
        output: cli.global.output,
        styles: Styles { color },
        stack,
    })
}

/// Where a stack's state lives and how its runtimes are configured, once its folder's
/// `stack.yaml` is taken into account.
pub(crate) struct StackSettings {
    pub(crate) state_dir: PathBuf,
    pub(crate) state_backend: String,
    pub(crate) config: Value,
}

/// The settings of the stack in `workdir`: what was given wins over its `stack.yaml`.
pub(crate) fn stack_settings(
    workdir: &Path,
    mut state_dir: Option<PathBuf>,
    mut state_backend: String,
    mut config: Value,
    force_conflicts: bool,
) -> Result<StackSettings> {
    crate::cmd::compile::apply_stack_settings(
        workdir,
        &mut state_dir,
        &mut state_backend,
        &mut config,
    )?;
    if force_conflicts {
        force_kubernetes_conflicts(&mut config);
    }
    let state_dir = state_dir.unwrap_or_else(|| workdir.join(".kusion").join("state"));
    Ok(StackSettings {
        state_dir,
        state_backend,
        config,
    })
}

/// The stack as the engine sees it: `runtimes` and the loaded plugins' runtimes (configured
/// with the settings) and its state store.
pub(crate) fn open_stack(
    workdir: &Path,
    settings: StackSettings,
    plugins: &LoadedPlugins,
    runtimes: Vec<Arc<dyn Runtime>>,
) -> Result<Stack> {
    let mut registry = Registry::new();
    for runtime in runtimes {
        registry.register(runtime)?;
    }
    for (name, runtime) in &plugins.runtimes {
        let served = runtime.describe().resource_types;
        if served.iter().any(|t| registry.get(t).is_some()) {
            tracing::debug!(plugin = %name, "a compiled-in runtime already serves its types; plugin not used");
            continue;
        }
        registry.register(runtime.clone())?;
    }
    for (name, plugin) in &plugins.functions {
        if !plugin.describe().secret_stores.is_empty() {
            registry.register_secret_store(name, plugin.clone());
        }
    }
    registry.set_secret_workdir(workdir);
    // Readiness rules (extension `readiness`) are KCL expressions: this program can judge them.
    crate::readiness::install(&mut registry);
    operation::configure(&registry, &settings.config)?;
    let store = kusion_kernel::state::open(
        &settings.state_backend,
        settings.state_dir,
        &default_stack_name(workdir),
    )?;
    Ok(Stack { store, registry })
}

/// `--force-conflicts`: the Kubernetes runtime's `force` setting, for this run only.
fn force_kubernetes_conflicts(config: &mut Value) {
    if !config.is_object() {
        *config = json!({});
    }
    if let Some(root) = config.as_object_mut() {
        let section = root.entry("kubernetes").or_insert_with(|| json!({}));
        if !section.is_object() {
            *section = json!({});
        }
        if let Some(k8s) = section.as_object_mut() {
            k8s.insert("force".into(), Value::Bool(true));
        }
    }
}

/// A remote backend's stack name when the URL gives none: `<project>/<stack>`, the stack folder
/// and its parent (the Konfig layout).
pub(crate) fn default_stack_name(workdir: &Path) -> String {
    let workdir = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_path_buf());
    let mut parts = workdir
        .components()
        .rev()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .take(2)
        .collect::<Vec<_>>();
    parts.reverse();
    if parts.is_empty() {
        "default".to_string()
    } else {
        parts.join("/")
    }
}

/// The plugin configuration: the config file, `KUSION_PLUGINS__*` variables and `--set` flags.
/// Plugins are then found in the configured directories and the default ones (see
/// `kusion_kernel::plugin::search_dirs`); nothing here knows where a source checkout keeps them.
fn plugin_config(cli: &Cli) -> Result<PluginConfig> {
    plugin_config_from(cli.global.config.clone(), &cli.global.set)
}

/// The plugin configuration from a config file (default `~/.kusion/config.toml`) and `--set`
/// flags (see [`plugin_config`]).
pub(crate) fn plugin_config_from(file: Option<PathBuf>, set: &[String]) -> Result<PluginConfig> {
    let file = file.or_else(|| {
        let default = PathBuf::from(std::env::var_os("HOME")?)
            .join(".kusion")
            .join("config.toml");
        default.is_file().then_some(default)
    });
    let overrides = set
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| {
                    anyhow::Error::new(UsageError(format!("--set {kv:?}: expected KEY=VALUE")))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(PluginConfig::load(file.as_deref(), &overrides)?)
}

pub(crate) fn read_runtime_config(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading runtime config {}", path.display()))?;
    serde_yaml_to_json(&text).with_context(|| format!("parsing runtime config {}", path.display()))
}

fn serde_yaml_to_json(text: &str) -> Result<Value> {
    Ok(kusion_kernel::spec::yaml_to_json(text)?)
}

/// In a project folder or a Konfig root (not a stack), a stack-level command without a spec
/// would work on nothing (or on a state no stack owns): name the stacks below and ask for one.
fn require_stack(workdir: &Path, given: Option<&Path>) -> Result<()> {
    use crate::project::{PROJECT_FILE, discover_stacks, is_stack_dir};
    if is_stack_dir(workdir) {
        return Ok(());
    }
    let kind = if workdir.join(PROJECT_FILE).is_file() {
        "a project folder"
    } else if workdir.join("kcl.mod").is_file() {
        "a Konfig root"
    } else {
        return Ok(());
    };
    let stacks = discover_stacks(workdir)?;
    // Stacks come back absolute; show them as the user named the folder.
    let base = crate::project::normalize(
        &std::path::absolute(workdir).unwrap_or_else(|_| workdir.to_path_buf()),
    );
    let shown = |s: &PathBuf| {
        let rel = s.strip_prefix(&base).unwrap_or(s);
        given.map_or(rel.to_path_buf(), |g| g.join(rel))
    };
    let here = given.map_or_else(|| ".".to_string(), |g| g.display().to_string());
    if stacks.is_empty() {
        return Err(UsageError(format!(
            "{here} is {kind} with no stacks below it: create one (kusionctl init) or pass --spec FILE"
        ))
        .into());
    }
    let list: Vec<String> = stacks
        .iter()
        .map(|s| format!("  -C {}", shown(s).display()))
        .collect();
    Err(UsageError(format!(
        "{here} is {kind}, not a stack: name one of the stacks below it with -C\n{}",
        list.join("\n")
    ))
    .into())
}

fn spec_path(ctx: &CommandContext, spec: &Option<PathBuf>) -> Result<PathBuf> {
    match spec {
        Some(p) if p.is_absolute() => Ok(p.clone()),
        Some(p) => Ok(ctx.workdir.join(p)),
        None => {
            Err(UsageError(
                "no spec given: pass --spec FILE (a YAML or JSON spec), or run in a stack folder (-C DIR)"
                    .into(),
            )
            .into())
        }
    }
}

pub(crate) fn load_spec(ctx: &CommandContext, spec: &Option<PathBuf>) -> Result<Spec> {
    // In a stack folder without -f, the stack's KCL is compiled first.
    if let Some(spec) = crate::compile::spec_for(&ctx.workdir, spec, &ctx.plugins)? {
        return Ok(spec);
    }
    let path = spec_path(ctx, spec)?;
    Ok(Spec::read_file(&path)?)
}

pub(crate) fn plan_options(args: &PlanArgs, destroy: bool) -> Result<PlanOptions> {
    let ignore_fields = args
        .ignore_fields
        .iter()
        .map(|f| {
            FieldPath::parse(f)
                .map_err(|e| anyhow::Error::new(UsageError(format!("--ignore-fields: {e}"))))
        })
        .collect::<Result<Vec<_>>>()?;
    if args.concurrency == 0 {
        return Err(UsageError("--concurrency must be at least 1".into()).into());
    }
    Ok(PlanOptions {
        ignore_fields,
        concurrency: args.concurrency,
        timeout: args.timeout,
        destroy,
        sealer: None,
        select: args.target.clone(),
    })
}

type ExitHook = Box<dyn Fn() + Send + Sync>;

/// What must be made durable before a second Ctrl-C ends the process (a run's record).
static FORCED_EXIT: std::sync::Mutex<Option<ExitHook>> = std::sync::Mutex::new(None);

/// Run `hook` (once) before a second Ctrl-C exits.
pub fn on_forced_exit(hook: ExitHook) {
    *FORCED_EXIT.lock().unwrap_or_else(|p| p.into_inner()) = Some(hook);
}

/// First Ctrl-C: stop starting new work; second: leave at once (the journal is consistent,
/// and a registered hook closes what it must first).
fn install_interrupt(cancel: Arc<AtomicBool>, json: bool) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.store(true, Ordering::SeqCst);
            let message = "Interrupted: no new steps start; running steps finish or time out, then state is saved. Ctrl-C again to quit now.";
            if json {
                eprintln!(
                    "{}",
                    json!({"event": "interrupted", "time": render::now_rfc3339(), "message": message})
                );
            } else {
                eprintln!("\n{message}");
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                if let Some(hook) = FORCED_EXIT.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    hook();
                }
                std::process::exit(130);
            }
        }
    });
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
        Command::Controller(args) => {
            return crate::cmd::controller::run(args, &cli.global, runtimes).await;
        }
        Command::Server(args) => {
            return crate::cmd::server::run(args, &cli.global, runtimes).await;
        }
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
        } => {
            let spec = load_spec(&ctx, &spec.spec)?;
            let guard =
                crate::policy::guard(&cli.global, &ctx.workdir, &ctx.plugins, &plan.policy_exempt)?;
            let options = plan_options(&plan, false)?;
            let (plan, report) =
                tokio::task::block_in_place(|| guard.preview(&spec, &ctx.stack, &options, cancel))?;
            let code = print_preview(&ctx, &plan, &report, detail);
            Ok(
                if detailed_exitcode && code == exit::OK && plan.has_changes() {
                    exit::CHANGES
                } else {
                    code
                },
            )
        }
        Command::Apply {
            spec,
            plan,
            yes,
            dry_run,
            watch,
            watch_timeout,
            detail,
            ..
        } => {
            let spec = load_spec(&ctx, &spec.spec)?;
            let options = plan_options(&plan, false)?;
            let guard =
                crate::policy::guard(&cli.global, &ctx.workdir, &ctx.plugins, &plan.policy_exempt)?;
            if dry_run {
                let (computed, report) = tokio::task::block_in_place(|| {
                    guard.preview(&spec, &ctx.stack, &options, cancel)
                })?;
                return Ok(print_preview(&ctx, &computed, &report, detail));
            }
            let apply_options = ApplyOptions {
                concurrency: plan.concurrency,
                timeout: plan.timeout,
                watch,
                watch_timeout,
                ignore_fields: options.ignore_fields.clone(),
                sealer: None,
            };
            run_apply(
                &ctx,
                &guard,
                &spec,
                "apply",
                &options,
                &apply_options,
                yes,
                detail,
                cancel,
                None,
            )
            .await
        }
        Command::Destroy {
            spec, plan, yes, ..
        } => {
            // In a stack folder the stack must still compile (it names the stack's settings).
            crate::compile::spec_for(&ctx.workdir, &spec.spec, &ctx.plugins)?;
            let options = plan_options(&plan, true)?;
            let guard =
                crate::policy::guard(&cli.global, &ctx.workdir, &ctx.plugins, &plan.policy_exempt)?;
            let apply_options = ApplyOptions {
                concurrency: plan.concurrency,
                timeout: plan.timeout,
                ..Default::default()
            };
            run_apply(
                &ctx,
                &guard,
                &Spec::default(),
                "destroy",
                &options,
                &apply_options,
                yes,
                false,
                cancel,
                None,
            )
            .await
        }
        Command::Graph { spec, format, .. } => {
            let spec = load_spec(&ctx, &spec)?;
            spec.validate(&ctx.stack.registry.types())
                .or_else(|e| match e {
                    // The graph does not need runtimes: only structural errors matter here.
                    kusion_kernel::spec::SpecError::UnknownType { .. } => Ok(()),
                    other => Err(other),
                })?;
            let dag = Dag::build(&spec)?;
            match (ctx.output, format) {
                (Output::Json, _) => println!(
                    "{}",
                    json!({"nodes": dag.order().collect::<Vec<_>>(), "edges": dag.edges().iter().map(|(a, b)| json!({"from": a, "to": b})).collect::<Vec<_>>()})
                ),
                (_, GraphFormat::Dot) => print!("{}", dag.to_dot()),
                (_, GraphFormat::Text) => print!("{}", dag.to_text()),
            }
            Ok(exit::OK)
        }
        Command::State { command, .. } => {
            crate::cmd::state::run(&ctx, &cli.global, command, cancel)
        }
        Command::Rollback {
            to,
            plan,
            yes,
            dry_run,
            watch,
            watch_timeout,
            detail,
            ..
        } => {
            let args = crate::cmd::rollback::RollbackArgs {
                to,
                plan,
                yes,
                dry_run,
                watch,
                watch_timeout,
                detail,
            };
            crate::cmd::rollback::run(&ctx, &cli.global, args, cancel).await
        }
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
        Command::Compile { .. }
        | Command::Init { .. }
        | Command::Completion { .. }
        | Command::Controller(_)
        | Command::Server(_)
        | Command::Worker(_)
        | Command::Manpages { .. } => Err(anyhow::anyhow!(
            "internal: {} is handled before the runtimes load",
            match cli.command {
                Command::Compile { .. } => "compile",
                Command::Init { .. } => "init",
                _ => "completion",
            }
        )),
    }
}

fn print_plan(ctx: &CommandContext, plan: &PlanView, detail: bool) {
    match ctx.output {
        Output::Json => println!("{}", render::plan_json(plan)),
        Output::Human | Output::Yaml => {
            if plan.steps.is_empty() {
                println!("No resources in the spec or state.");
                return;
            }
            println!("{}", render::plan_table(plan, &ctx.styles));
            if detail {
                print!("{}", render::plan_details(plan, &ctx.styles));
            }
            println!("{}", render::plan_summary_line(plan));
            if let Some(warning) = render::narrowed_warning(plan, &ctx.styles) {
                println!("{warning}");
            }
            if !plan.has_changes() {
                println!("No changes.");
            }
        }
    }
}

/// The plan with the policies' verdict next to it; exit code 4 when the policies would block.
pub(crate) fn print_preview(
    ctx: &CommandContext,
    plan: &PlanView,
    report: &PolicyReport,
    detail: bool,
) -> u8 {
    match ctx.output {
        Output::Json if !report.policies.is_empty() => {
            let mut value = render::plan_json(plan);
            if let Some(obj) = value.as_object_mut() {
                obj.insert(
                    "policy".into(),
                    serde_json::to_value(report).unwrap_or(Value::Null),
                );
            }
            println!("{value}");
        }
        _ => {
            print_plan(ctx, plan, detail);
            if ctx.output == Output::Human {
                print!("{}", crate::policy::render(report, &ctx.styles));
            }
        }
    }
    if report.blocked {
        exit::POLICY
    } else {
        exit::OK
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_apply(
    ctx: &CommandContext,
    guard: &PolicyGuard,
    spec: &Spec,
    operation_name: &str,
    options: &PlanOptions,
    apply_options: &ApplyOptions,
    yes: bool,
    detail: bool,
    cancel: Arc<AtomicBool>,
    rollback_of: Option<u64>,
) -> Result<u8> {
    if !yes && !std::io::stdin().is_terminal() {
        return Err(UsageError(format!(
            "standard input is not a terminal: pass --yes to {operation_name} without confirmation"
        ))
        .into());
    }
    let human = ctx.output == Output::Human;
    let (tx, rx) = mpsc::unbounded_channel();
    let total_holder = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let progress = tokio::spawn(show_progress(
        rx,
        human,
        ctx.styles.color,
        total_holder.clone(),
    ));
    let verb = match operation_name {
        "destroy" => "Destroy",
        "rollback" => "Rollback",
        _ => "Apply",
    };
    let styles = Styles {
        color: ctx.styles.color,
    };
    let confirm = |plan: &PlanView, report: Option<&PolicyReport>| {
        if human {
            println!("{}", render::plan_table(plan, &styles));
            if detail {
                print!("{}", render::plan_details(plan, &styles));
            }
            println!("{}", render::plan_summary_line(plan));
            if let Some(warning) = render::narrowed_warning(plan, &styles) {
                println!("{warning}");
            }
            if let Some(report) = report {
                print!("{}", crate::policy::render(report, &styles));
            }
        }
        total_holder.store(
            plan.steps
                .iter()
                .filter(|s| s.action.changes_something())
                .count(),
            Ordering::SeqCst,
        );
        yes || crate::render::confirm(
            &format!("Do you want to {operation_name} these changes?"),
            Some(&|| print!("{}", render::plan_details(plan, &styles))),
        )
    };
    let result = tokio::task::block_in_place(|| {
        kpolicy::apply(
            guard,
            spec,
            &ctx.stack,
            operation_name,
            options,
            apply_options,
            rollback_of,
            confirm,
            Some(tx),
            cancel,
        )
    });
    let _ = progress.await;
    let (applied, report) = match result? {
        Guarded::Blocked { plan, report } => {
            if human {
                println!("{}", render::plan_table(&plan, &ctx.styles));
                print!("{}", crate::policy::render(&report, &ctx.styles));
                println!("{verb} blocked by policy; nothing changed.");
            } else {
                println!(
                    "{}",
                    json!({"plan": render::plan_json(&plan), "policy": crate::policy::to_json(&report)?, "result": null, "blocked": true, "exitCode": exit::POLICY})
                );
            }
            return Ok(exit::POLICY);
        }
        Guarded::Ran { applied, report } => (applied, report),
    };
    let policy_json = match &report {
        Some(r) => crate::policy::to_json(r)?,
        None => Value::Null,
    };
    match applied {
        Applied::NothingToDo(plan) => {
            if human {
                if !plan.steps.is_empty() {
                    println!("{}", render::plan_table(&plan, &ctx.styles));
                }
                println!(
                    "No changes. {verb} complete! Resources: 0 created, 0 updated, 0 deleted."
                );
            } else {
                println!(
                    "{}",
                    json!({"plan": render::plan_json(&plan), "policy": policy_json, "result": null, "summary": format!("{verb} complete! Resources: 0 created, 0 updated, 0 deleted.")})
                );
            }
            Ok(exit::OK)
        }
        // Not what was asked for: a script checking the exit code must not take it as done.
        Applied::Declined(plan) => {
            if human {
                println!("{verb} cancelled; nothing changed.");
            } else {
                println!(
                    "{}",
                    json!({"plan": render::plan_json(&plan), "policy": policy_json, "result": null, "declined": true, "exitCode": exit::FAILED})
                );
            }
            Ok(exit::FAILED)
        }
        Applied::Done {
            plan,
            report,
            revision,
        } => {
            if human {
                print!("{}", render::failures(&report, &ctx.styles));
                let line = report.summary_line(verb);
                let style = if report.succeeded() {
                    ctx.styles.green()
                } else {
                    ctx.styles.red()
                };
                println!("{}", style.apply_to(line));
            } else {
                println!(
                    "{}",
                    json!({"plan": render::plan_json(&plan), "policy": policy_json, "result": render::report_json(&report, Some(revision), verb)})
                );
            }
            Ok(if report.succeeded() {
                exit::OK
            } else {
                exit::FAILED
            })
        }
    }
}

/// One row of the watch table: (kind, name) and its line.
type WatchRow = ((String, String), ProgressBar);

/// Progress during apply: a bar on a terminal, plain lines elsewhere; with --watch a live row per
/// watched object (`Type Kind Name Detail`).
///
/// The bar appears with the first step that changes something, so nothing redraws over the
/// confirmation prompt. Its label names a step in flight (the latest started), never one that
/// changes nothing. A watched resource's rows are its current objects: objects gone since the
/// last event (pods of a finished rollout) leave the table.
async fn show_progress(
    mut rx: mpsc::UnboundedReceiver<Event>,
    human: bool,
    color: bool,
    total: Arc<std::sync::atomic::AtomicUsize>,
) {
    let tty = human && std::io::stderr().is_terminal();
    let multi = MultiProgress::new();
    let mut bar: Option<ProgressBar> = None;
    let styles = Styles { color };
    // Rows per watched resource, by (kind, name).
    let mut rows: HashMap<String, Vec<WatchRow>> = HashMap::new();
    let mut last_detail: HashMap<(String, String, String), String> = HashMap::new();
    let mut started = HashMap::new();
    // Changing steps started and not finished, oldest first; `waiting`: those being watched.
    let mut in_flight: Vec<(String, kusion_kernel::plan::Action)> = Vec::new();
    let mut waiting: std::collections::HashSet<String> = std::collections::HashSet::new();
    let label = |in_flight: &[(String, kusion_kernel::plan::Action)],
                 waiting: &std::collections::HashSet<String>| {
        let Some((id, action)) = in_flight.last() else {
            return String::new();
        };
        let what = if waiting.contains(id) {
            format!("{action} {id}: waiting until ready")
        } else {
            format!("{action} {id}")
        };
        match in_flight.len() {
            1 => what,
            n => format!("{what} (+{} more)", n - 1),
        }
    };
    while let Some(event) = rx.recv().await {
        match event {
            Event::Started { id, action } => {
                if !action.changes_something() {
                    continue;
                }
                started.insert(id.clone(), std::time::Instant::now());
                in_flight.push((id, action));
                if tty {
                    let bar = bar.get_or_insert_with(|| {
                        let bar = multi.add(ProgressBar::new(0));
                        bar.set_style(
                            ProgressStyle::with_template(
                                "{spinner} {msg} [{bar:30}] {pos}/{len} {elapsed}",
                            )
                            .unwrap_or_else(|_| ProgressStyle::default_bar())
                            .progress_chars("=> "),
                        );
                        bar.enable_steady_tick(std::time::Duration::from_millis(120));
                        bar
                    });
                    bar.set_length(total.load(Ordering::SeqCst) as u64);
                    bar.set_message(label(&in_flight, &waiting));
                }
            }
            Event::Finished {
                id,
                action,
                outcome,
            } => {
                if !action.changes_something() {
                    continue;
                }
                in_flight.retain(|(i, _)| *i != id);
                waiting.remove(&id);
                let took = started
                    .get(&id)
                    .map(|t: &std::time::Instant| format!(" ({:.1}s)", t.elapsed().as_secs_f64()))
                    .unwrap_or_default();
                let line = match &outcome {
                    Outcome::Succeeded => {
                        format!("{} {action} {id}{took}", styles.green().apply_to("✔"))
                    }
                    Outcome::Failed(e) => {
                        format!("{} {action} {id}: {e}", styles.red().apply_to("✘"))
                    }
                    Outcome::Skipped(e) => format!(
                        "{} {action} {id}: skipped, {e}",
                        styles.yellow().apply_to("-")
                    ),
                    Outcome::Cancelled => {
                        format!("{} {action} {id}: not started", styles.dim().apply_to("-"))
                    }
                };
                if !human {
                    continue;
                }
                match &bar {
                    Some(bar) => {
                        bar.inc(1);
                        bar.set_message(label(&in_flight, &waiting));
                        multi.println(line).ok();
                    }
                    None => eprintln!("{line}"),
                }
            }
            Event::Watch {
                id,
                resource_type,
                event,
            } => {
                if !human {
                    continue;
                }
                if waiting.insert(id.clone())
                    && let Some(bar) = &bar
                {
                    bar.set_message(label(&in_flight, &waiting));
                }
                let current: Vec<(String, String)> = event
                    .objects
                    .iter()
                    .map(|o| (o.kind.clone(), o.name.clone()))
                    .collect();
                if tty {
                    let shown = rows.entry(id.clone()).or_default();
                    // Objects the resource no longer has (deleted pods, old ReplicaSets).
                    shown.retain(|(key, row)| {
                        let keep = current.contains(key);
                        if !keep {
                            row.finish_and_clear();
                            multi.remove(row);
                        }
                        keep
                    });
                } else {
                    last_detail.retain(|(i, kind, name), _| {
                        *i != id || current.contains(&(kind.clone(), name.clone()))
                    });
                }
                for object in event.objects {
                    let mark = match object.health {
                        Health::Ready => styles.green().apply_to("ready").to_string(),
                        Health::Failed => styles.red().apply_to("failed").to_string(),
                        Health::Progressing => styles.yellow().apply_to("waiting").to_string(),
                    };
                    let text = format!(
                        "{:<12} {:<14} {:<40} {mark} {}",
                        resource_type, object.kind, object.name, object.detail
                    );
                    let key = (object.kind.clone(), object.name.clone());
                    if tty {
                        let shown = rows.entry(id.clone()).or_default();
                        let row = match shown.iter().position(|(k, _)| *k == key) {
                            Some(i) => shown[i].1.clone(),
                            None => {
                                let row = multi.add(ProgressBar::new_spinner());
                                shown.push((key, row.clone()));
                                row
                            }
                        };
                        row.set_message(text);
                        if object.health == Health::Progressing {
                            row.enable_steady_tick(std::time::Duration::from_millis(120));
                        } else {
                            row.disable_steady_tick();
                            row.tick();
                        }
                    } else {
                        let key = (id.clone(), key.0, key.1);
                        if last_detail.get(&key) != Some(&text) {
                            eprintln!("{text}");
                            last_detail.insert(key, text);
                        }
                    }
                }
            }
        }
    }
    for row in rows.values().flatten() {
        row.1.finish();
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}
