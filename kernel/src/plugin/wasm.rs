//! The WASM plugin host: policy and function plugins as WebAssembly components (`wasm32-wasip2`)
//! implementing `sdk/wit/plugin.wit`.
//!
//! Each call runs with a fuel budget (CPU) and a memory cap; running out of either ends that call
//! with an error saying which limit was hit, and the instance is thrown away. WASI is linked so
//! ordinary Rust `std` code runs, but the context grants nothing by default: no preopened
//! directories, no environment variables, no sockets, no name lookups, no stdin. The effective
//! grants are what the plugin's manifest asks for AND the operator's configuration allows.
//!
//! Instances are reused between calls (instantiating per call would cost more than the call), from
//! a small pool so several threads can call one plugin at once; a fresh instance is configured
//! with the last configuration before first use.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kusion_sdk::abi::PluginKind;
use kusion_sdk::abi::wire;
use kusion_sdk::function::{FunctionPlugin, FunctionPluginInfo};
use kusion_sdk::policy::{Finding, PolicyPlugin, PolicyPluginInfo};
use kusion_sdk::{ABI_VERSION, AbiVersion, ErrorKind, Map, PluginError, PluginResult, Value};
use serde::{Deserialize, Serialize};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::LoadError;

mod policy_bindings {
    wasmtime::component::bindgen!({ path: "../sdk/wit", world: "policy-plugin" });
}

mod function_bindings {
    wasmtime::component::bindgen!({ path: "../sdk/wit", world: "function-plugin" });
}

/// The WIT package every plugin component exports from.
const WIT_PACKAGE: &str = "kusion:plugin";

/// Per-call limits of a WASM plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WasmLimits {
    /// Fuel per call; one unit is roughly one WebAssembly instruction.
    pub fuel: u64,
    /// Cap on the linear memory of one instance, in bytes.
    pub memory_bytes: usize,
}

impl Default for WasmLimits {
    fn default() -> Self {
        WasmLimits {
            fuel: 2_000_000_000,
            memory_bytes: 64 << 20,
        }
    }
}

/// What a WASM plugin may reach outside its sandbox. Used both for what a manifest asks and for
/// what the operator grants; the plugin gets the intersection ([`WasmGrants::intersect`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WasmGrants {
    /// Guest directory -> host directory. In a manifest the host side is ignored (only the guest
    /// path is asked for); in the operator's grant it says where the guest path points.
    pub dirs: BTreeMap<String, PathBuf>,
    /// Whether granted directories are writable (both sides must say so).
    pub writable: bool,
    /// Environment variable names passed through from the kernel's environment.
    pub env: Vec<String>,
    /// Outbound TCP/UDP and name lookups.
    pub network: bool,
}

impl WasmGrants {
    /// What a plugin gets: asked for by its manifest and granted by the operator.
    pub fn intersect(asked: &WasmGrants, granted: &WasmGrants) -> WasmGrants {
        WasmGrants {
            dirs: asked
                .dirs
                .keys()
                .filter_map(|guest| {
                    granted
                        .dirs
                        .get(guest)
                        .map(|host| (guest.clone(), host.clone()))
                })
                .collect(),
            writable: asked.writable && granted.writable,
            env: asked
                .env
                .iter()
                .filter(|v| granted.env.contains(v))
                .cloned()
                .collect(),
            network: asked.network && granted.network,
        }
    }
}

/// One engine for all WASM plugins (compiled code and fuel accounting).
#[derive(Clone)]
pub struct WasmHost {
    engine: Engine,
    /// Where compiled components are kept between runs; `None` compiles every time.
    cache_dir: Option<PathBuf>,
}

/// The default compiled-component cache: `$KUSION_CACHE/wasm`, else
/// `$XDG_CACHE_HOME/kusion-rs/wasm`, else `~/.cache/kusion-rs/wasm`.
pub fn default_wasm_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("KUSION_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("kusion-rs")))
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("kusion-rs"))
        })?;
    Some(base.join("wasm"))
}

