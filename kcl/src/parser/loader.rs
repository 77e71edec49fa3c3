//! Multi-file programs: the main package (several files given on the command line), the
//! package root (the folder holding `kcl.mod`), and resolution of `import` statements to
//! packages on disk — absolute (`import a.b` from the root), relative (`.a`, `..a`), external
//! packages (`-E name=path`), system modules and `kcl_plugin.*`. Only parsing happens here;
//! the evaluator gives the packages meaning.

use crate::ast::{FileId, ImportStmt, Module, Span, StmtKind};
use crate::diag::{Diagnostic, Diagnostics, ErrorKind};
use crate::parser::parse_file;
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The package path of the main package.
pub const MAIN_PKG: &str = "__main__";

/// Upstream's built-in system modules (importable without files).
pub const SYSTEM_MODULES: &[&str] = &[
    "base32",
    "base64",
    "collection",
    "crypto",
    "datetime",
    "file",
    "json",
    "manifests",
    "math",
    "net",
    "regex",
    "runtime",
    "template",
    "units",
    "yaml",
];

/// Options for [`load_program`].
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// External packages `name=path` (the `-E` flag).
    pub external: Vec<(String, PathBuf)>,
    /// Directory used to look for `kcl.mod` and to expand `${KCL_MOD}`; defaults to the folder
    /// of the first input file.
    pub work_dir: Option<PathBuf>,
}

/// What an `import` statement refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImportTarget {
    /// A package loaded from disk, by package path (key of [`Program::packages`]).
    Package(Arc<str>),
    /// A built-in system module such as `math`.
    System(Arc<str>),
    /// A plugin module `kcl_plugin.<name>`; holds `<name>`.
    Plugin(Arc<str>),
}

/// A set of modules forming one package.
#[derive(Clone, Debug)]
pub struct Package {
    /// Dotted package path (`__main__` for the main package).
    pub pkgpath: Arc<str>,
    /// Folder (or file, for a single-file package) the package was loaded from.
    pub path: PathBuf,
    /// Parsed files in name order (command-line order for the main package).
    pub modules: Vec<Module>,
}

/// A loaded program.
#[derive(Clone, Debug)]
pub struct Program {
    /// The package root (folder of `kcl.mod`, else the folder of the first input).
    pub root: PathBuf,
    /// The main package.
    pub main: Package,
    /// Imported packages by package path, in the order they were first imported.
    pub packages: indexmap_lite::OrderedMap<Arc<str>, Package>,
    /// Resolution of every import statement, keyed by the statement's `path_span`.
    pub imports: FxHashMap<Span, ImportTarget>,
}

impl Program {
    /// The target of an import statement (by its path span).
    pub fn import_target(&self, stmt: &ImportStmt) -> Option<&ImportTarget> {
        self.imports.get(&stmt.path_span)
    }
    /// A package by path (`__main__` gives the main package).
    pub fn package(&self, pkgpath: &str) -> Option<&Package> {
        if pkgpath == MAIN_PKG {
            Some(&self.main)
        } else {
            self.packages.get(pkgpath)
        }
    }
}

/// A tiny insertion-ordered map (keeps the crate free of extra dependencies for one use).
pub mod indexmap_lite {
    use rustc_hash::FxHashMap;
    use std::borrow::Borrow;
    use std::hash::Hash;

    /// Insertion-ordered map with hashed lookup.
    #[derive(Clone, Debug)]
    pub struct OrderedMap<K, V> {
        index: FxHashMap<K, usize>,
        entries: Vec<(K, V)>,
    }

    impl<K: Hash + Eq + Clone, V> Default for OrderedMap<K, V> {
        fn default() -> Self {
            OrderedMap {
                index: FxHashMap::default(),
                entries: Vec::new(),
            }
        }
    }

    impl<K: Hash + Eq + Clone, V> OrderedMap<K, V> {
        /// Inserts (or replaces) a value.
        pub fn insert(&mut self, k: K, v: V) {
            match self.index.get(&k) {
                Some(&i) => self.entries[i].1 = v,
                None => {
                    self.index.insert(k.clone(), self.entries.len());
                    self.entries.push((k, v));
                }
            }
        }
        /// Looks a value up.
        pub fn get<Q: Hash + Eq + ?Sized>(&self, k: &Q) -> Option<&V>
        where
            K: Borrow<Q>,
        {
            self.index.get(k).map(|&i| &self.entries[i].1)
        }
        /// True when the key is present.
        pub fn contains_key<Q: Hash + Eq + ?Sized>(&self, k: &Q) -> bool
        where
            K: Borrow<Q>,
        {
            self.index.contains_key(k)
        }
        /// Entries in insertion order.
        pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
            self.entries.iter().map(|(k, v)| (k, v))
        }
        /// Number of entries.
        pub fn len(&self) -> usize {
            self.entries.len()
        }
        /// True when empty.
        pub fn is_empty(&self) -> bool {
            self.entries.is_empty()
        }
    }
}

