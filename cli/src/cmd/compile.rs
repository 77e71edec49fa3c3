//! The `compile` and `init` subcommands, and the stack settings that feed the other commands.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use anyhow::Result;
use serde_json::{Value, json};

use crate::args::Output;
use crate::compile::{self, KclFailure};
use crate::kcl_plugins::{LazyHook, LazyPlugins};
use crate::project;
use crate::{UsageError, exit};

/// `kusionctl compile [--all [ROOT]]`.
pub fn compile(
    workdir: &Path,
    plugins: Arc<LazyPlugins>,
    output: Output,
    all: bool,
    root: Option<PathBuf>,
    jobs: usize,
    force: bool,
) -> Result<u8> {
    if !all {
        let hook = Rc::new(LazyHook::new(plugins));
        let compiled = compile::compile_dir(workdir, None, Some(hook))?;
        print!(
            "{}",
            compile::render_spec(&compiled.spec, output == Output::Json)
        );
        return Ok(exit::OK);
    }
    let root = match root {
        Some(r) if r.is_relative() => workdir.join(r),
        Some(r) => r,
        None => workdir.to_path_buf(),
    };
    let summary = compile::all::compile_all(&compile::all::AllOptions {
        root,
        jobs,
        force,
        plugins,
    })?;
    if output == Output::Json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        for r in summary.stacks.iter().filter(|r| r.error.is_some()) {
            match &r.kcl_error {
                Some(text) => {
                    eprint!("{text}");
                    eprintln!(
                        "error: stack {} ({}): the KCL program failed (above)",
                        r.stack,
                        summary.root.join(&r.stack).display()
                    );
                }
                None => eprintln!("error: {}", r.error.as_deref().unwrap_or_default()),
            }
        }
        println!(
            "{} stacks: {} compiled, {} unchanged (cached), {} failed in {:.2}s on {} threads; specs under {}",
            summary.stacks.len(),
            summary.compiled,
            summary.cached,
            summary.failed,
            summary.seconds,
            summary.threads,
            summary.cache_dir.display()
        );
    }
    Ok(if summary.failed > 0 {
        exit::FAILED
    } else {
        exit::OK
    })
}

/// `kusionctl init [--template NAME] PROJECT [STACK...]`.
pub fn init(
    workdir: &Path,
    output: Output,
    template: &str,
    project: Option<String>,
    stacks: &[String],
) -> Result<u8> {
    if template == "list" {
        for (name, about) in project::init::templates() {
            println!("{name:<10} {about}");
        }
        return Ok(exit::OK);
    }
    let Some(project) = project else {
        return Err(UsageError(
            "init needs a project name: kusionctl init PROJECT [STACK...]".into(),
        )
        .into());
    };
    let written = project::init::init(workdir, template, &project, stacks)?;
    if output == Output::Json {
        println!("{}", json!({ "created": written }));
    } else {
        for f in &written {
            println!("created {}", f.strip_prefix(workdir).unwrap_or(f).display());
        }
        println!(
            "Project {project} is ready: cd {project}/{} && kusionctl compile",
            stacks.first().map_or("dev", String::as_str)
        );
    }
    Ok(exit::OK)
}

/// In a stack folder: the stack's state backend or folder and Kubernetes settings from
/// `stack.yaml`. Explicit flags win: a state dir given on the command line (or by environment)
/// is kept, a `--state-backend` other than the default `local` is kept, and runtime
/// configuration keys already set are not replaced.
pub fn apply_stack_settings(
    workdir: &Path,
    state_dir: &mut Option<PathBuf>,
    state_backend: &mut String,
    runtime_config: &mut Value,
) -> Result<()> {
    if !project::is_stack_dir(workdir) {
        return Ok(());
    }
    let stack = project::open_stack(workdir)?;
    if state_dir.is_none() {
        *state_dir = stack.state_dir()?;
    }
    if state_backend.trim() == "local"
        && let Some(remote) = stack.state_backend()?
    {
        *state_backend = remote;
    }
    let k8s = stack.kubernetes_config();
    if !k8s.is_empty() {
        default_kubernetes_settings(runtime_config, k8s)?;
    }
    Ok(())
}

/// Sets `defaults` in the runtime configuration's `kubernetes` section where it has no value of
/// its own (what the user wrote wins).
pub fn default_kubernetes_settings(
    runtime_config: &mut Value,
    defaults: serde_json::Map<String, Value>,
) -> Result<()> {
    if !runtime_config.is_object() {
        *runtime_config = json!({});
    }
    let section = runtime_config
        .as_object_mut()
        .and_then(|m| {
            m.entry("kubernetes")
                .or_insert_with(|| json!({}))
                .as_object_mut()
        })
        .ok_or_else(|| {
            anyhow::anyhow!("the runtime configuration's `kubernetes` is not a mapping")
        })?;
    for (k, v) in defaults {
        section.entry(k).or_insert(v);
    }
    Ok(())
}

/// Print a compile failure: a KCL error exactly as `kcl run` prints it, then the stack.
pub fn report_kcl_failure(e: &anyhow::Error) -> bool {
    if let Some(k) = e
        .chain()
        .find_map(|c| c.downcast_ref::<compile::KclProgramFailure>())
    {
        eprint!("{}", k.rendered);
        eprintln!(
            "error: {}: the KCL program failed (above)",
            k.file.display()
        );
        return true;
    }
    match e.chain().find_map(|c| c.downcast_ref::<KclFailure>()) {
        Some(k) => {
            eprint!("{}", k.rendered);
            eprintln!(
                "error: stack {} ({}): the KCL program failed (above)",
                k.stack,
                k.dir.display()
            );
            true
        }
        None => false,
    }
}
