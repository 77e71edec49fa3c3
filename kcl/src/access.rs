//! What a KCL program may reach through `file.*` and `file.read_env`.
//!
//! Upstream lets a program read, write and delete any path and read any environment variable.
//! Here the default keeps what upstream's own programs do — files inside the package (the
//! `kcl.mod` folder, or the main file's folder), the working folder and the external packages
//! (`-E`) — and denies the rest unless allowed by name: `--allow-read DIR`, `--allow-write DIR`,
//! `--allow-env NAME` (and `allowRead`/`allowWrite`/`allowEnv` in a stack's settings).
//! `kusionctl compile` denies writes altogether. Paths are compared after resolving symlinks,
//! so a link inside the package cannot lead out of it.

use std::path::{Path, PathBuf};

use crate::value::RtError;

/// The access a run grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Without confinement every path and variable is reachable (upstream's behaviour, for
    /// callers that opt out explicitly with `--allow-all`).
    pub unconfined: bool,
    /// Folders whose files may be read (and listed, hashed, tested for existence).
    pub read: Vec<PathBuf>,
    /// Folders whose files may be written, moved, copied to or deleted.
    pub write: Vec<PathBuf>,
    /// Environment variables `file.read_env` may read (`*` for all).
    pub env: Vec<String>,
    /// Why writes are denied everywhere, when they are (`kusionctl compile`).
    pub writes_denied: Option<String>,
}

impl Access {
    /// Everything allowed (upstream's behaviour).
    pub fn unconfined() -> Access {
        Access {
            unconfined: true,
            ..Access::default()
        }
    }

    /// Confined to `read` and `write` folders (made absolute and resolved), variables `env`.
    pub fn confined(read: &[PathBuf], write: &[PathBuf], env: &[String]) -> Access {
        Access {
            unconfined: false,
            read: read.iter().map(|p| resolve_dir(p)).collect(),
            write: write.iter().map(|p| resolve_dir(p)).collect(),
            env: env.to_vec(),
            writes_denied: None,
        }
    }

    pub fn check_read(&self, function: &str, path: &Path) -> Result<(), RtError> {
        // the empty path names no file: the call itself fails on it (or, `mkdir`, does nothing)
        if self.unconfined
            || path.as_os_str().is_empty()
            || within(path, &self.read)
            || within(path, &self.write)
        {
            return Ok(());
        }
        Err(RtError::eval(format!(
            "file.{function}: reading '{}' is not allowed: it is outside the package, the working folder and the folders allowed for reading; allow it with --allow-read {} (or `allowRead` in the stack's settings)",
            path.display(),
            suggest_dir(path).display()
        )))
    }

    pub fn check_write(&self, function: &str, path: &Path) -> Result<(), RtError> {
        if self.unconfined || path.as_os_str().is_empty() {
            return Ok(());
        }
        if let Some(why) = &self.writes_denied {
            return Err(RtError::eval(format!(
                "file.{function}: writing '{}' is not allowed: {why}",
                path.display()
            )));
        }
        if within(path, &self.write) {
            return Ok(());
        }
        Err(RtError::eval(format!(
            "file.{function}: changing '{}' is not allowed: it is outside the package, the working folder and the folders allowed for writing; allow it with --allow-write {} (or `allowWrite` in the stack's settings)",
            path.display(),
            suggest_dir(path).display()
        )))
    }

    pub fn check_env(&self, name: &str) -> Result<(), RtError> {
        if self.unconfined || self.env.iter().any(|e| e == "*" || e == name) {
            return Ok(());
        }
        Err(RtError::eval(format!(
            "file.read_env: reading the environment variable '{name}' is not allowed; allow it with --allow-env {name} (or `allowEnv` in the stack's settings)"
        )))
    }
}

/// An absolute, symlink-free form of `dir` (as given when it does not exist).
fn resolve_dir(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| absolute(dir))
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// `path` with symlinks resolved as far as it exists; the rest appended, `..` and `.` folded.
fn resolve(path: &Path) -> PathBuf {
    let path = absolute(path);
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                match part {
                    std::path::Component::ParentDir => {
                        out.pop();
                    }
                    std::path::Component::Normal(p) => out.push(p),
                    _ => {}
                }
            }
            return out;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => return path,
        }
    }
}

fn within(path: &Path, dirs: &[PathBuf]) -> bool {
    let real = resolve(path);
    dirs.iter().any(|d| real.starts_with(d))
}

/// The folder to name in a message: the path's own folder.
fn suggest_dir(path: &Path) -> PathBuf {
    let real = resolve(path);
    match real.parent() {
        Some(parent) if real.is_file() || !real.exists() => parent.to_path_buf(),
        _ => real,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confinement_follows_real_paths() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("pkg");
        std::fs::create_dir(&pkg).unwrap();
        std::fs::write(pkg.join("a.json"), "{}").unwrap();
        std::fs::write(dir.path().join("secret"), "x").unwrap();
        let access = Access::confined(
            std::slice::from_ref(&pkg),
            std::slice::from_ref(&pkg),
            &["HOME".into()],
        );
        access.check_read("read", &pkg.join("a.json")).unwrap();
        access.check_write("write", &pkg.join("new/b.txt")).unwrap();
        let e = access
            .check_read("read", &pkg.join("../secret"))
            .unwrap_err()
            .msg;
        assert!(e.contains("--allow-read"), "{e}");
        std::os::unix::fs::symlink(dir.path().join("secret"), pkg.join("link")).unwrap();
        assert!(access.check_read("read", &pkg.join("link")).is_err());
        assert!(access.check_read("read", Path::new("/etc/shadow")).is_err());
        assert!(access.check_write("delete", Path::new("/tmp/x")).is_err());
        access.check_env("HOME").unwrap();
        let e = access.check_env("AWS_SECRET_ACCESS_KEY").unwrap_err().msg;
        assert!(e.contains("--allow-env AWS_SECRET_ACCESS_KEY"), "{e}");
        let compile = Access {
            writes_denied: Some("kusionctl compile never writes files".into()),
            ..access
        };
        let e = compile
            .check_write("write", &pkg.join("x"))
            .unwrap_err()
            .msg;
        assert!(e.contains("never writes"), "{e}");
        Access::unconfined()
            .check_read("read", Path::new("/etc/shadow"))
            .unwrap();
    }
}
