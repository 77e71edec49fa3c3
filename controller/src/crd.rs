//! The `Stack` custom resource (`stacks.kusion.io/v1alpha1`) and its CRD.
//!
//! The type implements [`kube::Resource`] by hand rather than through `#[derive(CustomResource)]`:
//! the workspace's kube build has no `derive`/`schemars` features, and the schema below is short
//! enough to keep next to the type it describes.

use std::borrow::Cow;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub const GROUP: &str = "kusion.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "Stack";
pub const PLURAL: &str = "stacks";
/// The finalizer that lets the controller honour `deletionPolicy` before a Stack goes.
pub const FINALIZER: &str = "kusion.io/stack-protection";
/// The annotation approving a recorded plan: its value is the plan's hash (`status.pendingPlan`).
pub const APPROVE_ANNOTATION: &str = "kusion.io/approve-plan";
/// Who approved it, when the approval came through `kusionctl server` (informational: only the
/// hash decides).
pub const APPROVED_BY_ANNOTATION: &str = "kusion.io/approved-by";
/// The interval when a Stack names none.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);

/// A stack kept converged to a revision of a Konfig repository.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stack {
    #[serde(rename = "apiVersion", default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: StackSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StackStatus>,
}

fn api_version() -> String {
    format!("{GROUP}/{VERSION}")
}
fn kind() -> String {
    KIND.to_string()
}

impl Stack {
    pub fn new(name: &str, namespace: &str, spec: StackSpec) -> Stack {
        Stack {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                ..Default::default()
            },
            spec,
            status: None,
        }
    }

    /// `namespace/name`, how errors and logs name a Stack.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or(""),
            self.metadata.name.as_deref().unwrap_or("")
        )
    }
}

