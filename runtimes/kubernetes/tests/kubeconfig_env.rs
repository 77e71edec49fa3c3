//! Without any configured kubeconfig the runtime uses `$KUBECONFIG`, and without that
//! `~/.kube/config` (its own test binary, since the environment is process-wide).

use std::time::Duration;

use kusion_k8s_harness::{ControlPlane, Options};
use kusion_runtime_kubernetes::KubernetesRuntime;
use kusion_sdk::Resource;
use kusion_sdk::runtime::{ApplyRequest, Runtime};
use serde_json::json;

fn config_map(name: &str) -> Resource {
    let attrs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": {"a": "b"}});
    Resource::new(
        format!("v1:ConfigMap:default:{name}"),
        "Kubernetes",
        attrs.as_object().unwrap().clone(),
    )
}

fn create(rt: &KubernetesRuntime, planned: Resource) {
    rt.apply(&ApplyRequest {
        prior: None,
        prior_private: None,
        planned,
        dry_run: false,
        timeout: Some(Duration::from_secs(30)),
    })
    .unwrap_or_else(|e| panic!("{}", e.message));
}

#[test]
fn kubeconfig_comes_from_the_environment_when_not_configured() {
    let cp = ControlPlane::start_with(Options {
        controller_manager: false,
        fake_kubelet: false,
        ..Default::default()
    })
    .expect("control plane");
    // SAFETY: the other test of this binary names its kubeconfig explicitly and never reads the
    // environment, so nothing reads it concurrently.
    unsafe { std::env::set_var("KUBECONFIG", cp.kubeconfig_path()) };
    let rt = KubernetesRuntime::new();
    rt.configure(&serde_json::Value::Null).unwrap();
    let attrs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "env", "namespace": "default"}, "data": {"a": "b"}});
    let planned = Resource::new(
        "v1:ConfigMap:default:env",
        "Kubernetes",
        attrs.as_object().unwrap().clone(),
    );
    let applied = rt
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned,
            dry_run: false,
            timeout: Some(Duration::from_secs(30)),
        })
        .unwrap();
    assert_eq!(applied.resource.attributes["data"]["a"], json!("b"));
    let client = cp.client().unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client, "default");
    assert!(
        cp.block_on(api.get_opt("env")).unwrap().is_some(),
        "created on the $KUBECONFIG cluster"
    );

    // Without $KUBECONFIG: ~/.kube/config.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".kube")).unwrap();
    std::fs::copy(cp.kubeconfig_path(), home.path().join(".kube/config")).unwrap();
    // SAFETY: as above.
    unsafe {
        std::env::remove_var("KUBECONFIG");
        std::env::set_var("HOME", home.path());
    }
    let rt = KubernetesRuntime::new();
    rt.configure(&serde_json::Value::Null).unwrap();
    create(&rt, config_map("home"));
    assert!(
        cp.block_on(api.get_opt("home")).unwrap().is_some(),
        "created on the ~/.kube/config cluster"
    );
    // Neither: a clear error naming where it looked, not a panic.
    std::fs::remove_file(home.path().join(".kube/config")).unwrap();
    let rt = KubernetesRuntime::new();
    let err = rt
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: config_map("nowhere"),
            dry_run: true,
            timeout: Some(Duration::from_secs(30)),
        })
        .unwrap_err();
    assert!(
        err.message.contains("~/.kube/config")
            && err.message.contains("v1:ConfigMap:default:nowhere"),
        "{}",
        err.message
    );
}

/// Verbs may be called from inside another tokio runtime (as an async host would) and the runtime
/// may be dropped there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usable_and_droppable_inside_an_async_host() {
    let rt = KubernetesRuntime::new();
    rt.configure(&json!({"kubeconfig": "/nonexistent/kubeconfig"}))
        .unwrap();
    let attrs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}});
    let planned = Resource::new(
        "v1:ConfigMap:default:x",
        "Kubernetes",
        attrs.as_object().unwrap().clone(),
    );
    let err = rt
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned,
            dry_run: true,
            timeout: None,
        })
        .unwrap_err();
    assert!(
        err.message.contains("/nonexistent/kubeconfig"),
        "{}",
        err.message
    );
    drop(rt);
}
