//! The native plugin host: loads a `cdylib` built with `kusion-sdk`'s export macros and hands
//! back `Arc<dyn Runtime>` / `Arc<dyn FunctionPlugin>` / `Arc<dyn PolicyPlugin>`.
//!
//! Loading checks, in order: the library opens; it exports a `PluginDecl` with the right magic;
//! its declared ABI is accepted by this host (same major, minor not newer), else it is refused
//! naming both versions; `abi_stable` accepts its root module (version and type layout). A
//! library that passed stays mapped for the life of the process (`abi_stable` keeps `'static`
//! references into it); dropping the last handle to an instance destroys that instance inside
//! the plugin. A refused library is closed again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use abi_stable::library::{LibHeader, RawLibrary, RootModule, lib_header_from_raw_library};
use abi_stable::std_types::{RResult, RStr};
use kusion_sdk::abi::PluginKind;
use kusion_sdk::abi::native::{
    DECL_MAGIC, DECL_SYMBOL, HANDLE_VERB, MSGPACK_SYMBOL, MsgpackCallFn, PluginDecl,
    PluginModuleRef, RawPluginBox, RawWatchBox,
};
use kusion_sdk::abi::wire::{self, CallRef, Encoding, EvaluateRef, verb};
use kusion_sdk::function::{FunctionPlugin, FunctionPluginInfo};
use kusion_sdk::policy::{Finding, PolicyPlugin, PolicyPluginInfo};
use kusion_sdk::runtime::{
    ApplyRequest, ApplyResponse, DeleteRequest, ImportRequest, OperateRequest, OperateResponse,
    OperationInfo, ReadRequest, ReadResponse, Runtime, RuntimeInfo, Watch, WatchPoll, WatchRequest,
};
use kusion_sdk::{ABI_VERSION, AbiVersion, Map, PluginError, PluginResult, Value};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::LoadError;

/// A native plugin library whose declaration and layout were accepted.
pub struct NativeLibrary {
    path: PathBuf,
    kind: PluginKind,
    abi: AbiVersion,
    module: PluginModuleRef,
    /// The ABI 1.1 MessagePack entry point, when the library declares 1.1+ and exports it.
    msgpack: Option<MsgpackCallFn>,
}

impl std::fmt::Debug for NativeLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeLibrary")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("abi", &self.abi)
            .finish()
    }
}

/// Read a library's declaration without loading anything else from it.
fn read_decl(path: &Path, lib: &RawLibrary) -> Result<PluginDecl, LoadError> {
    // SAFETY: the symbol is a `static PluginDecl` (frozen `repr(C)` integers) when the magic
    // matches; anything else with this exported name is rejected by the magic check below.
    let decl = unsafe {
        match lib.get::<*const PluginDecl>(DECL_SYMBOL) {
            Ok(sym) => **sym,
            Err(_) => {
                return Err(LoadError::NotAPlugin {
                    path: path.to_path_buf(),
                    detail: "it exports no `kusion_plugin_decl` (was it built with a kusion_sdk export macro?)".into(),
                });
            }
        }
    };
    if decl.magic != DECL_MAGIC {
        return Err(LoadError::NotAPlugin {
            path: path.to_path_buf(),
            detail: "its `kusion_plugin_decl` has the wrong magic bytes".into(),
        });
    }
    Ok(decl)
}

