//! Benchmark: `kusionctl run AppRecovery.k` restarting 200 pods (one app, 100 pods in each of two
//! clusters) in batches of 20, on two real control planes with the fake kubelet. Prints the total
//! time and how it splits into kusionctl's own work and waiting for the workloads to be ready.
//!
//! Run with `bash scripts/bench-ops-run.sh` (builds what it needs first).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kusion_k8s_harness::ControlPlane;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");
const NS: &str = "bench";
const PER_CLUSTER: usize = 100;
const BATCH: usize = 20;

fn deploy(cp: &ControlPlane) {
    let client = cp.client().expect("client");
    cp.block_on(async {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"replicas": PER_CLUSTER, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "main", "image": "example/web:1"}]}}},
        }))
        .unwrap();
        Api::<Deployment>::namespaced(client, NS)
            .create(&PostParams::default(), &d)
            .await
            .expect("deployment");
    });
}

fn ready_pods(cp: &ControlPlane) -> Vec<String> {
    let client = cp.client().expect("client");
    let start = Instant::now();
    loop {
        let pods = cp
            .block_on(Api::<Pod>::namespaced(client.clone(), NS).list(&ListParams::default()))
            .expect("list");
        let ready: Vec<String> = pods
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        if ready.len() == PER_CLUSTER {
            return ready;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "pods not ready: {}",
            ready.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to filter here.
    // The kubernetes runtime and CMDB plugins, staged beside the binary as a user's install has them.
    kusion_tests::cli::stage_plugins();
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let program: PathBuf = root.join("examples/app-recovery/AppRecovery.k");
    let east = ControlPlane::start().expect("control plane east");
    let west = ControlPlane::start().expect("control plane west");
    deploy(&east);
    deploy(&west);
    let mut records = Vec::new();
    let mut hosts = Vec::new();
    for (name, cp) in [("east", &east), ("west", &west)] {
        for pod in ready_pods(cp) {
            records.push(
                json!({"host": pod, "cluster": name, "namespace": NS, "pod": pod,
                                "workload": "web", "workload_kind": "Deployment", "app": "web"}),
            );
            hosts.push(pod);
        }
    }
    let config = json!({
        "clusters": {"east": {"kubeconfig": east.kubeconfig_path()}, "west": {"kubeconfig": west.kubeconfig_path()}},
        "kubernetes": {"watchIntervalMs": 200},
    });
    std::fs::write(dir.path().join("runtime.json"), config.to_string()).unwrap();
    std::fs::write(
        dir.path().join("cmdb.json"),
        Value::Array(records).to_string(),
    )
    .unwrap();
    let cmd = |args: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(args)
            .current_dir(dir.path())
            .env("KUSION_STATE_DIR", dir.path().join("state"))
            .env("KUSION_RUNTIME_CONFIG", dir.path().join("runtime.json"))
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .env(
                "KUSION_CMDB_URL",
                format!("sqlite://{}", dir.path().join("cmdb.db").display()),
            )
            .stdin(Stdio::null());
        c
    };
    let import = cmd(&["cmdb", "import", "cmdb.json"]).output().unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    let hosts_arg = format!("hosts={}", hosts.join(","));
    let batch_arg = format!("batchSize={BATCH}");
    let started = Instant::now();
    let out = cmd(&[
        "run",
        program.to_str().unwrap(),
        "-D",
        &hosts_arg,
        "-D",
        &batch_arg,
        "-D",
        "timeout=5m",
        "--yes",
        "-o",
        "json",
    ])
    .output()
    .unwrap();
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no report: {}{}",
                stdout,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert!(out.status.success(), "run failed: {report:#}");
    let recovered = report["targets"].as_array().map_or(0, |t| {
        t.iter().filter(|t| t["status"] == "recovered").count()
    });
    let t = &report["timing"];
    let ms = |k: &str| t[k].as_u64().unwrap_or(0) as f64 / 1000.0;
    println!("kusionctl run: {recovered} pods restarted across 2 clusters, batches of {BATCH}");
    println!(
        "  wall time (process)         {:>7.2} s",
        wall.as_secs_f64()
    );
    println!("  total (kusionctl's clock)   {:>7.2} s", ms("totalMs"));
    println!(
        "    compile AppRecovery.k     {:>7.2} s (includes the CMDB look-up)",
        ms("compileMs")
    );
    println!("    preflight (200 checks)    {:>7.2} s", ms("preflightMs"));
    println!("    execute                   {:>7.2} s", ms("executeMs"));
    println!(
        "  waiting for readiness       {:>7.2} s (slowest cluster)",
        ms("waitMs")
    );
    println!(
        "  kusionctl's own overhead    {:>7.2} s (total - waiting)",
        ms("overheadMs")
    );
    if let Some(groups) = t["groups"].as_array() {
        for g in groups {
            println!(
                "    {} / {}: acting {:.2} s, waiting {:.2} s",
                g["operation"].as_str().unwrap_or(""),
                g["cluster"].as_str().unwrap_or(""),
                g["actMs"].as_u64().unwrap_or(0) as f64 / 1000.0,
                g["waitMs"].as_u64().unwrap_or(0) as f64 / 1000.0
            );
        }
    }
}
