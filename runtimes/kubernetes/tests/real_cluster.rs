//! The Kubernetes runtime against a real kube-apiserver + kube-controller-manager v1.20.2
//! (started by kusion-k8s-harness; the fake kubelet plays the node).
//!
//! Over 800 lines: one suite on one control plane (started once); each test stands alone.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kusion_k8s_harness::{ControlPlane, FAULT_ANNOTATION};
use kusion_runtime_kubernetes::KubernetesRuntime;
use kusion_sdk::runtime::{
    ApplyRequest, ApplyResponse, DeleteRequest, Health, ImportRequest, ReadRequest, Runtime,
    WatchEvent, WatchPoll, WatchRequest,
};
use kusion_sdk::{ErrorKind, PluginError, Resource};
use serde_json::{Value, json};

fn runtime_for(cp: &ControlPlane, extra: Value) -> KubernetesRuntime {
    let rt = KubernetesRuntime::new();
    let mut config = json!({"kubeconfig": cp.kubeconfig_path()});
    if let (Value::Object(c), Value::Object(e)) = (&mut config, extra) {
        c.extend(e);
    }
    rt.configure(&config).unwrap();
    rt
}

fn res(id: &str, attrs: Value) -> Resource {
    Resource::new(
        id,
        "Kubernetes",
        attrs.as_object().expect("attributes are an object").clone(),
    )
}

fn namespace(name: &str) -> Resource {
    res(
        &format!("v1:Namespace:{name}"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
}

fn config_map(ns: &str, name: &str, data: Value) -> Resource {
    res(
        &format!("v1:ConfigMap:{ns}:{name}"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}),
    )
}

fn deployment(
    ns: &str,
    name: &str,
    replicas: i64,
    fault: Option<&str>,
    extra_spec: Value,
) -> Resource {
    let mut template_meta = json!({"labels": {"app": name}});
    if let Some(f) = fault {
        template_meta["annotations"] = json!({FAULT_ANNOTATION: f});
    }
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": template_meta, "spec": {"containers": [
            {"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
             "resources": {"requests": {"cpu": "0.1", "memory": "64Mi"}}}]}}
    });
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra_spec) {
        s.extend(e);
    }
    res(
        &format!("apps/v1:Deployment:{ns}:{name}"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns}, "spec": spec}),
    )
}

fn apply(
    rt: &KubernetesRuntime,
    prior: Option<&Resource>,
    planned: &Resource,
    dry_run: bool,
) -> Result<ApplyResponse, PluginError> {
    rt.apply(&ApplyRequest {
        prior: prior.cloned(),
        prior_private: None,
        planned: planned.clone(),
        dry_run,
        timeout: Some(Duration::from_secs(60)),
    })
}

fn read(rt: &KubernetesRuntime, prior: Option<&Resource>, planned: &Resource) -> Option<Resource> {
    rt.read(&ReadRequest {
        prior: prior.cloned(),
        prior_private: None,
        planned: Some(planned.clone()),
        timeout: Some(Duration::from_secs(30)),
    })
    .unwrap_or_else(|e| panic!("read {}: {}", planned.id, e.message))
    .resource
}

fn delete(rt: &KubernetesRuntime, r: &Resource, timeout: Duration) -> Result<(), PluginError> {
    rt.delete(&DeleteRequest {
        resource: r.clone(),
        private: None,
        timeout: Some(timeout),
    })
}

/// Follows a watch until it reports Ready or Failed; returns the last event.
fn watch(rt: &KubernetesRuntime, r: &Resource, timeout: Duration) -> WatchEvent {
    let mut w = rt
        .watch(&WatchRequest {
            resource: r.clone(),
        })
        .unwrap();
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < timeout {
        match w.poll(Duration::from_millis(500)).unwrap() {
            WatchPoll::Event(e) => {
                let done = e.health != Health::Progressing;
                last = Some(e);
                if done {
                    break;
                }
            }
            WatchPoll::Pending => {}
            WatchPoll::Closed => break,
        }
    }
    last.unwrap_or_else(|| panic!("{}: no watch event within {timeout:?}", r.id))
}

/// Watches `r` until it settles, which must be with `health` and a detail containing `detail`;
/// returns the last event for further checks.
fn expect_watch(
    rt: &KubernetesRuntime,
    r: &Resource,
    health: Health,
    detail: &str,
    timeout: Duration,
) -> WatchEvent {
    let ev = watch(rt, r, timeout);
    assert_eq!(ev.health, health, "{}: {ev:?}", r.id);
    assert!(ev.detail.contains(detail), "{}: {}", r.id, ev.detail);
    ev
}

