//! Crash consistency: `kusionctl apply` is killed with SIGKILL at random points of a 100-resource
//! apply, 20 times. After every kill the state must load and name every object the fake cloud
//! holds; a final apply converges with nothing created twice and nothing orphaned.
//! The same run is repeated over each state backend: local directory, PostgreSQL and S3 (moto).

use std::collections::{HashMap, HashSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kusion_kernel::state;
use kusion_pg_harness::PgServer;
use kusion_test_runtime::TestRuntime;
use kusion_tests::servers::MotoServer;

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");
const RESOURCES: usize = 100;
const KILLS: usize = 20;

/// Every round bumps `generation`, so each apply has work to do (creates first, updates later).
fn spec(generation: usize) -> String {
    let mut s = String::from("resources:\n");
    for i in 0..RESOURCES {
        s.push_str(&format!(
            "- id: t:r{i:03}\n  type: Test\n  attributes:\n    index: {i}\n    generation: {generation}\n    delayMs: {}\n",
            3 + i % 5
        ));
        // Chains and fan-in, with implicit references to computed values.
        if i >= 10 {
            s.push_str(&format!("    parent: $kusion_path[t:r{:03}].uid\n", i / 2));
        }
    }
    s
}

/// A small deterministic generator, seeded from the clock and printed, so a failure can be replayed
/// with CRASH_SEED.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn sigkill_at_random_points_then_converge() {
    crash_rounds(|dir| format!("local:{}", dir.join("state").display()), &[]);
}

#[test]
fn sigkill_at_random_points_then_converge_postgres() {
    let pg =
        PgServer::start().unwrap_or_else(|e| panic!("the PostgreSQL test server must start: {e}"));
    // Each run (the scratch one too) gets its own stack, named after its directory.
    crash_rounds(
        |dir| {
            let stack = dir.file_name().unwrap().to_string_lossy().into_owned();
            format!("{}?stack={stack}", pg.url())
        },
        &[],
    );
}

#[test]
fn sigkill_at_random_points_then_converge_s3() {
    let moto = MotoServer::start();
    moto.create_bucket("kusion-state");
    let (key, secret) = MotoServer::credentials();
    let endpoint = moto.endpoint();
    crash_rounds(
        |dir| {
            let stack = dir.file_name().unwrap().to_string_lossy().into_owned();
            format!("s3://kusion-state/crash?stack={stack}&endpoint={endpoint}")
        },
        &[
            ("AWS_ACCESS_KEY_ID", key),
            ("AWS_SECRET_ACCESS_KEY", secret),
        ],
    );
}

