//! 200 concurrent API clients reading the stack list and a release history (issue 20's load bar:
//! p99 under 50 ms), over real TCP against the router served in this process, on a checkout of
//! 50 stacks whose first has 20 releases made by the real engine (fake-cloud runtime). Run with
//! `cargo bench -p kusion-server --bench read_load`.
//!
//! No other API server serves Konfig stacks, so the figure printed next to ours is this server
//! with its read caches off (`--cache-ttl 0s`), measured in the same run.

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

/// Serves a router for `ttl` and runs the clients; the sorted latencies and the wall time.
fn measure(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    source: &Arc<Files>,
    queue: &Arc<InProcessQueue>,
    ttl: Duration,
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
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (base, token) = (base.clone(), token.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(true)
                    .build()
                    .into();
                (0..READS)
                    .map(|i| {
                        let path = if (n + i) % 2 == 0 {
                            "/api/v1/projects".to_string()
                        } else {
                            "/api/v1/projects/s0/stacks/dev/releases".to_string()
                        };
                        let t = Instant::now();
                        agent
                            .get(format!("{base}{path}"))
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
        "{name:<28} {} requests in {:>7.1?}: p50 {:>8.2?}  p99 {:>8.2?}  max {:>8.2?}",
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
    let (cached, wall) = measure(
        &rt,
        &work.path().join("a"),
        &source,
        &queue,
        Duration::from_secs(2),
    );
    print("kusion-server (cache 2s)", &cached, wall);
    let (plain, wall) = measure(&rt, &work.path().join("b"), &source, &queue, Duration::ZERO);
    print("kusion-server (cache off)", &plain, wall);
    let p99 = cached[cached.len() * 99 / 100];
    println!(
        "bar: p99 < 50ms -> {}",
        if p99 < Duration::from_millis(50) {
            "met"
        } else {
            "NOT met"
        }
    );
}
