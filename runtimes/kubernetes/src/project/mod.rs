//! Projection of a live object onto the fields kusion manages.
//!
//! With server-side apply, kusion only owns the fields it sends. Everything else the server
//! stores (status, uid, defaults such as `protocol: TCP`, fields other managers own) is not
//! kusion's business and must not show up as a diff. So a live object is projected onto a
//! [`Guide`]: the planned object, the prior one, and the fields kusion's field manager owns on
//! the server (its `managedFields` entry). The owned fields matter most: an apply removes exactly
//! the owned fields the new configuration drops (unless another manager also owns them), so they
//! must stay visible for the removal to show as a change.
//!
//! Lists need their schema's semantics (associative by some key fields, a set, or atomic) to be
//! projected the way the server merges them. The `managedFields` entries of every manager say
//! it for every list they touch (`k:{..}` items, `v:` values, or the whole list as one leaf), so
//! [`Hints`] are learned from them; only lists no manager describes fall back to guessing.

use std::collections::HashMap;

use base64::Engine;
use serde_json::{Map, Value};

/// Fields the server always owns, removed even if a spec mentions them.
const SERVER_METADATA: &[&str] = &[
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
];

/// Keys that identify an item of an associative list, in order of preference, for lists no
/// `managedFields` entry describes.
const MERGE_KEYS: &[&str] = &[
    "name",
    "mountPath",
    "containerPort",
    "port",
    "devicePath",
    "ip",
    "type",
];

/// How the server merges a list (its schema's `x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Items identified by these key fields.
    Map(Vec<String>),
    /// Scalars identified by their value.
    Set,
    /// Replaced whole.
    Atomic,
}

/// List semantics by field path (field names, `[]` standing for "an item of the list").
#[derive(Debug, Default, Clone)]
pub struct Hints {
    by_path: HashMap<Vec<String>, (ListKind, bool)>,
}

impl Hints {
    /// Hints learned from `objects`' `managedFields` (every manager's entry).
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Hints {
        let mut hints = Hints::default();
        for obj in objects {
            hints.learn(obj);
        }
        hints
    }

    /// Learn from one object's `managedFields`.
    pub fn learn(&mut self, obj: &Value) {
        let Some(entries) = obj
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
        else {
            return;
        };
        for entry in entries {
            if let Some(fields) = entry.get("fieldsV1").and_then(Value::as_object) {
                self.learn_node(fields, Some(obj), &mut Vec::new());
            }
        }
    }

    fn insert(&mut self, path: &[String], kind: ListKind, certain: bool) {
        match self.by_path.get(path) {
            // What an entry shows item by item is certain; a list owned as one leaf is only
            // probably atomic (a manager may have applied it empty), so never overrides.
            Some((_, true)) if !certain => {}
            _ => {
                self.by_path.insert(path.to_vec(), (kind, certain));
            }
        }
    }

    fn learn_node(
        &mut self,
        node: &Map<String, Value>,
        live: Option<&Value>,
        path: &mut Vec<String>,
    ) {
        for (key, child) in node {
            let child = child.as_object();
            if let Some(name) = key.strip_prefix("f:") {
                path.push(name.to_string());
                let lv = live.and_then(|l| l.get(name));
                match child {
                    Some(c) if has_fields(c) => self.learn_node(c, lv, path),
                    // Owned as one leaf while the live list has items: the list is atomic.
                    _ => {
                        if lv.and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
                            self.insert(path, ListKind::Atomic, false);
                        }
                    }
                }
                path.pop();
            } else if let Some(item_key) = key.strip_prefix("k:") {
                let Ok(Value::Object(want)) = serde_json::from_str::<Value>(item_key) else {
                    continue;
                };
                let mut names: Vec<String> = want.keys().cloned().collect();
                names.sort();
                self.insert(path, ListKind::Map(names), true);
                let item = live
                    .and_then(Value::as_array)
                    .and_then(|items| items.iter().find(|i| key_matches(i, &want)));
                if let Some(c) = child {
                    path.push("[]".into());
                    self.learn_node(c, item, path);
                    path.pop();
                }
            } else if key.starts_with("v:") {
                self.insert(path, ListKind::Set, true);
            } else if let Some(index) = key.strip_prefix("i:") {
                let item = index
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| live.and_then(Value::as_array).and_then(|a| a.get(i)));
                if let Some(c) = child {
                    path.push("[]".into());
                    self.learn_node(c, item, path);
                    path.pop();
                }
            }
        }
    }

    fn get(&self, path: &[String]) -> Option<&ListKind> {
        self.by_path.get(path).map(|(k, _)| k)
    }
}

