//! A Konfig-layout stack end to end on a real kube-apiserver: `kusionctl apply` in the stack
//! folder (compile first), an image bump written into the KCL file through the override API (as
//! a CI bot does with `-O`), a preview showing exactly that change, apply, destroy.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use kube::Api;
use kusion_k8s_harness::ControlPlane;
use kusion_tests::cli::{built, copy_dir, run_kusionctl, text};
use serde_json::Value;

/// `kusionctl` in the stack folder; the Kubernetes runtime plugin must be built next to it.
fn run(stack: &Path, home: &Path, args: &[&str]) -> Output {
    built("libkusion_runtime_kubernetes.so");
    run_kusionctl(stack, home, args)
}

const NS: &str = "konfig-e2e";
const DEPLOYMENT: &str = "apps/v1:Deployment:konfig-e2e:storefront";

fn live_image(cp: &ControlPlane) -> Option<String> {
    let api: Api<Deployment> = Api::namespaced(cp.client().unwrap(), NS);
    let d = cp.block_on(api.get_opt("storefront")).unwrap()?;
    d.spec?.template.spec?.containers.first()?.image.clone()
}

#[test]
fn konfig_stack_apply_override_preview_apply_destroy() {
    let cp = ControlPlane::shared();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/konfig"),
        &root,
    );
    let stack = root.join("shop/dev");
    // The stack's own settings pick the cluster and keep the state inside the stack folder.
    let mut stack_yaml = std::fs::read_to_string(stack.join("stack.yaml")).unwrap();
    stack_yaml.push_str(&format!(
        "kubeconfig: {}\ncontext: {}\nstate:\n  backend: local\n  path: .kusion/state\n",
        cp.kubeconfig_path().display(),
        cp.context()
    ));
    std::fs::write(stack.join("stack.yaml"), stack_yaml).unwrap();

    let out = run(&stack, work.path(), &["apply", "--yes", "--watch"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Apply complete! Resources: 4 created, 0 updated, 0 deleted."),
        "{}",
        text(&out)
    );
    assert!(
        stack.join(".kusion/state").is_dir(),
        "state where stack.yaml says"
    );
    assert_eq!(live_image(cp).as_deref(), Some("nginx:1.25"));
    let client = cp.client().unwrap();
    let cm: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm = cp.block_on(cm.get("storefront-config")).unwrap();
    assert_eq!(
        cm.data.unwrap().get("STACK").map(String::as_str),
        Some("dev"),
        "option(\"stack\") reaches the KCL code"
    );
    let svc: Api<Service> = Api::namespaced(client.clone(), NS);
    assert!(cp.block_on(svc.get_opt("storefront")).unwrap().is_some());

    // A CI bot bumps the image: `-O web.image="nginx:1.26"` written into the stack's main.k.
    let main = stack.join("main.k");
    let changed =
        kusion_kcl::override_file(&main, &["web.image=\"nginx:1.26\"".to_string()]).unwrap();
    assert!(changed);
    assert!(
        std::fs::read_to_string(&main)
            .unwrap()
            .contains("image = \"nginx:1.26\"")
    );

    let out = run(&stack, work.path(), &["preview", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = plan["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4, "{plan:#}");
    for step in steps {
        if step["id"] == DEPLOYMENT {
            assert_eq!(step["action"], "Update", "{step:#}");
            let changes = step["changes"].as_array().unwrap();
            assert_eq!(changes.len(), 1, "only the image changes: {step:#}");
            assert_eq!(
                changes[0]["path"], "spec.template.spec.containers[0].image",
                "{step:#}"
            );
            assert_eq!(changes[0]["old"], "nginx:1.25");
            assert_eq!(changes[0]["new"], "nginx:1.26");
        } else {
            assert_eq!(step["action"], "UnChanged", "{step:#}");
        }
    }

    let out = run(&stack, work.path(), &["apply", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Apply complete! Resources: 0 created, 1 updated, 0 deleted."),
        "{}",
        text(&out)
    );
    assert_eq!(live_image(cp).as_deref(), Some("nginx:1.26"));
    let out = run(&stack, work.path(), &["preview"]);
    assert!(text(&out).contains("No changes."), "{}", text(&out));

    let out = run(&stack, work.path(), &["destroy", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("4 deleted"), "{}", text(&out));
    assert_eq!(live_image(cp), None);
    // The namespace is gone or on its way (its finalizer runs in the namespace controller).
    let ns: Api<Namespace> = Api::all(client);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match cp.block_on(ns.get_opt(NS)).unwrap() {
            None => break,
            Some(n) if n.metadata.deletion_timestamp.is_some() => break,
            Some(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(500)),
            Some(n) => panic!("namespace still present and not terminating: {n:?}"),
        }
    }
}
