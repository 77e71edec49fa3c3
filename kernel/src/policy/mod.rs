//! Policy enforcement: every configured policy plugin evaluates the spec (and the plan) before
//! anything changes. `deny` findings block, `warn` findings are reported; a policy that errors,
//! crashes or runs past its time limit blocks too (fail closed) unless configured `fail_open`.
//!
//! Configuration (`[policy]` in `~/.kusion/config.toml` / `$KUSION_CONFIG`, `KUSION_POLICY__*`
//! variables, `--set policy.<key>=<value>`, then the stack folder's `kusion.toml`, which wins):
//!
//! ```toml
//! [policy]
//! timeout = "30s"          # per plugin and call (default 60s)
//! fail_open = false        # default for every plugin
//!
//! [policy.plugins.kcl-policy]          # run this policy plugin (its name in plugin.toml)
//! config = { sets = ["policies/no-latest-tag"] }   # handed to configure() before each run;
//!                                                   # `baseDir` = this file's folder is added
//! timeout = "10s"
//!
//! [policy.plugins.deployment-limits]   # a WASM policy plugin, no configuration
//! fail_open = true                     # its errors and time-outs only warn
//! ```
//!
//! Only plugins named under `policy.plugins` run; a named plugin that is missing or was refused
//! by the plugin host is an error of that policy (so it blocks unless `fail_open`).
//!
//! Entry points: [`PolicyGuard::check`] (any caller that is about to change something, e.g. the
//! `run` command), [`PolicyGuard::preview`] and [`guarded_apply`] (apply and destroy).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kusion_sdk::Value;
use kusion_sdk::policy::{Finding, PolicyPlugin, Severity};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::execute::{ApplyOptions, Event};
use crate::operation::{self, Applied, OperationError, Stack};
use crate::plan::{PlanOptions, PlanView};
use crate::plugin::{LoadedPlugins, Status};
use crate::spec::Spec;

/// Default time limit of one policy plugin call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the `[policy]` configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyConfigError {
    /// A value is invalid.
    #[error("policy configuration ({source_name}): {detail}")]
    Invalid {
        /// Where the configuration came from.
        source_name: String,
        /// What is wrong.
        detail: String,
    },
}

/// The operator's settings for one policy plugin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicyPluginSettings {
    /// Handed to the plugin's `configure` before each evaluation (objects get `baseDir`).
    pub config: Option<Value>,
    /// Overrides `policy.timeout` (`"10s"`, `"2m"`).
    pub timeout: Option<String>,
    /// Overrides `policy.fail_open`.
    pub fail_open: Option<bool>,
    /// `false` skips this plugin (e.g. a stack turning off a global policy).
    pub enabled: Option<bool>,
    /// Where this section was read from (for `baseDir`); not part of the file format.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

/// The `[policy]` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicyConfig {
    /// How long one plugin may take per call (`"30s"`; default 60 s); a plugin's own `timeout` wins.
    pub timeout: Option<String>,
    /// Let an operation go on when a plugin fails or times out (default: fail closed).
    pub fail_open: bool,
    /// Plugin settings by plugin name.
    pub plugins: BTreeMap<String, PolicyPluginSettings>,
}

fn parse_duration(what: &str, s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{what}: {s:?} is not a duration: {e}"))
}

impl PolicyConfig {
    /// Layer the kusion configuration file, `KUSION_POLICY__*` and `--set policy.*` overrides.
    pub fn load(
        file: Option<&Path>,
        overrides: &[(String, String)],
    ) -> Result<PolicyConfig, PolicyConfigError> {
        let err = |detail: String| PolicyConfigError::Invalid {
            source_name: crate::plugin::config::source_name(file),
            detail,
        };
        let mut config: PolicyConfig = crate::plugin::config::layered_section(
            file,
            "policy",
            &[],
            overrides.iter().filter(|(k, _)| k.starts_with("policy.")),
        )
        .map_err(err)?;
        let base = file.and_then(Path::parent).map(Path::to_path_buf);
        for s in config.plugins.values_mut() {
            s.base_dir = base.clone();
        }
        config.validate().map_err(err)?;
        Ok(config)
    }

