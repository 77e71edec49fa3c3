//! Executing a plan: the scheduler walks the plan's DAG in parallel, calls the runtimes, and
//! journals every step durably before anything that depends on it starts.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kusion_sdk::runtime::{
    ApplyRequest, DeleteRequest, Health, WatchEvent, WatchPoll, WatchRequest,
};
use kusion_sdk::{FieldPath, Resource};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::diff;
use crate::plan::{Action, Plan, Step, call};
use crate::reference::{self, Lookup};
use crate::registry::Registry;
use crate::state::{
    IntentKind, JournalRecord, State, StateEntry, StateError, Writer, now_ms, state_key,
};
use crate::walk::{NodeResult, walk};

/// How to execute.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Steps run at once.
    pub concurrency: usize,
    /// Per runtime call.
    pub timeout: Option<Duration>,
    /// Wait for each applied resource to become ready (runtimes that can watch).
    pub watch: bool,
    /// How long to wait for readiness per resource.
    pub watch_timeout: Duration,
    /// Fields kept at their live value on update.
    pub ignore_fields: Vec<FieldPath>,
    /// The stack's sealer (see [`crate::plan::PlanOptions::sealer`]).
    pub sealer: Option<Arc<crate::state::seal::Sealer>>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            concurrency: 10,
            timeout: None,
            watch: false,
            watch_timeout: Duration::from_secs(300),
            ignore_fields: Vec::new(),
            sealer: None,
        }
    }
}

/// The outcome of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason", rename_all = "camelCase")]
pub enum Outcome {
    /// Done.
    Succeeded,
    /// The runtime failed it (its message).
    Failed(String),
    /// Not run, and why (a dependency failed).
    Skipped(String),
    /// Not started: the apply was interrupted.
    Cancelled,
}

/// Progress reported while executing.
#[derive(Debug, Clone)]
pub enum Event {
    /// A step started.
    Started {
        /// The resource's state key.
        id: String,
        /// What it does.
        action: Action,
    },
    /// A step ended.
    Finished {
        /// The resource's state key.
        id: String,
        /// What it did.
        action: Action,
        /// How it ended.
        outcome: Outcome,
    },
    /// A watched resource's health changed (with `watch`).
    Watch {
        /// The resource's state key.
        id: String,
        /// Its type.
        resource_type: String,
        /// What its runtime saw.
        event: WatchEvent,
    },
}

/// One step's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// The state key (`id`, or `id@target`).
    pub id: String,
    /// What it did.
    pub action: Action,
    /// How it ended.
    pub outcome: Outcome,
}

/// What an execution did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApplyReport {
    /// Every step run, in the order they ended.
    pub steps: Vec<StepReport>,
    /// Whether the apply was stopped before every step ran.
    pub interrupted: bool,
}

impl ApplyReport {
    fn count(&self, actions: &[Action]) -> usize {
        self.steps
            .iter()
            .filter(|s| s.outcome == Outcome::Succeeded && actions.contains(&s.action))
            .count()
    }
    /// Resources created.
    pub fn created(&self) -> usize {
        self.count(&[Action::Create])
    }
    /// Resources changed in place (and imported).
    pub fn updated(&self) -> usize {
        self.count(&[Action::Update, Action::Import])
    }
    /// Deleted and created again (a changed field that cannot be updated in place).
    pub fn replaced(&self) -> usize {
        self.count(&[Action::Replace])
    }
    /// Resources deleted.
    pub fn deleted(&self) -> usize {
        self.count(&[Action::Delete])
    }
    /// The steps that failed.
    pub fn failed(&self) -> Vec<&StepReport> {
        self.steps
            .iter()
            .filter(|s| matches!(s.outcome, Outcome::Failed(_)))
            .collect()
    }
    /// Whether every step succeeded and nothing was interrupted.
    pub fn succeeded(&self) -> bool {
        !self.interrupted && self.steps.iter().all(|s| s.outcome == Outcome::Succeeded)
    }
    /// `Apply complete! Resources: N created, M updated, K deleted.` or what went wrong.
    pub fn summary_line(&self, verb: &str) -> String {
        // Upstream's wording; replacements are named only when there are some.
        let replaced = match self.replaced() {
            0 => String::new(),
            n => format!(", {n} replaced"),
        };
        let counts = format!(
            "{} created, {} updated{replaced}, {} deleted",
            self.created(),
            self.updated(),
            self.deleted()
        );
        if self.succeeded() {
            format!("{verb} complete! Resources: {counts}.")
        } else {
            let failed = self.failed().len();
            let skipped = self
                .steps
                .iter()
                .filter(|s| matches!(s.outcome, Outcome::Skipped(_)))
                .count();
            let cancelled = self
                .steps
                .iter()
                .filter(|s| s.outcome == Outcome::Cancelled)
                .count();
            let why = if self.interrupted {
                "interrupted"
            } else {
                "failed"
            };
            format!(
                "{verb} {why}! Resources: {counts}; {failed} failed, {skipped} skipped, {cancelled} not started."
            )
        }
    }
}