/// Creates `r`, then [`expect_watch`]es it; returns the applied resource and the last event.
fn apply_and_watch(
    rt: &KubernetesRuntime,
    r: &Resource,
    health: Health,
    detail: &str,
    timeout: Duration,
) -> (Resource, WatchEvent) {
    let applied = apply(rt, None, r, false)
        .unwrap_or_else(|e| panic!("apply {}: {}", r.id, e.message))
        .resource;
    (applied, expect_watch(rt, r, health, detail, timeout))
}

/// Paths at which two JSON values differ.
fn diff_paths(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let next = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => diff_paths(p, q, &next, out),
                    _ => out.push(next),
                }
            }
        }
        _ if a != b => out.push(at.to_string()),
        _ => {}
    }
}

fn attrs(r: &Resource) -> Value {
    Value::Object(r.attributes.clone())
}

fn setup_ns(cp: &ControlPlane, rt: &KubernetesRuntime, name: &str) -> Resource {
    let ns = namespace(name);
    apply(rt, None, &ns, false).unwrap();
    let _ = cp;
    ns
}

#[test]
fn applies_every_kind_and_reads_back_without_noise() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    let ns = namespace("t-apply");
    let crd = res(
        "apiextensions.k8s.io/v1:CustomResourceDefinition:widgets.demo.kusion.io",
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.demo.kusion.io"},
               "spec": {"group": "demo.kusion.io", "scope": "Namespaced",
                        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                        "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                            "type": "object", "properties": {"spec": {"type": "object", "properties": {
                                "size": {"type": "integer"}, "color": {"type": "string"}}}}}}}]}}),
    );
    let widget = res(
        "demo.kusion.io/v1:Widget:t-apply:w1",
        json!({"apiVersion": "demo.kusion.io/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "t-apply"},
               "spec": {"size": 3, "color": "blue"}}),
    );
    let resources = vec![
        ns.clone(),
        config_map("t-apply", "settings", json!({"a": "1", "b": "2"})),
        res(
            "v1:Secret:t-apply:creds",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "t-apply"},
            "type": "Opaque", "stringData": {"password": "hunter2"}}),
        ),
        deployment("t-apply", "web", 2, None, json!({})),
        res(
            "v1:Service:t-apply:web",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "t-apply"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 80}]}}),
        ),
        crd.clone(),
        widget.clone(),
    ];
    // Preview before anything exists: the dry-run answers even when the namespace or the CRD
    // does not exist yet, and reads say "absent".
    for r in &resources {
        assert!(
            read(&rt, None, r).is_none(),
            "{} must be absent before apply",
            r.id
        );
        let preview =
            apply(&rt, None, r, true).unwrap_or_else(|e| panic!("dry-run {}: {}", r.id, e.message));
        assert_eq!(preview.resource.id, r.id);
    }
    assert!(
        read(&rt, None, &ns).is_none(),
        "a dry-run must not create anything"
    );
    for r in &resources {
        let applied =
            apply(&rt, None, r, false).unwrap_or_else(|e| panic!("apply {}: {}", r.id, e.message));
        // What the server stores, projected onto what kusion manages, is exactly the plan:
        // no status, uid, resourceVersion, managedFields or server defaults.
        let mut d = Vec::new();
        diff_paths(&attrs(r), &attrs(&applied.resource), "", &mut d);
        assert!(
            d.is_empty(),
            "{}: applied differs from planned at {d:?}",
            r.id
        );
        let live = read(&rt, Some(&applied.resource), r).expect("present after apply");
        assert_eq!(attrs(&live), attrs(r), "{}: read shows noise", r.id);
        // A no-change preview: dry-run of the same plan equals the live object.
        let again = apply(&rt, Some(&applied.resource), r, true).unwrap();
        assert_eq!(
            attrs(&again.resource),
            attrs(&live),
            "{}: no-change dry-run differs",
            r.id
        );
        if r.id.starts_with("v1:Secret") {
            assert_eq!(
                applied.sensitive_paths,
                vec!["data".to_string(), "stringData".to_string()]
            );
        }
    }
    // The server really stored them.
    let client = cp.client().unwrap();
    let cm = cp
        .block_on(Api::<ConfigMap>::namespaced(client, "t-apply").get("settings"))
        .unwrap();
    assert_eq!(cm.data.unwrap().get("b").map(String::as_str), Some("2"));

    let ready = expect_watch(
        &rt,
        &resources[3],
        Health::Ready,
        "",
        Duration::from_secs(60),
    );
    assert!(
        ready.objects.iter().any(|o| o.kind == "ReplicaSet"),
        "{ready:?}"
    );
    assert_eq!(
        ready
            .objects
            .iter()
            .filter(|o| o.kind == "Pod" && o.health == Health::Ready)
            .count(),
        2,
        "{ready:?}"
    );
    let mut custom = resources[3].clone();
    custom.extensions.insert(
        "kusionstack.io/health-policy".into(),
        json!({"health.kcl": "assert res.status.readyReplicas == 2"}),
    );
    let err = rt
        .watch(&WatchRequest { resource: custom })
        .err()
        .expect("custom readiness rules are refused");
    assert_eq!(err.kind, ErrorKind::Unsupported, "{}", err.message);
    expect_watch(
        &rt,
        &resources[4],
        Health::Ready,
        "",
        Duration::from_secs(30),
    );
    let crd_ready = expect_watch(&rt, &crd, Health::Ready, "", Duration::from_secs(30));
    assert_eq!(crd_ready.detail, "Established");
    expect_watch(&rt, &ns, Health::Ready, "", Duration::from_secs(10));
}

