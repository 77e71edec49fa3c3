//! The native (`cdylib`) plugin ABI, built on `abi_stable`.
//!
//! A plugin library exports two symbols:
//! - [`DECL_SYMBOL`]: a plain `#[repr(C)]` [`PluginDecl`] (magic, ABI major/minor, kind). The host
//!   reads it first, with nothing but `dlsym`, so a library built for another ABI is refused with
//!   both versions named before any richer type is looked at.
//! - `abi_stable`'s root-module header, whose [`PluginModule`] is layout-checked by `abi_stable`
//!   when loaded (this catches a compiler or SDK change that moved a field).
//!
//! The module's `instantiate` returns a [`RawPluginBox`]: a `#[sabi_trait]` object with two
//! methods, `call(verb, json) -> json` and `watch(json) -> RawWatchBox`.
//!
//! These `abi_stable` types are frozen at their ABI 1.0 layout: `abi_stable` refuses a library
//! whose prefix types have *fewer* fields than the host's, so growing them would lock out every
//! plugin built against an older SDK. Minor versions add plain `extern "C"` symbols instead,
//! which the host looks up only in libraries that declare the minor:
//! - 1.1: [`MSGPACK_SYMBOL`], `call` with MessagePack payload and answer. The host learns the
//!   instance's handle from the [`HANDLE_VERB`] call (1.0 libraries answer "unsupported").
//!
//! The shims below wrap the author's plain trait object and catch panics, because an unwind
//! across `extern "C"` aborts.
//!
//! Plugin authors use only the `export_*!` macros; the items here are for those macros and the
//! kernel's plugin host.

#![allow(non_local_definitions)] // abi_stable's `#[sabi_trait]` expansion implements foreign traits in a const block.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RBox, RResult, RStr, RString};
use abi_stable::{StableAbi, declare_root_module_statics, sabi_trait};

use super::PluginKind;
use super::wire::{self, encode_error};
#[cfg(test)]
use crate::ABI_VERSION;
use crate::AbiVersion;
use crate::error::{PluginError, PluginResult};
use crate::function::FunctionPlugin;
use crate::policy::PolicyPlugin;
use crate::runtime::{Runtime, Watch};

#[doc(hidden)]
pub use abi_stable as __abi_stable;

/// Name of the [`PluginDecl`] symbol (NUL-terminated for `dlsym`).
pub const DECL_SYMBOL: &[u8] = b"kusion_plugin_decl\0";

/// First bytes of every [`PluginDecl`], so a random symbol of that name is not mistaken for one.
pub const DECL_MAGIC: [u8; 8] = *b"KUSIONPL";

/// The plain declaration every plugin library exports. Its layout is frozen forever: only
/// `#[repr(C)]` integers, so any host can read it whatever the ABI version.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PluginDecl {
    /// Always [`DECL_MAGIC`].
    pub magic: [u8; 8],
    /// [`AbiVersion::major`] the library was built against.
    pub abi_major: u32,
    /// [`AbiVersion::minor`] the library was built against.
    pub abi_minor: u32,
    /// [`PluginKind::code`].
    pub kind: u32,
}

impl PluginDecl {
    /// The declaration of a library of `kind` built against `abi`.
    pub const fn new(kind: PluginKind, abi: AbiVersion) -> Self {
        PluginDecl {
            magic: DECL_MAGIC,
            abi_major: abi.major,
            abi_minor: abi.minor,
            kind: kind.code(),
        }
    }

    /// The declared ABI version.
    pub fn abi(&self) -> AbiVersion {
        AbiVersion {
            major: self.abi_major,
            minor: self.abi_minor,
        }
    }
}

