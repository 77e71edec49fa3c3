//! Provider state bytes (msgpack of the schema's implied type) read into JSON attributes, with
//! the paths of unknown and sensitive values.

use super::*;

pub(super) fn nil() -> Vec<u8> {
    cty::to_bytes(&rmpv::Value::Nil)
}

/// Decoded state: JSON without nulls, plus paths of unknown and sensitive values.
pub(super) struct Decoded {
    pub(super) json: Json,
    pub(super) unknown: Vec<String>,
    pub(super) sensitive: Vec<String>,
}

pub(super) fn decode_state(
    id: &str,
    schema: &Schema,
    bytes: &[u8],
) -> PluginResult<Option<Decoded>> {
    let mp = cty::from_bytes(bytes).map_err(|e| err(ErrorKind::Internal, id, e))?;
    if mp.is_nil() {
        return Ok(None);
    }
    let mut unknowns = Vec::new();
    let json = cty::decode(
        &schema.block.implied_type(),
        &mp,
        &FieldPath::root(),
        &mut unknowns,
    )
    .map_err(|e| err(ErrorKind::Internal, id, e))?;
    let sensitive = schema.block.sensitive_paths(&json);
    Ok(Some(Decoded {
        json: cty::strip_nulls(json),
        unknown: unknowns.iter().map(ToString::to_string).collect(),
        sensitive,
    }))
}

/// Whether a configuration still holds references the kernel could not resolve yet.
pub(super) fn has_unresolved(value: &Json) -> bool {
    match value {
        Json::String(s) => s.starts_with(cty::UNKNOWN_MARKER),
        Json::Array(items) => items.iter().any(has_unresolved),
        Json::Object(map) => map.values().any(has_unresolved),
        _ => false,
    }
}
