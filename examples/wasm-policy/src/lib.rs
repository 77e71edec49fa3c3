//! Example WASM policy plugin with two rules over Kubernetes `Deployment`s: every container sets
//! CPU and memory limits ([`RULE`]), and no image is unpinned ([`LATEST_RULE`]). It serves the
//! same interface as the KCL policy plugin (findings with rule, severity, resource ID, message;
//! per-rule severity from the configuration) from inside the host's WASM sandbox. Built for
//! `wasm32-wasip2` by `scripts/build-wasm-plugins.sh`; the rules are plain Rust, unit-tested on
//! the host.

use std::collections::BTreeMap;
use std::sync::RwLock;

use kusion_sdk::policy::{Finding, PolicyPlugin, PolicyPluginInfo, Severity};
use kusion_sdk::{ABI_VERSION, PluginError, PluginResult, Value};

pub const RULE: &str = "deployment-resource-limits";
pub const LATEST_RULE: &str = "deployment-pinned-images";
pub const RULES: [&str; 2] = [RULE, LATEST_RULE];

/// Per-rule severities; a rule switched `off` is not evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    On(Severity),
    Off,
}

pub struct DeploymentLimits {
    levels: RwLock<BTreeMap<&'static str, Level>>,
}

impl Default for DeploymentLimits {
    fn default() -> Self {
        DeploymentLimits {
            levels: RwLock::new(
                RULES
                    .iter()
                    .map(|r| (*r, Level::On(Severity::Deny)))
                    .collect(),
            ),
        }
    }
}

fn parse_level(rule: &str, v: &Value) -> PluginResult<Level> {
    if v == "off" {
        return Ok(Level::Off);
    }
    serde_json::from_value(v.clone())
        .map(Level::On)
        .map_err(|e| {
            PluginError::invalid(format!(
                "severity of {rule}: must be \"deny\", \"warn\" or \"off\": {e}"
            ))
        })
}

/// Images without a tag, tagged `latest`, and not pinned by digest.
fn unpinned_images(resource: &Value) -> Vec<String> {
    let containers = resource["attributes"]["spec"]["template"]["spec"]["containers"].as_array();
    containers
        .into_iter()
        .flatten()
        .filter_map(|c| c["image"].as_str())
        .filter(|image| {
            let name = image.rsplit('/').next().unwrap_or(image);
            !image.contains('@') && name.rsplit_once(':').is_none_or(|(_, tag)| tag == "latest")
        })
        .map(str::to_string)
        .collect()
}

/// The Kubernetes manifest of a resource: kusion keeps it in `attributes`.
fn is_deployment(resource: &Value) -> bool {
    let attrs = &resource["attributes"];
    resource["type"] == "Kubernetes" && attrs["kind"] == "Deployment"
}

/// Containers of a Deployment that lack a cpu or memory limit, with what is missing.
fn missing_limits(resource: &Value) -> Vec<(String, Vec<&'static str>)> {
    let containers = resource["attributes"]["spec"]["template"]["spec"]["containers"].as_array();
    let mut out = Vec::new();
    for (i, c) in containers.into_iter().flatten().enumerate() {
        let limits = &c["resources"]["limits"];
        let missing: Vec<&'static str> = ["cpu", "memory"]
            .into_iter()
            .filter(|k| limits.get(*k).is_none_or(Value::is_null))
            .collect();
        if !missing.is_empty() {
            let name = c["name"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("#{i}"));
            out.push((name, missing));
        }
    }
    out
}

impl PolicyPlugin for DeploymentLimits {
    fn describe(&self) -> PolicyPluginInfo {
        PolicyPluginInfo {
            name: "deployment-limits".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: ABI_VERSION,
        }
    }

    /// `{"severity": "warn"}` sets every rule; `{"severity": {"<rule>": "warn" | "deny" |
    /// "off"}}` sets rules one by one (as the KCL policy plugin's per-rule overrides do).
    fn configure(&self, config: &Value) -> PluginResult<()> {
        let Some(sev) = config.get("severity") else {
            return Ok(());
        };
        let mut levels = self
            .levels
            .read()
            .map_err(|_| PluginError::internal("poisoned"))?
            .clone();
        match sev.as_object() {
            Some(per_rule) => {
                for (rule, v) in per_rule {
                    let key = RULES.iter().find(|r| *r == rule).ok_or_else(|| {
                        PluginError::invalid(format!(
                            "no rule `{rule}` (rules: {})",
                            RULES.join(", ")
                        ))
                    })?;
                    levels.insert(key, parse_level(rule, v)?);
                }
            }
            None => {
                let level = parse_level("every rule", sev)?;
                levels.values_mut().for_each(|l| *l = level);
            }
        }
        *self
            .levels
            .write()
            .map_err(|_| PluginError::internal("poisoned"))? = levels;
        Ok(())
    }

