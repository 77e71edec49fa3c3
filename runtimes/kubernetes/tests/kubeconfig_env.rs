//! Without any configured kubeconfig the runtime uses `$KUBECONFIG` (its own test binary, since
//! the environment is process-wide).

use std::time::Duration;

use kusion_k8s_harness::{ControlPlane, Options};
use kusion_runtime_kubernetes::KubernetesRuntime;
use kusion_sdk::Resource;
use kusion_sdk::runtime::{ApplyRequest, Runtime};
use serde_json::json;

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
