//! The plugin host: finds plugins, checks them, loads them, and hands the kernel plain
//! `Arc<dyn Runtime>`, `Arc<dyn FunctionPlugin>` and `Arc<dyn PolicyPlugin>` so no other kernel
//! code sees an ABI.
//!
//! - [`native`]: `cdylib` plugins over `abi_stable` (runtime, function and policy plugins).
//! - [`wasm`]: WebAssembly components over `wasmtime` (runtime, function and policy plugins),
//!   sandboxed.
//! - [`manifest`]: `plugin.toml` files (name, kind, version, file, checksum, permissions).
//! - [`config`]: the `[plugins]` section of the kernel configuration.
//! - [`discover`] and [`load_plugins`]: search the plugin directories and load what is wanted,
//!   recording for each candidate what it is or why it was refused ([`PluginEntry`]).
//!
//! Plugins are found only in directories: the configured `plugins.path`, `$KUSION_PLUGIN_PATH`,
//! `~/.kusion/plugins` and the install prefix of the running executable
//! (`<exe dir>/../lib/kusion/plugins`, see [`installed_plugin_dir`]). The host knows nothing of
//! the kusion-rs source tree: a development build gets its plugins on that path from
//! `scripts/stage-plugins.sh` (which puts a checkout's built plugins in
//! `<target>/lib/kusion/plugins`, the prefix of `<target>/<profile>/kusionctl`), and every
//! plugin found carries the `sha256` of its file.

pub mod config;
pub mod conformance;
pub mod grants;
pub mod manifest;
pub mod native;
pub mod trust;
#[cfg(feature = "wasm")]
pub mod wasm;

#[cfg(all(test, feature = "wasm"))]
mod tests;
#[cfg(all(test, feature = "wasm"))]
mod wasm_runtime_tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kusion_sdk::abi::PluginKind;
use kusion_sdk::function::FunctionPlugin;
use kusion_sdk::policy::PolicyPlugin;
use kusion_sdk::runtime::Runtime;
use kusion_sdk::{AbiVersion, PluginError, Value};
use serde::Serialize;

pub use config::{PluginConfig, PluginSettings};
pub use grants::{WasmGrants, WasmLimits};
pub use manifest::{Format, MANIFEST_FILE, Manifest};
pub use native::NativeLibrary;
#[cfg(feature = "wasm")]
pub use wasm::WasmHost;

/// The WASM host, started by the first WASM plugin loaded (or why it could not start).
#[cfg(feature = "wasm")]
type WasmHostSlot = Option<Result<WasmHost, LoadError>>;
/// Without the `wasm` feature there is no host to start.
#[cfg(not(feature = "wasm"))]
#[derive(Default)]
struct WasmHostSlot(());

