//! The engine end to end through the kernel library and the fake-cloud runtime.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kusion_kernel::execute::{ApplyOptions, Outcome};
use kusion_kernel::operation::{self, Applied, Stack};
use kusion_kernel::plan::{Action, PlanOptions};
use kusion_kernel::registry::Registry;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::{LocalStore, StateStore};
use kusion_sdk::FieldPath;
use kusion_test_runtime::TestRuntime;
use serde_json::json;

struct Fixture {
    _dirs: tempfile::TempDir,
    cloud: std::path::PathBuf,
    stack: Stack,
}

fn fixture() -> Fixture {
    let dirs = tempfile::tempdir().unwrap();
    let cloud = dirs.path().join("cloud");
    let mut registry = Registry::new();
    registry
        .register(Arc::new(TestRuntime::with_dir(&cloud)))
        .unwrap();
    let store: Arc<dyn StateStore> = Arc::new(LocalStore::new(dirs.path().join("state")));
    Fixture {
        _dirs: dirs,
        cloud,
        stack: Stack { store, registry },
    }
}

fn spec(yaml: &str) -> Spec {
    Spec::parse(yaml, "test.yaml").unwrap()
}

fn no_cancel() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

fn apply(f: &Fixture, s: &Spec, plan: &PlanOptions, options: &ApplyOptions) -> Applied {
    operation::apply(
        s,
        &f.stack,
        "apply",
        plan,
        options,
        Vec::new(),
        |_| true,
        None,
        no_cancel(),
    )
    .unwrap()
}

fn actions(f: &Fixture, s: &Spec, plan: &PlanOptions) -> Vec<(String, Action)> {
    let p = operation::preview(s, &f.stack, plan, no_cancel()).unwrap();
    p.steps.iter().map(|s| (s.id.clone(), s.action)).collect()
}

const BASE: &str = r#"
resources:
- id: t:a
  type: Test
  attributes: {size: 1}
- id: t:b
  type: Test
  attributes:
    parentUid: $kusion_path[t:a].uid
    parentSize: $kusion_path.t:a.size
"#;

#[test]
fn action_table_create_unchanged_update_delete_import() {
    let f = fixture();
    let opts = PlanOptions::default();
    let s = spec(BASE);
    assert_eq!(
        actions(&f, &s, &opts),
        vec![
            ("t:a".into(), Action::Create),
            ("t:b".into(), Action::Create)
        ]
    );
    let Applied::Done { report, .. } = apply(&f, &s, &opts, &ApplyOptions::default()) else {
        panic!()
    };
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(
        report.summary_line("Apply"),
        "Apply complete! Resources: 2 created, 0 updated, 0 deleted."
    );

    // The reference resolved to the computed uid, and the size kept its type.
    let state = f.stack.store.load().unwrap();
    let a_uid = state.resources["t:a"].resource.attributes["uid"].clone();
    assert!(a_uid.as_str().unwrap().starts_with("uid-"));
    assert_eq!(
        state.resources["t:b"].resource.attributes["parentUid"],
        a_uid
    );
    assert_eq!(
        state.resources["t:b"].resource.attributes["parentSize"],
        json!(1)
    );

    assert_eq!(
        actions(&f, &s, &opts),
        vec![
            ("t:a".into(), Action::UnChanged),
            ("t:b".into(), Action::UnChanged)
        ]
    );

    // One field changes: exactly that field shows.
    let changed = spec(&BASE.replace("size: 1", "size: 2"));
    let p = operation::preview(&changed, &f.stack, &opts, no_cancel()).unwrap();
    assert_eq!(p.steps[0].action, Action::Update);
    assert_eq!(p.steps[0].changes.len(), 1);
    assert_eq!(p.steps[0].changes[0].path.to_string(), "size");
    // b's resolved parentSize changes too, since it references a's size.
    assert_eq!(p.steps[1].action, Action::Update);

    // Removing b from the spec deletes it.
    let only_a = spec("resources:\n- id: t:a\n  type: Test\n  attributes: {size: 1}\n");
    assert_eq!(
        actions(&f, &only_a, &opts),
        vec![
            ("t:a".into(), Action::UnChanged),
            ("t:b".into(), Action::Delete)
        ]
    );
    let Applied::Done { report, .. } = apply(&f, &only_a, &opts, &ApplyOptions::default()) else {
        panic!()
    };
    assert_eq!(report.deleted(), 1);
    assert_eq!(TestRuntime::objects(&f.cloud).len(), 1);

    // An object that exists live but not in state is imported.
    let g = fixture();
    let rt = TestRuntime::with_dir(&g.cloud);
    use kusion_sdk::runtime::{ApplyRequest, Runtime};
    let mut r = kusion_sdk::Resource::new("t:a", "Test", Default::default());
    r.attributes.insert("size".into(), json!(1));
    let live = rt
        .apply(&ApplyRequest {
            prior: None,
            prior_private: None,
            planned: r,
            dry_run: false,
            timeout: None,
        })
        .unwrap();
    let mut with_uid = only_a.clone();
    with_uid.resources[0]
        .attributes
        .insert("uid".into(), live.resource.attributes["uid"].clone());
    assert_eq!(
        actions(&g, &with_uid, &opts),
        vec![("t:a".into(), Action::Import)]
    );
    let Applied::Done { report, .. } = apply(&g, &with_uid, &opts, &ApplyOptions::default()) else {
        panic!()
    };
    assert!(report.succeeded());
    assert_eq!(
        actions(&g, &with_uid, &opts),
        vec![("t:a".into(), Action::UnChanged)]
    );
}

