//! Where packages live and which registry `name = "version"` dependencies come from: upstream
//! kpm's settings. `$KCL_PKG_PATH` (default `~/.kcl/kpm`) is the cache;
//! `$KCL_PKG_PATH/.kpm/config/kpm.json` names the default registry and repository
//! (`DefaultOciRegistry`, `DefaultOciRepo`, `DefaultOciPlainHttp`), which `KPM_REG`, `KPM_REPO`
//! and `OCI_REG_PLAIN_HTTP=on|off` override.

use std::path::{Path, PathBuf};

use super::PkgError;

/// The package cache folder: `$KCL_PKG_PATH`, else `~/.kcl/kpm`.
pub fn pkg_path() -> PathBuf {
    match std::env::var_os("KCL_PKG_PATH") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => home().join(".kcl").join("kpm"),
    }
}

pub(crate) fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// kpm's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The package cache (`$KCL_PKG_PATH`).
    pub pkg_path: PathBuf,
    /// Registry of `name = "version"` dependencies and of `kcl mod push` without a URL.
    pub default_registry: String,
    /// Repository prefix under it (`kcl-lang`: `k8s` is `ghcr.io/kcl-lang/k8s`).
    pub default_repo: String,
    /// `Some(plain)` when plain HTTP is forced on or off for every registry; `None` means plain
    /// HTTP for loopback registries only.
    pub plain_http: Option<bool>,
    /// kpm's own credentials file (`kcl registry login` writes it); Docker's config is read too.
    pub credentials_file: PathBuf,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct KpmJson {
    default_oci_registry: Option<String>,
    default_oci_repo: Option<String>,
    default_oci_plain_http: Option<bool>,
}

impl Settings {
    /// Reads the settings (the file is optional; upstream creates it with the defaults, this
    /// only reads it).
    pub fn load() -> Result<Settings, PkgError> {
        let pkg_path = pkg_path();
        let conf_dir = pkg_path.join(".kpm").join("config");
        let kpm_json = conf_dir.join("kpm.json");
        let conf: KpmJson = match std::fs::read_to_string(&kpm_json) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                PkgError::Syntax(format!(
                    "{}:{}:{}: {e}",
                    kpm_json.display(),
                    e.line(),
                    e.column()
                ))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => KpmJson::default(),
            Err(e) => return Err(PkgError::io(&kpm_json, e)),
        };
        let mut s = Settings {
            default_registry: conf
                .default_oci_registry
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "ghcr.io".into()),
            default_repo: conf
                .default_oci_repo
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "kcl-lang".into()),
            plain_http: conf.default_oci_plain_http,
            credentials_file: conf_dir.join("config.json"),
            pkg_path,
        };
        if let Some(r) = std::env::var("KPM_REG").ok().filter(|v| !v.is_empty()) {
            s.default_registry = r;
        }
        if let Some(r) = std::env::var("KPM_REPO").ok().filter(|v| !v.is_empty()) {
            s.default_repo = r;
        }
        if let Some(v) = std::env::var("OCI_REG_PLAIN_HTTP")
            .ok()
            .filter(|v| !v.is_empty())
        {
            s.plain_http = Some(match v.to_ascii_lowercase().as_str() {
                "on" => true,
                "off" => false,
                _ => {
                    return Err(PkgError::Invalid(format!(
                        "invalid value for environment variable 'OCI_REG_PLAIN_HTTP': expected 'on' or 'off', got '{v}'"
                    )));
                }
            });
        }
        Ok(s)
    }

    /// Whether to speak plain HTTP to `host` (`name:port`): as forced, else for loopback hosts
    /// only (upstream: `localhost`; this also takes `127.0.0.1` and `[::1]`).
    pub fn plain_http_for(&self, host: &str) -> bool {
        if let Some(p) = self.plain_http {
            return p;
        }
        let name = match host.rsplit_once(':') {
            Some((n, port)) if port.chars().all(|c| c.is_ascii_digit()) => n,
            _ => host,
        };
        name == "localhost"
            || name == "[::1]"
            || name
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The cache folder of a package (`<pkg_path>/<name>_<version>`, upstream's layout).
    pub fn cache_dir(&self, full_name: &str) -> PathBuf {
        self.pkg_path.join(full_name)
    }
}

/// The file name under `dir` that is free to create a temporary folder in (same file system as
/// `dir`, so a finished download is renamed into place).
pub(crate) fn temp_sibling(dir: &Path, stem: &str) -> PathBuf {
    let n = std::process::id();
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    dir.join(format!(".{stem}.tmp-{n}-{t}"))
}
