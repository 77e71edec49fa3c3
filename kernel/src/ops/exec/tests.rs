//! Unit tests of `exec`.

use super::*;
use kusion_sdk::Resource;
use kusion_sdk::runtime::{ObjectRef, ObjectStatus, Watch};

fn pod(name: &str, health: Health) -> ObjectStatus {
    ObjectStatus {
        kind: "Pod".into(),
        name: name.into(),
        health,
        detail: String::new(),
    }
}

#[test]
fn judge_needs_the_old_pod_gone_and_enough_ready() {
    let hint = RecoveryHint {
        watch: Resource::new(
            "apps/v1:Deployment:ns:web",
            "Kubernetes",
            Default::default(),
        ),
        gone: vec![ObjectRef {
            kind: "Pod".into(),
            name: "web-1".into(),
        }],
        min_ready: Some(2),
        ready_kind: Some("Pod".into()),
    };
    let ev = |health, objects| WatchEvent {
        health,
        detail: "d".into(),
        objects,
        object: None,
    };
    // Stale status: the deployment still looks ready while the deleted pod is listed.
    let e = judge(
        &ev(
            Health::Ready,
            vec![pod("web-1", Health::Ready), pod("web-2", Health::Ready)],
        ),
        &hint,
        &[],
    );
    assert!(e.unwrap_err().contains("web-1"));
    let e = judge(
        &ev(Health::Ready, vec![pod("web-2", Health::Ready)]),
        &hint,
        &[],
    );
    assert_eq!(e.unwrap_err(), "1/2 Pods ready");
    let e = judge(
        &ev(Health::Failed, vec![pod("web-2", Health::Failed)]),
        &hint,
        &[],
    );
    assert_eq!(e.unwrap_err(), "d");
    let both = vec![pod("web-2", Health::Ready), pod("web-3", Health::Ready)];
    assert!(judge(&ev(Health::Ready, both), &hint, &[]).is_ok());
    // A pod restarted by a later batch still crashes: the workload fails, but this batch's
    // replacement is ready, so the batch recovered.
    let later = vec!["web-4".to_string()];
    let objs = vec![pod("web-3", Health::Ready), pod("web-4", Health::Failed)];
    assert!(judge(&ev(Health::Failed, objs.clone()), &hint, &later).is_ok());
    // Without the excuse it is a failure.
    assert!(judge(&ev(Health::Failed, objs), &hint, &[]).is_err());
    // Another pod crashing is not excused.
    let objs = vec![pod("web-3", Health::Failed), pod("web-4", Health::Failed)];
    let e = judge(&ev(Health::Failed, objs), &hint, &later).unwrap_err();
    assert!(e.starts_with("Pod web-3"), "{e}");
}

/// A runtime that acts instantly and reports ready after a moment, counting how many
/// targets are in flight at once.
struct Fake {
    in_flight: std::sync::atomic::AtomicUsize,
    max: std::sync::atomic::AtomicUsize,
}

struct FakeWatch<'a> {
    fake: &'a Fake,
    done: bool,
}

impl Watch for FakeWatch<'static> {
    fn poll(&mut self, _timeout: Duration) -> kusion_sdk::PluginResult<WatchPoll> {
        if self.done {
            return Ok(WatchPoll::Closed);
        }
        std::thread::sleep(Duration::from_millis(40));
        self.done = true;
        self.fake.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(WatchPoll::Event(WatchEvent {
            health: Health::Ready,
            detail: String::new(),
            objects: Vec::new(),
            object: None,
        }))
    }
}

static FAKE: Fake = Fake {
    in_flight: std::sync::atomic::AtomicUsize::new(0),
    max: std::sync::atomic::AtomicUsize::new(0),
};

struct FakeRuntime;

