//! The Konfig layout: a root folder with `kcl.mod`; projects are folders with `project.yaml`;
//! stacks are sub-folders of a project with `stack.yaml` (settings) and `kcl.yaml` (the stack's
//! KCL files and options, the upstream `kcl_cli_configs`/`kcl_options` convention).

pub mod init;

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use kusion_kcl::find_mod_root;
use serde::Deserialize;

pub const PROJECT_FILE: &str = "project.yaml";
pub const STACK_FILE: &str = "stack.yaml";
pub const KCL_SETTINGS_FILE: &str = "kcl.yaml";

/// `project.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectConfig {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// `stack.yaml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackConfig {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// The target cluster's kubeconfig (relative to the stack folder).
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[serde(default)]
    pub context: Option<String>,
    #[serde(default)]
    pub state: Option<StateConfig>,
    /// Folders (relative to the stack folder) the stack's KCL may read with `file.*` besides
    /// its package, its folder and the external packages.
    #[serde(default, rename = "allowRead")]
    pub allow_read: Vec<PathBuf>,
    /// Environment variables the stack's KCL may read with `file.read_env`.
    #[serde(default, rename = "allowEnv")]
    pub allow_env: Vec<String>,
    /// `kusionctl server`: an apply or destroy waits for a second person's approval.
    #[serde(default, rename = "requireApproval")]
    pub require_approval: bool,
}

/// Where the stack's state lives.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// `local` (a folder, the default), `postgres://user:pass@host:port/db[?stack=NAME]` or
    /// `s3://bucket/prefix[?endpoint=URL&region=R&stack=NAME]`, the `--state-backend` forms.
    /// `${VAR}` is replaced by the environment variable, so credentials need not be committed.
    #[serde(default)]
    pub backend: Option<String>,
    /// The state folder of the `local` backend (relative to the stack folder).
    #[serde(default)]
    pub path: Option<PathBuf>,
}

/// The parts of `kcl.yaml` that compile checks itself; the kcl crate reads the file as a `-Y`
/// settings file, exactly as `kcl run -Y kcl.yaml` does.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct KclSettings {
    #[serde(default)]
    pub kcl_cli_configs: Option<KclCliConfigs>,
    #[serde(default)]
    pub kcl_options: Option<Vec<KclOption>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct KclCliConfigs {
    #[serde(default)]
    pub files: Option<Vec<String>>,
    #[serde(default)]
    pub file: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct KclOption {
    pub key: String,
    #[allow(dead_code)]
    pub value: serde_yaml_ng::Value,
}

/// A stack found on disk, with its project and Konfig root.
#[derive(Debug, Clone)]
pub struct Stack {
    /// The stack folder.
    pub dir: PathBuf,
    pub config: StackConfig,
    pub project_dir: PathBuf,
    pub project: ProjectConfig,
    /// The Konfig root: the nearest folder above the project holding `kcl.mod` (else the
    /// project folder).
    pub root: PathBuf,
}

impl Stack {
    /// `project/stack` for messages.
    pub fn label(&self) -> String {
        format!("{}/{}", self.project.name, self.config.name)
    }

    /// The stack's state folder when `stack.yaml` names one (local backend only).
    pub fn state_dir(&self) -> Result<Option<PathBuf>> {
        let Some(state) = &self.config.state else {
            return Ok(None);
        };
        if self.state_backend()?.is_some() {
            if state.path.is_some() {
                bail!(
                    "{}: state.path applies to the `local` backend only (state.backend is {:?})",
                    self.dir.join(STACK_FILE).display(),
                    state.backend.as_deref().unwrap_or_default()
                );
            }
            return Ok(None);
        }
        Ok(state.path.as_ref().map(|p| self.dir.join(p)))
    }

    /// The remote state backend `stack.yaml` names (`postgres://...` or `s3://...`, with
    /// `${VAR}` expanded), None for `local` or no choice.
    pub fn state_backend(&self) -> Result<Option<String>> {
        let file = || self.dir.join(STACK_FILE);
        let Some(spec) = self
            .config
            .state
            .as_ref()
            .and_then(|s| s.backend.as_deref())
            .map(str::trim)
        else {
            return Ok(None);
        };
        if spec.is_empty() || spec == "local" {
            return Ok(None);
        }
        let spec = expand_env(spec).map_err(|name| {
            anyhow!(
                "{}: state.backend uses ${{{name}}}, which is not set",
                file().display()
            )
        })?;
        let scheme = spec.split_once("://").map(|(s, _)| s);
        if !matches!(scheme, Some("postgres" | "postgresql" | "s3")) {
            bail!(
                "{}: unknown state backend {spec:?} (use `local`, `postgres://...` or `s3://bucket/prefix`)",
                file().display()
            );
        }
        Ok(Some(spec))
    }

    /// Settings for the `kubernetes` runtime from `stack.yaml` (kubeconfig, context).
    pub fn kubernetes_config(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        if let Some(k) = &self.config.kubeconfig {
            m.insert(
                "kubeconfig".into(),
                self.dir.join(k).display().to_string().into(),
            );
        }
        if let Some(c) = &self.config.context {
            m.insert("context".into(), c.clone().into());
        }
        m
    }

    /// The stack's `kcl.yaml`: its path and parsed content, or an error naming the stack.
    pub fn kcl_settings(&self) -> Result<(PathBuf, KclSettings)> {
        let path = self.dir.join(KCL_SETTINGS_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                anyhow!(
                    "stack {} ({}): missing {KCL_SETTINGS_FILE} (it lists the stack's KCL files under kcl_cli_configs.files)",
                    self.label(),
                    self.dir.display()
                )
            } else {
                anyhow!("reading {}: {e}", path.display())
            }
        })?;
        let settings: KclSettings = if text.trim().is_empty() {
            KclSettings::default()
        } else {
            serde_yaml_ng::from_str(&text).map_err(|e| {
                let loc = e
                    .location()
                    .map(|l| format!(":{}:{}", l.line(), l.column()))
                    .unwrap_or_default();
                anyhow!(
                    "{}{loc}: invalid kcl.yaml of stack {}: {e}",
                    path.display(),
                    self.label()
                )
            })?
        };
        Ok((path, settings))
    }
}

