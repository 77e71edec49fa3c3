//! The controller loop: watch Stacks (kube-runtime's watcher, reflector and controller),
//! reconcile one at a time, report through `status` and Events, back off on failure.
//!
//! - this module: the driver (leader terms, the kube-runtime controller, when a Stack is due);
//! - [`step`]: one reconcile of a Stack (fetch, pipeline, what it means for `status`);
//! - [`pipeline`]: the kernel's compile-policy-plan-apply run on a blocking thread;
//! - [`readiness`]: readiness asked again of a revision that timed out waiting;
//! - [`status`]: status summaries, the status patch and Events;
//! - [`error`]: why a reconcile failed, and the condition reason naming it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalized, finalizer};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use crate::StackLoader;
use crate::crd::{FINALIZER, Stack};
use crate::git::GitCache;
use crate::leader::{LeaderElector, LeaderError};

mod error;
mod pipeline;
mod readiness;
mod status;
mod step;

pub use error::ReconcileError;

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
    /// the same few again and again once it is saturated. The permit travels with the
    /// pipeline onto its blocking thread, so it is held until the pipeline really ends.
    work: Arc<tokio::sync::Semaphore>,
    /// Set when leadership is lost: the pipeline in flight stops at its next step.
    cancel: Arc<AtomicBool>,
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

/// Run the controller until the process is asked to stop. With leader election, Stacks are
/// reconciled only while this replica holds the Lease; when it loses the Lease it stops
/// reconciling (cancelling the pipeline in flight at its next step and waiting for it) and
/// stands as a candidate again, rather than exiting: the process keeps its Git cache and
/// backoff state, and needs no restart policy to serve again.
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
        work: Arc::new(tokio::sync::Semaphore::new(1)),
        cancel: Arc::new(AtomicBool::new(false)),
    });
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        if let Some(e) = elector.as_mut() {
            tokio::select! {
                acquired = e.acquire() => acquired?,
                _ = &mut shutdown => return Ok(()),
            }
        }
        ctx.cancel.store(false, Ordering::SeqCst);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        // Reconciles are not limited here but queue for `Ctx::work` (see there).
        let mut controller = Box::pin(
            Controller::new(api.clone(), watcher::Config::default())
                .graceful_shutdown_on(async move {
                    let _ = stop_rx.await;
                })
                .run(reconcile, error_policy, ctx.clone())
                .for_each(|result| async move {
                    match result {
                        Ok((object, _)) => tracing::debug!(stack = %object, "reconciled"),
                        Err(e) => tracing::warn!("{e}"),
                    }
                }),
        );
        tracing::info!(identity = %options.identity, "controller running");
        let ended = {
            let held = async {
                match elector.as_mut() {
                    Some(e) => e.hold().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut controller => Ended::Stopped,
                lost = held => Ended::Lost(lost),
                _ = &mut shutdown => Ended::Shutdown,
            }
        };
        match ended {
            Ended::Stopped => return Ok(()),
            Ended::Shutdown => {
                let _ = stop_tx.send(());
                controller.await;
                if let Some(e) = elector.as_mut() {
                    e.release().await;
                }
                return Ok(());
            }
            Ended::Lost(lost) => {
                // Stop at once: another replica may already be taking over. The pipeline in
                // flight runs on a blocking thread that dropping the controller does not stop:
                // it is cancelled at its next step and waited for, so this replica never runs
                // two pipelines at once should it lead again. Meanwhile the stack's state lease
                // keeps a new leader from applying the same stack.
                ctx.cancel.store(true, Ordering::SeqCst);
                drop(controller);
                drop(ctx.work.acquire().await);
                tracing::warn!("{lost}; stopped reconciling, standing as a candidate again");
            }
        }
    }
}

/// Why one term of reconciling ended.
enum Ended {
    Stopped,
    Lost(LeaderError),
    Shutdown,
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
