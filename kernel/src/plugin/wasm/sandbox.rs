//! One instance's sandbox: its store data (WASI context, captured stderr), the memory limiter,
//! and the limits and grants each store is built with.

use super::*;

/// Store data of one instance: WASI state, the limiter and captured stderr.
pub(super) struct Guest {
    pub(super) wasi: WasiCtx,
    pub(super) http: wasmtime_wasi_http::WasiHttpCtx,
    pub(super) gate: HttpGate,
    pub(super) table: ResourceTable,
    pub(super) limiter: Limiter,
    pub(super) stderr: MemoryOutputPipe,
    /// The wall-clock allowance of the current call, for the message when it runs out.
    pub(super) wall: Duration,
}

impl WasiView for Guest {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpView for Guest {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.gate,
        }
    }
}

/// `StoreLimits` plus a note of whether a memory limit was hit, so the error can say so.
pub(super) struct Limiter {
    pub(super) limits: StoreLimits,
    pub(super) memory_cap: usize,
    pub(super) memory_hit: bool,
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
pub(super) const STDERR_CAPACITY: usize = 256 << 10;

pub(super) struct Sandbox {
    pub(super) engine: Engine,
    pub(super) grants: WasmGrants,
    /// `grants.hosts`, parsed.
    pub(super) http_hosts: Arc<[HttpHost]>,
    pub(super) limits: WasmLimits,
    /// Plugin name for messages.
    pub(super) label: String,
}

impl Sandbox {
    pub(super) fn store(&self) -> PluginResult<Store<Guest>> {
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
            // wasmtime-wasi leaves TCP and UDP off even with every address allowed.
            wasi.inherit_network()
                .allow_tcp(true)
                .allow_udp(true)
                .allow_ip_name_lookup(true);
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
                http: wasmtime_wasi_http::WasiHttpCtx::new(),
                gate: HttpGate {
                    allowed: Arc::clone(&self.http_hosts),
                    denied: Vec::new(),
                },
                table: ResourceTable::new(),
                limiter,
                stderr,
                wall: Duration::ZERO,
            },
        );
        store.limiter(|guest| &mut guest.limiter);
        // Instantiation runs start functions and data initialisers: it gets a budget too.
        self.budget(&mut store, Duration::ZERO)?;
        Ok(store)
    }

    /// A fresh budget for one call: the fuel limit, and a deadline of the wall-clock limit plus
    /// `extra` (time the call is allowed to wait, such as a watch poll's timeout).
    pub(super) fn budget(&self, store: &mut Store<Guest>, extra: Duration) -> PluginResult<()> {
        store
            .set_fuel(self.limits.fuel)
            .map_err(|e| PluginError::internal(format!("{e:#}")))?;
        let wall = Duration::from_millis(self.limits.wall_clock_ms).saturating_add(extra);
        // Rounded up, plus one tick: the epoch may advance just after the deadline is set.
        let ticks = wall.as_millis().div_ceil(EPOCH_TICK.as_millis()) + 1;
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
        store.data_mut().wall = wall;
        Ok(())
    }

    /// Turn a wasmtime error of one call into a `PluginError` saying what happened.
    pub(super) fn trap_error(
        &self,
        store: &Store<Guest>,
        verb: &str,
        error: wasmtime::Error,
    ) -> PluginError {
        let plugin = &self.label;
        if store.data().limiter.memory_hit {
            let mib = store.data().limiter.memory_cap as f64 / (1024.0 * 1024.0);
            return PluginError::internal(format!(
                "plugin `{plugin}` exceeded its memory limit ({mib:.1} MiB) in `{verb}`"
            ));
        }
        if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            let mut e = PluginError::new(
                ErrorKind::Timeout,
                format!(
                    "plugin `{plugin}` exceeded its wall-clock limit ({} ms) in `{verb}`",
                    store.data().wall.as_millis()
                ),
            );
            // As with fuel: a call that ran away once runs away again.
            e.retryable = false;
            return e;
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
