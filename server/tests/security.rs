//! Who may do what, over every route the OpenAPI document lists: no token → 401, an expired
//! token → 401, a viewer on any mutating route → 403; an approval by a second person; event
//! streams scoped to what the caller may view; problem documents with the request ID; and no
//! token in the logs or the audit log. The stacks run on the real engine (kernel plan, apply,
//! local state) with the fake-cloud test runtime.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use common::{Files, assert_problem, call, wait_for, write_stack};
use kusion_server::auth::Role;
use kusion_server::{AppState, InProcessQueue};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_missing_expired_and_underprivileged_tokens() {
    let logs = common::capture_logs();

    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    write_stack(&root, "shop");
    write_stack(&root, "other");
    let source = Arc::new(Files::new(root.clone(), work.path().join("cloud")));
    let queue = Arc::new(InProcessQueue::default());
    let data = work.path().join("data");
    let state = AppState::open(
        &data,
        source.clone(),
        queue.clone(),
        None,
        Duration::from_secs(2),
    )
    .unwrap();
    let mint = |subject: &str, scopes: &[(&str, Role)], ttl: Option<Duration>| {
        let scopes: BTreeMap<String, Role> =
            scopes.iter().map(|(p, r)| (p.to_string(), *r)).collect();
        state.tokens.mint(subject, scopes, ttl).unwrap().token
    };
    let admin = mint("root", &[("*", Role::Admin)], None);
    let viewer = mint("vera", &[("*", Role::Viewer)], None);
    let alice = mint("alice", &[("shop", Role::Operator)], None);
    let bob = mint("bob", &[("shop", Role::Approver)], None);
    let outsider = mint("olga", &[("other", Role::Admin)], None);
    let expired = mint("eve", &[("*", Role::Admin)], Some(Duration::ZERO));
    let tokens = [&admin, &viewer, &alice, &bob, &outsider, &expired];
    tokio::spawn(kusion_server::worker::run(
        queue.clone(),
        source.clone(),
        "w".into(),
    ));
    let app = kusion_server::api::router(state.clone());

    // An apply on a stack requiring approval plans and waits.
    let r = call(
        &app,
        "POST",
        "/api/v1/projects/shop/stacks/dev/operations",
        Some(&alice),
        Some(r#"{"kind":"apply"}"#),
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let op = r.body["id"].as_str().unwrap().to_string();
    let waiting = wait_for(&app, &alice, &op, "awaiting_approval").await;
    assert_eq!(waiting["plan"]["summary"]["create"], 2, "{waiting}");
    assert!(
        !work.path().join("cloud").exists()
            || std::fs::read_dir(work.path().join("cloud"))
                .unwrap()
                .next()
                .is_none(),
        "nothing created before approval"
    );

    // Every route of the document.
    let doc = call(&app, "GET", "/openapi.json", Some(&viewer), None).await;
    assert_eq!(doc.status, StatusCode::OK);
    assert_eq!(doc.body["openapi"].as_str().map(|v| &v[..2]), Some("3."));
    let paths = doc.body["paths"].as_object().unwrap();
    assert!(paths.len() >= 23, "{}", paths.len());
    for view in ["graph", "policy", "drift", "releases/compare"] {
        assert!(
            paths.contains_key(&format!(
                "/api/v1/projects/{{project}}/stacks/{{stack}}/{view}"
            )),
            "{view} is documented"
        );
    }
    let mut checked = 0;
    for (template, item) in paths {
        let path = template
            .replace("{project}", "shop")
            .replace("{stack}", "dev")
            .replace("{revision}", "1")
            .replace("{run}", "1")
            .replace("{id}", &op)
            .replace("{namespace}", "team")
            .replace("{name}", "web");
        for method in item.as_object().unwrap().keys() {
            let method = method.to_uppercase();
            let body = (method == "POST").then_some("{}");
            if template == "/healthz" || template == "/metrics" {
                let r = call(&app, &method, &path, None, None).await;
                assert_eq!(
                    r.status,
                    StatusCode::OK,
                    "{method} {template} needs no token"
                );
                continue;
            }
            let r = call(&app, &method, &path, None, body).await;
            assert_problem(
                &r,
                StatusCode::UNAUTHORIZED,
                &format!("{method} {template} without a token"),
            );
            let r = call(&app, &method, &path, Some("kusion_not-a-token"), body).await;
            assert_problem(
                &r,
                StatusCode::UNAUTHORIZED,
                &format!("{method} {template} with an unknown token"),
            );
            let r = call(&app, &method, &path, Some(&expired), body).await;
            assert_problem(
                &r,
                StatusCode::UNAUTHORIZED,
                &format!("{method} {template} with an expired token"),
            );
            if method != "GET" {
                let r = call(&app, &method, &path, Some(&viewer), body).await;
                assert_problem(
                    &r,
                    StatusCode::FORBIDDEN,
                    &format!("{method} {template} as a viewer"),
                );
            }
            // Reads too: a caller with no role on the project gets nothing of it.
            if template.contains("{project}") {
                let r = call(&app, &method, &path, Some(&outsider), body).await;
                assert_problem(
                    &r,
                    StatusCode::FORBIDDEN,
                    &format!("{method} {template} by a caller without access to the project"),
                );
            } else if template.starts_with("/api/v1/operations/{id}") {
                let r = call(&app, &method, &path, Some(&outsider), body).await;
                assert_problem(
                    &r,
                    StatusCode::NOT_FOUND,
                    &format!("{method} {template} of a project the caller cannot view"),
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 24, "{checked} routes checked");

    // Bad input is a problem document, not a panic.
    let r = call(
        &app,
        "POST",
        "/api/v1/projects/shop/stacks/dev/operations",
        Some(&alice),
        Some("{not json"),
    )
    .await;
    assert_problem(&r, StatusCode::BAD_REQUEST, "bad JSON");
    let r = call(
        &app,
        "POST",
        "/api/v1/projects/shop/stacks/dev/operations",
        Some(&alice),
        Some(r#"{"kind":"explode"}"#),
    )
    .await;
    assert_problem(&r, StatusCode::BAD_REQUEST, "unknown kind");
    let r = call(
        &app,
        "POST",
        "/api/v1/projects/shop/stacks/nope/operations",
        Some(&alice),
        Some(r#"{"kind":"preview"}"#),
    )
    .await;
    assert_problem(&r, StatusCode::NOT_FOUND, "unknown stack");
    let r = call(
        &app,
        "GET",
        "/api/v1/projects/shop/stacks/dev/releases/abc",
        Some(&alice),
        None,
    )
    .await;
    assert_problem(
        &r,
        StatusCode::BAD_REQUEST,
        "a revision that is not a number",
    );
    let r = call(
        &app,
        "GET",
        "/api/v1/projects/shop/stacks/dev/releases/7",
        Some(&alice),
        None,
    )
    .await;
    assert_problem(&r, StatusCode::NOT_FOUND, "a release that does not exist");
    let r = call(&app, "GET", "/api/v1/nowhere", Some(&alice), None).await;
    assert_problem(&r, StatusCode::NOT_FOUND, "an unknown route");
    let r = call(
        &app,
        "POST",
        "/api/v1/tokens",
        Some(&admin),
        Some(r#"{"subject":"x","scopes":{"*":"root"}}"#),
    )
    .await;
    assert_problem(&r, StatusCode::BAD_REQUEST, "an unknown role");

    // Scopes: another project's operation and its events do not exist for this caller; an
    // operator cannot approve; the requester cannot approve their own operation.
    let r = call(
        &app,
        "GET",
        &format!("/api/v1/operations/{op}/events"),
        Some(&outsider),
        None,
    )
    .await;
    assert_problem(
        &r,
        StatusCode::NOT_FOUND,
        "events of a project the caller cannot view",
    );
    let r = call(
        &app,
        "GET",
        &format!("/api/v1/operations/{op}"),
        Some(&outsider),
        None,
    )
    .await;
    assert_problem(
        &r,
        StatusCode::NOT_FOUND,
        "an operation of a project the caller cannot view",
    );
    let r = call(&app, "GET", "/api/v1/projects", Some(&outsider), None).await;
    assert_eq!(
        r.body.as_array().unwrap().len(),
        1,
        "only `other`: {}",
        r.body
    );
    let r = call(
        &app,
        "POST",
        &format!("/api/v1/operations/{op}/approve"),
        Some(&alice),
        None,
    )
    .await;
    assert_problem(&r, StatusCode::FORBIDDEN, "an operator approving");
    let self_approver = mint("alice", &[("shop", Role::Approver)], None);
    let r = call(
        &app,
        "POST",
        &format!("/api/v1/operations/{op}/approve"),
        Some(&self_approver),
        None,
    )
    .await;
    assert_problem(&r, StatusCode::FORBIDDEN, "approving one's own operation");
    assert!(
        r.body["detail"]
            .as_str()
            .unwrap()
            .contains("different person"),
        "{}",
        r.body
    );
    let r = call(&app, "GET", "/api/v1/audit", Some(&bob), None).await;
    assert_problem(&r, StatusCode::FORBIDDEN, "the audit log needs admin");

    // A second person approves; the apply runs and records a release.
    let r = call(
        &app,
        "POST",
        &format!("/api/v1/operations/{op}/approve"),
        Some(&bob),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["approvedBy"], "bob");
    let done = wait_for(&app, &alice, &op, "succeeded").await;
    assert_eq!(done["revision"], 1, "{done}");
    let r = call(
        &app,
        "POST",
        &format!("/api/v1/operations/{op}/approve"),
        Some(&bob),
        None,
    )
    .await;
    assert_problem(&r, StatusCode::CONFLICT, "approving twice");
    let events = call(
        &app,
        "GET",
        &format!("/api/v1/operations/{op}/events"),
        Some(&viewer),
        None,
    )
    .await;
    assert_eq!(events.status, StatusCode::OK);
    let text = events.body.as_str().unwrap().to_string();
    assert!(text.contains("event: step_finished"), "{text}");
    assert!(
        text.contains("\"status\":\"awaiting_approval\"") && text.contains("approved by bob"),
        "{text}"
    );
    let r = call(
        &app,
        "GET",
        "/api/v1/projects/shop/stacks/dev/releases",
        Some(&viewer),
        None,
    )
    .await;
    assert_eq!(r.body[0]["resources"], 2, "{}", r.body);

    // Tokens: minted once, listed without secret or hash, revoked.
    let r = call(
        &app,
        "POST",
        "/api/v1/tokens",
        Some(&admin),
        Some(r#"{"subject":"ci","scopes":{"shop":"operator"},"ttlSeconds":60}"#),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let ci = r.body["token"].as_str().unwrap().to_string();
    let ci_id = r.body["id"].as_str().unwrap().to_string();
    let listed = call(&app, "GET", "/api/v1/tokens", Some(&admin), None).await;
    assert!(!listed.body.to_string().contains(&ci) && !listed.body.to_string().contains("hash"));
    let r = call(
        &app,
        "DELETE",
        &format!("/api/v1/tokens/{ci_id}"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = call(&app, "GET", "/api/v1/projects", Some(&ci), None).await;
    assert_problem(&r, StatusCode::UNAUTHORIZED, "a revoked token");

    // The audit log: who, what, result; never a token.
    let audit = call(&app, "GET", "/api/v1/audit", Some(&admin), None).await;
    let entries = audit.body.as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["subject"] == "bob"
            && e["action"] == "/api/v1/operations/{id}/approve"
            && e["result"] == "ok"),
        "{}",
        audit.body
    );
    assert!(
        entries
            .iter()
            .any(|e| e["subject"].is_null() && e["result"] == "denied")
    );
    let audit_text = std::fs::read_to_string(data.join("audit.jsonl")).unwrap();
    let log_text = logs.text();
    assert!(!log_text.is_empty(), "the server logged something");
    for t in tokens
        .iter()
        .map(|t| t.as_str())
        .chain([ci.as_str(), self_approver.as_str()])
    {
        assert!(!audit_text.contains(t), "a token in the audit log");
        assert!(!log_text.contains(t), "a token in the logs");
        assert!(
            !std::fs::read_to_string(data.join("tokens.json"))
                .unwrap()
                .contains(t),
            "a token at rest"
        );
    }

    let metrics = call(&app, "GET", "/metrics", None, None).await;
    let text = metrics.body.as_str().unwrap();
    assert!(
        text.contains("kusion_http_requests_total{method=\"POST\",status=\"401\"}"),
        "{text}"
    );
    assert!(
        text.contains("kusion_operations{status=\"succeeded\"} 1"),
        "{text}"
    );
}
