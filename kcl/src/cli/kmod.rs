//! `kcl mod`: package management (upstream's `kcl mod` / kpm): `init`, `add`, `pull`, `push`,
//! `update`, `graph`, `metadata` and `vendor`. The package is the nearest `kcl.mod` at or above
//! the working folder. Progress goes to stderr (`-q` silences it); results (`graph`,
//! `metadata`) to stdout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use clap::{Args, Subcommand};

use crate::pkg::modfile::{self, GitRef, ModFile, Source, parse_oci_url};
use crate::pkg::{LockFile, ResolveOptions, Resolved, Settings, resolve};

/// `kcl mod`.
#[derive(Args, Debug)]
pub struct ModArgs {
    /// No progress output.
    #[arg(short = 'q', long = "quiet", global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: ModCommand,
}

#[derive(Subcommand, Debug)]
pub enum ModCommand {
    /// Create a package: kcl.mod, kcl.mod.lock and main.k (in NAME/ when a name is given).
    Init(InitArgs),
    /// Add a dependency to kcl.mod (name[:version], a path, oci://... or a git URL) and lock it.
    Add(AddArgs),
    /// Download a package (to LOCAL_PATH/oci/<registry>/<repo>/<tag> or .../git/...).
    Pull(PullArgs),
    /// Publish the current package to an OCI registry.
    Push(PushArgs),
    /// Resolve kcl.mod's dependencies again and rewrite kcl.mod.lock.
    Update(UpdateArgs),
    /// Print the dependency graph (`package@version dependency@version` lines).
    Graph,
    /// Print the resolved dependencies as JSON.
    Metadata(MetadataArgs),
    /// Copy every registry and git dependency into vendor/ for offline builds.
    Vendor,
}

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Package name (default: the folder's name).
    pub name: Option<String>,
    /// Package version.
    #[arg(long = "version", default_value = "0.0.1")]
    pub version: String,
}

/// Where a package comes from, on the command line (shared by `add` and `pull`).
#[derive(Args, Debug, Default)]
pub struct SourceArgs {
    /// Git repository URL.
    #[arg(long = "git")]
    pub git: Option<String>,
    /// OCI repository URL (oci://registry/repo or https://registry/repo).
    #[arg(long = "oci")]
    pub oci: Option<String>,
    /// Git or OCI tag.
    #[arg(long = "tag")]
    pub tag: Option<String>,
    /// Git commit.
    #[arg(long = "commit")]
    pub commit: Option<String>,
    /// Git branch.
    #[arg(long = "branch")]
    pub branch: Option<String>,
}

#[derive(Args, Debug)]
pub struct AddArgs {
    /// `name`, `name:version`, a local path, `oci://registry/repo` or a git URL.
    pub source: Option<String>,
    #[command(flatten)]
    pub from: SourceArgs,
    /// Local package path.
    #[arg(long = "path")]
    pub path: Option<String>,
    /// Name of the dependency (default: the package's name).
    #[arg(long = "rename")]
    pub rename: Option<String>,
    /// Git repository: the package in it with this kcl.mod name.
    #[arg(long = "package")]
    pub package: Option<String>,
    /// Do not check or record checksums.
    #[arg(long = "no_sum_check", alias = "no-sum-check")]
    pub no_sum_check: bool,
}

#[derive(Args, Debug)]
pub struct PullArgs {
    /// `name[:version]`, `oci://registry/repo` or a git URL.
    pub source: Option<String>,
    /// Folder to pull into (default: the working folder).
    pub local_path: Option<PathBuf>,
    #[command(flatten)]
    pub from: SourceArgs,
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// Target, `oci://registry/repo` (default: the default registry and repository, then the
    /// package name); the tag is the package version.
    pub url: Option<String>,
    /// Push this package tarball instead of the current package.
    #[arg(long = "tar_path", alias = "tar-path")]
    pub tar_path: Option<PathBuf>,
    /// Include vendor/ (the vendored dependencies) in the package.
    #[arg(long = "vendor")]
    pub vendor: bool,
}

