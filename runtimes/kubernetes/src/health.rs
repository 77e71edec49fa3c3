//! Readiness per kind, following the owner chain (Deployment -> ReplicaSet -> Pod,
//! StatefulSet/DaemonSet -> Pod, CronJob -> Job -> Pod, Job -> Pod, Service -> Endpoints).
//! Everything is read as JSON so any server version's shape (e.g. `batch/v1beta1` CronJob on
//! 1.20) works, and a missing field never panics.

use kube::api::{ApiResource, GroupVersionKind};
use kusion_sdk::PluginResult;
use kusion_sdk::runtime::{Health, ObjectStatus, WatchEvent};
use serde_json::Value;

use crate::cluster::{Cluster, shareable_since};
use crate::error::from_kube;
use crate::id::Target;

/// Container waiting reasons that will not fix themselves: reported as failure at once.
const FATAL_WAITING: &[&str] = &[
    "ImagePullBackOff",
    "ErrImagePull",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
    "RunContainerError",
];

fn s<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    v.pointer(path).and_then(Value::as_str)
}

fn i(v: &Value, path: &str) -> Option<i64> {
    v.pointer(path).and_then(Value::as_i64)
}

fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn cond_status(c: Option<&Value>) -> Option<&str> {
    c.and_then(|c| c.get("status")).and_then(Value::as_str)
}

fn cond_text(c: &Value) -> String {
    let reason = c.get("reason").and_then(Value::as_str).unwrap_or("");
    let message = c.get("message").and_then(Value::as_str).unwrap_or("");
    match (reason.is_empty(), message.is_empty()) {
        (false, false) => format!("{reason}: {message}"),
        (false, true) => reason.to_string(),
        _ => message.to_string(),
    }
}

fn name_of(obj: &Value) -> String {
    s(obj, "/metadata/name").unwrap_or("").to_string()
}

fn uid_of(obj: &Value) -> Option<&str> {
    s(obj, "/metadata/uid")
}

fn owned_by(obj: &Value, uids: &[&str]) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("uid")
                    .and_then(Value::as_str)
                    .is_some_and(|u| uids.contains(&u))
            })
        })
}

fn row(kind: &str, obj: &Value, health: Health, detail: impl Into<String>) -> ObjectStatus {
    ObjectStatus {
        kind: kind.to_string(),
        name: name_of(obj),
        health,
        detail: detail.into(),
    }
}

/// The health of a pod and, if it failed, why.
pub fn pod_health(pod: &Value) -> (Health, String) {
    let phase = s(pod, "/status/phase").unwrap_or("Pending");
    let mut statuses: Vec<&Value> = Vec::new();
    for key in ["/status/initContainerStatuses", "/status/containerStatuses"] {
        if let Some(list) = pod.pointer(key).and_then(Value::as_array) {
            statuses.extend(list);
        }
    }
    for c in &statuses {
        if let Some(reason) = s(c, "/state/waiting/reason")
            && FATAL_WAITING.contains(&reason)
        {
            let msg = s(c, "/state/waiting/message").unwrap_or("");
            let cname = s(c, "/name").unwrap_or("?");
            return (
                Health::Failed,
                format!("container {cname}: {reason}: {msg}")
                    .trim_end_matches(": ")
                    .to_string(),
            );
        }
    }
    match phase {
        "Succeeded" => (Health::Ready, "Completed".into()),
        "Failed" => {
            let why = statuses
                .iter()
                .find_map(|c| {
                    let code = i(c, "/state/terminated/exitCode")?;
                    (code != 0).then(|| {
                        format!(
                            "container {} exited with code {code}",
                            s(c, "/name").unwrap_or("?")
                        )
                    })
                })
                .or_else(|| s(pod, "/status/reason").map(str::to_string))
                .unwrap_or_else(|| "Failed".into());
            (Health::Failed, why)
        }
        _ => {
            let total = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = pod
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .map_or(0, |l| {
                    l.iter()
                        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                        .count()
                });
            if phase == "Running" && cond_status(condition(pod, "Ready")) == Some("True") {
                (
                    Health::Ready,
                    format!("Running, {ready}/{total} containers ready"),
                )
            } else {
                (
                    Health::Progressing,
                    format!("{phase}, {ready}/{total} containers ready"),
                )
            }
        }
    }
}

