//! Day-2 lifecycle through `kusionctl` (the testbed build with the fake-cloud runtime):
//! rollback to a release, drift without the spec, targeted plans, import, `state rm` and
//! `state mv`. The fake cloud keeps each object as a JSON file, so a test sees what exists
//! independently of kusion's state and can change it behind kusion's back (drift).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kusion_sdk::Resource;
use kusion_test_runtime::TestRuntime;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn cloud(&self) -> PathBuf {
        self.path().join("cloud")
    }
    fn spec(&self, text: &str) {
        std::fs::write(self.path().join("spec.yaml"), text).unwrap();
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .current_dir(self.path())
            .env("KUSION_TEST_CLOUD", self.cloud())
            .env("KUSION_STATE_DIR", self.path().join("state"))
            .env_remove("KUSION_EXEC_MAX_CONCURRENT")
            .env_remove("KUSION_STATE_PASSPHRASE")
            .env_remove("KUSION_STATE_KEY_FILE")
            .env_remove("KUSION_STATE_KMS_KEY_ID")
            .stdin(Stdio::null());
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    /// Run and require exit code `code`; returns stdout and stderr together.
    fn expect(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}:\n{t}");
        t
    }
    fn objects(&self) -> Vec<Resource> {
        let mut all = TestRuntime::objects(&self.cloud());
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }
    fn object(&self, id: &str) -> Option<Resource> {
        self.objects().into_iter().find(|r| r.id == id)
    }
    fn attr(&self, id: &str, key: &str) -> Option<Value> {
        self.object(id).and_then(|r| r.attributes.get(key).cloned())
    }
    fn ids(&self) -> Vec<String> {
        self.objects().into_iter().map(|r| r.id).collect()
    }
    /// Change a live object behind kusion's back.
    fn tamper(&self, id: &str, key: &str, value: Value) {
        for entry in std::fs::read_dir(self.cloud()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let mut r: Resource = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            if r.id == id {
                r.attributes.insert(key.into(), value);
                std::fs::write(&path, serde_json::to_vec(&r).unwrap()).unwrap();
                return;
            }
        }
        panic!("{id} is not in the cloud");
    }
    fn remove(&self, id: &str) {
        for entry in std::fs::read_dir(self.cloud()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == "json") {
                let r: Resource = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                if r.id == id {
                    std::fs::remove_file(path).unwrap();
                    return;
                }
            }
        }
        panic!("{id} is not in the cloud");
    }
    fn json(&self, args: &[&str], code: i32) -> Value {
        let out = self.run(args);
        assert_eq!(out.status.code(), Some(code), "{args:?}:\n{}", text(&out));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}):\n{}", text(&out)))
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const V1: &str = r#"resources:
- id: t:web
  type: Test
  attributes: {image: "web:1", replicas: 2}
- id: t:config
  type: Test
  attributes: {data: "one"}
"#;

const V2: &str = r#"resources:
- id: t:web
  type: Test
  attributes: {image: "web:2", replicas: 2}
- id: t:extra
  type: Test
  attributes: {data: "new"}
"#;

