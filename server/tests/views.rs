//! The read views the console draws, over the real engine (kernel plan, apply, local state)
//! with the fake-cloud runtime: the resource graph of the spec and of a release, policy
//! findings as a preview evaluates them, drift against the fake cloud, two releases compared
//! field by field; bad input answered with problem documents; and the console's static shell
//! served without a token, under a Content-Security-Policy.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{Files, assert_problem, call, write_spec, write_stack};
use kusion_server::auth::Role;
use kusion_server::{AppState, InProcessQueue};
use serde_json::Value;

struct Fixture {
    _work: tempfile::TempDir,
    cloud: std::path::PathBuf,
    root: std::path::PathBuf,
    app: axum::Router,
    alice: String,
    bob: String,
    outsider: String,
}

fn fixture() -> Fixture {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    write_stack(&root, "shop");
    write_stack(&root, "other");
    let cloud = work.path().join("cloud");
    let source = Arc::new(Files::new(root.clone(), cloud.clone()).with_size_policy());
    let queue = Arc::new(InProcessQueue::default());
    let state = AppState::open(
        &work.path().join("data"),
        source.clone(),
        queue.clone(),
        None,
        Duration::ZERO,
    )
    .unwrap();
    let mint = |subject: &str, project: &str, role: Role| {
        let scopes = BTreeMap::from([(project.to_string(), role)]);
        state.tokens.mint(subject, scopes, None).unwrap().token
    };
    let alice = mint("alice", "shop", Role::Operator);
    let bob = mint("bob", "shop", Role::Approver);
    let outsider = mint("olga", "other", Role::Admin);
    tokio::spawn(kusion_server::worker::run(queue, source, "w".into()));
    Fixture {
        app: kusion_server::api::router(state),
        cloud,
        root,
        _work: work,
        alice,
        bob,
        outsider,
    }
}

async fn get(f: &Fixture, path: &str, token: &str) -> common::Reply {
    call(&f.app, "GET", path, Some(token), None).await
}

