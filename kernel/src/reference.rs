//! Implicit references between resources: `$kusion_path` in string values.
//!
//! Two spellings are accepted:
//! - **bracketed** (always unambiguous): `$kusion_path[<id>]<path>`, e.g.
//!   `$kusion_path[networking.k8s.io/v1:Ingress:web:front].spec.rules[0].host`. The ID may also be
//!   quoted: `$kusion_path["<id>"]`. An empty path means the whole attributes object.
//! - **legacy dotted** (upstream's): `$kusion_path.<id>.<path>`. Since IDs may contain dots, the
//!   ID is the prefix that names a resource of the spec; when two resources could match, the
//!   reference is ambiguous and must be written bracketed.
//!
//! Paths use the [`FieldPath`] syntax: `spec.ports[0].port`, `metadata.labels["app.kubernetes.io/name"]`.
//! A string that is exactly one reference is replaced by the referenced value with its type; a
//! reference inside a longer string is replaced by the value's text.

use std::collections::HashSet;

/// A set of resource IDs references may name.
pub trait KnownIds {
    /// Whether a resource has the ID.
    fn has(&self, id: &str) -> bool;
}

impl KnownIds for HashSet<&str> {
    fn has(&self, id: &str) -> bool {
        self.contains(id)
    }
}

impl KnownIds for HashSet<String> {
    fn has(&self, id: &str) -> bool {
        self.contains(id)
    }
}

use kusion_sdk::{FieldPath, Resource};
use serde_json::{Map, Value};

/// What a reference starts with: `$kusion_path.<id>.<path>`.
pub const PREFIX: &str = "$kusion_path";

/// One reference found in a string value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The referenced resource's ID.
    pub id: String,
    /// Path inside the referenced resource's attributes.
    pub path: FieldPath,
    /// Byte range of the reference inside its string.
    pub start: usize,
    /// End of that range (exclusive).
    pub end: usize,
}

/// A `$kusion_path` reference that cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error(
        "resource {resource:?}: {text:?} refers to resource {target:?}, which is not in the spec"
    )]
    /// It names a resource the spec does not have.
    MissingResource {
        /// The resource holding the reference.
        resource: String,
        /// The reference as written.
        text: String,
        /// The ID it names.
        target: String,
    },
    #[error(
        "resource {resource:?}: {text:?} refers to {path} of {target:?}, which has no such field"
    )]
    /// It names a field the resource does not have.
    MissingField {
        /// The resource holding the reference.
        resource: String,
        /// The reference as written.
        text: String,
        /// The ID it names.
        target: String,
        /// The missing field's path.
        path: String,
    },
    #[error(
        "resource {resource:?}: {text:?} is ambiguous: it could name {candidates:?}; write it as $kusion_path[<id>].<path>"
    )]
    /// Its ID is held by several targets' resources.
    Ambiguous {
        /// The resource holding the reference.
        resource: String,
        /// The reference as written.
        text: String,
        /// The state keys it could mean.
        candidates: Vec<String>,
    },
    /// It cannot be read as a reference.
    #[error("resource {resource:?}: malformed reference {text:?}: {reason}")]
    Malformed {
        /// The resource holding it.
        resource: String,
        /// The text.
        text: String,
        /// What is wrong.
        reason: String,
    },
}

/// Characters that end a legacy reference embedded in a longer string.
fn ends_token(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\''
                | ','
                | ';'
                | ')'
                | '}'
                | '>'
                | '<'
                | '='
                | '@'
                | '|'
                | '&'
                | '?'
                | '#'
                | '!'
        )
}

