//! Policy enforcement end to end: the shipped `kusionctl` binary with the fake-cloud runtime, the
//! `kcl-policy` plugin (KCL policy sets) and the misbehaving `policy-fixture` plugin, all loaded
//! as native plugins from this checkout's build output.

use std::path::Path;
use std::process::Output;

use kusion_tests::cli::{built, kusionctl_in, text};

use serde_json::Value;

fn run(dir: &Path, args: &[&str]) -> Output {
    kusionctl_in(dir, dir)
        .args(args)
        .env("KUSION_TEST_CLOUD", dir.join("cloud"))
        .env("KUSION_STATE_DIR", dir.join("state"))
        // Only what these tests need: other in-repo plugins (WASM ones) would slow every call.
        .env("KUSION_PLUGINS__ONLY", "test,kcl-policy,policy-fixture")
        .output()
        .unwrap()
}

const SPEC: &str = "resources:\n- id: t:small\n  type: Test\n  attributes: {size: 1, owner: ops}\n- id: t:big\n  type: Test\n  attributes: {size: 50}\n";

/// A stack folder with a spec and a KCL policy set `sizes` (deny MaxSize, warn HasOwner) wired
/// in through `~/.kusion/config.toml` (HOME is the folder).
fn stack(extra_config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("spec.yaml"), SPEC).unwrap();
    let set = d.join("policies").join("sizes");
    std::fs::create_dir_all(&set).unwrap();
    std::fs::write(
        set.join("policy.toml"),
        "name = \"sizes\"\nversion = \"1.0.0\"\n\n[rules.MaxSize]\nseverity = \"deny\"\ntypes = [\"Test\"]\n\n[rules.HasOwner]\nseverity = \"warn\"\ntypes = [\"Test\"]\n",
    )
    .unwrap();
    std::fs::write(
        set.join("rules.k"),
        "rule MaxSize:\n    resource.attributes.size <= 10, \"size ${resource.attributes.size} is over the limit of 10\"\n\nrule HasOwner:\n    resource.attributes?.owner, \"no owner\"\n",
    )
    .unwrap();
    let home = d.join(".kusion");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[policy]\ntimeout = \"60s\"\n\n[policy.plugins.kcl-policy]\nconfig = {{ sets = [\"../policies/sizes\"] }}\n{extra_config}"
        ),
    )
    .unwrap();
    dir
}

