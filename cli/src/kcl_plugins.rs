//! KCL plugin calls: `import kcl_plugin.<module>` then `<module>.<fn>(args, kwargs)` in a KCL
//! program reaches the function plugin serving `<module>` among those the plugin host loaded.
//!
//! Every kusionctl path that evaluates KCL passes [`plugin_hook`] of its loaded plugins as
//! `RunOptions::plugin`:
//!
//! ```ignore
//! let options = kusion_kcl::RunOptions {
//!     plugin: Some(kusionctl::kcl_plugins::plugin_hook(&loaded_plugins)),
//!     ..Default::default()
//! };
//! ```
//!
//! The evaluator converts KCL values to JSON and back (lists, dicts and schemas become arrays and
//! objects; `None` is `null`) and prefixes errors with `kcl_plugin.<module>.<fn>` and the call's
//! `file:line:col`. This adapter says which plugin failed and why, and, for a module nobody
//! serves, which plugins exist and why a matching one was refused.

use std::cell::{Cell, OnceCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};

use kusion_kcl::PluginHook;
use kusion_kernel::plugin::{LoadedPlugins, Status};
use kusion_sdk::function::FunctionPlugin;
use kusion_sdk::{Map, Value};

/// The loaded function plugins, by the KCL module name they serve.
pub struct KclPlugins {
    modules: BTreeMap<String, Served>,
    /// Plugins that were found but not loaded, by name: why (for a better "not available").
    unavailable: BTreeMap<String, String>,
    /// Secret stores' plugin and module names: found, but never served to programs.
    secret_stores: std::collections::BTreeSet<String>,
}

struct Served {
    /// The plugin's name in the host (its manifest name).
    name: String,
    functions: Vec<String>,
    plugin: Arc<dyn FunctionPlugin>,
}

impl KclPlugins {
    pub fn new(plugins: &LoadedPlugins) -> KclPlugins {
        let mut secret_stores = std::collections::BTreeSet::new();
        let described: Vec<(&String, String, Served)> = plugins
            .functions
            .iter()
            .filter_map(|(name, plugin)| {
                let info = plugin.describe();
                // A secret store is for the kernel alone: a program could print its answers.
                if !info.secret_stores.is_empty() {
                    secret_stores.insert(name.clone());
                    secret_stores.insert(info.module);
                    return None;
                }
                let served = Served {
                    name: name.clone(),
                    functions: info.functions,
                    plugin: Arc::clone(plugin),
                };
                Some((name, info.module, served))
            })
            .collect();
        // A plugin serves the module it describes. When two describe the same module, the one
        // whose manifest name is that module wins, else the first by name. A plugin's manifest
        // name is accepted as a module too when nobody describes that module.
        let mut modules: BTreeMap<String, Served> = BTreeMap::new();
        let mut shadowed: Vec<Served> = Vec::new();
        let (exact, others): (Vec<_>, Vec<_>) = described
            .into_iter()
            .partition(|(name, module, _)| *name == module);
        for (_, module, served) in exact.into_iter().chain(others) {
            if let Some(first) = modules.get(&module) {
                tracing::warn!(
                    module = %module,
                    used = %first.name,
                    shadowed = %served.name,
                    "two function plugins serve the same KCL module"
                );
                shadowed.push(served);
                continue;
            }
            modules.insert(module, served);
        }
        let aliases: Vec<Served> = modules
            .values()
            .map(|s| Served {
                name: s.name.clone(),
                functions: s.functions.clone(),
                plugin: Arc::clone(&s.plugin),
            })
            .chain(shadowed)
            .collect();
        for alias in aliases {
            if !modules.contains_key(&alias.name) {
                modules.insert(alias.name.clone(), alias);
            }
        }
        let unavailable = plugins
            .entries
            .iter()
            .filter_map(|e| match &e.status {
                Status::Loaded => None,
                Status::Disabled(why) | Status::Refused(why) => Some((
                    e.name.clone(),
                    format!("{} ({}): {why}", e.name, e.manifest.display()),
                )),
            })
            .collect();
        KclPlugins {
            modules,
            unavailable,
            secret_stores,
        }
    }

