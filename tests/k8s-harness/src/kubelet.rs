//! A fake kubelet: no containers run, but pods move through the states a real node reports.
//!
//! - one `Node` (Ready, schedulable) is registered;
//! - pending pods are bound to it (`pods/{name}/binding`), acting as the scheduler too;
//! - bound pods get a status: Running/Ready by default, Succeeded for Job pods, or an injected
//!   fault (annotation [`FAULT_ANNOTATION`] on the pod or its template, or a rule added with
//!   [`FakeKubelet::inject`]);
//! - pods with a `deletionTimestamp` are force-deleted (a real kubelet would confirm the stop).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use serde_json::json;

use crate::{HarnessError, Result};

/// Pod annotation selecting a fault: `ImagePullBackOff`, `CrashLoopBackOff`, `Fail`,
/// `Succeed`, `Ready` or `Unschedulable` (left pending).
pub const FAULT_ANNOTATION: &str = "harness.kusion.io/fault";

/// What the fake kubelet makes of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Running, all containers ready.
    Ready,
    /// Pending, containers waiting with `ImagePullBackOff`.
    ImagePullBackOff,
    /// Running, containers restarting with `CrashLoopBackOff`.
    CrashLoopBackOff,
    /// Failed: containers terminated with exit code 1.
    Fail,
    /// Succeeded: containers terminated with exit code 0.
    Succeed,
    /// Never bound to the node.
    Unschedulable,
}

impl Fault {
    fn parse(text: &str) -> Option<Fault> {
        Some(match text {
            "Ready" => Fault::Ready,
            "ImagePullBackOff" => Fault::ImagePullBackOff,
            "CrashLoopBackOff" => Fault::CrashLoopBackOff,
            "Fail" => Fault::Fail,
            "Succeed" => Fault::Succeed,
            "Unschedulable" => Fault::Unschedulable,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
struct Rule {
    namespace: String,
    name_prefix: String,
    fault: Fault,
}

pub const NODE_NAME: &str = "kusion-fake-node";

/// Handle of the running fake kubelet task.
pub struct FakeKubelet {
    rules: Arc<Mutex<Vec<Rule>>>,
    task: tokio::task::JoinHandle<()>,
    client: kube::Client,
    ip: Arc<AtomicU32>,
}

impl FakeKubelet {
    pub(crate) async fn start(
        client: kube::Client,
        handle: tokio::runtime::Handle,
    ) -> Result<FakeKubelet> {
        register_node(&client).await?;
        let rules = Arc::new(Mutex::new(Vec::new()));
        let ip = Arc::new(AtomicU32::new(2));
        let task = handle.spawn(run(client.clone(), rules.clone(), ip.clone()));
        Ok(FakeKubelet {
            rules,
            task,
            client,
            ip,
        })
    }

    /// Give one pod that is already running this fault now (a rule naming exactly it, then its
    /// status rewritten), e.g. to make a healthy pod go CrashLoopBackOff. Its replacements have
    /// other names, so they start healthy unless another rule says otherwise.
    pub async fn set_fault(&self, namespace: &str, pod: &str, fault: Fault) -> Result<()> {
        self.inject(namespace, pod, fault);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let current = api
            .get(pod)
            .await
            .map_err(|e| HarnessError::Kube(format!("reading pod {namespace}/{pod}: {e}")))?;
        write_status(&self.client, &current, fault, &self.ip)
            .await
            .map_err(|e| HarnessError::Kube(format!("rewriting pod {namespace}/{pod}: {e}")))
    }

    /// Give pods in `namespace` whose name starts with `name_prefix` this fault (later rules win).
    pub fn inject(&self, namespace: &str, name_prefix: &str, fault: Fault) {
        if let Ok(mut rules) = self.rules.lock() {
            rules.push(Rule {
                namespace: namespace.into(),
                name_prefix: name_prefix.into(),
                fault,
            });
        }
    }

    pub fn node_name(&self) -> &'static str {
        NODE_NAME
    }

    pub(crate) fn stop(self) {
        self.task.abort();
    }
}

async fn register_node(client: &kube::Client) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE_NAME, "labels": {"kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux"}},
    }))
    .map_err(|e| HarnessError::Kube(e.to_string()))?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(HarnessError::Kube(format!("creating node: {e}"))),
    }
    // Node creation adds a `node.kubernetes.io/not-ready` taint that only the node lifecycle
    // controller (not run here) would lift; without lifting it DaemonSets schedule nothing.
    let untaint = json!({"spec": {"taints": null}});
    nodes
        .patch(NODE_NAME, &PatchParams::default(), &Patch::Merge(&untaint))
        .await
        .map_err(|e| HarnessError::Kube(format!("node taints: {e}")))?;
    let now = now();
    let capacity = json!({"cpu": "32", "memory": "64Gi", "pods": "250"});
    let status = json!({"status": {
        "capacity": capacity, "allocatable": capacity,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake kubelet",
                        "lastHeartbeatTime": now, "lastTransitionTime": now}],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "nodeInfo": {"kubeletVersion": "v1.20.2", "kubeProxyVersion": "v1.20.2", "architecture": "amd64",
                     "operatingSystem": "linux", "bootID": "", "containerRuntimeVersion": "fake://1",
                     "kernelVersion": "", "machineID": "", "osImage": "fake", "systemUUID": ""},
    }});
    nodes
        .patch_status(NODE_NAME, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(|e| HarnessError::Kube(format!("node status: {e}")))?;
    Ok(())
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

async fn run(client: kube::Client, rules: Arc<Mutex<Vec<Rule>>>, ip: Arc<AtomicU32>) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut stream = watcher(pods, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(item) = stream.next().await {
        match item {
            Ok(pod) => {
                if let Err(e) = handle_pod(&client, &pod, &rules, &ip).await {
                    tracing::debug!("fake kubelet: {e}");
                }
            }
            Err(e) => tracing::debug!("fake kubelet watch: {e}"),
        }
    }
}

fn fault_for(pod: &Pod, rules: &Mutex<Vec<Rule>>) -> Fault {
    let meta = &pod.metadata;
    let ns = meta.namespace.as_deref().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    if let Ok(rules) = rules.lock()
        && let Some(rule) = rules
            .iter()
            .rev()
            .find(|r| r.namespace == ns && name.starts_with(&r.name_prefix))
    {
        return rule.fault;
    }
    if let Some(f) = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(FAULT_ANNOTATION))
        .and_then(|v| Fault::parse(v))
    {
        return f;
    }
    let owned_by_job = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Job");
    if owned_by_job {
        Fault::Succeed
    } else {
        Fault::Ready
    }
}

