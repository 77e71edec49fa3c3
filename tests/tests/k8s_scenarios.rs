//! Issue 16's defects, each through the shipped `kusionctl` (with the Kubernetes runtime loaded
//! as a plugin) on a real control plane: removals reach the server, an immutable selector is
//! replaced, the next preview says `No changes.`, conflicts name the other manager and
//! `--force-conflicts` takes the fields, diffs are indented trees, and an unreachable cluster is
//! named once.

use std::path::Path;
use std::process::Output;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kusion_k8s_harness::ControlPlane;
use kusion_tests::cli::{built, kusionctl_in, text};
use serde_json::{Value, json};

fn run(dir: &Path, args: &[&str]) -> Output {
    kusionctl_in(dir, dir)
        .args(args)
        .env("KUSION_STATE_DIR", dir.join("state"))
        .env("KUSION_RUNTIME_CONFIG", dir.join("runtimes.json"))
        .env("NO_COLOR", "1")
        .output()
        .expect("running kusionctl")
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(out.status.success(), "kusionctl {args:?}:\n{}", text(&out));
    text(&out)
}

/// Whether `text` has a diff line marked `gutter` (`+`, `-`, `~`) showing `content`.
fn has_line(text: &str, gutter: char, content: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with(gutter) && l[1..].trim_start() == content
    })
}

fn write_spec(dir: &Path, resources: &[Value]) {
    std::fs::write(
        dir.join("spec.json"),
        json!({ "resources": resources }).to_string(),
    )
    .unwrap();
}

fn setup(cp: &ControlPlane) -> tempfile::TempDir {
    built("libkusion_runtime_kubernetes.so");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("runtimes.json"),
        json!({"kubernetes": {"kubeconfig": cp.kubeconfig_path()}}).to_string(),
    )
    .unwrap();
    dir
}

fn namespace(ns: &str) -> Value {
    json!({"id": format!("v1:Namespace:{ns}"), "type": "Kubernetes",
           "attributes": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}})
}

fn deployment(ns: &str, selector: Value, containers: Value) -> Value {
    json!({"id": format!("apps/v1:Deployment:{ns}:web"), "type": "Kubernetes",
           "attributes": {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": ns},
               "spec": {"replicas": 1, "selector": {"matchLabels": selector.clone()},
                        "template": {"metadata": {"labels": selector}, "spec": {"containers": containers}}}}})
}

#[test]
fn removals_apply_the_selector_is_replaced_and_the_next_preview_is_clean() {
    let cp = ControlPlane::shared();
    let dir = setup(cp);
    let d = dir.path();
    let ns = "t-scenario";
    let two = json!([
        {"name": "main", "image": "nginx:1.25",
         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
        {"name": "side", "image": "envoy:1.0"}]);
    write_spec(
        d,
        &[namespace(ns), deployment(ns, json!({"app": "web"}), two)],
    );
    // The creation's diff is an indented tree, not a line of JSON.
    let preview = ok(d, &["preview", "-d", "-f", "spec.json"]);
    assert!(has_line(&preview, '+', "- name: side"), "{preview}");
    assert!(
        preview.lines().all(|l| l.chars().count() < 120),
        "{preview}"
    );
    ok(d, &["apply", "-y", "-f", "spec.json"]);

    // The sidecar and env var B leave the spec.
    let one =
        json!([{"name": "main", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}]}]);
    write_spec(
        d,
        &[
            namespace(ns),
            deployment(ns, json!({"app": "web"}), one.clone()),
        ],
    );
    let preview = ok(d, &["preview", "-d", "-f", "spec.json"]);
    assert!(preview.contains("Update"), "{preview}");
    assert!(has_line(&preview, '-', "- name: B"), "{preview}");
    assert!(has_line(&preview, '-', "- name: side"), "{preview}");
    ok(d, &["apply", "-y", "-f", "spec.json"]);
    let api: Api<Deployment> = Api::namespaced(cp.client().unwrap(), ns);
    let live = cp.block_on(api.get("web")).unwrap();
    let containers = live.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(containers.len(), 1, "one container left");
    assert_eq!(
        containers[0].env.as_ref().map(Vec::len),
        Some(1),
        "one env var left"
    );
    assert!(ok(d, &["preview", "-f", "spec.json"]).contains("No changes."));

    // A new selector cannot be set in place: a replacement that says why, then applied.
    write_spec(
        d,
        &[
            namespace(ns),
            deployment(ns, json!({"app": "web", "tier": "front"}), one),
        ],
    );
    let preview = ok(d, &["preview", "-d", "-f", "spec.json"]);
    assert!(preview.contains("Replace"), "{preview}");
    assert!(
        preview.contains("spec.selector cannot change in place"),
        "{preview}"
    );
    let applied = ok(d, &["apply", "-y", "-f", "spec.json"]);
    assert!(applied.contains("Apply complete!"), "{applied}");
    let live = cp.block_on(api.get("web")).unwrap();
    let labels = live.spec.unwrap().selector.match_labels.unwrap();
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
    assert!(ok(d, &["preview", "-f", "spec.json"]).contains("No changes."));
}

