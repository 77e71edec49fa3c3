//! Day-2 operations on live objects: restart (delete a controlled pod, or a rollout restart of a
//! workload), scale, and rollback of a Deployment to an earlier ReplicaSet revision.
//!
//! Each answers with a [`RecoveryHint`]: the workload to watch and what must be true of the watch
//! before the object counts as recovered. A deleted pod's workload may still report the old,
//! healthy-looking status for a moment, so the hint names the deleted pod (it must be gone) and
//! the replicas that must be ready again.

use std::sync::Arc;

use kube::api::{DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kusion_sdk::runtime::{
    ObjectRef, OperateRequest, OperateResponse, OperationInfo, RecoveryHint,
};
use kusion_sdk::{PluginError, PluginResult, Resource};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::error::{from_kube, is_not_found};
use crate::id::{Target, target_of};

/// Annotation set on a workload's pod template by a rollout restart (like `kubectl rollout
/// restart`, under kusion's own key).
pub const RESTARTED_AT: &str = "kusion.io/restartedAt";
const REVISION: &str = "deployment.kubernetes.io/revision";

pub fn operations() -> Vec<OperationInfo> {
    let info = |name: &str, kinds: &[&str], description: &str| OperationInfo {
        name: name.into(),
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        description: description.into(),
    };
    vec![
        info(
            "restart",
            &["Pod", "Deployment", "StatefulSet", "DaemonSet"],
            "delete a controlled pod so its controller recreates it, or rollout-restart a workload",
        ),
        info(
            "scale",
            &["Deployment", "StatefulSet", "ReplicaSet"],
            "set spec.replicas (params: replicas)",
        ),
        info(
            "rollback",
            &["Deployment"],
            "roll a Deployment back to its previous ReplicaSet revision (params: toRevision)",
        ),
    ]
}

fn s<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    v.pointer(path).and_then(Value::as_str)
}

/// A resource naming `id` with just the identifying attributes, living where `like` lives.
fn resource_like(like: &Resource, id: &str) -> PluginResult<Resource> {
    let (api_version, kind, namespace, name) = crate::id::parse_id(id)?;
    let mut metadata = json!({"name": name});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    let attrs = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata});
    Ok(Resource {
        id: id.to_string(),
        resource_type: like.resource_type.clone(),
        attributes: attrs.as_object().cloned().unwrap_or_default(),
        depends_on: Vec::new(),
        extensions: like.extensions.clone(),
    })
}

async fn get(cluster: &Cluster, target: &Target) -> PluginResult<Option<Value>> {
    let Some(kind) = cluster.checked_kind(target).await? else {
        return Ok(None);
    };
    match cluster.api(&kind, target).get_opt(&target.name).await {
        Ok(o) => Ok(o.map(|o| serde_json::to_value(o).unwrap_or(Value::Null))),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(from_kube(&target.id, "get", e)),
    }
}

async fn must_get(cluster: &Cluster, target: &Target) -> PluginResult<Value> {
    get(cluster, target).await?.ok_or_else(|| {
        PluginError::invalid(format!(
            "{}: {} does not exist in {}",
            target.id,
            target.display_name(),
            cluster.key.describe()
        ))
    })
}

fn target(id: &str) -> PluginResult<Target> {
    let (api_version, kind, namespace, name) = crate::id::parse_id(id)?;
    Ok(Target {
        id: id.to_string(),
        api_version,
        kind,
        namespace,
        name,
    })
}

/// The controller named in an object's owner references, as a resource ID.
fn controller_id(obj: &Value, ns: &str) -> Option<String> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| {
            Some(format!(
                "{}:{}:{ns}:{}",
                r.get("apiVersion")?.as_str()?,
                r.get("kind")?.as_str()?,
                r.get("name")?.as_str()?
            ))
        })
}

/// The workload that recreates a pod: its controller, or the Deployment above its ReplicaSet.
async fn pod_owner(cluster: &Cluster, pod_target: &Target, pod: &Value) -> PluginResult<String> {
    let ns = pod_target.namespace.as_deref().unwrap_or("");
    let Some(owner) = controller_id(pod, ns) else {
        return Err(PluginError::invalid(format!(
            "{}: the pod has no controller, so deleting it would not bring it back",
            pod_target.id
        )));
    };
    let t = target(&owner)?;
    if t.kind != "ReplicaSet" {
        return Ok(owner);
    }
    Ok(match get(cluster, &t).await? {
        Some(rs) => controller_id(&rs, ns)
            .filter(|d| d.contains(":Deployment:"))
            .unwrap_or(owner),
        None => owner,
    })
}

