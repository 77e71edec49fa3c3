//! Day-2 lifecycle on a real control plane, through the shipped `kusionctl` with the Kubernetes
//! runtime plugin: rollback of a Deployment's image and of a removed ConfigMap; drift made with
//! kubectl shown by `drift` and by `preview --detailed-exitcode`; a targeted apply; import of an
//! object kubectl created; a Secret filled from a `ref://file` secret reference, and its rotation.

use std::path::Path;
use std::process::Output;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
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

fn expect(dir: &Path, args: &[&str], code: i32) -> String {
    let out = run(dir, args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "kusionctl {args:?}:\n{}",
        text(&out)
    );
    text(&out)
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

fn deployment(ns: &str, image: &str, replicas: u32) -> Value {
    json!({"id": format!("apps/v1:Deployment:{ns}:web"), "type": "Kubernetes",
           "attributes": {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": ns},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "main", "image": image}]}}}}})
}

fn config_map(ns: &str, name: &str, value: &str) -> Value {
    json!({"id": format!("v1:ConfigMap:{ns}:{name}"), "type": "Kubernetes",
           "attributes": {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": ns}, "data": {"key": value}}})
}

fn image(cp: &ControlPlane, ns: &str) -> String {
    let api: Api<Deployment> = Api::namespaced(cp.client().unwrap(), ns);
    let live = cp.block_on(api.get("web")).unwrap();
    live.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap()
}

fn config_map_exists(cp: &ControlPlane, ns: &str, name: &str) -> bool {
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), ns);
    cp.block_on(api.get_opt(name)).unwrap().is_some()
}

fn kubectl(cp: &ControlPlane, args: &[&str]) {
    let out = cp.kubectl().unwrap().args(args).output().unwrap();
    assert!(out.status.success(), "kubectl {args:?}:\n{}", text(&out));
}

#[test]
fn rollback_restores_an_image_and_a_removed_config_map() {
    let cp = ControlPlane::shared();
    let dir = setup(cp);
    let d = dir.path();
    let ns = "t-lifecycle-rollback";
    write_spec(
        d,
        &[
            namespace(ns),
            deployment(ns, "nginx:1.25", 1),
            config_map(ns, "settings", "one"),
        ],
    );
    expect(d, &["apply", "-y", "-f", "spec.json"], 0);
    // The next release changes the image and drops the ConfigMap.
    write_spec(d, &[namespace(ns), deployment(ns, "nginx:1.26", 1)]);
    expect(d, &["apply", "-y", "-f", "spec.json"], 0);
    assert_eq!(image(cp, ns), "nginx:1.26");
    assert!(!config_map_exists(cp, ns, "settings"));

    let preview = expect(d, &["rollback", "--dry-run", "-d"], 0);
    assert!(preview.contains("Rolling back to revision 1"), "{preview}");
    assert!(
        preview.contains("nginx:1.26") && preview.contains("nginx:1.25"),
        "{preview}"
    );
    expect(d, &["rollback", "-y"], 0);
    assert_eq!(image(cp, ns), "nginx:1.25");
    assert!(config_map_exists(cp, ns, "settings"));
    // Converged: revision 1's spec has nothing left to do.
    write_spec(
        d,
        &[
            namespace(ns),
            deployment(ns, "nginx:1.25", 1),
            config_map(ns, "settings", "one"),
        ],
    );
    let preview = expect(d, &["preview", "-f", "spec.json", "--detailed-exitcode"], 0);
    assert!(preview.contains("No changes."), "{preview}");
    let history = expect(d, &["state", "history"], 0);
    assert!(history.contains("rollback (to 1)"), "{history}");
}

#[test]
fn drift_made_with_kubectl_shows_in_drift_and_in_a_detailed_preview() {
    let cp = ControlPlane::shared();
    let dir = setup(cp);
    let d = dir.path();
    let ns = "t-lifecycle-drift";
    write_spec(
        d,
        &[
            namespace(ns),
            deployment(ns, "nginx:1.25", 2),
            config_map(ns, "settings", "one"),
        ],
    );
    expect(d, &["apply", "-y", "-f", "spec.json"], 0);
    let t = expect(d, &["drift"], 0);
    assert!(t.contains("3 in sync, 0 drifted"), "{t}");

    kubectl(cp, &["-n", ns, "scale", "deployment/web", "--replicas=4"]);
    kubectl(cp, &["-n", ns, "delete", "configmap", "settings"]);
    let t = expect(d, &["drift"], 2);
    assert!(t.contains("~ spec.replicas: 2 => 4"), "{t}");
    assert!(
        t.contains("settings: recorded in state but no longer exists"),
        "{t}"
    );
    let report: Value = serde_json::from_slice(&run(d, &["drift", "-o", "json"]).stdout).unwrap();
    assert_eq!(report["summary"]["drifted"], 1, "{report}");
    assert_eq!(report["summary"]["missing"], 1, "{report}");
    expect(d, &["preview", "-f", "spec.json", "--detailed-exitcode"], 2);

    // Applying corrects it; both say so.
    expect(d, &["apply", "-y", "-f", "spec.json"], 0);
    expect(d, &["drift"], 0);
    expect(d, &["preview", "-f", "spec.json", "--detailed-exitcode"], 0);
}

#[test]
fn a_targeted_apply_and_an_import_of_what_kubectl_made() {
    let cp = ControlPlane::shared();
    let dir = setup(cp);
    let d = dir.path();
    let ns = "t-lifecycle-target";
    let v1 = [
        namespace(ns),
        deployment(ns, "nginx:1.25", 1),
        config_map(ns, "settings", "one"),
    ];
    write_spec(d, &v1);
    expect(d, &["apply", "-y", "-f", "spec.json"], 0);
    write_spec(
        d,
        &[
            namespace(ns),
            deployment(ns, "nginx:1.26", 1),
            config_map(ns, "settings", "two"),
        ],
    );
    let t = expect(
        d,
        &[
            "apply",
            "-y",
            "-f",
            "spec.json",
            "--target",
            "v1:ConfigMap:*",
        ],
        0,
    );
    assert!(t.contains("Warning: --target"), "{t}");
    assert_eq!(
        image(cp, ns),
        "nginx:1.25",
        "the Deployment was not targeted"
    );
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), ns);
    let cm = cp.block_on(api.get("settings")).unwrap();
    assert_eq!(cm.data.unwrap()["key"], "two");

    // An object kubectl created is adopted as it is, then converged by the next apply.
    kubectl(
        cp,
        &[
            "-n",
            ns,
            "create",
            "configmap",
            "legacy",
            "--from-literal=key=handmade",
        ],
    );
    write_spec(
        d,
        &[
            namespace(ns),
            deployment(ns, "nginx:1.26", 1),
            config_map(ns, "settings", "two"),
            config_map(ns, "legacy", "managed"),
        ],
    );
    let id = format!("v1:ConfigMap:{ns}:legacy");
    let t = expect(d, &["import", &id, "-f", "spec.json"], 0);
    assert!(t.contains("Imported"), "{t}");
    let cm = cp.block_on(api.get("legacy")).unwrap();
    assert_eq!(
        cm.data.unwrap()["key"],
        "handmade",
        "import changes nothing live"
    );
    // kubectl's manager owns the field kusion would change: named, until kusion takes it.
    let preview = expect(d, &["preview", "-f", "spec.json", "-d"], 1);
    assert!(preview.contains("kubectl-create"), "{preview}");
    let preview = expect(
        d,
        &["preview", "-f", "spec.json", "-d", "--force-conflicts"],
        0,
    );
    assert!(
        preview.contains("handmade") && preview.contains("managed"),
        "{preview}"
    );
    expect(
        d,
        &["apply", "-y", "-f", "spec.json", "--force-conflicts"],
        0,
    );
    let cm = cp.block_on(api.get("legacy")).unwrap();
    assert_eq!(cm.data.unwrap()["key"], "managed");
    expect(d, &["destroy", "-y", "-f", "spec.json"], 0);
}

fn secret_value(cp: &ControlPlane, ns: &str, name: &str, key: &str) -> String {
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(cp.client().unwrap(), ns);
    let live = cp.block_on(api.get(name)).unwrap();
    let bytes = live.data.unwrap_or_default().remove(key).unwrap().0;
    String::from_utf8(bytes).unwrap()
}

#[test]
fn a_secret_from_a_file_reference_is_applied_and_its_rotation_planned() {
    let cp = ControlPlane::shared();
    built("libkusion_secrets.so");
    let dir = setup(cp);
    let d = dir.path();
    let ns = "t-lifecycle-secret-ref";
    std::fs::write(d.join("pw"), "hunter-k8s-1\n").unwrap();
    let secret = json!({"id": format!("v1:Secret:{ns}:db"), "type": "Kubernetes",
        "attributes": {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "db", "namespace": ns},
            "stringData": {"password": "ref://file/pw"}}});
    write_spec(d, &[namespace(ns), secret]);
    let preview = expect(d, &["preview", "-d", "-f", "spec.json"], 0);
    assert!(!preview.contains("hunter"), "{preview}");
    expect(d, &["apply", "-y", "-f", "spec.json"], 0);
    assert_eq!(secret_value(cp, ns, "db", "password"), "hunter-k8s-1");
    expect(d, &["preview", "--detailed-exitcode", "-f", "spec.json"], 0);

    // Rotated in the store: the next plan reads it again and updates the Secret.
    std::fs::write(d.join("pw"), "hunter-k8s-2\n").unwrap();
    let preview = expect(
        d,
        &["preview", "-d", "--detailed-exitcode", "-f", "spec.json"],
        2,
    );
    assert!(
        preview.contains(&format!("v1:Secret:{ns}:db")) && !preview.contains("hunter"),
        "{preview}"
    );
    expect(d, &["apply", "-y", "-f", "spec.json"], 0);
    assert_eq!(secret_value(cp, ns, "db", "password"), "hunter-k8s-2");
    expect(d, &["preview", "--detailed-exitcode", "-f", "spec.json"], 0);

    // Nothing at rest holds it in clear: state, journal and history.
    for (f, bytes) in kusion_tests::cli::files_under(&d.join("state")) {
        let text = String::from_utf8_lossy(&bytes);
        // In clear, or as the Secret's base64 `data` ("hunter" is "aHVudGVy").
        assert!(
            !text.contains("hunter") && !text.contains("aHVudGVy"),
            "{} holds the secret in clear",
            f.display()
        );
    }
}
