//! The shipped `kusionctl` binary with the fake-cloud runtime loaded as a native plugin from this
//! checkout's build output: the engine end to end through the plugin ABI.

use std::path::Path;
use std::process::Output;

use kusion_tests::cli::{built, kusionctl_in, text};

/// `kusionctl` in `dir` with the fake cloud, state and home there; the test runtime plugin must
/// have been built next to it (`scripts/test.sh` builds the whole workspace first).
fn run(dir: &Path, args: &[&str]) -> Output {
    built("libkusion_test_runtime.so");
    kusionctl_in(dir, dir)
        .env("KUSION_TEST_CLOUD", dir.join("cloud"))
        .env("KUSION_STATE_DIR", dir.join("state"))
        .args(args)
        .output()
        .expect("running kusionctl")
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
