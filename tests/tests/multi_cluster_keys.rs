//! One resource ID applied to two real control planes in one spec, through the shipped
//! `kusionctl` with the Kubernetes runtime loaded as a native plugin: state keys are qualified by
//! the cluster (`id@context`), so the two copies neither collide nor diff against each other;
//! preview then shows no changes and destroy removes both.

use std::path::Path;
use std::process::Output;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kusion_k8s_harness::{ControlPlane, Options};
use kusion_tests::cli::{built, kusionctl_in, text};
use serde_json::{Value, json};

const ID: &str = "v1:ConfigMap:default:where";
const COPY_ID: &str = "v1:ConfigMap:default:copy";

/// `kusionctl` run in `dir` (also its `HOME`), with its state and runtime configuration there.
/// The Kubernetes runtime plugin must sit next to it (`scripts/test.sh` builds the whole
/// workspace, binaries and cdylibs, before running tests).
fn run(dir: &Path, args: &[&str]) -> Output {
    built("libkusion_runtime_kubernetes.so");
    kusionctl_in(dir, dir)
        .args(args)
        .env("KUSION_STATE_DIR", dir.join("state"))
        .env("KUSION_RUNTIME_CONFIG", dir.join("runtimes.json"))
        .output()
        .expect("running kusionctl")
}

fn config_map(name: &str, data: Value, extensions: Value) -> Value {
    json!({
        "id": format!("v1:ConfigMap:default:{name}"),
        "type": "Kubernetes",
        "attributes": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": "default"}, "data": data},
        "extensions": extensions,
    })
}

fn data_of(cp: &ControlPlane, name: &str) -> Option<String> {
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), "default");
    cp.block_on(api.get_opt(name))
        .unwrap()
        .map(|cm| cm.data.unwrap_or_default()["cluster"].clone())
}

#[test]
fn one_id_on_two_control_planes_in_one_spec() {
    let start = || {
        ControlPlane::start_with(Options {
            controller_manager: false,
            fake_kubelet: false,
            ..Default::default()
        })
        .expect("a control plane")
    };
    let (first, second) = (start(), start());
    let dir = tempfile::tempdir().unwrap();
    // The stack's cluster is the first; resources name the second by kubeconfig and context.
    let runtimes = json!({"kubernetes": {"kubeconfig": first.kubeconfig_path()}});
    std::fs::write(dir.path().join("runtimes.json"), runtimes.to_string()).unwrap();
    let elsewhere =
        json!({"kubeconfig": second.kubeconfig_path(), "kubeContext": second.context()});
    let spec = json!({"resources": [
        config_map("where", json!({"cluster": "first"}), json!({})),
        config_map("where", json!({"cluster": "second"}), elsewhere.clone()),
        // A bare-ID reference names the copy in the referrer's own cluster.
        config_map("copy", json!({"cluster": format!("$kusion_path[{ID}].data.cluster")}),
                   elsewhere),
    ]});
    std::fs::write(dir.path().join("spec.json"), spec.to_string()).unwrap();

    let out = run(dir.path(), &["apply", "-f", "spec.json", "--yes"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("3 created"), "{shown}");
    assert_eq!(data_of(&first, "where").as_deref(), Some("first"));
    assert_eq!(data_of(&second, "where").as_deref(), Some("second"));
    assert_eq!(data_of(&second, "copy").as_deref(), Some("second"));
    assert_eq!(data_of(&first, "copy"), None);

    let state: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("state").join("state.json")).unwrap(),
    )
    .unwrap();
    let mut keys: Vec<(String, Option<String>)> = state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["resource"]["id"].as_str().unwrap().to_string(),
                e["target"].as_str().map(str::to_string),
            )
        })
        .collect();
    keys.sort();
    let context = Some(second.context().to_string());
    assert_eq!(
        keys,
        [
            (COPY_ID.to_string(), context.clone()),
            (ID.to_string(), None),
            (ID.to_string(), context),
        ],
        "{state:#}"
    );

    let out = run(dir.path(), &["preview", "-f", "spec.json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("No changes."), "{}", text(&out));

    let out = run(dir.path(), &["destroy", "--yes"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("3 deleted"), "{shown}");
    assert_eq!(data_of(&first, "where"), None);
    assert_eq!(data_of(&second, "where"), None);
    assert_eq!(data_of(&second, "copy"), None);
}
