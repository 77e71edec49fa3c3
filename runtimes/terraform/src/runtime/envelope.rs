//! What the runtime keeps in a resource's `private` state: the schema version its state was
//! written with, the provider's opaque private bytes, deposed objects of create-before-destroy
//! replacements, and the fingerprint of what it was last applied from.

use super::*;

/// What the runtime stores in `private`: the schema version the state was written with (needed
/// to upgrade it later), the provider's own opaque bytes, and the deposed objects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PrivateEnvelope {
    pub(super) schema_version: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(super) private: String,
    /// Objects a create-before-destroy replacement superseded whose delete failed: still real,
    /// still owned, deleted by the next apply or destroy of this resource (Terraform's "deposed"
    /// objects). Kept here, in the resource's own state entry, so any state backend records
    /// them without knowing about them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) deposed: Vec<DeposedObject>,
    /// Fingerprint of what the object was last applied from (see [`applied_from`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(super) applied_from: String,
}

/// One deposed object: its last known state (JSON attributes), the schema version that state
/// was written with, and the provider's private bytes (base64).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DeposedObject {
    pub(super) schema_version: i64,
    pub(super) state: Map<String, Json>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(super) private: String,
}

impl DeposedObject {
    /// What previews show for the object: its `id`, else its position.
    pub(super) fn label(&self, index: usize) -> Json {
        match self.state.get("id") {
            Some(Json::String(id)) if !id.is_empty() => Json::String(id.clone()),
            _ => Json::String(format!("deposed object {index}")),
        }
    }
}

/// Attribute the runtime adds to a resource that has deposed objects (their IDs). A preview
/// shows it going away (the next apply deletes them); attribute names of Terraform schemas
/// never contain `-`, so it cannot collide with a provider's attribute.
pub const DEPOSED_ATTRIBUTE: &str = "kusion-deposed";

impl PrivateEnvelope {
    pub(super) fn encode(schema_version: i64, private: &[u8]) -> String {
        Self::with_deposed(schema_version, private, Vec::new())
    }

    pub(super) fn with_deposed(
        schema_version: i64,
        private: &[u8],
        deposed: Vec<DeposedObject>,
    ) -> String {
        Self::full(schema_version, private, deposed, String::new())
    }

    pub(super) fn full(
        schema_version: i64,
        private: &[u8],
        deposed: Vec<DeposedObject>,
        applied_from: String,
    ) -> String {
        serde_json::to_string(&PrivateEnvelope {
            schema_version,
            private: B64.encode(private),
            deposed,
            applied_from,
        })
        .unwrap_or_default()
    }

    pub(super) fn parse(text: Option<&str>) -> Option<PrivateEnvelope> {
        serde_json::from_str(text?).ok()
    }

    pub(super) fn decode(text: Option<&str>) -> Option<(i64, Vec<u8>)> {
        let env = Self::parse(text)?;
        Some((env.schema_version, B64.decode(env.private.as_bytes()).ok()?))
    }

    /// The deposed objects recorded in `text`, if any.
    pub(super) fn deposed_of(text: Option<&str>) -> Vec<DeposedObject> {
        Self::parse(text).map(|e| e.deposed).unwrap_or_default()
    }
}

/// Fingerprint of an apply's inputs besides the prior state: provider binary, provider
/// configuration, resource type, schema version and the resource's configuration.
pub(super) fn applied_from(
    instance: &Instance,
    target: &Target,
    schema: &Schema,
    config: &Json,
) -> String {
    let mut hash = Sha256::new();
    for part in [
        instance.checksum.as_str(),
        &canonical(&target.meta),
        &target.type_name,
        &schema.version.to_string(),
        &canonical(config),
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hex::encode(hash.finalize())
}

/// Fingerprint of a recorded state's attributes (without the deposed marker).
pub(super) fn state_fingerprint(attributes: &Map<String, Json>) -> String {
    let mut attributes = attributes.clone();
    attributes.remove(DEPOSED_ATTRIBUTE);
    hex::encode(Sha256::digest(canonical(&Json::Object(attributes))))
}

/// `resource` with the deposed-objects marker set from `deposed` (or removed when empty).
pub(super) fn mark_deposed(resource: &mut Resource, deposed: &[DeposedObject]) {
    if deposed.is_empty() {
        resource.attributes.remove(DEPOSED_ATTRIBUTE);
    } else {
        resource.attributes.insert(
            DEPOSED_ATTRIBUTE.into(),
            Json::Array(
                deposed
                    .iter()
                    .enumerate()
                    .map(|(i, d)| d.label(i))
                    .collect(),
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_envelope_round_trips() {
        let text = PrivateEnvelope::encode(3, b"\x00opaque");
        assert_eq!(
            PrivateEnvelope::decode(Some(&text)),
            Some((3, b"\x00opaque".to_vec()))
        );
        assert_eq!(PrivateEnvelope::decode(Some("not json")), None);
        assert_eq!(PrivateEnvelope::decode(None), None);
    }
}
