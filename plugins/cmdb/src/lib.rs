//! `cmdb`: a KCL function plugin that tells a program where container host names live.
//!
//! ```kcl
//! import kcl_plugin.cmdb
//!
//! records = cmdb.lookup_hosts(["web-7d9f-abcde", "gone-host"])
//! broken = [r for r in records if r.found]
//! unknown = [r.host for r in records if not r.found]
//! ```
//!
//! Functions (see `README.md` for the record fields):
//! - `lookup_hosts(hosts: [str]) -> [record]`, in input order;
//! - `lookup_host(host: str) -> record`;
//! - `upsert_hosts(records: [dict]) -> {inserted, updated, unchanged}` (used by
//!   `kusionctl cmdb import`);
//! - `info() -> {backend, location, hosts}`.
//!
//! Where the CMDB is comes from, in order: the plugin configuration `{url = "..."}`, the
//! `KUSION_CMDB_URL` environment variable, then `sqlite://$HOME/.kusion/cmdb.db`.

/// The host record, its checks and look-up answers (its own crate, shared with the CLI).
pub use kusion_cmdb_record as record;
pub mod store;

use std::sync::Mutex;

use kusion_sdk::function::{FunctionPlugin, FunctionPluginInfo};
use kusion_sdk::{ABI_VERSION, ErrorKind, Map, PluginError, PluginResult, Value};
use serde_json::json;

pub use record::{HostRecord, UpsertCounts};
pub use store::{Location, Store, StoreError};

/// The environment variable naming the CMDB when the plugin configuration does not.
pub const URL_ENV: &str = "KUSION_CMDB_URL";

/// The functions KCL code may call.
pub const FUNCTIONS: [&str; 4] = ["lookup_hosts", "lookup_host", "upsert_hosts", "info"];

#[derive(Default)]
struct State {
    /// `url` from `configure`.
    configured: Option<String>,
    /// Opened on first use and kept; dropped after a connection failure so the next call retries.
    store: Option<Store>,
}

/// The plugin instance. One connection, shared by every call (calls are serialised).
#[derive(Default)]
pub struct Cmdb {
    state: Mutex<State>,
}

impl Cmdb {
    pub fn new() -> Cmdb {
        Cmdb::default()
    }

    /// A plugin fixed to one CMDB URL (what `configure({url})` does).
    pub fn with_url(url: &str) -> PluginResult<Cmdb> {
        let cmdb = Cmdb::new();
        cmdb.configure(&json!({ "url": url }))?;
        Ok(cmdb)
    }

    /// The CMDB this instance uses: configuration, then `$KUSION_CMDB_URL`, then the default file.
    pub fn location(&self) -> PluginResult<Location> {
        let configured = self.lock()?.configured.clone();
        Ok(resolve_location(configured.as_deref())?)
    }

    fn lock(&self) -> PluginResult<std::sync::MutexGuard<'_, State>> {
        // A panic while holding the lock only ever interrupts a query; the state stays usable.
        Ok(self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Run `f` on an open store (connecting first if needed). With `create`, a missing SQLite
    /// file is created (imports); look-ups never create one.
    fn with_store<T>(
        &self,
        create: bool,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError>,
    ) -> PluginResult<T> {
        let mut state = self.lock()?;
        let location = resolve_location(state.configured.as_deref())?;
        if state
            .store
            .as_ref()
            .is_some_and(|s| s.is_closed() || s.location() != &location)
        {
            state.store = None;
        }
        if state.store.is_none() {
            tracing::debug!(cmdb = %location.display(), "connecting");
            state.store = Some(Store::open(&location, create)?);
        }
        let store = state.store.as_mut().expect("opened above");
        let result = f(store);
        if matches!(result, Err(StoreError::Unavailable { .. })) || store.is_closed() {
            state.store = None;
        }
        Ok(result?)
    }

    /// Look up each host; the answer has one record per input host, in order.
    pub fn lookup_hosts(&self, hosts: &[String]) -> PluginResult<Vec<Value>> {
        let found = self.with_store(false, |s| s.lookup(hosts))?;
        Ok(hosts
            .iter()
            .zip(found)
            .map(|(h, r)| r.map_or_else(|| record::not_found(h), |r| r.found()))
            .collect())
    }

    /// Insert or update records (normalised first).
    pub fn upsert_hosts(&self, records: &[HostRecord]) -> PluginResult<UpsertCounts> {
        let records = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                r.clone()
                    .normalized()
                    .map_err(|e| PluginError::invalid(format!("records[{i}]: {e}")))
            })
            .collect::<PluginResult<Vec<_>>>()?;
        self.with_store(true, |s| s.upsert(&records))
    }

    fn info(&self) -> PluginResult<Value> {
        let location = self.location()?;
        let hosts = self.with_store(false, |s| s.count())?;
        Ok(json!({
            "backend": location.backend(),
            "location": location.display(),
            "hosts": hosts,
        }))
    }
}