async fn wait_for(f: &Fixture, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = get(f, &format!("/api/v1/operations/{id}"), &f.alice).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        if r.body["status"] == status {
            return r.body;
        }
        assert!(Instant::now() < deadline, "never {status}: {}", r.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An approved apply of shop/dev; its release number.
async fn apply(f: &Fixture) -> u64 {
    let r = call(
        &f.app,
        "POST",
        "/api/v1/projects/shop/stacks/dev/operations",
        Some(&f.alice),
        Some(r#"{"kind":"apply"}"#),
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    wait_for(f, &id, "awaiting_approval").await;
    let r = call(
        &f.app,
        "POST",
        &format!("/api/v1/operations/{id}/approve"),
        Some(&f.bob),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    wait_for(f, &id, "succeeded").await["revision"]
        .as_u64()
        .unwrap()
}

const STACK: &str = "/api/v1/projects/shop/stacks/dev";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_policy_drift_and_compare_over_the_real_engine() {
    let f = fixture();

    // The graph of the compiled spec: t:db depends on t:web.
    let r = get(&f, &format!("{STACK}/graph"), &f.alice).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["source"], "spec");
    let layers: BTreeMap<String, (u64, String)> = r.body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap().to_string(),
                (
                    n["layer"].as_u64().unwrap(),
                    n["kind"].as_str().unwrap().into(),
                ),
            )
        })
        .collect();
    assert_eq!(layers["t:web"], (0, "Test".to_string()));
    assert_eq!(layers["t:db"], (1, "Test".to_string()));
    assert_eq!(
        r.body["edges"],
        serde_json::json!([{"from": "t:web", "to": "t:db"}])
    );

    // Policy findings as the preview evaluates them: t:db has size 2.
    let r = get(&f, &format!("{STACK}/policy"), &f.alice).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["policies"], serde_json::json!(["sizes"]));
    assert_eq!(r.body["blocked"], false);
    assert_eq!(r.body["plan"]["create"], 2, "{}", r.body);
    let findings = r.body["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{}", r.body);
    assert_eq!(findings[0]["resourceId"], "t:db");
    assert_eq!(findings[0]["severity"], "warn");
    assert_eq!(findings[0]["policy"], "sizes");

    // Nothing applied yet: drift has nothing to read.
    let r = get(&f, &format!("{STACK}/drift"), &f.alice).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"], "empty", "{}", r.body);

    // Release 1, then an edited spec applied as release 2.
    assert_eq!(apply(&f).await, 1);
    let r = get(&f, &format!("{STACK}/drift"), &f.alice).await;
    assert_eq!(r.body["status"], "in_sync", "{}", r.body);
    assert_eq!(r.body["summary"]["inSync"], 2, "{}", r.body);
    write_spec(
        &f.root,
        "shop",
        "resources:\n- id: t:web\n  type: Test\n  attributes: {size: 3}\n- id: t:db\n  type: Test\n  attributes: {size: 2}\n  dependsOn: [t:web]\n- id: t:cache\n  type: Test\n  attributes: {size: 1}\n  dependsOn: [t:db]\n",
    );
    assert_eq!(apply(&f).await, 2);

    let r = get(
        &f,
        &format!("{STACK}/releases/compare?from=1&to=2"),
        &f.alice,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["summary"],
        serde_json::json!({"added": 1, "removed": 0, "changed": 1, "unchanged": 1})
    );
    let web = r.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "t:web")
        .unwrap()
        .clone();
    assert_eq!(web["change"], "changed");
    assert_eq!(
        web["changes"],
        serde_json::json!([{"path": "attributes.size", "kind": "changed", "old": 1, "new": 3}])
    );
    let back = get(
        &f,
        &format!("{STACK}/releases/compare?from=2&to=1"),
        &f.alice,
    )
    .await;
    assert_eq!(back.body["summary"]["removed"], 1, "{}", back.body);

    // The graph of release 1 is the two-node one; the spec's now has three layers.
    let r = get(&f, &format!("{STACK}/graph?revision=1"), &f.alice).await;
    assert_eq!(r.body["source"], "release");
    assert_eq!(r.body["nodes"].as_array().unwrap().len(), 2, "{}", r.body);
    let r = get(&f, &format!("{STACK}/graph"), &f.alice).await;
    let cache = r.body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "t:cache")
        .unwrap()
        .clone();
    assert_eq!(cache["layer"], 2);

    // Someone changes the cloud behind kusion's back: drift says which field.
    let web_file = std::fs::read_dir(&f.cloud)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("t_web-")
        })
        .unwrap();
    let mut object: Value = serde_json::from_slice(&std::fs::read(&web_file).unwrap()).unwrap();
    object["attributes"]["size"] = 7.into();
    std::fs::write(&web_file, object.to_string()).unwrap();
    let r = get(&f, &format!("{STACK}/drift"), &f.alice).await;
    assert_eq!(r.body["status"], "drifted", "{}", r.body);
    let drifted = r.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "t:web")
        .unwrap()
        .clone();
    assert_eq!(drifted["status"], "drifted");
    assert_eq!(drifted["changes"][0]["path"], "size", "{drifted}");
    assert_eq!(drifted["changes"][0]["new"], 7);

    // Bad input: problem documents, never a panic.
    for (path, status, what) in [
        (
            "/releases/compare?from=1",
            StatusCode::BAD_REQUEST,
            "no `to`",
        ),
        (
            "/releases/compare?from=a&to=2",
            StatusCode::BAD_REQUEST,
            "a revision that is not a number",
        ),
        (
            "/releases/compare?from=1&to=9",
            StatusCode::NOT_FOUND,
            "a release that does not exist",
        ),
        (
            "/releases/compare?from=0&to=1",
            StatusCode::NOT_FOUND,
            "release 0",
        ),
        (
            "/graph?revision=9",
            StatusCode::NOT_FOUND,
            "the graph of a release that does not exist",
        ),
        (
            "/graph?revision=-1",
            StatusCode::BAD_REQUEST,
            "a negative revision",
        ),
        (
            "/graph?colour=red",
            StatusCode::BAD_REQUEST,
            "an unknown parameter",
        ),
    ] {
        let r = get(&f, &format!("{STACK}{path}"), &f.alice).await;
        assert_problem(&r, status, what);
    }
    let r = get(&f, "/api/v1/projects/shop/stacks/nope/graph", &f.alice).await;
    assert_problem(&r, StatusCode::NOT_FOUND, "an unknown stack");
    write_spec(
        &f.root,
        "shop",
        "resources:\n- id: a\n  type: Test\n  dependsOn: [b]\n- id: b\n  type: Test\n  dependsOn: [a]\n",
    );
    let r = get(&f, &format!("{STACK}/graph"), &f.alice).await;
    assert_problem(&r, StatusCode::UNPROCESSABLE_ENTITY, "a cycle");

    // Another project's caller sees none of it.
    for view in ["graph", "policy", "drift", "releases/compare?from=1&to=2"] {
        let r = get(&f, &format!("{STACK}/{view}"), &f.outsider).await;
        assert_problem(&r, StatusCode::FORBIDDEN, view);
    }

    // Who am I: subject and scopes, never the token.
    let r = get(&f, "/api/v1/session", &f.bob).await;
    assert_eq!(r.body["subject"], "bob");
    assert_eq!(r.body["scopes"]["shop"], "approver");
    assert!(!r.body.to_string().contains(&f.bob));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shell_is_public_with_a_strict_csp_and_data_needs_a_token() {
    let f = fixture();
    for path in [
        "/",
        "/ui/",
        "/ui/app.js",
        "/ui/api.js",
        "/ui/graph.js",
        "/ui/style.css",
    ] {
        let request = axum::http::Request::builder()
            .uri(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = tower::ServiceExt::oneshot(f.app.clone(), request)
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let headers = response.headers();
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'none'"), "{path}: {csp}");
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe"),
            "{csp}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(headers.contains_key("x-request-id"));
        let kind = headers["content-type"].to_str().unwrap();
        let expected = if path.ends_with(".js") {
            "text/javascript"
        } else if path.ends_with(".css") {
            "text/css"
        } else {
            "text/html"
        };
        assert!(kind.starts_with(expected), "{path}: {kind}");
    }
    let r = call(&f.app, "GET", "/ui/secrets.json", None, None).await;
    assert_problem(
        &r,
        StatusCode::NOT_FOUND,
        "a file the console does not have",
    );
    let r = call(&f.app, "GET", "/ui/../tokens.json", None, None).await;
    assert!(r.status.is_client_error(), "{}", r.status);
    let r = call(&f.app, "GET", "/ui", None, None).await;
    assert_eq!(r.status, StatusCode::PERMANENT_REDIRECT);
    // The shell holds no data: the stacks come only through the API, with a token.
    let r = call(&f.app, "GET", "/", None, None).await;
    assert!(!r.body.as_str().unwrap().contains("shop"));
    let r = call(&f.app, "GET", "/api/v1/projects", None, None).await;
    assert_problem(&r, StatusCode::UNAUTHORIZED, "the API behind the console");
}