/// Whether a `fieldsV1` node has children other than `.` (the node itself).
fn has_fields(node: &Map<String, Value>) -> bool {
    node.keys().any(|k| k != ".")
}

/// Whether list item `item` has every key field of a `k:{..}` entry with that value.
fn key_matches(item: &Value, want: &Map<String, Value>) -> bool {
    want.iter()
        .all(|(f, v)| item.get(f).is_some_and(|iv| values_equal(iv, v)))
}

/// The `fieldsV1` of the `Apply` entry of field manager `manager` in `live`: the fields its last
/// server-side apply set and it still owns.
pub fn owned_fields<'a>(live: &'a Value, manager: &str) -> Option<&'a Map<String, Value>> {
    live.pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|e| {
            e.get("manager").and_then(Value::as_str) == Some(manager)
                && e.get("operation").and_then(Value::as_str) == Some("Apply")
        })?
        .get("fieldsV1")?
        .as_object()
}

/// `owned` without the fields kusion fills in itself (present in `body`, the object sent, but
/// not in `planned`, the object as written): those are not the spec's and stay out of what is
/// shown and recorded, as server defaults do.
pub fn without_filled(
    owned: &Map<String, Value>,
    body: &Value,
    planned: Option<&Value>,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, child) in owned {
        if let Some(name) = key.strip_prefix("f:") {
            let (b, p) = (body.get(name), planned.and_then(|p| p.get(name)));
            if b.is_some() && p.is_none() {
                continue; // filled in by kusion
            }
            let child = match (child.as_object(), b) {
                (Some(c), Some(b)) if has_fields(c) => Value::Object(without_filled(c, b, p)),
                _ => child.clone(),
            };
            out.insert(key.clone(), child);
        } else if let Some(item_key) = key.strip_prefix("k:") {
            let found = serde_json::from_str::<Value>(item_key)
                .ok()
                .and_then(|want| {
                    let want = want.as_object()?.clone();
                    body.as_array()?.iter().position(|i| key_matches(i, &want))
                });
            let child = match (child.as_object(), found) {
                (Some(c), Some(i)) if has_fields(c) => {
                    Value::Object(without_filled(c, &body[i], planned.and_then(|p| p.get(i))))
                }
                _ => child.clone(),
            };
            out.insert(key.clone(), child);
        } else {
            out.insert(key.clone(), child.clone());
        }
    }
    out
}

/// Whether applying `value` keeps every field of `owned` (a `fieldsV1` node): then the apply
/// removes nothing its manager owned. Anything not understood counts as not kept.
pub fn keeps_owned(value: &Value, owned: &Map<String, Value>) -> bool {
    owned.iter().all(|(key, child)| {
        let below = |v: &Value| match child.as_object() {
            Some(c) => keeps_owned(v, c),
            None => true,
        };
        if key == "." {
            true
        } else if let Some(name) = key.strip_prefix("f:") {
            value
                .as_object()
                .and_then(|m| m.get(name))
                .is_some_and(|v| !v.is_null() && below(v))
        } else if let Some(item_key) = key.strip_prefix("k:") {
            let Ok(Value::Object(want)) = serde_json::from_str::<Value>(item_key) else {
                return false;
            };
            value
                .as_array()
                .and_then(|items| items.iter().find(|i| key_matches(i, &want)))
                .is_some_and(below)
        } else if let Some(v) = key.strip_prefix("v:") {
            let Ok(want) = serde_json::from_str::<Value>(v) else {
                return false;
            };
            value
                .as_array()
                .is_some_and(|items| items.iter().any(|i| values_equal(i, &want)))
        } else if let Some(index) = key.strip_prefix("i:") {
            index
                .parse::<usize>()
                .ok()
                .and_then(|i| value.as_array()?.get(i))
                .is_some_and(below)
        } else {
            false
        }
    })
}

