//! The controller's Stacks through the API: namespace scopes decide who sees and approves what,
//! an approval must name the plan the Stack waits for, and a server given no cluster says so.
//! The cluster here is an in-memory stand-in; `tests/tests/controller_e2e` approves through the
//! real server against the real control plane.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use common::{Files, assert_problem, call};
use futures::FutureExt;
use futures::future::BoxFuture;
use kusion_server::auth::Role;
use kusion_server::{AppState, ClusterError, ClusterStack, ClusterStacks, InProcessQueue};

/// Stacks by `namespace/name`, with approvals recorded as the controller's annotations are.
#[derive(Default)]
struct Stacks(Mutex<BTreeMap<(String, String), ClusterStack>>);

impl Stacks {
    fn add(&self, namespace: &str, name: &str, pending: Option<&str>) {
        self.0.lock().unwrap().insert(
            (namespace.into(), name.into()),
            ClusterStack {
                namespace: namespace.into(),
                name: name.into(),
                source: "git://127.0.0.1/konfig main shop/prod".into(),
                mode: "apply".into(),
                require_approval: true,
                pending_plan: pending.map(str::to_string),
                ..Default::default()
            },
        );
    }
}

impl ClusterStacks for Stacks {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ClusterStack>, ClusterError>> {
        let all = self.0.lock().unwrap().values().cloned().collect();
        async move { Ok(all) }.boxed()
    }
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<ClusterStack, ClusterError>> {
        let found = self
            .0
            .lock()
            .unwrap()
            .get(&(namespace.into(), name.into()))
            .cloned();
        async move {
            found.ok_or_else(|| ClusterError::NotFound(format!("no Stack {namespace}/{name}")))
        }
        .boxed()
    }
    fn approve<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        hash: &'a str,
        approver: &'a str,
    ) -> BoxFuture<'a, Result<ClusterStack, ClusterError>> {
        let mut stacks = self.0.lock().unwrap();
        let result = match stacks.get_mut(&(namespace.into(), name.into())) {
            None => Err(ClusterError::NotFound(format!(
                "no Stack {namespace}/{name}"
            ))),
            Some(s) if s.pending_plan.as_deref() != Some(hash) => Err(ClusterError::Conflict(
                format!("waits for {:?}, not {hash}", s.pending_plan),
            )),
            Some(s) => {
                s.approved_by = Some(approver.to_string());
                Ok(s.clone())
            }
        };
        async move { result }.boxed()
    }
}

