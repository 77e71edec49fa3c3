//! A worker: claims queued operations and runs them through the kernel's policy-guarded
//! preview and apply, the calls `kusionctl preview` and `kusionctl apply` make.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kusion_kernel::execute::{ApplyOptions, Event, Outcome};
use kusion_kernel::operation::Applied;
use kusion_kernel::plan::{PlanOptions, PlanView};
use kusion_kernel::policy::{self as kpolicy, Guarded, PolicyReport};
use kusion_kernel::spec::Spec;
use serde_json::Value;

use crate::ops::{EventKind, Operation, OperationKind, OperationQueue, OperationStatus};
use crate::source::StackSource;

/// Claims and runs operations until the process ends.
pub async fn run(queue: Arc<dyn OperationQueue>, source: Arc<dyn StackSource>, name: String) {
    let (_keep, stop) = tokio::sync::watch::channel(false);
    run_until(queue, source, name, stop).await;
}

/// Claims and runs operations until `stop` is raised. Then no new operation is claimed; the
/// one running has its cancel flag raised (no new step starts), the steps under way finish,
/// and the operation is recorded (`execute` says how) before this returns.
pub async fn run_until(
    queue: Arc<dyn OperationQueue>,
    source: Arc<dyn StackSource>,
    name: String,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut changes = queue.changes();
    loop {
        if *stop.borrow() {
            return;
        }
        // A database queue's claim blocks on its connection thread.
        let claimed = {
            let (queue, name) = (queue.clone(), name.clone());
            tokio::task::spawn_blocking(move || queue.claim(&name))
                .await
                .unwrap_or_else(|e| Err(crate::ServerError::Io(format!("the claim's task: {e}"))))
        };
        match claimed {
            Ok(Some(op)) => {
                let id = op.id.clone();
                let cancel = Arc::new(AtomicBool::new(false));
                let stopping = Arc::new(AtomicBool::new(false));
                // Compiling, planning and applying block; the kernel's runtimes may use the
                // async runtime's handle, which blocking tasks have.
                let task = {
                    let (queue, source, cancel, stopping) = (
                        queue.clone(),
                        source.clone(),
                        cancel.clone(),
                        stopping.clone(),
                    );
                    tokio::task::spawn_blocking(move || {
                        execute(&*queue, &*source, op, cancel, &stopping)
                    })
                };
                let stop = stop.clone();
                if let Err(e) = supervise(&queue, &id, &name, task, &cancel, &stopping, stop).await
                {
                    tracing::error!(operation = %id, "the operation's task stopped: {e}");
                    abandon(&*queue, &id, &format!("the worker's task stopped: {e}"));
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("claiming an operation: {e}"),
        }
        // Woken by any change; the timer covers queues that cannot tell.
        tokio::select! {
            _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()) => {}
            () = crate::stopped(&mut stop) => return,
        }
    }
}

/// Awaits `task`, telling the queue every so often that this worker still runs operation `id`
/// (a shared queue re-queues the operations of workers that went silent), and raising `cancel`
/// once someone asks to cancel it (the queue's changes wake this loop), or with `stopping` once
/// `stop` is raised (the process is shutting down).
async fn supervise(
    queue: &Arc<dyn OperationQueue>,
    id: &str,
    name: &str,
    mut task: tokio::task::JoinHandle<()>,
    cancel: &AtomicBool,
    stopping: &AtomicBool,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), tokio::task::JoinError> {
    let every = queue.heartbeat_every();
    // Without heartbeats the timer only backs up the change notifications.
    let mut ticks = tokio::time::interval(every.unwrap_or(Duration::from_secs(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut changes = queue.changes();
    loop {
        tokio::select! {
            done = &mut task => return done,
            () = crate::stopped(&mut stop), if !stopping.load(Ordering::SeqCst) => {
                tracing::info!(operation = %id, "shutting down: no new step starts");
                stopping.store(true, Ordering::SeqCst);
                cancel.store(true, Ordering::SeqCst);
            }
            Ok(()) = changes.changed(), if !cancel.load(Ordering::SeqCst) => {
                check_cancelled(queue, id, cancel).await;
            }
            _ = ticks.tick() => {
                check_cancelled(queue, id, cancel).await;
                if every.is_none() {
                    continue;
                }
                let (q, op, me) = (queue.clone(), id.to_string(), name.to_string());
                // The queue's call blocks on its database thread.
                let beat = tokio::task::spawn_blocking(move || q.heartbeat(&op, &me)).await;
                match beat {
                    Ok(Ok(true)) => {}
                    // The stack's lease fences this run's writes once another run takes it.
                    Ok(Ok(false)) => tracing::warn!(
                        operation = %id,
                        "the queue no longer counts this worker as running the operation"
                    ),
                    Ok(Err(e)) => tracing::warn!(operation = %id, "heartbeat: {e}"),
                    Err(e) => tracing::warn!(operation = %id, "heartbeat task: {e}"),
                }
            }
        }
    }
}

/// Raises `cancel` when the stored operation says someone asked to cancel it.
async fn check_cancelled(queue: &Arc<dyn OperationQueue>, id: &str, cancel: &AtomicBool) {
    if cancel.load(Ordering::SeqCst) {
        return;
    }
    let (q, op) = (queue.clone(), id.to_string());
    if let Ok(Ok(Some(stored))) = tokio::task::spawn_blocking(move || q.get(&op)).await
        && stored.cancelled_by.is_some()
    {
        tracing::info!(operation = %id, "cancel requested: no new step starts");
        cancel.store(true, Ordering::SeqCst);
    }
}

/// Ends an operation whose task stopped (a panic) as failed, so it is not shown running forever.
fn abandon(queue: &dyn OperationQueue, id: &str, message: &str) {
    let Ok(Some(mut op)) = queue.get(id) else {
        return;
    };
    if op.status != OperationStatus::Running {
        return;
    }
    op.status = OperationStatus::Failed;
    op.error = Some(message.to_string());
    let _ = queue.push_event(
        id,
        EventKind::Status {
            status: OperationStatus::Failed,
            message: Some(message.to_string()),
        },
    );
    let _ = queue.update(&op, OperationStatus::Running);
}

fn planned(plan: &PlanView) -> EventKind {
    let s = &plan.summary;
    EventKind::Planned {
        create: s.create,
        update: s.update,
        replace: s.replace,
        delete: s.delete,
        unchanged: s.unchanged,
    }
}

pub(crate) fn policy_json(report: &PolicyReport) -> Option<Value> {
    (!report.policies.is_empty())
        .then(|| serde_json::to_value(report).ok())
        .flatten()
}

/// Runs one claimed operation to its next resting status. When `stopping` was raised (the
/// process shuts down) and the run did not reach a resting status of its own, the operation
/// is handed back ([`hand_back`]).
fn execute(
    queue: &dyn OperationQueue,
    source: &dyn StackSource,
    mut op: Operation,
    cancel: Arc<AtomicBool>,
    stopping: &AtomicBool,
) {
    let id = op.id.clone();
    let push = |kind: EventKind| {
        if let Err(e) = queue.push_event(&id, kind) {
            tracing::warn!("recording an event: {e}");
        }
    };
    push(EventKind::Status {
        status: OperationStatus::Running,
        message: None,
    });
    let outcome = run_steps(queue, source, &mut op, cancel.clone());
    let (mut status, mut message) = match outcome {
        Ok((status, message)) => (status, message),
        Err(e) => {
            op.error = Some(e.clone());
            (OperationStatus::Failed, Some(e))
        }
    };
    // Who asked to cancel is in the stored operation, not in this worker's copy.
    let by = if cancel.load(Ordering::SeqCst) {
        queue.get(&id).ok().flatten().and_then(|o| o.cancelled_by)
    } else {
        None
    };
    // A step that failed on its own is the operation's outcome, shutdown or not: handing it
    // back would retry it without anyone asking.
    let interrupted = !step_failed(op.result.as_ref())
        && !matches!(
            status,
            OperationStatus::Succeeded
                | OperationStatus::AwaitingApproval
                | OperationStatus::Blocked
        );
    if stopping.load(Ordering::SeqCst) && by.is_none() && interrupted {
        hand_back(queue, op);
        return;
    }
    if cancel.load(Ordering::SeqCst) && status != OperationStatus::Succeeded {
        op.cancelled_by = by.clone();
        let what = message.take().unwrap_or_else(|| "nothing changed".into());
        message = Some(format!(
            "cancelled by {}: {what}",
            by.as_deref().unwrap_or("someone")
        ));
        status = OperationStatus::Cancelled;
    }
    op.status = status;
    // The event first: a stream ends when it sees the final status and no further events.
    push(EventKind::Status { status, message });
    match queue.update(&op, OperationStatus::Running) {
        Ok(true) => {}
        Ok(false) => tracing::warn!(operation = %op.id, "the operation changed while it ran"),
        Err(e) => tracing::error!(operation = %op.id, "recording the operation's end: {e}"),
    }
}

/// Records an operation whose run the process's shutdown interrupted (the steps under way
/// finished, no new one started; the kernel closed the release and let go of the stack's lease
/// as after a cancel).
///
/// On a shared queue (PostgreSQL) it goes back to `queued`: another worker claims it and plans
/// again from the stack's state and journal, applying only what is left, as after a worker's
/// death but without waiting for the heartbeat timeout. That is the safest choice: every
/// completed step is in state, so nothing is applied twice, and a change someone asked for (and
/// maybe approved) is not dropped because the servers were redeployed. (An approved apply whose
/// remaining plan differs from the approved one still stops there, as the approval check
/// demands.) On the in-process queue nobody would ever claim it again, so it ends cancelled,
/// saying so; so does a day-2 run on any queue (its record says which targets were acted on).
fn hand_back(queue: &dyn OperationQueue, mut op: Operation) {
    let id = op.id.clone();
    let worker = op.worker.clone().unwrap_or_else(|| "?".into());
    // A day-2 run is never started again unasked: its program may act on what its first
    // attempt already changed (a restarted pod is a new pod).
    let (status, message) = if queue.shared() && op.kind != OperationKind::Run {
        op.error = None;
        (
            OperationStatus::Queued,
            format!(
                "worker {worker} shut down: the steps under way finished and no new step \
                 started; re-queued, another worker plans again from the stack's state"
            ),
        )
    } else {
        let message = "the server shut down during the operation: the steps under way \
                       finished and no new step started; start a new operation for the rest"
            .to_string();
        op.error = Some(message.clone());
        (OperationStatus::Cancelled, message)
    };
    tracing::info!(operation = %id, "{message}");
    op.status = status;
    if let Err(e) = queue.push_event(
        &id,
        EventKind::Status {
            status,
            message: Some(message),
        },
    ) {
        tracing::warn!("recording an event: {e}");
    }
    match queue.update(&op, OperationStatus::Running) {
        Ok(true) => {}
        Ok(false) => tracing::warn!(operation = %id, "the operation changed while it ran"),
        Err(e) => tracing::error!(operation = %id, "recording the operation's hand-back: {e}"),
    }
}

/// True when an apply's report (as the operation keeps it) has a step that failed, rather than
/// one cancelled or skipped, or a run's a target that failed.
fn step_failed(result: Option<&Value>) -> bool {
    let Some(result) = result else {
        return false;
    };
    let failed_step = result["steps"]
        .as_array()
        .is_some_and(|steps| steps.iter().any(|s| s["outcome"]["status"] == "failed"));
    let failed_target = result["targets"]
        .as_array()
        .is_some_and(|targets| targets.iter().any(|t| t["status"] == "failed"));
    failed_step || failed_target
}

pub(crate) type Step = Result<(OperationStatus, Option<String>), String>;

fn run_steps(
    queue: &dyn OperationQueue,
    source: &dyn StackSource,
    op: &mut Operation,
    cancel: Arc<AtomicBool>,
) -> Step {
    let stacks = source.stacks().map_err(|e| e.to_string())?;
    let stack = stacks
        .iter()
        .find(|s| s.project == op.project && s.stack == op.stack)
        .ok_or_else(|| {
            format!(
                "stack {}/{} is no longer in the checkout",
                op.project, op.stack
            )
        })?;
    if op.kind == OperationKind::Run {
        return crate::day2::run_program(queue, source, stack, op, cancel);
    }
    let prepared = source.open(stack).map_err(|e| e.to_string())?;
    op.source_revision = prepared.revision.clone();
    let destroy = op.kind == OperationKind::Destroy;
    let plan_options = PlanOptions {
        destroy,
        ..PlanOptions::default()
    };
    // A destroy plans the empty spec against state, as `kusionctl destroy` does.
    let spec = if destroy {
        Spec::default()
    } else {
        prepared.spec.clone()
    };
    let push = |kind: EventKind| {
        if let Err(e) = queue.push_event(&op.id, kind) {
            tracing::warn!("recording an event: {e}");
        }
    };
    if op.kind == OperationKind::Preview || (op.require_approval && op.approved_by.is_none()) {
        let (plan, report) = prepared
            .guard
            .preview(&spec, &prepared.stack, &plan_options, cancel)
            .map_err(|e| e.to_string())?;
        push(planned(&plan));
        op.plan = serde_json::to_value(&plan).ok();
        op.policy = policy_json(&report);
        if op.kind == OperationKind::Preview {
            return Ok((OperationStatus::Succeeded, None));
        }
        if report.blocked {
            return Ok((
                OperationStatus::Blocked,
                Some("blocked by policy; nothing changed".into()),
            ));
        }
        if !plan.has_changes() {
            return Ok((OperationStatus::Succeeded, Some("no changes".into())));
        }
        op.plan_hash = Some(plan.approval_hash(None));
        return Ok((
            OperationStatus::AwaitingApproval,
            Some("waiting for a second person's approval".into()),
        ));
    }

    let approved_hash = op.approved_by.as_ref().and(op.plan_hash.clone());
    let computed: Mutex<Option<PlanView>> = Mutex::new(None);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let id = op.id.clone();
    let result = std::thread::scope(|scope| {
        // Progress goes to the operation's event stream while the apply runs.
        scope.spawn(|| {
            while let Some(event) = rx.blocking_recv() {
                if let Err(e) = queue.push_event(&id, event_kind(event)) {
                    tracing::warn!("recording an event: {e}");
                }
            }
        });
        kpolicy::guarded_apply(
            &prepared.guard,
            &spec,
            &prepared.stack,
            op.kind.name(),
            &plan_options,
            &ApplyOptions {
                watch: op.watch,
                ..ApplyOptions::default()
            },
            None,
            |plan, _report| {
                if let Ok(mut slot) = computed.lock() {
                    *slot = Some(plan.clone());
                }
                // What was approved is what runs: a plan that changed since stops here.
                approved_hash
                    .as_ref()
                    .is_none_or(|hash| *hash == plan.approval_hash(None))
            },
            Some(tx),
            cancel,
        )
    });
    let computed = computed.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(plan) = &computed {
        if op.plan.is_none() || approved_hash.is_none() {
            push(planned(plan));
        }
        op.plan = serde_json::to_value(plan).ok();
    }
    match result.map_err(|e| e.to_string())? {
        Guarded::Blocked { report, .. } => {
            op.policy = policy_json(&report);
            Ok((
                OperationStatus::Blocked,
                Some("blocked by policy; nothing changed".into()),
            ))
        }
        Guarded::Ran { applied, report } => {
            op.policy = report.as_ref().and_then(policy_json);
            match applied {
                Applied::NothingToDo(_) => Ok((OperationStatus::Succeeded, Some("no changes".into()))),
                Applied::Declined(_) => Err(
                    "the plan changed since it was approved; nothing changed (start a new operation)"
                        .into(),
                ),
                Applied::Done {
                    report, revision, ..
                } => {
                    op.revision = Some(revision);
                    op.result = serde_json::to_value(&report).ok();
                    if report.succeeded() {
                        Ok((OperationStatus::Succeeded, None))
                    } else {
                        let failed: Vec<String> = report
                            .steps
                            .iter()
                            .filter_map(|s| match &s.outcome {
                                Outcome::Failed(e) => Some(format!("{}: {e}", s.id)),
                                _ => None,
                            })
                            .collect();
                        op.error = Some(if failed.is_empty() {
                            "interrupted".into()
                        } else {
                            failed.join("; ")
                        });
                        Ok((OperationStatus::Failed, op.error.clone()))
                    }
                }
            }
        }
    }
}

fn event_kind(event: Event) -> EventKind {
    match event {
        Event::Started { id, action } => EventKind::StepStarted {
            id,
            action: action.to_string(),
        },
        Event::Finished {
            id,
            action,
            outcome,
        } => {
            let (outcome, reason) = match outcome {
                Outcome::Succeeded => ("succeeded", None),
                Outcome::Failed(e) => ("failed", Some(e)),
                Outcome::Skipped(e) => ("skipped", Some(e)),
                Outcome::Cancelled => ("cancelled", None),
            };
            EventKind::StepFinished {
                id,
                action: action.to_string(),
                outcome: outcome.into(),
                reason,
            }
        }
        Event::Watch { id, event, .. } => EventKind::Watch {
            id,
            health: serde_json::to_value(event.health)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{:?}", event.health)),
            detail: event.detail,
        },
    }
}

#[cfg(test)]
mod tests {
    use kusion_kernel::execute::{ApplyReport, Outcome, StepReport};
    use kusion_kernel::plan::Action;

    #[test]
    fn a_failed_step_is_told_from_cancelled_ones() {
        let report = |outcomes: Vec<Outcome>| {
            let steps = outcomes
                .into_iter()
                .enumerate()
                .map(|(n, outcome)| StepReport {
                    id: format!("t:{n}"),
                    action: Action::Create,
                    outcome,
                })
                .collect();
            serde_json::to_value(ApplyReport {
                steps,
                interrupted: true,
            })
            .unwrap()
        };
        let cancelled = report(vec![Outcome::Succeeded, Outcome::Cancelled]);
        assert!(!super::step_failed(Some(&cancelled)));
        let failed = report(vec![Outcome::Failed("boom".into()), Outcome::Cancelled]);
        assert!(super::step_failed(Some(&failed)));
        assert!(!super::step_failed(None));
    }
}
