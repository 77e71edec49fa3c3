//! A client that keeps presenting unknown tokens is answered 429 (with `Retry-After`) once it is
//! past the limit, without its tokens being looked up; a good token from the same address still
//! works. Served over TCP, so the server sees the client's address (the limit being per address
//! is the unit test's in `limit.rs`).

mod common;

use std::sync::Arc;

use common::{Files, write_stack};
use kusion_server::auth::Role;
use kusion_server::limit::FAILURE_LIMIT;
use kusion_server::{AppState, InProcessQueue};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tokens_past_the_limit_get_429_and_good_tokens_still_work() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    write_stack(&root, "inv");
    let source = Arc::new(Files::new(root, work.path().join("cloud")));
    let state = AppState::open(
        &work.path().join("data"),
        source,
        Arc::new(InProcessQueue::default()),
        None,
        std::time::Duration::ZERO,
    )
    .unwrap();
    let good = state
        .tokens
        .mint("alice", [("*".to_string(), Role::Viewer)].into(), None)
        .unwrap()
        .token;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = kusion_server::api::router(state);
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await
    });
    let statuses = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let get = |token: &str| {
            let r = agent
                .get(format!("{base}/api/v1/projects"))
                .header("Authorization", format!("Bearer {token}"))
                .call()
                .unwrap();
            let retry = r
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            (r.status().as_u16(), retry)
        };
        let mut seen = Vec::new();
        for n in 0..FAILURE_LIMIT {
            seen.push(get(&format!("kusion_guess-{n}")));
        }
        let limited = get("kusion_guess-last");
        let still_good = get(&good);
        (seen, limited, still_good)
    })
    .await
    .unwrap();
    let (seen, limited, still_good) = statuses;
    assert!(seen.iter().all(|(s, _)| *s == 401), "{seen:?}");
    assert_eq!(limited.0, 429, "{limited:?}");
    let retry: u64 = limited.1.expect("Retry-After").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(still_good.0, 200, "a good token from the same address");
}
