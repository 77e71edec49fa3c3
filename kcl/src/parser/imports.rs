//! Resolution of `import` statements to packages: absolute (`import a.b` from the root),
//! relative (`.a`, `..a`), external packages (`-E name=path`), vendored dependencies, system
//! modules and `kcl_plugin.*`, with upstream's errors. The loader and the language server share
//! it (through the loader's re-exports), so both resolve an import to the same package.

use super::loader::{ImportTarget, SYSTEM_MODULES, find_mod_root, package_files, read_mod_file};
use crate::ast::{ImportStmt, Span};
use crate::diag::{Diagnostic, ErrorKind};
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What an import statement binds, where its package's files are, and its error if any.
pub(crate) struct ImportTargetOf {
    pub(crate) target: ImportTarget,
    pub(crate) base: Option<PathBuf>,
    /// Upstream's error at the import statement when the path is ambiguous.
    pub(crate) error: Option<Diagnostic>,
}

impl ImportTargetOf {
    fn other(target: ImportTarget) -> Self {
        ImportTargetOf {
            target,
            base: None,
            error: None,
        }
    }
}

/// How an import statement resolves (before its package is loaded).
pub(crate) enum ImportResolution {
    Plugin(Arc<str>),
    System(Arc<str>),
    /// A package folder (or the stem of `name.k`) and its package path.
    Package {
        base: PathBuf,
        pkgpath: String,
        /// Upstream's error when the path names both a folder of the importing package and
        /// an external package (`base` is then the former).
        ambiguous: Option<String>,
    },
    /// A relative import climbing above its package's root: upstream's error.
    AboveRoot(String),
}

/// The roots imports resolve against: the main root, the external packages (`-E name=path`),
/// and vendored dependencies with their own `kcl.mod`. The loader and the language server
/// share it, so both resolve an import to the same package.
pub(crate) struct PackageRoots {
    pub(crate) root: PathBuf,
    pub(crate) external: Vec<(String, PathBuf)>,
    /// The `kcl.mod` root above a folder and its package name, looked up once per folder (each
    /// import statement asks, and a Konfig program has hundreds).
    mod_roots: FxHashMap<PathBuf, Option<(PathBuf, String)>>,
    /// Package path by folder: a folder imported under two names is one package.
    by_dir: FxHashMap<PathBuf, Arc<str>>,
}

impl PackageRoots {
    pub(crate) fn new(root: PathBuf, external: Vec<(String, PathBuf)>) -> Self {
        PackageRoots {
            root,
            external,
            mod_roots: FxHashMap::default(),
            by_dir: FxHashMap::default(),
        }
    }

    /// What `imp` (in a file of folder `dir`) binds, for a package the folder (or stem of
    /// `name.k`) its files are in, and the import's error (at `stmt_span`) if it is ambiguous.
    /// None for an empty import.
    pub(crate) fn target(
        &mut self,
        dir: &Path,
        imp: &ImportStmt,
        stmt_span: Span,
    ) -> Option<ImportTargetOf> {
        Some(match self.resolve(dir, imp)? {
            ImportResolution::Plugin(name) => ImportTargetOf::other(ImportTarget::Plugin(name)),
            ImportResolution::System(name) => ImportTargetOf::other(ImportTarget::System(name)),
            ImportResolution::AboveRoot(msg) => ImportTargetOf {
                target: ImportTarget::Package(imp.path.clone()),
                base: None,
                error: Some(Diagnostic::error(
                    ErrorKind::CannotFindModule,
                    stmt_span,
                    msg,
                )),
            },
            ImportResolution::Package {
                base,
                pkgpath,
                ambiguous,
            } => {
                let key = normalize(&std::path::absolute(&base).unwrap_or_else(|_| base.clone()));
                let pkgpath = self
                    .by_dir
                    .entry(key)
                    .or_insert_with(|| Arc::from(pkgpath))
                    .clone();
                ImportTargetOf {
                    target: ImportTarget::Package(pkgpath),
                    base: Some(base),
                    error: ambiguous
                        .map(|msg| Diagnostic::error(ErrorKind::CannotFindModule, stmt_span, msg)),
                }
            }
        })
    }

