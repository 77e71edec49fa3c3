//! Differential tests of `kusionctl` against `kubectl apply --server-side` on a real
//! kube-apiserver 1.20.2 (kubectl built from the same Debian source as the server).
//!
//! A seeded generator makes edit sequences over a Deployment, a Service, a ConfigMap, a Secret,
//! a StatefulSet and a custom resource: fields, map keys and list items (by merge key, sets and
//! atomic lists) added, changed and removed; immutable fields; fields another field manager
//! takes; changes made behind both tools' backs (drift); objects leaving and re-entering the
//! spec. Every step is applied by kusionctl in namespace A and by kubectl in namespace B, then:
//!
//! - the live objects of A and B are equal, but for what legitimately differs (uid,
//!   resourceVersion, timestamps, managedFields, allocated cluster IPs, the namespace);
//! - kusionctl's preview before the apply listed exactly the fields that changed in A;
//! - the preview after it says nothing changes;
//! - the preview is the same with the dry-run shortcut (`answerFromRead`) on and off;
//! - conflicts and replacements are what kubectl meets: a conflict kubectl's server dry-run
//!   reports stops kusionctl's plan naming the same manager (and `--force-conflicts` takes the
//!   fields in both); an immutable field kubectl cannot apply is a planned `Replace` naming it,
//!   and B is then replaced the way a person would (`kubectl delete` + apply).
//!
//! The default run tries a bounded sample (`KUSION_DIFF_SEQUENCES`, default 2, of
//! `KUSION_DIFF_STEPS` steps, default 6, from seed `KUSION_DIFF_SEED`, default fixed); the long
//! campaign is `scripts/k8s/differential.sh N [SEED]`. A failure prints its seed and step.
//! Sequences that once found a difference are kept in `regressions()` and run every time.
//!
//! Over 800 lines: one differential suite, the edit generator and the comparison it feeds are
//! read together; each test stands alone.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kusion_k8s_harness::ControlPlane;
use kusion_tests::cli::{built, kusionctl_in, text};
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------------------------
// A small deterministic random source (splitmix64): the same seed makes the same sequence.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------------------------------------
// The objects and the edits.

const GROUP: &str = "diff.kusion.io";

/// The kinds under test: (name in the model, apiVersion, kind, plural).
const KINDS: &[(&str, &str, &str, &str)] = &[
    ("cm", "v1", "ConfigMap", "configmaps"),
    ("sec", "v1", "Secret", "secrets"),
    ("dep", "apps/v1", "Deployment", "deployments"),
    ("svc", "v1", "Service", "services"),
    ("sts", "apps/v1", "StatefulSet", "statefulsets"),
    ("wid", "diff.kusion.io/v1", "Widget", "widgets"),
];

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "size": {"type": "integer"},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "items": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {
                                  "name": {"type": "string"}, "value": {"type": "integer"}}}},
                    // Atomic (the default): items have names, but the list is replaced whole.
                    "steps": {"type": "array", "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "cmd": {"type": "string"}}}},
                    "config": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}}]}
    })
}

