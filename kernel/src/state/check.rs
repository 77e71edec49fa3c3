//! `kusionctl state check` and `state repair`: what is wrong with a stack's stored state, and
//! the fixes that need no guessing.
//!
//! A repair only drops what was never acknowledged (a torn write) or cannot be read at all, and
//! says what it dropped; it never invents an entry. Entries whose outcome was never recorded
//! stay *pending*: the next plan reads them live, which is the safe answer to "does it exist?".

use serde::Serialize;

use super::{LeaseHolder, ReleaseStatus, StateError, StateStore, Writer, format_time, now_ms};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    /// Commands refuse to work on the stack (or would lose data) until it is repaired.
    Error,
    /// Works, but something needs a look.
    Warning,
    /// For information.
    Note,
}

/// One thing found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// How serious.
    pub severity: Severity,
    /// What and where (a file and line, a table row, a resource key).
    pub message: String,
    /// Whether `state repair` fixes it.
    pub repairable: bool,
}

impl Finding {
    /// An error (`repairable`: whether `state repair` fixes it).
    pub fn error(message: impl Into<String>, repairable: bool) -> Finding {
        Finding {
            severity: Severity::Error,
            message: message.into(),
            repairable,
        }
    }
    /// A warning (`repairable`: whether `state repair` fixes it).
    pub fn warning(message: impl Into<String>, repairable: bool) -> Finding {
        Finding {
            severity: Severity::Warning,
            message: message.into(),
            repairable,
        }
    }
    /// A note, for information.
    pub fn note(message: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Note,
            message: message.into(),
            repairable: false,
        }
    }
}

/// Everything `state check` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckReport {
    /// The state checked.
    pub location: String,
    /// Everything found.
    pub findings: Vec<Finding>,
}

impl CheckReport {
    /// Whether any finding stops commands from working.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// Inspect a stack's state without changing it.
pub fn check(store: &dyn StateStore) -> CheckReport {
    let mut findings = match store.inspect() {
        Ok(f) => f,
        Err(e) => vec![Finding::error(e.to_string(), false)],
    };
    match store.load() {
        Ok(state) => {
            let pending: Vec<&str> = state
                .resources
                .iter()
                .filter(|(_, e)| e.pending)
                .map(|(k, _)| k.as_str())
                .collect();
            if !pending.is_empty() {
                findings.push(Finding::note(format!(
                    "{} resource(s) whose last operation never recorded an outcome: {}; the next plan reads them live",
                    pending.len(),
                    pending.join(", ")
                )));
            }
            for (key, h) in &state.handoffs {
                findings.push(Finding::error(
                    format!(
                        "{key} is being moved to the stack at {} as {} (an interrupted `kusionctl state mv --to-stack`): run it again to finish; plans of this stack stop until then",
                        h.to, h.key
                    ),
                    false,
                ));
            }
            for (key, entry) in &state.resources {
                if *key != entry.key() {
                    findings.push(Finding::error(
                        format!("entry {key:?} records the key {:?}", entry.key()),
                        false,
                    ));
                }
            }
            findings.push(Finding::note(format!(
                "{} resource(s), serial {}",
                state.resources.len(),
                state.serial
            )));
        }
        // Damage `inspect` already described is not reported twice.
        Err(e) if findings.iter().any(|f| f.severity == Severity::Error) => {
            tracing::debug!("load: {e}");
        }
        Err(e) => findings.push(Finding::error(e.to_string(), false)),
    }
    let lease = match store.current_lease() {
        Ok(lease) => lease,
        Err(e) => {
            findings.push(Finding::error(
                format!("{e}; `kusionctl state unlock` removes it"),
                false,
            ));
            None
        }
    };
    if let Some(lease) = &lease {
        let state = if lease.expires_at <= now_ms() {
            "expired"
        } else {
            "held"
        };
        findings.push(Finding::note(format!(
            "lease #{} {state} by {} until {}",
            lease.fence,
            lease.holder,
            format_time(lease.expires_at)
        )));
    }
    match store.latest_revision() {
        Ok(Some(latest)) => {
            for revision in latest.saturating_sub(9).max(1)..=latest {
                match store.release(revision) {
                    Ok(r) if r.status == ReleaseStatus::Running => {
                        let live = lease.as_ref().is_some_and(|l| {
                            l.expires_at > now_ms() && l.holder.pid == r.holder.pid
                        });
                        if !live {
                            findings.push(Finding::warning(
                                format!(
                                    "release {revision} ({} by {}) is still marked running, but its process no longer holds the stack",
                                    r.operation, r.holder
                                ),
                                true,
                            ));
                        }
                    }
                    Ok(_) | Err(StateError::NoSuchRelease(_)) => {}
                    Err(e) => findings.push(Finding::error(e.to_string(), false)),
                }
            }
        }
        Ok(None) => {}
        Err(e) => findings.push(Finding::error(e.to_string(), false)),
    }
    CheckReport {
        location: store.location(),
        findings,
    }
}

/// Sensitive leaf values not yet sealed (written by versions before sealing).
fn count_clear_secrets(state: &super::State, sealer: &super::seal::Sealer) -> usize {
    state
        .resources
        .values()
        .map(|entry| {
            let mut sealed = entry.clone();
            sealer.seal_entry(&mut sealed);
            count_changed(&entry.resource.attributes, &sealed.resource.attributes)
        })
        .sum()
}

fn count_changed(
    a: &serde_json::Map<String, serde_json::Value>,
    b: &serde_json::Map<String, serde_json::Value>,
) -> usize {
    fn walk(a: &serde_json::Value, b: &serde_json::Value) -> usize {
        use serde_json::Value;
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => x
                .iter()
                .map(|(k, v)| y.get(k).map_or(0, |w| walk(v, w)))
                .sum(),
            (Value::Array(x), Value::Array(y)) => x.iter().zip(y).map(|(v, w)| walk(v, w)).sum(),
            (x, y) => usize::from(x != y),
        }
    }
    a.iter()
        .map(|(k, v)| b.get(k).map_or(0, |w| walk(v, w)))
        .sum()
}

