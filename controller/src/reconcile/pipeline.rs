//! The kernel's pipeline for one Stack, run on a blocking thread: open the checked-out stack
//! (compile, settings, runtimes, policies), plan against live state read-only, and only when
//! the plan changes something take the stack's state lease, plan again under it, check policy
//! and approval, apply and record a release.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kusion_kernel::apply::ApplyOptions;
use kusion_kernel::operation::{self, Applied};
use kusion_kernel::plan::{PlanOptions, PlanView};
use kusion_kernel::policy::{self as kpolicy, Guarded, PolicyReport};
use kusion_kernel::spec::Spec;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::ReconcileError;
use crate::crd::Mode;
use crate::{LoadRequest, StackLoader};

/// What one run of the pipeline came to.
pub(super) enum Outcome {
    Blocked {
        plan: PlanView,
        report: PolicyReport,
    },
    Previewed {
        plan: PlanView,
        report: PolicyReport,
    },
    NothingToDo {
        plan: PlanView,
        report: Option<PolicyReport>,
    },
    AwaitingApproval {
        plan: PlanView,
        hash: String,
    },
    Applied {
        plan: PlanView,
        release: u64,
        summary: String,
        report: Option<PolicyReport>,
    },
}

/// The hash a plan is approved by: the revision and every change, masked as shown.
pub fn plan_hash(revision: &str, plan: &PlanView) -> String {
    let steps: Vec<Value> = plan
        .steps
        .iter()
        .filter(|s| s.action.changes_something())
        .map(|s| json!({"id": s.id, "target": s.target, "action": s.action, "changes": s.changes}))
        .collect();
    let text = json!({"revision": revision, "steps": steps}).to_string();
    hex::encode(&Sha256::digest(text.as_bytes())[..16])
}

/// What the pipeline needs, owned, for the blocking thread.
pub(super) struct Job {
    pub(super) stack: String,
    pub(super) revision: String,
    pub(super) dir: PathBuf,
    pub(super) state_dir: PathBuf,
    pub(super) backend: String,
    pub(super) exemptions: Vec<String>,
    pub(super) mode: Mode,
    pub(super) require_approval: bool,
    pub(super) approved: Option<String>,
    pub(super) destroy: bool,
    pub(super) wait: bool,
    pub(super) wait_timeout: Duration,
    /// The Stack waits for readiness and has not been ready since its last failure: an
    /// unchanged plan is not enough, its resources are watched again.
    pub(super) recheck_readiness: bool,
    /// Set when this replica loses leadership: stop at the next step.
    pub(super) cancel: Arc<AtomicBool>,
}

