//! The resource as it appears in a spec and in state.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The runtime a resource belongs to (`type` in the spec). Kept as a string so third-party
/// runtimes can add their own types.
pub type ResourceType = String;

/// One resource of a spec: `{id, type, attributes, dependsOn, extensions}` (upstream's format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    /// The resource's ID, unique within a spec (per target, see
    /// [`Runtime::target`](crate::runtime::Runtime::target)); state is keyed by it. Kubernetes
    /// IDs are `apiVersion:Kind[:namespace]:name`, Terraform IDs
    /// `providerNamespace:providerName:resourceType:resourceName`; a third-party type may use
    /// any non-empty string. Name it in error messages.
    pub id: String,
    /// Which runtime serves it: the runtime that lists this type in
    /// [`RuntimeInfo::resource_types`](crate::runtime::RuntimeInfo::resource_types).
    #[serde(rename = "type")]
    pub resource_type: ResourceType,
    /// The object itself, JSON-shaped; the kernel diffs these between the spec, state and the
    /// live object. In a spec, string values may hold `$kusion_path` references to other
    /// resources, resolved before a runtime sees them (see [`crate::runtime::ApplyRequest`]).
    #[serde(default)]
    pub attributes: Map<String, Value>,
    /// IDs of resources that must be applied before this one and deleted after it (on top of
    /// the order its `$kusion_path` references imply).
    #[serde(rename = "dependsOn", default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Settings about the resource rather than of it: where it lives or how to handle it
    /// (Kubernetes `kubeConfig`/`kubeContext`, Terraform `provider`/`resourceType`, the kernel's
    /// `kusionstack.io/import-id`, [`EXT_READINESS`](crate::runtime::EXT_READINESS), ...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extensions: Map<String, Value>,
}

impl Resource {
    /// A resource with no dependencies and no extensions.
    pub fn new(
        id: impl Into<String>,
        resource_type: impl Into<String>,
        attributes: Map<String, Value>,
    ) -> Self {
        Resource {
            id: id.into(),
            resource_type: resource_type.into(),
            attributes,
            depends_on: Vec::new(),
            extensions: Map::new(),
        }
    }

    /// An extension value as a string, if present and a string.
    pub fn extension_str(&self, key: &str) -> Option<&str> {
        self.extensions.get(key).and_then(Value::as_str)
    }
}
