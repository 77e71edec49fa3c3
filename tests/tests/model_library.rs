//! The Konfig model library in examples/konfig: every stack compiles (with the files and options
//! of its kcl.yaml, the project/stack names as options) to its golden spec, the spec is valid for
//! the kernel, dependencies are minimal, the vendored Kubernetes schemas are the importer's
//! current output, and mistakes in models or stacks are compile errors.
//!
//! `KUSION_UPDATE_GOLDEN=1 cargo test -p kusion-tests --test model_library` rewrites the goldens.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kusion_kcl::openapi::{ImportOptions, generate, read_openapi};
use kusion_kcl::{RunOptions, run_full};
use kusion_kernel::spec::Spec;

fn konfig_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/konfig")
}

/// `name:` of a project.yaml / stack.yaml.
fn yaml_name(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    v["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no name", path.display()))
        .to_string()
}

/// (project, stack, stack folder) for every stack under `root/projects`.
fn stacks(root: &Path) -> Vec<(String, String, PathBuf)> {
    let mut out = Vec::new();
    let mut projects: Vec<PathBuf> = std::fs::read_dir(root.join("projects"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("project.yaml").is_file())
        .collect();
    projects.sort();
    for p in projects {
        let project = yaml_name(&p.join("project.yaml"));
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&p)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|d| d.join("stack.yaml").is_file())
            .collect();
        dirs.sort();
        for d in dirs {
            out.push((project.clone(), yaml_name(&d.join("stack.yaml")), d));
        }
    }
    out
}

fn compile(project: &str, stack: &str, dir: &Path) -> Result<String, String> {
    let opts = RunOptions {
        work_dir: Some(dir.to_path_buf()),
        settings: vec![dir.join("kcl.yaml")],
        args: vec![
            ("project".into(), project.into()),
            ("stack".into(), stack.into()),
        ],
        // as kusionctl compiles a stack: an error inside a model names the model's file
        note_instances: true,
        ..Default::default()
    };
    run_full(&[], &opts)
        .map(|o| o.text)
        .map_err(|e| e.to_string())
}

fn parse_valid(text: &str, file: &str) -> Spec {
    let spec = Spec::parse(text, file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let known: BTreeSet<String> = ["Kubernetes".to_string()].into();
    spec.validate(&known)
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    spec
}

#[test]
fn every_stack_compiles_to_its_golden_spec() {
    let root = konfig_root();
    let all = stacks(&root);
    let update = std::env::var_os("KUSION_UPDATE_GOLDEN").is_some();
    let mut per_project: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (project, stack, dir) in &all {
        per_project
            .entry(project.clone())
            .or_default()
            .insert(stack.clone());
        let out = compile(project, stack, dir)
            .unwrap_or_else(|e| panic!("{project}/{stack} does not compile:\n{e}"));
        // the program's whole output is the spec
        let top: serde_yaml_ng::Value = serde_yaml_ng::from_str(&out).unwrap();
        let keys: Vec<&str> = top
            .as_mapping()
            .unwrap()
            .keys()
            .filter_map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            ["resources"],
            "{project}/{stack}: output has other top-level keys"
        );
        let spec = parse_valid(&out, &format!("{project}/{stack}"));
        assert!(!spec.resources.is_empty());
        let golden = dir.join("expected.spec.yaml");
        if update {
            std::fs::write(&golden, &out).unwrap();
        }
        let want = std::fs::read_to_string(&golden)
            .unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
        assert!(
            out == want,
            "{project}/{stack}: output differs from {}; got:\n{out}",
            golden.display()
        );
        parse_valid(&want, &golden.display().to_string());
    }
    assert!(per_project.len() >= 3, "{per_project:?}");
    for (project, stacks) in &per_project {
        assert!(
            stacks.contains("dev") && stacks.contains("prod"),
            "{project} needs dev and prod stacks: {stacks:?}"
        );
    }
}

fn attrs(r: &kusion_kernel::Resource) -> serde_json::Value {
    serde_json::Value::Object(r.attributes.clone())
}

fn spec_of(project: &str, stack: &str) -> Spec {
    let dir = konfig_root().join("projects").join(project).join(stack);
    let out = compile(project, stack, &dir).unwrap();
    parse_valid(&out, &format!("{project}/{stack}"))
}

#[test]
fn guestbook_dev_is_namespace_deployment_service_configmap() {
    let spec = spec_of("guestbook", "dev");
    let ids: Vec<&str> = spec.resources.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "v1:Namespace:guestbook",
            "v1:ConfigMap:guestbook:guestbook-config",
            "apps/v1:Deployment:guestbook:guestbook",
            "v1:Service:guestbook:guestbook",
        ]
    );
    let deploy = spec.get("apps/v1:Deployment:guestbook:guestbook").unwrap();
    assert_eq!(attrs(deploy)["spec"]["replicas"], 2);
    assert_eq!(
        deploy.depends_on,
        [
            "v1:Namespace:guestbook",
            "v1:ConfigMap:guestbook:guestbook-config"
        ]
    );
    let svc = spec.get("v1:Service:guestbook:guestbook").unwrap();
    assert_eq!(svc.depends_on, ["v1:Namespace:guestbook"]);
    // the Service selects exactly the pods of the Deployment
    assert_eq!(
        attrs(svc)["spec"]["selector"],
        attrs(deploy)["spec"]["selector"]["matchLabels"]
    );
}

