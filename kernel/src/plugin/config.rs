//! The `[plugins]` section of the kernel's configuration, read with the `config` crate from a TOML
//! file, then `KUSION_PLUGINS__*` environment variables, then command-line overrides (later
//! sources win).
//!
//! ```toml
//! [plugins]
//! path = ["/opt/kusion/plugins"]      # searched before the default directories
//! default_dirs = true                 # also search $KUSION_PLUGIN_PATH, ~/.kusion/plugins and
//!                                     # <exe dir>/../lib/kusion/plugins
//! only = ["localfile"]                # if set, load only these plugins
//! require_signatures = false          # refuse plugins without a trusted publisher signature
//!
//! [plugins.trusted_keys]
//! acme = "MCowBQYDK2VwAyEA..."        # publisher name = base64 ed25519 public key
//!
//! [plugins.settings.localfile]
//! config = { root = "/srv/files" }    # handed to the plugin's configure()
//!
//! [plugins.settings.deployment-limits]
//! limits = { fuel = 1000000000, memoryBytes = 33554432, wallClockMs = 30000 }
//! grants = { dirs = { "/data" = "/srv/policy-data" } }
//!
//! [plugins.settings.rabbitmq]
//! grants = { hosts = ["127.0.0.1:15672"] }   # outgoing HTTP (wasi:http) to these host:port pairs
//! ```
//!
//! Environment example: `KUSION_PLUGINS__ONLY=localfile,kubernetes`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kusion_sdk::Value;
use serde::{Deserialize, Serialize};

use super::LoadError;
use super::grants::{WasmGrants, WasmLimits};

fn yes() -> bool {
    true
}

/// How plugins are found and configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PluginConfig {
    /// Extra plugin directories, searched first, in order.
    pub path: Vec<PathBuf>,
    /// Also search `$KUSION_PLUGIN_PATH`, `~/.kusion/plugins` and the install prefix of the
    /// running executable (`<exe dir>/../lib/kusion/plugins`).
    pub default_dirs: bool,
    /// When set, only these plugin names are loaded; the rest are listed as disabled.
    pub only: Option<Vec<String>>,
    /// Per-plugin settings by plugin name.
    pub settings: BTreeMap<String, PluginSettings>,
    /// Publisher name -> base64 ed25519 public key; a signed plugin must be signed by one.
    pub trusted_keys: BTreeMap<String, String>,
    /// Refuse plugins without a valid publisher signature.
    pub require_signatures: bool,
}

impl Default for PluginConfig {
    fn default() -> Self {
        PluginConfig {
            path: Vec::new(),
            default_dirs: true,
            only: None,
            settings: BTreeMap::new(),
            trusted_keys: BTreeMap::new(),
            require_signatures: false,
        }
    }
}

/// The operator's settings for one plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PluginSettings {
    /// Whether to load it.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Passed to the plugin's `configure` after loading (`null` skips the call).
    pub config: Value,
    /// Per-call limits (WASM plugins).
    pub limits: WasmLimits,
    /// What the operator allows a WASM plugin to reach; it gets only what its manifest also asks.
    pub grants: WasmGrants,
}

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            enabled: true,
            config: Value::Null,
            limits: WasmLimits::default(),
            grants: WasmGrants::default(),
        }
    }
}

impl PluginConfig {
    /// Layer the sources: `file` (TOML, optional), the environment, then `overrides`
    /// (`("plugins.default_dirs", "false")`, as parsed from `--set key=value` flags).
    pub fn load(
        file: Option<&Path>,
        overrides: &[(String, String)],
    ) -> Result<PluginConfig, LoadError> {
        layered_section(
            file,
            "plugins",
            &["plugins.path", "plugins.only"],
            overrides.iter(),
        )
        .map_err(|detail| LoadError::Config {
            detail: format!("{}: {detail}", source_name(file)),
        })
    }

