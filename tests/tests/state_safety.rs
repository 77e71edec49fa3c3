//! State that survives faults, fenced writers and sealed secrets, through `kusionctl` as a user
//! drives it (the testbed build with the fake-cloud runtime).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kusion_kernel::state::{JournalRecord, LocalStore, StateStore};

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
    fn state_dir(&self) -> PathBuf {
        self.path().join("state")
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .current_dir(self.path())
            .env("KUSION_TEST_CLOUD", self.path().join("cloud"))
            .env("KUSION_STATE_DIR", self.state_dir())
            .env_remove("KUSION_EXEC_MAX_CONCURRENT")
            .env_remove("KUSION_STATE_PASSPHRASE")
            .env_remove("KUSION_STATE_KEY_FILE")
            .stdin(Stdio::null());
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> Child {
        let mut c = self.cmd(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
    fn store(&self) -> LocalStore {
        LocalStore::new(self.state_dir())
    }
    fn write_spec(&self, spec: &str) {
        std::fs::write(self.path().join("spec.yaml"), spec).unwrap();
    }
    /// Objects in the fake cloud.
    fn cloud_objects(&self) -> usize {
        std::fs::read_dir(self.path().join("cloud"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .count()
            })
            .unwrap_or(0)
    }
    /// Wait until state records at least `n` finished steps.
    fn wait_applied(&self, n: usize) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if self
                .store()
                .load()
                .is_ok_and(|s| s.resources.values().filter(|e| !e.pending).count() >= n)
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{n} steps never finished");
    }
    /// Everything is applied and recorded, nothing orphaned: one more preview changes nothing.
    fn assert_converged(&self, resources: usize) {
        let out = self.run(&["apply", "-f", "spec.yaml", "--yes"]);
        assert!(out.status.success(), "{}", text(&out));
        let out = self.run(&["preview", "-f", "spec.yaml"]);
        assert!(text(&out).contains("No changes"), "{}", text(&out));
        assert_eq!(self.store().load().unwrap().resources.len(), resources);
        assert_eq!(self.cloud_objects(), resources, "orphans in the cloud");
        let out = self.run(&["state", "check"]);
        assert!(out.status.success(), "{}", text(&out));
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn many(n: usize, delay_ms: u64) -> String {
    let mut s = String::from("resources:\n");
    for i in 0..n {
        s.push_str(&format!(
            "- id: t:r{i}\n  type: Test\n  attributes: {{index: {i}, delayMs: {delay_ms}}}\n"
        ));
    }
    s
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// A journal write torn by a full disk or a crash (no newline at the end), then the next apply:
/// it cuts the torn line off first, so nothing after it is ever corrupt.
#[test]
fn a_torn_journal_tail_does_not_brick_the_next_apply() {
    let env = Env::new(&many(4, 0));
    assert!(
        env.run(&["apply", "-f", "spec.yaml", "--yes"])
            .status
            .success()
    );
    let journal = env.state_dir().join("journal.jsonl");
    let mut bytes = std::fs::read(&journal).unwrap_or_default();
    bytes.extend_from_slice(br#"{"op":"applied","entry":{"resource":{"id":"t:r9","ty"#);
    std::fs::write(&journal, bytes).unwrap();
    for args in [
        vec!["state", "list"],
        vec!["preview", "-f", "spec.yaml"],
        vec!["state", "check"],
    ] {
        let out = env.run(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
    }
    env.write_spec(&many(6, 0));
    let out = env.run(&["apply", "-f", "spec.yaml", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    env.assert_converged(6);
}

/// Damage left by earlier versions (a record written straight after a torn line): every command
/// names the line and the repair; `state check` describes it; `state repair` fixes it.
#[test]
fn state_repair_fixes_a_bricked_journal() {
    let env = Env::new(&many(3, 0));
    assert!(
        env.run(&["apply", "-f", "spec.yaml", "--yes"])
            .status
            .success()
    );
    let state = env.store().load().unwrap();
    let record = |i: usize| {
        let entry = state.resources.values().nth(i).unwrap().clone();
        serde_json::to_string(&JournalRecord::Applied { entry }).unwrap()
    };
    let journal = env.state_dir().join("journal.jsonl");
    std::fs::write(
        &journal,
        format!(
            "{}\n{{\"op\":\"applied\",\"entry\":{{\"reso{}\n{}\n",
            record(0),
            record(1),
            record(2)
        ),
    )
    .unwrap();
    for args in [vec!["state", "list"], vec!["preview", "-f", "spec.yaml"]] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains("journal.jsonl:2") && text(&out).contains("state repair"),
            "{}",
            text(&out)
        );
    }
    let out = env.run(&["state", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("kept by repair"), "{}", text(&out));
    let out = env.run(&["state", "repair"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("dropped 30 bytes"), "{}", text(&out));
    env.assert_converged(3);
}

/// `rm lease.json` (or `state unlock`) while an apply runs, and a second apply starts: the
/// first one's next state write is refused and it stops; the second converges the stack;
/// nothing is orphaned.
#[test]
fn a_removed_lease_fences_the_first_writer() {
    let env = Env::new(&many(16, 250));
    let first = env.spawn(
        &["apply", "-f", "spec.yaml", "--yes", "--concurrency", "2"],
        &[],
    );
    env.wait_applied(2);
    std::fs::remove_file(env.state_dir().join("lease.json")).unwrap();
    let second = env.spawn(
        &["apply", "-f", "spec.yaml", "--yes", "--concurrency", "4"],
        &[],
    );
    let first = first.wait_with_output().unwrap();
    let second = second.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    assert!(
        text(&first).contains("refused to write state") && text(&first).contains("lease #1"),
        "{}",
        text(&first)
    );
    assert!(second.status.success(), "{}", text(&second));
    env.assert_converged(16);
    let history = env.run(&["state", "history", "-o", "json"]);
    let releases: serde_json::Value = serde_json::from_slice(&history.stdout).unwrap();
    assert!(
        releases
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] != "running"),
        "{releases}"
    );
}

/// A holder paused past its lease's life (SIGSTOP, a stalled VM) while another process takes
/// the stack over: resumed, it is refused before it changes anything more.
#[test]
fn a_paused_holder_is_refused_when_it_resumes() {
    let env = Env::new(&many(12, 300));
    let ttl = [("KUSION_LEASE_TTL", "2s")];
    let first = env.spawn(
        &["apply", "-f", "spec.yaml", "--yes", "--concurrency", "1"],
        &ttl,
    );
    env.wait_applied(1);
    signal(&first, "-STOP");
    std::thread::sleep(Duration::from_millis(2500));
    let second = env
        .cmd(&["apply", "-f", "spec.yaml", "--yes"])
        .envs(ttl)
        .output()
        .unwrap();
    assert!(second.status.success(), "{}", text(&second));
    let created_by_second = env.cloud_objects();
    signal(&first, "-CONT");
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    assert!(
        text(&first).contains("refused to write state")
            || text(&first).contains("is no longer the stack's"),
        "{}",
        text(&first)
    );
    assert_eq!(env.cloud_objects(), created_by_second);
    env.assert_converged(12);
}

const SECRETS: &str = r#"resources:
- id: t:db
  type: Test
  attributes:
    secret: hunter2-very-secret
    user: admin
- id: t:app
  type: Test
  attributes:
    password: "$kusion_path[t:db].secret"
    dsn: "postgres://admin:$kusion_path[t:db].secret@db"
"#;

fn assert_no_clear_secret(env: &Env) {
    use std::os::unix::fs::PermissionsExt;
    for (path, bytes) in kusion_tests::cli::files_under(&env.state_dir()) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains("hunter"),
            "{} holds a secret in clear",
            path.display()
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{} is mode {mode:o}", path.display());
    }
}

/// No sensitive value rests in clear under the state directory, including values copied from
/// it by `$kusion_path`; unchanged secrets plan as unchanged; changed ones as updates.
#[test]
fn secrets_are_sealed_at_rest() {
    let env = Env::new(SECRETS);
    let out = env.run(&["apply", "-f", "spec.yaml", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_no_clear_secret(&env);
    for args in [
        vec!["preview", "-f", "spec.yaml", "-d", "-o", "json"],
        vec!["state", "show", "-o", "json"],
    ] {
        let out = env.run(&args);
        assert!(!text(&out).contains("hunter"), "{args:?}: {}", text(&out));
    }
    let out = env.run(&["preview", "-f", "spec.yaml"]);
    assert!(text(&out).contains("No changes"), "{}", text(&out));
    env.write_spec(&SECRETS.replace("hunter2", "hunter3"));
    let out = env.run(&["preview", "-f", "spec.yaml", "-o", "json"]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let actions: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["Update", "Update"], "{plan}");
    assert!(!text(&out).contains("hunter"), "{}", text(&out));
    let out = env.run(&["apply", "-f", "spec.yaml", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_no_clear_secret(&env);
}

/// With a state key, sensitive values are kept encrypted (so operations that need them can have
/// them); a wrong key is refused, and a missing one blocks writes but not previews.
#[test]
fn a_state_key_encrypts_and_is_checked() {
    let env = Env::new(SECRETS);
    let with = |pass: &str, args: &[&str]| {
        env.cmd(args)
            .env("KUSION_STATE_PASSPHRASE", pass)
            .output()
            .unwrap()
    };
    let out = with("s3cret pass", &["apply", "-f", "spec.yaml", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_no_clear_secret(&env);
    let snapshot = std::fs::read_to_string(env.state_dir().join("state.json")).unwrap();
    assert!(snapshot.contains("$kusion_sealed:v1:e:"), "{snapshot}");
    let out = with("s3cret pass", &["preview", "-f", "spec.yaml"]);
    assert!(text(&out).contains("No changes"), "{}", text(&out));
    let out = with("wrong", &["preview", "-f", "spec.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("KUSION_STATE_PASSPHRASE"),
        "{}",
        text(&out)
    );
    let out = env.run(&["preview", "-f", "spec.yaml"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = env.run(&["apply", "-f", "spec.yaml", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("KUSION_STATE_PASSPHRASE"),
        "{}",
        text(&out)
    );
}

/// AWS KMS keeps the state key (moto serves KMS): values are encrypted with a data key KMS
/// made, which the stack keeps only as KMS encrypted it; another KMS key is refused.
#[test]
fn aws_kms_keeps_the_state_key() {
    let moto = kusion_tests::servers::MotoServer::start();
    let (access, secret) = kusion_tests::servers::MotoServer::credentials();
    // SAFETY: set before anything in this test reads them; the values are the same for every
    // test of this binary that might read them.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", access);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", secret);
    }
    let endpoint = moto.endpoint();
    let create_key = || {
        let admin = {
            // SAFETY: as above.
            unsafe { std::env::set_var("AWS_ENDPOINT_URL_KMS", &endpoint) };
            kusion_kernel::state::kms::Kms::from_env("unused").unwrap()
        };
        let key = admin
            .call(
                "CreateKey",
                &serde_json::json!({"Description": "kusion state"}),
            )
            .unwrap();
        key["KeyMetadata"]["KeyId"].as_str().unwrap().to_string()
    };
    let (key, other) = (create_key(), create_key());
    let env = Env::new(SECRETS);
    let with_kms = |key: &str, args: &[&str]| {
        env.cmd(args)
            .env("KUSION_STATE_KMS_KEY_ID", key)
            .env("AWS_ENDPOINT_URL_KMS", &endpoint)
            .env("AWS_ACCESS_KEY_ID", access)
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap()
    };
    let out = with_kms(&key, &["apply", "-f", "spec.yaml", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_no_clear_secret(&env);
    let snapshot = std::fs::read_to_string(env.state_dir().join("state.json")).unwrap();
    assert!(
        snapshot.contains("$kusion_sealed:v1:e:") && snapshot.contains("wrappedKey"),
        "{snapshot}"
    );
    let out = with_kms(&key, &["preview", "-f", "spec.yaml"]);
    assert!(text(&out).contains("No changes"), "{}", text(&out));
    let out = with_kms(&other, &["preview", "-f", "spec.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = env.run(&["apply", "-f", "spec.yaml", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("KUSION_STATE_KMS_KEY_ID"),
        "{}",
        text(&out)
    );
}
