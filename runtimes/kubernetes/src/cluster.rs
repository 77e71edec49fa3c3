//! Clusters: which kubeconfig/context a resource goes to, one client per cluster, and kinds
//! resolved through discovery at run time (so CRDs created a moment ago are found).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use futures::StreamExt;
use kube::Client;
use kube::api::DynamicObject;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{ApiResource, Scope};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kusion_sdk::{PluginError, PluginResult, Resource};

use crate::error::{from_kube, is_not_found};
use crate::id::Target;

/// Extension keys naming a resource's own kubeconfig file and context.
pub const EXT_KUBECONFIG: &[&str] = &["kubeconfig", "kubeConfig", "kusionstack.io/kubeconfig"];
pub const EXT_CONTEXT: &[&str] = &["kubeContext", "context", "kusionstack.io/kube-context"];

/// Which kubeconfig and context: `None` path means `$KUBECONFIG`, then `~/.kube/config`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterKey {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

impl ClusterKey {
    pub fn describe(&self) -> String {
        let file = self
            .kubeconfig
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| {
                std::env::var("KUBECONFIG")
                    .ok()
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| "~/.kube/config".into())
            });
        match &self.context {
            Some(c) => format!("{file} (context {c})"),
            None => file,
        }
    }
}

/// Picks the cluster of a resource: its extensions first, then the runtime configuration.
pub fn cluster_key(resource: &Resource, default: &ClusterKey) -> PluginResult<ClusterKey> {
    let ext = |keys: &[&str]| -> PluginResult<Option<String>> {
        for k in keys {
            if let Some(v) = resource.extensions.get(*k) {
                return v.as_str().map(|s| Some(s.to_string())).ok_or_else(|| {
                    PluginError::invalid(format!(
                        "{}: extension `{k}` must be a string",
                        resource.id
                    ))
                });
            }
        }
        Ok(None)
    };
    let path = ext(EXT_KUBECONFIG)?;
    let context = ext(EXT_CONTEXT)?;
    Ok(match path {
        // A resource's own kubeconfig file does not inherit the stack's context name.
        Some(p) => ClusterKey {
            kubeconfig: Some(PathBuf::from(p)),
            context,
        },
        None => ClusterKey {
            kubeconfig: default.kubeconfig.clone(),
            context: context.or(default.context.clone()),
        },
    })
}

/// A resolved kind: where its API lives and whether objects are namespaced.
#[derive(Debug, Clone)]
pub struct Kind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// A namespace's list of one kind, as fetched at some instant.
type Listed = Option<(std::time::Instant, Arc<Vec<serde_json::Value>>)>;
type ListSlot = Arc<tokio::sync::Mutex<Listed>>;

pub struct Cluster {
    pub key: ClusterKey,
    pub client: Client,
    /// The API server's URL and the context used, for messages.
    pub server: String,
    pub context: String,
    kinds: Mutex<HashMap<(String, String), Kind>>,
    /// Held while discovering, so the concurrent first calls for a kind (ten parallel applies
    /// of the same kind at the start of a run) wait for one discovery instead of each doing it.
    discovering: tokio::sync::Mutex<()>,
    /// Short-lived list results shared by concurrent watches (many Deployments in one namespace
    /// need the same pod list per tick; one request serves them all).
    lists: Mutex<HashMap<(String, String), ListSlot>>,
    /// Watch caches shared by concurrent watches, alive while some watch holds them.
    informers: Mutex<HashMap<InformerKey, Weak<Informer>>>,
    /// What the last read of each object found, for the dry-run that follows it.
    pub recent: crate::recent::Recent,
}

/// (namespace, apiVersion/plural, field selector) of a watch cache.
type InformerKey = (Option<String>, String, String);