/// The manifests kusion and kubectl apply, without namespace (filled per namespace). `None`:
/// the object is not in the spec (removed).
#[derive(Clone)]
struct Model {
    objects: Vec<(&'static str, Option<Value>)>,
}

fn container(name: &str, image: &str) -> Value {
    json!({"name": name, "image": image})
}

impl Model {
    fn initial() -> Model {
        let objects = vec![
            (
                "cm",
                Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "labels": {"app": "diff"}},
                "data": {"k0": "v0", "k1": "v1"}})),
            ),
            (
                "sec",
                Some(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "sec"}, "type": "Opaque",
                "stringData": {"user": "u0", "password": "p0"}})),
            ),
            (
                "dep",
                Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "dep", "labels": {"app": "dep"}},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "dep"}},
                    "template": {"metadata": {"labels": {"app": "dep"}}, "spec": {
                        "containers": [{"name": "main", "image": "nginx:1.25",
                            "args": ["--a"], "env": [{"name": "A", "value": "1"}],
                            "ports": [{"containerPort": 80}]}]}}}})),
            ),
            (
                "svc",
                Some(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "svc"},
                "spec": {"selector": {"app": "dep"},
                         "ports": [{"name": "http", "port": 80, "targetPort": 80}]}})),
            ),
            (
                "sts",
                Some(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": "sts"},
                "spec": {"serviceName": "svc", "replicas": 1,
                    "selector": {"matchLabels": {"app": "sts"}},
                    "template": {"metadata": {"labels": {"app": "sts"}}, "spec": {
                        "containers": [{"name": "main", "image": "busybox:1.36",
                            "command": ["sleep", "3600"]}]}}}})),
            ),
            (
                "wid",
                Some(json!({"apiVersion": "diff.kusion.io/v1", "kind": "Widget",
                "metadata": {"name": "wid"},
                "spec": {"size": 1, "tags": ["a"], "items": [{"name": "i0", "value": 0}],
                         "steps": [{"name": "s0", "cmd": "run"}, {"name": "s1", "cmd": "check"}],
                         "config": {"mode": "fast"}}})),
            ),
        ];
        Model { objects }
    }

    fn get(&mut self, name: &str) -> Option<&mut Value> {
        self.objects
            .iter_mut()
            .find(|(n, _)| *n == name)
            .and_then(|(_, o)| o.as_mut())
    }

    /// One random edit; returns what it did (for failure reports).
    fn edit(&mut self, rng: &mut Rng, counter: &mut u32) -> String {
        *counter += 1;
        let n = *counter;
        // Objects leave and come back (only those nothing else needs).
        if rng.chance(6) {
            let which = *rng.pick(&["cm", "svc", "wid"]);
            let slot = self
                .objects
                .iter_mut()
                .find(|(w, _)| *w == which)
                .expect("known");
            return match slot.1.take() {
                Some(_) => format!("remove {which} from the spec"),
                None => {
                    slot.1 = Model::initial()
                        .objects
                        .into_iter()
                        .find(|(w, _)| *w == which)
                        .and_then(|(_, o)| o);
                    format!("add {which} back")
                }
            };
        }
        let present: Vec<&'static str> = self
            .objects
            .iter()
            .filter(|(_, o)| o.is_some())
            .map(|(w, _)| *w)
            .collect();
        let which = *rng.pick(&present);
        let obj = self.get(which).expect("present");
        match which {
            "cm" => edit_map(obj, &["data"], "k", n, rng, "cm.data").unwrap_or_else(|| {
                edit_map(obj, &["metadata", "labels"], "l", n, rng, "cm.labels").unwrap_or_default()
            }),
            "sec" => {
                if rng.chance(12) {
                    let t = if obj["type"] == "Opaque" {
                        "kusion.io/custom"
                    } else {
                        "Opaque"
                    };
                    obj["type"] = json!(t);
                    format!("sec.type = {t} (immutable)")
                } else {
                    edit_map(obj, &["stringData"], "s", n, rng, "sec.stringData")
                        .unwrap_or_default()
                }
            }
            "dep" | "sts" => edit_workload(obj, which, n, rng),
            "svc" => {
                let spec = &mut obj["spec"];
                match rng.below(4) {
                    0 => {
                        let ports = spec["ports"].as_array_mut().expect("ports");
                        let port = 8000 + rng.below(5) as i64;
                        if let Some(i) = ports.iter().position(|p| p["port"] == json!(port)) {
                            if ports.len() > 1 {
                                ports.remove(i);
                                return format!("svc: remove port {port}");
                            }
                            return "svc: keep the last port".into();
                        }
                        ports.push(json!({"name": format!("p{port}"), "port": port, "targetPort": port + 1}));
                        format!("svc: add port {port}")
                    }
                    1 => {
                        let ports = spec["ports"].as_array_mut().expect("ports");
                        let i = rng.below(ports.len());
                        let t = 9000 + rng.below(50) as i64;
                        ports[i]["targetPort"] = json!(t);
                        format!("svc: ports[{i}].targetPort = {t}")
                    }
                    2 => {
                        let t = rng.below(3);
                        spec["selector"]["tier"] = json!(format!("t{t}"));
                        format!("svc: selector.tier = t{t}")
                    }
                    _ => edit_map(
                        obj,
                        &["metadata", "annotations"],
                        "a",
                        n,
                        rng,
                        "svc.annotations",
                    )
                    .unwrap_or_default(),
                }
            }
            "wid" => {
                let spec = &mut obj["spec"];
                match rng.below(6) {
                    0 => {
                        spec["size"] = json!(rng.below(5));
                        "wid: size".into()
                    }
                    1 => {
                        let tags = spec["tags"].as_array_mut().expect("tags");
                        let t = json!(format!("t{}", rng.below(4)));
                        match tags.iter().position(|x| *x == t) {
                            Some(i) if tags.len() > 1 => {
                                tags.remove(i);
                                format!("wid: remove tag {t}")
                            }
                            Some(_) => "wid: keep the last tag".into(),
                            None => {
                                tags.push(t.clone());
                                format!("wid: add tag {t}")
                            }
                        }
                    }
                    2 | 3 => {
                        let items = spec["items"].as_array_mut().expect("items");
                        let name = format!("i{}", rng.below(4));
                        match items.iter().position(|x| x["name"] == json!(name)) {
                            // Kubernetes 1.20 stores an applied empty map-list as null and
                            // then refuses it: the last item stays.
                            Some(i) if rng.chance(50) && items.len() > 1 => {
                                items.remove(i);
                                format!("wid: remove item {name}")
                            }
                            Some(i) => {
                                items[i]["value"] = json!(n);
                                format!("wid: item {name}.value = {n}")
                            }
                            None => {
                                let at = rng.below(items.len() + 1);
                                items.insert(at, json!({"name": name, "value": n}));
                                format!("wid: insert item {name} at {at}")
                            }
                        }
                    }
                    4 => {
                        let steps = spec["steps"].as_array_mut().expect("steps");
                        if steps.len() > 1 && rng.chance(50) {
                            let i = rng.below(steps.len());
                            steps.remove(i);
                            format!("wid: remove step {i} (atomic list)")
                        } else {
                            steps.push(json!({"name": format!("s{n}"), "cmd": "x"}));
                            "wid: add a step (atomic list)".into()
                        }
                    }
                    _ => edit_map(obj, &["spec", "config"], "c", n, rng, "wid.config")
                        .unwrap_or_default(),
                }
            }
            _ => unreachable!(),
        }
    }

    /// The manifests for kubectl: Kubernetes 1.20 keys ports by (port, protocol) without a
    /// default for the protocol, so kubectl's users write `protocol: TCP`; kusion fills it in
    /// itself, so A gets the manifests as written.
    fn manifests_for_kubectl(&self, ns: &str) -> Vec<(&'static str, Value)> {
        fn fill(v: &mut Value) {
            match v {
                Value::Object(m) => {
                    for (k, x) in m.iter_mut() {
                        if k == "ports"
                            && let Value::Array(items) = x
                        {
                            for p in items.iter_mut() {
                                if let Value::Object(p) = p
                                    && !p.contains_key("protocol")
                                {
                                    p.insert("protocol".into(), json!("TCP"));
                                }
                            }
                        } else {
                            fill(x);
                        }
                    }
                }
                Value::Array(items) => items.iter_mut().for_each(fill),
                _ => {}
            }
        }
        let mut out = self.manifests(ns);
        for (_, o) in out.iter_mut() {
            fill(o);
        }
        out
    }

    fn manifests(&self, ns: &str) -> Vec<(&'static str, Value)> {
        self.objects
            .iter()
            .filter_map(|(w, o)| {
                let mut o = o.clone()?;
                o["metadata"]["namespace"] = json!(ns);
                Some((*w, o))
            })
            .collect()
    }
}

