//! Kubernetes resource IDs (`apiVersion:Kind[:namespace]:name`) and the object they name.

use kusion_sdk::{PluginError, PluginResult, Resource};
use serde_json::{Map, Value};

/// The coordinates of one Kubernetes object, checked against its resource ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub id: String,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl Target {
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    pub fn version(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(_, v)| v)
            .unwrap_or(&self.api_version)
    }

    /// `Kind namespace/name` for messages.
    pub fn display_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// Split an ID into `(apiVersion, kind, namespace, name)`. The apiVersion may itself contain a
/// `/` but never a `:`, so splitting on `:` is unambiguous.
pub fn parse_id(id: &str) -> PluginResult<(String, String, Option<String>, String)> {
    let parts: Vec<&str> = id.split(':').collect();
    let bad = || {
        PluginError::invalid(format!(
            "{id}: a Kubernetes resource ID is apiVersion:Kind:namespace:name (namespace omitted for \
             cluster-scoped kinds)"
        ))
    };
    match parts.as_slice() {
        [v, k, n] if !v.is_empty() && !k.is_empty() && !n.is_empty() => {
            Ok((v.to_string(), k.to_string(), None, n.to_string()))
        }
        [v, k, ns, n] if !v.is_empty() && !k.is_empty() && !ns.is_empty() && !n.is_empty() => Ok((
            v.to_string(),
            k.to_string(),
            Some(ns.to_string()),
            n.to_string(),
        )),
        _ => Err(bad()),
    }
}

fn str_at<'a>(obj: &'a Map<String, Value>, path: &[&str]) -> Option<&'a str> {
    let mut cur = obj.get(path[0])?;
    for key in &path[1..] {
        cur = cur.get(key)?;
    }
    cur.as_str()
}

/// The target of a resource, after checking that its ID and its attributes agree.
pub fn target_of(resource: &Resource) -> PluginResult<Target> {
    let id = &resource.id;
    let (api_version, kind, id_ns, id_name) = parse_id(id)?;
    let attrs = &resource.attributes;
    let mismatch = |field: &str, in_object: &str, in_id: &str| {
        PluginError::invalid(format!(
            "{id}: {field} is {in_object:?} in the object but {in_id:?} in the resource ID"
        ))
    };
    let obj_version = str_at(attrs, &["apiVersion"]).ok_or_else(|| {
        PluginError::invalid(format!("{id}: attributes lack a string `apiVersion`"))
    })?;
    if obj_version != api_version {
        return Err(mismatch("apiVersion", obj_version, &api_version));
    }
    let obj_kind = str_at(attrs, &["kind"])
        .ok_or_else(|| PluginError::invalid(format!("{id}: attributes lack a string `kind`")))?;
    if obj_kind != kind {
        return Err(mismatch("kind", obj_kind, &kind));
    }
    let obj_name = str_at(attrs, &["metadata", "name"]).ok_or_else(|| {
        PluginError::invalid(format!("{id}: attributes lack a string `metadata.name`"))
    })?;
    if obj_name != id_name {
        return Err(mismatch("metadata.name", obj_name, &id_name));
    }
    if let Some(obj_ns) = attrs.get("metadata").and_then(|m| m.get("namespace")) {
        let obj_ns = obj_ns.as_str().ok_or_else(|| {
            PluginError::invalid(format!("{id}: metadata.namespace must be a string"))
        })?;
        match &id_ns {
            Some(ns) if ns == obj_ns => {}
            Some(ns) => return Err(mismatch("metadata.namespace", obj_ns, ns)),
            None => {
                return Err(PluginError::invalid(format!(
                    "{id}: the object has metadata.namespace {obj_ns:?} but the resource ID has no namespace"
                )));
            }
        }
    }
    Ok(Target {
        id: id.clone(),
        api_version,
        kind,
        namespace: id_ns,
        name: id_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn res(id: &str, attrs: Value) -> Resource {
        Resource::new(id, "Kubernetes", attrs.as_object().unwrap().clone())
    }

    #[test]
    fn ids_agree_with_objects() {
        let t = target_of(&res(
            "apps/v1:Deployment:demo:web",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "demo"}}),
        ))
        .unwrap();
        assert_eq!(
            (t.group(), t.version(), t.namespace.as_deref()),
            ("apps", "v1", Some("demo"))
        );
        let t = target_of(&res(
            "v1:Namespace:demo",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}),
        ))
        .unwrap();
        assert_eq!(
            (t.group(), t.version(), t.namespace.as_deref()),
            ("", "v1", None)
        );
    }

    #[test]
    fn disagreements_name_the_id_and_field() {
        let cases = [
            (
                "v1:ConfigMap:a:x",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y", "namespace": "a"}}),
                "metadata.name",
            ),
            (
                "v1:ConfigMap:a:x",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "b"}}),
                "metadata.namespace",
            ),
            (
                "v1:ConfigMap:a:x",
                json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "x"}}),
                "apiVersion",
            ),
            (
                "v1:Secret:a:x",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
                "kind",
            ),
            (
                "v1:Namespace:x",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "namespace": "z"}}),
                "no namespace",
            ),
            (
                "v1:Namespace:x",
                json!({"apiVersion": "v1", "kind": "Namespace"}),
                "metadata.name",
            ),
            ("v1:x", json!({}), "apiVersion:Kind"),
            ("v1:A:b:c:d", json!({}), "apiVersion:Kind"),
        ];
        for (id, attrs, needle) in cases {
            let err = target_of(&res(id, attrs)).unwrap_err();
            assert!(
                err.message.contains(id) && err.message.contains(needle),
                "{id}: {}",
                err.message
            );
        }
    }
}
