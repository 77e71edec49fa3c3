//! The kusion configuration as the command line layers it: the config file (`--config`, else
//! `~/.kusion/config.toml`), `KUSION_*` environment variables and `--set key=value` flags (the
//! kernel's `layered_section` does the layering), and the `--runtime-config` file.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kusion_kernel::plugin::PluginConfig;
use serde_json::Value;

use crate::UsageError;
use crate::args::Cli;

/// The plugin configuration: the config file, `KUSION_PLUGINS__*` variables and `--set` flags.
/// Plugins are then found in the configured directories and the default ones (see
/// `kusion_kernel::plugin::search_dirs`); nothing here knows where a source checkout keeps them.
pub(crate) fn plugin_config(cli: &Cli) -> Result<PluginConfig> {
    plugin_config_from(cli.global.config.clone(), &cli.global.set)
}

/// The plugin configuration from a config file (default `~/.kusion/config.toml`) and `--set`
/// flags (see [`plugin_config`]).
pub(crate) fn plugin_config_from(file: Option<PathBuf>, set: &[String]) -> Result<PluginConfig> {
    let file = config_file(file);
    Ok(PluginConfig::load(file.as_deref(), &set_overrides(set)?)?)
}

/// The kusion configuration file: `--config`, else `~/.kusion/config.toml` when present.
pub(crate) fn config_file(given: Option<PathBuf>) -> Option<PathBuf> {
    given.or_else(|| {
        let default = PathBuf::from(std::env::var_os("HOME")?)
            .join(".kusion")
            .join("config.toml");
        default.is_file().then_some(default)
    })
}

/// `--set KEY=VALUE` flags as (key, value) overrides; one without `=` is a usage error.
pub(crate) fn set_overrides(set: &[String]) -> Result<Vec<(String, String)>> {
    set.iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| {
                    anyhow::Error::new(UsageError(format!("--set {kv:?}: expected KEY=VALUE")))
                })
        })
        .collect()
}

pub(crate) fn read_runtime_config(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading runtime config {}", path.display()))?;
    serde_yaml_to_json(&text).with_context(|| format!("parsing runtime config {}", path.display()))
}

fn serde_yaml_to_json(text: &str) -> Result<Value> {
    Ok(kusion_kernel::spec::yaml_to_json(text)?)
}
