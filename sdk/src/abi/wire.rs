//! The wire format shared by native and WASM plugins.
//!
//! A call is `(verb, payload)`; the payload and the answer are JSON text, or MessagePack between a
//! host and a native plugin that both speak ABI 1.1 ([`Encoding`]). Errors are always JSON. The `serve_*` functions
//! are the plugin side: they decode a payload, call the plain trait, and encode the answer. The
//! host side builds payloads with the `*Ref` envelopes below and decodes with serde_json.
//! Unknown verbs answer `Unsupported`, so a newer host can probe an older plugin.
//!
//! A plugin author uses only [`guest`] (in a WASM component); the rest is plumbing for the
//! export macros and the kernel's plugin host.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{ErrorKind, PluginError, PluginResult};
use crate::function::FunctionPlugin;
use crate::policy::PolicyPlugin;
use crate::runtime::{
    ApplyRequest, DeleteRequest, ImportRequest, OperateRequest, ReadRequest, Runtime, WatchPoll,
    WatchRequest,
};

/// Verb names. `describe` takes `null`; the rest take the request type of the trait method.
pub mod verb {
    /// Every kind: takes `null`, answers the plugin's info ([`crate::runtime::RuntimeInfo`],
    /// [`crate::function::FunctionPluginInfo`] or [`crate::policy::PolicyPluginInfo`]).
    pub const DESCRIBE: &str = "describe";
    /// Every kind: takes the operator's configuration value, answers `null`.
    pub const CONFIGURE: &str = "configure";
    /// Runtime: an [`crate::runtime::ApplyRequest`], answers an [`crate::runtime::ApplyResponse`].
    pub const APPLY: &str = "apply";
    /// Runtime: a [`crate::runtime::ReadRequest`], answers a [`crate::runtime::ReadResponse`].
    pub const READ: &str = "read";
    /// Runtime: an [`crate::runtime::ImportRequest`], answers a [`crate::runtime::ReadResponse`].
    pub const IMPORT: &str = "import";
    /// Runtime: a [`crate::runtime::DeleteRequest`], answers `null`.
    pub const DELETE: &str = "delete";
    /// Runtime: a [`crate::runtime::WatchRequest`]. Its answer is a handle, so it has its own
    /// entry point (the native `watch` method, the WIT `watch` export), never `call`.
    pub const WATCH: &str = "watch";
    /// Function plugin: a [`CallPayload`](super::CallPayload), answers the function's JSON value.
    pub const CALL: &str = "call";
    /// Policy plugin: an [`EvaluatePayload`](super::EvaluatePayload), answers a list of
    /// [`crate::policy::Finding`]s.
    pub const EVALUATE: &str = "evaluate";
    /// Runtime: list the day-2 operations (takes `null`). Added in contract 1.0 without a new
    /// minor: a plugin that predates it answers `Unsupported`, which means "none".
    pub const OPERATIONS: &str = "operations";
    /// Runtime: perform one operation (an [`crate::runtime::OperateRequest`]).
    pub const OPERATE: &str = "operate";
    /// Runtime: the target a resource lives in (takes a [`crate::Resource`], answers a string or
    /// `null`). Added like `operations`: a plugin that predates it answers `Unsupported`, which
    /// means "no target".
    pub const TARGET: &str = "target";
    /// Runtime: the configuration producing a recorded resource (takes a [`crate::Resource`],
    /// answers a resource or `null`). Added like `target`: `Unsupported` means "cannot tell".
    pub const CONFIGURATION: &str = "configuration";
}

/// Payload of `call` for a function plugin, borrowed on the host side.
#[derive(Debug, Serialize)]
pub struct CallRef<'a> {
    /// The function's name, one of [`crate::function::FunctionPluginInfo::functions`].
    pub function: &'a str,
    /// Positional arguments.
    pub args: &'a [Value],
    /// Keyword arguments.
    pub kwargs: &'a Map<String, Value>,
}

/// Payload of `call`, as the plugin decodes it.
#[derive(Debug, Deserialize)]
pub struct CallPayload {
    /// The function's name.
    pub function: String,
    /// Positional arguments (empty when left out).
    #[serde(default)]
    pub args: Vec<Value>,
    /// Keyword arguments (empty when left out).
    #[serde(default)]
    pub kwargs: Map<String, Value>,
}

