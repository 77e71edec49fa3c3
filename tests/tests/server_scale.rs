//! `kusionctl server` scaled out on PostgreSQL (the testbed build with the fake-cloud runtime):
//! two servers (no workers of their own, each with its own data folder) and three `kusionctl
//! worker` processes share one PostgreSQL queue, which also holds the tokens and the audit log.
//! Each server's start-up admin token keeps working after the other starts; tokens minted
//! through one server work on the other, and the audit log read through either holds both's
//! entries;
//! operations created through server A are seen and approved through server B; the worker
//! running an apply is killed with SIGKILL mid-apply, and the operation is re-queued by another
//! worker's claim and completes there, with the stack's state holding every resource once and
//! nothing applied twice. A cancel asked of one server stops the apply a worker process runs.
//! A worker on another machine (its own hostname, in a UTS namespace) dies holding a stack's
//! lease: nobody can tell its process is gone, so the operation moves only once the lease has
//! expired.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kusion_kernel::state::{LocalStore, ReleaseStatus, StateStore};
use kusion_pg_harness::PgServer;
use kusion_tests::api_server::ApiServer;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");

/// `t:a` is created at once; `t:b` takes 8 s (the window the worker is killed in); `t:c`
/// follows it.
const DEV_K: &str = r#"resources = [
    {
        id = "t:a"
        type = "Test"
        attributes = {size = 1}
    }
    {
        id = "t:b"
        type = "Test"
        attributes = {size = 2, delayMs = 8000}
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

const PROD_K: &str = r#"resources = [
    {
        id = "t:prod"
        type = "Test"
        attributes = {size = 1}
    }
]
"#;

/// `t:s1` takes 8 s; `t:s2` follows it: an apply to cancel while `t:s1` is under way.
const SLOW_K: &str = r#"resources = [
    {
        id = "t:s1"
        type = "Test"
        attributes = {size = 1, delayMs = 8000}
    }
    {
        id = "t:s2"
        type = "Test"
        attributes = {size = 2}
        dependsOn = ["t:s1"]
    }
]
"#;

