//! The language server's database: editor buffers over the files on disk, parsed files,
//! compile units, and each unit's analysis (load, check, lint), computed on demand and cached.
//!
//! Incrementality: a file is parsed once per content (its [`FileData`] is kept until its text
//! changes); a unit's result records the parsed files it was computed from and is reused for as
//! long as all of them are current, so a query on an unchanged workspace costs a hash-map look-up
//! per file of the unit and no re-analysis. A unit checks its main package only (the packages
//! it imports are read, not checked: each is its own unit), so an edit re-checks the units that
//! hold the edited file, no others.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use rustc_hash::FxHashMap;

use crate::ast::{FileId, Module, SourceFile, Span, source_map};
use crate::diag::{Diagnostic, Diagnostics, ErrorKind};
use crate::parser::loader::{
    ImportTarget, ImportWalk, MAIN_PKG, Package, PackageRoots, Program, find_mod_root,
    locate_dependency, read_mod_file,
};

use super::sema::Sema;
use crate::pkg::resolve::normalize;

/// Locks a mutex, taking the data of a poisoned one (a panicked request must not wedge the
/// server: the caches hold no half-written state).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}

/// One parsed version of a file. Its text stays registered in the source map for as long as
/// something holds it, and is released after.
#[derive(Debug)]
pub struct FileData {
    /// Absolute, normalized path.
    pub path: PathBuf,
    /// The registered text.
    pub src: Arc<SourceFile>,
    /// Content hash (what unit results are validated against).
    pub hash: blake3::Hash,
    /// The tree as the parser recovered it.
    pub module: Arc<Module>,
    /// Syntax errors.
    pub errors: Vec<Diagnostic>,
    /// Editor version when the text is a buffer's.
    pub version: Option<i32>,
}

impl FileData {
    fn parse(path: PathBuf, text: Arc<str>, version: Option<i32>) -> FileData {
        let hash = blake3::hash(text.as_bytes());
        let src = source_map().add(path.display().to_string(), Some(&path), text);
        let (module, errors) = crate::parser::parse_with_errors(src.id);
        FileData {
            path,
            src,
            hash,
            module: Arc::new(module),
            errors,
            version,
        }
    }
    /// The file's id in the source map (the `file` of its spans).
    pub fn id(&self) -> FileId {
        self.src.id
    }
    /// The text.
    pub fn text(&self) -> &str {
        &self.src.text
    }
}

impl Drop for FileData {
    fn drop(&mut self) {
        source_map().release(self.src.id);
    }
}

/// What a unit compiles: a folder's package, or the files a `kcl.yaml` / `kcl.mod` profile
/// lists (a Konfig stack: `base/base.k`, `main.k` and `${konfig:KCL_MOD}/.../render.k`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// Unique key: the folder, or the settings file.
    pub key: PathBuf,
    /// The folder the unit is compiled from (where `kcl.mod` is looked for).
    pub dir: PathBuf,
    /// Main package files as listed (`${name:KCL_MOD}` expanded when loading).
    pub files: Vec<String>,
}

/// Every unit of the workspace and the unit each file's diagnostics come from.
#[derive(Default, Debug)]
pub struct Units {
    pub units: Vec<Arc<Unit>>,
    /// File -> index of the unit that reports its diagnostics.
    pub primary: HashMap<PathBuf, usize>,
}

/// A unit's analysis.
pub struct UnitResult {
    pub unit: Arc<Unit>,
    /// The loaded program, unmerged (what IDE queries walk).
    pub program: Program,
    /// Every file the result was computed from (kept alive; validated on use).
    pub files: Vec<Arc<FileData>>,
    /// File id -> index in `files`.
    pub by_id: FxHashMap<FileId, usize>,
    /// Main package files.
    pub main_files: Vec<PathBuf>,
    /// What loading reported (syntax errors of the main files, unresolved imports).
    load_errors: Vec<Diagnostic>,
    /// Load, check and lint findings, computed on first use (IDE queries need only the load).
    findings: OnceLock<Vec<crate::cli::lint::Finding>>,
    /// External packages (`name`, root).
    pub externals: Vec<(String, PathBuf)>,
    /// Built on the first IDE query.
    sema: OnceLock<Arc<Sema>>,
    /// Structure generation the result was computed at.
    structure: u64,
}

