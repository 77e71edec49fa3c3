//! KCL package management (`kcl mod`): `kcl.mod` manifests, `kcl.mod.lock` lock files,
//! dependency resolution from local paths, git repositories and OCI registries, the local
//! package cache and `vendor/`.
//!
//! Formats and layouts are upstream kpm's, so packages and caches are shared with upstream's
//! tools: a registry (`name = "1.2.3"`) or OCI dependency is cached as `$KCL_PKG_PATH/<name>_<tag>`
//! (default `~/.kcl/kpm`), vendored as `vendor/<name>_<tag>`, published as an OCI image manifest
//! whose one layer is the package's tarball, and checked against the lock file's `sum`
//! ([`hash_dir`]) every time it is resolved.
//!
//! The registry client ([`oci`]) needs the `registry` feature (on by default); without it,
//! dependencies resolve from paths, git, the cache and `vendor/` only.

#[cfg(feature = "registry")]
pub mod archive;
pub mod auth;
mod git;
mod hash;
pub mod lock;
pub mod modfile;
#[cfg(feature = "registry")]
pub mod oci;
pub mod resolve;
pub mod settings;
pub mod version;

pub use hash::hash_dir;
pub use lock::{LockEntry, LockFile};
pub use modfile::{Dependency, ModFile, Source};
pub use resolve::{ResolveOptions, Resolved, ResolvedDep, resolve};
pub use settings::Settings;

/// Package management errors. Each names the file (with line and column), the dependency or the
/// registry it is about.
#[derive(Debug, thiserror::Error)]
pub enum PkgError {
    /// A file or folder could not be read or written.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// A malformed `kcl.mod`, `kcl.mod.lock` or configuration file (`path:line:col: message`).
    #[error("{0}")]
    Syntax(String),
    /// A request that cannot be carried out as given.
    #[error("{0}")]
    Invalid(String),
    /// A dependency's content does not match the checksum recorded for it.
    #[error("{0}")]
    Checksum(String),
    /// A registry, git or network failure.
    #[error("{0}")]
    Remote(String),
}

impl PkgError {
    pub(crate) fn io(path: &std::path::Path, e: std::io::Error) -> Self {
        PkgError::Io(path.display().to_string(), e)
    }
}

/// 1-based line and column of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, col)
}

/// A TOML syntax error in `path` (`kcl.mod`, `kcl.mod.lock`): `path:line:col: message`, at
/// the start of the parser's `span`.
pub(crate) fn toml_syntax_error(
    path: &std::path::Path,
    text: &str,
    span: Option<std::ops::Range<usize>>,
    message: &str,
) -> PkgError {
    let (l, c) = line_col(text, span.map_or(0, |s| s.start));
    PkgError::Syntax(format!(
        "{}:{l}:{c}: {}",
        path.display(),
        message.trim_end()
    ))
}

/// The name under which a dependency is imported: upstream replaces `-` with `_` so the name
/// is an identifier.
pub fn alias_name(name: &str) -> String {
    name.replace('-', "_")
}

/// Where `kcl run`-style commands look for and add packages.
pub fn pkg_path() -> std::path::PathBuf {
    settings::pkg_path()
}

/// The dependencies of the package holding `dir` (the nearest `kcl.mod` at or above it) as
/// `(import name, folder)`, resolved with `opts` (downloaded when missing, checked against
/// `kcl.mod.lock`); names in `given` (`-E name=path`) are left to the caller. No `kcl.mod`, or
/// one without dependencies: none. This is how `kcl run` and `kusionctl` find packages.
pub fn dependencies_of(
    dir: &std::path::Path,
    given: &[String],
    opts: &ResolveOptions,
) -> Result<Vec<(String, std::path::PathBuf)>, PkgError> {
    let Some(root) = crate::parser::loader::find_mod_root(dir) else {
        return Ok(Vec::new());
    };
    let m = ModFile::load(&root)?;
    if m.dependencies.is_empty() {
        return Ok(Vec::new());
    }
    let mut o = opts.clone();
    o.skip.extend(given.iter().cloned());
    Ok(resolve(&root, &o)?.externals())
}
