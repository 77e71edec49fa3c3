//! The `Terraform` runtime: kusion verbs mapped onto provider RPCs.
//!
//! One provider process per (provider address, provider configuration) serves every resource of
//! an operation; it is started, schema-loaded and configured on first use and shut down at the
//! next `configure` (the start of the next operation), on [`TerraformRuntime::shutdown`] or on
//! drop. Verbs are synchronous (the SDK contract) and run on the runtime's own tokio executor,
//! so many kernel threads can drive RPCs over the same connection at once.

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

/// Operator configuration handed to [`Runtime::configure`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TerraformConfig {
    /// Filesystem mirrors searched before the defaults (`KUSION_TF_PLUGIN_MIRRORS`,
    /// `~/.terraform.d/plugins`, `/opt/tf-plugins`).
    pub mirrors: Vec<PathBuf>,
    /// Where downloaded providers are unpacked (default `TF_PLUGIN_CACHE_DIR`, else
    /// `$KUSION_CACHE/terraform/plugins`).
    pub plugin_cache_dir: Option<PathBuf>,
    /// Where provider schemas are cached by binary checksum.
    pub schema_cache_dir: Option<PathBuf>,
    /// Where the runtime journals creates in flight, so a re-run after a crash adopts the
    /// object instead of creating a duplicate.
    pub state_dir: Option<PathBuf>,
    /// Where provider processes write their output.
    pub log_dir: Option<PathBuf>,
    /// 0: provider output only in the log; > 0: also on this process' stderr.
    pub verbosity: u8,
    /// Forbid registry downloads.
    pub offline: bool,
    /// Registry hosts reached over plain http (local test registries only).
    pub insecure_registries: Vec<String>,
    /// Seconds a provider gets to exit after Shutdown before it is killed.
    pub shutdown_grace_seconds: Option<u64>,
    /// Always call PlanResourceChange in dry-runs, even for a resource whose refreshed state
    /// equals its recorded state and whose configuration is the one it was applied with (see
    /// `Inner::unchanged_since_apply`).
    pub always_plan: bool,
}

#[derive(Debug, Clone)]
struct Settings {
    install: InstallConfig,
    /// Journal of creates in flight (see `Inner::apply`).
    intent_dir: PathBuf,
    schema_dir: PathBuf,
    log_dir: PathBuf,
    verbose: bool,
    grace: Duration,
    always_plan: bool,
}

fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUSION_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("kusion-rs")
}

impl Settings {
    fn from_config(config: &TerraformConfig) -> Settings {
        let root = cache_root().join("terraform");
        let mut mirrors = config.mirrors.clone();
        if let Some(env) = std::env::var_os("KUSION_TF_PLUGIN_MIRRORS") {
            mirrors.extend(std::env::split_paths(&env));
        }
        if let Some(home) = std::env::var_os("HOME") {
            mirrors.push(PathBuf::from(home).join(".terraform.d").join("plugins"));
        }
        mirrors.push(PathBuf::from("/opt/tf-plugins"));
        let cache_dir = config
            .plugin_cache_dir
            .clone()
            .or_else(|| std::env::var_os("TF_PLUGIN_CACHE_DIR").map(PathBuf::from))
            .unwrap_or_else(|| root.join("plugins"));
        Settings {
            install: InstallConfig {
                mirrors,
                cache_dir,
                online: !config.offline,
                insecure_hosts: config.insecure_registries.clone(),
            },
            intent_dir: config
                .state_dir
                .clone()
                .unwrap_or_else(|| root.join("intents")),
            schema_dir: config
                .schema_cache_dir
                .clone()
                .unwrap_or_else(|| root.join("schemas")),
            log_dir: config.log_dir.clone().unwrap_or_else(|| root.join("logs")),
            verbose: config.verbosity > 0,
            grace: Duration::from_secs(config.shutdown_grace_seconds.unwrap_or(5)),
            always_plan: config.always_plan,
        }
    }
}

/// What the runtime stores in `private`: the schema version the state was written with (needed
/// to upgrade it later), the provider's own opaque bytes, and the deposed objects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PrivateEnvelope {
    schema_version: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    private: String,
    /// Objects a create-before-destroy replacement superseded whose delete failed: still real,
    /// still owned, deleted by the next apply or destroy of this resource (Terraform's "deposed"
    /// objects). Kept here, in the resource's own state entry, so any state backend records
    /// them without knowing about them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    deposed: Vec<DeposedObject>,
    /// Fingerprint of what the object was last applied from (see [`applied_from`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    applied_from: String,
}

/// One deposed object: its last known state (JSON attributes), the schema version that state
/// was written with, and the provider's private bytes (base64).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeposedObject {
    schema_version: i64,
    state: Map<String, Json>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    private: String,
}

impl DeposedObject {
    /// What previews show for the object: its `id`, else its position.
    fn label(&self, index: usize) -> Json {
        match self.state.get("id") {
            Some(Json::String(id)) if !id.is_empty() => Json::String(id.clone()),
            _ => Json::String(format!("deposed object {index}")),
        }
    }
}

/// Attribute the runtime adds to a resource that has deposed objects (their IDs). A preview
/// shows it going away (the next apply deletes them); attribute names of Terraform schemas
/// never contain `-`, so it cannot collide with a provider's attribute.
pub const DEPOSED_ATTRIBUTE: &str = "kusion-deposed";

impl PrivateEnvelope {
    fn encode(schema_version: i64, private: &[u8]) -> String {
        Self::with_deposed(schema_version, private, Vec::new())
    }

    fn with_deposed(schema_version: i64, private: &[u8], deposed: Vec<DeposedObject>) -> String {
        Self::full(schema_version, private, deposed, String::new())
    }

    fn full(
        schema_version: i64,
        private: &[u8],
        deposed: Vec<DeposedObject>,
        applied_from: String,
    ) -> String {
        serde_json::to_string(&PrivateEnvelope {
            schema_version,
            private: B64.encode(private),
            deposed,
            applied_from,
        })
        .unwrap_or_default()
    }

    fn parse(text: Option<&str>) -> Option<PrivateEnvelope> {
        serde_json::from_str(text?).ok()
    }

    fn decode(text: Option<&str>) -> Option<(i64, Vec<u8>)> {
        let env = Self::parse(text)?;
        Some((env.schema_version, B64.decode(env.private.as_bytes()).ok()?))
    }

    /// The deposed objects recorded in `text`, if any.
    fn deposed_of(text: Option<&str>) -> Vec<DeposedObject> {
        Self::parse(text).map(|e| e.deposed).unwrap_or_default()
    }
}