/// Find every reference in `text`. `known_ids` is used to split legacy dotted references.
pub fn find_references(
    text: &str,
    known_ids: &impl KnownIds,
    resource: &str,
) -> Result<Vec<Reference>, ReferenceError> {
    let mut found = Vec::new();
    let mut search_from = 0;
    while let Some(offset) = text[search_from..].find(PREFIX) {
        let start = search_from + offset;
        let after = start + PREFIX.len();
        let malformed = |reason: &str| ReferenceError::Malformed {
            resource: resource.to_string(),
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let (id, path_start) = match text[after..].chars().next() {
            Some('[') => bracketed_id(text, after + 1).map_err(&malformed)?,
            Some('.') => legacy_id(text, after + 1, known_ids, resource)?,
            _ => return Err(malformed("expected '[' or '.' after $kusion_path")),
        };
        if !known_ids.has(id.as_str()) {
            return Err(ReferenceError::MissingResource {
                resource: resource.to_string(),
                text: text.to_string(),
                target: id,
            });
        }
        let mut path_text_start = path_start;
        if text[path_start..].starts_with('.') {
            path_text_start += 1;
        }
        let (path, used) =
            if text[path_start..].starts_with('.') || text[path_start..].starts_with('[') {
                FieldPath::parse_prefix(&text[path_text_start..])
                    .map_err(|e| malformed(&e.to_string()))?
            } else {
                (FieldPath::root(), 0)
            };
        let end = if used == 0 {
            path_start
        } else {
            path_text_start + used
        };
        found.push(Reference {
            id,
            path,
            start,
            end,
        });
        search_from = end.max(after);
    }
    Ok(found)
}

/// `[id]` or `["id"]`; `open` is just past `[`. Returns the ID and the byte after `]`.
fn bracketed_id(text: &str, open: usize) -> Result<(String, usize), &'static str> {
    let rest = &text[open..];
    if let Some(quoted) = rest.strip_prefix('"') {
        let close = quoted.find('"').ok_or("unterminated quoted ID")?;
        let after = open + 1 + close + 1;
        if !text[after..].starts_with(']') {
            return Err("expected ']' after the quoted ID");
        }
        return Ok((quoted[..close].to_string(), after + 1));
    }
    let close = rest.find(']').ok_or("missing ']' after the ID")?;
    if close == 0 {
        return Err("empty ID");
    }
    Ok((rest[..close].to_string(), open + close + 1))
}

/// Legacy `.<id>.<path>`: pick the known ID that is a prefix of the text up to a `.`.
fn legacy_id(
    text: &str,
    start: usize,
    known_ids: &impl KnownIds,
    resource: &str,
) -> Result<(String, usize), ReferenceError> {
    let token_end = text[start..]
        .find(ends_token)
        .map_or(text.len(), |o| start + o);
    let token = &text[start..token_end];
    let mut candidates: Vec<&str> = Vec::new();
    for (i, c) in token.char_indices() {
        if c == '.' && known_ids.has(&token[..i]) {
            candidates.push(&token[..i]);
        }
    }
    if known_ids.has(token) {
        candidates.push(token);
    }
    match candidates.as_slice() {
        [] => {
            // Name what the user most likely meant: upstream's split on the first dot.
            let target = token.split('.').next().unwrap_or(token).to_string();
            Err(ReferenceError::MissingResource {
                resource: resource.to_string(),
                text: text.to_string(),
                target,
            })
        }
        [one] => Ok((one.to_string(), start + one.len())),
        many => Err(ReferenceError::Ambiguous {
            resource: resource.to_string(),
            text: text.to_string(),
            candidates: many.iter().map(|s| s.to_string()).collect(),
        }),
    }
}

/// Visit every string in a JSON value.
fn for_each_string<'a>(
    value: &'a Value,
    f: &mut impl FnMut(&'a str) -> Result<(), ReferenceError>,
) -> Result<(), ReferenceError> {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().try_for_each(|v| for_each_string(v, f)),
        Value::Object(map) => map.values().try_for_each(|v| for_each_string(v, f)),
        _ => Ok(()),
    }
}

/// All references in a resource's attributes.
pub fn references_of(
    resource: &Resource,
    known_ids: &impl KnownIds,
) -> Result<Vec<Reference>, ReferenceError> {
    let mut refs = Vec::new();
    for value in resource.attributes.values() {
        for_each_string(value, &mut |s| {
            if s.contains(PREFIX) {
                refs.extend(find_references(s, known_ids, &resource.id)?);
            }
            Ok(())
        })?;
    }
    Ok(refs)
}

