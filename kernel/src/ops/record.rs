//! A day-2 run kept in the state backend as it happens: the record is created once the run holds
//! the stack; each target is recorded as `acting` before it is touched and with its outcome
//! after, every change durable before the run goes on; the record is closed with the run's
//! status. A run refused before acting is recorded too. Every front end (`kusionctl run`, the
//! server) runs programs through here, so their history reads the same.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::exec::{self, JournalEntry, RunEvent, RunReport, TargetStatus};
use super::spec::{ClusterConfig, OpsSpec};
use crate::registry::Registry;
use crate::state::{
    LeaseHolder, ReleaseStatus, RunRecord, RunTargetRecord, StateError, StateStore, Writer, now_ms,
};

/// The word a record uses for a target's outcome.
pub fn outcome_word(status: TargetStatus) -> &'static str {
    match status {
        TargetStatus::Recovered => "recovered",
        TargetStatus::Failed => "failed",
        TargetStatus::NotStarted => "not started",
        TargetStatus::Interrupted => "interrupted",
    }
}

/// A new, running record of `program` run with `args` by `holder`: one line per operation.
pub fn new_record(
    spec: &OpsSpec,
    program: &str,
    args: Vec<String>,
    holder: LeaseHolder,
) -> RunRecord {
    RunRecord {
        id: 0,
        holder,
        program: program.to_string(),
        args,
        started_at: now_ms(),
        finished_at: None,
        status: ReleaseStatus::Running,
        operations: spec
            .operations
            .iter()
            .map(|op| {
                let batches: usize = op.groups().iter().map(|g| g.batches.len()).sum();
                format!(
                    "{} {}: {} target(s) in {batches} batch(es)",
                    op.kind,
                    op.name,
                    op.targets.len()
                )
            })
            .collect(),
        targets: Vec::new(),
        notes: Vec::new(),
    }
}

/// The subjects the program named that resolved to no target, as record lines.
pub fn unresolved_records(spec: &OpsSpec) -> Vec<RunTargetRecord> {
    spec.unresolved
        .iter()
        .map(|u| RunTargetRecord {
            target: u.subject.clone(),
            operation: "-".into(),
            outcome: "unresolved".into(),
            reason: Some(u.reason.clone()),
        })
        .collect()
}

/// A target preflight refused: (operation, target, why).
pub type Refused = (String, String, String);

/// Why a checked program may not run, and the targets preflight refused. `checked` holds
/// preflight's answer per (operation, target). An operation that runs after others is checked
/// against today's objects, which those others change (a rollback after a rollout restart has
/// no earlier revision yet): only operations without dependencies can refuse the run.
/// Unresolved subjects refuse it unless `partial`.
pub fn refusal(
    spec: &OpsSpec,
    checked: &BTreeMap<(String, String), Result<String, String>>,
    partial: bool,
) -> (Option<String>, Vec<Refused>) {
    let independent: HashSet<&str> = spec
        .operations
        .iter()
        .filter(|o| o.depends_on.is_empty())
        .map(|o| o.name.as_str())
        .collect();
    let refused: Vec<Refused> = checked
        .iter()
        .filter(|((op, _), _)| independent.contains(op.as_str()))
        .filter_map(|((op, t), r)| r.as_ref().err().map(|e| (op.clone(), t.clone(), e.clone())))
        .collect();
    let problem = if !refused.is_empty() {
        Some(format!(
            "{} target(s) cannot be acted on: {}",
            refused.len(),
            refused
                .iter()
                .map(|(_, t, e)| format!("{t}: {e}"))
                .collect::<Vec<_>>()
                .join("; ")
        ))
    } else if !spec.unresolved.is_empty() && !partial {
        Some(format!(
            "{} subject(s) could not be resolved to targets: {} (pass --partial to run the rest anyway)",
            spec.unresolved.len(),
            spec.unresolved
                .iter()
                .map(|u| format!("{}: {}", u.subject, u.reason))
                .collect::<Vec<_>>()
                .join("; ")
        ))
    } else {
        None
    };
    (problem, refused)
}