/// Fingerprint of an apply's inputs besides the prior state: provider binary, provider
/// configuration, resource type, schema version and the resource's configuration.
fn applied_from(instance: &Instance, target: &Target, schema: &Schema, config: &Json) -> String {
    let mut hash = Sha256::new();
    for part in [
        instance.checksum.as_str(),
        &canonical(&target.meta),
        &target.type_name,
        &schema.version.to_string(),
        &canonical(config),
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hex::encode(hash.finalize())
}

/// Fingerprint of a recorded state's attributes (without the deposed marker).
fn state_fingerprint(attributes: &Map<String, Json>) -> String {
    let mut attributes = attributes.clone();
    attributes.remove(DEPOSED_ATTRIBUTE);
    hex::encode(Sha256::digest(canonical(&Json::Object(attributes))))
}

/// `resource` with the deposed-objects marker set from `deposed` (or removed when empty).
fn mark_deposed(resource: &mut Resource, deposed: &[DeposedObject]) {
    if deposed.is_empty() {
        resource.attributes.remove(DEPOSED_ATTRIBUTE);
    } else {
        resource.attributes.insert(
            DEPOSED_ATTRIBUTE.into(),
            Json::Array(
                deposed
                    .iter()
                    .enumerate()
                    .map(|(i, d)| d.label(i))
                    .collect(),
            ),
        );
    }
}

/// A started, configured provider with its schema.
struct Instance {
    address: ProviderAddress,
    provider: Arc<Provider>,
    schema: Arc<ProviderSchema>,
    /// SHA-256 of the provider binary (key of the schema and validation caches).
    checksum: String,
}

type ProviderKey = (String, String);
/// A provider started once per operation, or the reason it could not start.
type InstanceCell = Arc<OnceCell<Result<Arc<Instance>, PluginError>>>;

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

/// What a resource names: its type, provider and provider configuration.
#[derive(Debug)]
struct Target {
    id: String,
    type_name: String,
    address: ProviderAddress,
    meta: Json,
}

fn err(kind: ErrorKind, id: &str, message: impl std::fmt::Display) -> PluginError {
    PluginError::new(kind, format!("{id}: {message}"))
}

fn canonical(value: &Json) -> String {
    fn sort(v: &Json) -> Json {
        match v {
            Json::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Json::Object(keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect())
            }
            Json::Array(a) => Json::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(value).to_string()
}

impl Target {
    fn of(resource: &Resource) -> PluginResult<Target> {
        let id = resource.id.clone();
        let parts: Vec<&str> = id.split(':').collect();
        let type_name = match resource.extension_str("resourceType") {
            Some(t) => t.to_string(),
            None if parts.len() == 4 => parts[2].to_string(),
            None => {
                return Err(err(
                    ErrorKind::InvalidInput,
                    &id,
                    "no extensions.resourceType and the ID is not providerNamespace:providerName:resourceType:resourceName",
                ));
            }
        };
        let provider = resource.extension_str("provider").ok_or_else(|| {
            err(
                ErrorKind::InvalidInput,
                &id,
                "extensions.provider (host/namespace/name/version) is missing",
            )
        })?;
        let address =
            ProviderAddress::parse(provider).map_err(|e| err(ErrorKind::InvalidInput, &id, e))?;
        let meta = match resource.extensions.get("providerMeta") {
            None | Some(Json::Null) => Json::Object(Map::new()),
            Some(m @ Json::Object(_)) => m.clone(),
            Some(_) => {
                return Err(err(
                    ErrorKind::InvalidInput,
                    &id,
                    "extensions.providerMeta must be an object (the provider configuration block)",
                ));
            }
        };
        Ok(Target {
            id,
            type_name,
            address,
            meta,
        })
    }

    fn key(&self) -> ProviderKey {
        (self.address.to_string(), canonical(&self.meta))
    }
}

/// Turn error diagnostics into one error; warnings are logged.
fn check_diags(id: &str, what: &str, diags: &[Diagnostic]) -> PluginResult<()> {
    check_provider_diags(what, diags).map_err(|e| err(e.kind, id, e.message))
}

fn check_provider_diags(what: &str, diags: &[Diagnostic]) -> PluginResult<()> {
    for d in diags.iter().filter(|d| !d.error) {
        tracing::warn!("{what}: {d}");
    }
    let errors: Vec<String> = diags
        .iter()
        .filter(|d| d.error)
        .map(|d| d.to_string())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(PluginError::new(
            ErrorKind::Rejected,
            format!("{what}: {}", errors.join("; ")),
        ))
    }
}

fn rpc_error(id: &str, e: plugin::PluginError) -> PluginError {
    let e = plain_rpc_error(e);
    err(e.kind, id, e.message)
}

/// A protocol error as a plugin error, without naming a resource.
fn plain_rpc_error(e: plugin::PluginError) -> PluginError {
    let kind = match &e {
        plugin::PluginError::Rpc {
            transport: true, ..
        } => ErrorKind::Unavailable,
        plugin::PluginError::Rpc { .. } => ErrorKind::Rejected,
        plugin::PluginError::Start { .. } | plugin::PluginError::Handshake { .. } => {
            ErrorKind::Unavailable
        }
        plugin::PluginError::Schema(_) => ErrorKind::Internal,
    };
    PluginError::new(kind, e.to_string())
}

fn nil() -> Vec<u8> {
    cty::to_bytes(&rmpv::Value::Nil)
}

/// Decoded state: JSON without nulls, plus paths of unknown and sensitive values.
struct Decoded {
    json: Json,
    unknown: Vec<String>,
    sensitive: Vec<String>,
}

fn decode_state(id: &str, schema: &Schema, bytes: &[u8]) -> PluginResult<Option<Decoded>> {
    let mp = cty::from_bytes(bytes).map_err(|e| err(ErrorKind::Internal, id, e))?;
    if mp.is_nil() {
        return Ok(None);
    }
    let mut unknowns = Vec::new();
    let json = cty::decode(
        &schema.block.implied_type(),
        &mp,
        &FieldPath::root(),
        &mut unknowns,
    )
    .map_err(|e| err(ErrorKind::Internal, id, e))?;
    let sensitive = schema.block.sensitive_paths(&json);
    Ok(Some(Decoded {
        json: cty::strip_nulls(json),
        unknown: unknowns.iter().map(ToString::to_string).collect(),
        sensitive,
    }))
}

/// Whether a configuration still holds references the kernel could not resolve yet.
fn has_unresolved(value: &Json) -> bool {
    match value {
        Json::String(s) => s.starts_with(cty::UNKNOWN_MARKER),
        Json::Array(items) => items.iter().any(has_unresolved),
        Json::Object(map) => map.values().any(has_unresolved),
        _ => false,
    }
}

/// Whether the resource is a data source (`extensions.mode: data`).
fn is_data(resource: &Resource) -> bool {
    resource.extension_str(MODE) == Some("data")
}

/// Whether the resource asks for create-before-destroy replacements.
fn create_before_destroy(resource: &Resource) -> bool {
    resource
        .extensions
        .get(CREATE_BEFORE_DESTROY)
        .and_then(Json::as_bool)
        .unwrap_or(false)
}

fn resource_from(template: &Resource, json: Json) -> Resource {
    let attributes = match json {
        Json::Object(map) => map,
        _ => Map::new(),
    };
    Resource {
        id: template.id.clone(),
        resource_type: template.resource_type.clone(),
        attributes,
        depends_on: template.depends_on.clone(),
        extensions: template.extensions.clone(),
    }
}

impl Inner {
    fn settings(&self) -> Arc<Settings> {
        self.settings
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The running instance for a target, starting it on first use; a dead one is replaced.
    async fn instance(&self, target: &Target) -> PluginResult<Arc<Instance>> {
        loop {
            let cell = self
                .instances
                .lock()
                .await
                .entry(target.key())
                .or_default()
                .clone();
            let instance = match cell.get_or_init(|| self.start(target)).await {
                Ok(instance) => instance.clone(),
                Err(e) => return Err(err(e.kind, &target.id, &e.message)),
            };
            if !instance.provider.is_dead() {
                return Ok(instance);
            }
            // The process died (crash, kill): forget it and start a fresh one.
            let mut map = self.instances.lock().await;
            if map
                .get(&target.key())
                .is_some_and(|c| Arc::ptr_eq(c, &cell))
            {
                map.remove(&target.key());
            }
            drop(map);
            instance.provider.shutdown(Duration::from_millis(100)).await;
        }
    }

    /// Start, load the schema of and configure the provider for `target`. Errors name the
    /// provider, not the resource: they are shared by every resource the provider serves.
    async fn start(&self, target: &Target) -> PluginResult<Arc<Instance>> {
        let settings = self.settings();
        let address = target.address.clone();
        let started = Instant::now();
        let install_cfg = settings.install.clone();
        let addr = address.clone();
        let binary = tokio::task::spawn_blocking(move || install::install(&addr, &install_cfg))
            .await
            .map_err(|e| PluginError::internal(e.to_string()))?
            .map_err(|e| {
                let kind = if matches!(
                    e,
                    install::InstallError::NotFound { .. } | install::InstallError::BadAddress(_)
                ) {
                    ErrorKind::InvalidInput
                } else {
                    ErrorKind::Unavailable
                };
                PluginError::new(kind, e.to_string())
            })?;
        let log = (!settings.verbose).then(|| {
            settings.log_dir.join(format!(
                "terraform-provider-{}_{}.log",
                address.name, address.version
            ))
        });
        let provider = Provider::start(&binary, log.as_deref())
            .await
            .map_err(plain_rpc_error)?;
        tracing::debug!(provider = %address, pid = provider.pid, protocol = provider.protocol, elapsed = ?started.elapsed(), "provider started");
        let t = Instant::now();
        let (checksum, schema) = match self.schema(&settings, &binary, &provider).await {
            Ok(s) => s,
            Err(e) => {
                provider.shutdown(settings.grace).await;
                return Err(PluginError::new(
                    e.kind,
                    format!("provider {address}: {}", e.message),
                ));
            }
        };
        tracing::debug!(provider = %address, elapsed = ?t.elapsed(), "schema loaded");
        let instance = Arc::new(Instance {
            address,
            provider,
            schema,
            checksum,
        });
        if let Err(e) = self.configure_instance(&settings, &instance, target).await {
            instance.provider.shutdown(settings.grace).await;
            return Err(e);
        }
        tracing::debug!(provider = %instance.address, elapsed = ?started.elapsed(), "provider ready");
        Ok(instance)
    }

    /// Schema for a binary: memory, then the disk cache by checksum, then GetSchema.
    async fn schema(
        &self,
        settings: &Settings,
        binary: &Path,
        provider: &Provider,
    ) -> PluginResult<(String, Arc<ProviderSchema>)> {
        let schema_dir = settings.schema_dir.clone();
        let bin = binary.to_path_buf();
        let checksum =
            tokio::task::spawn_blocking(move || schema_cache::binary_checksum(&bin, &schema_dir))
                .await
                .map_err(|e| PluginError::internal(e.to_string()))?
                .map_err(|e| {
                    PluginError::new(
                        ErrorKind::Unavailable,
                        format!("hashing {}: {e}", binary.display()),
                    )
                })?;
        let mut schemas = self.schemas.lock().await;
        if let Some(s) = schemas.get(&checksum) {
            return Ok((checksum, s.clone()));
        }
        let dir = settings.schema_dir.clone();
        let sum = checksum.clone();
        let cached = tokio::task::spawn_blocking(move || schema_cache::load_cached(&dir, &sum))
            .await
            .ok()
            .flatten();
        let schema = match cached {
            Some(s) => s,
            None => {
                let (s, diags) = provider.get_schema().await.map_err(plain_rpc_error)?;
                check_provider_diags("reading the provider schema", &diags)?;
                if let Err(e) = schema_cache::store_cached(&settings.schema_dir, &checksum, &s) {
                    tracing::warn!("could not cache the provider schema: {e}");
                }
                s
            }
        };
        let schema = Arc::new(schema);
        schemas.insert(checksum.clone(), schema.clone());
        Ok((checksum, schema))
    }

    async fn configure_instance(
        &self,
        settings: &Settings,
        instance: &Instance,
        target: &Target,
    ) -> PluginResult<()> {
        let address = &instance.address;
        let config = instance
            .schema
            .provider
            .block
            .encode_config(&target.meta, false)
            .map_err(|e| {
                PluginError::invalid(format!("extensions.providerMeta for {address}: {e}"))
            })?;
        let config = cty::to_bytes(&config);
        let prepared = match schema_cache::load_validated(
            &settings.schema_dir,
            &instance.checksum,
            &config,
        ) {
            Some(prepared) => prepared,
            None => {
                let t = Instant::now();
                let (prepared, diags) = instance
                    .provider
                    .validate_provider_config(config.clone())
                    .await
                    .map_err(plain_rpc_error)?;
                tracing::debug!(provider = %address, elapsed = ?t.elapsed(), "provider configuration validated");
                check_provider_diags(&format!("provider {address} configuration"), &diags)?;
                let prepared = prepared.unwrap_or_default();
                if let Err(e) = schema_cache::store_validated(
                    &settings.schema_dir,
                    &instance.checksum,
                    &config,
                    &prepared,
                ) {
                    tracing::warn!("could not cache the provider configuration verdict: {e}");
                }
                prepared
            }
        };
        let t = Instant::now();
        let config = if prepared.is_empty() {
            config
        } else {
            prepared
        };
        let diags = instance
            .provider
            .configure(config)
            .await
            .map_err(plain_rpc_error)?;
        tracing::debug!(provider = %address, elapsed = ?t.elapsed(), "provider configured");
        check_provider_diags(&format!("configuring provider {address}"), &diags)
    }

    async fn resource_schema(&self, target: &Target) -> PluginResult<(Arc<Instance>, Arc<Schema>)> {
        let instance = self.instance(target).await?;
        let schema = instance
            .schema
            .resource(&target.type_name)
            .map_err(|e| {
                err(
                    ErrorKind::Internal,
                    &target.id,
                    format!(
                        "provider {} schema of {}: {e}",
                        instance.address, target.type_name
                    ),
                )
            })?
            .ok_or_else(|| {
                err(
                    ErrorKind::InvalidInput,
                    &target.id,
                    format!(
                        "provider {} has no resource type {:?}",
                        instance.address, target.type_name
                    ),
                )
            })?;
        Ok((instance, schema))
    }

    /// Whether a dry-run may answer "no change" without PlanResourceChange: this operation's
    /// read found the live object equal to the recorded state, and that state was applied from
    /// exactly these inputs (provider binary, provider configuration, schema version, resource
    /// configuration). The provider's plan of an object it produced from this configuration,
    /// unchanged since, is that same object (Terraform shows no change) unless the provider's
    /// plan consults something beyond its inputs (a remote lookup or the clock in a
    /// CustomizeDiff) or never converges (a perpetual diff, a provider bug). `alwaysPlan`
    /// turns the shortcut off for such providers.
    fn unchanged_since_apply(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        prior: &Resource,
        private: Option<&str>,
        config: &Json,
    ) -> bool {
        if self.settings().always_plan {
            return false;
        }
        let Some(envelope) = PrivateEnvelope::parse(private) else {
            return false;
        };
        if envelope.applied_from.is_empty()
            || envelope.applied_from != applied_from(instance, target, schema, config)
        {
            return false;
        }
        let fingerprint = state_fingerprint(&prior.attributes);
        self.refreshed_unchanged
            .lock()
            .is_ok_and(|map| map.get(&target.id) == Some(&fingerprint))
    }

    /// The prior state as msgpack of the current schema, and the provider's private bytes.
    /// State written with the current schema version is encoded locally; anything else goes
    /// through UpgradeResourceState.
    async fn prior_state(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        prior: &Resource,
        private: Option<&str>,
        force_upgrade: bool,
    ) -> PluginResult<(Vec<u8>, Vec<u8>)> {
        let (version, private) =
            PrivateEnvelope::decode(private).unwrap_or((schema.version, Vec::new()));
        let mut attributes = prior.attributes.clone();
        attributes.remove(DEPOSED_ATTRIBUTE);
        let json = Json::Object(attributes);
        if !force_upgrade && version == schema.version {
            // State that no longer fits the schema (e.g. recorded without a private envelope by
            // another provider version) is left to the provider's upgrade logic below.
            match schema.block.encode(&json, false) {
                Ok(mp) => return Ok((cty::to_bytes(&mp), private)),
                Err(e) => {
                    tracing::debug!(resource = %target.id, "prior state needs an upgrade: {e}")
                }
            }
        }
        let raw = serde_json::to_vec(&json).map_err(|e| err(ErrorKind::Internal, &target.id, e))?;
        let (upgraded, diags) = instance
            .provider
            .upgrade_state(&target.type_name, version, raw)
            .await
            .map_err(|e| rpc_error(&target.id, e))?;
        check_diags(&target.id, "upgrading the prior state", &diags)?;
        Ok((upgraded, private))
    }

    async fn apply(&self, req: ApplyRequest) -> PluginResult<ApplyResponse> {
        if is_data(&req.planned) {
            return self.apply_data(&req).await;
        }
        let target = Target::of(&req.planned)?;
        let (instance, schema) = self.resource_schema(&target).await?;
        let id = target.id.as_str();
        let mut deposed = PrivateEnvelope::deposed_of(req.prior_private.as_deref());
        if !req.dry_run && !deposed.is_empty() {
            // Objects left over from an earlier replacement go first; while one cannot be
            // deleted the apply fails and the state keeps recording it.
            let template = req.prior.as_ref().unwrap_or(&req.planned);
            deposed = self
                .destroy_deposed(&instance, &target, &schema, template, deposed)
                .await?;
        }
        let config_json = Json::Object(req.planned.attributes.clone());
        if req.dry_run
            && let Some(prior) = &req.prior
            && self.unchanged_since_apply(
                &instance,
                &target,
                &schema,
                prior,
                req.prior_private.as_deref(),
                &config_json,
            )
        {
            let mut attributes = prior.attributes.clone();
            attributes.remove(DEPOSED_ATTRIBUTE);
            let json = Json::Object(attributes);
            return Ok(ApplyResponse {
                sensitive_paths: schema.block.sensitive_paths(&json),
                resource: resource_from(&req.planned, json),
                private: req.prior_private.clone(),
                unknown_paths: Vec::new(),
                requires_replace: Vec::new(),
            });
        }
        let config = schema
            .block
            .encode_config(&config_json, req.dry_run)
            .map_err(|e| err(ErrorKind::InvalidInput, id, e))?;
        let config = cty::to_bytes(&config);
        let refreshed = match &req.prior {
            Some(p) => Some(
                self.refreshed_prior(&instance, &target, &schema, p, req.prior_private.as_deref())
                    .await?,
            ),
            None => None,
        };
        // Recorded but gone from the cloud: created anew, as Terraform does after a refresh.
        let mut creating = !matches!(refreshed, Some(Some(_)));
        let (mut prior, mut prior_private) =
            refreshed.flatten().unwrap_or_else(|| (nil(), Vec::new()));
        let intent = self.intent_path(&target);
        let adopting = req.planned.extension_str(IMPORT_ID).is_some();
        if creating && (adopting || (!req.dry_run && intent.exists())) {
            // Brownfield adoption (an import ID names an existing object), or an earlier create
            // of this resource was interrupted (the provider died mid-apply) so the object may
            // exist unrecorded: plan from the existing object instead of creating a new one.
            if let Some((state, private)) = self
                .adopt(&instance, &target, &schema, &req.planned)
                .await?
            {
                tracing::info!(resource = id, "planning from the existing object (adopted)");
                (prior, prior_private, creating) = (state, private, false);
            }
        }
        let mut plan = self
            .plan(
                &instance,
                &target,
                &schema,
                &prior,
                &config_json,
                &config,
                &prior_private,
                req.dry_run,
            )
            .await?;
        if creating {
            // Providers may name replace-forcing attributes on a create; nothing is replaced then.
            plan.requires_replace.clear();
        }
        if req.dry_run {
            let decoded = decode_state(id, &schema, &plan.planned_state)?.ok_or_else(|| {
                err(
                    ErrorKind::Rejected,
                    id,
                    "the provider planned no object for a resource that should exist",
                )
            })?;
            return Ok(ApplyResponse {
                resource: resource_from(&req.planned, decoded.json),
                private: req.prior_private.clone(),
                sensitive_paths: decoded.sensitive,
                unknown_paths: decoded.unknown,
                requires_replace: plan
                    .requires_replace
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            });
        }
        // With create-before-destroy, the object being replaced, deleted once its successor
        // exists.
        let mut replaced = None;
        if !plan.requires_replace.is_empty() {
            // The provider's plan decides only *that* a replace is needed: the new object is
            // planned from nothing. By default the old object goes first (names that must be
            // unique can be reused); with createBeforeDestroy both coexist for a moment.
            let old = (
                std::mem::replace(&mut prior, nil()),
                std::mem::take(&mut prior_private),
            );
            if create_before_destroy(&req.planned) {
                replaced = Some(old);
            } else {
                self.destroy(&instance, &target, old.0, old.1).await?;
            }
            creating = true;
            plan = self
                .plan(
                    &instance,
                    &target,
                    &schema,
                    &prior,
                    &config_json,
                    &config,
                    &[],
                    false,
                )
                .await?;
        }
        if !creating && replaced.is_none() {
            // Nothing to change (the kernel saw a difference the provider does not plan for,
            // e.g. deposed objects now deleted): like Terraform's no-op, apply nothing.
            let before = decode_state(id, &schema, &prior)?;
            let after = decode_state(id, &schema, &plan.planned_state)?;
            if let (Some(before), Some(after)) = (before, after)
                && before.json == after.json
                && after.unknown.is_empty()
            {
                let _ = std::fs::remove_file(&intent);
                return Ok(ApplyResponse {
                    resource: resource_from(&req.planned, after.json),
                    private: Some(PrivateEnvelope::full(
                        schema.version,
                        &prior_private,
                        Vec::new(),
                        applied_from(&instance, &target, &schema, &config_json),
                    )),
                    sensitive_paths: after.sensitive,
                    unknown_paths: Vec::new(),
                    requires_replace: Vec::new(),
                });
            }
        }
        if creating {
            // Journal the create so a re-run after a crash adopts instead of duplicating.
            if let Err(e) = schema_cache::write_atomic(&intent, id.as_bytes()) {
                tracing::warn!(resource = id, "could not record the create intent: {e}");
            }
        }
        let config_again = config.clone();
        let result = instance
            .provider
            .apply(
                &target.type_name,
                prior,
                plan.planned_state,
                config,
                plan.planned_private,
            )
            .await
            .map_err(|e| rpc_error(id, e));
        let result = match result {
            Ok(r) => r,
            Err(e) if creating => {
                let hint =
                    "the object may have been created; the next apply of this resource adopts it";
                return Err(PluginError::new(e.kind, format!("{} ({hint})", e.message)));
            }
            Err(e) => return Err(e),
        };
        // The provider answered. A failed create that still returned an object (created, but a
        // later step failed) keeps its journal entry so the re-run adopts that object.
        let partial = result.diagnostics.iter().any(|d| d.error)
            && !cty::from_bytes(&result.state).is_ok_and(|v| v.is_nil());
        if !partial {
            let _ = std::fs::remove_file(&intent);
        }
        check_diags(id, "applying", &result.diagnostics)?;
        let decoded = decode_state(id, &schema, &result.state)?.ok_or_else(|| {
            err(
                ErrorKind::Rejected,
                id,
                "the provider returned no object after apply",
            )
        })?;
        if !decoded.unknown.is_empty() {
            return Err(err(
                ErrorKind::Internal,
                id,
                format!(
                    "the provider left unknown values after apply: {}",
                    decoded.unknown.join(", ")
                ),
            ));
        }
        if let Some((old, old_private)) = replaced {
            // The new object exists and must be recorded; an old object that cannot be deleted
            // is recorded beside it as deposed, shown by the next preview and deleted by the
            // next apply or destroy.
            let old_json = decode_state(id, &schema, &old)?.map(|d| d.json);
            if let Err(e) = self
                .destroy(&instance, &target, old, old_private.clone())
                .await
            {
                let state = match old_json {
                    Some(Json::Object(map)) => map,
                    _ => Map::new(),
                };
                let object = DeposedObject {
                    schema_version: schema.version,
                    state,
                    private: B64.encode(&old_private),
                };
                tracing::warn!(
                    resource = id,
                    deposed = %object.label(deposed.len()),
                    "the replacement was created, but deleting the object it replaces failed; it is recorded as deposed and the next apply retries: {}",
                    e.message
                );
                deposed.push(object);
            }
        }
        // A later dry-run may skip planning only if planning this configuration over the
        // object just made shows no change. Where the apply does not converge (the API drops
        // or rewrites a configured value), every preview plans, as terraform's does, and shows
        // the difference.
        let converged = self
            .plan(
                &instance,
                &target,
                &schema,
                &result.state,
                &config_json,
                &config_again,
                &result.private,
                false,
            )
            .await
            .ok()
            .filter(|p| p.requires_replace.is_empty())
            .and_then(|p| decode_state(id, &schema, &p.planned_state).ok().flatten())
            .is_some_and(|p| p.unknown.is_empty() && p.json == decoded.json);
        if !converged {
            tracing::debug!(
                resource = id,
                "the applied object plans a further change; previews of it will always plan"
            );
        }
        let stamp = if converged {
            applied_from(&instance, &target, &schema, &config_json)
        } else {
            String::new()
        };
        let mut resource = resource_from(&req.planned, decoded.json);
        mark_deposed(&mut resource, &deposed);
        Ok(ApplyResponse {
            resource,
            private: Some(PrivateEnvelope::full(
                schema.version,
                &result.private,
                deposed,
                stamp,
            )),
            sensitive_paths: decoded.sensitive,
            unknown_paths: Vec::new(),
            requires_replace: plan
                .requires_replace
                .iter()
                .map(ToString::to_string)
                .collect(),
        })
    }

    async fn data_schema(&self, target: &Target) -> PluginResult<(Arc<Instance>, Arc<Schema>)> {
        let instance = self.instance(target).await?;
        let schema = instance
            .schema
            .data_source(&target.type_name)
            .map_err(|e| {
                err(
                    ErrorKind::Internal,
                    &target.id,
                    format!(
                        "provider {} schema of data source {}: {e}",
                        instance.address, target.type_name
                    ),
                )
            })?
            .ok_or_else(|| {
                err(
                    ErrorKind::InvalidInput,
                    &target.id,
                    format!(
                        "provider {} has no data source {:?}",
                        instance.address, target.type_name
                    ),
                )
            })?;
        Ok((instance, schema))
    }

    /// ReadDataSource for a configuration: the data source's current attributes.
    async fn read_data_source(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        config: &Json,
    ) -> PluginResult<Decoded> {
        let id = target.id.as_str();
        let config = schema
            .block
            .encode_config(config, false)
            .map_err(|e| err(ErrorKind::InvalidInput, id, e))?;
        let result = instance
            .provider
            .read_data_source(&target.type_name, cty::to_bytes(&config))
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "reading the data source", &result.diagnostics)?;
        decode_state(id, schema, &result.state)?
            .ok_or_else(|| err(ErrorKind::Rejected, id, "the provider read no data"))
    }

    /// A data source "applied": read it (also in a dry-run, reads change nothing). While its
    /// configuration still waits on other resources' values, a dry-run shows the attributes
    /// the provider computes as unknown.
    async fn apply_data(&self, req: &ApplyRequest) -> PluginResult<ApplyResponse> {
        let target = Target::of(&req.planned)?;
        let (instance, schema) = self.data_schema(&target).await?;
        let config = Json::Object(req.planned.attributes.clone());
        let pending = req.dry_run && has_unresolved(&config);
        if pending {
            // Still validate the shape; only unresolved references may be left.
            schema
                .block
                .encode_config(&config, true)
                .map_err(|e| err(ErrorKind::InvalidInput, &target.id, e))?;
            let unknown_paths = schema
                .block
                .attributes
                .iter()
                .filter(|(name, a)| a.computed && !req.planned.attributes.contains_key(*name))
                .map(|(name, _)| name.clone())
                .collect();
            return Ok(ApplyResponse {
                resource: req.planned.clone(),
                private: None,
                sensitive_paths: schema.block.sensitive_paths(&config),
                unknown_paths,
                requires_replace: Vec::new(),
            });
        }
        let read = self
            .read_data_source(&instance, &target, &schema, &config)
            .await?;
        Ok(ApplyResponse {
            resource: resource_from(&req.planned, read.json),
            private: None,
            sensitive_paths: read.sensitive,
            unknown_paths: read.unknown,
            requires_replace: Vec::new(),
        })
    }

    /// A data source refreshed: read again from its configuration (the planned resource, else
    /// the recorded one without the attributes only the provider sets).
    async fn read_data(&self, req: &ReadRequest) -> PluginResult<ReadResponse> {
        // Nothing recorded yet: the kernel plans a "create", whose apply is the first read.
        if req.prior.is_none() {
            return Ok(ReadResponse::default());
        }
        let Some(template) = req.planned.as_ref().or(req.prior.as_ref()) else {
            return Ok(ReadResponse::default());
        };
        let target = Target::of(template)?;
        let (instance, schema) = self.data_schema(&target).await?;
        let mut config = template.attributes.clone();
        if req.planned.is_none() {
            config.retain(|name, _| {
                schema
                    .block
                    .attributes
                    .get(name)
                    .is_none_or(|a| a.optional || a.required)
            });
        }
        let config = Json::Object(config);
        if has_unresolved(&config) {
            // References not resolved yet: nothing to read until the apply.
            return Ok(ReadResponse::default());
        }
        let read = self
            .read_data_source(&instance, &target, &schema, &config)
            .await?;
        Ok(ReadResponse {
            resource: Some(resource_from(template, read.json)),
            private: None,
            sensitive_paths: read.sensitive,
        })
    }

    fn intent_path(&self, target: &Target) -> PathBuf {
        let key = hex::encode(Sha256::digest(format!("{}\0{}", target.address, target.id)));
        self.settings().intent_dir.join(key)
    }

    /// Find the object an interrupted create may have left: import it by the explicit import
    /// ID, else by the identifying name in its configuration (`name`, or the attribute named
    /// like the type's last word: `bucket` for `aws_s3_bucket`), then read it.
    async fn adopt(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        planned: &Resource,
    ) -> PluginResult<Option<(Vec<u8>, Vec<u8>)>> {
        let suffix = target.type_name.rsplit('_').next().unwrap_or_default();
        let candidate = planned
            .extension_str(IMPORT_ID)
            .or_else(|| planned.attributes.get("name").and_then(Json::as_str))
            .or_else(|| planned.attributes.get(suffix).and_then(Json::as_str));
        let Some(import_id) = candidate else {
            return Ok(None);
        };
        let imported = instance
            .provider
            .import(&target.type_name, import_id)
            .await
            .map_err(|e| rpc_error(&target.id, e))?;
        if imported.diagnostics.iter().any(|d| d.error) {
            return Ok(None);
        }
        let Some((_, state, private)) = imported
            .resources
            .into_iter()
            .find(|(t, _, _)| t == &target.type_name)
        else {
            return Ok(None);
        };
        let read = instance
            .provider
            .read(&target.type_name, state, private)
            .await
            .map_err(|e| rpc_error(&target.id, e))?;
        if read.diagnostics.iter().any(|d| d.error)
            || decode_state(&target.id, schema, &read.state)?.is_none()
        {
            return Ok(None);
        }
        Ok(Some((read.state, read.private)))
    }

    #[allow(clippy::too_many_arguments)]
    async fn plan(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        prior: &[u8],
        config_json: &Json,
        config: &[u8],
        prior_private: &[u8],
        allow_unknown: bool,
    ) -> PluginResult<plugin::PlanResult> {
        let id = target.id.as_str();
        let prior_json = match decode_state(id, schema, prior)? {
            Some(d) => d.json,
            None => Json::Null,
        };
        let proposed = schema.block.proposed_new(&prior_json, config_json);
        let proposed = schema
            .block
            .encode(&proposed, allow_unknown)
            .map_err(|e| err(ErrorKind::InvalidInput, id, e))?;
        let plan = instance
            .provider
            .plan(
                &target.type_name,
                prior.to_vec(),
                cty::to_bytes(&proposed),
                config.to_vec(),
                prior_private.to_vec(),
            )
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "planning", &plan.diagnostics)?;
        Ok(plan)
    }

    /// Plan to null, then apply: how a provider deletes.
    async fn destroy(
        &self,
        instance: &Instance,
        target: &Target,
        prior: Vec<u8>,
        private: Vec<u8>,
    ) -> PluginResult<()> {
        let id = target.id.as_str();
        let plan = instance
            .provider
            .plan(&target.type_name, prior.clone(), nil(), nil(), private)
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "planning the delete", &plan.diagnostics)?;
        let result = instance
            .provider
            .apply(&target.type_name, prior, nil(), nil(), plan.planned_private)
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "deleting", &result.diagnostics)
    }

    /// Delete deposed objects: each is read first (one already gone is simply forgotten), then
    /// planned to null and applied. Fails naming every object that could not be deleted; they
    /// stay recorded in the state the kernel keeps on failure.
    async fn destroy_deposed(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        template: &Resource,
        deposed: Vec<DeposedObject>,
    ) -> PluginResult<Vec<DeposedObject>> {
        let mut failures = Vec::new();
        for (i, object) in deposed.iter().enumerate() {
            let label = object.label(i);
            let mut resource = template.clone();
            resource.attributes = object.state.clone();
            let private = serde_json::to_string(&PrivateEnvelope {
                schema_version: object.schema_version,
                private: object.private.clone(),
                deposed: Vec::new(),
                applied_from: String::new(),
            })
            .ok();
            let attempt = async {
                let (state, private) = self
                    .prior_state(
                        instance,
                        target,
                        schema,
                        &resource,
                        private.as_deref(),
                        false,
                    )
                    .await?;
                let live = instance
                    .provider
                    .read(&target.type_name, state, private)
                    .await
                    .map_err(|e| rpc_error(&target.id, e))?;
                check_diags(&target.id, "reading the deposed object", &live.diagnostics)?;
                if cty::from_bytes(&live.state).is_ok_and(|v| v.is_nil()) {
                    return Ok(());
                }
                self.destroy(instance, target, live.state, live.private)
                    .await
            };
            if let Err(e) = attempt.await {
                failures.push(format!("{label}: {}", e.message));
            }
        }
        if failures.is_empty() {
            return Ok(Vec::new());
        }
        Err(err(
            ErrorKind::Rejected,
            &target.id,
            format!(
                "deleting the deposed object(s) a create-before-destroy replacement left failed (they stay recorded; the next apply or destroy retries): {}",
                failures.join("; ")
            ),
        ))
    }

    async fn delete(&self, req: DeleteRequest) -> PluginResult<()> {
        if is_data(&req.resource) {
            // A data source owns nothing: forgetting it is all a delete means.
            return Ok(());
        }
        let target = Target::of(&req.resource)?;
        let (instance, schema) = self.resource_schema(&target).await?;
        let (prior, private) = self
            .prior_state(
                &instance,
                &target,
                &schema,
                &req.resource,
                req.private.as_deref(),
                false,
            )
            .await?;
        let deposed = PrivateEnvelope::deposed_of(req.private.as_deref());
        if !deposed.is_empty() {
            self.destroy_deposed(&instance, &target, &schema, &req.resource, deposed)
                .await?;
        }
        self.destroy(&instance, &target, prior, private).await
    }

    async fn read(&self, req: ReadRequest) -> PluginResult<ReadResponse> {
        if let Some(resource) = req.planned.as_ref().or(req.prior.as_ref())
            && is_data(resource)
        {
            return self.read_data(&req).await;
        }
        let Some(prior) = &req.prior else {
            // Nothing recorded: only an import ID can name an existing object to show.
            return match &req.planned {
                Some(planned) if planned.extension_str(IMPORT_ID).is_some() => {
                    self.import(ImportRequest {
                        planned: planned.clone(),
                        import_id: None,
                        timeout: None,
                    })
                    .await
                }
                _ => Ok(ReadResponse::default()),
            };
        };
        let target = Target::of(prior)?;
        let (instance, schema) = self.resource_schema(&target).await?;
        let (state, private) = self
            .prior_state(
                &instance,
                &target,
                &schema,
                prior,
                req.prior_private.as_deref(),
                false,
            )
            .await?;
        let (mut response, raw) = self
            .refresh(&instance, &target, &schema, prior, state, private)
            .await?;
        let fingerprint = state_fingerprint(&prior.attributes);
        let unchanged = response
            .resource
            .as_ref()
            .is_some_and(|live| state_fingerprint(&live.attributes) == fingerprint);
        if let Ok(mut map) = self.refreshed_unchanged.lock() {
            if unchanged {
                map.insert(target.id.clone(), fingerprint.clone());
            } else {
                map.remove(&target.id);
            }
        }
        if let Ok(mut map) = self.refreshed_drifted.lock() {
            if unchanged {
                map.remove(&target.id);
            } else {
                map.insert(target.id.clone(), (fingerprint, raw));
            }
        }
        // Deposed objects and the apply fingerprint belong to the resource, not to one read.
        let recorded = PrivateEnvelope::parse(req.prior_private.as_deref()).unwrap_or_default();
        if !recorded.deposed.is_empty() || !recorded.applied_from.is_empty() {
            // The live object carries the marker so a preview shows the pending deletes.
            if let Some(resource) = response.resource.as_mut() {
                mark_deposed(resource, &recorded.deposed);
            }
            let (version, bytes) = PrivateEnvelope::decode(response.private.as_deref())
                .unwrap_or((schema.version, Vec::new()));
            response.private = Some(PrivateEnvelope::full(
                version,
                &bytes,
                recorded.deposed,
                recorded.applied_from,
            ));
        }
        Ok(response)
    }

    /// ReadResource: the live object, and the provider's own encoding of it (`None`: gone).
    async fn refresh(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        template: &Resource,
        state: Vec<u8>,
        private: Vec<u8>,
    ) -> PluginResult<(ReadResponse, Option<RawState>)> {
        let id = target.id.as_str();
        let result = instance
            .provider
            .read(&target.type_name, state, private)
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "reading", &result.diagnostics)?;
        Ok(match decode_state(id, schema, &result.state)? {
            None => (ReadResponse::default(), None),
            Some(d) => (
                ReadResponse {
                    resource: Some(resource_from(template, d.json)),
                    private: Some(PrivateEnvelope::encode(schema.version, &result.private)),
                    sensitive_paths: d.sensitive,
                },
                Some((result.state, result.private)),
            ),
        })
    }

    /// The object a plan starts from: the live one, as Terraform refreshes before planning, so
    /// drift is planned away rather than planned from the recorded state (which would plan no
    /// change and apply nothing). This operation's read answers it when it was made for this
    /// recorded state; otherwise the provider reads it now. `None`: the object is gone.
    async fn refreshed_prior(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        prior: &Resource,
        private: Option<&str>,
    ) -> PluginResult<Option<RawState>> {
        let (state, private) = self
            .prior_state(instance, target, schema, prior, private, false)
            .await?;
        let fingerprint = state_fingerprint(&prior.attributes);
        if self
            .refreshed_unchanged
            .lock()
            .is_ok_and(|map| map.get(&target.id) == Some(&fingerprint))
        {
            return Ok(Some((state, private)));
        }
        if let Ok(map) = self.refreshed_drifted.lock()
            && let Some((recorded, raw)) = map.get(&target.id)
            && *recorded == fingerprint
        {
            return Ok(raw.clone());
        }
        let (_, raw) = self
            .refresh(instance, target, schema, prior, state, private)
            .await?;
        Ok(raw)
    }

    async fn import(&self, req: ImportRequest) -> PluginResult<ReadResponse> {
        let target = Target::of(&req.planned)?;
        if is_data(&req.planned) {
            return Err(err(
                ErrorKind::InvalidInput,
                &target.id,
                "a data source (extensions.mode: data) is read, not imported",
            ));
        }
        let import_id = req
            .import_id
            .clone()
            .or_else(|| req.planned.extension_str(IMPORT_ID).map(str::to_string))
            .ok_or_else(|| {
                err(
                    ErrorKind::InvalidInput,
                    &target.id,
                    format!("import needs an import ID (extensions.\"{IMPORT_ID}\")"),
                )
            })?;
        let (instance, schema) = self.resource_schema(&target).await?;
        let result = instance
            .provider
            .import(&target.type_name, &import_id)
            .await
            .map_err(|e| rpc_error(&target.id, e))?;
        check_diags(
            &target.id,
            &format!("importing {import_id:?}"),
            &result.diagnostics,
        )?;
        let Some((_, state, private)) = result
            .resources
            .into_iter()
            .find(|(t, _, _)| t == &target.type_name)
        else {
            return Ok(ReadResponse::default());
        };
        // Import answers may be partial; a read fills in the object as it is.
        self.refresh(&instance, &target, &schema, &req.planned, state, private)
            .await
            .map(|(response, _)| response)
    }

    async fn shutdown_all(&self) {
        let instances: Vec<_> = self
            .instances
            .lock()
            .await
            .drain()
            .map(|(_, v)| v)
            .collect();
        let grace = self.settings().grace;
        let mut tasks = Vec::new();
        for cell in instances {
            if let Some(Ok(instance)) = cell.get().cloned() {
                tasks.push(tokio::spawn(async move {
                    instance.provider.shutdown(grace).await
                }));
            }
        }
        for t in tasks {
            let _ = t.await;
        }
    }
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