impl UnitResult {
    /// The semantic model, built once.
    pub fn sema(self: &Arc<Self>) -> Arc<Sema> {
        self.sema
            .get_or_init(|| Arc::new(Sema::build(self.clone())))
            .clone()
    }
    /// Load, check and lint findings of the main package.
    pub(crate) fn findings(&self, db: &Db) -> &[crate::cli::lint::Finding] {
        self.findings.get_or_init(|| {
            db.checked.fetch_add(1, Ordering::Relaxed);
            let mut checked = self.program.clone();
            crate::cli::lint::lint_loaded(
                Some(&mut checked),
                &Diagnostics(self.load_errors.clone()),
                false,
            )
        })
    }
    /// The file data of a file id of this unit.
    pub fn file_of(&self, id: FileId) -> Option<&Arc<FileData>> {
        self.by_id.get(&id).map(|&i| &self.files[i])
    }
    /// The file data of a path of this unit.
    pub fn file_by_path(&self, path: &Path) -> Option<&Arc<FileData>> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// References index per file: the model it was computed under and its entries.
type RefsCache = HashMap<PathBuf, (u64, Arc<Vec<super::ide::RefEntry>>)>;

/// The database (shared by the main loop, the diagnostics thread and request workers).
#[derive(Default)]
pub struct Db {
    overlays: RwLock<HashMap<PathBuf, (Arc<str>, i32)>>,
    files: Mutex<HashMap<PathBuf, Arc<FileData>>>,
    /// Paths known not to exist (or unreadable), until a file event says otherwise.
    missing: Mutex<HashSet<PathBuf>>,
    roots: RwLock<Vec<PathBuf>>,
    units: RwLock<Arc<Units>>,
    results: Mutex<HashMap<PathBuf, Arc<UnitResult>>>,
    computing: Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>,
    externals: Mutex<HashMap<PathBuf, Vec<(String, PathBuf)>>>,
    /// References index per file: (model id, entries).
    refs: Mutex<RefsCache>,
    /// Bumped when files appear or disappear or roots change (imports may resolve anew).
    structure: AtomicU64,
    /// Bumped on every change.
    revision: AtomicU64,
    /// Work done so far (`kcl/debug/stats`): files parsed, units loaded, units checked.
    pub parsed: AtomicU64,
    pub loaded: AtomicU64,
    pub checked: AtomicU64,
}

impl Db {
    pub fn new() -> Db {
        Db::default()
    }

