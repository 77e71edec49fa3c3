//! What a resource names for this runtime ([`Target`]: type, provider address and provider
//! configuration, from its extensions and ID), and the other readings of a resource's extensions
//! (data source mode, create-before-destroy).

use super::*;

/// What a resource names: its type, provider and provider configuration.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) id: String,
    pub(super) type_name: String,
    pub(super) address: ProviderAddress,
    pub(super) meta: Json,
}

pub(super) fn canonical(value: &Json) -> String {
    pub(super) fn sort(v: &Json) -> Json {
        match v {
            Json::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Json::Object(keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect())
            }
            Json::Array(a) => Json::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(value).to_string()
}

impl Target {
    pub(super) fn of(resource: &Resource) -> PluginResult<Target> {
        let id = resource.id.clone();
        let parts: Vec<&str> = id.split(':').collect();
        let type_name = match resource.extension_str("resourceType") {
            Some(t) => t.to_string(),
            None if parts.len() == 4 => parts[2].to_string(),
            None => {
                return Err(err(
                    ErrorKind::InvalidInput,
                    &id,
                    "no extensions.resourceType and the ID is not providerNamespace:providerName:resourceType:resourceName",
                ));
            }
        };
        let provider = resource.extension_str("provider").ok_or_else(|| {
            err(
                ErrorKind::InvalidInput,
                &id,
                "extensions.provider (host/namespace/name/version) is missing",
            )
        })?;
        let address =
            ProviderAddress::parse(provider).map_err(|e| err(ErrorKind::InvalidInput, &id, e))?;
        let meta = match resource.extensions.get("providerMeta") {
            None | Some(Json::Null) => Json::Object(Map::new()),
            Some(m @ Json::Object(_)) => m.clone(),
            Some(_) => {
                return Err(err(
                    ErrorKind::InvalidInput,
                    &id,
                    "extensions.providerMeta must be an object (the provider configuration block)",
                ));
            }
        };
        Ok(Target {
            id,
            type_name,
            address,
            meta,
        })
    }

    pub(super) fn key(&self) -> ProviderKey {
        (self.address.to_string(), canonical(&self.meta))
    }
}

/// Whether the resource is a data source (`extensions.mode: data`).
pub(super) fn is_data(resource: &Resource) -> bool {
    resource.extension_str(MODE) == Some("data")
}

/// Whether the resource asks for create-before-destroy replacements.
pub(super) fn create_before_destroy(resource: &Resource) -> bool {
    resource
        .extensions
        .get(CREATE_BEFORE_DESTROY)
        .and_then(Json::as_bool)
        .unwrap_or(false)
}

pub(super) fn resource_from(template: &Resource, json: Json) -> Resource {
    let attributes = match json {
        Json::Object(map) => map,
        _ => Map::new(),
    };
    Resource {
        id: template.id.clone(),
        resource_type: template.resource_type.clone(),
        attributes,
        depends_on: template.depends_on.clone(),
        extensions: template.extensions.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(id: &str, extensions: Json) -> Resource {
        let mut r = Resource::new(id, RESOURCE_TYPE, Map::new());
        r.extensions = extensions.as_object().cloned().unwrap_or_default();
        r
    }

    #[test]
    fn targets_come_from_extensions_and_ids() {
        let r = resource(
            "hashicorp:aws:aws_s3_bucket:logs",
            json!({"provider": "registry.terraform.io/hashicorp/aws/5.100.0"}),
        );
        let t = Target::of(&r).unwrap();
        assert_eq!(t.type_name, "aws_s3_bucket");
        assert_eq!(t.meta, json!({}));
        let r = resource(
            "x",
            json!({"provider": "hashicorp/aws/5.100.0", "resourceType": "aws_vpc", "providerMeta": {"b": 1, "a": {"d": 2, "c": 3}}}),
        );
        let t = Target::of(&r).unwrap();
        assert_eq!(t.type_name, "aws_vpc");
        assert_eq!(
            t.key().1,
            r#"{"a":{"c":3,"d":2},"b":1}"#,
            "configurations compare regardless of key order"
        );

        let e = Target::of(&resource("a:b:c:d", json!({}))).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidInput);
        assert_eq!(
            e.message,
            "a:b:c:d: extensions.provider (host/namespace/name/version) is missing"
        );
        let e =
            Target::of(&resource("bad", json!({"provider": "hashicorp/aws/1.0.0"}))).unwrap_err();
        assert!(
            e.message.starts_with("bad: no extensions.resourceType"),
            "{}",
            e.message
        );
        let e = Target::of(&resource("a:b:c:d", json!({"provider": "aws"}))).unwrap_err();
        assert!(
            e.message.contains("invalid provider address \"aws\""),
            "{}",
            e.message
        );
        let e = Target::of(&resource(
            "a:b:c:d",
            json!({"provider": "a/b/c", "providerMeta": "x"}),
        ))
        .unwrap_err();
        assert!(
            e.message.contains("providerMeta must be an object"),
            "{}",
            e.message
        );
    }
}
