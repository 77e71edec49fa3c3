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
    // SAFETY: this binary has a single test, so no other thread reads the environment now.
    unsafe { std::env::set_var("KUBECONFIG", cp.kubeconfig_path()) };
    let rt = KubernetesRuntime::new().unwrap();
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
