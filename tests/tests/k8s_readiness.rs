//! Readiness rules a resource carries (extension `readiness`), end to end on a real control
//! plane: the Kubernetes runtime watches, the kernel asks the installed hook, kusionctl's KCL
//! hook judges the expression over the live object.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kusion_k8s_harness::{ControlPlane, Options};
use kusion_kernel::execute::{ApplyOptions, Event, Outcome};
use kusion_kernel::operation::{Applied, Stack, apply};
use kusion_kernel::plan::PlanOptions;
use kusion_kernel::registry::Registry;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::local::LocalStore;
use kusion_runtime_kubernetes::KubernetesRuntime;
use kusion_sdk::runtime::Runtime;
use serde_json::json;

fn spec(gate: &str, rule: &str) -> Spec {
    let text = json!({"resources": [
        {"id": "v1:Namespace:t-ready", "type": "Kubernetes",
         "attributes": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t-ready"}}},
        {"id": format!("v1:ConfigMap:t-ready:{gate}"), "type": "Kubernetes",
         "attributes": {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": gate, "namespace": "t-ready"}, "data": {"ready": "no"}},
         "extensions": {"readiness": rule}},
    ]});
    Spec::parse(&text.to_string(), "spec.json").unwrap()
}

/// Applies with --watch semantics; returns the ConfigMap's outcome and the watch details seen.
fn run(stack: &Stack, spec: &Spec, timeout: Duration) -> (Outcome, Vec<String>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let options = ApplyOptions {
        watch: true,
        watch_timeout: timeout,
        ..Default::default()
    };
    let done = apply(
        spec,
        stack,
        "apply",
        &PlanOptions::default(),
        &options,
        Vec::new(),
        |_| true,
        Some(tx),
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    let Applied::Done { report, .. } = done else {
        panic!("the spec has changes")
    };
    let mut details = Vec::new();
    while let Ok(event) = rx.try_recv() {
        if let Event::Watch { id, event, .. } = event
            && id.contains("ConfigMap")
        {
            details.push(event.detail);
        }
    }
    let outcome = report
        .steps
        .iter()
        .find(|s| s.id.contains("ConfigMap"))
        .unwrap()
        .outcome
        .clone();
    (outcome, details)
}

#[test]
fn readiness_rule_decides_when_a_configmap_is_ready() {
    let cp = ControlPlane::start_with(Options {
        controller_manager: false,
        fake_kubelet: false,
        ..Default::default()
    })
    .expect("control plane");
    let rt = KubernetesRuntime::new();
    rt.configure(&json!({"kubeconfig": cp.kubeconfig_path()}))
        .unwrap();
    let mut registry = Registry::new();
    registry.register(Arc::new(rt)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack {
        store: Arc::new(LocalStore::new(dir.path().join("state"))),
        registry,
    };
    let rule = r#"data.ready == "yes""#;

    // No hook installed yet: a clear refusal, not the built-in "exists means ready".
    let (outcome, _) = run(&stack, &spec("gate-1", rule), Duration::from_secs(20));
    match outcome {
        Outcome::Failed(e) => assert!(e.contains("Unsupported") && e.contains(rule), "{e}"),
        other => panic!("expected unsupported, got {other:?}"),
    }

    let mut registry = stack.registry.clone();
    kusionctl::readiness::install(&mut registry);
    let stack = Stack {
        store: stack.store.clone(),
        registry,
    };

    // Ready only once someone sets data.ready to "yes" behind kusion's back.
    let client = cp.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "t-ready");
    let flip = {
        let api = api.clone();
        let handle = cp.runtime().handle().clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            let patch = json!({"data": {"ready": "yes"}});
            // The apply may not have created it yet on a slow machine: retry until it has.
            let give_up = Instant::now() + Duration::from_secs(60);
            while let Err(e) =
                handle.block_on(api.patch("gate-2", &PatchParams::default(), &Patch::Merge(&patch)))
            {
                assert!(Instant::now() < give_up, "patching gate-2: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let start = Instant::now();
    let (outcome, details) = run(&stack, &spec("gate-2", rule), Duration::from_secs(30));
    flip.join().unwrap();
    assert_eq!(outcome, Outcome::Succeeded, "{details:?}");
    assert!(
        start.elapsed() >= Duration::from_millis(1400),
        "did not wait for the rule"
    );
    assert!(
        details
            .iter()
            .any(|d| d.contains("waiting for readiness rule")),
        "{details:?}"
    );
    assert!(
        details
            .last()
            .is_some_and(|d| d.contains("readiness rule holds")),
        "{details:?}"
    );

    // A rule that never holds times out with the rule as the reason.
    let (outcome, _) = run(&stack, &spec("gate-3", rule), Duration::from_secs(2));
    match outcome {
        Outcome::Failed(e) => assert!(e.contains("waiting for readiness rule"), "{e}"),
        other => panic!("expected a timeout, got {other:?}"),
    }

    // A broken rule fails at once with the evaluator's complaint.
    let (outcome, _) = run(
        &stack,
        &spec("gate-4", "data.ready"),
        Duration::from_secs(20),
    );
    match outcome {
        Outcome::Failed(e) => assert!(e.contains("boolean"), "{e}"),
        other => panic!("expected a rule error, got {other:?}"),
    }
}