#[tokio::test]
async fn namespace_scopes_decide_who_sees_and_approves_a_stack_plan() {
    let work = tempfile::tempdir().unwrap();
    let stacks = Arc::new(Stacks::default());
    stacks.add("team", "web", Some("h1"));
    stacks.add("team", "idle", None);
    stacks.add("other", "db", Some("h2"));
    let state = AppState::open(
        work.path(),
        Arc::new(Files::new(
            work.path().join("konfig"),
            work.path().join("cloud"),
        )),
        Arc::new(InProcessQueue::default()),
        Some(stacks.clone()),
        kusion_server::cache::DEFAULT_TTL,
    )
    .unwrap();
    let mint = |subject: &str, scope: &str, role: Role| {
        state
            .tokens
            .mint(subject, [(scope.to_string(), role)].into(), None)
            .unwrap()
            .token
    };
    let admin = mint("root", "*", Role::Admin);
    let kim = mint("kim", "k8s/team", Role::Approver);
    let otto = mint("otto", "k8s/team", Role::Operator);
    let olga = mint("olga", "k8s/other", Role::Viewer);
    let project_only = mint("pat", "team", Role::Admin);
    let app = kusion_server::api::router(state.clone());

    // Listing: each caller sees the namespaces it holds a scope on, in order.
    let names = |body: &serde_json::Value| -> Vec<String> {
        body.as_array()
            .unwrap()
            .iter()
            .map(|s| {
                format!(
                    "{}/{}",
                    s["namespace"].as_str().unwrap(),
                    s["name"].as_str().unwrap()
                )
            })
            .collect()
    };
    let r = call(&app, "GET", "/api/v1/kubernetes/stacks", Some(&admin), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(names(&r.body), ["other/db", "team/idle", "team/web"]);
    let r = call(&app, "GET", "/api/v1/kubernetes/stacks", Some(&kim), None).await;
    assert_eq!(names(&r.body), ["team/idle", "team/web"]);
    let r = call(
        &app,
        "GET",
        "/api/v1/kubernetes/stacks",
        Some(&project_only),
        None,
    )
    .await;
    assert_eq!(
        names(&r.body),
        Vec::<String>::new(),
        "a project scope is not a namespace scope"
    );
    let web = "/api/v1/kubernetes/namespaces/team/stacks/web";
    let r = call(&app, "GET", web, Some(&olga), None).await;
    assert_problem(
        &r,
        StatusCode::NOT_FOUND,
        "a Stack in a namespace the caller cannot view",
    );
    let r = call(&app, "GET", web, Some(&otto), None).await;
    assert_eq!(r.body["pendingPlan"], "h1", "{}", r.body);

    // Approving: an approver on the namespace, naming the plan the Stack waits for.
    let approve = format!("{web}/approve");
    let body = |h: &str| format!(r#"{{"planHash":"{h}"}}"#);
    let r = call(&app, "POST", &approve, Some(&otto), Some(&body("h1"))).await;
    assert_problem(&r, StatusCode::FORBIDDEN, "an operator approving");
    let r = call(&app, "POST", &approve, Some(&olga), Some(&body("h1"))).await;
    assert_problem(&r, StatusCode::NOT_FOUND, "approving in another namespace");
    let r = call(&app, "POST", &approve, Some(&kim), Some(&body("stale"))).await;
    assert_problem(
        &r,
        StatusCode::CONFLICT,
        "approving a plan the Stack no longer waits for",
    );
    let r = call(
        &app,
        "POST",
        &approve,
        Some(&kim),
        Some(r#"{"planHash":" "}"#),
    )
    .await;
    assert_problem(&r, StatusCode::BAD_REQUEST, "an empty hash");
    let r = call(&app, "POST", &approve, Some(&kim), Some(r#"{"hash":"h1"}"#)).await;
    assert_problem(&r, StatusCode::BAD_REQUEST, "an unknown field");
    let r = call(
        &app,
        "POST",
        "/api/v1/kubernetes/namespaces/team/stacks/idle/approve",
        Some(&kim),
        Some(&body("h1")),
    )
    .await;
    assert_problem(&r, StatusCode::CONFLICT, "a Stack waiting for no plan");
    let r = call(&app, "POST", &approve, Some(&kim), Some(&body("h1"))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["approvedBy"], "kim");

    // The audit log names who approved which Stack.
    let r = call(&app, "GET", "/api/v1/audit", Some(&admin), None).await;
    assert!(
        r.body
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["subject"] == "kim" && e["target"] == approve && e["result"] == "ok"),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn a_server_given_no_cluster_says_so() {
    let work = tempfile::tempdir().unwrap();
    let state = AppState::open(
        work.path(),
        Arc::new(Files::new(
            work.path().join("konfig"),
            work.path().join("cloud"),
        )),
        Arc::new(InProcessQueue::default()),
        None,
        kusion_server::cache::DEFAULT_TTL,
    )
    .unwrap();
    let admin = state
        .tokens
        .mint("root", [("*".to_string(), Role::Admin)].into(), None)
        .unwrap()
        .token;
    let app = kusion_server::api::router(state.clone());
    let r = call(&app, "GET", "/api/v1/kubernetes/stacks", Some(&admin), None).await;
    assert_problem(&r, StatusCode::SERVICE_UNAVAILABLE, "no cluster");
    assert!(
        r.body["detail"].as_str().unwrap().contains("--kubeconfig"),
        "{}",
        r.body
    );
}
