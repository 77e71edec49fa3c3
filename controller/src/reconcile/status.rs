//! What a reconcile writes: the plan summary and policy findings in `status`, the status patch,
//! and Kubernetes Events.

use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use kusion_kernel::plan::PlanView;
use kusion_kernel::policy::PolicyReport;
use serde_json::{Value, json};

use super::{Ctx, ReconcileError};
use crate::crd::{PlanSummary, Stack, StackStatus};

pub(super) fn summarize(revision: &str, plan: &PlanView) -> PlanSummary {
    PlanSummary {
        revision: revision.to_string(),
        hash: plan.approval_hash(Some(revision)),
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

pub(super) fn findings(report: Option<&PolicyReport>) -> Vec<String> {
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
    pub(super) async fn patch_status(
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

    pub(super) async fn event(&self, stack: &Stack, warning: bool, reason: &str, note: String) {
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
}
