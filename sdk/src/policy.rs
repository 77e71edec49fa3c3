//! Policy plugins: evaluate a spec (and plan) before anything changes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::AbiVersion;
use crate::error::PluginResult;

/// How much a [`Finding`] matters (`deny` or `warn` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Blocks the change.
    Deny,
    /// Printed; the change goes on.
    Warn,
}

/// One rule violated by one resource (or by the spec as a whole when `resource_id` is `None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The rule's name, stable across runs: operators exempt a finding by it
    /// (`--policy-exempt RULE=REASON` matches the whole name or its last `/`-separated part).
    pub rule: String,
    /// Whether the finding blocks the change.
    pub severity: Severity,
    /// The [`Resource::id`](crate::Resource::id) at fault, `None` for the spec as a whole.
    pub resource_id: Option<String>,
    /// What is wrong and how to fix it, for the operator.
    pub message: String,
}

/// Who a policy plugin is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyPluginInfo {
    /// The plugin's name, used in messages (operators select policies by the manifest name).
    pub name: String,
    /// The plugin's own version (free text), shown by `kusionctl plugin list`.
    pub version: String,
    /// The contract the plugin was built against: [`crate::ABI_VERSION`]. The host refuses a
    /// plugin whose version it does not [accept](AbiVersion::accepts).
    pub abi: AbiVersion,
}

/// A policy plugin: judges a spec (and its plan) before anything changes.
///
/// A `deny` finding blocks the operation; so does an error, a panic or running past the
/// policy's time limit (fail closed), unless the operator configured the policy `fail_open`.
pub trait PolicyPlugin: Send + Sync {
    /// Who the plugin is. The host asks when it loads the plugin and may ask again: keep it
    /// cheap, and the same for the plugin's lifetime.
    fn describe(&self) -> PolicyPluginInfo;
    /// The operator's configuration for this policy, handed over before each evaluation it is
    /// configured for (and once at load from `[plugins.settings.<name>]`). An error is a failure
    /// of the policy, which blocks unless it is `fail_open`.
    fn configure(&self, config: &Value) -> PluginResult<()>;
    /// `spec` is `{resources: [...]}`; `context` carries the plan, the stack and the operation.
    fn evaluate(&self, spec: &Value, context: &Value) -> PluginResult<Vec<Finding>>;
}
