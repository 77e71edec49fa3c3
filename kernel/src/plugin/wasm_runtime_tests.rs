//! WASM runtime plugins against the real fixture component
//! (`tests/dev-plugins/fixtures/wasm-runtime-fixture`): the verbs and their contract, the limits,
//! the sandbox, loading through a manifest, and an apply through the kernel's operation path
//! beside a native runtime. Over 800 lines: one test suite, each test standing alone.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use kusion_dev_plugins::fixtures::{self, Fixture};
use kusion_sdk::runtime::{
    ApplyRequest, DeleteRequest, Health, ImportRequest, ReadRequest, Runtime, WatchPoll,
    WatchRequest,
};
use kusion_sdk::{ErrorKind, PluginError, Resource, Value};
use serde_json::json;

use super::*;

/// Compile the fixture once per test process: compilation dominates these tests.
fn module() -> wasm::WasmModule {
    static MODULE: std::sync::OnceLock<wasm::WasmModule> = std::sync::OnceLock::new();
    MODULE
        .get_or_init(|| {
            WasmHost::new()
                .unwrap()
                .compile(&fixtures::build(Fixture::WasmRuntime))
                .unwrap()
        })
        .clone()
}

/// The manifest's request: the data directory, writable.
fn asks() -> WasmGrants {
    manifest::Permissions {
        dirs: vec!["/data".into()],
        writable: true,
        ..Default::default()
    }
    .as_request()
}

/// A runtime whose `/data` is `dir` (asked for and granted).
fn runtime_in(dir: &Path, limits: WasmLimits) -> Arc<dyn Runtime> {
    let granted = WasmGrants {
        dirs: [("/data".to_string(), dir.to_path_buf())].into(),
        writable: true,
        ..WasmGrants::default()
    };
    module()
        .runtime(WasmGrants::intersect(&asks(), &granted), limits)
        .unwrap()
}

fn kv(id: &str, key: &str, value: Value) -> Resource {
    let mut r = Resource::new(id, "WasmKv", Default::default());
    r.attributes.insert("key".into(), json!(key));
    r.attributes.insert("value".into(), value);
    r
}

fn misbehaving(id: &str, test: &str) -> Resource {
    let mut r = kv(id, &id.replace(':', "-"), json!(1));
    r.attributes.insert("test".into(), json!(test));
    r
}

fn apply_req(prior: Option<&Resource>, planned: &Resource, dry_run: bool) -> ApplyRequest {
    ApplyRequest {
        prior: prior.cloned(),
        prior_private: None,
        planned: planned.clone(),
        dry_run,
        timeout: None,
    }
}

fn read(runtime: &dyn Runtime, r: &Resource) -> Option<Resource> {
    runtime
        .read(&ReadRequest {
            prior: Some(r.clone()),
            prior_private: None,
            planned: None,
            timeout: None,
        })
        .unwrap()
        .resource
}

fn stored(dir: &Path, key: &str) -> Option<Value> {
    std::fs::read_to_string(dir.join(format!("{key}.json")))
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap())
}

fn apply_err(runtime: &dyn Runtime, r: &Resource) -> PluginError {
    runtime.apply(&apply_req(None, r, false)).unwrap_err()
}

