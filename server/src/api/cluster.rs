//! The controller's `Stack` objects: list, read, and approve the plan one waits on.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;

use super::{AppResult, Shared, json_body, require};
use crate::AppState;
use crate::auth::{Principal, Role};
use crate::cluster::{ClusterError, ClusterStack, ClusterStacks, namespace_scope};
use crate::problem::Problem;

impl From<ClusterError> for Problem {
    fn from(e: ClusterError) -> Problem {
        match e {
            ClusterError::NotFound(m) => Problem::not_found(m),
            ClusterError::Conflict(m) => Problem::conflict(m),
            ClusterError::Unavailable(m) => Problem::new(StatusCode::BAD_GATEWAY, m),
        }
    }
}

fn cluster(state: &AppState) -> AppResult<Arc<dyn ClusterStacks>> {
    state.cluster.clone().ok_or_else(|| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this server serves no cluster: start it with --kubeconfig to reach the controller's Stacks",
        )
    })
}

/// A Stack the caller may not view is reported as missing, as operations are.
fn visible(principal: &Principal, namespace: &str, name: &str, role: Role) -> AppResult<()> {
    let scope = namespace_scope(namespace);
    if !principal.can(&scope, Role::Viewer) {
        return Err(Problem::not_found(format!("no Stack {namespace}/{name}")));
    }
    require(principal, &scope, role)
}

/// The controller's Stacks in the namespaces the caller may view (`k8s/<namespace>` scopes).
#[utoipa::path(get, path = "/api/v1/kubernetes/stacks",
    responses((status = 200, body = Vec<ClusterStack>), (status = 502, body = Problem), (status = 503, body = Problem)))]
pub(super) async fn list_cluster_stacks(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
) -> AppResult<Json<Vec<ClusterStack>>> {
    let cluster = cluster(&state)?;
    let mut stacks = cluster.list().await?;
    stacks.retain(|s| principal.can(&namespace_scope(&s.namespace), Role::Viewer));
    stacks.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(Json(stacks))
}

/// One Stack: its source, last plan, the plan waiting for approval, drift and conditions.
#[utoipa::path(get, path = "/api/v1/kubernetes/namespaces/{namespace}/stacks/{name}",
    params(("namespace" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = ClusterStack), (status = 404, body = Problem), (status = 503, body = Problem)))]
pub(super) async fn get_cluster_stack(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((namespace, name)): Path<(String, String)>,
) -> AppResult<Json<ClusterStack>> {
    visible(&principal, &namespace, &name, Role::Viewer)?;
    let cluster = cluster(&state)?;
    Ok(Json(cluster.get(&namespace, &name).await?))
}

/// The plan a person read and approves.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ApprovePlan {
    /// The hash of the plan shown (`pendingPlan`): a Stack waiting for another plan refuses.
    plan_hash: String,
}

/// Approve the plan a Stack waits on (approver on `k8s/<namespace>`). The approval is recorded
/// on the Stack (`kusion.io/approve-plan`, `kusion.io/approved-by`); the controller applies the
/// plan only if the plan it computes under the state lease has this hash.
#[utoipa::path(post, path = "/api/v1/kubernetes/namespaces/{namespace}/stacks/{name}/approve",
    params(("namespace" = String, Path), ("name" = String, Path)),
    request_body = ApprovePlan,
    responses((status = 200, body = ClusterStack), (status = 400, body = Problem), (status = 403, body = Problem),
        (status = 404, body = Problem), (status = 409, body = Problem), (status = 503, body = Problem)))]
pub(super) async fn approve_cluster_plan(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((namespace, name)): Path<(String, String)>,
    body: Result<Json<ApprovePlan>, JsonRejection>,
) -> AppResult<Json<ClusterStack>> {
    visible(&principal, &namespace, &name, Role::Approver)?;
    let body = json_body(body)?;
    let hash = body.plan_hash.trim();
    if hash.is_empty() {
        return Err(Problem::bad_request("planHash must name the plan approved"));
    }
    let cluster = cluster(&state)?;
    let stack = cluster
        .approve(&namespace, &name, hash, &principal.subject)
        .await?;
    tracing::info!(stack = %format!("{namespace}/{name}"), plan = hash, by = %principal.subject, "plan approved");
    Ok(Json(stack))
}