/// The crash test over the state backend `backend(dir)` names for a stack in `dir`.
fn crash_rounds(backend: impl Fn(&std::path::Path) -> String, env: &[(&str, &str)]) {
    for (k, v) in env {
        // SAFETY: set before any thread of this test reads the environment; the children and
        // the store opened below read the same values.
        unsafe { std::env::set_var(k, v) };
    }
    let open = |spec: &str| {
        state::open(spec, std::path::PathBuf::from("unused"), "unused")
            .unwrap_or_else(|e| panic!("opening {spec}: {e}"))
    };
    let dir = tempfile::tempdir().unwrap();
    let state_backend = backend(dir.path());
    std::fs::write(dir.path().join("spec.yaml"), spec(0)).unwrap();
    let cloud = dir.path().join("cloud");
    let seed = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let apply = || {
        let mut c = Command::new(BIN);
        c.args(["apply", "-f", "spec.yaml", "--yes", "--concurrency", "8"])
            .current_dir(dir.path())
            .env("KUSION_TEST_CLOUD", &cloud)
            .env("KUSION_STATE_BACKEND", &state_backend)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };

    // Measure undisturbed runs on a scratch copy to spread kill points over them: a create run and
    // an update run, keeping the shorter, so most kills land while an apply still has work to do.
    let full = {
        let scratch = tempfile::tempdir().unwrap();
        let mut shortest = Duration::MAX;
        for generation in 0..2 {
            std::fs::write(scratch.path().join("spec.yaml"), spec(generation)).unwrap();
            let started = Instant::now();
            let status = apply()
                .current_dir(scratch.path())
                .env("KUSION_TEST_CLOUD", scratch.path().join("cloud"))
                .env("KUSION_STATE_BACKEND", backend(scratch.path()))
                .status()
                .unwrap();
            assert!(status.success());
            shortest = shortest.min(started.elapsed());
        }
        shortest
    };
    eprintln!("an undisturbed apply takes {full:?}");

    let mut killed_mid_run = 0;
    let mut uids: HashMap<String, serde_json::Value> = HashMap::new();
    for round in 0..KILLS {
        // A new generation every round, so every apply has updates to make (and any creates a
        // killed round left undone).
        std::fs::write(dir.path().join("spec.yaml"), spec(round)).unwrap();
        let mut child = apply().spawn().unwrap();
        let at = Duration::from_micros(rng.next() % (full.as_micros() as u64 + 1));
        std::thread::sleep(at);
        if child.try_wait().unwrap().is_none() {
            killed_mid_run += 1;
        }
        child.kill().ok(); // SIGKILL
        child.wait().unwrap();

        let state = open(&state_backend)
            .load()
            .unwrap_or_else(|e| panic!("round {round}: state does not load: {e}"));
        let named: HashSet<String> = state.resources.keys().cloned().collect();
        for object in TestRuntime::objects(&cloud) {
            // Once an object exists it is never created again: its cloud-assigned uid is stable.
            let uid = object.attributes["uid"].clone();
            let first = uids.entry(object.id.clone()).or_insert_with(|| uid.clone());
            assert_eq!(
                *first, uid,
                "round {round}: {} was created again",
                object.id
            );
            assert!(
                named.contains(&object.id),
                "round {round} (kill at {at:?}): {} exists but state does not name it",
                object.id
            );
        }
    }
    eprintln!("{killed_mid_run} of {KILLS} kills hit a running apply");
    assert!(
        killed_mid_run >= KILLS / 2,
        "too few kills landed mid-run to mean anything"
    );

    std::fs::write(dir.path().join("spec.yaml"), spec(KILLS)).unwrap();
    let out = apply()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "final apply failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Converged: the cloud holds exactly the spec, state names exactly that, nothing pending.
    let state = open(&state_backend).load().unwrap();
    let objects = TestRuntime::objects(&cloud);
    assert_eq!(
        objects.len(),
        RESOURCES,
        "orphans or missing objects in the cloud"
    );
    assert_eq!(state.resources.len(), RESOURCES);
    assert!(state.resources.values().all(|e| !e.pending));
    // Nothing created twice.
    let log = std::fs::read_to_string(cloud.join("creations.log")).unwrap();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for id in log.lines() {
        *counts.entry(id).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "created more than once: {twice:?}");
    for object in &objects {
        if let Some(first) = uids.get(&object.id) {
            assert_eq!(
                first, &object.attributes["uid"],
                "{} was created again",
                object.id
            );
        }
    }
    // References resolved to the uids the parents really have.
    assert!(
        state
            .resources
            .values()
            .all(|e| e.resource.attributes["generation"] == KILLS)
    );
    let by_id: HashMap<String, serde_json::Value> = objects
        .into_iter()
        .map(|o| (o.id.clone(), serde_json::Value::Object(o.attributes)))
        .collect();
    for i in 10..RESOURCES {
        let child = &by_id[&format!("t:r{i:03}")];
        let parent = &by_id[&format!("t:r{:03}", i / 2)];
        assert_eq!(child["parent"], parent["uid"], "t:r{i:03}");
    }
    // A second apply changes nothing.
    let out = apply().stdout(Stdio::piped()).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("No changes."),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