    /// The KCL module names callable through this hook.
    pub fn modules(&self) -> impl Iterator<Item = &str> {
        self.modules.keys().map(String::as_str)
    }
}

/// The hook to put in `kusion_kcl::RunOptions::plugin` for a program run by kusionctl.
pub fn plugin_hook(plugins: &LoadedPlugins) -> Rc<dyn PluginHook> {
    Rc::new(KclPlugins::new(plugins))
}

type Loader = Box<dyn FnOnce() -> anyhow::Result<LoadedPlugins> + Send>;

/// Plugins loaded on the first `kcl_plugin.*` call of any program, then shared by every thread
/// (`compile` needs no plugins for stacks that call none, and loading them costs time).
pub struct LazyPlugins {
    load: Mutex<Option<Loader>>,
    loaded: OnceLock<Result<LoadedPlugins, String>>,
}

impl LazyPlugins {
    /// `load` runs at most once, on the first plugin call.
    pub fn new(load: impl FnOnce() -> anyhow::Result<LoadedPlugins> + Send + 'static) -> Self {
        LazyPlugins {
            load: Mutex::new(Some(Box::new(load))),
            loaded: OnceLock::new(),
        }
    }

    fn get(&self) -> Result<&LoadedPlugins, String> {
        self.loaded
            .get_or_init(|| {
                let load = self.load.lock().unwrap_or_else(|e| e.into_inner()).take();
                match load {
                    Some(load) => load().map_err(|e| format!("loading plugins: {e:#}")),
                    None => Err("loading plugins: the loader was already used".into()),
                }
            })
            .as_ref()
            .map_err(String::clone)
    }
}

/// One thread's hook over [`LazyPlugins`]; counts the calls it served, so a caller can tell a
/// program that consulted a plugin (its output depends on more than its files).
pub struct LazyHook {
    shared: Arc<LazyPlugins>,
    hook: OnceCell<KclPlugins>,
    calls: Cell<usize>,
}

impl LazyHook {
    pub fn new(shared: Arc<LazyPlugins>) -> LazyHook {
        LazyHook {
            shared,
            hook: OnceCell::new(),
            calls: Cell::new(0),
        }
    }

    /// Plugin calls made through this hook so far.
    pub fn calls(&self) -> usize {
        self.calls.get()
    }
}

