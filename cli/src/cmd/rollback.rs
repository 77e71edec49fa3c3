//! `kusionctl rollback [--to REVISION]`: plan the spec an earlier release applied against what
//! is live, preview and confirm it like apply, and record it as a release naming its source.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Result;
use kusion_kernel::operation;
use kusion_kernel::rollback;
use kusion_kernel::state::format_time;

use crate::args::{ApplyFlags, Global, Output, PlanArgs};
use crate::cmd::apply::apply_spec;
use crate::context::CommandContext;

/// `kusionctl rollback [--to REVISION]` (default: [`rollback::default_revision`]).
pub(crate) async fn run(
    ctx: &CommandContext,
    global: &Global,
    to: Option<u64>,
    plan: &PlanArgs,
    flags: &ApplyFlags,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    let store = &ctx.stack.store;
    let revision = match to {
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
    apply_spec(
        ctx,
        global,
        &spec,
        plan,
        flags,
        "rollback",
        Some(revision),
        cancel,
    )
    .await
}