/// A live plugin instance on the far side of the boundary. Calls are JSON in, JSON out; `Err`
/// carries a JSON-encoded [`PluginError`].
#[sabi_trait]
pub trait RawPlugin: Send + Sync {
    /// Serve one [`wire::verb`] (not `watch`) with a JSON payload; answers JSON. The verb
    /// [`HANDLE_VERB`] answers the instance's handle for [`MSGPACK_SYMBOL`].
    fn call(&self, verb: RStr<'_>, payload: RStr<'_>) -> RResult<RString, RString>;

    /// Start a watch from a JSON [`crate::runtime::WatchRequest`] (runtimes only).
    #[sabi(last_prefix_field)]
    fn watch(&self, payload: RStr<'_>) -> RResult<RawWatchBox, RString>;
}

/// A running watch on the far side; dropping it stops the watch.
#[sabi_trait]
pub trait RawWatch: Send {
    /// Wait up to `timeout_ms` for the next event; answers a JSON [`crate::runtime::WatchPoll`].
    #[sabi(last_prefix_field)]
    fn poll(&mut self, timeout_ms: u64) -> RResult<RString, RString>;
}

/// An owned [`RawPlugin`] trait object, as `instantiate` returns it.
pub type RawPluginBox = RawPlugin_TO<'static, RBox<()>>;
/// An owned [`RawWatch`] trait object, as [`RawPlugin::watch`] returns it.
pub type RawWatchBox = RawWatch_TO<'static, RBox<()>>;

/// The root module of a plugin library. New fields go after `instantiate` (a new minor version);
/// `abi_stable` lets an older library with fewer fields load, and the host checks the declared
/// minor version before touching a newer field.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    /// [`PluginKind::code`]; the host checks it matches the [`PluginDecl`].
    pub kind: u32,
    /// As [`PluginDecl::abi_major`]; the host checks it matches.
    pub abi_major: u32,
    /// As [`PluginDecl::abi_minor`].
    pub abi_minor: u32,
    /// Make one plugin instance. `Err` is a JSON-encoded [`PluginError`].
    #[sabi(last_prefix_field)]
    pub instantiate: extern "C" fn() -> RResult<RawPluginBox, RString>,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "kusion_plugin";
    const NAME: &'static str = "kusion plugin";
    // abi_stable's own check refuses a library with an older minor than the host's, so it only
    // sees the ABI major; minors are negotiated through `PluginDecl` (the host's check gives the
    // precise message first). A test keeps this in step with ABI_VERSION.
    const VERSION_STRINGS: VersionStrings = VersionStrings::new("1.0.0");
}

/// The symbol `abi_stable` looks up for the root module header. `export_*!` cannot use
/// `#[export_root_module]` (its expansion needs `abi_stable` as a direct dependency of the
/// plugin crate and predates edition 2024), so it names the symbol itself; a test checks it.
#[doc(hidden)]
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Run plugin code, turning a panic into an `Internal` error that names the plugin and verb.
fn guarded<T>(plugin: &str, verb: &str, f: impl FnOnce() -> PluginResult<T>) -> PluginResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => Err(PluginError::internal(format!(
            "plugin `{plugin}` panicked in `{verb}`: {}",
            panic_message(&*payload)
        ))),
    }
}

fn to_rresult(result: PluginResult<String>) -> RResult<RString, RString> {
    match result {
        Ok(text) => RResult::ROk(RString::from(text)),
        Err(e) => RResult::RErr(RString::from(encode_error(&e))),
    }
}

/// Verb answering an instance's handle for [`MSGPACK_SYMBOL`] (ABI 1.1).
pub const HANDLE_VERB: &str = "kusion.handle";

/// Name of the ABI 1.1 MessagePack entry point (NUL-terminated for `dlsym`); its type is
/// [`MsgpackCallFn`].
pub const MSGPACK_SYMBOL: &[u8] = b"kusion_plugin_call_msgpack\0";

/// `(handle, verb, verb_len, payload, payload_len) -> answer`. Frozen forever, like [`PluginDecl`].
pub type MsgpackCallFn = unsafe extern "C" fn(usize, *const u8, usize, *const u8, usize) -> WireBuf;

