//! The resource as it appears in a spec and in state.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The runtime a resource belongs to (`type` in the spec). Kept as a string so third-party
/// runtimes can add their own types.
pub type ResourceType = String;

/// One resource of a spec: `{id, type, attributes, dependsOn, extensions}` (upstream's format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    pub id: String,
    #[serde(rename = "type")]
    pub resource_type: ResourceType,
    #[serde(default)]
    pub attributes: Map<String, Value>,
    #[serde(rename = "dependsOn", default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extensions: Map<String, Value>,
}

impl Resource {
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