async fn handle_pod(
    client: &kube::Client,
    pod: &Pod,
    rules: &Mutex<Vec<Rule>>,
    ip: &AtomicU32,
) -> kube::Result<()> {
    let meta = &pod.metadata;
    let (Some(ns), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
        return Ok(());
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    if meta.deletion_timestamp.is_some() {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        return match api.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        };
    }
    let fault = fault_for(pod, rules);
    let spec = pod.spec.as_ref();
    let node = spec.and_then(|s| s.node_name.as_deref());
    if node.is_none() {
        if fault == Fault::Unschedulable {
            return Ok(());
        }
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME},
        });
        let _: serde_json::Value = api
            .create_subresource("binding", name, &PostParams::default(), &binding)
            .await?;
        // The bound pod comes back through the watch; its status is written then.
        return Ok(());
    }
    if node != Some(NODE_NAME) {
        return Ok(());
    }
    let status = pod.status.as_ref();
    if status
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|c| !c.is_empty())
    {
        return Ok(()); // already "running"
    }
    write_status(client, pod, fault, ip).await
}

/// Write the status a node running `pod` with `fault` would report.
async fn write_status(
    client: &kube::Client,
    pod: &Pod,
    fault: Fault,
    ip: &AtomicU32,
) -> kube::Result<()> {
    let meta = &pod.metadata;
    let (Some(ns), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
        return Ok(());
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let spec = pod.spec.as_ref();
    let containers: Vec<(String, String)> = spec
        .map(|s| {
            s.containers
                .iter()
                .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    let now = now();
    let n = ip.fetch_add(1, Ordering::Relaxed);
    let pod_ip = format!("10.244.{}.{}", (n / 250) % 250, n % 250 + 1);
    let cond = |t: &str, ok: bool, reason: Option<&str>| {
        let mut c = json!({"type": t, "status": if ok {"True"} else {"False"}, "lastProbeTime": null, "lastTransitionTime": now});
        if let Some(r) = reason {
            c["reason"] = json!(r);
        }
        c
    };
    let container = |name: &str,
                     image: &str,
                     ready: bool,
                     restarts: i32,
                     state: serde_json::Value| {
        json!({"name": name, "image": image, "imageID": if ready {format!("fake://{image}")} else {String::new()},
               "ready": ready, "started": ready, "restartCount": restarts, "state": state})
    };
    let (phase, ready, states): (&str, bool, Vec<serde_json::Value>) = match fault {
        Fault::Ready | Fault::Unschedulable => (
            "Running",
            true,
            containers.iter().map(|(n, i)| container(n, i, true, 0, json!({"running": {"startedAt": now}}))).collect(),
        ),
        Fault::ImagePullBackOff => (
            "Pending",
            false,
            containers
                .iter()
                .map(|(n, i)| {
                    let msg = format!("Back-off pulling image \"{i}\"");
                    container(n, i, false, 0, json!({"waiting": {"reason": "ImagePullBackOff", "message": msg}}))
                })
                .collect(),
        ),
        Fault::CrashLoopBackOff => (
            "Running",
            false,
            containers
                .iter()
                .map(|(n, i)| {
                    let msg = format!("back-off 40s restarting failed container={n} pod={name}");
                    let mut c =
                        container(n, i, false, 3, json!({"waiting": {"reason": "CrashLoopBackOff", "message": msg}}));
                    c["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}});
                    c
                })
                .collect(),
        ),
        Fault::Fail | Fault::Succeed => {
            let (code, reason) = if fault == Fault::Fail { (1, "Error") } else { (0, "Completed") };
            (
                if fault == Fault::Fail { "Failed" } else { "Succeeded" },
                false,
                containers
                    .iter()
                    .map(|(n, i)| {
                        container(n, i, false, 0, json!({"terminated": {"exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now}}))
                    })
                    .collect(),
            )
        }
    };
    let scheduled = cond("PodScheduled", true, None);
    let conditions = if phase == "Pending" && !ready {
        vec![
            scheduled,
            cond("Initialized", true, None),
            cond("ContainersReady", false, Some("ContainersNotReady")),
            cond("Ready", false, Some("ContainersNotReady")),
        ]
    } else {
        vec![
            scheduled,
            cond("Initialized", true, None),
            cond("ContainersReady", ready, None),
            cond("Ready", ready, None),
        ]
    };
    let patch = json!({"status": {
        "phase": phase, "conditions": conditions, "hostIP": "127.0.0.1", "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}], "startTime": now, "containerStatuses": states,
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