/// A byte buffer owned by the plugin's allocator, handed to the host, which must give it back
/// through `free` once read. `ok == 0` means the bytes are a JSON-encoded [`PluginError`].
#[repr(C)]
pub struct WireBuf {
    /// 1 when the bytes are the answer, 0 when they are an encoded error.
    pub ok: u8,
    /// Start of the bytes.
    pub ptr: *mut u8,
    /// Number of bytes.
    pub len: usize,
    /// Capacity of the plugin's allocation, for `free`.
    pub cap: usize,
    /// Frees the buffer in the plugin's allocator: called with `ptr`, `len`, `cap`, exactly once.
    pub free: extern "C" fn(*mut u8, usize, usize),
}

extern "C" fn free_wire_buf(ptr: *mut u8, len: usize, cap: usize) {
    // SAFETY: the triple came from a `Vec<u8>` this library leaked in `WireBuf::new`.
    drop(unsafe { Vec::from_raw_parts(ptr, len, cap) });
}

impl WireBuf {
    fn new(ok: bool, bytes: Vec<u8>) -> WireBuf {
        let mut bytes = std::mem::ManuallyDrop::new(bytes);
        WireBuf {
            ok: u8::from(ok),
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
            cap: bytes.capacity(),
            free: free_wire_buf,
        }
    }

    /// The bytes, valid until [`WireBuf::release`].
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr/len describe a live Vec<u8> owned by the plugin until `free` is called.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Give the buffer back to the plugin's allocator.
    pub fn release(self) {
        (self.free)(self.ptr, self.len, self.cap);
    }
}

/// Plugin side of [`MSGPACK_SYMBOL`], called by the code `export_*!` generates.
///
/// # Safety
/// `handle` must be a value this library answered to [`HANDLE_VERB`] for an instance that is still
/// alive, and the pointer/length pairs must describe readable memory.
#[doc(hidden)]
pub unsafe fn call_msgpack_raw(
    handle: usize,
    verb: *const u8,
    verb_len: usize,
    payload: *const u8,
    payload_len: usize,
) -> WireBuf {
    // SAFETY: guaranteed by the caller (see above).
    let (shim, verb, payload) = unsafe {
        (
            &*(handle as *const Shim),
            std::slice::from_raw_parts(verb, verb_len),
            std::slice::from_raw_parts(payload, payload_len),
        )
    };
    let Ok(verb) = std::str::from_utf8(verb) else {
        let e = PluginError::invalid("the verb is not UTF-8");
        return WireBuf::new(false, encode_error(&e).into_bytes());
    };
    let enc = wire::Encoding::MessagePack;
    let answer = guarded(&shim.name, verb, || shim.served.serve(enc, verb, payload));
    match answer {
        Ok(bytes) => WireBuf::new(true, bytes),
        Err(e) => WireBuf::new(false, encode_error(&e).into_bytes()),
    }
}

enum Served {
    Runtime(Box<dyn Runtime>),
    Function(Box<dyn FunctionPlugin>),
    Policy(Box<dyn PolicyPlugin>),
}

impl Served {
    /// One non-watch verb, its payload and answer in `enc`.
    fn serve(&self, enc: wire::Encoding, verb: &str, payload: &[u8]) -> PluginResult<Vec<u8>> {
        match self {
            Served::Runtime(r) => wire::serve_runtime(enc, r.as_ref(), verb, payload),
            Served::Function(f) => wire::serve_function(enc, f.as_ref(), verb, payload),
            Served::Policy(p) => wire::serve_policy(enc, p.as_ref(), verb, payload),
        }
    }
}

/// Plugin-side shim: the author's trait object plus its name for error messages.
struct Shim {
    name: String,
    served: Served,
}