impl WasmHost {
    /// A host caching compiled components in [`default_wasm_cache_dir`].
    pub fn new() -> Result<WasmHost, LoadError> {
        Self::with_cache(default_wasm_cache_dir())
    }

    /// A host caching compiled components in `cache_dir` (`None`: no cache).
    pub fn with_cache(cache_dir: Option<PathBuf>) -> Result<WasmHost, LoadError> {
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        config.wasm_component_model(true);
        let engine = Engine::new(&config).map_err(|e| LoadError::Wasm {
            path: PathBuf::new(),
            detail: format!("{e:#}"),
        })?;
        Ok(WasmHost { engine, cache_dir })
    }

    /// The cache file for a component: keyed by the component's bytes and by everything that
    /// makes compiled code valid for this engine (wasmtime version, target, settings), so a
    /// rebuilt plugin or an upgraded kusionctl never picks up stale code.
    fn cache_path(&self, wasm: &[u8]) -> Option<PathBuf> {
        use sha2::{Digest, Sha256};
        use std::hash::{Hash, Hasher};
        let dir = self.cache_dir.as_ref()?;
        let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut engine_hash);
        let digest = Sha256::digest(wasm);
        let key: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        Some(dir.join(format!("{key}-{:016x}.cwasm", engine_hash.finish())))
    }

    /// Load a component, from the compiled cache when it holds this exact component.
    fn load_component(&self, path: &Path) -> Result<(Component, bool), String> {
        let wasm = std::fs::read(path).map_err(|e| e.to_string())?;
        let Some(cached) = self.cache_path(&wasm) else {
            return Component::new(&self.engine, &wasm)
                .map(|c| (c, false))
                .map_err(|e| format!("{e:#}"));
        };
        // Read into memory rather than mapping the file: another run may replace or damage the
        // file while this one is using the code.
        if let Ok(bytes) = std::fs::read(&cached) {
            // SAFETY: the file is one this host wrote with `Engine::precompile_component` for an
            // engine with the same compatibility hash (part of the name), in the operator's own
            // cache directory; wasmtime still checks its header and refuses a mismatch.
            match unsafe { Component::deserialize(&self.engine, &bytes) } {
                Ok(component) => return Ok((component, true)),
                Err(e) => {
                    tracing::warn!(file = %cached.display(), "ignoring a bad compiled-plugin cache entry: {e:#}");
                    let _ = std::fs::remove_file(&cached);
                }
            }
        }
        let compiled = self
            .engine
            .precompile_component(&wasm)
            .map_err(|e| format!("{e:#}"))?;
        // A failure to write the cache costs the next run a compile, nothing else.
        if let Some(dir) = cached.parent()
            && std::fs::create_dir_all(dir).is_ok()
        {
            let tmp = dir.join(format!(".{}.tmp", std::process::id()));
            if std::fs::write(&tmp, &compiled).is_ok() && std::fs::rename(&tmp, &cached).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        // SAFETY: `compiled` was produced just now by this engine.
        let component = unsafe { Component::deserialize(&self.engine, &compiled) }
            .map_err(|e| format!("{e:#}"))?;
        Ok((component, false))
    }

    /// Compile a component (or take it from the compiled cache) and check what it exports: its
    /// kind and its contract version.
    pub fn compile(&self, path: &Path) -> Result<WasmModule, LoadError> {
        self.compile_reporting_cache(path).map(|(module, _)| module)
    }

    /// [`WasmHost::compile`], also saying whether the compiled cache was used.
    pub fn compile_reporting_cache(&self, path: &Path) -> Result<(WasmModule, bool), LoadError> {
        let err = |detail: String| LoadError::Wasm {
            path: path.to_path_buf(),
            detail,
        };
        let (component, from_cache) = self.load_component(path).map_err(err)?;
        let (kind, abi) =
            exported_contract(&self.engine, &component).map_err(|detail| match detail {
                ContractError::Mismatch(plugin) => LoadError::AbiMismatch {
                    path: path.to_path_buf(),
                    plugin,
                    host: ABI_VERSION,
                },
                ContractError::Other(detail) => err(detail),
            })?;
        let mut linker = Linker::<Guest>::new(&self.engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| err(format!("{e:#}")))?;
        Ok((
            WasmModule {
                engine: self.engine.clone(),
                component,
                linker,
                kind,
                abi,
                path: path.to_path_buf(),
            },
            from_cache,
        ))
    }
}

