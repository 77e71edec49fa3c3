//! OpenAPI v2 (swagger) `definitions` to schemas.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::OpenApiError;
use super::model::{Attr, SchemaDef, Ty};

/// Definitions that are plain values in JSON, not objects with fields: they become a KCL type
/// inline instead of a schema of their own.
pub fn is_inline(def: &Json) -> bool {
    def.get("properties")
        .is_none_or(|p| p.as_object().is_none_or(|m| m.is_empty()))
}

/// The KCL package of a definition name: `io.k8s.api.apps.v1.Deployment` -> `api.apps.v1`.
/// Kubernetes' reversed-domain prefix is dropped and dashes (not valid in KCL package names)
/// become underscores.
pub fn package_of(def_name: &str) -> (String, String) {
    let trimmed = def_name.strip_prefix("io.k8s.").unwrap_or(def_name);
    match trimmed.rsplit_once('.') {
        Some((pkg, name)) => (pkg.replace('-', "_"), name.to_string()),
        None => (String::new(), trimmed.to_string()),
    }
}

/// The type a value-like definition stands for.
fn inline_ty(name: &str, def: &Json) -> Ty {
    let ty = def.get("type").and_then(Json::as_str);
    let format = def.get("format").and_then(Json::as_str);
    if format == Some("int-or-string") {
        return Ty::IntOrStr;
    }
    if name.ends_with(".Quantity") {
        return Ty::Quantity;
    }
    scalar(ty, format).unwrap_or(match ty {
        Some("object") => Ty::Dict(Box::new(Ty::Any)),
        _ => Ty::Any,
    })
}

/// The scalar KCL type of a JSON-schema `type`.
pub fn scalar(ty: Option<&str>, format: Option<&str>) -> Option<Ty> {
    Some(match ty? {
        "string" if format == Some("int-or-string") => Ty::IntOrStr,
        "string" => Ty::Str,
        "integer" => Ty::Int,
        "number" => Ty::Float,
        "boolean" => Ty::Bool,
        _ => return None,
    })
}

struct Ctx<'a> {
    defs: &'a serde_json::Map<String, Json>,
}

impl Ctx<'_> {
    fn ty(&self, p: &Json, at: &str) -> Result<Ty, OpenApiError> {
        if let Some(r) = p.get("$ref").and_then(Json::as_str) {
            let key = r.strip_prefix("#/definitions/").unwrap_or(r);
            let def = self.defs.get(key).ok_or_else(|| OpenApiError::Schema {
                at: at.to_string(),
                msg: format!("$ref to unknown definition '{r}'"),
            })?;
            if is_inline(def) {
                return Ok(inline_ty(key, def));
            }
            let (pkg, name) = package_of(key);
            return Ok(Ty::Ref { pkg, name });
        }
        let ty = p.get("type").and_then(Json::as_str);
        let format = p.get("format").and_then(Json::as_str);
        if let Some(t) = scalar(ty, format) {
            return Ok(t);
        }
        Ok(match ty {
            Some("array") => {
                let items = p.get("items").ok_or_else(|| OpenApiError::Schema {
                    at: at.to_string(),
                    msg: "array without items".into(),
                })?;
                Ty::List(Box::new(self.ty(items, &format!("{at}.items"))?))
            }
            Some("object") => match p.get("additionalProperties") {
                Some(ap @ Json::Object(_)) => Ty::Dict(Box::new(
                    self.ty(ap, &format!("{at}.additionalProperties"))?,
                )),
                _ => Ty::Dict(Box::new(Ty::Any)),
            },
            None => Ty::Any,
            Some(other) => {
                return Err(OpenApiError::Schema {
                    at: at.to_string(),
                    msg: format!("unsupported type '{other}'"),
                });
            }
        })
    }
}

/// Every object definition of a swagger document as a schema, sorted by definition name.
pub fn schemas(doc: &Json) -> Result<Vec<SchemaDef>, OpenApiError> {
    let defs = doc
        .get("definitions")
        .and_then(Json::as_object)
        .ok_or_else(|| OpenApiError::Schema {
            at: "definitions".into(),
            msg: "the document has no `definitions` object (is it OpenAPI v2?)".into(),
        })?;
    let ctx = Ctx { defs };
    let sorted: BTreeMap<&String, &Json> = defs.iter().collect();
    let mut out = Vec::new();
    for (key, def) in sorted {
        if is_inline(def) {
            continue;
        }
        let (pkg, name) = package_of(key);
        let required: Vec<&str> = def
            .get("required")
            .and_then(Json::as_array)
            .map(|a| a.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        // A definition for exactly one group/version/kind is a top-level object: its apiVersion
        // and kind are fixed, and its read-only status is left out.
        let gvk = def
            .get("x-kubernetes-group-version-kind")
            .and_then(Json::as_array)
            .filter(|a| a.len() == 1)
            .and_then(|a| a.first())
            .map(|g| {
                let s = |k: &str| g.get(k).and_then(Json::as_str).unwrap_or_default();
                let api_version = if s("group").is_empty() {
                    s("version").to_string()
                } else {
                    format!("{}/{}", s("group"), s("version"))
                };
                (api_version, s("kind").to_string())
            });
        let props = properties(def);
        let mut attrs = Vec::new();
        for (pname, p) in props {
            let at = format!("definitions.{key}.properties.{pname}");
            let doc = desc(p);
            let mut attr = Attr {
                name: pname.clone(),
                ty: ctx.ty(p, &at)?,
                doc,
                required: required.contains(&pname.as_str()),
                default: None,
            };
            if let Some((api_version, kind)) = &gvk {
                let fixed = match pname.as_str() {
                    "apiVersion" => Some(api_version),
                    "kind" => Some(kind),
                    "status" => continue,
                    _ => None,
                };
                if let Some(v) = fixed {
                    let lit = super::emit::str_lit(v);
                    attr.ty = Ty::Lit(lit.clone());
                    attr.default = Some(lit);
                    attr.required = true;
                }
            }
            attrs.push(attr);
        }
        out.push(SchemaDef {
            pkg,
            name,
            doc: desc(def),
            attrs,
            checks: Vec::new(),
            source: key.clone(),
        });
    }
    Ok(out)
}

/// A schema's `properties`, sorted by name (generated attributes come in that order).
pub fn properties(def: &Json) -> BTreeMap<&String, &Json> {
    def.get("properties")
        .and_then(Json::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default()
}

pub fn desc(v: &Json) -> String {
    v.get("description")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .trim()
        .to_string()
}