impl NativeLibrary {
    /// Open and check a plugin library. This runs the library's constructors: call it only on
    /// a file whose manifest, checksum and ownership were checked first (as `load_plugins`
    /// does), or on a library built here.
    pub fn open(path: &Path) -> Result<Arc<NativeLibrary>, LoadError> {
        let lib = RawLibrary::load_at(path).map_err(|e| LoadError::Open {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        let decl = read_decl(path, &lib)?;
        let abi = decl.abi();
        if !ABI_VERSION.accepts(abi) {
            return Err(LoadError::AbiMismatch {
                path: path.to_path_buf(),
                plugin: abi,
                host: ABI_VERSION,
            });
        }
        let kind = PluginKind::from_code(decl.kind).ok_or_else(|| LoadError::NotAPlugin {
            path: path.to_path_buf(),
            detail: format!("it declares an unknown plugin kind code {}", decl.kind),
        })?;
        // SAFETY: `lib` is a library that declared itself a kusion plugin; abi_stable validates
        // its header (abi_stable version) before handing it out.
        let header: &'static LibHeader =
            unsafe { lib_header_from_raw_library(&lib) }.map_err(|e| LoadError::Layout {
                path: path.to_path_buf(),
                detail: e.to_string(),
            })?;
        let module =
            header
                .init_root_module::<PluginModuleRef>()
                .map_err(|e| LoadError::Layout {
                    path: path.to_path_buf(),
                    detail: e.to_string(),
                })?;
        let msgpack = if abi.minor >= 1 {
            // SAFETY: a library declaring ABI 1.1+ exports this symbol with the frozen
            // `MsgpackCallFn` type (see kusion_sdk::abi::native).
            unsafe { lib.get::<MsgpackCallFn>(MSGPACK_SYMBOL) }
                .ok()
                .map(|sym| *sym)
        } else {
            None
        };
        // abi_stable hands out `'static` references into the library: it must never be closed.
        std::mem::forget(lib);
        if module.kind() != decl.kind || module.abi_major() != decl.abi_major {
            return Err(LoadError::NotAPlugin {
                path: path.to_path_buf(),
                detail: "its root module disagrees with its declaration".into(),
            });
        }
        tracing::debug!(path = %path.display(), %kind, %abi, "loaded native plugin library");
        Ok(Arc::new(NativeLibrary {
            path: path.to_path_buf(),
            kind,
            abi,
            module,
            msgpack,
        }))
    }

    /// Whether calls into this library use the MessagePack entry point (ABI 1.1+) rather than
    /// JSON text.
    pub fn speaks_msgpack(&self) -> bool {
        self.msgpack.is_some()
    }

    /// The library's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What kind of plugin it declares.
    pub fn kind(&self) -> PluginKind {
        self.kind
    }

    /// The plugin ABI it was built for.
    pub fn abi(&self) -> AbiVersion {
        self.abi
    }

    fn instantiate(self: &Arc<Self>, expected: PluginKind) -> Result<Arc<Instance>, LoadError> {
        if self.kind != expected {
            return Err(LoadError::WrongKind {
                path: self.path.clone(),
                found: self.kind,
                expected,
            });
        }
        let make = self.module.instantiate();
        let raw = match make() {
            RResult::ROk(raw) => raw,
            RResult::RErr(e) => {
                return Err(LoadError::Instantiate {
                    path: self.path.clone(),
                    error: wire::decode_error(&self.path.display().to_string(), &e),
                });
            }
        };
        let label = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut instance = Instance {
            raw,
            name: label,
            msgpack: None,
            _library: Arc::clone(self),
        };
        if let Some(entry) = self.msgpack {
            // A library that cannot name its instance is used over JSON, which every version speaks.
            instance.msgpack = instance
                .call_text(HANDLE_VERB, "null")
                .ok()
                .and_then(|text| text.parse::<usize>().ok())
                .map(|handle| (entry, handle));
        }
        // The describe answer names the plugin in every later error message.
        let name = match instance.describe_name(expected) {
            Ok(name) => name,
            Err(error) => {
                return Err(LoadError::Instantiate {
                    path: self.path.clone(),
                    error,
                });
            }
        };
        instance.name = name;
        Ok(Arc::new(instance))
    }

    /// Instantiate a plugin of `kind` and read its description (the same steps for all kinds).
    fn instantiate_described<T: DeserializeOwned>(
        self: &Arc<Self>,
        kind: PluginKind,
    ) -> Result<(Arc<Instance>, T), LoadError> {
        let instance = self.instantiate(kind)?;
        let info = instance
            .call_json(verb::DESCRIBE, "null")
            .map_err(|error| LoadError::Instantiate {
                path: self.path.clone(),
                error,
            })?;
        Ok((instance, info))
    }

    /// Make a runtime instance of this library.
    pub fn runtime(self: &Arc<Self>) -> Result<Arc<dyn Runtime>, LoadError> {
        let (instance, info) = self.instantiate_described(PluginKind::Runtime)?;
        Ok(Arc::new(NativeRuntime {
            instance,
            info,
            no_target: Default::default(),
        }))
    }

    /// Make a function plugin instance of this library.
    pub fn function(self: &Arc<Self>) -> Result<Arc<dyn FunctionPlugin>, LoadError> {
        let (instance, info) = self.instantiate_described(PluginKind::Function)?;
        Ok(Arc::new(NativeFunction { instance, info }))
    }

    /// Make a policy plugin instance of this library.
    pub fn policy(self: &Arc<Self>) -> Result<Arc<dyn PolicyPlugin>, LoadError> {
        let (instance, info) = self.instantiate_described(PluginKind::Policy)?;
        Ok(Arc::new(NativePolicy { instance, info }))
    }
}

/// One instance inside a plugin library. `RawPluginBox` is `Send + Sync` (the trait demands it
/// of the plugin), so one instance serves every worker thread.
struct Instance {
    raw: RawPluginBox,
    name: String,
    /// The MessagePack entry point and this instance's handle in it.
    msgpack: Option<(MsgpackCallFn, usize)>,
    // Declared last: fields drop in order, so the instance dies before its library handle.
    _library: Arc<NativeLibrary>,
}

impl Instance {
    fn describe_name(&self, kind: PluginKind) -> PluginResult<String> {
        let info: Value = self.call_json(verb::DESCRIBE, "null")?;
        let key = if kind == PluginKind::Function {
            "module"
        } else {
            "name"
        };
        info.get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                PluginError::internal(format!("plugin `{}` describe() has no `{key}`", self.name))
            })
    }