type Ack = std::sync::mpsc::SyncSender<Result<(), String>>;

/// Durable, group-committed journal writes: concurrent steps share one fsync.
pub struct Journal {
    tx: Option<std::sync::mpsc::Sender<(Vec<JournalRecord>, Ack)>>,
    worker: Option<std::thread::JoinHandle<Result<State, StateError>>>,
}

impl Journal {
    /// Start journaling through `writer` (whose lease every write carries).
    /// `resources` is about how many entries the state holds (it sets the compaction rhythm).
    pub fn start(writer: Arc<Writer>, resources: usize) -> Journal {
        let (tx, rx) = std::sync::mpsc::channel::<(Vec<JournalRecord>, Ack)>();
        let worker = std::thread::Builder::new()
            .name("kusion-journal".into())
            .spawn(move || journal_worker(writer, resources, rx))
            .expect("spawning the journal thread");
        Journal {
            tx: Some(tx),
            worker: Some(worker),
        }
    }

    /// Append records; returns once they are durable.
    pub fn write(&self, records: Vec<JournalRecord>) -> Result<(), String> {
        let (ack, done) = std::sync::mpsc::sync_channel(1);
        self.tx
            .as_ref()
            .ok_or("journal closed")?
            .send((records, ack))
            .map_err(|_| "the journal writer stopped".to_string())?;
        done.recv()
            .map_err(|_| "the journal writer stopped".to_string())?
    }

    /// Stop, checkpoint, and return the final state.
    pub fn finish(mut self) -> Result<State, StateError> {
        self.tx.take();
        self.worker
            .take()
            .expect("finish once")
            .join()
            .unwrap_or_else(|_| {
                Err(StateError::Io {
                    location: "journal".into(),
                    message: "the journal writer panicked".into(),
                })
            })
    }
}

fn journal_worker(
    writer: Arc<Writer>,
    resources: usize,
    rx: std::sync::mpsc::Receiver<(Vec<JournalRecord>, Ack)>,
) -> Result<State, StateError> {
    // The journal keeps no copy of the state: compaction reloads it from the store, which
    // costs one read per compaction and keeps memory flat on large stacks.
    let compact = |writer: &Writer| -> Result<State, StateError> {
        let mut state = writer.store().load()?;
        state.serial += 1;
        writer.checkpoint(&mut state)?;
        Ok(state)
    };
    let mut since_checkpoint = 0usize;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let records: Vec<JournalRecord> =
            batch.iter().flat_map(|(r, _)| r.iter().cloned()).collect();
        let result = writer.append(&records).map_err(|e| e.to_string());
        if result.is_ok() {
            since_checkpoint += records.len();
        }
        for (_, ack) in batch {
            let _ = ack.send(result.clone());
        }
        // Compact when the journal outgrows the state, so total bytes written stay linear.
        if since_checkpoint > 1024.max(2 * resources) {
            compact(&writer)?;
            since_checkpoint = 0;
        }
    }
    compact(&writer)
}

fn intent_kind(action: Action) -> Option<IntentKind> {
    match action {
        Action::Create => Some(IntentKind::Create),
        Action::Update | Action::Replace => Some(IntentKind::Update),
        Action::Delete => Some(IntentKind::Delete),
        Action::Import => Some(IntentKind::Import),
        Action::UnChanged => None,
    }
}

/// The resource recorded in state: the runtime's answer for attributes, the spec's identity,
/// and every dependency (explicit and implicit), since references are resolved by then and a
/// later destroy must still order deletions.
fn recorded(planned: &Resource, answer: Resource, known: &HashSet<String>) -> Resource {
    let mut depends_on = planned.depends_on.clone();
    if let Ok(refs) = reference::references_of(planned, known) {
        for r in refs {
            if !depends_on.contains(&r.id) {
                depends_on.push(r.id);
            }
        }
    }
    Resource {
        id: planned.id.clone(),
        resource_type: planned.resource_type.clone(),
        attributes: answer.attributes,
        depends_on,
        extensions: planned.extensions.clone(),
    }
}

