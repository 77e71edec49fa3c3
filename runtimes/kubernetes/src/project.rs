//! Projection of a live object onto the fields kusion manages.
//!
//! With server-side apply, kusion only owns the fields it sends. Everything else the server
//! stores (status, uid, defaults such as `protocol: TCP`, fields other managers own) is not
//! kusion's business and must not show up as a diff. So a live object is projected onto the
//! *shape* of what kusion applies: the planned object merged with the prior one (the prior shape
//! keeps fields kusion used to own and now drops visible, since apply removes them).

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

/// Keys that identify an item of an associative list, in order of preference.
const MERGE_KEYS: &[&str] = &[
    "name",
    "mountPath",
    "containerPort",
    "port",
    "devicePath",
    "ip",
    "type",
];

/// Union of two shapes (maps merged recursively; for other values `a` wins).
pub fn merge_shapes(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut out = x.clone();
            for (k, vb) in y {
                let merged = match x.get(k) {
                    Some(va) => merge_shapes(va, vb),
                    None => vb.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        _ => a.clone(),
    }
}

/// The live object reduced to `shape`, with server-owned metadata and status removed.
pub fn project_object(live: &Value, shape: &Value) -> Map<String, Value> {
    let mut live = live.clone();
    secret_string_data(&mut live, shape);
    let mut out = match project(&live, shape) {
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
/// `stringData` keys the shape asks for from `data`, so an unchanged Secret compares equal.
fn secret_string_data(live: &mut Value, shape: &Value) {
    if live.get("kind").and_then(Value::as_str) != Some("Secret") {
        return;
    }
    let Some(wanted) = shape.get("stringData").and_then(Value::as_object) else {
        return;
    };
    let Some(data) = live.get("data").and_then(Value::as_object).cloned() else {
        return;
    };
    let mut string_data = Map::new();
    for key in wanted.keys() {
        let Some(encoded) = data.get(key).and_then(Value::as_str) else {
            continue;
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok();
        match decoded.and_then(|b| String::from_utf8(b).ok()) {
            Some(text) => string_data.insert(key.clone(), Value::String(text)),
            // Binary data cannot be shown as stringData; keep the encoded form so it still differs.
            None => string_data.insert(key.clone(), Value::String(encoded.to_string())),
        };
    }
    if let Value::Object(m) = live {
        m.insert("stringData".into(), Value::Object(string_data));
    }
}

fn project(live: &Value, shape: &Value) -> Option<Value> {
    match (shape, live) {
        (Value::Object(s), Value::Object(l)) => {
            let mut out = Map::new();
            for (k, sv) in s {
                if let Some(lv) = l.get(k)
                    && let Some(p) = project(lv, sv)
                {
                    out.insert(k.clone(), p);
                }
            }
            Some(Value::Object(out))
        }
        (Value::Array(s), Value::Array(l)) => Some(Value::Array(project_list(l, s))),
        (Value::String(a), Value::String(b)) if a != b && quantities_equal(a, b) => {
            Some(shape.clone())
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => Some(shape.clone()),
        // Int-or-string fields the server may return in the other form.
        (Value::String(a), Value::Number(b)) if a.parse::<f64>().ok() == b.as_f64() => {
            Some(shape.clone())
        }
        _ => Some(live.clone()),
    }
}

fn project_list(live: &[Value], shape: &[Value]) -> Vec<Value> {
    let all_objects = !shape.is_empty() && shape.iter().all(Value::is_object);
    if !all_objects {
        // Lists of scalars are atomic: the whole live list is what kusion would replace.
        return live.to_vec();
    }
    let key = MERGE_KEYS
        .iter()
        .find(|k| shape.iter().all(|item| item.get(**k).is_some()));
    match key {
        Some(key) => {
            // Associative list: project the items kusion declares, matched by key; items added
            // by other managers are theirs and stay out. Order follows the live list.
            let declared: Vec<&Value> = shape.iter().filter_map(|s| s.get(*key)).collect();
            // Each shape item is used once, so repeated keys pair up in order.
            let mut used = vec![false; shape.len()];
            live.iter()
                .filter_map(|item| {
                    let k = item.get(*key)?;
                    let pos =
                        (0..declared.len()).find(|&p| !used[p] && values_equal(declared[p], k))?;
                    used[pos] = true;
                    project(item, &shape[pos])
                })
                .collect()
        }
        None => live
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match shape.get(i) {
                Some(s) => project(item, s),
                None => Some(item.clone()),
            })
            .collect(),
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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_defaults_and_metadata_vanish() {
        let live = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "namespace": "n", "uid": "u", "resourceVersion": "7",
                         "labels": {"a": "1", "other": "x"}, "managedFields": []},
            "spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}, {"port": 9, "protocol": "TCP"}],
                     "clusterIP": "10.0.0.5", "type": "ClusterIP", "sessionAffinity": "None"},
            "status": {"loadBalancer": {}}
        });
        let shape = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n", "labels": {"a": "1"}},
                           "spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
        let p = Value::Object(project_object(&live, &shape));
        assert_eq!(p, shape);
    }

    #[test]
    fn changed_managed_fields_show() {
        let live = json!({"kind": "Deployment", "spec": {"replicas": 5, "template": {"spec": {"containers": [
            {"name": "c", "image": "nginx:2", "imagePullPolicy": "IfNotPresent"}]}}}});
        let shape = json!({"kind": "Deployment", "spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "c", "image": "nginx:1"}]}}}});
        let p = Value::Object(project_object(&live, &shape));
        assert_eq!(
            p,
            json!({"kind": "Deployment", "spec": {"replicas": 5, "template": {"spec": {"containers": [
            {"name": "c", "image": "nginx:2"}]}}}})
        );
        // A declared field that is gone live is missing from the projection.
        let live = json!({"kind": "ConfigMap", "data": {"a": "1"}});
        let shape = json!({"kind": "ConfigMap", "data": {"a": "1", "b": "2"}});
        assert_eq!(
            Value::Object(project_object(&live, &shape)),
            json!({"kind": "ConfigMap", "data": {"a": "1"}})
        );
    }

    #[test]
    fn quantities_and_secrets_compare_by_value() {
        let live = json!({"kind": "Pod", "spec": {"cpu": "500m", "mem": "1Gi", "n": 1}});
        let shape = json!({"kind": "Pod", "spec": {"cpu": "0.5", "mem": "1024Mi", "n": 1.0}});
        assert_eq!(Value::Object(project_object(&live, &shape)), shape);
        assert!(!quantities_equal("500m", "0.6"));
        assert!(!quantities_equal("abc", "abc2"));
        let live = json!({"kind": "Secret", "data": {"pw": "aHVudGVyMg=="}, "type": "Opaque"});
        let shape = json!({"kind": "Secret", "stringData": {"pw": "hunter2"}});
        assert_eq!(Value::Object(project_object(&live, &shape)), shape);
        let shape_changed = json!({"kind": "Secret", "stringData": {"pw": "other"}});
        assert_eq!(Value::Object(project_object(&live, &shape_changed)), shape);
    }

    #[test]
    fn prior_shape_keeps_dropped_fields_visible() {
        let planned = json!({"metadata": {"labels": {"a": "1"}}});
        let prior = json!({"metadata": {"labels": {"a": "1", "gone": "x"}}});
        let live = json!({"metadata": {"labels": {"a": "1", "gone": "x", "foreign": "y"}}});
        let p = project_object(&live, &merge_shapes(&planned, &prior));
        assert_eq!(Value::Object(p), prior);
    }
}