fn deployment_health(d: &Value) -> (Health, String) {
    let generation = i(d, "/metadata/generation").unwrap_or(0);
    let observed = i(d, "/status/observedGeneration").unwrap_or(0);
    if let Some(c) = condition(d, "Progressing")
        && cond_status(Some(c)) == Some("False")
        && c.get("reason").and_then(Value::as_str) == Some("ProgressDeadlineExceeded")
    {
        return (Health::Failed, cond_text(c));
    }
    if observed < generation {
        return (
            Health::Progressing,
            format!("waiting for the controller (observed generation {observed} < {generation})"),
        );
    }
    let want = i(d, "/spec/replicas").unwrap_or(1);
    let updated = i(d, "/status/updatedReplicas").unwrap_or(0);
    let total = i(d, "/status/replicas").unwrap_or(0);
    let available = i(d, "/status/availableReplicas").unwrap_or(0);
    if updated < want {
        (
            Health::Progressing,
            format!("{updated} of {want} replicas updated"),
        )
    } else if total > updated {
        (
            Health::Progressing,
            format!("{} old replicas pending termination", total - updated),
        )
    } else if available < updated {
        (
            Health::Progressing,
            format!("{available} of {updated} updated replicas available"),
        )
    } else if total > want || available > want {
        (
            Health::Progressing,
            format!(
                "{} surplus replicas terminating",
                total.max(available) - want
            ),
        )
    } else {
        (
            Health::Ready,
            format!("{available}/{want} replicas available"),
        )
    }
}

fn replicaset_health(rs: &Value) -> (Health, String) {
    let want = i(rs, "/spec/replicas").unwrap_or(1);
    let ready = i(rs, "/status/readyReplicas").unwrap_or(0);
    let h = if ready >= want {
        Health::Ready
    } else {
        Health::Progressing
    };
    (h, format!("{ready}/{want} replicas ready"))
}

fn statefulset_health(st: &Value) -> (Health, String) {
    let generation = i(st, "/metadata/generation").unwrap_or(0);
    let observed = i(st, "/status/observedGeneration").unwrap_or(0);
    let want = i(st, "/spec/replicas").unwrap_or(1);
    let ready = i(st, "/status/readyReplicas").unwrap_or(0);
    let updated = i(st, "/status/updatedReplicas").unwrap_or(0);
    let rolling = s(st, "/spec/updateStrategy/type").unwrap_or("RollingUpdate") == "RollingUpdate";
    if observed < generation {
        (
            Health::Progressing,
            format!("waiting for the controller (observed generation {observed} < {generation})"),
        )
    } else if ready < want || (rolling && updated < want) {
        (
            Health::Progressing,
            format!("{ready}/{want} ready, {updated} updated"),
        )
    } else {
        (Health::Ready, format!("{ready}/{want} replicas ready"))
    }
}

fn daemonset_health(ds: &Value) -> (Health, String) {
    let generation = i(ds, "/metadata/generation").unwrap_or(0);
    let observed = i(ds, "/status/observedGeneration").unwrap_or(0);
    let desired = i(ds, "/status/desiredNumberScheduled").unwrap_or(0);
    let ready = i(ds, "/status/numberReady").unwrap_or(0);
    let updated = i(ds, "/status/updatedNumberScheduled").unwrap_or(0);
    if observed < generation {
        (
            Health::Progressing,
            format!("waiting for the controller (observed generation {observed} < {generation})"),
        )
    } else if ready < desired || updated < desired {
        (
            Health::Progressing,
            format!("{ready}/{desired} ready, {updated} updated"),
        )
    } else {
        (Health::Ready, format!("{ready}/{desired} ready"))
    }
}

pub fn job_health(job: &Value) -> (Health, String) {
    if let Some(c) = condition(job, "Failed")
        && cond_status(Some(c)) == Some("True")
    {
        return (Health::Failed, cond_text(c));
    }
    let succeeded = i(job, "/status/succeeded").unwrap_or(0);
    let completions = i(job, "/spec/completions");
    if cond_status(condition(job, "Complete")) == Some("True") {
        return (Health::Ready, format!("Complete, {succeeded} succeeded"));
    }
    let active = i(job, "/status/active").unwrap_or(0);
    let failed = i(job, "/status/failed").unwrap_or(0);
    if completions.is_some_and(|c| succeeded >= c) {
        return (Health::Ready, format!("{succeeded} succeeded"));
    }
    let want = completions
        .map(|c| c.to_string())
        .unwrap_or_else(|| "1".into());
    (
        Health::Progressing,
        format!("{succeeded}/{want} succeeded, {active} active, {failed} failed"),
    )
}

/// The health of one object of `group`/`kind` from its JSON alone (no owned objects).
pub fn evaluate_json(group: &str, kind: &str, obj: &Value) -> (Health, String) {
    simple_health(group, kind, obj)
}

