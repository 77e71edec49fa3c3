//! The Python RabbitMQ runtime (examples/rabbitmq-runtime, built with componentize-py) against a
//! real broker (kusion-rabbitmq-harness): the conformance suite through `kusionctl plugin test`,
//! and stacks mixing RabbitMQ objects with the native LocalFile runtime's files and with
//! Kubernetes objects on a real control plane (kusion-k8s-harness), linked by `$kusion_path`
//! references, applied, changed, drifted and destroyed through `kusionctl`.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use kusion_dev_plugins::fixtures;
use kusion_k8s_harness::{ControlPlane, Options};
use kusion_kernel::plugin::manifest::{self, Manifest};
use kusion_rabbitmq_harness::RabbitServer;
use kusion_tests::cli::{built, kusionctl_in, text};
use serde_json::Value;

/// The example's folder.
fn example() -> PathBuf {
    fixtures::workspace_root().join("examples/rabbitmq-runtime")
}

static BUILD: Mutex<()> = Mutex::new(());

/// Build the component with the example's build script (componentize-py), unless the one built
/// last is newer than every source. Panics with the script's output when it fails.
fn component() -> PathBuf {
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let out = fixtures::target_dir().join("rabbitmq/rabbitmq_runtime.wasm");
    let newest_source = [
        "app.py",
        "build.sh",
        "wit/world.wit",
        "../../sdk/wit/plugin.wit",
    ]
    .iter()
    .map(|f| modified(&example().join(f)))
    .max()
    .unwrap();
    if out.is_file() && modified(&out) > newest_source {
        return out;
    }
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let started = Instant::now();
    let run = std::process::Command::new("bash")
        .arg(example().join("build.sh"))
        .arg(&out)
        .output()
        .expect("running examples/rabbitmq-runtime/build.sh");
    assert!(
        run.status.success(),
        "building the Python runtime failed (scripts/setup.d/80-componentize-py.sh installs componentize-py):\n{}",
        text(&run)
    );
    eprintln!("built {} in {:?}", out.display(), started.elapsed());
    out
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn broker() -> RabbitServer {
    RabbitServer::start().unwrap_or_else(|e| panic!("RabbitMQ must start for these tests: {e}"))
}

/// GET an object from the management API: `Some(json)` or `None` for 404.
fn live(rabbit: &RabbitServer, path: &str) -> Option<Value> {
    let (status, body) = rabbit.api("GET", path, None).unwrap();
    match status {
        200 => Some(serde_json::from_str(&body).unwrap()),
        404 => None,
        other => panic!("GET {path}: {other} {body}"),
    }
}

#[test]
fn rabbitmq_runtime_passes_kusionctl_plugin_test_against_a_live_broker() {
    let wasm = component();
    let rabbit = broker();
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read_to_string(example().join("sample.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:15672", &rabbit.endpoint());
    std::fs::write(dir.path().join("sample.yaml"), sample).unwrap();
    let run = |grant: &str| {
        kusionctl_in(dir.path(), dir.path())
            .arg("plugin")
            .arg("test")
            .arg(&wasm)
            .args(["--sample", "sample.yaml", "--http", grant])
            .output()
            .expect("running kusionctl plugin test")
    };
    let out = run(&rabbit.authority());
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    for check in [
        "absent", "dry-run", "create", "update", "import", "error", "delete",
    ] {
        assert!(
            t.lines()
                .any(|l| l.starts_with("ok") && l.split_whitespace().nth(1) == Some(check)),
            "{check} did not pass:\n{t}"
        );
    }
    assert!(t.contains("0 failed"), "{t}");
    // The suite cleaned up behind itself.
    assert_eq!(live(&rabbit, "/api/vhosts/kusion-conformance"), None);

    // Granted another port only, the same suite fails, saying which host was refused.
    let out = run("127.0.0.1:1");
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains(&format!(
            "outgoing HTTP to {}: not granted",
            rabbit.authority()
        )),
        "{t}"
    );
}

/// One stack folder: the plugin installed from the example's manifest, the operator's grant, and
/// runtime settings for the RabbitMQ and LocalFile runtimes, plus `more_runtimes` (YAML lines).
struct Stack {
    dir: tempfile::TempDir,
    files: PathBuf,
}

impl Stack {
    fn new(rabbit: &RabbitServer, wasm: &Path, more_runtimes: &str) -> Stack {
        built("liblocalfile_runtime.so");
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        let manifest = Manifest::load(&example().join("plugin.toml")).unwrap();
        manifest::install(&plugins, &manifest, wasm).unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            format!(
                "[plugins]\npath = [{plugins:?}]\n\n[plugins.settings.rabbitmq]\ngrants = {{ hosts = [\"{}\"] }}\n",
                rabbit.authority()
            ),
        )
        .unwrap();
        let files = dir.path().join("files");
        std::fs::write(
            dir.path().join("runtimes.yaml"),
            format!(
                "localfile: {{root: {files:?}}}\nrabbitmq: {{endpoint: {:?}, username: guest, password: guest}}\n{more_runtimes}",
                rabbit.endpoint()
            ),
        )
        .unwrap();
        Stack { dir, files }
    }

    fn write_spec(&self, spec: &str) {
        std::fs::write(self.dir.path().join("spec.yaml"), spec).unwrap();
    }

    fn run(&self, args: &[&str]) -> Output {
        kusionctl_in(self.dir.path(), self.dir.path())
            .env("KUSION_CONFIG", self.dir.path().join("config.toml"))
            .env("KUSION_STATE_DIR", self.dir.path().join("state"))
            .env(
                "KUSION_RUNTIME_CONFIG",
                self.dir.path().join("runtimes.yaml"),
            )
            .args(args)
            .output()
            .expect("running kusionctl")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let t = text(&out);
        assert!(out.status.success(), "kusionctl {args:?}:\n{t}");
        t
    }

    /// The planned steps that change something: (id, action).
    fn pending(&self) -> Vec<(String, String)> {
        let out = self.run(&["preview", "-f", "spec.yaml", "-o", "json"]);
        assert!(out.status.success(), "{}", text(&out));
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut steps: Vec<(String, String)> = plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["action"] != "UnChanged")
            .map(|s| {
                (
                    s["id"].as_str().unwrap().to_string(),
                    s["action"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        steps.sort();
        steps
    }

    fn file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.files.join(name)).ok()
    }
}

const SPEC: &str = r#"resources:
- id: file:queue-name
  type: LocalFile
  attributes: {path: queue-name.txt, content: orders}
- id: rabbitmq:vhost:shop
  type: RabbitMQVhost
  attributes: {name: shop, description: the shop}
- id: rabbitmq:exchange:shop:events
  type: RabbitMQExchange
  attributes: {vhost: "$kusion_path[rabbitmq:vhost:shop].name", name: events, type: topic}
- id: rabbitmq:queue:shop:orders
  type: RabbitMQQueue
  attributes:
    vhost: "$kusion_path[rabbitmq:vhost:shop].name"
    name: "$kusion_path[file:queue-name].content"
    arguments: {x-max-length: 100}
- id: rabbitmq:binding:shop:events:orders
  type: RabbitMQBinding
  attributes:
    vhost: shop
    source: "$kusion_path[rabbitmq:exchange:shop:events].name"
    destination: "$kusion_path[rabbitmq:queue:shop:orders].name"
    routingKey: order.*
- id: rabbitmq:user:shop-app
  type: RabbitMQUser
  attributes: {name: shop-app, password: first-s3cret, tags: [monitoring]}
- id: file:summary
  type: LocalFile
  attributes: {path: summary.txt, content: "$kusion_path[rabbitmq:queue:shop:orders].name"}
"#;

fn ids(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn rabbitmq_and_localfile_resources_apply_change_drift_and_destroy_through_kusionctl() {
    let wasm = component();
    let rabbit = broker();
    let stack = Stack::new(&rabbit, &wasm, "");
    stack.write_spec(SPEC);

    // The plugin is found, loaded and granted the broker's management port only.
    let out = stack.run(&["plugin", "list", "-o", "json"]);
    let list = text(&out);
    assert!(out.status.success(), "{list}");
    let entries: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {list}"));
    let entry = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "rabbitmq")
        .unwrap_or_else(|| panic!("no rabbitmq plugin listed: {list}"));
    assert_eq!(entry["status"]["state"], "loaded", "{entry}");
    let grant = format!("http:{}", rabbit.authority());
    assert!(
        entry["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == grant.as_str()),
        "{entry}"
    );

    // Create: everything, in dependency order across both runtimes.
    let t = stack.ok(&["apply", "-f", "spec.yaml", "--yes"]);
    assert!(t.contains("7 created"), "{t}");
    assert!(!t.contains("first-s3cret"), "the password leaked:\n{t}");
    assert_eq!(
        live(&rabbit, "/api/vhosts/shop").unwrap()["description"],
        "the shop"
    );
    assert_eq!(
        live(&rabbit, "/api/exchanges/shop/events").unwrap()["type"],
        "topic"
    );
    let queue = live(&rabbit, "/api/queues/shop/orders").expect("the queue named by the file");
    assert_eq!(queue["arguments"]["x-max-length"], 100);
    let bindings = live(&rabbit, "/api/bindings/shop/e/events/q/orders").unwrap();
    assert_eq!(bindings[0]["routing_key"], "order.*", "{bindings}");
    assert_eq!(
        live(&rabbit, "/api/users/shop-app").unwrap()["tags"][0],
        "monitoring"
    );
    assert_eq!(stack.file("summary.txt").as_deref(), Some("orders"));
    assert_eq!(stack.pending(), ids(&[]));
    assert!(
        stack
            .ok(&["preview", "-f", "spec.yaml"])
            .contains("No changes.")
    );

    // Change one thing in place, replace a queue, remove the exchange and its binding.
    let changed = SPEC
        .replace("description: the shop", "description: the new shop")
        .replace("x-max-length: 100", "x-max-length: 200")
        .replace("tags: [monitoring]", "tags: [monitoring, management]");
    let start = changed.find("- id: rabbitmq:exchange:shop:events").unwrap();
    let end = changed.find("- id: rabbitmq:queue:shop:orders").unwrap();
    let mut changed = format!("{}{}", &changed[..start], &changed[end..]);
    let start = changed.find("- id: rabbitmq:binding").unwrap();
    let end = changed.find("- id: rabbitmq:user:shop-app").unwrap();
    changed.replace_range(start..end, "");
    stack.write_spec(&changed);
    assert_eq!(
        stack.pending(),
        ids(&[
            ("rabbitmq:binding:shop:events:orders", "Delete"),
            ("rabbitmq:exchange:shop:events", "Delete"),
            ("rabbitmq:queue:shop:orders", "Replace"),
            // It reads the replaced queue's name, known only once the queue is applied again.
            ("file:summary", "Update"),
            ("rabbitmq:user:shop-app", "Update"),
            ("rabbitmq:vhost:shop", "Update"),
        ])
    );
    let t = stack.ok(&["apply", "-f", "spec.yaml", "--yes"]);
    assert!(t.contains("Apply complete!"), "{t}");
    assert_eq!(stack.pending(), ids(&[]));
    assert_eq!(
        live(&rabbit, "/api/vhosts/shop").unwrap()["description"],
        "the new shop"
    );
    assert_eq!(live(&rabbit, "/api/exchanges/shop/events"), None);
    assert_eq!(
        live(&rabbit, "/api/queues/shop/orders").unwrap()["arguments"]["x-max-length"],
        200
    );
    let mut tags: Vec<String> =
        serde_json::from_value(live(&rabbit, "/api/users/shop-app").unwrap()["tags"].clone())
            .unwrap();
    tags.sort();
    assert_eq!(tags, ["management", "monitoring"]);

    // Drift made behind kusion's back, through the management API, is what the preview shows.
    let (status, body) = rabbit
        .api(
            "PUT",
            "/api/vhosts/shop",
            Some(r#"{"description": "edited by hand"}"#),
        )
        .unwrap();
    assert!(status == 201 || status == 204, "{status} {body}");
    let (status, body) = rabbit
        .api(
            "PUT",
            "/api/users/shop-app",
            Some(r#"{"password": "changed-by-hand", "tags": "monitoring,management"}"#),
        )
        .unwrap();
    assert!(status == 201 || status == 204, "{status} {body}");
    assert_eq!(
        rabbit
            .api("DELETE", "/api/queues/shop/orders", None)
            .unwrap()
            .0,
        204
    );
    assert_eq!(
        stack.pending(),
        ids(&[
            ("file:summary", "Update"),
            ("rabbitmq:queue:shop:orders", "Create"),
            ("rabbitmq:user:shop-app", "Update"),
            ("rabbitmq:vhost:shop", "Update"),
        ])
    );
    let detail = stack.ok(&["preview", "-f", "spec.yaml", "-d"]);
    assert!(detail.contains("edited by hand"), "{detail}");
    assert!(!detail.contains("first-s3cret"), "{detail}");
    stack.ok(&["apply", "-f", "spec.yaml", "--yes"]);
    assert_eq!(stack.pending(), ids(&[]));
    assert_eq!(
        live(&rabbit, "/api/vhosts/shop").unwrap()["description"],
        "the new shop"
    );
    assert!(live(&rabbit, "/api/queues/shop/orders").is_some());

    // Destroy: nothing of ours is left on the broker or on disk.
    let t = stack.ok(&["destroy", "--yes"]);
    assert!(t.contains("5 deleted"), "{t}");
    assert_eq!(live(&rabbit, "/api/vhosts/shop"), None);
    assert_eq!(live(&rabbit, "/api/users/shop-app"), None);
    let queues = live(&rabbit, "/api/queues").unwrap();
    assert_eq!(queues, Value::Array(vec![]), "{queues}");
    assert_eq!(stack.file("summary.txt"), None);
    assert_eq!(stack.file("queue-name.txt"), None);
}

/// The namespace the Kubernetes half of [`K8S_SPEC`] lives in.
const NS: &str = "rabbitmq-e2e";

/// RabbitMQ objects between Kubernetes ones, linked by `$kusion_path` both ways: the broker's
/// vhost and queue names come from a ConfigMap, and the application's ConfigMap and Secret hold
/// the names RabbitMQ objects were applied with.
const K8S_SPEC: &str = r#"resources:
- id: v1:Namespace:rabbitmq-e2e
  type: Kubernetes
  attributes: {apiVersion: v1, kind: Namespace, metadata: {name: rabbitmq-e2e}}
- id: v1:ConfigMap:rabbitmq-e2e:broker
  type: Kubernetes
  attributes:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: broker, namespace: rabbitmq-e2e}
    data: {vhost: shop, queue: orders}
- id: rabbitmq:vhost:shop
  type: RabbitMQVhost
  attributes:
    name: "$kusion_path[v1:ConfigMap:rabbitmq-e2e:broker].data.vhost"
    description: the shop
- id: rabbitmq:exchange:shop:events
  type: RabbitMQExchange
  attributes: {vhost: "$kusion_path[rabbitmq:vhost:shop].name", name: events, type: topic}
- id: rabbitmq:queue:shop:orders
  type: RabbitMQQueue
  attributes:
    vhost: "$kusion_path[rabbitmq:vhost:shop].name"
    name: "$kusion_path[v1:ConfigMap:rabbitmq-e2e:broker].data.queue"
    arguments: {x-max-length: 100}
- id: rabbitmq:user:shop-app
  type: RabbitMQUser
  attributes: {name: shop-app, password: first-s3cret, tags: [monitoring]}
- id: v1:ConfigMap:rabbitmq-e2e:shop-app
  type: Kubernetes
  attributes:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: shop-app, namespace: rabbitmq-e2e}
    data:
      AMQP_VHOST: "$kusion_path[rabbitmq:vhost:shop].name"
      AMQP_QUEUE: "$kusion_path[rabbitmq:queue:shop:orders].name"
- id: v1:Secret:rabbitmq-e2e:shop-app-amqp
  type: Kubernetes
  attributes:
    apiVersion: v1
    kind: Secret
    metadata: {name: shop-app-amqp, namespace: rabbitmq-e2e}
    stringData:
      url: "amqp://$kusion_path[rabbitmq:user:shop-app].name@127.0.0.1/$kusion_path[rabbitmq:vhost:shop].name"
"#;

/// `kubectl get KIND NAME -o json` on the control plane: `Some(object)` or `None` when absent.
fn kube_live(cp: &ControlPlane, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
    let mut cmd = cp.kubectl().expect("kubectl from the control-plane build");
    cmd.args(["get", kind, name, "-o", "json", "--ignore-not-found"]);
    if let Some(ns) = namespace {
        cmd.args(["-n", ns]);
    }
    let out = cmd.output().expect("running kubectl");
    assert!(
        out.status.success(),
        "kubectl get {kind} {name}: {}",
        text(&out)
    );
    if out.stdout.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out))))
}

