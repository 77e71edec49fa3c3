//! Applies 200 objects (100 ConfigMaps, 50 Deployments, 50 Services in 5 namespaces) with the
//! runtime, then previews them unchanged (read + server-side dry-run per object, as the kernel
//! does), and does the same with `kubectl apply --server-side` / `kubectl diff --server-side`
//! on the same control plane in the same run. Prints the figures.
//!
//! Run: `cargo bench -p kusion-runtime-kubernetes --bench apply_200` (or scripts/k8s/bench.sh).
//! KUSION_BENCH_CONCURRENCY sets the runtime's parallel calls (default 10, the kernel's default).

use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kusion_k8s_harness::{ControlPlane, Options};
use kusion_runtime_kubernetes::KubernetesRuntime;
use kusion_sdk::Resource;
use kusion_sdk::runtime::{ApplyRequest, ReadRequest, Runtime};
use serde_json::{Value, json};

fn objects(prefix: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for n in 0..5 {
        let ns = format!("{prefix}-{n}");
        for i in 0..20 {
            out.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i}"), "namespace": ns},
                            "data": {"index": i.to_string(), "payload": "x".repeat(256)}}));
        }
        for i in 0..10 {
            let name = format!("app-{i}");
            out.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": {"app": name}},
                                      "spec": {"containers": [{"name": "main", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}}}));
            out.push(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
                "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}]}}));
        }
    }
    out
}

fn id_of(o: &Value) -> String {
    let s = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    format!(
        "{}:{}:{}:{}",
        s("/apiVersion"),
        s("/kind"),
        s("/metadata/namespace"),
        s("/metadata/name")
    )
}

/// Runs `f` over all items with `workers` threads; returns the wall time.
fn parallel<T: Sync>(items: &[T], workers: usize, f: impl Fn(&T) + Sync) -> Duration {
    let next = Mutex::new(0usize);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        *n += 1;
                        *n - 1
                    };
                    let Some(item) = items.get(i) else { break };
                    f(item);
                }
            });
        }
    });
    start.elapsed()
}

fn kubectl(cp: &ControlPlane, args: &[&str]) -> Duration {
    let start = Instant::now();
    let out = Command::new("kubectl")
        .arg(format!("--kubeconfig={}", cp.kubeconfig_path().display()))
        .args(args)
        .output()
        .expect("kubectl runs");
    let took = start.elapsed();
    // `kubectl diff` exits 1 when there are differences; anything above is an error.
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if args[0] == "diff" {
        assert!(
            out.stdout.is_empty(),
            "kubectl diff found changes: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    took
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would pass nothing useful: run either way.
    let workers: usize = std::env::var("KUSION_BENCH_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let cp = ControlPlane::start_with(Options {
        controller_manager: false,
        fake_kubelet: false,
        ..Default::default()
    })
    .expect("control plane");
    let rt = KubernetesRuntime::new();
    rt.configure(&json!({"kubeconfig": cp.kubeconfig_path()}))
        .unwrap();

    let ours: Vec<Resource> = objects("bench-k")
        .into_iter()
        .map(|o| Resource::new(id_of(&o), "Kubernetes", o.as_object().unwrap().clone()))
        .collect();
    let theirs = objects("bench-c");
    let dir = tempfile::tempdir().unwrap();
    let manifests: String = theirs
        .iter()
        .map(|o| format!("---\n{}\n", serde_json::to_string(o).unwrap()))
        .collect();
    std::fs::write(dir.path().join("all.yaml"), manifests).unwrap();
    let file = dir.path().join("all.yaml");
    let file = file.to_str().unwrap();

    // Namespaces first, outside the timings, for both.
    for prefix in ["bench-k", "bench-c"] {
        for n in 0..5 {
            let name = format!("{prefix}-{n}");
            let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            let r = Resource::new(
                format!("v1:Namespace:{name}"),
                "Kubernetes",
                ns.as_object().unwrap().clone(),
            );
            rt.apply(&ApplyRequest {
                prior: None,
                prior_private: None,
                planned: r,
                dry_run: false,
                timeout: None,
            })
            .unwrap();
        }
    }
    // Warm the runtime's client and discovery cache the way a real run's first preview would.
    for r in ours.iter().take(3) {
        rt.read(&ReadRequest {
            prior: None,
            prior_private: None,
            planned: Some(r.clone()),
            timeout: None,
        })
        .unwrap();
    }

    let apply = parallel(&ours, workers, |r| {
        rt.apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: r.clone(),
            dry_run: false,
            timeout: None,
        })
        .unwrap_or_else(|e| panic!("{}", e.message));
    });
    let preview = parallel(&ours, workers, |r| {
        let live = rt
            .read(&ReadRequest {
                prior: Some(r.clone()),
                prior_private: None,
                planned: Some(r.clone()),
                timeout: None,
            })
            .unwrap()
            .resource
            .expect("present");
        let dry = rt
            .apply(&ApplyRequest {
                prior: Some(r.clone()),
                prior_private: None,
                planned: r.clone(),
                dry_run: true,
                timeout: None,
            })
            .unwrap();
        assert_eq!(
            live.attributes, dry.resource.attributes,
            "{}: a no-change preview must show no change",
            r.id
        );
    });
    let k_apply = kubectl(&cp, &["apply", "--server-side", "-f", file]);
    let k_diff = kubectl(&cp, &["diff", "--server-side", "-f", file]);

    println!(
        "objects: {} (100 ConfigMaps, 50 Deployments, 50 Services in 5 namespaces), kube-apiserver v1.20.2",
        ours.len()
    );
    println!(
        "kusion runtime apply (SSA, {workers} parallel): {:>8.3} s",
        apply.as_secs_f64()
    );
    println!(
        "kubectl apply --server-side -f:              {:>8.3} s",
        k_apply.as_secs_f64()
    );
    println!(
        "kusion no-change preview (read + dry-run):   {:>8.3} s",
        preview.as_secs_f64()
    );
    println!(
        "kubectl diff --server-side -f:               {:>8.3} s",
        k_diff.as_secs_f64()
    );
}