/// Finds the package root: the nearest folder at or above `start` holding `kcl.mod`.
pub fn find_mod_root(start: &Path) -> Option<PathBuf> {
    let start = std::path::absolute(start).ok()?;
    let mut dir = if start.is_file() {
        start.parent()?.to_path_buf()
    } else {
        start
    };
    loop {
        if dir.join("kcl.mod").is_file() {
            return Some(dir);
        }
        if !dir.pop() {
            return None;
        }
    }
}

/// Replaces `${KCL_MOD}` in a path argument with the package root.
pub fn expand_kcl_mod(arg: &str, root: &Path) -> PathBuf {
    PathBuf::from(arg.replace("${KCL_MOD}", &root.display().to_string()))
}

/// `.k` files of a folder (not recursive, sorted, `_test.k` files excluded).
pub fn package_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_file() && name.ends_with(".k") && !name.ends_with("_test.k") {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Expands files and folders (recursively) into the `.k` files they hold, sorted per folder.
pub fn collect_k_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|e| e == "k") {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            anyhow::bail!("{}: no such file or directory", p.display());
        }
    }
    Ok(out)
}

struct Loader<'o> {
    opts: &'o LoadOptions,
    root: PathBuf,
    packages: indexmap_lite::OrderedMap<Arc<str>, Package>,
    imports: FxHashMap<Span, ImportTarget>,
    errors: Vec<Diagnostic>,
    /// Package path by folder, so one folder imported under two names is one package.
    by_dir: FxHashMap<PathBuf, Arc<str>>,
}

/// Loads the main package from `inputs` (files, or a single folder) and every package it
/// imports, transitively. All syntax and resolution errors are collected.
pub fn load_program(inputs: &[PathBuf], opts: &LoadOptions) -> Result<Program, Diagnostics> {
    let first = inputs.first().ok_or_else(|| {
        Diagnostics::from(Diagnostic::plain(
            ErrorKind::CannotFindModule,
            "no input files",
        ))
    })?;
    let work = opts.work_dir.clone().unwrap_or_else(|| {
        let abs = std::path::absolute(first).unwrap_or_else(|_| first.clone());
        if abs.is_dir() {
            abs
        } else {
            abs.parent().map(Path::to_path_buf).unwrap_or_default()
        }
    });
    let root = find_mod_root(&work).unwrap_or_else(|| work.clone());
    let mut files = Vec::new();
    for i in inputs {
        let p = expand_kcl_mod(&i.to_string_lossy(), &root);
        if p.is_dir() {
            files.extend(package_files(&p).map_err(|e| {
                Diagnostics::from(Diagnostic::plain(
                    ErrorKind::CannotFindModule,
                    format!("{}: {e}", p.display()),
                ))
            })?);
        } else {
            files.push(p);
        }
    }
    let mut ld = Loader {
        opts,
        root: root.clone(),
        packages: Default::default(),
        imports: FxHashMap::default(),
        errors: Vec::new(),
        by_dir: FxHashMap::default(),
    };
    let mut modules = Vec::new();
    for f in &files {
        match parse_file(f) {
            Ok(m) => modules.push(m),
            Err(d) => ld.errors.extend(d.0),
        }
    }
    for m in &modules {
        ld.resolve_module_imports(m);
    }
    let main = Package {
        pkgpath: Arc::from(MAIN_PKG),
        path: root.clone(),
        modules,
    };
    if !ld.errors.is_empty() {
        return Err(Diagnostics(ld.errors));
    }
    Ok(Program {
        root,
        main,
        packages: ld.packages,
        imports: ld.imports,
    })
}