/// Payload of `evaluate` for a policy plugin, borrowed on the host side.
#[derive(Debug, Serialize)]
pub struct EvaluateRef<'a> {
    /// The spec, `{resources: [...]}`.
    pub spec: &'a Value,
    /// The plan, the stack and the operation.
    pub context: &'a Value,
}

/// Payload of `evaluate`, as the plugin decodes it.
#[derive(Debug, Deserialize)]
pub struct EvaluatePayload {
    /// The spec, `{resources: [...]}`.
    pub spec: Value,
    /// The plan, the stack and the operation (`null` when left out).
    #[serde(default)]
    pub context: Value,
}

/// Encode an error for the trip back to the host.
pub fn encode_error(error: &PluginError) -> String {
    // A PluginError has only strings, an enum and a bool: serialising it cannot fail.
    serde_json::to_string(error).unwrap_or_else(|_| {
        r#"{"kind":"internal","message":"unencodable error","retryable":false}"#.to_string()
    })
}

/// Decode an error sent by a plugin; text that is not an encoded error becomes `Internal`.
pub fn decode_error(plugin: &str, text: &str) -> PluginError {
    serde_json::from_str(text).unwrap_or_else(|_| {
        PluginError::internal(format!(
            "plugin `{plugin}` returned a malformed error: {text}"
        ))
    })
}

/// Decode a plugin's answer for `verb`; a mismatch means the plugin broke the contract.
pub fn decode_answer<T: DeserializeOwned>(plugin: &str, verb: &str, text: &str) -> PluginResult<T> {
    serde_json::from_str(text).map_err(|e| {
        PluginError::internal(format!(
            "plugin `{plugin}` returned a malformed answer to `{verb}`: {e}"
        ))
    })
}

/// Encode a host-side request. Request types hold only JSON-shaped data, so this cannot fail in
/// practice; an error still becomes a value rather than a panic.
pub fn encode_request<T: Serialize + ?Sized>(verb: &str, request: &T) -> PluginResult<String> {
    serde_json::to_string(request)
        .map_err(|e| PluginError::invalid(format!("cannot encode the `{verb}` request: {e}")))
}

/// How a payload and its answer are encoded on the wire. JSON is the baseline every plugin speaks
/// (and the only one WASM components use); native plugins of ABI 1.1 and later also take
/// MessagePack, which skips JSON's text scanning and escaping and roughly halves a call's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JSON text (UTF-8).
    Json,
    /// MessagePack, structs as maps keyed by field name.
    MessagePack,
}

impl Encoding {
    /// Encode `value`. Structs go out as maps with field names (not positional arrays), so a
    /// field added in a later minor version is skipped or defaulted by an older peer.
    pub fn encode<T: Serialize + ?Sized>(self, value: &T) -> Result<Vec<u8>, String> {
        match self {
            Encoding::Json => serde_json::to_vec(value).map_err(|e| e.to_string()),
            Encoding::MessagePack => rmp_serde::to_vec_named(value).map_err(|e| e.to_string()),
        }
    }

    /// Decode `bytes` as a `T`; the error is the decoder's message.
    pub fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, String> {
        match self {
            Encoding::Json => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
            Encoding::MessagePack => rmp_serde::from_slice(bytes).map_err(|e| e.to_string()),
        }
    }
}

/// Encode a host-side request in `encoding`.
pub fn encode_request_as<T: Serialize + ?Sized>(
    encoding: Encoding,
    verb: &str,
    request: &T,
) -> PluginResult<Vec<u8>> {
    encoding
        .encode(request)
        .map_err(|e| PluginError::invalid(format!("cannot encode the `{verb}` request: {e}")))
}

/// Decode a plugin's answer for `verb` in `encoding`.
pub fn decode_answer_as<T: DeserializeOwned>(
    encoding: Encoding,
    plugin: &str,
    verb: &str,
    bytes: &[u8],
) -> PluginResult<T> {
    encoding.decode(bytes).map_err(|e| {
        PluginError::internal(format!(
            "plugin `{plugin}` returned a malformed answer to `{verb}`: {e}"
        ))
    })
}

