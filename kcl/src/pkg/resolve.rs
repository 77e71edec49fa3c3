//! Dependency resolution: from a package's `kcl.mod` to the folder of every dependency (direct
//! and indirect), downloading what is missing from the cache, checking each against the
//! checksum in `kcl.mod.lock`, and writing the lock back.
//!
//! Where a dependency is looked for, in order: with `vendor`, `<root>/vendor/<name>_<version>`
//! (then `<root>/vendor/<name>`) only; otherwise the cache `$KCL_PKG_PATH/<name>_<version>`,
//! then the vendor folders, then the network (into the cache). A package whose content does
//! not hash to its locked `sum` is refused; a cache copy that does not is downloaded again and
//! must then match.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use super::lock::{LockEntry, LockFile};
use super::modfile::{Dependency, GitRef, ModFile, Source};
use super::settings::temp_sibling;
use super::{PkgError, Settings, alias_name, git, hash_dir};

/// How to resolve.
#[derive(Clone, Debug, Default)]
pub struct ResolveOptions {
    /// Take registry and git dependencies from `<root>/vendor` only (offline builds).
    pub vendor: bool,
    /// Never download; a dependency missing locally is an error.
    pub offline: bool,
    /// Dependencies given otherwise (`-E name=path`): neither looked up nor locked anew.
    pub skip: Vec<String>,
    /// Write `kcl.mod.lock` when it changes.
    pub write_lock: bool,
    /// A lock that cannot be written is an error (`kcl mod`); otherwise a warning (`kcl run`
    /// in a read-only checkout still runs).
    pub strict_lock: bool,
    /// Re-resolve what the lock pins (newest tags for untagged dependencies) and hash local
    /// path dependencies (`kcl mod update`).
    pub update: bool,
    /// Do not check or record checksums (`--no_sum_check`).
    pub no_sum_check: bool,
    /// Progress lines (downloads) on stderr.
    pub progress: bool,
    /// With `offline`: a dependency missing locally resolves to the folder it would be
    /// downloaded to instead of failing (`kcl mod metadata` without `--update`).
    pub expected_paths: bool,
}

/// One resolved dependency.
#[derive(Clone, Debug)]
pub struct ResolvedDep {
    pub name: String,
    /// Its version (registry tag, git reference, or a local package's own version).
    pub version: String,
    /// The folder holding it.
    pub path: PathBuf,
    pub source: Source,
    /// `kcl.mod:line:col` that asked for it.
    pub at: String,
}

/// The outcome of [`resolve`].
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The package resolved.
    pub name: String,
    pub version: String,
    /// Every dependency, in resolution order (direct ones first).
    pub deps: Vec<ResolvedDep>,
    /// Edges `package@version -> dependency@version` (the root is `name@version`).
    pub edges: Vec<(String, String)>,
    pub lock: LockFile,
    /// Whether `kcl.mod.lock` was written.
    pub lock_written: bool,
}

impl Resolved {
    /// `(import name, folder)` of every dependency, as `-E name=path` would give them.
    pub fn externals(&self) -> Vec<(String, PathBuf)> {
        self.deps
            .iter()
            .map(|d| (alias_name(&d.name), d.path.clone()))
            .collect()
    }
}

/// Lexically removes `.` and `..` components.
pub(crate) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

static MEMO: std::sync::Mutex<Option<HashMap<PathBuf, String>>> = std::sync::Mutex::new(None);

fn with_memo<R>(f: impl FnOnce(&mut HashMap<PathBuf, String>) -> R) -> R {
    let mut g = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

struct Ctx<'a> {
    root: PathBuf,
    /// `vendor/` of the root and of its local path dependencies (transitively): a Konfig
    /// stack depending on the Konfig by path finds the Konfig's vendored packages.
    vendors: Vec<PathBuf>,
    settings: Settings,
    opts: &'a ResolveOptions,
    old: LockFile,
    #[cfg(feature = "registry")]
    clients: HashMap<String, super::oci::Client>,
}