#[test]
fn rollback_returns_to_an_earlier_release_as_a_new_one() {
    let env = Env::new();
    env.spec(V1);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    env.spec(V2);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    assert_eq!(env.ids(), ["t:extra", "t:web"]);

    // The preview of a rollback is the plan of revision 1's spec against what is live.
    let t = env.expect(&["rollback", "--dry-run", "-d"], 0);
    assert!(t.contains("Rolling back to revision 1"), "{t}");
    assert!(t.contains("web:2") && t.contains("web:1"), "{t}");
    let plan = env.json(&["rollback", "--dry-run", "-o", "json"], 0);
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
    assert!(
        actions.contains(&("t:web".into(), "Update".into())),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("t:config".into(), "Create".into())),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("t:extra".into(), "Delete".into())),
        "{actions:?}"
    );
    // Nothing changed by the dry run.
    assert_eq!(env.ids(), ["t:extra", "t:web"]);

    // Without --yes and without a terminal it refuses, like apply.
    env.expect(&["rollback"], 2);
    let t = env.expect(&["rollback", "--yes"], 0);
    assert!(t.contains("Rollback complete"), "{t}");
    assert_eq!(env.ids(), ["t:config", "t:web"]);
    assert_eq!(env.attr("t:web", "image"), Some("web:1".into()));
    assert_eq!(env.attr("t:config", "data"), Some("one".into()));

    // Recorded as a new release naming its source.
    let history = env.json(&["state", "history", "-o", "json"], 0);
    let last = history.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["revision"], 3);
    assert_eq!(last["operation"], "rollback");
    assert_eq!(last["rollbackOf"], 1);
    let t = env.expect(&["state", "history"], 0);
    assert!(t.contains("rollback (to 1)"), "{t}");
    // The next preview of revision 1's spec has nothing to do.
    env.spec(V1);
    let t = env.expect(&["preview", "-f", "spec.yaml"], 0);
    assert!(t.contains("No changes."), "{t}");

    // Rolling back again undoes the rollback: back to revision 2's spec.
    env.expect(&["rollback", "--yes"], 0);
    assert_eq!(env.ids(), ["t:extra", "t:web"]);
    assert_eq!(env.attr("t:web", "image"), Some("web:2".into()));

    // Refusals name the reason.
    let t = env.expect(&["rollback", "--to", "99", "--yes"], 1);
    assert!(t.contains("99"), "{t}");
    env.expect(&["destroy", "--yes", "-f", "spec.yaml"], 0);
    let t = env.expect(&["rollback", "--to", "5", "--yes"], 1);
    assert!(t.contains("was destroy, not an apply"), "{t}");
    // After a destroy, the default goes back to the last good apply before it.
    env.expect(&["rollback", "--yes"], 0);
    assert_eq!(env.ids(), ["t:extra", "t:web"]);
}

#[test]
fn a_release_whose_runtime_is_gone_is_refused_by_name() {
    let env = Env::new();
    env.spec(V1);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    env.spec(V2);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    // Rewrite revision 1 as if it had held a resource of a type no runtime serves any more.
    let store = kusion_kernel::state::LocalStore::new(env.path().join("state"));
    use kusion_kernel::state::StateStore;
    let mut release = store.release(1).unwrap();
    release.spec.resources[1].resource_type = "Gone".into();
    store.update_release(&release).unwrap();
    let t = env.expect(&["rollback", "--yes"], 1);
    assert!(
        t.contains("t:config has type \"Gone\", which no loaded runtime serves"),
        "{t}"
    );
    assert_eq!(env.ids(), ["t:extra", "t:web"], "nothing changed");
}

const SECRET_V1: &str = r#"resources:
- id: t:db
  type: Test
  attributes: {secret: "first-password", user: admin}
"#;

