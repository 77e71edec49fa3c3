//! Read views the console draws, each computed by the kernel code the CLI uses for the same
//! question: the resource graph (`graph::Dag`, as `kusionctl graph` builds it), policy findings
//! (`PolicyGuard::preview`, what `kusionctl preview` runs), drift (`operation::drift`, what
//! `kusionctl drift` runs) and two releases compared field by field (`diff::diff`, the plan's
//! field diff).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, State};
use kusion_kernel::diff::{self, FieldChange};
use kusion_kernel::drift::{DriftOptions, DriftReport};
use kusion_kernel::graph::Dag;
use kusion_kernel::plan::PlanOptions;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::StateStore;
use kusion_sdk::FieldPath;
use kusion_sdk::Resource;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::{AppResult, Shared, blocking, find_stack, require};
use crate::auth::{Principal, Role};
use crate::problem::Problem;

/// Who the caller is, so a console can say who is signed in (never the token).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct Session {
    subject: String,
    token_id: String,
    /// Role per project (`*`: every project).
    scopes: BTreeMap<String, Role>,
}

/// The caller: subject, token ID and roles (any valid token).
#[utoipa::path(get, path = "/api/v1/session", responses((status = 200, body = Session), (status = 401, body = Problem)))]
pub(super) async fn whoami(Extension(principal): Extension<Principal>) -> Json<Session> {
    Json(Session {
        subject: principal.subject,
        token_id: principal.token_id,
        scopes: principal.scopes,
    })
}

/// How long one runtime read of a drift check may take.
const DRIFT_READ_TIMEOUT: Duration = Duration::from_secs(30);

fn query<T>(q: Result<Query<T>, QueryRejection>) -> AppResult<T> {
    q.map(|Query(v)| v)
        .map_err(|e| Problem::bad_request(e.body_text()))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct GraphQuery {
    /// Draw the spec recorded by this release instead of compiling the stack.
    revision: Option<u64>,
}

/// One resource of the graph.
#[derive(Serialize, ToSchema)]
pub(super) struct GraphNode {
    id: String,
    /// The resource's `type` (`Kubernetes`, `Terraform`, a plugin's).
    #[serde(rename = "type")]
    resource_type: String,
    /// What it is within its type: a Kubernetes object's kind, a Terraform resource type.
    kind: String,
    /// Its DAG layer: 0 for resources depending on nothing, else one more than the deepest
    /// resource it depends on (what the console lays out by).
    layer: usize,
}

/// `from` must exist before `to` (a `dependsOn`, a `$kusion_path` reference or a namespace).
#[derive(Serialize, ToSchema)]
pub(super) struct GraphEdge {
    from: String,
    to: String,
}

#[derive(Serialize, ToSchema)]
pub(super) struct ResourceGraph {
    /// `spec` (compiled now) or `release` (the spec a release recorded).
    source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<u64>,
    nodes: Vec<GraphNode>,
    /// The reduced graph: an edge implied by two others is left out.
    edges: Vec<GraphEdge>,
}

/// A Kubernetes ID is `apiVersion:Kind[:namespace]:name` (`apiVersion` may hold no colon but
/// `group/version` is one segment), a Terraform ID `namespace:provider:type:name`.
fn kind_of(resource: &Resource) -> String {
    let parts: Vec<&str> = resource.id.split(':').collect();
    let from_id = match resource.resource_type.as_str() {
        "Kubernetes" if parts.len() >= 3 => Some(parts[1]),
        "Terraform" if parts.len() == 4 => Some(parts[2]),
        _ => None,
    };
    from_id
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .or_else(|| {
            resource
                .attributes
                .get("kind")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| resource.resource_type.clone())
}

fn graph_of(spec: &Spec) -> Result<(Vec<GraphNode>, Vec<GraphEdge>), Problem> {
    let dag = Dag::build(spec).map_err(|e| Problem::unprocessable(e.to_string()))?;
    let mut layers: BTreeMap<&str, usize> = BTreeMap::new();
    // Topological order: every dependency has its layer before its dependents ask.
    for id in dag.order() {
        let layer = dag
            .dependencies(id)
            .iter()
            .filter_map(|d| layers.get(d))
            .map(|l| l + 1)
            .max()
            .unwrap_or(0);
        layers.insert(id, layer);
    }
    let nodes = spec
        .resources
        .iter()
        .map(|r| GraphNode {
            id: r.id.clone(),
            resource_type: r.resource_type.clone(),
            kind: kind_of(r),
            layer: layers.get(r.id.as_str()).copied().unwrap_or(0),
        })
        .collect();
    let edges = dag
        .edges()
        .into_iter()
        .map(|(from, to)| GraphEdge {
            from: from.to_string(),
            to: to.to_string(),
        })
        .collect();
    Ok((nodes, edges))
}

/// A release's record, or 404 when the stack has no such release.
pub(super) fn release_of(
    store: &dyn StateStore,
    revision: u64,
) -> AppResult<kusion_kernel::state::Release> {
    let latest = store
        .latest_revision()
        .map_err(|e| Problem::internal(e.to_string()))?;
    if revision == 0 || latest.is_none_or(|l| revision > l) {
        return Err(Problem::not_found(format!("no release {revision}")));
    }
    store
        .release(revision)
        .map_err(|e| Problem::not_found(format!("release {revision}: {e}")))
}

/// The stack's resource graph: nodes with their kind and DAG layer, edges from dependency to
/// dependent. From the compiled spec, or with `?revision=N` from the spec release N recorded.
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}/graph",
    params(("project" = String, Path), ("stack" = String, Path), GraphQuery),
    responses((status = 200, body = ResourceGraph), (status = 400, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem), (status = 422, description = "the stack does not compile, or its dependencies do not form a DAG", body = Problem)))]
