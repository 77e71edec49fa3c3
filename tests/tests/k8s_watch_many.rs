//! `kusionctl apply --watch` of many workloads in one spec on a real control plane (issue 26):
//! 10 Deployments and StatefulSets, applied again and again with new images and replica counts
//! (creations, rollouts, scale-ups and scale-downs), must become ready every time, as they do on
//! the server, well within the watch timeout. Rounds: `KUSION_WATCH_ROUNDS` (default 4).

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams};
use kusion_k8s_harness::ControlPlane;
use kusion_tests::cli::{built, kusionctl_in, text};
use serde_json::{Value, json};

fn run(dir: &Path, args: &[&str]) -> Output {
    kusionctl_in(dir, dir)
        .args(args)
        .env("KUSION_STATE_DIR", dir.join("state"))
        .env("KUSION_RUNTIME_CONFIG", dir.join("runtimes.json"))
        .output()
        .expect("running kusionctl")
}

fn workload(ns: &str, kind: &str, name: &str, replicas: u64, tag: u64) -> Value {
    let (api_version, image) = ("apps/v1", format!("nginx:1.{tag}"));
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
                     "spec": {"containers": [{"name": "main", "image": image}]}}
    });
    if kind == "StatefulSet" {
        spec["serviceName"] = json!(name);
    }
    json!({"id": format!("{api_version}:{kind}:{ns}:{name}"), "type": "Kubernetes",
           "dependsOn": [format!("v1:Namespace:{ns}")],
           "attributes": {"apiVersion": api_version, "kind": kind,
                          "metadata": {"name": name, "namespace": ns}, "spec": spec}})
}

#[test]
fn apply_watch_of_ten_workloads_is_ready_every_time() {
    built("libkusion_runtime_kubernetes.so");
    let cp = ControlPlane::shared();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("runtimes.json"),
        json!({"kubernetes": {"kubeconfig": cp.kubeconfig_path()}}).to_string(),
    )
    .unwrap();
    let ns = "t-watch-many";
    let mut resources = vec![
        json!({"id": format!("v1:Namespace:{ns}"), "type": "Kubernetes",
        "attributes": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}}),
    ];
    let rounds: u64 = std::env::var("KUSION_WATCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let base = resources.len();
    for round in 0..rounds {
        resources.truncate(base);
        for i in 0..10 {
            let kind = if i % 2 == 0 {
                "Deployment"
            } else {
                "StatefulSet"
            };
            // Replicas go 1, 3, 2, 1, ...: scale-ups and scale-downs with every rollout.
            let replicas = [1, 3, 2][((round + i) % 3) as usize];
            resources.push(workload(ns, kind, &format!("w{i}"), replicas, 20 + round));
        }
        std::fs::write(
            dir.path().join("spec.json"),
            json!({ "resources": resources }).to_string(),
        )
        .unwrap();
        let started = Instant::now();
        let out = run(
            dir.path(),
            &[
                "apply",
                "-y",
                "--watch",
                "--watch-timeout",
                "90s",
                "-f",
                "spec.json",
            ],
        );
        let took = started.elapsed();
        assert!(
            out.status.success(),
            "round {round}: apply --watch failed after {took:?}:\n{}",
            text(&out)
        );
        // Ready means ready: no surplus pods left behind a scale-down.
        let pods: Api<DynamicObject> = Api::namespaced_with(
            cp.client().unwrap(),
            ns,
            &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
        );
        let listed = cp.block_on(pods.list(&ListParams::default())).unwrap();
        let want: u64 = (0..10).map(|i| [1, 3, 2][((round + i) % 3) as usize]).sum();
        // Terminating pods count: a pod being deleted still runs.
        let pods_now = listed.items.len() as u64;
        assert!(
            pods_now <= want,
            "round {round}: {pods_now} pods for {want} replicas after ready"
        );
        assert!(
            took < Duration::from_secs(90),
            "round {round} took {took:?}"
        );
        eprintln!("round {round}: ready in {took:?}");
    }
}