#[test]
fn dependencies_are_minimal() {
    for (project, stack, dir) in stacks(&konfig_root()) {
        let spec = parse_valid(&compile(&project, &stack, &dir).unwrap(), &stack);
        let kind = |id: &str| id.split(':').nth(1).unwrap_or_default().to_string();
        for r in &spec.resources {
            let ns = attrs(r)["metadata"]["namespace"].as_str().map(String::from);
            let k = kind(&r.id);
            for d in &r.depends_on {
                let dk = kind(d);
                assert_ne!(
                    dk, "Service",
                    "{project}/{stack}: {} depends on a Service",
                    r.id
                );
                match k.as_str() {
                    "Deployment" | "StatefulSet" | "Job" => assert!(
                        ["Namespace", "ConfigMap", "Secret", "ServiceAccount"]
                            .contains(&dk.as_str()),
                        "{project}/{stack}: {} -> {d}",
                        r.id
                    ),
                    _ => assert_eq!(dk, "Namespace", "{project}/{stack}: {} -> {d}", r.id),
                }
            }
            if let Some(ns) = ns {
                let ns_id = format!("v1:Namespace:{ns}");
                if spec.get(&ns_id).is_some() {
                    assert!(r.depends_on.contains(&ns_id), "{project}/{stack}: {}", r.id);
                }
            }
            // a workload depends on exactly what its pods use
            if ["Deployment", "StatefulSet", "Job"].contains(&k.as_str()) {
                let a = attrs(r);
                let pod = &a["spec"]["template"]["spec"];
                let text = pod.to_string();
                for d in &r.depends_on {
                    let name = d.rsplit(':').next().unwrap();
                    if kind(d) != "Namespace" {
                        assert!(
                            text.contains(&format!("\"{name}\"")),
                            "{}: {d} unused",
                            r.id
                        );
                    }
                }
                for cm in spec.resources.iter().filter(|x| kind(&x.id) == "ConfigMap") {
                    let cma = attrs(cm);
                    let name = cma["metadata"]["name"].as_str().unwrap();
                    let mounted = pod["volumes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|v| v["configMap"]["name"] == name);
                    let loaded = pod["containers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|c| c["envFrom"].as_array().into_iter().flatten())
                        .any(|e| e["configMapRef"]["name"] == name);
                    let used = mounted || loaded;
                    assert_eq!(
                        used,
                        r.depends_on.contains(&cm.id),
                        "{project}/{stack}: {} and {}",
                        r.id,
                        cm.id
                    );
                }
            }
        }
    }
}

/// The Kubernetes packages the models use; the vendored folder is exactly the importer's
/// output for these (and what they refer to).
const VENDORED: &[&str] = &["api/core/v1", "api/apps/v1", "api/batch/v1"];

fn shared_k8s_data() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    [
        std::env::var_os("KUSION_SHARED").map(PathBuf::from),
        Some(root.join("../shared")),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join("data/k8s"))
    .find(|d| d.is_dir())
    .expect("Kubernetes data not found: set KUSION_SHARED to the shared folder")
}

fn files_under(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
#[ignore = "needs the shared corpus (../shared or $KUSION_SHARED); .ci/corpus.sh runs it"]
fn vendored_k8s_is_the_importers_current_output() {
    let swagger = shared_k8s_data().join("kubernetes-release-1.31-swagger.json");
    let want = generate(
        &[read_openapi(&swagger).unwrap()],
        &ImportOptions {
            version: Some("1.31.0".into()),
            include: VENDORED.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        },
    )
    .unwrap();
    let have = files_under(&konfig_root().join("vendor/k8s"));
    let stale: Vec<&String> = have.keys().filter(|k| !want.contains_key(*k)).collect();
    let missing: Vec<&String> = want.keys().filter(|k| !have.contains_key(*k)).collect();
    assert!(
        stale.is_empty() && missing.is_empty(),
        "examples/konfig/vendor/k8s is out of date (regenerate it, see examples/konfig/README.md): extra {stale:?}, missing {missing:?}"
    );
    for (k, v) in &want {
        assert!(
            have[k] == *v,
            "examples/konfig/vendor/k8s/{k} differs from the importer's output"
        );
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// A scratch copy of the Konfig tree, to break things in.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("konfig");
    copy_tree(&konfig_root(), &root);
    (tmp, root)
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{}: no {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn kubernetes_field_typo_in_a_backend_model_is_a_compile_error() {
    let (_tmp, root) = scratch();
    edit(
        &root.join("models/backend/server.k"),
        "        replicas = s.replicas",
        "        replicaz = s.replicas",
    );
    let dir = root.join("projects/guestbook/dev");
    let err = compile("guestbook", "dev", &dir).unwrap_err();
    assert!(
        err.contains("replicaz") && err.contains("DeploymentSpec"),
        "{err}"
    );
    assert!(
        err.contains("server.k"),
        "the error names the model file: {err}"
    );
}

#[test]
fn frontend_checks_and_typos_in_stacks_are_errors() {
    let (_tmp, root) = scratch();
    let dir = root.join("projects/guestbook/dev");
    let main = dir.join("main.k");
    let original = std::fs::read_to_string(&main).unwrap();
    let cases = [
        (
            "replicas = 2",
            "replicas = 1000",
            "replicas must be between 0 and 100",
        ),
        ("replicas = 2", "replicaz = 2", "replicaz"),
        (
            "replicas = 2",
            "mainContainer: frontend.Main {ports = [{containerPort = 70000}]}",
            "containerPort must be between 1 and 65535",
        ),
        (
            "replicas = 2",
            "volumes = [{name = \"cfg\", configMap = \"nope\"}]",
            "a volume refers to a ConfigMap the workload does not define",
        ),
        ("replicas = 2", "workloadType = \"DaemonSet\"", "DaemonSet"),
    ];
    for (from, to, expect) in cases {
        std::fs::write(&main, original.replacen(from, to, 1)).unwrap();
        let err = compile("guestbook", "dev", &dir).expect_err(to);
        assert!(err.contains(expect), "{to}: {err}");
    }
    // Without the project option the workload has no name: as upstream KCL 0.12.4 does, the
    // required attribute is checked when the instance is made, before the schema's checks.
    std::fs::write(&main, &original).unwrap();
    let err = compile_without_project(&dir).unwrap_err();
    assert!(
        err.contains("attribute 'name' of Server is required"),
        "{err}"
    );
    // An empty name passes that check and meets the model's own.
    std::fs::write(
        &main,
        original.replacen("replicas = 2", "replicas = 2\n    name = \"\"", 1),
    )
    .unwrap();
    let err = compile("guestbook", "dev", &dir).unwrap_err();
    assert!(err.contains("needs a name"), "{err}");
}

fn compile_without_project(dir: &Path) -> Result<String, String> {
    let opts = RunOptions {
        work_dir: Some(dir.to_path_buf()),
        settings: vec![dir.join("kcl.yaml")],
        ..Default::default()
    };
    run_full(&[], &opts)
        .map(|o| o.text)
        .map_err(|e| e.to_string())
}

#[test]
fn two_workloads_claiming_one_object_is_an_error() {
    let (_tmp, root) = scratch();
    let dir = root.join("projects/guestbook/dev");
    let main = dir.join("main.k");
    let mut text = std::fs::read_to_string(&main).unwrap();
    text.push_str(
        "\n_other = frontend.Server {\n    name = \"other\"\n    namespace = \"guestbook\"\n    image = \"nginx\"\n    configMaps = [{name = \"guestbook-config\"}]\n}\n",
    );
    std::fs::write(&main, text).unwrap();
    let err = compile("guestbook", "dev", &dir).unwrap_err();
    assert!(
        err.contains("v1:ConfigMap:guestbook:guestbook-config"),
        "{err}"
    );
}

const KUSIONCTL: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");

#[test]
fn kusionctl_kcl_passes_through_to_the_kcl_tool() {
    // `kcl run` of a stack prints exactly its golden spec
    let dir = konfig_root().join("projects/guestbook/dev");
    let out = std::process::Command::new(KUSIONCTL)
        .current_dir(&dir)
        .args([
            "kcl",
            "run",
            "-Y",
            "kcl.yaml",
            "-D",
            "project=guestbook",
            "-D",
            "stack=dev",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = std::fs::read_to_string(dir.join("expected.spec.yaml")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);

    // `kcl import` with kcl's own -o (kusionctl's global -o must not take it)
    let tmp = tempfile::tempdir().unwrap();
    let swagger = tmp.path().join("swagger.json");
    std::fs::write(
        &swagger,
        r##"{"swagger": "2.0", "info": {"title": "t", "version": "v1"}, "paths": {},
  "definitions": {
    "io.k8s.api.batch.v1.JobSpec": {"type": "object", "required": ["template"],
      "properties": {"template": {"$ref": "#/definitions/io.k8s.api.core.v1.PodTemplateSpec"}}},
    "io.k8s.api.core.v1.PodTemplateSpec": {"type": "object",
      "properties": {"metadata": {"type": "object"}}}}}"##,
    )
    .unwrap();
    let out_dir = tmp.path().join("out");
    let out = std::process::Command::new(KUSIONCTL)
        .arg("kcl")
        .arg("import")
        .arg("--openapi")
        .arg(&swagger)
        .args(["--include", "api/batch/v1", "-o"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out_dir.join("api/batch/v1/job_spec.k").is_file());
    assert!(out_dir.join("api/core/v1/pod_template_spec.k").is_file());

    // kcl errors come back as a failing exit code
    let out = std::process::Command::new(KUSIONCTL)
        .args(["kcl", "run", "/nonexistent/x.k"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
