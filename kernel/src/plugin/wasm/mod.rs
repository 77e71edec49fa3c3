//! The WASM plugin host: runtime, policy and function plugins as WebAssembly components
//! (`wasm32-wasip2`) implementing `sdk/wit/plugin.wit`. A runtime component is adapted to the
//! kernel's [`Runtime`] trait, so the rest of the kernel cannot tell it from a native one.
//!
//! Each call runs with a fuel budget (CPU), a memory cap and a wall-clock deadline (epoch
//! interruption, for time spent outside fuel-metered code); running out of any ends that call
//! with an error saying which limit was hit, and the instance is thrown away. WASI is linked so
//! ordinary Rust `std` code runs, but the context grants nothing by default: no preopened
//! directories, no environment variables, no sockets, no name lookups, no stdin. The effective
//! grants are what the plugin's manifest asks for AND the operator's configuration allows.
//!
//! Instances are reused between calls (instantiating per call would cost more than the call), from
//! a small pool so several threads can call one plugin at once; a fresh instance is configured
//! with the last configuration before first use. Imports are resolved once per plugin
//! (`InstancePre`), so a new instance costs only the instantiation itself.
//!
//! Outgoing HTTP (`wasi:http/outgoing-handler`) is linked for every component, but each request
//! is checked against the granted `host:port` pairs before anything connects; with no grant every
//! request is denied, and the call's error names the host that was refused.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kusion_sdk::abi::PluginKind;
use kusion_sdk::abi::wire;
use kusion_sdk::function::{FunctionPlugin, FunctionPluginInfo};
use kusion_sdk::policy::{Finding, PolicyPlugin, PolicyPluginInfo};
use kusion_sdk::runtime::{
    ApplyRequest, ApplyResponse, DeleteRequest, ImportRequest, ReadRequest, ReadResponse, Runtime,
    RuntimeInfo, Watch, WatchPoll, WatchRequest,
};
use kusion_sdk::{ABI_VERSION, AbiVersion, ErrorKind, Map, PluginError, PluginResult, Value};
use serde::Serialize;
use wasmtime::component::{Component, InstancePre, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::LoadError;
pub use super::grants::{WasmGrants, WasmLimits};

mod adapters;
mod sandbox;
use adapters::{WasmFunction, WasmPolicy, WasmRuntime, poisoned};
use sandbox::{Guest, STDERR_CAPACITY, Sandbox};

mod policy_bindings {
    wasmtime::component::bindgen!({ path: "../sdk/wit", world: "policy-plugin" });
}

mod function_bindings {
    wasmtime::component::bindgen!({ path: "../sdk/wit", world: "function-plugin" });
}

mod runtime_bindings {
    wasmtime::component::bindgen!({ path: "../sdk/wit", world: "runtime-plugin" });
}

/// How often the engine's epoch advances: the granularity of wall-clock deadlines.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The WIT package every plugin component exports from.
const WIT_PACKAGE: &str = "kusion:plugin";

/// One granted HTTP destination: a lower-case host name or IP (no brackets) and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HttpHost {
    host: String,
    port: u16,
}

