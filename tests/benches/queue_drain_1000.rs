//! Benchmark: 1,000 previews queued in PostgreSQL, drained by three `kusionctl worker`
//! processes (the testbed build, fake-cloud runtime) on one machine. Checks that no operation
//! is lost or run twice (each ends succeeded with exactly one `running` status event) and
//! prints the drain time, the build profile and the load average.
//!
//! `CARGO_TARGET_DIR=... cargo bench -p kusion-tests --bench queue_drain_1000` (release), or
//! `cargo test -p kusion-tests --bench queue_drain_1000` (debug build, same checks).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kusion_pg_harness::PgServer;
use kusion_server::ops::{EventKind, OperationKind, OperationStatus, new_operation};
use kusion_server::source::StackRef;
use kusion_server::{OperationQueue, PostgresQueue, QueueOptions};

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");
const OPERATIONS: usize = 1000;
const WORKERS: usize = 3;

fn layout(root: &Path) {
    let stack = root.join("inv/dev");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::write(root.join("kcl.mod"), "[package]\nname = \"bench\"\n").unwrap();
    std::fs::write(root.join("inv/project.yaml"), "name: inv\n").unwrap();
    std::fs::write(stack.join("stack.yaml"), "name: dev\n").unwrap();
    std::fs::write(
        stack.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(
        stack.join("main.k"),
        "resources = [{id = \"t:web\", type = \"Test\", attributes = {size = 1}}]\n",
    )
    .unwrap();
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn main() {
    // `cargo test --benches` passes libtest flags; only `--list` needs an answer.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let load_before = loadavg();
    let pg = PgServer::start().unwrap_or_else(|e| panic!("PostgreSQL must start: {e}"));
    let url = pg.create_database("drain").unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("served");
    layout(&root);
    let queue = PostgresQueue::connect(&url, QueueOptions::default()).unwrap();
    let stack = StackRef {
        project: "inv".into(),
        stack: "dev".into(),
        dir: root.join("inv/dev"),
        description: None,
        require_approval: false,
    };
    let enqueue = Instant::now();
    for _ in 0..OPERATIONS {
        queue
            .create(&new_operation(OperationKind::Preview, &stack, "bench"))
            .unwrap();
    }
    let enqueued = enqueue.elapsed();

    let start = Instant::now();
    let _workers = Workers(
        (0..WORKERS)
            .map(|n| {
                Command::new(BIN)
                    .current_dir(&root)
                    .env("HOME", work.path())
                    .env("KUSION_TEST_CLOUD", work.path().join("cloud"))
                    .env_remove("KUSION_QUEUE")
                    .args(["worker", "--queue", &url])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(work.path().join(format!("w{n}.log"))).unwrap())
                    .spawn()
                    .expect("starting kusionctl worker")
            })
            .collect(),
    );
    let deadline = Instant::now() + Duration::from_secs(1800);
    let ops = loop {
        let ops = queue.list().unwrap();
        if ops.iter().all(|o| o.status.is_final()) {
            break ops;
        }
        assert!(
            Instant::now() < deadline,
            "not drained in 30 min: {} of {OPERATIONS} final",
            ops.iter().filter(|o| o.status.is_final()).count()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let drained = start.elapsed();
    let load_after = loadavg();

    // No lost operation: all there, all succeeded. None run twice: one claim each.
    assert_eq!(ops.len(), OPERATIONS);
    let mut per_worker: BTreeMap<String, usize> = BTreeMap::new();
    for op in &ops {
        assert_eq!(op.status, OperationStatus::Succeeded, "{op:?}");
        let events = queue.events(&op.id, 0).unwrap();
        let runs = events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::Status {
                        status: OperationStatus::Running,
                        ..
                    }
                )
            })
            .count();
        let ends = events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::Status {
                        status: OperationStatus::Succeeded,
                        ..
                    }
                )
            })
            .count();
        assert_eq!((runs, ends), (1, 1), "{}: {events:?}", op.id);
        *per_worker
            .entry(op.worker.clone().unwrap_or_default())
            .or_default() += 1;
    }
    assert_eq!(per_worker.len(), WORKERS, "{per_worker:?}");

    println!(
        "queue_drain_1000: {OPERATIONS} previews, {WORKERS} kusionctl worker processes, one PostgreSQL"
    );
    println!("  profile: {profile}");
    println!(
        "  enqueue: {enqueued:.2?} ({:.0} ops/s)",
        OPERATIONS as f64 / enqueued.as_secs_f64()
    );
    println!(
        "  drain (workers started to all final): {drained:.2?} ({:.1} ops/s)",
        OPERATIONS as f64 / drained.as_secs_f64()
    );
    println!("  per worker: {per_worker:?}");
    println!("  lost: 0, run twice: 0");
    println!(
        "  load average before: {load_before}; after: {load_after}; cores: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}