/// Resolves the dependencies of the package in `root` (the folder of its `kcl.mod`).
pub fn resolve(root: &Path, opts: &ResolveOptions) -> Result<Resolved, PkgError> {
    let root = normalize(&std::path::absolute(root).map_err(|e| PkgError::io(root, e))?);
    let m = ModFile::load(&root)?;
    let old = LockFile::load(&root)?;
    let mut cx = Ctx {
        settings: Settings::load()?,
        vendors: vendor_dirs(&root, &m)?,
        root: root.clone(),
        opts,
        old,
        #[cfg(feature = "registry")]
        clients: HashMap::new(),
    };
    let root_id = node(&m.name, &m.version);
    let mut queue: VecDeque<(String, PathBuf, Dependency)> = m
        .dependencies
        .iter()
        .map(|d| (root_id.clone(), root.clone(), d.clone()))
        .collect();
    let mut deps: Vec<ResolvedDep> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut edges = Vec::new();
    let mut lock = LockFile::default();
    let mut seen_edges = std::collections::HashSet::new();
    while let Some((parent, base, dep)) = queue.pop_front() {
        let alias = alias_name(&dep.name);
        if opts.skip.iter().any(|s| *s == alias || *s == dep.name) {
            if let Some(e) = cx.old.entries.get(&dep.name) {
                lock.entries.insert(dep.name.clone(), e.clone());
            }
            continue;
        }
        if let Some(&i) = by_name.get(&dep.name) {
            let have = &deps[i];
            let want = dep.source.version().unwrap_or(&have.version);
            if have.source != dep.source && want != have.version {
                tracing::warn!(
                    dependency = %dep.name,
                    using = %have.version,
                    wanted = %want,
                    by = %parent,
                    "dependency wanted at two versions; the first one resolved is used"
                );
            }
            let e = (parent.clone(), node(&have.name, &have.version));
            if seen_edges.insert(e.clone()) {
                edges.push(e);
            }
            continue;
        }
        let (rd, entry) = cx.resolve_one(&base, &dep)?;
        let e = (parent.clone(), node(&rd.name, &rd.version));
        if seen_edges.insert(e.clone()) {
            edges.push(e);
        }
        if let Some(sub) = ModFile::load_if_present(&rd.path)? {
            let me = node(&rd.name, &rd.version);
            for d in sub.dependencies {
                queue.push_back((me.clone(), rd.path.clone(), d));
            }
        }
        lock.entries.insert(dep.name.clone(), entry);
        by_name.insert(dep.name.clone(), deps.len());
        deps.push(rd);
    }
    // a package with path dependencies only gets no lock file it did not have: there is
    // nothing to pin (and `kcl run` in a source tree would leave one behind)
    let remote = deps
        .iter()
        .any(|d| !matches!(d.source, Source::Local { .. }));
    let lock_written = if opts.write_lock
        && !opts.no_sum_check
        && (remote || root.join("kcl.mod.lock").exists())
        && lock != cx.old
    {
        match lock.store(&root) {
            Ok(w) => w,
            Err(e) if !opts.strict_lock && !opts.update => {
                tracing::warn!("{e}");
                if opts.progress {
                    eprintln!("warning: kcl.mod.lock not updated: {e}");
                }
                false
            }
            Err(e) => return Err(e),
        }
    } else {
        false
    };
    Ok(Resolved {
        name: m.name,
        version: m.version,
        deps,
        edges,
        lock,
        lock_written,
    })
}

/// `root/vendor`, then the `vendor/` of every local path dependency, transitively.
fn vendor_dirs(root: &Path, m: &ModFile) -> Result<Vec<PathBuf>, PkgError> {
    let mut out = vec![root.join("vendor")];
    let mut seen = vec![root.to_path_buf()];
    let mut queue: VecDeque<(PathBuf, Vec<Dependency>)> =
        VecDeque::from([(root.to_path_buf(), m.dependencies.clone())]);
    while let Some((base, deps)) = queue.pop_front() {
        for d in deps {
            if let Source::Local { path } = &d.source {
                let dir = normalize(&base.join(path));
                if seen.contains(&dir) || !dir.is_dir() {
                    continue;
                }
                seen.push(dir.clone());
                out.push(dir.join("vendor"));
                if let Some(sub) = ModFile::load_if_present(&dir)? {
                    queue.push_back((dir, sub.dependencies));
                }
            }
        }
    }
    Ok(out)
}