    /// The change counter (requests compare it to tell stale answers).
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::SeqCst)
    }

    // ------------------------------------------------------------------- files ----

    /// The current version of a file (an editor buffer, else the disk), parsed.
    pub fn file(&self, path: &Path) -> Option<Arc<FileData>> {
        if let Some(f) = lock(&self.files).get(path) {
            return Some(f.clone());
        }
        let overlay = read(&self.overlays).get(path).cloned();
        let (text, version) = match overlay {
            Some((t, v)) => (t, Some(v)),
            None => {
                if lock(&self.missing).contains(path) {
                    return None;
                }
                match std::fs::read(path) {
                    Ok(b) => (Arc::from(String::from_utf8_lossy(&b).into_owned()), None),
                    Err(_) => {
                        lock(&self.missing).insert(path.to_path_buf());
                        return None;
                    }
                }
            }
        };
        self.parsed.fetch_add(1, Ordering::Relaxed);
        let data = Arc::new(FileData::parse(path.to_path_buf(), text, version));
        // a buffer set meanwhile wins over what this thread read
        Some(
            lock(&self.files)
                .entry(path.to_path_buf())
                .or_insert(data)
                .clone(),
        )
    }

    /// An editor buffer was opened or changed: parsed now (the edited file only).
    pub fn set_overlay(&self, path: &Path, text: Arc<str>, version: i32) {
        write(&self.overlays).insert(path.to_path_buf(), (text.clone(), version));
        self.parsed.fetch_add(1, Ordering::Relaxed);
        let data = Arc::new(FileData::parse(path.to_path_buf(), text, Some(version)));
        let was_missing = lock(&self.missing).remove(path);
        lock(&self.files).insert(path.to_path_buf(), data);
        if was_missing {
            self.structure.fetch_add(1, Ordering::SeqCst);
        }
        self.revision.fetch_add(1, Ordering::SeqCst);
    }

    /// The text of an open buffer.
    pub fn overlay(&self, path: &Path) -> Option<(Arc<str>, i32)> {
        read(&self.overlays).get(path).cloned()
    }

    /// A buffer was closed: the disk is the truth again.
    pub fn close_overlay(&self, path: &Path) {
        write(&self.overlays).remove(path);
        lock(&self.files).remove(path);
        self.revision.fetch_add(1, Ordering::SeqCst);
    }

    /// A file changed on disk: `created_or_deleted` when it appeared or disappeared (not
    /// just changed).
    pub fn disk_changed(&self, path: &Path, created_or_deleted: bool) {
        if !read(&self.overlays).contains_key(path) {
            lock(&self.files).remove(path);
        }
        let was_missing = lock(&self.missing).remove(path);
        // a file appearing or disappearing may change what imports resolve to
        if was_missing || created_or_deleted {
            self.structure.fetch_add(1, Ordering::SeqCst);
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(name, "kcl.mod" | "kcl.yaml" | "kcl.mod.lock") {
            lock(&self.externals).clear();
            self.structure.fetch_add(1, Ordering::SeqCst);
        }
        self.revision.fetch_add(1, Ordering::SeqCst);
    }

    /// Paths of the open buffers.
    pub fn open_files(&self) -> Vec<PathBuf> {
        read(&self.overlays).keys().cloned().collect()
    }

    // ------------------------------------------------------------------- units ----

    /// Sets the workspace folders and discovers their units.
    pub fn set_roots(&self, roots: Vec<PathBuf>) {
        *write(&self.roots) = roots;
        self.structure.fetch_add(1, Ordering::SeqCst);
        self.rediscover();
    }

    /// The workspace folders.
    pub fn roots(&self) -> Vec<PathBuf> {
        read(&self.roots).clone()
    }

    /// Walks the workspace folders again for units.
    pub fn rediscover(&self) {
        let roots = self.roots();
        let units = discover(&roots);
        *write(&self.units) = Arc::new(units);
        self.revision.fetch_add(1, Ordering::SeqCst);
    }

    /// The discovered units.
    pub fn units(&self) -> Arc<Units> {
        read(&self.units).clone()
    }

    /// The unit that reports `path`'s diagnostics (a folder unit for a file outside every
    /// workspace folder).
    pub fn unit_of(&self, path: &Path) -> Arc<Unit> {
        let units = self.units();
        if let Some(&i) = units.primary.get(path) {
            return units.units[i].clone();
        }
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Arc::new(folder_unit(&dir).unwrap_or_else(|| Unit {
            key: dir.clone(),
            dir: dir.clone(),
            files: vec![path.display().to_string()],
        }))
    }

    /// Units whose cached result was computed from `path`, plus the unit reporting it.
    pub fn units_affected_by(&self, path: &Path) -> Vec<Arc<Unit>> {
        let mut out: Vec<Arc<Unit>> = vec![self.unit_of(path)];
        let results = lock(&self.results);
        for r in results.values() {
            if r.files.iter().any(|f| f.path == path) && !out.iter().any(|u| u.key == r.unit.key) {
                out.push(r.unit.clone());
            }
        }
        out
    }

    // ----------------------------------------------------------------- results ----

    /// The unit's analysis: the cached one while every file it was computed from is current.
    pub fn result(&self, unit: &Arc<Unit>) -> Arc<UnitResult> {
        if let Some(r) = self.cached(unit) {
            return r;
        }
        // one computation per unit at a time; a second asker waits and takes the result
        let gate = lock(&self.computing)
            .entry(unit.key.clone())
            .or_default()
            .clone();
        let _g = lock(&gate);
        if let Some(r) = self.cached(unit) {
            return r;
        }
        let r = Arc::new(self.compute(unit));
        lock(&self.results).insert(unit.key.clone(), r.clone());
        r
    }

    /// The cached result if still current.
    pub fn cached(&self, unit: &Arc<Unit>) -> Option<Arc<UnitResult>> {
        let r = lock(&self.results).get(&unit.key).cloned()?;
        (r.unit == *unit && self.is_current(&r)).then_some(r)
    }

    fn is_current(&self, r: &UnitResult) -> bool {
        if r.structure != self.structure.load(Ordering::SeqCst) {
            return false;
        }
        let files = lock(&self.files);
        r.files.iter().all(|f| match files.get(&f.path) {
            Some(cur) => Arc::ptr_eq(cur, f) || cur.hash == f.hash,
            // not loaded since it was dropped from the cache: it changed on disk
            None => false,
        })
    }

    /// The external packages (`kcl.mod` dependencies) of the package above `dir`.
    pub fn externals_for(&self, dir: &Path) -> Vec<(String, PathBuf)> {
        let Some(root) = find_mod_root(dir) else {
            return Vec::new();
        };
        if let Some(e) = lock(&self.externals).get(&root) {
            return e.clone();
        }
        let found = resolve_externals(&root);
        lock(&self.externals).insert(root, found.clone());
        found
    }

    fn compute(&self, unit: &Arc<Unit>) -> UnitResult {
        self.loaded.fetch_add(1, Ordering::Relaxed);
        let structure = self.structure.load(Ordering::SeqCst);
        let externals = self.externals_for(&unit.dir);
        let mut ld = Loader {
            db: self,
            roots: PackageRoots::new(PathBuf::new(), externals.clone()),
            packages: Default::default(),
            imports: FxHashMap::default(),
            errors: Vec::new(),
            files: Vec::new(),
            used: HashSet::new(),
        };
        let work = normalize(&unit.dir);
        ld.roots.root = find_mod_root(&work).map(|r| normalize(&r)).unwrap_or(work);
        let mut main_files = Vec::new();
        for f in &unit.files {
            let p = crate::parser::loader::expand_paths(f, &ld.roots.root, &ld.roots.external);
            let p = if p.is_absolute() { p } else { unit.dir.join(p) };
            main_files.push(normalize(&p));
        }
        let mut modules = Vec::new();
        for p in &main_files {
            match ld.load_file(p) {
                Some(fd) => {
                    ld.errors.extend(fd.errors.iter().cloned());
                    modules.push(fd.module.clone());
                }
                None => ld.errors.push(Diagnostic::plain(
                    ErrorKind::CannotFindModule,
                    format!("cannot read {}", p.display()),
                )),
            }
        }
        for m in &modules {
            ld.resolve_module_imports(m);
        }
        let program = Program {
            root: ld.roots.root.clone(),
            main: Package {
                pkgpath: Arc::from(MAIN_PKG),
                path: ld.roots.root.clone(),
                modules,
            },
            packages: ld.packages,
            imports: ld.imports,
        };
        let by_id = ld
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.id(), i))
            .collect();
        UnitResult {
            unit: unit.clone(),
            program,
            files: ld.files,
            by_id,
            main_files,
            load_errors: ld.errors,
            findings: OnceLock::new(),
            externals,
            sema: OnceLock::new(),
            structure,
        }
    }

    /// Every cached result (for workspace-wide queries).
    pub fn cached_results(&self) -> Vec<Arc<UnitResult>> {
        lock(&self.results).values().cloned().collect()
    }

    /// The references index of a file under a model, computed once per model.
    pub fn refs_cached(
        &self,
        sema: &Sema,
        fd: &FileData,
        compute: impl FnOnce() -> Vec<super::ide::RefEntry>,
    ) -> Arc<Vec<super::ide::RefEntry>> {
        if let Some((id, v)) = lock(&self.refs).get(&fd.path)
            && *id == sema.id
        {
            return v.clone();
        }
        let v = Arc::new(compute());
        lock(&self.refs).insert(fd.path.clone(), (sema.id, v.clone()));
        v
    }

    /// Forgets results of units no longer discovered.
    pub fn prune(&self) {
        let units = self.units();
        let keys: HashSet<&PathBuf> = units.units.iter().map(|u| &u.key).collect();
        lock(&self.results).retain(|k, _| keys.contains(k));
    }
}

