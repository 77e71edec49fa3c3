//! `kcl import`: schemas generated from OpenAPI v2 and CRDs, checked on small documents (exact
//! shapes) and on the real Kubernetes 1.31 swagger and a real CRD (evaluated with our evaluator).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kusion_kcl::openapi::{ImportOptions, Source, generate, read_crd, read_openapi, write_package};
use kusion_kcl::{RunOptions, run_full};
use serde_json::json;

fn gen_one(doc: serde_json::Value) -> BTreeMap<String, String> {
    generate(
        &[Source::OpenApi("test.json".into(), doc)],
        &ImportOptions::default(),
    )
    .expect("generate")
}

fn small_swagger() -> serde_json::Value {
    json!({
        "swagger": "2.0",
        "definitions": {
            "io.k8s.api.demo.v1.Widget": {
                "description": "Widget is a demo object.\n\nIt has two paragraphs.",
                "type": "object",
                "required": ["spec"],
                "x-kubernetes-group-version-kind": [{"group": "demo.example.com", "kind": "Widget", "version": "v1"}],
                "properties": {
                    "apiVersion": {"type": "string", "description": "API version."},
                    "kind": {"type": "string"},
                    "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                    "spec": {"$ref": "#/definitions/io.k8s.api.demo.v1.WidgetSpec", "description": "The spec."},
                    "status": {"type": "object"}
                }
            },
            "io.k8s.api.demo.v1.WidgetSpec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "format": "int32", "description": "How big."},
                    "ratio": {"type": "number"},
                    "enabled": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
                    "limits": {"type": "object", "additionalProperties": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
                    "raw": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.runtime.RawExtension"},
                    "created": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Time"},
                    "type": {"type": "string"},
                    "x-extra": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/definitions/io.k8s.api.demo.v1.WidgetSpec"}}
                }
            },
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}}
            },
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
            "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
            "io.k8s.apimachinery.pkg.runtime.RawExtension": {"type": "object"},
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"}
        }
    })
}

#[test]
fn swagger_definitions_become_schemas_in_group_version_folders() {
    let files = gen_one(small_swagger());
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "api/demo/v1/widget.k",
            "api/demo/v1/widget_spec.k",
            "apimachinery/pkg/apis/meta/v1/object_meta.k",
            "kcl.mod",
        ],
        "value-like definitions (IntOrString, Quantity, Time, RawExtension) are inlined"
    );
    let w = &files["api/demo/v1/widget.k"];
    assert!(
        w.contains("import apimachinery.pkg.apis.meta.v1 as metav1\n"),
        "{w}"
    );
    assert!(
        w.contains("    apiVersion: \"demo.example.com/v1\" = \"demo.example.com/v1\"\n"),
        "{w}"
    );
    assert!(w.contains("    kind: \"Widget\" = \"Widget\"\n"), "{w}");
    assert!(w.contains("    metadata?: metav1.ObjectMeta\n"), "{w}");
    assert!(
        w.contains("    spec: WidgetSpec\n"),
        "required attributes have no `?`: {w}"
    );
    assert!(
        !w.contains("status"),
        "top-level kinds leave status out: {w}"
    );
    assert!(
        w.contains("    Widget is a demo object.\n\n    It has two paragraphs.\n"),
        "{w}"
    );
    assert!(
        w.contains("    spec : WidgetSpec, required\n        The spec.\n"),
        "{w}"
    );
    assert!(
        w.contains("    apiVersion : str, default is \"demo.example.com/v1\", required\n"),
        "{w}"
    );

    let s = &files["api/demo/v1/widget_spec.k"];
    for line in [
        "    size: int\n",
        "    ratio?: float\n",
        "    enabled?: bool\n",
        "    tags?: [str]\n",
        "    labels?: {str:str}\n",
        "    port?: int | str\n",
        "    limits?: {str:int | float | str}\n",
        "    raw?: {str:any}\n",
        "    created?: str\n",
        "    $type?: str\n",
        "    \"x-extra\"?: str\n",
        "    children?: [WidgetSpec]\n",
    ] {
        assert!(s.contains(line), "missing {line:?} in\n{s}");
    }
    assert!(
        !s.contains("\nimport "),
        "same-package references need no import: {s}"
    );
    assert_eq!(
        files["kcl.mod"],
        "[package]\nname = \"k8s\"\nedition = \"*\"\nversion = \"0.1.0\"\n"
    );
}

