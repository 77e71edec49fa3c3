//! Cluster-qualified state keys: one ID in several targets, and state written before targets
//! existed (snapshot and journal) migrating to qualified keys without creating anything twice.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use kusion_sdk::runtime::*;
use kusion_sdk::{PluginError, PluginResult, Resource, Value};
use serde_json::json;

use kusion_kernel::execute::ApplyOptions;
use kusion_kernel::operation::{self, Applied, Stack};
use kusion_kernel::plan::{Action, PlanOptions, PlanView};
use kusion_kernel::registry::Registry;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::{LocalStore, StateStore};

/// A fake cloud with several regions: a resource's region is its `cluster` extension (none
/// means the configured default, `home`), and its target is that extension.
#[derive(Default)]
struct Regions {
    /// (region, id) -> attributes.
    objects: Mutex<BTreeMap<(String, String), Value>>,
    /// (region, id) -> how many times it was created.
    creates: Mutex<BTreeMap<(String, String), usize>>,
}

fn region(r: &Resource) -> String {
    r.extensions
        .get("cluster")
        .and_then(Value::as_str)
        .unwrap_or("home")
        .to_string()
}

impl Runtime for Regions {
    fn describe(&self) -> RuntimeInfo {
        RuntimeInfo {
            name: "regions".into(),
            version: "0".into(),
            abi: kusion_sdk::ABI_VERSION,
            resource_types: vec!["Test".into()],
            capabilities: Capabilities::default(),
        }
    }
    fn configure(&self, _: &Value) -> PluginResult<()> {
        Ok(())
    }
    fn target(&self, r: &Resource) -> PluginResult<Option<String>> {
        match r.extensions.get("cluster") {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(PluginError::invalid("extension `cluster` must be a string")),
        }
    }
    fn apply(&self, r: &ApplyRequest) -> PluginResult<ApplyResponse> {
        let key = (region(&r.planned), r.planned.id.clone());
        let mut objects = self.objects.lock().unwrap();
        if !objects.contains_key(&key) {
            *self.creates.lock().unwrap().entry(key.clone()).or_default() += 1;
        }
        objects.insert(key, Value::Object(r.planned.attributes.clone()));
        Ok(ApplyResponse {
            resource: r.planned.clone(),
            private: None,
            sensitive_paths: vec![],
            unknown_paths: vec![],
            requires_replace: vec![],
        })
    }
    fn read(&self, r: &ReadRequest) -> PluginResult<ReadResponse> {
        let base = r.planned.as_ref().or(r.prior.as_ref()).unwrap();
        let objects = self.objects.lock().unwrap();
        let resource = objects.get(&(region(base), base.id.clone())).map(|attrs| {
            let mut live = base.clone();
            live.attributes = attrs.as_object().unwrap().clone();
            live
        });
        Ok(ReadResponse {
            resource,
            ..Default::default()
        })
    }
    fn import(&self, _: &ImportRequest) -> PluginResult<ReadResponse> {
        Ok(ReadResponse::default())
    }
    fn delete(&self, r: &DeleteRequest) -> PluginResult<()> {
        self.objects
            .lock()
            .unwrap()
            .remove(&(region(&r.resource), r.resource.id.clone()));
        Ok(())
    }
    fn watch(&self, _: &WatchRequest) -> PluginResult<Box<dyn Watch>> {
        Err(PluginError::unsupported("no watch"))
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<LocalStore>,
    cloud: Arc<Regions>,
    stack: Stack,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LocalStore::new(dir.path()));
    let cloud = Arc::new(Regions::default());
    let mut registry = Registry::new();
    registry.register(cloud.clone()).unwrap();
    Fixture {
        stack: Stack {
            store: store.clone(),
            registry,
        },
        _dir: dir,
        store,
        cloud,
    }
}

fn res(id: &str, cluster: Option<&str>, attrs: Value) -> Resource {
    let mut r = Resource::new(id, "Test", attrs.as_object().unwrap().clone());
    if let Some(c) = cluster {
        r.extensions.insert("cluster".into(), json!(c));
    }
    r
}