    fn evaluate(&self, spec: &Value, _context: &Value) -> PluginResult<Vec<Finding>> {
        let levels = self
            .levels
            .read()
            .map_err(|_| PluginError::internal("poisoned"))?
            .clone();
        let resources = spec["resources"]
            .as_array()
            .ok_or_else(|| PluginError::invalid("spec has no `resources` array"))?;
        let mut findings = Vec::new();
        for resource in resources.iter().filter(|r| is_deployment(r)) {
            let id = resource["id"].as_str().map(str::to_string);
            if let Some(Level::On(severity)) = levels.get(RULE) {
                for (container, missing) in missing_limits(resource) {
                    findings.push(Finding {
                        rule: RULE.into(),
                        severity: *severity,
                        resource_id: id.clone(),
                        message: format!(
                            "container `{container}` sets no {} limit",
                            missing.join(" or ")
                        ),
                    });
                }
            }
            if let Some(Level::On(severity)) = levels.get(LATEST_RULE) {
                let images = unpinned_images(resource);
                if !images.is_empty() {
                    findings.push(Finding {
                        rule: LATEST_RULE.into(),
                        severity: *severity,
                        resource_id: id,
                        message: format!("image(s) {} use :latest or no tag", images.join(", ")),
                    });
                }
            }
        }
        Ok(findings)
    }
}

#[cfg(target_arch = "wasm32")]
mod component {
    use std::sync::OnceLock;

    use kusion_sdk::abi::wire::guest;

    wit_bindgen::generate!({ path: "../../sdk/wit", world: "policy-plugin" });

    fn plugin() -> &'static super::DeploymentLimits {
        static PLUGIN: OnceLock<super::DeploymentLimits> = OnceLock::new();
        PLUGIN.get_or_init(Default::default)
    }

    struct Export;

    impl exports::kusion::plugin::policy::Guest for Export {
        fn describe() -> String {
            guest::policy_describe(plugin())
        }
        fn configure(config: String) -> Result<(), String> {
            guest::policy_configure(plugin(), &config)
        }
        fn evaluate(spec: String, context: String) -> Result<String, String> {
            guest::policy_evaluate(plugin(), &spec, &context)
        }
    }

    export!(Export);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(id: &str, limits: Value) -> Value {
        json!({"id": id, "type": "Kubernetes", "attributes": {"kind": "Deployment", "spec": {"template": {"spec": {
            "containers": [{"name": "app", "resources": {"limits": limits}}]}}}}})
    }

    #[test]
    fn flags_missing_limits_only() {
        let spec = json!({"resources": [
            deployment("ok", json!({"cpu": "1", "memory": "1Gi"})),
            deployment("bad", json!({"cpu": "1"})),
            {"id": "svc", "type": "Kubernetes", "attributes": {"kind": "Service"}},
        ]});
        let findings = DeploymentLimits::default()
            .evaluate(&spec, &Value::Null)
            .unwrap();
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].resource_id.as_deref(), Some("bad"));
        assert_eq!(findings[0].severity, Severity::Deny);
        assert!(
            findings[0].message.contains("memory"),
            "{}",
            findings[0].message
        );
    }

    #[test]
    fn severity_is_configurable() {
        let p = DeploymentLimits::default();
        p.configure(&json!({"severity": "warn"})).unwrap();
        let spec = json!({"resources": [deployment("bad", json!({}))]});
        assert_eq!(
            p.evaluate(&spec, &Value::Null).unwrap()[0].severity,
            Severity::Warn
        );
        assert!(p.configure(&json!({"severity": "loud"})).is_err());
    }

    #[test]
    fn pinned_images_rule_and_per_rule_levels() {
        let mut latest = deployment("latest", json!({"cpu": "1", "memory": "1Gi"}));
        latest["attributes"]["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("registry:5000/app:latest");
        let mut pinned = deployment("pinned", json!({"cpu": "1", "memory": "1Gi"}));
        pinned["attributes"]["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("registry:5000/app:1.2");
        let spec = json!({"resources": [latest, pinned]});
        let p = DeploymentLimits::default();
        let findings = p.evaluate(&spec, &Value::Null).unwrap();
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].rule, LATEST_RULE);
        assert_eq!(findings[0].resource_id.as_deref(), Some("latest"));
        p.configure(&json!({"severity": {LATEST_RULE: "warn"}}))
            .unwrap();
        assert_eq!(
            p.evaluate(&spec, &Value::Null).unwrap()[0].severity,
            Severity::Warn
        );
        p.configure(&json!({"severity": {LATEST_RULE: "off"}}))
            .unwrap();
        assert!(p.evaluate(&spec, &Value::Null).unwrap().is_empty());
        assert!(p.configure(&json!({"severity": {"nope": "warn"}})).is_err());
    }
}