/// The folder unit of `dir`: its `.k` files (tests included), or `None` without any.
pub fn folder_unit(dir: &Path) -> Option<Unit> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "k"))
        .collect();
    if files.is_empty() {
        return None;
    }
    // the package's files, then its tests, each in name order
    files.sort_by_key(|p| (p.to_string_lossy().ends_with("_test.k"), p.clone()));
    Some(Unit {
        key: dir.to_path_buf(),
        dir: dir.to_path_buf(),
        files: files.iter().map(|p| p.display().to_string()).collect(),
    })
}

/// The files a folder's `kcl.yaml` lists (`kcl_cli_configs.files`), else its `kcl.mod`'s
/// `[profile] entries`.
fn settings_unit(dir: &Path) -> Option<Unit> {
    if let Ok(text) = std::fs::read_to_string(dir.join("kcl.yaml"))
        && let Ok(y) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&text)
        && let Some(c) = y.get("kcl_cli_configs")
    {
        let mut files = Vec::new();
        for key in ["files", "file"] {
            if let Some(serde_yaml_ng::Value::Sequence(fs)) = c.get(key) {
                files.extend(fs.iter().filter_map(|f| f.as_str()).map(|f| rel(dir, f)));
            }
        }
        if !files.is_empty() {
            return Some(Unit {
                key: dir.join("kcl.yaml"),
                dir: dir.to_path_buf(),
                files,
            });
        }
    }
    let m = read_mod_file(dir).ok().flatten()?;
    if m.entries.is_empty() {
        return None;
    }
    Some(Unit {
        key: dir.join("kcl.mod"),
        dir: dir.to_path_buf(),
        files: m.entries.iter().map(|f| rel(dir, f)).collect(),
    })
}

