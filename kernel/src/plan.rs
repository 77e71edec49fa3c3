//! The 3-way plan: for every resource, compare the prior state, the planned spec and the live
//! object, and decide an [`Action`].
//!
//! Rules (upstream's table): planned absent -> Delete; live absent -> Create; otherwise dry-run
//! apply, drop ignored fields, and compare live with the dry-run result: equal -> UnChanged
//! (Import when state does not know the resource yet), different -> Update (Replace when the
//! runtime says a changed field forces it).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{RwLock, RwLockReadGuard};
use std::time::Duration;

use kusion_sdk::runtime::{ApplyRequest, ReadRequest};
use kusion_sdk::{FieldPath, PluginError, Resource};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::diff::{self, FieldChange};
use crate::graph::{Dag, GraphError};
use crate::reference::{self, Lookup, ReferenceError};
use crate::registry::Registry;
use crate::spec::{Spec, SpecError};
use crate::state::{State, StateEntry};
use crate::walk::{NodeResult, walk};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    Create,
    Update,
    Replace,
    Delete,
    UnChanged,
    Import,
}

impl Action {
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
    pub id: String,
    pub resource_type: String,
    pub action: Action,
    /// The resource from the spec, references unresolved (None for deletes).
    pub planned: Option<&'a Resource>,
    pub prior: Option<&'a StateEntry>,
    pub live: Option<Resource>,
    pub live_private: Option<String>,
    /// What the resource is expected to look like after apply (the dry-run result, or the
    /// planned resource where no dry-run was possible).
    pub expected: Option<Resource>,
    /// Field-level changes from live to expected, unmasked, for updates and replacements; use
    /// [`Step::field_changes`] for every action.
    pub changes: Vec<FieldChange>,
    pub sensitive: Vec<FieldPath>,
    /// Paths only known after apply (computed values, unresolved references).
    pub unknown: Vec<String>,
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
    pub steps: Vec<Step<'a>>,
    /// `deps[i]`: the steps that must finish before step `i` starts.
    pub deps: Vec<Vec<usize>>,
    /// Every ID a `$kusion_path` may name (spec and state).
    pub known_ids: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub replace: usize,
    pub delete: usize,
    pub unchanged: usize,
    pub import: usize,
}

/// One step as shown to people and machines: sensitive values already masked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepView {
    pub id: String,
    #[serde(rename = "type")]
    pub resource_type: String,
    pub action: Action,
    pub changes: Vec<FieldChange>,
    pub unknown: Vec<String>,
}

/// An owned, masked rendering of a plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanView {
    pub summary: Summary,
    pub steps: Vec<StepView>,
}

impl PlanView {
    pub fn has_changes(&self) -> bool {
        self.steps.iter().any(|s| s.action.changes_something())
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
                    StepView {
                        id: step.id.clone(),
                        resource_type: step.resource_type.clone(),
                        action: step.action,
                        changes,
                        unknown: step.unknown.clone(),
                    }
                })
                .collect(),
        }
    }

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

    pub fn has_changes(&self) -> bool {
        self.steps.iter().any(|s| s.action.changes_something())
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.steps.iter().position(|s| s.id == id)
    }
}