impl RawPlugin for Shim {
    fn call(&self, verb: RStr<'_>, payload: RStr<'_>) -> RResult<RString, RString> {
        let (verb, payload) = (verb.as_str(), payload.as_str());
        if verb == HANDLE_VERB {
            // The address of this shim: the key for the plain-C MessagePack entry point.
            return RResult::ROk(RString::from((self as *const Shim as usize).to_string()));
        }
        to_rresult(guarded(&self.name, verb, || {
            wire::json(payload, |enc, payload| {
                self.served.serve(enc, verb, payload)
            })
        }))
    }

    fn watch(&self, payload: RStr<'_>) -> RResult<RawWatchBox, RString> {
        let started = guarded(&self.name, wire::verb::WATCH, || match &self.served {
            Served::Runtime(r) => wire::serve_runtime_watch(r.as_ref(), payload.as_str()),
            _ => Err(PluginError::unsupported("only runtime plugins can watch")),
        });
        match started {
            Ok(inner) => RResult::ROk(RawWatch_TO::from_value(
                WatchShim {
                    name: self.name.clone(),
                    inner,
                },
                sabi_trait::TD_Opaque,
            )),
            Err(e) => RResult::RErr(RString::from(encode_error(&e))),
        }
    }
}

struct WatchShim {
    name: String,
    inner: Box<dyn Watch>,
}

impl RawWatch for WatchShim {
    fn poll(&mut self, timeout_ms: u64) -> RResult<RString, RString> {
        let inner = &mut self.inner;
        to_rresult(guarded(&self.name, "watch.poll", || {
            wire::encode_poll(&inner.poll(Duration::from_millis(timeout_ms))?)
        }))
    }
}

fn instantiate(
    kind: &str,
    make: impl FnOnce() -> PluginResult<(String, Served)>,
) -> RResult<RawPluginBox, RString> {
    match guarded(kind, "instantiate", make) {
        Ok((name, served)) => RResult::ROk(RawPlugin_TO::from_value(
            Shim { name, served },
            sabi_trait::TD_Opaque,
        )),
        Err(e) => RResult::RErr(RString::from(encode_error(&e))),
    }
}

#[doc(hidden)]
pub fn instantiate_runtime<R: Runtime + 'static>(
    ctor: impl FnOnce() -> R,
) -> RResult<RawPluginBox, RString> {
    instantiate("runtime", || {
        let runtime = ctor();
        let name = runtime.describe().name;
        Ok((name, Served::Runtime(Box::new(runtime))))
    })
}

#[doc(hidden)]
pub fn instantiate_function<F: FunctionPlugin + 'static>(
    ctor: impl FnOnce() -> F,
) -> RResult<RawPluginBox, RString> {
    instantiate("function", || {
        let plugin = ctor();
        let name = plugin.describe().module;
        Ok((name, Served::Function(Box::new(plugin))))
    })
}

#[doc(hidden)]
pub fn instantiate_policy<P: PolicyPlugin + 'static>(
    ctor: impl FnOnce() -> P,
) -> RResult<RawPluginBox, RString> {
    instantiate("policy", || {
        let plugin = ctor();
        let name = plugin.describe().name;
        Ok((name, Served::Policy(Box::new(plugin))))
    })
}