/// The tests share [`FAKE`]'s counters: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Runtime for FakeRuntime {
    fn describe(&self) -> kusion_sdk::runtime::RuntimeInfo {
        kusion_sdk::runtime::RuntimeInfo {
            name: "fake".into(),
            version: "0".into(),
            abi: kusion_sdk::ABI_VERSION,
            resource_types: vec!["Kubernetes".into()],
            capabilities: Default::default(),
        }
    }
    fn configure(&self, _: &serde_json::Value) -> kusion_sdk::PluginResult<()> {
        Ok(())
    }
    fn apply(
        &self,
        _: &kusion_sdk::runtime::ApplyRequest,
    ) -> kusion_sdk::PluginResult<kusion_sdk::runtime::ApplyResponse> {
        Err(kusion_sdk::PluginError::unsupported("no"))
    }
    fn read(
        &self,
        _: &kusion_sdk::runtime::ReadRequest,
    ) -> kusion_sdk::PluginResult<kusion_sdk::runtime::ReadResponse> {
        Err(kusion_sdk::PluginError::unsupported("no"))
    }
    fn import(
        &self,
        _: &kusion_sdk::runtime::ImportRequest,
    ) -> kusion_sdk::PluginResult<kusion_sdk::runtime::ReadResponse> {
        Err(kusion_sdk::PluginError::unsupported("no"))
    }
    fn delete(&self, _: &kusion_sdk::runtime::DeleteRequest) -> kusion_sdk::PluginResult<()> {
        Ok(())
    }
    fn watch(&self, _: &WatchRequest) -> kusion_sdk::PluginResult<Box<dyn Watch>> {
        Ok(Box::new(FakeWatch {
            fake: &FAKE,
            done: false,
        }))
    }
    fn operate(&self, req: &OperateRequest) -> kusion_sdk::PluginResult<OperateResponse> {
        if req.resource.id.ends_with(":bad") {
            return Err(kusion_sdk::PluginError::invalid("bad target"));
        }
        let now = FAKE.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        FAKE.max.fetch_max(now, Ordering::SeqCst);
        Ok(OperateResponse {
            summary: "done".into(),
            recovery: Some(RecoveryHint {
                watch: req.resource.clone(),
                gone: Vec::new(),
                min_ready: None,
                ready_kind: None,
            }),
            owner: None,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_run_in_parallel_within_the_app_budget_and_failures_skip_dependents() {
    let _serial = SERIAL.lock().await;
    let spec = OpsSpec::from_output(&serde_json::json!({"operations": [
        {"name": "r", "kind": "Restart", "app": "web", "batchSize": 3, "maxUnavailable": 2,
         "targets": ["a/v1:Pod:ns:p1", "a/v1:Pod:ns:p2", "a/v1:Pod:ns:p3",
                     "b/v1:Pod:ns:q1", "b/v1:Pod:ns:q2", "b/v1:Pod:ns:q3"]},
        {"name": "f", "kind": "Restart", "targets": ["a/v1:Pod:ns:bad", "a/v1:Pod:ns:after"]},
        {"name": "d", "kind": "Restart", "targets": ["b/v1:Pod:ns:x"], "dependsOn": ["f"]},
    ]}))
    .unwrap();
    let mut registry = Registry::new();
    registry.register(Arc::new(FakeRuntime)).unwrap();
    let cluster = ClusterConfig {
        kubeconfig: None,
        context: None,
        resource_type: "Kubernetes".into(),
    };
    let clusters: BTreeMap<String, ClusterConfig> = [
        ("a".to_string(), cluster.clone()),
        ("b".to_string(), cluster),
    ]
    .into();
    let report = execute(
        &spec,
        &registry,
        &clusters,
        None,
        Arc::new(AtomicBool::new(false)),
        None,
    )
    .await;
    let status = |t: &str| {
        report
            .targets
            .iter()
            .find(|r| r.target == t)
            .map(|r| (r.status, r.reason.clone().unwrap_or_default()))
            .unwrap()
    };
    for t in ["a/v1:Pod:ns:p1", "a/v1:Pod:ns:p3", "b/v1:Pod:ns:q3"] {
        assert_eq!(status(t).0, TargetStatus::Recovered, "{report:?}");
    }
    // Two clusters in parallel, but never more than maxUnavailable of the app at once.
    assert!(FAKE.max.load(Ordering::SeqCst) <= 2, "{report:?}");
    let (s, why) = status("a/v1:Pod:ns:bad");
    assert_eq!(s, TargetStatus::Failed);
    assert!(why.contains("bad target"), "{why}");
    // The next batch of the failed group and the dependent operation never started.
    assert_eq!(status("a/v1:Pod:ns:after").0, TargetStatus::NotStarted);
    let (s, why) = status("b/v1:Pod:ns:x");
    assert_eq!(s, TargetStatus::NotStarted);
    assert!(why.contains("dependency \"f\""), "{why}");
    assert!(!report.succeeded());
}

fn fake_clusters() -> (Registry, BTreeMap<String, ClusterConfig>) {
    let mut registry = Registry::new();
    registry.register(Arc::new(FakeRuntime)).unwrap();
    let cluster = ClusterConfig {
        kubeconfig: None,
        context: None,
        resource_type: "Kubernetes".into(),
    };
    (registry, [("a".to_string(), cluster)].into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_skips_the_whole_chain_after_it_and_an_interrupt_starts_nothing() {
    let _serial = SERIAL.lock().await;
    let spec = OpsSpec::from_output(&serde_json::json!({"operations": [
        {"name": "first", "kind": "Restart", "targets": ["a/v1:Pod:ns:bad"]},
        {"name": "second", "kind": "Restart", "targets": ["a/v1:Pod:ns:s"], "dependsOn": ["first"]},
        {"name": "third", "kind": "Restart", "targets": ["a/v1:Pod:ns:t"], "dependsOn": ["second"]},
        {"name": "apart", "kind": "Restart", "targets": ["a/v1:Pod:ns:u"]},
    ]}))
    .unwrap();
    let (registry, clusters) = fake_clusters();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let report = execute(
        &spec,
        &registry,
        &clusters,
        Some(tx),
        Arc::new(AtomicBool::new(false)),
        None,
    )
    .await;
    let order: Vec<&str> = report
        .targets
        .iter()
        .map(|t| t.operation.as_str())
        .collect();
    assert_eq!(
        order,
        ["first", "second", "third", "apart"],
        "in the spec's order"
    );
    let why = |op: &str| {
        let t = report.targets.iter().find(|t| t.operation == op).unwrap();
        (t.status, t.reason.clone().unwrap_or_default())
    };
    assert_eq!(why("first").0, TargetStatus::Failed);
    assert_eq!(
        why("second"),
        (
            TargetStatus::NotStarted,
            "dependency \"first\" did not succeed".into()
        )
    );
    assert_eq!(
        why("third"),
        (
            TargetStatus::NotStarted,
            "dependency \"second\" did not succeed".into()
        )
    );
    assert_eq!(why("apart").0, TargetStatus::Recovered);
    let mut skipped = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let RunEvent::OperationSkipped { operation, .. } = e {
            skipped.push(operation);
        }
    }
    assert_eq!(skipped, ["second", "third"]);

    // Interrupted before anything started: every target is not started, saying why.
    let report = execute(
        &spec,
        &registry,
        &clusters,
        None,
        Arc::new(AtomicBool::new(true)),
        None,
    )
    .await;
    assert_eq!(report.targets.len(), 4);
    for t in &report.targets {
        assert_eq!(t.status, TargetStatus::NotStarted, "{t:?}");
        assert_eq!(t.reason.as_deref(), Some(INTERRUPTED), "{t:?}");
    }
}