impl HttpHost {
    /// `host:port` (IPv6 as `[::1]:port`); the port is required, so a grant is never wider than
    /// it reads.
    fn parse(text: &str) -> Result<HttpHost, String> {
        let bad = |why: &str| format!("granted HTTP host `{text}`: {why} (expected HOST:PORT)");
        let (host, port) = text.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains(['/', '@', ' ']) {
            return Err(bad("not a host name or IP address"));
        }
        Ok(HttpHost {
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl std::fmt::Display for HttpHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The `wasi:http` hooks of one instance: requests go out only to granted hosts; the others are
/// denied before any connection and remembered, so the call's error can name them.
struct HttpGate {
    allowed: Arc<[HttpHost]>,
    denied: Vec<String>,
}

impl wasmtime_wasi_http::WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<wasmtime_wasi_http::WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        use http_body_util::BodyExt;
        drop(fut);
        let uri = request.uri();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let target = HttpHost {
            host: uri
                .host()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase(),
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
        };
        if !self.allowed.contains(&target) {
            tracing::warn!(host = %target, "denied a WASM plugin's HTTP request to a host it was not granted");
            self.denied.push(target.to_string());
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        Box::new(async move {
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
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
        config.epoch_interruption(true);
        config.wasm_component_model(true);
        let engine = Engine::new(&config).map_err(|e| LoadError::Wasm {
            path: PathBuf::new(),
            detail: format!("{e:#}"),
        })?;
        start_epoch_ticker(&engine).map_err(|e| LoadError::Wasm {
            path: PathBuf::new(),
            detail: format!("cannot start the WASM deadline timer: {e}"),
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
        let key = hex::encode(digest);
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
        // Always linked, so a component importing wasi:http loads without a grant; each request is
        // checked against the grant (`HttpGate`).
        wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker)
            .map_err(|e| err(format!("{e:#}")))?;
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

/// Advance the engine's epoch every [`EPOCH_TICK`] while the engine lives. The thread holds only
/// a weak reference, so it ends once the last clone of the engine is dropped.
fn start_epoch_ticker(engine: &Engine) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("kusion-wasm-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })
        .map(drop)
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
            "runtime" => PluginKind::Runtime,
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
        "the component exports none of `{WIT_PACKAGE}/runtime`, `{WIT_PACKAGE}/policy` and `{WIT_PACKAGE}/function` (exports: {})",
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
    /// What kind of plugin the component is.
    pub fn kind(&self) -> PluginKind {
        self.kind
    }

    /// The plugin ABI it was built for.
    pub fn abi(&self) -> AbiVersion {
        self.abi
    }

    fn sandbox(&self, grants: WasmGrants, limits: WasmLimits) -> Result<Sandbox, LoadError> {
        // Check granted directories and hosts now, so a bad grant is a load error rather than a
        // call error.
        for host in grants.dirs.values() {
            if !host.is_dir() {
                return Err(LoadError::Wasm {
                    path: self.path.clone(),
                    detail: format!("granted directory {} does not exist", host.display()),
                });
            }
        }
        let http_hosts = grants
            .hosts
            .iter()
            .map(|h| HttpHost::parse(h))
            .collect::<Result<Arc<[HttpHost]>, String>>()
            .map_err(|detail| LoadError::Wasm {
                path: self.path.clone(),
                detail,
            })?;
        Ok(Sandbox {
            engine: self.engine.clone(),
            grants,
            http_hosts,
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
        let (mut pool, info): (_, PolicyPluginInfo) = self.described(
            grants,
            limits,
            |b: &policy_bindings::PolicyPlugin, store| {
                b.kusion_plugin_policy().call_describe(store)
            },
        )?;
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
        let (mut pool, info): (_, FunctionPluginInfo) = self.described(
            grants,
            limits,
            |b: &function_bindings::FunctionPlugin, store| {
                b.kusion_plugin_function().call_describe(store)
            },
        )?;
        pool.sandbox.label = info.module.clone();
        Ok(Arc::new(WasmFunction { pool, info }))
    }

    /// Instantiate as a runtime plugin, adapted to the kernel's [`Runtime`] trait.
    pub fn runtime(
        &self,
        grants: WasmGrants,
        limits: WasmLimits,
    ) -> Result<Arc<dyn Runtime>, LoadError> {
        if self.kind != PluginKind::Runtime {
            // Named by its interface: the author has to export that, whatever else is there.
            return Err(LoadError::Wasm {
                path: self.path.clone(),
                detail: format!(
                    "not a runtime plugin: the component does not export `{WIT_PACKAGE}/runtime` \
                     (world `runtime-plugin` of sdk/wit/plugin.wit); it is a {} plugin",
                    self.kind
                ),
            });
        }
        let (mut pool, info): (_, RuntimeInfo) = self.described(
            grants,
            limits,
            |b: &runtime_bindings::RuntimePlugin, store| {
                b.kusion_plugin_runtime().call_describe(store)
            },
        )?;
        if !ABI_VERSION.accepts(info.abi) {
            return Err(LoadError::AbiMismatch {
                path: self.path.clone(),
                plugin: info.abi,
                host: ABI_VERSION,
            });
        }
        pool.sandbox.label = info.name.clone();
        Ok(Arc::new(WasmRuntime {
            pool: Arc::new(pool),
            info,
        }))
    }

    /// A pool of instances as world `B` and the plugin's answer to `describe`, which every
    /// kind asks first; the pool's label is still the file name (the caller renames it).
    fn described<B: World, I: serde::de::DeserializeOwned>(
        &self,
        grants: WasmGrants,
        limits: WasmLimits,
        describe: impl FnOnce(&B, &mut Store<Guest>) -> wasmtime::Result<String> + Send,
    ) -> Result<(Pool<B>, I), LoadError> {
        let pool = self.pool(grants, limits)?;
        let info = pool
            .with("describe", Duration::ZERO, |b: &B, store| {
                describe(b, store).map(Ok)
            })
            .and_then(|text| wire::decode_answer(&pool.sandbox.label, "describe", &text))
            .map_err(|error| LoadError::Instantiate {
                path: self.path.clone(),
                error,
            })?;
        Ok((pool, info))
    }

    /// A pool of instances of this component as world `B`, its imports resolved once now.
    fn pool<B: World>(&self, grants: WasmGrants, limits: WasmLimits) -> Result<Pool<B>, LoadError> {
        let sandbox = self.sandbox(grants, limits)?;
        let pre = self
            .linker
            .instantiate_pre(&self.component)
            .and_then(B::pre)
            .map_err(|e| LoadError::Wasm {
                path: self.path.clone(),
                detail: format!("{e:#}"),
            })?;
        Ok(Pool::new(sandbox, pre))
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

/// A warm instance: its store, the typed exports, and which configuration it received.
struct Warm<B> {
    store: Store<Guest>,
    bindings: B,
    generation: u64,
}

/// Reusable instances of one plugin plus the configuration every new one must receive.
struct Pool<B: World> {
    sandbox: Sandbox,
    pre: B::Pre,
    idle: Mutex<Vec<Warm<B>>>,
    /// The latest configuration and its generation; instances configured with an older one are
    /// not returned to the pool.
    config: Mutex<(u64, Option<String>)>,
}

/// How to instantiate the world `B` and send it its configuration.
trait World: Sized + Send + Sync {
    /// The component with its imports resolved and its exports looked up, ready to instantiate.
    type Pre: Send + Sync;
    fn pre(pre: InstancePre<Guest>) -> wasmtime::Result<Self::Pre>;
    fn instantiate(store: &mut Store<Guest>, pre: &Self::Pre) -> wasmtime::Result<Self>;
    fn configure(
        &self,
        store: &mut Store<Guest>,
        config: &str,
    ) -> wasmtime::Result<Result<(), String>>;
}

/// `World` for one of the worlds `bindgen!` generated above: their types differ only in their
/// names and in the interface whose `configure` they export, and generated types share no
/// trait, so the impl is written once here and named three times below.
macro_rules! impl_world {
    ($world:ty, $pre:ty, $interface:ident) => {
        impl World for $world {
            type Pre = $pre;
            fn pre(pre: InstancePre<Guest>) -> wasmtime::Result<Self::Pre> {
                <$pre>::new(pre)
            }
            fn instantiate(store: &mut Store<Guest>, pre: &Self::Pre) -> wasmtime::Result<Self> {
                pre.instantiate(store)
            }
            fn configure(
                &self,
                store: &mut Store<Guest>,
                config: &str,
            ) -> wasmtime::Result<Result<(), String>> {
                self.$interface().call_configure(store, config)
            }
        }
    };
}

impl_world!(
    policy_bindings::PolicyPlugin,
    policy_bindings::PolicyPluginPre<Guest>,
    kusion_plugin_policy
);
impl_world!(
    runtime_bindings::RuntimePlugin,
    runtime_bindings::RuntimePluginPre<Guest>,
    kusion_plugin_runtime
);
impl_world!(
    function_bindings::FunctionPlugin,
    function_bindings::FunctionPluginPre<Guest>,
    kusion_plugin_function
);

/// Instances whose stderr grew past this are not reused (the pipe is bounded).
const STDERR_RECYCLE: usize = STDERR_CAPACITY / 2;

impl<B: World> Pool<B> {
    fn new(sandbox: Sandbox, pre: B::Pre) -> Self {
        Pool {
            sandbox,
            pre,
            idle: Mutex::new(Vec::new()),
            config: Mutex::new((0, None)),
        }
    }

    fn checkout(&self, verb: &str) -> PluginResult<Warm<B>> {
        if let Some(warm) = self.idle.lock().map_err(|_| poisoned())?.pop() {
            return Ok(warm);
        }
        let mut store = self.sandbox.store()?;
        let bindings = B::instantiate(&mut store, &self.pre)
            .map_err(|e| self.sandbox.trap_error(&store, verb, e))?;
        let (generation, config) = self.config.lock().map_err(|_| poisoned())?.clone();
        if let Some(config) = config {
            self.sandbox.budget(&mut store, Duration::ZERO)?;
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

    /// Run one call on a warm instance with a fresh budget. The outer error is a trap (or a
    /// failure to set the budget): the instance's state is undefined and it must be dropped. The
    /// inner result is the plugin's own answer.
    fn run<T: Send>(
        &self,
        warm: &mut Warm<B>,
        verb: &str,
        extra: Duration,
        call: impl FnOnce(&B, &mut Store<Guest>) -> wasmtime::Result<Result<T, String>> + Send,
    ) -> PluginResult<PluginResult<T>> {
        self.sandbox.budget(&mut warm.store, extra)?;
        warm.store.data_mut().gate.denied.clear();
        let Warm {
            store, bindings, ..
        } = warm;
        // wasmtime-wasi's synchronous host calls (files, clocks, sockets) block on a Tokio
        // runtime, which panics on a thread already driving one (kusionctl's async commands):
        // there the call runs on a thread of its own.
        let answer = if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|scope| {
                scope
                    .spawn(|| call(&*bindings, &mut *store))
                    .join()
                    .unwrap_or_else(|_| Err(wasmtime::Error::msg("the call's thread panicked")))
            })
        } else {
            call(&*bindings, &mut *store)
        };
        let denied = std::mem::take(&mut store.data_mut().gate.denied);
        let note = |mut e: PluginError| {
            if !denied.is_empty() {
                // The guest sees only `HTTP-request-denied`; the operator needs the host.
                e.message.push_str(&format!(
                    " (the host denied outgoing HTTP to {}: not granted to plugin `{}`; grant it in \
                     `plugins.settings.<name>.grants.hosts`)",
                    denied.join(", "),
                    self.sandbox.label
                ));
            }
            e
        };
        match answer {
            Ok(answer) => Ok(answer.map_err(|e| note(wire::decode_error(&self.sandbox.label, &e)))),
            Err(e) => Err(note(self.sandbox.trap_error(store, verb, e))),
        }
    }

    /// Return a healthy instance to the pool, unless it holds an old configuration or its
    /// stderr pipe is filling up.
    fn checkin(&self, warm: Warm<B>) {
        let current = self.config.lock().map(|c| c.0).unwrap_or(u64::MAX);
        if warm.generation == current
            && warm.store.data().stderr.contents().len() < STDERR_RECYCLE
            && let Ok(mut idle) = self.idle.lock()
        {
            idle.push(warm);
        }
    }

    /// One call on a pooled instance: a trapped instance is dropped, a healthy one goes back.
    fn with<T: Send>(
        &self,
        verb: &str,
        extra: Duration,
        call: impl FnOnce(&B, &mut Store<Guest>) -> wasmtime::Result<Result<T, String>> + Send,
    ) -> PluginResult<T> {
        let mut warm = self.checkout(verb)?;
        let answer = self.run(&mut warm, verb, extra, call)?;
        self.checkin(warm);
        answer
    }

    /// Configure: remembered for new instances, and applied to one now so errors surface.
    fn configure(&self, config: &Value) -> PluginResult<()> {
        let text = wire::encode_request("configure", config)?;
        let generation = {
            let mut config = self.config.lock().map_err(|_| poisoned())?;
            config.0 += 1;
            config.1 = Some(text.clone());
            config.0
        };
        // Idle instances hold the old configuration: drop them, except one never configured
        // (the one that answered `describe` at load), which is as good as a fresh one: configuring
        // it saves an instantiation, half of a start-up from the compiled cache.
        let idle = std::mem::take(&mut *self.idle.lock().map_err(|_| poisoned())?);
        let warm = match idle.into_iter().find(|w| w.generation == 0) {
            Some(mut warm) => {
                self.run(&mut warm, "configure", Duration::ZERO, |b, store| {
                    b.configure(store, &text)
                })??;
                warm.generation = generation;
                warm
            }
            // The pool is empty, so this makes a fresh instance, which receives the configuration.
            None => self.checkout("configure")?,
        };
        self.checkin(warm);
        Ok(())
    }
}