#[test]
fn update_changes_exactly_one_field() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-update");
    let v1 = deployment("t-update", "app", 1, None, json!({}));
    let applied = apply(&rt, None, &v1, false).unwrap();
    let mut v2 = v1.clone();
    v2.attributes["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    let live = read(&rt, Some(&applied.resource), &v2).unwrap();
    let preview = apply(&rt, Some(&applied.resource), &v2, true).unwrap();
    let mut d = Vec::new();
    diff_paths(&attrs(&live), &attrs(&preview.resource), "", &mut d);
    assert_eq!(
        d,
        vec!["spec.template.spec.containers".to_string()],
        "only the image changes"
    );
    let (a, b) = (
        &live.attributes["spec"]["template"]["spec"]["containers"][0],
        &preview.resource.attributes["spec"]["template"]["spec"]["containers"][0],
    );
    let mut inner = Vec::new();
    diff_paths(a, b, "", &mut inner);
    assert_eq!(inner, vec!["image".to_string()]);
    let applied2 = apply(&rt, Some(&applied.resource), &v2, false).unwrap();
    assert_eq!(
        applied2.resource.attributes["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("nginx:1.26")
    );
    assert_eq!(
        attrs(&read(&rt, Some(&applied2.resource), &v2).unwrap()),
        attrs(&v2)
    );

    // A field dropped from the plan shows as a change and is removed by the apply.
    let with_label = config_map("t-update", "cm", json!({"a": "1", "b": "2"}));
    let prior = apply(&rt, None, &with_label, false).unwrap().resource;
    let fewer = config_map("t-update", "cm", json!({"a": "1"}));
    let live = read(&rt, Some(&prior), &fewer).unwrap();
    let preview = apply(&rt, Some(&prior), &fewer, true).unwrap();
    let mut d = Vec::new();
    diff_paths(&attrs(&live), &attrs(&preview.resource), "", &mut d);
    assert_eq!(d, vec!["data.b".to_string()]);
    apply(&rt, Some(&prior), &fewer, false).unwrap();
    assert_eq!(attrs(&read(&rt, None, &fewer).unwrap()), attrs(&fewer));
}

#[test]
fn drift_behind_kusions_back_is_visible() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-drift");
    let d = deployment("t-drift", "app", 2, None, json!({}));
    let applied = apply(&rt, None, &d, false).unwrap().resource;
    // Someone scales it and adds a label with another tool.
    let api: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cp.client().unwrap(), "t-drift");
    let patch = json!({"spec": {"replicas": 5}, "metadata": {"labels": {"team": "other"}}});
    let scaler = PatchParams {
        field_manager: Some("scaler".into()),
        ..PatchParams::default()
    };
    cp.block_on(api.patch("app", &scaler, &Patch::Merge(&patch)))
        .unwrap();
    let live = read(&rt, Some(&applied), &d).unwrap();
    let mut diff = Vec::new();
    diff_paths(&attrs(&d), &attrs(&live), "", &mut diff);
    // The label kusion does not manage is not kusion's drift; the replicas it manages are.
    assert_eq!(diff, vec!["spec.replicas".to_string()]);
    assert_eq!(live.attributes["spec"]["replicas"], json!(5));
    // The scaler now owns the replicas: as with kubectl, applying again is a conflict naming
    // it, and forcing takes the field back and restores kusion's value.
    let err = apply(&rt, Some(&applied), &d, false).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{}", err.message);
    assert!(err.message.contains("\"scaler\""), "{}", err.message);
    let forceful = runtime_for(cp, json!({"force": true}));
    apply(&forceful, Some(&applied), &d, false).unwrap();
    assert_eq!(
        read(&rt, Some(&applied), &d).unwrap().attributes["spec"]["replicas"],
        json!(2)
    );
}

