//! The 3-way plan: for every resource, compare the prior state, the planned spec and the live
//! object, and decide an [`Action`].
//!
//! Rules (upstream's table): planned absent -> Delete; live absent -> Create; otherwise dry-run
//! apply, drop ignored fields, and compare live with the dry-run result: equal -> UnChanged
//! (Import when state does not know the resource yet), different -> Update (Replace when the
//! runtime says a changed field forces it).
//!
//! Over 800 lines: the decision per resource, the plan it builds and the view front ends show
//! (with its approval hash) are one idea read together; its tests take the last fifty lines.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kusion_sdk::runtime::{ApplyRequest, ReadRequest};
use kusion_sdk::{FieldPath, PluginError, Resource};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::diff::{self, FieldChange};
use crate::graph::{Built, Dag, GraphError, KeyIndex, Pick};
use crate::reference::{self, Lookup, Reference, ReferenceError};
use crate::registry::Registry;
use crate::spec::{Spec, SpecError};
use crate::state::{JournalRecord, State, StateEntry, state_key, state_keys};
use crate::walk::{NodeResult, walk};

/// What a plan does to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    /// Absent from state and live: create it.
    Create,
    /// Changes in place.
    Update,
    /// Changes that cannot be made in place: delete and create again.
    Replace,
    /// In state but no longer in the spec (or a destroy): delete it.
    Delete,
    /// Nothing to do.
    UnChanged,
    /// Exists live but not in state: take it over as it is (`kusionctl import`).
    Import,
}

impl Action {
    /// Whether a step with this action touches the resource.
    pub fn changes_something(self) -> bool {
        !matches!(self, Action::UnChanged)
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Action::Create => "Create",
            Action::Update => "Update",
            Action::Replace => "Replace",
            Action::Delete => "Delete",
            Action::UnChanged => "UnChanged",
            Action::Import => "Import",
        })
    }
}

/// The decision for one resource, with everything needed to execute and explain it.
#[derive(Debug, Clone)]
pub struct Step<'a> {
    /// The resource's ID.
    pub id: String,
    /// Where the resource lives, as its runtime names it (`Runtime::target`).
    pub target: Option<String>,
    /// The state key: `id`, or `id@target`.
    pub key: String,
    /// The resource's type, which picks its runtime.
    pub resource_type: String,
    /// What happens to it.
    pub action: Action,
    /// The resource from the spec, references unresolved (None for deletes).
    pub planned: Option<&'a Resource>,
    /// Its entry in state (None for a creation).
    pub prior: Option<&'a StateEntry>,
    /// The live object as its runtime read it (None when absent).
    pub live: Option<Resource>,
    /// The runtime's private data for the live object (opaque to the kernel).
    pub live_private: Option<String>,
    /// What the resource is expected to look like after apply (the dry-run result, or the
    /// planned resource where no dry-run was possible).
    pub expected: Option<Resource>,
    /// Field-level changes from live to expected, unmasked, for updates and replacements; use
    /// [`Step::field_changes`] for every action.
    pub changes: Vec<FieldChange>,
    /// Paths of sensitive values in the resource (masked in every view of the plan).
    pub sensitive: Vec<FieldPath>,
    /// Paths only known after apply (computed values, unresolved references).
    pub unknown: Vec<String>,
    /// Whether another resource of the spec refers to this one with `$kusion_path` (apply then
    /// keeps its values for resolving those references).
    pub referenced: bool,
    /// For a replacement: the changed fields that cannot change in place (the runtime said so).
    pub forces_replace: Vec<FieldPath>,
}

impl Step<'_> {
    /// Field-level changes of this step, unmasked: everything added for a creation, everything
    /// removed for a deletion, the computed diff otherwise.
    pub fn field_changes(&self) -> std::borrow::Cow<'_, [FieldChange]> {
        let empty = Map::new();
        match self.action {
            Action::Create => {
                let attrs = self
                    .expected
                    .as_ref()
                    .or(self.planned)
                    .map_or(&empty, |r| &r.attributes);
                std::borrow::Cow::Owned(diff::diff_maps(&empty, attrs))
            }
            Action::Delete => {
                let attrs = self.prior.map_or(&empty, |p| &p.resource.attributes);
                std::borrow::Cow::Owned(diff::diff_maps(attrs, &empty))
            }
            _ => std::borrow::Cow::Borrowed(&self.changes),
        }
    }
}

/// A whole plan: steps and the order constraints between them.
#[derive(Debug, Clone, Default)]
pub struct Plan<'a> {
    /// The steps, in spec order (deletions after).
    pub steps: Vec<Step<'a>>,
    /// `deps[i]`: the steps that must finish before step `i` starts.
    pub deps: Vec<Vec<usize>>,
    /// State entries recorded without a target whose runtime now names one: `Moved` records
    /// that re-key them (`id` -> `id@target`), journaled before anything else happens. Steps
    /// already use the new keys and have the old entries as their prior.
    pub moves: Vec<crate::state::JournalRecord>,
    /// Fields never compared (the plan's `ignore_fields`), left out of [`Plan::view`] too.
    pub ignore_fields: Vec<FieldPath>,
}

