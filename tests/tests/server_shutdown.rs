//! `kusionctl server` shut down with SIGTERM in the middle of an apply (the testbed build with
//! the fake-cloud runtime; `t:b`'s create takes 4 s): the process exits 0 within the shutdown
//! timeout, the step under way (`t:b`) finished, the next (`t:c`) never started, the event
//! stream ended with the operation's final word, and the stack's state and lease let a new
//! server on the same checkout apply the rest.
//!
//! - In-process queue (the embedded default): the operation ends cancelled, saying why.
//! - PostgreSQL queue: the operation goes back to `queued` and a server started later on the
//!   same queue claims it and applies the rest.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kusion_kernel::state::{LocalStore, StateStore};
use kusion_pg_harness::PgServer;
use kusion_tests::api_server::{ApiServer, agent};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");

const DEV_K: &str = r#"resources = [
    {
        id = "t:a"
        type = "Test"
        attributes = {size = 1}
    }
    {
        id = "t:b"
        type = "Test"
        attributes = {size = 2, delayMs = 4000}
        dependsOn = ["t:a"]
    }
    {
        id = "t:c"
        type = "Test"
        attributes = {size = 3}
        dependsOn = ["t:b"]
    }
]
"#;

fn layout(root: &Path) {
    let stack = root.join("inv/dev");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::write(root.join("kcl.mod"), "[package]\nname = \"served\"\n").unwrap();
    std::fs::write(root.join("inv/project.yaml"), "name: inv\n").unwrap();
    std::fs::write(stack.join("stack.yaml"), "name: dev\n").unwrap();
    std::fs::write(
        stack.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(stack.join("main.k"), DEV_K).unwrap();
}

struct Setup {
    _dir: tempfile::TempDir,
    work: std::path::PathBuf,
    root: std::path::PathBuf,
    home: std::path::PathBuf,
    cloud: std::path::PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().to_path_buf();
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let root = work.join("served");
    layout(&root);
    Setup {
        work: work.clone(),
        root,
        home,
        cloud: work.join("cloud"),
        _dir: dir,
    }
}

fn server(s: &Setup, name: &str, extra: &[&str]) -> ApiServer {
    server_with_timeout(s, name, "30s", extra)
}

fn server_with_timeout(s: &Setup, name: &str, timeout: &str, extra: &[&str]) -> ApiServer {
    let mut c = Command::new(BIN);
    c.current_dir(&s.root)
        .env("HOME", &s.home)
        .env("KUSION_TEST_CLOUD", &s.cloud)
        .env_remove("KUSION_STATE_DIR")
        .env_remove("KUSION_CONFIG")
        .env_remove("KUSION_RUNTIME_CONFIG")
        .env_remove("KUSION_PLUGIN_PATH")
        .env_remove("KUSION_QUEUE")
        .env_remove("KUSION_LEASE_TTL")
        .stdin(Stdio::null())
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--shutdown-timeout",
            timeout,
        ])
        .args(extra)
        .arg("-vv");
    ApiServer::start(c, &s.work.join(format!("{name}.log")))
}

