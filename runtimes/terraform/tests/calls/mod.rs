//! Calling the Terraform runtime as the kernel does, for tests: what a test records after an
//! apply, and apply, dry-run and read with the kernel's time limits.
#![allow(dead_code)]

use std::time::Duration;

use kusion_runtime_terraform::TerraformRuntime;
use kusion_sdk::Resource;
use kusion_sdk::runtime::{ApplyRequest, ApplyResponse, ReadRequest, Runtime};

/// What the kernel keeps in state for a resource: the object and the runtime's private data.
pub struct Stored {
    pub resource: Resource,
    pub private: Option<String>,
}

/// Apply (or dry-run) `planned` over `prior`; panics naming the resource on failure.
pub fn call_apply(
    rt: &TerraformRuntime,
    prior: Option<&Stored>,
    planned: &Resource,
    dry_run: bool,
) -> ApplyResponse {
    rt.apply(&ApplyRequest {
        prior: prior.map(|p| p.resource.clone()),
        prior_private: prior.and_then(|p| p.private.clone()),
        planned: planned.clone(),
        dry_run,
        timeout: Some(Duration::from_secs(if dry_run { 120 } else { 300 })),
    })
    .unwrap_or_else(|e| panic!("apply (dry run: {dry_run}) of {} failed: {e}", planned.id))
}

pub fn dry_run(rt: &TerraformRuntime, prior: Option<&Stored>, planned: &Resource) -> ApplyResponse {
    call_apply(rt, prior, planned, true)
}

/// A real apply: every value is known afterwards.
pub fn apply(rt: &TerraformRuntime, prior: Option<&Stored>, planned: &Resource) -> Stored {
    let r = call_apply(rt, prior, planned, false);
    assert!(
        r.unknown_paths.is_empty(),
        "{}: unknown after apply: {:?}",
        planned.id,
        r.unknown_paths
    );
    Stored {
        resource: r.resource,
        private: r.private,
    }
}

/// The live object behind `stored`, or None when it is gone.
pub fn read(rt: &TerraformRuntime, stored: &Stored) -> Option<Resource> {
    rt.read(&ReadRequest {
        prior: Some(stored.resource.clone()),
        prior_private: stored.private.clone(),
        planned: None,
        timeout: Some(Duration::from_secs(120)),
    })
    .unwrap_or_else(|e| panic!("read of {} failed: {e}", stored.resource.id))
    .resource
}
