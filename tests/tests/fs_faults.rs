//! A failing file system under the local state store: `kusionctl apply` runs with
//! `fsfault/fsfault.c` preloaded, which makes the n-th file system change under the state folder
//! (an open for writing, write, fsync, rename, unlink, mkdir, ...) fail with ENOSPC, EIO or
//! EROFS — once (a transient error), for good (a full or read-only disk), or after a short write.
//! Every change point of an apply that creates, updates and deletes is driven in turn. After each
//! fault: the process ends with a clear error (never a panic or a signal), the state still loads
//! and names every object the cloud holds, and a clean apply converges with nothing created twice,
//! nothing orphaned, no release left `running` and no temporary file left behind.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use kusion_kernel::state::{self, ReleaseStatus};
use kusion_test_runtime::TestRuntime;

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");
const RESOURCES: usize = 8;

/// Generation 0 creates `RESOURCES` objects with references; generation 1 updates them all,
/// deletes the last two and adds one.
fn spec(generation: usize) -> String {
    let ids: Vec<usize> = if generation == 0 {
        (0..RESOURCES).collect()
    } else {
        (0..RESOURCES - 2).chain([RESOURCES]).collect()
    };
    let mut s = String::from("resources:\n");
    for i in ids {
        s.push_str(&format!(
            "- id: t:r{i:02}\n  type: Test\n  attributes:\n    index: {i}\n    generation: {generation}\n"
        ));
        if i >= 2 {
            s.push_str(&format!("    parent: $kusion_path[t:r{:02}].uid\n", i / 2));
        }
    }
    s
}

fn expected_ids(generation: usize) -> HashSet<String> {
    spec(generation)
        .lines()
        .filter_map(|l| l.strip_prefix("- id: "))
        .map(str::to_string)
        .collect()
}

/// The shim, compiled once per test process with the system C compiler (`$CC` or `cc`).
fn shim() -> &'static Path {
    static SHIM: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &SHIM
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let lib = dir.path().join("libfsfault.so");
            let source = concat!(env!("CARGO_MANIFEST_DIR"), "/fsfault/fsfault.c");
            let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
            let out = Command::new(&cc)
                .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
                .arg(&lib)
                .arg(source)
                .arg("-ldl")
                .output()
                .unwrap_or_else(|e| {
                    panic!("the failing file system needs a C compiler ({cc}): {e}")
                });
            assert!(
                out.status.success(),
                "compiling {source} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            (dir, lib)
        })
        .1
}

struct Stack {
    dir: tempfile::TempDir,
}

impl Stack {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("state")).unwrap();
        Stack { dir }
    }
    fn root(&self) -> PathBuf {
        // The shim compares real paths: no symlink in the folder it watches.
        self.dir.path().canonicalize().unwrap()
    }
    fn state_dir(&self) -> PathBuf {
        self.root().join("state")
    }
    fn cloud(&self) -> PathBuf {
        self.root().join("cloud")
    }
    fn backend(&self) -> String {
        format!("local:{}", self.state_dir().display())
    }
    fn apply(&self, generation: usize, fault: &[(&str, String)]) -> Output {
        self.run("apply", generation, fault)
    }
    fn run(&self, command: &str, generation: usize, fault: &[(&str, String)]) -> Output {
        std::fs::write(self.root().join("spec.yaml"), spec(generation)).unwrap();
        let mut c = Command::new(BIN);
        c.args([command, "-f", "spec.yaml", "--yes", "--concurrency", "4"])
            .current_dir(self.root())
            .env("KUSION_TEST_CLOUD", self.cloud())
            .env("KUSION_STATE_BACKEND", self.backend())
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::null());
        if !fault.is_empty() {
            c.env("LD_PRELOAD", shim())
                .env("FSFAULT_DIR", self.state_dir());
            for (k, v) in fault {
                c.env(k, v);
            }
        }
        c.output().unwrap()
    }
    fn load(&self) -> Result<state::State, state::StateError> {
        state::open(&self.backend(), PathBuf::from("unused"), "unused")
            .unwrap()
            .load()
    }
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// After the faulty run: still loadable, and everything in the cloud is named by the state.
fn check_after_fault(stack: &Stack, label: &str) {
    let loaded = stack
        .load()
        .unwrap_or_else(|e| panic!("{label}: the state does not load after the fault: {e}"));
    let named: HashSet<&String> = loaded.resources.keys().collect();
    for object in TestRuntime::objects(&stack.cloud()) {
        assert!(
            named.contains(&object.id),
            "{label}: {} exists in the cloud but the state does not name it",
            object.id
        );
    }
}