/// What a projection keeps of a live value: the fields of the planned object, of the prior one,
/// and those kusion's manager owns (a `fieldsV1` node).
#[derive(Debug, Clone, Copy, Default)]
pub struct Guide<'a> {
    pub planned: Option<&'a Value>,
    pub prior: Option<&'a Value>,
    pub owned: Option<&'a Map<String, Value>>,
}

impl<'a> Guide<'a> {
    fn child(&self, key: &str) -> Guide<'a> {
        Guide {
            planned: self.planned.and_then(|p| p.as_object()?.get(key)),
            prior: self.prior.and_then(|p| p.as_object()?.get(key)),
            owned: self
                .owned
                .and_then(|o| o.get(&format!("f:{key}"))?.as_object()),
        }
    }

    /// Owned as a whole (a leaf entry): the whole live value is kusion's.
    fn owned_whole(&self) -> bool {
        self.owned.is_some_and(|o| !has_fields(o))
    }

    /// Field names to keep of a live map, when the guide describes a map.
    fn keys(&self) -> Option<Vec<&'a str>> {
        let mut keys: Vec<&str> = Vec::new();
        let mut described = false;
        for side in [self.planned, self.prior].into_iter().flatten() {
            if let Some(m) = side.as_object() {
                described = true;
                keys.extend(m.keys().map(String::as_str));
            }
        }
        if let Some(o) = self.owned
            && has_fields(o)
        {
            described = true;
            keys.extend(o.keys().filter_map(|k| k.strip_prefix("f:")));
        }
        described.then(|| {
            let mut seen = std::collections::HashSet::new();
            keys.retain(|k| seen.insert(*k));
            keys
        })
    }
}

/// The live object reduced to `shape` (a planned object), with server-owned metadata and status
/// removed. List semantics come from the live object's `managedFields`.
pub fn project_object(live: &Value, shape: &Value) -> Map<String, Value> {
    let hints = Hints::from_objects([live]);
    project_guided(
        live,
        Guide {
            planned: Some(shape),
            ..Guide::default()
        },
        &hints,
    )
}

/// The live object reduced to what `guide` names, with server-owned metadata and status removed.
pub fn project_guided(live: &Value, guide: Guide<'_>, hints: &Hints) -> Map<String, Value> {
    let mut live = live.clone();
    secret_string_data(&mut live, &guide);
    let mut out = match project(&live, guide, &mut Vec::new(), hints) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    out.shift_remove("status");
    if let Some(Value::Object(meta)) = out.get_mut("metadata") {
        for k in SERVER_METADATA {
            meta.shift_remove(*k);
        }
    }
    out
}

