//! The routes, their OpenAPI description, and the layers every request passes: request ID,
//! tracing, authentication, audit, metrics and problem documents.

mod cluster;
mod operations;
mod views;

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, Extension, MatchedPath, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::Stream;
use serde::{Deserialize, Serialize};
use tower_http::request_id::{
    MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::trace::TraceLayer;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::audit::AuditEntry;
use crate::auth::{Principal, Role, TokenRecord};
use crate::ops::{self, EventKind, Operation, OperationEvent, OperationKind, OperationStatus};
use crate::problem::Problem;
use crate::source::{StackRef, StackSource};
use crate::{AppState, ServerError};

type AppResult<T> = Result<T, Problem>;
type Shared = State<Arc<AppState>>;

impl From<ServerError> for Problem {
    fn from(e: ServerError) -> Problem {
        match e {
            ServerError::NotFound(what) => Problem::not_found(format!("{what} not found")),
            ServerError::Io(message) => Problem::internal(message),
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "kusion server", description = "Stacks of a Konfig checkout: compile, preview, apply and destroy with approval, progress events, release history and comparison, resource graph, policy findings, drift; the GitOps controller's Stacks and approval of their plans."),
    paths(
        healthz, metrics, openapi_json, views::whoami, list_projects, get_stack, compile_stack, list_releases,
        get_release, list_runs, operations::create_run, get_run, views::stack_graph, views::stack_policy, views::stack_drift,
        views::compare_releases, operations::create_operation, operations::list_operations, operations::get_operation, operations::approve_operation,
        operations::reject_operation, operations::cancel_operation, operations::operation_events, read_audit, list_tokens, create_token, revoke_token,
        cluster::list_cluster_stacks, cluster::get_cluster_stack, cluster::approve_cluster_plan,
    ),
    components(schemas(
        Problem, StackRef, Project, Operation, OperationKind, OperationStatus, OperationEvent,
        EventKind, operations::CreateOperation, operations::CreateRun, ReleaseSummary, AuditEntry, Role, TokenInfo, CreateToken,
        CreatedToken, Health, crate::cluster::ClusterStack, crate::cluster::ClusterPlan,
        crate::cluster::ClusterCondition, cluster::ApprovePlan, views::ResourceGraph, views::Session,
        views::GraphNode, views::GraphEdge, views::PolicyFindings, views::StackDrift,
        views::ReleaseComparison, views::ResourceComparison, views::ComparisonSummary,
    )),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The routes with all layers.
pub fn router(state: Arc<AppState>) -> Router {
    let protected = Router::new()
        .route("/openapi.json", get(openapi_json))
        .route("/api/v1/session", get(views::whoami))
        .route("/api/v1/projects", get(list_projects))
        .route("/api/v1/projects/{project}/stacks/{stack}", get(get_stack))
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/spec",
            get(compile_stack),
        )
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/releases",
            get(list_releases),
        )
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/releases/{revision}",
            get(get_release),
        )
        // A static segment wins over `{revision}` in the router.
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/releases/compare",
            get(views::compare_releases),
        )
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/graph",
            get(views::stack_graph),
        )
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/policy",
            get(views::stack_policy),
        )
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/drift",
            get(views::stack_drift),
        )
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/runs",
            get(list_runs).post(operations::create_run),
        )
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/runs/{run}",
            get(get_run),
        )
        .route(
            "/api/v1/projects/{project}/stacks/{stack}/operations",
            post(operations::create_operation),
        )
        .route("/api/v1/operations", get(operations::list_operations))
        .route("/api/v1/operations/{id}", get(operations::get_operation))
        .route(
            "/api/v1/operations/{id}/approve",
            post(operations::approve_operation),
        )
        .route(
            "/api/v1/operations/{id}/reject",
            post(operations::reject_operation),
        )
        .route(
            "/api/v1/operations/{id}/cancel",
            post(operations::cancel_operation),
        )
        .route(
            "/api/v1/operations/{id}/events",
            get(operations::operation_events),
        )
        .route("/api/v1/audit", get(read_audit))
        .route("/api/v1/tokens", get(list_tokens).post(create_token))
        .route("/api/v1/tokens/{id}", axum::routing::delete(revoke_token))
        .route(
            "/api/v1/kubernetes/stacks",
            get(cluster::list_cluster_stacks),
        )
        .route(
            "/api/v1/kubernetes/namespaces/{namespace}/stacks/{name}",
            get(cluster::get_cluster_stack),
        )
        .route(
            "/api/v1/kubernetes/namespaces/{namespace}/stacks/{name}/approve",
            post(cluster::approve_cluster_plan),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    let header = axum::http::HeaderName::from_static("x-request-id");
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .merge(crate::console::routes())
        .merge(protected)
        .layer(middleware::from_fn_with_state(state.clone(), finish))
        .layer(PropagateRequestIdLayer::new(header.clone()))
        // Spans name the method and path only: headers (and so tokens) are never recorded.
        .layer(TraceLayer::new_for_http())
        .layer(SetRequestIdLayer::new(header, MakeRequestUuid))
        .with_state(state)
}

