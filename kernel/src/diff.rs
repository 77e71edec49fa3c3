//! Field-level diffs between JSON values, with ignored and sensitive fields.

use kusion_sdk::{FieldPath, Resource};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What replaces a sensitive value in every output.
pub const MASK: &str = "(sensitive value)";
/// What a changed sensitive value shows as next to its masked old value.
pub const MASK_CHANGED: &str = "(changed sensitive value)";

/// How one field differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ChangeKind {
    /// Only in the new value.
    Added,
    /// Only in the old value.
    Removed,
    /// In both, different.
    Changed,
}

/// One changed field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    #[serde(
        serialize_with = "path_as_string",
        deserialize_with = "path_from_string"
    )]
    /// Where.
    pub path: FieldPath,
    /// How.
    pub kind: ChangeKind,
    /// The value before (None when added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// The value after (None when removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

fn path_as_string<S: serde::Serializer>(path: &FieldPath, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string())
}

fn path_from_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<FieldPath, D::Error> {
    let text = String::deserialize(d)?;
    FieldPath::parse(&text).map_err(serde::de::Error::custom)
}

/// The changes that turn `old` into `new`. Objects are compared key by key, lists element by
/// element; anything else is compared whole.
pub fn diff(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    diff_into(&mut Vec::new(), old, new, &mut out);
    out
}

/// [`diff`] of two attribute maps, without building values around them.
pub fn diff_maps(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<FieldChange> {
    let mut out = Vec::new();
    diff_objects(&mut Vec::new(), old, new, &mut out);
    out
}

/// The walk keeps the current path as a stack of borrowed segments and builds an owned
/// [`FieldPath`] only for a change: converged stacks compare millions of equal fields.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn owned_path(path: &[Step<'_>]) -> FieldPath {
    FieldPath(
        path.iter()
            .map(|s| match s {
                Step::Key(k) => kusion_sdk::Segment::Key((*k).to_string()),
                Step::Index(i) => kusion_sdk::Segment::Index(*i),
            })
            .collect(),
    )
}

fn change<'a>(
    path: &mut Vec<Step<'a>>,
    last: Step<'a>,
    kind: ChangeKind,
    old: Option<&Value>,
    new: Option<&Value>,
) -> FieldChange {
    path.push(last);
    let path_owned = owned_path(path);
    path.pop();
    FieldChange {
        path: path_owned,
        kind,
        old: old.cloned(),
        new: new.cloned(),
    }
}

fn diff_objects<'a>(
    path: &mut Vec<Step<'a>>,
    a: &'a Map<String, Value>,
    b: &'a Map<String, Value>,
    out: &mut Vec<FieldChange>,
) {
    // Keys of `a` also in `b`: when that is all of `b`, nothing was added.
    let mut shared = 0;
    for (key, va) in a {
        match b.get(key) {
            Some(vb) => {
                shared += 1;
                path.push(Step::Key(key));
                diff_into(path, va, vb, out);
                path.pop();
            }
            None => out.push(change(
                path,
                Step::Key(key),
                ChangeKind::Removed,
                Some(va),
                None,
            )),
        }
    }
    if b.len() > shared {
        for (key, vb) in b {
            if !a.contains_key(key) {
                out.push(change(
                    path,
                    Step::Key(key),
                    ChangeKind::Added,
                    None,
                    Some(vb),
                ));
            }
        }
    }
}

fn diff_into<'a>(
    path: &mut Vec<Step<'a>>,
    old: &'a Value,
    new: &'a Value,
    out: &mut Vec<FieldChange>,
) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => diff_objects(path, a, b, out),
        (Value::Array(a), Value::Array(b)) => {
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                path.push(Step::Index(i));
                diff_into(path, va, vb, out);
                path.pop();
            }
            for (i, va) in a.iter().enumerate().skip(b.len()) {
                out.push(change(
                    path,
                    Step::Index(i),
                    ChangeKind::Removed,
                    Some(va),
                    None,
                ));
            }
            for (i, vb) in b.iter().enumerate().skip(a.len()) {
                out.push(change(
                    path,
                    Step::Index(i),
                    ChangeKind::Added,
                    None,
                    Some(vb),
                ));
            }
        }
        _ if numbers_equal(old, new) => {}
        _ => out.push(FieldChange {
            path: owned_path(path),
            kind: ChangeKind::Changed,
            old: Some(old.clone()),
            new: Some(new.clone()),
        }),
    }
}

/// `1` and `1.0` are the same value for a diff (YAML and JSON sources disagree on the form).
fn numbers_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.as_f64().is_some() && x.as_f64() == y.as_f64())
        }
        _ => a == b,
    }
}

/// Remove every field named by `paths` (ignore-fields) from `value`.
pub fn strip(value: &mut Value, paths: &[FieldPath]) {
    for path in paths {
        path.remove(value);
    }
}

