//! Policy-set loading and evaluation errors: each names the set (and the rule, resource and
//! file:line:col where there is one); severity overrides and stack filters.

use std::path::Path;

use kusion_policy_kcl::KclPolicy;
use kusion_sdk::policy::{PolicyPlugin, Severity};
use serde_json::json;

fn write_set(dir: &Path, manifest: &str, rules: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("policy.toml"), manifest).unwrap();
    std::fs::write(dir.join("rules.k"), rules).unwrap();
}

const MANIFEST: &str = "name = \"t\"\nversion = \"1\"\n[rules.Small]\nseverity = \"deny\"\n";

fn spec() -> serde_json::Value {
    json!({"resources": [
        {"id": "a", "type": "Test", "attributes": {"size": 1}},
        {"id": "b", "type": "Test", "attributes": {"size": 9}},
        {"id": "c", "type": "Other", "attributes": {}}
    ]})
}

#[test]
fn rule_without_manifest_entry_is_refused_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    write_set(
        dir.path(),
        MANIFEST,
        "rule Small:\n    True\n\nrule Extra:\n    True\n",
    );
    let err = KclPolicy::with_sets(&[dir.path()])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("policy set `t`")
            && err.contains("rules.k:4:6")
            && err.contains("[rules.Extra]"),
        "{err}"
    );
}

#[test]
fn manifest_entry_without_rule_and_bad_manifest_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_set(dir.path(), MANIFEST, "limit = 5\n");
    let err = KclPolicy::with_sets(&[dir.path()])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("policy set `t`") && err.contains("rules.Small"),
        "{err}"
    );

    write_set(
        dir.path(),
        "name = \"t\"\nversion = \"1\"\n[rules.Small]\nseverity = \"fatal\"\n",
        "rule Small:\n    True\n",
    );
    let err = KclPolicy::with_sets(&[dir.path()])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("policy.toml:4:") && err.contains("fatal"),
        "{err}"
    );
}

#[test]
fn a_rule_that_errors_names_set_rule_and_resource() {
    let dir = tempfile::tempdir().unwrap();
    write_set(
        dir.path(),
        "name = \"t\"\nversion = \"1\"\n[rules.Small]\nseverity = \"deny\"\n",
        "rule Small:\n    resource.attributes.size + \"x\" < 5\n",
    );
    let plugin = KclPolicy::with_sets(&[dir.path()]).unwrap();
    let err = plugin
        .evaluate_sets(&spec(), &json!({}))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("policy set `t`, rule `Small` on resource a") && err.contains("rules.k:2:"),
        "{err}"
    );
}

#[test]
fn filters_severity_overrides_and_stacks() {
    let dir = tempfile::tempdir().unwrap();
    write_set(
        dir.path(),
        "name = \"t\"\nversion = \"1\"\nstacks = [\"prod*\"]\n[rules.Small]\nseverity = \"deny\"\ntypes = [\"Test\"]\n",
        "rule Small:\n    resource.attributes.size < 5, \"size ${resource.attributes.size}\"\n",
    );
    let plugin = KclPolicy::default();
    // Relative set paths resolve against `baseDir`; a missing folder is refused.
    let err = plugin
        .configure(&json!({"sets": ["missing"], "baseDir": dir.path()}))
        .unwrap_err();
    assert!(err.message.contains("missing"), "{err:?}");
    plugin
        .configure(&json!({"sets": [{"path": dir.path(), "severity": {"t/Small": "warn"}}]}))
        .unwrap();
    let findings = plugin
        .evaluate(&spec(), &json!({"stack": {"name": "prod-eu"}}))
        .unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].resource_id.as_deref(), Some("b"));
    assert_eq!(findings[0].severity, Severity::Warn);
    assert_eq!(findings[0].message, "size 9");
    // Another stack: the set does not apply.
    assert!(
        plugin
            .evaluate(&spec(), &json!({"stack": {"name": "dev"}}))
            .unwrap()
            .is_empty()
    );
    // An override naming no rule is refused.
    let err = plugin
        .configure(&json!({"sets": [{"path": dir.path(), "severity": {"Nope": "warn"}}]}))
        .unwrap_err();
    assert!(err.message.contains("Nope"), "{err:?}");
}

#[test]
fn static_errors_refuse_the_set_when_it_loads() {
    let dir = tempfile::tempdir().unwrap();
    for (rules, expect) in [
        // A parameter without a default after one with a default.
        ("rule Small[a = 1, b]:\n    True\n", "rules.k:1:"),
        // A type error the checker finds without evaluating.
        (
            "limit: int = \"five\"\nrule Small:\n    True\n",
            "rules.k:1:",
        ),
    ] {
        write_set(dir.path(), MANIFEST, rules);
        let err = KclPolicy::with_sets(&[dir.path()])
            .err()
            .unwrap_or_else(|| panic!("{rules:?} loaded"))
            .to_string();
        assert!(
            err.contains("policy set `t`") && err.contains(expect),
            "{rules:?}: {err}"
        );
    }
}
