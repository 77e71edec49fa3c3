//! Unit tests of `policy`.

use super::*;
use kusion_sdk::PluginResult;
use kusion_sdk::policy::PolicyPluginInfo;

/// An in-process policy: answers with `findings`, or sleeps, or panics.
struct Fake {
    findings: Vec<Finding>,
    sleep: Option<Duration>,
    panic: bool,
}

impl PolicyPlugin for Fake {
    fn describe(&self) -> PolicyPluginInfo {
        PolicyPluginInfo {
            name: "fake".into(),
            version: "0".into(),
            abi: kusion_sdk::ABI_VERSION,
        }
    }
    fn configure(&self, _config: &Value) -> PluginResult<()> {
        Ok(())
    }
    fn evaluate(&self, _spec: &Value, context: &Value) -> PluginResult<Vec<Finding>> {
        assert_eq!(context["stack"]["name"], "prod");
        if let Some(d) = self.sleep {
            std::thread::sleep(d);
        }
        if self.panic {
            panic!("fake policy exploded");
        }
        Ok(self.findings.clone())
    }
}

fn finding(rule: &str, severity: Severity) -> Finding {
    Finding {
        rule: rule.into(),
        severity,
        resource_id: Some("v1:Service:default:web".into()),
        message: "bad".into(),
    }
}

fn guard(fake: Fake, timeout: Duration, fail_open: bool, exempt: &[&str]) -> PolicyGuard {
    PolicyGuard::with_plugins(
        vec![("fake".into(), Arc::new(fake), timeout, fail_open)],
        StackInfo {
            name: "prod".into(),
            path: None,
        },
        exempt.iter().map(|e| e.parse().unwrap()).collect(),
    )
}

fn quiet(findings: Vec<Finding>) -> Fake {
    Fake {
        findings,
        sleep: None,
        panic: false,
    }
}

#[test]
fn deny_blocks_warn_does_not_and_exemptions_apply() {
    let spec = Spec::default();
    let g = guard(
        quiet(vec![finding("set/Deny", Severity::Deny)]),
        DEFAULT_TIMEOUT,
        false,
        &[],
    );
    let blocked = g.check(&spec, "apply", None).unwrap_err();
    assert!(
        blocked
            .to_string()
            .contains("deny set/Deny v1:Service:default:web: bad"),
        "{blocked}"
    );
    let g = guard(
        quiet(vec![finding("set/Warn", Severity::Warn)]),
        DEFAULT_TIMEOUT,
        false,
        &[],
    );
    assert_eq!(g.check(&spec, "apply", None).unwrap().warnings().count(), 1);
    // A bare rule name covers `set/Rule`; the reason travels with the finding and the notes.
    let g = guard(
        quiet(vec![finding("set/Deny", Severity::Deny)]),
        DEFAULT_TIMEOUT,
        false,
        &["Deny=hotfix"],
    );
    let report = g.check(&spec, "apply", None).unwrap();
    assert_eq!(report.findings[0].exempted.as_deref(), Some("hotfix"));
    assert_eq!(g.notes(), vec!["policy-exempt Deny: hotfix".to_string()]);
}

#[test]
fn exemption_needs_a_reason() {
    assert!("Rule".parse::<Exemption>().unwrap_err().contains("reason"));
    assert!(
        "Rule=  "
            .parse::<Exemption>()
            .unwrap_err()
            .contains("reason")
    );
    assert!("=why".parse::<Exemption>().is_err());
}

#[test]
fn panics_and_timeouts_fail_closed_naming_the_policy() {
    let spec = Spec::default();
    let g = guard(
        Fake {
            findings: vec![],
            sleep: None,
            panic: true,
        },
        DEFAULT_TIMEOUT,
        false,
        &[],
    );
    let blocked = g.check(&spec, "apply", None).unwrap_err();
    assert!(
        blocked
            .to_string()
            .contains("policy `fake` failed: the plugin panicked: fake policy exploded"),
        "{blocked}"
    );
    let g = guard(
        Fake {
            findings: vec![],
            sleep: Some(Duration::from_secs(5)),
            panic: false,
        },
        Duration::from_millis(100),
        false,
        &[],
    );
    let blocked = g.check(&spec, "apply", None).unwrap_err();
    assert!(
        blocked
            .to_string()
            .contains("policy `fake` failed: timed out after 100ms"),
        "{blocked}"
    );
    assert!(
        blocked
            .to_string()
            .contains("--policy-exempt does not apply"),
        "a failure is not a finding, and the message says so: {blocked}"
    );
    // Configured fail-open: reported, not blocking.
    let g = guard(
        Fake {
            findings: vec![],
            sleep: Some(Duration::from_secs(5)),
            panic: false,
        },
        Duration::from_millis(100),
        true,
        &[],
    );
    let report = g.check(&spec, "apply", None).unwrap();
    assert!(report.failures[0].fail_open);
}

#[test]
fn configuration_layers_and_stack_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        "[policy]\ntimeout = \"5s\"\n[policy.plugins.kcl-policy]\nconfig = { sets = [\"p\"] }\n[policy.plugins.other]\n",
    )
    .unwrap();
    let mut config = PolicyConfig::load(
        Some(&file),
        &[("policy.plugins.other.fail_open".into(), "true".into())],
    )
    .unwrap();
    assert_eq!(config.timeout.as_deref(), Some("5s"));
    assert_eq!(config.plugins["other"].fail_open, Some(true));
    assert_eq!(
        config.plugins["kcl-policy"].base_dir.as_deref(),
        Some(dir.path())
    );
    let stack = dir.path().join("stack");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::write(
        stack.join("kusion.toml"),
        "[policy.plugins.other]\nenabled = false\n",
    )
    .unwrap();
    config.merge(PolicyConfig::load_stack(&stack).unwrap().unwrap());
    assert_eq!(config.plugins["other"].enabled, Some(false));
    let g = PolicyGuard::new(
        &config,
        &LoadedPlugins::default(),
        StackInfo {
            name: "prod".into(),
            path: None,
        },
        Vec::new(),
    );
    let report = g.evaluate(&Spec::default(), "apply", None);
    assert_eq!(report.policies, vec!["kcl-policy".to_string()]);
    assert!(
        report.failures[0]
            .message
            .contains("no policy plugin of this name")
    );
    assert!(report.blocked);

    std::fs::write(stack.join("kusion.toml"), "[policy]\ntimeout = \"soon\"\n").unwrap();
    let err = PolicyConfig::load_stack(&stack).unwrap_err().to_string();
    assert!(
        err.contains("kusion.toml") && err.contains("not a duration"),
        "{err}"
    );
}