/// Records `record` as refused before acting (so the attempt is in the history); its ID.
pub fn record_refused(
    store: &dyn StateStore,
    record: &mut RunRecord,
    spec: &OpsSpec,
    problem: &str,
    refused: &[Refused],
) -> Result<u64, StateError> {
    record.status = ReleaseStatus::Failed;
    record.finished_at = Some(now_ms());
    record
        .notes
        .push(format!("refused before acting: {problem}"));
    record.targets = unresolved_records(spec);
    record
        .targets
        .extend(refused.iter().map(|(op, t, e)| RunTargetRecord {
            target: t.clone(),
            operation: op.clone(),
            outcome: "refused".into(),
            reason: Some(e.clone()),
        }));
    store.create_run(record)
}

/// A run that holds its stack and whose record exists.
pub struct RecordedRun {
    /// The record's number in the stack's run history.
    pub id: u64,
    store: Arc<dyn StateStore>,
    record: Arc<Mutex<RunRecord>>,
    writer: Arc<Writer>,
}

impl RecordedRun {
    /// Takes the stack (runs and applies of one stack exclude each other, so an app's
    /// `maxUnavailable` holds across them; waits up to `wait_lock` for another holder) and
    /// creates the record.
    pub async fn start(
        store: Arc<dyn StateStore>,
        mut record: RunRecord,
        wait_lock: Duration,
        cancel: Arc<AtomicBool>,
    ) -> Result<RecordedRun, StateError> {
        let writer = {
            let (taker, holder) = (store.clone(), record.holder.clone());
            tokio::task::spawn_blocking(move || {
                Writer::acquire_waiting(
                    taker,
                    &holder,
                    crate::operation::lease_ttl(),
                    cancel,
                    wait_lock,
                )
            })
            .await
            .map_err(|e| StateError::Io {
                location: store.location(),
                message: format!("taking the stack: {e}"),
            })??
        };
        let id = store.create_run(&mut record)?;
        Ok(RecordedRun {
            id,
            store,
            record: Arc::new(Mutex::new(record)),
            writer: Arc::new(writer),
        })
    }

    /// The record as the run keeps it: for a front end that must close it on a forced exit.
    pub fn shared_record(&self) -> Arc<Mutex<RunRecord>> {
        self.record.clone()
    }

    /// Runs `spec`, recording each target before and after it is acted on, then closes the
    /// record (interrupted when `cancel` was set, succeeded when every target recovered and
    /// every subject resolved, else failed) and lets the stack go.
    pub async fn execute(
        self,
        spec: &OpsSpec,
        registry: &Registry,
        clusters: &BTreeMap<String, ClusterConfig>,
        events: Option<mpsc::UnboundedSender<RunEvent>>,
        cancel: Arc<AtomicBool>,
    ) -> Result<(RunRecord, RunReport), StateError> {
        let journal = journal(self.store.clone(), self.record.clone(), self.writer.clone());
        let report = exec::execute(
            spec,
            registry,
            clusters,
            events,
            cancel.clone(),
            Some(journal),
        )
        .await;
        let mut record = self
            .record
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let ok = report.succeeded() && spec.unresolved.is_empty();
        record.finished_at = Some(now_ms());
        record.status = if cancel.load(Ordering::SeqCst) {
            ReleaseStatus::Interrupted
        } else if ok {
            ReleaseStatus::Succeeded
        } else {
            ReleaseStatus::Failed
        };
        record.targets = report
            .targets
            .iter()
            .map(|t| RunTargetRecord {
                target: t.target.clone(),
                operation: t.operation.clone(),
                outcome: outcome_word(t.status).into(),
                reason: t.reason.clone(),
            })
            .chain(unresolved_records(spec))
            .collect();
        self.store.update_run(&record)?;
        *self.record.lock().unwrap_or_else(|p| p.into_inner()) = record.clone();
        drop(self.writer);
        Ok((record, report))
    }
}