/// How many steps of each action a plan has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Resources to create.
    pub create: usize,
    /// Resources to change in place.
    pub update: usize,
    /// Resources to replace.
    pub replace: usize,
    /// Resources to delete.
    pub delete: usize,
    /// Resources left as they are.
    pub unchanged: usize,
    /// Resources to import.
    pub import: usize,
}

/// One step as shown to people and machines: sensitive values already masked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepView {
    /// The resource's ID.
    pub id: String,
    /// The target (cluster) when the resource's runtime names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The resource's type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// What happens to it.
    pub action: Action,
    /// Field-level changes, sensitive values masked.
    pub changes: Vec<FieldChange>,
    /// Paths only known after apply.
    pub unknown: Vec<String>,
    /// For a replacement: the fields whose change forces it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forces_replacement: Vec<String>,
    /// For updates and replacements: the live object and what it becomes, masked and without
    /// ignored fields, for showing the changes in context (lists aligned by item). `changes`
    /// is the machine-readable form of the same difference.
    #[serde(skip)]
    pub before: Option<Value>,
    /// See `before`.
    #[serde(skip)]
    pub after: Option<Value>,
}

/// An owned, masked rendering of a plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanView {
    /// Steps per action.
    pub summary: Summary,
    /// Every step.
    pub steps: Vec<StepView>,
    /// Set when `--target` narrowed the plan: what the rest was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narrowed: Option<crate::select::Narrowing>,
}

impl StepView {
    /// The state key, `id` or `id@target`: what tells two copies of one ID apart.
    pub fn key(&self) -> String {
        state_key(&self.id, self.target.as_deref())
    }
}

impl PlanView {
    /// Whether any step changes something.
    pub fn has_changes(&self) -> bool {
        self.steps.iter().any(|s| s.action.changes_something())
    }

    /// The hash an approval names: every step that changes something (ID, target, action and
    /// field changes as shown, secrets masked), and the source `revision` the plan was made
    /// from when there is one. Apply re-plans under the state lease and goes ahead only when
    /// this hash is still the approved one.
    pub fn approval_hash(&self, revision: Option<&str>) -> String {
        use sha2::{Digest, Sha256};
        let steps: Vec<Value> = self
            .steps
            .iter()
            .filter(|s| s.action.changes_something())
            .map(|s| {
                serde_json::json!({"id": s.id, "target": s.target, "action": s.action, "changes": s.changes})
            })
            .collect();
        let text = match revision {
            Some(r) => serde_json::json!({"revision": r, "steps": steps}).to_string(),
            None => Value::Array(steps).to_string(),
        };
        hex::encode(&Sha256::digest(text.as_bytes())[..16])
    }
}

impl Plan<'_> {
    /// The plan with every sensitive value masked, detached from the spec and state.
    pub fn view(&self) -> PlanView {
        PlanView {
            summary: self.summary(),
            steps: self
                .steps
                .iter()
                .map(|step| {
                    let mut changes = step.field_changes().into_owned();
                    diff::mask_changes(&mut changes, &step.sensitive);
                    // A reference still in place is a value known only after apply.
                    for change in &mut changes {
                        if let Some(new) = &mut change.new {
                            mark_known_after_apply(new);
                        }
                    }
                    let in_context = |r: Option<&Resource>| {
                        let mut v = attrs_value(r?);
                        diff::strip(&mut v, &self.ignore_fields);
                        diff::mask(&mut v, &step.sensitive);
                        Some(v)
                    };
                    let (before, after) = match step.action {
                        Action::Update | Action::Replace => {
                            let mut after = in_context(step.expected.as_ref());
                            // Masked, a changed secret would look unchanged: say it changed.
                            if let Some(after) = after.as_mut() {
                                for c in step.changes.iter().filter(|c| {
                                    c.kind == diff::ChangeKind::Changed
                                        && diff::is_sensitive(&c.path, &step.sensitive)
                                }) {
                                    diff::set_path(
                                        after,
                                        &c.path,
                                        Value::String(diff::MASK_CHANGED.into()),
                                    );
                                }
                            }
                            // A value known only after apply shows as that, not as removed.
                            if let Some(after) = after.as_mut() {
                                for u in &step.unknown {
                                    if let Ok(path) = FieldPath::parse(u) {
                                        diff::set_path(
                                            after,
                                            &path,
                                            Value::String(KNOWN_AFTER_APPLY.into()),
                                        );
                                    }
                                }
                            }
                            (in_context(step.live.as_ref()), after)
                        }
                        _ => (None, None),
                    };
                    let after = after.map(|mut a| {
                        mark_known_after_apply(&mut a);
                        a
                    });
                    StepView {
                        id: step.id.clone(),
                        target: step.target.clone(),
                        resource_type: step.resource_type.clone(),
                        action: step.action,
                        changes,
                        unknown: step.unknown.clone(),
                        forces_replacement: step
                            .forces_replace
                            .iter()
                            .map(ToString::to_string)
                            .collect(),
                        before,
                        after,
                    }
                })
                .collect(),
            narrowed: None,
        }
    }

    /// Steps per action.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for step in &self.steps {
            match step.action {
                Action::Create => s.create += 1,
                Action::Update => s.update += 1,
                Action::Replace => s.replace += 1,
                Action::Delete => s.delete += 1,
                Action::UnChanged => s.unchanged += 1,
                Action::Import => s.import += 1,
            }
        }
        s
    }

    /// Whether any step changes something.
    pub fn has_changes(&self) -> bool {
        self.steps.iter().any(|s| s.action.changes_something())
    }

    /// The position of the step of resource `id`.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.steps.iter().position(|s| s.id == id)
    }
}

