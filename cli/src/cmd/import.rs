//! `kusionctl import ID [--live-id X]`, `kusionctl state rm ID...` and `kusionctl state mv OLD
//! NEW`: changing what the stack manages without changing anything live.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Result, anyhow};
use kusion_kernel::manage;
use kusion_kernel::spec::Spec;
use serde_json::json;

use crate::args::Output;
use crate::context::CommandContext;
use crate::exit;

/// Adopt the live object behind the spec's resource `id`.
pub(crate) fn run(
    ctx: &CommandContext,
    spec: &Spec,
    id: &str,
    live_id: Option<&str>,
    timeout: Option<Duration>,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    let candidates: Vec<_> = spec.resources.iter().filter(|r| r.id == id).collect();
    let resource = match candidates.as_slice() {
        [one] => *one,
        [] => {
            return Err(anyhow!(
                "{id} is not a resource of the stack's spec: add it to the configuration first, so that kusion knows what it should be (`kusionctl compile` shows the spec)"
            ));
        }
        _ => {
            return Err(anyhow!(
                "{id} appears {} times in the spec (one per target): import is for one object at a time",
                candidates.len()
            ));
        }
    };
    let imported = manage::import(resource, live_id, &ctx.stack, timeout, cancel)?;
    if ctx.output == Output::Json {
        println!(
            "{}",
            json!({"imported": imported.key, "revision": imported.revision})
        );
    } else {
        println!(
            "Imported {} into state (revision {}). Nothing live was changed; `kusionctl preview` shows what the next apply would change.",
            imported.key, imported.revision
        );
    }
    Ok(exit::OK)
}

/// `state rm`.
pub(crate) fn forget(ctx: &CommandContext, ids: &[String], cancel: Arc<AtomicBool>) -> Result<u8> {
    let (keys, revision) = manage::forget(&ctx.stack, ids, cancel)?;
    if ctx.output == Output::Json {
        println!("{}", json!({"removed": keys, "revision": revision}));
    } else {
        for key in &keys {
            println!("Removed {key} from state; the live object was left as it is.");
        }
        println!(
            "Recorded as revision {revision}. An apply whose spec still holds one of them adopts it again if it matches, or changes it."
        );
    }
    Ok(exit::OK)
}

/// `state mv`.
pub(crate) fn rename(
    ctx: &CommandContext,
    from: &str,
    to: &str,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    let (old, new, revision) = manage::rename(&ctx.stack, from, to, cancel)?;
    if ctx.output == Output::Json {
        println!("{}", json!({"from": old, "to": new, "revision": revision}));
    } else {
        println!("Moved {old} to {new} in state (revision {revision}); nothing live was changed.");
    }
    Ok(exit::OK)
}

/// `state mv --to-stack DIR`.
pub(crate) fn move_to(
    ctx: &CommandContext,
    global: &crate::args::Global,
    dir: &std::path::Path,
    from: &str,
    to: &str,
    cancel: Arc<AtomicBool>,
) -> Result<u8> {
    let destination = crate::cmd::drift::other_stack(ctx, global, dir, true)?
        .ok_or_else(|| anyhow!("{}: its state cannot be opened", dir.display()))?;
    let moved = manage::move_to(&ctx.stack, &destination, from, to, cancel)?;
    if ctx.output == Output::Json {
        println!(
            "{}",
            json!({"from": moved.from_key, "to": moved.to_key, "toStack": destination.store.location(),
                   "revision": moved.source_revision, "destinationRevision": moved.destination_revision})
        );
    } else {
        println!(
            "Moved {} to {} as {} (revision {} here, {} there); nothing live was changed.",
            moved.from_key,
            destination.store.location(),
            moved.to_key,
            moved.source_revision,
            moved.destination_revision
        );
    }
    Ok(exit::OK)
}