    /// The `[policy]` section of a stack folder's `kusion.toml`, if the file exists.
    pub fn load_stack(dir: &Path) -> Result<Option<PolicyConfig>, PolicyConfigError> {
        let path = dir.join("kusion.toml");
        if !path.is_file() {
            return Ok(None);
        }
        let err = |detail: String| PolicyConfigError::Invalid {
            source_name: path.display().to_string(),
            detail,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| err(e.to_string()))?;
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            policy: Option<PolicyConfig>,
        }
        let file: File = toml::from_str(&text).map_err(|e| {
            let at = e.span().map_or((1, 1), |s| {
                let before = &text[..s.start.min(text.len())];
                (
                    before.matches('\n').count() + 1,
                    before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1,
                )
            });
            err(format!("{}:{}: {}", at.0, at.1, e.message()))
        })?;
        let Some(mut config) = file.policy else {
            return Ok(None);
        };
        for s in config.plugins.values_mut() {
            s.base_dir = Some(dir.to_path_buf());
        }
        config.validate().map_err(err)?;
        Ok(Some(config))
    }

    fn validate(&self) -> Result<(), String> {
        if let Some(t) = &self.timeout {
            parse_duration("policy.timeout", t)?;
        }
        for (name, s) in &self.plugins {
            if let Some(t) = &s.timeout {
                parse_duration(&format!("policy.plugins.{name}.timeout"), t)?;
            }
        }
        Ok(())
    }

    /// Lay a stack's section over this one: its plugin entries replace same-named ones.
    pub fn merge(&mut self, stack: PolicyConfig) {
        if stack.timeout.is_some() {
            self.timeout = stack.timeout;
        }
        self.fail_open |= stack.fail_open;
        for (name, s) in stack.plugins {
            self.plugins.insert(name, s);
        }
    }
}

/// `--policy-exempt RULE=reason`: findings of `RULE` (`set/Rule`, or a bare `Rule`) do not block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exemption {
    /// The rule (`set/Rule` or `Rule`).
    pub rule: String,
    /// Why it is exempted (recorded with the release).
    pub reason: String,
}

impl std::str::FromStr for Exemption {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (rule, reason) = s.split_once('=').ok_or_else(|| {
            format!("--policy-exempt {s:?}: expected RULE=REASON (a reason is required)")
        })?;
        let (rule, reason) = (rule.trim(), reason.trim());
        if rule.is_empty() {
            return Err(format!("--policy-exempt {s:?}: the rule is empty"));
        }
        if reason.is_empty() {
            return Err(format!(
                "--policy-exempt {rule}: a reason is required (--policy-exempt {rule}=\"why\")"
            ));
        }
        Ok(Exemption {
            rule: rule.to_string(),
            reason: reason.to_string(),
        })
    }
}

impl Exemption {
    fn covers(&self, rule: &str) -> bool {
        self.rule == rule || rule.rsplit('/').next() == Some(self.rule.as_str())
    }

    /// How the exemption is written into the release history.
    pub fn note(&self) -> String {
        format!("policy-exempt {}: {}", self.rule, self.reason)
    }
}

/// A finding with the plugin that reported it and, if exempted, why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyFinding {
    /// The plugin that found it.
    pub policy: String,
    /// What it found.
    #[serde(flatten)]
    pub finding: Finding,
    /// The exemption's reason, when one lets this finding through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exempted: Option<String>,
}

/// A policy that could not give an answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyFailure {
    /// The plugin.
    pub policy: String,
    /// What went wrong.
    pub message: String,
    /// Configured to let the operation go on anyway.
    pub fail_open: bool,
}

/// Everything the policies said about one operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    /// The plugins that were asked.
    pub policies: Vec<String>,
    /// Everything found.
    pub findings: Vec<PolicyFinding>,
    /// Plugins that failed or timed out.
    pub failures: Vec<PolicyFailure>,
    /// Whether the operation must stop (a deny not exempted, or a failure when failing closed).
    pub blocked: bool,
}