#[test]
fn generated_files_are_formatted() {
    for (path, text) in gen_one(small_swagger()) {
        if path.ends_with(".k") {
            assert_eq!(
                kusion_kcl::format_source(&path, &text).unwrap(),
                text,
                "{path}"
            );
        }
    }
}

#[test]
fn unknown_ref_names_the_definition_and_property() {
    let doc = json!({"definitions": {"io.k8s.api.x.v1.A": {"type": "object", "properties": {
        "b": {"$ref": "#/definitions/io.k8s.api.x.v1.Missing"}}}}});
    let err = generate(
        &[Source::OpenApi("t.json".into(), doc)],
        &ImportOptions::default(),
    )
    .expect_err("must fail")
    .to_string();
    assert!(
        err.contains("definitions.io.k8s.api.x.v1.A.properties.b"),
        "{err}"
    );
    assert!(err.contains("io.k8s.api.x.v1.Missing"), "{err}");
}

#[test]
fn not_openapi_v2_is_an_error() {
    let err = generate(
        &[Source::OpenApi(
            "t.json".into(),
            json!({"openapi": "3.0.0"}),
        )],
        &ImportOptions::default(),
    )
    .expect_err("must fail")
    .to_string();
    assert!(err.contains("definitions"), "{err}");
}

#[test]
fn include_keeps_the_packages_and_what_they_refer_to() {
    let mut doc = small_swagger();
    doc["definitions"]["io.k8s.api.other.v1.Gadget"] =
        json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let files = generate(
        &[Source::OpenApi("t.json".into(), doc)],
        &ImportOptions {
            include: vec!["api/demo/v1".into()],
            ..Default::default()
        },
    )
    .unwrap();
    assert!(files.contains_key("apimachinery/pkg/apis/meta/v1/object_meta.k"));
    assert!(
        !files.keys().any(|k| k.starts_with("api/other")),
        "{:?}",
        files.keys()
    );
}

fn crd_yaml() -> &'static str {
    r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  names: {kind: Gizmo, plural: gizmos}
  scope: Namespaced
  versions:
  - name: v1alpha1
    schema:
      openAPIV3Schema:
        description: A gizmo.
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [mode]
            properties:
              mode:
                type: string
                enum: [fast, slow]
                description: |-
                  How it runs.
                  Second line.
              replicas: {type: integer, minimum: 1, maximum: 10, default: 1}
              name: {type: string, pattern: '^[a-z]+$', maxLength: 8}
              port:
                x-kubernetes-int-or-string: true
                anyOf: [{type: integer}, {type: string}]
                pattern: '^[a-z]+$'
                minimum: 1
                maxLength: 6
              targets:
                type: array
                items:
                  type: object
                  properties:
                    host: {type: string}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object}
"#
}

fn write_tmp(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn crd_becomes_kind_and_nested_schemas_with_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let crd = read_crd(&write_tmp(tmp.path(), "gizmo.yaml", crd_yaml())).unwrap();
    let files = generate(&[crd], &ImportOptions::default()).unwrap();
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "example_com/v1alpha1/gizmo.k",
            "example_com/v1alpha1/gizmo_spec.k",
            "example_com/v1alpha1/gizmo_spec_targets.k",
            "kcl.mod",
        ]
    );
    let g = &files["example_com/v1alpha1/gizmo.k"];
    assert!(g.contains("    apiVersion: \"example.com/v1alpha1\" = \"example.com/v1alpha1\"\n"));
    assert!(
        g.contains("    metadata?: {str:any}\n"),
        "no swagger given: free-form metadata\n{g}"
    );
    assert!(!g.contains("status"));
    let s = &files["example_com/v1alpha1/gizmo_spec.k"];
    for line in [
        "    mode: \"fast\" | \"slow\"\n",
        "    replicas?: int = 1\n",
        "    port?: int | str\n",
        "    targets?: [GizmoSpecTargets]\n",
        "    extra?: {str:any}\n",
        "        How it runs.\n        Second line.\n",
        "import regex\n",
        "replicas >= 1 if replicas not in [None, Undefined]",
        "replicas <= 10 if replicas not in [None, Undefined]",
        "len(name) <= 8 if name not in [None, Undefined]",
        "regex.match(name, r\"^[a-z]+$\") if name not in [None, Undefined]",
    ] {
        assert!(s.contains(line), "missing {line:?} in\n{s}");
    }
}