/// Why a plugin could not be loaded. Every variant names the file concerned.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: cannot open: {detail}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The system's message.
        detail: String,
    },
    /// The file is not a kusion plugin (no declaration, wrong format).
    #[error("{}: not a kusion plugin: {detail}", path.display())]
    NotAPlugin {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The plugin was built for a plugin ABI this kusion does not speak.
    #[error(
        "{}: plugin ABI {plugin} is incompatible with this kusion's plugin ABI {host} \
         (the major version must match and the plugin's minor must not be newer); rebuild the plugin \
         against a kusion-sdk with ABI {host}",
        path.display()
    )]
    AbiMismatch {
        /// The file.
        path: PathBuf,
        /// The plugin's ABI.
        plugin: AbiVersion,
        /// This kusion's.
        host: AbiVersion,
    },
    /// The library's interface types do not match the host's.
    #[error("{}: rejected by the ABI layout check: {detail}", path.display())]
    Layout {
        /// The file.
        path: PathBuf,
        /// What differs.
        detail: String,
    },
    /// The plugin is of another kind than asked for.
    #[error("{}: is a {found} plugin, expected a {expected} plugin", path.display())]
    WrongKind {
        /// The file.
        path: PathBuf,
        /// Its kind.
        found: PluginKind,
        /// The kind asked for.
        expected: PluginKind,
    },
    /// The plugin's constructor failed.
    #[error("{}: the plugin failed to start: {error}", path.display())]
    Instantiate {
        /// The file.
        path: PathBuf,
        /// Its error.
        error: PluginError,
    },
    /// The manifest is invalid.
    #[error("{}: {detail}", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The file's SHA-256 is missing from the manifest or differs from it.
    #[error("{}: checksum check failed: {detail}", path.display())]
    Checksum {
        /// The file.
        path: PathBuf,
        /// What differs.
        detail: String,
    },
    /// The file or its folder is writable by others, or otherwise unsafe to load.
    #[error("{}: refused, not safe to load plugins from: {detail}", path.display())]
    Unsafe {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The publisher's signature does not verify.
    #[error("{}: signature check failed: {detail}", path.display())]
    Signature {
        /// The manifest.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The WASM component is invalid or asks for what it may not have.
    #[error("{}: WASM component rejected: {detail}", path.display())]
    Wasm {
        /// The component.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The plugin configuration is invalid.
    #[error("plugin configuration: {detail}")]
    Config {
        /// What is wrong.
        detail: String,
    },
}

/// Where a plugin directory came from, in search order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// `plugins.path` in the configuration.
    Configured,
    /// `$KUSION_PLUGIN_PATH`.
    EnvPath,
    /// `~/.kusion/plugins`.
    UserDir,
    /// `<prefix>/lib/kusion/plugins` of the running executable `<prefix>/bin/kusionctl`, where
    /// `scripts/install.sh` puts the shipped plugins (and `scripts/stage-plugins.sh` a
    /// development build's, under `<target>/lib/kusion/plugins`).
    Installed,
}

/// The directories to search, in order, for a configuration.
pub fn search_dirs(config: &PluginConfig) -> Vec<(PathBuf, Source)> {
    let mut dirs: Vec<(PathBuf, Source)> = config
        .path
        .iter()
        .map(|p| (p.clone(), Source::Configured))
        .collect();
    if config.default_dirs {
        if let Some(path) = std::env::var_os("KUSION_PLUGIN_PATH") {
            dirs.extend(
                std::env::split_paths(&path)
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(|p| (p, Source::EnvPath)),
            );
        }
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push((
                PathBuf::from(home).join(".kusion").join("plugins"),
                Source::UserDir,
            ));
        }
        if let Some(dir) = installed_plugin_dir() {
            dirs.push((dir, Source::Installed));
        }
    }
    dirs
}

/// `<prefix>/lib/kusion/plugins` for the running executable `<prefix>/bin/<exe>` (through
/// symlinks, so a `/usr/local/bin/kusionctl` link to `/opt/kusion/bin/kusionctl` finds
/// `/opt/kusion/lib/kusion/plugins`). None when the folder does not exist.
pub fn installed_plugin_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let dir = exe
        .parent()?
        .parent()?
        .join("lib")
        .join("kusion")
        .join("plugins");
    dir.is_dir().then_some(dir)
}

/// A plugin candidate: a manifest and where its file is.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The manifest (`plugin.toml`).
    pub manifest_path: PathBuf,
    /// Which search folder it was found in.
    pub source: Source,
    /// The manifest as read.
    pub manifest: Result<Manifest, LoadError>,
    /// The resolved plugin file (none when the manifest could not be read).
    pub file: Option<PathBuf>,
}