/// Set the value at `path`, creating objects on the way; list elements must already exist.
/// Returns false when the path cannot be reached.
pub fn set_path(value: &mut Value, path: &FieldPath, new: Value) -> bool {
    use kusion_sdk::Segment;
    let Some((last, parents)) = path.0.split_last() else {
        *value = new;
        return true;
    };
    let mut current = value;
    for segment in parents {
        current = match (segment, current) {
            (Segment::Key(k), Value::Object(map)) => map
                .entry(k.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            (Segment::Index(i), Value::Array(items)) if *i < items.len() => &mut items[*i],
            _ => return false,
        };
    }
    match (last, current) {
        (Segment::Key(k), Value::Object(map)) => {
            map.insert(k.clone(), new);
            true
        }
        (Segment::Index(i), Value::Array(items)) if *i < items.len() => {
            items[*i] = new;
            true
        }
        _ => false,
    }
}

/// Like [`set_path`], but an index one past the end of a list appends (how an `Added` list
/// element is applied).
pub fn set_path_or_push(value: &mut Value, path: &FieldPath, new: Value) -> bool {
    use kusion_sdk::Segment;
    if let Some((Segment::Index(i), parents)) = path.0.split_last()
        && let Some(Value::Array(items)) = FieldPath(parents.to_vec()).get_mut(value)
        && *i == items.len()
    {
        items.push(new);
        return true;
    }
    set_path(value, path, new)
}

/// Whether any string leaf of `value` starts with `prefix` (a secret reference, a sealed value).
pub(crate) fn any_string_starts_with(value: &Value, prefix: &str) -> bool {
    match value {
        Value::String(s) => s.starts_with(prefix),
        Value::Array(items) => items.iter().any(|v| any_string_starts_with(v, prefix)),
        Value::Object(map) => map.values().any(|v| any_string_starts_with(v, prefix)),
        _ => false,
    }
}

/// Whether `path` lies at or under one of `sensitive`.
pub fn is_sensitive(path: &FieldPath, sensitive: &[FieldPath]) -> bool {
    sensitive.iter().any(|s| s.is_prefix_of(path))
}

/// Replace every value at or under `sensitive` by [`MASK`].
pub fn mask(value: &mut Value, sensitive: &[FieldPath]) {
    for path in sensitive {
        if let Some(v) = path.get_mut(value) {
            mask_all(v);
        }
    }
}

/// Mask leaf values but keep the shape, so a masked Secret still shows its keys.
fn mask_all(value: &mut Value) {
    match value {
        Value::Object(map) => map.values_mut().for_each(mask_all),
        Value::Array(items) => items.iter_mut().for_each(mask_all),
        other => *other = Value::String(MASK.to_string()),
    }
}

/// Mask the old/new values of changes under a sensitive path.
pub fn mask_changes(changes: &mut [FieldChange], sensitive: &[FieldPath]) {
    for change in changes {
        if is_sensitive(&change.path, sensitive) {
            change.old.iter_mut().for_each(mask_all);
            change.new.iter_mut().for_each(mask_all);
        } else {
            // A change above a sensitive path (a whole Secret added) carries it inside.
            let below: Vec<FieldPath> = sensitive
                .iter()
                .filter(|s| change.path.is_prefix_of(s))
                .map(|s| FieldPath(s.0[change.path.0.len()..].to_vec()))
                .collect();
            if !below.is_empty() {
                change.old.iter_mut().for_each(|v| mask(v, &below));
                change.new.iter_mut().for_each(|v| mask(v, &below));
            }
        }
    }
}

/// Sensitive paths the kernel knows without asking a runtime: a Kubernetes Secret's `data` and
/// `stringData`.
pub fn builtin_sensitive_paths(resource: &Resource) -> Vec<FieldPath> {
    let is_secret = resource.resource_type == crate::id::KUBERNETES
        && resource.attributes.get("kind").and_then(Value::as_str) == Some("Secret")
        && resource
            .attributes
            .get("apiVersion")
            .and_then(Value::as_str)
            == Some("v1");
    if is_secret {
        vec![
            FieldPath::root().child_key("data"),
            FieldPath::root().child_key("stringData"),
        ]
    } else {
        Vec::new()
    }
}

/// Render changes for a person, one line each: `~ spec.replicas: 1 => 2`.
pub fn render_changes(changes: &[FieldChange]) -> String {
    let show = |v: &Option<Value>| {
        v.as_ref().map_or_else(String::new, |v| {
            serde_json::to_string(v).unwrap_or_default()
        })
    };
    let mut out = String::new();
    for c in changes {
        let line = match c.kind {
            ChangeKind::Added => format!("+ {}: {}\n", c.path, show(&c.new)),
            ChangeKind::Removed => format!("- {}: {}\n", c.path, show(&c.old)),
            ChangeKind::Changed => format!("~ {}: {} => {}\n", c.path, show(&c.old), show(&c.new)),
        };
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_level_changes() {
        let old = json!({"spec": {"replicas": 1, "ports": [80], "keep": "x"}, "gone": true});
        let new =
            json!({"spec": {"replicas": 2, "ports": [80, 443], "keep": "x"}, "added": {"a": 1}});
        let changes = diff(&old, &new);
        let text = render_changes(&changes);
        assert_eq!(
            text,
            "~ spec.replicas: 1 => 2\n+ spec.ports[1]: 443\n- gone: true\n+ added: {\"a\":1}\n"
        );
        assert!(diff(&json!({"a": 1}), &json!({"a": 1.0})).is_empty());
    }

    #[test]
    fn ignore_and_mask() {
        let mut v = json!({"spec": {"replicas": 3}, "data": {"password": "hunter2"}});
        strip(&mut v, &[FieldPath::parse("spec.replicas").unwrap()]);
        assert_eq!(v, json!({"spec": {}, "data": {"password": "hunter2"}}));
        mask(&mut v, &[FieldPath::parse("data").unwrap()]);
        assert_eq!(v["data"]["password"], json!(MASK));

        let mut changes = diff(
            &json!({}),
            &json!({"data": {"password": "hunter2"}, "kind": "Secret"}),
        );
        mask_changes(&mut changes, &[FieldPath::parse("data").unwrap()]);
        let text = render_changes(&changes);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains(MASK));
    }
}