#[test]
fn int_or_string_checks_apply_to_the_json_type_they_constrain() {
    // `pattern` and `maxLength` constrain strings, `minimum` numbers, as the API server applies
    // them; the generated checks must also pass upstream's type checker on `int | str`.
    let tmp = tempfile::tempdir().unwrap();
    let crd = read_crd(&write_tmp(tmp.path(), "gizmo.yaml", crd_yaml())).unwrap();
    let files = generate(&[crd], &ImportOptions::default()).unwrap();
    write_package(&tmp.path().join("k8s"), &files).unwrap();
    let prog = tmp.path().join("prog");
    std::fs::create_dir_all(&prog).unwrap();
    write_tmp(
        &prog,
        "kcl.mod",
        "[package]\nname = \"prog\"\n\n[dependencies]\nk8s = { path = \"../k8s\" }\n",
    );
    let run = |port: &str| {
        write_tmp(
            &prog,
            "main.k",
            &format!(
                "import k8s.example_com.v1alpha1 as gz\n\ngizmo = gz.Gizmo {{\n    metadata.name = \"a\"\n    spec = {{mode = \"fast\", port = {port}}}\n}}\n"
            ),
        );
        run_prog(&prog)
    };
    for ok in ["80", "\"http\""] {
        let out = run(ok).unwrap_or_else(|e| panic!("port = {ok}: {e}"));
        assert!(
            out.contains(&format!("port: {}", ok.replace('"', ""))),
            "{out}"
        );
    }
    for (bad, why) in [
        ("0", "port must be >= 1"),
        ("\"HTTP\"", "port must match the pattern"),
        ("\"abcdefg\"", "port: length must be <= 6"),
    ] {
        let err = run(bad).expect_err(bad);
        assert!(err.contains(why), "port = {bad}: {err}");
    }
}

#[test]
fn crd_file_that_is_not_a_crd_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_tmp(tmp.path(), "x.yaml", "apiVersion: v1\nkind: ConfigMap\n");
    let err = generate(&[read_crd(&p).unwrap()], &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("x.yaml") && err.contains("ConfigMap"), "{err}");
    let bad = write_tmp(tmp.path(), "bad.yaml", "a: [1,\n");
    let err = read_crd(&bad).unwrap_err().to_string();
    assert!(err.contains("bad.yaml") && err.contains("line"), "{err}");
}

/// The shared Kubernetes data (`$KUSION_SHARED`, else `../shared` beside the clone); the test
/// fails if it is in neither.
fn data_dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = [
        std::env::var_os("KUSION_SHARED").map(PathBuf::from),
        Some(root.join("../shared")),
    ];
    candidates
        .into_iter()
        .flatten()
        .map(|d| d.join("data/k8s"))
        .find(|d| d.is_dir())
        .expect("Kubernetes data not found: set KUSION_SHARED to the shared folder")
}

fn real_sources() -> Vec<Source> {
    let d = data_dir();
    let swagger = d.join("kubernetes-release-1.31-swagger.json");
    assert!(
        swagger.is_file(),
        "test data missing: {}",
        swagger.display()
    );
    vec![
        read_openapi(&swagger).unwrap(),
        read_crd(&d.join("monitoring.coreos.com_servicemonitors.yaml")).unwrap(),
    ]
}

/// Writes the package generated from the real inputs and a program using it; returns the
/// program folder.
fn real_program(tmp: &Path, main: &str) -> PathBuf {
    let files = generate(&real_sources(), &ImportOptions::default()).unwrap();
    write_package(&tmp.join("k8s"), &files).unwrap();
    let prog = tmp.join("prog");
    std::fs::create_dir_all(&prog).unwrap();
    write_tmp(
        &prog,
        "kcl.mod",
        "[package]\nname = \"prog\"\n\n[dependencies]\nk8s = { path = \"../k8s\" }\n",
    );
    write_tmp(&prog, "main.k", main);
    prog
}

fn run_prog(prog: &Path) -> Result<String, String> {
    let opts = RunOptions {
        work_dir: Some(prog.to_path_buf()),
        ..Default::default()
    };
    run_full(&[prog.join("main.k")], &opts)
        .map(|o| o.text)
        .map_err(|e| e.to_string())
}

const REAL_MAIN: &str = r#"import k8s.api.apps.v1 as appsv1
import k8s.api.core.v1 as corev1
import k8s.monitoring_coreos_com.v1 as monv1

