//! Operations: previews, applies and destroys the API queues and a worker runs, with their
//! typed progress events. The queue is a trait ([`OperationQueue`]); [`InProcessQueue`] serves
//! the embedded server (one process, memory only).

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use utoipa::ToSchema;

use crate::ServerError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OperationKind {
    Preview,
    Apply,
    Destroy,
    /// A day-2 program (`kusionctl run`) on the stack's clusters.
    Run,
}

impl OperationKind {
    pub fn name(self) -> &'static str {
        match self {
            OperationKind::Preview => "preview",
            OperationKind::Apply => "apply",
            OperationKind::Destroy => "destroy",
            OperationKind::Run => "run",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    /// Waiting for a worker.
    Queued,
    /// A worker is planning or executing it.
    Running,
    /// Planned; waits for a second person with the approver role.
    AwaitingApproval,
    Succeeded,
    Failed,
    /// Policies denied the plan; nothing changed.
    Blocked,
    /// An approver said no; nothing changed.
    Rejected,
    /// Stopped on request: before it started (nothing changed), or while it ran (steps under
    /// way finished, no new one started; the release records what was done).
    Cancelled,
}

impl OperationStatus {
    /// The status as the API and the queue's table write it (`awaiting_approval`).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            OperationStatus::Succeeded
                | OperationStatus::Failed
                | OperationStatus::Blocked
                | OperationStatus::Rejected
                | OperationStatus::Cancelled
        )
    }
}

/// One operation as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    pub id: String,
    pub kind: OperationKind,
    pub project: String,
    pub stack: String,
    pub status: OperationStatus,
    /// The subject of the token that asked for it.
    pub requested_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_by: Option<String>,
    /// Who asked to cancel it (a running operation stops at its next step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
    /// An apply that waits for each resource to become ready, streaming `watch` events.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub watch: bool,
    /// Whether the stack requires a second person's approval before changing anything.
    pub require_approval: bool,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub updated_at: String,
    /// The plan (masked as previews show it).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub plan: Option<serde_json::Value>,
    /// What an approval approves: a hash of the planned changes. The apply stops if the plan it
    /// computes under the lease differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_hash: Option<String>,
    /// The policies' verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub policy: Option<serde_json::Value>,
    /// The release recorded by an apply or destroy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// The execution report.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub result: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The worker running or last running it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// A run's program: its path in the checkout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// A run's arguments, `KEY=VALUE` (the program's `option("KEY")`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// A run goes on with the targets it resolved when some subjects could not be resolved.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// The run's record in the stack's history (`GET .../runs/{run}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    /// The Git commit the worker compiled the stack (or program) from, when the server serves a
    /// Git source; the last run's, when it ran more than once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_revision: Option<String>,
}

/// A progress event of an operation, in order (`seq` from 1).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationEvent {
    pub seq: u64,
    pub time: String,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The operation's status changed.
    Status {
        status: OperationStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The plan was computed.
    Planned {
        create: usize,
        update: usize,
        replace: usize,
        delete: usize,
        unchanged: usize,
    },
    /// A resource's step started.
    StepStarted { id: String, action: String },
    /// A resource's step ended (`succeeded`, `failed`, `skipped`, `cancelled`).
    StepFinished {
        id: String,
        action: String,
        outcome: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A watched resource's health (with `watch`).
    Watch {
        id: String,
        health: String,
        detail: String,
    },
    /// A run was checked and preflighted: its operations and targets.
    RunPlanned {
        operations: usize,
        targets: usize,
        unresolved: usize,
    },
    /// A run's progress, as `kusionctl run -o json` prints it on stderr: `event` is one of
    /// `batchStarted`, `acted`, `waiting`, `batchDone`, `operationSkipped`.
    RunProgress {
        #[schema(value_type = Object)]
        progress: serde_json::Value,
    },
}

impl EventKind {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Status { .. } => "status",
            EventKind::Planned { .. } => "planned",
            EventKind::StepStarted { .. } => "step_started",
            EventKind::StepFinished { .. } => "step_finished",
            EventKind::Watch { .. } => "watch",
            EventKind::RunPlanned { .. } => "run_planned",
            EventKind::RunProgress { .. } => "run_progress",
        }
    }
}

