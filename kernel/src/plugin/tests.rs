//! Plugin host tests against real plugin builds (see `tests/dev-plugins`). Over 800 lines: one
//! test suite, each test standing alone.

use std::sync::Arc;
use std::time::Duration;

use kusion_dev_plugins::fixtures::{self, Fixture};
use kusion_sdk::function::FunctionPlugin;
use kusion_sdk::policy::Severity;
use kusion_sdk::runtime::{
    ApplyRequest, DeleteRequest, Health, ImportRequest, ReadRequest, Runtime, WatchPoll,
    WatchRequest,
};
use kusion_sdk::{ErrorKind, Map, Resource, Value};
use serde_json::json;

use super::*;

fn file_resource(id: &str, path: &str, content: &str) -> Resource {
    let mut attrs = Map::new();
    attrs.insert("path".into(), json!(path));
    attrs.insert("content".into(), json!(content));
    Resource::new(id, "LocalFile", attrs)
}

fn apply(runtime: &dyn Runtime, resource: &Resource, dry_run: bool) {
    runtime
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: resource.clone(),
            dry_run,
            timeout: None,
        })
        .unwrap();
}

fn read(runtime: &dyn Runtime, resource: &Resource) -> Option<Resource> {
    runtime
        .read(&ReadRequest {
            prior: Some(resource.clone()),
            prior_private: None,
            planned: None,
            timeout: None,
        })
        .unwrap()
        .resource
}

fn manifest(name: &str, kind: PluginKind, file: &str) -> Manifest {
    Manifest {
        name: name.into(),
        kind,
        version: "0.1.0".into(),
        file: file.into(),
        format: None,
        sha256: None,
        permissions: manifest::Permissions::default(),
        publisher: None,
        signature: None,
    }
}

/// A config searching only `dir` (no home directory or environment), with settings.
fn config_for(dir: &Path, settings: &[(&str, PluginSettings)]) -> PluginConfig {
    PluginConfig {
        path: vec![dir.to_path_buf()],
        default_dirs: false,
        settings: settings
            .iter()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect(),
        ..PluginConfig::default()
    }
}

