//! Changing what kusion manages without changing what is live: adopting an existing object
//! (`import`), forgetting one (`state rm`) and renaming one (`state mv`).
//!
//! Each runs under the stack's lease, writes its change as journal records in one durable
//! append, checkpoints, and is recorded in the release history (as operation `import`,
//! `state rm` or `state mv`), so the history says who changed what state and when.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kusion_sdk::Resource;
use kusion_sdk::runtime::ReadRequest;

use crate::operation::{OperationError, Stack, lease_ttl, load_unsealed};
use crate::spec::Spec;
use crate::state::{
    JournalRecord, LeaseHolder, Release, ReleaseStatus, ReleaseStep, State, StateEntry, Writer,
    now_ms, state_key,
};

/// Why a state edit was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    #[error(transparent)]
    Operation(#[from] OperationError),
    #[error("{0}")]
    Refused(String),
}

impl From<crate::state::StateError> for ManageError {
    fn from(e: crate::state::StateError) -> Self {
        ManageError::Operation(e.into())
    }
}

/// The extension naming the live object a runtime should adopt (Terraform's import ID).
pub const IMPORT_ID: &str = "kusionstack.io/import-id";

/// What `import` adopted.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The state key it was recorded under.
    pub key: String,
    pub revision: u64,
}

/// Adopt the live object behind `planned` into state as it is, changing nothing live. With
/// `live_id`, the runtime is told which object that is (its import ID). Refused when state
/// already manages the resource or when nothing live answers to it.
pub fn import(
    planned: &Resource,
    live_id: Option<&str>,
    stack: &Stack,
    timeout: Option<Duration>,
    cancel: Arc<AtomicBool>,
) -> Result<Imported, ManageError> {
    let runtime = stack
        .registry
        .get(&planned.resource_type)
        .cloned()
        .ok_or_else(|| {
            OperationError::Plan(crate::plan::PlanError::NoRuntime {
                id: planned.id.clone(),
                resource_type: planned.resource_type.clone(),
            })
        })?;
    let mut planned = planned.clone();
    if let Some(live_id) = live_id {
        planned
            .extensions
            .insert(IMPORT_ID.into(), serde_json::Value::String(live_id.into()));
    }
    let target = crate::plan::target_of(&stack.registry, &planned).map_err(OperationError::Plan)?;
    let key = state_key(&planned.id, target.as_deref());
    let (holder, writer) = lease(stack, "import", cancel)?;
    let (state, sealer) = load_unsealed(&*stack.store)?;
    writer.set_sealer(sealer.clone())?;
    if let Some(entry) = state.resources.get(&key)
        && !entry.pending
    {
        return Err(ManageError::Refused(format!(
            "{key} is already managed by this stack (`kusionctl state show {key}`); `kusionctl state rm` it first to import it again"
        )));
    }
    writer.ensure_live()?;
    let request = ReadRequest {
        prior: None,
        prior_private: None,
        planned: Some(planned.clone()),
        timeout,
    };
    let read = crate::plan::call(timeout, move || runtime.read(&request))
        .map_err(|e| ManageError::Refused(format!("{key}: reading the live object: {e}")))?;
    let Some(mut live) = read.resource else {
        return Err(ManageError::Refused(match live_id {
            Some(x) => format!("{key}: no live object with ID {x:?} was found to import"),
            None => format!(
                "{key}: no live object was found to import (pass --live-id when the runtime needs the object's own ID)"
            ),
        }));
    };
    // The state entry is the resource as live, under the spec's ID and extensions (where it
    // lives, how it is read), minus the one-off import instruction.
    live.id = planned.id.clone();
    live.resource_type = planned.resource_type.clone();
    live.extensions = planned.extensions.clone();
    live.extensions.shift_remove(IMPORT_ID);
    live.depends_on = planned.depends_on.clone();
    let entry = StateEntry {
        resource: live,
        private: read.private,
        sensitive_paths: read.sensitive_paths,
        pending: false,
        updated_at: now_ms(),
        target,
    };
    let mut spec = Spec {
        resources: vec![planned],
    };
    sealer.seal_resource(&mut spec.resources[0], &entry.sensitive_paths);
    let revision = record(
        &writer,
        stack,
        &holder,
        "import",
        spec,
        &[JournalRecord::Applied { entry }],
        vec![step(&key, "Import")],
        live_id
            .map(|x| vec![format!("imported {key} from live object {x:?}")])
            .unwrap_or_default(),
    )?;
    Ok(Imported { key, revision })
}