/// The server never stores a Secret's `stringData`: it folds it into base64 `data`. Rebuild the
/// `stringData` keys the guide asks for from `data`, so an unchanged Secret compares equal.
fn secret_string_data(live: &mut Value, guide: &Guide<'_>) {
    if live.get("kind").and_then(Value::as_str) != Some("Secret") {
        return;
    }
    let Some(wanted) = guide.child("stringData").keys() else {
        return;
    };
    let Some(data) = live.get("data").and_then(Value::as_object).cloned() else {
        return;
    };
    let mut string_data = Map::new();
    for key in wanted {
        let Some(encoded) = data.get(key).and_then(Value::as_str) else {
            continue;
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok();
        match decoded.and_then(|b| String::from_utf8(b).ok()) {
            Some(text) => string_data.insert(key.to_string(), Value::String(text)),
            // Binary data cannot be shown as stringData; keep the encoded form so it still differs.
            None => string_data.insert(key.to_string(), Value::String(encoded.to_string())),
        };
    }
    if let Value::Object(m) = live {
        m.insert("stringData".into(), Value::Object(string_data));
    }
}

fn project(live: &Value, guide: Guide<'_>, path: &mut Vec<String>, hints: &Hints) -> Option<Value> {
    match live {
        Value::Object(l) => {
            let keys = match guide.keys() {
                Some(keys) if !guide.owned_whole() => keys,
                // A value kusion owns whole, or a scalar where the server has a map.
                _ => return Some(normalize(live, guide.planned)),
            };
            let mut out = Map::new();
            for k in keys {
                if let Some(lv) = l.get(k) {
                    path.push(k.to_string());
                    if let Some(p) = project(lv, guide.child(k), path, hints) {
                        out.insert(k.to_string(), p);
                    }
                    path.pop();
                }
            }
            Some(Value::Object(out))
        }
        Value::Array(items) => Some(Value::Array(project_list(items, guide, path, hints))),
        _ => Some(normalize(live, guide.planned)),
    }
}

/// The live value in the planned value's form where both mean the same (quantities, numbers,
/// int-or-string), everything else as the server has it.
fn normalize(live: &Value, planned: Option<&Value>) -> Value {
    let Some(planned) = planned else {
        return live.clone();
    };
    match (planned, live) {
        (Value::Object(p), Value::Object(l)) => Value::Object(
            l.iter()
                .map(|(k, v)| (k.clone(), normalize(v, p.get(k))))
                .collect(),
        ),
        (Value::Array(p), Value::Array(l)) => Value::Array(
            l.iter()
                .enumerate()
                .map(|(i, v)| normalize(v, p.get(i)))
                .collect(),
        ),
        (Value::String(a), Value::String(b)) if a != b && quantities_equal(a, b) => planned.clone(),
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => planned.clone(),
        // Int-or-string fields the server may return in the other form.
        (Value::String(a), Value::Number(b)) if a.parse::<f64>().ok() == b.as_f64() => {
            planned.clone()
        }
        _ => live.clone(),
    }
}

/// The list kind when no `managedFields` entry describes the list: scalars are replaced whole;
/// objects sharing one of [`MERGE_KEYS`] are keyed by it; other object lists go by position.
fn guessed_kind(guide: &Guide<'_>) -> Option<ListKind> {
    let items: Vec<&Value> = [guide.planned, guide.prior]
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .collect();
    if items.is_empty() || !items.iter().all(|i| i.is_object()) {
        return Some(ListKind::Atomic);
    }
    MERGE_KEYS
        .iter()
        .find(|k| items.iter().all(|item| item.get(**k).is_some()))
        .map(|k| ListKind::Map(vec![k.to_string()]))
}

fn project_list(
    live: &[Value],
    guide: Guide<'_>,
    path: &mut Vec<String>,
    hints: &Hints,
) -> Vec<Value> {
    let kind = if guide.owned_whole() {
        Some(ListKind::Atomic)
    } else {
        hints.get(path).cloned().or_else(|| guessed_kind(&guide))
    };
    let planned: &[Value] = guide
        .planned
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let prior: &[Value] = guide
        .prior
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    match kind {
        Some(ListKind::Atomic) => live
            .iter()
            .enumerate()
            .map(|(i, v)| normalize(v, planned.get(i)))
            .collect(),
        Some(ListKind::Set) => {
            let owned: Vec<Value> = guide
                .owned
                .map(|o| {
                    o.keys()
                        .filter_map(|k| serde_json::from_str(k.strip_prefix("v:")?).ok())
                        .collect()
                })
                .unwrap_or_default();
            live.iter()
                .filter(|v| {
                    planned
                        .iter()
                        .chain(prior)
                        .chain(&owned)
                        .any(|w| values_equal(v, w))
                })
                .cloned()
                .collect()
        }
        Some(ListKind::Map(keys)) => {
            // Items kusion declares or owns, matched by key; items other managers added are
            // theirs and stay out. Each declared item is used once, so repeated keys pair up
            // in order. Order follows the live list.
            let mut used_planned = vec![false; planned.len()];
            let mut used_prior = vec![false; prior.len()];
            let owned: Vec<OwnedItem<'_>> = guide
                .owned
                .map(|o| {
                    o.iter()
                        .filter_map(|(k, child)| {
                            let Ok(Value::Object(want)) =
                                serde_json::from_str::<Value>(k.strip_prefix("k:")?)
                            else {
                                return None;
                            };
                            Some((want, child.as_object()?))
                        })
                        .collect()
                })
                .unwrap_or_default();
            path.push("[]".into());
            let out = live
                .iter()
                .filter_map(|item| {
                    let p = pick(item, planned, &keys, &mut used_planned);
                    let q = pick(item, prior, &keys, &mut used_prior);
                    let o = owned
                        .iter()
                        .find(|(want, _)| key_matches(item, want))
                        .map(|(_, child)| *child);
                    if p.is_none() && q.is_none() && o.is_none() {
                        return None;
                    }
                    let g = Guide {
                        planned: p,
                        prior: q,
                        owned: o,
                    };
                    project(item, g, path, hints)
                })
                .collect();
            path.pop();
            out
        }
        None => {
            path.push("[]".into());
            let out = live
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    let g = Guide {
                        planned: planned.get(i),
                        prior: prior.get(i),
                        owned: None,
                    };
                    if g.planned.is_none() && g.prior.is_none() {
                        return Some(item.clone());
                    }
                    project(item, g, path, hints)
                })
                .collect();
            path.pop();
            out
        }
    }
}

