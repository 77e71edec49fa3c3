//! `kusionctl run` against real control planes: two clusters, Deployments whose pods the fake
//! kubelet makes crash, and the app-recovery example restarting exactly those pods in batches.
//!
//! Over 800 lines: one suite on one pair of control planes and one fixture (the crashing
//! Deployments); each test stands alone and reads top to bottom.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kusion_k8s_harness::{ControlPlane, Fault};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");
const NS: &str = "shop";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The Kubernetes runtime is loaded as a plugin, as a user's kusionctl loads it: from the
/// plugin folder beside the binary, where the harness stages this checkout's builds; it must
/// have been built.
fn require_runtime_plugin() {
    let staged = kusion_tests::cli::stage_plugins().join("kubernetes");
    assert!(
        staged.join("plugin.toml").is_file(),
        "the kubernetes runtime plugin is not built ({} is missing): run `cargo build -p kusion-runtime-kubernetes`",
        staged.display()
    );
}

struct Cluster {
    name: &'static str,
    cp: ControlPlane,
}

impl Cluster {
    fn start(name: &'static str) -> Cluster {
        let cp = ControlPlane::start()
            .unwrap_or_else(|e| panic!("control plane {name} could not start: {e}"));
        Cluster { name, cp }
    }

    fn client(&self) -> kube::Client {
        self.cp.client().expect("client")
    }

    fn deploy(&self, name: &str, replicas: i32) {
        let client = self.client();
        self.cp.block_on(async {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            let ns: Namespace =
                serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
            match namespaces.create(&PostParams::default(), &ns).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!("namespace: {e}"),
            }
            let d: Deployment = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": NS},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": {"app": name}},
                                      "spec": {"containers": [{"name": "main", "image": format!("example/{name}:1")}]}}},
            }))
            .unwrap();
            Api::<Deployment>::namespaced(client.clone(), NS)
                .create(&PostParams::default(), &d)
                .await
                .unwrap_or_else(|e| panic!("deployment {name}: {e}"));
        });
    }

    /// (name, uid, ready) of the pods whose name starts with `app-`, not being deleted.
    fn pods(&self, app: &str) -> Vec<(String, String, bool)> {
        let client = self.client();
        let list = self
            .cp
            .block_on(async {
                Api::<Pod>::namespaced(client, NS)
                    .list(&ListParams::default().labels(&format!("app={app}")))
                    .await
            })
            .expect("list pods");
        let mut out: Vec<(String, String, bool)> = list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| {
                let ready = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                (
                    p.metadata.name.unwrap_or_default(),
                    p.metadata.uid.unwrap_or_default(),
                    ready,
                )
            })
            .collect();
        out.sort();
        out
    }

    fn wait_ready(&self, app: &str, n: usize) -> Vec<(String, String, bool)> {
        let start = Instant::now();
        loop {
            let pods = self.pods(app);
            if pods.len() == n && pods.iter().all(|p| p.2) {
                return pods;
            }
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "{}: {app} pods not ready: {pods:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn crash(&self, pod: &str) {
        let kubelet = self.cp.kubelet().expect("fake kubelet runs");
        self.cp
            .block_on(kubelet.set_fault(NS, pod, Fault::CrashLoopBackOff))
            .expect("set fault");
    }
}

