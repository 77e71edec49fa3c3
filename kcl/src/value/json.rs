//! KCL values to and from JSON-shaped data: JSON both ways (plugins, `json.encode`/`decode`,
//! hosts through the crate's `from_json`/`to_json`) and YAML read (`yaml.decode`, `-D` values).
//!
//! Here, not in `builtins`, because the evaluator and the public face need them too, and
//! values are what they convert.

use super::{Dict, Str, Value};

/// A KCL value as JSON (`None`/`Undefined`/functions become `null`, undefined attributes are
/// left out, schema instances become objects).
pub fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::None | Value::Undefined | Value::Func(_) => serde_json::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Int(i) => (*i).into(),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        Value::Unit(u) => serde_json::Number::from_f64(u.value())
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        Value::Str(s) => serde_json::Value::String(s.to_string()),
        Value::List(l) => serde_json::Value::Array(l.iter().map(to_json).collect()),
        Value::Dict(_) | Value::Schema(_) => {
            let mut m = serde_json::Map::new();
            for (k, x) in &v.as_dict().unwrap().map {
                if !x.is_undefined() {
                    m.insert(k.to_string(), to_json(x));
                }
            }
            serde_json::Value::Object(m)
        }
    }
}

/// A JSON value as a KCL value (objects become dicts in key order, `null` becomes `None`).
pub fn from_json(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::None,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        serde_json::Value::String(s) => Value::str(s),
        serde_json::Value::Array(a) => Value::from(a.iter().map(from_json).collect::<Vec<_>>()),
        serde_json::Value::Object(o) => {
            let mut d = Dict::with_capacity(o.len());
            for (k, v) in o {
                d.map.insert(Str::from(k.as_str()), from_json(v));
            }
            Value::from(d)
        }
    }
}

/// A YAML value as a KCL value (non-string keys are written as KCL prints them).
pub fn from_yaml(y: &serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match y {
        Y::Null => Value::None,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        Y::String(s) => Value::str(s),
        Y::Sequence(a) => Value::from(a.iter().map(from_yaml).collect::<Vec<_>>()),
        Y::Mapping(m) => {
            let mut d = Dict::with_capacity(m.len());
            for (k, v) in m {
                let key = match k {
                    Y::String(s) => s.clone(),
                    other => super::to_str(&from_yaml(other)),
                };
                d.map.insert(Str::from(key.as_str()), from_yaml(v));
            }
            Value::from(d)
        }
        Y::Tagged(t) => from_yaml(&t.value),
    }
}

/// YAML text as upstream's decoder reads it, one value per document: through JSON's data
/// model, so a mapping key is its scalar's text (`true`, `~`, `1.5`), a key written twice
/// keeps its first place and takes its last value, and a tag or a collection as a key is
/// an error (upstream's messages).
pub fn yaml_documents(text: &str) -> Result<Vec<Value>, serde_yaml_ng::Error> {
    use serde::Deserialize;
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| serde_json::Value::deserialize(d).map(|j| from_json(&j)))
        .collect()
}