#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// Package folder (default: the current package).
    pub path: Option<PathBuf>,
    /// Do not check or record checksums.
    #[arg(long = "no_sum_check", alias = "no-sum-check")]
    pub no_sum_check: bool,
}

#[derive(Args, Debug)]
pub struct MetadataArgs {
    /// Resolve from vendor/ only.
    #[arg(long = "vendor")]
    pub vendor: bool,
    /// Download missing dependencies and update kcl.mod.lock.
    #[arg(long = "update")]
    pub update: bool,
}

pub fn run(a: ModArgs) -> anyhow::Result<ExitCode> {
    let progress = !a.quiet;
    let say = |m: String| {
        if progress {
            eprintln!("{m}");
        }
    };
    let cwd = std::env::current_dir().context("current folder")?;
    match a.command {
        ModCommand::Init(i) => init(&cwd, i, &say),
        ModCommand::Add(x) => add(&cwd, x, progress, &say),
        ModCommand::Pull(p) => pull(&cwd, p, progress, &say),
        ModCommand::Push(p) => push(&cwd, p, &say),
        ModCommand::Update(u) => {
            let root = match u.path {
                Some(p) => cwd.join(p),
                None => package_root(&cwd)?,
            };
            let r = resolve(
                &root,
                &ResolveOptions {
                    write_lock: true,
                    strict_lock: true,
                    update: true,
                    no_sum_check: u.no_sum_check,
                    progress,
                    ..Default::default()
                },
            )?;
            if r.lock_written {
                say(format!("updated {}", root.join("kcl.mod.lock").display()));
            }
            Ok(ExitCode::SUCCESS)
        }
        ModCommand::Graph => {
            let root = package_root(&cwd)?;
            let r = resolve(
                &root,
                &ResolveOptions {
                    progress,
                    ..Default::default()
                },
            )?;
            print!("{}", graph_text(&r));
            Ok(ExitCode::SUCCESS)
        }
        ModCommand::Metadata(m) => {
            let root = package_root(&cwd)?;
            let r = resolve(
                &root,
                &ResolveOptions {
                    vendor: m.vendor,
                    offline: !m.update,
                    expected_paths: !m.update,
                    write_lock: m.update,
                    progress,
                    ..Default::default()
                },
            )?;
            println!("{}", metadata_json(&r));
            Ok(ExitCode::SUCCESS)
        }
        ModCommand::Vendor => vendor(&cwd, progress, &say),
    }
}

/// The nearest folder at or above `cwd` with a `kcl.mod`.
fn package_root(cwd: &Path) -> anyhow::Result<PathBuf> {
    crate::parser::loader::find_mod_root(cwd).ok_or_else(|| {
        anyhow!(
            "no kcl.mod in {} or a folder above it (run `kcl mod init`)",
            cwd.display()
        )
    })
}

fn init(cwd: &Path, a: InitArgs, say: &dyn Fn(String)) -> anyhow::Result<ExitCode> {
    let (name, dir) = match &a.name {
        Some(n) => (n.clone(), cwd.join(n)),
        None => (
            cwd.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "main".into()),
            cwd.to_path_buf(),
        ),
    };
    if name.is_empty()
        || name.contains(['/', '\\'])
        || name.starts_with('.')
        || name.chars().any(char::is_whitespace)
    {
        bail!("invalid package name '{name}'");
    }
    if crate::pkg::version::Version::parse(&a.version).is_none() {
        bail!("invalid package version '{}'", a.version);
    }
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    for (file, text) in [
        ("kcl.mod", modfile::init_text(&name, &a.version)),
        ("kcl.mod.lock", String::new()),
        (
            "main.k",
            "The_first_kcl_program = 'Hello World!'".to_string(),
        ),
    ] {
        let p = dir.join(file);
        if p.exists() {
            say(format!("'{}' already exists", p.display()));
            continue;
        }
        say(format!("creating new :{}", p.display()));
        std::fs::write(&p, text).with_context(|| p.display().to_string())?;
    }
    say(format!("package '{name}' init finished"));
    Ok(ExitCode::SUCCESS)
}