/// What to plan and how.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Fields never compared and never overwritten on update.
    pub ignore_fields: Vec<FieldPath>,
    /// Runtime calls made at once.
    pub concurrency: usize,
    /// Per runtime call.
    pub timeout: Option<Duration>,
    /// Plan the deletion of everything in state instead of converging to the spec.
    pub destroy: bool,
    /// The stack's sealer: sealed prior values are matched against planned ones before a
    /// runtime sees the prior.
    pub sealer: Option<std::sync::Arc<crate::state::seal::Sealer>>,
    /// `--target` patterns: plan only the resources they name and what those need (see
    /// `select`); empty plans everything.
    pub select: Vec<String>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            ignore_fields: Vec::new(),
            concurrency: 10,
            timeout: None,
            destroy: false,
            sealer: None,
            select: Vec::new(),
        }
    }
}

/// What a preview shows for a value taken from a resource that is not applied yet.
pub const KNOWN_AFTER_APPLY: &str = "(known after apply)";

fn mark_known_after_apply(value: &mut Value) {
    match value {
        Value::String(s) if s.contains(reference::PREFIX) => {
            *s = KNOWN_AFTER_APPLY.to_string();
        }
        Value::Array(items) => items.iter_mut().for_each(mark_known_after_apply),
        Value::Object(map) => map.values_mut().for_each(mark_known_after_apply),
        _ => {}
    }
}

/// The prior resource as a runtime should see it: sealed values that still equal the planned
/// ones are the planned values again (a changed secret stays sealed, so it differs).
pub(crate) fn prior_for_runtime(
    sealer: Option<&crate::state::seal::Sealer>,
    prior: &Resource,
    planned: &Resource,
) -> Resource {
    match sealer {
        Some(sealer)
            if crate::state::seal::contains_sealed(&Value::Object(prior.attributes.clone())) =>
        {
            sealer.unseal_from(prior, planned)
        }
        _ => prior.clone(),
    }
}

/// Refuse a resolved resource that took a sealed value from another resource: state keeps
/// that value only as a hash, and sending the hash would be wrong.
pub(crate) fn refuse_sealed_references(
    planned: &Resource,
    resolved: &Resource,
) -> Result<(), String> {
    for (key, value) in &resolved.attributes {
        if crate::state::seal::contains_sealed(value)
            && !planned
                .attributes
                .get(key)
                .is_some_and(crate::state::seal::contains_sealed)
        {
            return Err(format!(
                "resource {:?}: field {key:?} refers to a sensitive value that state keeps only as a hash (the runtime cannot read it back); configure a state key (KUSION_STATE_PASSPHRASE or KUSION_STATE_KEY_FILE) so sensitive values are kept encrypted",
                planned.id
            ));
        }
    }
    Ok(())
}

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The spec is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The dependency graph is invalid (a cycle, an unknown dependency).
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A `$kusion_path` reference cannot be resolved.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// No registered runtime serves the resource's type.
    #[error("no runtime serves type {resource_type:?} (resource {id:?})")]
    NoRuntime {
        /// The resource.
        id: String,
        /// Its type.
        resource_type: String,
    },
    /// The resource's runtime could not say where the resource lives.
    #[error("resource {id:?}: its runtime cannot name its target: {message}")]
    Target {
        /// The resource.
        id: String,
        /// The runtime's answer.
        message: String,
    },
    /// Runtimes failed to plan these resources: (state key, message).
    #[error("{}", failures_text("planning failed", .0))]
    Resources(Vec<(String, String)>),
    /// A resource is half-way through a move to another stack.
    #[error(
        "{key} is being moved to the stack at {to} (an interrupted `kusionctl state mv --to-stack`): run that command again to finish the move before planning this stack"
    )]
    HandedOff {
        /// Its state key.
        key: String,
        /// The stack it moves to.
        to: String,
    },
    /// `--target` patterns that cannot be used (malformed, or naming nothing).
    #[error("{0}")]
    Selection(String),
}

