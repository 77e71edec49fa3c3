//! Multi-file programs: the main package (several files given on the command line), the
//! package root (the folder holding `kcl.mod`), the parse cache, and loading the packages
//! `import` statements name (their resolution is in `imports.rs`). Only parsing happens here;
//! the evaluator gives the packages meaning.

use super::imports::normalize;
pub(crate) use super::imports::{ImportWalk, PackageRoots};
use crate::ast::{ImportStmt, Module, Span};
use crate::diag::{Diagnostic, Diagnostics, ErrorKind};
use crate::parser::parse_file;
use crate::pkg::modfile::{Dependency, ModFile, Source};
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

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
    /// The folder relative inputs are in, and where `kcl.mod` is looked for when there are no
    /// inputs (else it is looked for from the first input's folder up).
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
    /// Parsed files in name order (command-line order for the main package). Shared: a
    /// [`ParseCache`] hands the same module to every program that loads the file.
    pub modules: Vec<Arc<Module>>,
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

/// Expands `${KCL_MOD}` (the package root) and `${name:KCL_MOD}` (the root of external
/// package `name`) in a path argument.
pub fn expand_paths(arg: &str, root: &Path, external: &[(String, PathBuf)]) -> PathBuf {
    let mut s = arg.replace("${KCL_MOD}", &root.display().to_string());
    for (name, path) in external {
        s = s.replace(&format!("${{{name}:KCL_MOD}}"), &path.display().to_string());
    }
    PathBuf::from(s)
}

/// Where dependency `dep` of the package at `root` lives on disk: a path dependency relative to
/// `root`, or a downloaded package in `$KCL_PKG_PATH` or `~/.kcl/kpm` (as `name_version`), or
/// `root/vendor/name`.
pub fn locate_dependency(root: &Path, dep: &Dependency) -> Option<PathBuf> {
    let version = match &dep.source {
        Source::Local { path } => {
            let p = root.join(path);
            return Some(normalize(&std::path::absolute(&p).unwrap_or(p)));
        }
        Source::Registry { version } => version.as_str(),
        // git and OCI packages are found by `kcl mod` resolution (passed in as external
        // packages) or vendored
        Source::Oci { .. } | Source::Git { .. } => "",
    };
    let name = &dep.name;
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("KCL_PKG_PATH") {
        dirs.push(PathBuf::from(d));
    }
    if let Some(h) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(h).join(".kcl").join("kpm"));
    }
    dirs.into_iter()
        .map(|d| d.join(format!("{name}_{version}")))
        .chain(std::iter::once(root.join("vendor").join(name)))
        .find(|p| p.is_dir())
}

/// Reads `root/kcl.mod` (the one reader of it, shared with `kcl mod`); `Ok(None)` when there is
/// none, an error naming `kcl.mod:line:col` when it is malformed.
pub fn read_mod_file(root: &Path) -> Result<Option<ModFile>, String> {
    ModFile::load_if_present(root).map_err(|e| e.to_string())
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

/// Parsed modules shared between programs and threads (`kusionctl compile --all` loads the same
/// model packages for every stack). Entries are keyed by path and content hash; the file's
/// size and mtime only spare re-reading and re-hashing an unchanged file. A cached module keeps
/// the [`FileId`] it was first registered under, so diagnostics still point at the file.
#[derive(Default)]
pub struct ParseCache {
    /// By path and by which load of the file in one program it is (a file loaded twice in one
    /// program gets two modules, see `Loader::parsed`).
    entries: Mutex<FxHashMap<(PathBuf, usize), CacheEntry>>,
    hits: std::sync::atomic::AtomicUsize,
    misses: std::sync::atomic::AtomicUsize,
    /// Hash every file on every use instead of trusting an unchanged size and mtime (see
    /// [`ParseCache::verifying`]).
    verify: bool,
}

/// The cache of every run that is given none ([`crate::RunOptions::parse_cache`]) and of
/// rule programs: a process that runs the same files again and again (`kusionctl server`, the
/// policy plugin) parses and registers each version of a file once instead of once per run,
/// which would otherwise add every run's source texts to the source map for the process's life
/// (diagnostics find a file's text there by its [`FileId`]). It verifies content on every use
/// ([`ParseCache::verifying`]), so a result never depends on file times. A version no run
/// holds any more is freed when the file changes (its entry is replaced).
pub(crate) fn process_cache() -> &'static ParseCache {
    static CACHE: std::sync::OnceLock<ParseCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(ParseCache::verifying)
}