/// What to plan and how.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Fields never compared and never overwritten on update.
    pub ignore_fields: Vec<FieldPath>,
    pub concurrency: usize,
    /// Per runtime call.
    pub timeout: Option<Duration>,
    /// Plan the deletion of everything in state instead of converging to the spec.
    pub destroy: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            ignore_fields: Vec::new(),
            concurrency: 10,
            timeout: None,
            destroy: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    #[error("no runtime serves type {resource_type:?} (resource {id:?})")]
    NoRuntime { id: String, resource_type: String },
    #[error("planning failed for {} resource(s):\n{}", .0.len(), .0.iter().map(|(id, e)| format!("  {id}: {e}")).collect::<Vec<_>>().join("\n"))]
    Resources(Vec<(String, String)>),
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
fn prior_edges(entries: &[&StateEntry]) -> Vec<(usize, usize)> {
    let known: HashSet<&str> = entries.iter().map(|e| e.resource.id.as_str()).collect();
    let pos: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.resource.id.as_str(), i))
        .collect();
    let mut edges = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        for d in &e.resource.depends_on {
            if let Some(&j) = pos.get(d.as_str()) {
                edges.push((j, i));
            }
        }
        // References that no longer resolve (a renamed target) simply add no edge.
        if let Ok(refs) = reference::references_of(&e.resource, &known) {
            edges.extend(
                refs.iter()
                    .filter_map(|r| pos.get(r.id.as_str()).map(|&j| (j, i))),
            );
        }
    }
    edges
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
    spec.validate(&registry.types())?;
    let dag = Dag::build(spec)?;

    let mut steps: Vec<Step> = Vec::with_capacity(spec.resources.len());
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(spec.resources.len());
    let position: HashMap<&str, usize> = spec
        .resources
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_str(), i))
        .collect();
    for resource in &spec.resources {
        if registry.get(&resource.resource_type).is_none() {
            return Err(PlanError::NoRuntime {
                id: resource.id.clone(),
                resource_type: resource.resource_type.clone(),
            });
        }
        deps.push(
            dag.dependencies(&resource.id)
                .iter()
                .map(|d| position[d])
                .collect(),
        );
        steps.push(Step {
            id: resource.id.clone(),
            resource_type: resource.resource_type.clone(),
            action: Action::Create,
            planned: Some(resource),
            prior: state.resources.get(&resource.id),
            live: None,
            live_private: None,
            expected: None,
            changes: Vec::new(),
            sensitive: Vec::new(),
            unknown: Vec::new(),
        });
    }

    // Resources only in state are deleted, dependents before their dependencies.
    let gone: Vec<&StateEntry> = state
        .resources
        .values()
        .filter(|e| !position.contains_key(e.resource.id.as_str()))
        .collect();
    let first_delete = steps.len();
    for entry in &gone {
        if registry.get(&entry.resource.resource_type).is_none() {
            return Err(PlanError::NoRuntime {
                id: entry.resource.id.clone(),
                resource_type: entry.resource.resource_type.clone(),
            });
        }
        let sensitive = sensitive_of(Some(&entry.resource), &entry.sensitive_paths);
        steps.push(Step {
            id: entry.resource.id.clone(),
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
        });
        deps.push(Vec::new());
    }
    for (dependency, dependent) in prior_edges(&gone) {
        // Reversed: the dependency is deleted only after its dependent is gone.
        deps[first_delete + dependency].push(first_delete + dependent);
    }

    let mut known_ids: Vec<String> = spec.resources.iter().map(|r| r.id.clone()).collect();
    known_ids.extend(gone.iter().map(|e| e.resource.id.clone()));

    // Decide each spec resource along the DAG so references resolve against what their
    // targets are expected to become.
    // Read locks let a step borrow its targets' decisions while other steps read them too; a
    // step is written once, by its own planning, before any dependent reads it.
    let steps: Vec<RwLock<Step>> = steps.into_iter().map(RwLock::new).collect();
    let context = PlanContext {
        registry: registry.clone(),
        known: spec.resources.iter().map(|r| r.id.as_str()).collect(),
        position,
        ignore: options.ignore_fields.clone(),
        timeout: options.timeout,
    };
    let spec_deps: Vec<Vec<usize>> = deps[..first_delete].to_vec();
    let results = walk(&spec_deps, options.concurrency, cancel, |i| {
        plan_one(i, &steps, &context)
    });
    let steps: Vec<Step> = steps
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect();
    let mut failures = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        match result {
            NodeResult::Done(()) => {}
            NodeResult::Failed(e) => failures.push((steps[i].id.clone(), e)),
            NodeResult::Skipped(d) => failures.push((
                steps[i].id.clone(),
                format!("not planned: {} failed", steps[d].id),
            )),
            NodeResult::Cancelled => {
                failures.push((steps[i].id.clone(), "not planned: interrupted".to_string()))
            }
        }
    }
    if !failures.is_empty() {
        return Err(PlanError::Resources(failures));
    }
    Ok(Plan {
        steps,
        deps,
        known_ids,
    })
}