#[test]
fn localfile_runtime_end_to_end_through_installed_plugin() {
    let lib = fixtures::build(Fixture::LocalFile);
    let plugins = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    manifest::install(
        plugins.path(),
        &manifest("localfile", PluginKind::Runtime, "x"),
        &lib,
    )
    .unwrap();
    let settings = PluginSettings {
        config: json!({"root": files.path()}),
        ..PluginSettings::default()
    };
    let loaded = load_plugins(&config_for(plugins.path(), &[("localfile", settings)]));
    assert_eq!(loaded.entries.len(), 1, "{:?}", loaded.entries);
    let entry = &loaded.entries[0];
    assert_eq!(entry.status, Status::Loaded, "{entry:?}");
    assert_eq!(entry.abi, Some(kusion_sdk::ABI_VERSION));
    assert!(
        entry.capabilities.contains(&"type:LocalFile".to_string()),
        "{:?}",
        entry.capabilities
    );
    assert!(entry.capabilities.contains(&"watch".to_string()));

    let runtime = loaded.runtime_for("LocalFile").expect("LocalFile runtime");
    let info = runtime.describe();
    assert_eq!(info.name, "localfile");
    assert!(info.capabilities.dry_run && info.capabilities.watch && info.capabilities.import);

    let res = file_resource("f1", "dir/a.txt", "hello");
    apply(runtime.as_ref(), &res, true);
    assert!(
        !files.path().join("dir/a.txt").exists(),
        "dry-run must not write"
    );
    assert_eq!(read(runtime.as_ref(), &res), None);

    apply(runtime.as_ref(), &res, false);
    assert_eq!(
        std::fs::read_to_string(files.path().join("dir/a.txt")).unwrap(),
        "hello"
    );
    let live = read(runtime.as_ref(), &res).expect("present after apply");
    assert_eq!(live.attributes["content"], "hello");

    let mut watch = runtime
        .watch(&WatchRequest {
            resource: res.clone(),
        })
        .unwrap();
    match watch.poll(Duration::from_secs(5)).unwrap() {
        WatchPoll::Event(e) => assert_eq!(e.health, Health::Ready, "{e:?}"),
        other => panic!("expected a Ready event, got {other:?}"),
    }
    assert_eq!(
        watch.poll(Duration::from_millis(10)).unwrap(),
        WatchPoll::Closed
    );

    // A watch on content not yet written reports progress, then readiness once it appears.
    let pending = file_resource("f2", "b.txt", "later");
    let mut watch = runtime
        .watch(&WatchRequest {
            resource: pending.clone(),
        })
        .unwrap();
    match watch.poll(Duration::from_millis(50)).unwrap() {
        WatchPoll::Event(e) => assert_eq!(e.health, Health::Progressing),
        other => panic!("expected Progressing, got {other:?}"),
    }
    assert_eq!(
        watch.poll(Duration::from_millis(50)).unwrap(),
        WatchPoll::Pending
    );
    apply(runtime.as_ref(), &pending, false);
    match watch.poll(Duration::from_secs(5)).unwrap() {
        WatchPoll::Event(e) => assert_eq!(e.health, Health::Ready),
        other => panic!("expected Ready, got {other:?}"),
    }

    let imported = runtime
        .import(&ImportRequest {
            planned: file_resource("f3", "", ""),
            import_id: Some("b.txt".into()),
            timeout: None,
        })
        .unwrap();
    assert_eq!(imported.resource.unwrap().attributes["content"], "later");

    runtime
        .delete(&DeleteRequest {
            resource: res.clone(),
            private: None,
            timeout: None,
        })
        .unwrap();
    assert_eq!(read(runtime.as_ref(), &res), None);
    // Deleting an absent object succeeds.
    runtime
        .delete(&DeleteRequest {
            resource: res.clone(),
            private: None,
            timeout: None,
        })
        .unwrap();

    // Errors from the plugin arrive structured.
    let escape = file_resource("bad", "../escape", "x");
    let err = runtime
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: escape,
            dry_run: false,
            timeout: None,
        })
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(
        err.message.contains("bad") && err.message.contains(".."),
        "{}",
        err.message
    );
}

#[test]
fn native_load_unload_and_reload() {
    let lib = fixtures::build(Fixture::NativeFunction);
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("dropped");
    let plugin = NativeLibrary::open(&lib).unwrap().function().unwrap();
    plugin.configure(&json!({"drop_marker": marker})).unwrap();
    assert_eq!(
        plugin
            .call("echo", &[json!({"a": 1})], &Map::new())
            .unwrap(),
        json!({"a": 1})
    );
    let clone = Arc::clone(&plugin);
    drop(plugin);
    assert!(!marker.exists(), "instance must live while a handle does");
    drop(clone);
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "dropped",
        "instance destroyed on unload"
    );

    // Loading the same library again gives a fresh, working instance.
    let again = NativeLibrary::open(&lib).unwrap().function().unwrap();
    assert_eq!(
        again.call("echo", &[json!("x")], &Map::new()).unwrap(),
        json!("x")
    );
    assert_eq!(again.describe().module, "fixture");
}

#[test]
fn plugin_built_against_the_abi_1_0_sdk_loads_and_answers_over_json() {
    // Built from the SDK sources of an older commit, not from today's SDK claiming 1.0.
    let lib = fixtures::build_sdk_1_0_fixture();
    let library = NativeLibrary::open(&lib).unwrap();
    assert_eq!(library.abi(), kusion_sdk::AbiVersion { major: 1, minor: 0 });
    assert!(!library.speaks_msgpack());
    let plugin = library.function().unwrap();
    let payload = json!({"items": ["a", 1, 2.5, null, {"nested": [true]}]});
    assert_eq!(
        plugin
            .call("echo", std::slice::from_ref(&payload), &Map::new())
            .unwrap(),
        payload
    );
    // A panic inside the old library is still contained.
    let err = plugin.call("panic", &[], &Map::new()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal, "{err}");
}