/// An owned list item: its key fields, and what of it is owned.
type OwnedItem<'a> = (Map<String, Value>, &'a Map<String, Value>);

/// The first unused item of `declared` with the same key as `item`. Key fields a declared item
/// leaves out (to the server's default, like a port's protocol) match anything, but an item
/// naming none of the keys matches nothing.
fn pick<'a>(
    item: &Value,
    declared: &'a [Value],
    keys: &[String],
    used: &mut [bool],
) -> Option<&'a Value> {
    let matches = |d: &Value| {
        let mut named = 0;
        for k in keys {
            if let Some(dv) = d.get(k) {
                named += 1;
                if !item.get(k).is_some_and(|iv| values_equal(iv, dv)) {
                    return false;
                }
            }
        }
        named > 0
    };
    let pos = (0..declared.len()).find(|&i| !used[i] && matches(&declared[i]))?;
    used[pos] = true;
    Some(&declared[pos])
}

/// Whether a live value holds what `planned` says (quantities, numbers and int-or-string by
/// value; maps by the planned keys).
pub fn same_value(live: &Value, planned: &Value) -> bool {
    match (live, planned) {
        (Value::Object(l), Value::Object(p)) => p
            .iter()
            .all(|(k, pv)| l.get(k).is_some_and(|lv| same_value(lv, pv))),
        (Value::Array(l), Value::Array(p)) => {
            l.len() == p.len() && l.iter().zip(p).all(|(a, b)| same_value(a, b))
        }
        _ => normalize(live, Some(planned)) == *planned,
    }
}

fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Parses a Kubernetes quantity (`500m`, `1.5Gi`, `2e3`, `1k`) into a number.
fn parse_quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (num, suffix) = text.split_at(split);
    let n: f64 = num.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * factor)
}

/// Whether two differently written strings are the same quantity (the server canonicalises them).
fn quantities_equal(a: &str, b: &str) -> bool {
    let starts_numeric = |s: &str| s.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    if !starts_numeric(a) || !starts_numeric(b) {
        return false;
    }
    match (parse_quantity(a), parse_quantity(b)) {
        (Some(x), Some(y)) => (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()).max(1.0) * 4.0,
        _ => false,
    }
}

#[cfg(test)]
mod tests;