    fn call_text(&self, verb: &str, payload: &str) -> PluginResult<String> {
        match self.raw.call(RStr::from_str(verb), RStr::from_str(payload)) {
            RResult::ROk(text) => Ok(text.into_string()),
            RResult::RErr(e) => Err(wire::decode_error(&self.name, &e)),
        }
    }

    fn call_json<T: DeserializeOwned>(&self, verb: &str, payload: &str) -> PluginResult<T> {
        let text = self.call_text(verb, payload)?;
        wire::decode_answer(&self.name, verb, &text)
    }

    fn call<Req: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        verb: &str,
        request: &Req,
    ) -> PluginResult<T> {
        let Some((entry, handle)) = self.msgpack else {
            let payload = wire::encode_request(verb, request)?;
            return self.call_json(verb, &payload);
        };
        let payload = wire::encode_request_as(Encoding::MessagePack, verb, request)?;
        // SAFETY: `handle` names this instance, which `self.raw` keeps alive; the buffers
        // outlive the call.
        let answer = unsafe {
            entry(
                handle,
                verb.as_ptr(),
                verb.len(),
                payload.as_ptr(),
                payload.len(),
            )
        };
        // Decoded straight from the plugin's buffer, then handed back to its allocator.
        let result = if answer.ok != 0 {
            wire::decode_answer_as(Encoding::MessagePack, &self.name, verb, answer.as_slice())
        } else {
            Err(wire::decode_error(
                &self.name,
                &String::from_utf8_lossy(answer.as_slice()),
            ))
        };
        answer.release();
        result
    }

    fn call_unit<Req: Serialize + ?Sized>(&self, verb: &str, request: &Req) -> PluginResult<()> {
        self.call::<Req, Value>(verb, request).map(drop)
    }
}

struct NativeRuntime {
    instance: Arc<Instance>,
    info: RuntimeInfo,
    /// The plugin predates the `target` verb.
    no_target: std::sync::atomic::AtomicBool,
}

