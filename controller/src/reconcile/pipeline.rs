//! The kernel's pipeline for one Stack, run on a blocking thread: open the checked-out stack
//! (compile, settings, runtimes, policies), plan against live state read-only, and only when
//! the plan changes something take the stack's state lease, plan again under it, check policy
//! and approval, apply and record a release.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kusion_kernel::execute::ApplyOptions;
use kusion_kernel::operation::{self, Applied};
use kusion_kernel::plan::{PlanOptions, PlanView};
use kusion_kernel::policy::{self as kpolicy, Guarded, PolicyReport};
use kusion_kernel::spec::Spec;

use super::ReconcileError;
use crate::crd::Mode;
use crate::{LoadRequest, StackLoader};

/// What one run of the pipeline came to.
pub(super) enum Outcome {
    Blocked {
        plan: PlanView,
        report: PolicyReport,
    },
    Previewed {
        plan: PlanView,
        report: PolicyReport,
    },
    NothingToDo {
        plan: PlanView,
        report: Option<PolicyReport>,
    },
    AwaitingApproval {
        plan: PlanView,
        hash: String,
    },
    Applied {
        plan: PlanView,
        release: u64,
        summary: String,
        report: Option<PolicyReport>,
    },
}

/// What the pipeline needs, owned, for the blocking thread.
pub(super) struct Job {
    pub(super) stack: String,
    pub(super) revision: String,
    pub(super) dir: PathBuf,
    pub(super) state_dir: PathBuf,
    pub(super) backend: String,
    pub(super) exemptions: Vec<String>,
    pub(super) mode: Mode,
    pub(super) require_approval: bool,
    pub(super) approved: Option<String>,
    pub(super) destroy: bool,
    pub(super) wait: bool,
    pub(super) wait_timeout: Duration,
    /// The Stack waits for readiness and has not been ready since its last failure: an
    /// unchanged plan is not enough, its resources are watched again.
    pub(super) recheck_readiness: bool,
    /// Set when this replica loses leadership: stop at the next step.
    pub(super) cancel: Arc<AtomicBool>,
}