fn decode<T: DeserializeOwned>(encoding: Encoding, verb: &str, payload: &[u8]) -> PluginResult<T> {
    encoding
        .decode(payload)
        .map_err(|e| PluginError::invalid(format!("malformed `{verb}` payload: {e}")))
}

fn encode<T: Serialize>(encoding: Encoding, value: &T) -> PluginResult<Vec<u8>> {
    encoding
        .encode(value)
        .map_err(|e| PluginError::internal(format!("cannot encode the answer: {e}")))
}

/// The `configure` verb of every kind of plugin: a [`Value`] in, nothing out.
fn configure(
    enc: Encoding,
    payload: &[u8],
    configure: impl FnOnce(&Value) -> PluginResult<()>,
) -> PluginResult<Vec<u8>> {
    configure(&decode(enc, verb::CONFIGURE, payload)?)?;
    encode(enc, &())
}

fn unknown_verb(kind: &str, verb: &str) -> PluginError {
    PluginError::new(
        ErrorKind::Unsupported,
        format!("{kind} plugins have no verb `{verb}`"),
    )
}

/// Serves a JSON `payload` through `serve` and answers JSON text.
pub(crate) fn json(
    payload: &str,
    serve: impl FnOnce(Encoding, &[u8]) -> PluginResult<Vec<u8>>,
) -> PluginResult<String> {
    into_text(serve(Encoding::Json, payload.as_bytes()))
}

/// JSON answers are UTF-8 by construction; the check only keeps a broken encoder from becoming
/// undefined behaviour on the far side.
fn into_text(bytes: PluginResult<Vec<u8>>) -> PluginResult<String> {
    bytes.and_then(|b| {
        String::from_utf8(b).map_err(|_| PluginError::internal("a JSON answer was not UTF-8"))
    })
}

/// Serve one non-watch verb of a runtime in `enc`. `watch` goes through
/// [`serve_runtime_watch`] because its answer is a handle, not an encoded value.
pub(crate) fn serve_runtime(
    enc: Encoding,
    runtime: &dyn Runtime,
    verb: &str,
    payload: &[u8],
) -> PluginResult<Vec<u8>> {
    match verb {
        verb::DESCRIBE => encode(enc, &runtime.describe()),
        verb::CONFIGURE => configure(enc, payload, |c| runtime.configure(c)),
        verb::APPLY => encode(
            enc,
            &runtime.apply(&decode::<ApplyRequest>(enc, verb, payload)?)?,
        ),
        verb::READ => encode(
            enc,
            &runtime.read(&decode::<ReadRequest>(enc, verb, payload)?)?,
        ),
        verb::IMPORT => encode(
            enc,
            &runtime.import(&decode::<ImportRequest>(enc, verb, payload)?)?,
        ),
        verb::DELETE => {
            runtime.delete(&decode::<DeleteRequest>(enc, verb, payload)?)?;
            encode(enc, &())
        }
        verb::OPERATIONS => encode(enc, &runtime.operations()),
        verb::TARGET => encode(
            enc,
            &runtime.target(&decode::<crate::Resource>(enc, verb, payload)?)?,
        ),
        verb::OPERATE => encode(
            enc,
            &runtime.operate(&decode::<OperateRequest>(enc, verb, payload)?)?,
        ),
        verb::CONFIGURATION => encode(
            enc,
            &runtime.configuration(&decode::<crate::Resource>(enc, verb, payload)?)?,
        ),
        other => Err(unknown_verb("runtime", other)),
    }
}

/// Start a watch from an encoded [`WatchRequest`].
pub fn serve_runtime_watch(
    runtime: &dyn Runtime,
    payload: &str,
) -> PluginResult<Box<dyn crate::runtime::Watch>> {
    runtime.watch(&decode::<WatchRequest>(
        Encoding::Json,
        verb::WATCH,
        payload.as_bytes(),
    )?)
}

/// Encode one poll result of a watch.
pub fn encode_poll(poll: &WatchPoll) -> PluginResult<String> {
    into_text(encode(Encoding::Json, poll))
}

