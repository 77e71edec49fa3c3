//! Checking a day-2 run before it acts: the clusters it names are configured, a runtime supports
//! each operation, the policies allow its targets, and the preflight (every target exists and the
//! runtime accepts the operation) decides whether it may start. `kusionctl run` shows the result
//! before asking; the server keeps it on the operation for an approver. Both go through here, so
//! what one front end refuses the other refuses too.

use std::collections::BTreeMap;

use kusion_sdk::runtime::OperateResponse;
use serde_json::{Value, json};

use super::exec;
use super::record::{self, Refused};
use super::spec::{ClusterConfig, OpsError, OpsSpec};
use crate::policy::{PolicyBlocked, PolicyGuard, PolicyReport};
use crate::registry::Registry;
use crate::spec::Spec;

/// Why a run cannot start at all (nothing was asked of any cluster).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A named cluster is not configured.
    #[error(transparent)]
    Program(#[from] OpsError),
    /// No runtime supports an operation on a target.
    #[error("{0}")]
    Unsupported(String),
    /// The policies deny the run's targets.
    #[error(transparent)]
    Blocked(#[from] PolicyBlocked),
}

/// Checks that need no cluster: the clusters are configured, a runtime supports every
/// operation, and the configured policies allow the run's targets (operation `run`). Run it
/// before [`exec::preflight`].
pub fn check(
    spec: &OpsSpec,
    registry: &Registry,
    clusters: &BTreeMap<String, ClusterConfig>,
    guard: &PolicyGuard,
) -> Result<PolicyReport, CheckError> {
    spec.check_clusters(clusters)?;
    exec::check_support(spec, registry, clusters).map_err(CheckError::Unsupported)?;
    Ok(guard.check(&targets_as_spec(spec), "run", None)?)
}

/// The run's targets as a spec for the policy plugins: one Kubernetes resource per target (its
/// identity from the ID), with the cluster, operation and app in `extensions`, so the rules that
/// guard apply (namespaces, kinds, prod stacks) also guard day-2 operations.
pub fn targets_as_spec(spec: &OpsSpec) -> Spec {
    let mut resources = Vec::new();
    for op in &spec.operations {
        for target in &op.targets {
            let parts: Vec<&str> = target.id.split(':').collect();
            let (api_version, kind, namespace, name) = match parts.as_slice() {
                [a, k, ns, n] => (*a, *k, Some(*ns), *n),
                [a, k, n] => (*a, *k, None, *n),
                _ => (target.id.as_str(), "", None, target.name.as_str()),
            };
            let mut metadata = serde_json::Map::new();
            metadata.insert("name".into(), json!(name));
            if let Some(ns) = namespace {
                metadata.insert("namespace".into(), json!(ns));
            }
            let attributes: serde_json::Map<String, Value> = [
                ("apiVersion".to_string(), json!(api_version)),
                ("kind".to_string(), json!(kind)),
                ("metadata".to_string(), Value::Object(metadata)),
            ]
            .into_iter()
            .collect();
            let mut resource =
                kusion_sdk::Resource::new(target.id.clone(), "Kubernetes", attributes);
            resource
                .extensions
                .insert("cluster".into(), json!(target.cluster));
            resource
                .extensions
                .insert("operation".into(), json!(op.kind));
            resource.extensions.insert("app".into(), json!(op.app));
            resources.push(resource);
        }
    }
    Spec { resources }
}

/// A run after its preflight: what each target would get, the plan as front ends show it, and
/// whether the run would be refused.
#[derive(Debug, Clone)]
pub struct CheckedRun {
    /// (operation, target) → the runtime's summary of what it would do, or why it cannot.
    pub checked: BTreeMap<(String, String), Result<String, String>>,
    /// The plan: operations, their batches per cluster with each target's preflight, and the
    /// unresolved subjects (the `plan` of `kusionctl run -o json`).
    pub plan: Value,
    /// Why the run would be refused before acting, if it would.
    pub problem: Option<String>,
    /// The targets that cannot be acted on (operation, target, reason).
    pub refused: Vec<Refused>,
}

impl CheckedRun {
    /// Judges the preflight's answers ([`exec::preflight`]); `partial` lets a run go on with
    /// subjects the program could not resolve.
    pub fn new(
        spec: &OpsSpec,
        preflight: Vec<(String, String, Result<OperateResponse, String>)>,
        partial: bool,
    ) -> CheckedRun {
        let checked: BTreeMap<(String, String), Result<String, String>> = preflight
            .into_iter()
            .map(|(op, t, r)| ((op, t), r.map(|resp| resp.summary)))
            .collect();
        let plan = plan_json(spec, &checked);
        let (problem, refused) = record::refusal(spec, &checked, partial);
        CheckedRun {
            checked,
            plan,
            problem,
            refused,
        }
    }

    /// What an approval of this run approves: a hash of its plan. A run approved on one plan
    /// does not start on another.
    pub fn approval_hash(&self) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(&Sha256::digest(self.plan.to_string().as_bytes())[..16])
    }
}

fn plan_json(
    spec: &OpsSpec,
    preflight: &BTreeMap<(String, String), Result<String, String>>,
) -> Value {
    let ops: Vec<Value> = spec
        .operations
        .iter()
        .map(|op| {
            let groups: Vec<Value> = op
                .groups()
                .iter()
                .map(|g| {
                    let batches: Vec<Vec<Value>> = g
                        .batches
                        .iter()
                        .map(|b| {
                            b.iter()
                                .map(|t| {
                                    let what = preflight.get(&(op.name.clone(), t.name.clone()));
                                    json!({
                                        "target": t.name,
                                        "action": what.and_then(|r| r.as_ref().ok()),
                                        "error": what.and_then(|r| r.as_ref().err()),
                                    })
                                })
                                .collect()
                        })
                        .collect();
                    json!({"cluster": g.cluster, "batches": batches})
                })
                .collect();
            json!({
                "name": op.name, "kind": op.kind, "app": op.app, "batchSize": op.batch_size,
                "maxUnavailable": op.max_unavailable,
                "maxUnavailablePercent": op.max_unavailable_percent,
                "pauseMs": op.pause.as_millis() as u64,
                "timeoutMs": op.timeout.as_millis() as u64, "condition": op.condition,
                "dependsOn": op.depends_on, "params": op.params, "clusters": groups,
            })
        })
        .collect();
    json!({"operations": ops, "unresolved": spec.unresolved})
}