    /// Where `imp`, written in a file of folder `dir`, points (None for an empty import).
    pub(crate) fn resolve(&mut self, dir: &Path, imp: &ImportStmt) -> Option<ImportResolution> {
        let parts: Vec<&str> = imp.names.iter().map(|n| n.sym.as_str()).collect();
        if parts.is_empty() {
            return None;
        }
        if imp.level == 0 {
            if parts[0] == "kcl_plugin" {
                let name = parts[1..].join(".");
                return Some(ImportResolution::Plugin(Arc::from(name)));
            }
            if parts.len() == 1
                && SYSTEM_MODULES.contains(&parts[0])
                && !self.root.join(parts[0]).exists()
                && !self.root.join(format!("{}.k", parts[0])).is_file()
            {
                return Some(ImportResolution::System(Arc::from(parts[0])));
            }
        }
        let (base, pkgpath) = if imp.level > 0 {
            let (root, _) = self.owner(dir);
            let depth = normalize(dir)
                .strip_prefix(&root)
                .map_or(0, |rel| rel.components().count());
            if imp.level as usize - 1 > depth {
                return Some(ImportResolution::AboveRoot(format!(
                    "Failed to import the module {} from {}/. No KCL files found in the specified folder",
                    imp.path,
                    root.display()
                )));
            }
            let mut base = dir.to_path_buf();
            for _ in 1..imp.level {
                base.pop();
            }
            let target = parts.iter().fold(base, |p, s| p.join(s));
            let pkgpath = self.pkgpath_for(&target);
            (target, pkgpath)
        } else {
            // Absolute imports resolve against the root of the package that holds the
            // importing file (an external package's own root for its files), then the main
            // root; and against the external packages. Upstream refuses a path both find.
            let exists =
                |t: &Path| t.is_dir() || PathBuf::from(format!("{}.k", t.display())).is_file();
            let (own_root, prefix) = self.owner(dir);
            let in_own = parts.iter().fold(own_root.clone(), |p, s| p.join(s));
            let internal = if exists(&in_own) {
                let pkgpath = match &prefix {
                    Some(prefix) => format!("{prefix}.{}", parts.join(".")),
                    None => parts.join("."),
                };
                Some((in_own, pkgpath))
            } else {
                None
            };
            let external = self
                .external
                .iter()
                .find(|(n, _)| n == parts[0])
                .map(|(_, ext)| {
                    let target = parts[1..].iter().fold(ext.clone(), |p, s| p.join(s));
                    // `-E konfig=.` naming the program root itself: the same packages as
                    // plain imports.
                    if normalize(ext) == normalize(&self.root) {
                        (target, parts[1..].join("."))
                    } else {
                        (target, parts.join("."))
                    }
                });
            match (internal, external) {
                (Some(i), Some(e)) if exists(&e.0) => {
                    let msg = format!(
                        "the `{}` is found multiple times in the current package and vendor package",
                        parts.join(".")
                    );
                    return Some(ImportResolution::Package {
                        base: i.0,
                        pkgpath: i.1,
                        ambiguous: Some(msg),
                    });
                }
                (Some(i), _) => i,
                (None, Some(e)) => e,
                (None, None) => {
                    let target = parts.iter().fold(self.root.clone(), |p, s| p.join(s));
                    (target, parts.join("."))
                }
            }
        };
        Some(ImportResolution::Package {
            base,
            pkgpath,
            ambiguous: None,
        })
    }

    /// Package path of a folder/file: dotted path relative to the root when inside it,
    /// otherwise the absolute path (unique, if not pretty).
    fn pkgpath_for(&mut self, target: &Path) -> String {
        let norm = normalize(target);
        let (root, prefix) = self.owner(&norm);
        match norm.strip_prefix(&root) {
            Ok(rel) => {
                let mut parts: Vec<String> = prefix.into_iter().collect();
                parts.extend(
                    rel.components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned()),
                );
                parts.join(".")
            }
            Err(_) => norm.display().to_string(),
        }
    }

    /// The package root owning `path`: the deepest of the main root and the external package
    /// roots that contains it, with the external package name (None for the main root).
    fn owner(&mut self, path: &Path) -> (PathBuf, Option<String>) {
        let path = normalize(path);
        let main = normalize(&self.root);
        let mut best: (PathBuf, Option<String>) = (main.clone(), None);
        let mut best_len = if path.starts_with(&main) {
            main.components().count()
        } else {
            0
        };
        for (name, root) in &self.external {
            let r = normalize(root);
            let len = r.components().count();
            if path.starts_with(&r) && len > best_len {
                best = (r, Some(name.clone()));
                best_len = len;
            }
        }
        // A vendored dependency with its own kcl.mod (not given with -E) owns its files too;
        // its package name (else its path) prefixes its package paths.
        let found = self
            .mod_roots
            .entry(path.clone())
            .or_insert_with(|| {
                find_mod_root(&path).map(|r| {
                    let r = normalize(&r);
                    let name = read_mod_file(&r)
                        .ok()
                        .flatten()
                        .map(|m| m.name)
                        .filter(|n| !n.is_empty())
                        .unwrap_or_else(|| r.display().to_string());
                    (r, name)
                })
            })
            .clone();
        if let Some((r, name)) = found {
            let len = r.components().count();
            if len > best_len {
                best = (r, Some(name));
            }
        }
        best
    }
}

