//! The controller loop: watch Stacks (kube-runtime's watcher, reflector and controller),
//! reconcile one at a time, report through `status` and Events, back off on failure.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalized, finalizer};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use kusion_kernel::apply::ApplyOptions;
use kusion_kernel::operation::Applied;
use kusion_kernel::plan::{PlanOptions, PlanView};
use kusion_kernel::policy::{self as kpolicy, Guarded, PolicyReport};
use kusion_kernel::spec::Spec;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::crd::{
    APPROVE_ANNOTATION, DeletionPolicy, FINALIZER, Mode, PlanSummary, Stack, StackStatus,
    now_rfc3339,
};
use crate::git::{Credentials, GitCache};
use crate::leader::{LeaderElector, LeaderError};
use crate::{LoadRequest, StackLoader};

/// How the controller runs.
pub struct ControllerOptions {
    pub client: kube::Client,
    /// Watch Stacks in this namespace only (all namespaces when None).
    pub namespace: Option<String>,
    /// Git mirrors and extracted trees.
    pub cache_dir: PathBuf,
    /// `local` backends keep each Stack's state in `<state_root>/<namespace>/<name>`.
    pub state_root: PathBuf,
    /// Create or update the Stack CRD before starting.
    pub install_crd: bool,
    /// Names this replica in Events and in the Lease.
    pub identity: String,
    /// Leader election: (lease namespace, lease name, duration); None runs unconditionally.
    pub leader: Option<(String, String, Duration)>,
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Leader(#[from] LeaderError),
    #[error("installing the Stack CRD: {0}")]
    Crd(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("stack {stack}: {message}")]
    Invalid { stack: String, message: String },
    #[error("stack {stack}: reading source secret {secret}: {source}")]
    Secret {
        stack: String,
        secret: String,
        source: kube::Error,
    },
    #[error("stack {stack}: fetching {url} {reference}: {source}")]
    Git {
        stack: String,
        url: String,
        reference: String,
        source: crate::git::GitError,
    },
    #[error("stack {stack} at {revision}: {message}")]
    Pipeline {
        stack: String,
        revision: String,
        message: String,
    },
    #[error("stack {stack} at {revision}: {summary}{}", failed_steps(.failures))]
    ApplyFailed {
        stack: String,
        revision: String,
        summary: String,
        failures: Vec<String>,
    },
    #[error("stack {stack}: {source}")]
    Kube { stack: String, source: kube::Error },
    #[error("stack {stack}: {message}")]
    Finalizer { stack: String, message: String },
}

fn failed_steps(failures: &[String]) -> String {
    if failures.is_empty() {
        String::new()
    } else {
        format!(": {}", failures.join("; "))
    }
}

impl ReconcileError {
    /// The condition reason naming what failed.
    fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Invalid { .. } => "InvalidSpec",
            ReconcileError::Secret { .. } => "SecretUnreadable",
            ReconcileError::Git { .. } => "FetchFailed",
            ReconcileError::Pipeline { .. } => "PlanFailed",
            ReconcileError::ApplyFailed { .. } => "ApplyFailed",
            ReconcileError::Kube { .. } => "ApiError",
            ReconcileError::Finalizer { .. } => "FinalizerFailed",
        }
    }
}

/// When a Stack is next due, and what it looked like then: a status write or a watch restart
/// re-delivers an unchanged Stack, which must not run the pipeline again before its time.
struct Gate {
    trigger: u64,
    due: Instant,
    failures: u32,
}

struct Ctx {
    client: kube::Client,
    loader: Arc<dyn StackLoader>,
    git: Arc<GitCache>,
    state_root: PathBuf,
    recorder: Recorder,
    gates: Mutex<HashMap<String, Gate>>,
    /// One Stack's pipeline at a time (the runtimes loaded once are configured per stack).
    /// Tokio's semaphore is first come, first served, so under load every due Stack gets its
    /// turn; kube-runtime's own concurrency limit parks due Stacks in a hash set and serves
    /// the same few again and again once it is saturated.
    work: tokio::sync::Semaphore,
}