/// `<name>_<version>` as one folder name: a dependency name or version (a kcl.mod key, a tag
/// a registry lists, a branch) never makes a path outside the cache or vendor folder.
fn full_name(dep: &Dependency, version: &str) -> Result<String, PkgError> {
    if dep.name.is_empty() || dep.name.contains(['/', '\\']) || dep.name == "." || dep.name == ".."
    {
        return Err(PkgError::Invalid(format!(
            "{}: '{}' is not a valid dependency name",
            dep.at, dep.name
        )));
    }
    Ok(format!(
        "{}_{}",
        dep.name,
        version.replace(['/', '\\'], "_")
    ))
}

fn node(name: &str, version: &str) -> String {
    if version.is_empty() {
        name.to_string()
    } else {
        format!("{name}@{version}")
    }
}

impl<'a> Ctx<'a> {
    /// A context for one package outside a resolve (`kcl mod pull`, `kcl mod add`'s newest
    /// version): no vendor folders, no lock.
    fn single(root: PathBuf, opts: &'a ResolveOptions) -> Result<Ctx<'a>, PkgError> {
        Ok(Ctx {
            root,
            vendors: Vec::new(),
            settings: Settings::load()?,
            opts,
            old: LockFile::default(),
            #[cfg(feature = "registry")]
            clients: HashMap::new(),
        })
    }
}

impl Ctx<'_> {
    fn resolve_one(
        &mut self,
        base: &Path,
        dep: &Dependency,
    ) -> Result<(ResolvedDep, LockEntry), PkgError> {
        match &dep.source {
            Source::Local { path } => self.local(base, dep, path),
            Source::Git {
                url,
                reference,
                package,
            } => self.git(dep, url, reference, package.as_deref()),
            Source::Registry { .. } | Source::Oci { .. } => self.oci(dep),
        }
    }

    fn local(
        &self,
        base: &Path,
        dep: &Dependency,
        path: &str,
    ) -> Result<(ResolvedDep, LockEntry), PkgError> {
        let dir = normalize(&base.join(path));
        if !dir.is_dir() {
            return Err(PkgError::Invalid(format!(
                "{}: dependency '{}': path '{path}' ({}) is not a folder",
                dep.at,
                dep.name,
                dir.display()
            )));
        }
        let m = ModFile::load_if_present(&dir)?;
        let version = m.as_ref().map(|m| m.version.clone()).unwrap_or_default();
        let old = self
            .old
            .entries
            .get(&dep.name)
            .filter(|e| (e.path == path || e.path.is_empty()) && e.version == version);
        // hashing a local folder (a whole monorepo for `path = "../.."`) only when asked:
        // its content is the user's own, there is nothing to verify
        let sum = if self.opts.update && !self.opts.no_sum_check {
            hash_dir(&dir)?
        } else {
            old.map(|e| e.sum.clone()).unwrap_or_default()
        };
        // an entry upstream wrote (perhaps without `path`) stays as it is unless updating
        let entry = match old {
            Some(e) if !self.opts.update => e.clone(),
            _ => LockEntry {
                name: dep.name.clone(),
                full_name: format!("{}_{version}", dep.name),
                version: version.clone(),
                sum,
                path: path.to_string(),
                ..Default::default()
            },
        };
        Ok((
            ResolvedDep {
                name: dep.name.clone(),
                version,
                path: dir,
                source: dep.source.clone(),
                at: dep.at.clone(),
            },
            entry,
        ))
    }

    /// The folders a remote dependency `full` (`name_version`) may already be in.
    fn candidates(&self, name: &str, full: &str) -> Vec<(PathBuf, bool)> {
        let mut c = Vec::new();
        if !self.opts.vendor {
            c.push((self.settings.cache_dir(full), true));
        }
        for v in &self.vendors {
            c.push((v.join(full), false));
            c.push((v.join(name), false));
        }
        c
    }

    /// The checksum of `dir`, computed once per process per folder (`kusionctl compile --all`
    /// resolves the same vendored package for every stack). Folders this process downloads
    /// are hashed afresh.
    fn hash(&self, dir: &Path) -> Result<String, PkgError> {
        if let Some(h) = with_memo(|m| m.get(dir).cloned()) {
            return Ok(h);
        }
        let h = hash_dir(dir)?;
        with_memo(|m| m.insert(dir.to_path_buf(), h.clone()));
        Ok(h)
    }