/// Adds, changes or removes a key of the map at `at` (created if missing); `None` when there
/// is no map there and it cannot be made.
fn edit_map(
    obj: &mut Value,
    at: &[&str],
    prefix: &str,
    n: u32,
    rng: &mut Rng,
    what: &str,
) -> Option<String> {
    let mut cur = obj;
    for k in at {
        if !cur.is_object() {
            return None;
        }
        cur = cur.as_object_mut()?.entry(*k).or_insert_with(|| json!({}));
    }
    let map = cur.as_object_mut()?;
    let key = format!("{prefix}{}", rng.below(4));
    if map.contains_key(&key) && rng.chance(45) && map.len() > 1 {
        map.shift_remove(&key);
        Some(format!("{what}: remove {key}"))
    } else {
        map.insert(key.clone(), json!(format!("v{n}")));
        Some(format!("{what}: set {key} = v{n}"))
    }
}

fn edit_workload(obj: &mut Value, which: &str, n: u32, rng: &mut Rng) -> String {
    let spec = &mut obj["spec"];
    let pod = &mut spec["template"]["spec"];
    let containers = pod["containers"].as_array_mut().expect("containers");
    match rng.below(10) {
        0 => {
            let r = 1 + rng.below(3);
            spec["replicas"] = json!(r);
            format!("{which}: replicas = {r}")
        }
        1 => {
            let i = rng.below(containers.len());
            let tag = rng.below(3);
            let image = if which == "dep" {
                format!("nginx:1.2{tag}")
            } else {
                format!("busybox:1.3{tag}")
            };
            containers[i]["image"] = json!(image);
            format!("{which}: containers[{i}].image = {image}")
        }
        2 => match containers.iter().position(|c| c["name"] == "side") {
            Some(i) => {
                containers.remove(i);
                format!("{which}: remove container side")
            }
            None => {
                let mut side = container("side", "envoy:1.0");
                if rng.chance(50) {
                    side["env"] = json!([{"name": "S", "value": "1"}]);
                }
                containers.push(side);
                format!("{which}: add container side")
            }
        },
        3 | 4 => {
            let i = rng.below(containers.len());
            let c = containers[i].as_object_mut().expect("a container");
            let env = c.entry("env").or_insert_with(|| json!([]));
            let env = env.as_array_mut().expect("env");
            let name = format!("E{}", rng.below(4));
            match env.iter().position(|e| e["name"] == json!(name)) {
                Some(j) if rng.chance(50) => {
                    env.remove(j);
                    if env.is_empty() {
                        c.shift_remove("env");
                    }
                    format!("{which}: containers[{i}] remove env {name}")
                }
                Some(j) => {
                    env[j]["value"] = json!(format!("{n}"));
                    format!("{which}: containers[{i}] env {name} = {n}")
                }
                None => {
                    let at = rng.below(env.len() + 1);
                    env.insert(at, json!({"name": name, "value": format!("{n}")}));
                    format!("{which}: containers[{i}] insert env {name} at {at}")
                }
            }
        }
        5 => {
            let c = &mut containers[0];
            let ports = c
                .as_object_mut()
                .expect("a container")
                .entry("ports")
                .or_insert_with(|| json!([]));
            let ports = ports.as_array_mut().expect("ports");
            let port = 8080 + rng.below(3) as i64;
            match ports.iter().position(|p| p["containerPort"] == json!(port)) {
                Some(j) => {
                    ports.remove(j);
                    if ports.is_empty() {
                        c.as_object_mut()
                            .expect("a container")
                            .shift_remove("ports");
                    }
                    format!("{which}: remove containerPort {port}")
                }
                None => {
                    ports.push(json!({"containerPort": port, "name": format!("p{port}")}));
                    format!("{which}: add containerPort {port}")
                }
            }
        }
        6 => {
            // Scalar lists are atomic.
            let c = containers[0].as_object_mut().expect("a container");
            let key = if which == "dep" { "args" } else { "command" };
            let list = c.entry(key).or_insert_with(|| json!([]));
            let list = list.as_array_mut().expect("a list");
            if list.len() > 1 && rng.chance(50) {
                let j = rng.below(list.len());
                list.remove(j);
                format!("{which}: {key}: remove item {j}")
            } else {
                let at = rng.below(list.len() + 1);
                list.insert(at, json!(format!("--x{n}")));
                format!("{which}: {key}: insert at {at}")
            }
        }
        7 => {
            let c = containers[0].as_object_mut().expect("a container");
            if c.contains_key("resources") {
                c.shift_remove("resources");
                format!("{which}: remove resources")
            } else {
                let cpu = *rng.pick(&["100m", "0.25", "1"]);
                c.insert(
                    "resources".into(),
                    json!({"requests": {"cpu": cpu, "memory": "64Mi"}}),
                );
                format!("{which}: resources.requests.cpu = {cpu}")
            }
        }
        8 => {
            // Tolerations: an atomic list of objects.
            let tol = pod
                .as_object_mut()
                .expect("a pod spec")
                .entry("tolerations")
                .or_insert_with(|| json!([]));
            let tol = tol.as_array_mut().expect("tolerations");
            if !tol.is_empty() && rng.chance(50) {
                tol.pop();
                if tol.is_empty() {
                    pod.as_object_mut()
                        .expect("a pod spec")
                        .shift_remove("tolerations");
                }
                format!("{which}: remove a toleration")
            } else {
                tol.push(json!({"key": format!("k{n}"), "operator": "Exists"}));
                format!("{which}: add a toleration")
            }
        }
        _ => {
            // Immutable: the selector (with the template's labels), or a StatefulSet's serviceName.
            if which == "sts" && rng.chance(50) {
                let name = if spec["serviceName"] == "svc" {
                    "svc-alt"
                } else {
                    "svc"
                };
                spec["serviceName"] = json!(name);
                return format!("sts: serviceName = {name} (immutable)");
            }
            let tier = format!("t{n}");
            spec["selector"]["matchLabels"]["tier"] = json!(tier);
            spec["template"]["metadata"]["labels"]["tier"] = json!(tier);
            format!("{which}: selector tier = {tier} (immutable)")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The two tools and the live objects.

struct Env {
    cp: &'static ControlPlane,
    dir: PathBuf,
}

/// What happened to one object when kubectl applied it (server dry-run or real).
#[derive(Debug, Clone, PartialEq)]
enum KubectlResult {
    Ok,
    Conflict(String),
    Immutable(String),
    Failed(String),
}

fn classify(out: &Output) -> KubectlResult {
    if out.status.success() {
        return KubectlResult::Ok;
    }
    let err = text(out);
    if err.contains("conflict") {
        KubectlResult::Conflict(err)
    } else if err.contains("immutable")
        || (err.contains("updates to") && err.contains("are forbidden"))
    {
        KubectlResult::Immutable(err)
    } else {
        KubectlResult::Failed(err)
    }
}

impl Env {
    fn kusionctl(&self, args: &[&str], runtime_config: &str) -> Output {
        kusionctl_in(&self.dir, &self.dir)
            .args(args)
            .env("KUSION_STATE_DIR", self.dir.join("state"))
            .env("KUSION_RUNTIME_CONFIG", self.dir.join(runtime_config))
            .output()
            .expect("running kusionctl")
    }

    fn kubectl(&self, args: &[&str], manifest: Option<&Value>) -> Output {
        let mut cmd = self
            .cp
            .kubectl()
            .expect("kubectl is built (scripts/k8s/build-control-plane.sh)");
        cmd.args(args);
        if let Some(obj) = manifest {
            let path = self.dir.join("kubectl-in.json");
            std::fs::write(&path, obj.to_string()).expect("writing a manifest");
            cmd.arg("-f").arg(path);
        }
        cmd.output().expect("running kubectl")
    }

    fn api(&self, ns: &str, kind: &str) -> Api<DynamicObject> {
        let (_, api_version, kind, plural) = KINDS
            .iter()
            .find(|k| k.2 == kind)
            .copied()
            .expect("a known kind");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        Api::namespaced_with(self.cp.client().expect("a client"), ns, &ar)
    }

    fn live(&self, ns: &str, kind: &str, name: &str) -> Option<Value> {
        self.cp
            .block_on(self.api(ns, kind).get_opt(name))
            .expect("reading a live object")
            .map(|o| serde_json::to_value(o).expect("json"))
    }

    fn snapshot(&self, ns: &str) -> Vec<(&'static str, Option<Value>)> {
        KINDS
            .iter()
            .map(|(w, _, kind, _)| (*w, self.live(ns, kind, w)))
            .collect()
    }
}

/// The live object without what legitimately differs between two namespaces and two managers.
fn normalize(mut obj: Value) -> Value {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "selfLink",
            "namespace",
        ] {
            meta.shift_remove(k);
        }
        // Written by the Deployment controller some time after each apply.
        if let Some(notes) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            notes.shift_remove("deployment.kubernetes.io/revision");
            if notes.is_empty() {
                meta.shift_remove("annotations");
            }
        }
    }
    if let Some(m) = obj.as_object_mut() {
        m.shift_remove("status");
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.shift_remove("clusterIP");
        spec.shift_remove("clusterIPs");
    }
    obj
}