fn simple_health(group: &str, kind: &str, obj: &Value) -> (Health, String) {
    match (group, kind) {
        ("", "Namespace") => match s(obj, "/status/phase") {
            Some("Active") | None => (Health::Ready, "Active".into()),
            Some(p) => (Health::Progressing, p.to_string()),
        },
        ("", "PersistentVolumeClaim") => match s(obj, "/status/phase") {
            Some("Bound") => (Health::Ready, "Bound".into()),
            Some("Lost") => (Health::Failed, "Lost".into()),
            p => (Health::Progressing, p.unwrap_or("Pending").to_string()),
        },
        ("", "Service") => {
            let t = s(obj, "/spec/type").unwrap_or("ClusterIP");
            let ip = s(obj, "/spec/clusterIP").unwrap_or("");
            if t == "LoadBalancer" {
                let has_ingress = obj
                    .pointer("/status/loadBalancer/ingress")
                    .and_then(Value::as_array)
                    .is_some_and(|l| !l.is_empty());
                if !has_ingress {
                    return (
                        Health::Progressing,
                        "waiting for a load balancer address".into(),
                    );
                }
            }
            (Health::Ready, format!("{t} {ip}").trim().to_string())
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            if let Some(c) = condition(obj, "NamesAccepted")
                && cond_status(Some(c)) == Some("False")
            {
                return (Health::Failed, cond_text(c));
            }
            if cond_status(condition(obj, "Established")) == Some("True") {
                (Health::Ready, "Established".into())
            } else {
                (Health::Progressing, "waiting to be established".into())
            }
        }
        ("", "Pod") => pod_health(obj),
        ("apps", "Deployment") => deployment_health(obj),
        ("apps", "ReplicaSet") => replicaset_health(obj),
        ("apps", "StatefulSet") => statefulset_health(obj),
        ("apps", "DaemonSet") => daemonset_health(obj),
        ("batch", "Job") => job_health(obj),
        _ => (Health::Ready, "exists".into()),
    }
}

/// The object for a host-judged readiness rule: managedFields are bookkeeping, not state.
fn without_managed_fields(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    obj
}

/// A kind whose objects are children in some owner chain: (group, version, kind, plural).
pub(crate) type ChildKind = (&'static str, &'static str, &'static str, &'static str);
const REPLICASETS: ChildKind = ("apps", "v1", "ReplicaSet", "replicasets");
const PODS: ChildKind = ("", "v1", "Pod", "pods");
const JOBS: ChildKind = ("batch", "v1", "Job", "jobs");
const ENDPOINTS: ChildKind = ("", "v1", "Endpoints", "endpoints");

/// The kinds (in the object's namespace) whose objects decide the health of a `group`/`kind`.
pub(crate) fn children_of(group: &str, kind: &str) -> &'static [ChildKind] {
    match (group, kind) {
        ("apps", "Deployment") => &[REPLICASETS, PODS],
        ("apps", "StatefulSet")
        | ("apps", "DaemonSet")
        | ("apps", "ReplicaSet")
        | ("batch", "Job") => &[PODS],
        ("batch", "CronJob") => &[JOBS],
        ("", "Service") => &[ENDPOINTS],
        _ => &[],
    }
}

