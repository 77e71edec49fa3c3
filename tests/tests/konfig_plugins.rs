//! A Konfig stack whose KCL calls a plugin (`kcl_plugin.cmdb`, the CMDB look-up plugin loaded
//! from this checkout's build output): `kusionctl compile`, `compile --all` and the compile
//! before `preview`/`apply` all serve the call, and a CMDB change shows up in the next preview.

use std::path::Path;
use std::process::Output;

use kusion_tests::cli::{built, kusionctl_in, text};
use serde_json::Value;

const MAIN_K: &str = r#"import kcl_plugin.cmdb

_r = cmdb.lookup_host(host="web-1")
resources = [{
    id = "t:placement"
    type = "Test"
    attributes = {
        cluster = _r.cluster if _r.found else "unknown"
        namespace = _r.namespace if _r.found else "unknown"
        stack = option("stack")
    }
}]
"#;

/// `ROOT/kcl.mod`, project `inv`, stack `inv/dev` with the program above.
fn layout(root: &Path) {
    let stack = root.join("inv/dev");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::write(root.join("kcl.mod"), "[package]\nname = \"plugins\"\n").unwrap();
    std::fs::write(root.join("inv/project.yaml"), "name: inv\n").unwrap();
    std::fs::write(stack.join("stack.yaml"), "name: dev\n").unwrap();
    std::fs::write(
        stack.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(stack.join("main.k"), MAIN_K).unwrap();
}

/// kusionctl with only the `cmdb` and `test` plugins (HOME/.kusion/config.toml points the
/// CMDB at the test database; the test runtime keeps its "cloud" under HOME/cloud).
fn run(dir: &Path, home: &Path, args: &[&str]) -> Output {
    kusionctl_in(dir, home)
        .args(args)
        .env("KUSION_PLUGINS__ONLY", "cmdb,test")
        .env("KUSION_TEST_CLOUD", home.join("cloud"))
        .env_remove("KUSION_CMDB_URL")
        .output()
        .unwrap()
}

fn import(home: &Path, cluster: &str) {
    let hosts = home.join("hosts.json");
    std::fs::write(
        &hosts,
        format!(
            r#"[{{"host": "web-1", "cluster": "{cluster}", "namespace": "shop", "pod": "web-1",
                 "workload": "web", "workload_kind": "Deployment", "app": "web"}}]"#
        ),
    )
    .unwrap();
    let out = run(home, home, &["cmdb", "import", "hosts.json", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
}

fn attributes(spec_json: &[u8]) -> Value {
    let spec: Value = serde_json::from_slice(spec_json).unwrap();
    spec["resources"][0]["attributes"].clone()
}

#[test]
fn stacks_call_kcl_plugins_in_compile_compile_all_and_preview_apply() {
    built("libkusion_cmdb.so");
    built("libkusion_test_runtime.so");
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let kusion = home.join(".kusion");
    std::fs::create_dir_all(&kusion).unwrap();
    let db = format!("sqlite://{}", home.join("cmdb.db").display());
    std::fs::write(
        kusion.join("config.toml"),
        format!("[plugins.settings.cmdb]\nconfig = {{ url = \"{db}\" }}\n"),
    )
    .unwrap();
    import(home, "east");
    let root = home.join("konfig");
    layout(&root);
    let stack = root.join("inv/dev");

    // compile in the stack folder
    let out = run(&stack, home, &["compile", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        attributes(&out.stdout),
        serde_json::json!({"cluster": "east", "namespace": "shop", "stack": "dev"})
    );

    // compile --all; a stack that asked a plugin is compiled again next time, not cached
    for _ in 0..2 {
        let out = run(&root, home, &["compile", "--all"]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            text(&out).contains("1 stacks: 1 compiled, 0 unchanged"),
            "{}",
            text(&out)
        );
    }
    let cached =
        std::fs::read_to_string(root.join(".kusion/compile-cache/inv/dev/spec.yaml")).unwrap();
    assert!(cached.contains("cluster: east"), "{cached}");

    // preview and apply compile the stack with the loaded plugins
    let out = run(&stack, home, &["apply", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("1 created"), "{}", text(&out));
    import(home, "west");
    let out = run(&stack, home, &["preview", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let preview = String::from_utf8_lossy(&out.stdout);
    assert!(
        preview.contains("t:placement") && preview.contains("west") && preview.contains("east"),
        "the preview shows the CMDB change: {preview}"
    );

    // a program calling a plugin nobody serves fails with the plugin host's reason
    std::fs::write(
        stack.join("main.k"),
        "import kcl_plugin.inventory\n\nx = inventory.get(\"a\")\n",
    )
    .unwrap();
    let out = run(&stack, home, &["compile"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no loaded function plugin serves the module `inventory`")
            && text(&out).contains("main.k:3:")
            && text(&out).contains("inv/dev"),
        "{}",
        text(&out)
    );
}
