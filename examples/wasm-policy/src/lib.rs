//! Example WASM policy plugin: every Kubernetes `Deployment` must set CPU and memory limits on
//! every container. Built for `wasm32-wasip2` by `scripts/build-wasm-plugins.sh`; the rule itself
//! is plain Rust and is unit-tested on the host.

use kusion_sdk::policy::{Finding, PolicyPlugin, PolicyPluginInfo, Severity};
use kusion_sdk::{ABI_VERSION, PluginError, PluginResult, Value};
use std::sync::RwLock;

pub const RULE: &str = "deployment-resource-limits";

pub struct DeploymentLimits {
    severity: RwLock<Severity>,
}

impl Default for DeploymentLimits {
    fn default() -> Self {
        DeploymentLimits {
            severity: RwLock::new(Severity::Deny),
        }
    }
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

    /// `{"severity": "warn"}` turns the rule into a warning.
    fn configure(&self, config: &Value) -> PluginResult<()> {
        if let Some(sev) = config.get("severity") {
            let sev: Severity = serde_json::from_value(sev.clone()).map_err(|e| {
                PluginError::invalid(format!("severity must be \"deny\" or \"warn\": {e}"))
            })?;
            *self
                .severity
                .write()
                .map_err(|_| PluginError::internal("poisoned"))? = sev;
        }
        Ok(())
    }

    fn evaluate(&self, spec: &Value, _context: &Value) -> PluginResult<Vec<Finding>> {
        let severity = *self
            .severity
            .read()
            .map_err(|_| PluginError::internal("poisoned"))?;
        let resources = spec["resources"]
            .as_array()
            .ok_or_else(|| PluginError::invalid("spec has no `resources` array"))?;
        let mut findings = Vec::new();
        for resource in resources.iter().filter(|r| is_deployment(r)) {
            for (container, missing) in missing_limits(resource) {
                findings.push(Finding {
                    rule: RULE.into(),
                    severity,
                    resource_id: resource["id"].as_str().map(str::to_string),
                    message: format!(
                        "container `{container}` sets no {} limit",
                        missing.join(" or ")
                    ),
                });
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
}