#[test]
fn conflict_with_another_manager_is_reported_and_force_takes_it() {
    let cp = ControlPlane::shared();
    // Not forcing is the default, as with kubectl.
    let polite = runtime_for(cp, json!({}));
    let forceful = runtime_for(cp, json!({"force": true}));
    setup_ns(cp, &forceful, "t-conflict");
    let cm = config_map("t-conflict", "shared", json!({"owner": "kusion"}));
    apply(&polite, None, &cm, false).unwrap();
    // Another field manager takes the field with a forced server-side apply.
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), "t-conflict");
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"owner": "ops"}});
    cp.block_on(api.patch(
        "shared",
        &PatchParams::apply("ops-tool").force(),
        &Patch::Apply(&theirs),
    ))
    .unwrap();

    let err = apply(&polite, None, &cm, false).expect_err("a conflict without force");
    assert_eq!(err.kind, ErrorKind::Conflict, "{}", err.message);
    assert!(
        err.message.contains("v1:ConfigMap:t-conflict:shared"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("ops-tool")
            && err.message.contains(".data.owner")
            && err.message.contains("--force-conflicts"),
        "{}",
        err.message
    );
    // A dry-run says the same without changing anything.
    assert_eq!(
        apply(&polite, None, &cm, true).unwrap_err().kind,
        ErrorKind::Conflict
    );

    let taken = apply(&forceful, None, &cm, false).unwrap();
    assert_eq!(taken.resource.attributes["data"]["owner"], json!("kusion"));
    let stored = cp.block_on(api.get("shared")).unwrap();
    assert_eq!(stored.data.unwrap()["owner"], "kusion");
}

#[test]
fn watch_reports_image_pull_backoff() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-pull");
    let d = deployment("t-pull", "broken", 1, Some("ImagePullBackOff"), json!({}));
    let started = Instant::now();
    apply_and_watch(
        &rt,
        &d,
        Health::Failed,
        "ImagePullBackOff",
        Duration::from_secs(60),
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "reported, not waited out"
    );
}

#[test]
fn watch_reports_crash_loop() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-crash");
    let d = deployment("t-crash", "crashy", 1, Some("CrashLoopBackOff"), json!({}));
    apply_and_watch(
        &rt,
        &d,
        Health::Failed,
        "CrashLoopBackOff",
        Duration::from_secs(60),
    );
}

#[test]
fn watch_reports_progress_deadline_exceeded() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-deadline");
    // Pods are never scheduled, so the rollout cannot progress within its deadline.
    let d = deployment(
        "t-deadline",
        "stuck",
        1,
        Some("Unschedulable"),
        json!({"progressDeadlineSeconds": 2}),
    );
    apply_and_watch(
        &rt,
        &d,
        Health::Failed,
        "ProgressDeadlineExceeded",
        Duration::from_secs(90),
    );
}

#[test]
fn failing_job_is_reported_and_succeeding_job_is_ready() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-job");
    let job = |name: &str, fault: &str| {
        res(
            &format!("batch/v1:Job:t-job:{name}"),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "t-job"},
                   "spec": {"backoffLimit": 0, "template": {"metadata": {"annotations": {FAULT_ANNOTATION: fault}},
                            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["false"]}]}}}}),
        )
    };
    let bad = job("migrate", "Fail");
    let (_, mut ev) = apply_and_watch(
        &rt,
        &bad,
        Health::Failed,
        "BackoffLimitExceeded",
        Duration::from_secs(60),
    );
    // Jobs and pods arrive on separate watch streams: the Job can turn Failed before the pod's
    // own failure has reached the pod cache, so look again for a short while.
    let pod_failed = |ev: &WatchEvent| {
        ev.objects
            .iter()
            .any(|o| o.kind == "Pod" && o.detail.contains("exited with code 1"))
    };
    for _ in 0..20 {
        if pod_failed(&ev) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        ev = watch(&rt, &bad, Duration::from_secs(10));
    }
    assert!(pod_failed(&ev), "{ev:?}");

    let good = job("seed", "Succeed");
    apply_and_watch(&rt, &good, Health::Ready, "", Duration::from_secs(60));
}

#[test]
fn delete_waits_for_finalizers_and_treats_absent_as_done() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    let ns = setup_ns(cp, &rt, "t-delete");
    let mut held = config_map("t-delete", "held", json!({"k": "v"}));
    held.attributes["metadata"]["finalizers"] = json!(["kusion.io/hold"]);
    apply(&rt, None, &held, false).unwrap();
    let dep = deployment("t-delete", "app", 1, None, json!({}));
    apply_and_watch(&rt, &dep, Health::Ready, "", Duration::from_secs(60));

    // While the finalizer is held, a bounded delete times out and says why.
    let err = delete(&rt, &held, Duration::from_secs(2)).expect_err("held by a finalizer");
    assert_eq!(err.kind, ErrorKind::Timeout, "{}", err.message);
    assert!(
        err.message.contains("kusion.io/hold") && err.message.contains(&held.id),
        "{}",
        err.message
    );

    // Another party releases the finalizer; the waiting delete then completes.
    let releaser = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(2));
        let cp = ControlPlane::shared();
        let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), "t-delete");
        let patch = json!({"metadata": {"finalizers": null}});
        cp.block_on(api.patch("held", &PatchParams::default(), &Patch::Merge(&patch)))
            .unwrap();
    });
    let started = Instant::now();
    delete(&rt, &held, Duration::from_secs(60)).unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "delete returned before the finalizer was released"
    );
    releaser.join().unwrap();
    assert!(read(&rt, None, &held).is_none());
    assert!(
        delete(&rt, &held, Duration::from_secs(5)).is_ok(),
        "deleting an absent object succeeds"
    );

    // Dependency order: the Deployment first, then its namespace (gone only once emptied).
    delete(&rt, &dep, Duration::from_secs(60)).unwrap();
    assert!(read(&rt, None, &dep).is_none());
    delete(&rt, &ns, Duration::from_secs(120)).unwrap();
    let nss: Api<Namespace> = Api::all(cp.client().unwrap());
    assert!(cp.block_on(nss.get_opt("t-delete")).unwrap().is_none());
}