impl KclSettings {
    /// The files listed under `kcl_cli_configs.files` (or `file`).
    pub fn files(&self) -> Vec<String> {
        let Some(c) = &self.kcl_cli_configs else {
            return Vec::new();
        };
        c.files
            .iter()
            .chain(c.file.iter())
            .flatten()
            .cloned()
            .collect()
    }

    pub fn has_option(&self, key: &str) -> bool {
        self.kcl_options
            .iter()
            .flatten()
            .any(|o| o.key.as_str() == key)
    }
}

/// Replaces `${NAME}` with the environment variable NAME; Err(NAME) when it is unset.
fn expand_env(s: &str) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        let value = std::env::var(name).map_err(|_| name.to_string())?;
        out.push_str(&rest[..start]);
        out.push_str(&value);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

fn read_yaml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml_ng::from_str(&text).map_err(|e| {
        let loc = e
            .location()
            .map(|l| format!(":{}:{}", l.line(), l.column()))
            .unwrap_or_default();
        anyhow!("{}{loc}: {e}", path.display())
    })
}

/// Lexically removes `.` and `..`.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn absolute(p: &Path) -> PathBuf {
    normalize(&std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// True when `dir` is a stack folder.
pub fn is_stack_dir(dir: &Path) -> bool {
    dir.join(STACK_FILE).is_file()
}

/// Open the stack in `dir`: reads `stack.yaml`, finds the project above it and the Konfig root.
pub fn open_stack(dir: &Path) -> Result<Stack> {
    let dir = absolute(dir);
    if !dir.is_dir() {
        bail!(
            "unknown stack: {} does not exist (a stack is a folder with {STACK_FILE} inside a project folder with {PROJECT_FILE})",
            dir.display()
        );
    }
    if !is_stack_dir(&dir) {
        bail!(
            "unknown stack: {} is not a stack folder (no {STACK_FILE}; a stack is a folder with {STACK_FILE} inside a project folder with {PROJECT_FILE})",
            dir.display()
        );
    }
    let config: StackConfig = read_yaml(&dir.join(STACK_FILE))?;
    let project_dir = dir
        .ancestors()
        .skip(1)
        .find(|d| d.join(PROJECT_FILE).is_file())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            anyhow!(
                "unknown project: stack {:?} at {} is not inside a project (no {PROJECT_FILE} in any folder above it)",
                config.name,
                dir.display()
            )
        })?;
    let project: ProjectConfig = read_yaml(&project_dir.join(PROJECT_FILE))?;
    let root = project_dir
        .parent()
        .and_then(find_mod_root)
        .map(|r| absolute(&r))
        .unwrap_or_else(|| project_dir.clone());
    Ok(Stack {
        dir,
        config,
        project_dir,
        project,
        root,
    })
}

/// Every stack folder under `root` (sorted; `.kusion`, hidden folders and `vendor` skipped).
pub fn discover_stacks(root: &Path) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        if is_stack_dir(dir) {
            out.push(dir.to_path_buf());
        }
        let mut subdirs = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "vendor" || name == "target" {
                continue;
            }
            if e.file_type()?.is_dir() {
                subdirs.push(e.path());
            }
        }
        subdirs.sort();
        for d in subdirs {
            walk(&d, out)?;
        }
        Ok(())
    }
    let root = absolute(root);
    if !root.is_dir() {
        bail!("{} is not a folder", root.display());
    }
    let mut out = Vec::new();
    walk(&root, &mut out).with_context(|| format!("searching {} for stacks", root.display()))?;
    Ok(out)
}

/// The external packages of a stack (`-E name=path` equivalents): the dependencies of the
/// `kcl.mod` files of the stack, its project and the Konfig root (nearest wins), each resolved
/// by `kcl run`'s resolver (`kusion_kcl::pkg`): path dependencies transitively, registry and git
/// ones from the package cache, the `vendor/` folders of the package and of its path
/// dependencies (the Konfig root's), or a download, every one checked against `kcl.mod.lock`.
/// Compiling never writes the lock file (`kcl mod update` does).
pub fn externals(stack: &Stack) -> Result<Vec<(String, PathBuf)>> {
    let opts = kusion_kcl::pkg::ResolveOptions::default();
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for d in stack.dir.ancestors() {
        if d.join("kcl.mod").is_file() {
            let given: Vec<String> = out.iter().map(|(n, _)| n.clone()).collect();
            let deps = kusion_kcl::pkg::dependencies_of(d, &given, &opts)
                .map_err(|e| anyhow!("{e} (stack {})", stack.label()))?;
            for (name, path) in deps {
                if !out.iter().any(|(n, _)| *n == name) {
                    out.push((name, absolute(&path)));
                }
            }
        }
        if d == stack.root {
            break;
        }
    }
    Ok(out)
}