/// The first event of every operation.
pub fn queued_event() -> EventKind {
    EventKind::Status {
        status: OperationStatus::Queued,
        message: None,
    }
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Where operations wait and are claimed, and where their events are kept. A queue on a shared
/// database ([`crate::pgqueue::PostgresQueue`]) lets several servers and workers share the
/// work; every method is short and synchronous (a database-backed one runs its statements on
/// its own threads, never on the async runtime's).
pub trait OperationQueue: Send + Sync + 'static {
    /// Stores a new operation with its first event (`status: queued`) in one step, so a worker
    /// that claims it at once cannot record an event before it.
    fn create(&self, operation: &Operation) -> Result<(), ServerError>;
    fn get(&self, id: &str) -> Result<Option<Operation>, ServerError>;
    fn list(&self) -> Result<Vec<Operation>, ServerError>;
    /// Stores `operation` if its stored status is still `expected` (false otherwise): approvals
    /// and claims race, and only one may win.
    fn update(&self, operation: &Operation, expected: OperationStatus)
    -> Result<bool, ServerError>;
    /// Marks the oldest queued operation running by `worker` and returns it.
    fn claim(&self, worker: &str) -> Result<Option<Operation>, ServerError>;
    /// Appends an event to the operation's stream.
    fn push_event(&self, id: &str, kind: EventKind) -> Result<OperationEvent, ServerError>;
    /// The operation's events after `after` (a `seq`).
    fn events(&self, id: &str, after: u64) -> Result<Vec<OperationEvent>, ServerError>;
    /// Records that `worker` is still running operation `id` (false: it no longer holds it).
    /// Queues that never re-queue a silent worker's operation need not keep track.
    fn heartbeat(&self, _id: &str, _worker: &str) -> Result<bool, ServerError> {
        Ok(true)
    }
    /// How often a worker running an operation calls [`OperationQueue::heartbeat`] (None:
    /// never).
    fn heartbeat_every(&self) -> Option<std::time::Duration> {
        None
    }
    /// True when other processes share the queue (so an operation put back to `queued` is
    /// picked up by another worker, and outlives this process).
    fn shared(&self) -> bool {
        false
    }
    /// Ticks whenever an operation or event is added or changed: workers and event streams wait
    /// on it (a database queue may tick on a timer).
    fn changes(&self) -> watch::Receiver<u64>;
}

#[derive(Default)]
struct Entry {
    operation: Option<Operation>,
    events: Vec<OperationEvent>,
    order: u64,
}

/// The embedded default: operations in memory, claimed by workers in this process.
pub struct InProcessQueue {
    entries: Mutex<(HashMap<String, Entry>, u64)>,
    tick: watch::Sender<u64>,
}

impl Default for InProcessQueue {
    fn default() -> Self {
        InProcessQueue {
            entries: Mutex::new((HashMap::new(), 0)),
            tick: watch::channel(0).0,
        }
    }
}

