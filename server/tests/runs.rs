//! The day-2 run history of a stack over the API: the records the kernel keeps for
//! `kusionctl run` (a refused run and one that ran), read as `kusionctl run --history` reads
//! them, only by callers who may view the project.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use axum::http::StatusCode;
use common::{Files, assert_problem, call, write_stack};
use kusion_kernel::ops::OpsSpec;
use kusion_kernel::ops::record::{self, RecordedRun};
use kusion_kernel::registry::Registry;
use kusion_kernel::state::LeaseHolder;
use kusion_server::auth::Role;
use kusion_server::{AppState, InProcessQueue, StackSource};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stacks_runs_are_read_by_its_viewers_only() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    write_stack(&root, "shop");
    write_stack(&root, "other");
    let source = Arc::new(Files::new(root.clone(), work.path().join("cloud")));
    let shop = source
        .stacks()
        .unwrap()
        .into_iter()
        .find(|s| s.project == "shop")
        .unwrap();
    let store = source.state(&shop).unwrap();

    // Run 1 refused before acting; run 2 ran (nothing to act on) and succeeded.
    let spec = OpsSpec::from_output(&serde_json::json!({"operations": [
        {"name": "restart", "kind": "Restart", "targets": ["east/v1:Pod:ns:web-1"]}
    ]}))
    .unwrap();
    let holder = LeaseHolder::current("run");
    let mut refused = record::new_record(
        &spec,
        "AppRecovery.k",
        vec!["app=web".into()],
        holder.clone(),
    );
    let problem = "1 target(s) cannot be acted on: east/v1:Pod:ns:web-1: not found";
    let refused_targets = vec![(
        "restart".to_string(),
        "east/v1:Pod:ns:web-1".to_string(),
        "not found".to_string(),
    )];
    record::record_refused(
        store.as_ref(),
        &mut refused,
        &spec,
        problem,
        &refused_targets,
    )
    .unwrap();
    let empty = OpsSpec::from_output(&serde_json::json!({"operations": []})).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let run = RecordedRun::start(
        store.clone(),
        record::new_record(&empty, "Noop.k", vec![], holder),
        Duration::ZERO,
        cancel.clone(),
    )
    .await
    .unwrap();
    run.execute(&empty, &Registry::new(), &BTreeMap::new(), None, cancel)
        .await
        .unwrap();

    let state = AppState::open(
        &work.path().join("data"),
        source.clone(),
        Arc::new(InProcessQueue::default()),
        None,
        Duration::from_secs(2),
    )
    .unwrap();
    let mint = |subject: &str, project: &str, role: Role| {
        let scopes = BTreeMap::from([(project.to_string(), role)]);
        state.tokens.mint(subject, scopes, None).unwrap().token
    };
    let viewer = mint("vera", "shop", Role::Viewer);
    let outsider = mint("olga", "other", Role::Admin);
    let app = kusion_server::api::router(state.clone());

    let r = call(
        &app,
        "GET",
        "/api/v1/projects/shop/stacks/dev/runs",
        Some(&viewer),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let runs = r.body.as_array().unwrap();
    assert_eq!(runs.len(), 2, "{}", r.body);
    assert_eq!(runs[0]["id"], 1);
    assert_eq!(runs[0]["status"], "failed");
    assert_eq!(runs[0]["program"], "AppRecovery.k");
    assert_eq!(runs[0]["args"][0], "app=web");
    assert_eq!(runs[0]["targets"][0]["outcome"], "refused");
    assert_eq!(
        runs[0]["notes"][0],
        format!("refused before acting: {problem}")
    );
    assert_eq!(runs[1]["status"], "succeeded");
    assert!(runs[1]["finishedAt"].is_u64(), "{}", runs[1]);

    let r = call(
        &app,
        "GET",
        "/api/v1/projects/shop/stacks/dev/runs/2",
        Some(&viewer),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["program"], "Noop.k");
    let r = call(
        &app,
        "GET",
        "/api/v1/projects/shop/stacks/dev/runs/9",
        Some(&viewer),
        None,
    )
    .await;
    assert_problem(&r, StatusCode::NOT_FOUND, "no such run");
    let r = call(
        &app,
        "GET",
        "/api/v1/projects/other/stacks/dev/runs",
        Some(&viewer),
        None,
    )
    .await;
    assert!(
        matches!(r.status, StatusCode::FORBIDDEN | StatusCode::NOT_FOUND),
        "another project's runs: {}",
        r.status
    );
    let r = call(
        &app,
        "GET",
        "/api/v1/projects/shop/stacks/dev/runs",
        Some(&outsider),
        None,
    )
    .await;
    assert!(
        matches!(r.status, StatusCode::FORBIDDEN | StatusCode::NOT_FOUND),
        "an admin of another project: {}",
        r.status
    );
    let r = call(
        &app,
        "GET",
        "/api/v1/projects/shop/stacks/dev/runs",
        None,
        None,
    )
    .await;
    assert_problem(&r, StatusCode::UNAUTHORIZED, "no token");
}