/// The repository name in a git URL (`https://host/org/konfig.git` → `konfig`).
fn repo_name(url: &str) -> String {
    let last = url
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or(url);
    last.strip_suffix(".git").unwrap_or(last).to_string()
}

fn git_ref(f: &SourceArgs) -> anyhow::Result<GitRef> {
    let refs: Vec<GitRef> = [
        f.tag.clone().map(GitRef::Tag),
        f.commit.clone().map(GitRef::Commit),
        f.branch.clone().map(GitRef::Branch),
    ]
    .into_iter()
    .flatten()
    .collect();
    if refs.len() > 1 {
        bail!("only one of --tag, --commit or --branch is allowed");
    }
    Ok(refs.into_iter().next().unwrap_or(GitRef::Default))
}

fn oci_source(url: &str, tag: Option<String>) -> anyhow::Result<(String, Source)> {
    let u = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .map(|r| format!("oci://{r}"))
        .unwrap_or_else(|| url.to_string());
    let (reg, repo) = parse_oci_url(&u).ok_or_else(|| {
        anyhow!("'{url}' is not an OCI url (expected oci://<registry>/<repository>)")
    })?;
    let name = repo.rsplit('/').next().unwrap_or(&repo).to_string();
    Ok((name, Source::Oci { reg, repo, tag }))
}

fn is_git_url(s: &str) -> bool {
    ["git://", "ssh://", "https://", "http://", "file://", "git@"]
        .iter()
        .any(|p| s.starts_with(p))
}

/// What `add`/`pull` name: `(dependency name, source)`. A local path is resolved against
/// `cwd`; its name is its package's.
fn parse_source(
    cwd: &Path,
    positional: Option<&str>,
    f: &SourceArgs,
    path_flag: Option<&str>,
) -> anyhow::Result<(String, Source)> {
    let git = |url: &str| -> anyhow::Result<(String, Source)> {
        Ok((
            repo_name(url),
            Source::Git {
                url: url.to_string(),
                reference: git_ref(f)?,
                package: None,
            },
        ))
    };
    if let Some(url) = &f.git {
        return git(url);
    }
    if let Some(url) = &f.oci {
        return oci_source(url, f.tag.clone());
    }
    let local = |p: &str| -> anyhow::Result<(String, Source)> {
        let dir = cwd.join(p);
        let m = ModFile::load(&dir).with_context(|| format!("local package '{p}'"))?;
        let name = if m.name.is_empty() {
            repo_name(&dir.display().to_string())
        } else {
            m.name.clone()
        };
        Ok((
            name,
            Source::Local {
                path: p.to_string(),
            },
        ))
    };
    if let Some(p) = path_flag {
        return local(p);
    }
    let Some(s) = positional else {
        bail!(
            "name the package: name[:version], a path, oci://registry/repo, or --git/--oci/--path"
        );
    };
    if s.starts_with("oci://") {
        return oci_source(s, f.tag.clone());
    }
    if is_git_url(s) {
        return git(s);
    }
    if cwd.join(s).is_dir() {
        return local(s);
    }
    let (name, version) = match s.split_once(':') {
        Some((n, v)) if !v.is_empty() && !v.contains(':') => (n, Some(v)),
        Some(_) => bail!("invalid package reference '{s}' (expected name or name:version)"),
        None => (s, None),
    };
    if name.is_empty() || name.contains(['/', '\\']) {
        bail!("'{s}' is neither a folder nor a package name");
    }
    Ok((
        name.to_string(),
        Source::Registry {
            version: version.unwrap_or("").to_string(),
        },
    ))
}