fn no_cancel() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

fn preview(f: &Fixture, spec: &Spec, destroy: bool) -> PlanView {
    let options = PlanOptions {
        destroy,
        ..Default::default()
    };
    operation::preview(spec, &f.stack, &options, no_cancel()).unwrap()
}

fn apply(f: &Fixture, spec: &Spec, destroy: bool) -> Applied {
    let options = PlanOptions {
        destroy,
        ..Default::default()
    };
    operation::apply(
        spec,
        &f.stack,
        if destroy { "destroy" } else { "apply" },
        &options,
        &ApplyOptions::default(),
        vec![],
        |_| true,
        None,
        no_cancel(),
    )
    .unwrap()
}

fn keys(f: &Fixture) -> Vec<String> {
    let mut keys: Vec<String> = f.store.load().unwrap().resources.keys().cloned().collect();
    keys.sort();
    keys
}

fn actions(view: &PlanView) -> Vec<(String, Option<String>, Action)> {
    let mut out: Vec<_> = view
        .steps
        .iter()
        .map(|s| (s.id.clone(), s.target.clone(), s.action))
        .collect();
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

fn objects(f: &Fixture) -> Vec<(String, String)> {
    f.cloud.objects.lock().unwrap().keys().cloned().collect()
}

#[test]
fn one_id_in_three_targets_is_three_entries() {
    let f = fixture();
    let spec = Spec {
        resources: vec![
            res("t:ns", None, json!({"v": "home"})),
            res("t:ns", Some("east"), json!({"v": "east"})),
            res("t:ns", Some("west"), json!({"v": "west"})),
            // Depends on, and refers to, the namespace of its own target.
            {
                let mut r = res("t:app", Some("east"), json!({"ns": "$kusion_path[t:ns].v"}));
                r.depends_on.push("t:ns".into());
                r
            },
        ],
    };
    let Applied::Done { report, .. } = apply(&f, &spec, false) else {
        panic!("expected an apply")
    };
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(report.created(), 4);
    assert_eq!(keys(&f), ["t:app@east", "t:ns", "t:ns@east", "t:ns@west"]);
    assert_eq!(
        f.cloud.objects.lock().unwrap()[&("east".to_string(), "t:app".to_string())],
        json!({"ns": "east"}),
        "the reference resolved to the namespace in the same target"
    );
    let view = preview(&f, &spec, false);
    assert!(!view.has_changes(), "{:?}", actions(&view));
    assert_eq!(
        actions(&view)[1..],
        [
            ("t:ns".into(), None, Action::UnChanged),
            ("t:ns".into(), Some("east".into()), Action::UnChanged),
            ("t:ns".into(), Some("west".into()), Action::UnChanged),
        ]
    );

    // Dropping one target's copy deletes exactly that one.
    let mut fewer = spec.clone();
    fewer.resources.remove(2);
    let view = preview(&f, &fewer, false);
    let deletes: Vec<_> = actions(&view)
        .into_iter()
        .filter(|a| a.2 == Action::Delete)
        .collect();
    assert_eq!(
        deletes,
        [("t:ns".into(), Some("west".into()), Action::Delete)]
    );

    let Applied::Done { report, .. } = apply(&f, &spec, true) else {
        panic!("expected a destroy")
    };
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(report.deleted(), 4);
    assert!(objects(&f).is_empty(), "{:?}", objects(&f));
    assert!(keys(&f).is_empty());
}

#[test]
fn an_id_twice_in_one_target_or_an_ambiguous_reference_is_an_error() {
    let f = fixture();
    let twice = Spec {
        resources: vec![
            res("t:ns", Some("east"), json!({})),
            res("t:ns", Some("east"), json!({})),
        ],
    };
    let e = operation::preview(&twice, &f.stack, &PlanOptions::default(), no_cancel())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("duplicate resource ID \"t:ns\"") && e.contains("\"east\""),
        "{e}"
    );
    let ambiguous = Spec {
        resources: vec![
            res("t:ns", Some("east"), json!({"v": 1})),
            res("t:ns", Some("west"), json!({"v": 2})),
            res("t:app", None, json!({"ns": "$kusion_path[t:ns].v"})),
        ],
    };
    let e = operation::preview(&ambiguous, &f.stack, &PlanOptions::default(), no_cancel())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t:ns@east") && e.contains("t:ns@west") && e.contains("t:app"),
        "{e}"
    );
    let bad = Spec {
        resources: vec![res("t:ns", None, json!({}))]
            .into_iter()
            .map(|mut r| {
                r.extensions.insert("cluster".into(), json!(7));
                r
            })
            .collect(),
    };
    let e = operation::preview(&bad, &f.stack, &PlanOptions::default(), no_cancel())
        .unwrap_err()
        .to_string();
    assert!(e.contains("t:ns") && e.contains("must be a string"), "{e}");
}

