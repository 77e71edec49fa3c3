//! The Kubernetes runtime of kusion-rs: resources of `type: Kubernetes` applied with server-side
//! apply (field manager `kusion`), read back projected onto the fields kusion manages, deleted
//! with a propagation policy, and watched to readiness along the owner chain.
//!
//! The [`kusion_sdk::runtime::Runtime`] verbs are synchronous; this runtime owns a tokio runtime
//! and runs every call as a task on it, so it can be called from any thread, including from
//! inside another tokio runtime.

mod cluster;
mod delete;
mod error;
mod health;
mod id;
mod operate;
mod project;
mod recent;
mod settings;
mod watch;

use std::future::Future;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams};
use kusion_sdk::runtime::{
    ApplyRequest, ApplyResponse, Capabilities, DeleteRequest, EXT_READINESS, Health, ImportRequest,
    OperateRequest, OperateResponse, OperationInfo, ReadRequest, ReadResponse, Runtime,
    RuntimeInfo, Watch, WatchEvent, WatchPoll, WatchRequest,
};
use kusion_sdk::{ABI_VERSION, ErrorKind, PluginError, PluginResult, Resource};
use serde_json::{Map, Value};

use delete::{delete, delete_object, propagation_of};
pub use settings::{Propagation, Settings};
use watch::{KubeWatch, follow};

pub use cluster::{ClusterKey, EXT_CONTEXT, EXT_KUBECONFIG};
pub use health::{evaluate_json, pod_health};
pub use id::{Target, parse_id, target_of};
pub use operate::RESTARTED_AT;
pub use project::project_object;

/// The resource `type` this runtime serves.
pub const RESOURCE_TYPE: &str = "Kubernetes";
/// Extensions holding a custom readiness rule (a KCL snippet), as upstream's `health.kcl`.
pub const EXT_HEALTH_POLICY: &[&str] = &["kusionstack.io/health-policy", "healthPolicy"];
/// Extension overriding the delete propagation policy of one resource.
pub const EXT_PROPAGATION: &str = "kusionstack.io/delete-propagation";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a watch trusts its caches without any change before judging from fresh reads.
const RESYNC: Duration = Duration::from_secs(5);

struct Inner {
    settings: RwLock<Settings>,
    clusters: cluster::Clusters,
}

impl Inner {
    fn settings(&self) -> Settings {
        self.settings.read().map(|s| s.clone()).unwrap_or_default()
    }

    async fn cluster(&self, resource: &Resource) -> PluginResult<Arc<cluster::Cluster>> {
        let s = self.settings();
        let default = ClusterKey {
            kubeconfig: s.kubeconfig,
            context: s.context,
        };
        let key = cluster::cluster_key(resource, &default)?;
        self.clusters.get(key).await.map_err(|e| PluginError {
            message: format!("{}: {}", resource.id, e.message),
            ..e
        })
    }
}

/// The Kubernetes runtime. Exported to the plugin host with
/// `kusion_sdk::export_runtime!(KubernetesRuntime::new)` once the SDK's export macro is merged.
pub struct KubernetesRuntime {
    inner: Arc<Inner>,
    /// Started on first use, so construction cannot fail.
    rt: OnceLock<tokio::runtime::Runtime>,
}

