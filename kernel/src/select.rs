//! Targeted plans (`--target ID`): the spec and state narrowed to the resources a set of ID
//! patterns names and what they need, so a plan touches those alone.
//!
//! What is included follows what the operation must get right:
//! - converging (preview, apply): the named resources and, transitively, what they depend on
//!   (`dependsOn`, references, their Namespace), so references resolve and dependencies exist
//!   before their dependents; resources only in state that a pattern names are deleted;
//! - destroying: the named resources and, transitively, what depends on them, since deleting
//!   a dependency under a live dependent breaks it.
//!
//! Everything else is left out of the plan and keeps its state entry untouched: the journal
//! and checkpoints only ever change what a plan's steps name.

use std::collections::{HashSet, VecDeque};

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::graph::Dag;
use crate::plan::{PlanError, target_of};
use crate::registry::Registry;
use crate::spec::Spec;
use crate::state::{State, StateEntry, state_keys};

/// What a targeted plan left out, for the warning that the rest was not planned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Narrowing {
    /// The `--target` patterns as given.
    pub patterns: Vec<String>,
    /// Resources (spec and state together, by state key) the plan covers.
    pub planned: usize,
    /// Resources of the spec or state the plan did not look at.
    pub left_out: usize,
}

/// The spec and state a targeted plan works on.
#[derive(Debug)]
pub struct Narrowed {
    /// The spec, narrowed.
    pub spec: Spec,
    /// The state, narrowed.
    pub state: State,
    /// What was left out.
    pub narrowing: Narrowing,
}

/// Compile `--target` patterns: an exact ID, or a glob (`*`, `?`, `[...]`) matched against the
/// whole ID and against the state key (`id@target`).
fn matchers(patterns: &[String]) -> Result<Vec<GlobMatcher>, PlanError> {
    patterns
        .iter()
        .map(|p| {
            Glob::new(p)
                .map(|g| g.compile_matcher())
                .map_err(|e| PlanError::Selection(format!("--target {p:?}: {e}")))
        })
        .collect()
}

/// Narrow `spec` and `state` to what `patterns` name (see the module doc). A pattern that names
/// nothing is an error: a typo must not silently plan nothing.
pub fn narrow(
    spec: &Spec,
    state: &State,
    registry: &Registry,
    patterns: &[String],
    destroy: bool,
) -> Result<Narrowed, PlanError> {
    let globs = matchers(patterns)?;
    let mut used = vec![false; globs.len()];
    let mut hits = |id: &str, key: &str| {
        let mut any = false;
        for (g, used) in globs.iter().zip(used.iter_mut()) {
            if g.is_match(id) || g.is_match(key) {
                *used = true;
                any = true;
            }
        }
        any
    };

    let (spec_out, keep_keys, spec_keys) = if destroy {
        (
            Spec::default(),
            destroy_closure(state, &mut hits),
            Vec::new(),
        )
    } else {
        converge_closure(spec, state, registry, &mut hits)?
    };
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(PlanError::Selection(format!(
            "--target {:?} names no resource of the {}",
            patterns[i],
            if destroy { "state" } else { "spec or state" }
        )));
    }

    let mut state_out = state.clone();
    state_out.resources.retain(|key, _| keep_keys.contains(key));
    // Counted by state key: a spec resource and its entry are one resource.
    let total: HashSet<&str> = state
        .resources
        .keys()
        .map(String::as_str)
        .chain(spec_keys.iter().map(|(k, _)| k.as_str()))
        .collect();
    let planned: HashSet<&str> = keep_keys
        .iter()
        .map(String::as_str)
        .chain(
            spec_keys
                .iter()
                .filter(|(_, included)| *included)
                .map(|(k, _)| k.as_str()),
        )
        .collect();
    let narrowing = Narrowing {
        patterns: patterns.to_vec(),
        planned: planned.len(),
        left_out: total.len() - planned.len(),
    };
    Ok(Narrowed {
        spec: spec_out,
        state: state_out,
        narrowing,
    })
}

/// What a converging plan covers: the narrowed spec, the state keys to keep, and every spec
/// resource's key with whether it is included.
type Converging = (Spec, HashSet<String>, Vec<(String, bool)>);

/// Converging: the named spec resources and their dependencies, plus named state-only entries.
/// Returns the narrowed spec, the state keys to keep, and every spec resource's key with
/// whether it is included.
fn converge_closure(
    spec: &Spec,
    state: &State,
    registry: &Registry,
    hits: &mut impl FnMut(&str, &str) -> bool,
) -> Result<Converging, PlanError> {
    let targets: Vec<Option<String>> = spec
        .resources
        .iter()
        .map(|r| target_of(registry, r))
        .collect::<Result<_, _>>()?;
    let keys = state_keys(spec, &targets);
    let dag = if targets.iter().any(Option::is_some) {
        Dag::build_targeted(spec, &targets)?
    } else {
        Dag::build(spec)?
    };
    let mut included = vec![false; spec.resources.len()];
    let mut queue = VecDeque::new();
    for (i, r) in spec.resources.iter().enumerate() {
        if hits(&r.id, &keys[i]) {
            included[i] = true;
            queue.push_back(i);
        }
    }
    while let Some(i) = queue.pop_front() {
        for d in dag.dependency_indices(i) {
            if !included[d] {
                included[d] = true;
                queue.push_back(d);
            }
        }
    }
    let ids: HashSet<&str> = spec
        .resources
        .iter()
        .zip(&included)
        .filter(|(_, inc)| **inc)
        .map(|(r, _)| r.id.as_str())
        .collect();
    let mut keep: HashSet<String> = keys
        .iter()
        .zip(&included)
        .filter(|(_, inc)| **inc)
        .map(|(k, _)| k.clone())
        .collect();
    let spec_ids: HashSet<&str> = spec.resources.iter().map(|r| r.id.as_str()).collect();
    for (key, entry) in &state.resources {
        let id = entry.resource.id.as_str();
        // An included resource's entry under an older key (recorded before its runtime named
        // targets) travels with it, so the plan can re-key rather than recreate it.
        if ids.contains(id) || (!spec_ids.contains(id) && hits(id, key)) {
            keep.insert(key.clone());
        }
    }
    let narrowed = Spec {
        resources: spec
            .resources
            .iter()
            .zip(&included)
            .filter(|(_, inc)| **inc)
            .map(|(r, _)| r.clone())
            .collect(),
    };
    Ok((narrowed, keep, keys.into_iter().zip(included).collect()))
}

/// Destroying: the named state entries and, transitively, the entries that depend on them.
fn destroy_closure(state: &State, hits: &mut impl FnMut(&str, &str) -> bool) -> HashSet<String> {
    let entries: Vec<(&String, &StateEntry)> = state.resources.iter().collect();
    let pairs: Vec<(&StateEntry, Option<&str>)> = entries
        .iter()
        .map(|(_, e)| (*e, e.target.as_deref()))
        .collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
    for (dependency, dependent) in crate::plan::prior_edges(&pairs) {
        dependents[dependency].push(dependent);
    }
    let mut included = vec![false; entries.len()];
    let mut queue = VecDeque::new();
    for (i, (key, entry)) in entries.iter().enumerate() {
        if hits(&entry.resource.id, key) {
            included[i] = true;
            queue.push_back(i);
        }
    }
    while let Some(i) = queue.pop_front() {
        for &d in &dependents[i] {
            if !included[d] {
                included[d] = true;
                queue.push_back(d);
            }
        }
    }
    entries
        .iter()
        .zip(&included)
        .filter(|(_, inc)| **inc)
        .map(|((k, _), _)| (*k).clone())
        .collect()
}