/// Keeps the record in step with what the run does (see the module's comment).
fn journal(
    store: Arc<dyn StateStore>,
    record: Arc<Mutex<RunRecord>>,
    writer: Arc<Writer>,
) -> exec::RunJournal {
    Arc::new(move |entry: JournalEntry| {
        // A run that lost the stack to another process acts on nothing more.
        if matches!(entry, JournalEntry::Acting { .. }) {
            writer.ensure_live().map_err(|e| e.to_string())?;
        }
        let mut record = record.lock().unwrap_or_else(|p| p.into_inner());
        let (target, operation, outcome, reason) = match entry {
            JournalEntry::Acting { operation, target } => {
                (target, operation, "acting".to_string(), None)
            }
            JournalEntry::Done(report) => (
                report.target,
                report.operation,
                outcome_word(report.status).to_string(),
                report.reason,
            ),
        };
        match record
            .targets
            .iter_mut()
            .find(|t| t.target == target && t.operation == operation)
        {
            Some(t) => {
                t.outcome = outcome;
                t.reason = reason;
            }
            None => record.targets.push(RunTargetRecord {
                target,
                operation,
                outcome,
                reason,
            }),
        }
        store.update_run(&record).map_err(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::LocalStore;

    fn spec() -> OpsSpec {
        OpsSpec::from_output(&serde_json::json!({"operations": [
            {"name": "first", "kind": "Restart", "targets": ["a/v1:Pod:ns:p"]},
            {"name": "later", "kind": "Restart", "targets": ["a/v1:Pod:ns:q"], "dependsOn": ["first"]},
        ]}))
        .unwrap()
    }

    #[test]
    fn only_independent_operations_and_unresolved_subjects_refuse_a_run() {
        let spec = spec();
        let mut checked = BTreeMap::from([
            (
                ("first".into(), "a/v1:Pod:ns:p".into()),
                Ok("restart".into()),
            ),
            (
                ("later".into(), "a/v1:Pod:ns:q".into()),
                Err("no revision".into()),
            ),
        ]);
        assert_eq!(refusal(&spec, &checked, false), (None, vec![]));
        checked.insert(
            ("first".into(), "a/v1:Pod:ns:p".into()),
            Err("not found".into()),
        );
        let (problem, refused) = refusal(&spec, &checked, false);
        assert!(problem.unwrap().contains("a/v1:Pod:ns:p: not found"));
        assert_eq!(refused.len(), 1);

        let mut record = new_record(
            &spec,
            "r.k",
            vec!["x=1".into()],
            LeaseHolder::current("run"),
        );
        assert_eq!(
            record.operations,
            [
                "Restart first: 1 target(s) in 1 batch(es)",
                "Restart later: 1 target(s) in 1 batch(es)"
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let id = record_refused(&store, &mut record, &spec, "nope", &refused).unwrap();
        let runs = store.runs().unwrap();
        assert_eq!((runs.len(), runs[0].id), (1, id));
        assert_eq!(runs[0].status, ReleaseStatus::Failed);
        assert_eq!(runs[0].targets[0].outcome, "refused");
        assert_eq!(runs[0].notes, ["refused before acting: nope"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_holds_the_stack_and_closes_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn StateStore> = Arc::new(LocalStore::new(dir.path()));
        let empty = OpsSpec::from_output(&serde_json::json!({"operations": []})).unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let record = new_record(&empty, "r.k", vec![], LeaseHolder::current("run"));
        let run = RecordedRun::start(
            store.clone(),
            record.clone(),
            Duration::ZERO,
            cancel.clone(),
        )
        .await
        .unwrap();
        assert_eq!(store.runs().unwrap()[0].status, ReleaseStatus::Running);
        // A second run of the stack is refused while the first holds it.
        let second =
            RecordedRun::start(store.clone(), record, Duration::ZERO, cancel.clone()).await;
        assert!(
            matches!(second, Err(StateError::Locked { .. })),
            "{:?}",
            second.err()
        );
        let (closed, report) = run
            .execute(&empty, &Registry::new(), &BTreeMap::new(), None, cancel)
            .await
            .unwrap();
        assert!(report.targets.is_empty());
        assert_eq!(closed.status, ReleaseStatus::Succeeded);
        assert!(closed.finished_at.is_some());
        assert_eq!(store.runs().unwrap()[0], closed);
        assert!(
            store.current_lease().unwrap().is_none(),
            "the stack was let go"
        );
    }
}
