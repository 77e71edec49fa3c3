//! Policy sets: a folder of `.k` files plus a `policy.toml` manifest.
//!
//! ```toml
//! name = "k8s-images"
//! version = "0.1.0"
//! description = "Images come from an allowed registry and are pinned"
//! stacks = ["*"]                      # stack-name globs this set applies to (default: all)
//!
//! [options]                           # handed to the KCL program as option("<key>")
//! registries = ["ghcr.io/acme/"]
//!
//! [rules.NoLatestTag]                 # one table per KCL `rule` of the folder
//! severity = "deny"                   # deny | warn
//! types = ["Kubernetes"]              # resource `type` globs (default: all)
//! kinds = ["Deployment", "Pod"]       # Kubernetes kind / Terraform resourceType globs
//! stacks = ["prod*"]                  # narrows the set's `stacks` for this rule
//! scope = "resource"                  # resource (once per matching resource) | spec (once)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use kusion_sdk::policy::Severity;
use serde::Deserialize;

use crate::PolicyError;

/// The manifest file of a policy set.
pub const SET_MANIFEST: &str = "policy.toml";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The rule runs once per matching resource with `resource` bound.
    #[default]
    Resource,
    /// The rule runs once for the whole spec (`resource` is `None`).
    Spec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    severity: Severity,
    #[serde(default)]
    types: Vec<String>,
    #[serde(default)]
    kinds: Vec<String>,
    #[serde(default)]
    stacks: Vec<String>,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: String,
    version: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    stacks: Vec<String>,
    #[serde(default)]
    options: BTreeMap<String, serde_json::Value>,
    rules: indexmap_free::OrderedRules,
}

/// `[rules.X]` tables in the order the TOML reader hands them out (rules run in that order).
mod indexmap_free {
    use super::RawRule;
    use serde::de::{Deserializer, MapAccess, Visitor};

    #[derive(Debug, Clone, Default)]
    pub struct OrderedRules(pub Vec<(String, RawRule)>);

    impl<'de> serde::Deserialize<'de> for OrderedRules {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = OrderedRules;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a table of rules")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<OrderedRules, A::Error> {
                    let mut out = Vec::new();
                    while let Some((k, v)) = m.next_entry::<String, RawRule>()? {
                        out.push((k, v));
                    }
                    Ok(OrderedRules(out))
                }
            }
            d.deserialize_map(V)
        }
    }
}

/// Glob patterns; empty means "everything".
#[derive(Debug, Clone)]
pub struct Patterns {
    set: Option<GlobSet>,
    pub raw: Vec<String>,
}

impl Patterns {
    fn new(
        raw: &[String],
        what: &str,
        bad: &dyn Fn(String) -> PolicyError,
    ) -> Result<Self, PolicyError> {
        if raw.is_empty() {
            return Ok(Patterns {
                set: None,
                raw: Vec::new(),
            });
        }
        let mut b = GlobSetBuilder::new();
        for p in raw {
            b.add(Glob::new(p).map_err(|e| bad(format!("{what}: bad pattern {p:?}: {e}")))?);
        }
        Ok(Patterns {
            set: Some(b.build().map_err(|e| bad(format!("{what}: {e}")))?),
            raw: raw.to_vec(),
        })
    }

    pub fn matches(&self, s: &str) -> bool {
        self.set.as_ref().is_none_or(|g| g.is_match(s))
    }

    pub fn is_all(&self) -> bool {
        self.set.is_none()
    }
}

/// One rule of a set, as the manifest describes it.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The KCL rule name.
    pub name: String,
    pub severity: Severity,
    pub types: Patterns,
    pub kinds: Patterns,
    pub stacks: Patterns,
    pub scope: Scope,
    pub description: Option<String>,
}

/// A loaded policy set.
#[derive(Debug, Clone)]
pub struct PolicySet {
    pub name: String,
    pub version: String,
    pub description: Option<String>,
    pub dir: PathBuf,
    pub stacks: Patterns,
    pub options: BTreeMap<String, serde_json::Value>,
    pub rules: Vec<Rule>,
    /// The `.k` files of the folder (test files `*_test.k` excluded), sorted.
    pub files: Vec<PathBuf>,
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

impl PolicySet {
    /// Read a policy set folder: its manifest and the list of its `.k` files. The KCL itself is
    /// checked by [`crate::engine::check_set`].
    pub fn load(dir: &Path) -> Result<PolicySet, PolicyError> {
        let manifest_path = dir.join(SET_MANIFEST);
        let fallback = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        let text = std::fs::read_to_string(&manifest_path).map_err(|e| PolicyError::Set {
            set: fallback.clone(),
            detail: format!("{}: cannot read: {e}", manifest_path.display()),
        })?;
        let raw: RawManifest = toml::from_str(&text).map_err(|e| {
            let (line, col) = e.span().map_or((1, 1), |s| line_col(&text, s.start));
            PolicyError::Set {
                set: fallback.clone(),
                detail: format!("{}:{line}:{col}: {}", manifest_path.display(), e.message()),
            }
        })?;
        let set_name = raw.name.clone();
        let bad = |detail: String| PolicyError::Set {
            set: set_name.clone(),
            detail: format!("{}: {detail}", manifest_path.display()),
        };
        if raw.name.is_empty()
            || !raw
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(bad(format!(
                "`name` must be non-empty letters, digits, `-` or `_` (got {:?})",
                raw.name
            )));
        }
        if raw.rules.0.is_empty() {
            return Err(bad("declares no `[rules.<Name>]`".into()));
        }
        let stacks = Patterns::new(&raw.stacks, "stacks", &bad)?;
        let mut rules = Vec::new();
        for (name, r) in raw.rules.0 {
            let what = |field: &str| format!("rules.{name}.{field}");
            rules.push(Rule {
                types: Patterns::new(&r.types, &what("types"), &bad)?,
                kinds: Patterns::new(&r.kinds, &what("kinds"), &bad)?,
                stacks: Patterns::new(&r.stacks, &what("stacks"), &bad)?,
                severity: r.severity,
                scope: r.scope,
                description: r.description,
                name,
            });
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| bad(format!("cannot list {}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|x| x == "k")
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().ends_with("_test.k"))
            })
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(bad(format!("no `.k` files in {}", dir.display())));
        }
        Ok(PolicySet {
            name: raw.name,
            version: raw.version,
            description: raw.description,
            dir: dir.to_path_buf(),
            stacks,
            options: raw.options,
            rules,
            files,
        })
    }
}