/// The platform file name of a `cdylib` crate's library (`liblocalfile_runtime.so`).
pub fn dylib_file_name(crate_name: &str) -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        crate_name.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// Find every manifest: `<dir>/<plugin>/plugin.toml` in the search directories, in order.
pub fn discover(config: &PluginConfig) -> Vec<Candidate> {
    let mut found = Vec::new();
    for (dir, source) in search_dirs(config) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            tracing::debug!(dir = %dir.display(), "plugin directory absent or unreadable");
            continue;
        };
        let dir_unsafe = trust::check_private(&dir).err();
        let mut subdirs: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        subdirs.sort();
        for sub in subdirs {
            let manifest_path = sub.join(MANIFEST_FILE);
            if !manifest_path.is_file() {
                continue;
            }
            // Nothing from a directory others may write is trusted, not even its manifest.
            let manifest = match dir_unsafe
                .clone()
                .map_or_else(|| trust::check_private(&sub), Err)
                .and_then(|()| trust::check_private(&manifest_path))
            {
                Ok(()) => Manifest::load(&manifest_path),
                Err(e) => Err(e),
            };
            let (manifest, file) = match manifest {
                Ok(m) => match m.file_path(&manifest_path) {
                    Ok(file) => (Ok(m), Some(file)),
                    Err(e) => (Err(e), None),
                },
                Err(e) => (Err(e), None),
            };
            found.push(Candidate {
                manifest_path,
                source,
                manifest,
                file,
            });
        }
    }
    found
}

/// The state of one listed plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state", content = "reason")]
pub enum Status {
    /// Loaded and serving.
    Loaded,
    /// Found but not loaded, and why (`enabled = false`, not in `only`).
    Disabled(String),
    /// Refused, and why (checksum, ABI, sandbox ...).
    Refused(String),
}

/// One line of `kusionctl plugin list`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginEntry {
    /// From the manifest, or the manifest's directory name when the manifest is unreadable.
    pub name: String,
    /// What it is (None when the manifest is unreadable).
    pub kind: Option<PluginKind>,
    /// Native library or WASM component.
    pub format: Option<Format>,
    /// Its version.
    pub version: Option<String>,
    /// The plugin ABI it was built for.
    pub abi: Option<AbiVersion>,
    /// Its manifest.
    pub manifest: PathBuf,
    /// Its library or component.
    pub file: Option<PathBuf>,
    /// Which search folder it was found in.
    pub source: Source,
    /// Runtime capabilities (`dryRun`, `watch`, ...), the resource types served, exported
    /// functions, or granted sandbox permissions, as words.
    pub capabilities: Vec<String>,
    /// Whether it was loaded.
    pub status: Status,
}

/// Everything loaded, plus the listing.
#[derive(Default)]
pub struct LoadedPlugins {
    /// Runtimes by plugin name.
    pub runtimes: BTreeMap<String, Arc<dyn Runtime>>,
    /// KCL function plugins by name.
    pub functions: BTreeMap<String, Arc<dyn FunctionPlugin>>,
    /// Policy plugins by name.
    pub policies: BTreeMap<String, Arc<dyn PolicyPlugin>>,
    /// Every plugin found, loaded or not.
    pub entries: Vec<PluginEntry>,
}

impl LoadedPlugins {
    /// The runtime serving a resource `type`, if any.
    pub fn runtime_for(&self, resource_type: &str) -> Option<Arc<dyn Runtime>> {
        self.runtimes
            .values()
            .find(|r| {
                r.describe()
                    .resource_types
                    .iter()
                    .any(|t| t == resource_type)
            })
            .cloned()
    }
}

enum Loaded {
    Runtime(Arc<dyn Runtime>),
    Function(Arc<dyn FunctionPlugin>),
    Policy(Arc<dyn PolicyPlugin>),
}