/// Serve one verb of a function plugin in `enc`.
pub(crate) fn serve_function(
    enc: Encoding,
    plugin: &dyn FunctionPlugin,
    verb: &str,
    payload: &[u8],
) -> PluginResult<Vec<u8>> {
    match verb {
        verb::DESCRIBE => encode(enc, &plugin.describe()),
        verb::CONFIGURE => configure(enc, payload, |c| plugin.configure(c)),
        verb::CALL => {
            let call: CallPayload = decode(enc, verb, payload)?;
            encode(enc, &plugin.call(&call.function, &call.args, &call.kwargs)?)
        }
        other => Err(unknown_verb("function", other)),
    }
}

/// Serve one verb of a policy plugin in `enc`.
pub(crate) fn serve_policy(
    enc: Encoding,
    plugin: &dyn PolicyPlugin,
    verb: &str,
    payload: &[u8],
) -> PluginResult<Vec<u8>> {
    match verb {
        verb::DESCRIBE => encode(enc, &plugin.describe()),
        verb::CONFIGURE => configure(enc, payload, |c| plugin.configure(c)),
        verb::EVALUATE => {
            let request: EvaluatePayload = decode(enc, verb, payload)?;
            encode(enc, &plugin.evaluate(&request.spec, &request.context)?)
        }
        other => Err(unknown_verb("policy", other)),
    }
}

/// Glue for a WASM component's exports (see `sdk/wit/plugin.wit`): each function maps one WIT
/// export onto the plain trait, with errors encoded as JSON text.
pub mod guest {
    use std::collections::BTreeMap;

    use super::*;
    use crate::runtime::Watch;

    fn wrap(result: PluginResult<String>) -> Result<String, String> {
        result.map_err(|e| encode_error(&e))
    }

    /// A `describe` export's answer: the JSON of `info` (empty if it cannot be encoded).
    fn describe<T: Serialize>(info: &T) -> String {
        serde_json::to_string(info).unwrap_or_default()
    }

    /// A `configure` export: the JSON configuration served through `serve`'s `configure` verb.
    fn configure_json(
        config: &str,
        serve: impl FnOnce(Encoding, &[u8]) -> PluginResult<Vec<u8>>,
    ) -> Result<(), String> {
        wrap(json(config, serve)).map(|_| ())
    }

    /// The `describe` export: JSON [`crate::policy::PolicyPluginInfo`] (empty if it cannot
    /// be encoded).
    pub fn policy_describe(plugin: &dyn PolicyPlugin) -> String {
        describe(&plugin.describe())
    }

    /// The `configure` export: JSON configuration in.
    pub fn policy_configure(plugin: &dyn PolicyPlugin, config: &str) -> Result<(), String> {
        configure_json(config, |e, p| serve_policy(e, plugin, verb::CONFIGURE, p))
    }

    /// The `evaluate` export: JSON spec and context in, a JSON list of findings out.
    pub fn policy_evaluate(
        plugin: &dyn PolicyPlugin,
        spec: &str,
        context: &str,
    ) -> Result<String, String> {
        let spec: Value = serde_json::from_str(spec)
            .map_err(|e| encode_error(&PluginError::invalid(format!("malformed spec: {e}"))))?;
        let context: Value = serde_json::from_str(context)
            .map_err(|e| encode_error(&PluginError::invalid(format!("malformed context: {e}"))))?;
        wrap(
            plugin
                .evaluate(&spec, &context)
                .and_then(|findings| into_text(encode(Encoding::Json, &findings))),
        )
    }

    /// The `describe` export: JSON [`crate::runtime::RuntimeInfo`] (empty if it cannot be
    /// encoded).
    pub fn runtime_describe(runtime: &dyn Runtime) -> String {
        describe(&runtime.describe())
    }

    /// The `configure` export: JSON configuration in.
    pub fn runtime_configure(runtime: &dyn Runtime, config: &str) -> Result<(), String> {
        configure_json(config, |e, p| serve_runtime(e, runtime, verb::CONFIGURE, p))
    }

    /// `apply`, `read` or `import`: a JSON request in, a JSON answer out.
    pub fn runtime_call(
        runtime: &dyn Runtime,
        verb: &str,
        request: &str,
    ) -> Result<String, String> {
        wrap(json(request, |e, p| serve_runtime(e, runtime, verb, p)))
    }

