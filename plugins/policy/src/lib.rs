//! `kcl-policy`: a policy plugin whose policies are written in KCL.
//!
//! A policy set is a folder of `.k` files declaring KCL `rule`s plus a `policy.toml` manifest
//! ([`set`]). The plugin is configured with the sets to run:
//!
//! ```json
//! {"sets": ["examples/policies/no-latest-tag",
//!           {"path": "/srv/policies/images", "severity": {"NoLatestTag": "warn"}}],
//!  "baseDir": "/src/kusion-rs"}
//! ```
//!
//! Relative set paths are resolved against `baseDir` (the kernel adds the directory of the file
//! the configuration came from). Every set is loaded and its KCL checked at `configure` time, so a
//! malformed policy is refused before any operation runs.
//!
//! Inside a rule, `resource` is the resource being checked (`{id, type, attributes, dependsOn,
//! extensions}`; `None` for `scope = "spec"` rules); for Kubernetes workloads `pod` is its pod
//! spec and `containers` every container (init containers first), else `{}` and `[]`. The whole
//! spec and the operation context (`operation`, `stack.name`, `plan`) are `option("spec")` and
//! `option("context")`, and the set's `[options]` are `option("<key>")`.

pub mod engine;
pub mod set;

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use kusion_sdk::policy::{Finding, PolicyPlugin, PolicyPluginInfo, Severity};
use kusion_sdk::{ABI_VERSION, PluginError, PluginResult, Value};
use serde::Deserialize;

pub use set::PolicySet;

/// The plugin's name (in `plugin.toml` and in `describe`).
pub const NAME: &str = "kcl-policy";

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("policy set `{set}`: {detail}")]
    Set { set: String, detail: String },
    #[error("policy set `{set}`, rule `{rule}`{}: {detail}", resource.as_ref().map(|r| format!(" on resource {r}")).unwrap_or_default())]
    Rule {
        set: String,
        rule: String,
        resource: Option<String>,
        detail: String,
    },
    #[error("configuration: {0}")]
    Config(String),
    #[error("input: {0}")]
    Input(String),
}

impl From<PolicyError> for PluginError {
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::Config(_) | PolicyError::Input(_) => PluginError::invalid(e.to_string()),
            _ => PluginError::internal(e.to_string()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum SetRef {
    Path(PathBuf),
    Detailed {
        path: PathBuf,
        #[serde(default)]
        severity: std::collections::BTreeMap<String, Severity>,
    },
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Config {
    #[serde(default)]
    sets: Vec<SetRef>,
    #[serde(default)]
    base_dir: Option<PathBuf>,
}

/// A configured set with the operator's severity overrides (by `Rule` or `set/Rule`).
#[derive(Debug, Clone)]
pub struct ConfiguredSet {
    pub set: PolicySet,
    pub severity: std::collections::BTreeMap<String, Severity>,
}

/// The plugin: the configured sets.
#[derive(Default)]
pub struct KclPolicy {
    sets: RwLock<Vec<ConfiguredSet>>,
}

impl KclPolicy {
    /// A plugin evaluating these set folders (tests and benchmarks).
    pub fn with_sets(dirs: &[&Path]) -> Result<KclPolicy, PolicyError> {
        let sets = dirs
            .iter()
            .map(|d| load_checked(d, Default::default()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KclPolicy {
            sets: RwLock::new(sets),
        })
    }

    /// How many rules the configured sets declare.
    pub fn rule_count(&self) -> usize {
        self.sets
            .read()
            .map(|s| s.iter().map(|c| c.set.rules.len()).sum())
            .unwrap_or(0)
    }

    /// Evaluate every configured set (the work behind [`PolicyPlugin::evaluate`]).
    pub fn evaluate_sets(
        &self,
        spec: &Value,
        context: &Value,
    ) -> Result<Vec<Finding>, PolicyError> {
        let sets = self
            .sets
            .read()
            .map_err(|_| PolicyError::Config("configuration lock poisoned".into()))?;
        if sets.is_empty() {
            return Ok(Vec::new());
        }
        let prepared = engine::prepare(spec, context)?;
        let mut findings = Vec::new();
        for configured in sets.iter() {
            let overrides = |rule: &str| configured.severity.get(rule).copied();
            findings.extend(engine::evaluate_set(
                &configured.set,
                &overrides,
                &prepared,
            )?);
        }
        Ok(findings)
    }
}

fn load_checked(
    dir: &Path,
    severity: std::collections::BTreeMap<String, Severity>,
) -> Result<ConfiguredSet, PolicyError> {
    let set = PolicySet::load(dir)?;
    for rule in severity.keys() {
        let bare = rule.rsplit('/').next().unwrap_or(rule);
        if !set.rules.iter().any(|r| r.name == bare) {
            return Err(PolicyError::Set {
                set: set.name.clone(),
                detail: format!("severity override names no rule `{rule}`"),
            });
        }
    }
    engine::check_set(&set)?;
    Ok(ConfiguredSet { set, severity })
}

impl PolicyPlugin for KclPolicy {
    fn describe(&self) -> PolicyPluginInfo {
        PolicyPluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: ABI_VERSION,
        }
    }

    fn configure(&self, config: &Value) -> PluginResult<()> {
        let config: Config = serde_json::from_value(config.clone())
            .map_err(|e| PolicyError::Config(format!("expected {{sets: [...], baseDir}}: {e}")))?;
        let base = config.base_dir.unwrap_or_default();
        let mut sets = Vec::new();
        for r in config.sets {
            let (path, severity) = match r {
                SetRef::Path(p) => (p, Default::default()),
                SetRef::Detailed { path, severity } => (path, severity),
            };
            let dir = if path.is_absolute() {
                path
            } else {
                base.join(path)
            };
            sets.push(load_checked(&dir, severity)?);
        }
        *self
            .sets
            .write()
            .map_err(|_| PluginError::internal("configuration lock poisoned"))? = sets;
        Ok(())
    }

    fn evaluate(&self, spec: &Value, context: &Value) -> PluginResult<Vec<Finding>> {
        Ok(self.evaluate_sets(spec, context)?)
    }
}

kusion_sdk::export_policy_plugin!(KclPolicy::default);

// Evaluation allocates and frees millions of small values; inside the host process this
// library's Rust code uses its own allocator, and glibc's is ~1.5x slower here than mimalloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