pub(super) async fn stack_graph(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
    q: Result<Query<GraphQuery>, QueryRejection>,
) -> AppResult<Json<ResourceGraph>> {
    require(&principal, &project, Role::Viewer)?;
    let q = query(q)?;
    let found = find_stack(&state, &project, &stack).await?;
    let source = state.source.clone();
    let graph = blocking(move || {
        let spec = match q.revision {
            Some(revision) => {
                let store = source
                    .state(&found)
                    .map_err(|e| Problem::internal(e.to_string()))?;
                release_of(&*store, revision)?.spec
            }
            None => source
                .compile(&found)
                .map_err(|e| Problem::unprocessable(e.to_string()))?,
        };
        let (nodes, edges) = graph_of(&spec)?;
        Ok(ResourceGraph {
            source: if q.revision.is_some() {
                "release"
            } else {
                "spec"
            }
            .into(),
            revision: q.revision,
            nodes,
            edges,
        })
    })
    .await?;
    Ok(Json(graph))
}

/// What the stack's policies say about its spec and the plan a preview makes now.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct PolicyFindings {
    /// The policy plugins asked (empty: none is configured for the stack).
    policies: Vec<String>,
    /// Each finding: `policy`, `rule`, `severity` (`deny`/`warn`), `resourceId`, `message`,
    /// `exempted`.
    #[schema(value_type = Vec<Object>)]
    findings: Value,
    /// Policies that gave no answer.
    #[schema(value_type = Vec<Object>)]
    failures: Value,
    /// An apply now would be blocked.
    blocked: bool,
    /// The preview's counts (create, update, replace, delete, unchanged, import).
    #[schema(value_type = Object)]
    plan: Value,
}

/// Policy findings for the stack: the stack's configured policies evaluated over its compiled
/// spec and a fresh preview's plan, exactly as `kusionctl preview` evaluates them. Nothing
/// changes.
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}/policy",
    params(("project" = String, Path), ("stack" = String, Path)),
    responses((status = 200, body = PolicyFindings), (status = 403, body = Problem), (status = 404, body = Problem), (status = 422, description = "the stack could not be opened or planned", body = Problem)))]
