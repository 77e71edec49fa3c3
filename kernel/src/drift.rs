//! Drift: what state recorded against what lives now, without a spec.
//!
//! Each recorded resource is read through its runtime, which projects the live object onto
//! what kusion manages (the recorded resource is the guide), and the two are compared field by
//! field. A sealed value that still hashes to the live one is unchanged. Nothing is written:
//! drift is a read-only look, so it needs no lease.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kusion_sdk::FieldPath;
use kusion_sdk::runtime::ReadRequest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::diff::{self, ChangeKind, FieldChange};
use crate::registry::Registry;
use crate::state::seal::Sealer;
use crate::state::{State, StateEntry};
use crate::walk::{NodeResult, walk};

/// How a recorded resource compares with the live one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DriftStatus {
    /// The live resource holds what state recorded.
    InSync,
    /// Some recorded fields have other values live (or are gone).
    Drifted,
    /// The live resource no longer exists.
    Missing,
    /// The resource could not be read (no runtime, an error, or interrupted).
    Unreadable,
}

impl std::fmt::Display for DriftStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DriftStatus::InSync => "in sync",
            DriftStatus::Drifted => "drifted",
            DriftStatus::Missing => "missing",
            DriftStatus::Unreadable => "unreadable",
        })
    }
}

/// One recorded resource's drift.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDrift {
    /// The resource's ID.
    pub id: String,
    /// The target (cluster) it lives in, when its runtime names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Its type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// How it compares.
    pub status: DriftStatus,
    /// Field-level differences, recorded (`old`) against live (`new`), sensitive values masked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// Why the resource could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The last operation on it never recorded an outcome: what state holds may be stale.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
}

/// Counts by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftSummary {
    /// Resources as recorded.
    pub in_sync: usize,
    /// Resources changed outside kusion.
    pub drifted: usize,
    /// Resources gone.
    pub missing: usize,
    /// Resources that could not be read.
    pub unreadable: usize,
}

/// The drift of every recorded resource of a stack, in state order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftReport {
    /// Counts by status.
    pub summary: DriftSummary,
    /// Every recorded resource.
    pub resources: Vec<ResourceDrift>,
}

impl DriftReport {
    /// Whether any resource differs from state (drifted or missing).
    pub fn has_drift(&self) -> bool {
        self.summary.drifted + self.summary.missing > 0
    }

    /// Whether some resource could not be checked.
    pub fn incomplete(&self) -> bool {
        self.summary.unreadable > 0
    }
}

/// How to read.
#[derive(Clone, Default)]
pub struct DriftOptions {
    /// Runtime calls made at once.
    pub concurrency: usize,
    /// Per runtime call.
    pub timeout: Option<Duration>,
    /// Fields never compared (as `--ignore-fields` on a plan).
    pub ignore_fields: Vec<FieldPath>,
    /// The stack's sealer: sealed recorded values are compared by their hash.
    pub sealer: Option<Arc<Sealer>>,
}

/// Read every resource `state` records and compare it with the record.
pub fn detect(
    state: &State,
    registry: &Registry,
    options: &DriftOptions,
    cancel: &AtomicBool,
) -> DriftReport {
    let entries: Vec<&StateEntry> = state.resources.values().collect();
    let deps = vec![Vec::new(); entries.len()];
    let results = walk(&deps, options.concurrency.max(1), cancel, |i| {
        Ok(check(entries[i], registry, options))
    });
    let mut report = DriftReport::default();
    for (entry, result) in entries.iter().zip(results) {
        let drift = match result {
            NodeResult::Done(d) => d,
            NodeResult::Failed(e) => unreadable(entry, e),
            NodeResult::Skipped(_) | NodeResult::Cancelled => {
                unreadable(entry, "not read: interrupted".into())
            }
        };
        match drift.status {
            DriftStatus::InSync => report.summary.in_sync += 1,
            DriftStatus::Drifted => report.summary.drifted += 1,
            DriftStatus::Missing => report.summary.missing += 1,
            DriftStatus::Unreadable => report.summary.unreadable += 1,
        }
        report.resources.push(drift);
    }
    report
}

fn unreadable(entry: &StateEntry, error: String) -> ResourceDrift {
    ResourceDrift {
        id: entry.resource.id.clone(),
        target: entry.target.clone(),
        resource_type: entry.resource.resource_type.clone(),
        status: DriftStatus::Unreadable,
        changes: Vec::new(),
        error: Some(error),
        pending: entry.pending,
    }
}

fn check(entry: &StateEntry, registry: &Registry, options: &DriftOptions) -> ResourceDrift {
    let Some(runtime) = registry.get(&entry.resource.resource_type).cloned() else {
        return unreadable(
            entry,
            format!("no runtime serves type {:?}", entry.resource.resource_type),
        );
    };
    let request = ReadRequest {
        prior: Some(entry.resource.clone()),
        prior_private: entry.private.clone(),
        planned: None,
        timeout: options.timeout,
    };
    let read = match crate::plan::call(options.timeout, move || runtime.read(&request)) {
        Ok(read) => read,
        Err(e) => return unreadable(entry, e),
    };
    let mut drift = ResourceDrift {
        id: entry.resource.id.clone(),
        target: entry.target.clone(),
        resource_type: entry.resource.resource_type.clone(),
        status: DriftStatus::InSync,
        changes: Vec::new(),
        error: None,
        pending: entry.pending,
    };
    let Some(live) = read.resource else {
        drift.status = DriftStatus::Missing;
        return drift;
    };
    let mut recorded = Value::Object(entry.resource.attributes.clone());
    let mut now = Value::Object(live.attributes);
    diff::strip(&mut recorded, &options.ignore_fields);
    diff::strip(&mut now, &options.ignore_fields);
    let mut changes = diff::diff(&recorded, &now);
    // A sealed recorded value is a keyed hash: equal when it hashes the live value.
    if let Some(sealer) = &options.sealer {
        changes.retain(|c| {
            !(c.kind == ChangeKind::Changed
                && matches!((&c.old, &c.new), (Some(Value::String(s)), Some(v)) if sealer.matches(s, v)))
        });
    }
    let mut sensitive = diff::builtin_sensitive_paths(&entry.resource);
    sensitive.extend(
        entry
            .sensitive_paths
            .iter()
            .chain(&read.sensitive_paths)
            .filter_map(|p| FieldPath::parse(p).ok()),
    );
    diff::mask_changes(&mut changes, &sensitive);
    if !changes.is_empty() {
        drift.status = DriftStatus::Drifted;
    }
    drift.changes = changes;
    drift
}