enum ContractError {
    Mismatch(AbiVersion),
    Other(String),
}

/// Find `kusion:plugin/<kind>@<version>` among the component's exports.
fn exported_contract(
    engine: &Engine,
    component: &Component,
) -> Result<(PluginKind, AbiVersion), ContractError> {
    let ty = component.component_type();
    let mut names = Vec::new();
    for (name, _) in ty.exports(engine) {
        names.push(name.to_string());
        let Some(rest) = name
            .strip_prefix(WIT_PACKAGE)
            .and_then(|r| r.strip_prefix('/'))
        else {
            continue;
        };
        let (iface, version) = rest.split_once('@').unwrap_or((rest, ""));
        let kind = match iface {
            "policy" => PluginKind::Policy,
            "function" => PluginKind::Function,
            _ => continue,
        };
        let mut parts = version.split('.').map(|p| p.parse::<u32>());
        let (Some(Ok(major)), Some(Ok(minor))) = (parts.next(), parts.next()) else {
            return Err(ContractError::Other(format!(
                "export `{name}` carries no valid version"
            )));
        };
        let abi = AbiVersion { major, minor };
        if !ABI_VERSION.accepts(abi) {
            return Err(ContractError::Mismatch(abi));
        }
        return Ok((kind, abi));
    }
    Err(ContractError::Other(format!(
        "the component exports neither `{WIT_PACKAGE}/policy` nor `{WIT_PACKAGE}/function` (exports: {})",
        names.join(", ")
    )))
}

/// A compiled plugin component, ready to be instantiated with some grants and limits. Cloning
/// is cheap (the compiled code is shared).
#[derive(Clone)]
pub struct WasmModule {
    engine: Engine,
    component: Component,
    linker: Linker<Guest>,
    kind: PluginKind,
    abi: AbiVersion,
    path: PathBuf,
}

impl WasmModule {
    pub fn kind(&self) -> PluginKind {
        self.kind
    }

    pub fn abi(&self) -> AbiVersion {
        self.abi
    }

    fn sandbox(&self, grants: WasmGrants, limits: WasmLimits) -> Result<Sandbox, LoadError> {
        // Check granted directories now, so a bad grant is a load error rather than a call error.
        for host in grants.dirs.values() {
            if !host.is_dir() {
                return Err(LoadError::Wasm {
                    path: self.path.clone(),
                    detail: format!("granted directory {} does not exist", host.display()),
                });
            }
        }
        Ok(Sandbox {
            engine: self.engine.clone(),
            component: self.component.clone(),
            linker: self.linker.clone(),
            grants,
            limits,
            label: self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        })
    }

    /// Instantiate as a policy plugin.
    pub fn policy(
        &self,
        grants: WasmGrants,
        limits: WasmLimits,
    ) -> Result<Arc<dyn PolicyPlugin>, LoadError> {
        self.expect(PluginKind::Policy)?;
        let mut pool = Pool::new(self.sandbox(grants, limits)?);
        let info: PolicyPluginInfo = pool
            .with("describe", |b: &policy_bindings::PolicyPlugin, store| {
                b.kusion_plugin_policy().call_describe(store).map(Ok)
            })
            .and_then(|text| wire::decode_answer(&pool.sandbox.label, "describe", &text))
            .map_err(|error| LoadError::Instantiate {
                path: self.path.clone(),
                error,
            })?;
        pool.sandbox.label = info.name.clone();
        Ok(Arc::new(WasmPolicy { pool, info }))
    }