/// How many pods a workload wants.
fn desired(obj: &Value) -> u32 {
    let n = if s(obj, "/kind") == Some("DaemonSet") {
        obj.pointer("/status/desiredNumberScheduled")
    } else {
        obj.pointer("/spec/replicas")
    };
    n.and_then(Value::as_u64).unwrap_or(1) as u32
}

fn hint(watch: Resource, gone: Vec<ObjectRef>, min_ready: u32) -> RecoveryHint {
    RecoveryHint {
        watch,
        gone,
        min_ready: Some(min_ready),
        ready_kind: Some("Pod".into()),
    }
}

pub async fn operate(cluster: Arc<Cluster>, req: OperateRequest) -> PluginResult<OperateResponse> {
    let t = target_of(&req.resource)?;
    let known = operations();
    let Some(info) = known.iter().find(|o| o.name == req.operation) else {
        return Err(PluginError::unsupported(format!(
            "{}: the kubernetes runtime has no operation `{}` (it has restart, scale, rollback)",
            t.id, req.operation
        )));
    };
    if !info.kinds.contains(&t.kind) {
        return Err(PluginError::invalid(format!(
            "{}: `{}` applies to {}, not to {}",
            t.id,
            req.operation,
            info.kinds.join(", "),
            t.kind
        )));
    }
    match (req.operation.as_str(), t.kind.as_str()) {
        ("restart", "Pod") => restart_pod(&cluster, &req, &t).await,
        ("restart", _) => rollout_restart(&cluster, &req, &t).await,
        ("scale", _) => scale(&cluster, &req, &t).await,
        ("rollback", _) => rollback(&cluster, &req, &t).await,
        _ => Err(PluginError::internal("unreachable operation")),
    }
}

async fn restart_pod(
    cluster: &Cluster,
    req: &OperateRequest,
    t: &Target,
) -> PluginResult<OperateResponse> {
    let pod = must_get(cluster, t).await?;
    let owner_id = pod_owner(cluster, t, &pod).await?;
    let owner_target = target(&owner_id)?;
    let owner = must_get(cluster, &owner_target).await?;
    let pod_name = format!("{}/{}", t.namespace.as_deref().unwrap_or(""), t.name);
    let summary = format!(
        "delete pod {pod_name} (recreated by {})",
        owner_target.display_name()
    );
    let watch = resource_like(&req.resource, &owner_id)?;
    let response = |summary: String| OperateResponse {
        summary,
        recovery: Some(hint(
            watch.clone(),
            vec![ObjectRef {
                kind: "Pod".into(),
                name: t.name.clone(),
            }],
            desired(&owner),
        )),
        owner: Some(owner_id.clone()),
    };
    if req.dry_run {
        return Ok(response(summary));
    }
    let kind = cluster
        .checked_kind(t)
        .await?
        .ok_or_else(|| PluginError::internal("pods are always served"))?;
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        grace_period_seconds: req
            .params
            .get("gracePeriodSeconds")
            .and_then(Value::as_u64)
            .map(|g| g as u32),
        // Only the pod this plan saw: a pod recreated under the same name is not deleted again.
        preconditions: s(&pod, "/metadata/uid").map(|uid| kube::api::Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match cluster.api(&kind, t).delete(&t.name, &params).await {
        Ok(_) => Ok(response(summary.replacen("delete", "deleted", 1))),
        Err(e) if is_not_found(&e) => Ok(response(format!(
            "pod {pod_name} was already gone (recreated by {})",
            owner_target.display_name()
        ))),
        Err(e) => Err(from_kube(&t.id, "delete pod", e)),
    }
}

async fn patch_merge(cluster: &Cluster, t: &Target, body: &Value) -> PluginResult<Value> {
    let kind = cluster
        .checked_kind(t)
        .await?
        .ok_or_else(|| PluginError::invalid(format!("{}: kind not served", t.id)))?;
    let obj = cluster
        .api(&kind, t)
        .patch(&t.name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .map_err(|e| from_kube(&t.id, "patch", e))?;
    Ok(serde_json::to_value(obj).unwrap_or(Value::Null))
}

async fn rollout_restart(
    cluster: &Cluster,
    req: &OperateRequest,
    t: &Target,
) -> PluginResult<OperateResponse> {
    let obj = must_get(cluster, t).await?;
    let watch = resource_like(&req.resource, &t.id)?;
    let summary = format!("rollout restart of {}", t.display_name());
    let min = desired(&obj);
    if !req.dry_run {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let body =
            json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now}}}}});
        patch_merge(cluster, t, &body).await?;
    }
    Ok(OperateResponse {
        summary,
        recovery: Some(hint(watch, Vec::new(), min)),
        owner: Some(t.id.clone()),
    })
}