/// Secrets shown by `stringData` keys as kusion declares them (the server only has `data`).
fn as_declared(obj: &Value) -> Value {
    let mut obj = normalize(obj.clone());
    if obj["kind"] == "Secret"
        && let Some(data) = obj.get("data").and_then(Value::as_object).cloned()
    {
        use base64::Engine;
        let decoded: Map<String, Value> = data
            .iter()
            .map(|(k, v)| {
                let text = base64::engine::general_purpose::STANDARD
                    .decode(v.as_str().unwrap_or(""))
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .unwrap_or_default();
                (k.clone(), json!(text))
            })
            .collect();
        if let Some(m) = obj.as_object_mut() {
            m.shift_remove("data");
            m.insert("stringData".into(), Value::Object(decoded));
        }
    }
    obj
}

/// Keys naming an item of a list of objects, for paths that survive reordering.
const ITEM_KEYS: &[&str] = &["name", "containerPort", "port", "key"];

/// `path` (kusion's syntax, indices into lists of `obj`) with each index replaced by the item's
/// key (`containers[name=main]`) where the item has one. Unresolvable tails stay as they are.
fn canonical(path: &str, obj: &Value) -> String {
    let Ok(parsed) = kusion_sdk::FieldPath::parse(path) else {
        return path.to_string();
    };
    let mut out = String::new();
    let mut cur = Some(obj);
    for seg in &parsed.0 {
        match seg {
            kusion_sdk::Segment::Key(k) => {
                out.push('.');
                out.push_str(k);
                cur = cur.and_then(|c| c.get(k));
            }
            kusion_sdk::Segment::Index(i) => {
                let item = cur.and_then(|c| c.get(*i));
                let key =
                    item.and_then(|it| ITEM_KEYS.iter().find_map(|k| Some((*k, it.get(*k)?))));
                match key {
                    Some((k, v)) => {
                        out.push_str(&format!("[{k}={}]", v.to_string().trim_matches('"')))
                    }
                    None => out.push_str(&format!("[{i}]")),
                }
                cur = item;
            }
        }
    }
    out
}