/// A cache of one kind's objects (in one namespace, optionally narrowed by a field selector)
/// kept current by a watch stream, and a counter bumped on every change it sees. The stream
/// re-lists and reconnects by itself (with backoff) when the server ends or expires it.
pub struct Informer {
    pub store: Store<DynamicObject>,
    pub changed: tokio::sync::watch::Receiver<u64>,
    /// True once the first list is in the store. `Store::wait_until_ready` is not used: it
    /// wakes only the last of several tasks waiting on one store (its one-shot channel keeps a
    /// single waker), so of two watches sharing a pod cache one waited forever (issue 26).
    ready: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Informer {
    /// Waits until the first list is in the store; false if the watch task ended first.
    pub async fn wait_until_listed(&self) -> bool {
        let mut ready = self.ready.clone();
        ready.wait_for(|r| *r).await.is_ok()
    }
}

impl Drop for Informer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long a list result is reused by other watches.
const LIST_TTL: std::time::Duration = std::time::Duration::from_millis(250);

/// The oldest list request whose result may still be shared (see [`LIST_TTL`]).
pub(crate) fn shareable_since() -> Option<std::time::Instant> {
    std::time::Instant::now().checked_sub(LIST_TTL)
}

impl Cluster {
    pub async fn connect(key: ClusterKey) -> PluginResult<Cluster> {
        let where_ = key.describe();
        let kubeconfig = match &key.kubeconfig {
            Some(p) => Kubeconfig::read_from(p),
            None => Kubeconfig::read(),
        }
        .map_err(|e| PluginError::invalid(format!("cannot read kubeconfig {where_}: {e}")))?;
        let options = KubeConfigOptions {
            context: key.context.clone(),
            ..KubeConfigOptions::default()
        };
        let context = key
            .context
            .clone()
            .or_else(|| kubeconfig.current_context.clone())
            .unwrap_or_else(|| "(none)".into());
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| PluginError::invalid(format!("kubeconfig {where_}: {e}")))?;
        let server = config.cluster_url.to_string();
        let client = Client::try_from(config).map_err(|e| {
            PluginError::invalid(format!("cannot build a client for {where_}: {e}"))
        })?;
        Ok(Cluster {
            key,
            client,
            server,
            context,
            kinds: Mutex::new(HashMap::new()),
            discovering: tokio::sync::Mutex::new(()),
            lists: Mutex::new(HashMap::new()),
            informers: Mutex::new(HashMap::new()),
            recent: Default::default(),
        })
    }

    /// The kind of `target` as this server serves it; `None` when the server does not know it
    /// (e.g. a CRD not created yet). Only found kinds are cached, so a new CRD shows up.
    pub async fn kind(&self, target: &Target) -> PluginResult<Option<Kind>> {
        let key = (target.api_version.clone(), target.kind.clone());
        let cached = || self.kinds.lock().ok().and_then(|m| m.get(&key).cloned());
        if let Some(k) = cached() {
            return Ok(Some(k));
        }
        let _one_at_a_time = self.discovering.lock().await;
        if let Some(k) = cached() {
            return Ok(Some(k));
        }
        let gvk = kube::api::GroupVersionKind::gvk(target.group(), target.version(), &target.kind);
        match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok((resource, caps)) => {
                let kind = Kind {
                    resource,
                    namespaced: caps.scope == Scope::Namespaced,
                };
                if let Ok(mut m) = self.kinds.lock() {
                    m.insert(key, kind.clone());
                }
                Ok(Some(kind))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(kube::Error::Discovery(_)) => Ok(None),
            Err(e) => match crate::error::transport_cause(&e) {
                // The first request to a cluster: say which cluster, once per resource in the
                // same words (the kernel folds identical failures into one).
                Some(cause) => Err(PluginError::new(
                    kusion_sdk::ErrorKind::Unavailable,
                    format!("{}: {}", target.id, self.unreachable(&cause)),
                )),
                None => Err(from_kube(&target.id, "discovery", e)),
            },
        }
    }

    /// What to say when the API server cannot be reached.
    pub fn unreachable(&self, cause: &str) -> String {
        let file = self
            .key
            .kubeconfig
            .as_ref()
            .map(|p| p.display().to_string())
            .or_else(|| std::env::var("KUBECONFIG").ok().filter(|v| !v.is_empty()))
            .unwrap_or_else(|| "~/.kube/config".into());
        format!(
            "cannot reach the Kubernetes API server {} (context {}, kubeconfig {file}): {cause}; \
             check that the cluster is running and reachable from here, and that the kubeconfig \
             and context name it",
            self.server, self.context
        )
    }

    /// Like [`Cluster::kind`], but the scope must match the ID's namespace part.
    pub async fn checked_kind(&self, target: &Target) -> PluginResult<Option<Kind>> {
        let Some(kind) = self.kind(target).await? else {
            return Ok(None);
        };
        match (kind.namespaced, &target.namespace) {
            (true, None) => Err(PluginError::invalid(format!(
                "{}: {} is namespaced, so the ID must be apiVersion:Kind:namespace:name",
                target.id, target.kind
            ))),
            (false, Some(ns)) => Err(PluginError::invalid(format!(
                "{}: {} is cluster-scoped, so the ID must not name a namespace (got {ns:?})",
                target.id, target.kind
            ))),
            _ => Ok(Some(kind)),
        }
    }

    /// All objects of a kind in a namespace as JSON, shared with other callers for [`LIST_TTL`].
    /// A kind the server does not serve lists as empty.
    pub async fn list_json(
        &self,
        id: &str,
        ns: &str,
        resource: &ApiResource,
    ) -> PluginResult<Arc<Vec<serde_json::Value>>> {
        self.list_json_since(id, ns, resource, shareable_since())
            .await
    }