/// `what for N resource(s):` and one line per failure, where failures that say the same thing
/// but for their resource's ID (a cluster that cannot be reached) are one line naming how many
/// resources and a few of them.
pub fn failures_text(what: &str, failures: &[(String, String)]) -> String {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for (key, message) in failures {
        let id = key.split_once('@').map_or(key.as_str(), |(id, _)| id);
        let general = message
            .replace(&format!("{key}: "), "")
            .replace(&format!("{id}: "), "");
        match groups.iter_mut().find(|(m, _)| *m == general) {
            Some((_, keys)) => keys.push(key.as_str()),
            None => groups.push((general, vec![key.as_str()])),
        }
    }
    let mut out = format!("{what} for {} resource(s):", failures.len());
    for (general, keys) in &groups {
        if keys.len() == 1 {
            let key = keys[0];
            let message = failures
                .iter()
                .find(|(k, _)| k == key)
                .map_or("", |(_, m)| m.as_str());
            out.push_str(&format!("\n  {key}: {message}"));
        } else {
            const NAMED: usize = 3;
            let mut named = keys[..NAMED.min(keys.len())].join(", ");
            if keys.len() > NAMED {
                named.push_str(&format!(" and {} more", keys.len() - NAMED));
            }
            out.push_str(&format!(
                "\n  {general}\n    ({} resources: {named})",
                keys.len()
            ));
        }
    }
    out
}

/// Call a runtime, bounded by `timeout`. Without a timeout the call runs on the caller's thread;
/// with one it runs on a helper thread that is abandoned (and finishes in the background) if
/// the time runs out.
pub(crate) fn call<T: Send + 'static>(
    timeout: Option<Duration>,
    call: impl FnOnce() -> Result<T, PluginError> + Send + 'static,
) -> Result<T, String> {
    let describe = |e: PluginError| format!("{:?}: {}", e.kind, e.message);
    let Some(limit) = timeout else {
        return call().map_err(describe);
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("kusion-call".into())
        .spawn(move || {
            let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)));
        })
        .map_err(|e| format!("starting a runtime call: {e}"))?;
    match rx.recv_timeout(limit) {
        Ok(Ok(result)) => result.map_err(describe),
        Ok(Err(_)) => Err("the runtime panicked".to_string()),
        Err(_) => Err(format!(
            "timed out after {}",
            humantime::format_duration(limit)
        )),
    }
}

/// [`call`] that hands the request back (when the call finished), so a resource can travel
/// through several runtime calls without being copied for each.
pub(crate) fn call_keep<Q: Send + 'static, T: Send + 'static>(
    timeout: Option<Duration>,
    request: Q,
    call_with: impl FnOnce(&Q) -> Result<T, PluginError> + Send + 'static,
) -> (Result<T, String>, Option<Q>) {
    let describe = |e: PluginError| format!("{:?}: {}", e.kind, e.message);
    if timeout.is_none() {
        let result = call_with(&request).map_err(describe);
        return (result, Some(request));
    }
    match call(timeout, move || Ok((call_with(&request), request))) {
        Ok((result, request)) => (result.map_err(describe), Some(request)),
        Err(e) => (Err(e), None),
    }
}

fn sensitive_of(resource: Option<&Resource>, extra: &[String]) -> Vec<FieldPath> {
    let mut out = resource
        .map(diff::builtin_sensitive_paths)
        .unwrap_or_default();
    out.extend(extra.iter().filter_map(|p| FieldPath::parse(p).ok()));
    out.sort();
    out.dedup();
    out
}

fn attrs_value(r: &Resource) -> Value {
    Value::Object(r.attributes.clone())
}

/// Dependencies of state resources among themselves (explicit and implicit), as indices into
/// `ids`, used to order deletions in reverse.
pub(crate) fn prior_edges(entries: &[(&StateEntry, Option<&str>)]) -> Vec<(usize, usize)> {
    let index = KeyIndex::new(entries.iter().map(|(e, t)| (e.resource.id.as_str(), *t)));
    let mut edges = Vec::new();
    for (i, (e, target)) in entries.iter().enumerate() {
        let mut add = |id: &str| match index.pick(id, *target) {
            Pick::One(j) => edges.push((j, i)),
            // Deleted only after every target's dependent is gone: the safe order.
            Pick::Many(all) => edges.extend(all.into_iter().map(|j| (j, i))),
            Pick::None => {}
        };
        for d in &e.resource.depends_on {
            add(d);
        }
        if let Some(namespace) = crate::graph::namespace_of(&e.resource) {
            add(&namespace);
        }
        // References that no longer resolve (a renamed target) simply add no edge.
        if let Ok(refs) = reference::references_of(&e.resource, &index) {
            for r in &refs {
                add(&r.id);
            }
        }
    }
    edges.retain(|(j, i)| j != i);
    edges
}