deploy = appsv1.Deployment {
    metadata = {name = "web", namespace = "demo"}
    spec = {
        replicas = 2
        selector.matchLabels = {app = "web"}
        template = {
            metadata.labels = {app = "web"}
            spec.containers = [{
                name = "web"
                image = "nginx:1.25"
                ports = [{containerPort = 80}]
                resources.limits = {cpu = "100m", memory = "64Mi"}
            }]
        }
        strategy.rollingUpdate.maxSurge = "25%"
    }
}
svc = corev1.Service {
    metadata.name = "web"
    spec.ports = [{port = 80, targetPort = 8080}]
}
mon = monv1.ServiceMonitor {
    metadata.name = "web"
    spec = {
        selector.matchLabels = {app = "web"}
        endpoints = [{port = "http", interval = "30s", scheme = "http"}]
    }
}
"#;

#[test]
#[ignore = "needs the shared corpus (../shared or $KUSION_SHARED); .ci/corpus.sh runs it"]
fn real_swagger_and_crd_schemas_evaluate() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = real_program(tmp.path(), REAL_MAIN);
    let out = run_prog(&prog).unwrap();
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&out).unwrap();
    assert_eq!(v["deploy"]["apiVersion"], "apps/v1");
    assert_eq!(v["deploy"]["kind"], "Deployment");
    assert_eq!(v["deploy"]["spec"]["replicas"], 2);
    assert_eq!(
        v["deploy"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "100m"
    );
    assert_eq!(v["svc"]["apiVersion"], "v1");
    assert_eq!(v["svc"]["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(v["mon"]["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(v["mon"]["kind"], "ServiceMonitor");
}

#[test]
#[ignore = "needs the shared corpus (../shared or $KUSION_SHARED); .ci/corpus.sh runs it"]
fn every_generated_package_loads_and_evaluates() {
    let files = generate(&real_sources(), &ImportOptions::default()).unwrap();
    // one schema of every package, referenced from one program
    let mut first: BTreeMap<String, String> = BTreeMap::new();
    for (path, text) in &files {
        let Some((dir, _)) = path.rsplit_once('/') else {
            continue;
        };
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("schema ").and_then(|r| r.strip_suffix(':')))
            .unwrap_or_else(|| panic!("{path}: no schema"));
        first
            .entry(dir.replace('/', "."))
            .or_insert_with(|| name.to_string());
    }
    assert!(first.len() > 30, "{first:?}");
    let mut main = String::new();
    for (i, pkg) in first.keys().enumerate() {
        main.push_str(&format!("import k8s.{pkg} as p{i}\n"));
    }
    for (i, name) in first.values().enumerate() {
        main.push_str(&format!("_t{i} = p{i}.{name}\n"));
    }
    main.push_str(&format!("loaded = {}\n", first.len()));
    let tmp = tempfile::tempdir().unwrap();
    let prog = real_program(tmp.path(), &main);
    let out = run_prog(&prog).unwrap();
    assert_eq!(out, format!("loaded: {}\n", first.len()));
}

#[test]
#[ignore = "needs the shared corpus (../shared or $KUSION_SHARED); .ci/corpus.sh runs it"]
fn real_schemas_reject_typos_wrong_types_and_crd_violations() {
    let cases = [
        ("replicas = 2", "replicaz = 2", "replicaz"),
        ("replicas = 2", "replicas = \"two\"", "expected int"),
        ("containerPort = 80", "containerPrt = 80", "containerPrt"),
        ("scheme = \"http\"", "scheme = \"ftp\"", "ftp"),
        (
            "interval = \"30s\"",
            "interval = \"half a minute\"",
            "interval must match",
        ),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let prog = real_program(tmp.path(), REAL_MAIN);
    for (from, to, expect) in cases {
        assert!(REAL_MAIN.contains(from));
        write_tmp(&prog, "main.k", &REAL_MAIN.replacen(from, to, 1));
        let err = run_prog(&prog).expect_err(to);
        assert!(err.contains(expect), "{to}: {err}");
    }
}

#[test]
#[ignore = "needs the shared corpus (../shared or $KUSION_SHARED); .ci/corpus.sh runs it"]
fn real_output_is_deterministic_and_formatted() {
    let a = generate(&real_sources(), &ImportOptions::default()).unwrap();
    // the same definitions in the opposite order give byte-identical files
    let mut reversed = Vec::new();
    for s in real_sources() {
        reversed.push(match s {
            Source::OpenApi(n, mut doc) => {
                let defs = doc["definitions"].as_object().unwrap().clone();
                let rev: serde_json::Map<String, serde_json::Value> =
                    defs.into_iter().rev().collect();
                doc["definitions"] = serde_json::Value::Object(rev);
                Source::OpenApi(n, doc)
            }
            other => other,
        });
    }
    let b = generate(&reversed, &ImportOptions::default()).unwrap();
    assert_eq!(a.len(), b.len());
    for (k, v) in &a {
        assert_eq!(Some(v), b.get(k), "{k} differs between runs");
    }
    assert!(a.len() > 600, "{} files", a.len());
    for (path, text) in &a {
        if path.ends_with(".k") {
            let again = kusion_kcl::format_source(path, text).unwrap();
            assert!(again == *text, "{path} is not formatted");
        }
    }
}

#[test]
fn kcl_import_cli_writes_the_package() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let crd = write_tmp(tmp.path(), "gizmo.yaml", crd_yaml());
    let code = kusion_kcl::cli::main_from([
        "kcl".as_ref(),
        "import".as_ref(),
        "--crd".as_ref(),
        crd.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--name".as_ref(),
        "gizmos".as_ref(),
    ] as [&std::ffi::OsStr; 8]);
    assert_eq!(code, std::process::ExitCode::SUCCESS);
    assert!(out.join("example_com/v1alpha1/gizmo.k").is_file());
    let m = std::fs::read_to_string(out.join("kcl.mod")).unwrap();
    assert!(m.contains("name = \"gizmos\""), "{m}");
    let code = kusion_kcl::cli::main_from(["kcl", "import", "-o", "x"]);
    assert_ne!(
        code,
        std::process::ExitCode::SUCCESS,
        "no inputs is an error"
    );
}

#[test]
fn v1beta1_crd_with_a_shared_validation_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_tmp(
        tmp.path(),
        "old.yaml",
        "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nspec:\n  group: old.example.com\n  version: v1\n  names: {kind: Thing}\n  validation:\n    openAPIV3Schema:\n      type: object\n      properties:\n        spec:\n          type: object\n          properties:\n            size: {type: integer}\n",
    );
    let files = generate(&[read_crd(&p).unwrap()], &ImportOptions::default()).unwrap();
    assert!(files["old_example_com/v1/thing_spec.k"].contains("    size?: int\n"));
    let none = write_tmp(
        tmp.path(),
        "bad.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  group: g\n  names: {kind: K}\n",
    );
    let err = generate(&[read_crd(&none).unwrap()], &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("bad.yaml") && err.contains("version"), "{err}");
}