struct ExecContext {
    registry: Registry,
    journal: Journal,
    /// The lease, confirmed before each call that changes something outside.
    writer: Arc<Writer>,
    options: ApplyOptions,
    known: HashSet<String>,
    /// State keys of the spec's resources by ID, when some resource has a target.
    keys_by_id: HashMap<String, Vec<String>>,
    /// Attributes each resource got in this run, by state key (for `$kusion_path`).
    applied: Mutex<HashMap<String, Map<String, Value>>>,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Arc<AtomicBool>,
    /// This apply's reads of `ref://` secrets (read again, not taken from the plan).
    secrets: crate::secret_ref::SecretReads,
}

impl ExecContext {
    /// The state key a bare ID in a reference names, seen from a resource in `target`: the
    /// resource with that ID in the same target, else the only one (as the DAG decided).
    fn key_of(&self, id: &str, target: Option<&str>) -> String {
        match self.keys_by_id.get(id) {
            Some(keys) if keys.len() > 1 => state_key(id, target),
            Some(keys) => keys[0].clone(),
            None => id.to_string(),
        }
    }

    fn emit(&self, event: Event) {
        if let Some(tx) = &self.events {
            let _ = tx.send(event);
        }
    }
}

/// Execute `plan`. Journals intents for every changing step first (one durable write), then
/// walks the DAG. Returns the report and the final state (checkpointed).
pub fn execute_plan(
    plan: Plan<'_>,
    writer: Arc<Writer>,
    registry: &Registry,
    options: &ApplyOptions,
    cancel: Arc<AtomicBool>,
    events: Option<mpsc::UnboundedSender<Event>>,
) -> Result<(ApplyReport, State), StateError> {
    let journal = Journal::start(writer.clone(), plan.steps.len());
    // Re-keyed entries move first, in the same durable write as the intents that name them
    // by their new keys.
    let mut intents: Vec<JournalRecord> = plan.moves.clone();
    intents.extend(plan.steps.iter().filter_map(|s| {
        let kind = intent_kind(s.action)?;
        let resource = s.planned.or_else(|| s.prior.map(|p| &p.resource))?;
        Some(JournalRecord::Intent {
            kind,
            resource: resource.clone(),
            target: s.target.clone(),
            sensitive_paths: s.sensitive.iter().map(|p| p.to_string()).collect(),
        })
    }));
    if let Err(e) = journal.write(intents) {
        let _ = journal.finish();
        return Err(StateError::Io {
            location: "journal".into(),
            message: e,
        });
    }

    let spec_ids: HashSet<String> = plan
        .steps
        .iter()
        .filter(|s| s.planned.is_some())
        .map(|s| s.id.clone())
        .collect();
    let mut keys_by_id: HashMap<String, Vec<String>> = HashMap::new();
    if plan.steps.iter().any(|s| s.target.is_some()) {
        for s in plan.steps.iter().filter(|s| s.planned.is_some()) {
            keys_by_id
                .entry(s.id.clone())
                .or_default()
                .push(s.key.clone());
        }
    }
    let cx = ExecContext {
        registry: registry.clone(),
        journal,
        writer,
        options: options.clone(),
        known: spec_ids,
        keys_by_id,
        applied: Mutex::new(HashMap::new()),
        events,
        cancel: cancel.clone(),
        secrets: crate::secret_ref::SecretReads::new(registry.secret_stores().clone()),
    };
    let steps = plan.steps;
    let results = walk(&plan.deps, options.concurrency, &cancel, |i| {
        execute_one(&steps[i], &cx)
    });

    let interrupted = cancel.load(Ordering::SeqCst);
    let mut report = ApplyReport {
        steps: Vec::with_capacity(steps.len()),
        interrupted,
    };
    let mut reverts = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        let step = &steps[i];
        let outcome = match result {
            NodeResult::Done(()) => Outcome::Succeeded,
            NodeResult::Failed(e) => Outcome::Failed(e),
            NodeResult::Skipped(d) => Outcome::Skipped(format!("{} did not succeed", steps[d].key)),
            NodeResult::Cancelled => Outcome::Cancelled,
        };
        if matches!(outcome, Outcome::Skipped(_) | Outcome::Cancelled) {
            if intent_kind(step.action).is_some() {
                reverts.push(JournalRecord::Revert {
                    id: step.key.clone(),
                    // A re-keyed prior is restored under its new key, with its target.
                    previous: step.prior.map(|p| StateEntry {
                        target: step.target.clone(),
                        ..p.clone()
                    }),
                });
            }
            cx.emit(Event::Finished {
                id: step.key.clone(),
                action: step.action,
                outcome: outcome.clone(),
            });
        }
        report.steps.push(StepReport {
            id: step.key.clone(),
            action: step.action,
            outcome,
        });
    }
    let write = cx.journal.write(reverts);
    let state = cx.journal.finish()?;
    write.map_err(|e| StateError::Io {
        location: "journal".into(),
        message: e,
    })?;
    Ok((report, state))
}

