//! The `Terraform` runtime: kusion verbs mapped onto provider RPCs.
//!
//! One provider process per (provider address, provider configuration) serves every resource of
//! an operation; it is started, schema-loaded and configured on first use and shut down at the
//! next `configure` (the start of the next operation), on [`TerraformRuntime::shutdown`] or on
//! drop. Verbs are synchronous (the SDK contract) and run on the runtime's own tokio executor,
//! so many kernel threads can drive RPCs over the same connection at once.
//!
//! This file holds the runtime itself (its shared state [`Inner`] and the `Runtime` verbs); each
//! idea behind the verbs has its own file:
//!
//! - `settings`: the operator's configuration and what the runtime derives from it;
//! - `envelope`: what the runtime keeps in a resource's `private` state;
//! - `pool`: the provider processes, one per provider and configuration;
//! - `schemas`: provider schemas, cached in memory and on disk by binary checksum;
//! - `target`, `errors`, `decode`: reading a resource's extensions, provider diagnostics as
//!   errors, and provider state bytes as JSON;
//! - `apply`, `data`, `read`, `import`: managed resources (plan, apply, delete, the crash
//!   journal), data sources, reads and refreshes, and import.

mod apply;
mod data;
mod decode;
mod envelope;
mod errors;
mod import;
mod pool;
mod read;
mod schemas;
mod settings;
mod target;

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use kusion_sdk::runtime::{
    ApplyRequest, ApplyResponse, Capabilities, DeleteRequest, ImportRequest, ReadRequest,
    ReadResponse, Runtime, RuntimeInfo, Watch, WatchRequest,
};
use kusion_sdk::{ABI_VERSION, ErrorKind, FieldPath, PluginError, PluginResult, Resource};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use crate::cty::{self, Block, Nesting, Schema};
use crate::install::{self, InstallConfig, ProviderAddress};
use crate::plugin::{self, Diagnostic, Provider};
use crate::schema::{self as schema_cache, ProviderSchema};

use self::decode::*;
use self::envelope::*;
use self::errors::*;
use self::import::*;
use self::pool::*;
use self::settings::Settings;
use self::target::*;

pub use self::envelope::DEPOSED_ATTRIBUTE;
pub use self::settings::TerraformConfig;

/// Extension naming the object to adopt (`import`).
pub const IMPORT_ID: &str = "kusionstack.io/import-id";
/// Extension (boolean) asking for create-before-destroy on replacements: the new object is
/// created before the old one is deleted (Terraform's `lifecycle.create_before_destroy`).
pub const CREATE_BEFORE_DESTROY: &str = "createBeforeDestroy";
/// Extension selecting the resource mode: `data` reads a data source (ReadDataSource) instead
/// of managing an object; anything else (or none) is a managed resource.
pub const MODE: &str = "mode";
/// The resource `type` this runtime serves.
pub const RESOURCE_TYPE: &str = "Terraform";

/// What the runtime's verbs share: the settings, the provider pool and schema cache, and what this
/// operation's reads found.
struct Inner {
    settings: RwLock<Arc<Settings>>,
    /// Per operation: the started provider per (address, configuration), or why it could not
    /// start (remembered, so a bad configuration is reported once per resource, not retried).
    instances: tokio::sync::Mutex<HashMap<ProviderKey, InstanceCell>>,
    /// Schemas by binary checksum, shared by all processes of that binary.
    schemas: tokio::sync::Mutex<HashMap<String, Arc<ProviderSchema>>>,
    /// Per operation: resources whose read found the live object equal to the recorded state,
    /// with the fingerprint of that state (see `unchanged_since_apply`).
    refreshed_unchanged: std::sync::Mutex<HashMap<String, String>>,
    /// Per operation: resources whose read found the live object different from the recorded
    /// state (drift), by resource ID: the fingerprint of that recorded state and the live
    /// object as the provider read it (state and private bytes; `None`: gone). An apply plans
    /// from it, as Terraform plans from the refreshed state.
    refreshed_drifted: std::sync::Mutex<HashMap<String, (String, Option<RawState>)>>,
}

/// A state as the provider encodes it, with its private bytes.
type RawState = (Vec<u8>, Vec<u8>);

/// The Terraform runtime plugin.
pub struct TerraformRuntime {
    rt: tokio::runtime::Runtime,
    inner: Arc<Inner>,
}