/// Filled by [`authenticate`] so [`finish`] can audit who called.
#[derive(Clone, Default)]
struct Caller(Arc<Mutex<Option<(String, String)>>>);

#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
}

/// Problem documents with the request ID, the audit log and request counts.
async fn finish(State(state): Shared, mut request: Request, next: Next) -> Response {
    let request_id = request
        .extensions()
        .get::<RequestId>()
        .and_then(|id| id.header_value().to_str().ok())
        .map(str::to_string);
    let method = request.method().clone();
    let action = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "(no route)".into());
    let target = request.uri().path().to_string();
    let from = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.to_string());
    let caller = Caller::default();
    request.extensions_mut().insert(caller.clone());
    let response = next.run(request).await;
    let status = response.status();
    if let Ok(mut counts) = state.metrics.requests.lock() {
        *counts
            .entry((method.to_string(), status.as_u16()))
            .or_default() += 1;
    }
    let denied = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
    let mutating = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
    if mutating || denied {
        let who = caller.0.lock().ok().and_then(|c| c.clone());
        let entry = AuditEntry {
            time: ops::now_rfc3339(),
            request_id: request_id.clone(),
            subject: who.as_ref().map(|w| w.0.clone()),
            token_id: who.map(|w| w.1),
            method: method.to_string(),
            action,
            target,
            from,
            status: status.as_u16(),
            result: if denied {
                "denied"
            } else if status.is_success() {
                "ok"
            } else {
                "failed"
            }
            .into(),
        };
        if let Err(e) = state.audit.record(&entry) {
            // A mutating call that cannot be audited is not reported as done.
            tracing::error!("audit log: {e}");
            return crate::problem::finish(
                Problem::internal("the audit log could not be written").into_response(),
                request_id,
            )
            .await;
        }
    }
    crate::problem::finish(response, request_id).await
}

/// Every route but health and metrics: a valid, unexpired bearer token.
async fn authenticate(State(state): Shared, mut request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    let Some(token) = token else {
        return Problem::unauthorized("an `Authorization: Bearer <token>` header is required")
            .into_response();
    };
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    if let Some(ip) = client
        && let Some(wait) = state.auth_failures.blocked(ip)
        && state.tokens.verify_cached(token).is_none()
    {
        let mut response = Problem::too_many_requests(format!(
            "too many requests with unknown tokens from {ip}: retry in {} s",
            wait.as_secs().max(1)
        ))
        .into_response();
        if let Ok(v) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return response;
    }
    let refused = |problem: Problem| {
        if let Some(ip) = client {
            state.auth_failures.failed(ip);
        }
        problem.into_response()
    };
    let principal = match (&state.oidc, state.tokens.verify(token)) {
        (_, Some(principal)) => principal,
        // The server's own tokens have a prefix a JWT (base64url, dot-separated) never starts with.
        (Some(oidc), None) if !token.starts_with(crate::auth::TOKEN_PREFIX) => {
            match oidc.verify(token).await {
                Ok(principal) => principal,
                Err(e) => return refused(Problem::unauthorized(e.to_string())),
            }
        }
        _ => {
            return refused(Problem::unauthorized(
                "the token is unknown, revoked or expired",
            ));
        }
    };
    if let Some(caller) = request.extensions().get::<Caller>()
        && let Ok(mut slot) = caller.0.lock()
    {
        *slot = Some((principal.subject.clone(), principal.token_id.clone()));
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}

fn require(principal: &Principal, project: &str, role: Role) -> AppResult<()> {
    if principal.can(project, role) {
        Ok(())
    } else {
        Err(Problem::forbidden(format!(
            "this token's subject {:?} is not {} on project {project:?}",
            principal.subject,
            role_name(role)
        )))
    }
}

fn require_everywhere(principal: &Principal, role: Role) -> AppResult<()> {
    if principal.can_everywhere(role) {
        Ok(())
    } else {
        Err(Problem::forbidden(format!(
            "this token's subject {:?} is not {} on every project",
            principal.subject,
            role_name(role)
        )))
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Viewer => "a viewer",
        Role::Operator => "an operator",
        Role::Approver => "an approver",
        Role::Admin => "an admin",
    }
}

/// Runs blocking front-end work (listing folders, compiling KCL) off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> AppResult<T> + Send + 'static,
) -> AppResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Problem::internal(format!("the task stopped: {e}")))?
}