/// What every planning step shares (borrowing the spec's IDs).
struct PlanContext<'a> {
    registry: Registry,
    known: HashSet<&'a str>,
    position: HashMap<&'a str, usize>,
    ignore: Vec<FieldPath>,
    timeout: Option<Duration>,
}

/// The attributes a reference to `step` resolves to during planning, if known before apply.
fn expected_for_references<'s>(step: &'s Step<'_>) -> Option<&'s Map<String, Value>> {
    match step.action {
        Action::UnChanged | Action::Import => step.live.as_ref().map(|r| &r.attributes),
        Action::Update if step.unknown.is_empty() => step.expected.as_ref().map(|r| &r.attributes),
        _ => None,
    }
}

fn plan_one(i: usize, steps: &[RwLock<Step<'_>>], cx: &PlanContext<'_>) -> Result<(), String> {
    let (planned, prior) = {
        let s = steps[i]
            .read()
            .map_err(|_| "poisoned plan step".to_string())?;
        (
            s.planned.expect("spec steps have a planned resource"),
            s.prior,
        )
    };
    let result = decide(i, planned, prior, steps, cx);
    let mut s = steps[i]
        .write()
        .map_err(|_| "poisoned plan step".to_string())?;
    let decision = result?;
    s.action = decision.action;
    s.live = decision.live;
    s.live_private = decision.live_private;
    s.expected = decision.expected;
    s.changes = decision.changes;
    s.sensitive = decision.sensitive;
    s.unknown = decision.unknown;
    Ok(())
}

struct Decision {
    action: Action,
    live: Option<Resource>,
    live_private: Option<String>,
    expected: Option<Resource>,
    changes: Vec<FieldChange>,
    sensitive: Vec<FieldPath>,
    unknown: Vec<String>,
}

fn decide(
    _i: usize,
    planned: &Resource,
    prior: Option<&StateEntry>,
    steps: &[RwLock<Step<'_>>],
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
    let refs = reference::references_of(planned, &cx.known).map_err(|e| e.to_string())?;
    let mut targets: HashMap<&str, RwLockReadGuard<'_, Step<'_>>> = HashMap::new();
    for r in &refs {
        if !targets.contains_key(r.id.as_str())
            && let Some(&j) = cx.position.get(r.id.as_str())
            && let Ok(guard) = steps[j].read()
        {
            targets.insert(r.id.as_str(), guard);
        }
    }
    let (resolved, unresolved) = if refs.is_empty() {
        (planned.clone(), false)
    } else {
        reference::resolve(planned, &cx.known, &|id| match targets
            .get(id)
            .and_then(|s| expected_for_references(s))
        {
            Some(attrs) => Lookup::Known(attrs),
            None => Lookup::Unknown,
        })
        .map_err(|e| e.to_string())?
    };
    drop(targets);

    // The resolved resource and the prior travel from request to request rather than being
    // copied for each call.
    let (read, request) = call_keep(
        cx.timeout,
        ReadRequest {
            prior: prior.map(|p| p.resource.clone()),
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
    let mut unknown = Vec::new();
    if unresolved {
        unknown.push("(values referenced from resources not yet applied)".to_string());
    }

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
            let changes = if cx.ignore.is_empty() {
                diff::diff_maps(&live.attributes, &expected.attributes)
            } else {
                let mut before = attrs_value(live);
                let mut after = attrs_value(&expected);
                diff::strip(&mut before, &cx.ignore);
                diff::strip(&mut after, &cx.ignore);
                diff::diff(&before, &after)
            };
            let action = if changes.is_empty() {
                match prior {
                    Some(p) if !p.pending => Action::UnChanged,
                    _ => Action::Import,
                }
            } else if changes.iter().any(|c| {
                replace_paths
                    .iter()
                    .any(|r| r.is_prefix_of(&c.path) || c.path.is_prefix_of(r))
            }) {
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
    })
}