/// Fix what can be fixed without guessing, under the stack's lease; returns what was done.
pub fn repair(store: std::sync::Arc<dyn StateStore>) -> Result<Vec<String>, StateError> {
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = Writer::acquire(
        store.clone(),
        &LeaseHolder::current("state repair"),
        std::time::Duration::from_secs(60),
        cancel,
    )?;
    let mut done = store.repair(&writer.lease())?;
    // The journal replays now; fold it into a fresh snapshot so the repair is durable as one.
    let mut state = store.load()?;
    let sealer = super::seal::Sealer::for_state(
        &state,
        super::seal::KeySource::from_env()
            .map_err(|e| StateError::Io {
                location: store.location(),
                message: e.to_string(),
            })?
            .as_ref(),
    )
    .map_err(|e| StateError::Io {
        location: store.location(),
        message: e.to_string(),
    })?;
    let unsealed_before = count_clear_secrets(&state, &sealer);
    writer.set_sealer(std::sync::Arc::new(sealer))?;
    state.serial += 1;
    writer.checkpoint(&mut state)?;
    if unsealed_before > 0 {
        done.push(format!(
            "sealed {unsealed_before} sensitive value(s) that an older version kept in clear"
        ));
    }
    if let Ok(Some(latest)) = store.latest_revision() {
        for revision in latest.saturating_sub(9).max(1)..=latest {
            let Ok(mut release) = store.release(revision) else {
                continue;
            };
            if release.status == ReleaseStatus::Running {
                release.status = ReleaseStatus::Failed;
                release.finished_at = Some(now_ms());
                release.notes.push(format!(
                    "closed by `state repair`: {} stopped before recording an outcome",
                    release.holder
                ));
                store.update_release(&release)?;
                done.push(format!(
                    "closed release {revision}, left running, as failed"
                ));
            }
        }
    }
    Ok(done)
}