/// Whether canonical path `p` names something under (or above) a field `manifest` declares.
fn declared(p: &str, manifest: &Value) -> bool {
    let mut cur = manifest;
    let mut rest = p.trim_start_matches('.');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let Some((inner, tail)) = after.split_once(']') else {
                return false;
            };
            let Some(items) = cur.as_array() else {
                return false;
            };
            let found = match inner.split_once('=') {
                Some((k, v)) => items.iter().find(|it| {
                    it.get(k)
                        .is_some_and(|x| x.to_string().trim_matches('"') == v)
                }),
                None => inner.parse::<usize>().ok().and_then(|i| items.get(i)),
            };
            let Some(item) = found else { return false };
            cur = item;
            rest = tail.trim_start_matches('.');
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            let (key, tail) = rest.split_at(end);
            match cur.get(key) {
                Some(v) => cur = v,
                // Under an atomic scalar, or a whole value: declared.
                None => return cur.is_string() || cur.is_number(),
            }
            rest = tail.trim_start_matches('.');
        }
    }
    true
}

/// Paths two canonical path sets must agree on: every path of one is at, above or below a path
/// of the other.
fn covered(p: &str, others: &BTreeSet<String>) -> bool {
    others.iter().any(|o| {
        p == o
            || (p.starts_with(o.as_str()) && matches!(p.as_bytes().get(o.len()), Some(b'.' | b'[')))
            || (o.starts_with(p) && matches!(o.as_bytes().get(p.len()), Some(b'.' | b'[')))
    })
}

fn spec_json(manifests: &[(&'static str, Value)]) -> Value {
    let resources: Vec<Value> = manifests
        .iter()
        .map(|(_, o)| {
            let meta = &o["metadata"];
            let id = format!(
                "{}:{}:{}:{}",
                o["apiVersion"].as_str().unwrap_or(""),
                o["kind"].as_str().unwrap_or(""),
                meta["namespace"].as_str().unwrap_or(""),
                meta["name"].as_str().unwrap_or("")
            );
            json!({"id": id, "type": "Kubernetes", "attributes": o})
        })
        .collect();
    json!({ "resources": resources })
}

fn parse_json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("kusionctl printed no JSON ({e}):\n{}", text(out)))
}

/// A plan without what differs between two runs of the same plan (nothing, today), for
/// comparing the shortcut's answer with the server's.
fn plan_of(out: &Output) -> Value {
    parse_json(out)
}

// ---------------------------------------------------------------------------------------------
// What a campaign exercised, printed at its end.

use std::sync::atomic::{AtomicUsize, Ordering};

static STEPS: AtomicUsize = AtomicUsize::new(0);
static CONFLICTS: AtomicUsize = AtomicUsize::new(0);
static REPLACES: AtomicUsize = AtomicUsize::new(0);
static UPDATES: AtomicUsize = AtomicUsize::new(0);
static DELETES: AtomicUsize = AtomicUsize::new(0);
static REMOVED_FIELDS: AtomicUsize = AtomicUsize::new(0);

fn count(counter: &AtomicUsize, n: usize) {
    counter.fetch_add(n, Ordering::Relaxed);
}

// ---------------------------------------------------------------------------------------------
// One sequence.

struct Sequence<'a> {
    env: &'a Env,
    seed: u64,
    a: String,
    b: String,
    log: Vec<String>,
}