#[test]
fn ignore_fields_hold_in_preview_and_apply() {
    let f = fixture();
    let s = spec("resources:\n- id: t:web\n  type: Test\n  attributes: {replicas: 2, image: v1}\n");
    apply(&f, &s, &PlanOptions::default(), &ApplyOptions::default());
    let ignore = vec![FieldPath::parse("replicas").unwrap()];
    let plan = PlanOptions {
        ignore_fields: ignore.clone(),
        ..Default::default()
    };
    let options = ApplyOptions {
        ignore_fields: ignore,
        ..Default::default()
    };
    let scaled =
        spec("resources:\n- id: t:web\n  type: Test\n  attributes: {replicas: 5, image: v1}\n");
    assert_eq!(
        actions(&f, &scaled, &plan),
        vec![("t:web".into(), Action::UnChanged)]
    );
    // An update of another field keeps the live replicas.
    let both =
        spec("resources:\n- id: t:web\n  type: Test\n  attributes: {replicas: 5, image: v2}\n");
    let Applied::Done { report, .. } = apply(&f, &both, &plan, &options) else {
        panic!()
    };
    assert!(report.succeeded());
    let live = TestRuntime::objects(&f.cloud).pop().unwrap();
    assert_eq!(live.attributes["replicas"], json!(2));
    assert_eq!(live.attributes["image"], json!("v2"));
}

/// A computed value the runtime knows only after apply is not a removal: the preview lists it
/// as unknown, changes only what the spec changed, and still plans the update (as Terraform
/// plans `tags_all -> (known after apply)` when `tags` changes).
#[test]
fn values_known_after_apply_are_not_previewed_as_removed() {
    let f = fixture();
    let opts = PlanOptions::default();
    let first = spec("resources:\n- id: t:r\n  type: Test\n  attributes: {labels: {env: test}}\n");
    apply(&f, &first, &opts, &ApplyOptions::default());
    assert_eq!(
        actions(&f, &first, &opts),
        vec![("t:r".into(), Action::UnChanged)]
    );

    let tagged = spec(
        "resources:\n- id: t:r\n  type: Test\n  attributes: {labels: {env: test, team: ''}}\n",
    );
    let p = operation::preview(&tagged, &f.stack, &opts, no_cancel()).unwrap();
    let step = &p.steps[0];
    assert_eq!(step.action, Action::Update);
    let paths: Vec<String> = step.changes.iter().map(|c| c.path.to_string()).collect();
    assert_eq!(paths, vec!["labels.team"], "{step:?}");
    assert_eq!(step.unknown, vec!["labelsAll"]);
    // Shown in context as becoming unknown, the way Terraform shows it.
    assert_eq!(
        step.after.as_ref().unwrap()["labelsAll"],
        json!(kusion_kernel::plan::KNOWN_AFTER_APPLY)
    );

    let Applied::Done { report, .. } = apply(&f, &tagged, &opts, &ApplyOptions::default()) else {
        panic!()
    };
    assert!(report.succeeded(), "{report:?}");
    let live = TestRuntime::objects(&f.cloud).pop().unwrap();
    assert_eq!(
        live.attributes["labelsAll"],
        json!({"env": "test", "team": ""})
    );
    assert_eq!(
        actions(&f, &tagged, &opts),
        vec![("t:r".into(), Action::UnChanged)]
    );
}

#[test]
fn a_failure_skips_descendants_and_independent_branches_continue() {
    let f = fixture();
    let s = spec(
        r#"resources:
- id: t:root
  type: Test
  attributes: {testFail: true}
- id: t:child
  type: Test
  dependsOn: [t:root]
  attributes: {}
- id: t:grandchild
  type: Test
  attributes: {p: "$kusion_path[t:child].uid"}
- id: t:other
  type: Test
  attributes: {}
"#,
    );
    let Applied::Done { report, .. } =
        apply(&f, &s, &PlanOptions::default(), &ApplyOptions::default())
    else {
        panic!()
    };
    let outcome = |id: &str| {
        report
            .steps
            .iter()
            .find(|s| s.id == id)
            .unwrap()
            .outcome
            .clone()
    };
    assert!(matches!(outcome("t:root"), Outcome::Failed(e) if e.contains("testFail")));
    assert!(matches!(outcome("t:child"), Outcome::Skipped(_)));
    assert!(matches!(outcome("t:grandchild"), Outcome::Skipped(_)));
    assert_eq!(outcome("t:other"), Outcome::Succeeded);
    assert!(report.summary_line("Apply").starts_with("Apply failed!"));
    // Skipped steps never touched anything, so state does not list them; the failed one may exist.
    let state = f.stack.store.load().unwrap();
    assert!(state.resources.contains_key("t:other"));
    assert!(!state.resources.contains_key("t:child"));
    assert!(state.resources["t:root"].pending);
}