#[test]
fn rollback_restores_secrets_only_from_encrypted_history() {
    // With a state key, history keeps secrets encrypted and rollback restores them.
    let env = Env::new();
    let with_key = |args: &[&str], code: i32| {
        let out = env
            .cmd(args)
            .env("KUSION_STATE_PASSPHRASE", "a long enough passphrase")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}:\n{}", text(&out));
        text(&out)
    };
    env.spec(SECRET_V1);
    with_key(&["apply", "-f", "spec.yaml", "--yes"], 0);
    env.spec(&SECRET_V1.replace("first-password", "second-password"));
    with_key(&["apply", "-f", "spec.yaml", "--yes"], 0);
    assert_eq!(env.attr("t:db", "secret"), Some("second-password".into()));
    let t = with_key(&["rollback", "--dry-run", "-d"], 0);
    assert!(!t.contains("password"), "a preview shows no secret:\n{t}");
    with_key(&["rollback", "--yes"], 0);
    assert_eq!(env.attr("t:db", "secret"), Some("first-password".into()));
    // Nothing in the stored history holds the secret in clear.
    for entry in walk(&env.path().join("state")) {
        let bytes = std::fs::read(&entry).unwrap();
        let s = String::from_utf8_lossy(&bytes);
        assert!(
            !s.contains("first-password"),
            "{} holds it",
            entry.display()
        );
    }
    let t = with_key(&["state", "history", "1"], 0);
    assert!(
        t.contains("(sensitive value)") && !t.contains("sealed"),
        "{t}"
    );

    // Without a key only hashes are kept: the rollback stops and names what is missing.
    let env = Env::new();
    env.spec(SECRET_V1);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    env.spec(&SECRET_V1.replace("first-password", "second-password"));
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    let t = env.expect(&["rollback", "--yes"], 1);
    assert!(t.contains("t:db: secret"), "{t}");
    assert!(t.contains("KUSION_STATE_PASSPHRASE"), "{t}");
    assert_eq!(env.attr("t:db", "secret"), Some("second-password".into()));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn drift_compares_state_with_what_is_live_without_the_spec() {
    let env = Env::new();
    env.spec(V1);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    let t = env.expect(&["drift"], 0);
    assert!(t.contains("2 in sync, 0 drifted"), "{t}");
    env.expect(&["preview", "-f", "spec.yaml", "--detailed-exitcode"], 0);

    // Changed and removed behind kusion's back: drift shows it field by field, exit 2.
    env.tamper("t:web", "replicas", 5.into());
    env.remove("t:config");
    // The spec is not needed (or read): drift works from state alone.
    std::fs::remove_file(env.path().join("spec.yaml")).unwrap();
    let t = env.expect(&["drift"], 2);
    assert!(t.contains("~ replicas: 2 => 5"), "{t}");
    assert!(
        t.contains("t:config: recorded in state but no longer exists"),
        "{t}"
    );
    let report = env.json(&["drift", "-o", "json"], 2);
    assert_eq!(report["summary"]["drifted"], 1);
    assert_eq!(report["summary"]["missing"], 1);
    let web = &report["resources"][0];
    assert_eq!(web["id"], "t:web");
    assert_eq!(web["status"], "drifted");
    assert_eq!(web["changes"][0]["path"], "replicas");
    assert_eq!(web["changes"][0]["old"], 2);
    assert_eq!(web["changes"][0]["new"], 5);
    // Ignored fields are not drift.
    let report = env.json(&["drift", "-o", "json", "--ignore-fields", "replicas"], 2);
    assert_eq!(report["summary"]["drifted"], 0);

    // preview --detailed-exitcode: 2 while something would change, 0 once converged.
    env.spec(V1);
    env.expect(&["preview", "-f", "spec.yaml", "--detailed-exitcode"], 2);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    env.expect(&["preview", "-f", "spec.yaml", "--detailed-exitcode"], 0);
    env.expect(&["drift"], 0);
    // An error is 1, not 2.
    env.expect(&["preview", "-f", "missing.yaml", "--detailed-exitcode"], 1);
}

const TARGETS: &str = r#"resources:
- id: t:db
  type: Test
  attributes: {v: 1}
- id: t:api
  type: Test
  dependsOn: [t:db]
  attributes: {v: 1}
- id: t:web
  type: Test
  attributes: {v: 1}
"#;