fn history(dir: &Path) -> Value {
    let out = run(dir, &["state", "history", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn deny_blocks_apply_with_exit_4_and_lists_each_finding() {
    let dir = stack("");
    let out = run(dir.path(), &["apply", "-f", "spec.yaml", "--yes"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(4), "{all}");
    assert!(
        all.contains("sizes/MaxSize")
            && all.contains("t:big")
            && all.contains("size 50 is over the limit of 10"),
        "{all}"
    );
    // The warning is listed too, but it is not what blocks.
    assert!(
        all.contains("sizes/HasOwner") && all.contains("no owner"),
        "{all}"
    );
    assert!(all.contains("blocked by policy"), "{all}");
    // Nothing changed: no release, nothing in the fake cloud.
    assert_eq!(history(dir.path()), serde_json::json!([]));
    assert!(
        std::fs::read_dir(dir.path().join("cloud"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );

    let out = run(
        dir.path(),
        &["apply", "-f", "spec.yaml", "--yes", "-o", "json"],
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["blocked"], true, "{v}");
    let denied: Vec<&Value> = v["policy"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "deny")
        .collect();
    assert_eq!(denied.len(), 1, "{v}");
    assert_eq!(denied[0]["rule"], "sizes/MaxSize");
    assert_eq!(denied[0]["resourceId"], "t:big");
    assert_eq!(denied[0]["policy"], "kcl-policy");
}

#[test]
fn preview_shows_findings_next_to_the_plan() {
    let dir = stack("");
    let out = run(dir.path(), &["preview", "-f", "spec.yaml"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(4), "{all}");
    assert!(
        all.contains("t:big") && all.contains("Policies (kcl-policy)"),
        "{all}"
    );
    let out = run(dir.path(), &["preview", "-f", "spec.yaml", "-o", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["steps"].as_array().is_some_and(|s| s.len() == 2), "{v}");
    assert_eq!(v["policy"]["blocked"], true, "{v}");
    assert_eq!(v["policy"]["findings"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn exemption_lets_apply_through_and_is_recorded_in_history() {
    let dir = stack("");
    // A reason is required.
    let out = run(
        dir.path(),
        &[
            "apply",
            "-f",
            "spec.yaml",
            "--yes",
            "--policy-exempt",
            "MaxSize",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("reason is required"), "{}", text(&out));

    let out = run(
        dir.path(),
        &[
            "apply",
            "-f",
            "spec.yaml",
            "--yes",
            "--policy-exempt",
            "sizes/MaxSize=migration window, ticket OPS-12",
        ],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("exempted: migration window, ticket OPS-12"),
        "{all}"
    );
    assert!(all.contains("warn") && all.contains("no owner"), "{all}");
    assert!(all.contains("2 created"), "{all}");
    let out = run(dir.path(), &["state", "history", "1", "-o", "json"]);
    let release: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        release["notes"],
        serde_json::json!(["policy-exempt sizes/MaxSize: migration window, ticket OPS-12"]),
        "{release}"
    );
}

#[test]
fn malformed_policy_blocks_naming_the_policy_unless_fail_open() {
    let dir = stack("");
    std::fs::write(
        dir.path().join("policies/sizes/rules.k"),
        "rule MaxSize:\n    resource.attributes.size <= , \"x\"\n\nrule HasOwner:\n    True\n",
    )
    .unwrap();
    let out = run(dir.path(), &["apply", "-f", "spec.yaml", "--yes"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(4), "{all}");
    assert!(
        all.contains("kcl-policy") && all.contains("policy set `sizes`"),
        "{all}"
    );
    assert!(all.contains("rules.k:2:"), "{all}");

    // The same with the plugin configured to fail open: reported, not blocking.
    std::fs::write(
        dir.path().join(".kusion/config.toml"),
        "[policy.plugins.kcl-policy]\nfail_open = true\nconfig = { sets = [\"../policies/sizes\"] }\n",
    )
    .unwrap();
    let out = run(dir.path(), &["apply", "-f", "spec.yaml", "--yes"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("fail-open") && all.contains("policy set `sizes`"),
        "{all}"
    );
}

/// Install the fixture into `~/.kusion/plugins/policy-fixture` with a manifest and checksum.
fn install_fixture(dir: &Path, mode_config: &str, timeout: &str) {
    let lib = built("libkusion_policy_fixture.so");
    let plugin_dir = dir.join(".kusion/plugins/policy-fixture");
    std::fs::create_dir_all(&plugin_dir).unwrap();
    std::fs::copy(&lib, plugin_dir.join("libkusion_policy_fixture.so")).unwrap();
    let sha = kusion_kernel::plugin::manifest::sha256_file(&lib).unwrap();
    std::fs::write(
        plugin_dir.join("plugin.toml"),
        format!("name = \"policy-fixture\"\nkind = \"policy\"\nversion = \"0.1.0\"\nfile = \"libkusion_policy_fixture.so\"\nsha256 = \"{sha}\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join(".kusion/config.toml"),
        format!(
            "[policy.plugins.policy-fixture]\ntimeout = \"{timeout}\"\nconfig = {mode_config}\n"
        ),
    )
    .unwrap();
}

#[test]
fn crashing_policy_plugin_blocks_naming_it() {
    let dir = stack("");
    install_fixture(dir.path(), "{ mode = \"panic\" }", "60s");
    let out = run(dir.path(), &["apply", "-f", "spec.yaml", "--yes"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(4), "{all}");
    assert!(
        all.contains("policy `policy-fixture`") && all.contains("panic"),
        "{all}"
    );
    assert_eq!(history(dir.path()), serde_json::json!([]));
}

#[test]
fn policy_timeout_blocks_naming_it() {
    let dir = stack("");
    install_fixture(dir.path(), "{ mode = \"sleep\", sleepMs = 20000 }", "1s");
    let started = std::time::Instant::now();
    let out = run(dir.path(), &["apply", "-f", "spec.yaml", "--yes"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(4), "{all}");
    assert!(
        all.contains("policy `policy-fixture`") && all.contains("timed out after 1s"),
        "{all}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "{all}"
    );
}

#[test]
fn missing_configured_policy_plugin_blocks() {
    let dir = stack("\n[policy.plugins.no-such-policy]\n");
    let out = run(
        dir.path(),
        &[
            "apply",
            "-f",
            "spec.yaml",
            "--yes",
            "--policy-exempt",
            "MaxSize=test",
        ],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(4), "{all}");
    assert!(
        all.contains("policy `no-such-policy`") && all.contains("no policy plugin of this name"),
        "{all}"
    );
}