struct CacheEntry {
    len: u64,
    mtime: Option<SystemTime>,
    hash: blake3::Hash,
    module: Arc<Module>,
}

impl ParseCache {
    /// An empty cache.
    pub fn new() -> ParseCache {
        ParseCache::default()
    }

    /// An empty cache that reads and hashes a file on every use and trusts no size or mtime,
    /// for a process that compiles the same folders again and again while they change (a
    /// server): file times have a granularity of milliseconds, and a rewrite of the same
    /// length within one tick must not give the old module back. Hashing is still far cheaper
    /// than parsing, and an unchanged file keeps its one module and its one registered source
    /// text, so memory does not grow with the number of runs.
    pub fn verifying() -> ParseCache {
        ParseCache {
            verify: true,
            ..ParseCache::default()
        }
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.hits.load(Relaxed), self.misses.load(Relaxed))
    }

    /// The parsed module of `path`, from the cache when its content is unchanged. Files with
    /// syntax errors are not cached (their diagnostics are returned every time).
    pub fn parse(&self, path: &Path) -> Result<Arc<Module>, Diagnostics> {
        self.parse_nth(path, 0)
    }

    /// [`ParseCache::parse`] for the `nth` load of `path` in one program (from 0).
    fn parse_nth(&self, path: &Path, nth: usize) -> Result<Arc<Module>, Diagnostics> {
        use std::sync::atomic::Ordering::Relaxed;
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let meta = std::fs::metadata(&abs).ok();
        let key = (abs, nth);
        let (len, mtime) = (
            meta.as_ref().map_or(0, |m| m.len()),
            meta.as_ref().and_then(|m| m.modified().ok()),
        );
        {
            let map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(e) = map.get(&key)
                && !self.verify
                && meta.is_some()
                && e.len == len
                && e.mtime == mtime
            {
                self.hits.fetch_add(1, Relaxed);
                return Ok(Arc::clone(&e.module));
            }
        }
        let text = std::fs::read(&key.0).map_err(|e| {
            Diagnostics::from(Diagnostic::plain(
                ErrorKind::CannotFindModule,
                format!("cannot read {}: {e}", path.display()),
            ))
        })?;
        let hash = blake3::hash(&text);
        {
            let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(e) = map.get_mut(&key)
                && e.hash == hash
            {
                e.len = len;
                e.mtime = mtime;
                self.hits.fetch_add(1, Relaxed);
                return Ok(Arc::clone(&e.module));
            }
        }
        self.misses.fetch_add(1, Relaxed);
        let module = Arc::new(match String::from_utf8(text) {
            Ok(text) => {
                let name = key.0.display().to_string();
                let file = crate::ast::source_map().add(name, Some(&key.0), text);
                crate::parser::parse_for_program(file.id)?
            }
            Err(_) => parse_file(&key.0)?,
        });
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(
            key,
            CacheEntry {
                len,
                mtime,
                hash,
                module: Arc::clone(&module),
            },
        );
        Ok(module)
    }
}

struct Loader<'c> {
    cache: Option<&'c ParseCache>,
    /// How many times each file was loaded for this program: a file loaded twice in one
    /// program is parsed twice (as without a cache), so two loads never share spans; the
    /// cache keeps each load's module apart.
    parsed: FxHashMap<PathBuf, usize>,
    roots: PackageRoots,
    packages: indexmap_lite::OrderedMap<Arc<str>, Package>,
    imports: FxHashMap<Span, ImportTarget>,
    errors: Vec<Diagnostic>,
    /// Imports of packages without source files (upstream's resolver reports them).
    missing: Vec<Diagnostic>,
    /// Files with syntax errors are kept as the parser recovered them.
    partial: bool,
}

/// Loads the main package from `inputs` (files, or a single folder) and every package it
/// imports, transitively. All syntax and resolution errors are collected.
pub fn load_program(inputs: &[PathBuf], opts: &LoadOptions) -> Result<Program, Diagnostics> {
    load_program_cached(inputs, opts, None)
}

/// [`load_program`] taking parsed modules from (and adding them to) `cache`.
pub fn load_program_cached(
    inputs: &[PathBuf],
    opts: &LoadOptions,
    cache: Option<&ParseCache>,
) -> Result<Program, Diagnostics> {
    let (program, mut errors, missing) = load(inputs, opts, cache, false)?;
    errors.extend(missing);
    if !errors.is_empty() {
        return Err(Diagnostics(errors));
    }
    Ok(program)
}