fn rel(dir: &Path, f: &str) -> String {
    if f.contains("KCL_MOD}") || Path::new(f).is_absolute() {
        f.to_string()
    } else {
        normalize(&dir.join(f)).display().to_string()
    }
}

/// Folders skipped by discovery.
fn skipped(name: &str) -> bool {
    name.starts_with('.') || matches!(name, "target" | "node_modules")
}

/// Every unit below the workspace folders: settings units (a stack's `kcl.yaml` or `kcl.mod`
/// profile), then the folder units of folders whose files are not all claimed by one.
pub fn discover(roots: &[PathBuf]) -> Units {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: u32) {
        if depth > 32 {
            return;
        }
        out.push(dir.to_path_buf());
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut subs: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| !skipped(&e.file_name().to_string_lossy()))
            .map(|e| e.path())
            .collect();
        subs.sort();
        for s in subs {
            walk(&s, out, depth + 1);
        }
    }
    let mut dirs = Vec::new();
    for r in roots {
        walk(&normalize(r), &mut dirs, 0);
    }
    dirs.sort();
    dirs.dedup();
    let mut units = Units::default();
    let mut claimed: HashSet<PathBuf> = HashSet::new();
    for d in &dirs {
        if let Some(u) = settings_unit(d) {
            for f in &u.files {
                if !f.contains("${") {
                    claimed.insert(PathBuf::from(f));
                }
            }
            units.units.push(Arc::new(u));
        }
    }
    for d in &dirs {
        let Some(u) = folder_unit(d) else { continue };
        let all_claimed = u
            .files
            .iter()
            .all(|f| claimed.contains(Path::new(f)) || f.ends_with("_test.k"))
            && u.files.iter().any(|f| !f.ends_with("_test.k"));
        if !all_claimed {
            units.units.push(Arc::new(u));
        }
    }
    // a file's diagnostics come from the first unit listing it (settings units first)
    for (i, u) in units.units.iter().enumerate() {
        for f in &u.files {
            if !f.contains("${") {
                units.primary.entry(PathBuf::from(f)).or_insert(i);
            }
        }
    }
    units
}

