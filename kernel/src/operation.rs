//! Whole operations on a stack: preview, apply and destroy, with the lease, history and journal.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::apply::{self, ApplyOptions, ApplyReport, Event, Outcome};
use crate::plan::{self, Plan, PlanError, PlanOptions, PlanView};
use crate::registry::Registry;
use crate::spec::Spec;
use crate::state::seal::{KeySource, Sealer};
use crate::state::{
    LeaseHolder, Release, ReleaseStatus, ReleaseStep, StateError, StateStore, Writer, now_ms,
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
    #[error(transparent)]
    Seal(#[from] crate::state::seal::SealError),
}

/// Load the stack's state with its sealer: encrypted values decrypted when the state key is
/// configured, hashes left as they are.
pub fn load_unsealed(
    store: &dyn StateStore,
) -> Result<(crate::state::State, Arc<Sealer>), OperationError> {
    let mut state = store.load()?;
    let key = KeySource::from_env()?;
    let sealer = Sealer::for_state(&state, key.as_ref())?;
    sealer.unseal_state(&mut state);
    Ok((state, Arc::new(sealer)))
}

/// How long a lease lives without renewal; renewed every third of it while an operation runs.
pub const LEASE_TTL: Duration = Duration::from_secs(60);

/// The lease's life: `KUSION_LEASE_TTL` (e.g. `20s`, at least 1 s) or [`LEASE_TTL`]. A shorter
/// life lets another process take over a stuck holder's stack sooner.
pub fn lease_ttl() -> Duration {
    std::env::var("KUSION_LEASE_TTL")
        .ok()
        .and_then(|v| humantime::parse_duration(v.trim()).ok())
        .map_or(LEASE_TTL, |d| d.max(Duration::from_secs(1)))
}

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
    let (state, sealer) = load_unsealed(&*stack.store)?;
    let options = PlanOptions {
        sealer: Some(sealer),
        ..options.clone()
    };
    Ok(plan::compute(spec, &state, &stack.registry, &options, &cancel)?.view())
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
    let holder = LeaseHolder::current(operation);
    let writer = Arc::new(Writer::acquire(
        stack.store.clone(),
        &holder,
        lease_ttl(),
        cancel.clone(),
    )?);
    close_abandoned_releases(&*stack.store);
    apply_locked(
        spec,
        stack,
        writer,
        operation,
        &holder,
        plan_options,
        apply_options,
        notes,
        confirm,
        events,
        cancel,
    )
}

/// Releases still marked running when the stack's lease was just taken belong to a process
/// that stopped (killed, a full disk, a lost connection) before recording an outcome: close
/// them as failed, saying so, so history never shows an operation running forever.
fn close_abandoned_releases(store: &dyn StateStore) {
    let latest = match store.latest_revision() {
        Ok(Some(latest)) => latest,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!("reading the release history: {e}");
            return;
        }
    };
    // Operations hold the lease one at a time, so only the last few can have been left open.
    for revision in latest.saturating_sub(ABANDONED_LOOKBACK - 1).max(1)..=latest {
        let Ok(mut release) = store.release(revision) else {
            continue;
        };
        if release.status != ReleaseStatus::Running {
            continue;
        }
        release.status = ReleaseStatus::Failed;
        release.finished_at = Some(now_ms());
        release.notes.push(format!(
            "closed by the next operation: {} stopped before recording an outcome; `kusionctl state list` shows what state holds",
            release.holder
        ));
        if let Err(e) = store.update_release(&release) {
            tracing::warn!("closing abandoned release {revision}: {e}");
        }
    }
}

/// How many of the latest releases are checked for ones left running.
const ABANDONED_LOOKBACK: u64 = 5;

#[allow(clippy::too_many_arguments)]
fn apply_locked(
    spec: &Spec,
    stack: &Stack,
    writer: Arc<Writer>,
    operation: &str,
    holder: &LeaseHolder,
    plan_options: &PlanOptions,
    apply_options: &ApplyOptions,
    notes: Vec<String>,
    confirm: impl FnOnce(&PlanView) -> bool,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Arc<AtomicBool>,
) -> Result<Applied, OperationError> {
    let (state, sealer) = load_unsealed(&*stack.store)?;
    writer.set_sealer(sealer.clone())?;
    let plan_options = &PlanOptions {
        sealer: Some(sealer.clone()),
        ..plan_options.clone()
    };
    let apply_options = &ApplyOptions {
        sealer: Some(sealer),
        ..apply_options.clone()
    };
    let plan = plan::compute(spec, &state, &stack.registry, plan_options, &cancel)?;
    let view = plan.view();
    if !plan.has_changes() && !state.resources.values().any(|e| e.pending) {
        // Entries recorded before targets existed still get their qualified keys (under the
        // lease, one durable write), though nothing else changes.
        if !plan.moves.is_empty() {
            writer.append(&plan.moves)?;
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
    let (report, _state) =
        match apply::execute(plan, writer, &stack.registry, apply_options, cancel, events) {
            Ok(done) => done,
            Err(e) => {
                // The history says how it ended even when state could not be written (a lost
                // lease, a full disk); what state holds is what the journal recorded.
                release.finished_at = Some(now_ms());
                release.status = ReleaseStatus::Failed;
                release.notes.push(format!("stopped: {e}"));
                if let Err(update) = stack.store.update_release(&release) {
                    tracing::warn!("recording the end of release {revision}: {update}");
                }
                return Err(e.into());
            }
        };
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