/// The configuration that produces `state` under `block`, as `terraform plan
/// -generate-config-out` writes it: required and optional attributes with a value (an optional
/// and computed one keeps the value it has, so the plan stays empty), never attributes only the
/// provider sets, nor `id` (the SDK's implicit, provider-set identifier), nor what the schema
/// does not know (the runtime's own bookkeeping); nested blocks the same way, item by item.
fn configuration_of(block: &Block, state: &Map<String, Json>, top: bool) -> Map<String, Json> {
    let mut out = Map::new();
    for (name, value) in state {
        if value.is_null() || (top && name == "id") {
            continue;
        }
        if let Some(a) = block.attributes.get(name) {
            if !(a.required || a.optional) {
                continue;
            }
            let value = match &a.nested {
                Some(nested) => nested_configuration(nested, value),
                None => value.clone(),
            };
            out.insert(name.clone(), value);
        } else if let Some(nb) = block.block_types.get(name) {
            let item = |v: &Json| match v.as_object() {
                Some(map) => Json::Object(configuration_of(&nb.block, map, false)),
                None => v.clone(),
            };
            let value = match (nb.nesting, value) {
                (Nesting::List | Nesting::Set, Json::Array(items)) => {
                    if items.is_empty() {
                        continue;
                    }
                    Json::Array(items.iter().map(item).collect())
                }
                (Nesting::Map, Json::Object(items)) => {
                    Json::Object(items.iter().map(|(k, v)| (k.clone(), item(v))).collect())
                }
                _ => item(value),
            };
            out.insert(name.clone(), value);
        }
    }
    out
}