/// `state rm`: forget the entries `ids` name (an ID, or a state key `id@target`), leaving the
/// live objects alone. Returns the keys removed and the release recording it.
pub fn forget(
    stack: &Stack,
    ids: &[String],
    cancel: Arc<AtomicBool>,
) -> Result<(Vec<String>, u64), ManageError> {
    let (holder, writer) = lease(stack, "state rm", cancel)?;
    let (state, sealer) = load_unsealed(&*stack.store)?;
    writer.set_sealer(sealer)?;
    let mut keys = Vec::new();
    for id in ids {
        let key = resolve(&state, id)?;
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let records: Vec<JournalRecord> = keys
        .iter()
        .map(|k| JournalRecord::Deleted { id: k.clone() })
        .collect();
    let steps = keys.iter().map(|k| step(k, "Forget")).collect();
    let revision = record(
        &writer,
        stack,
        &holder,
        "state rm",
        Spec::default(),
        &records,
        steps,
        vec![format!(
            "forgotten without deleting: {} (still live, no longer managed)",
            keys.join(", ")
        )],
    )?;
    Ok((keys, revision))
}

/// `state mv`: the entry `from` names gets the ID `to`, in one journal record. Returns the old
/// and new keys and the release recording it.
pub fn rename(
    stack: &Stack,
    from: &str,
    to: &str,
    cancel: Arc<AtomicBool>,
) -> Result<(String, String, u64), ManageError> {
    let (holder, writer) = lease(stack, "state mv", cancel)?;
    let (state, sealer) = load_unsealed(&*stack.store)?;
    writer.set_sealer(sealer)?;
    let old_key = resolve(&state, from)?;
    let mut entry = state.resources[&old_key].clone();
    entry.resource.id = to.to_string();
    entry.updated_at = now_ms();
    // The new ID must be well formed for the type and agree with what the entry describes
    // (a Kubernetes ID names the object's namespace and name).
    crate::id::check_resource_id(&entry.resource)
        .map_err(|e| ManageError::Refused(format!("new ID {to:?}: {e}")))?;
    let new_key = entry.key();
    if state.resources.contains_key(&new_key) {
        return Err(ManageError::Refused(format!(
            "{new_key} is already in this stack's state; `kusionctl state rm` it first or choose another ID"
        )));
    }
    let revision = record(
        &writer,
        stack,
        &holder,
        "state mv",
        Spec::default(),
        &[JournalRecord::Renamed {
            from: old_key.clone(),
            entry,
        }],
        vec![step(&new_key, "Rename")],
        vec![format!("renamed {old_key} to {new_key}")],
    )?;
    Ok((old_key, new_key, revision))
}

/// The state key `id` names: itself when it is a key, else the one entry with that ID.
fn resolve(state: &State, id: &str) -> Result<String, ManageError> {
    if state.resources.contains_key(id) {
        return Ok(id.to_string());
    }
    let matches: Vec<&String> = state
        .resources
        .iter()
        .filter(|(_, e)| e.resource.id == id)
        .map(|(k, _)| k)
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(ManageError::Refused(format!(
            "{id} is not in this stack's state (`kusionctl state list` shows what is)"
        ))),
        many => Err(ManageError::Refused(format!(
            "{id} is recorded in several targets; name one: {}",
            many.iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn lease(
    stack: &Stack,
    operation: &str,
    cancel: Arc<AtomicBool>,
) -> Result<(LeaseHolder, Writer), ManageError> {
    let holder = LeaseHolder::current(operation);
    let writer = Writer::acquire(stack.store.clone(), &holder, lease_ttl(), cancel)?;
    crate::operation::close_abandoned_releases(&*stack.store);
    Ok((holder, writer))
}

fn step(key: &str, action: &str) -> ReleaseStep {
    ReleaseStep {
        id: key.to_string(),
        action: action.to_string(),
        outcome: "succeeded".to_string(),
        error: None,
    }
}

/// Open a release, journal `records` in one durable append, checkpoint, and close the
/// release as succeeded (failed, with the error, when the write fails).
#[allow(clippy::too_many_arguments)]
fn record(
    writer: &Writer,
    stack: &Stack,
    holder: &LeaseHolder,
    operation: &str,
    spec: Spec,
    records: &[JournalRecord],
    steps: Vec<ReleaseStep>,
    notes: Vec<String>,
) -> Result<u64, ManageError> {
    let mut release = Release {
        revision: 0,
        operation: operation.to_string(),
        holder: holder.clone(),
        started_at: now_ms(),
        finished_at: None,
        status: ReleaseStatus::Running,
        spec,
        steps: Vec::new(),
        notes,
        rollback_of: None,
    };
    let revision = stack.store.create_release(&mut release)?;
    let written = writer.append(records).and_then(|()| {
        let mut state = stack.store.load()?;
        state.serial += 1;
        writer.checkpoint(&mut state)
    });
    release.finished_at = Some(now_ms());
    match written {
        Ok(()) => {
            release.status = ReleaseStatus::Succeeded;
            release.steps = steps;
            stack.store.update_release(&release)?;
            Ok(revision)
        }
        Err(e) => {
            release.status = ReleaseStatus::Failed;
            release.notes.push(format!("stopped: {e}"));
            if let Err(update) = stack.store.update_release(&release) {
                tracing::warn!("recording the end of release {revision}: {update}");
            }
            Err(e.into())
        }
    }
}