fn resolve_location(configured: Option<&str>) -> Result<Location, StoreError> {
    if let Some(url) = configured {
        return Location::parse(url);
    }
    if let Ok(url) = std::env::var(URL_ENV)
        && !url.trim().is_empty()
    {
        return Location::parse(&url);
    }
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(Location::Sqlite(
            std::path::PathBuf::from(home)
                .join(".kusion")
                .join("cmdb.db"),
        )),
        _ => Err(StoreError::BadUrl {
            url: String::new(),
            detail: format!(
                "no CMDB configured: set `[plugins.settings.cmdb] config = {{ url = \"...\" }}` \
                 or {URL_ENV} (HOME is unset, so there is no default ~/.kusion/cmdb.db)"
            ),
        }),
    }
}

/// The one argument of a function, given positionally or by keyword.
fn one_arg<'a>(
    function: &str,
    name: &str,
    args: &'a [Value],
    kwargs: &'a Map<String, Value>,
) -> PluginResult<&'a Value> {
    if let Some(extra) = kwargs.keys().find(|k| k.as_str() != name) {
        return Err(PluginError::invalid(format!(
            "{function}() got an unexpected keyword argument `{extra}`"
        )));
    }
    match (args, kwargs.get(name)) {
        ([v], None) | ([], Some(v)) => Ok(v),
        ([], None) => Err(PluginError::invalid(format!(
            "{function}() missing argument `{name}`"
        ))),
        ([_], Some(_)) => Err(PluginError::invalid(format!(
            "{function}() got `{name}` both positionally and by keyword"
        ))),
        _ => Err(PluginError::invalid(format!(
            "{function}() takes 1 argument ({name}) but {} were given",
            args.len()
        ))),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "None",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

fn host_name(v: &Value, what: &str) -> PluginResult<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Value::String(_) => Err(PluginError::invalid(format!(
            "{what} is an empty host name"
        ))),
        other => Err(PluginError::invalid(format!(
            "{what}: expected a host name (str), got {} {other}",
            type_name(other)
        ))),
    }
}

impl FunctionPlugin for Cmdb {
    fn describe(&self) -> FunctionPluginInfo {
        FunctionPluginInfo {
            module: "cmdb".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: ABI_VERSION,
            functions: FUNCTIONS.iter().map(|f| f.to_string()).collect(),
            secret_stores: Vec::new(),
        }
    }

    /// `{url = "sqlite:///path" | "postgres://..."}`; `null` or `{}` goes back to the
    /// environment/default. The URL is checked here; the connection is made on first use.
    fn configure(&self, config: &Value) -> PluginResult<()> {
        let url = match config {
            Value::Null => None,
            Value::Object(map) => {
                if let Some(k) = map.keys().find(|k| k.as_str() != "url") {
                    return Err(PluginError::invalid(format!(
                        "cmdb plugin configuration: unknown key `{k}` (expected only `url`)"
                    )));
                }
                match map.get("url") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(other) => {
                        return Err(PluginError::invalid(format!(
                            "cmdb plugin configuration: `url` must be a string, got {}",
                            type_name(other)
                        )));
                    }
                }
            }
            other => {
                return Err(PluginError::invalid(format!(
                    "cmdb plugin configuration must be a table like {{ url = \"sqlite:///path\" }}, got {}",
                    type_name(other)
                )));
            }
        };
        if let Some(url) = &url {
            Location::parse(url)?;
        }
        let mut state = self.lock()?;
        state.configured = url;
        state.store = None;
        Ok(())
    }

    fn call(
        &self,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> PluginResult<Value> {
        match function {
            "lookup_hosts" => {
                let hosts = match one_arg(function, "hosts", args, kwargs)? {
                    Value::Array(items) => items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| host_name(v, &format!("hosts[{i}]")))
                        .collect::<PluginResult<Vec<_>>>()?,
                    other => {
                        return Err(PluginError::invalid(format!(
                            "lookup_hosts(hosts): expected a list of host names, got {} {other}",
                            type_name(other)
                        )));
                    }
                };
                Ok(Value::Array(self.lookup_hosts(&hosts)?))
            }
            "lookup_host" => {
                let host = host_name(one_arg(function, "host", args, kwargs)?, "host")?;
                let mut records = self.lookup_hosts(std::slice::from_ref(&host))?;
                Ok(records.pop().unwrap_or(Value::Null))
            }
            "upsert_hosts" => {
                let records = match one_arg(function, "records", args, kwargs)? {
                    Value::Array(items) => items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            serde_json::from_value::<HostRecord>(v.clone())
                                .map_err(|e| PluginError::invalid(format!("records[{i}]: {e}")))
                        })
                        .collect::<PluginResult<Vec<_>>>()?,
                    other => {
                        return Err(PluginError::invalid(format!(
                            "upsert_hosts(records): expected a list of records, got {}",
                            type_name(other)
                        )));
                    }
                };
                let counts = self.upsert_hosts(&records)?;
                serde_json::to_value(counts).map_err(|e| PluginError::internal(e.to_string()))
            }
            "info" => {
                if !args.is_empty() || !kwargs.is_empty() {
                    return Err(PluginError::invalid("info() takes no arguments"));
                }
                self.info()
            }
            other => Err(PluginError::new(
                ErrorKind::Unsupported,
                format!(
                    "the cmdb plugin has no function `{other}` (it has: {})",
                    FUNCTIONS.join(", ")
                ),
            )),
        }
    }
}

kusion_sdk::export_function_plugin!(Cmdb::new);

#[cfg(test)]
mod tests;