async fn scale(
    cluster: &Cluster,
    req: &OperateRequest,
    t: &Target,
) -> PluginResult<OperateResponse> {
    let replicas = req
        .params
        .get("replicas")
        .and_then(Value::as_u64)
        .filter(|r| *r <= i32::MAX as u64)
        .ok_or_else(|| {
            PluginError::invalid(format!(
                "{}: scale needs params.replicas, a whole number >= 0",
                t.id
            ))
        })?;
    let obj = must_get(cluster, t).await?;
    let from = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    let summary = format!("scale {} from {from} to {replicas}", t.display_name());
    if !req.dry_run {
        patch_merge(cluster, t, &json!({"spec": {"replicas": replicas}})).await?;
    }
    Ok(OperateResponse {
        summary,
        recovery: Some(hint(
            resource_like(&req.resource, &t.id)?,
            Vec::new(),
            replicas as u32,
        )),
        owner: Some(t.id.clone()),
    })
}

async fn rollback(
    cluster: &Cluster,
    req: &OperateRequest,
    t: &Target,
) -> PluginResult<OperateResponse> {
    let deploy = must_get(cluster, t).await?;
    let ns = t.namespace.as_deref().unwrap_or("");
    let uid = s(&deploy, "/metadata/uid").unwrap_or("").to_string();
    let current: u64 = s(
        &deploy,
        "/metadata/annotations/deployment.kubernetes.io~1revision",
    )
    .and_then(|r| r.parse().ok())
    .unwrap_or(0);
    let rs_kind = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("apps", "v1", "ReplicaSet"),
        "replicasets",
    );
    let mut revisions: Vec<(u64, Value)> = cluster
        .list_json(&t.id, ns, &rs_kind)
        .await?
        .iter()
        .filter(|rs| {
            rs.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|o| {
                    o.iter()
                        .any(|r| r.get("uid").and_then(Value::as_str) == Some(&uid))
                })
        })
        .filter_map(|rs| {
            let rev = rs
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(REVISION))
                .and_then(Value::as_str)?
                .parse()
                .ok()?;
            Some((rev, rs.clone()))
        })
        .collect();
    revisions.sort_by_key(|(r, _)| *r);
    let wanted = req.params.get("toRevision").and_then(Value::as_u64);
    let chosen = match wanted {
        Some(0) | None => revisions.iter().rev().find(|(r, _)| *r < current),
        Some(n) => revisions.iter().find(|(r, _)| *r == n),
    };
    let Some((revision, rs)) = chosen else {
        let have: Vec<String> = revisions.iter().map(|(r, _)| r.to_string()).collect();
        return Err(PluginError::invalid(match wanted {
            Some(n) if n > 0 => format!(
                "{}: no revision {n} to roll back to (revisions: {})",
                t.id,
                have.join(", ")
            ),
            _ => format!(
                "{}: no revision before the current one ({current}) to roll back to",
                t.id
            ),
        }));
    };
    let summary = format!(
        "roll {} back from revision {current} to {revision}",
        t.display_name()
    );
    if !req.dry_run {
        let mut template = rs.pointer("/spec/template").cloned().unwrap_or(Value::Null);
        if let Some(labels) = template
            .pointer_mut("/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            labels.remove("pod-template-hash");
        }
        // The whole template is replaced (a merge patch would keep keys only the newer template
        // has), with the read version as a precondition so a concurrent change is not lost.
        let mut updated = deploy.clone();
        updated["spec"]["template"] = template;
        let kind = cluster
            .checked_kind(t)
            .await?
            .ok_or_else(|| PluginError::invalid(format!("{}: kind not served", t.id)))?;
        let obj: kube::api::DynamicObject = serde_json::from_value(updated)
            .map_err(|e| PluginError::internal(format!("{}: {e}", t.id)))?;
        cluster
            .api(&kind, t)
            .replace(&t.name, &PostParams::default(), &obj)
            .await
            .map_err(|e| from_kube(&t.id, "rollback", e))?;
    }
    Ok(OperateResponse {
        summary,
        recovery: Some(hint(
            resource_like(&req.resource, &t.id)?,
            Vec::new(),
            desired(&deploy),
        )),
        owner: Some(t.id.clone()),
    })
}