/// [`configuration_of`] for a protocol-6 nested attribute's value.
fn nested_configuration(nested: &cty::NestedAttributes, value: &Json) -> Json {
    let block = Block {
        attributes: nested.attributes.clone(),
        block_types: Default::default(),
    };
    let item = |v: &Json| match v.as_object() {
        Some(map) => Json::Object(configuration_of(&block, map, false)),
        None => v.clone(),
    };
    match (nested.nesting, value) {
        (Nesting::List | Nesting::Set, Json::Array(items)) => {
            Json::Array(items.iter().map(item).collect())
        }
        (Nesting::Map, Json::Object(items)) => {
            Json::Object(items.iter().map(|(k, v)| (k.clone(), item(v))).collect())
        }
        _ => item(value),
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

    fn resource(id: &str, extensions: Json) -> Resource {
        let mut r = Resource::new(id, RESOURCE_TYPE, Map::new());
        r.extensions = extensions.as_object().cloned().unwrap_or_default();
        r
    }

    #[test]
    fn targets_come_from_extensions_and_ids() {
        let r = resource(
            "hashicorp:aws:aws_s3_bucket:logs",
            json!({"provider": "registry.terraform.io/hashicorp/aws/5.100.0"}),
        );
        let t = Target::of(&r).unwrap();
        assert_eq!(t.type_name, "aws_s3_bucket");
        assert_eq!(t.meta, json!({}));
        let r = resource(
            "x",
            json!({"provider": "hashicorp/aws/5.100.0", "resourceType": "aws_vpc", "providerMeta": {"b": 1, "a": {"d": 2, "c": 3}}}),
        );
        let t = Target::of(&r).unwrap();
        assert_eq!(t.type_name, "aws_vpc");
        assert_eq!(
            t.key().1,
            r#"{"a":{"c":3,"d":2},"b":1}"#,
            "configurations compare regardless of key order"
        );

        let e = Target::of(&resource("a:b:c:d", json!({}))).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        assert_eq!(
            e.message,
            "a:b:c:d: extensions.provider (host/namespace/name/version) is missing"
        );
        let e =
            Target::of(&resource("bad", json!({"provider": "hashicorp/aws/1.0.0"}))).unwrap_err();
        assert!(
            e.message.starts_with("bad: no extensions.resourceType"),
            "{}",
            e.message
        );
        let e = Target::of(&resource("a:b:c:d", json!({"provider": "aws"}))).unwrap_err();
        assert!(
            e.message.contains("invalid provider address \"aws\""),
            "{}",
            e.message
        );
        let e = Target::of(&resource(
            "a:b:c:d",
            json!({"provider": "a/b/c", "providerMeta": "x"}),
        ))
        .unwrap_err();
        assert!(
            e.message.contains("providerMeta must be an object"),
            "{}",
            e.message
        );
    }

    #[test]
    fn private_envelope_round_trips() {
        let text = PrivateEnvelope::encode(3, b"\x00opaque");
        assert_eq!(
            PrivateEnvelope::decode(Some(&text)),
            Some((3, b"\x00opaque".to_vec()))
        );
        assert_eq!(PrivateEnvelope::decode(Some("not json")), None);
        assert_eq!(PrivateEnvelope::decode(None), None);
    }

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
                resource: resource("a:b:c:d", json!({})),
            })
            .err()
            .unwrap();
        assert_eq!(e.kind, ErrorKind::Unsupported);
    }
}
