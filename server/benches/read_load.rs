//! 200 concurrent API clients reading the stack list and a release history (issue 20's load bar:
//! p99 under 50 ms), over real TCP against the router served in this process, on a checkout of
//! 50 stacks whose first has 20 releases made by the real engine (fake-cloud runtime). Run with
//! `cargo bench -p kusion-server --bench read_load`.
//!
//! The clients run two ways: 200 connections driven from one thread (async, as a load generator
//! does: the latency is the server's, not the clients' own scheduling), and 200 client threads
//! each with its own blocking connection (the clients then compete with the server for the same
//! cores). No other API server serves Konfig stacks, so the figure printed next to ours is this
//! server with its read caches off (`--cache-ttl 0s`), measured in the same run.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Files, write_spec, write_stack};
use kusion_server::auth::Role;
use kusion_server::{AppState, InProcessQueue};

const CLIENTS: usize = 200;
const READS: usize = 5;

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// How the clients are driven.
#[derive(Clone, Copy)]
enum Clients {
    /// One thread, one connection per client, requests in flight together.
    Async,
    /// A thread per client, each with its own blocking connection.
    Threads,
}

fn path_for(n: usize, i: usize) -> &'static str {
    if (n + i).is_multiple_of(2) {
        "/api/v1/projects"
    } else {
        "/api/v1/projects/s0/stacks/dev/releases"
    }
}

/// Serves a router for `ttl` and runs the clients; the sorted latencies and the wall time.
fn measure(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    source: &Arc<Files>,
    queue: &Arc<InProcessQueue>,
    ttl: Duration,
    clients: Clients,
) -> (Vec<Duration>, Duration) {
    let state = AppState::open(dir, source.clone(), queue.clone(), None, ttl).unwrap();
    let token = state
        .tokens
        .mint("bench", [("*".to_string(), Role::Viewer)].into(), None)
        .unwrap()
        .token;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = kusion_server::api::router(state);
    rt.spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await
    });
    match clients {
        Clients::Async => async_clients(&base, &token),
        Clients::Threads => thread_clients(&base, &token),
    }
}

fn async_clients(base: &str, token: &str) -> (Vec<Duration>, Duration) {
    use http_body_util::BodyExt;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    // The clients' own runtime on one thread of their own, apart from the server's.
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    client_rt.block_on(async {
        let client: Client<_, axum::body::Body> =
            Client::builder(TokioExecutor::new()).build_http();
        // Connections opened before the clock starts, as long-lived clients hold them.
        let warm: Vec<_> = (0..CLIENTS)
            .map(|_| {
                let (client, url) = (client.clone(), format!("{base}/healthz"));
                tokio::spawn(async move {
                    let r = client.get(url.parse().unwrap()).await.unwrap();
                    r.into_body().collect().await.unwrap();
                })
            })
            .collect();
        for w in warm {
            w.await.unwrap();
        }
        let started = Instant::now();
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|n| {
                let (client, base, token) = (client.clone(), base.to_string(), token.to_string());
                tokio::spawn(async move {
                    let mut took = Vec::new();
                    for i in 0..READS {
                        let request = http::Request::get(format!("{base}{}", path_for(n, i)))
                            .header("Authorization", format!("Bearer {token}"))
                            .body(axum::body::Body::empty())
                            .unwrap();
                        let t = Instant::now();
                        let response = client.request(request).await.unwrap();
                        assert_eq!(response.status(), 200);
                        response.into_body().collect().await.unwrap();
                        took.push(t.elapsed());
                    }
                    took
                })
            })
            .collect();
        let mut took = Vec::new();
        for t in tasks {
            took.extend(t.await.unwrap());
        }
        let wall = started.elapsed();
        took.sort();
        (took, wall)
    })
}

fn thread_clients(base: &str, token: &str) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (base, token) = (base.to_string(), token.to_string());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(true)
                    .build()
                    .into();
                (0..READS)
                    .map(|i| {
                        let t = Instant::now();
                        agent
                            .get(format!("{base}{}", path_for(n, i)))
                            .header("Authorization", format!("Bearer {token}"))
                            .call()
                            .unwrap()
                            .body_mut()
                            .read_to_string()
                            .unwrap();
                        t.elapsed()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut took: Vec<Duration> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let wall = started.elapsed();
    took.sort();
    (took, wall)
}

fn print(name: &str, took: &[Duration], wall: Duration) {
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    println!(
        "{name:<44} {} requests in {:>7.1?}: p50 {:>8.2?}  p99 {:>8.2?}  max {:>8.2?}",
        took.len(),
        wall,
        at(0.5),
        at(0.99),
        took[took.len() - 1]
    );
}

fn main() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    for n in 0..50 {
        write_stack(&root, &format!("s{n}"));
    }
    let source = Arc::new(Files::new(root.clone(), work.path().join("cloud")));
    let queue = Arc::new(InProcessQueue::default());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // A history of 20 releases on s0, applied by the real engine.
    rt.block_on(async {
        tokio::spawn(kusion_server::worker::run(
            queue.clone(),
            source.clone(),
            "w".into(),
        ));
    });
    let setup = AppState::open(
        &work.path().join("setup"),
        source.clone(),
        queue.clone(),
        None,
        Duration::ZERO,
    )
    .unwrap();
    for size in 0..20 {
        write_spec(
            &root,
            "s0",
            &format!("resources:\n- id: t:web\n  type: Test\n  attributes: {{size: {size}}}\n"),
        );
        let stack = kusion_server::StackRef {
            project: "s0".into(),
            stack: "dev".into(),
            dir: root.join("s0/dev"),
            description: None,
            require_approval: false,
        };
        let op = kusion_server::ops::new_operation(
            kusion_server::ops::OperationKind::Apply,
            &stack,
            "bench",
        );
        setup.queue.create(&op).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while setup.queue.get(&op.id).unwrap().unwrap().status
            != kusion_server::ops::OperationStatus::Succeeded
        {
            assert!(
                Instant::now() < deadline,
                "setup apply {size} did not finish"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    println!(
        "read_load: {CLIENTS} clients x {READS} reads (stack list / 20-release history), 50 stacks; profile {}, load {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        load_average()
    );
    let mut p99s = Vec::new();
    for (label, clients) in [
        ("async clients", Clients::Async),
        ("client threads", Clients::Threads),
    ] {
        let dir = work.path().join(label.replace(' ', "-"));
        let (cached, wall) = measure(
            &rt,
            &dir.join("a"),
            &source,
            &queue,
            Duration::from_secs(2),
            clients,
        );
        print(&format!("kusion-server (cache 2s), {label}"), &cached, wall);
        let (plain, wall) = measure(
            &rt,
            &dir.join("b"),
            &source,
            &queue,
            Duration::ZERO,
            clients,
        );
        print(&format!("kusion-server (cache off), {label}"), &plain, wall);
        p99s.push((label, cached[cached.len() * 99 / 100]));
    }
    for (label, p99) in p99s {
        println!(
            "bar: p99 < 50ms with {label} -> {} ({p99:.2?})",
            if p99 < Duration::from_millis(50) {
                "met"
            } else {
                "NOT met"
            }
        );
    }
}
