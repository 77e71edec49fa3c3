//! Protocol 6 end to end, against the crate's own fixture provider (`tfplugin6-fixture`),
//! installed into a temporary filesystem mirror.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kusion_runtime_terraform::TerraformRuntime;
use kusion_sdk::runtime::{
    ApplyRequest, ApplyResponse, DeleteRequest, ImportRequest, ReadRequest, Runtime,
};
use kusion_sdk::{ErrorKind, Map, Resource};
use serde_json::{Value, json};

const ADDRESS: &str = "registry.example.com/kusion/fixture/0.1.0";

struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
    mirror: PathBuf,
    logs: PathBuf,
    rt: TerraformRuntime,
}

fn env() -> Env {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().unwrap();
    let mirror = dir.path().join("mirror");
    let package = mirror
        .join("registry.example.com/kusion/fixture/0.1.0")
        .join(kusion_runtime_terraform::install::platform());
    std::fs::create_dir_all(&package).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_tfplugin6-fixture"),
        package.join("terraform-provider-fixture_v0.1.0"),
    )
    .unwrap();
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    let logs = dir.path().join("logs");
    let rt = TerraformRuntime::new().unwrap();
    rt.configure(&json!({
        "mirrors": [mirror],
        "logDir": logs,
        "stateDir": dir.path().join("state"),
        "pluginCacheDir": dir.path().join("cache"),
        "schemaCacheDir": dir.path().join("schemas"),
        "offline": true,
    }))
    .unwrap();
    Env {
        root,
        mirror,
        logs,
        rt,
        _dir: dir,
    }
}

fn file(env: &Env, name: &str, attributes: Value) -> Resource {
    let Value::Object(attributes) = attributes else {
        unreachable!()
    };
    let mut r = Resource::new(
        format!("kusion:fixture:fixture_file:{name}"),
        "Terraform",
        attributes,
    );
    let mut ext = Map::new();
    ext.insert("provider".into(), json!(ADDRESS));
    ext.insert("providerMeta".into(), json!({"root": env.root}));
    ext.insert("resourceType".into(), json!("fixture_file"));
    r.extensions = ext;
    r
}