/// The paths of `resource` whose strings refer to a value `is_sensitive(id, path)` says is
/// sensitive: once resolved, those fields carry the secret, so they are sensitive too.
pub fn sensitive_uses(
    resource: &Resource,
    known_ids: &impl KnownIds,
    is_sensitive: &dyn Fn(&str, &FieldPath) -> bool,
) -> Result<Vec<FieldPath>, ReferenceError> {
    fn walk(
        value: &Value,
        at: &FieldPath,
        resource: &str,
        known_ids: &impl KnownIds,
        is_sensitive: &dyn Fn(&str, &FieldPath) -> bool,
        out: &mut Vec<FieldPath>,
    ) -> Result<(), ReferenceError> {
        match value {
            Value::String(s) if s.contains(PREFIX) => {
                let refs = find_references(s, known_ids, resource)?;
                if refs.iter().any(|r| is_sensitive(&r.id, &r.path)) {
                    out.push(at.clone());
                }
                Ok(())
            }
            Value::Array(items) => items.iter().enumerate().try_for_each(|(i, v)| {
                walk(
                    v,
                    &at.child_index(i),
                    resource,
                    known_ids,
                    is_sensitive,
                    out,
                )
            }),
            Value::Object(map) => map.iter().try_for_each(|(k, v)| {
                walk(v, &at.child_key(k), resource, known_ids, is_sensitive, out)
            }),
            _ => Ok(()),
        }
    }
    let mut out = Vec::new();
    for (key, value) in &resource.attributes {
        walk(
            value,
            &FieldPath::root().child_key(key),
            &resource.id,
            known_ids,
            is_sensitive,
            &mut out,
        )?;
    }
    Ok(out)
}

/// The value a reference resolves to, if its resource's attributes are known.
pub enum Lookup<'a> {
    /// The referenced resource's attributes as applied (or planned) in this run.
    Known(&'a Map<String, Value>),
    /// Not known yet (a preview of a resource that will be created): leave the reference in place.
    Unknown,
}

/// Replace every reference in `resource`'s attributes. Returns the resolved resource and whether
/// any reference had to be left unresolved because its target is [`Lookup::Unknown`].
pub fn resolve<'a>(
    resource: &Resource,
    known_ids: &impl KnownIds,
    lookup: &dyn Fn(&str) -> Lookup<'a>,
) -> Result<(Resource, bool), ReferenceError> {
    let mut resolved = resource.clone();
    let mut unresolved = false;
    for value in resolved.attributes.values_mut() {
        resolve_value(value, &resource.id, known_ids, lookup, &mut unresolved)?;
    }
    Ok((resolved, unresolved))
}

/// The value at `path` in an attributes map, copying only what the path selects (the whole
/// map only for the empty path).
fn value_at(attrs: &Map<String, Value>, path: &FieldPath) -> Option<Value> {
    if path.0.is_empty() {
        return Some(Value::Object(attrs.clone()));
    }
    path.get_in(attrs).cloned()
}

