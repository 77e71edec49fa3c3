//! `option()`: reading `-D`/settings values, and converting them (and defaults) to the type asked
//! for, with upstream's rules.

use super::{arg, str_arg};
use crate::value::{self, Host, RtError, RtResult, Str, Value};

/// A `-D` value read as JSON where it is JSON (a quoted JSON string is its text, as
/// upstream's), else the text as written.
fn json_guess(s: &str) -> Value {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(j) => value::json::from_json(&j),
        _ => Value::str(s),
    }
}

/// `option()` type conversion, upstream's rules: `-D` values arrive as raw strings and are
/// read as JSON first (`parse`); a default is converted as written. A value that does not fit
/// `bool` is Undefined; an unparsable string is 0.0 as a float and an error as an int.
fn convert_option(v: Value, ty: Option<&str>, parse: bool) -> RtResult<Value> {
    let bad = |v: &Value, t: &str| {
        RtError::eval(format!("cannot use '{}' as type '{t}'", value::to_str(v)))
    };
    let v = match &v {
        Value::Str(s) if parse && ty != Some("str") => json_guess(s),
        // for type str a number or boolean stays as written (`12e1` is not 120), a JSON
        // string is its text, and a list, dict or null is refused
        Value::Str(s) if parse => match serde_json::from_str::<serde_json::Value>(s) {
            Ok(serde_json::Value::String(t)) => Value::str(&t),
            Ok(j @ (serde_json::Value::Array(_) | serde_json::Value::Object(_))) => {
                return Err(bad(&value::json::from_json(&j), "str"));
            }
            Ok(serde_json::Value::Null) => return Err(bad(&Value::None, "str")),
            _ => v,
        },
        _ => v,
    };
    Ok(match ty {
        // (`any` is no type here: upstream's "unknown type 'any'")
        None | Some("") => v,
        Some("str") => match &v {
            Value::Str(_) => v,
            Value::Bool(b) => Value::from(if *b { "true" } else { "false" }),
            Value::Int(i) => Value::from(i.to_string()),
            // Rust's float display (`1.0` -> `1`), as upstream formats it
            Value::Float(f) => Value::from(f.to_string()),
            _ => return Err(bad(&v, "str")),
        },
        Some("bool") => match &v {
            Value::Bool(_) => v,
            Value::Int(i) => Value::Bool(*i != 0),
            Value::Float(f) => Value::Bool(*f != 0.0),
            Value::Str(s) => Value::Bool(matches!(s.as_ref(), "True" | "true")),
            _ => Value::Undefined,
        },
        Some("int") => match &v {
            Value::Bool(b) => Value::Int(*b as i64),
            Value::Int(_) => v,
            Value::Float(f) => Value::Int(*f as i64),
            Value::Str(s) => match s.parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => return Err(bad(&v, "int")),
            },
            _ => return Err(bad(&v, "int")),
        },
        Some("float") => match &v {
            Value::Bool(b) => Value::Float(if *b { 1.0 } else { 0.0 }),
            Value::Int(i) => Value::Float(*i as f64),
            Value::Float(_) => v,
            Value::Str(s) => Value::Float(s.parse::<f64>().unwrap_or(0.0)),
            _ => return Err(bad(&v, "float")),
        },
        Some(t @ ("list" | "dict")) => {
            let ok = if t == "list" {
                matches!(v, Value::List(_))
            } else {
                v.is_config()
            };
            if !ok {
                return Err(bad(&v, t));
            }
            v
        }
        Some(t) => return Err(RtError::eval(format!("unknown type '{t}'"))),
    })
}

pub(super) fn b_option(h: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    // (a None key is upstream's empty one)
    let key = match arg(args, kw, 0, "key") {
        Some(Value::None) => Default::default(),
        _ => str_arg(args, kw, 0, "key", "option")?,
    };
    let ty = arg(args, kw, 1, "type").map(value::to_str);
    let required = arg(args, kw, 2, "required").is_some_and(|v| v.truthy());
    let default = arg(args, kw, 3, "default").cloned();
    match h.option(&key) {
        Some(v) => convert_option(v, ty.as_deref(), true),
        None => {
            // upstream's message leaves out the `help` text
            if required && default.is_none() {
                let msg = format!("option('{key}') must be initialized, try '-D {key}=?' argument");
                return Err(RtError::eval(msg));
            }
            match default {
                Some(d) if !d.is_none_or_undefined() => convert_option(d, ty.as_deref(), false),
                _ => Ok(Value::None),
            }
        }
    }
}