#[test]
fn absent_and_unknown_kinds_read_as_absent() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({"kindWaitSeconds": 1}));
    assert!(read(&rt, None, &config_map("default", "nope", json!({}))).is_none());
    let gadget = res(
        "nowhere.kusion.io/v1:Gadget:default:g",
        json!({"apiVersion": "nowhere.kusion.io/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": "default"}}),
    );
    assert!(read(&rt, None, &gadget).is_none());
    assert!(delete(&rt, &gadget, Duration::from_secs(5)).is_ok());
    // A real apply of a kind nobody serves fails with a clear message (after a bounded wait).
    let err = apply(&rt, None, &gadget, false);
    assert!(
        err.is_err_and(|e| e.message.contains("does not serve") && e.message.contains(&gadget.id))
    );
}

#[test]
fn server_errors_carry_message_and_id() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    // No selector and no containers: the server rejects it (422) and says why.
    let bad = res(
        "apps/v1:Deployment:default:bad",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad", "namespace": "default"}, "spec": {"replicas": 1}}),
    );
    let err = apply(&rt, None, &bad, false).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput, "{}", err.message);
    assert!(
        err.message.contains("apps/v1:Deployment:default:bad") && err.message.contains("selector"),
        "{}",
        err.message
    );
    // Scope must agree with discovery.
    let cm_without_ns = res(
        "v1:ConfigMap:x",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
    );
    let err = apply(&rt, None, &cm_without_ns, true).unwrap_err();
    assert!(err.message.contains("namespaced"), "{}", err.message);
    let ns_with_ns = res(
        "v1:Namespace:a:b",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}}),
    );
    assert!(
        apply(&rt, None, &ns_with_ns, true)
            .unwrap_err()
            .message
            .contains("cluster-scoped")
    );
    // Bad configuration is refused up front.
    assert!(rt.configure(&json!({"forse": true})).is_err());
    // An unreachable cluster is an error naming the resource, not a hang or a panic.
    let mut elsewhere = config_map("default", "x", json!({}));
    elsewhere
        .extensions
        .insert("kubeconfig".into(), json!("/nonexistent/kubeconfig"));
    let err = apply(&rt, None, &elsewhere, true).unwrap_err();
    assert!(
        err.message.contains("/nonexistent/kubeconfig"),
        "{}",
        err.message
    );
}

#[test]
fn import_adopts_an_existing_object() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-import");
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), "t-import");
    let existing: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "legacy", "labels": {"x": "y"}}, "data": {"k": "v"}}),
    )
    .unwrap();
    cp.block_on(api.create(&PostParams::default(), &existing))
        .unwrap();
    let planned = config_map("t-import", "legacy", json!({"k": "v"}));
    let imported = rt
        .import(&ImportRequest {
            planned: planned.clone(),
            import_id: Some("t-import/legacy".into()),
            timeout: None,
        })
        .unwrap()
        .resource
        .expect("found");
    assert_eq!(attrs(&imported), attrs(&planned));
    let wrong = ImportRequest {
        planned: planned.clone(),
        import_id: Some("t-import/other".into()),
        timeout: None,
    };
    assert_eq!(rt.import(&wrong).unwrap_err().kind, ErrorKind::InvalidInput);
    // Applying after import takes ownership without disturbing fields kusion does not manage.
    apply(&rt, Some(&imported), &planned, false).unwrap();
    let stored = cp.block_on(api.get("legacy")).unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["x"], "y");
}