/// The target of a resource, as its runtime names it.
pub(crate) fn target_of(
    registry: &Registry,
    resource: &Resource,
) -> Result<Option<String>, PlanError> {
    match registry.get(&resource.resource_type) {
        Some(runtime) => runtime.target(resource).map_err(|e| PlanError::Target {
            id: resource.id.clone(),
            message: e.message,
        }),
        // Reported by validation (unknown type) or as NoRuntime.
        None => Ok(None),
    }
}

/// Compute the plan for converging `state` to `spec` (or deleting everything, for destroy).
pub fn compute<'a>(
    spec: &'a Spec,
    state: &'a State,
    registry: &Registry,
    options: &PlanOptions,
    cancel: &AtomicBool,
) -> Result<Plan<'a>, PlanError> {
    static NOTHING: Spec = Spec {
        resources: Vec::new(),
    };
    let spec = if options.destroy { &NOTHING } else { spec };
    // An entry half-way to another stack belongs to neither plan until the move finishes.
    if let Some((key, h)) = state.handoffs.first() {
        return Err(PlanError::HandedOff {
            key: key.clone(),
            to: h.to.clone(),
        });
    }
    let targets: Vec<Option<String>> = spec
        .resources
        .iter()
        .map(|r| target_of(registry, r))
        .collect::<Result<_, _>>()?;
    // Runtimes without targets (the common case) need no per-resource target bookkeeping.
    let targeted = targets.iter().any(Option::is_some);
    let no_targets: &[Option<String>] = &[];
    let targets_arg = if targeted { &targets[..] } else { no_targets };
    spec.validate_targeted(&registry.types(), targets_arg)?;
    let Built {
        dag,
        index,
        references,
        referenced,
    } = Dag::build_parts(spec, targets_arg)?;

    let keys = state_keys(spec, &targets);
    let spec_ids: HashSet<&str> = if targeted {
        spec.resources.iter().map(|r| r.id.as_str()).collect()
    } else {
        HashSet::new()
    };

    // Entries recorded before their runtime named targets are re-keyed under the target the
    // runtime names for the recorded resource (whose extensions still say where it went). Only
    // IDs the spec uses can collide, so only those are asked.
    let mut moved: HashMap<String, &StateEntry> = HashMap::new();
    let mut moved_away: HashSet<&str> = HashSet::new();
    let mut moves = Vec::new();
    for (key, entry) in &state.resources {
        if entry.target.is_some() || !spec_ids.contains(entry.resource.id.as_str()) {
            continue;
        }
        let Some(target) = target_of(registry, &entry.resource)? else {
            continue;
        };
        let to = state_key(&entry.resource.id, Some(&target));
        moved_away.insert(key.as_str());
        moves.push(JournalRecord::Moved {
            from: key.clone(),
            to: to.clone(),
            target,
        });
        // An entry already recorded under the qualified key is the newer one and wins.
        if !state.resources.contains_key(&to) {
            moved.insert(to, entry);
        }
    }
    let prior_of = |key: &str| -> Option<&'a StateEntry> {
        match state.resources.get(key) {
            Some(_) if moved_away.contains(key) => None,
            Some(entry) => Some(entry),
            None => moved.get(key).copied(),
        }
    };

    let mut steps: Vec<Step> = Vec::with_capacity(spec.resources.len());
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(spec.resources.len());
    for (i, (resource, key)) in spec.resources.iter().zip(keys).enumerate() {
        if registry.get(&resource.resource_type).is_none() {
            return Err(PlanError::NoRuntime {
                id: resource.id.clone(),
                resource_type: resource.resource_type.clone(),
            });
        }
        deps.push(dag.dependency_indices(i).collect());
        steps.push(Step {
            id: resource.id.clone(),
            target: targets[i].clone(),
            prior: prior_of(&key),
            key,
            resource_type: resource.resource_type.clone(),
            action: Action::Create,
            planned: Some(resource),
            live: None,
            live_private: None,
            expected: None,
            changes: Vec::new(),
            sensitive: Vec::new(),
            unknown: Vec::new(),
            referenced: referenced[i],
            forces_replace: Vec::new(),
        });
    }

    // Resources only in state are deleted, dependents before their dependencies.
    let spec_keys: rustc_hash::FxHashSet<&str> = steps.iter().map(|s| s.key.as_str()).collect();
    let mut gone: Vec<(&StateEntry, Option<&str>, String)> = Vec::new();
    for (key, entry) in &state.resources {
        if moved_away.contains(key.as_str()) || spec_keys.contains(key.as_str()) {
            continue;
        }
        gone.push((entry, entry.target.as_deref(), key.clone()));
    }
    for (key, entry) in &moved {
        if !spec_keys.contains(key.as_str()) {
            let target = key.rsplit_once('@').map(|(_, t)| t);
            gone.push((entry, target, key.clone()));
        }
    }
    drop(spec_keys);
    let first_delete = steps.len();
    for (entry, target, key) in &gone {
        if registry.get(&entry.resource.resource_type).is_none() {
            return Err(PlanError::NoRuntime {
                id: entry.resource.id.clone(),
                resource_type: entry.resource.resource_type.clone(),
            });
        }
        let sensitive = sensitive_of(Some(&entry.resource), &entry.sensitive_paths);
        steps.push(Step {
            id: entry.resource.id.clone(),
            target: target.map(str::to_string),
            key: key.clone(),
            resource_type: entry.resource.resource_type.clone(),
            action: Action::Delete,
            planned: None,
            prior: Some(entry),
            live: None,
            live_private: None,
            expected: None,
            changes: Vec::new(),
            sensitive,
            unknown: Vec::new(),
            referenced: false,
            forces_replace: Vec::new(),
        });
        deps.push(Vec::new());
    }
    let gone_targets: Vec<(&StateEntry, Option<&str>)> =
        gone.iter().map(|(e, t, _)| (*e, *t)).collect();
    for (dependency, dependent) in prior_edges(&gone_targets) {
        // Reversed: the dependency is deleted only after its dependent is gone.
        deps[first_delete + dependency].push(first_delete + dependent);
    }

    // Decide each spec resource along the DAG so references resolve against what their
    // targets are expected to become. Each decision is written once, by its own planning,
    // before any dependent reads it: write-once slots need no locks.
    let context = PlanContext {
        registry: registry.clone(),
        index,
        references,
        ignore: options.ignore_fields.clone(),
        timeout: options.timeout,
        sealer: options.sealer.clone(),
        secrets: crate::secret_ref::SecretReads::new(registry.secret_stores().clone()),
    };
    let decisions: Vec<OnceLock<Decision>> = (0..first_delete).map(|_| OnceLock::new()).collect();
    let results = walk(&deps[..first_delete], options.concurrency, cancel, |i| {
        let step = &steps[i];
        let decision = decide(
            step.planned.expect("spec steps have a planned resource"),
            &context.references[i],
            step.prior,
            step.target.as_deref(),
            &decisions,
            &context,
        )?;
        decisions[i]
            .set(decision)
            .map_err(|_| "a plan step was decided twice".to_string())
    });
    for (step, decision) in steps.iter_mut().zip(decisions) {
        if let Some(d) = decision.into_inner() {
            step.action = d.action;
            step.live = d.live;
            step.live_private = d.live_private;
            step.expected = d.expected;
            step.changes = d.changes;
            step.sensitive = d.sensitive;
            step.unknown = d.unknown;
            step.forces_replace = d.forces_replace;
        }
    }
    let mut failures = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        match result {
            NodeResult::Done(()) => {}
            NodeResult::Failed(e) => failures.push((steps[i].key.clone(), e)),
            NodeResult::Skipped(d) => failures.push((
                steps[i].key.clone(),
                format!("not planned: {} failed", steps[d].key),
            )),
            NodeResult::Cancelled => {
                failures.push((steps[i].key.clone(), "not planned: interrupted".to_string()))
            }
        }
    }
    if !failures.is_empty() {
        return Err(PlanError::Resources(failures));
    }
    Ok(Plan {
        steps,
        deps,
        moves,
        ignore_fields: options.ignore_fields.clone(),
    })
}

