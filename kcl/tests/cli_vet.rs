//! `kcl vet` through the binary: JSON and YAML data against a schema, every violation at its
//! data-file line with its data path, upstream's success line and exit codes.

use std::path::Path;
use std::process::{Command, Output};

fn kcl(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kcl"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const SCHEMA: &str = r#"schema Port:
    containerPort: int
    protocol: "TCP" | "UDP" = "TCP"
    check:
        1 <= containerPort <= 65535, "containerPort out of range"

schema App:
    name: str
    replicas: int = 1
    ports: [Port] = []
    check:
        replicas >= 0, "replicas must be non-negative"
"#;

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("schema.k"), SCHEMA).unwrap();
    for (n, t) in files {
        std::fs::write(d.path().join(n), t).unwrap();
    }
    d
}

#[test]
fn valid_data_is_upstreams_success() {
    let d = dir_with(&[(
        "ok.json",
        "{\"name\": \"web\", \"ports\": [{\"containerPort\": 80}]}",
    )]);
    let o = kcl(d.path(), &["vet", "ok.json", "schema.k", "-s", "App"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "Validate success!\n");
    // without -s the code's first schema is used, as upstream (whose first error is this too)
    let o = kcl(d.path(), &["vet", "ok.json", "schema.k"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("attribute 'containerPort' of Port is required"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn json_type_error_at_the_data_line() {
    let d = dir_with(&[(
        "bad.json",
        "{\n  \"name\": \"web\",\n  \"replicas\": \"two\"\n}\n",
    )]);
    let o = kcl(d.path(), &["vet", "bad.json", "schema.k", "-s", "App"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    let data = d.path().join("bad.json").canonicalize().unwrap();
    // upstream's head, place and message (it reports this one at the same line and column)
    assert!(
        e.starts_with(&format!(
            "error[E2G22]: TypeError\n --> {}:3:3\n  |\n3 |   \"replicas\": \"two\"\n  |   ^ expected int, got str(two) (at $.replicas)\n",
            data.display()
        )),
        "{e}"
    );
    // and the schema line that declares the attribute
    assert!(e.contains("schema.k:9:5"), "{e}");
    assert!(e.contains("its type is int, but got str(two)"), "{e}");
}

#[test]
fn every_violation_of_yaml_data_is_reported() {
    let d = dir_with(&[(
        "bad.yaml",
        "name: web\nreplicas: -1\nports:\n  - containerPort: 80\n    protocol: HTTP\n  - containerPort: 70000\nunknown: 1\n",
    )]);
    let o = kcl(d.path(), &["vet", "bad.yaml", "schema.k", "-s", "App"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    let heads: Vec<&str> = e.lines().filter(|l| l.contains("bad.yaml:")).collect();
    assert_eq!(heads.len(), 4, "{e}");
    for (line_col, what) in [
        ("bad.yaml:2:1", "(at $.replicas)"),
        ("bad.yaml:5:5", "got str(HTTP) (at $.ports[0].protocol)"),
        ("bad.yaml:6:5", "(at $.ports[1].containerPort)"),
        (
            "bad.yaml:7:1",
            "Cannot add member 'unknown' to schema 'App' (at $.unknown)",
        ),
    ] {
        assert!(e.contains(line_col), "{line_col}: {e}");
        assert!(e.contains(what), "{what}: {e}");
    }
    assert!(e.contains("Check failed on the condition: replicas must be non-negative"));
    assert!(e.contains("Check failed on the condition: containerPort out of range"));
    // in data order
    let pos: Vec<usize> = [
        "bad.yaml:2:1",
        "bad.yaml:5:5",
        "bad.yaml:6:5",
        "bad.yaml:7:1",
    ]
    .iter()
    .map(|p| e.find(p).unwrap())
    .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{e}");
}

#[test]
fn json_report_and_list_data() {
    let d = dir_with(&[("list.json", "[{\"name\": \"a\"}, {\"name\": 1}]")]);
    let o = kcl(
        d.path(),
        &[
            "vet",
            "list.json",
            "schema.k",
            "-s",
            "App",
            "--output",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["success"], false);
    // the removed `name` is not reported again as missing
    assert_eq!(v["errCount"], 1, "{v:#}");
    let err = &v["errors"][0];
    assert_eq!(err["path"], "$[1].name");
    assert_eq!(err["line"], 1);
    assert_eq!(err["column"], 18);
    assert_eq!(err["errorType"], "TypeError");
    assert_eq!(err["schema"]["line"], 8);
}

#[test]
fn konfig_server_data() {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/konfig/models/frontend");
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("app.yaml"),
        "name: shop\nnamespace: shop\nimage: nginx:1.27\nreplicas: 200\nservices:\n  - ports:\n      - port: 80\n        nodePort: 30080\n",
    )
    .unwrap();
    let o = kcl(
        d.path(),
        &["vet", "app.yaml", models.to_str().unwrap(), "-s", "Server"],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("app.yaml:4:1"), "{e}");
    assert!(
        e.contains("replicas must be between 0 and 100, got 200"),
        "{e}"
    );
    assert!(e.contains("app.yaml:6:5"), "{e}");
    assert!(
        e.contains("nodePort needs type NodePort or LoadBalancer"),
        "{e}"
    );
    std::fs::write(
        d.path().join("ok.yaml"),
        "name: shop\nnamespace: shop\nimage: nginx:1.27\n",
    )
    .unwrap();
    let o = kcl(
        d.path(),
        &["vet", "ok.yaml", models.to_str().unwrap(), "-s", "Server"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn code_errors_and_bad_data_are_not_violations() {
    let d = dir_with(&[
        ("ok.json", "{\"name\": \"web\"}"),
        ("bad.k", "a = b\n"),
        ("x.yaml", "a: [\n"),
    ]);
    let o = kcl(d.path(), &["vet", "ok.json", "bad.k", "-s", "App"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("name 'b' is not defined"),
        "{}",
        stderr(&o)
    );
    let o = kcl(d.path(), &["vet", "x.yaml", "schema.k", "-s", "App"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is not valid JSON or YAML"),
        "{}",
        stderr(&o)
    );
    let o = kcl(d.path(), &["vet", "ok.json", "schema.k", "-s", "Nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("name 'Nope' is not defined"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn data_from_standard_input() {
    use std::io::Write as _;
    let d = dir_with(&[]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcl"))
        .args(["vet", "-", "schema.k", "-s", "App", "--format", "json"])
        .current_dir(d.path())
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"name\": \"web\",\n \"replicas\": \"x\"}")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("--> <stdin>:2:2"), "{e}");
    assert!(e.contains("(at $.replicas)"), "{e}");
}