fn run(
    rt: &TerraformRuntime,
    prior: Option<&ApplyResponse>,
    planned: &Resource,
    dry_run: bool,
) -> ApplyResponse {
    rt.apply(&ApplyRequest {
        prior: prior.map(|p| p.resource.clone()),
        prior_private: prior.and_then(|p| p.private.clone()),
        planned: planned.clone(),
        dry_run,
        timeout: Some(Duration::from_secs(30)),
    })
    .unwrap_or_else(|e| panic!("{}: {e}", planned.id))
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn protocol6_provider_lifecycle() {
    let env = env();
    let rt = &env.rt;
    let spec = file(
        &env,
        "a",
        json!({"path": "a.txt", "content": "hello", "secret": "s3cr3t", "labels": {"team": "infra"}}),
    );

    // Create: dry-run shows computed values as unknown and the sensitive attribute as such.
    let plan = run(rt, None, &spec, true);
    assert_eq!(plan.unknown_paths, vec!["id", "sha256"]);
    assert_eq!(plan.sensitive_paths, vec!["secret"]);
    assert_eq!(plan.resource.attributes["labels"], json!({"team": "infra"}));
    assert!(
        !env.root.join("a.txt").exists(),
        "a dry-run must not change anything"
    );
    let (_, pid) = rt.provider_processes()[0].clone();

    let created = run(rt, None, &spec, false);
    assert_eq!(
        std::fs::read_to_string(env.root.join("a.txt")).unwrap(),
        "hello"
    );
    assert_eq!(created.resource.attributes["id"], json!("a.txt"));
    assert_eq!(
        created.resource.attributes["sha256"],
        json!("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
    );
    assert_eq!(created.sensitive_paths, vec!["secret"]);
    assert!(
        created
            .private
            .as_deref()
            .unwrap()
            .contains("schemaVersion")
    );

    // No change.
    let plan = run(rt, Some(&created), &spec, true);
    assert_eq!(plan.resource.attributes, created.resource.attributes);
    assert!(plan.unknown_paths.is_empty() && plan.requires_replace.is_empty());

    // Content change: content differs, sha256 becomes unknown.
    let mut changed = spec.clone();
    changed.attributes.insert("content".into(), json!("bye"));
    let plan = run(rt, Some(&created), &changed, true);
    assert_eq!(plan.resource.attributes["content"], json!("bye"));
    assert_eq!(plan.unknown_paths, vec!["sha256"]);
    let updated = run(rt, Some(&created), &changed, false);
    assert_eq!(
        std::fs::read_to_string(env.root.join("a.txt")).unwrap(),
        "bye"
    );

    // Drift: edit the file behind the runtime's back; read sees it.
    std::fs::write(env.root.join("a.txt"), "edited").unwrap();
    let live = rt
        .read(&ReadRequest {
            prior: Some(updated.resource.clone()),
            prior_private: updated.private.clone(),
            planned: None,
            timeout: None,
        })
        .unwrap()
        .resource
        .unwrap();
    assert_eq!(live.attributes["content"], json!("edited"));

    // State written by an older schema version is upgraded by the provider.
    let mut old = updated.resource.clone();
    let content = old.attributes.shift_remove("content").unwrap();
    old.attributes.insert("text".into(), content);
    let upgraded = rt
        .read(&ReadRequest {
            prior: Some(old),
            prior_private: Some(r#"{"schemaVersion":0}"#.into()),
            planned: None,
            timeout: None,
        })
        .unwrap()
        .resource
        .unwrap();
    assert_eq!(upgraded.attributes["content"], json!("edited"));

    // Path change forces a replacement; applying it moves the file.
    let mut moved = changed.clone();
    moved.attributes.insert("path".into(), json!("b.txt"));
    let plan = run(rt, Some(&updated), &moved, true);
    assert_eq!(plan.requires_replace, vec!["path"]);
    let replaced = run(rt, Some(&updated), &moved, false);
    assert!(!env.root.join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.root.join("b.txt")).unwrap(),
        "bye"
    );
    assert_eq!(replaced.resource.attributes["id"], json!("b.txt"));

    // Import an unmanaged file.
    std::fs::write(env.root.join("c.txt"), "found").unwrap();
    let mut adopt = file(&env, "c", json!({"path": "c.txt", "content": "found"}));
    adopt
        .extensions
        .insert("kusionstack.io/import-id".into(), json!("c.txt"));
    let imported = rt
        .import(&ImportRequest {
            planned: adopt.clone(),
            import_id: None,
            timeout: None,
        })
        .unwrap()
        .resource
        .unwrap();
    assert_eq!(imported.attributes["content"], json!("found"));
    let missing = rt
        .import(&ImportRequest {
            planned: adopt,
            import_id: Some("nope.txt".into()),
            timeout: None,
        })
        .unwrap_err();
    assert_eq!(missing.kind, ErrorKind::Rejected);
    assert!(
        missing.message.contains("no file nope.txt"),
        "{}",
        missing.message
    );

    // Delete, and deleting again succeeds.
    rt.delete(&DeleteRequest {
        resource: replaced.resource.clone(),
        private: replaced.private.clone(),
        timeout: None,
    })
    .unwrap();
    assert!(!env.root.join("b.txt").exists());
    rt.delete(&DeleteRequest {
        resource: replaced.resource.clone(),
        private: replaced.private.clone(),
        timeout: None,
    })
    .unwrap();

    // One process served everything; shutdown stops it and removes its socket.
    assert_eq!(rt.provider_processes(), vec![(ADDRESS.to_string(), pid)]);
    rt.shutdown();
    assert!(
        !pid_alive(pid),
        "provider {pid} still running after shutdown"
    );
    assert!(
        !std::env::temp_dir()
            .join(format!("tfplugin6-fixture-{pid}.sock"))
            .exists()
    );
    assert!(env.logs.read_dir().is_ok());
    let _ = &env.mirror;
}

#[test]
fn provider_configuration_errors_name_the_resource_and_attribute() {
    let env = env();
    let mut spec = file(&env, "bad", json!({"path": "x", "content": "y"}));
    spec.extensions
        .insert("providerMeta".into(), json!({"root": ""}));
    let e = env
        .rt
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: spec.clone(),
            dry_run: true,
            timeout: None,
        })
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Rejected);
    assert_eq!(
        e.message,
        format!(
            "kusion:fixture:fixture_file:bad: provider {ADDRESS} configuration: root must be a directory path (at root)"
        )
    );
    spec.extensions
        .insert("providerMeta".into(), json!({"root": env.root, "nope": 1}));
    let e = env
        .rt
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: spec.clone(),
            dry_run: true,
            timeout: None,
        })
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput);
    assert!(
        e.message.contains("at nope: unsupported attribute"),
        "{}",
        e.message
    );
    let mut spec = file(
        &env,
        "bad2",
        json!({"path": "x", "content": "y", "sha256": "zz"}),
    );
    spec.extensions
        .insert("providerMeta".into(), json!({"root": env.root}));
    let e = env
        .rt
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: spec,
            dry_run: true,
            timeout: None,
        })
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidInput);
    assert!(
        e.message.starts_with(
            "kusion:fixture:fixture_file:bad2: at sha256: this attribute is read-only"
        ),
        "{}",
        e.message
    );
}