/// What every planning step shares (borrowing the spec's IDs).
struct PlanContext<'a> {
    registry: Registry,
    /// Spec resources by ID and target; positions are step indices.
    index: KeyIndex<'a>,
    /// The references of each spec resource, by step index.
    references: Vec<Vec<Reference>>,
    ignore: Vec<FieldPath>,
    timeout: Option<Duration>,
    sealer: Option<std::sync::Arc<crate::state::seal::Sealer>>,
    /// This plan's reads of `ref://` secrets.
    secrets: crate::secret_ref::SecretReads,
}

/// The attributes a reference to a decided step resolves to during planning, if known before
/// apply.
fn expected_for_references(decision: &Decision) -> Option<&Map<String, Value>> {
    match decision.action {
        Action::UnChanged | Action::Import => decision.live.as_ref().map(|r| &r.attributes),
        Action::Update if decision.unknown.is_empty() => {
            decision.expected.as_ref().map(|r| &r.attributes)
        }
        _ => None,
    }
}

struct Decision {
    action: Action,
    live: Option<Resource>,
    live_private: Option<String>,
    expected: Option<Resource>,
    changes: Vec<FieldChange>,
    sensitive: Vec<FieldPath>,
    unknown: Vec<String>,
    forces_replace: Vec<FieldPath>,
}