pub(super) async fn stack_policy(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
) -> AppResult<Json<PolicyFindings>> {
    require(&principal, &project, Role::Viewer)?;
    let found = find_stack(&state, &project, &stack).await?;
    let source = state.source.clone();
    let findings = blocking(move || {
        let prepared = source
            .open(&found)
            .map_err(|e| Problem::unprocessable(e.to_string()))?;
        let (plan, report) = prepared
            .guard
            .preview(
                &prepared.spec,
                &prepared.stack,
                &PlanOptions::default(),
                Arc::new(AtomicBool::new(false)),
            )
            .map_err(|e| Problem::unprocessable(e.to_string()))?;
        Ok(PolicyFindings {
            policies: report.policies.clone(),
            findings: serde_json::to_value(&report.findings).unwrap_or_default(),
            failures: serde_json::to_value(&report.failures).unwrap_or_default(),
            blocked: report.blocked,
            plan: serde_json::to_value(plan.summary).unwrap_or_default(),
        })
    })
    .await?;
    Ok(Json(findings))
}

/// The stack's drift: every resource state records read live and compared with the record.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct StackDrift {
    /// `in_sync`, `drifted` (something differs or is missing), `incomplete` (something could
    /// not be read) or `empty` (state records nothing).
    status: String,
    /// Counts: `inSync`, `drifted`, `missing`, `unreadable`.
    #[schema(value_type = Object)]
    summary: Value,
    /// Per resource: `id`, `type`, `status`, field `changes` (recorded → live, masked), `error`.
    #[schema(value_type = Vec<Object>)]
    resources: Value,
}

fn drift_status(report: &DriftReport) -> &'static str {
    if report.resources.is_empty() {
        "empty"
    } else if report.has_drift() {
        "drifted"
    } else if report.incomplete() {
        "incomplete"
    } else {
        "in_sync"
    }
}

/// Drift: what state recorded against what lives now, read through the stack's runtimes as
/// `kusionctl drift` reads it. Read-only: no lease is taken and nothing changes.
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}/drift",
    params(("project" = String, Path), ("stack" = String, Path)),
    responses((status = 200, body = StackDrift), (status = 403, body = Problem), (status = 404, body = Problem), (status = 422, description = "the stack could not be opened", body = Problem)))]
pub(super) async fn stack_drift(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
) -> AppResult<Json<StackDrift>> {
    require(&principal, &project, Role::Viewer)?;
    let found = find_stack(&state, &project, &stack).await?;
    let source = state.source.clone();
    let drift = blocking(move || {
        // The stack opened as the worker opens it for a preview: its runtimes read live.
        let prepared = source
            .open(&found)
            .map_err(|e| Problem::unprocessable(e.to_string()))?;
        let options = DriftOptions {
            concurrency: 4,
            timeout: Some(DRIFT_READ_TIMEOUT),
            ..DriftOptions::default()
        };
        let report =
            kusion_kernel::operation::drift(&prepared.stack, &options, &AtomicBool::new(false))
                .map_err(|e| Problem::internal(e.to_string()))?;
        Ok(StackDrift {
            status: drift_status(&report).into(),
            summary: serde_json::to_value(report.summary).unwrap_or_default(),
            resources: serde_json::to_value(&report.resources).unwrap_or_default(),
        })
    })
    .await?;
    Ok(Json(drift))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct CompareQuery {
    /// The older release's revision.
    from: u64,
    /// The newer release's revision.
    to: u64,
}

/// How one resource differs between the two releases.
#[derive(Serialize, ToSchema)]
pub(super) struct ResourceComparison {
    id: String,
    #[serde(rename = "type")]
    resource_type: String,
    /// `added`, `removed` or `changed`.
    change: String,
    /// Field changes from `from` to `to` (`path` such as `attributes.spec.replicas`, `kind`
    /// `added`/`removed`/`changed`, `old`, `new`; sensitive values masked).
    #[schema(value_type = Vec<Object>)]
    changes: Vec<FieldChange>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct ComparisonSummary {
    added: usize,
    removed: usize,
    changed: usize,
    unchanged: usize,
}

#[derive(Serialize, ToSchema)]
pub(super) struct ReleaseComparison {
    from: u64,
    to: u64,
    summary: ComparisonSummary,
    /// Resources that differ, in the order of `to`'s spec, then those `to` no longer has.
    resources: Vec<ResourceComparison>,
}

/// A resource as compared: everything but its ID, which is the key.
fn comparable(r: &Resource) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.remove("id");
    }
    v
}