    /// [`Cluster::list_json`] from a list requested no earlier than `since`; `None` asks for a
    /// new list. Callers that saw a change at some instant pass it, so the list includes it.
    pub async fn list_json_since(
        &self,
        id: &str,
        ns: &str,
        resource: &ApiResource,
        since: Option<std::time::Instant>,
    ) -> PluginResult<Arc<Vec<serde_json::Value>>> {
        let key = (
            ns.to_string(),
            format!("{}/{}", resource.api_version, resource.plural),
        );
        let slot = {
            let Ok(mut lists) = self.lists.lock() else {
                return Err(PluginError::internal("list cache lock poisoned"));
            };
            lists.entry(key).or_default().clone()
        };
        // Held across the request: concurrent callers for the same list wait for this one.
        let mut cached = slot.lock().await;
        if let Some((at, items)) = cached.as_ref()
            && since.is_some_and(|since| *at >= since)
        {
            return Ok(items.clone());
        }
        // Stamped before the request: whatever changed after this instant may be missing.
        let requested_at = std::time::Instant::now();
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(self.client.clone(), ns, resource);
        let items = match api.list(&kube::api::ListParams::default()).await {
            Ok(l) => l
                .items
                .into_iter()
                .filter_map(|o| serde_json::to_value(o).ok())
                .collect(),
            Err(e) if is_not_found(&e) => Vec::new(),
            Err(e) => return Err(from_kube(id, &format!("listing {}", resource.plural), e)),
        };
        let items = Arc::new(items);
        *cached = Some((requested_at, items.clone()));
        Ok(items)
    }

    /// The watch cache of `resource` objects in `ns` (all namespaces or cluster-scoped when
    /// `None`) matching `fields`; shared with other watches asking for the same. Must be called
    /// inside the runtime's executor (it spawns the watch task).
    pub fn informer(
        &self,
        ns: Option<&str>,
        resource: &ApiResource,
        fields: Option<&str>,
    ) -> Arc<Informer> {
        let key = (
            ns.map(str::to_string),
            format!("{}/{}", resource.api_version, resource.plural),
            fields.unwrap_or_default().to_string(),
        );
        let mut informers = self.informers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = informers.get(&key).and_then(Weak::upgrade) {
            return existing;
        }
        let api: kube::Api<DynamicObject> = match ns {
            Some(ns) => kube::Api::namespaced_with(self.client.clone(), ns, resource),
            None => kube::Api::all_with(self.client.clone(), resource),
        };
        let mut config = watcher::Config::default();
        if let Some(fields) = fields {
            config = config.fields(fields);
        }
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let (tx, changed) = tokio::sync::watch::channel(0u64);
        let (ready_tx, ready) = tokio::sync::watch::channel(false);
        let what = format!("{} in {}", key.1, ns.unwrap_or("all namespaces"));
        let task = tokio::spawn(async move {
            let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(event) => {
                        // The reflector has applied the event: after the first list's end the
                        // store holds every object.
                        if matches!(event, watcher::Event::InitDone) {
                            ready_tx.send_replace(true);
                        }
                        tx.send_modify(|n| *n = n.wrapping_add(1))
                    }
                    // The watcher retries with backoff; callers are bounded by their timeout.
                    Err(e) => tracing::debug!("watch of {what}: {e}"),
                }
            }
        });
        let informer = Arc::new(Informer {
            store,
            changed,
            ready,
            task,
        });
        informers.retain(|_, w| w.strong_count() > 0);
        informers.insert(key, Arc::downgrade(&informer));
        informer
    }

    pub fn api(&self, kind: &Kind, target: &Target) -> kube::Api<kube::api::DynamicObject> {
        match (&target.namespace, kind.namespaced) {
            (Some(ns), true) => kube::Api::namespaced_with(self.client.clone(), ns, &kind.resource),
            _ => kube::Api::all_with(self.client.clone(), &kind.resource),
        }
    }
}

/// Clusters by key, connected on first use.
#[derive(Default)]
pub struct Clusters {
    map: tokio::sync::Mutex<HashMap<ClusterKey, Arc<Cluster>>>,
}

impl Clusters {
    pub async fn get(&self, key: ClusterKey) -> PluginResult<Arc<Cluster>> {
        let mut map = self.map.lock().await;
        if let Some(c) = map.get(&key) {
            return Ok(c.clone());
        }
        let cluster = Arc::new(Cluster::connect(key.clone()).await?);
        map.insert(key, cluster.clone());
        Ok(cluster)
    }

    pub async fn clear(&self) {
        self.map.lock().await.clear();
    }
}