#[test]
fn two_control_planes_from_one_runtime() {
    let first = ControlPlane::shared();
    let second = ControlPlane::start_with(kusion_k8s_harness::Options {
        controller_manager: false,
        fake_kubelet: false,
        ..Default::default()
    })
    .expect("second control plane");
    // The stack default is the first cluster; resources name the second through extensions.
    let rt = runtime_for(first, json!({}));
    let on_first = config_map("default", "where", json!({"cluster": "first"}));
    let mut on_second = config_map("default", "where", json!({"cluster": "second"}));
    on_second
        .extensions
        .insert("kubeconfig".into(), json!(second.kubeconfig_path()));
    on_second
        .extensions
        .insert("kubeContext".into(), json!(second.context()));
    apply(&rt, None, &on_first, false).unwrap();
    apply(&rt, None, &on_second, false).unwrap();
    assert_eq!(
        read(&rt, None, &on_first).unwrap().attributes["data"]["cluster"],
        json!("first")
    );
    assert_eq!(
        read(&rt, None, &on_second).unwrap().attributes["data"]["cluster"],
        json!("second")
    );
    let c2: Api<ConfigMap> = Api::namespaced(second.client().unwrap(), "default");
    assert_eq!(
        second.block_on(c2.get("where")).unwrap().data.unwrap()["cluster"],
        "second"
    );
    delete(&rt, &on_second, Duration::from_secs(10)).unwrap();
    assert!(read(&rt, None, &on_second).is_none());
    assert!(
        read(&rt, None, &on_first).is_some(),
        "deleting on one cluster leaves the other alone"
    );
}

#[test]
fn statefulset_and_daemonset_are_followed_to_ready() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-sets");
    let pod_template = |app: &str| json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "main", "image": "redis:7"}]}});
    let sts = res(
        "apps/v1:StatefulSet:t-sets:db",
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "t-sets"},
               "spec": {"serviceName": "db", "replicas": 2, "selector": {"matchLabels": {"app": "db"}}, "template": pod_template("db")}}),
    );
    let ds = res(
        "apps/v1:DaemonSet:t-sets:agent",
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "t-sets"},
               "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": pod_template("agent")}}),
    );
    for r in [&sts, &ds] {
        let (applied, ev) = apply_and_watch(&rt, r, Health::Ready, "", Duration::from_secs(90));
        assert_eq!(
            attrs(&applied),
            attrs(r),
            "{}: no server defaults in the result",
            r.id
        );
        assert!(
            ev.objects
                .iter()
                .any(|o| o.kind == "Pod" && o.health == Health::Ready),
            "{ev:?}"
        );
    }
}

#[test]
fn propagation_policy_is_honoured() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-orphan");
    let mut dep = deployment("t-orphan", "keep", 1, None, json!({}));
    dep.extensions
        .insert("kusionstack.io/delete-propagation".into(), json!("Orphan"));
    apply_and_watch(&rt, &dep, Health::Ready, "", Duration::from_secs(60));
    delete(&rt, &dep, Duration::from_secs(60)).unwrap();
    assert!(read(&rt, None, &dep).is_none());
    // Orphaned: the ReplicaSet outlives its Deployment (Background would let the GC remove it).
    std::thread::sleep(Duration::from_secs(2));
    let rss: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::namespaced(cp.client().unwrap(), "t-orphan");
    let left = cp.block_on(rss.list(&Default::default())).unwrap().items;
    assert_eq!(left.len(), 1, "the orphaned ReplicaSet remains");
    let mut bad = dep.clone();
    bad.extensions.insert(
        "kusionstack.io/delete-propagation".into(),
        json!("Sometimes"),
    );
    assert_eq!(
        delete(&rt, &bad, Duration::from_secs(5)).unwrap_err().kind,
        ErrorKind::InvalidInput
    );
}

#[test]
fn immutable_changes_preview_as_replacement() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-immutable");
    let v1 = deployment("t-immutable", "app", 1, None, json!({}));
    // The read's "absent" must not answer a dry-run after the object was created.
    assert!(read(&rt, None, &v1).is_none());
    let prior = apply(&rt, None, &v1, false).unwrap().resource;
    // A Deployment's selector cannot change in place.
    let mut v2 = v1.clone();
    v2.attributes["spec"]["selector"] = json!({"matchLabels": {"app": "app", "tier": "web"}});
    v2.attributes["spec"]["template"]["metadata"]["labels"] = json!({"app": "app", "tier": "web"});
    let preview = apply(&rt, Some(&prior), &v2, true).unwrap();
    assert_eq!(preview.requires_replace, vec!["spec.selector".to_string()]);
    let api: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cp.client().unwrap(), "t-immutable");
    let old_uid = cp.block_on(api.get("app")).unwrap().metadata.uid;
    // The real apply replaces it: the old object goes, a new one with the new selector comes.
    let replaced = apply(&rt, Some(&prior), &v2, false).unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!(
        replaced.resource.attributes["spec"]["selector"],
        v2.attributes["spec"]["selector"]
    );
    let now = cp.block_on(api.get("app")).unwrap();
    assert_ne!(now.metadata.uid, old_uid, "a new object");
    assert_eq!(
        now.spec.unwrap().selector.match_labels.unwrap().get("tier"),
        Some(&"web".to_string())
    );
    // Converged: the next dry-run changes nothing and needs no replacement.
    let again = apply(&rt, Some(&replaced.resource), &v2, true).unwrap();
    assert!(again.requires_replace.is_empty());
    assert_eq!(attrs(&again.resource), attrs(&replaced.resource));
    // An ordinary change needs no replacement.
    let mut v3 = v2.clone();
    v3.attributes["spec"]["replicas"] = json!(3);
    assert!(
        apply(&rt, Some(&replaced.resource), &v3, true)
            .unwrap()
            .requires_replace
            .is_empty()
    );
}