#[test]
fn targets_plan_what_they_name_and_what_it_needs() {
    let env = Env::new();
    env.spec(TARGETS);
    // A first targeted apply creates the target and its dependency only.
    let t = env.expect(
        &["apply", "-f", "spec.yaml", "--yes", "--target", "t:api"],
        0,
    );
    assert!(
        t.contains("Warning: --target t:api planned 2 resource(s); 1 other"),
        "{t}"
    );
    assert_eq!(env.ids(), ["t:api", "t:db"]);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);

    env.spec(&TARGETS.replace("v: 1", "v: 2"));
    let plan = env.json(
        &[
            "preview",
            "-f",
            "spec.yaml",
            "-o",
            "json",
            "--target",
            "t:a*",
        ],
        0,
    );
    let ids: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["t:db", "t:api"]);
    assert_eq!(plan["narrowed"]["leftOut"], 1);
    env.expect(
        &["apply", "-f", "spec.yaml", "--yes", "--target", "t:api"],
        0,
    );
    assert_eq!(env.attr("t:api", "v"), Some(2.into()));
    assert_eq!(env.attr("t:db", "v"), Some(2.into()));
    assert_eq!(env.attr("t:web", "v"), Some(1.into()), "not targeted");
    // The rest is still planned by a full preview, and state kept its entry.
    let plan = env.json(&["preview", "-f", "spec.yaml", "-o", "json"], 0);
    let web = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "t:web")
        .unwrap()
        .clone();
    assert_eq!(web["action"], "Update");

    // A pattern that names nothing is an error, not an empty plan.
    let t = env.expect(
        &["apply", "-f", "spec.yaml", "--yes", "--target", "t:nope"],
        1,
    );
    assert!(t.contains("--target \"t:nope\" names no resource"), "{t}");

    // Destroying a target takes what depends on it too, and nothing else.
    let t = env.expect(
        &["destroy", "-f", "spec.yaml", "--yes", "--target", "t:db"],
        0,
    );
    assert!(t.contains("2 deleted"), "{t}");
    assert_eq!(env.ids(), ["t:web"]);
    let state = env.json(&["state", "list", "-o", "json"], 0);
    let listed: Vec<&str> = state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["t:web"]);
}

#[test]
fn import_rm_and_mv_change_state_but_nothing_live() {
    let env = Env::new();
    env.spec(V1);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);

    // state rm: forgotten, still live; a preview now adopts it (Import), creating nothing.
    let t = env.expect(&["state", "rm", "t:web"], 0);
    assert!(t.contains("Removed t:web from state"), "{t}");
    assert_eq!(env.ids(), ["t:config", "t:web"]);
    let listed = env.json(&["state", "list", "-o", "json"], 0);
    assert_eq!(listed["resources"].as_array().unwrap().len(), 1);
    env.expect(&["state", "rm", "t:web"], 1);

    // import: adopted as it is live, even where the spec differs; preview shows the update.
    env.tamper("t:web", "replicas", 7.into());
    let t = env.expect(&["import", "t:web", "-f", "spec.yaml"], 0);
    assert!(t.contains("Imported t:web into state"), "{t}");
    assert_eq!(
        env.attr("t:web", "replicas"),
        Some(7.into()),
        "nothing live changed"
    );
    let shown = env.json(&["state", "show", "t:web", "-o", "json"], 0);
    assert_eq!(shown["attributes"]["replicas"], 7);
    let t = env.expect(&["preview", "-f", "spec.yaml", "-d"], 0);
    assert!(
        t.contains("replicas: 7 => 2") || t.contains("~ replicas"),
        "{t}"
    );
    // Importing what state already manages, what the spec lacks, or what is not live: refused.
    let t = env.expect(&["import", "t:web", "-f", "spec.yaml"], 1);
    assert!(t.contains("already managed"), "{t}");
    let t = env.expect(&["import", "t:nothing", "-f", "spec.yaml"], 1);
    assert!(t.contains("not a resource of the stack's spec"), "{t}");
    env.spec(&format!(
        "{V1}- id: t:absent\n  type: Test\n  attributes: {{a: 1}}\n"
    ));
    let t = env.expect(&["import", "t:absent", "-f", "spec.yaml"], 1);
    assert!(t.contains("no live object was found"), "{t}");
    // --live-id adopts the object the runtime knows by that identifier.
    let t = env.expect(
        &[
            "import",
            "t:absent",
            "-f",
            "spec.yaml",
            "--live-id",
            "t:config",
        ],
        0,
    );
    assert!(t.contains("Imported t:absent"), "{t}");
    let shown = env.json(&["state", "show", "t:absent", "-o", "json"], 0);
    assert_eq!(shown["attributes"]["data"], "one");
    assert!(
        shown["extensions"]
            .get("kusionstack.io/import-id")
            .is_none()
    );

    // state mv: renamed in one step; the old ID is gone from state, nothing live changed.
    let before = env.ids();
    let t = env.expect(&["state", "mv", "t:web", "t:frontend"], 0);
    assert!(t.contains("Moved t:web to t:frontend"), "{t}");
    assert_eq!(env.ids(), before);
    let listed = env.json(&["state", "list", "-o", "json"], 0);
    let ids: Vec<&str> = listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"t:frontend") && !ids.contains(&"t:web"),
        "{ids:?}"
    );
    let t = env.expect(&["state", "mv", "t:frontend", "t:config"], 1);
    assert!(t.contains("already in this stack's state"), "{t}");

    // Every edit is in the history, and none of them is a rollback target.
    let history = env.json(&["state", "history", "-o", "json"], 0);
    let ops: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["operation"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["apply", "state rm", "import", "import", "state mv"]);
    let t = env.expect(&["rollback", "--yes"], 1);
    assert!(t.contains("no earlier successful apply"), "{t}");
    // The state is consistent after all of it.
    env.expect(&["state", "check"], 0);
}