#[test]
fn current_plugins_answer_over_messagepack_with_the_same_values() {
    let lib = fixtures::build(Fixture::NativeFunction);
    let library = NativeLibrary::open(&lib).unwrap();
    assert_eq!(library.abi(), kusion_sdk::ABI_VERSION);
    assert!(library.speaks_msgpack());
    let plugin = library.function().unwrap();
    // Values whose types a binary encoding could blur: big and negative integers, floats that
    // are whole numbers, unicode, empty containers, key order.
    let payload = json!({
        "z": u64::MAX, "neg": i64::MIN, "whole": 2.0, "pi": 3.25, "s": "grüße \"quoted\"",
        "empty_list": [], "empty_map": {}, "a": null
    });
    let kwargs: Map<String, Value> = [("k".to_string(), json!([1, "x"]))].into_iter().collect();
    let answer = plugin
        .call("echo", std::slice::from_ref(&payload), &kwargs)
        .unwrap();
    assert_eq!(answer, payload);
    assert_eq!(
        serde_json::to_string(&answer).unwrap(),
        serde_json::to_string(&payload).unwrap(),
        "key order and number forms survive the trip"
    );
    let err = plugin.call("panic", &[], &Map::new()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal, "{err}");
    assert!(err.message.contains("panicked"), "{err}");
}

#[test]
fn native_abi_mismatch_is_refused_naming_both_versions() {
    let lib = fixtures::build(Fixture::NativeFunctionAbi2);
    let err = NativeLibrary::open(&lib).unwrap_err();
    assert!(matches!(err, LoadError::AbiMismatch { .. }), "{err}");
    let text = err.to_string();
    let host = format!("plugin ABI {}", kusion_sdk::ABI_VERSION);
    assert!(
        text.contains("plugin ABI 2.0") && text.contains(&host),
        "{text}"
    );

    // The listing says why, too.
    let plugins = tempfile::tempdir().unwrap();
    manifest::install(
        plugins.path(),
        &manifest("old", PluginKind::Function, "x"),
        &lib,
    )
    .unwrap();
    let entries = list_plugins(&config_for(plugins.path(), &[]));
    match &entries[0].status {
        Status::Refused(why) => assert!(
            why.contains("2.0") && why.contains(&kusion_sdk::ABI_VERSION.to_string()),
            "{why}"
        ),
        other => panic!("expected refusal, got {other:?}"),
    }
}