/// Discover and load every wanted plugin. Never fails as a whole: each refusal is recorded in
/// its entry, so one broken plugin does not take the others down.
pub fn load_plugins(config: &PluginConfig) -> LoadedPlugins {
    let mut out = LoadedPlugins::default();
    let mut wasm_host = WasmHostSlot::default();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for candidate in discover(config) {
        let fallback_name = candidate
            .manifest_path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut entry = PluginEntry {
            name: fallback_name,
            kind: None,
            format: None,
            version: None,
            abi: None,
            manifest: candidate.manifest_path.clone(),
            file: candidate.file.clone(),
            source: candidate.source,
            capabilities: Vec::new(),
            status: Status::Loaded,
        };
        let manifest = match candidate.manifest {
            Ok(m) => m,
            Err(e) => {
                entry.status = Status::Refused(e.to_string());
                out.entries.push(entry);
                continue;
            }
        };
        entry.name = manifest.name.clone();
        entry.kind = Some(manifest.kind);
        entry.format = Some(manifest.format());
        entry.version = Some(manifest.version.clone());
        if let Some(first) = seen.get(&manifest.name) {
            entry.status = Status::Disabled(format!("shadowed by {}", first.display()));
            out.entries.push(entry);
            continue;
        }
        seen.insert(manifest.name.clone(), candidate.manifest_path.clone());
        if let Err(why) = config.wanted(&manifest.name) {
            entry.status = Status::Disabled(why);
            out.entries.push(entry);
            continue;
        }
        // A manifest that was read always has its file resolved (see `discover`).
        let Some(file) = candidate.file.clone() else {
            entry.status = Status::Refused(format!("`{}`: no plugin file", manifest.file));
            out.entries.push(entry);
            continue;
        };
        let settings = config.settings_for(&manifest.name);
        let result = verify_candidate(config, &manifest, &candidate.manifest_path, &file).and_then(
            |verified| {
                load_one(
                    &manifest,
                    &file,
                    &verified,
                    &settings,
                    &mut wasm_host,
                    &mut entry,
                )
            },
        );
        match result {
            Ok(loaded) => {
                let configured = if settings.config.is_null() {
                    Ok(())
                } else {
                    match &loaded {
                        Loaded::Runtime(p) => p.configure(&settings.config),
                        Loaded::Function(p) => p.configure(&settings.config),
                        Loaded::Policy(p) => p.configure(&settings.config),
                    }
                };
                if let Err(e) = configured {
                    entry.status = Status::Refused(format!("configure failed: {e}"));
                } else {
                    match loaded {
                        Loaded::Runtime(p) => {
                            out.runtimes.insert(manifest.name.clone(), p);
                        }
                        Loaded::Function(p) => {
                            out.functions.insert(manifest.name.clone(), p);
                        }
                        Loaded::Policy(p) => {
                            out.policies.insert(manifest.name.clone(), p);
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(plugin = %manifest.name, error = %e, "plugin refused");
                entry.status = Status::Refused(e.to_string());
            }
        }
        out.entries.push(entry);
    }
    out
}

/// List what is found and why anything was refused (loads the wanted plugins to describe them).
pub fn list_plugins(config: &PluginConfig) -> Vec<PluginEntry> {
    load_plugins(config).entries
}

/// Everything checked before a plugin's code may run: file ownership and modes, checksum
/// (always required), publisher signature, and for native libraries the plugin declaration in
/// the ELF symbol table. Returns the checked file.
fn verify_candidate(
    config: &PluginConfig,
    manifest: &Manifest,
    manifest_path: &Path,
    file: &Path,
) -> Result<trust::Verified, LoadError> {
    trust::check_private(file)?;
    let verified = trust::Verified::open(file)?;
    let sum = verified.sha256();
    manifest.verify_sum(file, &sum, true)?;
    trust::check_signature(
        manifest,
        manifest_path,
        &sum,
        &config.trusted_keys,
        config.require_signatures,
    )?;
    if manifest.format() == Format::Native {
        let symbol = std::str::from_utf8(kusion_sdk::abi::native::DECL_SYMBOL)
            .unwrap_or("kusion_plugin_decl")
            .trim_end_matches('\0');
        verified.require_export(symbol)?;
    }
    Ok(verified)
}

fn load_one(
    manifest: &Manifest,
    file: &Path,
    verified: &trust::Verified,
    settings: &PluginSettings,
    wasm_host: &mut WasmHostSlot,
    entry: &mut PluginEntry,
) -> Result<Loaded, LoadError> {
    match manifest.format() {
        Format::Native => {
            let _ = verified;
            let lib = NativeLibrary::open(file)?;
            entry.abi = Some(lib.abi());
            if lib.kind() != manifest.kind {
                return Err(LoadError::WrongKind {
                    path: file.to_path_buf(),
                    found: lib.kind(),
                    expected: manifest.kind,
                });
            }
            Ok(match manifest.kind {
                PluginKind::Runtime => {
                    let runtime = lib.runtime()?;
                    let info = runtime.describe();
                    entry.capabilities = runtime_capabilities(&info);
                    Loaded::Runtime(runtime)
                }
                PluginKind::Function => {
                    let function = lib.function()?;
                    entry.capabilities = function
                        .describe()
                        .functions
                        .iter()
                        .map(|f| format!("fn:{f}"))
                        .collect();
                    Loaded::Function(function)
                }
                PluginKind::Policy => Loaded::Policy(lib.policy()?),
            })
        }
        Format::Wasm => load_wasm(manifest, file, settings, wasm_host, entry),
    }
}

#[cfg(feature = "wasm")]
fn load_wasm(
    manifest: &Manifest,
    file: &Path,
    settings: &PluginSettings,
    wasm_host: &mut WasmHostSlot,
    entry: &mut PluginEntry,
) -> Result<Loaded, LoadError> {
    let host = wasm_host
        .get_or_insert_with(WasmHost::new)
        .as_ref()
        .map_err(Clone::clone)?;
    let module = host.compile(file)?;
    entry.abi = Some(module.abi());
    let grants = WasmGrants::intersect(&manifest.permissions.as_request(), &settings.grants);
    let mut caps = vec![
        format!("fuel:{}", settings.limits.fuel),
        format!("memory:{}", settings.limits.memory_bytes),
        format!("wallClockMs:{}", settings.limits.wall_clock_ms),
    ];
    caps.extend(
        grants
            .dirs
            .iter()
            .map(|(g, h)| format!("dir:{g}={}", h.display())),
    );
    caps.extend(grants.env.iter().map(|v| format!("env:{v}")));
    caps.extend(grants.hosts.iter().map(|h| format!("http:{h}")));
    if grants.network {
        caps.push("network".into());
    }
    let loaded = match manifest.kind {
        PluginKind::Function => {
            let function = module.function(grants, settings.limits)?;
            caps.extend(
                function
                    .describe()
                    .functions
                    .iter()
                    .map(|f| format!("fn:{f}")),
            );
            Loaded::Function(function)
        }
        PluginKind::Policy => Loaded::Policy(module.policy(grants, settings.limits)?),
        PluginKind::Runtime => {
            let runtime = module.runtime(grants, settings.limits)?;
            let mut described = runtime_capabilities(&runtime.describe());
            described.append(&mut caps);
            caps = described;
            Loaded::Runtime(runtime)
        }
    };
    entry.capabilities = caps;
    Ok(loaded)
}

#[cfg(not(feature = "wasm"))]
fn load_wasm(
    _: &Manifest,
    file: &Path,
    _: &PluginSettings,
    _: &mut WasmHostSlot,
    _: &mut PluginEntry,
) -> Result<Loaded, LoadError> {
    Err(LoadError::Wasm {
        path: file.to_path_buf(),
        detail: "this build of kusion has no WASM plugin host (kusion-kernel feature `wasm`)"
            .into(),
    })
}

fn runtime_capabilities(info: &kusion_sdk::runtime::RuntimeInfo) -> Vec<String> {
    let c = &info.capabilities;
    let mut caps: Vec<String> = info
        .resource_types
        .iter()
        .map(|t| format!("type:{t}"))
        .collect();
    for (on, word) in [
        (c.dry_run, "dryRun"),
        (c.watch, "watch"),
        (c.import, "import"),
        (c.sensitive_fields, "sensitiveFields"),
    ] {
        if on {
            caps.push(word.to_string());
        }
    }
    caps
}

/// Load a single plugin file directly (no manifest): for tests and `kusionctl plugin check`.
pub fn load_native_runtime(path: &Path) -> Result<Arc<dyn Runtime>, LoadError> {
    NativeLibrary::open(path)?.runtime()
}

/// Helper for hosts and tests: configure a freshly loaded plugin, mapping its error to a load error.
pub fn configure_runtime(
    path: &Path,
    runtime: &dyn Runtime,
    config: &Value,
) -> Result<(), LoadError> {
    runtime
        .configure(config)
        .map_err(|error| LoadError::Instantiate {
            path: path.to_path_buf(),
            error,
        })
}
