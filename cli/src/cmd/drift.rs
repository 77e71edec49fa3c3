//! `kusionctl drift`: what state recorded against what is live, without the spec. In a stack
//! folder, field-level drift per resource; in a project folder or Konfig root, one line per
//! stack below with its drift status (the list view the server's console reuses).
//!
//! Exit 0 when everything is in sync, 2 when something drifted or is missing, 1 when something
//! could not be read (the check is then incomplete).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result};
use kusion_kernel::drift::{DriftOptions, DriftReport, DriftStatus};
use kusion_kernel::operation::{self, Stack};
use kusion_sdk::FieldPath;
use serde_json::{Value, json};

use crate::args::{Global, Output};
use crate::config::read_runtime_config;
use crate::context::{CommandContext, default_stack_name};
use crate::render::Styles;
use crate::{UsageError, exit};

/// The options as given on the command line.
pub(crate) fn options(
    ignore_fields: &[String],
    concurrency: usize,
    timeout: Option<Duration>,
) -> Result<DriftOptions> {
    if concurrency == 0 {
        return Err(UsageError("--concurrency must be at least 1".into()).into());
    }
    let ignore_fields = ignore_fields
        .iter()
        .map(|f| {
            FieldPath::parse(f)
                .map_err(|e| anyhow::Error::new(UsageError(format!("--ignore-fields: {e}"))))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(DriftOptions {
        concurrency,
        timeout,
        ignore_fields,
        sealer: None,
    })
}

pub(crate) fn run(
    ctx: &CommandContext,
    global: &Global,
    options: &DriftOptions,
    cancel: &AtomicBool,
) -> Result<u8> {
    if !crate::project::is_stack_dir(&ctx.workdir)
        && (ctx.workdir.join(crate::project::PROJECT_FILE).is_file()
            || ctx.workdir.join("kcl.mod").is_file())
    {
        return stacks(ctx, global, options, cancel);
    }
    let report = operation::drift(&ctx.stack, options, cancel)?;
    if ctx.output == Output::Json {
        println!(
            "{}",
            json!({"stack": ctx.stack.store.location(), "summary": report.summary, "resources": report.resources})
        );
    } else {
        print!("{}", human(&report, &ctx.styles));
    }
    Ok(code(&report))
}

fn code(report: &DriftReport) -> u8 {
    if report.incomplete() {
        exit::FAILED
    } else if report.has_drift() {
        exit::CHANGES
    } else {
        exit::OK
    }
}

fn human(report: &DriftReport, styles: &Styles) -> String {
    if report.resources.is_empty() {
        return "No resources in state.\n".to_string();
    }
    let mut table = crate::render::plain_table(vec!["ID", "Type", "Status"]);
    for r in &report.resources {
        let status = match r.status {
            DriftStatus::InSync => r.status.to_string(),
            DriftStatus::Drifted => styles
                .yellow()
                .apply_to(format!("drifted ({} field(s))", r.changes.len()))
                .to_string(),
            DriftStatus::Missing => styles.red().apply_to("missing").to_string(),
            DriftStatus::Unreadable => styles.red().apply_to("unreadable").to_string(),
        };
        let id = match &r.target {
            Some(t) => format!("{}@{t}", r.id),
            None => r.id.clone(),
        };
        table.add_row(vec![id, r.resource_type.clone(), status]);
    }
    let mut out = format!("{table}\n");
    for r in &report.resources {
        match r.status {
            DriftStatus::Drifted => {
                out.push_str(&format!("\n{} (recorded => live):\n", r.id));
                for line in kusion_kernel::diff::render_changes(&r.changes).lines() {
                    out.push_str(&format!("  {line}\n"));
                }
            }
            DriftStatus::Missing => out.push_str(&format!(
                "\n{}: recorded in state but no longer exists; the next apply recreates it\n",
                r.id
            )),
            DriftStatus::Unreadable => out.push_str(&format!(
                "\n{}: could not be read: {}\n",
                r.id,
                r.error.as_deref().unwrap_or("unknown error")
            )),
            DriftStatus::InSync => {}
        }
        if r.pending {
            out.push_str(&format!(
                "{}: its last operation never recorded an outcome; state may be stale\n",
                r.id
            ));
        }
    }
    let s = &report.summary;
    out.push_str(&format!(
        "\nDrift: {} in sync, {} drifted, {} missing, {} unreadable.\n",
        s.in_sync, s.drifted, s.missing, s.unreadable
    ));
    out
}

/// One line per stack below a project folder or Konfig root.
fn stacks(
    ctx: &CommandContext,
    global: &Global,
    options: &DriftOptions,
    cancel: &AtomicBool,
) -> Result<u8> {
    if global.state_dir.is_some() {
        return Err(UsageError(
            "--state-dir names one stack's state: run drift for that stack with -C STACK".into(),
        )
        .into());
    }
    let found = crate::project::discover_stacks(&ctx.workdir)?;
    let base = crate::project::normalize(
        &std::path::absolute(&ctx.workdir).unwrap_or_else(|_| ctx.workdir.clone()),
    );
    let mut rows = Vec::new();
    let mut worst = exit::OK;
    for dir in &found {
        let name = dir.strip_prefix(&base).unwrap_or(dir).display().to_string();
        let result = stack_drift(ctx, global, dir, options, cancel);
        let (status, summary, error) = match &result {
            Ok(None) => ("not applied".to_string(), None, None),
            Ok(Some(report)) => {
                let status = match code(report) {
                    exit::OK => "in sync",
                    exit::CHANGES => "drifted",
                    _ => "incomplete",
                };
                worst = worst_of(worst, code(report));
                (status.to_string(), Some(report.summary), None)
            }
            Err(e) => {
                worst = exit::FAILED;
                ("error".to_string(), None, Some(format!("{e:#}")))
            }
        };
        rows.push((name, status, summary, error));
    }
    if ctx.output == Output::Json {
        let list: Vec<Value> = rows
            .iter()
            .map(|(name, status, summary, error)| {
                json!({"stack": name, "status": status, "summary": summary, "error": error})
            })
            .collect();
        println!("{}", json!({ "stacks": list }));
    } else {
        let mut table = crate::render::plain_table(vec![
            "Stack",
            "Status",
            "In sync",
            "Drifted",
            "Missing",
            "Unreadable",
        ]);
        for (name, status, summary, _) in &rows {
            let n = |f: fn(&kusion_kernel::drift::DriftSummary) -> usize| {
                summary
                    .as_ref()
                    .map_or("-".to_string(), |s| f(s).to_string())
            };
            table.add_row(vec![
                name.clone(),
                status.clone(),
                n(|s| s.in_sync),
                n(|s| s.drifted),
                n(|s| s.missing),
                n(|s| s.unreadable),
            ]);
        }
        println!("{table}");
        for (name, _, _, error) in &rows {
            if let Some(e) = error {
                println!("{name}: {e}");
            }
        }
        if rows.is_empty() {
            println!("No stacks below {}.", ctx.workdir.display());
        }
    }
    Ok(worst)
}

/// An error beats drift, drift beats in sync.
fn worst_of(a: u8, b: u8) -> u8 {
    let rank = |c: u8| match c {
        exit::OK => 0,
        exit::CHANGES => 1,
        _ => 2,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// One stack's drift, with that stack's own state settings; `None` when it was never applied.
fn stack_drift(
    ctx: &CommandContext,
    global: &Global,
    dir: &Path,
    options: &DriftOptions,
    cancel: &AtomicBool,
) -> Result<Option<DriftReport>> {
    let Some(stack) = other_stack(ctx, global, dir, false)? else {
        return Ok(None);
    };
    Ok(Some(operation::drift(&stack, options, cancel)?))
}

/// Another stack folder's stack: its own state settings (`stack.yaml`, else the backend given on
/// the command line and `<dir>/.kusion/state`), this command's runtimes configured for it. `None`
/// when its local state does not exist and `create` is false.
pub(crate) fn other_stack(
    ctx: &CommandContext,
    global: &Global,
    dir: &Path,
    create: bool,
) -> Result<Option<Stack>> {
    if !dir.is_dir() {
        return Err(UsageError(format!("{}: no such stack folder", dir.display())).into());
    }
    // Absolute, so the location a handoff records names the same store from any working folder.
    let dir = &std::path::absolute(dir)
        .with_context(|| format!("resolving the stack folder {}", dir.display()))?;
    let mut state_dir = None;
    let mut backend = global.state_backend.clone();
    let mut config = match &global.runtime_config {
        Some(path) => read_runtime_config(path)?,
        None => Value::Null,
    };
    crate::cmd::compile::apply_stack_settings(dir, &mut state_dir, &mut backend, &mut config)?;
    let local = backend.trim() == "local";
    let state_dir = state_dir.unwrap_or_else(|| dir.join(".kusion").join("state"));
    if local && !state_dir.exists() && !create {
        return Ok(None);
    }
    operation::configure(&ctx.stack.registry, &config)?;
    let store = kusion_kernel::state::open(&backend, state_dir, &default_stack_name(dir))
        .with_context(|| format!("opening the state of {}", dir.display()))?;
    Ok(Some(Stack {
        store,
        registry: ctx.stack.registry.clone(),
    }))
}