/// The dependencies of the package at `root`, resolved as `kcl run` does but offline, without
/// writing the lock or hashing (an editor never downloads or rewrites); what that cannot
/// resolve is located as the loader does (path, cache, `vendor/`).
fn resolve_externals(root: &Path) -> Vec<(String, PathBuf)> {
    let opts = crate::pkg::ResolveOptions {
        offline: true,
        no_sum_check: true,
        ..Default::default()
    };
    if let Ok(r) = crate::pkg::resolve(root, &opts) {
        return r
            .externals()
            .into_iter()
            .map(|(n, p)| (n, normalize(&std::path::absolute(&p).unwrap_or(p))))
            .collect();
    }
    let Ok(Some(m)) = read_mod_file(root) else {
        return Vec::new();
    };
    m.dependencies
        .iter()
        .filter_map(|d| locate_dependency(root, d).map(|p| (d.name.clone(), normalize(&p))))
        .collect()
}

/// The loader of `parser::loader` over the database's files (buffers win over the disk).
struct Loader<'d> {
    db: &'d Db,
    roots: PackageRoots,
    packages: crate::parser::loader::indexmap_lite::OrderedMap<Arc<str>, Package>,
    imports: FxHashMap<Span, ImportTarget>,
    errors: Vec<Diagnostic>,
    files: Vec<Arc<FileData>>,
    used: HashSet<FileId>,
}

impl Loader<'_> {
    /// A file of the program. A file loaded twice in one program (a main file a package also
    /// holds) is parsed a second time, so no two packages share a file id.
    fn load_file(&mut self, p: &Path) -> Option<Arc<FileData>> {
        let mut fd = self.db.file(p)?;
        if !self.used.insert(fd.id()) {
            fd = Arc::new(FileData::parse(
                fd.path.clone(),
                Arc::from(fd.text()),
                fd.version,
            ));
            self.used.insert(fd.id());
        }
        self.files.push(fd.clone());
        Some(fd)
    }
}

impl ImportWalk for Loader<'_> {
    fn walk_parts(
        &mut self,
    ) -> (
        &mut PackageRoots,
        &mut crate::parser::loader::indexmap_lite::OrderedMap<Arc<str>, Package>,
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
        self.load_file(&normalize(f)).map(|fd| fd.module.clone())
    }
}

/// Diagnostics of the main files of a result, by file (files without any get an empty list).
pub(crate) fn findings_by_file<'r>(
    r: &'r UnitResult,
    db: &Db,
) -> BTreeMap<PathBuf, Vec<&'r crate::cli::lint::Finding>> {
    let mut out: BTreeMap<PathBuf, Vec<&'r crate::cli::lint::Finding>> = r
        .main_files
        .iter()
        .map(|p| (p.clone(), Vec::new()))
        .collect();
    for f in r.findings(db) {
        let path = match f.span.and_then(|s| r.file_of(s.file)) {
            Some(fd) => fd.path.clone(),
            None => PathBuf::from(&f.file),
        };
        if let Some(v) = out.get_mut(&path) {
            v.push(f);
        }
    }
    out
}
