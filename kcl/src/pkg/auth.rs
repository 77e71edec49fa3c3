//! Registry credentials from the usual places: kpm's own credentials file
//! (`$KCL_PKG_PATH/.kpm/config/config.json`, what `kcl registry login` writes) and Docker's
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), both in Docker's format:
//! `auths.<host>.auth` (base64 `user:password`) or `username`/`password`, and credential
//! helpers (`credHelpers.<host>`, `credsStore`) run as `docker-credential-<name> get`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;

/// A user name and password (or token) for a registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credential {
    // never print the secret
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}, ***)", self.username)
    }
}

/// The config files searched, first match wins.
pub fn config_files(kpm_credentials: &Path) -> Vec<PathBuf> {
    let docker = match std::env::var_os("DOCKER_CONFIG") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("config.json"),
        _ => super::settings::home().join(".docker").join("config.json"),
    };
    vec![kpm_credentials.to_path_buf(), docker]
}

/// The credential for `host` (`name[:port]`), if any file has one. A file that cannot be
/// parsed is reported (not ignored): a typo there would otherwise look like a denied login.
pub fn lookup(host: &str, files: &[PathBuf]) -> Result<Option<Credential>, super::PkgError> {
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            super::PkgError::Syntax(format!("{}:{}:{}: {e}", f.display(), e.line(), e.column()))
        })?;
        if let Some(helper) = v
            .get("credHelpers")
            .and_then(|h| h.get(host))
            .and_then(|h| h.as_str())
            && let Some(c) = from_helper(helper, host)?
        {
            return Ok(Some(c));
        }
        if let Some(auths) = v.get("auths").and_then(|a| a.as_object()) {
            for (key, entry) in auths {
                if normalize(key) != host {
                    continue;
                }
                if let Some(c) = from_entry(entry, f, key)? {
                    return Ok(Some(c));
                }
            }
        }
        if let Some(store) = v.get("credsStore").and_then(|s| s.as_str())
            && let Some(c) = from_helper(store, host)?
        {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// `https://host/v1/` and `host` are the same key to Docker.
fn normalize(key: &str) -> &str {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k)
}

fn from_entry(
    entry: &serde_json::Value,
    file: &Path,
    key: &str,
) -> Result<Option<Credential>, super::PkgError> {
    if let Some(auth) = entry.get("auth").and_then(|a| a.as_str())
        && !auth.is_empty()
    {
        let bad = || {
            super::PkgError::Syntax(format!(
                "{}: auths.\"{key}\".auth is not base64 of 'user:password'",
                file.display()
            ))
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| bad())?;
        let s = String::from_utf8(raw).map_err(|_| bad())?;
        let (u, p) = s.split_once(':').ok_or_else(bad)?;
        return Ok(Some(Credential {
            username: u.to_string(),
            password: p.to_string(),
        }));
    }
    let get = |k: &str| entry.get(k).and_then(|v| v.as_str()).unwrap_or("");
    if !get("username").is_empty() {
        return Ok(Some(Credential {
            username: get("username").to_string(),
            password: get("password").to_string(),
        }));
    }
    Ok(None)
}

fn from_helper(helper: &str, host: &str) -> Result<Option<Credential>, super::PkgError> {
    let prog = format!("docker-credential-{helper}");
    let child = Command::new(&prog)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return Err(super::PkgError::Remote(format!(
                "credential helper {prog} for {host} could not run: {e}"
            )));
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(host.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| super::PkgError::Remote(format!("{prog}: {e}")))?;
    if !out.status.success() {
        // helpers answer "credentials not found" with a failure: no credential
        tracing::debug!(helper = %prog, %host, "credential helper has no entry");
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| super::PkgError::Remote(format!("{prog}: unreadable answer: {e}")))?;
    let u = v.get("Username").and_then(|s| s.as_str()).unwrap_or("");
    let p = v.get("Secret").and_then(|s| s.as_str()).unwrap_or("");
    Ok((!p.is_empty()).then(|| Credential {
        username: u.to_string(),
        password: p.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_auths_forms() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("config.json");
        let auth = base64::engine::general_purpose::STANDARD.encode("u1:p:1");
        std::fs::write(
            &f,
            format!(
                r#"{{"auths":{{"https://reg.example:5000/v1/":{{"auth":"{auth}"}},"other.io":{{"username":"u2","password":"p2"}}}}}}"#
            ),
        )
        .unwrap();
        let files = vec![d.path().join("missing.json"), f.clone()];
        let c = lookup("reg.example:5000", &files).unwrap().unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("u1", "p:1"));
        let c = lookup("other.io", &files).unwrap().unwrap();
        assert_eq!(c.username, "u2");
        assert!(lookup("nowhere.io", &files).unwrap().is_none());
        std::fs::write(&f, "{ nope").unwrap();
        let e = lookup("x", &files).unwrap_err().to_string();
        assert!(e.contains("config.json:1:"), "{e}");
    }
}
