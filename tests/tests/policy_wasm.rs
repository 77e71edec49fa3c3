//! A WASM policy plugin (examples/wasm-policy, built for wasm32-wasip2) enforced through the
//! kernel's policy guard: loaded by the plugin host into its sandbox, configured from the
//! `[policy]` section, blocking on deny, and failing closed when it runs out of fuel.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use kusion_dev_plugins::fixtures::{self, Fixture};
use kusion_kernel::plugin::manifest::{self, Manifest};
use kusion_kernel::plugin::{PluginConfig, PluginSettings, WasmLimits, load_plugins};
use kusion_kernel::policy::{PolicyConfig, PolicyGuard, PolicyPluginSettings, StackInfo};
use kusion_kernel::spec::Spec;
use serde_json::json;

fn deployment(name: &str, image: &str, limits: bool) -> serde_json::Value {
    let resources = if limits {
        json!({"limits": {"cpu": "1", "memory": "1Gi"}})
    } else {
        json!({})
    };
    json!({"id": format!("apps/v1:Deployment:default:{name}"), "type": "Kubernetes",
           "attributes": {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": name, "namespace": "default"},
             "spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": image, "resources": resources}]}}}}})
}

fn spec(resources: Vec<serde_json::Value>) -> Spec {
    serde_json::from_value(json!({ "resources": resources })).unwrap()
}

/// The example WASM policy installed from its own manifest into a plugin folder, once per test
/// process (a configured folder is all the plugin host knows).
fn installed_policy() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let manifest_path = fixtures::workspace_root().join("examples/wasm-policy/plugin.toml");
        let manifest = Manifest::load(&manifest_path).unwrap();
        manifest::install(dir.path(), &manifest, &fixtures::build(Fixture::WasmPolicy)).unwrap();
        dir
    })
    .path()
}

fn guard(limits: WasmLimits, config: Option<serde_json::Value>) -> PolicyGuard {
    let plugins = PluginConfig {
        path: vec![installed_policy().to_path_buf()],
        default_dirs: false,
        only: Some(vec!["deployment-limits".into()]),
        settings: BTreeMap::from([(
            "deployment-limits".to_string(),
            PluginSettings {
                limits,
                ..Default::default()
            },
        )]),
        ..PluginConfig::default()
    };
    let loaded = load_plugins(&plugins);
    let policy = PolicyConfig {
        plugins: BTreeMap::from([(
            "deployment-limits".to_string(),
            PolicyPluginSettings {
                config,
                ..Default::default()
            },
        )]),
        ..Default::default()
    };
    PolicyGuard::new(
        &policy,
        &loaded,
        StackInfo {
            name: "dev".into(),
            path: None,
        },
        Vec::new(),
    )
}

#[test]
fn wasm_policy_denies_through_the_guard() {
    let guard = guard(WasmLimits::default(), None);
    let spec = spec(vec![
        deployment("ok", "ghcr.io/acme/app:1.0", true),
        deployment("nolimits", "ghcr.io/acme/app:1.0", false),
        deployment("latest", "ghcr.io/acme/app:latest", true),
    ]);
    let blocked = guard.check(&spec, "apply", None).unwrap_err();
    let report = &blocked.0;
    let got: Vec<(&str, &str)> = report
        .denials()
        .map(|f| {
            (
                f.finding.rule.as_str(),
                f.finding.resource_id.as_deref().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "deployment-resource-limits",
                "apps/v1:Deployment:default:nolimits"
            ),
            (
                "deployment-pinned-images",
                "apps/v1:Deployment:default:latest"
            ),
        ],
        "{report:?}"
    );
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.policy == "deployment-limits")
    );
    let message = blocked.to_string();
    assert!(
        message.contains("apps/v1:Deployment:default:latest"),
        "{message}"
    );
}

#[test]
fn wasm_policy_severity_comes_from_the_policy_configuration() {
    let guard = guard(
        WasmLimits::default(),
        Some(
            json!({"severity": {"deployment-resource-limits": "warn", "deployment-pinned-images": "off"}}),
        ),
    );
    let spec = spec(vec![deployment(
        "nolimits",
        "ghcr.io/acme/app:latest",
        false,
    )]);
    let report = guard
        .check(&spec, "apply", None)
        .expect("warnings do not block");
    assert_eq!(report.warnings().count(), 1, "{report:?}");
    assert_eq!(report.denials().count(), 0, "{report:?}");
}

#[test]
fn wasm_policy_out_of_fuel_fails_closed_naming_it() {
    let guard = guard(
        WasmLimits {
            fuel: 3_000_000,
            ..WasmLimits::default()
        },
        None,
    );
    let spec = spec(
        (0..3000)
            .map(|i| deployment(&format!("d{i}"), "ghcr.io/acme/app:1.0", true))
            .collect(),
    );
    let blocked = guard.check(&spec, "apply", None).unwrap_err();
    let failure = &blocked.0.failures[0];
    assert_eq!(failure.policy, "deployment-limits");
    assert!(failure.message.contains("fuel"), "{failure:?}");
    assert!(
        blocked
            .to_string()
            .contains("policy `deployment-limits` failed"),
        "{blocked}"
    );
}