#[test]
fn state_moves_to_another_stack_and_an_interrupted_move_is_finished_by_running_it_again() {
    use kusion_kernel::state::{
        Handoff, JournalRecord, LeaseHolder, LocalStore, StateStore, Writer,
    };
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let env = Env::new();
    env.spec(V1);
    env.expect(&["apply", "-f", "spec.yaml", "--yes"], 0);
    let dest = env.path().join("dest");
    std::fs::create_dir_all(&dest).unwrap();
    let dest_state = || LocalStore::new(dest.join(".kusion").join("state"));

    let t = env.expect(&["state", "mv", "t:web", "t:web", "--to-stack", "dest"], 0);
    assert!(t.contains("Moved t:web to"), "{t}");
    assert_eq!(env.ids(), ["t:config", "t:web"], "nothing live changed");
    let here = env.json(&["state", "list", "-o", "json"], 0);
    assert_eq!(here["resources"].as_array().unwrap().len(), 1);
    let there = dest_state().load().unwrap();
    assert!(there.resources.contains_key("t:web"), "{there:?}");
    let history = env.json(&["state", "history", "-o", "json"], 0);
    assert_eq!(
        history.as_array().unwrap().last().unwrap()["operation"],
        "state mv"
    );
    // Moving onto an ID the destination has is refused.
    let t = env.expect(
        &["state", "mv", "t:config", "t:web", "--to-stack", "dest"],
        1,
    );
    assert!(t.contains("already in the state"), "{t}");

    // A move cut off after its first record: the entry is marked, every plan of the source
    // stops (neither deleting nor re-adopting it), and `state check` says what to do.
    {
        let store: Arc<dyn StateStore> = Arc::new(LocalStore::new(env.path().join("state")));
        let writer = Writer::acquire(
            store,
            &LeaseHolder::current("test"),
            std::time::Duration::from_secs(60),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        writer
            .append(&[JournalRecord::Handoff {
                id: "t:config".into(),
                handoff: Some(Handoff {
                    to: dest_state().location(),
                    key: "t:config".into(),
                }),
            }])
            .unwrap();
    }
    let t = env.expect(&["preview", "-f", "spec.yaml"], 1);
    assert!(t.contains("is being moved to the stack at"), "{t}");
    let t = env.expect(&["destroy", "-f", "spec.yaml", "--yes"], 1);
    assert!(t.contains("is being moved"), "{t}");
    assert_eq!(env.ids(), ["t:config", "t:web"]);
    let t = env.expect(&["state", "check"], 1);
    assert!(t.contains("run it again to finish"), "{t}");
    env.expect(
        &["state", "mv", "t:config", "t:config", "--to-stack", "dest"],
        0,
    );
    env.expect(&["state", "check"], 0);
    assert!(
        dest_state()
            .load()
            .unwrap()
            .resources
            .contains_key("t:config")
    );
    let here = env.json(&["state", "list", "-o", "json"], 0);
    assert!(here["resources"].as_array().unwrap().is_empty(), "{here}");
}