    /// Checks `dir` against the locked `sum` (when there is one to check).
    fn verify(
        &self,
        dep: &Dependency,
        what: &str,
        dir: &Path,
        sum: &str,
    ) -> Result<String, PkgError> {
        let got = self.hash(dir)?;
        if !sum.is_empty() && !self.opts.no_sum_check && got != sum {
            return Err(PkgError::Checksum(format!(
                "checksum mismatch for dependency '{}' ({what}): {} records sum {sum}, but {} hashes to {got}: the package was modified after it was locked. Refusing it; if the change is intended, remove its entry from kcl.mod.lock and run `kcl mod update`",
                dep.name,
                self.root.join("kcl.mod.lock").display(),
                dir.display()
            )));
        }
        Ok(got)
    }

    fn missing(&self, dep: &Dependency, what: &str, full: &str) -> PkgError {
        if self.opts.vendor {
            PkgError::Invalid(format!(
                "{}: dependency '{}' ({what}) is not vendored: no {} (run `kcl mod vendor`)",
                dep.at,
                dep.name,
                self.root.join("vendor").join(full).display()
            ))
        } else {
            PkgError::Invalid(format!(
                "{}: dependency '{}' ({what}) is not in the cache {} and downloads are off",
                dep.at,
                dep.name,
                self.settings.pkg_path.display()
            ))
        }
    }

    fn progress(&self, msg: String) {
        if self.opts.progress {
            eprintln!("{msg}");
        }
        tracing::info!("{msg}");
    }

    /// Uses the first local copy that verifies; a cache copy that does not is replaced by a
    /// new download (`fetch`), which must verify.
    fn settle(
        &mut self,
        dep: &Dependency,
        what: &str,
        name: &str,
        full: &str,
        sum: &str,
        fetch: &mut dyn FnMut(&mut Self, &Path) -> Result<(), PkgError>,
    ) -> Result<(PathBuf, String), PkgError> {
        let mut stale_cache = None;
        for (dir, is_cache) in self.candidates(name, full) {
            if !dir.is_dir() {
                continue;
            }
            match self.verify(dep, what, &dir, sum) {
                Ok(got) => return Ok((dir, got)),
                Err(e) if is_cache && !self.opts.offline => {
                    tracing::warn!("{e}");
                    stale_cache = Some(dir);
                }
                Err(e) => return Err(e),
            }
        }
        if self.opts.offline && self.opts.expected_paths && !self.opts.vendor {
            return Ok((self.settings.cache_dir(full), sum.to_string()));
        }
        if self.opts.vendor || self.opts.offline {
            return Err(self.missing(dep, what, full));
        }
        let dest = self.settings.cache_dir(full);
        let parent = self.settings.pkg_path.clone();
        std::fs::create_dir_all(&parent).map_err(|e| PkgError::io(&parent, e))?;
        let tmp = temp_sibling(&parent, full);
        if let Some(s) = &stale_cache {
            self.progress(format!(
                "the cached copy {} does not match kcl.mod.lock; downloading it again",
                s.display()
            ));
        }
        self.progress(format!("downloading '{name}' from '{what}'"));
        let fetched = fetch(self, &tmp).and_then(|_| self.verify(dep, what, &tmp, sum));
        let got = match fetched {
            Ok(g) => g,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(|e| PkgError::io(&dest, e))?;
        }
        std::fs::rename(&tmp, &dest).map_err(|e| PkgError::io(&dest, e))?;
        with_memo(|m| m.insert(dest.clone(), got.clone()));
        Ok((dest, got))
    }

    fn locked_sum(&self, dep: &Dependency, same: impl Fn(&LockEntry) -> bool) -> String {
        self.old
            .entries
            .get(&dep.name)
            .filter(|e| same(e))
            .map(|e| e.sum.clone())
            .unwrap_or_default()
    }