/// The masked paths of `r`, as paths of [`comparable`]'s value.
fn sensitive(r: &Resource) -> Vec<FieldPath> {
    let attributes = FieldPath::root().child_key("attributes");
    diff::builtin_sensitive_paths(r)
        .into_iter()
        .map(|p| {
            let mut full = attributes.clone();
            full.0.extend(p.0);
            full
        })
        .collect()
}

/// Resources keyed by ID (a repeated ID, one per target, gets its position appended).
fn keyed(spec: &Spec) -> Vec<(String, &Resource)> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    spec.resources
        .iter()
        .map(|r| {
            let n = seen.entry(r.id.as_str()).or_default();
            *n += 1;
            let key = if *n == 1 {
                r.id.clone()
            } else {
                format!("{}#{n}", r.id)
            };
            (key, r)
        })
        .collect()
}

fn compare(from: &Spec, to: &Spec) -> (ComparisonSummary, Vec<ResourceComparison>) {
    let old: BTreeMap<String, &Resource> = keyed(from).into_iter().collect();
    let new = keyed(to);
    let mut summary = ComparisonSummary {
        added: 0,
        removed: 0,
        changed: 0,
        unchanged: 0,
    };
    let mut out = Vec::new();
    for (key, r) in &new {
        let (change, mut changes, mut masked) = match old.get(key) {
            None => {
                summary.added += 1;
                (
                    "added",
                    diff::diff(&Value::Null, &comparable(r)),
                    sensitive(r),
                )
            }
            Some(before) => {
                let changes = diff::diff(&comparable(before), &comparable(r));
                if changes.is_empty() {
                    summary.unchanged += 1;
                    continue;
                }
                summary.changed += 1;
                ("changed", changes, sensitive(before))
            }
        };
        masked.extend(sensitive(r));
        diff::mask_changes(&mut changes, &masked);
        out.push(ResourceComparison {
            id: key.clone(),
            resource_type: r.resource_type.clone(),
            change: change.into(),
            changes,
        });
    }
    let kept: std::collections::BTreeSet<&String> = new.iter().map(|(k, _)| k).collect();
    for (key, r) in &old {
        if kept.contains(key) {
            continue;
        }
        summary.removed += 1;
        let mut changes = diff::diff(&comparable(r), &Value::Null);
        diff::mask_changes(&mut changes, &sensitive(r));
        out.push(ResourceComparison {
            id: key.clone(),
            resource_type: r.resource_type.clone(),
            change: "removed".into(),
            changes,
        });
    }
    (summary, out)
}