/// The checkout's stacks, from the listing cache.
async fn stacks(state: &Arc<AppState>) -> AppResult<Arc<Vec<StackRef>>> {
    let source = state.source.clone();
    state
        .listing
        .get(
            &(),
            0,
            blocking(move || {
                source
                    .stacks()
                    .map_err(|e| Problem::internal(e.to_string()))
            }),
        )
        .await
}

async fn find_stack(state: &Arc<AppState>, project: &str, stack: &str) -> AppResult<StackRef> {
    stacks(state)
        .await?
        .iter()
        .find(|s| s.project == project && s.stack == stack)
        .cloned()
        .ok_or_else(|| Problem::not_found(format!("no stack {project}/{stack} in the checkout")))
}

#[derive(Serialize, ToSchema)]
struct Health {
    status: String,
}

/// Liveness; needs no token.
#[utoipa::path(get, path = "/healthz", security(()), responses((status = 200, body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// Prometheus metrics; needs no token.
#[utoipa::path(get, path = "/metrics", security(()), responses((status = 200, content_type = "text/plain", body = String)))]
async fn metrics(State(state): Shared) -> Response {
    let mut out = String::from(
        "# HELP kusion_http_requests_total HTTP requests served, by method and status.\n# TYPE kusion_http_requests_total counter\n",
    );
    if let Ok(counts) = state.metrics.requests.lock() {
        for ((method, status), n) in counts.iter() {
            out.push_str(&format!(
                "kusion_http_requests_total{{method=\"{method}\",status=\"{status}\"}} {n}\n"
            ));
        }
    }
    out.push_str("# HELP kusion_operations Operations known to this server, by status.\n# TYPE kusion_operations gauge\n");
    let mut by_status: BTreeMap<String, u64> = BTreeMap::new();
    for op in state.queue.list().unwrap_or_default() {
        let name = serde_json::to_value(op.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        *by_status.entry(name).or_default() += 1;
    }
    for (status, n) in by_status {
        out.push_str(&format!("kusion_operations{{status=\"{status}\"}} {n}\n"));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

/// This API's OpenAPI 3 document.
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, body = serde_json::Value), (status = 401, body = Problem)))]
async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// A project and the stacks the caller may see.
#[derive(Serialize, ToSchema)]
struct Project {
    name: String,
    stacks: Vec<StackRef>,
}

/// Projects of the checkout the caller may view, with their stacks.
#[utoipa::path(get, path = "/api/v1/projects", responses((status = 200, body = Vec<Project>), (status = 401, body = Problem)))]
async fn list_projects(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
) -> AppResult<Json<Vec<Project>>> {
    let stacks = stacks(&state).await?;
    let mut projects: BTreeMap<String, Vec<StackRef>> = BTreeMap::new();
    for s in stacks.iter() {
        if principal.can(&s.project, Role::Viewer) {
            projects
                .entry(s.project.clone())
                .or_default()
                .push(s.clone());
        }
    }
    Ok(Json(
        projects
            .into_iter()
            .map(|(name, stacks)| Project { name, stacks })
            .collect(),
    ))
}

/// One stack.
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}",
    params(("project" = String, Path), ("stack" = String, Path)),
    responses((status = 200, body = StackRef), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn get_stack(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
) -> AppResult<Json<StackRef>> {
    require(&principal, &project, Role::Viewer)?;
    Ok(Json(find_stack(&state, &project, &stack).await?))
}

/// The stack's spec: its KCL compiled, as `kusionctl compile` prints it.
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}/spec",
    params(("project" = String, Path), ("stack" = String, Path)),
    responses((status = 200, body = serde_json::Value), (status = 404, body = Problem), (status = 422, description = "the stack does not compile", body = Problem)))]