/// The source files of the package at `base` (a folder, or `base.k`), or upstream's message
/// for an import that finds none.
pub(crate) fn package_sources(base: &Path, imp: &ImportStmt) -> Result<Vec<PathBuf>, String> {
    let files = if base.is_dir() {
        package_files(base).unwrap_or_default()
    } else {
        let f = PathBuf::from(format!("{}.k", base.display()));
        if f.is_file() { vec![f] } else { Vec::new() }
    };
    if !files.is_empty() {
        return Ok(files);
    }
    Err(if base.is_dir() {
        "No KCL files found in the specified folder".to_string()
    } else {
        format!(
            "Cannot find the module {} from {}",
            imp.path,
            base.display()
        )
    })
}

/// Upstream's suggestions under a missing module's error: the package to add is the first
/// part of its package path.
fn missing_module_suggestions(pkgpath: &str) -> Vec<String> {
    let name = pkgpath.split('.').next().unwrap_or(pkgpath);
    vec![
        format!("try 'kcl mod add {name}' to download the missing package"),
        "browse more packages at 'https://artifacthub.io'".to_string(),
    ]
}

/// Lexically removes `.` and `..` components (one function for the loader, the language server
/// and the package resolver).
pub(super) use crate::pkg::resolve::normalize;

/// A loader that follows `import` statements from module to module: the program loader and the
/// language server's, which differ only in how they get a file's module (parse cache, editor
/// buffers). One walk, so both load the same packages in the same order with the same errors.
pub(crate) trait ImportWalk {
    /// The package roots, the packages loaded so far, every import's target, the errors.
    #[allow(clippy::type_complexity)]
    fn walk_parts(
        &mut self,
    ) -> (
        &mut PackageRoots,
        &mut super::loader::indexmap_lite::OrderedMap<Arc<str>, super::loader::Package>,
        &mut FxHashMap<Span, ImportTarget>,
        &mut Vec<Diagnostic>,
    );

    /// One file of a package, parsed; `None` when it cannot be (the loader keeps why).
    fn load_module(&mut self, f: &Path) -> Option<Arc<crate::ast::Module>>;

    /// An import whose package has no source files. Upstream's resolver reports these after
    /// every syntax error, so a loader may keep them apart; by default they join the others.
    fn missing_module(&mut self, d: Diagnostic) {
        self.walk_parts().3.push(d);
    }

    /// Follows every `import` of `m`, from the folder of its file.
    fn resolve_module_imports(&mut self, m: &crate::ast::Module) {
        let dir = crate::ast::source_map()
            .get(m.file)
            .and_then(|f| {
                f.path
                    .as_ref()
                    .and_then(|p| p.parent().map(Path::to_path_buf))
            })
            .unwrap_or_else(|| self.walk_parts().0.root.clone());
        for stmt in &m.body {
            if let crate::ast::StmtKind::Import(imp) = &stmt.kind {
                self.resolve_import(&dir, imp, stmt.span);
            }
        }
    }

    /// Records the target of one `import` and, for a package not loaded yet, loads it and
    /// follows its imports.
    fn resolve_import(&mut self, dir: &Path, imp: &ImportStmt, stmt_span: Span) {
        let (roots, packages, imports, errors) = self.walk_parts();
        let Some(ImportTargetOf {
            target,
            base,
            error,
        }) = roots.target(dir, imp, stmt_span)
        else {
            return;
        };
        errors.extend(error);
        imports.insert(imp.path_span, target.clone());
        let (ImportTarget::Package(pkgpath), Some(base)) = (target, base) else {
            return;
        };
        if packages.contains_key(&pkgpath) {
            return;
        }
        let files = match package_sources(&base, imp) {
            Ok(files) => files,
            Err(msg) => {
                let d = Diagnostic::error(ErrorKind::CannotFindModule, stmt_span, msg);
                self.missing_module(d.with_suggestions(missing_module_suggestions(&pkgpath)));
                return;
            }
        };
        // Register before parsing so import cycles terminate.
        packages.insert(
            pkgpath.clone(),
            super::loader::Package {
                pkgpath: pkgpath.clone(),
                path: base.clone(),
                modules: Vec::new(),
            },
        );
        let modules: Vec<_> = files.iter().filter_map(|f| self.load_module(f)).collect();
        for m in &modules {
            self.resolve_module_imports(m);
        }
        self.walk_parts().1.insert(
            pkgpath.clone(),
            super::loader::Package {
                pkgpath,
                path: base,
                modules,
            },
        );
    }
}