impl kube::Resource for Stack {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        PLURAL.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackSpec {
    pub source: GitSource,
    /// How often the stack is planned against live state (humantime: `30s`, `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[serde(default)]
    pub mode: Mode,
    /// A plan that changes something waits for the approval annotation naming its hash.
    #[serde(default)]
    pub require_approval: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<StateSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicySettings>,
    /// Nothing is fetched, planned or applied while set.
    #[serde(default)]
    pub suspend: bool,
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// Wait until applied resources are ready (the runtimes' readiness watch).
    #[serde(default)]
    pub wait: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_timeout: Option<String>,
}

impl StackSpec {
    /// The interval, or a message saying why it cannot be read.
    pub fn interval(&self) -> Result<Duration, String> {
        match &self.interval {
            None => Ok(DEFAULT_INTERVAL),
            Some(s) => humantime::parse_duration(s.trim())
                .map(|d| d.max(Duration::from_secs(1)))
                .map_err(|e| format!("spec.interval {s:?}: {e}")),
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitSource {
    /// Anything `git fetch` takes: `https://`, `ssh://`, `git://`, a path.
    pub url: String,
    /// A branch, tag or commit (default `main`).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The stack's folder inside the repository (`projects/shop/prod`).
    pub path: String,
    /// A Secret in the Stack's namespace: `username`/`password` (HTTP basic) or `identity`
    /// (an SSH private key) with optional `known_hosts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
}

impl GitSource {
    pub fn reference(&self) -> &str {
        self.reference.as_deref().unwrap_or("main")
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SecretRef {
    pub name: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    #[default]
    #[serde(rename = "apply")]
    Apply,
    /// Plan and report (drift included), never change anything.
    #[serde(rename = "preview-only")]
    PreviewOnly,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeletionPolicy {
    /// Deleting the Stack leaves its resources (and their state) where they are.
    #[default]
    #[serde(rename = "orphan")]
    Orphan,
    /// Deleting the Stack destroys its resources first.
    #[serde(rename = "destroy")]
    Destroy,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StateSettings {
    /// `local` (a folder under the controller's state root) or a remote URL as
    /// `--state-backend` takes it (`postgres://...`, `s3://...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PolicySettings {
    /// `RULE=reason`, as `--policy-exempt` takes them.
    #[serde(default)]
    pub exempt: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The Git revision last applied successfully (or found already converged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// The state history revision of the last release the controller recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_release: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSummary>,
    /// The hash of a plan waiting for approval (annotate `kusion.io/approve-plan` with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_plan: Option<String>,
    /// Resources whose live objects differed from the applied revision at the last reconcile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_detected_at: Option<String>,
    /// Policy findings that blocked (or warned about) the last plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<String>,
    /// Consecutive failed reconciles (the backoff grows with it).
    #[serde(default)]
    pub failures: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    pub revision: String,
    pub hash: String,
    pub create: usize,
    pub update: usize,
    pub replace: usize,
    pub delete: usize,
    pub unchanged: usize,
    /// `Action id` for every step that changes something.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_transition_time: String,
}

impl StackStatus {
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Set a condition; its transition time moves only when its status does.
    pub fn set_condition(&mut self, type_: &str, status: bool, reason: &str, message: &str) {
        let status = if status { "True" } else { "False" };
        let now = now_rfc3339();
        match self.conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = now;
                }
                c.status = status.to_string();
                c.reason = reason.to_string();
                c.message = message.to_string();
            }
            None => self.conditions.push(Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: now,
            }),
        }
    }
}

/// Now, to the millisecond (ordering reconciles one second apart needs more than seconds).
pub fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Millisecond)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// The CustomResourceDefinition (apiextensions.k8s.io/v1) serving [`Stack`].
pub fn crd() -> Value {
    let string = json!({"type": "string"});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{PLURAL}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "plural": PLURAL, "singular": "stack", "listKind": "StackList"},
            "scope": "Namespaced",
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
                    {"name": "Revision", "type": "string", "jsonPath": ".status.lastAppliedRevision"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["source"],
                            "properties": {
                                "source": {
                                    "type": "object",
                                    "required": ["url", "path"],
                                    "properties": {
                                        "url": string,
                                        "ref": string,
                                        "path": string,
                                        "secretRef": {"type": "object", "required": ["name"], "properties": {"name": string}}
                                    }
                                },
                                "interval": string,
                                "mode": {"type": "string", "enum": ["apply", "preview-only"]},
                                "requireApproval": {"type": "boolean"},
                                "state": {"type": "object", "properties": {"backend": string}},
                                "policy": {"type": "object", "properties": {"exempt": strings}},
                                "suspend": {"type": "boolean"},
                                "deletionPolicy": {"type": "string", "enum": ["orphan", "destroy"]},
                                "wait": {"type": "boolean"},
                                "waitTimeout": string
                            }
                        },
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                }}
            }]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_reads_with_defaults_and_the_crd_names_it() {
        let stack: Stack = serde_json::from_value(json!({
            "apiVersion": "kusion.io/v1alpha1", "kind": "Stack",
            "metadata": {"name": "shop", "namespace": "ops"},
            "spec": {"source": {"url": "git://h/r", "path": "projects/shop/dev"}, "mode": "preview-only"}
        }))
        .unwrap();
        assert_eq!(stack.key(), "ops/shop");
        assert_eq!(stack.spec.mode, Mode::PreviewOnly);
        assert_eq!(stack.spec.deletion_policy, DeletionPolicy::Orphan);
        assert_eq!(stack.spec.source.reference(), "main");
        assert_eq!(stack.spec.interval(), Ok(DEFAULT_INTERVAL));
        let crd = crd();
        assert_eq!(crd["metadata"]["name"], "stacks.kusion.io");
        let modes = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["mode"]["enum"];
        assert_eq!(modes, &json!(["apply", "preview-only"]));
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut s = StackStatus::default();
        s.set_condition("Ready", false, "A", "a");
        s.conditions[0].last_transition_time = "then".into();
        s.set_condition("Ready", false, "B", "b");
        assert_eq!(s.conditions[0].last_transition_time, "then");
        assert_eq!(s.conditions[0].reason, "B");
        s.set_condition("Ready", true, "C", "c");
        assert_ne!(s.conditions[0].last_transition_time, "then");
    }
}