impl PolicyReport {
    /// Deny findings that are not exempted.
    pub fn denials(&self) -> impl Iterator<Item = &PolicyFinding> {
        self.findings
            .iter()
            .filter(|f| f.finding.severity == Severity::Deny && f.exempted.is_none())
    }

    /// The findings that warn (do not block).
    pub fn warnings(&self) -> impl Iterator<Item = &PolicyFinding> {
        self.findings
            .iter()
            .filter(|f| f.finding.severity == Severity::Warn || f.exempted.is_some())
    }

    fn settle(&mut self) {
        self.blocked =
            self.denials().next().is_some() || self.failures.iter().any(|f| !f.fail_open);
    }
}

/// The operation was stopped by policy.
#[derive(Debug, thiserror::Error)]
#[error("{}", blocked_message(.0))]
pub struct PolicyBlocked(pub PolicyReport);

fn blocked_message(report: &PolicyReport) -> String {
    let mut lines = vec!["blocked by policy:".to_string()];
    for f in report.denials() {
        lines.push(format!(
            "  deny {} {}: {}",
            f.finding.rule,
            f.finding.resource_id.as_deref().unwrap_or("(spec)"),
            f.finding.message
        ));
    }
    for f in report.failures.iter().filter(|f| !f.fail_open) {
        lines.push(format!(
            "  policy `{}` failed: {} (not a finding, so --policy-exempt does not apply: fix the \
             plugin, or make the policy fail_open)",
            f.policy, f.message
        ));
    }
    lines.join("\n")
}

/// What a policy is told besides the spec.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyContext<'a> {
    /// `preview`, `apply`, `destroy`, `run`.
    pub operation: &'a str,
    /// The stack operated on.
    pub stack: StackInfo,
    /// The plan, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<&'a PlanView>,
}

/// The stack a policy is evaluated for.
#[derive(Debug, Clone, Serialize)]
pub struct StackInfo {
    /// Its name.
    pub name: String,
    /// Its folder, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

struct Configured {
    name: String,
    plugin: Result<Arc<dyn PolicyPlugin>, String>,
    config: Option<Value>,
    timeout: Duration,
    fail_open: bool,
}

/// The configured policy plugins of one operation, with the exemptions given for it.
pub struct PolicyGuard {
    configured: Vec<Configured>,
    /// The stack it guards.
    pub stack: StackInfo,
    /// Findings that do not block.
    pub exemptions: Vec<Exemption>,
}

impl PolicyGuard {
    /// Match the configuration with what the plugin host loaded.
    pub fn new(
        config: &PolicyConfig,
        loaded: &LoadedPlugins,
        stack: StackInfo,
        exemptions: Vec<Exemption>,
    ) -> PolicyGuard {
        let default_timeout = config
            .timeout
            .as_deref()
            .and_then(|t| humantime::parse_duration(t).ok())
            .unwrap_or(DEFAULT_TIMEOUT);
        let configured = config
            .plugins
            .iter()
            .filter(|(_, s)| s.enabled != Some(false))
            .map(|(name, s)| {
                let plugin = loaded.policies.get(name).cloned().ok_or_else(|| {
                    match loaded.entries.iter().find(|e| &e.name == name) {
                        Some(e) => match &e.status {
                            Status::Refused(why) => format!("the plugin was refused: {why}"),
                            Status::Disabled(why) => format!("the plugin is disabled: {why}"),
                            Status::Loaded => "the plugin is not a policy plugin".to_string(),
                        },
                        None => {
                            "no policy plugin of this name was found (see `kusionctl plugin list`)"
                                .to_string()
                        }
                    }
                });
                let plugin_config = s.config.clone().map(|mut c| {
                    if let (Some(obj), Some(base)) = (c.as_object_mut(), &s.base_dir) {
                        obj.entry("baseDir")
                            .or_insert_with(|| Value::String(base.display().to_string()));
                    }
                    c
                });
                Configured {
                    name: name.clone(),
                    plugin,
                    config: plugin_config,
                    timeout: s
                        .timeout
                        .as_deref()
                        .and_then(|t| humantime::parse_duration(t).ok())
                        .unwrap_or(default_timeout),
                    fail_open: s.fail_open.unwrap_or(config.fail_open),
                }
            })
            .collect();
        PolicyGuard {
            configured,
            stack,
            exemptions,
        }
    }

