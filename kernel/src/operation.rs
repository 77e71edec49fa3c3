//! Whole operations on a stack: preview, apply and destroy, with the lease, history and journal.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::execute::{self, ApplyOptions, ApplyReport, Event, Outcome};
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
    /// Where the stack's state, lease and history are kept.
    pub store: Arc<dyn StateStore>,
    /// The runtimes serving the stack's resource types.
    pub registry: Registry,
}

/// Why an operation could not run.
#[derive(Debug, thiserror::Error)]
pub enum OperationError {
    /// Planning failed.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The state store failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// A runtime refused its configuration.
    #[error("configuring runtime {runtime:?}: {message}")]
    Configure {
        /// The runtime.
        runtime: String,
        /// Its answer.
        message: String,
    },
    /// The stack's state key could not seal or unseal a value.
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
    /// It ran and was recorded.
    Done {
        /// The plan it ran.
        plan: PlanView,
        /// What each step did.
        report: ApplyReport,
        /// The release recorded.
        revision: u64,
    },
}

/// The spec as kept in history: sensitive values sealed as state seals them, encrypted when the
/// stack has a state key (so a rollback can restore them) and otherwise only a keyed hash, so
/// no secret rests there in clear.
fn history_spec(spec: &Spec, plan: &Plan<'_>, sealer: &Sealer) -> Spec {
    let found: std::collections::HashMap<&str, Vec<String>> = plan
        .steps
        .iter()
        .filter(|s| s.planned.is_some())
        .map(|s| {
            (
                s.id.as_str(),
                s.sensitive.iter().map(ToString::to_string).collect(),
            )
        })
        .collect();
    let mut sealed = spec.clone();
    for resource in &mut sealed.resources {
        let extra = found.get(resource.id.as_str()).cloned().unwrap_or_default();
        // A `ref://` value names a secret without holding it: history keeps it as written, so a
        // rollback reads the store again instead of needing a state key.
        let references = crate::secret_ref::reference_paths(resource);
        let written = (!references.is_empty())
            .then(|| serde_json::Value::Object(resource.attributes.clone()));
        sealer.seal_resource(resource, &extra);
        if let Some(written) = written {
            let mut attrs = serde_json::Value::Object(std::mem::take(&mut resource.attributes));
            for path in &references {
                if let Some(v) = path.get(&written) {
                    crate::diff::set_path(&mut attrs, path, v.clone());
                }
            }
            if let serde_json::Value::Object(map) = attrs {
                resource.attributes = map;
            }
        }
    }
    sealed
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
    let narrowed = narrow(spec, &state, &stack.registry, &options)?;
    let (spec, state) = match &narrowed {
        Some(n) => (&n.spec, &n.state),
        None => (spec, &state),
    };
    let mut view = plan::compute(spec, state, &stack.registry, &options, &cancel)?.view();
    view.narrowed = narrowed.map(|n| n.narrowing);
    Ok(view)
}

/// The spec and state narrowed to `--target`'s resources, when there are targets.
fn narrow(
    spec: &Spec,
    state: &crate::state::State,
    registry: &Registry,
    options: &PlanOptions,
) -> Result<Option<crate::select::Narrowed>, PlanError> {
    if options.select.is_empty() {
        return Ok(None);
    }
    crate::select::narrow(spec, state, registry, &options.select, options.destroy).map(Some)
}

/// What a release records besides its plan and outcome.
#[derive(Debug, Clone, Default)]
pub struct ReleaseInfo {
    /// Free-form notes (policy exemptions, flags).
    pub notes: Vec<String>,
    /// For a rollback: the release whose spec is applied.
    pub rollback_of: Option<u64>,
}

impl From<Vec<String>> for ReleaseInfo {
    fn from(notes: Vec<String>) -> Self {
        ReleaseInfo {
            notes,
            rollback_of: None,
        }
    }
}

/// Take the lease, plan, ask `confirm`, execute and record the release.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    spec: &Spec,
    stack: &Stack,
    operation: &str,
    plan_options: &PlanOptions,
    apply_options: &ApplyOptions,
    info: impl Into<ReleaseInfo>,
    confirm: impl FnOnce(&PlanView) -> bool,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Arc<AtomicBool>,
) -> Result<Applied, OperationError> {
    let info = info.into();
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
        info,
        confirm,
        events,
        cancel,
    )
}

/// Releases still marked running when the stack's lease was just taken belong to a process
/// that stopped (killed, a full disk, a lost connection) before recording an outcome: close
/// them as failed, saying so, so history never shows an operation running forever.
pub(crate) fn close_abandoned_releases(store: &dyn StateStore) {
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
    info: ReleaseInfo,
    confirm: impl FnOnce(&PlanView) -> bool,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Arc<AtomicBool>,
) -> Result<Applied, OperationError> {
    let ReleaseInfo { notes, rollback_of } = info;
    let (state, sealer) = load_unsealed(&*stack.store)?;
    writer.set_sealer(sealer.clone())?;
    let history_sealer = sealer.clone();
    let plan_options = &PlanOptions {
        sealer: Some(sealer.clone()),
        ..plan_options.clone()
    };
    let apply_options = &ApplyOptions {
        sealer: Some(sealer),
        ..apply_options.clone()
    };
    let narrowed = narrow(spec, &state, &stack.registry, plan_options)?;
    let (planned_spec, planned_state) = match &narrowed {
        Some(n) => (&n.spec, &n.state),
        None => (spec, &state),
    };
    let plan = plan::compute(
        planned_spec,
        planned_state,
        &stack.registry,
        plan_options,
        &cancel,
    )?;
    let mut view = plan.view();
    view.narrowed = narrowed.as_ref().map(|n| n.narrowing.clone());
    let mut notes = notes;
    if let Some(n) = &view.narrowed {
        notes.push(format!(
            "targeted ({}): {} resource(s) planned, {} not planned",
            n.patterns.join(", "),
            n.planned,
            n.left_out
        ));
    }
    if !plan.has_changes() && !planned_state.resources.values().any(|e| e.pending) {
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
    let history = if plan_options.destroy {
        Spec::default()
    } else {
        history_spec(spec, &plan, &history_sealer)
    };
    let mut release = Release {
        notes,
        rollback_of,
        ..Release::running(operation, holder, history)
    };
    let revision = stack.store.create_release(&mut release)?;
    let (report, _state) =
        match execute::execute_plan(plan, writer, &stack.registry, apply_options, cancel, events) {
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

/// Compare what state recorded with what is live (see [`crate::drift`]); reads only, so no
/// lease is taken.
pub fn drift(
    stack: &Stack,
    options: &crate::drift::DriftOptions,
    cancel: &AtomicBool,
) -> Result<crate::drift::DriftReport, OperationError> {
    let (state, sealer) = load_unsealed(&*stack.store)?;
    let options = crate::drift::DriftOptions {
        sealer: Some(sealer),
        ..options.clone()
    };
    Ok(crate::drift::detect(
        &state,
        &stack.registry,
        &options,
        cancel,
    ))
}