    /// The `delete` export: a JSON [`crate::runtime::DeleteRequest`] in.
    pub fn runtime_delete(runtime: &dyn Runtime, request: &str) -> Result<(), String> {
        wrap(json(request, |e, p| {
            serve_runtime(e, runtime, verb::DELETE, p)
        }))
        .map(|_| ())
    }

    /// The `target` export: a JSON [`crate::Resource`] in, its target out (see
    /// [`Runtime::target`]).
    pub fn runtime_target(runtime: &dyn Runtime, object: &str) -> Result<Option<String>, String> {
        let resource: crate::Resource = serde_json::from_str(object)
            .map_err(|e| encode_error(&PluginError::invalid(format!("malformed resource: {e}"))))?;
        runtime.target(&resource).map_err(|e| encode_error(&e))
    }

    /// The watches a component has open, by handle. A component instance runs one call at a
    /// time, so one lock is never contended; it only satisfies `static`.
    static WATCHES: std::sync::Mutex<OpenWatches> = std::sync::Mutex::new((0, BTreeMap::new()));

    /// The last handle given out, and the watches by handle.
    type OpenWatches = (u64, BTreeMap<u64, Box<dyn Watch>>);

    fn watches() -> std::sync::MutexGuard<'static, OpenWatches> {
        // A poisoned lock means a watch panicked mid-poll; the map itself is still consistent.
        WATCHES.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `watch` export: starts a watch from a JSON [`crate::runtime::WatchRequest`] and keeps
    /// it in this module, answering its handle for [`runtime_poll`] and [`runtime_unwatch`].
    pub fn runtime_watch(runtime: &dyn Runtime, request: &str) -> Result<u64, String> {
        let watch = serve_runtime_watch(runtime, request).map_err(|e| encode_error(&e))?;
        let mut open = watches();
        open.0 += 1;
        let handle = open.0;
        open.1.insert(handle, watch);
        Ok(handle)
    }

    /// The `poll` export: waits up to `timeout_ms` milliseconds for the watch's next event and
    /// answers a JSON [`WatchPoll`]; an unknown handle is an `InvalidInput` error.
    pub fn runtime_poll(handle: u64, timeout_ms: u64) -> Result<String, String> {
        let mut open = watches();
        let watch = open.1.get_mut(&handle).ok_or_else(|| {
            encode_error(&PluginError::invalid(format!("no open watch {handle}")))
        })?;
        wrap(
            watch
                .poll(std::time::Duration::from_millis(timeout_ms))
                .and_then(|poll| encode_poll(&poll)),
        )
    }

    /// The `unwatch` export: drops the watch, which stops it; an unknown handle is ignored.
    pub fn runtime_unwatch(handle: u64) {
        watches().1.remove(&handle);
    }

    /// The `describe` export: JSON [`crate::function::FunctionPluginInfo`] (empty if it cannot
    /// be encoded).
    pub fn function_describe(plugin: &dyn FunctionPlugin) -> String {
        describe(&plugin.describe())
    }

    /// The `configure` export: JSON configuration in.
    pub fn function_configure(plugin: &dyn FunctionPlugin, config: &str) -> Result<(), String> {
        configure_json(config, |e, p| serve_function(e, plugin, verb::CONFIGURE, p))
    }

    /// The `call` export: the function's name, a JSON array of positional arguments and a JSON
    /// object of keyword arguments in, the JSON answer out.
    pub fn function_call(
        plugin: &dyn FunctionPlugin,
        name: &str,
        args: &str,
        kwargs: &str,
    ) -> Result<String, String> {
        let args: Vec<Value> = serde_json::from_str(args)
            .map_err(|e| encode_error(&PluginError::invalid(format!("malformed args: {e}"))))?;
        let kwargs: Map<String, Value> = serde_json::from_str(kwargs)
            .map_err(|e| encode_error(&PluginError::invalid(format!("malformed kwargs: {e}"))))?;
        wrap(
            plugin
                .call(name, &args, &kwargs)
                .and_then(|v| into_text(encode(Encoding::Json, &v))),
        )
    }
}