/// An entry as written before targets existed (no `target` field).
fn old_entry(id: &str, cluster: &str, v: &str) -> Value {
    json!({"resource": {"id": id, "type": "Test", "attributes": {"v": v},
                        "extensions": {"cluster": cluster}},
           "updatedAt": 1})
}

#[test]
fn an_old_state_file_migrates_to_qualified_keys() {
    let f = fixture();
    // Written by a kusion without targets: `t:ns` went to east, `t:gone` to west.
    let old = json!({"serial": 3, "resources": [old_entry("t:ns", "east", "x"),
                                                old_entry("t:gone", "west", "g")]});
    std::fs::write(
        f.store.dir().join("state.json"),
        serde_json::to_vec(&old).unwrap(),
    )
    .unwrap();
    f.cloud.objects.lock().unwrap().extend([
        (("east".into(), "t:ns".into()), json!({"v": "x"})),
        (("west".into(), "t:gone".into()), json!({"v": "g"})),
    ]);
    assert_eq!(keys(&f), ["t:gone", "t:ns"]);

    // The same ID, now in two targets: east's copy is the old entry, west's is new.
    let spec = Spec {
        resources: vec![
            res("t:ns", Some("east"), json!({"v": "x"})),
            res("t:ns", Some("west"), json!({"v": "x"})),
        ],
    };
    let view = preview(&f, &spec, false);
    assert_eq!(
        actions(&view),
        [
            ("t:gone".into(), None, Action::Delete),
            ("t:ns".into(), Some("east".into()), Action::UnChanged),
            ("t:ns".into(), Some("west".into()), Action::Create),
        ]
    );
    let Applied::Done { report, .. } = apply(&f, &spec, false) else {
        panic!("expected an apply")
    };
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(keys(&f), ["t:ns@east", "t:ns@west"]);
    assert_eq!(
        objects(&f),
        [
            ("east".to_string(), "t:ns".to_string()),
            ("west".to_string(), "t:ns".to_string())
        ],
        "the gone resource was deleted in its own region"
    );
    let creates = f.cloud.creates.lock().unwrap().clone();
    assert_eq!(
        creates.get(&("east".to_string(), "t:ns".to_string())),
        None,
        "the adopted resource was not created again"
    );
    assert!(!preview(&f, &spec, false).has_changes());
}

#[test]
fn an_unchanged_stack_is_rekeyed_without_a_release() {
    let f = fixture();
    let old = json!({"serial": 1, "resources": [old_entry("t:ns", "east", "x")]});
    std::fs::write(
        f.store.dir().join("state.json"),
        serde_json::to_vec(&old).unwrap(),
    )
    .unwrap();
    f.cloud
        .objects
        .lock()
        .unwrap()
        .insert(("east".into(), "t:ns".into()), json!({"v": "x"}));
    let spec = Spec {
        resources: vec![res("t:ns", Some("east"), json!({"v": "x"}))],
    };
    assert!(matches!(apply(&f, &spec, false), Applied::NothingToDo(_)));
    assert_eq!(keys(&f), ["t:ns@east"]);
    assert!(f.store.releases().unwrap().is_empty());
    let state = f.store.load().unwrap();
    assert_eq!(state.resources["t:ns@east"].target.as_deref(), Some("east"));
}

