//! Changing what kusion manages without changing what is live: adopting an existing object
//! (`import`), forgetting one (`state rm`), renaming one (`state mv`) and handing one to another
//! stack (`state mv --to-stack`).
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
    /// The operation underneath failed.
    #[error(transparent)]
    Operation(#[from] OperationError),
    /// Refused, and why (already managed, nothing live answers).
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
    /// The release recording it.
    pub revision: u64,
}

/// One object to adopt: the spec resource it becomes, and what another tool recorded of it (a
/// Terraform state's attributes and private data), if anything.
#[derive(Debug, Clone)]
pub struct Adoption {
    /// The resource the object becomes in the spec.
    pub planned: Resource,
    /// The object as recorded elsewhere: the runtime refreshes from it (as `terraform
    /// refresh` would), rather than finding the object from `planned` alone.
    pub recorded: Option<Resource>,
    /// The other tool's private data for it.
    pub recorded_private: Option<String>,
}

/// What `adopt` did.
#[derive(Debug, Clone)]
pub struct Adopted {
    /// The state keys recorded, in the order given.
    pub keys: Vec<String>,
    /// The release recording them.
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
    let mut planned = planned.clone();
    if let Some(live_id) = live_id {
        planned
            .extensions
            .insert(IMPORT_ID.into(), serde_json::Value::String(live_id.into()));
    }
    let note = live_id
        .map(|x| format!("imported {} from live object {x:?}", planned.id))
        .into_iter()
        .collect();
    let adopted = adopt(
        vec![Adoption {
            planned,
            recorded: None,
            recorded_private: None,
        }],
        stack,
        timeout,
        1,
        note,
        cancel,
    )
    .map_err(|e| match (e, live_id) {
        (ManageError::Refused(m), Some(x)) if m.ends_with(NOT_FOUND) => {
            ManageError::Refused(m.replace(
                NOT_FOUND,
                &format!("no live object with ID {x:?} was found to import"),
            ))
        }
        (ManageError::Refused(m), None) if m.ends_with(NOT_FOUND) => ManageError::Refused(format!(
            "{m} (pass --live-id when the runtime needs the object's own ID)"
        )),
        (e, _) => e,
    })?;
    Ok(Imported {
        key: adopted.keys.into_iter().next().unwrap_or_default(),
        revision: adopted.revision,
    })
}

const NOT_FOUND: &str = "no live object was found to import";

/// Adopt every object of `objects` into state as it is live, in one release (operation
/// `import`) and one journal append: all or nothing. Each is read through its runtime (up to
/// `concurrency` at once); refused, before anything is written, when state already manages
/// one or one is not live.
pub fn adopt(
    objects: Vec<Adoption>,
    stack: &Stack,
    timeout: Option<Duration>,
    concurrency: usize,
    notes: Vec<String>,
    cancel: Arc<AtomicBool>,
) -> Result<Adopted, ManageError> {
    let mut keyed = Vec::with_capacity(objects.len());
    for o in objects {
        if stack.registry.get(&o.planned.resource_type).is_none() {
            return Err(OperationError::Plan(crate::plan::PlanError::NoRuntime {
                id: o.planned.id.clone(),
                resource_type: o.planned.resource_type.clone(),
            })
            .into());
        }
        let target =
            crate::plan::target_of(&stack.registry, &o.planned).map_err(OperationError::Plan)?;
        let key = state_key(&o.planned.id, target.as_deref());
        if keyed.iter().any(|(k, _, _)| *k == key) {
            return Err(ManageError::Refused(format!("{key} is named twice")));
        }
        keyed.push((key, target, o));
    }
    let (holder, writer) = lease(stack, "import", cancel.clone())?;
    let (state, sealer) = load_unsealed(&*stack.store)?;
    writer.set_sealer(sealer.clone())?;
    for (key, _, _) in &keyed {
        if let Some(entry) = state.resources.get(key)
            && !entry.pending
        {
            return Err(ManageError::Refused(format!(
                "{key} is already managed by this stack (`kusionctl state show {key}`); `kusionctl state rm` it first to import it again"
            )));
        }
    }
    writer.ensure_live()?;
    let deps = vec![Vec::new(); keyed.len()];
    let reads = crate::walk::walk(&deps, concurrency.max(1), &cancel, |i| {
        let (key, _, o) = &keyed[i];
        let runtime = stack
            .registry
            .get(&o.planned.resource_type)
            .cloned()
            .expect("checked above");
        let request = ReadRequest {
            prior: o.recorded.clone(),
            prior_private: o.recorded_private.clone(),
            planned: Some(o.planned.clone()),
            timeout,
        };
        crate::plan::call(timeout, move || runtime.read(&request))
            .map_err(|e| format!("{key}: reading the live object: {e}"))
    });
    let mut records = Vec::with_capacity(keyed.len());
    let mut failures = Vec::new();
    let mut spec = Spec::default();
    let mut steps = Vec::new();
    for ((key, target, o), read) in keyed.iter().zip(reads) {
        let read = match read {
            crate::walk::NodeResult::Done(read) => read,
            crate::walk::NodeResult::Failed(e) => {
                failures.push(e);
                continue;
            }
            _ => {
                failures.push(format!("{key}: not read: interrupted"));
                continue;
            }
        };
        let Some(mut live) = read.resource else {
            failures.push(format!("{key}: {NOT_FOUND}"));
            continue;
        };
        // The state entry is the resource as live, under the spec's ID and extensions (where it
        // lives, how it is read), minus the one-off import instruction.
        let planned = &o.planned;
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
            target: target.clone(),
        };
        let mut recorded = planned.clone();
        sealer.seal_resource(&mut recorded, &entry.sensitive_paths);
        spec.resources.push(recorded);
        steps.push(step(key, "Import"));
        records.push(JournalRecord::Applied { entry });
    }
    if !failures.is_empty() {
        return Err(ManageError::Refused(if failures.len() == 1 {
            failures.remove(0)
        } else {
            format!(
                "nothing was imported; {} object(s) could not be:\n  {}",
                failures.len(),
                failures.join("\n  ")
            )
        }));
    }
    let keys = keyed.into_iter().map(|(k, _, _)| k).collect();
    let revision = record(
        &writer, stack, &holder, "import", spec, &records, steps, notes,
    )?;
    Ok(Adopted { keys, revision })
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
    let (old_key, entry) = renamed(&state, from, to)?;
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

