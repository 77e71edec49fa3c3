//! Plugin manifests (`plugin.toml`): what a plugin is, which file holds it, and its checksum.
//!
//! ```toml
//! name = "localfile"
//! kind = "runtime"            # runtime | function | policy
//! version = "0.1.0"
//! file = "liblocalfile_runtime.so"   # relative to the manifest's directory
//! sha256 = "9f2c..."          # of `file`; required for installed plugins
//!
//! [permissions]               # WASM plugins only: what the plugin asks for
//! dirs = ["/data"]            # guest paths the operator may map to host directories
//! env = ["TZ"]
//! network = false            # also asks for outgoing HTTP; the operator grants `hosts`
//! writable = false
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};

use kusion_sdk::abi::PluginKind;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::LoadError;
use super::grants::WasmGrants;

/// The file name of a manifest inside a plugin's directory.
pub const MANIFEST_FILE: &str = "plugin.toml";

/// How a plugin is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A `cdylib` using the `abi_stable` ABI.
    Native,
    /// A WebAssembly component implementing `sdk/wit/plugin.wit`.
    Wasm,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Native => "native",
            Format::Wasm => "wasm",
        })
    }
}

/// What a WASM plugin asks to reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Permissions {
    /// Guest folders the component asks for (the operator's grant says where each points).
    pub dirs: Vec<String>,
    /// Environment variables it asks for.
    pub env: Vec<String>,
    /// Whether it asks for the network.
    pub network: bool,
    /// Whether it asks to write to them.
    pub writable: bool,
}

impl Permissions {
    /// As a [`WasmGrants`] request (host sides left empty).
    pub fn as_request(&self) -> WasmGrants {
        WasmGrants {
            dirs: self
                .dirs
                .iter()
                .map(|d| (d.clone(), PathBuf::new()))
                .collect(),
            writable: self.writable,
            env: self.env.clone(),
            network: self.network,
            hosts: Vec::new(),
        }
    }
}

/// A plugin's `plugin.toml`: what it is, where its file is, its checksum, signature and sandbox permissions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The plugin's name (unique among loaded plugins).
    pub name: String,
    /// Runtime, function or policy.
    pub kind: PluginKind,
    /// Its version.
    pub version: String,
    /// Path of the library or component, relative to the manifest's directory.
    pub file: String,
    /// Inferred from `file` when absent (`.wasm` is WASM, anything else native).
    #[serde(default)]
    pub format: Option<Format>,
    /// Hex SHA-256 of `file`.
    #[serde(default)]
    pub sha256: Option<String>,
    /// What a WASM plugin asks to reach (ignored for native plugins).
    #[serde(default)]
    pub permissions: Permissions,
    /// Who signed the plugin: a name in the operator's `[plugins.trusted_keys]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// Base64 ed25519 signature of the publisher over name, version, kind and `sha256`
    /// (see [`super::trust::signed_text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl Manifest {
    /// Read and validate a manifest; errors name `file:line:col`.
    pub fn load(path: &Path) -> Result<Manifest, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::Manifest {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        Self::parse(path, &text)
    }

    /// Reads the manifest at `path` from `text`.
    pub fn parse(path: &Path, text: &str) -> Result<Manifest, LoadError> {
        let manifest: Manifest = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|span| line_col(text, span.start))
                .unwrap_or((1, 1));
            LoadError::Manifest {
                path: path.to_path_buf(),
                detail: format!("{}:{}: {}", at.0, at.1, e.message()),
            }
        })?;
        let bad = |detail: String| LoadError::Manifest {
            path: path.to_path_buf(),
            detail,
        };
        if manifest.name.is_empty()
            || !manifest
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(bad(format!(
                "`name` must be non-empty ASCII letters, digits, `-`, `_` or `.`, got `{}`",
                manifest.name
            )));
        }
        if manifest.file.is_empty() {
            return Err(bad("`file` must not be empty".into()));
        }
        if let Some(sum) = &manifest.sha256
            && (sum.len() != 64 || !sum.chars().all(|c| c.is_ascii_hexdigit()))
        {
            return Err(bad(format!("`sha256` must be 64 hex digits, got `{sum}`")));
        }
        Ok(manifest)
    }

    /// Native or WASM: as written, else from the file's extension.
    pub fn format(&self) -> Format {
        self.format.unwrap_or(if self.file.ends_with(".wasm") {
            Format::Wasm
        } else {
            Format::Native
        })
    }

    /// The plugin file, resolved against the manifest's directory; refused when it would lie
    /// outside it.
    pub fn file_path(&self, manifest_path: &Path) -> Result<PathBuf, LoadError> {
        super::trust::contained_file(self, manifest_path)
    }

    /// Check the file against `sha256`. `require` makes a missing checksum an error.
    pub fn verify(&self, file: &Path, require: bool) -> Result<(), LoadError> {
        self.verify_sum(file, &sha256_file(file)?, require)
    }

    /// Check a file's computed checksum `actual` against `sha256`.
    pub fn verify_sum(&self, file: &Path, actual: &str, require: bool) -> Result<(), LoadError> {
        let Some(expected) = &self.sha256 else {
            if require {
                return Err(LoadError::Checksum {
                    path: file.to_path_buf(),
                    detail: "the manifest has no `sha256`; installed plugins must carry one".into(),
                });
            }
            return Ok(());
        };
        if !actual.eq_ignore_ascii_case(expected) {
            return Err(LoadError::Checksum {
                path: file.to_path_buf(),
                detail: format!("sha256 is {actual}, the manifest says {expected}"),
            });
        }
        Ok(())
    }
}

/// Hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> Result<String, LoadError> {
    let open = |e: std::io::Error| LoadError::Open {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let mut file = std::fs::File::open(path).map_err(open)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut buf).map_err(open)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Install a plugin file into `plugins_dir/<name>/`: copy it and write a manifest with its
/// checksum. Returns the manifest path. (No `kusionctl` subcommand calls it yet: plugins are
/// installed by hand, as `sdk/README.md` describes; the test harness stages a checkout's builds
/// with it.) Both files are written beside their place and renamed into it, so a library another
/// process has mapped is replaced by a new file, never rewritten under it.
pub fn install(plugins_dir: &Path, manifest: &Manifest, file: &Path) -> Result<PathBuf, LoadError> {
    let io = |p: &Path, e: std::io::Error| LoadError::Open {
        path: p.to_path_buf(),
        detail: e.to_string(),
    };
    let dir = plugins_dir.join(&manifest.name);
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let file_name = file.file_name().ok_or_else(|| LoadError::Open {
        path: file.to_path_buf(),
        detail: "not a file".into(),
    })?;
    let dest = dir.join(file_name);
    let partial = |name: &std::ffi::OsStr| {
        let mut partial = std::ffi::OsString::from(".");
        partial.push(name);
        partial.push(format!(".{}.partial", std::process::id()));
        dir.join(partial)
    };
    let dest_partial = partial(file_name);
    std::fs::copy(file, &dest_partial).map_err(|e| io(&dest_partial, e))?;
    let mut installed = manifest.clone();
    installed.file = file_name.to_string_lossy().into_owned();
    installed.sha256 = Some(sha256_file(&dest_partial)?);
    let manifest_path = dir.join(MANIFEST_FILE);
    let text = toml::to_string(&installed).map_err(|e| LoadError::Manifest {
        path: manifest_path.clone(),
        detail: e.to_string(),
    })?;
    let manifest_partial = partial(std::ffi::OsStr::new(MANIFEST_FILE));
    std::fs::write(&manifest_partial, text).map_err(|e| io(&manifest_partial, e))?;
    std::fs::rename(&dest_partial, &dest).map_err(|e| io(&dest, e))?;
    std::fs::rename(&manifest_partial, &manifest_path).map_err(|e| io(&manifest_path, e))?;
    Ok(manifest_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_line_and_column() {
        let text = "name = \"x\"\nkind = \"gadget\"\nversion = \"1\"\nfile = \"a.so\"\n";
        let err = Manifest::parse(Path::new("p/plugin.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("p/plugin.toml") && err.contains("2:8"),
            "{err}"
        );
    }

    #[test]
    fn wasm_runtime_manifest_is_accepted() {
        // Whether the component really exports the runtime world is checked when it is loaded
        // (`wasm_runtime_manifest_over_a_non_runtime_component_is_refused_by_name`).
        let text = "name = \"x\"\nkind = \"runtime\"\nversion = \"1\"\nfile = \"a.wasm\"\n";
        let manifest = Manifest::parse(Path::new("plugin.toml"), text).unwrap();
        assert_eq!(manifest.kind, PluginKind::Runtime);
        assert_eq!(manifest.format(), Format::Wasm);
    }

    #[test]
    fn checksum_is_verified() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lib.so");
        std::fs::write(&file, b"hello").unwrap();
        let manifest = Manifest {
            name: "x".into(),
            kind: PluginKind::Function,
            version: "1".into(),
            file: "lib.so".into(),
            format: None,
            sha256: Some("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824".into()),
            permissions: Permissions::default(),
            publisher: None,
            signature: None,
        };
        manifest.verify(&file, true).unwrap();
        std::fs::write(&file, b"hellO").unwrap();
        let err = manifest.verify(&file, true).unwrap_err().to_string();
        assert!(err.contains("the manifest says 2cf24dba"), "{err}");
        let unsigned = Manifest {
            sha256: None,
            ..manifest
        };
        assert!(unsigned.verify(&file, true).is_err());
        unsigned.verify(&file, false).unwrap();
    }
}
