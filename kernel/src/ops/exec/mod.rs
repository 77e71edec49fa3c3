//! Running a checked [`OpsSpec`]: operations along their `dependsOn` DAG, each operation's
//! clusters in parallel, each cluster's targets batch by batch (act, wait for recovery, pause),
//! with a per-app cap on how many targets are in flight across clusters.
//!
//! Runtime verbs are blocking, so every call runs on tokio's blocking pool; a recovery wait holds
//! one blocking thread per watched workload, not per target.
//!
//! Over 800 lines: the walk, the batches, the per-app budget and the recovery wait share the
//! run's state and are read together (the tests are in `tests.rs`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kusion_sdk::runtime::{
    Health, OperateRequest, OperateResponse, RecoveryHint, Runtime, WatchEvent, WatchPoll,
    WatchRequest,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, mpsc};

use super::spec::{ClusterConfig, Condition, Group, Operation, OpsSpec, Target};
use crate::registry::Registry;
use crate::walk::NodeResult;

/// An operation's target reports and per-cluster timings.
type OperationOutcome = (Vec<TargetReport>, Vec<GroupTiming>);

/// Progress of a run, for display.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum RunEvent {
    /// A batch of one operation in one cluster started.
    #[serde(rename_all = "camelCase")]
    BatchStarted {
        /// The operation's name.
        operation: String,
        /// The cluster.
        cluster: String,
        /// The batch's number, from 1.
        batch: usize,
        /// The batches of the operation in this cluster.
        batches: usize,
        /// The batch's targets.
        targets: Vec<String>,
    },
    /// A target was acted on.
    #[serde(rename_all = "camelCase")]
    Acted {
        /// The operation's name.
        operation: String,
        /// The target's name.
        target: String,
        /// The runtime's summary of what it did, or why it failed.
        result: Result<String, String>,
    },
    /// A batch waits for its targets to recover.
    #[serde(rename_all = "camelCase")]
    Waiting {
        /// The operation's name.
        operation: String,
        /// The cluster.
        cluster: String,
        /// The batch's number.
        batch: usize,
        /// What it waits for.
        detail: String,
    },
    /// A batch ended.
    #[serde(rename_all = "camelCase")]
    BatchDone {
        /// The operation's name.
        operation: String,
        /// The cluster.
        cluster: String,
        /// The batch's number.
        batch: usize,
        /// Targets healthy again.
        recovered: usize,
        /// Targets that failed or did not recover in time.
        failed: usize,
        /// How long the batch took.
        took_ms: u64,
    },
    /// An operation was not run (a dependency failed, or the run was interrupted).
    #[serde(rename_all = "camelCase")]
    OperationSkipped {
        /// The operation's name.
        operation: String,
        /// Why.
        reason: String,
    },
}

/// How one target of a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TargetStatus {
    /// Acted on and healthy again (or acted on, for `condition: None`).
    Recovered,
    /// The runtime refused, or recovery did not happen within the timeout.
    Failed,
    /// Never acted on: an earlier batch failed, the run was interrupted, or a dependency failed.
    NotStarted,
    /// Acted on, then the run was interrupted before its recovery was confirmed.
    Interrupted,
}

/// One line of a run's journal, written durably by the caller before a target is acted on and
/// after its outcome is known, so a run killed at any point leaves a record of what it did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "entry", rename_all = "camelCase")]
pub enum JournalEntry {
    /// About to act on `target`: from here on it may have been changed.
    Acting {
        /// The operation acting.
        operation: String,
        /// The target's name.
        target: String,
    },
    /// The target's outcome.
    Done(TargetReport),
}

/// Writes journal entries durably; an error stops the target from being acted on.
pub type RunJournal = Arc<dyn Fn(JournalEntry) -> Result<(), String> + Send + Sync>;