/// Compile, policy, plan, approve, apply and record: the kernel's pipeline, run synchronously.
pub(super) fn pipeline(loader: &dyn StackLoader, job: Job) -> Result<Outcome, ReconcileError> {
    let fail = |message: String| ReconcileError::Pipeline {
        stack: job.stack.clone(),
        revision: job.revision.clone(),
        message,
    };
    let prepared = loader
        .load(&LoadRequest {
            dir: &job.dir,
            state_dir: job.state_dir.clone(),
            state_backend: &job.backend,
            exemptions: &job.exemptions,
            // Git is the source of truth: a field someone changed by hand is taken back.
            force_conflicts: true,
        })
        .map_err(|e| fail(e.0))?;
    let cancel = job.cancel.clone();
    let plan_options = PlanOptions {
        destroy: job.destroy,
        ..Default::default()
    };
    if job.mode == Mode::PreviewOnly && !job.destroy {
        let (plan, report) = prepared
            .guard
            .preview(&prepared.spec, &prepared.stack, &plan_options, cancel)
            .map_err(|e| fail(e.to_string()))?;
        return Ok(if report.blocked {
            Outcome::Blocked { plan, report }
        } else {
            Outcome::Previewed { plan, report }
        });
    }
    // The steady state: plan read-only first (no lease, no write); an unchanged stack ends
    // here. `operation::apply` plans the same way under the lease and does nothing for a plan
    // without changes (a pending journal entry shows as a step that changes something), so
    // this skips only work that would have been a no-op. Any change is planned again under
    // the lease below, which is what gets approved and applied.
    if !job.destroy {
        let plan = operation::preview(
            &prepared.spec,
            &prepared.stack,
            &plan_options,
            cancel.clone(),
        )
        .map_err(|e| fail(e.to_string()))?;
        if !plan.has_changes() {
            if job.recheck_readiness {
                let failures = super::readiness::not_ready(
                    &prepared.spec,
                    &prepared.stack,
                    job.wait_timeout,
                    &cancel,
                );
                if !failures.is_empty() {
                    return Err(ReconcileError::ApplyFailed {
                        stack: job.stack.clone(),
                        revision: job.revision.clone(),
                        summary: format!(
                            "{} resource(s) applied earlier still not ready",
                            failures.len()
                        ),
                        failures,
                    });
                }
            }
            return Ok(Outcome::NothingToDo { plan, report: None });
        }
        if job.require_approval {
            let hash = plan_hash(&job.revision, &plan);
            if job.approved.as_deref() != Some(hash.as_str()) {
                // Not approved: say so without the lease; policies still speak first.
                let report = prepared
                    .guard
                    .evaluate(&prepared.spec, "controller", Some(&plan));
                if report.blocked {
                    return Ok(Outcome::Blocked { plan, report });
                }
                return Ok(Outcome::AwaitingApproval { plan, hash });
            }
        }
    }
    let apply_options = ApplyOptions {
        watch: job.wait && !job.destroy,
        watch_timeout: job.wait_timeout,
        ..Default::default()
    };
    let computed: Mutex<Option<String>> = Mutex::new(None);
    let confirm = |plan: &PlanView, _: Option<&PolicyReport>| {
        if !job.require_approval || job.destroy {
            return true;
        }
        // The plan computed under the state lease is what must have been approved.
        let hash = plan_hash(&job.revision, plan);
        let ok = job.approved.as_deref() == Some(hash.as_str());
        *computed.lock().unwrap_or_else(|p| p.into_inner()) = Some(hash);
        ok
    };
    let empty = Spec::default();
    let spec = if job.destroy { &empty } else { &prepared.spec };
    let operation = if job.destroy { "destroy" } else { "controller" };
    let guarded = kpolicy::apply(
        &prepared.guard,
        spec,
        &prepared.stack,
        operation,
        &plan_options,
        &apply_options,
        None,
        confirm,
        None,
        cancel,
    )
    .map_err(|e| fail(e.to_string()))?;
    Ok(match guarded {
        Guarded::Blocked { plan, report } => Outcome::Blocked { plan, report },
        Guarded::Ran { applied, report } => match applied {
            Applied::NothingToDo(plan) => Outcome::NothingToDo { plan, report },
            Applied::Declined(plan) => {
                let hash = computed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
                    .unwrap_or_else(|| plan_hash(&job.revision, &plan));
                Outcome::AwaitingApproval { plan, hash }
            }
            Applied::Done {
                plan,
                report: applied,
                revision,
            } => {
                let verb = if job.destroy { "Destroy" } else { "Apply" };
                if !applied.succeeded() {
                    let failures = applied
                        .steps
                        .iter()
                        .filter_map(|s| match &s.outcome {
                            kusion_kernel::apply::Outcome::Failed(e) => {
                                Some(format!("{} {}: {e}", s.action, s.id))
                            }
                            _ => None,
                        })
                        .collect();
                    return Err(ReconcileError::ApplyFailed {
                        stack: job.stack.clone(),
                        revision: job.revision.clone(),
                        summary: applied.summary_line(verb),
                        failures,
                    });
                }
                Outcome::Applied {
                    plan,
                    release: revision,
                    summary: applied.summary_line(verb),
                    report,
                }
            }
        },
    })
}