/// Upstream's Konfig models (the conformance corpus) compile to exactly upstream's expected
/// output when the `k8s` package they import is ours instead of upstream's generated one.
#[test]
#[ignore = "needs the shared corpus (../shared or $KUSION_SHARED); .ci/corpus.sh runs it"]
fn upstream_konfig_models_compile_identically_on_the_generated_package() {
    let shared = data_dir().join("../..");
    let corpus = shared.join("conformance/konfig");
    assert!(
        corpus.join("kcl.mod").is_file(),
        "{} missing",
        corpus.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let files = generate(&real_sources(), &ImportOptions::default()).unwrap();
    let k8s = tmp.path().join("k8s");
    write_package(&k8s, &files).unwrap();
    let stacks = std::fs::read_to_string(corpus.join("STACKS.txt")).unwrap();
    let mut checked = 0;
    for stack in stacks.lines().filter_map(|l| l.split_whitespace().next()) {
        let dir = corpus.join(stack);
        for (cmd, expected) in [
            ("command.txt", "expected.yaml"),
            ("command.options.txt", "expected.options.yaml"),
        ] {
            let (Ok(cmd), Ok(want)) = (
                std::fs::read_to_string(dir.join(cmd)),
                std::fs::read_to_string(dir.join(expected)),
            ) else {
                continue;
            };
            let mut opts = RunOptions {
                work_dir: Some(corpus.clone()),
                ..Default::default()
            };
            let mut inputs = Vec::new();
            let mut words = cmd.split_whitespace().map(|w| w.trim_matches('\''));
            while let Some(w) = words.next() {
                match w {
                    "$KCL" => {}
                    "-E" => {
                        let (n, p) = words.next().unwrap().split_once('=').unwrap();
                        let p = if n == "k8s" {
                            k8s.clone()
                        } else {
                            corpus.join(p)
                        };
                        opts.external.push((n.to_string(), p));
                    }
                    "-D" => {
                        let (k, v) = words.next().unwrap().split_once('=').unwrap();
                        opts.args.push((k.to_string(), v.to_string()));
                    }
                    f => inputs.push(PathBuf::from(f)),
                }
            }
            let out = run_full(&inputs, &opts).unwrap_or_else(|e| panic!("{stack}: {e}"));
            assert!(
                out.text == want,
                "{stack} ({cmd}): output differs from upstream's"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 6,
        "only {checked} corpus cases have expected outputs"
    );
}