fn add(cwd: &Path, a: AddArgs, progress: bool, say: &dyn Fn(String)) -> anyhow::Result<ExitCode> {
    let root = package_root(cwd)?;
    let m = ModFile::load(&root)?;
    // a path is written as given relative to the package root
    let rel_cwd = cwd
        .strip_prefix(&root)
        .unwrap_or(Path::new(""))
        .to_path_buf();
    let (mut name, mut source) =
        parse_source(cwd, a.source.as_deref(), &a.from, a.path.as_deref())?;
    if let Source::Local { path } = &mut source {
        let abs = crate::pkg::resolve::normalize(&cwd.join(&*path));
        if abs == root {
            bail!("cannot add '{}' as a dependency to itself", m.name);
        }
        *path = rel_cwd.join(&*path).to_string_lossy().into_owned();
    }
    if let Source::Git { package, .. } = &mut source
        && let Some(p) = &a.package
    {
        *package = Some(p.clone());
        name = p.clone();
    }
    if let Some(r) = &a.rename {
        name = r.clone();
    }
    // a registry package without a version gets the newest, written into kcl.mod
    let unversioned = match &source {
        Source::Registry { version } => version.is_empty(),
        Source::Oci { tag, .. } => tag.is_none(),
        _ => false,
    };
    if unversioned {
        let latest = crate::pkg::resolve::latest_version(&name, &source)?;
        match &mut source {
            Source::Registry { version } => *version = latest,
            Source::Oci { tag, .. } => *tag = Some(latest),
            _ => {}
        }
    }
    say(format!("adding dependency '{name}'"));
    let mod_path = root.join("kcl.mod");
    let old_text =
        std::fs::read_to_string(&mod_path).with_context(|| mod_path.display().to_string())?;
    let new_text = modfile::set_dependency(&mod_path, &old_text, &name, &source)?;
    std::fs::write(&mod_path, &new_text).with_context(|| mod_path.display().to_string())?;
    let r = resolve(
        &root,
        &ResolveOptions {
            write_lock: true,
            strict_lock: true,
            no_sum_check: a.no_sum_check,
            progress,
            ..Default::default()
        },
    );
    match r {
        Ok(r) => {
            let v = r
                .deps
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.version.clone())
                .unwrap_or_default();
            say(format!(
                "add dependency '{name}{}' successfully",
                if v.is_empty() {
                    String::new()
                } else {
                    format!(":{v}")
                }
            ));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            // kcl.mod stays as it was when the dependency cannot be had
            std::fs::write(&mod_path, &old_text).with_context(|| mod_path.display().to_string())?;
            Err(anyhow!(e).context(format!("adding dependency '{name}'")))
        }
    }
}

/// `<dir>/oci/<registry>/<repo>/<tag>` or `<dir>/git/<host>/<path>/<ref>` (upstream's layout).
fn pull_dest(
    dir: &Path,
    name: &str,
    source: &Source,
    settings: &Settings,
    version: &str,
) -> PathBuf {
    match source {
        Source::Git { url, .. } => {
            let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
            let rest = rest.trim_start_matches("git@").replace(':', "/");
            let rest = rest.strip_suffix(".git").unwrap_or(&rest).to_string();
            let mut p = dir.join("git");
            for part in rest.split('/').filter(|s| !s.is_empty() && *s != "..") {
                p.push(part);
            }
            p.join(version)
        }
        _ => {
            let (reg, repo, _) = source.oci_ref(name, settings).unwrap_or_default();
            let mut p = dir.join("oci").join(reg);
            for part in repo.split('/').filter(|s| !s.is_empty() && *s != "..") {
                p.push(part);
            }
            p.join(version)
        }
    }
}