/// `generation` None: destroyed, nothing may remain.
fn check_converged(stack: &Stack, generation: Option<usize>, label: &str) {
    let want = generation.map(expected_ids).unwrap_or_default();
    let loaded = stack.load().unwrap();
    let objects = TestRuntime::objects(&stack.cloud());
    let in_cloud: HashSet<String> = objects.iter().map(|o| o.id.clone()).collect();
    assert_eq!(
        in_cloud, want,
        "{label}: orphans or missing objects in the cloud"
    );
    let in_state: HashSet<String> = loaded.resources.keys().cloned().collect();
    assert_eq!(in_state, want, "{label}: the state names other objects");
    assert!(
        loaded.resources.values().all(|e| !e.pending),
        "{label}: pending entries after converging"
    );
    let log = std::fs::read_to_string(stack.cloud().join("creations.log")).unwrap();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for id in log.lines() {
        *counts.entry(id).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{label}: created more than once: {twice:?}"
    );
    let by_id: HashMap<&str, &serde_json::Map<String, serde_json::Value>> = objects
        .iter()
        .map(|o| (o.id.as_str(), &o.attributes))
        .collect();
    for id in &want {
        let i: usize = id[3..].parse().unwrap();
        assert_eq!(
            by_id[id.as_str()]["generation"],
            generation.unwrap(),
            "{label}: {id}"
        );
        if i >= 2 {
            let parent = format!("t:r{:02}", i / 2);
            assert_eq!(
                by_id[id.as_str()]["parent"],
                by_id[parent.as_str()]["uid"],
                "{label}: {id} refers to a stale parent"
            );
        }
    }
    let store = state::open(&stack.backend(), PathBuf::from("unused"), "unused").unwrap();
    for release in store.releases().unwrap() {
        assert_ne!(
            release.status,
            ReleaseStatus::Running,
            "{label}: release {} stays running",
            release.revision
        );
    }
    let leftovers: Vec<String> = std::fs::read_dir(stack.state_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "{label}: temporary files left: {leftovers:?}"
    );
}

const ERRNOS: [(&str, &str); 3] = [
    ("ENOSPC", "No space left on device"),
    ("EIO", "Input/output error"),
    ("EROFS", "Read-only file system"),
];
const MODES: [&str; 3] = ["persist", "once", "short"];

#[test]
fn every_file_system_change_of_an_apply_can_fail_and_the_stack_converges() {
    campaign("apply", Some(1));
}

#[test]
fn every_file_system_change_of_a_destroy_can_fail_and_the_stack_converges() {
    campaign("destroy", None);
}

/// Stack at generation 0, then `command` at generation 1 with each change point failing in
/// turn; a clean `command` afterwards must reach `converged`.
fn campaign(command: &str, converged: Option<usize>) {
    // How many changes an undisturbed run makes under the state folder.
    let counting = Stack::new();
    assert!(counting.apply(0, &[]).status.success());
    let count_file = counting.root().join("count");
    let out = counting.run(
        command,
        1,
        &[
            ("FSFAULT_AT", "0".into()),
            ("FSFAULT_COUNT", count_file.display().to_string()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let changes: usize = std::fs::read_to_string(&count_file)
        .expect("the shim reports its count: is it preloaded?")
        .trim()
        .parse()
        .unwrap();
    assert!(
        changes > 3 * RESOURCES,
        "only {changes} changes counted: the shim does not see the store's writes"
    );
    check_converged(&counting, converged, "counting run");
    let every: usize = std::env::var("FSFAULT_EVERY")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    eprintln!("{command} makes {changes} file system changes; failing every {every}th");

    let (mut failed_runs, mut points) = (0, 0);
    // Concurrent writes make the count vary a little from run to run: a few points past it too.
    for at in (1..=changes + 4).step_by(every) {
        let (errno, message) = ERRNOS[at % 3];
        let mode = MODES[(at / 3) % 3];
        let label = format!("{command}: change {at} of ~{changes} fails with {errno} ({mode})");
        let stack = Stack::new();
        let out = stack.apply(0, &[]);
        assert!(out.status.success(), "{label}: setup: {}", text(&out));
        let out = stack.run(
            command,
            1,
            &[
                ("FSFAULT_AT", at.to_string()),
                ("FSFAULT_ERRNO", errno.into()),
                ("FSFAULT_MODE", mode.into()),
                ("FSFAULT_LOG", "1".into()),
            ],
        );
        points += 1;
        let code = out.status.code();
        assert!(
            matches!(code, Some(0..=3)),
            "{label}: ended by a signal or a panic: {}",
            text(&out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let fired = stderr.contains("(fails)");
        if code != Some(0) {
            failed_runs += 1;
            assert!(
                stderr.contains(message),
                "{label}: the error does not say what the file system said: {}",
                text(&out)
            );
        } else if fired {
            // A failure the run may shrug off (the lease's removal, a release's last word)
            // must still be said.
            assert!(
                stderr.contains(message),
                "{label}: a failed change went unmentioned: {}",
                text(&out)
            );
        }
        check_after_fault(&stack, &label);
        let out = stack.run(command, 1, &[]);
        assert!(
            out.status.success(),
            "{label}: the next {command} failed: {}",
            text(&out)
        );
        check_converged(&stack, converged, &label);
        if command == "apply" {
            let out = stack.apply(1, &[]);
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("No changes."),
                "{label}: a second apply still has work: {}",
                text(&out)
            );
        }
    }
    eprintln!(
        "{command}: {points} fault points, {failed_runs} runs ended with the file system's error"
    );
    assert!(
        failed_runs * 2 >= points,
        "most faults should surface as an error: {failed_runs} of {points}"
    );
}
