//! `kusionctl init`, `compile` and `compile --all` on Konfig layouts (no cluster needed).

use std::path::{Path, PathBuf};
use std::process::Output;

use kusion_tests::cli::{copy_dir, run_kusionctl, text};

fn run(dir: &Path, home: &Path, args: &[&str]) -> Output {
    run_kusionctl(dir, home, args)
}

fn fixture(work: &Path) -> PathBuf {
    let root = work.join("konfig");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/konfig"),
        &root,
    );
    root
}

/// The errors a user meets first, each naming the file and the stack.
#[test]
fn compile_errors_name_the_file_and_the_stack() {
    let work = tempfile::tempdir().unwrap();
    let root = fixture(work.path());
    let stack = root.join("shop/dev");

    let out = run(&root.join("shop"), work.path(), &["compile"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("unknown stack") && text(&out).contains("shop"),
        "{}",
        text(&out)
    );

    // A KCL error prints exactly as `kcl run` prints it, then names the stack.
    std::fs::write(
        stack.join("main.k"),
        "web: Web {\n    replicas = \"two\"\n}\n",
    )
    .unwrap();
    let out = run(&stack, work.path(), &["compile"]);
    assert_eq!(out.status.code(), Some(1));
    let kcl = kusion_kcl::run_full(
        &[],
        &kusion_kcl::RunOptions {
            work_dir: Some(stack.clone()),
            settings: vec![stack.join("kcl.yaml")],
            args: vec![
                ("project".into(), "shop".into()),
                ("stack".into(), "dev".into()),
            ],
            ..Default::default()
        },
    )
    .err()
    .expect("the program fails")
    .to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with(&kcl), "{stderr}\n---\n{kcl}");
    assert!(stderr.contains("stack shop/dev"), "{stderr}");

    // Output that is not a spec.
    std::fs::write(
        stack.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(stack.join("main.k"), "x = 1\n").unwrap();
    let out = run(&stack, work.path(), &["compile"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("not a valid spec")
            && text(&out).contains("shop/dev")
            && text(&out).contains("kcl.yaml"),
        "{}",
        text(&out)
    );

    // Missing kcl.yaml.
    std::fs::remove_file(stack.join("kcl.yaml")).unwrap();
    let out = run(&stack, work.path(), &["compile"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("missing kcl.yaml") && text(&out).contains("shop/dev"),
        "{}",
        text(&out)
    );

    // A stack outside any project.
    std::fs::remove_file(root.join("shop/project.yaml")).unwrap();
    let out = run(&stack, work.path(), &["compile"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("unknown project") && text(&out).contains("project.yaml"),
        "{}",
        text(&out)
    );
}

fn spec_ids(yaml: &[u8]) -> Vec<String> {
    let v: serde_json::Value = parse_json(yaml);
    v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// Output of `-o json`.
fn parse_json(json: &[u8]) -> serde_json::Value {
    serde_json::from_slice(json)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(json)))
}

#[test]
fn init_scaffolds_stacks_that_compile() {
    let work = tempfile::tempdir().unwrap();
    let out = run(work.path(), work.path(), &["init", "demo", "dev", "prod"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        work.path().join("demo/kcl.mod").is_file(),
        "the project is its own Konfig root"
    );
    let outside: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside, ["demo"], "init writes nothing outside demo/");
    for stack in ["dev", "prod"] {
        let out = run(
            work.path(),
            work.path(),
            &["compile", "-C", &format!("demo/{stack}"), "-o", "json"],
        );
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(
            spec_ids(&out.stdout),
            [
                format!("v1:Namespace:demo-{stack}"),
                format!("v1:ConfigMap:demo-{stack}:demo-config"),
                format!("apps/v1:Deployment:demo-{stack}:demo"),
                format!("v1:Service:demo-{stack}:demo"),
            ]
        );
    }
    let out = run(work.path(), work.path(), &["init", "demo"]);
    assert_eq!(out.status.code(), Some(1), "an existing project is kept");
    let out = run(work.path(), work.path(), &["init", "-t", "nope", "other"]);
    assert!(
        text(&out).contains("unknown template \"nope\""),
        "{}",
        text(&out)
    );
    let out = run(work.path(), work.path(), &["init", "Bad_Name"]);
    assert!(text(&out).contains("not a valid project"), "{}", text(&out));
}

#[test]
fn compile_all_matches_per_stack_compile_and_is_incremental() {
    let work = tempfile::tempdir().unwrap();
    let root = fixture(work.path());
    let out = run(&root, work.path(), &["init", "demo", "dev", "prod"]);
    assert!(out.status.success(), "{}", text(&out));

    let all = |extra: &[&str]| {
        let mut args = vec!["compile", "--all", "-o", "json"];
        args.extend_from_slice(extra);
        let out = run(&root, work.path(), &args);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let compiled = |s: &serde_json::Value| -> Vec<String> {
        s["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["cached"] == false)
            .map(|r| r["stack"].as_str().unwrap().to_string())
            .collect()
    };
    let first = all(&[]);
    assert_eq!(first["compiled"], 3, "{first:#}");
    assert_eq!(compiled(&first), ["demo/dev", "demo/prod", "shop/dev"]);
    for r in first["stacks"].as_array().unwrap() {
        let stack = r["stack"].as_str().unwrap();
        let one = run(&root.join(stack), work.path(), &["compile"]);
        assert!(one.status.success(), "{}", text(&one));
        let written = std::fs::read(r["spec"].as_str().unwrap()).unwrap();
        assert_eq!(
            one.stdout, written,
            "compile --all wrote what compile prints for {stack}"
        );
    }

    let again = all(&[]);
    assert_eq!(again["cached"], 3, "{again:#}");

    // One project's shared file: both its stacks, and nothing else, compile again.
    let base = root.join("demo/base/base.k");
    let text_before = std::fs::read_to_string(&base).unwrap();
    std::fs::write(&base, text_before.replace("nginx:1.25", "nginx:1.27")).unwrap();
    let after = all(&[]);
    assert_eq!(compiled(&after), ["demo/dev", "demo/prod"], "{after:#}");
    let spec =
        std::fs::read_to_string(root.join(".kusion/compile-cache/demo/prod/spec.yaml")).unwrap();
    assert!(spec.contains("nginx:1.27"));

    // A stack's own settings file.
    let kcl_yaml = root.join("shop/dev/kcl.yaml");
    let t = std::fs::read_to_string(&kcl_yaml).unwrap();
    std::fs::write(
        &kcl_yaml,
        format!("{t}kcl_options:\n  - key: unused\n    value: 1\n"),
    )
    .unwrap();
    assert_eq!(compiled(&all(&[])), ["shop/dev"]);

    // --force ignores the cache.
    assert_eq!(compiled(&all(&["--force"])).len(), 3);

    // A failing stack fails the run, names the stack, and is compiled again next time.
    std::fs::write(
        root.join("demo/dev/main.k"),
        "app: App {\n    replicas = \"x\"\n}\n",
    )
    .unwrap();
    let out = run(&root, work.path(), &["compile", "--all"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("stack demo/dev"), "{}", text(&out));
    assert!(text(&out).contains("1 failed"), "{}", text(&out));
    let out = run(&root, work.path(), &["compile", "--all"]);
    assert!(text(&out).contains("1 failed"), "{}", text(&out));

    // A runaway stack fails alone with a clear error; the others compile.
    std::fs::write(
        root.join("demo/dev/main.k"),
        "n = len([1 for i in range(10**9)])\n",
    )
    .unwrap();
    let out = run(&root, work.path(), &["compile", "--all", "--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("stack demo/dev")
            && text(&out).contains("--max-items")
            && text(&out).contains("1 failed"),
        "{}",
        text(&out)
    );
    // A stack may not read outside its folder and package (nor write at all).
    std::fs::write(
        root.join("demo/dev/main.k"),
        "import file\nleak = file.read(\"/etc/passwd\")\n",
    )
    .unwrap();
    let out = run(&root.join("demo/dev"), work.path(), &["compile"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--allow-read /etc"), "{}", text(&out));
    std::fs::write(
        root.join("demo/dev/main.k"),
        "import file\nfile.write(\"out.txt\", \"x\")\nx = 1\n",
    )
    .unwrap();
    let out = run(&root.join("demo/dev"), work.path(), &["compile"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("never writes"), "{}", text(&out));
}

#[test]
fn resources_in_spec_form_are_used_and_validated() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::write(root.join("kcl.mod"), "[package]\nname = \"k\"\n").unwrap();
    std::fs::create_dir_all(root.join("p/s")).unwrap();
    std::fs::write(root.join("p/project.yaml"), "name: p\n").unwrap();
    std::fs::write(root.join("p/s/stack.yaml"), "name: s\n").unwrap();
    std::fs::write(
        root.join("p/s/kcl.yaml"),
        "kcl_cli_configs:\n  file:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(
        root.join("p/s/main.k"),
        r#"_p = option("project")
_s = option("stack")
resources = [
    {id = "t:${_p}-${_s}", type = "Test", attributes.size = 1}
    {id = "t:b", type = "Test", dependsOn = ["t:p-s"]}
]
"#,
    )
    .unwrap();
    let out = run(&root.join("p/s"), root, &["compile", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let spec = parse_json(&out.stdout);
    assert_eq!(spec["resources"][0]["id"], "t:p-s");
    assert_eq!(spec["resources"][1]["dependsOn"][0], "t:p-s");

    std::fs::write(
        root.join("p/s/main.k"),
        "resources = [{id = \"t:a\", type = \"Test\"}, {id = \"t:a\", type = \"Test\"}]\n",
    )
    .unwrap();
    let out = run(&root.join("p/s"), root, &["compile"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("duplicate resource ID \"t:a\"") && text(&out).contains("p/s"),
        "{}",
        text(&out)
    );
}