/// A program that did not load (syntax errors, imports of missing packages) as upstream's
/// resolver still sees it: every file as the parser recovered it, a missing package as one
/// without members. Comes with the syntax errors and, apart, the missing packages' errors
/// (upstream reports those after all syntax errors, with its suggestions once each).
pub(crate) fn load_program_recovered(
    inputs: &[PathBuf],
    opts: &LoadOptions,
) -> Result<(Program, Vec<Diagnostic>, Vec<Diagnostic>), Diagnostics> {
    let (mut program, mut errors, mut missing) = load(inputs, opts, None, true)?;
    // a parameter list out of order is the checker's to report, where it reaches it
    errors.retain(|d| d.title != ErrorKind::IllegalParameterError.title());
    let mut seen = rustc_hash::FxHashSet::default();
    for d in &mut missing {
        d.suggestions.retain(|s| seen.insert(s.clone()));
    }
    add_missing_packages(&mut program);
    Ok((program, errors, missing))
}

/// A package an import names but that has no source files joins the program without members,
/// as upstream's resolver sees it (`attribute 'x' not found in 'module 'nosuch''`).
fn add_missing_packages(program: &mut Program) {
    let absent: Vec<Arc<str>> = program
        .imports
        .values()
        .filter_map(|t| match t {
            ImportTarget::Package(p) if !program.packages.contains_key(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    for pkgpath in absent {
        program.packages.insert(
            pkgpath.clone(),
            Package {
                pkgpath,
                path: program.root.clone(),
                modules: Vec::new(),
            },
        );
    }
}

/// [`load_program`] for tools that report every error (`kcl lint`): the files with syntax
/// errors are kept as the parser recovered them, a missing package is one without members,
/// and the program comes back with the diagnostics; `Err` only when no program can be built
/// (a missing file, say).
pub(crate) fn load_program_partial(
    inputs: &[PathBuf],
    opts: &LoadOptions,
) -> Result<(Program, Diagnostics), Diagnostics> {
    load(inputs, opts, None, true).map(|(mut p, mut e, missing)| {
        e.extend(missing);
        add_missing_packages(&mut p);
        (p, Diagnostics(e))
    })
}

fn load(
    inputs: &[PathBuf],
    opts: &LoadOptions,
    cache: Option<&ParseCache>,
    partial: bool,
) -> Result<(Program, Vec<Diagnostic>, Vec<Diagnostic>), Diagnostics> {
    let plain =
        |msg: String| Diagnostics::from(Diagnostic::plain(ErrorKind::CannotFindModule, msg));
    // the root, as upstream finds it: each input's `kcl.mod` folder (else the input folder, or
    // a file's own folder); when they differ, the work folder's. `kcl run sub/main.k` without a `kcl.mod`
    // resolves imports in `sub/`, not in the working folder.
    let mut roots: Vec<PathBuf> = Vec::new();
    for input in inputs
        .iter()
        .filter(|i| !i.to_string_lossy().contains("${"))
    {
        let input = match &opts.work_dir {
            Some(w) if input.is_relative() => w.join(input),
            _ => input.clone(),
        };
        let abs = normalize(&std::path::absolute(&input).unwrap_or(input));
        let found = if abs.is_dir() {
            Some(find_mod_root(&abs).unwrap_or_else(|| abs.clone()))
        } else {
            abs.parent()
                .map(|dir| find_mod_root(dir).unwrap_or_else(|| dir.to_path_buf()))
        };
        if let Some(r) = found.map(|r| normalize(&r))
            && !roots.contains(&r)
        {
            roots.push(r);
        }
    }
    let root = match (roots.as_slice(), &opts.work_dir) {
        ([one], _) => one.clone(),
        (_, Some(w)) => {
            let w = std::path::absolute(w).unwrap_or_else(|_| w.clone());
            find_mod_root(&w).unwrap_or(w)
        }
        ([], None) => {
            let cwd =
                std::env::current_dir().map_err(|e| plain(format!("current directory: {e}")))?;
            find_mod_root(&cwd).unwrap_or(cwd)
        }
        (many, None) => {
            return Err(plain(format!(
                "conflict kcl.mod file paths: {}",
                many.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    };
    let modfile = read_mod_file(&root).map_err(&plain)?;
    // -E packages first (they win), then kcl.mod dependencies.
    let mut external: Vec<(String, PathBuf)> = opts
        .external
        .iter()
        .map(|(n, p)| {
            (
                n.clone(),
                std::path::absolute(p).unwrap_or_else(|_| p.clone()),
            )
        })
        .collect();
    if let Some(m) = &modfile {
        for dep in &m.dependencies {
            if external.iter().any(|(n, _)| *n == dep.name) {
                continue;
            }
            if let Some(path) = locate_dependency(&root, dep) {
                external.push((dep.name.clone(), path));
            }
        }
    }
    let entries: Vec<PathBuf> = if inputs.is_empty() {
        let m = modfile
            .as_ref()
            .filter(|m| !m.entries.is_empty())
            .ok_or_else(|| plain("no input files".into()))?;
        m.entries
            .iter()
            .map(|e| {
                let p = expand_paths(e, &root, &external);
                if p.is_absolute() { p } else { root.join(p) }
            })
            .collect()
    } else {
        inputs
            .iter()
            .map(|i| expand_paths(&i.to_string_lossy(), &root, &external))
            .collect()
    };
    let mut files = Vec::new();
    for p in entries {
        if p.is_dir() {
            let found = package_files(&p).map_err(|e| plain(format!("{}: {e}", p.display())))?;
            if found.is_empty() {
                return Err(plain(format!(
                    "No KCL files found in the specified folder {}",
                    p.display()
                )));
            }
            files.extend(found);
        } else {
            files.push(p);
        }
    }
    let mut ld = Loader {
        cache,
        parsed: Default::default(),
        roots: PackageRoots::new(root.clone(), external),
        packages: Default::default(),
        imports: FxHashMap::default(),
        errors: Vec::new(),
        missing: Vec::new(),
        partial,
    };
    let mut modules = Vec::new();
    for f in &files {
        // each main file's imports are loaded before the next main file is, so syntax
        // errors come in upstream's order (a file, then the packages it imports)
        match ld.parse_file(f) {
            Ok((m, errors)) => {
                ld.errors.extend(errors);
                ld.resolve_module_imports(&m);
                modules.push(m);
            }
            Err(d) => ld.errors.extend(d.0),
        }
    }
    let main = Package {
        pkgpath: Arc::from(MAIN_PKG),
        path: root.clone(),
        modules,
    };
    let program = Program {
        root,
        main,
        packages: ld.packages,
        imports: ld.imports,
    };
    Ok((program, ld.errors, ld.missing))
}

/// A file as the parser recovered it, with its syntax errors.
fn parse_partial(f: &Path) -> Result<(Arc<Module>, Vec<Diagnostic>), Diagnostics> {
    let file = crate::parser::register_file(f)?;
    let (m, errors) = crate::parser::parse_with_errors(file);
    Ok((Arc::new(m), errors))
}

impl Loader<'_> {
    /// A file of the program: as the parser recovered it, with its syntax errors, when the
    /// loader keeps such files; else whole or not at all.
    fn parse_file(&mut self, f: &Path) -> Result<(Arc<Module>, Vec<Diagnostic>), Diagnostics> {
        if self.partial {
            parse_partial(f)
        } else {
            self.parse(f).map(|m| (m, Vec::new()))
        }
    }

    fn parse(&mut self, f: &Path) -> Result<Arc<Module>, Diagnostics> {
        match self.cache {
            Some(cache) => {
                let n = self.parsed.entry(normalize(f)).or_default();
                *n += 1;
                cache.parse_nth(f, *n - 1)
            }
            None => crate::parser::parse_program_file(f).map(Arc::new),
        }
    }
}

impl ImportWalk for Loader<'_> {
    fn walk_parts(
        &mut self,
    ) -> (
        &mut PackageRoots,
        &mut indexmap_lite::OrderedMap<Arc<str>, Package>,
        &mut FxHashMap<Span, ImportTarget>,
        &mut Vec<Diagnostic>,
    ) {
        (
            &mut self.roots,
            &mut self.packages,
            &mut self.imports,
            &mut self.errors,
        )
    }

    fn load_module(&mut self, f: &Path) -> Option<Arc<Module>> {
        match self.parse_file(f) {
            Ok((m, errors)) => {
                self.errors.extend(errors);
                Some(m)
            }
            Err(d) => {
                self.errors.extend(d.0);
                None
            }
        }
    }

    fn missing_module(&mut self, d: Diagnostic) {
        self.missing.push(d);
    }
}
