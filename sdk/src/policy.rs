//! Policy plugins: evaluate a spec (and plan) before anything changes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::AbiVersion;
use crate::error::PluginResult;

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
    pub rule: String,
    pub severity: Severity,
    pub resource_id: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyPluginInfo {
    pub name: String,
    pub version: String,
    pub abi: AbiVersion,
}

pub trait PolicyPlugin: Send + Sync {
    fn describe(&self) -> PolicyPluginInfo;
    fn configure(&self, config: &Value) -> PluginResult<()>;
    /// `spec` is `{resources: [...]}`; `context` carries the plan, the stack and the operation.
    fn evaluate(&self, spec: &Value, context: &Value) -> PluginResult<Vec<Finding>>;
}
