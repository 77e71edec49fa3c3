//! Policy enforcement on the command line: build the [`PolicyGuard`] of a command from the
//! configuration (`[policy]` of the kusion config file, `KUSION_POLICY__*`, `--set policy.*`,
//! then the stack folder's `kusion.toml`) and `--policy-exempt`, and show the policies' verdict.
//! A blocked operation exits with [`crate::exit::POLICY`] (4).
//!
//! Hook for any other command about to change resources (e.g. `run`):
//! `crate::policy::guard(&cli.global, &workdir, &plugins, &exempt_flags)?.check(&spec, "run", None)?`
//! — the `PolicyBlocked` error it returns lists every finding and maps to exit code 4.

use std::path::Path;

use anyhow::{Context, Result};
use kusion_kernel::plugin::LoadedPlugins;
use kusion_kernel::policy::{
    Exemption, PolicyConfig, PolicyFinding, PolicyGuard, PolicyReport, StackInfo,
};
use kusion_sdk::policy::Severity;

use crate::UsageError;
use crate::args::Global;
use crate::render::Styles;

/// The stack's name: `name` in the folder's `stack.yaml` when there is one, else the folder name.
pub fn stack_info(workdir: &Path) -> StackInfo {
    let from_file = std::fs::read_to_string(workdir.join("stack.yaml"))
        .ok()
        .and_then(|t| kusion_kernel::spec::yaml_to_json(&t).ok())
        .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_string));
    let name = from_file.unwrap_or_else(|| {
        workdir
            .canonicalize()
            .unwrap_or_else(|_| workdir.to_path_buf())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    StackInfo {
        name,
        path: Some(workdir.to_path_buf()),
    }
}

/// Parse `--policy-exempt RULE=reason` flags (a missing reason is a usage error).
pub fn exemptions(flags: &[String]) -> Result<Vec<Exemption>> {
    flags
        .iter()
        .map(|f| {
            f.parse::<Exemption>()
                .map_err(|e| anyhow::Error::new(UsageError(e)))
        })
        .collect()
}

/// The guard for a command run in `workdir`.
pub fn guard(
    global: &Global,
    workdir: &Path,
    plugins: &LoadedPlugins,
    exempt: &[String],
) -> Result<PolicyGuard> {
    guard_from(
        crate::config::config_file(global.config.clone()).as_deref(),
        &global.set,
        workdir,
        plugins,
        exempt,
    )
}

/// The guard from a configuration file and `--set` flags (see [`guard`]).
pub fn guard_from(
    file: Option<&Path>,
    set: &[String],
    workdir: &Path,
    plugins: &LoadedPlugins,
    exempt: &[String],
) -> Result<PolicyGuard> {
    let mut config = PolicyConfig::load(file, &crate::config::set_overrides(set)?)?;
    if let Some(stack) = PolicyConfig::load_stack(workdir)? {
        config.merge(stack);
    }
    let exemptions = exemptions(exempt)?;
    Ok(PolicyGuard::new(
        &config,
        plugins,
        stack_info(workdir),
        exemptions,
    ))
}

fn finding_line(f: &PolicyFinding, styles: &Styles) -> String {
    let resource = f.finding.resource_id.as_deref().unwrap_or("(whole spec)");
    let label = match (&f.exempted, f.finding.severity) {
        (Some(_), _) => styles.yellow().apply_to("exempt").to_string(),
        (None, Severity::Deny) => styles.red().apply_to("deny").to_string(),
        (None, Severity::Warn) => styles.yellow().apply_to("warn").to_string(),
    };
    let mut line = format!(
        "  {label:<6} {}  {resource}: {}",
        f.finding.rule, f.finding.message
    );
    if let Some(reason) = &f.exempted {
        line.push_str(&format!(" (exempted: {reason})"));
    }
    line
}

/// The human rendering of a report (empty when no policy is configured).
pub fn render(report: &PolicyReport, styles: &Styles) -> String {
    if report.policies.is_empty() {
        return String::new();
    }
    let mut out = format!("Policies ({}):\n", report.policies.join(", "));
    if report.findings.is_empty() && report.failures.is_empty() {
        out.push_str("  no findings\n");
    }
    // Denials first: they are what stops the change.
    let mut findings: Vec<&PolicyFinding> = report.denials().collect();
    findings.extend(report.warnings());
    for f in findings {
        out.push_str(&finding_line(f, styles));
        out.push('\n');
    }
    for f in &report.failures {
        let label = if f.fail_open {
            styles.yellow().apply_to("error (fail-open)").to_string()
        } else {
            styles.red().apply_to("error").to_string()
        };
        out.push_str(&format!("  {label} policy `{}`: {}\n", f.policy, f.message));
    }
    if report.blocked {
        let denials = report.denials().count();
        let failed = report.failures.iter().filter(|f| !f.fail_open).count();
        // An exemption lets a rule's findings through; it cannot stand in for a policy that did
        // not run, so the advice differs for the two.
        let mut advice = Vec::new();
        if denials > 0 {
            advice.push(format!(
                "{denials} denied finding(s): fix them, or exempt a rule with --policy-exempt RULE=\"reason\""
            ));
        }
        if failed > 0 {
            advice.push(format!(
                "{failed} policy failure(s), not findings (--policy-exempt does not apply): make the \
                 policy run (`kusionctl plugin list` shows why a plugin is missing or refused), or set \
                 `fail_open = true` under [policy.plugins.<name>] to only warn"
            ));
        }
        out.push_str(&format!(
            "{}\n",
            styles
                .red()
                .apply_to(format!("Blocked by policy: {}.", advice.join("; ")))
        ));
    }
    out
}

/// The report as JSON (for `-o json` outputs).
pub fn to_json(report: &PolicyReport) -> Result<serde_json::Value> {
    serde_json::to_value(report).context("encoding the policy report")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kusion_kernel::policy::PolicyFailure;

    #[test]
    fn a_policy_that_did_not_run_is_not_offered_an_exemption() {
        let report = PolicyReport {
            policies: vec!["kcl-policy".into()],
            findings: vec![],
            failures: vec![PolicyFailure {
                policy: "kcl-policy".into(),
                message: "the plugin was refused: not built".into(),
                fail_open: false,
            }],
            blocked: true,
        };
        let text = render(&report, &Styles { color: false });
        assert!(text.contains("not findings"), "{text}");
        assert!(text.contains("--policy-exempt does not apply"), "{text}");
        assert!(!text.contains("exempt a rule"), "{text}");
        assert!(text.contains("fail_open = true"), "{text}");
    }
}