impl Loader<'_> {
    fn resolve_module_imports(&mut self, m: &Module) {
        let dir = crate::ast::source_map()
            .get(m.file)
            .and_then(|f| {
                f.path
                    .as_ref()
                    .and_then(|p| p.parent().map(Path::to_path_buf))
            })
            .unwrap_or_else(|| self.root.clone());
        for stmt in &m.body {
            if let StmtKind::Import(imp) = &stmt.kind {
                self.resolve_import(m.file, &dir, imp, stmt.span);
            }
        }
    }

    fn resolve_import(&mut self, _file: FileId, dir: &Path, imp: &ImportStmt, stmt_span: Span) {
        let parts: Vec<&str> = imp.names.iter().map(|n| n.sym.as_str()).collect();
        if parts.is_empty() {
            return;
        }
        if imp.level == 0 {
            if parts[0] == "kcl_plugin" {
                let name = parts[1..].join(".");
                self.imports
                    .insert(imp.path_span, ImportTarget::Plugin(Arc::from(name)));
                return;
            }
            if parts.len() == 1
                && SYSTEM_MODULES.contains(&parts[0])
                && !self.root.join(parts[0]).exists()
                && !self.root.join(format!("{}.k", parts[0])).is_file()
            {
                self.imports
                    .insert(imp.path_span, ImportTarget::System(Arc::from(parts[0])));
                return;
            }
        }
        let (base, pkgpath) = if imp.level > 0 {
            let mut base = dir.to_path_buf();
            for _ in 1..imp.level {
                base.pop();
            }
            let target = parts.iter().fold(base, |p, s| p.join(s));
            let pkgpath = self.pkgpath_for(&target);
            (target, pkgpath)
        } else if let Some((_, ext)) = self.opts.external.iter().find(|(n, _)| n == parts[0]) {
            let target = parts[1..].iter().fold(ext.clone(), |p, s| p.join(s));
            // `-E konfig=.` names the program root itself: same packages as plain imports
            let same_root =
                std::path::absolute(ext).map(|a| normalize(&a)).ok() == Some(normalize(&self.root));
            (
                target,
                if same_root {
                    parts[1..].join(".")
                } else {
                    parts.join(".")
                },
            )
        } else {
            // a file inside another module (e.g. a vendored dependency with its own kcl.mod)
            // imports from that module's root
            let file_root = find_mod_root(dir).map(|r| normalize(&r));
            match file_root.filter(|r| *r != normalize(&self.root)) {
                Some(fr) => {
                    let target = parts.iter().fold(fr.clone(), |p, s| p.join(s));
                    let ext = self.opts.external.iter().find(|(_, p)| {
                        std::path::absolute(p).map(|a| normalize(&a)).ok().as_ref() == Some(&fr)
                    });
                    let pkgpath = match ext {
                        Some((n, _)) => format!("{n}.{}", parts.join(".")),
                        None => format!("{}/{}", fr.display(), parts.join(".")),
                    };
                    (target, pkgpath)
                }
                None => {
                    let target = parts.iter().fold(self.root.clone(), |p, s| p.join(s));
                    (target, parts.join("."))
                }
            }
        };
        let key = std::path::absolute(&base)
            .map(|a| normalize(&a))
            .unwrap_or_else(|_| base.clone());
        let pkgpath: Arc<str> = self
            .by_dir
            .entry(key)
            .or_insert_with(|| Arc::from(pkgpath))
            .clone();
        self.imports
            .insert(imp.path_span, ImportTarget::Package(pkgpath.clone()));
        if self.packages.contains_key(&pkgpath) {
            return;
        }
        let files = if base.is_dir() {
            package_files(&base).unwrap_or_default()
        } else {
            let f = PathBuf::from(format!("{}.k", base.display()));
            if f.is_file() { vec![f] } else { Vec::new() }
        };
        if files.is_empty() {
            let msg = if base.is_dir() {
                "No KCL files found in the specified folder".to_string()
            } else {
                format!(
                    "Cannot find the module {} from {}",
                    imp.path,
                    base.display()
                )
            };
            self.errors.push(Diagnostic::error(
                ErrorKind::CannotFindModule,
                stmt_span,
                msg,
            ));
            return;
        }
        // Register before parsing so import cycles terminate.
        self.packages.insert(
            pkgpath.clone(),
            Package {
                pkgpath: pkgpath.clone(),
                path: base.clone(),
                modules: Vec::new(),
            },
        );
        let mut modules = Vec::new();
        for f in &files {
            match parse_file(f) {
                Ok(m) => modules.push(m),
                Err(d) => self.errors.extend(d.0),
            }
        }
        for m in &modules {
            self.resolve_module_imports(m);
        }
        self.packages.insert(
            pkgpath.clone(),
            Package {
                pkgpath,
                path: base,
                modules,
            },
        );
    }

    /// Package path of a folder/file: dotted path relative to the root when inside it,
    /// otherwise the absolute path (unique, if not pretty).
    fn pkgpath_for(&self, target: &Path) -> String {
        let norm = normalize(target);
        match norm.strip_prefix(normalize(&self.root)) {
            Ok(rel) => rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("."),
            Err(_) => norm.display().to_string(),
        }
    }
}

/// Lexically removes `.` and `..` components.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
