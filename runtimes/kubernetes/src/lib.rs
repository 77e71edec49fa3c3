//! The Kubernetes runtime of kusion-rs: resources of `type: Kubernetes` applied with server-side
//! apply (field manager `kusion`), read back projected onto the fields kusion manages, deleted
//! with a propagation policy, and watched to readiness along the owner chain.
//!
//! The [`kusion_sdk::runtime::Runtime`] verbs are synchronous; this runtime owns a tokio runtime
//! and runs every call as a task on it, so it can be called from any thread, including from
//! inside another tokio runtime.

mod cluster;
mod error;
mod health;
mod id;
mod operate;
mod project;
mod recent;

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams, PropagationPolicy};
use kusion_sdk::runtime::{
    ApplyRequest, ApplyResponse, Capabilities, DeleteRequest, EXT_READINESS, Health, ImportRequest,
    OperateRequest, OperateResponse, OperationInfo, ReadRequest, ReadResponse, Runtime,
    RuntimeInfo, Watch, WatchEvent, WatchPoll, WatchRequest,
};
use kusion_sdk::{ABI_VERSION, ErrorKind, PluginError, PluginResult, Resource};
use serde::Deserialize;
use serde_json::{Map, Value};

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

/// How dependents of a deleted object are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    fn policy(self) -> PropagationPolicy {
        match self {
            Propagation::Background => PropagationPolicy::Background,
            Propagation::Foreground => PropagationPolicy::Foreground,
            Propagation::Orphan => PropagationPolicy::Orphan,
        }
    }

    fn parse(text: &str) -> Option<Propagation> {
        match text {
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            "Orphan" => Some(Propagation::Orphan),
            _ => None,
        }
    }
}

/// The runtime configuration (`configure`), all fields optional.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Kubeconfig file of the stack; unset means `$KUBECONFIG`, then `~/.kube/config`.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Context inside the kubeconfig; unset means its current context.
    #[serde(default)]
    pub context: Option<String>,
    /// Take ownership of fields another field manager owns instead of failing with a conflict
    /// (kubectl's `--force-conflicts`; kusionctl's flag of that name sets it).
    #[serde(default)]
    pub force: bool,
    #[serde(default = "default_manager")]
    pub field_manager: String,
    #[serde(default)]
    pub delete_propagation: Propagation,
    /// Wait until a deleted object is really gone (finalizers done) before returning.
    #[serde(default = "yes")]
    pub wait_for_delete: bool,
    /// How long a real apply waits for a kind the server does not serve yet (its CRD being
    /// created or established), in seconds.
    #[serde(default = "default_kind_wait")]
    pub kind_wait_seconds: u64,
    /// How often `watch` asks again for a kind the server does not serve yet (its CRD being
    /// established), in milliseconds; once it is served, changes arrive by watch streams.
    #[serde(default = "default_interval")]
    pub watch_interval_ms: u64,
    /// Answer a plan's dry-run from the read just before it when that read already says what
    /// the server would answer (see `answer_from_read`); off sends every dry-run to the server.
    #[serde(default = "yes")]
    pub answer_from_read: bool,
}

fn yes() -> bool {
    true
}
fn default_manager() -> String {
    "kusion".into()
}
fn default_kind_wait() -> u64 {
    30
}
fn default_interval() -> u64 {
    500
}

impl Default for Settings {
    fn default() -> Self {
        serde_json::from_value(Value::Object(Map::new())).expect("all settings have defaults")
    }
}

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

fn propagation_of(resource: &Resource, settings: &Settings) -> PluginResult<Propagation> {
    match resource.extensions.get(EXT_PROPAGATION) {
        None => Ok(settings.delete_propagation),
        Some(v) => v.as_str().and_then(Propagation::parse).ok_or_else(|| {
            PluginError::invalid(format!(
                "{}: extension {EXT_PROPAGATION} must be Background, Foreground or Orphan",
                resource.id
            ))
        }),
    }
}