    /// The settings of plugin `name` (defaults when it has none).
    pub fn settings_for(&self, name: &str) -> PluginSettings {
        self.settings.get(name).cloned().unwrap_or_default()
    }

    /// Whether a plugin of this name is wanted (see `only` and `enabled`).
    pub fn wanted(&self, name: &str) -> Result<(), String> {
        if let Some(only) = &self.only
            && !only.iter().any(|n| n == name)
        {
            return Err("not selected by `plugins.only`".into());
        }
        if !self.settings_for(name).enabled {
            return Err("disabled by `plugins.settings.<name>.enabled = false`".into());
        }
        Ok(())
    }
}

/// How errors name where the configuration came from.
pub(crate) fn source_name(file: Option<&Path>) -> String {
    file.map_or_else(
        || "environment and flags".to_string(),
        |f| format!("{}, environment and flags", f.display()),
    )
}

/// One section of the kusion configuration, layered: `file` (TOML, required when given), the
/// `KUSION_*` environment (`__` nests: `KUSION_PLUGINS__ONLY`), then `--set key=value`
/// overrides. `list_keys` are read from the environment as comma-separated lists. An absent
/// section is its default; the error is the message alone (the caller names the source).
pub(crate) fn layered_section<'a, T: serde::de::DeserializeOwned + Default>(
    file: Option<&Path>,
    section: &str,
    list_keys: &[&str],
    overrides: impl Iterator<Item = &'a (String, String)>,
) -> Result<T, String> {
    let mut builder = config::Config::builder();
    if let Some(file) = file {
        builder = builder.add_source(
            config::File::from(file)
                .format(config::FileFormat::Toml)
                .required(true),
        );
    }
    let mut environment = config::Environment::with_prefix("KUSION")
        .prefix_separator("_")
        .separator("__")
        .try_parsing(true);
    // A list separator with no keys named would read every value as a list.
    if !list_keys.is_empty() {
        environment = environment.list_separator(",");
        for key in list_keys {
            environment = environment.with_list_parse_key(key);
        }
    }
    builder = builder.add_source(environment);
    for (key, value) in overrides {
        builder = builder
            .set_override(key.as_str(), value.as_str())
            .map_err(|e| format!("--set {key}: {e}"))?;
    }
    let layered = builder.build().map_err(|e| e.to_string())?;
    match layered.get::<T>(section) {
        Ok(value) => Ok(value),
        Err(config::ConfigError::NotFound(_)) => Ok(T::default()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kusion.toml");
        std::fs::write(
            &file,
            r#"
[plugins]
path = ["/a", "/b"]
only = ["localfile"]
[plugins.settings.localfile]
config = { root = "/srv" }
[plugins.settings.policy]
limits = { fuel = 5, memoryBytes = 1024 }
grants = { dirs = { "/data" = "/srv/data" } }
"#,
        )
        .unwrap();
        let config = PluginConfig::load(
            Some(&file),
            &[("plugins.default_dirs".into(), "false".into())],
        )
        .unwrap();
        assert_eq!(config.path, vec![PathBuf::from("/a"), PathBuf::from("/b")]);
        assert!(!config.default_dirs);
        assert_eq!(config.settings_for("localfile").config["root"], "/srv");
        let policy = config.settings_for("policy");
        assert_eq!(
            policy.limits,
            WasmLimits {
                fuel: 5,
                memory_bytes: 1024,
                ..WasmLimits::default()
            }
        );
        assert_eq!(policy.grants.dirs["/data"], PathBuf::from("/srv/data"));
        assert!(config.wanted("localfile").is_ok());
        assert!(config.wanted("other").unwrap_err().contains("plugins.only"));
    }

    #[test]
    fn bad_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kusion.toml");
        std::fs::write(&file, "[plugins]\npath = 3\n").unwrap();
        let err = PluginConfig::load(Some(&file), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("kusion.toml") && err.contains("expected a sequence"),
            "{err}"
        );
    }
}