#[test]
fn a_conflict_names_the_other_manager_and_force_conflicts_takes_the_field() {
    let cp = ControlPlane::shared();
    let dir = setup(cp);
    let d = dir.path();
    let ns = "t-scenario-conflict";
    let cm = json!({"id": format!("v1:ConfigMap:{ns}:settings"), "type": "Kubernetes",
        "attributes": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "settings", "namespace": ns}, "data": {"mode": "fast"}}});
    write_spec(d, &[namespace(ns), cm]);
    ok(d, &["apply", "-y", "-f", "spec.json"]);
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), ns);
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                        "data": {"mode": "slow"}});
    cp.block_on(api.patch(
        "settings",
        &PatchParams::apply("ops-console").force(),
        &Patch::Apply(&theirs),
    ))
    .unwrap();
    let out = run(d, &["apply", "-y", "-f", "spec.json"]);
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("\"ops-console\"") && said.contains("--force-conflicts"),
        "{said}"
    );
    ok(d, &["apply", "-y", "--force-conflicts", "-f", "spec.json"]);
    let live = cp.block_on(api.get("settings")).unwrap();
    assert_eq!(live.data.unwrap()["mode"], "fast");
    assert!(ok(d, &["preview", "-f", "spec.json"]).contains("No changes."));
}

#[test]
fn an_unreachable_cluster_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    built("libkusion_runtime_kubernetes.so");
    // A kubeconfig naming a port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("https://127.0.0.1:{port}");
    let kubeconfig = d.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        json!({"apiVersion": "v1", "kind": "Config", "current-context": "nowhere",
               "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": true}}],
               "users": [{"name": "u", "user": {"token": "t"}}],
               "contexts": [{"name": "nowhere", "context": {"cluster": "c", "user": "u"}}]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        d.join("runtimes.json"),
        json!({"kubernetes": {"kubeconfig": kubeconfig}}).to_string(),
    )
    .unwrap();
    let resources: Vec<Value> = (0..5)
        .map(|i| {
            json!({"id": format!("v1:ConfigMap:default:c{i}"), "type": "Kubernetes",
            "attributes": {"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": format!("c{i}"), "namespace": "default"}}})
        })
        .collect();
    write_spec(d, &resources);
    let out = run(d, &["preview", "-f", "spec.json"]);
    assert!(!out.status.success());
    let said = text(&out);
    assert_eq!(said.matches("cannot reach").count(), 1, "{said}");
    assert!(said.contains(&server), "{said}");
    assert!(said.contains("context nowhere"), "{said}");
    assert!(said.contains(&kubeconfig.display().to_string()), "{said}");
    assert!(said.contains("5 resources"), "{said}");
}