/// A no-change dry-run answers without PlanResourceChange only when this operation's read found
/// the recorded state and the configuration is the one last applied; drift or a configuration
/// change plans as usual.
#[test]
fn unchanged_dry_runs_skip_planning_only_when_nothing_changed() {
    let env = env();
    let rt = &env.rt;
    let plans = || {
        std::fs::read_to_string(env.root.join(".plan-calls"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let read = |stored: &ApplyResponse| {
        rt.read(&ReadRequest {
            prior: Some(stored.resource.clone()),
            prior_private: stored.private.clone(),
            planned: None,
            timeout: Some(Duration::from_secs(30)),
        })
        .unwrap()
        .resource
        .expect("the file exists")
    };
    let spec = file(&env, "skip", json!({"path": "skip.txt", "content": "one"}));
    let created = run(rt, None, &spec, false);

    // Without a read in this operation the dry-run plans.
    let before = plans();
    run(rt, Some(&created), &spec, true);
    assert_eq!(plans(), before + 1, "no read yet: planned");

    // Read finds the recorded state, configuration unchanged: no plan, the recorded object.
    let live = read(&created);
    assert_eq!(live.attributes, created.resource.attributes);
    let before = plans();
    let plan = run(rt, Some(&created), &spec, true);
    assert_eq!(plans(), before, "unchanged: answered without planning");
    assert_eq!(plan.resource.attributes, created.resource.attributes);
    assert!(plan.unknown_paths.is_empty() && plan.requires_replace.is_empty());

    // A configuration change plans (and shows the change).
    let mut changed = spec.clone();
    changed.attributes.insert("content".into(), json!("two"));
    let before = plans();
    let plan = run(rt, Some(&created), &changed, true);
    assert_eq!(plans(), before + 1, "configuration changed: planned");
    assert_eq!(plan.unknown_paths, vec!["sha256"]);

    // Drift (the file changed outside): the read differs from the state, so the dry-run plans.
    std::fs::write(env.root.join("skip.txt"), "drifted").unwrap();
    let live = read(&created);
    assert_ne!(live.attributes, created.resource.attributes);
    let before = plans();
    run(rt, Some(&created), &spec, true);
    assert_eq!(plans(), before + 1, "drifted: planned");
}