    fn git(
        &mut self,
        dep: &Dependency,
        url: &str,
        reference: &GitRef,
        package: Option<&str>,
    ) -> Result<(ResolvedDep, LockEntry), PkgError> {
        let r = reference.as_str().to_string();
        let full = full_name(dep, if r.is_empty() { "latest" } else { &r })?;
        let what = if r.is_empty() {
            url.to_string()
        } else {
            format!("{url}@{r}")
        };
        let sum = self.locked_sum(dep, |e| {
            e.url == url
                && e.package == package.unwrap_or("")
                && match reference {
                    GitRef::Tag(t) => e.git_tag == *t,
                    GitRef::Commit(c) => e.commit == *c,
                    GitRef::Branch(b) => e.branch == *b,
                    GitRef::Default => {
                        e.git_tag.is_empty() && e.commit.is_empty() && e.branch.is_empty()
                    }
                }
        });
        let (dir, got) = self.settle(dep, &what, &dep.name, &full, &sum, &mut |cx, tmp| {
            let head = git::fetch(url, reference, tmp, &what)?;
            cx.progress(format!("fetched '{}' at commit {head}", dep.name));
            Ok(())
        })?;
        let path = match package {
            Some(p) => git::find_package(&dir, p)?,
            None => dir,
        };
        let mut entry = LockEntry {
            name: dep.name.clone(),
            full_name: full.clone(),
            version: r.clone(),
            sum: if self.opts.no_sum_check {
                String::new()
            } else {
                got
            },
            url: url.to_string(),
            package: package.unwrap_or("").to_string(),
            ..Default::default()
        };
        match reference {
            GitRef::Tag(t) => entry.git_tag = t.clone(),
            GitRef::Commit(c) => entry.commit = c.clone(),
            GitRef::Branch(b) => entry.branch = b.clone(),
            GitRef::Default => {}
        }
        Ok((
            ResolvedDep {
                name: dep.name.clone(),
                version: r,
                path,
                source: dep.source.clone(),
                at: dep.at.clone(),
            },
            entry,
        ))
    }

    fn oci(&mut self, dep: &Dependency) -> Result<(ResolvedDep, LockEntry), PkgError> {
        let (reg, repo, tag) = dep
            .source
            .oci_ref(&dep.name, &self.settings)
            .ok_or_else(|| PkgError::Invalid(format!("{}: not a registry dependency", dep.at)))?;
        let same_source = |e: &LockEntry| {
            (e.reg.is_empty() || e.reg == reg) && (e.repo.is_empty() || e.repo == repo)
        };
        let tag = match tag {
            Some(t) => t,
            None => {
                // the lock pins an untagged dependency until `kcl mod update`
                let pinned = self
                    .old
                    .entries
                    .get(&dep.name)
                    .filter(|e| same_source(e) && !e.oci_tag.is_empty())
                    .map(|e| e.oci_tag.clone());
                match pinned {
                    Some(t) if !self.opts.update => t,
                    _ => self.latest(dep, &reg, &repo)?,
                }
            }
        };
        let full = full_name(dep, &tag)?;
        let what = format!("oci://{reg}/{repo}:{tag}");
        let sum = self.locked_sum(dep, |e| {
            same_source(e) && (e.oci_tag == tag || (e.oci_tag.is_empty() && e.version == tag))
        });
        let (path, got) = self.settle(dep, &what, &dep.name, &full, &sum, &mut |cx, tmp| {
            cx.download_oci(dep, &reg, &repo, &tag, tmp)
        })?;
        let entry = LockEntry {
            name: dep.name.clone(),
            full_name: full,
            version: tag.clone(),
            sum: if self.opts.no_sum_check {
                String::new()
            } else {
                got
            },
            reg,
            repo,
            oci_tag: tag.clone(),
            ..Default::default()
        };
        Ok((
            ResolvedDep {
                name: dep.name.clone(),
                version: tag,
                path,
                source: dep.source.clone(),
                at: dep.at.clone(),
            },
            entry,
        ))
    }

    #[cfg(feature = "registry")]
    fn client(&mut self, reg: &str) -> Result<&super::oci::Client, PkgError> {
        if !self.clients.contains_key(reg) {
            let c = super::oci::Client::new(&self.settings, reg)?;
            self.clients.insert(reg.to_string(), c);
        }
        Ok(&self.clients[reg])
    }

    #[cfg(feature = "registry")]
    fn latest(&mut self, dep: &Dependency, reg: &str, repo: &str) -> Result<String, PkgError> {
        if self.opts.vendor || self.opts.offline {
            return Err(PkgError::Invalid(format!(
                "{}: dependency '{}' names no version, and finding the newest needs the registry",
                dep.at, dep.name
            )));
        }
        let c = self.client(reg)?;
        let tags = c.tags(repo)?;
        super::oci::latest_tag(&tags).ok_or_else(|| {
            PkgError::Remote(format!(
                "{}: dependency '{}': oci://{reg}/{repo} has no version tags",
                dep.at, dep.name
            ))
        })
    }