fn pull(cwd: &Path, a: PullArgs, progress: bool, say: &dyn Fn(String)) -> anyhow::Result<ExitCode> {
    let (name, mut source) = parse_source(cwd, a.source.as_deref(), &a.from, None)?;
    if let Source::Local { path } = &source {
        bail!("'{path}' is a local folder; pull takes name[:version], oci://... or a git URL");
    }
    if let Source::Registry { version } = &source
        && version.is_empty()
    {
        source = Source::Oci {
            reg: String::new(),
            repo: String::new(),
            tag: None,
        };
        let settings = Settings::load()?;
        if let Source::Oci { reg, repo, .. } = &mut source {
            *reg = settings.default_registry.clone();
            *repo = modfile::join_repo(&settings.default_repo, &name);
        }
    }
    let settings = Settings::load()?;
    let version = match &source {
        Source::Registry { version } => version.clone(),
        Source::Oci { tag: Some(t), .. } => t.clone(),
        Source::Oci { tag: None, .. } => crate::pkg::resolve::latest_version(&name, &source)?,
        Source::Git { reference, .. } => reference.as_str().to_string(),
        Source::Local { .. } => unreachable!("refused above"),
    };
    if let Source::Oci { tag, .. } = &mut source {
        *tag = Some(version.clone());
    }
    let base = a
        .local_path
        .map(|p| cwd.join(p))
        .unwrap_or_else(|| cwd.to_path_buf());
    let dest = pull_dest(
        &base,
        &name,
        &source,
        &settings,
        if version.is_empty() {
            "latest"
        } else {
            &version
        },
    );
    if dest.exists() {
        bail!("{} already exists", dest.display());
    }
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).with_context(|| parent.display().to_string())?;
    }
    crate::pkg::resolve::fetch_into(&name, &source, &dest, progress)?;
    let m = ModFile::load_if_present(&dest)?;
    let (n, v) = m.map(|m| (m.name, m.version)).unwrap_or((name, version));
    say(format!("pulled {n} {v} successfully ({})", dest.display()));
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "registry")]
fn push(cwd: &Path, a: PushArgs, say: &dyn Fn(String)) -> anyhow::Result<ExitCode> {
    use crate::pkg::{archive, oci};
    let tmp_holder;
    let root = match &a.tar_path {
        Some(t) => {
            let data = std::fs::read(cwd.join(t)).with_context(|| t.display().to_string())?;
            tmp_holder = tempdir_in_cache()?;
            archive::unpack(&data, &tmp_holder.0, &t.display().to_string())?;
            tmp_holder.0.clone()
        }
        None => package_root(cwd)?,
    };
    let m = ModFile::load(&root)?;
    if m.name.is_empty() || m.version.is_empty() {
        bail!(
            "{}: [package] needs a name and a version to be published",
            root.join("kcl.mod").display()
        );
    }
    let settings = Settings::load()?;
    let url = a.url.clone().unwrap_or_else(|| {
        format!(
            "oci://{}/{}",
            settings.default_registry,
            modfile::join_repo(&settings.default_repo, &m.name)
        )
    });
    let (reg, repo) = parse_oci_url(&url).ok_or_else(|| {
        anyhow!("'{url}' is not an OCI url: only oci://<registry>/<repository> is supported")
    })?;
    let tag = m.version.clone();
    let mut exclude = m.exclude.clone();
    if !a.vendor && a.tar_path.is_none() {
        exclude.push("vendor".into());
    }
    let files = archive::package_files(&root, &m.include, &exclude)?;
    let tar = archive::pack(&root, &files)?;
    // the sum of exactly what is published: the tarball unpacked
    let check = tempdir_in_cache()?;
    archive::unpack(&tar, &check.0, &m.name)?;
    let sum = crate::pkg::hash_dir(&check.0)?;
    let c = oci::Client::new(&settings, &reg)?;
    if c.tags(&repo)?.contains(&tag) {
        bail!("package version '{tag}' already exists in {url}");
    }
    say(format!("package '{}' will be pushed", m.name));
    let empty = c.push_blob(&repo, b"{}")?;
    debug_assert_eq!(empty, oci::digest_of(b"{}"));
    let layer = c.push_blob(&repo, &tar)?;
    let created = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let manifest = oci::package_manifest(
        &layer,
        tar.len(),
        &format!("{}.tar", m.full_name()),
        &[
            (oci::ANNOTATION_NAME, m.name.clone()),
            (oci::ANNOTATION_VERSION, m.version.clone()),
            (oci::ANNOTATION_DESCRIPTION, m.description.clone()),
            (oci::ANNOTATION_SUM, sum),
            (oci::ANNOTATION_CREATED, created),
        ],
    );
    let digest = c.push_manifest(&repo, &tag, &manifest)?;
    say(format!("pushed [registry] {reg}/{repo}:{tag}"));
    say(format!("digest: {digest}"));
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "registry"))]
fn push(_: &Path, _: PushArgs, _: &dyn Fn(String)) -> anyhow::Result<ExitCode> {
    bail!("this kcl was built without registry support (feature `registry`)")
}