/// One kubeconfig file with a context per control plane: resources pick their cluster by
/// context name alone.
#[test]
fn contexts_of_one_kubeconfig_select_clusters() {
    let first = ControlPlane::shared();
    let second = ControlPlane::start_with(kusion_k8s_harness::Options {
        controller_manager: false,
        fake_kubelet: false,
        ..Default::default()
    })
    .expect("second control plane");
    let load = |cp: &ControlPlane| -> Value {
        serde_yaml_ng::from_str(&std::fs::read_to_string(cp.kubeconfig_path()).unwrap()).unwrap()
    };
    let (a, b) = (load(first), load(&second));
    let entry = |doc: &Value, list: &str, name: &str| {
        let mut e = doc[list][0].clone();
        e["name"] = json!(name);
        e
    };
    let merged = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [entry(&a, "clusters", "one"), entry(&b, "clusters", "two")],
        "users": [entry(&a, "users", "one"), entry(&b, "users", "two")],
        "contexts": [{"name": "one", "context": {"cluster": "one", "user": "one"}},
                     {"name": "two", "context": {"cluster": "two", "user": "two"}}],
        "current-context": "one",
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, serde_json::to_string(&merged).unwrap()).unwrap();
    let rt = KubernetesRuntime::new();
    rt.configure(&json!({"kubeconfig": path})).unwrap();
    let cm = config_map("default", "ctx", json!({"at": "two"}));
    let mut on_two = cm.clone();
    on_two.extensions.insert("kubeContext".into(), json!("two"));
    apply(&rt, None, &on_two, false).unwrap();
    assert!(read(&rt, None, &on_two).is_some());
    assert!(
        read(&rt, None, &cm).is_none(),
        "the current context (one) does not have it"
    );
    let api: Api<ConfigMap> = Api::namespaced(second.client().unwrap(), "default");
    assert!(second.block_on(api.get_opt("ctx")).unwrap().is_some());
    // A context the file does not have is a clear error.
    let mut nowhere = cm.clone();
    nowhere
        .extensions
        .insert("kubeContext".into(), json!("three"));
    let err = apply(&rt, None, &nowhere, true).unwrap_err();
    assert!(
        err.message.contains("three") && err.message.contains(&cm.id),
        "{}",
        err.message
    );
}

#[test]
fn unresolved_references_in_a_preview_are_unknown_not_errors() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-refs");
    // The port comes from another resource applied in the same run: unknown during preview.
    let svc = res(
        "v1:Service:t-refs:api",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api", "namespace": "t-refs"},
               "spec": {"selector": {"app": "api"}, "ports": [{"port": "$kusion_path.v1:ConfigMap:t-refs:cfg.data.port"}]}}),
    );
    let preview = apply(&rt, None, &svc, true).unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!(
        preview.unknown_paths,
        vec!["spec.ports[0].port".to_string()]
    );
    // A real apply with such a value is the server's error, with its message.
    let err = apply(&rt, None, &svc, false).unwrap_err();
    assert!(
        err.message.contains("v1:Service:t-refs:api"),
        "{}",
        err.message
    );
}