async fn compile_stack(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
) -> AppResult<Json<serde_json::Value>> {
    require(&principal, &project, Role::Viewer)?;
    let found = find_stack(&state, &project, &stack).await?;
    let source = state.source.clone();
    let spec = blocking(move || {
        source
            .compile(&found)
            .map_err(|e| Problem::unprocessable(e.to_string()))
    })
    .await?;
    Ok(Json(
        serde_json::to_value(spec).map_err(|e| Problem::internal(e.to_string()))?,
    ))
}

/// One release of the history, without its spec.
#[derive(Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseSummary {
    revision: u64,
    operation: String,
    status: String,
    started_at: u64,
    finished_at: Option<u64>,
    holder: String,
    resources: usize,
    steps: usize,
}

/// The stack's release history, oldest first.
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}/releases",
    params(("project" = String, Path), ("stack" = String, Path)),
    responses((status = 200, body = Vec<ReleaseSummary>), (status = 404, body = Problem)))]
async fn list_releases(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
) -> AppResult<Json<Vec<ReleaseSummary>>> {
    require(&principal, &project, Role::Viewer)?;
    let found = find_stack(&state, &project, &stack).await?;
    let source = state.source.clone();
    // Read before the history: an operation finishing meanwhile moves the queue's counter
    // past it, so the copy read now is not served again.
    let generation = *state.queue.changes().borrow();
    let releases = state
        .histories
        .get(
            &found.dir.clone(),
            generation,
            blocking(move || {
                let store = source
                    .state(&found)
                    .map_err(|e| Problem::internal(e.to_string()))?;
                let releases = store
                    .releases()
                    .map_err(|e| Problem::internal(e.to_string()))?;
                Ok(releases
                    .into_iter()
                    .map(|r| ReleaseSummary {
                        revision: r.revision,
                        operation: r.operation,
                        status: serde_json::to_value(r.status)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default(),
                        started_at: r.started_at,
                        finished_at: r.finished_at,
                        holder: r.holder.to_string(),
                        resources: r.spec.resources.len(),
                        steps: r.steps.len(),
                    })
                    .collect())
            }),
        )
        .await?;
    Ok(Json(releases.as_ref().clone()))
}

/// One release with its spec and steps, as `kusionctl state history N` shows it.
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}/releases/{revision}",
    params(("project" = String, Path), ("stack" = String, Path), ("revision" = u64, Path)),
    responses((status = 200, body = serde_json::Value), (status = 404, body = Problem)))]
async fn get_release(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack, revision)): Path<(String, String, u64)>,
) -> AppResult<Json<serde_json::Value>> {
    require(&principal, &project, Role::Viewer)?;
    let found = find_stack(&state, &project, &stack).await?;
    let source = state.source.clone();
    let release = blocking(move || {
        let store = source
            .state(&found)
            .map_err(|e| Problem::internal(e.to_string()))?;
        views::release_of(store.as_ref(), revision)
    })
    .await?;
    Ok(Json(
        serde_json::to_value(release).map_err(|e| Problem::internal(e.to_string()))?,
    ))
}

/// The stack's day-2 runs (`kusionctl run` and its kin), oldest first: who ran which program
/// with which arguments, how it ended and each target's outcome, as `kusionctl run --history`
/// reads them.
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}/runs",
    params(("project" = String, Path), ("stack" = String, Path)),
    responses((status = 200, body = Vec<serde_json::Value>), (status = 404, body = Problem),
        (status = 409, body = Problem)))]
async fn list_runs(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
) -> AppResult<Json<Vec<kusion_kernel::state::RunRecord>>> {
    require(&principal, &project, Role::Viewer)?;
    let found = find_stack(&state, &project, &stack).await?;
    let source = state.source.clone();
    let runs = blocking(move || read_runs(&*source, &found)).await?;
    Ok(Json(runs))
}

/// One day-2 run.
#[utoipa::path(get, path = "/api/v1/projects/{project}/stacks/{stack}/runs/{run}",
    params(("project" = String, Path), ("stack" = String, Path), ("run" = u64, Path)),
    responses((status = 200, body = serde_json::Value), (status = 404, body = Problem),
        (status = 409, body = Problem)))]