    /// A guard over explicit plugins (tests, embedders).
    pub fn with_plugins(
        plugins: Vec<(String, Arc<dyn PolicyPlugin>, Duration, bool)>,
        stack: StackInfo,
        exemptions: Vec<Exemption>,
    ) -> PolicyGuard {
        PolicyGuard {
            configured: plugins
                .into_iter()
                .map(|(name, plugin, timeout, fail_open)| Configured {
                    name,
                    plugin: Ok(plugin),
                    config: None,
                    timeout,
                    fail_open,
                })
                .collect(),
            stack,
            exemptions,
        }
    }

    /// Whether no policy plugin is configured.
    pub fn is_empty(&self) -> bool {
        self.configured.is_empty()
    }

    /// Release notes recording the exemptions of this operation.
    pub fn notes(&self) -> Vec<String> {
        self.exemptions.iter().map(Exemption::note).collect()
    }

    /// Run every configured policy over `spec` (all at once, each on its own thread with its time
    /// limit) and settle the verdict with the exemptions applied. Never fails: problems of a
    /// policy are [`PolicyFailure`]s naming it.
    pub fn evaluate(&self, spec: &Spec, operation: &str, plan: Option<&PlanView>) -> PolicyReport {
        let mut report = PolicyReport {
            policies: self.configured.iter().map(|c| c.name.clone()).collect(),
            ..Default::default()
        };
        if self.configured.is_empty() {
            return report;
        }
        let context = PolicyContext {
            operation,
            stack: self.stack.clone(),
            plan,
        };
        let (spec_json, context_json) =
            match (serde_json::to_value(spec), serde_json::to_value(&context)) {
                (Ok(s), Ok(c)) => (Arc::new(s), Arc::new(c)),
                (Err(e), _) | (_, Err(e)) => {
                    for c in &self.configured {
                        report.failures.push(PolicyFailure {
                            policy: c.name.clone(),
                            message: format!("cannot encode the spec: {e}"),
                            fail_open: c.fail_open,
                        });
                    }
                    report.settle();
                    return report;
                }
            };
        type Answer = Result<Vec<Finding>, String>;
        let mut pending: Vec<(&Configured, std::sync::mpsc::Receiver<Answer>, Instant)> =
            Vec::new();
        for c in &self.configured {
            let plugin = match &c.plugin {
                Ok(p) => p.clone(),
                Err(why) => {
                    report.failures.push(PolicyFailure {
                        policy: c.name.clone(),
                        message: why.clone(),
                        fail_open: c.fail_open,
                    });
                    continue;
                }
            };
            let (tx, rx) = std::sync::mpsc::channel::<Answer>();
            let (spec, ctx, config) = (spec_json.clone(), context_json.clone(), c.config.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("policy-{}", c.name))
                .spawn(move || {
                    let run = std::panic::AssertUnwindSafe(|| -> Answer {
                        if let Some(config) = &config {
                            plugin
                                .configure(config)
                                .map_err(|e| format!("configure failed: {}", e.message))?;
                        }
                        plugin.evaluate(&spec, &ctx).map_err(|e| e.message)
                    });
                    let answer = std::panic::catch_unwind(run).unwrap_or_else(|p| {
                        let what = p
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        Err(format!("the plugin panicked: {what}"))
                    });
                    let _ = tx.send(answer);
                });
            match spawned {
                Ok(_) => pending.push((c, rx, Instant::now())),
                Err(e) => report.failures.push(PolicyFailure {
                    policy: c.name.clone(),
                    message: format!("cannot start its thread: {e}"),
                    fail_open: c.fail_open,
                }),
            }
        }
        for (c, rx, started) in pending {
            let left = c.timeout.saturating_sub(started.elapsed());
            match rx.recv_timeout(left) {
                Ok(Ok(findings)) => report.findings.extend(findings.into_iter().map(|f| {
                    let exempted = self
                        .exemptions
                        .iter()
                        .find(|e| e.covers(&f.rule))
                        .map(|e| e.reason.clone());
                    PolicyFinding {
                        policy: c.name.clone(),
                        finding: f,
                        exempted,
                    }
                })),
                Ok(Err(message)) => report.failures.push(PolicyFailure {
                    policy: c.name.clone(),
                    message,
                    fail_open: c.fail_open,
                }),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    // The thread is left behind: a plugin call cannot be interrupted safely.
                    tracing::error!(policy = %c.name, "policy timed out");
                    report.failures.push(PolicyFailure {
                        policy: c.name.clone(),
                        message: format!(
                            "timed out after {}",
                            humantime::format_duration(c.timeout)
                        ),
                        fail_open: c.fail_open,
                    });
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    report.failures.push(PolicyFailure {
                        policy: c.name.clone(),
                        message: "the plugin crashed without an answer".into(),
                        fail_open: c.fail_open,
                    });
                }
            }
        }
        report.settle();
        report
    }

