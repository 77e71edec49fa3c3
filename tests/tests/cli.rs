//! `kusionctl` as a user drives it (the testbed build with the fake-cloud runtime).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kusion_kernel::state::{LeaseHolder, LocalStore, StateStore};

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(spec: &str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("spec.yaml"), spec).unwrap();
        Env { dir }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .current_dir(self.path())
            .env("KUSION_TEST_CLOUD", self.path().join("cloud"))
            .env("KUSION_STATE_DIR", self.path().join("state"))
            .env_remove("KUSION_EXEC_MAX_CONCURRENT")
            .stdin(Stdio::null());
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    fn state(&self) -> LocalStore {
        LocalStore::new(self.path().join("state"))
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const SECRET_SPEC: &str = r#"resources:
- id: v1:Secret:demo:db
  type: Test
  attributes:
    secret: hunter2-very-secret
    user: admin
- id: t:app
  type: Test
  attributes:
    dsn: "postgres://admin@$kusion_path[v1:Secret:demo:db].uid"
"#;

#[test]
fn secrets_never_show_in_any_output() {
    let env = Env::new(SECRET_SPEC);
    for args in [
        vec!["preview", "-f", "spec.yaml", "-d"],
        vec!["preview", "-f", "spec.yaml", "-o", "json"],
        vec!["apply", "-f", "spec.yaml", "--yes", "-d"],
        vec!["state", "show"],
        vec!["state", "show", "v1:Secret:demo:db", "-o", "json"],
        vec!["state", "history", "1"],
    ] {
        let out = env.run(&args);
        let t = text(&out);
        assert!(out.status.success(), "{args:?}: {t}");
        assert!(!t.contains("hunter2"), "{args:?} leaked the secret:\n{t}");
    }
    let out = env.run(&["state", "show", "v1:Secret:demo:db"]);
    assert!(text(&out).contains("(sensitive value)"));
    let changed = SECRET_SPEC.replace("hunter2-very-secret", "hunter3-also-secret");
    std::fs::write(env.path().join("spec.yaml"), changed).unwrap();
    let out = env.run(&["preview", "-f", "spec.yaml", "-d", "-o", "json"]);
    let t = text(&out);
    assert!(!t.contains("hunter"), "{t}");
    assert!(t.contains("\"action\":\"Update\""), "{t}");
    // Shown in context, the masked secret still says that it changes.
    let out = env.run(&["preview", "-f", "spec.yaml", "-d"]);
    let t = text(&out);
    assert!(!t.contains("hunter"), "{t}");
    assert!(
        t.contains("secret: (sensitive value) => (changed sensitive value)"),
        "{t}"
    );
}

#[test]
fn exit_codes() {
    let env = Env::new(SECRET_SPEC);
    assert_eq!(
        env.run(&["preview"]).status.code(),
        Some(2),
        "missing --spec is a usage error"
    );
    assert_eq!(env.run(&["apply", "--no-such-flag"]).status.code(), Some(2));
    let out = env.run(&["apply", "-f", "spec.yaml"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "no terminal and no --yes: {}",
        text(&out)
    );
    assert_eq!(
        env.run(&["preview", "-f", "missing.yaml"]).status.code(),
        Some(1)
    );

    // Another process holds the lease: refused with its identity, exit code 3.
    let store = env.state();
    let holder = LeaseHolder {
        owner: "alice".into(),
        host: "build-7".into(),
        pid: 4242,
        operation: "apply".into(),
    };
    let lease = store.acquire_lease(&holder, 600_000).unwrap();
    let out = env.run(&["apply", "-f", "spec.yaml", "--yes"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("alice on build-7 (pid 4242, apply)"),
        "{}",
        text(&out)
    );
    let out = env.run(&["apply", "-f", "spec.yaml", "--yes", "-o", "json"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"exitCode\":3"));
    let out = env.run(&["state", "unlock"]);
    assert!(
        text(&out).contains("warning: removed lease #1 held by alice"),
        "{}",
        text(&out)
    );
    drop(lease);
    assert!(
        env.run(&["apply", "-f", "spec.yaml", "--yes"])
            .status
            .success()
    );
    let failing = Env::new("resources:\n- id: t:x\n  type: Test\n  attributes: {testFail: true}\n");
    assert_eq!(
        failing
            .run(&["apply", "-f", "spec.yaml", "--yes"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn graph_history_and_json() {
    let env = Env::new(SECRET_SPEC);
    let out = env.run(&["graph", "-f", "spec.yaml", "--format", "dot"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"v1:Secret:demo:db\" -> \"t:app\";"));
    let out = env.run(&["apply", "-f", "spec.yaml", "--yes", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["created"], 2);
    assert_eq!(
        v["result"]["summary"],
        "Apply complete! Resources: 2 created, 0 updated, 0 deleted."
    );
    let out = env.run(&["destroy", "--yes"]);
    assert!(
        text(&out).contains("Destroy complete! Resources: 0 created, 0 updated, 2 deleted."),
        "{}",
        text(&out)
    );
    let out = env.run(&["state", "history", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[1]["operation"], "destroy");
    assert_eq!(v[1]["status"], "succeeded");
    // One release shows its times as the list does: ISO 8601, not stored epoch milliseconds.
    let out = env.run(&["state", "history", "2", "-o", "json"]);
    let one: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(one["startedAt"], v[1]["startedAt"], "{one}");
    assert_eq!(one["finishedAt"], v[1]["finishedAt"], "{one}");
    assert!(one["startedAt"].as_str().unwrap().ends_with('Z'), "{one}");
}

fn many(n: usize, delay_ms: u64) -> String {
    let mut s = String::from("resources:\n");
    for i in 0..n {
        s.push_str(&format!(
            "- id: t:r{i}\n  type: Test\n  attributes: {{index: {i}, delayMs: {delay_ms}}}\n"
        ));
        if i > 0 && i % 3 == 0 {
            s.push_str(&format!("  dependsOn: [t:r{}]\n", i - 1));
        }
    }
    s
}

#[test]
fn ctrl_c_stops_new_work_and_saves_state() {
    let env = Env::new(&many(12, 300));
    let child = env
        .cmd(&["apply", "-f", "spec.yaml", "--yes", "--concurrency", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the first step has finished: a fixed delay could land before kusionctl has
    // installed its handler on a slow start, and the default action would kill it outright.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30)
        && env
            .state()
            .load()
            .map_or(true, |s| s.resources.values().all(|e| e.pending))
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("Apply interrupted!"), "{t}");
    let state = env.state().load().unwrap();
    let done = state.resources.values().filter(|e| !e.pending).count();
    assert!((2..12).contains(&done), "{done} applied");
    assert!(
        state.resources.values().all(|e| !e.pending),
        "steps that never started are not left pending"
    );
    assert!(
        env.state().current_lease().unwrap().is_none(),
        "the lease is released"
    );
    // Running again finishes the job.
    let out = env.run(&["apply", "-f", "spec.yaml", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(env.state().load().unwrap().resources.len(), 12);
}