async fn get_run(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack, run)): Path<(String, String, u64)>,
) -> AppResult<Json<kusion_kernel::state::RunRecord>> {
    require(&principal, &project, Role::Viewer)?;
    let found = find_stack(&state, &project, &stack).await?;
    let source = state.source.clone();
    let runs = blocking(move || read_runs(&*source, &found)).await?;
    runs.into_iter()
        .find(|r| r.id == run)
        .map(Json)
        .ok_or_else(|| Problem::not_found(format!("no run {run} of {project}/{stack}")))
}

fn read_runs(
    source: &dyn StackSource,
    stack: &StackRef,
) -> AppResult<Vec<kusion_kernel::state::RunRecord>> {
    let store = source
        .state(stack)
        .map_err(|e| Problem::internal(e.to_string()))?;
    store.runs().map_err(|e| match e {
        kusion_kernel::state::StateError::RunsUnsupported { .. } => {
            Problem::conflict(e.to_string())
        }
        e => Problem::internal(e.to_string()),
    })
}

fn json_body<T>(body: Result<Json<T>, JsonRejection>) -> AppResult<T> {
    body.map(|Json(v)| v)
        .map_err(|e| Problem::bad_request(e.body_text()))
}

/// The audit log (admin on every project).
#[utoipa::path(get, path = "/api/v1/audit", responses((status = 200, body = Vec<AuditEntry>), (status = 403, body = Problem)))]
async fn read_audit(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
) -> AppResult<Json<Vec<AuditEntry>>> {
    require_everywhere(&principal, Role::Admin)?;
    Ok(Json(state.audit.read()?))
}

/// A token as listed: never the token, nor its hash.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct TokenInfo {
    id: String,
    subject: String,
    scopes: BTreeMap<String, Role>,
    expires_at: Option<u64>,
    created_at: u64,
}

impl From<TokenRecord> for TokenInfo {
    fn from(r: TokenRecord) -> Self {
        TokenInfo {
            id: r.id,
            subject: r.subject,
            scopes: r.scopes,
            expires_at: r.expires_at,
            created_at: r.created_at,
        }
    }
}

/// Tokens (admin on every project).
#[utoipa::path(get, path = "/api/v1/tokens", responses((status = 200, body = Vec<TokenInfo>), (status = 403, body = Problem)))]
async fn list_tokens(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
) -> AppResult<Json<Vec<TokenInfo>>> {
    require_everywhere(&principal, Role::Admin)?;
    Ok(Json(
        state.tokens.list()?.into_iter().map(Into::into).collect(),
    ))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateToken {
    /// Who will hold it.
    subject: String,
    /// Role per project name (`*`: every project).
    scopes: BTreeMap<String, Role>,
    /// Lifetime in seconds (default: no expiry).
    #[serde(default)]
    ttl_seconds: Option<u64>,
}

#[derive(Serialize, ToSchema)]
struct CreatedToken {
    /// The token: shown this once, stored only as its hash.
    token: String,
    #[serde(flatten)]
    info: TokenInfo,
}

/// Mint a token (admin on every project).
#[utoipa::path(post, path = "/api/v1/tokens", request_body = CreateToken,
    responses((status = 201, body = CreatedToken), (status = 400, body = Problem), (status = 403, body = Problem)))]
async fn create_token(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    body: Result<Json<CreateToken>, JsonRejection>,
) -> AppResult<Response> {
    require_everywhere(&principal, Role::Admin)?;
    let body = json_body(body)?;
    if body.subject.trim().is_empty() {
        return Err(Problem::bad_request("subject must not be empty"));
    }
    if body.scopes.is_empty() {
        return Err(Problem::bad_request(
            "scopes must name at least one project or `*`",
        ));
    }
    if body.scopes.keys().any(|k| k.trim().is_empty()) {
        return Err(Problem::bad_request(
            "a scope's project name must not be empty",
        ));
    }
    let minted = state.tokens.mint(
        body.subject.trim(),
        body.scopes,
        body.ttl_seconds.map(Duration::from_secs),
    )?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            token: minted.token,
            info: minted.record.into(),
        }),
    )
        .into_response())
}

/// Revoke a token (admin on every project).
#[utoipa::path(delete, path = "/api/v1/tokens/{id}", params(("id" = String, Path)),
    responses((status = 204, description = "revoked"), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn revoke_token(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> AppResult<StatusCode> {
    require_everywhere(&principal, Role::Admin)?;
    if state.tokens.revoke(&id)? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Problem::not_found(format!("no token {id}")))
    }
}