/// One target's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetReport {
    /// The target's name.
    pub target: String,
    /// The operation it belongs to.
    pub operation: String,
    /// The app whose limits it counts against.
    pub app: String,
    /// The cluster it lives in.
    pub cluster: String,
    /// 1-based batch number within its operation and cluster.
    pub batch: usize,
    /// How it ended.
    pub status: TargetStatus,
    /// The runtime's summary of what it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Why it failed or was not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The workload that owns the target (its resource ID), when the runtime knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Milliseconds since the run started when the target was acted on / recovered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acted_at_ms: Option<u64>,
    /// Milliseconds since the run started when the target was healthy again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered_at_ms: Option<u64>,
}

/// Time spent by one operation in one cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupTiming {
    /// The operation's name.
    pub operation: String,
    /// The cluster.
    pub cluster: String,
    /// In runtime calls that act (deletes, patches).
    pub act_ms: u64,
    /// Waiting for the workloads to be healthy again.
    pub wait_ms: u64,
    /// Declared pauses between batches.
    pub pause_ms: u64,
    /// Waiting for the app's maxUnavailable budget.
    pub queued_ms: u64,
}

/// What a run did: each target's outcome and each (operation, cluster)'s timing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// Every target, in the order they ended.
    pub targets: Vec<TargetReport>,
    /// Time per (operation, cluster).
    pub groups: Vec<GroupTiming>,
    /// The whole run's duration.
    pub total_ms: u64,
}

impl RunReport {
    /// Whether every target recovered.
    pub fn succeeded(&self) -> bool {
        self.targets
            .iter()
            .all(|t| t.status == TargetStatus::Recovered)
    }
}

/// The runtime serving a cluster, checked to perform `op` on its targets' kinds.
fn runtime_for(
    registry: &Registry,
    clusters: &BTreeMap<String, ClusterConfig>,
    target: &Target,
) -> Result<Arc<dyn Runtime>, String> {
    let cluster = clusters
        .get(&target.cluster)
        .ok_or_else(|| format!("cluster {:?} is not configured", target.cluster))?;
    let runtime = registry.get(&cluster.resource_type).ok_or_else(|| {
        format!(
            "no runtime serves resource type {:?} (is the {} runtime plugin built and found? see `kusionctl plugin list`)",
            cluster.resource_type,
            cluster.resource_type.to_lowercase()
        )
    })?;
    Ok(runtime.clone())
}