impl Drop for KubernetesRuntime {
    fn drop(&mut self) {
        // Dropping a tokio runtime blocks, which panics inside an async context (a host may drop
        // the plugin from one); shutting down in the background works anywhere.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl Default for KubernetesRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl KubernetesRuntime {
    pub fn new() -> KubernetesRuntime {
        KubernetesRuntime {
            inner: Arc::new(Inner {
                settings: RwLock::new(Settings::default()),
                clusters: Default::default(),
            }),
            rt: OnceLock::new(),
        }
    }

    fn executor(&self) -> PluginResult<&tokio::runtime::Runtime> {
        if let Some(rt) = self.rt.get() {
            return Ok(rt);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kusion-k8s")
            .enable_all()
            .build()
            .map_err(|e| {
                PluginError::internal(format!(
                    "cannot start the kubernetes runtime's executor: {e}"
                ))
            })?;
        // A concurrent first call may have won the race; its executor is used and ours dropped.
        if let Err(lost) = self.rt.set(rt) {
            lost.shutdown_background();
        }
        self.rt
            .get()
            .ok_or_else(|| PluginError::internal("executor vanished"))
    }

    /// Runs `fut` on the runtime's executor and waits for it, with a deadline.
    fn run<T: Send + 'static>(
        &self,
        id: &str,
        timeout: Option<Duration>,
        fut: impl Future<Output = PluginResult<T>> + Send + 'static,
    ) -> PluginResult<T> {
        let limit = timeout.unwrap_or(DEFAULT_TIMEOUT);
        let id = id.to_string();
        let task = self.executor()?.spawn(async move {
            match tokio::time::timeout(limit, fut).await {
                Ok(r) => r,
                Err(_) => Err(PluginError::new(
                    ErrorKind::Timeout,
                    format!("{id}: no answer within {limit:?}"),
                )),
            }
        });
        // A plain executor waits for the task, so callers may themselves be inside tokio.
        futures::executor::block_on(task).unwrap_or_else(|e| {
            Err(PluginError::internal(format!(
                "kubernetes runtime task failed: {e}"
            )))
        })
    }
}

fn attrs_value(r: Option<&Resource>) -> Option<Value> {
    r.map(|r| Value::Object(r.attributes.clone()))
}

/// The object sent for `planned`: what kusion fills in for the server added.
fn body_of(target: &Target, planned: &Value) -> Value {
    let mut body = planned.clone();
    if matches!(target.group(), "" | "apps" | "batch") {
        fill_port_protocols(&mut body);
    }
    body
}

/// `live` projected onto the planned and prior objects and the fields `manager` owns in `owner`
/// (the object as it was before the change being answered for; fields kusion fills in itself
/// left out), with list semantics learned from the `managedFields` of every object in `seen`.
fn project_live(
    live: &Value,
    planned: Option<&Value>,
    body: Option<&Value>,
    prior: Option<&Value>,
    owner: Option<&Value>,
    manager: &str,
    seen: &[&Value],
) -> Map<String, Value> {
    let hints = project::Hints::from_objects(seen.iter().copied());
    let owned = owner.and_then(|o| project::owned_fields(o, manager));
    let filtered = match (owned, body) {
        (Some(o), Some(b)) if Some(b) != planned => Some(project::without_filled(o, b, planned)),
        _ => None,
    };
    let guide = project::Guide {
        planned,
        prior,
        owned: filtered.as_ref().or(owned),
    };
    project::project_guided(live, guide, &hints)
}

fn sensitive_paths(target: &Target) -> Vec<String> {
    if target.api_version == "v1" && target.kind == "Secret" {
        vec!["data".into(), "stringData".into()]
    } else {
        Vec::new()
    }
}

fn with_attributes(resource: &Resource, attributes: Map<String, Value>) -> Resource {
    Resource {
        attributes,
        ..resource.clone()
    }
}

/// The server refused because the object's namespace does not exist (yet).
fn namespace_missing(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404
        && s.details.as_ref().is_some_and(|d| d.kind == "namespaces"))
}