    /// Instantiate as a KCL function plugin.
    pub fn function(
        &self,
        grants: WasmGrants,
        limits: WasmLimits,
    ) -> Result<Arc<dyn FunctionPlugin>, LoadError> {
        self.expect(PluginKind::Function)?;
        let mut pool = Pool::new(self.sandbox(grants, limits)?);
        let info: FunctionPluginInfo = pool
            .with(
                "describe",
                |b: &function_bindings::FunctionPlugin, store| {
                    b.kusion_plugin_function().call_describe(store).map(Ok)
                },
            )
            .and_then(|text| wire::decode_answer(&pool.sandbox.label, "describe", &text))
            .map_err(|error| LoadError::Instantiate {
                path: self.path.clone(),
                error,
            })?;
        pool.sandbox.label = info.module.clone();
        Ok(Arc::new(WasmFunction { pool, info }))
    }

    fn expect(&self, expected: PluginKind) -> Result<(), LoadError> {
        if self.kind != expected {
            return Err(LoadError::WrongKind {
                path: self.path.clone(),
                found: self.kind,
                expected,
            });
        }
        Ok(())
    }
}

/// Store data of one instance: WASI state, the limiter and captured stderr.
struct Guest {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    stderr: MemoryOutputPipe,
}

impl WasiView for Guest {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// `StoreLimits` plus a note of whether a memory limit was hit, so the error can say so.
struct Limiter {
    limits: StoreLimits,
    memory_cap: usize,
    memory_hit: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum);
        if !matches!(allowed, Ok(true)) {
            self.memory_hit = true;
        }
        allowed
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }
    fn tables(&self) -> usize {
        self.limits.tables()
    }
    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

/// Bytes of guest stderr kept per instance (panic messages end up here).
const STDERR_CAPACITY: usize = 256 << 10;

struct Sandbox {
    engine: Engine,
    component: Component,
    linker: Linker<Guest>,
    grants: WasmGrants,
    limits: WasmLimits,
    /// Plugin name for messages.
    label: String,
}

impl Sandbox {
    fn store(&self) -> PluginResult<Store<Guest>> {
        let mut wasi = WasiCtxBuilder::new();
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        wasi.stderr(stderr.clone());
        for (guest, host) in &self.grants.dirs {
            let perms = if self.grants.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            wasi.preopened_dir(host, guest, perms).map_err(|e| {
                PluginError::internal(format!(
                    "plugin `{}`: cannot open granted directory {}: {e:#}",
                    self.label,
                    host.display()
                ))
            })?;
        }
        for name in &self.grants.env {
            if let Ok(value) = std::env::var(name) {
                wasi.env(name, value);
            }
        }
        if self.grants.network {
            wasi.inherit_network();
            wasi.allow_ip_name_lookup(true);
        }
        let limiter = Limiter {
            limits: StoreLimitsBuilder::new()
                .memory_size(self.limits.memory_bytes)
                .instances(64)
                .memories(8)
                .tables(64)
                .build(),
            memory_cap: self.limits.memory_bytes,
            memory_hit: false,
        };
        let mut store = Store::new(
            &self.engine,
            Guest {
                wasi: wasi.build(),
                table: ResourceTable::new(),
                limiter,
                stderr,
            },
        );
        store.limiter(|guest| &mut guest.limiter);
        // Instantiation runs start functions and data initialisers: it gets a budget too.
        store
            .set_fuel(self.limits.fuel)
            .map_err(|e| PluginError::internal(format!("{e:#}")))?;
        Ok(store)
    }

