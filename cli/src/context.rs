//! What every stack-level command works with ([`CommandContext`]): the stack folder, the loaded
//! plugins, how to print, and the stack opened on them (its settings from `stack.yaml` and the
//! flags, its runtimes and state store); and reading the spec and plan options a command is given.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use kusion_kernel::operation::{self, Stack};
use kusion_kernel::plan::PlanOptions;
use kusion_kernel::plugin::LoadedPlugins;
use kusion_kernel::registry::Registry;
use kusion_kernel::spec::Spec;
use kusion_sdk::FieldPath;
use kusion_sdk::runtime::Runtime;
use serde_json::{Value, json};

use crate::UsageError;
use crate::args::{Cli, Command, Output, PlanArgs};
use crate::config::{plugin_config, read_runtime_config};
use crate::render::Styles;

/// What every stack-level command works with: the loaded plugins, the stack folder, how to
/// print, and the stack (its state store and runtimes).
pub(crate) struct CommandContext {
    pub(crate) plugins: LoadedPlugins,
    pub(crate) workdir: PathBuf,
    pub(crate) output: Output,
    pub(crate) styles: Styles,
    pub(crate) stack: Stack,
}

pub(crate) fn build_context(cli: &Cli, runtimes: Vec<Arc<dyn Runtime>>) -> Result<CommandContext> {
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

/// In a project folder or a Konfig root (not a stack), a stack-level command without a spec
/// would work on nothing (or on a state no stack owns): name the stacks below and ask for one.
pub(crate) fn require_stack(workdir: &Path, given: Option<&Path>) -> Result<()> {
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
