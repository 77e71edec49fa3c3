//! The read caches change no result: a server caching listings and histories answers exactly
//! as one reading the checkout and state on every request, over a seeded sequence of edits,
//! new stacks, previews and applies (histories at once after an operation finishes here; the
//! listing within its TTL). And the cache does cache: repeated reads within the TTL list the
//! checkout once.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{Files, call, write_spec, write_stack};
use kusion_server::auth::Role;
use kusion_server::{AppState, InProcessQueue};
use serde_json::Value;

const TTL: Duration = Duration::from_millis(300);

struct Server {
    app: axum::Router,
    token: String,
}

fn server(
    dir: &std::path::Path,
    source: &Arc<Files>,
    queue: &Arc<InProcessQueue>,
    ttl: Duration,
) -> Server {
    let state = AppState::open(dir, source.clone(), queue.clone(), None, ttl).unwrap();
    let token = state
        .tokens
        .mint("root", [("*".to_string(), Role::Admin)].into(), None)
        .unwrap()
        .token;
    Server {
        app: kusion_server::api::router(state),
        token,
    }
}

async fn get(s: &Server, path: &str) -> Value {
    let r = call(&s.app, "GET", path, Some(&s.token), None).await;
    assert_eq!(r.status, StatusCode::OK, "GET {path}: {}", r.body);
    r.body
}

/// Every read the caches serve, from both servers: they must agree.
async fn assert_same(cached: &Server, plain: &Server, what: &str) {
    let projects = get(plain, "/api/v1/projects").await;
    assert_eq!(
        get(cached, "/api/v1/projects").await,
        projects,
        "{what}: projects"
    );
    for p in projects.as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let path = format!("/api/v1/projects/{name}/stacks/dev/releases");
        assert_eq!(
            get(cached, &path).await,
            get(plain, &path).await,
            "{what}: {path}"
        );
    }
}

async fn run(s: &Server, project: &str, kind: &str) {
    let r = call(
        &s.app,
        "POST",
        &format!("/api/v1/projects/{project}/stacks/dev/operations"),
        Some(&s.token),
        Some(&format!(r#"{{"kind":"{kind}"}}"#)),
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let op = get(s, &format!("/api/v1/operations/{id}")).await;
        match op["status"].as_str().unwrap() {
            "succeeded" => return,
            "queued" | "running" => {}
            other => panic!("{kind} on {project} ended {other}: {op}"),
        }
        assert!(
            Instant::now() < deadline,
            "{kind} on {project} never finished: {op}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_answer_as_uncached_reads_do() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    write_stack(&root, "p0");
    let source = Arc::new(Files::new(root.clone(), work.path().join("cloud")));
    let queue = Arc::new(InProcessQueue::default());
    tokio::spawn(kusion_server::worker::run(
        queue.clone(),
        source.clone(),
        "w".into(),
    ));
    let cached = server(&work.path().join("a"), &source, &queue, TTL);
    let plain = server(&work.path().join("b"), &source, &queue, Duration::ZERO);

    // Within the TTL, many reads list the checkout once.
    let before = source.listed.load(Ordering::SeqCst);
    for _ in 0..50 {
        get(&cached, "/api/v1/projects").await;
    }
    let listed = source.listed.load(Ordering::SeqCst) - before;
    assert!(listed <= 2, "50 reads listed the checkout {listed} times");

    let mut seed: u64 = 0x5eed_2026;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut projects = vec!["p0".to_string()];
    for round in 0..24 {
        let target = projects[next(projects.len() as u64) as usize].clone();
        // Both servers take requests: whichever starts an operation, both must see it.
        let via = if next(2) == 0 { &cached } else { &plain };
        match next(4) {
            0 => {
                let name = format!("p{}", projects.len());
                write_stack(&root, &name);
                projects.push(name);
                tokio::time::sleep(TTL + Duration::from_millis(50)).await;
            }
            1 => {
                let size = next(5);
                let extra = if next(2) == 0 {
                    "- id: t:cache\n  type: Test\n  attributes: {size: 9}\n"
                } else {
                    ""
                };
                write_spec(
                    &root,
                    &target,
                    &format!(
                        "resources:\n- id: t:web\n  type: Test\n  attributes: {{size: {size}}}\n{extra}"
                    ),
                );
                run(via, &target, "apply").await;
            }
            2 => run(via, &target, "preview").await,
            _ => run(via, &target, "apply").await,
        }
        assert_same(&cached, &plain, &format!("round {round}")).await;
    }
}
