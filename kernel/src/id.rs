//! Resource IDs: what they look like per runtime type, and checking them against the resource.

use kusion_sdk::Resource;
use serde_json::Value;

/// The runtime type names the kernel knows the ID format of.
pub const KUBERNETES: &str = "Kubernetes";
/// See [`KUBERNETES`].
pub const TERRAFORM: &str = "Terraform";

/// A parsed resource ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceId {
    /// `apiVersion:Kind[:namespace]:name`
    Kubernetes {
        /// The API group and version.
        api_version: String,
        /// The kind.
        kind: String,
        /// The namespace (None: cluster-scoped).
        namespace: Option<String>,
        /// The object's name.
        name: String,
    },
    /// `providerNamespace:providerName:resourceType:resourceName`
    Terraform {
        /// The provider's registry namespace (`hashicorp`).
        provider_namespace: String,
        /// The provider's name (`aws`).
        provider_name: String,
        /// The Terraform resource type (`aws_s3_bucket`).
        resource_type: String,
        /// The resource's name.
        name: String,
    },
    /// A type the kernel has no ID rules for (third-party runtimes): any non-empty ID.
    Other(String),
}

/// A resource ID that is malformed for its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource {id:?}: {reason}")]
pub struct IdError {
    /// The ID.
    pub id: String,
    /// What is wrong.
    pub reason: String,
}

fn err(id: &str, reason: impl Into<String>) -> IdError {
    IdError {
        id: id.to_string(),
        reason: reason.into(),
    }
}

/// A parsed ID borrowing its segments, so validating a large spec allocates nothing.
#[derive(Clone, Copy)]
enum IdParts<'a> {
    Kubernetes {
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
    },
    Terraform {
        provider_namespace: &'a str,
        provider_name: &'a str,
        resource_type: &'a str,
        name: &'a str,
    },
    Other,
}

fn parse_parts<'a>(id: &'a str, resource_type: &str) -> Result<IdParts<'a>, IdError> {
    if id.is_empty() {
        return Err(err(id, "empty ID"));
    }
    if id.chars().any(char::is_whitespace) {
        return Err(err(id, "IDs must not contain white space"));
    }
    // Up to four segments are meaningful; a fifth only says "too many".
    let mut parts = [""; 5];
    let mut count = 0;
    for part in id.split(':') {
        if part.is_empty() {
            return Err(err(id, "empty segment between ':' separators"));
        }
        if count < parts.len() {
            parts[count] = part;
        }
        count += 1;
    }
    match resource_type {
        KUBERNETES => match (count, parts) {
            (3, [api_version, kind, name, ..]) => Ok(IdParts::Kubernetes {
                api_version,
                kind,
                namespace: None,
                name,
            }),
            (4, [api_version, kind, namespace, name, _]) => Ok(IdParts::Kubernetes {
                api_version,
                kind,
                namespace: Some(namespace),
                name,
            }),
            _ => Err(err(
                id,
                "a Kubernetes ID is apiVersion:Kind[:namespace]:name",
            )),
        },
        TERRAFORM => match (count, parts) {
            (4, [provider_namespace, provider_name, resource_type, name, _]) => {
                Ok(IdParts::Terraform {
                    provider_namespace,
                    provider_name,
                    resource_type,
                    name,
                })
            }
            _ => Err(err(
                id,
                "a Terraform ID is providerNamespace:providerName:resourceType:resourceName",
            )),
        },
        _ => Ok(IdParts::Other),
    }
}

impl IdParts<'_> {
    fn into_id(self, id: &str) -> ResourceId {
        match self {
            IdParts::Kubernetes {
                api_version,
                kind,
                namespace,
                name,
            } => ResourceId::Kubernetes {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                namespace: namespace.map(str::to_string),
                name: name.to_string(),
            },
            IdParts::Terraform {
                provider_namespace,
                provider_name,
                resource_type,
                name,
            } => ResourceId::Terraform {
                provider_namespace: provider_namespace.to_string(),
                provider_name: provider_name.to_string(),
                resource_type: resource_type.to_string(),
                name: name.to_string(),
            },
            IdParts::Other => ResourceId::Other(id.to_string()),
        }
    }
}

impl ResourceId {
    /// Parse `id` by the rules of `resource_type`.
    pub fn parse(id: &str, resource_type: &str) -> Result<ResourceId, IdError> {
        Ok(parse_parts(id, resource_type)?.into_id(id))
    }
}