    /// Turn a wasmtime error of one call into a `PluginError` saying what happened.
    fn trap_error(&self, store: &Store<Guest>, verb: &str, error: wasmtime::Error) -> PluginError {
        let plugin = &self.label;
        if store.data().limiter.memory_hit {
            let mib = store.data().limiter.memory_cap as f64 / (1024.0 * 1024.0);
            return PluginError::internal(format!(
                "plugin `{plugin}` exceeded its memory limit ({mib:.1} MiB) in `{verb}`"
            ));
        }
        if error.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
            let mut e = PluginError::new(
                ErrorKind::Timeout,
                format!(
                    "plugin `{plugin}` ran out of fuel ({} units) in `{verb}`",
                    self.limits.fuel
                ),
            );
            // The same call would burn the same fuel again.
            e.retryable = false;
            return e;
        }
        let stderr = store.data().stderr.contents();
        let stderr = String::from_utf8_lossy(&stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let mut message = format!("plugin `{plugin}` failed in `{verb}`: {error:#}");
        if !tail.is_empty() {
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            message.push_str(&format!(" (stderr: {})", tail.join(" | ")));
        }
        PluginError::internal(message)
    }
}

/// A warm instance: its store, the typed exports, and which configuration it received.
struct Warm<B> {
    store: Store<Guest>,
    bindings: B,
    generation: u64,
}

/// Reusable instances of one plugin plus the configuration every new one must receive.
struct Pool<B> {
    sandbox: Sandbox,
    idle: Mutex<Vec<Warm<B>>>,
    /// The latest configuration and its generation; instances configured with an older one are
    /// not returned to the pool.
    config: Mutex<(u64, Option<String>)>,
}

/// How to instantiate the world `B` and send it its configuration.
trait World: Sized {
    fn instantiate(
        store: &mut Store<Guest>,
        component: &Component,
        linker: &Linker<Guest>,
    ) -> wasmtime::Result<Self>;
    fn configure(
        &self,
        store: &mut Store<Guest>,
        config: &str,
    ) -> wasmtime::Result<Result<(), String>>;
}

impl World for policy_bindings::PolicyPlugin {
    fn instantiate(
        store: &mut Store<Guest>,
        component: &Component,
        linker: &Linker<Guest>,
    ) -> wasmtime::Result<Self> {
        policy_bindings::PolicyPlugin::instantiate(store, component, linker)
    }
    fn configure(
        &self,
        store: &mut Store<Guest>,
        config: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        self.kusion_plugin_policy().call_configure(store, config)
    }
}

impl World for function_bindings::FunctionPlugin {
    fn instantiate(
        store: &mut Store<Guest>,
        component: &Component,
        linker: &Linker<Guest>,
    ) -> wasmtime::Result<Self> {
        function_bindings::FunctionPlugin::instantiate(store, component, linker)
    }
    fn configure(
        &self,
        store: &mut Store<Guest>,
        config: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        self.kusion_plugin_function().call_configure(store, config)
    }
}

/// Instances whose stderr grew past this are not reused (the pipe is bounded).
const STDERR_RECYCLE: usize = STDERR_CAPACITY / 2;

impl<B: World> Pool<B> {
    fn new(sandbox: Sandbox) -> Self {
        Pool {
            sandbox,
            idle: Mutex::new(Vec::new()),
            config: Mutex::new((0, None)),
        }
    }

