//! `kusionctl plugin test` on the shipped Kubernetes runtime plugin with its sample
//! (runtimes/kubernetes/sample.yaml) against a real control plane (kusion-k8s-harness: etcd,
//! kube-apiserver, kube-controller-manager), the cluster named by `KUBECONFIG` as an operator
//! would run it.

use k8s_openapi::api::core::v1::ConfigMap;
use kusion_dev_plugins::fixtures;
use kusion_k8s_harness::{ControlPlane, Options};
use kusion_tests::cli::{built, kusionctl_in, text};

#[test]
fn kubernetes_runtime_passes_kusionctl_plugin_test_against_a_real_control_plane() {
    let plugin = built("libkusion_runtime_kubernetes.so");
    let cp = ControlPlane::start_with(Options {
        fake_kubelet: false,
        ..Options::default()
    })
    .unwrap_or_else(|e| panic!("the Kubernetes control plane must start for this test: {e}"));
    let sample = fixtures::workspace_root().join("runtimes/kubernetes/sample.yaml");
    let home = tempfile::tempdir().unwrap();
    let out = kusionctl_in(home.path(), home.path())
        .env("KUBECONFIG", cp.kubeconfig_path())
        .arg("plugin")
        .arg("test")
        .arg(&plugin)
        .arg("--sample")
        .arg(&sample)
        .output()
        .expect("running kusionctl plugin test");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    // Every check ran and passed: the runtime declares dry-run, import and watch.
    for check in [
        "describe",
        "configure",
        "absent",
        "dry-run",
        "create",
        "update",
        "import",
        "watch",
        "error",
        "timeout",
        "delete",
        "delete-absent",
    ] {
        assert!(
            t.lines()
                .any(|l| l.starts_with("ok") && l.split_whitespace().nth(1) == Some(check)),
            "{check} did not pass:\n{t}"
        );
    }
    assert!(t.contains("12 passed, 0 failed, 0 skipped"), "{t}");
    // The suite cleaned up behind itself, and the refused object was never made.
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(cp.client().unwrap(), "default");
    for name in ["kusion-conformance", "Not_A_Name"] {
        assert!(cp.block_on(api.get_opt(name)).unwrap().is_none(), "{name}");
    }

    // The same suite against a server that is not there fails, naming the server.
    let unreachable = home.path().join("unreachable.kubeconfig");
    let config = std::fs::read_to_string(cp.kubeconfig_path())
        .unwrap()
        .replace(cp.server(), "https://127.0.0.1:1");
    std::fs::write(&unreachable, config).unwrap();
    let out = kusionctl_in(home.path(), home.path())
        .env("KUBECONFIG", &unreachable)
        .arg("plugin")
        .arg("test")
        .arg(&plugin)
        .arg("--sample")
        .arg(&sample)
        .output()
        .expect("running kusionctl plugin test");
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("FAIL  absent") && t.contains("127.0.0.1:1"),
        "{t}"
    );
}