/// Check every target against the runtimes' declared operations (nothing is called remotely).
pub fn check_support(
    spec: &OpsSpec,
    registry: &Registry,
    clusters: &BTreeMap<String, ClusterConfig>,
) -> Result<(), String> {
    for op in &spec.operations {
        for t in &op.targets {
            let runtime = runtime_for(registry, clusters, t)
                .map_err(|e| format!("operation {:?}, target {}: {e}", op.name, t.name))?;
            let kind = t.id.split(':').nth(1).unwrap_or("");
            let supported = runtime.operations();
            let Some(info) = supported.iter().find(|i| i.name == op.verb) else {
                return Err(format!(
                    "operation {:?}: the {} runtime cannot {} (it offers: {})",
                    op.name,
                    runtime.describe().name,
                    op.verb,
                    if supported.is_empty() {
                        "no operations".to_string()
                    } else {
                        supported
                            .iter()
                            .map(|i| i.name.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ));
            };
            if !info.kinds.is_empty() && !info.kinds.iter().any(|k| k == kind) {
                return Err(format!(
                    "operation {:?}, target {}: {} applies to {}, not {kind}",
                    op.name,
                    t.name,
                    op.kind,
                    info.kinds.join(", ")
                ));
            }
        }
    }
    Ok(())
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("runtime call failed: {e}"))
}

fn request(op: &Operation, t: &Target, cluster: &ClusterConfig, dry_run: bool) -> OperateRequest {
    OperateRequest {
        resource: t.resource(cluster),
        operation: op.verb.clone(),
        params: op.params.clone(),
        dry_run,
        timeout: Some(op.timeout),
    }
}

/// One dry-run `operate` per target: the object exists, the runtime accepts the operation, and
/// what it would do. Returned in target order per operation.
pub async fn preflight(
    spec: &OpsSpec,
    registry: &Registry,
    clusters: &BTreeMap<String, ClusterConfig>,
    concurrency: usize,
) -> Vec<(String, String, Result<OperateResponse, String>)> {
    let limit = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut tasks = Vec::new();
    for op in &spec.operations {
        for t in &op.targets {
            let (op_name, target_name) = (op.name.clone(), t.name.clone());
            let prepared = runtime_for(registry, clusters, t).map(|r| {
                let cluster = &clusters[&t.cluster];
                (r, request(op, t, cluster, true))
            });
            let limit = limit.clone();
            tasks.push(tokio::spawn(async move {
                let result = match prepared {
                    Err(e) => Err(e),
                    Ok((runtime, req)) => {
                        let _permit = limit.acquire_owned().await;
                        blocking(move || runtime.operate(&req).map_err(|e| e.message))
                            .await
                            .and_then(|r| r)
                    }
                };
                (op_name, target_name, result)
            }));
        }
    }
    let mut out = Vec::new();
    for t in tasks {
        if let Ok(r) = t.await {
            out.push(r);
        }
    }
    out
}

/// Everything one operation's groups share.
struct Shared {
    registry: Registry,
    clusters: BTreeMap<String, ClusterConfig>,
    events: Option<mpsc::UnboundedSender<RunEvent>>,
    cancel: Arc<AtomicBool>,
    /// Per app: the maxUnavailable budget and its size.
    budgets: HashMap<String, (Arc<Semaphore>, u32)>,
    started: Instant,
    journal: Option<RunJournal>,
}

impl Shared {
    fn emit(&self, e: RunEvent) {
        if let Some(tx) = &self.events {
            let _ = tx.send(e);
        }
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    fn journal(&self, entry: JournalEntry) -> Result<(), String> {
        match &self.journal {
            Some(write) => write(entry),
            None => Ok(()),
        }
    }

    /// Sleep for `d`, waking early when the run is interrupted; false if it was.
    async fn pause(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while !self.cancelled() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            tokio::time::sleep(left.min(Duration::from_millis(50))).await;
        }
        false
    }
    fn since_start(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

/// Run every operation. Never fails as a whole: each target ends with a status and reason.
pub async fn execute(
    spec: &OpsSpec,
    registry: &Registry,
    clusters: &BTreeMap<String, ClusterConfig>,
    events: Option<mpsc::UnboundedSender<RunEvent>>,
    cancel: Arc<AtomicBool>,
    journal: Option<RunJournal>,
) -> RunReport {
    let started = Instant::now();
    let mut caps: HashMap<String, usize> = HashMap::new();
    for op in &spec.operations {
        if let Some(m) = op.max_unavailable {
            let e = caps.entry(op.app.clone()).or_insert(m);
            *e = (*e).min(m);
        }
    }
    let shared = Arc::new(Shared {
        registry: registry.clone(),
        clusters: clusters.clone(),
        events,
        cancel,
        budgets: caps
            .into_iter()
            .map(|(app, n)| (app, (Arc::new(Semaphore::new(n)), n as u32)))
            .collect(),
        started,
        journal,
    });
    // Operations walk their `dependsOn` DAG on the kernel's one DAG walker (the one apply uses):
    // an operation that does not fully recover skips its dependents, and after an interrupt
    // none starts. Each walker thread drives its operation's async steps on this runtime.
    let index = spec.positions();
    let deps: Vec<Vec<usize>> = spec
        .operations
        .iter()
        .map(|op| {
            op.depends_on
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect()
        })
        .collect();
    let operations: Vec<Arc<Operation>> = spec.operations.iter().cloned().map(Arc::new).collect();
    let runtime = tokio::runtime::Handle::current();
    let walked = {
        let (operations, shared) = (operations.clone(), shared.clone());
        tokio::task::spawn_blocking(move || {
            let reports: Vec<std::sync::Mutex<Option<OperationOutcome>>> =
                operations.iter().map(|_| Default::default()).collect();
            let results = crate::walk::walk(&deps, operations.len(), &shared.cancel, |i| {
                let op = &operations[i];
                let outcome = runtime.block_on(run_operation(op, &shared));
                let ok = outcome
                    .0
                    .iter()
                    .all(|t| t.status == TargetStatus::Recovered);
                *reports[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
                if ok {
                    Ok(())
                } else {
                    Err(format!("dependency {:?} did not succeed", op.name))
                }
            });
            let reports = reports
                .into_iter()
                .map(|r| r.into_inner().unwrap_or_else(|p| p.into_inner()))
                .collect::<Vec<_>>();
            (results, reports)
        })
        .await
    };
    let mut report = RunReport::default();
    let (results, reports) = match walked {
        Ok(walked) => walked,
        Err(e) => {
            tracing::error!("the operations' walk failed: {e}");
            let reason = format!("the run failed before this target was acted on: {e}");
            for op in &operations {
                report.targets.extend(not_started(op, &reason));
            }
            report.total_ms = started.elapsed().as_millis() as u64;
            return report;
        }
    };
    for ((op, result), outcome) in operations.iter().zip(results).zip(reports) {
        let skipped = match (result, outcome) {
            (_, Some((targets, timings))) => {
                report.targets.extend(targets);
                report.groups.extend(timings);
                continue;
            }
            (NodeResult::Skipped(dependency), None) => Some(format!(
                "dependency {:?} did not succeed",
                operations[dependency].name
            )),
            (NodeResult::Failed(message), None) => Some(message),
            (NodeResult::Cancelled | NodeResult::Done(()), None) => None,
        };
        let reason = skipped.unwrap_or_else(|| INTERRUPTED.to_string());
        shared.emit(RunEvent::OperationSkipped {
            operation: op.name.clone(),
            reason: reason.clone(),
        });
        report.targets.extend(not_started(op, &reason));
    }
    report.total_ms = started.elapsed().as_millis() as u64;
    report
}

const INTERRUPTED: &str = "the run was interrupted before this target was acted on";

fn not_started(op: &Operation, reason: &str) -> Vec<TargetReport> {
    op.groups()
        .into_iter()
        .flat_map(|g| {
            g.batches
                .into_iter()
                .enumerate()
                .flat_map(move |(b, batch)| batch.into_iter().map(move |t| (b, t)))
        })
        .map(|(b, t)| {
            blank(
                op,
                &t,
                b + 1,
                TargetStatus::NotStarted,
                Some(reason.to_string()),
            )
        })
        .collect()
}

fn blank(
    op: &Operation,
    t: &Target,
    batch: usize,
    status: TargetStatus,
    reason: Option<String>,
) -> TargetReport {
    TargetReport {
        target: t.name.clone(),
        operation: op.name.clone(),
        app: op.app.clone(),
        cluster: t.cluster.clone(),
        batch,
        status,
        summary: None,
        reason,
        owner: None,
        acted_at_ms: None,
        recovered_at_ms: None,
    }
}

async fn run_operation(
    op: &Arc<Operation>,
    shared: &Arc<Shared>,
) -> (Vec<TargetReport>, Vec<GroupTiming>) {
    let mut tasks = Vec::new();
    for group in op.groups() {
        let (op, shared) = (op.clone(), shared.clone());
        tasks.push(tokio::spawn(
            async move { run_group(&op, group, &shared).await },
        ));
    }
    let mut targets = Vec::new();
    let mut timings = Vec::new();
    for t in tasks {
        if let Ok((r, timing)) = t.await {
            targets.extend(r);
            timings.push(timing);
        }
    }
    (targets, timings)
}

async fn run_group(
    op: &Operation,
    group: Group,
    shared: &Shared,
) -> (Vec<TargetReport>, GroupTiming) {
    let mut timing = GroupTiming {
        operation: op.name.clone(),
        cluster: group.cluster.clone(),
        ..GroupTiming::default()
    };
    let mut out = Vec::new();
    let batches = group.batches.len();
    let mut stop: Option<String> = None;
    let all_batches = group.batches.clone();
    for (b, batch) in group.batches.into_iter().enumerate() {
        let number = b + 1;
        if stop.is_none() && b > 0 && !op.pause.is_zero() {
            let paused = Instant::now();
            shared.pause(op.pause).await;
            timing.pause_ms += paused.elapsed().as_millis() as u64;
        }
        let queued = Instant::now();
        let permit = match (stop.is_none(), shared.budgets.get(&op.app)) {
            (true, Some((sem, cap))) => {
                let want = (batch.len() as u32).min(*cap).max(1);
                // Waiting for the budget ends early when the run is interrupted.
                tokio::select! {
                    p = sem.clone().acquire_many_owned(want) => p.ok(),
                    () = wait_cancelled(shared) => None,
                }
            }
            _ => None,
        };
        timing.queued_ms += queued.elapsed().as_millis() as u64;
        // Checked after the pause and the budget wait, right before acting: an interrupt
        // during either starts nothing more.
        if stop.is_none() && shared.cancelled() {
            stop = Some(INTERRUPTED.into());
        }
        if let Some(why) = &stop {
            drop(permit);
            out.extend(
                batch
                    .iter()
                    .map(|t| blank(op, t, number, TargetStatus::NotStarted, Some(why.clone()))),
            );
            continue;
        }
        let _permit = permit;
        shared.emit(RunEvent::BatchStarted {
            operation: op.name.clone(),
            cluster: group.cluster.clone(),
            batch: number,
            batches,
            targets: batch.iter().map(|t| t.name.clone()).collect(),
        });
        let batch_start = Instant::now();
        // Pods this group restarts in later batches: still broken, excused until their turn.
        let later: Vec<String> = all_batches[b + 1..]
            .iter()
            .flatten()
            .filter(|t| t.id.starts_with("v1:Pod:"))
            .filter_map(|t| t.id.rsplit(':').next().map(str::to_string))
            .collect();
        let results = run_batch(
            op,
            &group.cluster,
            number,
            &batch,
            &later,
            shared,
            &mut timing,
        )
        .await;
        let failed = results
            .iter()
            .filter(|r| r.status != TargetStatus::Recovered)
            .count();
        shared.emit(RunEvent::BatchDone {
            operation: op.name.clone(),
            cluster: group.cluster.clone(),
            batch: number,
            recovered: results.len() - failed,
            failed,
            took_ms: batch_start.elapsed().as_millis() as u64,
        });
        if failed > 0 {
            stop = Some(format!(
                "batch {number} in cluster {} did not recover",
                group.cluster
            ));
        }
        out.extend(results);
    }
    (out, timing)
}

async fn run_batch(
    op: &Operation,
    cluster: &str,
    number: usize,
    batch: &[Target],
    later: &[String],
    shared: &Shared,
    timing: &mut GroupTiming,
) -> Vec<TargetReport> {
    let act_start = Instant::now();
    let deadline = act_start + op.timeout;
    let mut calls = Vec::new();
    for t in batch {
        let prepared = runtime_for(&shared.registry, &shared.clusters, t)
            .map(|r| {
                let req = request(op, t, &shared.clusters[&t.cluster], false);
                (r, req)
            })
            .and_then(|prepared| {
                // The intent is durable before the target is touched.
                if shared.cancelled() {
                    return Err(INTERRUPTED.to_string());
                }
                shared
                    .journal(JournalEntry::Acting {
                        operation: op.name.clone(),
                        target: t.name.clone(),
                    })
                    .map(|()| prepared)
                    .map_err(|e| {
                        format!("not acted on: the run's record could not be written: {e}")
                    })
            });
        calls.push(async move {
            match prepared {
                Err(e) => Err(e),
                Ok((runtime, req)) => {
                    let r2 = runtime.clone();
                    blocking(move || r2.operate(&req).map_err(|e| e.message))
                        .await
                        .and_then(|r| r)
                        .map(|resp| (runtime, resp))
                }
            }
        });
    }
    let acted = futures_join_all(calls).await;
    timing.act_ms += act_start.elapsed().as_millis() as u64;
    let mut reports = Vec::new();
    // Watches merged per workload: one wait per (runtime, watched resource).
    let mut waits: Vec<(Arc<dyn Runtime>, RecoveryHint, Vec<usize>)> = Vec::new();
    for (t, result) in batch.iter().zip(acted) {
        let mut r = blank(op, t, number, TargetStatus::Failed, None);
        r.acted_at_ms = Some(shared.since_start());
        match result {
            Err(e) if e == INTERRUPTED => {
                r.status = TargetStatus::NotStarted;
                r.reason = Some(e);
                r.acted_at_ms = None;
            }
            Err(e) => {
                shared.emit(RunEvent::Acted {
                    operation: op.name.clone(),
                    target: t.name.clone(),
                    result: Err(e.clone()),
                });
                r.reason = Some(format!("app {}: {e}", op.app));
                r.acted_at_ms = None;
            }
            Ok((runtime, resp)) => {
                shared.emit(RunEvent::Acted {
                    operation: op.name.clone(),
                    target: t.name.clone(),
                    result: Ok(resp.summary.clone()),
                });
                r.summary = Some(resp.summary.clone());
                r.owner = resp.owner.clone();
                match (op.condition, resp.recovery) {
                    (Condition::Healthy, Some(hint)) => {
                        let i = reports.len();
                        match waits
                            .iter_mut()
                            .find(|(_, h, _)| h.watch.id == hint.watch.id)
                        {
                            Some((_, h, members)) => {
                                for g in hint.gone {
                                    if !h.gone.contains(&g) {
                                        h.gone.push(g);
                                    }
                                }
                                h.min_ready = h.min_ready.max(hint.min_ready);
                                members.push(i);
                            }
                            None => waits.push((runtime, hint, vec![i])),
                        }
                    }
                    _ => {
                        r.status = TargetStatus::Recovered;
                        r.recovered_at_ms = r.acted_at_ms;
                    }
                }
            }
        }
        reports.push(r);
    }
    if waits.is_empty() {
        journal_outcomes(shared, &reports);
        return reports;
    }
    let wait_start = Instant::now();
    let mut handles = Vec::new();
    for (runtime, hint, members) in waits {
        let stable_for = op.stable_for;
        let excused = later.to_vec();
        let cancel = shared.cancel.clone();
        let events = shared.events.clone();
        let (op_name, cluster_name) = (op.name.clone(), cluster.to_string());
        handles.push(async move {
            let r = blocking(move || {
                wait_recovered(
                    runtime.as_ref(),
                    &hint,
                    &excused,
                    deadline,
                    stable_for,
                    &cancel,
                    |detail| {
                        if let Some(tx) = &events {
                            let _ = tx.send(RunEvent::Waiting {
                                operation: op_name.clone(),
                                cluster: cluster_name.clone(),
                                batch: number,
                                detail: format!("{}: {detail}", hint.watch.id),
                            });
                        }
                    },
                )
            })
            .await
            .and_then(|r| r);
            (members, r)
        });
    }
    for (members, result) in futures_join_all(handles).await {
        let at = shared.since_start();
        for i in members {
            let r = &mut reports[i];
            match &result {
                Ok(()) => {
                    r.status = TargetStatus::Recovered;
                    r.recovered_at_ms = Some(at);
                }
                Err(why) if why.starts_with(WAIT_INTERRUPTED) => {
                    r.status = TargetStatus::Interrupted;
                    r.reason = Some(format!("app {}: {why}", op.app));
                }
                Err(why) => {
                    r.reason = Some(format!(
                        "app {}: not recovered within {}: {why}",
                        op.app,
                        humantime::format_duration(op.timeout)
                    ))
                }
            }
        }
    }
    timing.wait_ms += wait_start.elapsed().as_millis() as u64;
    journal_outcomes(shared, &reports);
    reports
}

/// Journal each target's outcome (a failed write is logged: the act already happened, and
/// the record still names the target as acted on).
fn journal_outcomes(shared: &Shared, reports: &[TargetReport]) {
    for r in reports {
        if let Err(e) = shared.journal(JournalEntry::Done(r.clone())) {
            tracing::error!("recording the outcome of {}: {e}", r.target);
        }
    }
}

const WAIT_INTERRUPTED: &str = "interrupted while waiting for recovery";

/// Resolves once the run is interrupted.
async fn wait_cancelled(shared: &Shared) {
    while !shared.cancelled() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Join futures without pulling in a futures crate: spawn-free, polled in order.
async fn futures_join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut results: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if results[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => results[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    results
        .into_iter()
        .map(|r| r.expect("every future finished"))
        .collect()
}

/// Whether a watch event shows the hint satisfied; otherwise why not.
///
/// `excused` names objects that are targets of later batches of the same operation: they are
/// known to be broken and will be restarted next, so while any is listed, the workload counts as
/// recovered when every other object is ready (and enough are). The last batch has none excused
/// and needs the workload itself healthy.
pub fn judge(event: &WatchEvent, hint: &RecoveryHint, excused: &[String]) -> Result<(), String> {
    if let Some(g) = hint.gone.iter().find(|g| {
        event
            .objects
            .iter()
            .any(|o| o.kind == g.kind && o.name == g.name)
    }) {
        return Err(format!("waiting for {} {} to be replaced", g.kind, g.name));
    }
    let kind = hint.ready_kind.as_deref();
    let counted = |o: &&kusion_sdk::runtime::ObjectStatus| Some(o.kind.as_str()) == kind;
    let present_excused = event
        .objects
        .iter()
        .filter(counted)
        .filter(|o| excused.contains(&o.name))
        .count();
    if present_excused == 0 {
        if event.health == Health::Failed {
            return Err(event.detail.clone());
        }
    } else if let Some(bad) = event
        .objects
        .iter()
        .filter(counted)
        .find(|o| o.health == Health::Failed && !excused.contains(&o.name))
    {
        return Err(format!("{} {}: {}", bad.kind, bad.name, bad.detail));
    }
    if let (Some(min), Some(kind)) = (hint.min_ready, kind) {
        let ready = event
            .objects
            .iter()
            .filter(|o| o.kind == kind && o.health == Health::Ready && !excused.contains(&o.name))
            .count();
        let need = (min as usize).saturating_sub(present_excused);
        if ready < need {
            return Err(if present_excused > 0 {
                format!("{ready}/{need} {kind}s ready ({present_excused} more to restart later)")
            } else {
                format!("{ready}/{min} {kind}s ready")
            });
        }
    }
    if present_excused > 0 || event.health == Health::Ready {
        Ok(())
    } else {
        Err(event.detail.clone())
    }
}

/// Watch until the hint holds (for `stable_for`), the deadline passes, or the run is cancelled.
fn wait_recovered(
    runtime: &dyn Runtime,
    hint: &RecoveryHint,
    excused: &[String],
    deadline: Instant,
    stable_for: Duration,
    cancel: &AtomicBool,
    progress: impl Fn(&str),
) -> Result<(), String> {
    let mut last = "no health report yet".to_string();
    let mut satisfied_since: Option<Instant> = None;
    loop {
        if Instant::now() >= deadline {
            return Err(last);
        }
        if cancel.load(Ordering::SeqCst) {
            return Err(format!("{WAIT_INTERRUPTED} (last seen: {last})"));
        }
        let mut w = match runtime.watch(&WatchRequest {
            resource: hint.watch.clone(),
        }) {
            Ok(w) => w,
            Err(e) => {
                last = e.message;
                if !e.retryable {
                    return Err(last);
                }
                std::thread::sleep(Duration::from_millis(500));
                continue;
            }
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(last);
            }
            match w.poll(left.min(Duration::from_secs(1))) {
                Ok(WatchPoll::Event(event)) => match judge(&event, hint, excused) {
                    Ok(()) => {
                        let since = *satisfied_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= stable_for {
                            return Ok(());
                        }
                    }
                    Err(why) => {
                        satisfied_since = None;
                        if why != last {
                            progress(&why);
                        }
                        last = why;
                    }
                },
                Ok(WatchPoll::Pending) => {
                    if cancel.load(Ordering::SeqCst) {
                        return Err(format!("{WAIT_INTERRUPTED} (last seen: {last})"));
                    }
                }
                Ok(WatchPoll::Closed) => break,
                Err(e) => {
                    last = e.message;
                    break;
                }
            }
        }
        // The watch ends at the first Ready or Failed; look again until the hint holds.
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[cfg(test)]
mod tests;