/// A test folder: state, runtime configuration naming the clusters, the CMDB.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(clusters: &[&Cluster]) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let mut map = serde_json::Map::new();
        for c in clusters {
            map.insert(
                c.name.to_string(),
                json!({"kubeconfig": c.cp.kubeconfig_path()}),
            );
        }
        let config = json!({"clusters": map, "kubernetes": {"watchIntervalMs": 200}});
        std::fs::write(dir.path().join("runtime.json"), config.to_string()).unwrap();
        Env { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .current_dir(self.path())
            .env("KUSION_STATE_DIR", self.path().join("state"))
            .env("KUSION_RUNTIME_CONFIG", self.path().join("runtime.json"))
            .env("XDG_CACHE_HOME", self.path().join("cache"))
            .env("HOME", self.path())
            .env(
                "KUSION_CMDB_URL",
                format!("sqlite://{}", self.path().join("cmdb.db").display()),
            )
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Load CMDB records (host -> cluster/namespace/pod/app) through `kusionctl cmdb import`.
    fn cmdb(&self, records: &[Value]) {
        let file = self.path().join("cmdb.json");
        std::fs::write(&file, Value::Array(records.to_vec()).to_string()).unwrap();
        let out = self.run(&["cmdb", "import", file.to_str().unwrap()]);
        assert!(out.status.success(), "cmdb import: {}", text(&out));
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn last_json(o: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("no JSON report ({e}): {}", text(o)))
}

fn app_recovery() -> String {
    workspace()
        .join("examples/app-recovery/AppRecovery.k")
        .display()
        .to_string()
}

fn record(cluster: &str, pod: &str, app: &str) -> Value {
    json!({"host": pod, "cluster": cluster, "namespace": NS, "pod": pod, "workload": app,
           "workload_kind": "Deployment", "app": app})
}

#[test]
fn app_recovery_restarts_only_the_crashing_pods_in_batches_across_two_clusters() {
    require_runtime_plugin();
    let east = Cluster::start("east");
    let west = Cluster::start("west");
    east.deploy("web", 3);
    east.deploy("api", 2);
    west.deploy("web", 3);
    let east_web = east.wait_ready("web", 3);
    let east_api = east.wait_ready("api", 2);
    let west_web = west.wait_ready("web", 3);

    let env = Env::new(&[&east, &west]);
    let mut records = Vec::new();
    for (c, pods, app) in [
        ("east", &east_web, "web"),
        ("east", &east_api, "api"),
        ("west", &west_web, "web"),
    ] {
        for p in pods.iter() {
            records.push(record(c, &p.0, app));
        }
    }
    env.cmdb(&records);

    // Crash three web pods and one api pod in east, two web pods in west.
    let broken: Vec<(&Cluster, String)> = vec![
        (&east, east_web[0].0.clone()),
        (&east, east_web[1].0.clone()),
        (&east, east_web[2].0.clone()),
        (&east, east_api[0].0.clone()),
        (&west, west_web[0].0.clone()),
        (&west, west_web[1].0.clone()),
    ];
    for (c, pod) in &broken {
        c.crash(pod);
    }
    let hosts: Vec<&str> = broken.iter().map(|(_, p)| p.as_str()).collect();
    let hosts_arg = format!("hosts={}", hosts.join(","));
    let out = env.run(&[
        "run",
        &app_recovery(),
        "-D",
        &hosts_arg,
        "-D",
        "batchSize=2",
        "-D",
        "timeout=90s",
        "--yes",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "run failed: {}", text(&out));
    let report = last_json(&out);
    assert_eq!(report["status"], "succeeded", "{report:#}");
    let targets = report["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 6, "{report:#}");
    assert!(
        targets.iter().all(|t| t["status"] == "recovered"),
        "{report:#}"
    );

    // Batches: east web has three targets in batches of 2 (2 then 1); a later batch starts only
    // after the earlier one recovered.
    let mut by_group: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
    for t in targets {
        by_group
            .entry((
                t["operation"].as_str().unwrap().into(),
                t["cluster"].as_str().unwrap().into(),
            ))
            .or_default()
            .push(t);
    }
    let east_web_batches: Vec<u64> = by_group[&("restart-web".into(), "east".into())]
        .iter()
        .map(|t| t["batch"].as_u64().unwrap())
        .collect();
    assert_eq!(
        east_web_batches.iter().filter(|b| **b == 1).count(),
        2,
        "{report:#}"
    );
    assert_eq!(
        east_web_batches.iter().filter(|b| **b == 2).count(),
        1,
        "{report:#}"
    );
    for group in by_group.values() {
        for a in group.iter() {
            for b in group.iter() {
                if b["batch"].as_u64() > a["batch"].as_u64() {
                    assert!(
                        b["actedAtMs"].as_u64() >= a["recoveredAtMs"].as_u64(),
                        "batch {} started before batch {} recovered: {report:#}",
                        b["batch"],
                        a["batch"]
                    );
                }
            }
        }
    }

    // Only the broken pods were deleted; their replacements are ready.
    let check = |c: &Cluster, app: &str, before: &[(String, String, bool)], n: usize| {
        let after = c.wait_ready(app, n);
        let after_uids: BTreeSet<&str> = after.iter().map(|p| p.1.as_str()).collect();
        for (name, uid, _) in before {
            let was_broken = broken.iter().any(|(bc, p)| bc.name == c.name && p == name);
            assert_eq!(
                !after_uids.contains(uid.as_str()),
                was_broken,
                "{}: pod {name} (broken: {was_broken}) deleted: {}",
                c.name,
                !after_uids.contains(uid.as_str())
            );
        }
    };
    check(&east, "web", &east_web, 3);
    check(&east, "api", &east_api, 2);
    check(&west, "web", &west_web, 3);

    // The run is recorded: who, what, outcome.
    let history = env.run(&["run", "--history", "-o", "json"]);
    assert!(history.status.success(), "{}", text(&history));
    let runs: Value = serde_json::from_slice(&history.stdout).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["status"], "succeeded");
    assert!(
        runs[0]["program"]
            .as_str()
            .unwrap()
            .ends_with("AppRecovery.k")
    );
    assert_eq!(runs[0]["args"][0], hosts_arg);
    assert_eq!(runs[0]["targets"].as_array().unwrap().len(), 6);
    assert!(!runs[0]["holder"]["owner"].as_str().unwrap().is_empty());
    let human = env.run(&["run", "--history"]);
    assert!(text(&human).contains("6/6 recovered"), "{}", text(&human));
}

#[test]
fn replacement_that_keeps_crashing_fails_after_the_timeout_naming_app_and_reason() {
    require_runtime_plugin();
    let east = Cluster::start("east");
    east.deploy("web", 2);
    let pods = east.wait_ready("web", 2);
    let env = Env::new(&[&east]);
    env.cmdb(
        &pods
            .iter()
            .map(|p| record("east", &p.0, "web"))
            .collect::<Vec<_>>(),
    );
    // Every new web pod crashes too.
    east.cp
        .kubelet()
        .unwrap()
        .inject(NS, "web-", Fault::CrashLoopBackOff);
    east.crash(&pods[0].0);
    let started = Instant::now();
    let hosts = format!("hosts={}", pods[0].0);
    let out = env.run(&[
        "run",
        &app_recovery(),
        "-D",
        &hosts,
        "-D",
        "timeout=6s",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        started.elapsed() >= Duration::from_secs(6),
        "gave up before the timeout"
    );
    let t = text(&out);
    assert!(
        t.contains("app web") && t.contains("CrashLoopBackOff"),
        "{t}"
    );
    assert!(t.contains(&pods[0].0), "{t}");
    let history: Value =
        serde_json::from_slice(&env.run(&["run", "--history", "-o", "json"]).stdout).unwrap();
    assert_eq!(history[0]["status"], "failed", "{history}");
    assert_eq!(history[0]["targets"][0]["outcome"], "failed", "{history}");
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    require_runtime_plugin();
    let east = Cluster::start("east");
    east.deploy("web", 2);
    let pods = east.wait_ready("web", 2);
    let env = Env::new(&[&east]);
    let mut records: Vec<Value> = pods.iter().map(|p| record("east", &p.0, "web")).collect();
    // A host the CMDB places in a cluster nobody configured.
    records.push(record("north", "web-elsewhere", "web"));
    // A row whose pod no longer exists (a stale CMDB).
    records.push(record("east", "web-gone", "web"));
    env.cmdb(&records);

    // Unknown hosts: reported by name, nothing deleted, exit 1, recorded as refused.
    let hosts = format!("hosts={},no-such-host", pods[0].0);
    let out = env.run(&["run", &app_recovery(), "-D", &hosts, "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no-such-host") && text(&out).contains("not found"),
        "{}",
        text(&out)
    );
    assert_eq!(east.pods("web"), pods, "nothing may be deleted");
    let history: Value =
        serde_json::from_slice(&env.run(&["run", "--history", "-o", "json"]).stdout).unwrap();
    assert_eq!(history[0]["status"], "failed");
    assert!(
        history[0]["notes"][0]
            .as_str()
            .unwrap()
            .contains("no-such-host")
    );

    // A target in a cluster without a kubeconfig: a clear error before anything runs.
    let out = env.run(&[
        "run",
        &app_recovery(),
        "-D",
        &format!("hosts={},web-elsewhere", pods[1].0),
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("cluster \"north\" has no kubeconfig") && t.contains("east"),
        "{t}"
    );
    assert_eq!(east.pods("web"), pods, "nothing may be deleted");

    // An unreachable CMDB: the program fails naming the plugin call.
    let out = env
        .cmd(&[
            "run",
            &app_recovery(),
            "-D",
            &format!("hosts={}", pods[0].0),
            "--yes",
        ])
        .env("KUSION_CMDB_URL", "postgres://kusion@127.0.0.1:1/cmdb")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("kcl_plugin.cmdb.lookup_hosts"),
        "{}",
        text(&out)
    );
    assert_eq!(east.pods("web"), pods, "nothing may be deleted");

    // A pod that no longer exists (stale CMDB row): refused with the target named.
    let out = env.run(&["run", &app_recovery(), "-D", "hosts=web-gone", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("web-gone") && text(&out).contains("does not exist"),
        "{}",
        text(&out)
    );

    // Dry run with good input: plan shown, nothing changed.
    let out = env.run(&[
        "run",
        &app_recovery(),
        "-D",
        &format!("hosts={}", pods[0].0),
        "--dry-run",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("batch 1/1") && text(&out).contains("delete pod"),
        "{}",
        text(&out)
    );
    assert_eq!(east.pods("web"), pods, "a dry run deletes nothing");
}

impl Cluster {
    fn deployment(&self, name: &str) -> Value {
        let client = self.client();
        let d = self
            .cp
            .block_on(async { Api::<Deployment>::namespaced(client, NS).get(name).await })
            .expect("get deployment");
        serde_json::to_value(d).unwrap()
    }
}

const WORKLOAD_OPS: &str = r#"import kusion.ops

_web = ops.workload(option("cluster"), "Deployment", "shop", "web")

operations = [
    ops.Scale {
        name = "scale-up"
        targets = [_web]
        replicas = 3
        timeout = "60s"
    }
    ops.Restart {
        name = "rollout"
        targets = [_web]
        timeout = "60s"
        dependsOn = ["scale-up"]
    }
    ops.Rollback {
        name = "undo-rollout"
        targets = [_web]
        timeout = "60s"
        dependsOn = ["rollout"]
    }
]
"#;

#[test]
fn scale_rollout_restart_and_rollback_follow_their_dependencies() {
    require_runtime_plugin();
    let east = Cluster::start("east");
    east.deploy("web", 1);
    east.wait_ready("web", 1);
    let env = Env::new(&[&east]);
    let program = env.path().join("workload.k");
    std::fs::write(&program, WORKLOAD_OPS).unwrap();
    let program = program.to_str().unwrap();

    // The plan shows the rollback as not possible yet (no earlier revision before the rollout)
    // without refusing the run.
    let out = env.run(&["run", program, "-D", "cluster=east", "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("not possible yet (before rollout)"),
        "{}",
        text(&out)
    );

    let out = env.run(&["run", program, "-D", "cluster=east", "--yes", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report = last_json(&out);
    let at = |op: &str, key: &str| {
        report["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["operation"] == op)
            .and_then(|t| t[key].as_u64())
            .unwrap_or_else(|| panic!("{op}.{key} missing: {report:#}"))
    };
    // dependsOn: each operation starts after the previous one recovered.
    assert!(
        at("rollout", "actedAtMs") >= at("scale-up", "recoveredAtMs"),
        "{report:#}"
    );
    assert!(
        at("undo-rollout", "actedAtMs") >= at("rollout", "recoveredAtMs"),
        "{report:#}"
    );

    let d = east.deployment("web");
    assert_eq!(d["spec"]["replicas"], 3, "{d:#}");
    // Rolled back to the first template: the rollout's restart annotation is gone again.
    assert!(
        d["spec"]["template"]["metadata"]["annotations"]
            .get("kusion.io/restartedAt")
            .is_none(),
        "{d:#}"
    );
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "3",
        "{d:#}"
    );
    east.wait_ready("web", 3);

    // A workload that does not exist is refused before anything runs.
    let failing = WORKLOAD_OPS.replace("\"shop\", \"web\")", "\"shop\", \"nope\")");
    let program2 = env.path().join("failing.k");
    std::fs::write(&program2, failing).unwrap();
    let out = env.run(&[
        "run",
        program2.to_str().unwrap(),
        "-D",
        "cluster=east",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("does not exist"), "{}", text(&out));
}

/// The example's CMDB fixture (CSV and JSON hold the same rows) drives AppRecovery.k's plan; an
/// unreachable cluster fails the preflight per target, and nothing runs.
#[test]
fn fixture_cmdb_plans_per_app_and_unreachable_clusters_refuse() {
    require_runtime_plugin();
    let dir = tempfile::tempdir().unwrap();
    // A kubeconfig whose server refuses connections.
    let kubeconfig = dir.path().join("down.kubeconfig");
    std::fs::write(
        &kubeconfig,
        json!({"apiVersion": "v1", "kind": "Config", "current-context": "down",
               "clusters": [{"name": "down", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": true}}],
               "users": [{"name": "down", "user": {"token": "x"}}],
               "contexts": [{"name": "down", "context": {"cluster": "down", "user": "down"}}]})
        .to_string(),
    )
    .unwrap();
    let config = json!({"clusters": {"east": {"kubeconfig": kubeconfig}, "west": {"kubeconfig": kubeconfig}}});
    std::fs::write(dir.path().join("runtime.json"), config.to_string()).unwrap();
    let example = workspace().join("examples/app-recovery");
    let run = |db: &str, args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .current_dir(dir.path())
            .env("KUSION_STATE_DIR", dir.path().join("state"))
            .env("KUSION_RUNTIME_CONFIG", dir.path().join("runtime.json"))
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .env("HOME", dir.path())
            .env(
                "KUSION_CMDB_URL",
                format!("sqlite://{}", dir.path().join(db).display()),
            )
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let mut plans = Vec::new();
    for (db, file) in [("csv.db", "cmdb.csv"), ("json.db", "cmdb.json")] {
        let out = run(
            db,
            &["cmdb", "import", example.join(file).to_str().unwrap()],
        );
        assert!(out.status.success(), "{}", text(&out));
        let hosts = "hosts=web-7d9f8c6b5-abcde,api-5c4b9d7f8-pqrst,web-6b8c9d5f4-uvwxy,ghost-1";
        let out = run(
            db,
            &[
                "run",
                &app_recovery(),
                "-D",
                hosts,
                "--dry-run",
                "-o",
                "json",
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let report = last_json(&out);
        assert_eq!(report["status"], "refused", "{report:#}");
        plans.push(report["plan"].clone());
    }
    assert_eq!(
        plans[0], plans[1],
        "CSV and JSON fixtures must give the same plan"
    );
    let plan = &plans[0];
    let ops: Vec<&str> = plan["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["restart-web", "restart-api"], "{plan:#}");
    let web_clusters: Vec<&str> = plan["operations"][0]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(web_clusters, ["east", "west"], "{plan:#}");
    assert_eq!(plan["unresolved"][0]["subject"], "ghost-1", "{plan:#}");
    let first = &plan["operations"][0]["clusters"][0]["batches"][0][0];
    assert_eq!(first["target"], "east/v1:Pod:shop:web-7d9f8c6b5-abcde");
    let error = first["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("web-7d9f8c6b5-abcde") && error.contains("Connect"),
        "{plan:#}"
    );
}

/// `--partial`: a host the CMDB does not know is reported, the known hosts' pods are restarted
/// anyway, and the run still exits non-zero (not every subject recovered) with the unknown host
/// recorded as unresolved. Without `--partial` the same input is refused (see
/// `bad_input_is_refused_before_anything_runs`).
#[test]
fn partial_runs_the_resolved_targets_and_reports_the_rest() {
    require_runtime_plugin();
    let east = Cluster::start("east");
    east.deploy("web", 3);
    let pods = east.wait_ready("web", 3);
    let env = Env::new(&[&east]);
    env.cmdb(
        &pods
            .iter()
            .map(|p| record("east", &p.0, "web"))
            .collect::<Vec<_>>(),
    );
    east.crash(&pods[0].0);
    let hosts = format!("hosts={},no-such-host", pods[0].0);
    let out = env.run(&[
        "run",
        &app_recovery(),
        "-D",
        &hosts,
        "-D",
        "timeout=60s",
        "--partial",
        "--yes",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report = last_json(&out);
    assert_eq!(report["status"], "failed", "{report:#}");
    let targets = report["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1, "{report:#}");
    assert_eq!(
        targets[0]["target"],
        format!("east/v1:Pod:{NS}:{}", pods[0].0),
        "{report:#}"
    );
    assert_eq!(targets[0]["status"], "recovered", "{report:#}");
    assert_eq!(
        report["unresolved"][0]["subject"], "no-such-host",
        "{report:#}"
    );
    assert!(
        report["unresolved"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("not found"),
        "{report:#}"
    );
    // Exactly the known broken pod was replaced; the others are untouched.
    let after = east.wait_ready("web", 3);
    let after_uids: BTreeSet<&str> = after.iter().map(|p| p.1.as_str()).collect();
    assert!(!after_uids.contains(pods[0].1.as_str()), "{after:?}");
    assert!(after_uids.contains(pods[1].1.as_str()), "{after:?}");
    assert!(after_uids.contains(pods[2].1.as_str()), "{after:?}");

    let history: Value =
        serde_json::from_slice(&env.run(&["run", "--history", "-o", "json"]).stdout).unwrap();
    let outcomes: BTreeMap<String, String> = history[0]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["target"].as_str().unwrap().to_string(),
                t["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(history[0]["status"], "failed", "{history}");
    assert_eq!(outcomes["no-such-host"], "unresolved", "{history}");
    assert_eq!(
        outcomes[&format!("east/v1:Pod:{NS}:{}", pods[0].0)],
        "recovered",
        "{history}"
    );
    // The human report names the unresolved host too.
    east.crash(&after[0].0);
    env.cmdb(&[record("east", &after[0].0, "web")]);
    let out = env.run(&[
        "run",
        &app_recovery(),
        "-D",
        &format!("hosts={},ghost-2", after[0].0),
        "-D",
        "timeout=60s",
        "--partial",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("ghost-2: CMDB:") && t.contains("1/2 target(s) recovered"),
        "{t}"
    );
}

/// `maxUnavailable` as a percentage through the real kusionctl: 50% of 4 broken pods of one app
/// is 2 in flight at once, so the 4 pods go in two batches of 2 even though batchSize is 4.
#[test]
fn max_unavailable_percentage_caps_the_batches() {
    require_runtime_plugin();
    let east = Cluster::start("east");
    east.deploy("web", 4);
    let pods = east.wait_ready("web", 4);
    let env = Env::new(&[&east]);
    env.cmdb(
        &pods
            .iter()
            .map(|p| record("east", &p.0, "web"))
            .collect::<Vec<_>>(),
    );
    for p in &pods {
        east.crash(&p.0);
    }
    let hosts = format!(
        "hosts={}",
        pods.iter()
            .map(|p| p.0.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    let program = app_recovery();
    let args: [&str; 10] = [
        "run",
        &program,
        "-D",
        &hosts,
        "-D",
        "batchSize=4",
        "-D",
        "maxUnavailable=50%",
        "-D",
        "timeout=60s",
    ];
    let mut dry_args = args.to_vec();
    dry_args.push("--dry-run");
    let dry = env.run(&dry_args);
    assert!(dry.status.success(), "{}", text(&dry));
    assert!(
        text(&dry).contains("max unavailable 2 (50% of 4 target(s))")
            && text(&dry).contains("batch 2/2"),
        "{}",
        text(&dry)
    );
    let mut run_args = args.to_vec();
    run_args.extend(["--yes", "-o", "json"]);
    let out = env.run(&run_args);
    assert!(out.status.success(), "{}", text(&out));
    let report = last_json(&out);
    assert_eq!(report["plan"]["operations"][0]["maxUnavailable"], 2);
    assert_eq!(report["plan"]["operations"][0]["maxUnavailablePercent"], 50);
    let targets = report["targets"].as_array().unwrap();
    let in_batch = |b: u64| targets.iter().filter(|t| t["batch"] == b).count();
    assert_eq!((in_batch(1), in_batch(2)), (2, 2), "{report:#}");
    east.wait_ready("web", 4);

    // A percentage outside 1%..100% is refused by the package's schema, naming the value.
    let out = env.run(&[
        "run",
        &app_recovery(),
        "-D",
        &format!("hosts={}", pods[0].0),
        "-D",
        "maxUnavailable=150%",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("150%"), "{}", text(&out));
}

/// `kusionctl run` with its records in PostgreSQL: the run is recorded there (not in the local
/// state folder) and listed by `--history`; a run SIGKILLed while waiting for recovery leaves a
/// readable record saying `running`, and the next run numbers after it.
#[test]
fn run_records_in_postgres_survive_a_killed_run() {
    require_runtime_plugin();
    let pg = kusion_pg_harness::PgServer::start()
        .unwrap_or_else(|e| panic!("the PostgreSQL test server must start: {e}"));
    let backend = format!("{}?stack=shop/prod", pg.url());
    let east = Cluster::start("east");
    east.deploy("web", 2);
    east.deploy("api", 1);
    let web = east.wait_ready("web", 2);
    let api = east.wait_ready("api", 1);
    let env = Env::new(&[&east]);
    let mut records: Vec<Value> = web.iter().map(|p| record("east", &p.0, "web")).collect();
    records.push(record("east", &api[0].0, "api"));
    env.cmdb(&records);
    east.crash(&web[0].0);

    let out = env.run(&[
        "run",
        &app_recovery(),
        "-D",
        &format!("hosts={}", web[0].0),
        "-D",
        "timeout=60s",
        "--state-backend",
        &backend,
        "--yes",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(last_json(&out)["run"], 1, "{}", text(&out));
    east.wait_ready("web", 2);
    let history = |env: &Env| -> Value {
        let out = env.run(&[
            "run",
            "--history",
            "-o",
            "json",
            "--state-backend",
            &backend,
        ]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let runs = history(&env);
    assert_eq!(runs[0]["status"], "succeeded", "{runs}");
    assert_eq!(runs[0]["targets"][0]["outcome"], "recovered", "{runs}");
    assert!(
        !env.path().join("state").join("runs").exists(),
        "the run went to the local state folder"
    );

    // A replacement that never becomes ready: the run waits, and is killed while it does.
    east.cp
        .kubelet()
        .unwrap()
        .inject(NS, "api-", Fault::CrashLoopBackOff);
    east.crash(&api[0].0);
    let mut child = env
        .cmd(&[
            "run",
            &app_recovery(),
            "-D",
            &format!("hosts={}", api[0].0),
            "-D",
            "timeout=120s",
            "--state-backend",
            &backend,
            "--yes",
            "-o",
            "json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the pod was deleted (the run is in its batch), then kill it.
    let deadline = Instant::now() + Duration::from_secs(180);
    while east.pods("api").iter().any(|p| p.1 == api[0].1) {
        assert!(Instant::now() < deadline, "the run never deleted the pod");
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(200));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let runs = history(&env);
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
    assert_eq!(runs[1]["id"], 2, "{runs}");
    assert_eq!(runs[1]["status"], "running", "{runs}");
    assert!(runs[1]["finishedAt"].is_null(), "{runs}");
    assert_eq!(runs[1]["args"][0], format!("hosts={}", api[0].0), "{runs}");
    let human = env.run(&["run", "--history", "--state-backend", &backend]);
    assert!(text(&human).contains("running"), "{}", text(&human));

    // The next run numbers after the killed one (dry runs are not recorded; a refused run is).
    let out = env.run(&[
        "run",
        &app_recovery(),
        "-D",
        "hosts=unknown-host",
        "--state-backend",
        &backend,
        "--yes",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(last_json(&out)["run"], 3, "{}", text(&out));
}

/// The UIDs of `app`'s pods that still exist (not deleted, not being deleted).
fn uids(c: &Cluster, app: &str) -> BTreeSet<String> {
    c.pods(app).into_iter().map(|p| p.1).collect()
}

fn history_json(env: &Env) -> Value {
    let out = env.run(&["run", "--history", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Day-2 safety on a real control plane: an interrupt during a pause starts nothing more; a
/// SIGKILLed run's record lists every pod it deleted; runs of one stack exclude each other, so
/// two runs with `maxUnavailable=1` on one app never have two of its pods down at once.
#[test]
fn interrupted_killed_and_concurrent_runs_stay_safe() {
    require_runtime_plugin();
    let east = Cluster::start("east");
    east.deploy("web", 4);
    let pods = east.wait_ready("web", 4);
    let env = Env::new(&[&east]);
    env.cmdb(
        &pods
            .iter()
            .map(|p| record("east", &p.0, "web"))
            .collect::<Vec<_>>(),
    );
    let program = app_recovery();
    let hosts = |ps: &[(String, String, bool)]| {
        format!(
            "hosts={}",
            ps.iter()
                .map(|p| p.0.as_str())
                .collect::<Vec<_>>()
                .join(",")
        )
    };

    // 1. SIGINT during the pause after batch 1: no later pod is deleted.
    let h = hosts(&pods[..3]);
    let child = env
        .cmd(&[
            "run",
            &program,
            "-D",
            &h,
            "-D",
            "batchSize=1",
            "-D",
            "pause=8s",
            "-D",
            "timeout=60s",
            "--yes",
            "-o",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    while uids(&east, "web").contains(&pods[0].1) {
        assert!(Instant::now() < deadline, "batch 1 never acted");
        std::thread::sleep(Duration::from_millis(100));
    }
    east.wait_ready("web", 4);
    std::thread::sleep(Duration::from_millis(1500));
    let kill = |sig: &str, pid: u32| {
        assert!(
            Command::new("kill")
                .args([sig, &pid.to_string()])
                .status()
                .unwrap()
                .success()
        )
    };
    kill("-INT", child.id());
    let signalled = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "an interrupt during a pause must end the run at once"
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // stderr is JSON only, each line with a time and the run id.
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["time"].is_string(), "{line}");
        if v["event"] != "interrupted" {
            assert_eq!(v["run"], 1, "{line}");
        }
    }
    std::thread::sleep(Duration::from_secs(10));
    let now = uids(&east, "web");
    assert!(
        now.contains(&pods[1].1) && now.contains(&pods[2].1),
        "a pod was deleted after the interrupt: {now:?}"
    );
    let runs = history_json(&env);
    assert_eq!(runs[0]["status"], "interrupted", "{runs}");
    let outcome = |run: &Value, pod: &str| -> String {
        run["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["target"].as_str().unwrap().ends_with(pod))
            .map(|t| t["outcome"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert_eq!(outcome(&runs[0], &pods[0].0), "recovered", "{runs}");
    assert_eq!(outcome(&runs[0], &pods[1].0), "not started", "{runs}");

    // 2. SIGKILL while waiting for recovery: the record still names the deleted pod.
    let before = uids(&east, "web");
    let fresh = east.wait_ready("web", 4);
    east.cp
        .kubelet()
        .unwrap()
        .inject(NS, "web-", Fault::CrashLoopBackOff);
    let victim = fresh[0].clone();
    // Pods replaced since the CMDB was written (section 1 recovered one) must be in it too.
    env.cmdb(
        &fresh
            .iter()
            .map(|p| record("east", &p.0, "web"))
            .collect::<Vec<_>>(),
    );
    let killed_out = env.dir.path().join("killed-run.stdout");
    let killed_err = env.dir.path().join("killed-run.stderr");
    let mut child = env
        .cmd(&[
            "run",
            &program,
            "-D",
            &format!("hosts={}", victim.0),
            "-D",
            "timeout=120s",
            "--yes",
            "-o",
            "json",
        ])
        .stdout(Stdio::from(std::fs::File::create(&killed_out).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&killed_err).unwrap()))
        .spawn()
        .unwrap();
    // A loaded machine can take long to reach the deletion; what matters is that the run is
    // still alive and has not given up, so the wait ends only on exit or a generous deadline.
    let deadline = Instant::now() + Duration::from_secs(240);
    while uids(&east, "web").contains(&victim.1) {
        let exited = child.try_wait().unwrap();
        if exited.is_some() || Instant::now() >= deadline {
            panic!(
                "the run never deleted the pod (exit {exited:?}):\n{}\n{}",
                std::fs::read_to_string(&killed_out).unwrap_or_default(),
                std::fs::read_to_string(&killed_err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    kill("-KILL", child.id());
    child.wait().unwrap();
    let runs = history_json(&env);
    let killed = &runs[1];
    assert_eq!(killed["status"], "running", "{runs}");
    let recorded = outcome(killed, &victim.0);
    assert!(
        recorded == "acting" || recorded == "failed",
        "the deleted pod is in the killed run's record: {runs}"
    );
    let _ = before;
    // Replacements made while pods crashed stay crashing: let new ones start healthy.
    east.cp.kubelet().unwrap().inject(NS, "web-", Fault::Ready);
    let client = east.client();
    east.cp.block_on(async {
        let api = Api::<Pod>::namespaced(client, NS);
        for p in api
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
        {
            let _ = api
                .delete(&p.metadata.name.unwrap_or_default(), &Default::default())
                .await;
        }
    });
    // The stack's lease of the killed run goes with its process: the next run proceeds.
    let web = east.wait_ready("web", 4);
    east.deploy("api", 1);
    let api = east.wait_ready("api", 1);

    // 3. Two runs at once on different pods of one app, each maxUnavailable=1: the second
    //    waits for the first (--wait-lock); never two pods of the app down at once. Without
    //    --wait-lock, a run is refused with exit 3 naming the holder.
    let mut records: Vec<Value> = web.iter().map(|p| record("east", &p.0, "web")).collect();
    records.push(record("east", &api[0].0, "api"));
    env.cmdb(&records);
    let spawn_run = |ps: &[(String, String, bool)], wait: bool| {
        let h = hosts(ps);
        let mut args = vec![
            "run",
            &program,
            "-D",
            &h,
            "-D",
            "batchSize=1",
            "-D",
            "maxUnavailable=1",
            // A pause between the two batches holds the stack for a known time, so the third
            // run below is tried while a run holds it, however quick the fake kubelet is.
            "-D",
            "pause=3s",
            "-D",
            "timeout=60s",
            "--yes",
            "-o",
            "json",
        ];
        if wait {
            args.extend(["--wait-lock", "3m"]);
        }
        env.cmd(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn_run(&web[..2], true);
    let b = spawn_run(&web[2..], true);
    let spawned = Instant::now();
    let mut worst = 4usize;
    let mut refused_checked = false;
    let mut third_runs_that_raced = 0;
    let (mut a, mut b) = (Some(a), Some(b));
    let deadline = Instant::now() + Duration::from_secs(240);
    while a.is_some() || b.is_some() {
        assert!(Instant::now() < deadline, "the runs never finished");
        let ready = east.pods("web").iter().filter(|p| p.2).count();
        worst = worst.min(ready);
        // While a run is under way it holds the stack (a pod it deleted is down while it
        // waits for the recovery): a third run (on another app, harmless if the check were
        // wrong) is refused at once, naming the holder. The holder can finish between the look and the
        // third run's attempt; then the third run acts on api, and the check is retried on the
        // api pod that replaced it.
        // A pod's replacement can be ready before a poll sees the gap (the fake kubelet is
        // quick), and the first run can be done within a second; a run that has had a moment
        // to start holds the stack until it ends, so the check is tried then too.
        if !refused_checked
            && (a.is_some() || b.is_some())
            && (ready < 4 || spawned.elapsed() > Duration::from_millis(300))
        {
            let target = east.pods("api").into_iter().find(|p| p.2);
            if let Some(target) = target {
                let out = env.run(&[
                    "run",
                    &program,
                    "-D",
                    &hosts(std::slice::from_ref(&target)),
                    "--yes",
                    "-o",
                    "json",
                ]);
                if out.status.success() {
                    third_runs_that_raced += 1;
                    assert!(third_runs_that_raced < 5, "never refused: {}", text(&out));
                    let mut records = records.clone();
                    records.pop();
                    for p in east.pods("api") {
                        records.push(record("east", &p.0, "api"));
                    }
                    env.cmdb(&records);
                } else {
                    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
                    assert!(text(&out).contains("(pid "), "{}", text(&out));
                    refused_checked = true;
                }
            }
        }
        for child in [&mut a, &mut b] {
            if let Some(c) = child
                && c.try_wait().unwrap().is_some()
            {
                let out = child.take().unwrap().wait_with_output().unwrap();
                assert!(out.status.success(), "{}", text(&out));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        worst >= 3,
        "two pods of web were down at once (ready fell to {worst})"
    );
    assert!(
        refused_checked,
        "no third run was tried while a run held the stack"
    );
    east.wait_ready("web", 4);
}

/// A Konfig checkout at `root`: project `shop` with stack `prod` (requiring approval, no
/// resources of its own) and the app-recovery program at `ops/AppRecovery.k`.
fn konfig_with_program(root: &Path) -> PathBuf {
    let stack = root.join("shop/prod");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::create_dir_all(root.join("ops")).unwrap();
    std::fs::write(root.join("kcl.mod"), "[package]\nname = \"konfig\"\n").unwrap();
    std::fs::write(root.join("shop/project.yaml"), "name: shop\n").unwrap();
    std::fs::write(
        stack.join("stack.yaml"),
        "name: prod\nrequireApproval: true\n",
    )
    .unwrap();
    std::fs::write(
        stack.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(stack.join("main.k"), "resources = []\n").unwrap();
    std::fs::copy(app_recovery(), root.join("ops/AppRecovery.k")).unwrap();
    stack
}

/// `POST .../runs` on `kusionctl server`: the app-recovery program through the API on a stack
/// that requires approval waits with its plan for a second person, then restarts exactly the
/// crashing pods with its progress in the event stream; the stack's run history holds the API's
/// run and a `kusionctl run` of the same program alike. Programs outside the checkout are refused.
#[test]
fn the_api_runs_a_program_after_approval_and_records_it_as_the_cli_does() {
    require_runtime_plugin();
    let east = Cluster::start("east");
    east.deploy("web", 4);
    let pods = east.wait_ready("web", 4);
    let env = Env::new(&[&east]);
    env.cmdb(
        &pods
            .iter()
            .map(|p| record("east", &p.0, "web"))
            .collect::<Vec<_>>(),
    );
    let root = env.path().join("konfig");
    let stack_dir = konfig_with_program(&root);
    let mut command = env.cmd(&["server", "--listen", "127.0.0.1:0", "-vv"]);
    // Each stack keeps its own state, as `kusionctl run` in the stack folder does.
    command.current_dir(&root).env_remove("KUSION_STATE_DIR");
    let server =
        kusion_tests::api_server::ApiServer::start(command, &env.path().join("server.log"));
    let mint =
        |subject: &str, role: &str| server.mint(&server.admin, subject, json!({"shop": role}));
    let (alice, bob, carol) = (
        mint("alice", "operator"),
        mint("bob", "approver"),
        mint("carol", "viewer"),
    );
    let runs = "/api/v1/projects/shop/stacks/prod/runs";
    let start = |token: &str, body: Value| server.call("POST", runs, token, Some(body));

    // Refused up front: a viewer, a path leaving the checkout, a key with `=`, kind run on the
    // operations endpoint.
    let program = json!({"program": "ops/AppRecovery.k", "args": {"hosts": pods[0].0}});
    assert_eq!(start(&carol, program.clone()).0, 403);
    for bad in [
        json!({"program": "../AppRecovery.k"}),
        json!({"program": "/etc/passwd.k"}),
        json!({"program": "ops/AppRecovery.k", "args": {"a=b": "c"}}),
        json!({"program": "ops/AppRecovery.k", "bogus": 1}),
    ] {
        let (code, body) = start(&alice, bad.clone());
        assert_eq!(code, 400, "{bad}: {body}");
    }
    let (code, body) = server.call(
        "POST",
        "/api/v1/projects/shop/stacks/prod/operations",
        &alice,
        Some(json!({"kind": "run"})),
    );
    assert_eq!(code, 400, "{body}");
    // A symbolic link out of the checkout is found by the worker, which refuses it.
    let outside = env.path().join("outside.k");
    std::fs::copy(app_recovery(), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("ops/Escape.k")).unwrap();
    let (code, op) = start(
        &alice,
        json!({"program": "ops/Escape.k", "args": {"hosts": pods[0].0}}),
    );
    assert_eq!(code, 202, "{op}");
    let failed = server.wait_final(&alice, op["id"].as_str().unwrap());
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("not inside the checkout"),
        "{failed}"
    );

    // Crash two pods; the run plans them in two batches and waits for approval.
    east.crash(&pods[0].0);
    east.crash(&pods[1].0);
    let hosts = format!("{},{}", pods[0].0, pods[1].0);
    let (code, op) = start(
        &alice,
        json!({"program": "ops/AppRecovery.k",
               "args": {"hosts": hosts, "batchSize": "1", "timeout": "90s"}}),
    );
    assert_eq!(code, 202, "{op}");
    assert_eq!(op["kind"], "run", "{op}");
    let id = op["id"].as_str().unwrap().to_string();
    let waiting = server.wait_for(&alice, &id, "awaiting_approval");
    let batches = &waiting["plan"]["operations"][0]["clusters"][0]["batches"];
    assert_eq!(batches.as_array().map(Vec::len), Some(2), "{waiting}");
    assert!(waiting["planHash"].is_string(), "{waiting}");
    assert!(
        waiting["run"].is_null(),
        "nothing recorded before approval: {waiting}"
    );
    assert_eq!(
        uids(&east, "web"),
        pods.iter().map(|p| p.1.clone()).collect(),
        "a pod was touched before approval"
    );
    let approve = format!("/api/v1/operations/{id}/approve");
    assert_eq!(
        server.call("POST", &approve, &alice, None).0,
        403,
        "the requester approved"
    );
    let (code, body) = server.call("POST", &approve, &bob, None);
    assert_eq!(code, 200, "{body}");
    let done = server.wait_final(&alice, &id);
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["approvedBy"], "bob");
    let run_id = done["run"].as_u64().expect("the run's record");
    let targets = done["result"]["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2, "{done}");
    assert!(targets.iter().all(|t| t["status"] == "recovered"), "{done}");

    // Exactly the crashing pods were replaced.
    east.wait_ready("web", 4);
    let now = uids(&east, "web");
    assert!(
        !now.contains(&pods[0].1) && !now.contains(&pods[1].1),
        "{now:?}"
    );
    assert!(
        now.contains(&pods[2].1) && now.contains(&pods[3].1),
        "{now:?}"
    );

    // Progress streamed: planned, then each batch started, acted and recovered in order.
    let events = server.events(&alice, &id);
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "run_progress" => e["progress"]["event"].as_str().unwrap().to_string(),
            other => other.to_string(),
        })
        .collect();
    let first = |k: &str| {
        kinds
            .iter()
            .position(|x| x == k)
            .unwrap_or_else(|| panic!("no {k}: {kinds:?}"))
    };
    assert!(first("run_planned") < first("batchStarted"), "{kinds:?}");
    assert!(first("batchStarted") < first("acted"), "{kinds:?}");
    assert!(first("acted") < first("batchDone"), "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| *k == "batchDone").count(),
        2,
        "{kinds:?}"
    );

    // The same program run by `kusionctl run` in the stack folder lands in the same history.
    east.crash(&pods[2].0);
    let out = env
        .cmd(&[
            "run",
            &root.join("ops/AppRecovery.k").display().to_string(),
            "-D",
            &format!("hosts={}", pods[2].0),
            "-D",
            "timeout=90s",
            "--yes",
            "-o",
            "json",
        ])
        .current_dir(&stack_dir)
        .env_remove("KUSION_STATE_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let (code, listed) = server.call("GET", runs, &carol, None);
    assert_eq!(code, 200, "{listed}");
    let listed = listed.as_array().unwrap().clone();
    // The symbolic link was refused before anything was compiled: no record.
    assert_eq!(listed.len(), 2, "the API's run and the CLI's: {listed:?}");
    let api_run = listed.iter().find(|r| r["id"] == run_id).unwrap();
    let cli_run = listed.last().unwrap();
    assert_eq!(api_run["program"], "ops/AppRecovery.k");
    assert_eq!(api_run["holder"]["owner"], "alice", "{api_run}");
    assert_eq!(
        api_run["args"],
        json!(["batchSize=1", format!("hosts={hosts}"), "timeout=90s"])
    );
    for run in [api_run, cli_run] {
        assert_eq!(run["status"], "succeeded", "{run}");
        assert!(!run["finishedAt"].is_null(), "{run}");
        assert!(
            run["targets"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["outcome"] == "recovered"),
            "{run}"
        );
    }
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(api_run), keys(cli_run));
    assert_eq!(keys(&api_run["targets"][0]), keys(&cli_run["targets"][0]));
    // And `kusionctl run --history` there reads the API's run as the API does.
    let history = env
        .cmd(&["run", "--history", "-o", "json"])
        .current_dir(&stack_dir)
        .env_remove("KUSION_STATE_DIR")
        .output()
        .unwrap();
    assert!(history.status.success(), "{}", text(&history));
    let history: Value = serde_json::from_slice(&history.stdout).unwrap();
    let from_cli = history
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == run_id)
        .unwrap();
    assert_eq!(from_cli["targets"], api_run["targets"]);
    assert_eq!(from_cli["args"], api_run["args"]);
    assert_eq!(from_cli["holder"], api_run["holder"]);
}