    #[cfg(not(feature = "registry"))]
    fn latest(&mut self, dep: &Dependency, _: &str, _: &str) -> Result<String, PkgError> {
        Err(no_registry(dep))
    }

    #[cfg(feature = "registry")]
    fn download_oci(
        &mut self,
        dep: &Dependency,
        reg: &str,
        repo: &str,
        tag: &str,
        dest: &Path,
    ) -> Result<(), PkgError> {
        let what = format!("oci://{reg}/{repo}:{tag}");
        let c = self.client(reg)?;
        let m = c.manifest(repo, tag)?;
        let (layer, _title) = m.package_layer().ok_or_else(|| {
            PkgError::Remote(format!("{what}: the manifest has no package (tar) layer"))
        })?;
        let data = c.blob(repo, layer)?;
        super::archive::unpack(&data, dest, &what)?;
        // the sum the publisher recorded: a layer swapped after the push is caught here even
        // without a lock entry
        if let Some(published) = m
            .annotation(super::oci::ANNOTATION_SUM)
            .filter(|s| !s.is_empty())
            && !self.opts.no_sum_check
        {
            let got = hash_dir(dest)?;
            if got != published {
                return Err(PkgError::Checksum(format!(
                    "checksum mismatch for dependency '{}' ({what}): the package's manifest records sum {published} ({}), but its content hashes to {got}: the artifact was modified after it was published. Refusing it",
                    dep.name,
                    super::oci::ANNOTATION_SUM
                )));
            }
        }
        Ok(())
    }

    #[cfg(not(feature = "registry"))]
    fn download_oci(
        &mut self,
        dep: &Dependency,
        _: &str,
        _: &str,
        _: &str,
        _: &Path,
    ) -> Result<(), PkgError> {
        Err(no_registry(dep))
    }
}

/// Downloads the package `source` (dependency name `name`) into `dest`, which must not exist
/// (`kcl mod pull`); a registry package must match the checksum its manifest records. Returns
/// the version fetched.
pub fn fetch_into(
    name: &str,
    source: &Source,
    dest: &Path,
    progress: bool,
) -> Result<String, PkgError> {
    let opts = ResolveOptions {
        progress,
        ..Default::default()
    };
    let mut cx = Ctx::single(dest.to_path_buf(), &opts)?;
    let dep = Dependency {
        name: name.to_string(),
        source: source.clone(),
        at: "kcl mod pull".into(),
    };
    match source {
        Source::Local { path } => Err(PkgError::Invalid(format!(
            "'{path}' is a local path; there is nothing to pull"
        ))),
        Source::Git { url, reference, .. } => {
            let what = format!("{url}@{}", reference.as_str());
            cx.progress(format!("pulling '{what}'"));
            git::fetch(url, reference, dest, &what)?;
            Ok(reference.as_str().to_string())
        }
        Source::Registry { .. } | Source::Oci { .. } => {
            let (reg, repo, tag) = source
                .oci_ref(name, &cx.settings)
                .ok_or_else(|| PkgError::Invalid("not a registry package".into()))?;
            let tag = match tag {
                Some(t) => t,
                None => cx.latest(&dep, &reg, &repo)?,
            };
            cx.progress(format!("pulling 'oci://{reg}/{repo}:{tag}'"));
            if let Err(e) = cx.download_oci(&dep, &reg, &repo, &tag, dest) {
                let _ = std::fs::remove_dir_all(dest);
                return Err(e);
            }
            Ok(tag)
        }
    }
}

/// The newest version tag of a registry package (`kcl mod add name` without a version).
pub fn latest_version(name: &str, source: &Source) -> Result<String, PkgError> {
    let opts = ResolveOptions::default();
    let mut cx = Ctx::single(PathBuf::new(), &opts)?;
    let (reg, repo, _) = source
        .oci_ref(name, &cx.settings)
        .ok_or_else(|| PkgError::Invalid(format!("'{name}' is not a registry package")))?;
    let dep = Dependency {
        name: name.to_string(),
        source: source.clone(),
        at: "kcl mod add".into(),
    };
    cx.latest(&dep, &reg, &repo)
}

#[cfg(not(feature = "registry"))]
fn no_registry(dep: &Dependency) -> PkgError {
    PkgError::Invalid(format!(
        "{}: dependency '{}' comes from an OCI registry, and this kcl was built without registry support (feature `registry`)",
        dep.at, dep.name
    ))
}