    /// The hook for anything about to change resources (e.g. `kusionctl run`): evaluate and
    /// refuse when blocked.
    pub fn check(
        &self,
        spec: &Spec,
        operation: &str,
        plan: Option<&PlanView>,
    ) -> Result<PolicyReport, PolicyBlocked> {
        let report = self.evaluate(spec, operation, plan);
        if report.blocked {
            Err(PolicyBlocked(report))
        } else {
            Ok(report)
        }
    }

    /// Preview with the policies' verdict next to the plan.
    pub fn preview(
        &self,
        spec: &Spec,
        stack: &Stack,
        options: &PlanOptions,
        cancel: Arc<AtomicBool>,
    ) -> Result<(PlanView, PolicyReport), OperationError> {
        let plan = operation::preview(spec, stack, options, cancel)?;
        let report = self.evaluate(spec, "preview", Some(&plan));
        Ok((plan, report))
    }
}

/// What a guarded apply or destroy came to.
#[derive(Debug)]
pub enum Guarded {
    /// Policies blocked it after planning; nothing changed and no release was recorded.
    Blocked {
        /// The plan.
        plan: PlanView,
        /// What the policies said.
        report: PolicyReport,
    },
    /// Policies let it through (the report holds warnings and exempted findings).
    Ran {
        /// What the operation did.
        applied: Applied,
        /// What the policies said (None when none is configured).
        report: Option<PolicyReport>,
    },
}

/// [`operation::apply`] with the policies evaluated between planning and the first change
/// (under the stack's lease). `confirm` sees the plan and the policies' report; exemptions are
/// recorded in the release's notes. `rollback_of` names the release a rollback restores.
#[allow(clippy::too_many_arguments)]
pub fn guarded_apply(
    guard: &PolicyGuard,
    spec: &Spec,
    stack: &Stack,
    operation_name: &str,
    plan_options: &PlanOptions,
    apply_options: &ApplyOptions,
    rollback_of: Option<u64>,
    confirm: impl FnOnce(&PlanView, Option<&PolicyReport>) -> bool,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Arc<AtomicBool>,
) -> Result<Guarded, OperationError> {
    let verdict: Mutex<Option<PolicyReport>> = Mutex::new(None);
    let applied = operation::apply(
        spec,
        stack,
        operation_name,
        plan_options,
        apply_options,
        operation::ReleaseInfo {
            notes: guard.notes(),
            rollback_of,
        },
        |plan| {
            if guard.is_empty() {
                return confirm(plan, None);
            }
            let report = guard.evaluate(spec, operation_name, Some(plan));
            let blocked = report.blocked;
            let go = !blocked && confirm(plan, Some(&report));
            if let Ok(mut v) = verdict.lock() {
                *v = Some(report);
            }
            go
        },
        events,
        cancel,
    )?;
    let report = verdict.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(match (applied, report) {
        (Applied::Declined(plan), Some(report)) if report.blocked => {
            Guarded::Blocked { plan, report }
        }
        (applied, report) => Guarded::Ran { applied, report },
    })
}

#[cfg(test)]
mod tests;
