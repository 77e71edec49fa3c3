//! The operator's configuration (`TerraformConfig`, handed to `configure`) and the settings the
//! runtime derives from it: provider mirrors and caches, the intent journal, logs, and defaults
//! taken from the environment (`KUSION_CACHE`, `KUSION_TF_PLUGIN_MIRRORS`, `TF_PLUGIN_CACHE_DIR`).

use super::*;

/// Operator configuration handed to [`Runtime::configure`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TerraformConfig {
    /// Filesystem mirrors searched before the defaults (`KUSION_TF_PLUGIN_MIRRORS`,
    /// `~/.terraform.d/plugins`, `/opt/tf-plugins`).
    pub mirrors: Vec<PathBuf>,
    /// Where downloaded providers are unpacked (default `TF_PLUGIN_CACHE_DIR`, else
    /// `$KUSION_CACHE/terraform/plugins`).
    pub plugin_cache_dir: Option<PathBuf>,
    /// Where provider schemas are cached by binary checksum.
    pub schema_cache_dir: Option<PathBuf>,
    /// Where the runtime journals creates in flight, so a re-run after a crash adopts the
    /// object instead of creating a duplicate.
    pub state_dir: Option<PathBuf>,
    /// Where provider processes write their output.
    pub log_dir: Option<PathBuf>,
    /// 0: provider output only in the log; > 0: also on this process' stderr.
    pub verbosity: u8,
    /// Forbid registry downloads.
    pub offline: bool,
    /// Registry hosts reached over plain http (local test registries only).
    pub insecure_registries: Vec<String>,
    /// Seconds a provider gets to exit after Shutdown before it is killed.
    pub shutdown_grace_seconds: Option<u64>,
    /// Always call PlanResourceChange in dry-runs, even for a resource whose refreshed state
    /// equals its recorded state and whose configuration is the one it was applied with (see
    /// `Inner::unchanged_since_apply`).
    pub always_plan: bool,
}

#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub(super) install: InstallConfig,
    /// Journal of creates in flight (see `Inner::apply`).
    pub(super) intent_dir: PathBuf,
    pub(super) schema_dir: PathBuf,
    pub(super) log_dir: PathBuf,
    pub(super) verbose: bool,
    pub(super) grace: Duration,
    pub(super) always_plan: bool,
}

pub(super) fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUSION_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("kusion-rs")
}

impl Settings {
    pub(super) fn from_config(config: &TerraformConfig) -> Settings {
        let root = cache_root().join("terraform");
        let mut mirrors = config.mirrors.clone();
        if let Some(env) = std::env::var_os("KUSION_TF_PLUGIN_MIRRORS") {
            mirrors.extend(std::env::split_paths(&env));
        }
        if let Some(home) = std::env::var_os("HOME") {
            mirrors.push(PathBuf::from(home).join(".terraform.d").join("plugins"));
        }
        mirrors.push(PathBuf::from("/opt/tf-plugins"));
        let cache_dir = config
            .plugin_cache_dir
            .clone()
            .or_else(|| std::env::var_os("TF_PLUGIN_CACHE_DIR").map(PathBuf::from))
            .unwrap_or_else(|| root.join("plugins"));
        Settings {
            install: InstallConfig {
                mirrors,
                cache_dir,
                online: !config.offline,
                insecure_hosts: config.insecure_registries.clone(),
            },
            intent_dir: config
                .state_dir
                .clone()
                .unwrap_or_else(|| root.join("intents")),
            schema_dir: config
                .schema_cache_dir
                .clone()
                .unwrap_or_else(|| root.join("schemas")),
            log_dir: config.log_dir.clone().unwrap_or_else(|| root.join("logs")),
            verbose: config.verbosity > 0,
            grace: Duration::from_secs(config.shutdown_grace_seconds.unwrap_or(5)),
            always_plan: config.always_plan,
        }
    }
}

impl Inner {
    pub(super) fn settings(&self) -> Arc<Settings> {
        self.settings
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }
}
