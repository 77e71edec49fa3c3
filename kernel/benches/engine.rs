//! Engine benchmark: build + reduce the DAG and compute the plan for 10,000 and 100,000
//! resources with runtime calls that do nothing, and apply 10,000 resources through such a
//! runtime (journal and state writes included), and plan a rollback of a 1,000-resource stack.
//! Prints one line per figure.
//!
//! Run: `cargo bench -p kusion-kernel --bench engine` (add `-- --quick` for 10,000 only).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use kusion_kernel::execute::{self, ApplyOptions};
use kusion_kernel::graph::Dag;
use kusion_kernel::plan::{self, PlanOptions};
use kusion_kernel::registry::Registry;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::{LocalStore, State, StateEntry, StateStore};
use kusion_sdk::runtime::*;
use kusion_sdk::{PluginResult, Resource, Value};
use serde_json::json;

/// Answers every call at once: live objects are whatever `exists` says.
struct Noop {
    exists: bool,
}

impl Runtime for Noop {
    fn describe(&self) -> RuntimeInfo {
        RuntimeInfo {
            name: "noop".into(),
            version: "0".into(),
            abi: kusion_sdk::ABI_VERSION,
            resource_types: vec!["Kubernetes".into()],
            capabilities: Capabilities {
                dry_run: true,
                watch: false,
                import: true,
                sensitive_fields: false,
            },
        }
    }
    fn configure(&self, _: &Value) -> PluginResult<()> {
        Ok(())
    }
    fn apply(&self, r: &ApplyRequest) -> PluginResult<ApplyResponse> {
        Ok(ApplyResponse {
            resource: r.planned.clone(),
            private: None,
            sensitive_paths: vec![],
            unknown_paths: vec![],
            requires_replace: vec![],
        })
    }
    fn read(&self, r: &ReadRequest) -> PluginResult<ReadResponse> {
        Ok(ReadResponse {
            resource: if self.exists { r.planned.clone() } else { None },
            ..Default::default()
        })
    }
    fn import(&self, _: &ImportRequest) -> PluginResult<ReadResponse> {
        Ok(ReadResponse::default())
    }
    fn delete(&self, _: &DeleteRequest) -> PluginResult<()> {
        Ok(())
    }
    fn watch(&self, _: &WatchRequest) -> PluginResult<Box<dyn Watch>> {
        Err(kusion_sdk::PluginError::unsupported("no watch"))
    }
}

/// `n` resources: one namespace per 100 objects, a ConfigMap and a Deployment per pair, the
/// Deployment depending on its namespace explicitly and on its ConfigMap by reference.
fn spec(n: usize) -> Spec {
    let mut resources = Vec::with_capacity(n);
    let mut ns = String::new();
    for i in 0..n {
        if i % 100 == 0 {
            ns = format!("ns{}", i / 100);
            let attrs = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            resources.push(Resource::new(
                format!("v1:Namespace:{ns}"),
                "Kubernetes",
                attrs.as_object().unwrap().clone(),
            ));
        } else if i % 2 == 1 {
            let attrs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm{i}"), "namespace": ns},
                "data": {"key": format!("value-{i}")}});
            let mut r = Resource::new(
                format!("v1:ConfigMap:{ns}:cm{i}"),
                "Kubernetes",
                attrs.as_object().unwrap().clone(),
            );
            r.depends_on.push(format!("v1:Namespace:{ns}"));
            resources.push(r);
        } else {
            let cm = format!("v1:ConfigMap:{ns}:cm{}", i - 1);
            let attrs = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": format!("d{i}"), "namespace": ns},
                "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "main", "image": "nginx:1.25",
                "env": [{"name": "CONFIG", "value": format!("$kusion_path[{cm}].data.key")}]}]}}}});
            let mut r = Resource::new(
                format!("apps/v1:Deployment:{ns}:d{i}"),
                "Kubernetes",
                attrs.as_object().unwrap().clone(),
            );
            r.depends_on.push(format!("v1:Namespace:{ns}"));
            resources.push(r);
        }
    }
    Spec { resources }
}

fn registry(exists: bool) -> Registry {
    let mut r = Registry::new();
    r.register(Arc::new(Noop { exists })).unwrap();
    r
}