pub(crate) fn child_resource(child: &ChildKind) -> ApiResource {
    let (group, version, kind, plural) = *child;
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The answer while the object itself cannot be judged yet.
pub(crate) fn progressing(target: &Target, detail: &str) -> WatchEvent {
    WatchEvent {
        health: Health::Progressing,
        detail: detail.to_string(),
        objects: vec![ObjectStatus {
            kind: target.kind.clone(),
            name: target.name.clone(),
            health: Health::Progressing,
            detail: detail.to_string(),
        }],
        object: None,
    }
}

/// One snapshot of the resource's health, read with a GET and (shared, short-lived) lists.
pub async fn evaluate(cluster: &Cluster, target: &Target) -> PluginResult<WatchEvent> {
    evaluate_since(cluster, target, shareable_since()).await
}

/// [`evaluate`] with child lists requested no earlier than `since` (`None`: new lists).
pub async fn evaluate_since(
    cluster: &Cluster,
    target: &Target,
    since: Option<std::time::Instant>,
) -> PluginResult<WatchEvent> {
    let Some(kind) = cluster.checked_kind(target).await? else {
        return Ok(progressing(target, "kind not served yet"));
    };
    let obj = match cluster.api(&kind, target).get_opt(&target.name).await {
        Ok(Some(o)) => serde_json::to_value(o).unwrap_or(Value::Null),
        Ok(None) => return Ok(progressing(target, "waiting for the object to exist")),
        Err(e) => return Err(from_kube(&target.id, "get", e)),
    };
    let ns = target.namespace.as_deref().unwrap_or("");
    let mut lists = Vec::new();
    for child in children_of(target.group(), &target.kind) {
        let items = cluster
            .list_json_since(&target.id, ns, &child_resource(child), since)
            .await?;
        lists.push((child.3, items.as_ref().clone()));
    }
    Ok(judge(target, &obj, &lists))
}

/// The health of `obj` given the objects of its namespace that [`children_of`] names, as
/// `(plural, objects)`. Pure, so a snapshot and a watch cache judge alike.
pub(crate) fn judge(target: &Target, obj: &Value, lists: &[(&str, Vec<Value>)]) -> WatchEvent {
    // Sorted by name: a watch cache has no order, and rows must not reorder between events.
    let list = |plural: &str| -> Vec<Value> {
        let mut items = lists
            .iter()
            .find(|(p, _)| *p == plural)
            .map(|(_, items)| items.clone())
            .unwrap_or_default();
        items.sort_by_key(name_of);
        items
    };
    let group = target.group();
    let (mut health, mut detail) = simple_health(group, &target.kind, obj);
    let mut rows = vec![row(&target.kind, obj, health, detail.clone())];
    let uid = uid_of(obj).unwrap_or("").to_string();

    // Children whose failure fails the parent (pods stuck pulling or crashing).
    let mut pods: Vec<Value> = Vec::new();
    match (group, target.kind.as_str()) {
        ("apps", "Deployment") => {
            let rss: Vec<Value> = list("replicasets")
                .into_iter()
                .filter(|rs| owned_by(rs, &[&uid]))
                .collect();
            let rs_uids: Vec<&str> = rss.iter().filter_map(uid_of).collect();
            pods = list("pods")
                .into_iter()
                .filter(|p| owned_by(p, &rs_uids))
                .collect();
            for rs in &rss {
                // Old ReplicaSets scaled to zero are history, not state worth a row.
                if i(rs, "/spec/replicas").unwrap_or(0) > 0
                    || i(rs, "/status/replicas").unwrap_or(0) > 0
                {
                    let (h, d) = replicaset_health(rs);
                    rows.push(row("ReplicaSet", rs, h, d));
                }
            }
        }
        ("apps", "StatefulSet")
        | ("apps", "DaemonSet")
        | ("apps", "ReplicaSet")
        | ("batch", "Job") => {
            pods = list("pods")
                .into_iter()
                .filter(|p| owned_by(p, &[&uid]))
                .collect();
        }
        ("batch", "CronJob") => {
            let jobs: Vec<Value> = list("jobs")
                .into_iter()
                .filter(|j| owned_by(j, &[&uid]))
                .collect();
            for j in &jobs {
                let (h, d) = job_health(j);
                rows.push(row("Job", j, h, d));
            }
        }
        ("", "Service") => {
            for ep in list("endpoints") {
                if name_of(&ep) == target.name {
                    let addrs: usize =
                        ep.get("subsets")
                            .and_then(Value::as_array)
                            .map_or(0, |subs| {
                                subs.iter()
                                    .filter_map(|s| s.get("addresses")?.as_array().map(Vec::len))
                                    .sum()
                            });
                    rows.push(row(
                        "Endpoints",
                        &ep,
                        Health::Ready,
                        format!("{addrs} ready addresses"),
                    ));
                }
            }
        }
        _ => {}
    }
    pods.sort_by_key(name_of);
    // A scale-down (or a finished rollout) is done only when the surplus pods are gone, not
    // when the controller's counters say so: terminating pods still run.
    if health == Health::Ready
        && let Some(want) = match (group, target.kind.as_str()) {
            ("apps", "Deployment") | ("apps", "StatefulSet") | ("apps", "ReplicaSet") => {
                Some(i(obj, "/spec/replicas").unwrap_or(1))
            }
            _ => None,
        }
    {
        let running = pods
            .iter()
            .filter(|p| !matches!(s(p, "/status/phase"), Some("Succeeded" | "Failed")))
            .count() as i64;
        if running > want {
            health = Health::Progressing;
            detail = format!(
                "{} surplus pods terminating ({running} for {want} replicas)",
                running - want
            );
            rows[0].health = health;
            rows[0].detail = detail.clone();
        }
    }
    let is_job = target.kind == "Job";
    for pod in &pods {
        let (h, d) = pod_health(pod);
        rows.push(row("Pod", pod, h, d.clone()));
        // A Job retries failed pods itself: only its own Failed condition fails it. Pods stuck
        // pulling or crashing fail any controller.
        let fatal_waiting =
            h == Health::Failed && d.starts_with("container ") && !d.contains("exited with code");
        if health != Health::Failed && fatal_waiting
            || (h == Health::Failed && !is_job && health != Health::Failed)
        {
            health = Health::Failed;
            detail = format!("pod {}: {d}", name_of(pod));
        }
    }
    if health == Health::Failed {
        rows[0].health = Health::Failed;
        rows[0].detail = detail.clone();
    }
    WatchEvent {
        health,
        detail,
        objects: rows,
        object: Some(without_managed_fields(obj)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_rules() {
        let d = serde_json::json!({"metadata": {"generation": 2}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}});
        assert_eq!(deployment_health(&d).0, Health::Ready);
        let d = serde_json::json!({"metadata": {"generation": 3}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}});
        assert_eq!(deployment_health(&d).0, Health::Progressing);
        let d = serde_json::json!({"metadata": {"generation": 1}, "spec": {"replicas": 1},
            "status": {"observedGeneration": 1, "conditions": [{"type": "Progressing", "status": "False",
            "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"x\" has timed out progressing."}]}});
        let (h, msg) = deployment_health(&d);
        assert_eq!(h, Health::Failed);
        assert!(msg.starts_with("ProgressDeadlineExceeded"), "{msg}");
    }

    #[test]
    fn judging_a_watch_cache_follows_the_owner_chain_in_any_order() {
        use serde_json::json;
        let target = Target {
            id: "apps/v1:Deployment:ns:web".into(),
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("ns".into()),
            name: "web".into(),
        };
        let d = json!({"metadata": {"name": "web", "uid": "d1", "generation": 1,
                                    "managedFields": [{"manager": "kusion"}]},
            "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1}});
        let rs = json!({"metadata": {"name": "web-1", "uid": "r1", "ownerReferences": [{"uid": "d1"}]},
                        "spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 1}});
        let pod = |name: &str, waiting: &str| {
            json!({"metadata": {"name": name, "ownerReferences": [{"uid": "r1"}]},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "c", "ready": false,
                       "state": {"waiting": {"reason": waiting}}}]}})
        };
        let other = json!({"metadata": {"name": "stranger", "ownerReferences": [{"uid": "zz"}]},
                           "status": {"phase": "Failed"}});
        let lists = [
            ("replicasets", vec![rs]),
            (
                "pods",
                vec![
                    pod("web-1-b", "ContainerCreating"),
                    other,
                    pod("web-1-a", "ImagePullBackOff"),
                ],
            ),
        ];
        let event = judge(&target, &d, &lists);
        assert_eq!(event.health, Health::Failed, "{event:?}");
        assert!(
            event.detail.starts_with("pod web-1-a: "),
            "{}",
            event.detail
        );
        let names: Vec<&str> = event.objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["web", "web-1", "web-1-a", "web-1-b"]);
        // The live object rides along for host-judged rules, without the bookkeeping.
        let live = event.object.expect("live object");
        assert_eq!(live.pointer("/status/availableReplicas"), Some(&json!(1)));
        assert!(live.pointer("/metadata/managedFields").is_none());
        assert_eq!(children_of("apps", "Deployment").len(), 2);
        assert!(children_of("", "ConfigMap").is_empty());
    }

    #[test]
    fn pod_and_job_rules() {
        let p = serde_json::json!({"spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending",
            "containerStatuses": [{"name": "c", "ready": false, "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off"}}}]}});
        let (h, d) = pod_health(&p);
        assert_eq!(h, Health::Failed);
        assert!(d.contains("ImagePullBackOff"));
        let j = serde_json::json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit"}]}});
        assert_eq!(
            job_health(&j),
            (
                Health::Failed,
                "BackoffLimitExceeded: Job has reached the specified backoff limit".into()
            )
        );
        assert_eq!(job_health(&serde_json::json!({})).0, Health::Progressing);
        // Garbage never panics.
        for v in [
            Value::Null,
            serde_json::json!([1, 2]),
            serde_json::json!({"status": "x", "metadata": 3}),
        ] {
            let _ = pod_health(&v);
            let _ = job_health(&v);
            let _ = deployment_health(&v);
            let _ = simple_health("apps", "StatefulSet", &v);
            let _ = simple_health("apps", "DaemonSet", &v);
        }
    }
}