/// The `data` of a live ConfigMap in [`NS`].
fn configmap(cp: &ControlPlane, name: &str) -> Value {
    kube_live(cp, "configmap", Some(NS), name)
        .unwrap_or_else(|| panic!("ConfigMap {NS}/{name} is missing"))["data"]
        .clone()
}

#[test]
fn rabbitmq_and_kubernetes_resources_apply_change_drift_and_destroy_through_kusionctl() {
    built("libkusion_runtime_kubernetes.so");
    let wasm = component();
    let rabbit = broker();
    // The real control plane: etcd, kube-apiserver and kube-controller-manager, whose namespace
    // controller is what finishes deleting the namespace on destroy.
    let cp = ControlPlane::start_with(Options {
        fake_kubelet: false,
        ..Options::default()
    })
    .unwrap_or_else(|e| panic!("the Kubernetes control plane must start for this test: {e}"));
    let stack = Stack::new(
        &rabbit,
        &wasm,
        &format!("kubernetes: {{kubeconfig: {:?}}}\n", cp.kubeconfig_path()),
    );
    stack.write_spec(K8S_SPEC);

    // Create: Kubernetes -> RabbitMQ -> Kubernetes, in reference order.
    let t = stack.ok(&["apply", "-f", "spec.yaml", "--yes"]);
    assert!(t.contains("8 created"), "{t}");
    assert!(!t.contains("first-s3cret"), "the password leaked:\n{t}");
    assert_eq!(
        live(&rabbit, "/api/vhosts/shop").unwrap()["description"],
        "the shop"
    );
    assert_eq!(
        live(&rabbit, "/api/exchanges/shop/events").unwrap()["type"],
        "topic"
    );
    assert_eq!(
        live(&rabbit, "/api/queues/shop/orders").expect("the queue named by the ConfigMap")["arguments"]
            ["x-max-length"],
        100
    );
    assert_eq!(
        live(&rabbit, "/api/users/shop-app").unwrap()["tags"][0],
        "monitoring"
    );
    assert_eq!(
        configmap(&cp, "shop-app"),
        serde_json::json!({"AMQP_VHOST": "shop", "AMQP_QUEUE": "orders"})
    );
    let secret = kube_live(&cp, "secret", Some(NS), "shop-app-amqp").expect("the Secret");
    let url = {
        use base64::Engine;
        let encoded = secret["data"]["url"].as_str().unwrap_or_default();
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(url, "amqp://shop-app@127.0.0.1/shop", "{secret}");
    assert_eq!(stack.pending(), ids(&[]));
    assert!(
        stack
            .ok(&["preview", "-f", "spec.yaml"])
            .contains("No changes.")
    );

    // Change: a new queue name in the broker ConfigMap replaces the queue and updates the
    // application's ConfigMap; the vhost and the user change in place; the exchange and the
    // Secret are removed from the spec.
    let mut changed = K8S_SPEC
        .replace(
            "{vhost: shop, queue: orders}",
            "{vhost: shop, queue: orders-v2}",
        )
        .replace("description: the shop", "description: the new shop")
        .replace("tags: [monitoring]", "tags: [monitoring, management]");
    for (from, to) in [
        (
            "- id: rabbitmq:exchange:shop:events",
            "- id: rabbitmq:queue:shop:orders",
        ),
        ("- id: v1:Secret:rabbitmq-e2e:shop-app-amqp", ""),
    ] {
        let start = changed.find(from).unwrap();
        let end = if to.is_empty() {
            changed.len()
        } else {
            changed.find(to).unwrap()
        };
        changed.replace_range(start..end, "");
    }
    stack.write_spec(&changed);
    let planned = stack.pending();
    assert_eq!(
        planned,
        ids(&[
            ("v1:ConfigMap:rabbitmq-e2e:broker", "Update"),
            ("rabbitmq:vhost:shop", "Update"),
            ("rabbitmq:exchange:shop:events", "Delete"),
            ("rabbitmq:queue:shop:orders", "Replace"),
            ("rabbitmq:user:shop-app", "Update"),
            ("v1:ConfigMap:rabbitmq-e2e:shop-app", "Update"),
            ("v1:Secret:rabbitmq-e2e:shop-app-amqp", "Delete"),
        ])
    );
    let t = stack.ok(&["apply", "-f", "spec.yaml", "--yes"]);
    assert!(t.contains("Apply complete!"), "{t}");
    assert_eq!(stack.pending(), ids(&[]));
    assert_eq!(
        live(&rabbit, "/api/vhosts/shop").unwrap()["description"],
        "the new shop"
    );
    // Removed items are gone from the servers, not just from state.
    assert_eq!(live(&rabbit, "/api/exchanges/shop/events"), None);
    assert_eq!(kube_live(&cp, "secret", Some(NS), "shop-app-amqp"), None);
    // The replaced queue: the old one deleted, the new one made.
    assert_eq!(live(&rabbit, "/api/queues/shop/orders"), None);
    assert_eq!(
        live(&rabbit, "/api/queues/shop/orders-v2").expect("the renamed queue")["arguments"]["x-max-length"],
        100
    );
    let mut tags: Vec<String> =
        serde_json::from_value(live(&rabbit, "/api/users/shop-app").unwrap()["tags"].clone())
            .unwrap();
    tags.sort();
    assert_eq!(tags, ["management", "monitoring"]);
    assert_eq!(
        configmap(&cp, "shop-app"),
        serde_json::json!({"AMQP_VHOST": "shop", "AMQP_QUEUE": "orders-v2"})
    );

    // Drift made behind kusion's back through the management API: what the preview shows, and
    // what the next apply puts back.
    let (status, body) = rabbit
        .api(
            "PUT",
            "/api/vhosts/shop",
            Some(r#"{"description": "edited by hand"}"#),
        )
        .unwrap();
    assert!(status == 201 || status == 204, "{status} {body}");
    let (status, body) = rabbit
        .api(
            "PUT",
            "/api/users/shop-app",
            Some(r#"{"password": "changed-by-hand", "tags": "monitoring,management"}"#),
        )
        .unwrap();
    assert!(status == 201 || status == 204, "{status} {body}");
    assert_eq!(
        rabbit
            .api("DELETE", "/api/queues/shop/orders-v2", None)
            .unwrap()
            .0,
        204
    );
    let drifted = stack.pending();
    assert_eq!(
        drifted,
        ids(&[
            ("rabbitmq:vhost:shop", "Update"),
            ("rabbitmq:queue:shop:orders", "Create"),
            ("rabbitmq:user:shop-app", "Update"),
            // It reads the recreated queue's name, known only once the queue is applied again.
            ("v1:ConfigMap:rabbitmq-e2e:shop-app", "Update"),
        ])
    );
    let detail = stack.ok(&["preview", "-f", "spec.yaml", "-d"]);
    assert!(detail.contains("edited by hand"), "{detail}");
    assert!(!detail.contains("first-s3cret"), "{detail}");
    stack.ok(&["apply", "-f", "spec.yaml", "--yes"]);
    assert_eq!(stack.pending(), ids(&[]));
    assert_eq!(
        live(&rabbit, "/api/vhosts/shop").unwrap()["description"],
        "the new shop"
    );
    assert!(live(&rabbit, "/api/queues/shop/orders-v2").is_some());
    assert_eq!(configmap(&cp, "shop-app")["AMQP_QUEUE"], "orders-v2");

    // Destroy: nothing of ours is left on either server.
    let t = stack.ok(&["destroy", "--yes"]);
    assert!(t.contains("6 deleted"), "{t}");
    assert_eq!(live(&rabbit, "/api/vhosts/shop"), None);
    assert_eq!(live(&rabbit, "/api/users/shop-app"), None);
    let queues = live(&rabbit, "/api/queues").unwrap();
    assert_eq!(queues, Value::Array(vec![]), "{queues}");
    assert_eq!(kube_live(&cp, "namespace", None, NS), None);
    for name in ["broker", "shop-app"] {
        assert_eq!(kube_live(&cp, "configmap", Some(NS), name), None);
    }
}

/// What the Python runtime costs, printed for the record (`--nocapture`): start-up without and
/// with the on-disk compiled cache, and a call's overhead (a dry-run apply of a 1 KiB resource:
/// JSON in, Python, JSON out, no API call) against the native LocalFile runtime's, plus a real
/// read over HTTP. Checked: the cache is used and faster, and a dry-run never reaches the broker.
#[test]
fn rabbitmq_runtime_start_up_and_per_call_costs() {
    use kusion_kernel::plugin::{WasmGrants, WasmHost, WasmLimits, load_native_runtime};
    use kusion_sdk::Resource;
    use kusion_sdk::runtime::{ApplyRequest, ReadRequest, Runtime};
    use serde_json::json;
    use std::time::Duration;

    let wasm = component();
    let rabbit = broker();
    let cache = tempfile::tempdir().unwrap();
    let grants = WasmGrants {
        network: false,
        hosts: vec![rabbit.authority()],
        ..WasmGrants::default()
    };
    let start = |expect_cached: bool| {
        let started = Instant::now();
        let host = WasmHost::with_cache(Some(cache.path().to_path_buf())).unwrap();
        let (module, cached) = host.compile_reporting_cache(&wasm).unwrap();
        assert_eq!(cached, expect_cached);
        let runtime = module
            .runtime(grants.clone(), WasmLimits::default())
            .unwrap();
        runtime
            .configure(
                &json!({"endpoint": rabbit.endpoint(), "username": "guest", "password": "guest"}),
            )
            .unwrap();
        (runtime, started.elapsed())
    };
    let (_, cold) = start(false);
    let (python, warm) = start(true);
    assert!(
        warm < cold,
        "the cached start-up ({warm:?}) is not faster than compiling ({cold:?})"
    );

    let files = tempfile::tempdir().unwrap();
    let native = load_native_runtime(&built("liblocalfile_runtime.so")).unwrap();
    native.configure(&json!({"root": files.path()})).unwrap();
    let kib = "x".repeat(1024);
    let vhost = Resource::new(
        "rabbitmq:vhost:bench",
        "RabbitMQVhost",
        json!({"name": "bench", "description": kib})
            .as_object()
            .unwrap()
            .clone(),
    );
    let file = Resource::new(
        "file:bench",
        "LocalFile",
        json!({"path": "bench.txt", "content": kib})
            .as_object()
            .unwrap()
            .clone(),
    );
    let per_call = |runtime: &dyn Runtime, resource: &Resource| {
        let request = ApplyRequest {
            prior: None,
            prior_private: None,
            planned: resource.clone(),
            dry_run: true,
            timeout: None,
        };
        runtime.apply(&request).unwrap();
        let n = 200;
        let started = Instant::now();
        for _ in 0..n {
            assert_eq!(runtime.apply(&request).unwrap().resource, *resource);
        }
        started.elapsed() / n
    };
    let python_call = per_call(python.as_ref(), &vhost);
    let native_call = per_call(native.as_ref(), &file);
    let read = ReadRequest {
        prior: Some(vhost.clone()),
        prior_private: None,
        planned: None,
        timeout: None,
    };
    let started = Instant::now();
    for _ in 0..20 {
        assert_eq!(python.read(&read).unwrap().resource, None);
    }
    let http_read = started.elapsed() / 20;
    // The dry-runs planned a vhost; none was made.
    assert_eq!(live(&rabbit, "/api/vhosts/bench"), None);
    assert!(native_call < Duration::from_secs(1) && python_call < Duration::from_secs(1));
    eprintln!(
        "rabbitmq runtime (Python, {:.1} MB component): start-up {cold:?} compiling, {warm:?} from the compiled cache; \
         dry-run apply of a 1 KiB resource {python_call:?} per call (native LocalFile: {native_call:?}); \
         read over HTTP (404) {http_read:?} per call",
        std::fs::metadata(&wasm).unwrap().len() as f64 / 1e6
    );
}