impl Sequence<'_> {
    fn fail(&self, step: usize, what: String) -> ! {
        panic!(
            "differential failure (seed {}, step {step}): {what}\nsteps so far:\n  {}",
            self.seed,
            self.log.join("\n  ")
        );
    }

    /// Changes another field manager or a person makes in both namespaces alike.
    fn outside_change(&mut self, rng: &mut Rng, model: &Model) -> Option<String> {
        let present: Vec<&str> = model
            .objects
            .iter()
            .filter(|(_, o)| o.is_some())
            .map(|(w, _)| *w)
            .collect();
        let apply_both = |kind: &str, name: &str, patch: Value, ssa: bool| -> Result<(), String> {
            for ns in [self.a.clone(), self.b.clone()] {
                let api = self.env.api(&ns, kind);
                let result = if ssa {
                    let mut body = patch.clone();
                    body["metadata"]["name"] = json!(name);
                    body["metadata"]["namespace"] = json!(ns);
                    self.env.cp.block_on(api.patch(
                        name,
                        &PatchParams::apply("ops-tool").force(),
                        &Patch::Apply(&body),
                    ))
                } else {
                    let params = PatchParams {
                        field_manager: Some("drifter".into()),
                        ..Default::default()
                    };
                    self.env
                        .cp
                        .block_on(api.patch(name, &params, &Patch::Merge(&patch)))
                };
                result.map_err(|e| e.to_string())?;
            }
            Ok(())
        };
        let (kind, name, patch, ssa, what) = match rng.below(6) {
            0 if present.contains(&"cm") => {
                let k = format!("k{}", rng.below(4));
                (
                    "ConfigMap",
                    "cm",
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {k.clone(): "ops"}}),
                    true,
                    format!("ops-tool applies cm.data.{k}"),
                )
            }
            1 if present.contains(&"cm") => {
                let k = format!("k{}", rng.below(4));
                (
                    "ConfigMap",
                    "cm",
                    json!({"data": {k.clone(): null}}),
                    false,
                    format!("drift: cm.data.{k} removed"),
                )
            }
            2 => (
                "Deployment",
                "dep",
                json!({"spec": {"replicas": 4}}),
                false,
                "drift: dep scaled to 4".into(),
            ),
            3 => (
                "Deployment",
                "dep",
                json!({"metadata": {"labels": {"team": "other"}}}),
                false,
                "drift: dep gets a label kusion does not manage".into(),
            ),
            4 if present.contains(&"wid") => (
                "Widget",
                "wid",
                json!({"spec": {"config": {"mode": "slow"}}}),
                false,
                "drift: wid.config.mode = slow".into(),
            ),
            _ if present.contains(&"svc") => (
                "Service",
                "svc",
                json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"annotations": {"ops": "yes"}}}),
                true,
                "ops-tool applies an annotation on svc".into(),
            ),
            _ => return None,
        };
        match apply_both(kind, name, patch, ssa) {
            Ok(()) => Some(what),
            Err(e) => Some(format!("{what} (refused: {e})")),
        }
    }

    /// Previews, applies with both tools and checks; `Ok(true)` when a conflict stopped both.
    fn step(&mut self, model: &Model, before_model: &Model, force: bool) -> Result<bool, String> {
        let env = self.env;
        let spec = spec_json(&model.manifests(&self.a));
        std::fs::write(env.dir.join("spec.json"), spec.to_string()).expect("writing the spec");
        let mut args = vec!["-o", "json"];
        if force {
            args.push("--force-conflicts");
        }
        let preview = |config: &str| {
            let mut a = vec!["preview", "-f", "spec.json"];
            a.extend(&args);
            env.kusionctl(&a, config)
        };

        // kubectl's verdict for each object, asked without changing anything.
        let in_b = model.manifests_for_kubectl(&self.b);
        let mut verdicts = Vec::new();
        for (w, obj) in &in_b {
            let mut a = vec!["apply", "--server-side", "--dry-run=server", "-o", "json"];
            if force {
                a.push("--force-conflicts");
            }
            verdicts.push((*w, classify(&env.kubectl(&a, Some(obj)))));
        }
        let conflicts: Vec<&(&str, KubectlResult)> = verdicts
            .iter()
            .filter(|(_, v)| matches!(v, KubectlResult::Conflict(_)))
            .collect();
        for (w, v) in &verdicts {
            if let KubectlResult::Failed(e) = v {
                return Err(format!(
                    "kubectl cannot apply {w} at all (a generator error): {e}"
                ));
            }
        }

        let before_a = env.snapshot(&self.a);
        let fast = preview("runtime.json");
        let slow = preview("runtime-no-shortcut.json");
        let plan = plan_of(&fast);
        if plan_of(&slow) != plan {
            return Err(format!(
                "the preview differs with the dry-run shortcut off:\nwith: {}\nwithout: {}",
                text(&fast),
                text(&slow)
            ));
        }
        if !conflicts.is_empty() {
            count(&CONFLICTS, 1);
            // kubectl meets a conflict: kusion's plan stops, naming the other manager, and
            // changes nothing; B stays as it is too.
            let err = plan.get("error").and_then(Value::as_str).unwrap_or("");
            for (w, v) in &conflicts {
                let KubectlResult::Conflict(k) = v else {
                    continue;
                };
                let manager = ["ops-tool", "drifter"]
                    .into_iter()
                    .find(|m| k.contains(m))
                    .unwrap_or("?");
                if !(err.contains("conflict")
                    && err.contains(manager)
                    && err.contains(&format!(":{w}")))
                {
                    return Err(format!(
                        "kubectl reports a conflict on {w} ({k}), kusionctl's preview says: {}",
                        text(&fast)
                    ));
                }
            }
            let mut a = vec!["apply", "-y", "-f", "spec.json"];
            a.extend(&args);
            let applied = env.kusionctl(&a, "runtime.json");
            if applied.status.success() {
                return Err(format!(
                    "kusionctl applied despite a conflict: {}",
                    text(&applied)
                ));
            }
            if env.snapshot(&self.a) != before_a {
                return Err("a failed plan changed objects".into());
            }
            return Ok(true);
        }
        if plan.get("error").is_some() {
            return Err(format!(
                "kusionctl's preview failed where kubectl has no conflict: {}",
                text(&fast)
            ));
        }
        let steps = plan["steps"].as_array().cloned().unwrap_or_default();
        count(&STEPS, 1);
        for s in &steps {
            match s["action"].as_str() {
                Some("Replace") => count(&REPLACES, 1),
                Some("Update") => count(&UPDATES, 1),
                Some("Delete") => count(&DELETES, 1),
                _ => {}
            }
            let removed = s["changes"]
                .as_array()
                .map_or(0, |c| c.iter().filter(|c| c["kind"] == "removed").count());
            count(&REMOVED_FIELDS, removed);
        }
        let step_of = |w: &str| {
            steps
                .iter()
                .find(|s| {
                    s["id"]
                        .as_str()
                        .is_some_and(|id| id.ends_with(&format!(":{}:{w}", self.a)))
                })
                .cloned()
        };
        // Immutable fields: a replacement naming the field kubectl's server refused.
        for (w, v) in &verdicts {
            if let KubectlResult::Immutable(e) = v {
                let s = step_of(w).ok_or_else(|| format!("no plan step for {w}"))?;
                let forced: Vec<String> = s["forces_replacement"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                // kubectl names each field (`spec.selector: Invalid value: ...: field is
                // immutable`) or the part it may not change (`spec: Forbidden: updates to ...`).
                let named = |f: &str| {
                    e.contains(&format!("{f}: ")) || {
                        let part = f.rsplit_once('.').map_or(f, |(p, _)| p);
                        e.contains(&format!("{part}: Forbidden: updates to"))
                    }
                };
                if s["action"] != "Replace" || forced.is_empty() || !forced.iter().all(|f| named(f))
                {
                    return Err(format!("kubectl: {e}\nkusionctl plans for {w}: {s}"));
                }
            }
        }

        // Apply with both tools.
        let mut a = vec!["apply", "-y", "-f", "spec.json"];
        a.extend(&args);
        let applied = env.kusionctl(&a, "runtime.json");
        if !applied.status.success() {
            return Err(format!("kusionctl apply failed: {}", text(&applied)));
        }
        for (w, obj) in &in_b {
            let mut a = vec!["apply", "--server-side"];
            if force {
                a.push("--force-conflicts");
            }
            let out = env.kubectl(&a, Some(obj));
            match classify(&out) {
                KubectlResult::Ok => {}
                KubectlResult::Immutable(_) => {
                    // What a person does when kubectl cannot change it in place.
                    let del = env.kubectl(&["delete", "--wait=true"], Some(obj));
                    assert!(del.status.success(), "kubectl delete: {}", text(&del));
                    let again = env.kubectl(&a, Some(obj));
                    assert!(
                        again.status.success(),
                        "kubectl apply after delete: {}",
                        text(&again)
                    );
                }
                other => return Err(format!("kubectl apply of {w}: {other:?}")),
            }
        }
        // Objects that left the spec: kusion deletes them; kubectl is told to.
        for (w, o) in &before_model.objects {
            if o.is_some() && model.objects.iter().any(|(x, p)| x == w && p.is_none()) {
                let (_, api_version, kind, _) =
                    KINDS.iter().find(|k| k.0 == *w).copied().expect("known");
                let mut obj = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": w, "namespace": self.b}});
                obj["metadata"]["name"] = json!(w);
                let del = env.kubectl(&["delete", "--wait=true", "--ignore-not-found"], Some(&obj));
                assert!(del.status.success(), "kubectl delete: {}", text(&del));
            }
        }
        wait_for_deletions(env, &self.a);

        // A and B hold the same objects.
        let after_a = env.snapshot(&self.a);
        let after_b = env.snapshot(&self.b);
        for ((w, la), (_, lb)) in after_a.iter().zip(&after_b) {
            let (na, nb) = (la.clone().map(normalize), lb.clone().map(normalize));
            if na != nb {
                return Err(format!(
                    "{w} differs:\nkusionctl (A): {}\nkubectl   (B): {}\nkusionctl apply said: {}",
                    serde_json::to_string_pretty(&na).unwrap_or_default(),
                    serde_json::to_string_pretty(&nb).unwrap_or_default(),
                    text(&applied)
                ));
            }
        }

        // The preview listed exactly what changed.
        for ((w, before), (_, after)) in before_a.iter().zip(&after_a) {
            let s = step_of(w);
            let action = s
                .as_ref()
                .map(|s| s["action"].as_str().unwrap_or("").to_string());
            match (before, after) {
                (None, None) => {}
                (None, Some(_)) if action.as_deref() == Some("Create") => {}
                (Some(_), None) if action.as_deref() == Some("Delete") => {}
                (Some(b), Some(a)) => {
                    let (db, da) = (as_declared(b), as_declared(a));
                    let manifest_before = before_model
                        .objects
                        .iter()
                        .find(|(x, _)| x == w)
                        .and_then(|(_, o)| o.clone())
                        .unwrap_or(Value::Null);
                    let manifest_after = model
                        .objects
                        .iter()
                        .find(|(x, _)| x == w)
                        .and_then(|(_, o)| o.clone())
                        .unwrap_or(Value::Null);
                    let actual: BTreeSet<String> = kusion_kernel::diff::diff(&db, &da)
                        .iter()
                        .map(|c| {
                            let p = c.path.to_string();
                            match c.kind {
                                kusion_kernel::diff::ChangeKind::Added => canonical(&p, &da),
                                _ => canonical(&p, &db),
                            }
                        })
                        .filter(|p| declared(p, &manifest_before) || declared(p, &manifest_after))
                        .collect();
                    let planned: BTreeSet<String> = s
                        .as_ref()
                        .and_then(|s| s["changes"].as_array().cloned())
                        .unwrap_or_default()
                        .iter()
                        .map(|c| {
                            let p = c["path"].as_str().unwrap_or("");
                            if c["kind"] == "added" {
                                canonical(p, &da)
                            } else {
                                canonical(p, &db)
                            }
                        })
                        .collect();
                    let missing: Vec<&String> =
                        actual.iter().filter(|p| !covered(p, &planned)).collect();
                    let extra: Vec<&String> =
                        planned.iter().filter(|p| !covered(p, &actual)).collect();
                    let unchanged = action.as_deref() == Some("UnChanged");
                    if !missing.is_empty() || !extra.is_empty() || (unchanged && !actual.is_empty())
                    {
                        return Err(format!(
                            "{w}: the preview ({}) listed {planned:?}; what changed: {actual:?} (missing {missing:?}, extra {extra:?})",
                            action.unwrap_or_default()
                        ));
                    }
                }
                _ => {
                    return Err(format!(
                        "{w}: planned {action:?}, but it went from {} to {}",
                        before.is_some(),
                        after.is_some()
                    ));
                }
            }
        }

        // Converged: the next preview changes nothing, with and without the shortcut.
        for config in ["runtime.json", "runtime-no-shortcut.json"] {
            let again = preview(config);
            let plan = plan_of(&again);
            let changing: Vec<&Value> = plan["steps"]
                .as_array()
                .map(|s| s.iter().filter(|s| s["action"] != "UnChanged").collect())
                .unwrap_or_default();
            if plan.get("error").is_some() || !changing.is_empty() {
                return Err(format!(
                    "the preview after the apply ({config}) is not `No changes`: {}",
                    text(&again)
                ));
            }
        }
        Ok(false)
    }
}