/// Kubernetes 1.20's apply schema keys Service ports by (port, protocol) without a default for
/// `protocol`, so an apply omitting it fails with "associative list with keys has an element that
/// omits key field". Filling in the documented default (`TCP`) is what the server would store.
/// The projection drops it again when the plan did not mention it.
fn fill_port_protocols(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "ports"
                    && let Value::Array(items) = v
                {
                    for item in items.iter_mut() {
                        if let Value::Object(port) = item
                            && (port.contains_key("port") || port.contains_key("containerPort"))
                            && !port.contains_key("protocol")
                        {
                            port.insert("protocol".into(), Value::String("TCP".into()));
                        }
                    }
                } else {
                    fill_port_protocols(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(fill_port_protocols),
        _ => {}
    }
}

/// Paths of string values that are unresolved `$kusion_path` references.
fn placeholder_paths(value: &Value) -> Vec<String> {
    fn walk(v: &Value, at: &kusion_sdk::FieldPath, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.contains("$kusion_path") => out.push(at.to_string()),
            Value::Object(m) => m.iter().for_each(|(k, v)| walk(v, &at.child_key(k), out)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, v)| walk(v, &at.child_index(i), out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &kusion_sdk::FieldPath::root(), &mut out);
    out
}

/// Fields a 422 answer names as immutable, in kusion's path syntax (the server's field paths
/// already use `a.b[0].c`). Besides "field is immutable", kinds that allow updates to a few
/// fields only say so for a whole object part ("updates to statefulset spec for fields other
/// than 'replicas', 'template', and 'updateStrategy' are forbidden"): then the fields of that
/// part that differ between `before` (the live object) and `body` and are not among the
/// allowed ones are named, or the part itself when that cannot be told.
fn immutable_fields(err: &kube::Error, before: Option<&Value>, body: &Value) -> Vec<String> {
    let kube::Error::Api(status) = err else {
        return Vec::new();
    };
    if status.code != 422 {
        return Vec::new();
    }
    let Some(details) = status.details.as_ref() else {
        return Vec::new();
    };
    let mut fields: Vec<String> = Vec::new();
    for cause in &details.causes {
        if cause.field.is_empty() {
            continue;
        }
        if cause.message.contains("field is immutable") {
            fields.push(cause.field.clone());
        } else if cause.message.contains("updates to") && cause.message.contains("are forbidden") {
            let allowed: Vec<&str> = cause.message.split('\'').skip(1).step_by(2).collect();
            let part = |v: Option<&Value>| {
                cause
                    .field
                    .split('.')
                    .try_fold(v?, |v, k| v.get(k))
                    .and_then(Value::as_object)
                    .cloned()
            };
            let changed: Vec<String> = match (part(before), part(Some(body))) {
                (Some(was), Some(now)) => now
                    .iter()
                    .filter(|(k, v)| {
                        !allowed.contains(&k.as_str())
                            && was.get(*k).is_none_or(|w| !project::same_value(w, v))
                    })
                    .map(|(k, _)| format!("{}.{k}", cause.field))
                    .collect(),
                _ => Vec::new(),
            };
            if changed.is_empty() {
                fields.push(cause.field.clone());
            } else {
                fields.extend(changed);
            }
        }
    }
    fields.sort();
    fields.dedup();
    fields
}

/// A dry-run's answer from what a read just saw, when that read already says it (`None`:
/// the server must be asked).
///
/// - Absent: a creation. Projected onto the fields kusion sends, what the server would store is
///   the plan itself (defaults and server metadata are projected away), so asking could only
///   add a validation error, which the real apply reports anyway.
/// - Live: the apply changes nothing when it keeps every field kusion's manager owns (so it
///   removes nothing: server-side apply removes exactly the owned fields a new configuration
///   drops) and the object already holds every value it sends. Then the live object, projected
///   as the read projected it, is the answer. Anything else needs the server's dry-run.
fn answer_from_read(
    live: Option<&Value>,
    planned: &Map<String, Value>,
    body: &Value,
    prior: Option<&Value>,
    manager: &str,
) -> Option<Map<String, Value>> {
    let Some(live) = live else {
        return Some(planned.clone());
    };
    if let Some(owned) = project::owned_fields(live, manager)
        && !project::keeps_owned(body, owned)
    {
        return None;
    }
    let planned_value = Value::Object(planned.clone());
    let p = Some(&planned_value);
    let now = project_live(live, p, Some(body), prior, Some(live), manager, &[live]);
    let sent = project_live(body, p, Some(body), prior, Some(live), manager, &[live]);
    (now == sent).then_some(now)
}

async fn wait_for_kind(
    cluster: &cluster::Cluster,
    target: &Target,
    wait: Duration,
) -> PluginResult<cluster::Kind> {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(k) = cluster.checked_kind(target).await? {
            return Ok(k);
        }
        if start.elapsed() >= wait {
            return Err(PluginError::invalid(format!(
                "{}: the server at {} does not serve {} {} (is its CRD installed?)",
                target.id,
                cluster.key.describe(),
                target.api_version,
                target.kind
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn apply(inner: Arc<Inner>, req: ApplyRequest) -> PluginResult<ApplyResponse> {
    let planned = &req.planned;
    let target = target_of(planned)?;
    let settings = inner.settings();
    let cluster = inner.cluster(planned).await?;
    let would_be = |attrs: Map<String, Value>| ApplyResponse {
        resource: with_attributes(planned, attrs),
        private: None,
        sensitive_paths: sensitive_paths(&target),
        unknown_paths: Vec::new(),
        requires_replace: Vec::new(),
    };
    let kind = match cluster.checked_kind(&target).await? {
        Some(k) => k,
        // Its CRD is part of the same apply and not created yet: nothing to ask the server.
        None if req.dry_run => return Ok(would_be(planned.attributes.clone())),
        None => {
            wait_for_kind(
                &cluster,
                &target,
                Duration::from_secs(settings.kind_wait_seconds),
            )
            .await?
        }
    };
    let api = cluster.api(&kind, &target);
    let planned_value = Value::Object(planned.attributes.clone());
    let prior_value = attrs_value(req.prior.as_ref());
    let body = body_of(&target, &planned_value);
    let manager = settings.field_manager.as_str();
    // The object as it is before this change: what kusion's manager owns there is what the
    // apply may remove, so both sides of a preview are projected onto it. The plan's read a
    // moment ago saw it; other callers read it now.
    let before: Option<Value> = if req.dry_run {
        match cluster.recent.take(&target.id) {
            Some(seen) => seen,
            None => match api.get_opt(&target.name).await {
                Ok(obj) => obj.and_then(|o| serde_json::to_value(o).ok()),
                Err(e) => return Err(error::from_kube(&target.id, "read", e)),
            },
        }
    } else {
        cluster.recent.forget(&target.id);
        None
    };
    if req.dry_run
        && settings.answer_from_read
        && let Some(attrs) = answer_from_read(
            before.as_ref(),
            &planned.attributes,
            &body,
            prior_value.as_ref(),
            manager,
        )
    {
        let mut response = would_be(attrs);
        if before.is_none() {
            response.unknown_paths = placeholder_paths(&planned_value);
        }
        return Ok(response);
    }
    let mut params = PatchParams::apply(manager);
    params.force = settings.force;
    params.dry_run = req.dry_run;
    let answer = |obj: kube::api::DynamicObject| -> PluginResult<ApplyResponse> {
        let after = serde_json::to_value(obj)
            .map_err(|e| PluginError::internal(format!("{}: {e}", target.id)))?;
        let attrs = if req.dry_run {
            let mut seen = vec![&after];
            seen.extend(before.as_ref());
            project_live(
                &after,
                Some(&planned_value),
                Some(&body),
                prior_value.as_ref(),
                before.as_ref(),
                manager,
                &seen,
            )
        } else {
            // What state records: kusion's fields as they now are.
            project_live(
                &after,
                Some(&planned_value),
                Some(&body),
                None,
                Some(&after),
                manager,
                &[&after],
            )
        };
        Ok(would_be(attrs))
    };
    match api.patch(&target.name, &params, &Patch::Apply(&body)).await {
        Ok(obj) => answer(obj),
        // Its namespace is created by the same apply: a dry-run cannot say more than the plan.
        Err(e) if req.dry_run && namespace_missing(&e) => Ok(would_be(planned.attributes.clone())),
        // Values only known after other resources apply are still `$kusion_path` placeholders
        // in a preview; when the server rejects those, the plan (with them marked unknown) is
        // the best answer.
        Err(kube::Error::Api(status))
            if req.dry_run
                && error::rejects_input(&status)
                && !placeholder_paths(&body).is_empty() =>
        {
            let mut response = would_be(planned.attributes.clone());
            response.unknown_paths = placeholder_paths(&body);
            Ok(response)
        }
        // The change touches immutable fields: preview it as a replacement (delete + create):
        // the new object is the plan itself, as for a creation.
        Err(e) if req.dry_run && !immutable_fields(&e, before.as_ref(), &body).is_empty() => {
            let mut response = would_be(planned.attributes.clone());
            response.requires_replace = immutable_fields(&e, before.as_ref(), &body);
            Ok(response)
        }
        // A real apply of such a change replaces the object: the name stays, so the old object
        // must be gone before the new one can be created.
        Err(e) if !req.dry_run && !immutable_fields(&e, None, &body).is_empty() => {
            let fields = immutable_fields(&e, None, &body).join(", ");
            tracing::info!(resource = %target.id, "replacing: {fields} cannot change in place");
            let why = |mut err: PluginError| {
                err.message = format!(
                    "{} (while replacing it because {fields} cannot change in place)",
                    err.message
                );
                err
            };
            let propagation = propagation_of(&req.planned, &settings)?;
            let limit = req.timeout.unwrap_or(DEFAULT_TIMEOUT);
            delete_object(&api, &target, propagation, true, limit)
                .await
                .map_err(why)?;
            match api.patch(&target.name, &params, &Patch::Apply(&body)).await {
                Ok(obj) => answer(obj),
                Err(e) => Err(why(error::from_kube(&target.id, "server-side apply", e))),
            }
        }
        Err(e) => {
            let conflict = matches!(&e, kube::Error::Api(s) if s.code == 409);
            let mut err = error::from_kube(&target.id, "server-side apply", e);
            if conflict {
                err.message.push_str(&format!(
                    "; another field manager owns these fields: apply with --force-conflicts \
                     (runtime setting `force: true`) to make {manager:?} their owner"
                ));
            }
            Err(err)
        }
    }
}

async fn read_live(
    inner: &Inner,
    base: &Resource,
    planned: Option<&Resource>,
    prior: Option<&Resource>,
) -> PluginResult<ReadResponse> {
    let target = target_of(base)?;
    let cluster = inner.cluster(base).await?;
    let Some(kind) = cluster.checked_kind(&target).await? else {
        return Ok(ReadResponse::default());
    };
    let manager = inner.settings().field_manager;
    match cluster.api(&kind, &target).get_opt(&target.name).await {
        Ok(Some(obj)) => {
            let live = serde_json::to_value(obj)
                .map_err(|e| PluginError::internal(format!("{}: {e}", target.id)))?;
            let planned = attrs_value(planned);
            let body = planned.as_ref().map(|p| body_of(&target, p));
            let attrs = project_live(
                &live,
                planned.as_ref(),
                body.as_ref(),
                attrs_value(prior).as_ref(),
                Some(&live),
                &manager,
                &[&live],
            );
            cluster.recent.remember(&target.id, Some(live));
            Ok(ReadResponse {
                resource: Some(with_attributes(base, attrs)),
                private: None,
                sensitive_paths: sensitive_paths(&target),
            })
        }
        Ok(None) => {
            cluster.recent.remember(&target.id, None);
            Ok(ReadResponse::default())
        }
        Err(e) => Err(error::from_kube(&target.id, "read", e)),
    }
}

impl Runtime for KubernetesRuntime {
    fn describe(&self) -> RuntimeInfo {
        RuntimeInfo {
            name: "kubernetes".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: ABI_VERSION,
            resource_types: vec![RESOURCE_TYPE.into()],
            capabilities: Capabilities {
                dry_run: true,
                watch: true,
                import: true,
                sensitive_fields: true,
            },
        }
    }

    fn configure(&self, config: &Value) -> PluginResult<()> {
        let settings: Settings = match config {
            Value::Null => Settings::default(),
            v => serde_json::from_value(v.clone()).map_err(|e| {
                PluginError::invalid(format!("kubernetes runtime configuration: {e}"))
            })?,
        };
        let mut current = self
            .inner
            .settings
            .write()
            .map_err(|_| PluginError::internal("settings lock poisoned"))?;
        let clusters_changed =
            current.kubeconfig != settings.kubeconfig || current.context != settings.context;
        *current = settings;
        drop(current);
        if clusters_changed {
            let inner = self.inner.clone();
            self.run("configure", None, async move {
                inner.clusters.clear().await;
                Ok(())
            })?;
        }
        Ok(())
    }

    fn apply(&self, request: &ApplyRequest) -> PluginResult<ApplyResponse> {
        let inner = self.inner.clone();
        let req = request.clone();
        self.run(&request.planned.id, request.timeout, apply(inner, req))
    }

    fn read(&self, request: &ReadRequest) -> PluginResult<ReadResponse> {
        let Some(base) = request.planned.clone().or_else(|| request.prior.clone()) else {
            return Err(PluginError::invalid(
                "read needs a planned or a prior resource",
            ));
        };
        let (planned, prior) = (request.planned.clone(), request.prior.clone());
        let inner = self.inner.clone();
        self.run(&base.id.clone(), request.timeout, async move {
            read_live(&inner, &base, planned.as_ref(), prior.as_ref()).await
        })
    }

    fn import(&self, request: &ImportRequest) -> PluginResult<ReadResponse> {
        let planned = request.planned.clone();
        let target = target_of(&planned)?;
        if let Some(import_id) = request.import_id.as_deref() {
            // The adopted object is recorded under the planned ID, so both must name it.
            let names_same = match parse_id(import_id) {
                Ok((v, k, ns, n)) => {
                    v == target.api_version
                        && k == target.kind
                        && ns == target.namespace
                        && n == target.name
                }
                Err(_) => match import_id.split_once('/') {
                    Some((ns, n)) => Some(ns) == target.namespace.as_deref() && n == target.name,
                    None => import_id == target.name,
                },
            };
            if !names_same {
                return Err(PluginError::invalid(format!(
                    "{}: import id {import_id:?} names another object than the resource",
                    target.id
                )));
            }
        }
        let inner = self.inner.clone();
        self.run(&target.id, request.timeout, async move {
            read_live(&inner, &planned, Some(&planned), None).await
        })
    }

    fn delete(&self, request: &DeleteRequest) -> PluginResult<()> {
        let inner = self.inner.clone();
        let req = request.clone();
        // The delete itself bounds its wait with the request timeout; allow a little more here.
        let limit = request.timeout.map(|t| t + Duration::from_secs(30));
        self.run(&request.resource.id, limit, delete(inner, req))
    }

    fn operations(&self) -> Vec<OperationInfo> {
        operate::operations()
    }

    /// A resource that names its own cluster (a context, or its own kubeconfig file) lives in
    /// that target, so one ID can be applied to several clusters of a stack. Resources on the
    /// stack's configured cluster have no target: their state keys stay the bare IDs, and a
    /// changed stack kubeconfig never re-keys (and so never plans deleting) them.
    fn target(&self, resource: &Resource) -> PluginResult<Option<String>> {
        let own = cluster::cluster_key(
            resource,
            &ClusterKey {
                kubeconfig: None,
                context: None,
            },
        )?;
        Ok(own
            .context
            .or_else(|| own.kubeconfig.map(|p| p.display().to_string())))
    }

    fn operate(&self, request: &OperateRequest) -> PluginResult<OperateResponse> {
        let inner = self.inner.clone();
        let req = request.clone();
        self.run(&request.resource.id, request.timeout, async move {
            let cluster = inner.cluster(&req.resource).await?;
            if !req.dry_run {
                cluster.recent.forget(&req.resource.id);
            }
            operate::operate(cluster, req).await
        })
    }

    fn watch(&self, request: &WatchRequest) -> PluginResult<Box<dyn Watch>> {
        let resource = request.resource.clone();
        let target = target_of(&resource)?;
        if let Some(key) = EXT_HEALTH_POLICY
            .iter()
            .find(|k| resource.extensions.contains_key(**k))
        {
            // Judging readiness by a KCL rule needs the KCL evaluator, which this plugin does not
            // link; refusing beats silently using the built-in rules the user replaced.
            return Err(PluginError::unsupported(format!(
                "{}: custom readiness rules (extension {key}) need the KCL evaluator, which the \
                 kubernetes runtime plugin does not have; an expression in extension \
                 `{EXT_READINESS}` is judged by kusionctl",
                target.id
            )));
        }
        let host_judges = resource.extensions.contains_key(EXT_READINESS);
        let inner = self.inner.clone();
        let cluster = self.run(
            &target.id,
            None,
            async move { inner.cluster(&resource).await },
        )?;
        let interval = Duration::from_millis(self.inner.settings().watch_interval_ms.max(50));
        let (tx, rx) = std::sync::mpsc::channel();
        let task = self
            .executor()?
            .spawn(follow(cluster, target, interval, host_judges, tx));
        Ok(Box::new(KubeWatch { rx, task }))
    }
}

// Loadable by kusionctl as a native plugin (see plugin.toml).
kusion_sdk::export_runtime!(KubernetesRuntime::new);

#[cfg(test)]
mod tests;
