//! Cancelling operations: one that waits (queued, or awaiting approval) ends at once with
//! nothing changed; a running apply starts no new step, finishes the one under way and ends
//! `cancelled` with its release; an ended one cannot be cancelled; viewers may not cancel.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{Files, assert_problem, call, wait_for, write_spec, write_stack};
use kusion_server::auth::Role;
use kusion_server::ops::EventKind;
use kusion_server::{AppState, InProcessQueue, OperationQueue};

/// `t:web` takes 1.5 s to create; `t:db` waits for it.
const SLOW: &str = "resources:\n- id: t:web\n  type: Test\n  attributes: {size: 1, delayMs: 1500}\n- id: t:db\n  type: Test\n  attributes: {size: 2}\n  dependsOn: [t:web]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_and_running_operations_cancel_and_ended_ones_do_not() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    write_stack(&root, "shop"); // requires approval
    write_spec(&root, "web", SLOW);
    let cloud = work.path().join("cloud");
    let source = Arc::new(Files::new(root.clone(), cloud.clone()));
    let queue = Arc::new(InProcessQueue::default());
    let state = AppState::open(
        &work.path().join("data"),
        source.clone(),
        queue.clone(),
        None,
        Duration::from_secs(2),
    )
    .unwrap();
    let mint = |subject: &str, role: Role| {
        let scopes = BTreeMap::from([("*".to_string(), role)]);
        state.tokens.mint(subject, scopes, None).unwrap().token
    };
    let alice = mint("alice", Role::Operator);
    let bob = mint("bob", Role::Approver);
    let vera = mint("vera", Role::Viewer);
    let app = kusion_server::api::router(state.clone());
    let start = |project: &'static str| {
        let (app, alice) = (app.clone(), alice.clone());
        async move {
            let path = format!("/api/v1/projects/{project}/stacks/dev/operations");
            let r = call(
                &app,
                "POST",
                &path,
                Some(&alice),
                Some(r#"{"kind":"apply"}"#),
            )
            .await;
            assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
            r.body["id"].as_str().unwrap().to_string()
        }
    };
    let cancel = |id: String, token: String| {
        let app = app.clone();
        async move {
            let path = format!("/api/v1/operations/{id}/cancel");
            call(&app, "POST", &path, Some(&token), Some("{}")).await
        }
    };

    // Queued (no worker yet): cancelled at once; a viewer may not.
    let queued = start("web").await;
    let r = cancel(queued.clone(), vera.clone()).await;
    assert_problem(&r, StatusCode::FORBIDDEN, "a viewer cancelling");
    let r = cancel(queued.clone(), alice.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"], "cancelled");
    assert_eq!(r.body["cancelledBy"], "alice");

    tokio::spawn(kusion_server::worker::run(
        queue.clone(),
        source.clone(),
        "w".into(),
    ));

    // Awaiting approval: cancelled; approving it afterwards is refused.
    let waiting = start("shop").await;
    wait_for(&app, &alice, &waiting, "awaiting_approval").await;
    let r = cancel(waiting.clone(), bob.clone()).await;
    assert_eq!(r.body["status"], "cancelled", "{}", r.body);
    let approve = format!("/api/v1/operations/{waiting}/approve");
    let r = call(&app, "POST", &approve, Some(&bob), Some("{}")).await;
    assert_problem(&r, StatusCode::CONFLICT, "approving a cancelled operation");

    // Running: the step under way finishes, the one after it never starts.
    let running = start("web").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !queue
        .events(&running, 0)
        .unwrap()
        .iter()
        .any(|e| matches!(&e.kind, EventKind::StepStarted { id, .. } if id == "t:web"))
    {
        assert!(Instant::now() < deadline, "t:web never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = cancel(running.clone(), alice.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["cancelledBy"], "alice", "{}", r.body);
    let done = wait_for(&app, &alice, &running, "cancelled").await;
    assert_eq!(done["cancelledBy"], "alice", "{done}");
    assert!(
        done["error"]
            .as_str()
            .unwrap_or_default()
            .contains("interrupted")
            || done["revision"].is_u64(),
        "{done}"
    );
    let created: Vec<String> = std::fs::read_dir(&cloud)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        created.iter().any(|f| f.contains("web")),
        "the step under way finished: {created:?}"
    );
    assert!(
        !created.iter().any(|f| f.contains("db")),
        "no step started after the cancel: {created:?}"
    );
    let events = queue.events(&running, 0).unwrap();
    let last = serde_json::to_string(events.last().unwrap()).unwrap();
    assert!(last.contains("cancelled by alice"), "{last}");

    // Ended: 409.
    let r = cancel(running.clone(), alice.clone()).await;
    assert_problem(&r, StatusCode::CONFLICT, "cancelling an ended operation");
    // The queued one never ran.
    let r = call(
        &app,
        "GET",
        &format!("/api/v1/operations/{queued}"),
        Some(&alice),
        None,
    )
    .await;
    assert_eq!(r.body["status"], "cancelled", "{}", r.body);
    assert!(r.body["worker"].is_null(), "{}", r.body);
}