/// Compile, policy, plan, approve, apply and record: the kernel's pipeline, run synchronously.
pub(super) fn pipeline(loader: &dyn StackLoader, job: Job) -> Result<Outcome, ReconcileError> {
    let fail = |message: String| ReconcileError::Pipeline {
        stack: job.stack.clone(),
        revision: job.revision.clone(),
        message,
    };
    let prepared = loader
        .load(&LoadRequest {
            dir: &job.dir,
            state_dir: job.state_dir.clone(),
            state_backend: &job.backend,
            exemptions: &job.exemptions,
            // Git is the source of truth: a field someone changed by hand is taken back.
            force_conflicts: true,
        })
        .map_err(|e| fail(e.0))?;
    let cancel = job.cancel.clone();
    let plan_options = PlanOptions {
        destroy: job.destroy,
        ..Default::default()
    };
    if job.mode == Mode::PreviewOnly && !job.destroy {
        let (plan, report) = prepared
            .guard
            .preview(&prepared.spec, &prepared.stack, &plan_options, cancel)
            .map_err(|e| fail(e.to_string()))?;
        return Ok(if report.blocked {
            Outcome::Blocked { plan, report }
        } else {
            Outcome::Previewed { plan, report }
        });
    }
    // The steady state: plan read-only first (no lease, no write); an unchanged stack ends
    // here. `operation::apply` plans the same way under the lease and does nothing for a plan
    // without changes (a pending journal entry shows as a step that changes something), so
    // this skips only work that would have been a no-op. Any change is planned again under
    // the lease below, which is what gets approved and applied.
    if !job.destroy {
        let plan = operation::preview(
            &prepared.spec,
            &prepared.stack,
            &plan_options,
            cancel.clone(),
        )
        .map_err(|e| fail(e.to_string()))?;
        if !plan.has_changes() {
            if job.recheck_readiness {
                let failures = super::readiness::not_ready(
                    &prepared.spec,
                    &prepared.stack,
                    job.wait_timeout,
                    &cancel,
                );
                if !failures.is_empty() {
                    return Err(ReconcileError::ApplyFailed {
                        stack: job.stack.clone(),
                        revision: job.revision.clone(),
                        summary: format!(
                            "{} resource(s) applied earlier still not ready",
                            failures.len()
                        ),
                        failures,
                    });
                }
            }
            return Ok(Outcome::NothingToDo { plan, report: None });
        }
        if job.require_approval {
            let hash = plan.approval_hash(Some(&job.revision));
            if job.approved.as_deref() != Some(hash.as_str()) {
                // Not approved: say so without the lease; policies still speak first.
                let report = prepared
                    .guard
                    .evaluate(&prepared.spec, "controller", Some(&plan));
                if report.blocked {
                    return Ok(Outcome::Blocked { plan, report });
                }
                return Ok(Outcome::AwaitingApproval { plan, hash });
            }
        }
    }
    let apply_options = ApplyOptions {
        watch: job.wait && !job.destroy,
        watch_timeout: job.wait_timeout,
        ..Default::default()
    };
    let computed: Mutex<Option<String>> = Mutex::new(None);
    let confirm = |plan: &PlanView, _: Option<&PolicyReport>| {
        if !job.require_approval || job.destroy {
            return true;
        }
        // The plan computed under the state lease is what must have been approved.
        let hash = plan.approval_hash(Some(&job.revision));
        let ok = job.approved.as_deref() == Some(hash.as_str());
        *computed.lock().unwrap_or_else(|p| p.into_inner()) = Some(hash);
        ok
    };
    let empty = Spec::default();
    let spec = if job.destroy { &empty } else { &prepared.spec };
    let operation = if job.destroy { "destroy" } else { "controller" };
    let guarded = kpolicy::guarded_apply(
        &prepared.guard,
        spec,
        &prepared.stack,
        operation,
        &plan_options,
        &apply_options,
        None,
        confirm,
        None,
        cancel,
    )
    .map_err(|e| fail(e.to_string()))?;
    Ok(match guarded {
        Guarded::Blocked { plan, report } => Outcome::Blocked { plan, report },
        Guarded::Ran { applied, report } => match applied {
            Applied::NothingToDo(plan) => Outcome::NothingToDo { plan, report },
            Applied::Declined(plan) => {
                let hash = computed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
                    .unwrap_or_else(|| plan.approval_hash(Some(&job.revision)));
                Outcome::AwaitingApproval { plan, hash }
            }
            Applied::Done {
                plan,
                report: applied,
                revision,
            } => {
                let verb = if job.destroy { "Destroy" } else { "Apply" };
                if !applied.succeeded() {
                    let failures = applied
                        .steps
                        .iter()
                        .filter_map(|s| match &s.outcome {
                            kusion_kernel::execute::Outcome::Failed(e) => {
                                Some(format!("{} {}: {e}", s.action, s.id))
                            }
                            _ => None,
                        })
                        .collect();
                    return Err(ReconcileError::ApplyFailed {
                        stack: job.stack.clone(),
                        revision: job.revision.clone(),
                        summary: applied.summary_line(verb),
                        failures,
                    });
                }
                Outcome::Applied {
                    plan,
                    release: revision,
                    summary: applied.summary_line(verb),
                    report,
                }
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use kusion_kernel::operation::Stack as EngineStack;
    use kusion_kernel::policy::{PolicyGuard, StackInfo};
    use kusion_kernel::registry::Registry;
    use kusion_kernel::state::{LeaseHolder, Writer};
    use kusion_test_runtime::TestRuntime;
    use serde_json::{Value, json};

    use super::*;
    use crate::{LoadError, Prepared};

    /// Opens every checkout as the same one-resource stack on the fake cloud in `cloud`.
    struct Fixed {
        cloud: PathBuf,
    }

    impl StackLoader for Fixed {
        fn load(&self, request: &LoadRequest<'_>) -> Result<Prepared, LoadError> {
            let fail = |e: &dyn std::fmt::Display| LoadError(e.to_string());
            let mut registry = Registry::new();
            registry
                .register(Arc::new(TestRuntime::with_dir(&self.cloud)))
                .map_err(|e| fail(&e))?;
            let store = kusion_kernel::state::open("local", request.state_dir.clone(), "s")
                .map_err(|e| fail(&e))?;
            let spec: Spec = serde_json::from_value(json!({"resources": [
                {"id": "t:a", "type": "Test", "attributes": {"size": 1}}
            ]}))
            .map_err(|e| fail(&e))?;
            Ok(Prepared {
                spec,
                stack: EngineStack { store, registry },
                guard: PolicyGuard::with_plugins(
                    Vec::new(),
                    StackInfo {
                        name: "s".into(),
                        path: None,
                    },
                    Vec::new(),
                ),
            })
        }
    }

    fn job(dir: &Path) -> Job {
        Job {
            stack: "ns/s".into(),
            revision: "r1".into(),
            dir: dir.to_path_buf(),
            state_dir: dir.join("state"),
            backend: "local".into(),
            exemptions: Vec::new(),
            mode: Mode::Apply,
            require_approval: false,
            approved: None,
            destroy: false,
            wait: false,
            wait_timeout: Duration::from_secs(5),
            recheck_readiness: false,
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Every file under `dir` with its length, modification time and bytes.
    fn snapshot(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime, Vec<u8>)> {
        let mut out = Vec::new();
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    let modified = e.metadata().unwrap().modified().unwrap();
                    out.push((p.clone(), modified, std::fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn an_unchanged_stack_takes_no_lease_and_writes_nothing_but_drift_does() {
        let tmp = tempfile::tempdir().unwrap();
        let cloud = tmp.path().join("cloud");
        std::fs::create_dir_all(&cloud).unwrap();
        let loader = Fixed {
            cloud: cloud.clone(),
        };
        let first = pipeline(&loader, job(tmp.path())).unwrap();
        assert!(matches!(first, Outcome::Applied { release: 1, .. }));
        let state = tmp.path().join("state");
        let before = snapshot(&state);
        // Another writer holds the stack's lease: a steady-state pass must not need it.
        let store = kusion_kernel::state::open("local", state.clone(), "s").unwrap();
        let other = LeaseHolder {
            owner: "someone-else".into(),
            host: "elsewhere".into(),
            pid: 1,
            operation: "apply".into(),
        };
        let held = Writer::acquire(
            store.clone(),
            &other,
            Duration::from_secs(60),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        let leased = snapshot(&state);
        std::thread::sleep(Duration::from_millis(20));
        let steady = pipeline(&loader, job(tmp.path())).unwrap();
        assert!(matches!(steady, Outcome::NothingToDo { .. }));
        assert_eq!(snapshot(&state), leased, "the steady state wrote to state");
        // Drift in the fake cloud: now the lease is needed, and it is someone else's.
        let object = std::fs::read_dir(&cloud)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "json"))
            .unwrap();
        let mut live: Value = serde_json::from_slice(&std::fs::read(&object).unwrap()).unwrap();
        live["attributes"]["size"] = json!(7);
        std::fs::write(&object, serde_json::to_vec(&live).unwrap()).unwrap();
        let Err(e) = pipeline(&loader, job(tmp.path())) else {
            panic!("drift was corrected without the lease");
        };
        assert!(e.to_string().contains("ns/s"), "{e}");
        drop(held);
        let corrected = pipeline(&loader, job(tmp.path())).unwrap();
        let Outcome::Applied { release, plan, .. } = corrected else {
            panic!("drift not corrected");
        };
        assert_eq!(release, 2);
        let changes: Vec<_> = plan
            .steps
            .iter()
            .filter(|s| s.action.changes_something())
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(changes, ["t:a"]);
        assert_eq!(TestRuntime::objects(&cloud)[0].attributes["size"], json!(1));
        assert_ne!(snapshot(&state), before);
    }
}