/// A dry-run right after a read is answered from the read when it can be (the object is
/// absent, or nothing would change): those answers must be the ones the server gives.
#[test]
fn dry_runs_answered_from_a_read_match_the_servers() {
    let cp = ControlPlane::shared();
    let rt = runtime_for(cp, json!({}));
    setup_ns(cp, &rt, "t-answers");
    let resources = vec![
        config_map("t-answers", "cm", json!({"a": "1", "n": "2"})),
        res(
            "v1:Secret:t-answers:s",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "t-answers"},
                   "type": "Opaque", "stringData": {"password": "hunter2"}}),
        ),
        deployment("t-answers", "web", 2, None, json!({})),
        res(
            "v1:Service:t-answers:web",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "t-answers"},
                   "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
        ),
    ];
    let same = |what: &str, server: &ApplyResponse, local: &ApplyResponse| {
        assert_eq!(
            attrs(&server.resource),
            attrs(&local.resource),
            "{}: {what}",
            server.resource.id
        );
        assert_eq!(server.sensitive_paths, local.sensitive_paths);
        assert_eq!(server.requires_replace, local.requires_replace);
    };
    for r in &resources {
        // No read before: the server answers.
        let server = apply(&rt, None, r, true).unwrap_or_else(|e| panic!("{}", e.message));
        assert!(read(&rt, None, r).is_none());
        let local = apply(&rt, None, r, true).unwrap();
        same("creation", &server, &local);
    }
    for r in &resources {
        let applied = apply(&rt, None, r, false).unwrap().resource;
        let server = apply(&rt, Some(&applied), r, true).unwrap();
        let live = read(&rt, Some(&applied), r).unwrap();
        let local = apply(&rt, Some(&applied), r, true).unwrap();
        same("no change", &server, &local);
        assert_eq!(attrs(&local.resource), attrs(&live));
    }
    // A change after the read still goes to the server, which shows it.
    let changed = config_map("t-answers", "cm", json!({"a": "3", "n": "2"}));
    let prior = read(&rt, None, &resources[0]).unwrap();
    let preview = apply(&rt, Some(&prior), &changed, true).unwrap();
    assert_eq!(preview.resource.attributes["data"]["a"], json!("3"));
}

/// Issue 16: removing a list item (a container, an env var, a Service port) or a map key must
/// reach the server. The plan reads, then dry-runs: both must show the removal, whether the
/// dry-run is answered from the read or by the server.
#[test]
fn removals_of_list_items_and_keys_reach_the_server() {
    let cp = ControlPlane::shared();
    for (ns, config) in [
        ("t-removals", json!({})),
        ("t-removals-server", json!({"answerFromRead": false})),
    ] {
        let rt = runtime_for(cp, config.clone());
        setup_ns(cp, &rt, ns);
        let env = json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]);
        let two = deployment(ns, "app", 1, None, json!({}));
        let mut two = two;
        let pod = &mut two.attributes["spec"]["template"]["spec"];
        pod["containers"][0]["env"] = env;
        pod["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "side", "image": "envoy:1.0"}));
        let svc = res(
            &format!("v1:Service:{ns}:app"),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "app", "namespace": ns,
                   "labels": {"a": "1", "b": "2"}},
                   "spec": {"selector": {"app": "app"}, "ports": [{"port": 80, "name": "http"}, {"port": 81, "name": "extra"}]}}),
        );
        let mut applied = Vec::new();
        for r in [&two, &svc] {
            assert!(read(&rt, None, r).is_none());
            applied.push(apply(&rt, None, r, false).unwrap().resource);
        }
        // The sidecar, env var B, port 81 and label b leave the spec.
        let mut one = two.clone();
        let pod = &mut one.attributes["spec"]["template"]["spec"];
        pod["containers"].as_array_mut().unwrap().pop();
        pod["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
        let mut svc1 = svc.clone();
        svc1.attributes["spec"]["ports"]
            .as_array_mut()
            .unwrap()
            .pop();
        svc1.attributes["metadata"]["labels"] = json!({"a": "1"});
        for ((before, after), prior) in [(&two, &one), (&svc, &svc1)].into_iter().zip(&applied) {
            let live = read(&rt, Some(prior), after).unwrap();
            let preview = apply(&rt, Some(prior), after, true).unwrap();
            let mut d = Vec::new();
            diff_paths(&attrs(&live), &attrs(&preview.resource), "", &mut d);
            assert!(
                !d.is_empty(),
                "{}: the removal must show ({config})",
                before.id
            );
            let done = apply(&rt, Some(prior), after, false).unwrap();
            assert_eq!(attrs(&done.resource), attrs(after), "{}", after.id);
            // Converged: read and dry-run agree, nothing to change.
            let live = read(&rt, Some(&done.resource), after).unwrap();
            let again = apply(&rt, Some(&done.resource), after, true).unwrap();
            assert_eq!(attrs(&live), attrs(&again.resource), "{}", after.id);
        }
        let api: Api<k8s_openapi::api::apps::v1::Deployment> =
            Api::namespaced(cp.client().unwrap(), ns);
        let d = cp.block_on(api.get("app")).unwrap();
        let containers = d.spec.unwrap().template.spec.unwrap().containers;
        assert_eq!(containers.len(), 1, "one container left");
        assert_eq!(
            containers[0].env.as_ref().map(Vec::len),
            Some(1),
            "one env var left"
        );
        let svcs: Api<k8s_openapi::api::core::v1::Service> =
            Api::namespaced(cp.client().unwrap(), ns);
        let s = cp.block_on(svcs.get("app")).unwrap();
        assert_eq!(s.spec.unwrap().ports.unwrap().len(), 1);
        assert_eq!(s.metadata.labels.unwrap().len(), 1);
    }
}