impl TerraformRuntime {
    pub fn new() -> PluginResult<TerraformRuntime> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kusion-terraform")
            .enable_all()
            .build()
            .map_err(|e| {
                PluginError::internal(format!("starting the terraform runtime's executor: {e}"))
            })?;
        Ok(TerraformRuntime {
            rt,
            inner: Arc::new(Inner {
                settings: RwLock::new(Arc::new(Settings::from_config(&TerraformConfig::default()))),
                instances: tokio::sync::Mutex::new(HashMap::new()),
                schemas: tokio::sync::Mutex::new(HashMap::new()),
                refreshed_unchanged: std::sync::Mutex::new(HashMap::new()),
                refreshed_drifted: std::sync::Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Run a future on the runtime's executor and wait for it from any thread, including
    /// threads that belong to another tokio runtime (where `block_on` would panic).
    fn run<T: Send + 'static>(
        &self,
        timeout: Option<Duration>,
        fut: impl Future<Output = PluginResult<T>> + Send + 'static,
    ) -> PluginResult<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.rt.spawn(async move {
            let result = match timeout {
                Some(t) => tokio::time::timeout(t, fut).await.unwrap_or_else(|_| {
                    Err(PluginError::new(
                        ErrorKind::Timeout,
                        format!("gave up after {}s", t.as_secs_f64()),
                    ))
                }),
                None => fut.await,
            };
            let _ = tx.send(result);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(PluginError::internal("the terraform runtime task panicked")))
    }

    /// Stop every provider process (end of an operation).
    pub fn shutdown(&self) {
        let inner = self.inner.clone();
        let _ = self.run(None, async move {
            inner.shutdown_all().await;
            Ok(())
        });
    }

    /// `(provider address, pid)` of every running provider process.
    pub fn provider_processes(&self) -> Vec<(String, u32)> {
        let inner = self.inner.clone();
        self.run(None, async move {
            let map = inner.instances.lock().await;
            Ok(map
                .values()
                .filter_map(|c| c.get()?.as_ref().ok())
                .map(|i| (i.address.to_string(), i.provider.pid))
                .collect())
        })
        .unwrap_or_default()
    }
}

impl Drop for TerraformRuntime {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Runtime for TerraformRuntime {
    fn describe(&self) -> RuntimeInfo {
        RuntimeInfo {
            name: "terraform".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: ABI_VERSION,
            resource_types: vec![RESOURCE_TYPE.into()],
            capabilities: Capabilities {
                dry_run: true,
                watch: false,
                import: true,
                sensitive_fields: true,
            },
        }
    }

    fn configure(&self, config: &Json) -> PluginResult<()> {
        let parsed: TerraformConfig = if config.is_null() {
            TerraformConfig::default()
        } else {
            serde_json::from_value(config.clone()).map_err(|e| {
                PluginError::invalid(format!("terraform runtime configuration: {e}"))
            })?
        };
        // A new operation: processes configured for the previous one are not reused.
        self.shutdown();
        let settings = Arc::new(Settings::from_config(&parsed));
        if let Ok(mut map) = self.inner.refreshed_unchanged.lock() {
            map.clear();
        }
        if let Ok(mut map) = self.inner.refreshed_drifted.lock() {
            map.clear();
        }
        match self.inner.settings.write() {
            Ok(mut s) => *s = settings,
            Err(p) => *p.into_inner() = settings,
        }
        Ok(())
    }

    fn apply(&self, request: &ApplyRequest) -> PluginResult<ApplyResponse> {
        let inner = self.inner.clone();
        let req = request.clone();
        self.run(request.timeout, async move { inner.apply(req).await })
    }

    fn read(&self, request: &ReadRequest) -> PluginResult<ReadResponse> {
        let inner = self.inner.clone();
        let req = request.clone();
        self.run(request.timeout, async move { inner.read(req).await })
    }

    fn import(&self, request: &ImportRequest) -> PluginResult<ReadResponse> {
        let inner = self.inner.clone();
        let req = request.clone();
        self.run(request.timeout, async move { inner.import(req).await })
    }

    fn delete(&self, request: &DeleteRequest) -> PluginResult<()> {
        let inner = self.inner.clone();
        let req = request.clone();
        self.run(request.timeout, async move { inner.delete(req).await })
    }

    fn configuration(&self, recorded: &Resource) -> PluginResult<Option<Resource>> {
        let inner = self.inner.clone();
        let recorded = recorded.clone();
        self.run(None, async move {
            let target = Target::of(&recorded)?;
            let schema = if is_data(&recorded) {
                inner.data_schema(&target).await?.1
            } else {
                inner.resource_schema(&target).await?.1
            };
            let mut out = recorded.clone();
            out.attributes = configuration_of(&schema.block, &recorded.attributes, true);
            Ok(Some(out))
        })
    }

    fn watch(&self, request: &WatchRequest) -> PluginResult<Box<dyn Watch>> {
        Err(PluginError::unsupported(format!(
            "{}: the terraform runtime does not watch resources (capability watch = false)",
            request.resource.id
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configuration_is_read_with_defaults() {
        let config: TerraformConfig = serde_json::from_value(
            json!({"mirrors": ["/m"], "logDir": "/l", "verbosity": 1, "offline": true}),
        )
        .unwrap();
        let s = Settings::from_config(&config);
        assert_eq!(s.install.mirrors.first(), Some(&PathBuf::from("/m")));
        assert_eq!(
            s.install.mirrors.last(),
            Some(&PathBuf::from("/opt/tf-plugins"))
        );
        assert!(!s.install.online && s.verbose);
        assert_eq!(s.log_dir, PathBuf::from("/l"));
        let rt = TerraformRuntime::new().unwrap();
        let e = rt.configure(&json!({"mirrors": "not-a-list"})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        let e = rt
            .watch(&kusion_sdk::runtime::WatchRequest {
                resource: Resource::new("a:b:c:d", RESOURCE_TYPE, Map::new()),
            })
            .err()
            .unwrap();
        assert_eq!(e.kind, ErrorKind::Unsupported);
    }
}