fn decide(
    planned: &Resource,
    refs: &[Reference],
    prior: Option<&StateEntry>,
    target: Option<&str>,
    decisions: &[OnceLock<Decision>],
    cx: &PlanContext<'_>,
) -> Result<Decision, String> {
    let runtime = cx
        .registry
        .get(&planned.resource_type)
        .expect("checked before the walk")
        .clone();
    let capabilities = cx
        .registry
        .info(&planned.resource_type)
        .map(|i| i.capabilities.clone())
        .unwrap_or_default();

    // Borrow the referenced resources' expected attributes (their steps are already decided).
    let mut targets: HashMap<&str, &Decision> = HashMap::new();
    for r in refs {
        if !targets.contains_key(r.id.as_str())
            && let Pick::One(j) = cx.index.pick(&r.id, target)
            && let Some(decision) = decisions[j].get()
        {
            targets.insert(r.id.as_str(), decision);
        }
    }
    let (resolved, unresolved) = if refs.is_empty() {
        (planned.clone(), false)
    } else {
        reference::resolve(planned, &cx.index, &|id| match targets
            .get(id)
            .and_then(|d| expected_for_references(d))
        {
            Some(attrs) => Lookup::Known(attrs),
            None => Lookup::Unknown,
        })
        .map_err(|e| e.to_string())?
    };
    // Sensitivity follows values: a field filled from a sensitive field is sensitive.
    let derived_sensitive = if refs.is_empty() {
        Vec::new()
    } else {
        refuse_sealed_references(planned, &resolved)?;
        reference::sensitive_uses(planned, &cx.index, &|id, path| {
            targets.get(id).is_some_and(|d| {
                d.sensitive
                    .iter()
                    .any(|s| s.is_prefix_of(path) || path.is_prefix_of(s))
            })
        })
        .map_err(|e| e.to_string())?
    };
    drop(targets);
    // External secrets are read on every plan, so a rotated one shows as a change.
    let (resolved, secret_fields) = match cx.secrets.resolve(&resolved)? {
        Some((with_secrets, fields)) => (with_secrets, fields),
        None => (resolved, Vec::new()),
    };

    // The resolved resource and the prior travel from request to request rather than being
    // copied for each call.
    let (read, request) = call_keep(
        cx.timeout,
        ReadRequest {
            prior: prior.map(|p| prior_for_runtime(cx.sealer.as_deref(), &p.resource, &resolved)),
            prior_private: prior.and_then(|p| p.private.clone()),
            planned: Some(resolved),
            timeout: cx.timeout,
        },
        {
            let runtime = runtime.clone();
            move |request| runtime.read(request)
        },
    );
    let read = read?;
    let request = request.expect("a finished call hands its request back");
    let resolved = request.planned.expect("set above");
    let prior_resource = request.prior;
    let mut extra_sensitive = read.sensitive_paths.clone();
    if let Some(p) = prior {
        extra_sensitive.extend(p.sensitive_paths.iter().cloned());
    }
    extra_sensitive.extend(derived_sensitive.iter().map(|p| p.to_string()));
    extra_sensitive.extend(secret_fields.iter().map(|p| p.to_string()));
    let mut unknown = Vec::new();
    if unresolved {
        unknown.push("(values referenced from resources not yet applied)".to_string());
    }

    let mut forces_replace = Vec::new();
    let (action, expected, changes) = match &read.resource {
        None => {
            // A dry-run of a creation shows server defaults and marks sensitive fields, but it
            // may fail for reasons the real apply will not have (a namespace created in the same
            // run): then the planned resource stands in.
            let expected = if capabilities.dry_run {
                // Only a timed-out call keeps its request; keep a copy for that case alone.
                let fallback = cx.timeout.map(|_| resolved.clone());
                let (response, request) = call_keep(
                    cx.timeout,
                    ApplyRequest {
                        prior: None,
                        prior_private: None,
                        planned: resolved,
                        dry_run: true,
                        timeout: cx.timeout,
                    },
                    {
                        let runtime = runtime.clone();
                        move |request| runtime.apply(request)
                    },
                );
                match response {
                    Ok(response) => {
                        extra_sensitive.extend(response.sensitive_paths);
                        unknown.extend(response.unknown_paths);
                        response.resource
                    }
                    Err(e) => {
                        tracing::debug!("dry-run of new resource {} failed: {e}", planned.id);
                        request
                            .map(|r| r.planned)
                            .or(fallback)
                            .expect("either the request came back or a copy was kept")
                    }
                }
            } else {
                resolved
            };
            // A creation's changes are all of `expected`; see `Step::field_changes`.
            (Action::Create, expected, Vec::new())
        }
        Some(live) => {
            let mut replace_paths = Vec::new();
            let expected = if unresolved || !capabilities.dry_run {
                resolved
            } else {
                let runtime = runtime.clone();
                let request = ApplyRequest {
                    prior: prior_resource,
                    prior_private: prior
                        .and_then(|p| p.private.clone())
                        .or_else(|| read.private.clone()),
                    planned: resolved,
                    dry_run: true,
                    timeout: cx.timeout,
                };
                let response = call(cx.timeout, move || runtime.apply(&request))?;
                extra_sensitive.extend(response.sensitive_paths);
                unknown.extend(response.unknown_paths);
                replace_paths = response
                    .requires_replace
                    .iter()
                    .filter_map(|p| FieldPath::parse(p).ok())
                    .collect();
                response.resource
            };
            let mut changes = if cx.ignore.is_empty() {
                diff::diff_maps(&live.attributes, &expected.attributes)
            } else {
                let mut before = attrs_value(live);
                let mut after = attrs_value(&expected);
                diff::strip(&mut before, &cx.ignore);
                diff::strip(&mut after, &cx.ignore);
                diff::diff(&before, &after)
            };
            // A value the runtime will only know after apply is absent from the dry-run's
            // object; that is not a removal. It is listed under `unknown` instead, and still
            // makes the step an update (as Terraform plans `x -> (known after apply)`).
            let unknown_paths: Vec<FieldPath> = unknown
                .iter()
                .filter_map(|p| FieldPath::parse(p).ok())
                .collect();
            let before = changes.len();
            let touched: Vec<FieldPath> = changes.iter().map(|c| c.path.clone()).collect();
            changes.retain(|c| {
                !(c.kind == diff::ChangeKind::Removed
                    && unknown_paths.iter().any(|u| u.is_prefix_of(&c.path)))
            });
            let becomes_unknown = changes.len() != before;
            forces_replace = replace_paths
                .into_iter()
                .filter(|r| {
                    touched
                        .iter()
                        .any(|c| r.is_prefix_of(c) || c.is_prefix_of(r))
                })
                .collect();
            let action = if changes.is_empty() && !becomes_unknown {
                match prior {
                    Some(p) if !p.pending => Action::UnChanged,
                    _ => Action::Import,
                }
            } else if !forces_replace.is_empty() {
                Action::Replace
            } else {
                Action::Update
            };
            (action, expected, changes)
        }
    };
    let sensitive = sensitive_of(Some(planned), &extra_sensitive);
    // An unchanged resource is fully described by its live object; keeping the dry-run copy
    // too would double the plan's memory on large converged stacks.
    let expected = if matches!(action, Action::UnChanged | Action::Import) {
        None
    } else {
        Some(expected)
    };
    Ok(Decision {
        action,
        live: read.resource,
        live_private: read.private,
        expected,
        changes,
        sensitive,
        unknown,
        forces_replace,
    })
}