fn execute_one(step: &Step<'_>, cx: &ExecContext) -> Result<(), String> {
    cx.emit(Event::Started {
        id: step.key.clone(),
        action: step.action,
    });
    let result = run_step(step, cx);
    let outcome = match &result {
        Ok(()) => Outcome::Succeeded,
        Err(e) => Outcome::Failed(e.clone()),
    };
    cx.emit(Event::Finished {
        id: step.key.clone(),
        action: step.action,
        outcome,
    });
    result
}

fn run_step(step: &Step<'_>, cx: &ExecContext) -> Result<(), String> {
    let runtime = cx
        .registry
        .get(&step.resource_type)
        .ok_or_else(|| format!("no runtime serves type {:?}", step.resource_type))?
        .clone();
    let timeout = cx.options.timeout;
    match step.action {
        Action::UnChanged | Action::Import => {
            let live = step
                .live
                .as_ref()
                .ok_or("no live object recorded for an unchanged resource")?;
            let planned = step.planned.as_ref().ok_or("no planned resource")?;
            // Only referenced values are kept: a converged stack of 100,000 resources would
            // otherwise copy every live object once more.
            if step.referenced {
                cx.applied
                    .lock()
                    .map_err(|_| "poisoned")?
                    .insert(step.key.clone(), live.attributes.clone());
            }
            if step.action == Action::Import {
                let entry = StateEntry {
                    resource: recorded(planned, live.clone(), &cx.known),
                    private: step.live_private.clone(),
                    sensitive_paths: step.sensitive.iter().map(|p| p.to_string()).collect(),
                    pending: false,
                    updated_at: now_ms(),
                    target: step.target.clone(),
                };
                cx.journal.write(vec![JournalRecord::Applied { entry }])?;
            }
            Ok(())
        }
        Action::Create | Action::Update | Action::Replace => {
            let planned = step.planned.as_ref().ok_or("no planned resource")?;
            let resolved = {
                let applied = cx.applied.lock().map_err(|_| "poisoned")?;
                let (resolved, unresolved) =
                    reference::resolve(planned, &cx.known, &|id| match applied
                        .get(&cx.key_of(id, step.target.as_deref()))
                    {
                        Some(attrs) => Lookup::Known(attrs),
                        None => Lookup::Unknown,
                    })
                    .map_err(|e| e.to_string())?;
                if unresolved {
                    return Err("a referenced resource has no value in this run".into());
                }
                crate::plan::refuse_sealed_references(planned, &resolved)?;
                resolved
            };
            let (resolved, secret_fields) = match cx.secrets.resolve(&resolved)? {
                Some((with_secrets, fields)) => (with_secrets, fields),
                None => (resolved, Vec::new()),
            };
            let mut to_send = resolved.clone();
            if step.action != Action::Create
                && let Some(live) = &step.live
            {
                // Ignored fields keep their live value instead of being overwritten.
                let live_value = Value::Object(live.attributes.clone());
                let mut attrs = Value::Object(std::mem::take(&mut to_send.attributes));
                for path in &cx.options.ignore_fields {
                    match path.get(&live_value) {
                        Some(v) => {
                            diff::set_path(&mut attrs, path, v.clone());
                        }
                        None => {
                            path.remove(&mut attrs);
                        }
                    }
                }
                if let Value::Object(map) = attrs {
                    to_send.attributes = map;
                }
            }
            let request = ApplyRequest {
                prior: step.prior.as_ref().map(|p| {
                    crate::plan::prior_for_runtime(
                        cx.options.sealer.as_deref(),
                        &p.resource,
                        &resolved,
                    )
                }),
                prior_private: step
                    .prior
                    .as_ref()
                    .and_then(|p| p.private.clone())
                    .or_else(|| step.live_private.clone()),
                planned: to_send,
                dry_run: false,
                timeout,
            };
            cx.writer.ensure_live().map_err(|e| e.to_string())?;
            let rt = runtime.clone();
            let response = call(timeout, move || rt.apply(&request))?;
            let mut sensitive: Vec<String> = step.sensitive.iter().map(|p| p.to_string()).collect();
            sensitive.extend(response.sensitive_paths.iter().cloned());
            sensitive.extend(secret_fields.iter().map(|p| p.to_string()));
            sensitive.sort();
            sensitive.dedup();
            let entry = StateEntry {
                resource: recorded(planned, response.resource, &cx.known),
                private: response.private,
                sensitive_paths: sensitive,
                pending: false,
                updated_at: now_ms(),
                target: step.target.clone(),
            };
            let attrs = step.referenced.then(|| entry.resource.attributes.clone());
            cx.journal.write(vec![JournalRecord::Applied {
                entry: entry.clone(),
            }])?;
            if let Some(attrs) = attrs {
                cx.applied
                    .lock()
                    .map_err(|_| "poisoned")?
                    .insert(step.key.clone(), attrs);
            }
            let capable = cx
                .registry
                .info(&step.resource_type)
                .is_some_and(|i| i.capabilities.watch);
            if cx.options.watch && capable {
                watch_until_ready(step, &entry.resource, cx)?;
            }
            Ok(())
        }
        Action::Delete => {
            let prior = step.prior.as_ref().ok_or("no prior state for a delete")?;
            let request = DeleteRequest {
                resource: prior.resource.clone(),
                private: prior.private.clone(),
                timeout,
            };
            cx.writer.ensure_live().map_err(|e| e.to_string())?;
            let rt = runtime.clone();
            call(timeout, move || rt.delete(&request))?;
            cx.journal.write(vec![JournalRecord::Deleted {
                id: step.key.clone(),
            }])?;
            Ok(())
        }
    }
}