#[test]
fn native_panic_is_contained_and_names_the_plugin() {
    let lib = fixtures::build(Fixture::NativeFunction);
    let plugin = NativeLibrary::open(&lib).unwrap().function().unwrap();
    let err = plugin.call("panic", &[], &Map::new()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(
        err.message.contains("`fixture`") && err.message.contains("asked to panic"),
        "{}",
        err.message
    );
    // The plugin keeps working after the panic.
    assert_eq!(
        plugin.call("echo", &[json!(7)], &Map::new()).unwrap(),
        json!(7)
    );
}

#[test]
fn native_wrong_kind_and_non_plugin_are_refused() {
    let lib = fixtures::build(Fixture::NativeFunction);
    let err = NativeLibrary::open(&lib)
        .unwrap()
        .runtime()
        .err()
        .expect("function plugin is no runtime");
    assert!(
        err.to_string()
            .contains("is a function plugin, expected a runtime plugin"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("libjunk.so");
    std::fs::write(&junk, b"not an ELF file").unwrap();
    let err = NativeLibrary::open(&junk).unwrap_err();
    assert!(matches!(err, LoadError::Open { .. }), "{err}");
}

#[test]
fn native_concurrent_calls_from_many_threads() {
    let fixture = NativeLibrary::open(&fixtures::build(Fixture::NativeFunction))
        .unwrap()
        .function()
        .unwrap();
    let files = tempfile::tempdir().unwrap();
    let runtime = load_native_runtime(&fixtures::build(Fixture::LocalFile)).unwrap();
    runtime.configure(&json!({"root": files.path()})).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let fixture = Arc::clone(&fixture);
            let runtime = Arc::clone(&runtime);
            std::thread::spawn(move || {
                for i in 0..200 {
                    let v = json!({"thread": t, "i": i});
                    assert_eq!(
                        fixture
                            .call("echo", std::slice::from_ref(&v), &Map::new())
                            .unwrap(),
                        v
                    );
                    let res =
                        file_resource(&format!("r{t}"), &format!("t{t}.txt"), &format!("{i}"));
                    apply(runtime.as_ref(), &res, false);
                    assert_eq!(
                        read(runtime.as_ref(), &res).unwrap().attributes["content"],
                        json!(format!("{i}"))
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker thread");
    }
}

#[test]
fn tampered_plugin_fails_checksum_and_others_still_load() {
    let lib = fixtures::build(Fixture::NativeFunction);
    let plugins = tempfile::tempdir().unwrap();
    manifest::install(
        plugins.path(),
        &manifest("good", PluginKind::Function, "x"),
        &lib,
    )
    .unwrap();
    let bad = manifest::install(
        plugins.path(),
        &manifest("tampered", PluginKind::Function, "x"),
        &lib,
    )
    .unwrap();
    let bad_lib = bad.parent().unwrap().join(lib.file_name().unwrap());
    let mut bytes = std::fs::read(&bad_lib).unwrap();
    bytes.extend_from_slice(b"tamper");
    std::fs::write(&bad_lib, bytes).unwrap();
    std::fs::write(plugins.path().join("junk-manifest").join("plugin.toml"), "").ok();
    std::fs::create_dir_all(plugins.path().join("broken")).unwrap();
    std::fs::write(
        plugins.path().join("broken/plugin.toml"),
        "name = \"broken\"\nkind = 3\n",
    )
    .unwrap();

    let loaded = load_plugins(&config_for(plugins.path(), &[]));
    let by_name = |n: &str| {
        loaded
            .entries
            .iter()
            .find(|e| e.name == n)
            .unwrap_or_else(|| panic!("{n} listed"))
    };
    assert_eq!(by_name("good").status, Status::Loaded);
    assert!(loaded.functions.contains_key("good"));
    match &by_name("tampered").status {
        Status::Refused(why) => {
            assert!(why.contains("checksum") && why.contains("sha256"), "{why}")
        }
        other => panic!("tampered plugin should be refused: {other:?}"),
    }
    match &by_name("broken").status {
        Status::Refused(why) => assert!(
            why.contains("broken/plugin.toml") && why.contains("2:"),
            "{why}"
        ),
        other => panic!("broken manifest should be refused: {other:?}"),
    }
}

#[test]
fn installed_in_repo_plugins_are_discovered_and_selectable() {
    // The examples' own manifests, installed as scripts/stage-plugins.sh stages a checkout's
    // builds: a configured directory is all the host knows.
    let plugins = tempfile::tempdir().unwrap();
    for (example, fixture) in [
        ("localfile-runtime", Fixture::LocalFile),
        ("wasm-policy", Fixture::WasmPolicy),
    ] {
        let manifest_path = fixtures::workspace_root()
            .join("examples")
            .join(example)
            .join(MANIFEST_FILE);
        let manifest = Manifest::load(&manifest_path).unwrap();
        manifest::install(plugins.path(), &manifest, &fixtures::build(fixture)).unwrap();
    }
    let config = PluginConfig {
        path: vec![plugins.path().to_path_buf()],
        default_dirs: false,
        only: Some(vec!["deployment-limits".into()]),
        ..PluginConfig::default()
    };
    let loaded = load_plugins(&config);
    let policy = loaded
        .entries
        .iter()
        .find(|e| e.name == "deployment-limits")
        .expect("wasm policy listed");
    assert_eq!(policy.status, Status::Loaded, "{policy:?}");
    assert_eq!(policy.format, Some(Format::Wasm));
    assert_eq!(policy.kind, Some(PluginKind::Policy));
    let local = loaded
        .entries
        .iter()
        .find(|e| e.name == "localfile")
        .expect("localfile listed");
    assert!(
        matches!(&local.status, Status::Disabled(why) if why.contains("plugins.only")),
        "{local:?}"
    );
    assert!(loaded.runtimes.is_empty());
}

/// Compile each WASM fixture once per test process: compilation dominates these tests.
fn compiled(fixture: Fixture) -> wasm::WasmModule {
    static CACHE: std::sync::Mutex<Vec<(Fixture, wasm::WasmModule)>> =
        std::sync::Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, m)) = cache.iter().find(|(f, _)| *f == fixture) {
        return m.clone();
    }
    let module = WasmHost::new()
        .unwrap()
        .compile(&fixtures::build(fixture))
        .unwrap();
    cache.push((fixture, module.clone()));
    module
}

fn wasm_function(
    grants: WasmGrants,
    limits: WasmLimits,
    asked: manifest::Permissions,
) -> Arc<dyn FunctionPlugin> {
    let module = compiled(Fixture::WasmFunction);
    assert_eq!(module.kind(), PluginKind::Function);
    module
        .function(WasmGrants::intersect(&asked.as_request(), &grants), limits)
        .unwrap()
}

#[test]
fn wasm_policy_plugin_evaluates() {
    let policy = compiled(Fixture::WasmPolicy)
        .policy(WasmGrants::default(), WasmLimits::default())
        .unwrap();
    assert_eq!(policy.describe().name, "deployment-limits");
    let spec = json!({"resources": [
        {"id": "apps/v1:Deployment:default:web", "type": "Kubernetes", "attributes": {"kind": "Deployment",
         "spec": {"template": {"spec": {"containers": [{"name": "web", "resources": {}}]}}}}},
        {"id": "apps/v1:Deployment:default:ok", "type": "Kubernetes", "attributes": {"kind": "Deployment",
         "spec": {"template": {"spec": {"containers": [{"name": "ok",
           "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}}}
    ]});
    let findings = policy.evaluate(&spec, &json!({})).unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(
        findings[0].resource_id.as_deref(),
        Some("apps/v1:Deployment:default:web")
    );
    assert_eq!(findings[0].severity, Severity::Deny);
    policy.configure(&json!({"severity": "warn"})).unwrap();
    assert_eq!(
        policy.evaluate(&spec, &json!({})).unwrap()[0].severity,
        Severity::Warn
    );
    let err = policy.configure(&json!({"severity": "loud"})).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput, "{err:?}");
    let err = policy
        .evaluate(&json!({"no": "resources"}), &json!({}))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
}

#[test]
fn wasm_infinite_loop_runs_out_of_fuel() {
    let limits = WasmLimits {
        fuel: 50_000_000,
        ..WasmLimits::default()
    };
    let plugin = wasm_function(WasmGrants::default(), limits, Default::default());
    let started = std::time::Instant::now();
    let err = plugin.call("spin", &[], &Map::new()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err:?}");
    assert!(
        err.message.contains("ran out of fuel") && err.message.contains("wasm_fixture"),
        "{}",
        err.message
    );
    assert!(!err.retryable);
    assert!(started.elapsed() < Duration::from_secs(30));
    // The plugin still answers after the trapped instance was thrown away.
    assert_eq!(
        plugin.call("echo", &[json!(1)], &Map::new()).unwrap(),
        json!(1)
    );
}

#[test]
fn wasm_memory_blowup_hits_the_memory_limit() {
    let limits = WasmLimits {
        memory_bytes: 32 << 20,
        ..WasmLimits::default()
    };
    let plugin = wasm_function(WasmGrants::default(), limits, Default::default());
    let err = plugin.call("grow", &[], &Map::new()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(
        err.message.contains("exceeded its memory limit (32.0 MiB)"),
        "{}",
        err.message
    );
    assert_eq!(
        plugin.call("echo", &[json!("ok")], &Map::new()).unwrap(),
        json!("ok")
    );
}

#[test]
fn wasm_file_and_env_access_needs_manifest_and_grant() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("secret.txt"), "s3cret").unwrap();
    let host_path = data.path().join("secret.txt");
    let grant = WasmGrants {
        dirs: [("/data".to_string(), data.path().to_path_buf())].into(),
        env: vec!["PATH".into()],
        ..WasmGrants::default()
    };
    let asks = manifest::Permissions {
        dirs: vec!["/data".into()],
        env: vec!["PATH".into()],
        ..Default::default()
    };

    // No manifest request: the operator's grant alone gives nothing.
    let plugin = wasm_function(grant.clone(), WasmLimits::default(), Default::default());
    for path in ["/data/secret.txt", host_path.to_str().unwrap()] {
        let err = plugin
            .call("read_file", &[json!(path)], &Map::new())
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Rejected, "{path}: {err:?}");
    }
    assert_eq!(
        plugin.call("env", &[json!("PATH")], &Map::new()).unwrap(),
        Value::Null
    );

    // Asked for but not granted: still nothing.
    let plugin = wasm_function(WasmGrants::default(), WasmLimits::default(), asks.clone());
    assert!(
        plugin
            .call("read_file", &[json!("/data/secret.txt")], &Map::new())
            .is_err()
    );

    // Asked and granted: the mapped directory (only) is readable.
    let plugin = wasm_function(grant, WasmLimits::default(), asks);
    assert_eq!(
        plugin
            .call("read_file", &[json!("/data/secret.txt")], &Map::new())
            .unwrap(),
        json!("s3cret")
    );
    assert!(
        plugin
            .call(
                "read_file",
                &[json!(host_path.to_str().unwrap())],
                &Map::new()
            )
            .is_err()
    );
    assert_eq!(
        plugin.call("env", &[json!("PATH")], &Map::new()).unwrap(),
        json!(std::env::var("PATH").unwrap())
    );
}

#[test]
fn wasm_panic_is_contained_with_its_message() {
    let plugin = wasm_function(
        WasmGrants::default(),
        WasmLimits::default(),
        Default::default(),
    );
    let err = plugin.call("panic", &[], &Map::new()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    assert!(
        err.message.contains("wasm_fixture") && err.message.contains("asked to panic"),
        "{}",
        err.message
    );
    assert_eq!(
        plugin.call("echo", &[json!(2)], &Map::new()).unwrap(),
        json!(2)
    );
}

#[test]
fn wasm_concurrent_calls_from_many_threads() {
    let plugin = wasm_function(
        WasmGrants::default(),
        WasmLimits::default(),
        Default::default(),
    );
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let plugin = Arc::clone(&plugin);
            std::thread::spawn(move || {
                for i in 0..50 {
                    let v = json!([t, i]);
                    assert_eq!(
                        plugin
                            .call("echo", std::slice::from_ref(&v), &Map::new())
                            .unwrap(),
                        v
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker thread");
    }
}

#[test]
fn wasm_component_of_the_wrong_kind_is_refused() {
    let err = compiled(Fixture::WasmFunction)
        .policy(WasmGrants::default(), WasmLimits::default())
        .err()
        .unwrap();
    let host = WasmHost::new().unwrap();
    assert!(
        err.to_string()
            .contains("is a function plugin, expected a policy plugin"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm junk").unwrap();
    assert!(matches!(host.compile(&junk), Err(LoadError::Wasm { .. })));
}

/// Replace every occurrence of `from` in `bytes` with `to` (same length).
pub(super) fn patch(bytes: &[u8], from: &[u8], to: &[u8]) -> (Vec<u8>, usize) {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let mut count = 0;
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            count += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    (out, count)
}

#[test]
fn wasm_component_for_another_contract_major_is_refused() {
    // The same component, renamed to export `kusion:plugin/function@2.0.0` (names are plain
    // strings in the binary, so a same-length rename keeps it a valid component).
    let bytes = std::fs::read(fixtures::build(Fixture::WasmFunction)).unwrap();
    let (renamed, count) = patch(
        &bytes,
        b"kusion:plugin/function@1.0.0",
        b"kusion:plugin/function@2.0.0",
    );
    assert!(count > 0, "the fixture should name its export");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.wasm");
    std::fs::write(&path, renamed).unwrap();
    let err = WasmHost::new()
        .unwrap()
        .compile(&path)
        .err()
        .expect("refused");
    assert!(matches!(err, LoadError::AbiMismatch { .. }), "{err}");
    let text = err.to_string();
    let host = format!("plugin ABI {}", kusion_sdk::ABI_VERSION);
    assert!(
        text.contains("plugin ABI 2.0") && text.contains(&host),
        "{text}"
    );
}

#[test]
fn compiled_wasm_components_are_cached_on_disk_and_bad_entries_recompiled() {
    let wasm = fixtures::build(Fixture::WasmFunction);
    let cache = tempfile::tempdir().unwrap();
    let host = WasmHost::with_cache(Some(cache.path().to_path_buf())).unwrap();
    let (first, from_cache) = host.compile_reporting_cache(&wasm).unwrap();
    assert!(!from_cache, "an empty cache cannot serve the first load");
    drop(first);
    let entries: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");

    // A second host (a later kusionctl run) loads the compiled code, and it works.
    let host = WasmHost::with_cache(Some(cache.path().to_path_buf())).unwrap();
    let (module, from_cache) = host.compile_reporting_cache(&wasm).unwrap();
    assert!(from_cache);
    let plugin = module
        .function(WasmGrants::default(), WasmLimits::default())
        .unwrap();
    assert_eq!(
        plugin
            .call("echo", &[json!({"a": [1]})], &Map::new())
            .unwrap(),
        json!({"a": [1]})
    );

    // A damaged entry is thrown away and the component compiled again.
    std::fs::write(&entries[0], b"not a compiled component").unwrap();
    let (module, from_cache) = host.compile_reporting_cache(&wasm).unwrap();
    assert!(!from_cache);
    let plugin = module
        .function(WasmGrants::default(), WasmLimits::default())
        .unwrap();
    assert_eq!(
        plugin.call("echo", &[json!(1)], &Map::new()).unwrap(),
        json!(1)
    );
    assert_ne!(
        std::fs::read(&entries[0]).unwrap(),
        b"not a compiled component"
    );
}

/// A library in a plugin directory others can write is refused before it is opened: its
/// constructor never runs. The same library in a private directory does run it (so the check
/// can fail).
#[test]
fn libraries_in_world_writable_directories_never_run() {
    use std::os::unix::fs::PermissionsExt;
    let lib = fixtures::build(Fixture::NativeFunction);
    // One log per test process (set once, always to the same value); each line names the
    // library whose constructor ran, so other tests' loads do not count.
    static LOG: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let marker = LOG.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("kusion-constructors-{}", std::process::id()));
        // SAFETY: set once, before this test loads anything, always to the same value.
        unsafe { std::env::set_var("KUSION_FIXTURE_CONSTRUCTOR_LOG", &path) };
        path
    });
    let ran = |lib: &Path| {
        std::fs::read_to_string(marker)
            .unwrap_or_default()
            .lines()
            .any(|l| Path::new(l) == lib)
    };
    let plugins = tempfile::tempdir().unwrap();
    let shared = plugins.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    // A copy, so no earlier test of this process has mapped the same file.
    let copy = plugins.path().join("copy.so");
    std::fs::copy(&lib, &copy).unwrap();
    manifest::install(
        &shared,
        &manifest("planted", PluginKind::Function, "x"),
        &copy,
    )
    .unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let loaded = load_plugins(&config_for(&shared, &[]));
    match &loaded.entries[0].status {
        Status::Refused(why) => assert!(why.contains("writable by everyone"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let installed = shared.join("planted").join("copy.so");
    assert!(
        !ran(&installed),
        "the library's constructor ran though its directory is world-writable"
    );
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let loaded = load_plugins(&config_for(&shared, &[]));
    assert_eq!(loaded.entries[0].status, Status::Loaded);
    assert!(
        ran(&installed),
        "the constructor runs once the plugin is trusted"
    );
}

#[test]
fn a_manifest_file_outside_its_directory_is_refused() {
    let plugins = tempfile::tempdir().unwrap();
    let dir = plugins.path().join("escape");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        "name = \"escape\"\nkind = \"function\"\nversion = \"1\"\nfile = \"../../x.so\"\n",
    )
    .unwrap();
    let loaded = load_plugins(&config_for(plugins.path(), &[]));
    match &loaded.entries[0].status {
        Status::Refused(why) => assert!(why.contains("inside the manifest's directory"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}