#[cfg(test)]
mod approval_hash_tests {
    use super::*;

    fn step(id: &str, action: Action) -> StepView {
        StepView {
            id: id.into(),
            target: None,
            resource_type: "Test".into(),
            action,
            changes: Vec::new(),
            unknown: Vec::new(),
            forces_replacement: Vec::new(),
            before: None,
            after: None,
        }
    }

    fn view(steps: Vec<StepView>) -> PlanView {
        PlanView {
            steps,
            ..Default::default()
        }
    }

    #[test]
    fn only_what_changes_and_the_revision_decide_the_hash() {
        let plan = view(vec![
            step("a", Action::Create),
            step("b", Action::UnChanged),
        ]);
        let same = view(vec![step("a", Action::Create)]);
        assert_eq!(plan.approval_hash(None), same.approval_hash(None));
        assert_eq!(
            plan.approval_hash(Some("r1")),
            same.approval_hash(Some("r1"))
        );
        assert_ne!(
            plan.approval_hash(Some("r1")),
            plan.approval_hash(Some("r2"))
        );
        assert_ne!(plan.approval_hash(None), plan.approval_hash(Some("r1")));
        let other = view(vec![step("a", Action::Update)]);
        assert_ne!(plan.approval_hash(None), other.approval_hash(None));
        let more = view(vec![step("a", Action::Create), step("b", Action::Delete)]);
        assert_ne!(plan.approval_hash(None), more.approval_hash(None));
        assert_eq!(plan.approval_hash(None).len(), 32);
    }
}