#[test]
fn per_resource_timeout() {
    let f = fixture();
    let s = spec(
        "resources:\n- id: t:slow\n  type: Test\n  attributes: {delayMs: 2000}\n- id: t:fast\n  type: Test\n  attributes: {}\n",
    );
    let options = ApplyOptions {
        timeout: Some(Duration::from_millis(200)),
        ..Default::default()
    };
    let plan = PlanOptions {
        timeout: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let Applied::Done { report, .. } = apply(&f, &s, &plan, &options) else {
        panic!()
    };
    assert!(
        matches!(&report.steps[0].outcome, Outcome::Failed(e) if e.contains("timed out")),
        "{report:?}"
    );
    assert_eq!(report.steps[1].outcome, Outcome::Succeeded);
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "the timeout did not cut the wait"
    );
}

#[test]
fn watch_reports_failure_with_reason() {
    let f = fixture();
    let s = spec(
        "resources:\n- id: t:ok\n  type: Test\n  attributes: {readyAfterPolls: 3}\n- id: t:sick\n  type: Test\n  attributes: {testHealth: failed}\n",
    );
    let options = ApplyOptions {
        watch: true,
        watch_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    let Applied::Done { report, .. } = apply(&f, &s, &PlanOptions::default(), &options) else {
        panic!()
    };
    assert_eq!(report.steps[0].outcome, Outcome::Succeeded);
    assert!(
        matches!(&report.steps[1].outcome, Outcome::Failed(e) if e.contains("CrashLoopBackOff")),
        "{report:?}"
    );
}

#[test]
fn bad_specs_are_named() {
    let f = fixture();
    let cycle = spec(
        "resources:\n- id: t:a\n  type: Test\n  dependsOn: [t:b]\n- id: t:b\n  type: Test\n  attributes: {x: \"$kusion_path[t:a].uid\"}\n",
    );
    let e = operation::preview(&cycle, &f.stack, &PlanOptions::default(), no_cancel()).unwrap_err();
    assert!(e.to_string().contains("dependency cycle: "), "{e}");
    let missing = spec(
        "resources:\n- id: t:a\n  type: Test\n  attributes: {x: \"$kusion_path[t:zz].uid\"}\n",
    );
    let e =
        operation::preview(&missing, &f.stack, &PlanOptions::default(), no_cancel()).unwrap_err();
    assert!(
        e.to_string().contains("t:a") && e.to_string().contains("t:zz"),
        "{e}"
    );
    let unknown = spec("resources:\n- id: t:a\n  type: Helm\n");
    let e =
        operation::preview(&unknown, &f.stack, &PlanOptions::default(), no_cancel()).unwrap_err();
    assert!(e.to_string().contains("unknown type \"Helm\""), "{e}");
}

#[test]
fn destroy_deletes_dependents_first() {
    let f = fixture();
    let s = spec(BASE);
    apply(&f, &s, &PlanOptions::default(), &ApplyOptions::default());
    let destroy = PlanOptions {
        destroy: true,
        ..Default::default()
    };
    let state = f.stack.store.load().unwrap();
    let p = kusion_kernel::plan::compute(
        &s,
        &state,
        &f.stack.registry,
        &destroy,
        &AtomicBool::new(false),
    )
    .unwrap();
    let a = p.index_of("t:a").unwrap();
    let b = p.index_of("t:b").unwrap();
    assert!(
        p.deps[a].contains(&b),
        "t:a must wait for t:b's deletion: {:?}",
        p.deps
    );
    let Applied::Done { report, .. } = operation::apply(
        &s,
        &f.stack,
        "destroy",
        &destroy,
        &ApplyOptions::default(),
        vec![],
        |_| true,
        None,
        no_cancel(),
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(report.deleted(), 2);
    assert!(TestRuntime::objects(&f.cloud).is_empty());
    assert!(f.stack.store.load().unwrap().resources.is_empty());
    let history = f.stack.store.releases().unwrap();
    assert_eq!(
        history
            .iter()
            .map(|r| r.operation.as_str())
            .collect::<Vec<_>>(),
        vec!["apply", "destroy"]
    );
}