fn write_stack(root: &Path, name: &str, approval: bool, main: &str) {
    let stack = root.join("inv").join(name);
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::write(
        stack.join("stack.yaml"),
        format!("name: {name}\nrequireApproval: {approval}\n"),
    )
    .unwrap();
    std::fs::write(
        stack.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(stack.join("main.k"), main).unwrap();
}

/// `ROOT/kcl.mod`, project `inv`: `inv/dev` (three chained resources, no approval),
/// `inv/prod` (one resource, approval required) and `inv/slow` (two chained, the first slow).
fn layout(root: &Path) {
    std::fs::create_dir_all(root.join("inv")).unwrap();
    std::fs::write(root.join("kcl.mod"), "[package]\nname = \"served\"\n").unwrap();
    std::fs::write(root.join("inv/project.yaml"), "name: inv\n").unwrap();
    write_stack(root, "dev", false, DEV_K);
    write_stack(root, "prod", true, PROD_K);
    write_stack(root, "slow", false, SLOW_K);
}

fn command(dir: &Path, home: &Path, cloud: &Path) -> Command {
    scrubbed(Command::new(BIN), dir, home, cloud)
}

/// `c` run in `dir` with the test's home and fake cloud, and none of the caller's kusion settings.
fn scrubbed(mut c: Command, dir: &Path, home: &Path, cloud: &Path) -> Command {
    c.current_dir(dir)
        .env("HOME", home)
        .env("KUSION_TEST_CLOUD", cloud)
        .env_remove("KUSION_STATE_DIR")
        .env_remove("KUSION_CONFIG")
        .env_remove("KUSION_RUNTIME_CONFIG")
        .env_remove("KUSION_PLUGIN_PATH")
        .env_remove("KUSION_QUEUE")
        .env_remove("KUSION_LEASE_TTL")
        .stdin(Stdio::null());
    c
}

struct Worker {
    child: Child,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(server: &ApiServer, token: &str, id: &str) -> Value {
    let (code, op) = server.call("GET", &format!("/api/v1/operations/{id}"), token, None);
    assert_eq!(code, 200, "{op}");
    op
}

fn wait_until(what: &str, mut done: impl FnMut() -> Option<Value>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = done() {
            return v;
        }
        assert!(Instant::now() < deadline, "never {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
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

#[test]
fn two_servers_three_workers_one_postgres_survive_a_killed_worker() {
    let pg = PgServer::start().unwrap_or_else(|e| panic!("PostgreSQL must start: {e}"));
    let queue = pg.create_database("kusion_queue").unwrap();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let root = work.join("served");
    layout(&root);
    let cloud = work.join("cloud");

    let start_server = |name: &str| {
        let mut c = command(&root, &home, &cloud);
        c.args(["server", "--listen", "127.0.0.1:0", "--workers", "0"])
            .args(["--queue", &queue, "--data-dir"])
            .arg(work.join(format!("{name}-data")))
            .arg("-vv");
        ApiServer::start(c, &work.join(format!("{name}.log")))
    };
    let a = start_server("server-a");
    let b = start_server("server-b");
    // Each server minted its own start-up admin token (a subject naming its host and pid): B's
    // start left A's working, and each works on both servers.
    for (server, token) in [
        (&a, &a.admin),
        (&a, &b.admin),
        (&b, &a.admin),
        (&b, &b.admin),
    ] {
        let (code, body) = server.call("GET", "/api/v1/tokens", token, None);
        assert_eq!(code, 200, "{body}");
        let subjects: Vec<&str> = body
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["subject"].as_str().unwrap())
            .collect();
        assert_eq!(subjects.len(), 2, "{body}");
        assert!(
            subjects.iter().all(|s| s.starts_with("bootstrap-admin@")),
            "{body}"
        );
    }
    assert!(
        !work.join("server-a-data/tokens.json").exists(),
        "tokens live in PostgreSQL, not in the data folder"
    );
    let admin = b.admin.clone();

    let start_worker = |n: usize| {
        let mut c = command(&root, &home, &cloud);
        c.args([
            "worker",
            "--queue",
            &queue,
            "--heartbeat-timeout",
            "3s",
            "-vv",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(work.join(format!("worker-{n}.log"))).unwrap());
        Worker {
            child: c.spawn().expect("starting kusionctl worker"),
        }
    };
    let mut workers: Vec<Option<Worker>> = (0..3).map(|n| Some(start_worker(n))).collect();

    // Tokens minted through A are honoured by B: they are in the shared PostgreSQL.
    let mint = |subject: &str, role: &str| a.mint(&admin, subject, json!({"inv": role}));
    let alice = mint("alice", "operator");
    let bob = mint("bob", "approver");
    let (code, projects) = b.call("GET", "/api/v1/projects", &alice, None);
    assert_eq!(code, 200, "{projects}");

    // A preview queued through A runs on some worker and is read through B.
    let (code, op) = a.call(
        "POST",
        "/api/v1/projects/inv/stacks/dev/operations",
        &alice,
        Some(json!({"kind": "preview"})),
    );
    assert_eq!(code, 202, "{op}");
    let preview = b.wait_for(&alice, op["id"].as_str().unwrap(), "succeeded");
    assert_eq!(preview["plan"]["summary"]["create"], 3, "{preview}");

    // An apply needing approval: asked for through A, approved through B.
    let (code, op) = a.call(
        "POST",
        "/api/v1/projects/inv/stacks/prod/operations",
        &alice,
        Some(json!({"kind": "apply"})),
    );
    assert_eq!(code, 202, "{op}");
    let prod = op["id"].as_str().unwrap().to_string();
    b.wait_for(&alice, &prod, "awaiting_approval");
    let (code, body) = b.call(
        "POST",
        &format!("/api/v1/operations/{prod}/approve"),
        &bob,
        None,
    );
    assert_eq!(code, 200, "{body}");
    let done = a.wait_for(&alice, &prod, "succeeded");
    assert_eq!(done["approvedBy"], "bob", "{done}");

    // The apply of dev: its worker is killed while t:b is being created.
    let (code, op) = b.call(
        "POST",
        "/api/v1/projects/inv/stacks/dev/operations",
        &alice,
        Some(json!({"kind": "apply"})),
    );
    assert_eq!(code, 202, "{op}");
    let dev = op["id"].as_str().unwrap().to_string();
    let running = wait_until("t:a created", || {
        let op = get(&a, &alice, &dev);
        (op["status"] == "running" && creations(&cloud).contains(&"t:a".to_string())).then_some(op)
    });
    // t:a's journal record is written right after the cloud created it: give it a moment, so
    // the kill lands in t:b's 8 s.
    std::thread::sleep(Duration::from_secs(1));
    let first_worker = running["worker"].as_str().unwrap().to_string();
    let victim = workers
        .iter()
        .position(|w| {
            let pid = w.as_ref().unwrap().child.id();
            first_worker.contains(&format!("-{pid}-"))
        })
        .unwrap_or_else(|| panic!("no worker process runs as {first_worker}"));
    let mut killed = workers[victim].take().unwrap();
    // `Child::kill` is SIGKILL: no chance to record anything.
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    assert!(
        !creations(&cloud).contains(&"t:b".to_string()),
        "killed before t:b existed"
    );

    let finished = wait_until("dev finished", || {
        let op = get(&b, &alice, &dev);
        matches!(op["status"].as_str(), Some("succeeded" | "failed")).then_some(op)
    });
    assert_eq!(finished["status"], "succeeded", "{finished}");
    let second_worker = finished["worker"].as_str().unwrap();
    assert_ne!(second_worker, first_worker, "{finished}");

    // The stream tells the story: running, the requeue, running again, done.
    let stream = a.events(&alice, &dev);
    let statuses: Vec<String> = stream
        .iter()
        .filter(|e| e["type"] == "status")
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        statuses,
        ["queued", "running", "queued", "running", "succeeded"],
        "{stream:#?}"
    );
    let requeue = stream
        .iter()
        .filter(|e| e["type"] == "status" && e["status"] == "queued")
        .nth(1)
        .unwrap();
    let message = requeue["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("worker {first_worker} stopped heartbeating"))
            && message.contains("re-queued"),
        "{message}"
    );
    let seqs: Vec<u64> = stream.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());

    // Nothing applied twice: each resource's step succeeded exactly once over both runs (t:b
    // started twice, the first time on the killed worker), and the cloud created each once.
    let mut succeeded: BTreeMap<String, usize> = BTreeMap::new();
    for e in stream.iter().filter(|e| {
        e["type"] == "step_finished" && e["outcome"] == "succeeded" && e["action"] != "UnChanged"
    }) {
        *succeeded
            .entry(e["id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(
        succeeded,
        BTreeMap::from([("t:a".into(), 1), ("t:b".into(), 1), ("t:c".into(), 1)]),
        "{stream:#?}"
    );
    assert_eq!(
        creations(&cloud),
        ["t:a", "t:b", "t:c", "t:prod"],
        "each resource created once"
    );

    // The stack is consistent: state holds the three; the killed run's release was closed as
    // failed by the next one, which succeeded.
    let store = LocalStore::new(root.join("inv/dev/.kusion/state"));
    let state = store.load().unwrap();
    let mut ids: Vec<&String> = state.resources.keys().collect();
    ids.sort();
    assert_eq!(ids, ["t:a", "t:b", "t:c"]);
    let latest = store.latest_revision().unwrap().unwrap();
    assert_eq!(latest, 2, "one release per run");
    let first = store.release(1).unwrap();
    assert_eq!(first.status, ReleaseStatus::Failed, "{first:?}");
    assert!(
        first
            .notes
            .iter()
            .any(|n| n.contains("closed by the next operation")),
        "{first:?}"
    );
    assert_eq!(store.release(2).unwrap().status, ReleaseStatus::Succeeded);

    // The surviving workers keep draining: a preview still runs.
    let (code, op) = a.call(
        "POST",
        "/api/v1/projects/inv/stacks/dev/operations",
        &alice,
        Some(json!({"kind": "preview"})),
    );
    assert_eq!(code, 202, "{op}");
    let after = b.wait_for(&alice, op["id"].as_str().unwrap(), "succeeded");
    assert_eq!(after["plan"]["summary"]["unchanged"], 3, "{after}");

    // A cancel asked of server B stops the apply a worker process claimed through A: no step
    // starts after it, the step under way finishes, and the operation ends cancelled by alice.
    let (code, op) = a.call(
        "POST",
        "/api/v1/projects/inv/stacks/slow/operations",
        &alice,
        Some(json!({"kind": "apply"})),
    );
    assert_eq!(code, 202, "{op}");
    let slow = op["id"].as_str().unwrap().to_string();
    wait_until("slow running", || {
        let op = get(&a, &alice, &slow);
        (op["status"] == "running").then_some(op)
    });
    std::thread::sleep(Duration::from_secs(3));
    let (code, body) = b.call(
        "POST",
        &format!("/api/v1/operations/{slow}/cancel"),
        &alice,
        None,
    );
    assert_eq!(code, 200, "{body}");
    let cancelled = wait_until("slow ended", || {
        let op = get(&a, &alice, &slow);
        op["status"]
            .as_str()
            .is_some_and(|s| !matches!(s, "queued" | "running"))
            .then_some(op)
    });
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["cancelledBy"], "alice", "{cancelled}");
    let stream = b.events(&alice, &slow);
    assert!(
        !stream
            .iter()
            .any(|e| e["type"] == "step_started" && e["id"] == "t:s2"),
        "a step started after the cancel: {stream:#?}"
    );
    assert!(
        !creations(&cloud).contains(&"t:s2".to_string()),
        "t:s2 was created"
    );
    if stream
        .iter()
        .any(|e| e["type"] == "step_started" && e["id"] == "t:s1")
    {
        assert!(
            stream.iter().any(|e| e["type"] == "step_finished"
                && e["id"] == "t:s1"
                && e["outcome"] == "succeeded"),
            "the step under way finished: {stream:#?}"
        );
    }

    // One audit log: the operations started through A and B, and the approval through B, read
    // through A, in order, with no token in it.
    let (code, audit) = a.call("GET", "/api/v1/audit", &admin, None);
    assert_eq!(code, 200, "{audit}");
    let actions: Vec<String> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["result"] == "ok")
        .map(|e| {
            format!(
                "{} {}",
                e["method"].as_str().unwrap(),
                e["action"].as_str().unwrap()
            )
        })
        .collect();
    let ops = "POST /api/v1/projects/{project}/stacks/{stack}/operations";
    let approve = "POST /api/v1/operations/{id}/approve";
    let cancel = "POST /api/v1/operations/{id}/cancel";
    let mints = "POST /api/v1/tokens";
    assert_eq!(
        actions,
        [mints, mints, ops, ops, approve, ops, ops, ops, cancel],
        "{audit}"
    );
    let text = audit.to_string();
    for token in [&a.admin, &b.admin, &alice, &bob] {
        assert!(!text.contains(token.as_str()), "a token in the audit log");
    }
    drop(workers);
}

/// A worker on "another machine" (`unshare --uts` with its own hostname: its stack lease names a
/// host where nobody can check its process) is killed mid-apply. The lease cannot be broken
/// early, so the heartbeat timeout (the lease's TTL + 15 s by default) re-queues the operation
/// only after the lease has expired; the local worker then finishes it with nothing applied
/// twice.
#[test]
fn a_worker_on_another_machine_dies_and_its_lease_expires_before_the_requeue() {
    let pg = PgServer::start().unwrap_or_else(|e| panic!("PostgreSQL must start: {e}"));
    let queue = pg.create_database("kusion_queue").unwrap();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let root = work.join("served");
    layout(&root);
    let cloud = work.join("cloud");
    let lease_ttl = "4s";
    let mut c = command(&root, &home, &cloud);
    c.env("KUSION_LEASE_TTL", lease_ttl)
        .args(["server", "--listen", "127.0.0.1:0", "--workers", "0"])
        .args(["--queue", &queue, "--data-dir"])
        .arg(work.join("server-data"));
    let server = ApiServer::start(c, &work.join("server.log"));
    let alice = server.mint(&server.admin, "alice", json!({"inv": "operator"}));

    // The remote worker: the same binary in a UTS namespace named machine-b.
    let mut remote = scrubbed(Command::new("unshare"), &root, &home, &cloud);
    remote
        .args(["--user", "--map-root-user", "--uts", "sh", "-c"])
        .arg(r#"hostname machine-b && exec "$0" "$@""#)
        .arg(BIN)
        .args(["worker", "--queue", &queue, "-vv"])
        .env("KUSION_LEASE_TTL", lease_ttl)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(work.join("worker-remote.log")).unwrap());
    let mut remote = Worker {
        child: remote
            .spawn()
            .expect("unshare (util-linux) must run: a worker on another machine"),
    };
    let (code, op) = server.call(
        "POST",
        "/api/v1/projects/inv/stacks/dev/operations",
        &alice,
        Some(json!({"kind": "apply"})),
    );
    assert_eq!(code, 202, "{op}");
    let id = op["id"].as_str().unwrap().to_string();
    let running = wait_until("t:a created by the remote worker", || {
        let op = get(&server, &alice, &id);
        (op["status"] == "running" && creations(&cloud).contains(&"t:a".to_string())).then_some(op)
    });
    let remote_name = running["worker"].as_str().unwrap().to_string();
    assert!(
        remote_name.starts_with("machine-b-"),
        "{remote_name}: {}",
        std::fs::read_to_string(work.join("worker-remote.log")).unwrap_or_default()
    );
    std::thread::sleep(Duration::from_secs(1));
    remote.child.kill().unwrap();
    remote.child.wait().unwrap();
    let killed = Instant::now();
    let lease = LocalStore::new(root.join("inv/dev/.kusion/state"))
        .current_lease()
        .unwrap()
        .expect("the dead worker's lease is still there");
    assert_eq!(lease.holder.host, "machine-b", "{lease:?}");

    // The local worker starts now; nothing moves until the lease has expired.
    let mut local = command(&root, &home, &cloud);
    local
        .env("KUSION_LEASE_TTL", lease_ttl)
        .args(["worker", "--queue", &queue, "-vv"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(work.join("worker-local.log")).unwrap());
    let _local = Worker {
        child: local.spawn().expect("starting kusionctl worker"),
    };
    let finished = wait_until("the apply finished", || {
        let op = get(&server, &alice, &id);
        matches!(op["status"].as_str(), Some("succeeded" | "failed")).then_some(op)
    });
    let took = killed.elapsed();
    assert_eq!(finished["status"], "succeeded", "{finished}");
    assert_ne!(finished["worker"], remote_name.as_str(), "{finished}");
    // Re-queued after the heartbeat timeout (TTL + 15 s), by which time the lease had expired.
    assert!(
        took >= Duration::from_secs(4 + 15 - 2),
        "re-queued before the remote worker's lease could have expired: {took:?}"
    );
    let stream = server.events(&alice, &id);
    let statuses: Vec<&str> = stream
        .iter()
        .filter(|e| e["type"] == "status")
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["queued", "running", "queued", "running", "succeeded"],
        "{stream:#?}"
    );
    assert_eq!(
        creations(&cloud),
        ["t:a", "t:b", "t:c"],
        "each resource created once"
    );
    let store = LocalStore::new(root.join("inv/dev/.kusion/state"));
    assert_eq!(store.release(1).unwrap().status, ReleaseStatus::Failed);
    assert_eq!(store.release(2).unwrap().status, ReleaseStatus::Succeeded);
    assert!(
        store.current_lease().unwrap().is_none(),
        "the lease was let go"
    );
}