impl PluginHook for LazyHook {
    fn call(
        &self,
        module: &str,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> Result<Value, String> {
        self.calls.set(self.calls.get() + 1);
        let hook = match self.hook.get() {
            Some(h) => h,
            None => {
                let plugins = self.shared.get()?;
                self.hook.get_or_init(|| KclPlugins::new(plugins))
            }
        };
        hook.call(module, function, args, kwargs)
    }
}

impl PluginHook for KclPlugins {
    fn call(
        &self,
        module: &str,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> Result<Value, String> {
        let Some(served) = self.modules.get(module) else {
            let mut msg = format!("no loaded function plugin serves the module `{module}`");
            if self.secret_stores.contains(module) {
                msg.push_str(&format!(
                    "; `{module}` is a secret store, which only the engine calls (write \
                     `ref://<store>/<name>` values in the spec; a program could print a secret)"
                ));
            } else if let Some(why) = self.unavailable.get(module) {
                msg.push_str(&format!("; the plugin was found but not loaded: {why}"));
            } else if self.modules.is_empty() {
                msg.push_str(
                    "; no function plugins are loaded (see `kusionctl plugin list`; build in-repo \
                     plugins with `cargo build`, or install one under ~/.kusion/plugins/<name>/)",
                );
            } else {
                let known: Vec<&str> = self.modules().collect();
                msg.push_str(&format!(
                    " (loaded: {}; see `kusionctl plugin list`)",
                    known.join(", ")
                ));
            }
            return Err(msg);
        };
        if !served.functions.iter().any(|f| f == function) {
            return Err(format!(
                "the plugin `{}` has no function `{function}` (it exports: {})",
                served.name,
                served.functions.join(", ")
            ));
        }
        tracing::debug!(plugin = %served.name, function, "KCL plugin call");
        served.plugin.call(function, args, kwargs).map_err(|e| {
            let retry = if e.retryable { ", retryable" } else { "" };
            format!(
                "plugin `{}` failed ({:?}{retry}): {}",
                served.name, e.kind, e.message
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kusion_kcl::RunOptions;

    fn loaded(url: &str) -> LoadedPlugins {
        let mut plugins = LoadedPlugins::default();
        let cmdb = kusion_cmdb::Cmdb::with_url(url).unwrap();
        plugins
            .functions
            .insert("cmdb".into(), Arc::new(cmdb) as Arc<dyn FunctionPlugin>);
        plugins
    }

    fn run(dir: &std::path::Path, source: &str, plugins: &LoadedPlugins) -> Result<String, String> {
        let file = dir.join("main.k");
        std::fs::write(&file, source).unwrap();
        let options = RunOptions {
            work_dir: Some(dir.to_path_buf()),
            plugin: Some(plugin_hook(plugins)),
            json: true,
            ..Default::default()
        };
        kusion_kcl::run_full(&[file], &options)
            .map(|o| o.text)
            .map_err(|e| e.to_string())
    }

    /// A store answering every reference with one secret.
    struct OneSecret;

    impl FunctionPlugin for OneSecret {
        fn describe(&self) -> kusion_sdk::function::FunctionPluginInfo {
            kusion_sdk::function::FunctionPluginInfo {
                module: "vault".into(),
                version: "0".into(),
                abi: kusion_sdk::ABI_VERSION,
                functions: vec![kusion_sdk::function::SECRET_RESOLVE.into()],
                secret_stores: vec!["vault".into()],
            }
        }
        fn configure(&self, _: &Value) -> kusion_sdk::PluginResult<()> {
            Ok(())
        }
        fn call(
            &self,
            _: &str,
            _: &[Value],
            _: &Map<String, Value>,
        ) -> kusion_sdk::PluginResult<Value> {
            Ok(Value::String("hunter2".into()))
        }
    }

    #[test]
    fn a_secret_store_is_never_served_to_programs() {
        let dir = tempfile::tempdir().unwrap();
        let mut plugins = LoadedPlugins::default();
        plugins.functions.insert(
            "vaultstore".into(),
            Arc::new(OneSecret) as Arc<dyn FunctionPlugin>,
        );
        for module in ["vault", "vaultstore"] {
            let e = run(
                dir.path(),
                &format!("import kcl_plugin.{module}\nv = {module}.resolve(\"ref://vault/x\")\n"),
                &plugins,
            )
            .unwrap_err();
            assert!(
                e.contains("is a secret store") && !e.contains("hunter2"),
                "{e}"
            );
        }
    }

    fn seeded() -> (tempfile::TempDir, LoadedPlugins) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("cmdb.db").display());
        let plugins = loaded(&url);
        let cmdb = &plugins.functions["cmdb"];
        cmdb.call(
            "upsert_hosts",
            &[serde_json::json!([
                {"host": "web-1", "cluster": "east", "namespace": "shop", "pod": "web-1",
                 "workload": "web", "workload_kind": "Deployment", "app": "web"}
            ])],
            &Map::new(),
        )
        .unwrap();
        (dir, plugins)
    }

    #[test]
    fn kcl_program_branches_on_found_and_not_found() {
        let (dir, plugins) = seeded();
        let out = run(
            dir.path(),
            r#"import kcl_plugin.cmdb

records = cmdb.lookup_hosts(["web-1", "ghost"])
found = [r.cluster + "/" + r.namespace + "/" + r.pod for r in records if r.found]
missing = [r.host + ": " + r.reason for r in records if not r.found]
one = cmdb.lookup_host(host="web-1").app
"#,
            &plugins,
        )
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["found"], serde_json::json!(["east/shop/web-1"]));
        assert_eq!(v["missing"], serde_json::json!(["ghost: not found"]));
        assert_eq!(v["one"], "web");
    }

    #[test]
    fn plugin_errors_name_plugin_function_and_position() {
        let (dir, plugins) = seeded();
        let err = run(
            dir.path(),
            "import kcl_plugin.cmdb\n\nx = 1\nrecords = cmdb.lookup_hosts(\"web-1,ghost\")\n",
            &plugins,
        )
        .unwrap_err();
        assert!(err.contains("kcl_plugin.cmdb.lookup_hosts"), "{err}");
        assert!(err.contains("plugin `cmdb` failed (InvalidInput)"), "{err}");
        assert!(err.contains("main.k:4:"), "{err}");

        let err = run(
            dir.path(),
            "import kcl_plugin.cmdb\nr = cmdb.restart_everything()\n",
            &plugins,
        )
        .unwrap_err();
        assert!(
            err.contains("has no function `restart_everything`") && err.contains("lookup_hosts"),
            "{err}"
        );
        assert!(err.contains("main.k:2:"), "{err}");

        let err = run(
            dir.path(),
            "import kcl_plugin.inventory\nr = inventory.get(\"a\")\n",
            &plugins,
        )
        .unwrap_err();
        assert!(
            err.contains("no loaded function plugin serves the module `inventory`")
                && err.contains("loaded: cmdb"),
            "{err}"
        );
    }

    #[test]
    fn an_unreachable_cmdb_fails_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("absent.db").display());
        let plugins = loaded(&url);
        let err = run(
            dir.path(),
            "import kcl_plugin.cmdb\nr = cmdb.lookup_hosts([\"a\"])\n",
            &plugins,
        )
        .unwrap_err();
        assert!(
            err.contains("Unavailable") && err.contains("absent.db") && err.contains("main.k:2:"),
            "{err}"
        );
    }

