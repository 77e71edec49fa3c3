//! A day-2 run as an operation: the worker's side of `POST .../runs`. The program is compiled by
//! the front end ([`StackSource::open_run`]), then checked, preflighted, recorded and executed
//! through the kernel's `ops` steps, the ones `kusionctl run` takes, so the stack's run history
//! reads the same whichever front end ran it.
//!
//! Approval works as for an apply: a stack with `requireApproval` stops after the preflight with
//! the run's plan and its hash; once approved, the run checks again and starts only if the plan is
//! the one approved.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kusion_kernel::ops::check::{self, CheckError, CheckedRun};
use kusion_kernel::ops::exec::{self, RunEvent, TargetStatus};
use kusion_kernel::ops::record::{self, RecordedRun};
use kusion_kernel::state::{LeaseHolder, ReleaseStatus};
use serde_json::{Value, json};

use crate::ops::{EventKind, Operation, OperationQueue, OperationStatus};
use crate::source::{StackRef, StackSource};
use crate::worker::{Step, policy_json};

/// How many targets are preflighted at once.
const PREFLIGHT_CONCURRENCY: usize = 8;

/// Runs a claimed `run` operation to its next resting status.
pub(crate) fn run_program(
    queue: &dyn OperationQueue,
    source: &dyn StackSource,
    stack: &StackRef,
    op: &mut Operation,
    cancel: Arc<AtomicBool>,
) -> Step {
    let program = op
        .program
        .clone()
        .ok_or_else(|| "the run names no program".to_string())?;
    let args =
        kusion_kernel::ops::spec::parse_args(&op.args).map_err(|e| format!("argument {e}"))?;
    let prepared = source
        .open_run(stack, &program, &args)
        .map_err(|e| e.to_string())?;
    op.source_revision = prepared.revision.clone();
    let (spec, registry, clusters) = (&prepared.spec, &prepared.stack.registry, &prepared.clusters);
    let push = |kind: EventKind| {
        if let Err(e) = queue.push_event(&op.id, kind) {
            tracing::warn!("recording an event: {e}");
        }
    };
    match check::check(spec, registry, clusters, &prepared.guard) {
        Ok(report) => op.policy = policy_json(&report),
        Err(CheckError::Blocked(blocked)) => {
            op.policy = policy_json(&blocked.0);
            return Ok((
                OperationStatus::Blocked,
                Some("blocked by policy; nothing changed".into()),
            ));
        }
        Err(e) => return Err(e.to_string()),
    }
    // The kernel's run steps are async; this is a blocking task of the server's runtime.
    let handle = tokio::runtime::Handle::current();
    let checks = handle.block_on(exec::preflight(
        spec,
        registry,
        clusters,
        PREFLIGHT_CONCURRENCY,
    ));
    let checked = CheckedRun::new(spec, checks, op.partial);
    push(EventKind::RunPlanned {
        operations: spec.operations.len(),
        targets: spec.target_count(),
        unresolved: spec.unresolved.len(),
    });
    op.plan = Some(checked.plan.clone());
    if spec.operations.is_empty() && spec.unresolved.is_empty() {
        return Ok((
            OperationStatus::Succeeded,
            Some("the program declares no operations: nothing to do".into()),
        ));
    }
    // The API caller is who ran it, as the history shows.
    let holder = LeaseHolder {
        owner: op.requested_by.clone(),
        ..LeaseHolder::current("run")
    };
    let mut run_record = record::new_record(spec, &program, op.args.clone(), holder);
    let store = prepared.stack.store.clone();
    if let Some(problem) = &checked.problem {
        // Refused before acting: recorded, so the attempt is in the history.
        let id = record::record_refused(
            store.as_ref(),
            &mut run_record,
            spec,
            problem,
            &checked.refused,
        )
        .map_err(|e| e.to_string())?;
        op.run = Some(id);
        let targets: Vec<Value> = run_record
            .targets
            .iter()
            .map(|t| json!({"target": t.target, "operation": t.operation, "status": t.outcome, "reason": t.reason}))
            .collect();
        op.result = Some(json!({"run": id, "status": "refused", "targets": targets}));
        return Err(format!("{problem}; nothing was run (run {id})"));
    }
    let hash = checked.approval_hash();
    if op.require_approval && op.approved_by.is_none() {
        op.plan_hash = Some(hash);
        return Ok((
            OperationStatus::AwaitingApproval,
            Some("waiting for a second person's approval".into()),
        ));
    }
    if op.approved_by.is_some() && op.plan_hash.as_deref() != Some(hash.as_str()) {
        return Err(
            "the run's plan changed since it was approved; nothing was run (start a new run)"
                .into(),
        );
    }

    let run = handle
        .block_on(RecordedRun::start(
            store,
            run_record,
            Duration::ZERO,
            cancel.clone(),
        ))
        .map_err(|e| e.to_string())?;
    let id = run.id;
    op.run = Some(id);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
    let executed = std::thread::scope(|scope| {
        // Progress goes to the operation's event stream while the run goes on.
        scope.spawn(|| {
            while let Some(event) = rx.blocking_recv() {
                let progress = serde_json::to_value(&event).unwrap_or(Value::Null);
                if let Err(e) = queue.push_event(&op.id, EventKind::RunProgress { progress }) {
                    tracing::warn!("recording an event: {e}");
                }
            }
        });
        handle.block_on(run.execute(spec, registry, clusters, Some(tx), cancel))
    });
    let (run_record, report) = executed.map_err(|e| e.to_string())?;
    op.result = Some(json!({
        "run": id,
        "status": format!("{:?}", run_record.status).to_lowercase(),
        "targets": report.targets,
        "unresolved": spec.unresolved,
        "groups": report.groups,
    }));
    if run_record.status == ReleaseStatus::Succeeded {
        return Ok((OperationStatus::Succeeded, None));
    }
    let failed: Vec<String> = report
        .targets
        .iter()
        .filter(|t| t.status != TargetStatus::Recovered)
        .map(|t| {
            format!(
                "{}: {} {}",
                t.target,
                record::outcome_word(t.status),
                t.reason.as_deref().unwrap_or("")
            )
            .trim_end()
            .to_string()
        })
        .chain(
            spec.unresolved
                .iter()
                .map(|u| format!("{}: {}", u.subject, u.reason)),
        )
        .collect();
    let error = if failed.is_empty() {
        format!("run {id} was interrupted")
    } else {
        format!("run {id}: {}", failed.join("; "))
    };
    op.error = Some(error.clone());
    Ok((OperationStatus::Failed, Some(error)))
}