impl InProcessQueue {
    fn bump(&self) {
        self.tick.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl OperationQueue for InProcessQueue {
    fn create(&self, operation: &Operation) -> Result<(), ServerError> {
        {
            let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let (map, counter) = &mut *guard;
            *counter += 1;
            let order = *counter;
            map.insert(
                operation.id.clone(),
                Entry {
                    operation: Some(operation.clone()),
                    events: vec![OperationEvent {
                        seq: 1,
                        time: now_rfc3339(),
                        kind: queued_event(),
                    }],
                    order,
                },
            );
        }
        self.bump();
        Ok(())
    }

    fn get(&self, id: &str) -> Result<Option<Operation>, ServerError> {
        let guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        Ok(guard.0.get(id).and_then(|e| e.operation.clone()))
    }

    fn list(&self) -> Result<Vec<Operation>, ServerError> {
        let guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<(&u64, &Operation)> = guard
            .0
            .values()
            .filter_map(|e| Some((&e.order, e.operation.as_ref()?)))
            .collect();
        all.sort_by_key(|(order, _)| **order);
        Ok(all.into_iter().map(|(_, o)| o.clone()).collect())
    }

    fn update(
        &self,
        operation: &Operation,
        expected: OperationStatus,
    ) -> Result<bool, ServerError> {
        {
            let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let Some(entry) = guard.0.get_mut(&operation.id) else {
                return Ok(false);
            };
            match &entry.operation {
                Some(stored) if stored.status == expected => {}
                _ => return Ok(false),
            }
            let mut updated = operation.clone();
            updated.updated_at = now_rfc3339();
            entry.operation = Some(updated);
        }
        self.bump();
        Ok(true)
    }

    fn claim(&self, worker: &str) -> Result<Option<Operation>, ServerError> {
        let claimed = {
            let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let next = guard
                .0
                .values_mut()
                .filter(|e| {
                    e.operation
                        .as_ref()
                        .is_some_and(|o| o.status == OperationStatus::Queued)
                })
                .min_by_key(|e| e.order);
            next.and_then(|e| {
                let op = e.operation.as_mut()?;
                op.status = OperationStatus::Running;
                op.worker = Some(worker.to_string());
                op.updated_at = now_rfc3339();
                Some(op.clone())
            })
        };
        if claimed.is_some() {
            self.bump();
        }
        Ok(claimed)
    }

    fn push_event(&self, id: &str, kind: EventKind) -> Result<OperationEvent, ServerError> {
        let event = {
            let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let entry = guard
                .0
                .get_mut(id)
                .ok_or_else(|| ServerError::NotFound(format!("operation {id}")))?;
            let event = OperationEvent {
                seq: entry.events.len() as u64 + 1,
                time: now_rfc3339(),
                kind,
            };
            entry.events.push(event.clone());
            event
        };
        self.bump();
        Ok(event)
    }

    fn events(&self, id: &str, after: u64) -> Result<Vec<OperationEvent>, ServerError> {
        let guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        Ok(guard
            .0
            .get(id)
            .map(|e| {
                e.events
                    .iter()
                    .filter(|ev| ev.seq > after)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.tick.subscribe()
    }
}

/// A new operation, queued.
pub fn new_operation(
    kind: OperationKind,
    stack: &crate::source::StackRef,
    requested_by: &str,
) -> Operation {
    let now = now_rfc3339();
    Operation {
        id: uuid::Uuid::new_v4().to_string(),
        kind,
        project: stack.project.clone(),
        stack: stack.stack.clone(),
        status: OperationStatus::Queued,
        requested_by: requested_by.to_string(),
        approved_by: None,
        rejected_by: None,
        cancelled_by: None,
        watch: false,
        require_approval: stack.require_approval && kind != OperationKind::Preview,
        created_at: now.clone(),
        updated_at: now,
        plan: None,
        plan_hash: None,
        policy: None,
        revision: None,
        result: None,
        error: None,
        worker: None,
        program: None,
        args: Vec::new(),
        partial: false,
        run: None,
        source_revision: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: &str) -> Operation {
        let stack = crate::source::StackRef {
            project: "p".into(),
            stack: "s".into(),
            dir: ".".into(),
            description: None,
            require_approval: false,
        };
        let mut o = new_operation(OperationKind::Apply, &stack, "alice");
        o.id = id.into();
        o
    }

    #[test]
    fn claims_in_order_once_and_updates_compare_status() {
        let q = InProcessQueue::default();
        q.create(&op("a")).unwrap();
        q.create(&op("b")).unwrap();
        assert_eq!(q.claim("w1").unwrap().unwrap().id, "a");
        assert_eq!(q.claim("w2").unwrap().unwrap().id, "b");
        assert!(q.claim("w3").unwrap().is_none());
        let mut a = q.get("a").unwrap().unwrap();
        a.status = OperationStatus::Succeeded;
        assert!(!q.update(&a, OperationStatus::Queued).unwrap());
        assert!(q.update(&a, OperationStatus::Running).unwrap());
        assert_eq!(
            q.push_event(
                "a",
                EventKind::StepStarted {
                    id: "x".into(),
                    action: "Create".into()
                }
            )
            .unwrap()
            .seq,
            2
        );
        assert_eq!(q.events("a", 0).unwrap()[0].kind, queued_event());
        assert_eq!(q.events("a", 0).unwrap().len(), 2);
        assert!(q.events("a", 2).unwrap().is_empty());
    }
}