fn watch_until_ready(step: &Step, resource: &Resource, cx: &ExecContext) -> Result<(), String> {
    // A rule of its own replaces the runtime's verdict of "ready"; check it can be judged first.
    let rule = crate::readiness::rule_of(resource)?;
    let hook = match rule {
        Some(expression) => Some(
            cx.registry
                .readiness()
                .cloned()
                .ok_or_else(|| crate::readiness::unsupported(expression))?,
        ),
        None => None,
    };
    let runtime = cx
        .registry
        .get(&step.resource_type)
        .ok_or("no runtime")?
        .clone();
    let request = WatchRequest {
        resource: resource.clone(),
    };
    let rt = runtime.clone();
    let mut watch = call(cx.options.timeout, move || rt.watch(&request))?;
    let deadline = Instant::now() + cx.options.watch_timeout;
    let mut last_detail = String::from("no status reported");
    loop {
        if cx.cancel.load(Ordering::SeqCst) {
            return Err(format!(
                "interrupted while waiting for readiness ({last_detail})"
            ));
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(format!(
                "not ready after {}: {last_detail}",
                humantime::format_duration(cx.options.watch_timeout)
            ));
        }
        let poll_for = remaining.min(Duration::from_millis(500));
        match watch.poll(poll_for).map_err(|e| e.message)? {
            WatchPoll::Event(mut event) => {
                if let (Some(expression), Some(hook)) = (rule, &hook) {
                    judge_by_rule(&step.key, expression, &**hook, &mut event)?;
                }
                last_detail = event.detail.clone();
                let health = event.health;
                cx.emit(Event::Watch {
                    id: step.key.clone(),
                    resource_type: step.resource_type.clone(),
                    event,
                });
                match health {
                    Health::Ready => return Ok(()),
                    Health::Failed => return Err(format!("failed: {last_detail}")),
                    Health::Progressing => {}
                }
            }
            WatchPoll::Pending => {}
            WatchPoll::Closed => {
                return Err(format!(
                    "the watch ended before the resource was ready: {last_detail}"
                ));
            }
        }
    }
}

/// Replace the runtime's "ready"/"progressing" by what the resource's own rule says about the
/// event's live object. A failure the runtime saw (a crashing pod) stays a failure.
fn judge_by_rule(
    id: &str,
    expression: &str,
    hook: &dyn crate::readiness::ReadinessHook,
    event: &mut WatchEvent,
) -> Result<(), String> {
    use crate::readiness::Verdict;
    if event.health == Health::Failed {
        return Ok(());
    }
    let Some(live) = &event.object else {
        return Err(format!(
            "readiness rule {expression:?}: the runtime's watch reports no live object to judge"
        ));
    };
    let (health, detail) = match hook.judge(id, expression, live) {
        Ok(Verdict::Ready) => (Health::Ready, format!("readiness rule holds: {expression}")),
        Ok(Verdict::NotReady(why)) => (Health::Progressing, why),
        Err(e) => return Err(format!("readiness rule {expression:?}: {e}")),
    };
    event.health = health;
    event.detail = detail.clone();
    if let Some(row) = event.objects.first_mut() {
        row.health = health;
        row.detail = detail;
    }
    Ok(())
}
