//! JSON, YAML and TOML data to a KCL config expression, laid out as upstream's `kcl import`
//! lays it out: one entry per line, nested dicts and dicts in lists on their own lines, lists
//! inside lists inline.

use serde_json::Value;

use super::{GenError, HEADER, name, string};

fn pad(depth: usize) -> String {
    "    ".repeat(depth)
}

/// A scalar, or a list or dict written on one line (upstream's form inside a nested list).
pub(crate) fn inline(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => number(n),
        Value::String(s) => string(s),
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{} = {}", name(k), inline(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        // KCL has no literal for these; `float("inf")` evaluates to them
        Some(f) if n.is_f64() && f.is_nan() => "float(\"nan\")".into(),
        Some(f) if n.is_f64() && f.is_infinite() => {
            if f > 0.0 {
                "float(\"inf\")".into()
            } else {
                "float(\"-inf\")".into()
            }
        }
        // keep a float a float (upstream writes 1.0 as 1, an int)
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e16 => format!("{f:.1}"),
        _ => n.to_string(),
    }
}

/// `v` as the value of an entry whose line is at `depth`.
fn block(out: &mut String, v: &Value, depth: usize) {
    match v {
        Value::Object(m) => {
            out.push_str("{\n");
            for (k, c) in m {
                out.push_str(&pad(depth + 1));
                out.push_str(&name(k));
                out.push_str(" = ");
                block(out, c, depth + 1);
                out.push('\n');
            }
            out.push_str(&pad(depth));
            out.push('}');
        }
        Value::Array(a) => {
            out.push_str("[\n");
            for item in a {
                out.push_str(&pad(depth + 1));
                match item {
                    Value::Object(_) => block(out, item, depth + 1),
                    _ => out.push_str(&inline(item)),
                }
                out.push('\n');
            }
            out.push_str(&pad(depth));
            out.push(']');
        }
        _ => out.push_str(&inline(v)),
    }
}

/// A whole document: upstream writes a top-level dict as `{...}` and an empty one as `{}`.
fn document(v: &Value, depth: usize) -> String {
    let mut s = String::new();
    match v {
        Value::Object(m) if m.is_empty() => s.push_str("{}"),
        _ => block(&mut s, v, depth),
    }
    s
}

/// The file for one or more documents: several YAML documents become a list printed as a
/// YAML stream, as upstream does.
fn file(docs: &[Value]) -> String {
    match docs {
        [] => format!("{HEADER}\n\n{{}}\n"),
        [one] => format!("{HEADER}\n\n{}\n", document(one, 0)),
        many => {
            let mut s = format!("{HEADER}\nimport manifests\n\nitems = [\n");
            for d in many {
                s.push_str(&pad(1));
                s.push_str(&document(d, 1));
                s.push('\n');
            }
            s.push_str("]\nmanifests.yaml_stream(items)\n");
            s
        }
    }
}

/// JSON data to KCL.
pub fn json_to_kcl(path: &str, text: &str) -> Result<String, GenError> {
    let v: Value = serde_json::from_str(text).map_err(|e| GenError::Parse {
        path: path.into(),
        msg: format!("line {} column {}: {e}", e.line(), e.column()),
    })?;
    Ok(file(&[v]))
}

/// YAML data (one or more documents) to KCL.
pub fn yaml_to_kcl(path: &str, text: &str) -> Result<String, GenError> {
    let text = text.replace("\r\n", "\n");
    let mut docs = Vec::new();
    for d in serde_yaml_ng::Deserializer::from_str(&text) {
        let y = <serde_yaml_ng::Value as serde::Deserialize>::deserialize(d).map_err(|e| {
            GenError::Parse {
                path: path.into(),
                msg: e.to_string(),
            }
        })?;
        // an empty document (`---` with nothing after it) is no config
        if !y.is_null() {
            docs.push(yaml_value(y));
        }
    }
    Ok(file(&docs))
}

/// YAML to JSON values, keeping key order; a non-string key becomes its text (upstream drops
/// such entries).
fn yaml_value(y: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match y {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    // serde_json cannot hold inf/nan: carry them as the text KCL evaluates
                    .unwrap_or_else(|| Value::String(format!("{f}")))
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(s) => Value::Array(s.into_iter().map(yaml_value).collect()),
        Y::Mapping(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (key_text(k), yaml_value(v)))
                .collect(),
        ),
        Y::Tagged(t) => yaml_value(t.value),
    }
}

fn key_text(k: serde_yaml_ng::Value) -> String {
    match k {
        serde_yaml_ng::Value::String(s) => s,
        serde_yaml_ng::Value::Null => "null".into(),
        other => serde_yaml_ng::to_string(&other)
            .unwrap_or_default()
            .trim_end()
            .to_string(),
    }
}

/// TOML data to KCL (dates and times as strings), keys in document order.
pub fn toml_to_kcl(path: &str, text: &str) -> Result<String, GenError> {
    let err = |e: toml::de::Error| GenError::Parse {
        path: path.into(),
        msg: e.to_string(),
    };
    let t: toml::Table = toml::from_str(text).map_err(err)?;
    // a `toml::Table` sorts its keys; the spanned parse tells the order they were written in
    let de = toml::de::DeTable::parse(text).map_err(err)?;
    Ok(file(&[ordered_table(t, Some(de.get_ref()))]))
}

fn ordered_table(mut t: toml::Table, de: Option<&toml::de::DeTable<'_>>) -> Value {
    let mut keys: Vec<(usize, String, Option<&toml::de::DeValue<'_>>)> = match de {
        Some(d) => d
            .iter()
            .map(|(k, v)| (k.span().start, k.get_ref().to_string(), Some(v.get_ref())))
            .collect(),
        None => Vec::new(),
    };
    keys.sort_by_key(|k| k.0);
    let mut out = serde_json::Map::new();
    for (_, k, dv) in keys {
        if let Some(v) = t.remove(&k) {
            out.insert(k, ordered(v, dv));
        }
    }
    // anything the spanned parse did not show keeps the table's order
    for (k, v) in t {
        out.insert(k, ordered(v, None));
    }
    Value::Object(out)
}

fn ordered(v: toml::Value, de: Option<&toml::de::DeValue<'_>>) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(format!("{f}"))),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => {
            let items = de.and_then(|d| d.as_array());
            Value::Array(
                a.into_iter()
                    .enumerate()
                    .map(|(i, v)| ordered(v, items.and_then(|x| x.get(i)).map(|s| s.get_ref())))
                    .collect(),
            )
        }
        toml::Value::Table(t) => ordered_table(t, de.and_then(|d| d.as_table())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_stay_floats_and_strings_keep_their_text() {
        let out = json_to_kcl(
            "a.json",
            r#"{"a": 1.0, "b": 2, "c": "x\\ny", "d": "q\"", "e": "$x"}"#,
        )
        .unwrap();
        assert!(out.contains("a = 1.0\n"), "{out}");
        assert!(out.contains("b = 2\n"), "{out}");
        assert!(out.contains("c = r\"\"\"x\\ny\"\"\"\n"), "{out}");
        assert!(out.contains("d = \"q\\\"\"\n"), "{out}");
        assert!(out.contains("e = r\"\"\"$x\"\"\"\n"), "{out}");
    }
}