#[test]
fn an_old_journal_replays_and_migrates() {
    let f = fixture();
    // A crash of an old kusion mid-apply: `t:ns` applied in east, `t:db` intended (maybe
    // created, in west), `t:old` deleted; all journaled by bare ID.
    let resource = |id: &str, cluster: &str| json!({"id": id, "type": "Test", "attributes": {"v": "x"}, "extensions": {"cluster": cluster}});
    let lines = [
        json!({"op": "applied", "entry": old_entry("t:old", "east", "o")}),
        json!({"op": "intent", "kind": "create", "resource": resource("t:ns", "east")}),
        json!({"op": "intent", "kind": "create", "resource": resource("t:db", "west")}),
        json!({"op": "applied", "entry": old_entry("t:ns", "east", "x")}),
        json!({"op": "deleted", "id": "t:old"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::create_dir_all(f.store.dir()).unwrap();
    std::fs::write(f.store.dir().join("journal.jsonl"), text).unwrap();
    let state = f.store.load().unwrap();
    assert_eq!(keys(&f), ["t:db", "t:ns"]);
    assert!(state.resources["t:db"].pending);
    // The old run did create the database before it died.
    f.cloud.objects.lock().unwrap().extend([
        (("east".into(), "t:ns".into()), json!({"v": "x"})),
        (("west".into(), "t:db".into()), json!({"v": "x"})),
    ]);

    let spec = Spec {
        resources: vec![
            res("t:ns", Some("east"), json!({"v": "x"})),
            res("t:db", Some("west"), json!({"v": "x"})),
        ],
    };
    let view = preview(&f, &spec, false);
    assert_eq!(
        actions(&view),
        [
            ("t:db".into(), Some("west".into()), Action::Import),
            ("t:ns".into(), Some("east".into()), Action::UnChanged),
        ]
    );
    let Applied::Done { report, .. } = apply(&f, &spec, false) else {
        panic!("expected an apply (the pending entry is settled)")
    };
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(keys(&f), ["t:db@west", "t:ns@east"]);
    let state = f.store.load().unwrap();
    assert!(state.resources.values().all(|e| !e.pending));
    assert!(
        f.cloud.creates.lock().unwrap().is_empty(),
        "nothing created twice"
    );
    assert!(!preview(&f, &spec, false).has_changes());
}

#[test]
fn a_moved_entry_never_shadows_a_qualified_one() {
    use kusion_kernel::state::{JournalRecord, State, StateEntry};
    let entry = |target: Option<&str>, v: &str| StateEntry {
        resource: res("t:ns", Some("east"), json!({"v": v})),
        private: None,
        sensitive_paths: vec![],
        pending: false,
        updated_at: 1,
        target: target.map(str::to_string),
    };
    let mut state = State::default();
    state.apply_record(
        &JournalRecord::Applied {
            entry: entry(None, "old"),
        },
        0,
    );
    state.apply_record(
        &JournalRecord::Applied {
            entry: entry(Some("east"), "new"),
        },
        0,
    );
    let moved = JournalRecord::Moved {
        from: "t:ns".into(),
        to: "t:ns@east".into(),
        target: "east".into(),
    };
    state.apply_record(&moved, 0);
    assert_eq!(state.resources.len(), 1);
    assert_eq!(state.resources["t:ns@east"].resource.attributes["v"], "new");
    // Replaying a move twice (a journal read after a crash) changes nothing more.
    state.apply_record(&moved, 0);
    assert_eq!(state.resources.len(), 1);
    // And a snapshot of it loads under the same keys.
    let text = serde_json::to_string(&state).unwrap();
    let again: State = serde_json::from_str(&text).unwrap();
    assert_eq!(again, state);
}