/// Export a native plugin. Used by the `export_*!` macros; `abi` is overridable only so hosts can
/// test their refusal of foreign ABI versions.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_native {
    ($kind:expr, $abi:expr, $instantiate:expr) => {
        #[doc(hidden)]
        #[unsafe(no_mangle)]
        pub static kusion_plugin_decl: $crate::abi::native::PluginDecl =
            $crate::abi::native::PluginDecl::new($kind, $abi);

        #[doc(hidden)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn kusion_plugin_call_msgpack(
            handle: usize,
            verb: *const u8,
            verb_len: usize,
            payload: *const u8,
            payload_len: usize,
        ) -> $crate::abi::native::WireBuf {
            // SAFETY: the host passes a handle this library gave it and live buffers.
            unsafe {
                $crate::abi::native::call_msgpack_raw(handle, verb, verb_len, payload, payload_len)
            }
        }

        #[doc(hidden)]
        extern "C" fn __kusion_instantiate()
        -> $crate::abi::native::__abi_stable::std_types::RResult<
            $crate::abi::native::RawPluginBox,
            $crate::abi::native::__abi_stable::std_types::RString,
        > {
            ($instantiate)()
        }

        #[doc(hidden)]
        fn __kusion_root_module() -> $crate::abi::native::PluginModuleRef {
            use $crate::abi::native::__abi_stable::prefix_type::{PrefixTypeTrait, WithMetadata};
            const ABI: $crate::AbiVersion = $abi;
            const MODULE: &WithMetadata<$crate::abi::native::PluginModule> =
                &WithMetadata::new($crate::abi::native::PluginModule {
                    kind: ($kind).code(),
                    abi_major: ABI.major,
                    abi_minor: ABI.minor,
                    instantiate: __kusion_instantiate,
                });
            $crate::abi::native::PluginModuleRef(MODULE.static_as_prefix())
        }

        #[doc(hidden)]
        #[unsafe(export_name = "_1as_0lib_1header_0root_bmodule_bloader")]
        pub static __KUSION_ROOT_MODULE_HEADER:
            $crate::abi::native::__abi_stable::library::LibHeader = {
            extern "C" fn erased() -> $crate::abi::native::__abi_stable::library::RootModuleResult {
                $crate::abi::native::__abi_stable::library::__call_root_module_loader(
                    __kusion_root_module,
                )
            }
            unsafe {
                $crate::abi::native::__abi_stable::library::LibHeader::from_constructor::<
                    $crate::abi::native::PluginModuleRef,
                >(
                    erased,
                    $crate::abi::native::__abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

/// Export a [`Runtime`] from a `cdylib`: `kusion_sdk::export_runtime!(MyRuntime::new);`
/// The constructor runs once per instance the host makes; a panic in it is reported, not fatal.
#[macro_export]
macro_rules! export_runtime {
    ($ctor:expr) => {
        $crate::export_runtime!($ctor, abi = $crate::ABI_VERSION);
    };
    ($ctor:expr, abi = $abi:expr) => {
        $crate::__export_native!($crate::abi::PluginKind::Runtime, $abi, || {
            $crate::abi::native::instantiate_runtime($ctor)
        });
    };
}

/// Export a [`FunctionPlugin`] from a `cdylib`: `kusion_sdk::export_function_plugin!(Cmdb::new);`
#[macro_export]
macro_rules! export_function_plugin {
    ($ctor:expr) => {
        $crate::export_function_plugin!($ctor, abi = $crate::ABI_VERSION);
    };
    ($ctor:expr, abi = $abi:expr) => {
        $crate::__export_native!($crate::abi::PluginKind::Function, $abi, || {
            $crate::abi::native::instantiate_function($ctor)
        });
    };
}

/// Export a [`PolicyPlugin`] from a `cdylib`: `kusion_sdk::export_policy_plugin!(MyPolicy::new);`
#[macro_export]
macro_rules! export_policy_plugin {
    ($ctor:expr) => {
        $crate::export_policy_plugin!($ctor, abi = $crate::ABI_VERSION);
    };
    ($ctor:expr, abi = $abi:expr) => {
        $crate::__export_native!($crate::abi::PluginKind::Policy, $abi, || {
            $crate::abi::native::instantiate_policy($ctor)
        });
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_module_symbol_matches_abi_stable() {
        assert_eq!(
            ROOT_MODULE_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }

    #[test]
    fn abi_stable_version_string_tracks_abi_major_only() {
        // abi_stable refuses a library whose minor is *older* than the host's; ours must load
        // older minors, so its version string only carries the major.
        let v = <PluginModuleRef as RootModule>::VERSION_STRINGS;
        assert_eq!(v.version, format!("{}.0.0", ABI_VERSION.major));
    }
}