#[test]
fn wasm_runtime_creates_reads_updates_imports_watches_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_in(dir.path(), WasmLimits::default());
    let info = runtime.describe();
    assert_eq!(info.name, "wasm-kv");
    assert_eq!(info.resource_types, ["WasmKv"]);
    assert!(info.capabilities.dry_run && info.capabilities.watch && info.capabilities.import);
    assert_eq!(info.abi, kusion_sdk::ABI_VERSION);

    // Absent is a value, before anything exists.
    let a = kv("kv:a", "a", json!({"n": 1, "s": "x"}));
    assert_eq!(read(runtime.as_ref(), &a), None);

    // A dry-run answers without writing.
    let planned = runtime.apply(&apply_req(None, &a, true)).unwrap();
    assert_eq!(planned.resource, a);
    assert_eq!(stored(dir.path(), "a"), None, "dry-run must not write");

    // Create.
    runtime.apply(&apply_req(None, &a, false)).unwrap();
    assert_eq!(stored(dir.path(), "a"), Some(json!({"n": 1, "s": "x"})));
    assert_eq!(read(runtime.as_ref(), &a), Some(a.clone()));

    // Update, including a key change that moves the object.
    let b = kv("kv:a", "b", json!([1, 2]));
    runtime.apply(&apply_req(Some(&a), &b, false)).unwrap();
    assert_eq!(stored(dir.path(), "a"), None);
    assert_eq!(stored(dir.path(), "b"), Some(json!([1, 2])));
    assert_eq!(
        read(runtime.as_ref(), &b).unwrap().attributes["value"],
        json!([1, 2])
    );

    // A change made behind the runtime's back is what read reports.
    std::fs::write(dir.path().join("b.json"), "\"drifted\"").unwrap();
    assert_eq!(
        read(runtime.as_ref(), &b).unwrap().attributes["value"],
        json!("drifted")
    );

    // Import adopts an existing object by its key.
    let imported = runtime
        .import(&ImportRequest {
            planned: kv("kv:c", "", Value::Null),
            import_id: Some("b".into()),
            timeout: None,
        })
        .unwrap();
    assert_eq!(imported.resource.unwrap().attributes["value"], "drifted");
    assert_eq!(runtime.target(&b).unwrap(), None);

    // Watch: progressing while the value differs, ready once it matches, then closed.
    let mut watch = runtime
        .watch(&WatchRequest {
            resource: b.clone(),
        })
        .unwrap();
    match watch.poll(Duration::from_millis(50)).unwrap() {
        WatchPoll::Event(e) => assert_eq!(e.health, Health::Progressing, "{e:?}"),
        other => panic!("expected Progressing, got {other:?}"),
    }
    assert_eq!(
        watch.poll(Duration::from_millis(50)).unwrap(),
        WatchPoll::Pending
    );
    runtime.apply(&apply_req(None, &b, false)).unwrap();
    match watch.poll(Duration::from_secs(5)).unwrap() {
        WatchPoll::Event(e) => assert_eq!(e.health, Health::Ready, "{e:?}"),
        other => panic!("expected Ready, got {other:?}"),
    }
    assert_eq!(
        watch.poll(Duration::from_millis(10)).unwrap(),
        WatchPoll::Closed
    );
    drop(watch);

    // Delete, twice: deleting an absent object succeeds.
    for _ in 0..2 {
        runtime
            .delete(&DeleteRequest {
                resource: b.clone(),
                private: None,
                timeout: None,
            })
            .unwrap();
    }
    assert_eq!(stored(dir.path(), "b"), None);
    assert_eq!(read(runtime.as_ref(), &b), None);

    // Errors arrive structured: the plugin's kind, message and retryability.
    let err = apply_err(runtime.as_ref(), &kv("kv:bad", "../escape", json!(1)));
    assert_eq!(err.kind, ErrorKind::InvalidInput, "{err:?}");
    assert!(err.message.contains("kv:bad"), "{}", err.message);
    let err = apply_err(runtime.as_ref(), &misbehaving("kv:f", "fail"));
    assert_eq!(err.kind, ErrorKind::Rejected, "{err:?}");
    assert!(!err.retryable);
    assert!(err.message.contains("asks to fail"), "{}", err.message);
    let err = runtime.configure(&json!({"dir": 5})).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput, "{err:?}");
}

/// kusionctl's commands are async: a call from a thread driving a Tokio runtime must work, though
/// wasmtime-wasi's synchronous file calls block on a runtime of their own.
#[test]
fn wasm_runtime_calls_work_from_inside_an_async_task() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_in(dir.path(), WasmLimits::default());
    let a = kv("kv:a", "a", json!("async"));
    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    tokio.block_on(async {
        runtime.apply(&apply_req(None, &a, false)).unwrap();
        assert_eq!(
            read(runtime.as_ref(), &a).unwrap().attributes["value"],
            "async"
        );
    });
    assert_eq!(stored(dir.path(), "a"), Some(json!("async")));
}