    fn checkout(&self, verb: &str) -> PluginResult<Warm<B>> {
        if let Some(warm) = self.idle.lock().map_err(|_| poisoned())?.pop() {
            return Ok(warm);
        }
        let mut store = self.sandbox.store()?;
        let bindings = B::instantiate(&mut store, &self.sandbox.component, &self.sandbox.linker)
            .map_err(|e| self.sandbox.trap_error(&store, verb, e))?;
        let (generation, config) = self.config.lock().map_err(|_| poisoned())?.clone();
        if let Some(config) = config {
            store
                .set_fuel(self.sandbox.limits.fuel)
                .map_err(|e| PluginError::internal(format!("{e:#}")))?;
            match bindings.configure(&mut store, &config) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(wire::decode_error(&self.sandbox.label, &e)),
                Err(e) => return Err(self.sandbox.trap_error(&store, "configure", e)),
            }
        }
        Ok(Warm {
            store,
            bindings,
            generation,
        })
    }

    /// Run one call on a warm instance with a fresh fuel budget. A trapped instance is dropped
    /// (its state is undefined after a trap); a healthy one goes back to the pool.
    fn with<T>(
        &self,
        verb: &str,
        call: impl FnOnce(&B, &mut Store<Guest>) -> wasmtime::Result<Result<T, String>>,
    ) -> PluginResult<T> {
        let mut warm = self.checkout(verb)?;
        warm.store
            .set_fuel(self.sandbox.limits.fuel)
            .map_err(|e| PluginError::internal(format!("{e:#}")))?;
        match call(&warm.bindings, &mut warm.store) {
            Ok(answer) => {
                let current = self.config.lock().map(|c| c.0).unwrap_or(u64::MAX);
                if warm.generation == current
                    && warm.store.data().stderr.contents().len() < STDERR_RECYCLE
                    && let Ok(mut idle) = self.idle.lock()
                {
                    idle.push(warm);
                }
                answer.map_err(|e| wire::decode_error(&self.sandbox.label, &e))
            }
            Err(e) => Err(self.sandbox.trap_error(&warm.store, verb, e)),
        }
    }

    /// Configure: remembered for new instances, and applied to one now so errors surface.
    fn configure(&self, config: &Value) -> PluginResult<()> {
        let text = wire::encode_request("configure", config)?;
        {
            let mut config = self.config.lock().map_err(|_| poisoned())?;
            config.0 += 1;
            config.1 = Some(text);
        }
        // Idle instances hold the old configuration: drop them.
        self.idle.lock().map_err(|_| poisoned())?.clear();
        // The pool is empty, so this makes a fresh instance, which receives the configuration.
        let warm = self.checkout("configure")?;
        self.idle.lock().map_err(|_| poisoned())?.push(warm);
        Ok(())
    }
}

fn poisoned() -> PluginError {
    PluginError::internal("WASM plugin pool lock poisoned")
}

struct WasmPolicy {
    pool: Pool<policy_bindings::PolicyPlugin>,
    info: PolicyPluginInfo,
}

impl PolicyPlugin for WasmPolicy {
    fn describe(&self) -> PolicyPluginInfo {
        self.info.clone()
    }
    fn configure(&self, config: &Value) -> PluginResult<()> {
        self.pool.configure(config)
    }
    fn evaluate(&self, spec: &Value, context: &Value) -> PluginResult<Vec<Finding>> {
        let spec = wire::encode_request("evaluate", spec)?;
        let context = wire::encode_request("evaluate", context)?;
        let text = self.pool.with("evaluate", |b, store| {
            b.kusion_plugin_policy()
                .call_evaluate(store, &spec, &context)
        })?;
        wire::decode_answer(&self.pool.sandbox.label, "evaluate", &text)
    }
}

struct WasmFunction {
    pool: Pool<function_bindings::FunctionPlugin>,
    info: FunctionPluginInfo,
}

impl FunctionPlugin for WasmFunction {
    fn describe(&self) -> FunctionPluginInfo {
        self.info.clone()
    }
    fn configure(&self, config: &Value) -> PluginResult<()> {
        self.pool.configure(config)
    }
    fn call(
        &self,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> PluginResult<Value> {
        let args = wire::encode_request("call", args)?;
        let kwargs = wire::encode_request("call", kwargs)?;
        let verb = format!("call {function}");
        let text = self.pool.with(&verb, |b, store| {
            b.kusion_plugin_function()
                .call_call(store, function, &args, &kwargs)
        })?;
        wire::decode_answer(&self.pool.sandbox.label, &verb, &text)
    }
}
