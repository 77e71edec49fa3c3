//! `kusionctl plugin test`: the conformance suite run from the command line against the WASM
//! runtime fixture and the native example runtime, and a sample the runtime breaks.

use std::path::Path;
use std::process::{Command, Output};

use kusion_dev_plugins::fixtures::{self, Fixture};

fn kusionctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kusionctl"))
        .args(args)
        // No compiled-component cache in the user's home from a test.
        .env(
            "KUSION_CACHE",
            std::env::temp_dir().join("kusion-plugin-test-cache"),
        )
        .output()
        .expect("run kusionctl")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

const CHECKS: [&str; 11] = [
    "describe",
    "absent",
    "dry-run",
    "create",
    "update",
    "import",
    "watch",
    "error",
    "timeout",
    "delete",
    "delete-absent",
];

#[test]
fn plugin_test_passes_the_wasm_fixture_and_the_native_example_and_fails_a_broken_sample() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let kv_sample = dir.path().join("kv.yaml");
    write(
        &kv_sample,
        r#"
create: {id: "kv:a", type: WasmKv, attributes: {key: a, value: 1}}
update: {id: "kv:a", type: WasmKv, attributes: {key: a, value: {x: [2]}}}
invalid: {id: "kv:bad", type: WasmKv, attributes: {key: ../escape}}
watchTimeout: 5000
"#,
    );
    let wasm = fixtures::build(Fixture::WasmRuntime);
    let dir_grant = format!("/data={}", data.display());
    let out = kusionctl(&[
        "plugin",
        "test",
        wasm.to_str().unwrap(),
        "--sample",
        kv_sample.to_str().unwrap(),
        "--dir",
        &dir_grant,
        "--writable",
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    for check in CHECKS {
        assert!(
            said.lines()
                .any(|l| l.starts_with("ok") && l.contains(check)),
            "{check}: {said}"
        );
    }
    assert!(said.contains("11 passed, 0 failed, 0 skipped"), "{said}");

    // Without the writable grant the runtime cannot create: that check fails, exit 1.
    let out = kusionctl(&[
        "plugin",
        "test",
        wasm.to_str().unwrap(),
        "--sample",
        kv_sample.to_str().unwrap(),
        "--dir",
        &dir_grant,
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.lines()
            .any(|l| l.starts_with("FAIL") && l.contains("create")),
        "{said}"
    );

    // The native example, with an `invalid` resource it actually accepts.
    let root = dir.path().join("files");
    let file_sample = dir.path().join("file.yaml");
    write(
        &file_sample,
        &format!(
            r#"
config: {{root: "{}"}}
create: {{id: "file:a", type: LocalFile, attributes: {{path: a.txt, content: one}}}}
update: {{id: "file:a", type: LocalFile, attributes: {{path: a.txt, content: two}}}}
invalid: {{id: "file:b", type: LocalFile, attributes: {{path: b.txt}}}}
"#,
            root.display()
        ),
    );
    let native = fixtures::build(Fixture::LocalFile);
    let out = kusionctl(&[
        "plugin",
        "test",
        native.to_str().unwrap(),
        "--sample",
        file_sample.to_str().unwrap(),
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("11 passed, 1 failed, 0 skipped"), "{said}");
    assert!(
        said.contains("FAIL  error") && said.contains("`file:b` was accepted"),
        "{said}"
    );

    // WASM-only flags on a native plugin are a usage error.
    let out = kusionctl(&[
        "plugin",
        "test",
        native.to_str().unwrap(),
        "--sample",
        file_sample.to_str().unwrap(),
        "--writable",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