/// Deletes the object (absent is success) and, with `wait`, waits until it is gone
/// (finalizers done) for at most `limit`.
async fn delete_object(
    api: &kube::Api<kube::api::DynamicObject>,
    target: &Target,
    propagation: Propagation,
    wait: bool,
    limit: Duration,
) -> PluginResult<()> {
    let params = DeleteParams {
        propagation_policy: Some(propagation.policy()),
        ..DeleteParams::default()
    };
    match api.delete(&target.name, &params).await {
        Ok(_) => {}
        Err(e) if error::is_not_found(&e) => return Ok(()),
        Err(e) => return Err(error::from_kube(&target.id, "delete", e)),
    }
    if !wait {
        return Ok(());
    }
    let mut last_seen = String::new();
    let waited = tokio::time::timeout(limit, async {
        loop {
            match api.get_opt(&target.name).await {
                Ok(None) => return Ok(()),
                Ok(Some(obj)) => last_seen = obj.metadata.finalizers.unwrap_or_default().join(", "),
                Err(e) if error::is_not_found(&e) => return Ok(()),
                Err(e) => return Err(error::from_kube(&target.id, "waiting for deletion", e)),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    match waited {
        Ok(r) => r,
        Err(_) => Err(PluginError::new(
            ErrorKind::Timeout,
            format!(
                "{}: deleted but still present (finalizers: [{last_seen}])",
                target.id
            ),
        )),
    }
}

async fn delete(inner: Arc<Inner>, req: DeleteRequest) -> PluginResult<()> {
    let resource = &req.resource;
    let target = target_of(resource)?;
    let settings = inner.settings();
    let propagation = propagation_of(resource, &settings)?;
    let cluster = inner.cluster(resource).await?;
    cluster.recent.forget(&target.id);
    let Some(kind) = cluster.checked_kind(&target).await? else {
        return Ok(()); // the kind is gone, so is the object
    };
    let api = cluster.api(&kind, &target);
    delete_object(
        &api,
        &target,
        propagation,
        settings.wait_for_delete,
        req.timeout.unwrap_or(DEFAULT_TIMEOUT),
    )
    .await
}

/// Follows `target` to readiness: a first snapshot answers at once (most kinds are ready as soon
/// as they exist, and need no watch at all); otherwise watch caches of the object and of its
/// owner chain's kinds are re-judged on every change they see, with the same rules.
/// With `host_judges` (the resource has its own readiness rule, [`EXT_READINESS`]) a built-in
/// "ready" does not end the watch: the host decides, and drops the watch when satisfied.
async fn follow(
    cluster: Arc<cluster::Cluster>,
    target: Target,
    interval: Duration,
    host_judges: bool,
    tx: std::sync::mpsc::Sender<PluginResult<WatchEvent>>,
) {
    let mut last: Option<WatchEvent> = None;
    // Sends `event` when it differs from the last one; true when watching should stop.
    let mut report = |event: WatchEvent| -> bool {
        let done = match event.health {
            Health::Failed => true,
            Health::Ready => !host_judges,
            Health::Progressing => false,
        };
        if last.as_ref() != Some(&event) {
            last = Some(event.clone());
            if tx.send(Ok(event)).is_err() {
                return true; // nobody listens any more
            }
        }
        done
    };
    // The kind may not be served yet (its CRD is being established): ask again until it is.
    let kind = loop {
        match health::evaluate(&cluster, &target).await {
            Ok(event) => {
                if report(event) {
                    return;
                }
                if let Ok(Some(kind)) = cluster.checked_kind(&target).await {
                    break kind;
                }
            }
            // Transient trouble (server restarting): keep trying until the caller's timeout.
            Err(e) if e.retryable => tracing::debug!("{}: watch: {}", target.id, e.message),
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
        tokio::time::sleep(interval).await;
    };
    let ns = target.namespace.as_deref().filter(|_| kind.namespaced);
    let own = cluster.informer(
        ns,
        &kind.resource,
        Some(&format!("metadata.name={}", target.name)),
    );
    let children: Vec<(&str, Arc<cluster::Informer>)> =
        health::children_of(target.group(), &target.kind)
            .iter()
            .map(|child| {
                let informer = cluster.informer(ns, &health::child_resource(child), None);
                (child.3, informer)
            })
            .collect();
    let mut changed: Vec<tokio::sync::watch::Receiver<u64>> = std::iter::once(&own)
        .chain(children.iter().map(|(_, i)| i))
        .map(|i| i.changed.clone())
        .collect();
    for informer in std::iter::once(&own).chain(children.iter().map(|(_, i)| i)) {
        if !informer.wait_until_listed().await {
            let _ = tx.send(Err(PluginError::internal(format!(
                "{}: a watch stream stopped before listing",
                target.id
            ))));
            return;
        }
    }
    let to_json = |o: &Arc<kube::api::DynamicObject>| serde_json::to_value(o.as_ref()).ok();
    loop {
        // Mark every change seen before reading the caches, so none slips in between.
        for rx in changed.iter_mut() {
            rx.borrow_and_update();
        }
        let judged_at = std::time::Instant::now();
        let mut event = match own.store.state().first().and_then(to_json) {
            None => health::progressing(&target, "waiting for the object to exist"),
            Some(obj) => {
                let lists: Vec<(&str, Vec<Value>)> = children
                    .iter()
                    .map(|(plural, i)| {
                        (
                            *plural,
                            i.store.state().iter().filter_map(to_json).collect(),
                        )
                    })
                    .collect();
                health::judge(&target, &obj, &lists)
            }
        };
        // Each kind has its own watch stream, so the object's cache can turn Ready or Failed
        // before the pod cache holds the pods that made it so. A verdict that may end the
        // watch is judged again from reads made after it, so its rows describe one moment.
        if event.health != Health::Progressing {
            match health::evaluate_since(&cluster, &target, Some(judged_at)).await {
                Ok(fresh) => event = fresh,
                Err(e) if e.retryable => tracing::debug!("{}: watch: {}", target.id, e.message),
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
        if report(event) {
            return;
        }
        let waits: Vec<_> = changed
            .iter_mut()
            .map(|rx| Box::pin(rx.changed()))
            .collect();
        match tokio::time::timeout(RESYNC, futures::future::select_all(waits)).await {
            Ok((Ok(()), _, _)) => {}
            Ok((Err(_), _, _)) => {
                let _ = tx.send(Err(PluginError::internal(format!(
                    "{}: a watch stream stopped",
                    target.id
                ))));
                return;
            }
            // Nothing changed for a while: judge from fresh reads, so a cache that missed an
            // event (a watch reconnecting) cannot hold a verdict.
            Err(_) => match health::evaluate_since(&cluster, &target, None).await {
                Ok(fresh) => {
                    if report(fresh) {
                        return;
                    }
                }
                Err(e) if e.retryable => tracing::debug!("{}: watch: {}", target.id, e.message),
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            },
        }
    }
}

struct KubeWatch {
    rx: std::sync::mpsc::Receiver<PluginResult<WatchEvent>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch for KubeWatch {
    fn poll(&mut self, timeout: Duration) -> PluginResult<WatchPoll> {
        use std::sync::mpsc::RecvTimeoutError;
        match self.rx.recv_timeout(timeout) {
            Ok(Ok(event)) => Ok(WatchPoll::Event(event)),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Timeout) => Ok(WatchPoll::Pending),
            Err(RecvTimeoutError::Disconnected) => Ok(WatchPoll::Closed),
        }
    }
}

impl Drop for KubeWatch {
    fn drop(&mut self) {
        self.task.abort();
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
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_read_answers_the_dry_run_only_when_nothing_would_change() {
        let planned = map(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n"}, "data": {"a": "1"}}));
        let body = Value::Object(planned.clone());
        // Absent: the plan is the answer.
        assert_eq!(
            answer_from_read(None, &planned, &body, None, "kusion"),
            Some(planned.clone())
        );
        // Live with the same values, plus server metadata and a label kusion does not manage.
        let owned = |keys: &[&str]| {
            let data: Map<String, Value> =
                keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
            json!([{"manager": "kusion", "operation": "Apply", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": data}},
                   {"manager": "other", "operation": "Update", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:other": {}}}}}])
        };
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "uid": "u", "resourceVersion": "9",
                         "labels": {"other": "x"}, "managedFields": owned(&["a"])},
            "data": {"a": "1"}});
        assert_eq!(
            answer_from_read(Some(&live), &planned, &body, None, "kusion"),
            Some(planned.clone())
        );
        // A value that differs needs the server.
        let mut drifted = live.clone();
        drifted["data"]["a"] = json!("2");
        assert_eq!(
            answer_from_read(Some(&drifted), &planned, &body, None, "kusion"),
            None
        );
        // A field kusion's manager owns and the plan drops would be removed: the server says
        // how, whatever state recorded.
        let mut with_gone = live.clone();
        with_gone["data"]["gone"] = json!("y");
        with_gone["metadata"]["managedFields"] = owned(&["a", "gone"]);
        assert_eq!(
            answer_from_read(Some(&with_gone), &planned, &body, None, "kusion"),
            None
        );
        // The same key owned by another manager only stays: nothing changes.
        let mut theirs = with_gone.clone();
        theirs["metadata"]["managedFields"] = owned(&["a"]);
        assert!(answer_from_read(Some(&theirs), &planned, &body, None, "kusion").is_some());
        // A key recorded in the prior state (kusion's earlier value) shows on both sides.
        let prior = json!({"data": {"a": "1", "gone": "y"}});
        assert_eq!(
            answer_from_read(Some(&theirs), &planned, &body, Some(&prior), "kusion"),
            None
        );
    }
}