/// Generation (spec), annotations (approval) and deletion: what makes a Stack due at once.
fn trigger(stack: &Stack) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    stack.metadata.generation.hash(&mut h);
    let annotations: std::collections::BTreeMap<_, _> = stack.annotations().iter().collect();
    annotations.hash(&mut h);
    stack.metadata.deletion_timestamp.is_some().hash(&mut h);
    h.finish()
}

/// Doubling from 2 s, capped at the interval (and at 5 minutes).
fn backoff(failures: u32, interval: Duration) -> Duration {
    let step = Duration::from_secs(2u64.saturating_pow(failures.min(16)));
    step.min(interval.max(Duration::from_secs(2)))
        .min(Duration::from_secs(300))
}

/// Run the controller until leadership is lost or the process is asked to stop.
pub async fn run(
    options: ControllerOptions,
    loader: Arc<dyn StackLoader>,
) -> Result<(), ControllerError> {
    let client = options.client.clone();
    if options.install_crd {
        install_crd(&client).await?;
    }
    let mut elector = options.leader.as_ref().map(|(ns, name, duration)| {
        LeaderElector::new(client.clone(), ns, name, &options.identity, *duration)
    });
    if let Some(e) = elector.as_mut() {
        e.acquire().await?;
    }
    let api: Api<Stack> = match &options.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        loader,
        git: Arc::new(GitCache::new(&options.cache_dir)),
        state_root: options.state_root.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "kusion-controller".into(),
                instance: Some(options.identity.clone()),
            },
        ),
        gates: Mutex::new(HashMap::new()),
        work: tokio::sync::Semaphore::new(1),
    });
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Reconciles are not limited here but queue for `Ctx::work` (see there).
    let controller = Controller::new(api, watcher::Config::default())
        .graceful_shutdown_on(async move {
            let _ = stop_rx.await;
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(stack = %object, "reconciled"),
                Err(e) => tracing::warn!("{e}"),
            }
        });
    tracing::info!(identity = %options.identity, "controller running");
    let held = async {
        match elector.as_mut() {
            Some(e) => e.hold().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(controller);
    tokio::select! {
        _ = &mut controller => Ok(()),
        lost = held => {
            // Stop at once: another replica may already be taking over.
            Err(lost.into())
        }
        _ = shutdown_signal() => {
            let _ = stop_tx.send(());
            controller.await;
            if let Some(e) = elector.as_mut() {
                e.release().await;
            }
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// Server-side apply the CRD and wait until it is established.
pub async fn install_crd(client: &kube::Client) -> Result<(), ControllerError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crate::crd::crd();
    let name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    api.patch(
        &name,
        &PatchParams::apply("kusion-controller").force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(|e| ControllerError::Crd(e.to_string()))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let established = api
            .get(&name)
            .await
            .map_err(|e| ControllerError::Crd(e.to_string()))?
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(ControllerError::Crd(format!(
                "{name} not established after 30s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn reconcile(stack: Arc<Stack>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let key = stack.key();
    let deleting = stack.metadata.deletion_timestamp.is_some();
    if !deleting {
        let gates = ctx.gates.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(gate) = gates.get(&key)
            && gate.trigger == trigger(&stack)
            && gate.due > Instant::now()
        {
            return Ok(Action::requeue(gate.due - Instant::now()));
        }
    }
    let ns = stack.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Stack> = Api::namespaced(ctx.client.clone(), &ns);
    let c = ctx.clone();
    finalizer(&api, FINALIZER, stack, |event| async move {
        match event {
            Finalized::Apply(stack) => c.apply(&stack).await,
            Finalized::Cleanup(stack) => c.cleanup(&stack).await,
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer {
        stack: key,
        message: e.to_string(),
    })
}

fn error_policy(stack: Arc<Stack>, _error: &ReconcileError, ctx: Arc<Ctx>) -> Action {
    let gates = ctx.gates.lock().unwrap_or_else(|p| p.into_inner());
    match gates.get(&stack.key()) {
        Some(g) => Action::requeue(g.due.saturating_duration_since(Instant::now())),
        None => Action::requeue(Duration::from_secs(2)),
    }
}

/// What one run of the pipeline came to.
enum Outcome {
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

/// The hash a plan is approved by: the revision and every change, masked as shown.
pub fn plan_hash(revision: &str, plan: &PlanView) -> String {
    let steps: Vec<Value> = plan
        .steps
        .iter()
        .filter(|s| s.action.changes_something())
        .map(|s| json!({"id": s.id, "target": s.target, "action": s.action, "changes": s.changes}))
        .collect();
    let text = json!({"revision": revision, "steps": steps}).to_string();
    hex::encode(&Sha256::digest(text.as_bytes())[..16])
}

fn summarize(revision: &str, plan: &PlanView) -> PlanSummary {
    PlanSummary {
        revision: revision.to_string(),
        hash: plan_hash(revision, plan),
        create: plan.summary.create,
        update: plan.summary.update,
        replace: plan.summary.replace,
        delete: plan.summary.delete,
        unchanged: plan.summary.unchanged,
        changes: changed(plan),
    }
}

fn changed(plan: &PlanView) -> Vec<String> {
    plan.steps
        .iter()
        .filter(|s| s.action.changes_something())
        .map(|s| format!("{} {}", s.action, s.key()))
        .collect()
}

fn findings(report: Option<&PolicyReport>) -> Vec<String> {
    let Some(report) = report else {
        return Vec::new();
    };
    let mut out: Vec<String> = report
        .findings
        .iter()
        .map(|f| {
            let verdict = match (&f.exempted, f.finding.severity) {
                (Some(_), _) => "exempt",
                (None, kusion_sdk::policy::Severity::Deny) => "deny",
                (None, kusion_sdk::policy::Severity::Warn) => "warn",
            };
            format!(
                "{verdict} {} {}: {}",
                f.finding.rule,
                f.finding.resource_id.as_deref().unwrap_or("(whole spec)"),
                f.finding.message
            )
        })
        .collect();
    out.extend(
        report
            .failures
            .iter()
            .map(|f| format!("error policy {}: {}", f.policy, f.message)),
    );
    out
}

/// What the pipeline needs, owned, for the blocking thread.
struct Job {
    stack: String,
    revision: String,
    dir: PathBuf,
    state_dir: PathBuf,
    backend: String,
    exemptions: Vec<String>,
    mode: Mode,
    require_approval: bool,
    approved: Option<String>,
    destroy: bool,
    wait: bool,
    wait_timeout: Duration,
}

/// Compile, policy, plan, approve, apply and record: the kernel's pipeline, run synchronously.
fn pipeline(loader: &dyn StackLoader, job: Job) -> Result<Outcome, ReconcileError> {
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
    let cancel = Arc::new(AtomicBool::new(false));
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
        let hash = plan_hash(&job.revision, plan);
        let ok = job.approved.as_deref() == Some(hash.as_str());
        *computed.lock().unwrap_or_else(|p| p.into_inner()) = Some(hash);
        ok
    };
    let empty = Spec::default();
    let spec = if job.destroy { &empty } else { &prepared.spec };
    let operation = if job.destroy { "destroy" } else { "controller" };
    let guarded = kpolicy::apply(
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
                    .unwrap_or_else(|| plan_hash(&job.revision, &plan));
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
                            kusion_kernel::apply::Outcome::Failed(e) => {
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

/// Merge-patching `status` leaves keys out of the patch untouched: absent ones are sent as null.
const STATUS_KEYS: &[&str] = &[
    "observedGeneration",
    "lastAppliedRevision",
    "lastAttemptedRevision",
    "lastRelease",
    "plan",
    "pendingPlan",
    "drift",
    "driftDetectedAt",
    "policy",
    "conditions",
    "lastReconcileTime",
    "failures",
];

impl Ctx {
    async fn patch_status(
        &self,
        stack: &Stack,
        status: &StackStatus,
    ) -> Result<(), ReconcileError> {
        let mut value = serde_json::to_value(status).unwrap_or_else(|_| json!({}));
        if let Some(map) = value.as_object_mut() {
            for key in STATUS_KEYS {
                map.entry(*key).or_insert(Value::Null);
            }
        }
        let api: Api<Stack> = Api::namespaced(
            self.client.clone(),
            stack.metadata.namespace.as_deref().unwrap_or_default(),
        );
        api.patch_status(
            &stack.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": value })),
        )
        .await
        .map(|_| ())
        .map_err(|source| ReconcileError::Kube {
            stack: stack.key(),
            source,
        })
    }

    async fn event(&self, stack: &Stack, warning: bool, reason: &str, note: String) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            // Events cap their note at 1 kB.
            note: Some(note.chars().take(1000).collect()),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &stack.object_ref(&())).await {
            tracing::warn!(stack = %stack.key(), "publishing event {reason}: {e}");
        }
    }

    fn set_gate(&self, stack: &Stack, due: Instant, failures: u32) {
        self.gates.lock().unwrap_or_else(|p| p.into_inner()).insert(
            stack.key(),
            Gate {
                trigger: trigger(stack),
                due,
                failures,
            },
        );
    }

    fn failures(&self, stack: &Stack) -> u32 {
        self.gates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&stack.key())
            .map_or(0, |g| g.failures)
    }

    async fn credentials(&self, stack: &Stack) -> Result<Option<Credentials>, ReconcileError> {
        let Some(secret) = &stack.spec.source.secret_ref else {
            return Ok(None);
        };
        let api: Api<Secret> = Api::namespaced(
            self.client.clone(),
            stack.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let found = api
            .get(&secret.name)
            .await
            .map_err(|source| ReconcileError::Secret {
                stack: stack.key(),
                secret: secret.name.clone(),
                source,
            })?;
        let data = found.data.unwrap_or_default();
        let text = |k: &str| {
            data.get(k)
                .map(|b| String::from_utf8_lossy(&b.0).trim_end().to_string())
        };
        Ok(Some(Credentials {
            username: text("username"),
            password: text("password"),
            identity: data.get("identity").map(|b| b.0.clone()),
            known_hosts: data.get("known_hosts").map(|b| b.0.clone()),
        }))
    }

    /// Fetch the Stack's revision and run the pipeline on it.
    async fn run_job(
        &self,
        stack: &Stack,
        destroy: bool,
    ) -> Result<(String, Outcome), ReconcileError> {
        let key = stack.key();
        let spec = &stack.spec;
        let wait_timeout = match &spec.wait_timeout {
            None => Duration::from_secs(300),
            Some(t) => {
                humantime::parse_duration(t.trim()).map_err(|e| ReconcileError::Invalid {
                    stack: key.clone(),
                    message: format!("spec.waitTimeout {t:?}: {e}"),
                })?
            }
        };
        let relative = std::path::Path::new(&spec.source.path);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(ReconcileError::Invalid {
                stack: key,
                message: format!(
                    "spec.source.path {:?} must be a relative path inside the repository",
                    spec.source.path
                ),
            });
        }
        let started = Instant::now();
        let credentials = self.credentials(stack).await?;
        let git = self.git.clone();
        let (url, reference) = (spec.source.url.clone(), spec.source.reference().to_string());
        let fetched = {
            let (url, reference) = (url.clone(), reference.clone());
            tokio::task::spawn_blocking(move || git.fetch(&url, &reference, credentials.as_ref()))
                .await
                .map_err(|e| ReconcileError::Invalid {
                    stack: key.clone(),
                    message: format!("the fetch task failed: {e}"),
                })?
        };
        let checkout = fetched.map_err(|source| ReconcileError::Git {
            stack: key.clone(),
            url,
            reference,
            source,
        })?;
        tracing::debug!(stack = %key, revision = %checkout.revision, took = ?started.elapsed(), "fetched");
        let dir = checkout.dir.join(relative);
        if !dir.is_dir() {
            return Err(ReconcileError::Pipeline {
                stack: key,
                revision: checkout.revision,
                message: format!(
                    "spec.source.path {:?} is not a folder in the repository",
                    spec.source.path
                ),
            });
        }
        let ns = stack.metadata.namespace.clone().unwrap_or_default();
        let job = Job {
            stack: key.clone(),
            revision: checkout.revision.clone(),
            dir,
            state_dir: self.state_root.join(&ns).join(stack.name_any()),
            backend: spec
                .state
                .as_ref()
                .and_then(|s| s.backend.clone())
                .unwrap_or_else(|| "local".into()),
            exemptions: spec
                .policy
                .as_ref()
                .map(|p| p.exempt.clone())
                .unwrap_or_default(),
            mode: spec.mode,
            require_approval: spec.require_approval,
            approved: stack.annotations().get(APPROVE_ANNOTATION).cloned(),
            destroy,
            wait: spec.wait,
            wait_timeout,
        };
        let loader = self.loader.clone();
        let started = Instant::now();
        let outcome = tokio::task::spawn_blocking(move || pipeline(&*loader, job))
            .await
            .map_err(|e| ReconcileError::Invalid {
                stack: key.clone(),
                message: format!("the pipeline task failed: {e}"),
            })??;
        tracing::debug!(stack = %key, took = ?started.elapsed(), "pipeline");
        Ok((checkout.revision, outcome))
    }

    async fn apply(&self, stack: &Stack) -> Result<Action, ReconcileError> {
        let key = stack.key();
        let _turn = self.work.acquire().await.ok();
        let mut status = stack.status.clone().unwrap_or_default();
        status.observed_generation = stack.metadata.generation;
        if stack.spec.suspend {
            status.set_condition("Reconciling", false, "Suspended", "spec.suspend is set");
            self.patch_status(stack, &status).await?;
            self.set_gate(stack, Instant::now() + Duration::from_secs(86400 * 365), 0);
            return Ok(Action::await_change());
        }
        let interval = match stack.spec.interval() {
            Ok(i) => i,
            Err(message) => {
                status.set_condition("Stalled", true, "InvalidSpec", &message);
                status.set_condition("Ready", false, "InvalidSpec", &message);
                self.patch_status(stack, &status).await?;
                self.set_gate(stack, Instant::now() + Duration::from_secs(86400 * 365), 0);
                return Ok(Action::await_change());
            }
        };
        status.set_condition(
            "Reconciling",
            true,
            "Progressing",
            &format!(
                "fetching {} {}",
                stack.spec.source.url,
                stack.spec.source.reference()
            ),
        );
        // Said up front only for a new or changed Stack: a periodic reconcile reports once, at
        // its end, which halves the API writes of a controller serving many Stacks.
        let changed =
            stack.status.as_ref().and_then(|s| s.observed_generation) != stack.metadata.generation;
        if changed {
            self.patch_status(stack, &status).await?;
        }
        let started = Instant::now();
        let result = self.run_job(stack, false).await;
        status.last_reconcile_time = Some(now_rfc3339());
        let (revision, outcome) = match result {
            Ok(done) => done,
            Err(e) => {
                let failures = self.failures(stack) + 1;
                let wait = backoff(failures, interval);
                if let ReconcileError::Pipeline { revision, .. }
                | ReconcileError::ApplyFailed { revision, .. } = &e
                {
                    status.last_attempted_revision = Some(revision.clone());
                }
                status.failures = failures;
                let message = format!("{e} (retrying in {})", humantime::format_duration(wait));
                status.set_condition("Ready", false, e.reason(), &message);
                status.set_condition("Reconciling", false, e.reason(), &message);
                status.set_condition("Stalled", false, e.reason(), "");
                tracing::warn!("{message}");
                self.event(stack, true, e.reason(), message).await;
                self.set_gate(stack, Instant::now() + wait, failures);
                self.patch_status(stack, &status).await?;
                return Err(e);
            }
        };
        status.failures = 0;
        status.set_condition("Stalled", false, "Converging", "");
        let next = Instant::now() + interval;
        let plan = match &outcome {
            Outcome::Blocked { plan, .. }
            | Outcome::Previewed { plan, .. }
            | Outcome::NothingToDo { plan, .. }
            | Outcome::AwaitingApproval { plan, .. }
            | Outcome::Applied { plan, .. } => plan,
        };
        let summary = summarize(&revision, plan);
        // Live state drifted when the revision last applied, planned again, changes something.
        let drifted = plan.has_changes()
            && (stack.spec.mode == Mode::PreviewOnly
                || status.last_applied_revision.as_deref() == Some(revision.as_str()));
        if drifted {
            status.drift = summary.changes.clone();
            status.drift_detected_at = Some(now_rfc3339());
        } else {
            status.drift.clear();
            status.drift_detected_at = None;
        }
        status.plan = Some(summary.clone());
        status.last_attempted_revision = Some(revision.clone());
        let took = started.elapsed();
        match outcome {
            Outcome::Blocked { report, .. } => {
                let lines = findings(Some(&report));
                let message = format!("blocked by policy at {revision}: {}", lines.join("; "));
                status.policy = lines;
                status.set_condition("Stalled", true, "PolicyDenied", &message);
                status.set_condition("Ready", false, "PolicyDenied", &message);
                self.event(stack, true, "PolicyDenied", message).await;
            }
            Outcome::Previewed { report, .. } => {
                status.policy = findings(Some(&report));
                if drifted {
                    let message = format!(
                        "live state differs from {revision}: {}",
                        summary.changes.join(", ")
                    );
                    status.set_condition("Ready", false, "DriftDetected", &message);
                    self.event(stack, true, "DriftDetected", message).await;
                } else {
                    status.set_condition(
                        "Ready",
                        true,
                        "UpToDate",
                        &format!("live state matches {revision}"),
                    );
                }
            }
            Outcome::NothingToDo { report, .. } => {
                status.policy = findings(report.as_ref());
                status.pending_plan = None;
                status.last_applied_revision = Some(revision.clone());
                status.set_condition(
                    "Ready",
                    true,
                    "UpToDate",
                    &format!("live state matches {revision}"),
                );
            }
            Outcome::AwaitingApproval { hash, .. } => {
                let message = format!(
                    "a plan for {revision} changes {}: approve it with `kubectl annotate stack {} {APPROVE_ANNOTATION}={hash}`",
                    summary.changes.join(", "),
                    stack.name_any()
                );
                let new = status.pending_plan.as_deref() != Some(hash.as_str());
                status.pending_plan = Some(hash);
                status.set_condition("Ready", false, "AwaitingApproval", &message);
                if new {
                    self.event(stack, false, "PlanRecorded", message).await;
                }
            }
            Outcome::Applied {
                release,
                summary: line,
                report,
                ..
            } => {
                status.policy = findings(report.as_ref());
                status.pending_plan = None;
                status.last_applied_revision = Some(revision.clone());
                status.last_release = Some(release);
                let message = format!(
                    "{line} (revision {revision}, release {release}, {:.1}s)",
                    took.as_secs_f64()
                );
                let reason = if drifted { "DriftCorrected" } else { "Applied" };
                status.set_condition("Ready", true, reason, &message);
                tracing::info!(stack = %key, "{message}");
                self.event(stack, false, reason, message).await;
            }
        }
        status.set_condition(
            "Reconciling",
            false,
            "Idle",
            &format!("next in {}", humantime::format_duration(interval)),
        );
        self.set_gate(stack, next, 0);
        self.patch_status(stack, &status).await?;
        Ok(Action::requeue(interval))
    }

    async fn cleanup(&self, stack: &Stack) -> Result<Action, ReconcileError> {
        let _turn = self.work.acquire().await.ok();
        match stack.spec.deletion_policy {
            DeletionPolicy::Orphan => {
                self.event(
                    stack,
                    false,
                    "Orphaned",
                    "deletionPolicy orphan: resources and state left in place".into(),
                )
                .await;
                Ok(Action::await_change())
            }
            DeletionPolicy::Destroy => match self.run_job(stack, true).await {
                Ok((_, Outcome::Applied { summary, .. })) => {
                    self.event(stack, false, "Destroyed", summary).await;
                    Ok(Action::await_change())
                }
                Ok(_) => Ok(Action::await_change()),
                Err(e) => {
                    let failures = self.failures(stack) + 1;
                    self.set_gate(
                        stack,
                        Instant::now() + backoff(failures, Duration::from_secs(300)),
                        failures,
                    );
                    self.event(stack, true, "DestroyFailed", e.to_string())
                        .await;
                    Err(e)
                }
            },
        }
    }
}
