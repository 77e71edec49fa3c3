//! External secret references through `kusionctl` (the testbed build with the fake-cloud
//! runtime and the `secrets` plugin from this checkout's build output): `ref://env/…`,
//! `ref://file/…` and `ref://aws-secretsmanager/…` (on moto) are read while planning and
//! applying, land in the live object, are never at rest in clear (state, history, preview
//! output), and a rotated secret plans an update.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kusion_test_runtime::TestRuntime;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");

struct Env {
    dir: tempfile::TempDir,
    vars: Vec<(String, String)>,
}

impl Env {
    fn new(spec: &str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("spec.yaml"), spec).unwrap();
        Env {
            dir,
            vars: Vec::new(),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn state_dir(&self) -> PathBuf {
        self.path().join("state")
    }
    fn set(&mut self, k: &str, v: &str) {
        self.vars.retain(|(n, _)| n != k);
        self.vars.push((k.into(), v.into()));
    }
    fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(BIN);
        c.args(args)
            .current_dir(self.path())
            .env("KUSION_TEST_CLOUD", self.path().join("cloud"))
            .env("KUSION_STATE_DIR", self.state_dir())
            .env("HOME", self.path())
            .env_remove("APP_TOKEN")
            .env_remove("KUSION_STATE_PASSPHRASE")
            .env_remove("KUSION_STATE_KEY_FILE")
            .env_remove("KUSION_STATE_KMS_KEY_ID")
            .stdin(Stdio::null());
        for (k, v) in &self.vars {
            c.env(k, v);
        }
        c.output().unwrap()
    }
    fn expect(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}:\n{t}");
        t
    }
    fn live(&self, id: &str, key: &str) -> Value {
        TestRuntime::objects(&self.path().join("cloud"))
            .into_iter()
            .find(|r| r.id == id)
            .and_then(|r| r.attributes.get(key).cloned())
            .unwrap_or(Value::Null)
    }
    /// Nothing under the state folder, and no preview or state output, shows a secret.
    fn assert_nothing_in_clear(&self, secret: &str) {
        for (path, bytes) in kusion_tests::cli::files_under(&self.state_dir()) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(secret),
                "{} holds {secret} in clear",
                path.display()
            );
        }
        for args in [
            &["preview", "-f", "spec.yaml", "-d", "-o", "json"][..],
            &["preview", "-f", "spec.yaml", "-d"],
            &["state", "show", "-o", "json"],
            &["state", "history", "-o", "json"],
        ] {
            let out = self.run(args);
            assert!(
                !text(&out).contains(secret),
                "{args:?} shows {secret}:\n{}",
                text(&out)
            );
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn plugin_built() {
    let lib = kusion_tests::cli::profile_dir().join("libkusion_secrets.so");
    assert!(
        lib.is_file(),
        "{} is missing: build the workspace first (cargo build --workspace)",
        lib.display()
    );
}

const LOCAL: &str = r#"resources:
- id: t:app
  type: Test
  attributes:
    token: ref://env/APP_TOKEN
    tls: ref://file/certs/tls.txt
    db:
      user: app
      password: ref://file/db.json#password
    note: plain
- id: t:copy
  type: Test
  attributes:
    fromApp: "$kusion_path[t:app].token"
"#;

#[test]
fn env_and_file_references_are_applied_never_kept_in_clear_and_rotations_plan_updates() {
    plugin_built();
    let mut env = Env::new(LOCAL);
    std::fs::create_dir_all(env.path().join("certs")).unwrap();
    std::fs::write(env.path().join("certs/tls.txt"), "hunter-tls\n").unwrap();
    std::fs::write(env.path().join("db.json"), r#"{"password": "hunter-db"}"#).unwrap();

    // Without the variable the plan stops, naming the resource, the field and the reference.
    let t = env.expect(&["preview", "-f", "spec.yaml"], 1);
    assert!(
        t.contains("t:app") && t.contains("token") && t.contains("ref://env/APP_TOKEN"),
        "{t}"
    );

    env.set("APP_TOKEN", "hunter-tok-1");
    let t = env.expect(&["preview", "-f", "spec.yaml", "-d"], 0);
    assert!(!t.contains("hunter"), "{t}");
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    assert_eq!(env.live("t:app", "token"), "hunter-tok-1");
    assert_eq!(env.live("t:app", "tls"), "hunter-tls");
    assert_eq!(env.live("t:app", "db")["password"], "hunter-db");
    assert_eq!(env.live("t:copy", "fromApp"), "hunter-tok-1");
    let t = env.expect(&["preview", "-f", "spec.yaml"], 0);
    assert!(t.contains("No changes"), "{t}");
    env.assert_nothing_in_clear("hunter");
    // The release history keeps the reference as written (no state key is configured, so a
    // secret itself could only be kept as a hash there).
    assert!(
        kusion_tests::cli::files_under(&env.state_dir())
            .iter()
            .any(|(_, b)| String::from_utf8_lossy(b).contains("ref://env/APP_TOKEN")),
        "the recorded spec keeps ref://env/APP_TOKEN"
    );

    // A rotation: the next plan reads the store again and updates what uses the secret.
    env.set("APP_TOKEN", "hunter-tok-2");
    std::fs::write(env.path().join("db.json"), r#"{"password": "hunter-db-2"}"#).unwrap();
    let plan = env.expect(&["preview", "-f", "spec.yaml", "-o", "json"], 0);
    assert!(!plan.contains("hunter"), "{plan}");
    let plan: Value = serde_json::from_str(&plan).unwrap();
    let actions: Vec<(String, String)> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("t:app".to_string(), "Update".to_string()),
            ("t:copy".to_string(), "Update".to_string())
        ],
        "{plan}"
    );
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    assert_eq!(env.live("t:app", "token"), "hunter-tok-2");
    assert_eq!(env.live("t:app", "db")["password"], "hunter-db-2");
    assert_eq!(env.live("t:copy", "fromApp"), "hunter-tok-2");
    env.assert_nothing_in_clear("hunter");

    // A file outside the stack folder is refused unless a root allows it.
    std::fs::write(
        env.path().join("spec.yaml"),
        LOCAL.replace("ref://file/certs/tls.txt", "ref://file//etc/hostname"),
    )
    .unwrap();
    let t = env.expect(&["preview", "-f", "spec.yaml"], 1);
    assert!(
        t.contains("outside the stack folder") && t.contains("fileRoots"),
        "{t}"
    );
}

#[test]
fn aws_secrets_manager_references_are_read_on_every_plan() {
    plugin_built();
    let moto = kusion_tests::servers::MotoServer::start();
    let (access, secret) = kusion_tests::servers::MotoServer::credentials();
    let endpoint = moto.endpoint();
    // SAFETY: this test binary's tests read no AWS variables otherwise.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", access);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", secret);
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::set_var("AWS_ENDPOINT_URL_SECRETS_MANAGER", &endpoint);
    }
    let sm = kusion_aws::JsonService::from_env(&kusion_aws::SECRETS_MANAGER).unwrap();
    sm.call(
        "CreateSecret",
        &serde_json::json!({"Name": "app/db", "SecretString": r#"{"password": "hunter-aws-1"}"#}),
    )
    .unwrap();

    let mut env = Env::new(
        r#"resources:
- id: t:app
  type: Test
  attributes:
    password: ref://aws-secretsmanager/app/db#password
    whole: ref://aws-secretsmanager/app/db
"#,
    );
    for (k, v) in [
        ("AWS_ACCESS_KEY_ID", access),
        ("AWS_SECRET_ACCESS_KEY", secret),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL_SECRETS_MANAGER", endpoint.as_str()),
    ] {
        env.set(k, v);
    }
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    assert_eq!(env.live("t:app", "password"), "hunter-aws-1");
    assert_eq!(
        env.live("t:app", "whole"),
        r#"{"password": "hunter-aws-1"}"#
    );
    let t = env.expect(&["preview", "-f", "spec.yaml"], 0);
    assert!(t.contains("No changes"), "{t}");
    env.assert_nothing_in_clear("hunter");

    sm.call(
        "PutSecretValue",
        &serde_json::json!({"SecretId": "app/db", "SecretString": r#"{"password": "hunter-aws-2"}"#}),
    )
    .unwrap();
    let t = env.expect(&["preview", "-f", "spec.yaml", "--detailed-exitcode"], 2);
    assert!(!t.contains("hunter"), "{t}");
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    assert_eq!(env.live("t:app", "password"), "hunter-aws-2");
    env.assert_nothing_in_clear("hunter");

    // A missing secret names the reference and what AWS said.
    std::fs::write(
        env.path().join("spec.yaml"),
        "resources:\n- id: t:app\n  type: Test\n  attributes:\n    password: ref://aws-secretsmanager/nope#password\n",
    )
    .unwrap();
    let t = env.expect(&["preview", "-f", "spec.yaml"], 1);
    assert!(
        t.contains("ref://aws-secretsmanager/nope#password")
            && t.contains("ResourceNotFoundException"),
        "{t}"
    );
}