fn creations(cloud: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(cloud.join("creations.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// Starts an apply of inv/dev and returns its ID once `t:a` exists and `t:b` is under way.
fn apply_until_b_runs(api: &ApiServer, cloud: &Path) -> String {
    let (code, op) = api.call(
        "POST",
        "/api/v1/projects/inv/stacks/dev/operations",
        &api.admin,
        Some(json!({"kind": "apply"})),
    );
    assert_eq!(code, 202, "{op}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !creations(cloud).contains(&"t:a".to_string()) {
        assert!(Instant::now() < deadline, "t:a never created");
        std::thread::sleep(Duration::from_millis(50));
    }
    // t:b's 4 s create starts right after t:a's journal record.
    std::thread::sleep(Duration::from_millis(800));
    op["id"].as_str().unwrap().to_string()
}

/// Reads the operation's event stream to its end on a thread (it must end at shutdown).
fn stream(api: &ApiServer, id: &str) -> std::thread::JoinHandle<Vec<Value>> {
    let url = format!("{}/api/v1/operations/{id}/events", api.base);
    let auth = format!("Bearer {}", api.admin);
    std::thread::spawn(move || {
        let mut response = agent()
            .get(&url)
            .header("Authorization", auth.as_str())
            .call()
            .unwrap();
        let mut text = String::new();
        // A connection closed by the server ends the read: what arrived is what counts.
        let _ = response.body_mut().as_reader().read_to_string(&mut text);
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    })
}

fn statuses(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "status")
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect()
}

fn started(events: &[Value], id: &str) -> bool {
    events
        .iter()
        .any(|e| e["type"] == "step_started" && e["id"] == id)
}

#[test]
fn sigterm_mid_apply_finishes_the_step_under_way_and_ends_the_operation() {
    let s = setup();
    let mut a = server(&s, "server-a", &[]);
    let id = apply_until_b_runs(&a, &s.cloud);
    let events = stream(&a, &id);
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    let status = a
        .terminate(Duration::from_secs(30))
        .expect("the server exits within its shutdown timeout");
    let took = asked.elapsed();
    assert!(status.success(), "exit status {status:?}");
    eprintln!("the server shut down in {took:?}");
    assert!(
        took > Duration::from_secs(1),
        "it waited for t:b's create under way ({took:?})"
    );
    let events = events.join().unwrap();
    assert_eq!(
        creations(&s.cloud),
        ["t:a", "t:b"],
        "t:b finished, t:c never ran"
    );
    assert!(!started(&events, "t:c"), "{events:#?}");
    assert_eq!(
        statuses(&events),
        ["queued", "running", "cancelled"],
        "{events:#?}"
    );
    let last = events.iter().rev().find(|e| e["type"] == "status").unwrap();
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("server shut down"),
        "{last}"
    );

    // State holds what was done; the lease is free: a new server applies the rest.
    let store = LocalStore::new(s.root.join("inv/dev/.kusion/state"));
    let mut ids: Vec<String> = store.load().unwrap().resources.keys().cloned().collect();
    ids.sort();
    assert_eq!(ids, ["t:a", "t:b"]);
    let b = server(&s, "server-b", &[]);
    let (code, op) = b.call(
        "POST",
        "/api/v1/projects/inv/stacks/dev/operations",
        &b.admin,
        Some(json!({"kind": "apply"})),
    );
    assert_eq!(code, 202, "{op}");
    let done = b.wait_for(&b.admin, op["id"].as_str().unwrap(), "succeeded");
    assert_eq!(done["plan"]["summary"]["create"], 1, "{done}");
    assert_eq!(
        creations(&s.cloud),
        ["t:a", "t:b", "t:c"],
        "each created once"
    );
}

#[test]
fn sigterm_mid_apply_on_postgres_requeues_for_the_next_server() {
    let pg = PgServer::start().unwrap_or_else(|e| panic!("PostgreSQL must start: {e}"));
    let queue = pg.create_database("kusion_queue").unwrap();
    let s = setup();
    let mut a = server(&s, "server-a", &["--queue", &queue]);
    let id = apply_until_b_runs(&a, &s.cloud);
    let first_worker = {
        let (code, op) = a.call("GET", &format!("/api/v1/operations/{id}"), &a.admin, None);
        assert_eq!(code, 200, "{op}");
        op["worker"].as_str().unwrap().to_string()
    };
    let events = stream(&a, &id);
    std::thread::sleep(Duration::from_millis(200));
    let status = a
        .terminate(Duration::from_secs(30))
        .expect("the server exits within its shutdown timeout");
    assert!(status.success(), "exit status {status:?}");
    let events = events.join().unwrap();
    assert_eq!(
        creations(&s.cloud),
        ["t:a", "t:b"],
        "t:b finished, t:c never ran"
    );
    assert_eq!(
        statuses(&events),
        ["queued", "running", "queued"],
        "{events:#?}"
    );

    // A later server on the same queue claims it and applies the rest. (Its start-up token is
    // its own: A revoked A's at shutdown.)
    let b = server(&s, "server-b", &["--queue", &queue]);
    let (code, _) = b.call("GET", "/api/v1/tokens", &a.admin, None);
    assert_eq!(code, 401, "A's start-up token went with A");
    let done = b.wait_for(&b.admin, &id, "succeeded");
    assert_ne!(done["worker"].as_str().unwrap(), first_worker, "{done}");
    assert_eq!(
        creations(&s.cloud),
        ["t:a", "t:b", "t:c"],
        "each created once"
    );
    let store = LocalStore::new(s.root.join("inv/dev/.kusion/state"));
    assert_eq!(store.load().unwrap().resources.len(), 3);
}

#[test]
fn a_step_outlasting_the_shutdown_timeout_exits_non_zero_at_the_timeout() {
    let s = setup();
    let mut a = server_with_timeout(&s, "server-a", "1s", &[]);
    apply_until_b_runs(&a, &s.cloud);
    let asked = Instant::now();
    let status = a
        .terminate(Duration::from_secs(20))
        .expect("the server exits at its shutdown timeout");
    let took = asked.elapsed();
    let log = std::fs::read_to_string(s.work.join("server-a.log")).unwrap();
    assert_eq!(status.code(), Some(1), "{status:?} after {took:?}: {log}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    assert!(
        !creations(&s.cloud).contains(&"t:b".to_string()),
        "exited before t:b's create ended"
    );
    let log = std::fs::read_to_string(s.work.join("server-a.log")).unwrap();
    assert!(
        log.contains("did not finish within the shutdown timeout"),
        "{log}"
    );
}

#[test]
fn a_second_sigterm_exits_at_once() {
    let s = setup();
    let mut a = server(&s, "server-a", &[]);
    apply_until_b_runs(&a, &s.cloud);
    assert!(
        a.terminate(Duration::from_millis(300)).is_none(),
        "the first waits for t:b"
    );
    let asked = Instant::now();
    let status = a
        .terminate(Duration::from_secs(5))
        .expect("the second SIGTERM ends it");
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    assert!(!creations(&s.cloud).contains(&"t:b".to_string()));
}

/// A `kusionctl worker` process, killed on drop.
struct Worker(std::process::Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn worker(s: &Setup, name: &str, queue: &str) -> Worker {
    let mut c = Command::new(BIN);
    c.current_dir(&s.root)
        .env("HOME", &s.home)
        .env("KUSION_TEST_CLOUD", &s.cloud)
        .env_remove("KUSION_STATE_DIR")
        .env_remove("KUSION_CONFIG")
        .env_remove("KUSION_RUNTIME_CONFIG")
        .env_remove("KUSION_PLUGIN_PATH")
        .env_remove("KUSION_QUEUE")
        .env_remove("KUSION_LEASE_TTL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(s.work.join(format!("{name}.log"))).unwrap())
        .args([
            "worker",
            "--queue",
            queue,
            "--shutdown-timeout",
            "30s",
            "-vv",
        ]);
    Worker(c.spawn().expect("starting kusionctl worker"))
}

#[test]
fn sigterm_to_a_worker_mid_apply_requeues_for_another_worker() {
    let pg = PgServer::start().unwrap_or_else(|e| panic!("PostgreSQL must start: {e}"));
    let queue = pg.create_database("kusion_queue").unwrap();
    let s = setup();
    let api = server(&s, "server", &["--queue", &queue, "--workers", "0"]);
    let mut first = worker(&s, "worker-1", &queue);
    let id = apply_until_b_runs(&api, &s.cloud);
    let (code, op) = api.call("GET", &format!("/api/v1/operations/{id}"), &api.admin, None);
    assert_eq!(code, 200, "{op}");
    assert!(
        op["worker"]
            .as_str()
            .unwrap()
            .contains(&format!("-{}-", first.0.id())),
        "{op}"
    );
    let asked = Instant::now();
    let sent = Command::new("kill")
        .args(["-TERM", &first.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = loop {
        if let Some(status) = first.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(30),
            "the worker never exited"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status:?}");
    eprintln!("the worker shut down in {:?}", asked.elapsed());
    assert_eq!(
        creations(&s.cloud),
        ["t:a", "t:b"],
        "t:b finished, t:c never ran"
    );
    let op = api.wait_for(&api.admin, &id, "queued");
    assert!(op["worker"].as_str().is_some(), "{op}");

    let _second = worker(&s, "worker-2", &queue);
    let done = api.wait_for(&api.admin, &id, "succeeded");
    assert_eq!(
        creations(&s.cloud),
        ["t:a", "t:b", "t:c"],
        "each created once"
    );
    assert_eq!(done["plan"]["summary"]["create"], 1, "{done}");
    let url = format!("{}/api/v1/operations/{id}/events", api.base);
    let mut response = agent()
        .get(&url)
        .header("Authorization", format!("Bearer {}", api.admin).as_str())
        .call()
        .unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    assert_eq!(
        statuses(&events),
        ["queued", "running", "queued", "running", "succeeded"],
        "{events:#?}"
    );
    let requeue = events
        .iter()
        .filter(|e| e["type"] == "status" && e["status"] == "queued")
        .nth(1)
        .unwrap();
    assert!(
        requeue["message"].as_str().unwrap().contains("shut down"),
        "{requeue}"
    );
}