#[test]
fn wasm_runtime_runaway_calls_hit_the_limit_that_stopped_them() {
    let dir = tempfile::tempdir().unwrap();
    let ok = kv("kv:ok", "ok", json!("fine"));

    let fuel = runtime_in(
        dir.path(),
        WasmLimits {
            fuel: 50_000_000,
            ..WasmLimits::default()
        },
    );
    let err = apply_err(fuel.as_ref(), &misbehaving("spin", "spin"));
    assert_eq!(err.kind, ErrorKind::Timeout, "{err:?}");
    assert!(
        err.message.contains("ran out of fuel (50000000 units)")
            && err.message.contains("wasm-kv")
            && err.message.contains("`apply`"),
        "{}",
        err.message
    );
    // The trapped instance was thrown away; the runtime still answers.
    fuel.apply(&apply_req(None, &ok, false)).unwrap();

    // With fuel to spare, the wall clock stops the same loop.
    let wall = runtime_in(
        dir.path(),
        WasmLimits {
            fuel: u64::MAX,
            wall_clock_ms: 300,
            ..WasmLimits::default()
        },
    );
    let started = Instant::now();
    let err = apply_err(wall.as_ref(), &misbehaving("spin", "spin"));
    let took = started.elapsed();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err:?}");
    assert!(
        err.message
            .contains("exceeded its wall-clock limit (300 ms)"),
        "{}",
        err.message
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(20),
        "{took:?}"
    );
    assert_eq!(
        read(wall.as_ref(), &ok).unwrap().attributes["value"],
        "fine"
    );

    let memory = runtime_in(
        dir.path(),
        WasmLimits {
            memory_bytes: 32 << 20,
            ..WasmLimits::default()
        },
    );
    let err = apply_err(memory.as_ref(), &misbehaving("grow", "grow"));
    assert_eq!(err.kind, ErrorKind::Internal, "{err:?}");
    assert!(
        err.message.contains("exceeded its memory limit (32.0 MiB)"),
        "{}",
        err.message
    );
    memory.apply(&apply_req(None, &ok, false)).unwrap();

    let err = apply_err(memory.as_ref(), &misbehaving("boom", "panic"));
    assert_eq!(err.kind, ErrorKind::Internal, "{err:?}");
    assert!(err.message.contains("asks to panic"), "{}", err.message);
    assert_eq!(
        read(memory.as_ref(), &ok).unwrap().attributes["value"],
        "fine"
    );
}

#[test]
fn wasm_runtime_reaches_only_what_is_asked_for_and_granted() {
    let dir = tempfile::tempdir().unwrap();
    let a = kv("kv:a", "a", json!(1));

    // Granted but not asked for, and asked for but not granted: no directory at all.
    let granted = WasmGrants {
        dirs: [("/data".to_string(), dir.path().to_path_buf())].into(),
        writable: true,
        network: true,
        ..WasmGrants::default()
    };
    for effective in [
        WasmGrants::intersect(&WasmGrants::default(), &granted),
        WasmGrants::intersect(&asks(), &WasmGrants::default()),
    ] {
        let runtime = module().runtime(effective, WasmLimits::default()).unwrap();
        let err = apply_err(runtime.as_ref(), &a);
        assert!(err.message.contains("/data/a.json"), "{}", err.message);
        assert_eq!(stored(dir.path(), "a"), None);
    }

    // Asked for and granted read-only: reads work, writes are refused.
    std::fs::write(dir.path().join("a.json"), "1").unwrap();
    let mut read_only = asks();
    read_only.writable = false;
    let runtime = module()
        .runtime(
            WasmGrants::intersect(&read_only, &granted),
            WasmLimits::default(),
        )
        .unwrap();
    assert_eq!(read(runtime.as_ref(), &a).unwrap().attributes["value"], 1);
    let err = apply_err(runtime.as_ref(), &kv("kv:a", "a", json!(2)));
    assert!(err.message.contains("cannot write"), "{}", err.message);
    assert_eq!(stored(dir.path(), "a"), Some(json!(1)));

    // No network without a grant: a connection to a listening local port fails, naming it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut connect = misbehaving("net", "connect");
    connect.attributes.insert("host".into(), json!(addr));
    let err = apply_err(runtime.as_ref(), &connect);
    assert!(
        err.message.contains(&format!("cannot connect to {addr}")),
        "{}",
        err.message
    );
    // Asked for and granted, the same connection is made.
    let mut online = asks();
    online.network = true;
    let runtime = module()
        .runtime(
            WasmGrants::intersect(&online, &granted),
            WasmLimits::default(),
        )
        .unwrap();
    runtime.apply(&apply_req(None, &connect, false)).unwrap();
}

