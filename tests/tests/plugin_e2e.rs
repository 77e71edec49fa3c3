//! The shipped `kusionctl` binary with the fake-cloud runtime loaded as a native plugin from this
//! checkout's build output: the engine end to end through the plugin ABI.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// `target/<profile>/kusionctl`, next to this test's `deps/` folder. `scripts/test.sh` builds the
/// whole workspace (binaries and plugin cdylibs) before running tests.
fn kusionctl() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let bin = profile_dir.join("kusionctl");
    assert!(
        bin.is_file(),
        "{} is missing: build the workspace first (cargo build --workspace)",
        bin.display()
    );
    let plugin = profile_dir.join("libkusion_test_runtime.so");
    assert!(
        plugin.is_file(),
        "{} is missing: build the workspace first (cargo build --workspace)",
        plugin.display()
    );
    bin
}

fn run(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(kusionctl())
        .args(args)
        .current_dir(dir)
        .env("KUSION_TEST_CLOUD", dir.join("cloud"))
        .env("KUSION_STATE_DIR", dir.join("state"))
        .env("HOME", dir)
        .env_remove("KUSION_PLUGIN_PATH")
        .env_remove("KUSION_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn apply_preview_destroy_through_a_loaded_runtime_plugin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("spec.yaml"),
        "resources:\n- id: t:db\n  type: Test\n  attributes: {secret: pw-123, size: 1}\n- id: t:app\n  type: Test\n  attributes:\n    db: $kusion_path[t:db].uid\n    readyAfterPolls: 2\n",
    )
    .unwrap();
    let list = run(dir.path(), &["plugin", "list", "-o", "json"]);
    assert!(list.status.success(), "{}", text(&list));
    let entries: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let test = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "test")
        .expect("the test runtime plugin is listed");
    assert_eq!(test["status"]["state"], "loaded", "{test}");
    assert!(
        test["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "type:Test")
    );

    let out = run(
        dir.path(),
        &["apply", "-f", "spec.yaml", "--yes", "--watch"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Apply complete! Resources: 2 created, 0 updated, 0 deleted."),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("pw-123"));
    let out = run(dir.path(), &["preview", "-f", "spec.yaml"]);
    assert!(text(&out).contains("No changes."), "{}", text(&out));
    let out = run(dir.path(), &["destroy", "--yes"]);
    assert!(text(&out).contains("2 deleted"), "{}", text(&out));
}
