//! `kusionctl preview`, `apply` and `destroy`: a plan through the policy guard, shown (with the
//! policies' verdict), confirmed, and applied with progress; `rollback` applies through here too.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;
use kusion_kernel::execute::ApplyOptions;
use kusion_kernel::operation::Applied;
use kusion_kernel::plan::{PlanOptions, PlanView};
use kusion_kernel::policy::{self as kpolicy, Guarded, PolicyGuard, PolicyReport};
use kusion_kernel::spec::Spec;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::args::{ApplyFlags, Global, Output, PlanArgs};
use crate::context::{CommandContext, load_spec, plan_options};
use crate::progress::show_progress;
use crate::render::{self, Styles};
use crate::{UsageError, exit};

/// `kusionctl preview`: the plan and the policies' verdict. With `--detailed-exitcode`, exit 2
/// when something would change.
pub(crate) fn preview(
    ctx: &CommandContext,
    global: &Global,
    spec: &Option<PathBuf>,
    plan: &PlanArgs,
    detail: bool,
    detailed_exitcode: bool,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    let spec = load_spec(ctx, spec)?;
    let guard = crate::policy::guard(global, &ctx.workdir, &ctx.plugins, &plan.policy_exempt)?;
    let options = plan_options(plan, false)?;
    let (plan, report) =
        tokio::task::block_in_place(|| guard.preview(&spec, &ctx.stack, &options, cancel))?;
    let code = print_preview(ctx, &plan, &report, detail);
    Ok(
        if detailed_exitcode && code == exit::OK && plan.has_changes() {
            exit::CHANGES
        } else {
            code
        },
    )
}

/// `kusionctl apply`: preview, confirm, apply (`--dry-run`: preview only).
pub(crate) async fn apply(
    ctx: &CommandContext,
    global: &Global,
    spec: &Option<PathBuf>,
    plan: &PlanArgs,
    flags: &ApplyFlags,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    let spec = load_spec(ctx, spec)?;
    apply_spec(ctx, global, &spec, plan, flags, "apply", None, cancel).await
}

/// A spec planned through the policy guard, then shown (`--dry-run`: only that) or confirmed
/// and applied as `operation_name`: what `apply` and `rollback` (`rollback_of`) do with theirs.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn apply_spec(
    ctx: &CommandContext,
    global: &Global,
    spec: &Spec,
    plan: &PlanArgs,
    flags: &ApplyFlags,
    operation_name: &str,
    rollback_of: Option<u64>,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    let options = plan_options(plan, false)?;
    let guard = crate::policy::guard(global, &ctx.workdir, &ctx.plugins, &plan.policy_exempt)?;
    if flags.dry_run {
        let (computed, report) =
            tokio::task::block_in_place(|| guard.preview(spec, &ctx.stack, &options, cancel))?;
        return Ok(print_preview(ctx, &computed, &report, flags.detail));
    }
    let apply_options = ApplyOptions {
        concurrency: plan.concurrency,
        timeout: plan.timeout,
        watch: flags.watch,
        watch_timeout: flags.watch_timeout,
        ignore_fields: options.ignore_fields.clone(),
        sealer: None,
    };
    run_apply(
        ctx,
        &guard,
        spec,
        operation_name,
        &options,
        &apply_options,
        flags.yes,
        flags.detail,
        cancel,
        rollback_of,
    )
    .await
}

/// `kusionctl destroy`: delete everything recorded in state, confirmed like apply.
pub(crate) async fn destroy(
    ctx: &CommandContext,
    global: &Global,
    spec: &Option<PathBuf>,
    plan: &PlanArgs,
    yes: bool,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    // In a stack folder the stack must still compile (it names the stack's settings).
    crate::compile::spec_for(&ctx.workdir, spec, &ctx.plugins)?;
    let options = plan_options(plan, true)?;
    let guard = crate::policy::guard(global, &ctx.workdir, &ctx.plugins, &plan.policy_exempt)?;
    let apply_options = ApplyOptions {
        concurrency: plan.concurrency,
        timeout: plan.timeout,
        ..Default::default()
    };
    run_apply(
        ctx,
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
        kpolicy::guarded_apply(
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