/// Two releases' specs compared field by field (`from` → `to`; either order works).
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}/releases/compare",
    params(("project" = String, Path), ("stack" = String, Path), CompareQuery),
    responses((status = 200, body = ReleaseComparison), (status = 400, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
pub(super) async fn compare_releases(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
    q: Result<Query<CompareQuery>, QueryRejection>,
) -> AppResult<Json<ReleaseComparison>> {
    require(&principal, &project, Role::Viewer)?;
    let q = query(q)?;
    let found = find_stack(&state, &project, &stack).await?;
    let source = state.source.clone();
    let comparison = blocking(move || {
        let store = source
            .state(&found)
            .map_err(|e| Problem::internal(e.to_string()))?;
        let from = release_of(&*store, q.from)?;
        let to = release_of(&*store, q.to)?;
        let (summary, resources) = compare(&from.spec, &to.spec);
        Ok(ReleaseComparison {
            from: q.from,
            to: q.to,
            summary,
            resources,
        })
    })
    .await?;
    Ok(Json(comparison))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> Spec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn layers_follow_the_deepest_dependency_and_kinds_come_from_ids() {
        let s = spec(
            r#"{"resources": [
                {"id": "v1:Namespace:app", "type": "Kubernetes", "attributes": {}},
                {"id": "apps/v1:Deployment:app:web", "type": "Kubernetes", "attributes": {}},
                {"id": "hashicorp:aws:aws_s3_bucket:logs", "type": "Terraform", "attributes": {}},
                {"id": "t:x", "type": "Test", "attributes": {}, "dependsOn": ["apps/v1:Deployment:app:web", "v1:Namespace:app"]}
            ]}"#,
        );
        let (nodes, edges) = graph_of(&s).unwrap();
        let by: BTreeMap<&str, &GraphNode> = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
        assert_eq!(by["v1:Namespace:app"].layer, 0);
        assert_eq!(
            by["apps/v1:Deployment:app:web"].layer, 1,
            "implicit namespace edge"
        );
        assert_eq!(by["t:x"].layer, 2);
        assert_eq!(by["hashicorp:aws:aws_s3_bucket:logs"].layer, 0);
        assert_eq!(by["apps/v1:Deployment:app:web"].kind, "Deployment");
        assert_eq!(by["hashicorp:aws:aws_s3_bucket:logs"].kind, "aws_s3_bucket");
        assert_eq!(by["t:x"].kind, "Test");
        // Reduced: t:x -> Namespace is implied through the Deployment.
        assert_eq!(edges.len(), 2);
    }

    #[test]
    fn a_cycle_is_unprocessable_not_a_panic() {
        let s = spec(
            r#"{"resources": [
                {"id": "a", "type": "Test", "dependsOn": ["b"]},
                {"id": "b", "type": "Test", "dependsOn": ["a"]}
            ]}"#,
        );
        assert_eq!(graph_of(&s).err().unwrap().status, 422);
    }

    #[test]
    fn compare_lists_field_changes_masks_secrets_and_counts() {
        let from = spec(
            r#"{"resources": [
                {"id": "t:web", "type": "Test", "attributes": {"size": 1, "tags": ["a"]}},
                {"id": "t:gone", "type": "Test", "attributes": {"size": 1}},
                {"id": "t:same", "type": "Test", "attributes": {"size": 1}},
                {"id": "v1:Secret:app:s", "type": "Kubernetes", "attributes": {"apiVersion": "v1", "kind": "Secret", "data": {"k": "old"}}}
            ]}"#,
        );
        let to = spec(
            r#"{"resources": [
                {"id": "t:web", "type": "Test", "attributes": {"size": 3, "tags": ["a"]}, "dependsOn": ["t:same"]},
                {"id": "t:same", "type": "Test", "attributes": {"size": 1}},
                {"id": "t:new", "type": "Test", "attributes": {"size": 2}},
                {"id": "v1:Secret:app:s", "type": "Kubernetes", "attributes": {"apiVersion": "v1", "kind": "Secret", "data": {"k": "new"}}}
            ]}"#,
        );
        let (summary, resources) = compare(&from, &to);
        assert_eq!(
            (
                summary.added,
                summary.removed,
                summary.changed,
                summary.unchanged
            ),
            (1, 1, 2, 1)
        );
        let web = resources.iter().find(|r| r.id == "t:web").unwrap();
        let paths: Vec<String> = web.changes.iter().map(|c| c.path.to_string()).collect();
        assert_eq!(paths, ["attributes.size", "dependsOn"]);
        assert_eq!(web.changes[0].old, Some(Value::from(1)));
        assert_eq!(web.changes[0].new, Some(Value::from(3)));
        let secret = serde_json::to_string(
            &resources
                .iter()
                .find(|r| r.id == "v1:Secret:app:s")
                .unwrap()
                .changes,
        )
        .unwrap();
        assert!(
            !secret.contains("\"old\":\"old\"") && !secret.contains("\"new\":\"new\""),
            "{secret}"
        );
        assert!(secret.contains(diff::MASK), "{secret}");
        assert_eq!(resources.last().unwrap().change, "removed");
    }
}