fn str_at<'a>(attrs: &'a serde_json::Map<String, Value>, path: &[&str]) -> Option<&'a str> {
    let (first, rest) = path.split_first()?;
    let mut v = attrs.get(*first)?;
    for key in rest {
        v = v.get(key)?;
    }
    v.as_str()
}

/// Check that a resource's ID is well formed and agrees with its attributes and extensions.
pub fn check_resource_id(resource: &Resource) -> Result<(), IdError> {
    checked_parts(resource).map(drop)
}

fn checked_parts(resource: &Resource) -> Result<IdParts<'_>, IdError> {
    let id = &resource.id;
    let parsed = parse_parts(id, &resource.resource_type)?;
    let attrs = &resource.attributes;
    match parsed {
        IdParts::Kubernetes {
            api_version,
            kind,
            namespace,
            name,
        } => {
            let check =
                |field: &str, path: &[&str], expected: Option<&str>| -> Result<(), IdError> {
                    let actual = str_at(attrs, path);
                    if actual != expected {
                        return Err(err(
                            id,
                            format!(
                                "the ID says {field} {} but the object has {}",
                                expected.map_or("(none)".to_string(), |e| format!("{e:?}")),
                                actual.map_or("(none)".to_string(), |a| format!("{a:?}"))
                            ),
                        ));
                    }
                    Ok(())
                };
            check("apiVersion", &["apiVersion"], Some(api_version))?;
            check("kind", &["kind"], Some(kind))?;
            check("metadata.name", &["metadata", "name"], Some(name))?;
            check("metadata.namespace", &["metadata", "namespace"], namespace)?;
        }
        IdParts::Terraform { resource_type, .. } => {
            let provider = resource.extension_str("provider").ok_or_else(|| {
                err(
                    id,
                    "Terraform resources need extensions.provider (host/namespace/name/version)",
                )
            })?;
            if provider.split('/').count() != 4 || provider.split('/').any(str::is_empty) {
                return Err(err(
                    id,
                    format!("extensions.provider {provider:?} is not host/namespace/name/version"),
                ));
            }
            let ext_type = resource
                .extension_str("resourceType")
                .ok_or_else(|| err(id, "Terraform resources need extensions.resourceType"))?;
            if ext_type != resource_type {
                return Err(err(
                    id,
                    format!(
                        "the ID says resource type {resource_type:?} but extensions.resourceType is {ext_type:?}"
                    ),
                ));
            }
            if let Some(meta) = resource.extensions.get("providerMeta")
                && !meta.is_object()
            {
                return Err(err(id, "extensions.providerMeta must be a mapping"));
            }
        }
        IdParts::Other => {}
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn k8s(id: &str, attrs: Value) -> Resource {
        Resource::new(id, KUBERNETES, attrs.as_object().unwrap().clone())
    }

    #[test]
    fn kubernetes_ids() {
        let r = k8s(
            "apps/v1:Deployment:demo:web",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "demo"}}),
        );
        assert!(check_resource_id(&r).is_ok());
        let ns = k8s(
            "v1:Namespace:demo",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}),
        );
        assert!(check_resource_id(&ns).is_ok());
        let ingress = k8s(
            "networking.k8s.io/v1:Ingress:ns:name",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "name", "namespace": "ns"}}),
        );
        assert!(check_resource_id(&ingress).is_ok());
    }

    #[test]
    fn kubernetes_mismatch_is_named() {
        let r = k8s(
            "apps/v1:Deployment:demo:web",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "demo"}}),
        );
        let e = check_resource_id(&r).unwrap_err();
        assert!(e.to_string().contains("apps/v1:Deployment:demo:web"), "{e}");
        assert!(e.to_string().contains("metadata.name"), "{e}");
        let bad = k8s("Deployment", json!({}));
        assert!(check_resource_id(&bad).is_err());
        let empty = k8s("v1::x", json!({}));
        assert!(check_resource_id(&empty).is_err());
    }

    #[test]
    fn terraform_ids() {
        let mut r = Resource::new(
            "hashicorp:aws:aws_s3_bucket:logs",
            TERRAFORM,
            Default::default(),
        );
        assert!(check_resource_id(&r).is_err());
        r.extensions.insert(
            "provider".into(),
            json!("registry.terraform.io/hashicorp/aws/5.100.0"),
        );
        r.extensions
            .insert("resourceType".into(), json!("aws_s3_bucket"));
        assert!(check_resource_id(&r).is_ok());
        r.extensions.insert("resourceType".into(), json!("aws_vpc"));
        assert!(check_resource_id(&r).is_err());
    }
}
