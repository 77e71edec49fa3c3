//! `stack.yaml` naming a remote state backend: a stack applied and destroyed with its state in
//! a real PostgreSQL (`state.backend: postgres://...`, the URL from an environment variable),
//! and the errors for backends that cannot be used.

use std::path::Path;
use std::process::Output;

use kusion_kernel::state;
use kusion_pg_harness::PgServer;
use kusion_tests::cli::{built, kusionctl_in, text};

const MAIN_K: &str = r#"resources = [{
    id = "t:a"
    type = "Test"
    attributes = {size = 1, stack = option("stack")}
}]
"#;

/// `ROOT/kcl.mod`, project `inv`, stack `inv/dev` whose stack.yaml has `state_yaml` appended.
fn layout(root: &Path, state_yaml: &str) {
    let stack = root.join("inv/dev");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::write(root.join("kcl.mod"), "[package]\nname = \"states\"\n").unwrap();
    std::fs::write(root.join("inv/project.yaml"), "name: inv\n").unwrap();
    std::fs::write(stack.join("stack.yaml"), format!("name: dev\n{state_yaml}")).unwrap();
    std::fs::write(
        stack.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(stack.join("main.k"), MAIN_K).unwrap();
}

fn run(dir: &Path, home: &Path, pg_url: &str, args: &[&str]) -> Output {
    kusionctl_in(dir, home)
        .args(args)
        .env("KUSION_PLUGINS__ONLY", "test")
        .env("KUSION_TEST_CLOUD", home.join("cloud"))
        .env("KONFIG_TEST_STATE_URL", pg_url)
        .env_remove("KUSION_STATE_BACKEND")
        .output()
        .unwrap()
}

fn ids(url: &str) -> Vec<String> {
    let store = state::open(url, "unused".into(), "inv/dev").unwrap();
    store.load().unwrap().resources.keys().cloned().collect()
}

#[test]
fn a_stack_keeps_its_state_in_the_postgres_backend_its_stack_yaml_names() {
    built("libkusion_test_runtime.so");
    let pg =
        PgServer::start().unwrap_or_else(|e| panic!("the PostgreSQL test server must start: {e}"));
    let url = pg.url();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let root = home.join("konfig");
    layout(
        &root,
        "state:\n  backend: \"${KONFIG_TEST_STATE_URL}?stack=inv/dev\"\n",
    );
    let stack = root.join("inv/dev");

    let out = run(&stack, home, &url, &["apply", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("1 created"), "{}", text(&out));
    assert_eq!(ids(&url), ["t:a"], "the state is in PostgreSQL");
    assert!(
        !stack.join(".kusion").exists(),
        "nothing is written to the local state folder"
    );
    let out = run(&stack, home, &url, &["preview"]);
    assert!(text(&out).contains("No changes."), "{}", text(&out));

    // An explicit --state-backend wins over stack.yaml: a local folder knows nothing yet, so the
    // object the test cloud already holds is planned as an import.
    let local = format!("local:{}", home.join("other-state").display());
    let out = run(&stack, home, &url, &["preview", "--state-backend", &local]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("1 to import"), "{}", text(&out));

    let out = run(&stack, home, &url, &["destroy", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(ids(&url).is_empty(), "destroy emptied the PostgreSQL state");
}

#[test]
fn unusable_backends_in_stack_yaml_are_errors_naming_the_file() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let cases = [
        (
            "state:\n  backend: \"consul://x\"\n",
            "unknown state backend \"consul://x\"",
        ),
        (
            "state:\n  backend: \"${KONFIG_TEST_UNSET_VARIABLE}\"\n",
            "uses ${KONFIG_TEST_UNSET_VARIABLE}, which is not set",
        ),
        (
            "state:\n  backend: \"s3://bucket/states\"\n  path: st\n",
            "state.path applies to the `local` backend only",
        ),
    ];
    for (yaml, want) in cases {
        let root = home.join("konfig");
        let _ = std::fs::remove_dir_all(&root);
        layout(&root, yaml);
        let stack = root.join("inv/dev");
        let out = run(&stack, home, "unused", &["preview"]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            text(&out).contains(want)
                && text(&out).contains(&stack.join("stack.yaml").display().to_string()),
            "{yaml}: {}",
            text(&out)
        );
    }
}