fn resolve_value<'a>(
    value: &mut Value,
    resource: &str,
    known_ids: &impl KnownIds,
    lookup: &dyn Fn(&str) -> Lookup<'a>,
    unresolved: &mut bool,
) -> Result<(), ReferenceError> {
    match value {
        Value::Array(items) => items
            .iter_mut()
            .try_for_each(|v| resolve_value(v, resource, known_ids, lookup, unresolved)),
        Value::Object(map) => map
            .values_mut()
            .try_for_each(|v| resolve_value(v, resource, known_ids, lookup, unresolved)),
        Value::String(s) if s.contains(PREFIX) => {
            let refs = find_references(s, known_ids, resource)?;
            let mut values = Vec::with_capacity(refs.len());
            for r in &refs {
                match lookup(&r.id) {
                    Lookup::Unknown => {
                        *unresolved = true;
                        return Ok(());
                    }
                    Lookup::Known(attrs) => {
                        let found = value_at(attrs, &r.path).ok_or_else(|| {
                            ReferenceError::MissingField {
                                resource: resource.to_string(),
                                text: s.clone(),
                                target: r.id.clone(),
                                path: r.path.to_string(),
                            }
                        })?;
                        values.push(found);
                    }
                }
            }
            if refs.len() == 1 && refs[0].start == 0 && refs[0].end == s.len() {
                *value = values.pop().expect("one value per reference");
                return Ok(());
            }
            let mut out = String::with_capacity(s.len());
            let mut last = 0;
            for (r, v) in refs.iter().zip(values) {
                out.push_str(&s[last..r.start]);
                match v {
                    Value::String(text) => out.push_str(&text),
                    other => out.push_str(&other.to_string()),
                }
                last = r.end;
            }
            out.push_str(&s[last..]);
            *value = Value::String(out);
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids<'a>(list: &[&'a str]) -> HashSet<&'a str> {
        list.iter().copied().collect()
    }

    #[test]
    fn bracketed_and_legacy_forms() {
        let known = ids(&[
            "v1:Service:demo:web",
            "networking.k8s.io/v1:Ingress:demo:front",
        ]);
        let r = find_references(
            "$kusion_path.v1:Service:demo:web.spec.ports[0].port",
            &known,
            "x",
        )
        .unwrap();
        assert_eq!(r[0].id, "v1:Service:demo:web");
        assert_eq!(r[0].path.to_string(), "spec.ports[0].port");
        let r = find_references(
            "$kusion_path[networking.k8s.io/v1:Ingress:demo:front].spec.rules[0].host",
            &known,
            "x",
        )
        .unwrap();
        assert_eq!(r[0].id, "networking.k8s.io/v1:Ingress:demo:front");
        assert_eq!(r[0].path.to_string(), "spec.rules[0].host");
        let r = find_references(
            "$kusion_path.networking.k8s.io/v1:Ingress:demo:front.metadata.name",
            &known,
            "x",
        )
        .unwrap();
        assert_eq!(r[0].id, "networking.k8s.io/v1:Ingress:demo:front");
        let r = find_references("$kusion_path[\"v1:Service:demo:web\"]", &known, "x").unwrap();
        assert!(r[0].path.0.is_empty());
    }

    #[test]
    fn fields_filled_from_sensitive_values_are_found() {
        let known = ids(&["v1:Secret:a:s", "t:cfg"]);
        let mut r = Resource::new("t:use", "Test", Default::default());
        r.attributes.insert(
            "env".into(),
            json!([{"name": "A", "value": "pw=$kusion_path[v1:Secret:a:s].data.pw"},
                   {"name": "B", "value": "$kusion_path[t:cfg].name"},
                   {"name": "C", "value": "$kusion_path[v1:Secret:a:s]"}]),
        );
        let data = FieldPath::parse("data").unwrap();
        let found = sensitive_uses(&r, &known, &|id, path| {
            id == "v1:Secret:a:s" && (data.is_prefix_of(path) || path.is_prefix_of(&data))
        })
        .unwrap();
        let found: Vec<String> = found.iter().map(|p| p.to_string()).collect();
        assert_eq!(found, vec!["env[0].value", "env[2].value"]);
    }

    #[test]
    fn ambiguous_and_missing() {
        let known = ids(&["a:b", "a:b.c"]);
        let e = find_references("$kusion_path.a:b.c.d", &known, "x").unwrap_err();
        assert!(matches!(e, ReferenceError::Ambiguous { .. }), "{e}");
        let e = find_references("$kusion_path.z:z.d", &known, "x").unwrap_err();
        assert!(e.to_string().contains("\"z:z\""), "{e}");
        let e = find_references("$kusion_path[a:b", &known, "x").unwrap_err();
        assert!(matches!(e, ReferenceError::Malformed { .. }));
    }

    #[test]
    fn resolves_with_type_and_inside_text() {
        let known = ids(&["t:vpc", "t:subnet"]);
        let vpc = json!({"id": "vpc-1", "cidr": {"size": 16}, "ports": [80, 443]});
        let vpc = vpc.as_object().unwrap();
        let mut subnet = Resource::new("t:subnet", "Test", Default::default());
        subnet
            .attributes
            .insert("vpcId".into(), json!("$kusion_path[t:vpc].id"));
        subnet
            .attributes
            .insert("size".into(), json!("$kusion_path.t:vpc.cidr.size"));
        subnet
            .attributes
            .insert("port".into(), json!("$kusion_path[t:vpc].ports[1]"));
        subnet.attributes.insert(
            "label".into(),
            json!("vpc=$kusion_path.t:vpc.id/size=$kusion_path[t:vpc].cidr.size"),
        );
        let refs = references_of(&subnet, &known).unwrap();
        assert_eq!(refs.len(), 5);
        let (resolved, unresolved) = resolve(&subnet, &known, &|_| Lookup::Known(vpc)).unwrap();
        assert!(!unresolved);
        assert_eq!(resolved.attributes["vpcId"], json!("vpc-1"));
        assert_eq!(resolved.attributes["size"], json!(16));
        assert_eq!(resolved.attributes["port"], json!(443));
        assert_eq!(resolved.attributes["label"], json!("vpc=vpc-1/size=16"));
        let e = {
            subnet
                .attributes
                .insert("bad".into(), json!("$kusion_path[t:vpc].nope"));
            resolve(&subnet, &known, &|_| Lookup::Known(vpc)).unwrap_err()
        };
        assert!(
            e.to_string().contains("t:subnet")
                && e.to_string().contains("t:vpc")
                && e.to_string().contains("nope"),
            "{e}"
        );
        let (_, unresolved) = resolve(&subnet, &known, &|_| Lookup::Unknown).unwrap();
        assert!(unresolved);
    }
}
