//! Importing an existing object (ImportResourceState, then a read) and the configuration that
//! reproduces an imported state, as `terraform plan -generate-config-out` writes it.

use super::*;

/// The configuration that produces `state` under `block`, as `terraform plan
/// -generate-config-out` writes it: required and optional attributes with a value (an optional
/// and computed one keeps the value it has, so the plan stays empty), never attributes only the
/// provider sets, nor `id` (the SDK's implicit, provider-set identifier), nor what the schema
/// does not know (the runtime's own bookkeeping); nested blocks the same way, item by item.
pub(super) fn configuration_of(
    block: &Block,
    state: &Map<String, Json>,
    top: bool,
) -> Map<String, Json> {
    let mut out = Map::new();
    for (name, value) in state {
        if value.is_null() || (top && name == "id") {
            continue;
        }
        if let Some(a) = block.attributes.get(name) {
            if !(a.required || a.optional) {
                continue;
            }
            let value = match &a.nested {
                Some(nested) => nested_configuration(nested, value),
                None => value.clone(),
            };
            out.insert(name.clone(), value);
        } else if let Some(nb) = block.block_types.get(name) {
            let item = |v: &Json| match v.as_object() {
                Some(map) => Json::Object(configuration_of(&nb.block, map, false)),
                None => v.clone(),
            };
            let value = match (nb.nesting, value) {
                (Nesting::List | Nesting::Set, Json::Array(items)) => {
                    if items.is_empty() {
                        continue;
                    }
                    Json::Array(items.iter().map(item).collect())
                }
                (Nesting::Map, Json::Object(items)) => {
                    Json::Object(items.iter().map(|(k, v)| (k.clone(), item(v))).collect())
                }
                _ => item(value),
            };
            out.insert(name.clone(), value);
        }
    }
    out
}

/// [`configuration_of`] for a protocol-6 nested attribute's value.
pub(super) fn nested_configuration(nested: &cty::NestedAttributes, value: &Json) -> Json {
    let block = Block {
        attributes: nested.attributes.clone(),
        block_types: Default::default(),
    };
    let item = |v: &Json| match v.as_object() {
        Some(map) => Json::Object(configuration_of(&block, map, false)),
        None => v.clone(),
    };
    match (nested.nesting, value) {
        (Nesting::List | Nesting::Set, Json::Array(items)) => {
            Json::Array(items.iter().map(item).collect())
        }
        (Nesting::Map, Json::Object(items)) => {
            Json::Object(items.iter().map(|(k, v)| (k.clone(), item(v))).collect())
        }
        _ => item(value),
    }
}

impl Inner {
    pub(super) async fn import(&self, req: ImportRequest) -> PluginResult<ReadResponse> {
        let target = Target::of(&req.planned)?;
        if is_data(&req.planned) {
            return Err(err(
                ErrorKind::InvalidInput,
                &target.id,
                "a data source (extensions.mode: data) is read, not imported",
            ));
        }
        let import_id = req
            .import_id
            .clone()
            .or_else(|| req.planned.extension_str(IMPORT_ID).map(str::to_string))
            .ok_or_else(|| {
                err(
                    ErrorKind::InvalidInput,
                    &target.id,
                    format!("import needs an import ID (extensions.\"{IMPORT_ID}\")"),
                )
            })?;
        let (instance, schema) = self.resource_schema(&target).await?;
        let result = instance
            .provider
            .import(&target.type_name, &import_id)
            .await
            .map_err(|e| rpc_error(&target.id, e))?;
        check_diags(
            &target.id,
            &format!("importing {import_id:?}"),
            &result.diagnostics,
        )?;
        let Some((_, state, private)) = result
            .resources
            .into_iter()
            .find(|(t, _, _)| t == &target.type_name)
        else {
            return Ok(ReadResponse::default());
        };
        // Import answers may be partial; a read fills in the object as it is.
        self.refresh(&instance, &target, &schema, &req.planned, state, private)
            .await
            .map(|(response, _)| response)
    }
}
