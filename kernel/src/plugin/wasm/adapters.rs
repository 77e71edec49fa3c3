//! The kernel's plugin traits ([`Runtime`], [`PolicyPlugin`], [`FunctionPlugin`], [`Watch`]) over
//! pooled component instances: each call takes a warm instance, runs under the sandbox's limits
//! and gives the instance back (or drops it after a trap).

use super::*;

pub(super) fn poisoned() -> PluginError {
    PluginError::internal("WASM plugin pool lock poisoned")
}

pub(super) struct WasmPolicy {
    pub(super) pool: Pool<policy_bindings::PolicyPlugin>,
    pub(super) info: PolicyPluginInfo,
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
        let text = self.pool.with("evaluate", Duration::ZERO, |b, store| {
            b.kusion_plugin_policy()
                .call_evaluate(store, &spec, &context)
        })?;
        wire::decode_answer(&self.pool.sandbox.label, "evaluate", &text)
    }
}

pub(super) struct WasmFunction {
    pub(super) pool: Pool<function_bindings::FunctionPlugin>,
    pub(super) info: FunctionPluginInfo,
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
        let text = self.pool.with(&verb, Duration::ZERO, |b, store| {
            b.kusion_plugin_function()
                .call_call(store, function, &args, &kwargs)
        })?;
        wire::decode_answer(&self.pool.sandbox.label, &verb, &text)
    }
}

/// A runtime component behind the kernel's [`Runtime`] trait.
pub(super) struct WasmRuntime {
    /// Shared with open watches, which hold an instance of their own until dropped.
    pub(super) pool: Arc<Pool<runtime_bindings::RuntimePlugin>>,
    pub(super) info: RuntimeInfo,
}

type RuntimeCall<'a> = &'a (
        dyn Fn(
    &runtime_bindings::exports::kusion::plugin::runtime::Guest,
    &mut Store<Guest>,
    &str,
) -> wasmtime::Result<Result<String, String>>
            + Sync
    );

impl WasmRuntime {
    /// One JSON-in, JSON-out verb. A request's own timeout extends the wall-clock limit, so a
    /// call the kernel allows ten minutes is not cut at the default.
    fn call<Req: Serialize, T: serde::de::DeserializeOwned>(
        &self,
        verb: &str,
        request: &Req,
        timeout: Option<Duration>,
        call: RuntimeCall<'_>,
    ) -> PluginResult<T> {
        let payload = wire::encode_request(verb, request)?;
        let extra = self.extra(timeout);
        let text = self.pool.with(verb, extra, |b, store| {
            call(b.kusion_plugin_runtime(), store, &payload)
        })?;
        wire::decode_answer(&self.pool.sandbox.label, verb, &text)
    }

    fn extra(&self, timeout: Option<Duration>) -> Duration {
        let wall = Duration::from_millis(self.pool.sandbox.limits.wall_clock_ms);
        timeout.map_or(Duration::ZERO, |t| t.saturating_sub(wall))
    }
}

impl Runtime for WasmRuntime {
    fn describe(&self) -> RuntimeInfo {
        self.info.clone()
    }
    fn configure(&self, config: &Value) -> PluginResult<()> {
        self.pool.configure(config)
    }
    fn apply(&self, request: &ApplyRequest) -> PluginResult<ApplyResponse> {
        self.call(wire::verb::APPLY, request, request.timeout, &|g, s, p| {
            g.call_apply(s, p)
        })
    }
    fn read(&self, request: &ReadRequest) -> PluginResult<ReadResponse> {
        self.call(wire::verb::READ, request, request.timeout, &|g, s, p| {
            g.call_read(s, p)
        })
    }
    fn import(&self, request: &ImportRequest) -> PluginResult<ReadResponse> {
        self.call(wire::verb::IMPORT, request, request.timeout, &|g, s, p| {
            g.call_import(s, p)
        })
    }
    fn delete(&self, request: &DeleteRequest) -> PluginResult<()> {
        let payload = wire::encode_request(wire::verb::DELETE, request)?;
        self.pool.with(
            wire::verb::DELETE,
            self.extra(request.timeout),
            |b, store| b.kusion_plugin_runtime().call_delete(store, &payload),
        )
    }
    fn target(&self, resource: &kusion_sdk::Resource) -> PluginResult<Option<String>> {
        let payload = wire::encode_request(wire::verb::TARGET, resource)?;
        self.pool
            .with(wire::verb::TARGET, Duration::ZERO, |b, store| {
                b.kusion_plugin_runtime().call_target(store, &payload)
            })
    }
    fn watch(&self, request: &WatchRequest) -> PluginResult<Box<dyn Watch>> {
        let payload = wire::encode_request(wire::verb::WATCH, request)?;
        // The watch lives in one instance's memory: that instance stays with the watch.
        let mut warm = self.pool.checkout(wire::verb::WATCH)?;
        let handle = self
            .pool
            .run(&mut warm, wire::verb::WATCH, Duration::ZERO, |b, store| {
                b.kusion_plugin_runtime().call_watch(store, &payload)
            })?;
        match handle {
            Ok(handle) => Ok(Box::new(WasmWatch {
                pool: Arc::clone(&self.pool),
                warm: Some(warm),
                handle,
            })),
            Err(e) => {
                self.pool.checkin(warm);
                Err(e)
            }
        }
    }
}

/// A watch inside one component instance; the instance returns to the pool when the watch is
/// dropped, or is discarded if a poll trapped.
pub(super) struct WasmWatch {
    pub(super) pool: Arc<Pool<runtime_bindings::RuntimePlugin>>,
    pub(super) warm: Option<Warm<runtime_bindings::RuntimePlugin>>,
    pub(super) handle: u64,
}

impl Watch for WasmWatch {
    fn poll(&mut self, timeout: Duration) -> PluginResult<WatchPoll> {
        let verb = "watch.poll";
        let Some(warm) = self.warm.as_mut() else {
            return Err(PluginError::internal(format!(
                "plugin `{}`: this watch ended when its instance failed",
                self.pool.sandbox.label
            )));
        };
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let handle = self.handle;
        match self.pool.run(warm, verb, timeout, |b, store| {
            b.kusion_plugin_runtime().call_poll(store, handle, millis)
        }) {
            Ok(answer) => wire::decode_answer(&self.pool.sandbox.label, verb, &answer?),
            Err(trap) => {
                self.warm = None;
                Err(trap)
            }
        }
    }
}

impl Drop for WasmWatch {
    fn drop(&mut self) {
        let Some(mut warm) = self.warm.take() else {
            return;
        };
        let handle = self.handle;
        let closed = self
            .pool
            .run(&mut warm, "unwatch", Duration::ZERO, |b, store| {
                b.kusion_plugin_runtime()
                    .call_unwatch(store, handle)
                    .map(Ok)
            });
        if closed.is_ok() {
            self.pool.checkin(warm);
        }
    }
}