impl Runtime for NativeRuntime {
    fn describe(&self) -> RuntimeInfo {
        self.info.clone()
    }
    fn configure(&self, config: &Value) -> PluginResult<()> {
        self.instance.call_unit(verb::CONFIGURE, config)
    }
    fn apply(&self, request: &ApplyRequest) -> PluginResult<ApplyResponse> {
        self.instance.call(verb::APPLY, request)
    }
    fn read(&self, request: &ReadRequest) -> PluginResult<ReadResponse> {
        self.instance.call(verb::READ, request)
    }
    fn import(&self, request: &ImportRequest) -> PluginResult<ReadResponse> {
        self.instance.call(verb::IMPORT, request)
    }
    fn delete(&self, request: &DeleteRequest) -> PluginResult<()> {
        self.instance.call_unit(verb::DELETE, request)
    }
    fn operations(&self) -> Vec<OperationInfo> {
        // A plugin built before the verb existed answers `Unsupported`: it has no operations.
        match self.instance.call_json(verb::OPERATIONS, "null") {
            Ok(list) => list,
            Err(e) => {
                if e.kind != kusion_sdk::ErrorKind::Unsupported {
                    tracing::warn!(plugin = %self.instance.name, "listing operations: {}", e.message);
                }
                Vec::new()
            }
        }
    }
    fn operate(&self, request: &OperateRequest) -> PluginResult<OperateResponse> {
        self.instance.call(verb::OPERATE, request)
    }
    fn target(&self, resource: &kusion_sdk::Resource) -> PluginResult<Option<String>> {
        // Asked for every resource of every plan: after one `Unsupported` (a plugin built before
        // the verb, which has no targets) stop asking.
        if self.no_target.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(None);
        }
        match self.instance.call(verb::TARGET, resource) {
            Err(e) if e.kind == kusion_sdk::ErrorKind::Unsupported => {
                self.no_target
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(None)
            }
            other => other,
        }
    }
    fn configuration(
        &self,
        recorded: &kusion_sdk::Resource,
    ) -> PluginResult<Option<kusion_sdk::Resource>> {
        // A plugin built before the verb cannot tell: the caller keeps the attributes.
        match self.instance.call(verb::CONFIGURATION, recorded) {
            Err(e) if e.kind == kusion_sdk::ErrorKind::Unsupported => Ok(None),
            other => other,
        }
    }
    fn watch(&self, request: &WatchRequest) -> PluginResult<Box<dyn Watch>> {
        let payload = wire::encode_request(verb::WATCH, request)?;
        match self.instance.raw.watch(RStr::from_str(&payload)) {
            RResult::ROk(raw) => Ok(Box::new(NativeWatch {
                raw,
                instance: Arc::clone(&self.instance),
            })),
            RResult::RErr(e) => Err(wire::decode_error(&self.instance.name, &e)),
        }
    }
}

/// A watch handle living in the plugin; it keeps its instance alive.
struct NativeWatch {
    raw: RawWatchBox,
    instance: Arc<Instance>,
}

impl Watch for NativeWatch {
    fn poll(&mut self, timeout: Duration) -> PluginResult<WatchPoll> {
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        match self.raw.poll(millis) {
            RResult::ROk(text) => wire::decode_answer(&self.instance.name, "watch.poll", &text),
            RResult::RErr(e) => Err(wire::decode_error(&self.instance.name, &e)),
        }
    }
}

struct NativeFunction {
    instance: Arc<Instance>,
    info: FunctionPluginInfo,
}

impl FunctionPlugin for NativeFunction {
    fn describe(&self) -> FunctionPluginInfo {
        self.info.clone()
    }
    fn configure(&self, config: &Value) -> PluginResult<()> {
        self.instance.call_unit(verb::CONFIGURE, config)
    }
    fn call(
        &self,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> PluginResult<Value> {
        self.instance.call(
            verb::CALL,
            &CallRef {
                function,
                args,
                kwargs,
            },
        )
    }
}

struct NativePolicy {
    instance: Arc<Instance>,
    info: PolicyPluginInfo,
}

impl PolicyPlugin for NativePolicy {
    fn describe(&self) -> PolicyPluginInfo {
        self.info.clone()
    }
    fn configure(&self, config: &Value) -> PluginResult<()> {
        self.instance.call_unit(verb::CONFIGURE, config)
    }
    fn evaluate(&self, spec: &Value, context: &Value) -> PluginResult<Vec<Finding>> {
        self.instance
            .call(verb::EVALUATE, &EvaluateRef { spec, context })
    }
}

/// The ABI version a library declares, without instantiating it (for listings).
pub fn declared_abi(path: &Path) -> Result<(PluginKind, AbiVersion), LoadError> {
    let lib = NativeLibrary::open(path)?;
    Ok((lib.kind(), lib.abi()))
}

#[allow(dead_code)]
fn _assert_thread_safe() {
    fn check<T: Send + Sync>() {}
    check::<Instance>();
    let _ = <PluginModuleRef as RootModule>::NAME;
}
