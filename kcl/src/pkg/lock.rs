//! `kcl.mod.lock`: every dependency (direct and indirect) with the version, checksum and source
//! it resolved to, in upstream kpm's format:
//!
//! ```toml
//! [dependencies]
//!   [dependencies.k8s]
//!     name = "k8s"
//!     full_name = "k8s_1.31.2"
//!     version = "1.31.2"
//!     sum = "xBZgPsnpVVyWBpahuPQHReeRx28eUHGFoaPeqbct+vs="
//!     reg = "ghcr.io"
//!     repo = "kcl-lang/k8s"
//!     oci_tag = "1.31.2"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use super::modfile::toml_quote;
use super::{PkgError, toml_syntax_error};

/// One locked dependency. Field order is the file's.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct LockEntry {
    pub name: String,
    pub full_name: String,
    pub version: String,
    pub sum: String,
    // git
    pub url: String,
    pub branch: String,
    pub commit: String,
    pub git_tag: String,
    pub package: String,
    // oci
    pub reg: String,
    pub repo: String,
    pub oci_tag: String,
    // local
    pub path: String,
}

/// The lock file: entries by dependency name (sorted, as upstream writes them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockFile {
    pub entries: BTreeMap<String, LockEntry>,
}

#[derive(serde::Deserialize, Default)]
struct Raw {
    #[serde(default)]
    dependencies: BTreeMap<String, LockEntry>,
}

impl LockFile {
    /// Reads `root/kcl.mod.lock`; an absent file is an empty lock.
    pub fn load(root: &Path) -> Result<LockFile, PkgError> {
        let path = root.join("kcl.mod.lock");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LockFile::default()),
            Err(e) => return Err(PkgError::io(&path, e)),
        };
        Self::parse(&path, &text)
    }

    /// Parses the text of `path`.
    pub fn parse(path: &Path, text: &str) -> Result<LockFile, PkgError> {
        let raw: Raw = toml::from_str(text)
            .map_err(|e| toml_syntax_error(path, text, e.span(), e.message()))?;
        let mut entries = raw.dependencies;
        for (k, v) in entries.iter_mut() {
            if v.name.is_empty() {
                v.name = k.clone();
            }
        }
        Ok(LockFile { entries })
    }

    /// The file's text, byte for byte as upstream writes it (an empty lock is an empty file).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if self.entries.is_empty() {
            return out;
        }
        out.push_str("[dependencies]\n");
        for (key, e) in &self.entries {
            out.push_str(&format!("  [dependencies.{}]\n", toml_key(key)));
            for (k, v) in [
                ("name", &e.name),
                ("full_name", &e.full_name),
                ("version", &e.version),
                ("sum", &e.sum),
                ("url", &e.url),
                ("branch", &e.branch),
                ("commit", &e.commit),
                ("git_tag", &e.git_tag),
                ("package", &e.package),
                ("reg", &e.reg),
                ("repo", &e.repo),
                ("oci_tag", &e.oci_tag),
                ("path", &e.path),
            ] {
                if !v.is_empty() {
                    out.push_str(&format!("    {k} = {}\n", toml_quote(v)));
                }
            }
        }
        out
    }

    /// Writes `root/kcl.mod.lock` when its content changes; returns whether it did.
    pub fn store(&self, root: &Path) -> Result<bool, PkgError> {
        let path = root.join("kcl.mod.lock");
        let text = self.to_text();
        if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
            return Ok(false);
        }
        std::fs::write(&path, text).map_err(|e| PkgError::io(&path, e))?;
        Ok(true)
    }
}

fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        toml_quote(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_text_round_trips() {
        let text = "[dependencies]\n  [dependencies.dep_pkg]\n    name = \"dep_pkg\"\n    full_name = \"dep_pkg_0.0.1\"\n    version = \"0.0.1\"\n    sum = \"C3TjaZJVdt4G8TtbiCxTUO/zAlf7fWJTAvs/CDMnlxY=\"\n    path = \"../dep_pkg\"\n  [dependencies.helloworld]\n    name = \"helloworld\"\n    full_name = \"helloworld_0.1.1\"\n    version = \"0.1.1\"\n    sum = \"7OO4YK2QuRWPq9C7KTzcWcti5yUnueCjptT3OXiPVeQ=\"\n    reg = \"ghcr.io\"\n    repo = \"kcl-lang/helloworld\"\n    oci_tag = \"0.1.1\"\n";
        let l = LockFile::parse(Path::new("kcl.mod.lock"), text).unwrap();
        assert_eq!(l.entries["helloworld"].repo, "kcl-lang/helloworld");
        assert_eq!(l.to_text(), text);
    }

    #[test]
    fn malformed_lock_names_line_and_column() {
        let e = LockFile::parse(
            Path::new("kcl.mod.lock"),
            "[dependencies]\n  [dependencies.a]\n    sum = 3\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("kcl.mod.lock:3:11:"), "{e}");
    }
}