/// Deletions in A run in the background (pods of a replaced Deployment); wait until no object
/// of A is terminating, so snapshots compare settled objects.
fn wait_for_deletions(env: &Env, ns: &str) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while env.snapshot(ns).iter().any(|(_, o)| {
        o.as_ref()
            .is_some_and(|o| o["metadata"].get("deletionTimestamp").is_some())
    }) {
        assert!(
            Instant::now() < give_up,
            "objects in {ns} still terminating"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn setup(cp: &'static ControlPlane) -> Env {
    built("libkusion_runtime_kubernetes.so");
    let dir = tempfile::tempdir().expect("a temp dir").keep();
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    std::fs::write(
        dir.join("runtime.json"),
        json!({"kubernetes": {"kubeconfig": kubeconfig}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("runtime-no-shortcut.json"),
        json!({"kubernetes": {"kubeconfig": kubeconfig, "answerFromRead": false}}).to_string(),
    )
    .unwrap();
    let env = Env { cp, dir };
    let out = env.kubectl(&["apply", "--server-side"], Some(&crd()));
    assert!(out.status.success(), "the CRD: {}", text(&out));
    let out = env.kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/widgets.{GROUP}"),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "the CRD is not established: {}",
        text(&out)
    );
    env
}

fn namespace(env: &Env, name: &str) {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let out = env.kubectl(&["apply", "--server-side"], Some(&ns));
    assert!(out.status.success(), "namespace {name}: {}", text(&out));
}

/// Runs one seeded sequence of `steps` steps in fresh namespaces.
fn run_sequence(env: &Env, seed: u64, steps: usize) {
    let mut rng = Rng(seed);
    let tag = format!("{:x}", seed & 0xffff_ffff);
    let (a, b) = (format!("da-{tag}"), format!("db-{tag}"));
    namespace(env, &a);
    namespace(env, &b);
    // A fresh state per sequence (its own namespaces).
    let _ = std::fs::remove_dir_all(env.dir.join("state"));
    let mut seq = Sequence {
        env,
        seed,
        a,
        b,
        log: Vec::new(),
    };
    let mut model = Model::initial();
    let mut previous = Model {
        objects: model.objects.iter().map(|(w, _)| (*w, None)).collect(),
    };
    let mut counter = 0;
    for step in 0..steps {
        if step > 0 {
            if rng.chance(30)
                && let Some(what) = seq.outside_change(&mut rng, &model)
            {
                seq.log.push(format!("step {step}: {what}"));
            }
            for _ in 0..1 + rng.below(3) {
                let what = model.edit(&mut rng, &mut counter);
                seq.log.push(format!("step {step}: {what}"));
            }
        }
        let force = rng.chance(25);
        seq.log.push(format!(
            "step {step}: apply{}",
            if force { " --force-conflicts" } else { "" }
        ));
        match seq.step(&model, &previous, force) {
            Err(e) => seq.fail(step, e),
            // A conflict stops both tools; taking the fields over must then converge.
            Ok(true) => {
                seq.log
                    .push(format!("step {step}: conflict; apply --force-conflicts"));
                match seq.step(&model, &previous, true) {
                    Ok(false) => {}
                    Ok(true) => seq.fail(step, "a conflict despite --force-conflicts".into()),
                    Err(e) => seq.fail(step, e),
                }
            }
            Ok(false) => {}
        }
        previous = model.clone();
    }
    // Leave nothing running: the namespaces go (their Deployments' pods with them).
    let _ = env.kubectl(
        &["delete", "namespace", &seq.a, &seq.b, "--wait=false"],
        None,
    );
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// Sequences that once found a difference: (seed, steps). Each failure of the campaign adds one.
fn regressions() -> Vec<(u64, usize)> {
    vec![
        // A StatefulSet's selector change: the server says "updates to statefulset spec for
        // fields other than ... are forbidden", not "field is immutable"; kusion failed to plan
        // instead of planning a replacement of spec.selector.
        (1001, 7),
    ]
}

#[test]
fn kusionctl_matches_kubectl_server_side_apply() {
    let cp = ControlPlane::shared();
    let env = setup(cp);
    let first = env_number("KUSION_DIFF_SEED", 0x5EED_0016);
    let sequences = env_number("KUSION_DIFF_SEQUENCES", 2);
    let steps = env_number("KUSION_DIFF_STEPS", 6) as usize;
    for (seed, steps) in regressions() {
        run_sequence(&env, seed, steps);
    }
    for i in 0..sequences {
        let seed = first.wrapping_add(i.wrapping_mul(0x9E37_79B9));
        eprintln!(
            "differential sequence {} of {sequences}: seed {seed:#x}, {steps} steps",
            i + 1
        );
        run_sequence(&env, seed, steps);
    }
    let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
    eprintln!(
        "differential: {} steps compared equal: {} updates, {} replacements, {} deletions, \
         {} removed fields previewed, {} conflicts stopped both tools",
        n(&STEPS),
        n(&UPDATES),
        n(&REPLACES),
        n(&DELETES),
        n(&REMOVED_FIELDS),
        n(&CONFLICTS)
    );
}