    #[test]
    fn the_plugin_named_like_the_module_serves_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut plugins = LoadedPlugins::default();
        // Two plugins describe module `cmdb`; "a-mirror" sorts first but is not named `cmdb`.
        for (name, cluster) in [("a-mirror", "mirror"), ("cmdb", "primary")] {
            let url = format!(
                "sqlite://{}",
                dir.path().join(format!("{name}.db")).display()
            );
            let p = kusion_cmdb::Cmdb::with_url(&url).unwrap();
            p.call(
                "upsert_hosts",
                &[serde_json::json!([{"host": "h", "cluster": cluster, "namespace": "n"}])],
                &Map::new(),
            )
            .unwrap();
            plugins
                .functions
                .insert(name.into(), Arc::new(p) as Arc<dyn FunctionPlugin>);
        }
        let hook = KclPlugins::new(&plugins);
        let lookup = |module: &str| {
            hook.call(
                module,
                "lookup_host",
                &[serde_json::json!("h")],
                &Map::new(),
            )
            .unwrap()["cluster"]
                .clone()
        };
        assert_eq!(lookup("cmdb"), "primary");
        // The other stays reachable under its own name.
        assert_eq!(lookup("a-mirror"), "mirror");
    }

    #[test]
    fn a_refused_plugin_says_why() {
        let mut plugins = LoadedPlugins::default();
        plugins.entries.push(kusion_kernel::plugin::PluginEntry {
            name: "cmdb".into(),
            kind: None,
            format: None,
            version: None,
            abi: None,
            manifest: "/opt/plugins/cmdb/plugin.toml".into(),
            file: None,
            source: kusion_kernel::plugin::Source::UserDir,
            capabilities: Vec::new(),
            status: Status::Refused("checksum check failed".into()),
        });
        let hook = KclPlugins::new(&plugins);
        let err = hook
            .call("cmdb", "lookup_hosts", &[], &Map::new())
            .unwrap_err();
        assert!(
            err.contains("found but not loaded") && err.contains("checksum check failed"),
            "{err}"
        );
    }
}