fn state_of(spec: &Spec) -> State {
    let mut state = State::default();
    for r in &spec.resources {
        state.resources.insert(
            r.id.clone(),
            StateEntry {
                resource: r.clone(),
                private: None,
                sensitive_paths: vec![],
                pending: false,
                updated_at: 0,
                target: None,
            },
        );
    }
    state
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// CPU time (user + system) of the whole process so far: on a shared machine the wall clock
/// includes waiting for a core, CPU time does not.
fn cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Wall and CPU time of `f`.
fn timed<T>(f: impl FnOnce() -> T) -> (T, String) {
    let (t, c) = (Instant::now(), cpu());
    let out = f();
    let text = format!("{} (cpu {})", secs(t.elapsed()), secs(cpu() - c));
    (out, text)
}

fn main() {
    let empty_state = State::default();
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[usize] = if quick { &[10_000] } else { &[10_000, 100_000] };
    for &n in sizes {
        let s = spec(n);
        let (dag, dag_time) = timed(|| Dag::build(&s).unwrap());
        println!(
            "n={n:>6}  build+reduce DAG: {dag_time} ({} edges after reduction)",
            dag.edge_count()
        );

        let options = PlanOptions {
            concurrency: std::env::var("KUSION_BENCH_CONCURRENCY")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(64),
            ..Default::default()
        };
        let registry_empty = registry(false);
        let (p, time) = timed(|| {
            plan::compute(
                &s,
                &empty_state,
                &registry_empty,
                &options,
                &AtomicBool::new(false),
            )
            .unwrap()
        });
        println!(
            "n={n:>6}  plan, fresh stack (all Create): {time}  [{} steps]",
            p.steps.len()
        );

        let state = state_of(&s);
        let registry_full = registry(true);
        let (p, time) = timed(|| {
            plan::compute(
                &s,
                &state,
                &registry_full,
                &options,
                &AtomicBool::new(false),
            )
            .unwrap()
        });
        println!(
            "n={n:>6}  plan, converged stack (read + dry-run + diff each): {time}  [{} unchanged]",
            p.summary().unchanged
        );
    }

    let n = 10_000;
    let s = spec(n);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn StateStore> = Arc::new(LocalStore::new(dir.path()));
    let registry = registry(false);
    let options = PlanOptions {
        concurrency: 64,
        ..Default::default()
    };
    let t = Instant::now();
    let p = plan::compute(
        &s,
        &empty_state,
        &registry,
        &options,
        &AtomicBool::new(false),
    )
    .unwrap();
    let plan_time = t.elapsed();
    let t = Instant::now();
    let apply_options = ApplyOptions {
        concurrency: 64,
        ..Default::default()
    };
    let writer = Arc::new(
        kusion_kernel::state::Writer::acquire(
            store.clone(),
            &kusion_kernel::state::LeaseHolder::current("bench"),
            std::time::Duration::from_secs(60),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap(),
    );
    let (report, state) = execute::execute_plan(
        p,
        writer,
        &registry,
        &apply_options,
        Arc::new(AtomicBool::new(false)),
        None,
    )
    .unwrap();
    let apply_time = t.elapsed();
    assert!(report.succeeded());
    assert_eq!(state.resources.len(), n);
    let state_bytes = std::fs::metadata(dir.path().join("state.json"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "n={n:>6}  apply through a do-nothing runtime: {} (plan {} + execute {}), state.json {} KiB",
        secs(plan_time + apply_time),
        secs(plan_time),
        secs(apply_time),
        state_bytes / 1024
    );
    rollback_plan(1_000);
}

/// `kusionctl rollback --dry-run` on an `n`-resource stack with two releases: read the history,
/// pick the release, restore its spec (unsealing), and plan it against state and live.
fn rollback_plan(n: usize) {
    use kusion_kernel::operation::{self, Applied, Stack};
    let dir = tempfile::tempdir().unwrap();
    // Applied through a runtime that finds nothing live (so both releases apply every resource),
    // then planned through one that finds every object live (read + dry-run + diff each).
    let store: Arc<dyn StateStore> = Arc::new(LocalStore::new(dir.path()));
    let stack = Stack {
        store: store.clone(),
        registry: registry(false),
    };
    let options = PlanOptions {
        concurrency: 64,
        ..Default::default()
    };
    let first = spec(n);
    let mut second = first.clone();
    for r in &mut second.resources {
        r.attributes.insert("revision".into(), json!(2));
    }
    for s in [&first, &second] {
        let applied = operation::apply(
            s,
            &stack,
            "apply",
            &options,
            &ApplyOptions {
                concurrency: 64,
                ..Default::default()
            },
            Vec::new(),
            |_| true,
            None,
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        assert!(matches!(applied, Applied::Done { .. }));
    }
    let stack = Stack {
        store,
        registry: registry(true),
    };
    let (view, time) = timed(|| {
        let releases = stack.store.releases().unwrap();
        let revision = kusion_kernel::rollback::default_revision(&releases).unwrap();
        let release = stack.store.release(revision).unwrap();
        let (_, sealer) = operation::load_unsealed(&*stack.store).unwrap();
        let spec =
            kusion_kernel::rollback::restore_spec(&release, &sealer, &stack.registry).unwrap();
        operation::preview(&spec, &stack, &options, Arc::new(AtomicBool::new(false))).unwrap()
    });
    println!(
        "n={n:>6}  rollback plan (history, restore, 3-way plan) through a do-nothing runtime: {time}  [{} steps]",
        view.steps.len()
    );
}
