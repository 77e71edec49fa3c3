//! Whole operations on a stack: preview, apply and destroy, with the lease, history and journal.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::apply::{self, ApplyOptions, ApplyReport, Event, Outcome};
use crate::plan::{self, Plan, PlanError, PlanOptions, PlanView};
use crate::registry::Registry;
use crate::spec::Spec;
use crate::state::{
    LeaseHolder, Release, ReleaseStatus, ReleaseStep, StateError, StateStore, now_ms,
};

/// A stack as the engine sees it: where its state lives and which runtimes serve it.
#[derive(Clone)]
pub struct Stack {
    pub store: Arc<dyn StateStore>,
    pub registry: Registry,
}

#[derive(Debug, thiserror::Error)]
pub enum OperationError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("configuring runtime {runtime:?}: {message}")]
    Configure { runtime: String, message: String },
}

/// How long a lease lives without renewal; renewed every third of it while an operation runs.
pub const LEASE_TTL: Duration = Duration::from_secs(60);

/// What happened to an apply or destroy.
#[derive(Debug)]
pub enum Applied {
    /// The plan changed nothing, so nothing ran and no release was recorded.
    NothingToDo(PlanView),
    /// The user declined the plan.
    Declined(PlanView),
    Done {
        plan: PlanView,
        report: ApplyReport,
        revision: u64,
    },
}

/// The spec as kept in history: values of sensitive fields masked, so no secret rests there.
fn masked_spec(spec: &Spec, plan: &Plan<'_>) -> Spec {
    let mut masked = spec.clone();
    // The plan's first steps are the spec's resources, in order.
    for (i, resource) in masked.resources.iter_mut().enumerate() {
        let mut sensitive = crate::diff::builtin_sensitive_paths(resource);
        if let Some(step) = plan.steps.get(i).filter(|s| s.id == resource.id) {
            sensitive.extend(step.sensitive.iter().cloned());
        }
        if sensitive.is_empty() {
            continue;
        }
        let mut attrs = serde_json::Value::Object(std::mem::take(&mut resource.attributes));
        crate::diff::mask(&mut attrs, &sensitive);
        if let serde_json::Value::Object(map) = attrs {
            resource.attributes = map;
        }
    }
    masked
}

/// Configure every runtime that has a section in `config` (keyed by runtime name); runtimes
/// without one keep the configuration they were loaded with.
pub fn configure(registry: &Registry, config: &serde_json::Value) -> Result<(), OperationError> {
    for (info, runtime) in registry.runtimes() {
        let Some(section) = config.get(&info.name) else {
            continue;
        };
        runtime
            .configure(section)
            .map_err(|e| OperationError::Configure {
                runtime: info.name.clone(),
                message: e.message,
            })?;
    }
    Ok(())
}

/// Compute the plan without changing anything and without taking the lease.
pub fn preview(
    spec: &Spec,
    stack: &Stack,
    options: &PlanOptions,
    cancel: Arc<AtomicBool>,
) -> Result<PlanView, OperationError> {
    let state = stack.store.load()?;
    Ok(plan::compute(spec, &state, &stack.registry, options, &cancel)?.view())
}

/// Take the lease, plan, ask `confirm`, execute and record the release.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    spec: &Spec,
    stack: &Stack,
    operation: &str,
    plan_options: &PlanOptions,
    apply_options: &ApplyOptions,
    notes: Vec<String>,
    confirm: impl FnOnce(&PlanView) -> bool,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Arc<AtomicBool>,
) -> Result<Applied, OperationError> {
    let store = stack.store.clone();
    let holder = LeaseHolder::current(operation);
    let lease = store.acquire_lease(&holder, LEASE_TTL.as_millis() as u64)?;
    let lease_lost = Arc::new(AtomicBool::new(false));
    let (stop_renewing, stopped) = std::sync::mpsc::channel::<()>();
    let renewer = {
        let store = store.clone();
        let lease = lease.clone();
        let cancel = cancel.clone();
        let lost = lease_lost.clone();
        std::thread::Builder::new()
            .name("kusion-lease".into())
            .spawn(move || {
                let mut current = lease;
                // Renew every third of the lease's life until told to stop.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(LEASE_TTL / 3)
                {
                    match store.renew_lease(&current, LEASE_TTL.as_millis() as u64) {
                        Ok(renewed) => current = renewed,
                        Err(e) => {
                            // Someone took the stack over: stop starting new work.
                            tracing::error!("lost the state lease ({e}); stopping");
                            lost.store(true, Ordering::SeqCst);
                            cancel.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                }
            })
            .map_err(|e| StateError::Io {
                location: "lease".into(),
                message: format!("starting the lease renewer: {e}"),
            })?
    };
    let result = apply_locked(
        spec,
        stack,
        operation,
        &holder,
        plan_options,
        apply_options,
        notes,
        confirm,
        events,
        cancel,
    );
    drop(stop_renewing);
    let _ = renewer.join();
    if !lease_lost.load(Ordering::SeqCst) {
        store.release_lease(&lease)?;
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn apply_locked(
    spec: &Spec,
    stack: &Stack,
    operation: &str,
    holder: &LeaseHolder,
    plan_options: &PlanOptions,
    apply_options: &ApplyOptions,
    notes: Vec<String>,
    confirm: impl FnOnce(&PlanView) -> bool,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Arc<AtomicBool>,
) -> Result<Applied, OperationError> {
    let state = stack.store.load()?;
    let plan = plan::compute(spec, &state, &stack.registry, plan_options, &cancel)?;
    let view = plan.view();
    if !plan.has_changes() && !state.resources.values().any(|e| e.pending) {
        // Entries recorded before targets existed still get their qualified keys (under the
        // lease, one durable write), though nothing else changes.
        if !plan.moves.is_empty() {
            stack.store.append(&plan.moves)?;
        }
        return Ok(Applied::NothingToDo(view));
    }
    if !confirm(&view) {
        return Ok(Applied::Declined(view));
    }
    let mut release = Release {
        revision: 0,
        operation: operation.to_string(),
        holder: holder.clone(),
        started_at: now_ms(),
        finished_at: None,
        status: ReleaseStatus::Running,
        spec: if plan_options.destroy {
            Spec::default()
        } else {
            masked_spec(spec, &plan)
        },
        steps: Vec::new(),
        notes,
    };
    let revision = stack.store.create_release(&mut release)?;
    let (report, _state) = apply::execute(
        plan,
        stack.store.clone(),
        &stack.registry,
        apply_options,
        cancel,
        events,
    )?;
    release.finished_at = Some(now_ms());
    release.status = if report.succeeded() {
        ReleaseStatus::Succeeded
    } else if report.interrupted {
        ReleaseStatus::Interrupted
    } else {
        ReleaseStatus::Failed
    };
    release.steps = report
        .steps
        .iter()
        .map(|s| {
            let (outcome, error) = match &s.outcome {
                Outcome::Succeeded => ("succeeded".to_string(), None),
                Outcome::Failed(e) => ("failed".to_string(), Some(e.clone())),
                Outcome::Skipped(e) => ("skipped".to_string(), Some(e.clone())),
                Outcome::Cancelled => ("cancelled".to_string(), None),
            };
            ReleaseStep {
                id: s.id.clone(),
                action: s.action.to_string(),
                outcome,
                error,
            }
        })
        .collect();
    stack.store.update_release(&release)?;
    Ok(Applied::Done {
        plan: view,
        report,
        revision,
    })
}