#[test]
fn wasm_runtime_loads_from_a_manifest_and_a_non_runtime_component_is_refused_by_name() {
    let plugins = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut runtime_manifest = Manifest {
        name: "wasm-kv".into(),
        kind: PluginKind::Runtime,
        version: "0.1.0".into(),
        file: "x.wasm".into(),
        format: None,
        sha256: None,
        permissions: manifest::Permissions {
            dirs: vec!["/data".into()],
            writable: true,
            ..Default::default()
        },
        publisher: None,
        signature: None,
    };
    manifest::install(
        plugins.path(),
        &runtime_manifest,
        &fixtures::build(Fixture::WasmRuntime),
    )
    .unwrap();
    // The same kind of manifest over a function component.
    runtime_manifest.name = "not-a-runtime".into();
    manifest::install(
        plugins.path(),
        &runtime_manifest,
        &fixtures::build(Fixture::WasmFunction),
    )
    .unwrap();
    let settings = PluginSettings {
        grants: WasmGrants {
            dirs: [("/data".to_string(), data.path().to_path_buf())].into(),
            writable: true,
            ..WasmGrants::default()
        },
        ..PluginSettings::default()
    };
    let config = PluginConfig {
        path: vec![plugins.path().to_path_buf()],
        default_dirs: false,
        settings: [("wasm-kv".to_string(), settings)].into(),
        ..PluginConfig::default()
    };
    let loaded = load_plugins(&config);
    let entry = |name: &str| {
        loaded
            .entries
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no entry {name}: {:?}", loaded.entries))
    };
    let kv_entry = entry("wasm-kv");
    assert_eq!(kv_entry.status, Status::Loaded, "{kv_entry:?}");
    for cap in ["type:WasmKv", "watch", "dir:/data"] {
        assert!(
            kv_entry.capabilities.iter().any(|c| c.starts_with(cap)),
            "{cap}: {:?}",
            kv_entry.capabilities
        );
    }
    match &entry("not-a-runtime").status {
        Status::Refused(why) => assert!(
            why.contains("does not export `kusion:plugin/runtime`")
                && why.contains("it is a function plugin"),
            "{why}"
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }

    let runtime = loaded.runtime_for("WasmKv").expect("the WASM runtime");
    runtime
        .apply(&apply_req(
            None,
            &kv("kv:m", "m", json!("via manifest")),
            false,
        ))
        .unwrap();
    assert_eq!(stored(data.path(), "m"), Some(json!("via manifest")));
}

#[test]
fn wasm_runtime_for_another_contract_major_is_refused_naming_both() {
    let bytes = std::fs::read(fixtures::build(Fixture::WasmRuntime)).unwrap();
    let (renamed, count) = super::tests::patch(
        &bytes,
        b"kusion:plugin/runtime@1.0.0",
        b"kusion:plugin/runtime@2.0.0",
    );
    assert!(count > 0, "the fixture should name its export");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.wasm");
    std::fs::write(&path, renamed).unwrap();
    let err = WasmHost::with_cache(None)
        .unwrap()
        .compile(&path)
        .err()
        .expect("refused");
    let text = err.to_string();
    let host = format!("plugin ABI {}", kusion_sdk::ABI_VERSION);
    assert!(
        matches!(err, LoadError::AbiMismatch { .. })
            && text.contains("plugin ABI 2.0")
            && text.contains(&host),
        "{text}"
    );
}

/// A WASM runtime beside a native one in one apply through the kernel's operation path: both
/// kinds of resource are created, and WASM resources that refuse, loop forever, allocate
/// without bound or connect to a host nobody granted each fail alone, with the limit or the
/// refusal named, while the rest of the apply goes on.
#[test]
fn wasm_and_native_runtimes_apply_side_by_side_and_one_failure_stays_local() {
    use crate::execute::{ApplyOptions, Outcome};
    use crate::operation::{self, Applied, Stack};
    use crate::plan::PlanOptions;
    use crate::registry::Registry;
    use crate::spec::Spec;
    use crate::state::LocalStore;

    let data = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let native = load_native_runtime(&fixtures::build(Fixture::LocalFile)).unwrap();
    native.configure(&json!({"root": files.path()})).unwrap();
    let mut registry = Registry::new();
    registry.register(native).unwrap();
    registry
        .register(runtime_in(
            data.path(),
            WasmLimits {
                fuel: 200_000_000,
                memory_bytes: 32 << 20,
                ..WasmLimits::default()
            },
        ))
        .unwrap();
    let stack = Stack {
        store: Arc::new(LocalStore::new(state.path())),
        registry,
    };
    let mut file = Resource::new("file:f", "LocalFile", Default::default());
    file.attributes.insert("path".into(), json!("f.txt"));
    file.attributes.insert("content".into(), json!("native"));
    let mut spec = Spec {
        resources: vec![
            file,
            kv("kv:one", "one", json!({"a": 1})),
            misbehaving("kv:broken", "fail"),
            kv("kv:two", "two", json!("$kusion_path[file:f].content")),
            misbehaving("kv:spin", "spin"),
            misbehaving("kv:grow", "grow"),
            misbehaving("kv:connect", "connect"),
        ],
    };
    spec.resources[6]
        .attributes
        .insert("host".into(), json!("127.0.0.1:9"));
    spec.resources[3].depends_on.push("file:f".into());
    let apply = |spec: &Spec| {
        operation::apply(
            spec,
            &stack,
            "apply",
            &PlanOptions::default(),
            &ApplyOptions::default(),
            vec![],
            |_| true,
            None,
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap()
    };
    let Applied::Done { report, .. } = apply(&spec) else {
        panic!("expected an apply")
    };
    let failed = report.failed();
    let why = |id: &str| -> String {
        match failed.iter().find(|r| r.id == id).map(|r| &r.outcome) {
            Some(Outcome::Failed(why)) => why.clone(),
            other => panic!("{id}: {other:?} in {report:?}"),
        }
    };
    assert_eq!(failed.len(), 4, "{report:?}");
    assert!(
        why("kv:broken").contains("asks to fail"),
        "{}",
        why("kv:broken")
    );
    assert!(
        why("kv:spin").contains("ran out of fuel"),
        "{}",
        why("kv:spin")
    );
    assert!(
        why("kv:grow").contains("exceeded its memory limit (32.0 MiB)"),
        "{}",
        why("kv:grow")
    );
    // no socket was granted: the connection is refused inside the sandbox
    assert!(
        why("kv:connect").contains("cannot connect to 127.0.0.1:9"),
        "{}",
        why("kv:connect")
    );
    assert_eq!(report.created(), 3, "{report:?}");
    assert_eq!(
        std::fs::read_to_string(files.path().join("f.txt")).unwrap(),
        "native"
    );
    assert_eq!(stored(data.path(), "one"), Some(json!({"a": 1})));
    // The WASM resource received the native one's value through a reference.
    assert_eq!(stored(data.path(), "two"), Some(json!("native")));

    // Once the broken resource is fixed, the next plan has work for it alone, and applies.
    for r in &mut spec.resources {
        r.attributes.remove("test");
    }
    let view = operation::preview(
        &spec,
        &stack,
        &PlanOptions::default(),
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    let mut pending: Vec<&str> = view
        .steps
        .iter()
        .filter(|s| s.action != crate::plan::Action::UnChanged)
        .map(|s| s.id.as_str())
        .collect();
    pending.sort();
    assert_eq!(
        pending,
        ["kv:broken", "kv:connect", "kv:grow", "kv:spin"],
        "{view:?}"
    );
    let Applied::Done { report, .. } = apply(&spec) else {
        panic!("expected an apply")
    };
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(stored(data.path(), "kv-broken"), Some(json!(1)));
}

/// The conformance suite `kusionctl plugin test` runs passes for the WASM fixture and for the
/// native example runtime, every check run (none skipped: both declare every capability).
#[test]
fn conformance_suite_passes_for_the_wasm_fixture_and_the_native_localfile_runtime() {
    use super::conformance::{self, Sample, Verdict};

    let data = tempfile::tempdir().unwrap();
    let kv_sample: Sample = serde_json::from_value(json!({
        "create": {"id": "kv:conf", "type": "WasmKv", "attributes": {"key": "conf", "value": 1}},
        "update": {"id": "kv:conf", "type": "WasmKv", "attributes": {"key": "conf", "value": {"x": [2]}}},
        "invalid": {"id": "kv:bad", "type": "WasmKv", "attributes": {"key": "../escape"}},
        "watchTimeout": 5000,
    }))
    .unwrap();
    let files = tempfile::tempdir().unwrap();
    let file_sample: Sample = serde_json::from_value(json!({
        "config": {"root": files.path()},
        "create": {"id": "file:conf", "type": "LocalFile", "attributes": {"path": "c.txt", "content": "one"}},
        "update": {"id": "file:conf", "type": "LocalFile", "attributes": {"path": "c.txt", "content": "two"}},
        "invalid": {"id": "file:bad", "type": "LocalFile", "attributes": {"path": "../escape"}},
    }))
    .unwrap();
    let native = load_native_runtime(&fixtures::build(Fixture::LocalFile)).unwrap();
    for (runtime, sample) in [
        (runtime_in(data.path(), WasmLimits::default()), kv_sample),
        (native, file_sample),
    ] {
        let name = runtime.describe().name;
        let report = conformance::run(runtime, &sample);
        assert!(report.passed(), "{name}: {report:#?}");
        let configured = !sample.config.is_null();
        assert_eq!(
            report.checks.len(),
            11 + usize::from(configured),
            "{name}: {report:#?}"
        );
        assert!(
            report.checks.iter().all(|c| c.verdict == Verdict::Passed),
            "{name}: {report:#?}"
        );
    }
    // The suite cleaned up after itself.
    assert_eq!(stored(data.path(), "conf"), None);
    assert!(!files.path().join("c.txt").exists());
}

/// A local HTTP server answering every request with `body`, counting the connections it got.
struct Http {
    addr: String,
    hits: Arc<std::sync::atomic::AtomicUsize>,
}

impl Http {
    fn serve(body: String) -> Http {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // Read the request head (a GET has no body), then answer and close.
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Http { addr, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn fetch(id: &str, url: &str) -> Resource {
    let mut r = kv(id, &id.replace(':', "-"), Value::Null);
    r.attributes.insert("test".into(), json!("http"));
    r.attributes.insert("url".into(), json!(url));
    r
}

/// Outgoing HTTP (wasi:http) reaches exactly the granted host:port pairs: a granted request gets
/// the server's answer; one to another port is denied before connecting, with an error naming the
/// host, and only that resource fails in an apply; without a grant every request is denied.
#[test]
fn wasm_runtime_http_reaches_only_granted_hosts() {
    use crate::execute::{ApplyOptions, Outcome};
    use crate::operation::{self, Applied, Stack};
    use crate::plan::PlanOptions;
    use crate::registry::Registry;
    use crate::spec::Spec;
    use crate::state::LocalStore;

    let token = format!("answer-{}-{:?}", std::process::id(), Instant::now());
    let granted_server = Http::serve(token.clone());
    let other_server = Http::serve("must never be read".into());
    let data = tempfile::tempdir().unwrap();
    let mut online = asks();
    online.network = true;
    let grant = |hosts: Vec<String>| WasmGrants {
        dirs: [("/data".to_string(), data.path().to_path_buf())].into(),
        writable: true,
        hosts,
        ..WasmGrants::default()
    };
    let runtime = module()
        .runtime(
            WasmGrants::intersect(&online, &grant(vec![granted_server.addr.clone()])),
            WasmLimits::default(),
        )
        .unwrap();

    let ok = fetch("kv:ok", &format!("http://{}/x", granted_server.addr));
    runtime.apply(&apply_req(None, &ok, false)).unwrap();
    assert_eq!(stored(data.path(), "kv-ok"), Some(json!(token)));
    assert_eq!(granted_server.hits(), 1);

    let denied = fetch("kv:denied", &format!("http://{}/x", other_server.addr));
    let err = apply_err(runtime.as_ref(), &denied);
    assert!(
        err.message.contains(&format!(
            "the host denied outgoing HTTP to {}: not granted",
            other_server.addr
        )) && err.message.contains("kv:denied"),
        "{}",
        err.message
    );
    // Another name for the granted server is another host.
    let port = granted_server.addr.rsplit_once(':').unwrap().1;
    let err = apply_err(
        runtime.as_ref(),
        &fetch("kv:alias", &format!("http://localhost:{port}/x")),
    );
    assert!(
        err.message
            .contains(&format!("outgoing HTTP to localhost:{port}: not granted")),
        "{}",
        err.message
    );
    assert_eq!(other_server.hits(), 0, "a denied request must not connect");
    assert_eq!(granted_server.hits(), 1);
    assert_eq!(stored(data.path(), "kv-denied"), None);

    // The grant alone opens no sockets: a raw TCP connection to the granted server fails.
    let mut connect = misbehaving("net", "connect");
    connect
        .attributes
        .insert("host".into(), json!(granted_server.addr));
    let err = apply_err(runtime.as_ref(), &connect);
    assert!(err.message.contains("cannot connect"), "{}", err.message);

    // Not asked for by the manifest, or asked for but no hosts granted: every request is denied.
    for effective in [
        WasmGrants::intersect(&asks(), &grant(vec![granted_server.addr.clone()])),
        WasmGrants::intersect(&online, &grant(vec![])),
    ] {
        let runtime = module().runtime(effective, WasmLimits::default()).unwrap();
        let err = apply_err(runtime.as_ref(), &ok);
        assert!(
            err.message.contains(&format!(
                "the host denied outgoing HTTP to {}: not granted",
                granted_server.addr
            )),
            "{}",
            err.message
        );
    }
    assert_eq!(granted_server.hits(), 1);

    // A grant that is not HOST:PORT is a load error naming it.
    let bad = module()
        .runtime(
            WasmGrants::intersect(&online, &grant(vec!["example.com".into()])),
            WasmLimits::default(),
        )
        .err()
        .expect("refused");
    assert!(bad.to_string().contains("`example.com`"), "{bad}");

    // In an apply, the denied resource fails alone; the rest is created.
    let state = tempfile::tempdir().unwrap();
    let mut registry = Registry::new();
    registry.register(runtime).unwrap();
    let stack = Stack {
        store: Arc::new(LocalStore::new(state.path())),
        registry,
    };
    let spec = Spec {
        resources: vec![
            fetch("kv:first", &format!("http://{}/a", granted_server.addr)),
            denied.clone(),
            kv("kv:plain", "plain", json!("no http")),
        ],
    };
    let Applied::Done { report, .. } = operation::apply(
        &spec,
        &stack,
        "apply",
        &PlanOptions::default(),
        &ApplyOptions::default(),
        vec![],
        |_| true,
        None,
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap() else {
        panic!("expected an apply")
    };
    let failed = report.failed();
    assert_eq!(failed.len(), 1, "{report:?}");
    assert_eq!(failed[0].id, "kv:denied");
    match &failed[0].outcome {
        Outcome::Failed(why) => assert!(
            why.contains(&format!(
                "outgoing HTTP to {}: not granted",
                other_server.addr
            )),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(report.created(), 2, "{report:?}");
    assert_eq!(stored(data.path(), "kv-first"), Some(json!(token)));
    assert_eq!(stored(data.path(), "plain"), Some(json!("no http")));
    assert_eq!(other_server.hits(), 0);
}
