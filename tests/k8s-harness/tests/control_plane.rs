//! The harness against itself: a real control plane comes up, the fake kubelet drives pods and
//! a Deployment to ready, faults are injected, and dropping the plane kills exactly its PIDs.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use kusion_k8s_harness::{ControlPlane, FAULT_ANNOTATION, Fault};
use serde_json::json;

fn pid_alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; a reaped process does not.
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn create_ns(cp: &ControlPlane, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    cp.block_on(Api::<Namespace>::all(cp.client().unwrap()).create(&PostParams::default(), &ns))
        .unwrap();
}

fn deployment(name: &str, replicas: i32, fault: Option<&str>) -> Deployment {
    let mut annotations = serde_json::Map::new();
    if let Some(f) = fault {
        annotations.insert(FAULT_ANNOTATION.into(), json!(f));
    }
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}
            }
        }
    }))
    .unwrap()
}

#[test]
fn deployment_becomes_available_and_faults_are_injected() {
    let cp = ControlPlane::shared();
    create_ns(cp, "harness-a");
    let client = cp.client().unwrap();
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "harness-a");
    cp.block_on(deploys.create(&PostParams::default(), &deployment("web", 2, None)))
        .unwrap();
    wait_for("deployment available", Duration::from_secs(60), || {
        let d = cp.block_on(deploys.get("web")).ok()?;
        let s = d.status?;
        (s.available_replicas == Some(2) && s.updated_replicas == Some(2)).then_some(())
    });

    cp.block_on(deploys.create(
        &PostParams::default(),
        &deployment("broken", 1, Some("ImagePullBackOff")),
    ))
    .unwrap();
    cp.kubelet()
        .unwrap()
        .inject("harness-a", "crashy-", Fault::CrashLoopBackOff);
    cp.block_on(deploys.create(&PostParams::default(), &deployment("crashy", 1, None)))
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "harness-a");
    let reason_of = |prefix: &str| {
        let list = cp.block_on(pods.list(&Default::default())).ok()?;
        let pod = list
            .items
            .into_iter()
            .find(|p| p.metadata.name.as_deref().unwrap_or("").starts_with(prefix))?;
        let cs = pod.status?.container_statuses?;
        cs.first()?.state.as_ref()?.waiting.as_ref()?.reason.clone()
    };
    let r = wait_for("ImagePullBackOff pod", Duration::from_secs(60), || {
        reason_of("broken-")
    });
    assert_eq!(r, "ImagePullBackOff");
    let r = wait_for("CrashLoopBackOff pod", Duration::from_secs(60), || {
        reason_of("crashy-")
    });
    assert_eq!(r, "CrashLoopBackOff");
}

#[test]
fn two_planes_run_at_once_and_drop_kills_exact_pids() {
    let a = ControlPlane::start_with(kusion_k8s_harness::Options {
        controller_manager: false,
        fake_kubelet: false,
        ..Default::default()
    })
    .expect("first control plane");
    let b = ControlPlane::start_with(kusion_k8s_harness::Options {
        controller_manager: false,
        fake_kubelet: false,
        ..Default::default()
    })
    .expect("second control plane");
    assert_ne!(a.server(), b.server());
    create_ns(&a, "only-in-a");
    let nss: Api<Namespace> = Api::all(b.client().unwrap());
    assert!(
        b.block_on(nss.get_opt("only-in-a")).unwrap().is_none(),
        "planes must not share etcd"
    );
    let pids: Vec<u32> = a.pids().into_iter().map(|(_, p)| p).collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| pid_alive(*p)));
    drop(a);
    assert!(
        pids.iter().all(|p| !pid_alive(*p)),
        "every process of the dropped plane is gone"
    );
    // The other plane is untouched.
    assert!(b.pids().iter().all(|(_, p)| pid_alive(*p)));
    assert!(b.block_on(nss.get_opt("default")).unwrap().is_some());
}
