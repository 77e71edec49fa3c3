//! `kusionctl rollback [--to REVISION]`: plan the spec an earlier release applied against what
//! is live, preview and confirm it like apply, and record it as a release naming its source.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Result;
use kusion_kernel::execute::ApplyOptions;
use kusion_kernel::operation;
use kusion_kernel::rollback;
use kusion_kernel::state::format_time;

use crate::args::{Global, Output, PlanArgs};
use crate::cmd::apply::{print_preview, run_apply};
use crate::context::{CommandContext, plan_options};

/// What `rollback` was asked.
pub(crate) struct RollbackArgs {
    pub to: Option<u64>,
    pub plan: PlanArgs,
    pub yes: bool,
    pub dry_run: bool,
    pub watch: bool,
    pub watch_timeout: Duration,
    pub detail: bool,
}

pub(crate) async fn run(
    ctx: &CommandContext,
    global: &Global,
    args: RollbackArgs,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    let store = &ctx.stack.store;
    let revision = match args.to {
        Some(n) => n,
        None => rollback::default_revision(&store.releases()?)?,
    };
    let release = store.release(revision)?;
    let (_, sealer) = operation::load_unsealed(&**store)?;
    let spec = rollback::restore_spec(&release, &sealer, &ctx.stack.registry)?;
    if ctx.output == Output::Human {
        println!(
            "Rolling back to revision {revision} ({} by {}@{}, {} resource(s)).",
            format_time(release.started_at),
            release.holder.owner,
            release.holder.host,
            spec.resources.len()
        );
    }
    let options = plan_options(&args.plan, false)?;
    let guard = crate::policy::guard(global, &ctx.workdir, &ctx.plugins, &args.plan.policy_exempt)?;
    if args.dry_run {
        let (plan, report) =
            tokio::task::block_in_place(|| guard.preview(&spec, &ctx.stack, &options, cancel))?;
        return Ok(print_preview(ctx, &plan, &report, args.detail));
    }
    let apply_options = ApplyOptions {
        concurrency: args.plan.concurrency,
        timeout: args.plan.timeout,
        watch: args.watch,
        watch_timeout: args.watch_timeout,
        ignore_fields: options.ignore_fields.clone(),
        sealer: None,
    };
    run_apply(
        ctx,
        &guard,
        &spec,
        "rollback",
        &options,
        &apply_options,
        args.yes,
        args.detail,
        cancel,
        Some(revision),
    )
    .await
}