/// A temporary folder under the package cache, removed on drop.
#[cfg(feature = "registry")]
struct TempDir(PathBuf);

#[cfg(feature = "registry")]
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(feature = "registry")]
fn tempdir_in_cache() -> anyhow::Result<TempDir> {
    let base = std::env::temp_dir();
    let p = crate::pkg::settings::temp_sibling(&base, "kcl-mod");
    std::fs::create_dir_all(&p).with_context(|| p.display().to_string())?;
    Ok(TempDir(p))
}

fn vendor(cwd: &Path, progress: bool, say: &dyn Fn(String)) -> anyhow::Result<ExitCode> {
    let root = package_root(cwd)?;
    let r = resolve(
        &root,
        &ResolveOptions {
            write_lock: true,
            strict_lock: true,
            progress,
            ..Default::default()
        },
    )?;
    let vendor = root.join("vendor");
    let mut n = 0;
    for d in &r.deps {
        if matches!(d.source, Source::Local { .. }) {
            continue;
        }
        let Some(e) = r.lock.entries.get(&d.name) else {
            continue;
        };
        let dest = vendor.join(&e.full_name);
        if d.path.starts_with(&vendor) || dest == d.path {
            continue;
        }
        // a `package = ...` git dependency is a folder inside its checkout: the whole checkout
        // is what its sum covers
        let src = d
            .path
            .ancestors()
            .find(|a| a.file_name().is_some_and(|n| *n == *e.full_name))
            .unwrap_or(&d.path);
        if dest.exists() {
            std::fs::remove_dir_all(&dest).with_context(|| dest.display().to_string())?;
        }
        copy_dir(src, &dest)?;
        n += 1;
    }
    // the vendored copies resolve and verify like any other
    resolve(
        &root,
        &ResolveOptions {
            vendor: true,
            ..Default::default()
        },
    )?;
    say(format!("vendored {n} package(s) into {}", vendor.display()));
    Ok(ExitCode::SUCCESS)
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| to.display().to_string())?;
    for e in std::fs::read_dir(from).with_context(|| from.display().to_string())? {
        let e = e?;
        let src = e.path();
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).with_context(|| src.display().to_string())?;
        }
    }
    Ok(())
}

/// `kcl mod graph`'s text: breadth first from the package, each node's edges in name order.
pub fn graph_text(r: &Resolved) -> String {
    let root = if r.version.is_empty() {
        r.name.clone()
    } else {
        format!("{}@{}", r.name, r.version)
    };
    let mut adj: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (a, b) in &r.edges {
        adj.entry(a).or_default().push(b);
    }
    for v in adj.values_mut() {
        v.sort();
        v.dedup();
    }
    let mut out = String::new();
    let mut seen = std::collections::HashSet::new();
    let mut queue = std::collections::VecDeque::from([root.as_str()]);
    seen.insert(root.as_str());
    while let Some(n) = queue.pop_front() {
        for &t in adj.get(n).map(Vec::as_slice).unwrap_or(&[]) {
            out.push_str(&format!("{n} {t}\n"));
            if seen.insert(t) {
                queue.push_back(t);
            }
        }
    }
    out
}

/// `kcl mod metadata`'s JSON (upstream's shape: `{"packages":{name:{name, manifest_path}}}`).
pub fn metadata_json(r: &Resolved) -> String {
    let mut pkgs = std::collections::BTreeMap::new();
    for d in &r.deps {
        let alias = crate::pkg::alias_name(&d.name);
        pkgs.entry(alias.clone()).or_insert_with(
            || serde_json::json!({"name": alias, "manifest_path": d.path.display().to_string()}),
        );
    }
    let mut m = serde_json::Map::new();
    m.insert(
        "packages".into(),
        serde_json::Value::Object(pkgs.into_iter().collect()),
    );
    serde_json::Value::Object(m).to_string()
}

/// Reads a package's lock (for tests and tools).
pub fn read_lock(root: &Path) -> anyhow::Result<LockFile> {
    Ok(LockFile::load(root)?)
}