/// What `move_to` did.
#[derive(Debug, Clone)]
pub struct Moved {
    /// The entry's key in the source stack.
    pub from_key: String,
    /// Its key in the destination.
    pub to_key: String,
    /// The release recording it in the source stack, and in the destination.
    pub source_revision: u64,
    /// See `source_revision`.
    pub destination_revision: u64,
}

/// `state mv --to-stack`: hand the entry `from` names to another stack as `to`, live objects
/// untouched. Both leases are held throughout. The source first records the handoff (from then
/// on no plan of it touches the entry), then the destination records the entry, then the
/// source drops it: a crash at any point leaves the entry in at least one stack, never planned
/// for deletion, and running the same move again finishes it.
pub fn move_to(
    source: &Stack,
    destination: &Stack,
    from: &str,
    to: &str,
    cancel: Arc<AtomicBool>,
) -> Result<Moved, ManageError> {
    let (source_at, destination_at) = (source.store.location(), destination.store.location());
    if source_at == destination_at {
        return Err(ManageError::Refused(format!(
            "the destination is this stack ({source_at}): use `kusionctl state mv` without --to-stack"
        )));
    }
    let (source_holder, source_writer) = lease(source, "state mv", cancel.clone())?;
    let (destination_holder, destination_writer) = lease(destination, "state mv", cancel)?;
    let (source_state, source_sealer) = load_unsealed(&*source.store)?;
    source_writer.set_sealer(source_sealer)?;
    let (destination_state, destination_sealer) = load_unsealed(&*destination.store)?;
    destination_writer.set_sealer(destination_sealer)?;

    let (from_key, entry) = renamed(&source_state, from, to)?;
    let to_key = entry.key();
    let handoff = crate::state::Handoff {
        to: destination_at.clone(),
        key: to_key.clone(),
    };
    // A move interrupted after the destination recorded the entry: only the source's part is
    // left. Anything else already at the destination key is a conflict.
    let resumed = source_state.handoffs.get(&from_key) == Some(&handoff);
    let arrived = destination_state.resources.contains_key(&to_key);
    if arrived && !resumed {
        return Err(ManageError::Refused(format!(
            "{to_key} is already in the state at {destination_at}; `kusionctl state rm` it there first or choose another ID"
        )));
    }
    if let Some(other) = source_state.handoffs.get(&from_key)
        && *other != handoff
    {
        return Err(ManageError::Refused(format!(
            "{from_key} is already being moved to {} as {}: finish that move first",
            other.to, other.key
        )));
    }
    if !resumed {
        source_writer.append(&[JournalRecord::Handoff {
            id: from_key.clone(),
            handoff: Some(handoff),
        }])?;
    }
    let destination_revision = if arrived {
        0
    } else {
        record(
            &destination_writer,
            destination,
            &destination_holder,
            "state mv",
            Spec::default(),
            &[JournalRecord::Applied { entry }],
            vec![step(&to_key, "Receive")],
            vec![format!("received {from_key} from {source_at} as {to_key}")],
        )?
    };
    let source_revision = record(
        &source_writer,
        source,
        &source_holder,
        "state mv",
        Spec::default(),
        &[JournalRecord::Deleted {
            id: from_key.clone(),
        }],
        vec![step(&from_key, "Hand over")],
        vec![format!("moved {from_key} to {destination_at} as {to_key}")],
    )?;
    Ok(Moved {
        from_key,
        to_key,
        source_revision,
        destination_revision,
    })
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

/// The key of the entry `from` names and a copy of that entry with the ID `to`.
fn renamed(state: &State, from: &str, to: &str) -> Result<(String, StateEntry), ManageError> {
    let key = resolve(state, from)?;
    let mut entry = state.resources[&key].clone();
    entry.resource.id = to.to_string();
    entry.updated_at = now_ms();
    // The new ID must be well formed for the type and agree with what the entry describes
    // (a Kubernetes ID names the object's namespace and name).
    crate::id::check_resource_id(&entry.resource)
        .map_err(|e| ManageError::Refused(format!("new ID {to:?}: {e}")))?;
    Ok((key, entry))
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
        notes,
        ..Release::running(operation, holder, spec)
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
