//! `str()` and the Python-like repr used for values nested in lists and dicts.

use super::{Value, float_to_str, num::fmt_unit_raw};

/// `str(v)` and `"${v}"`.
pub fn to_str(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        _ => {
            let mut out = String::new();
            write_repr(v, &mut out, 0);
            out
        }
    }
}

/// Repr: strings quoted (`'a'`), everything else as `str()`.
pub fn to_repr(v: &Value) -> String {
    let mut out = String::new();
    write_repr(v, &mut out, 0);
    out
}

fn quote_str(s: &str, out: &mut String) {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

fn write_repr(v: &Value, out: &mut String, depth: usize) {
    if depth > super::MAX_DEPTH {
        out.push_str("...");
        return;
    }
    match v {
        Value::Undefined => out.push_str("Undefined"),
        Value::None => out.push_str("None"),
        Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => out.push_str(&float_to_str(*f)),
        Value::Unit(u) => {
            out.push_str(&fmt_unit_raw(u.raw));
            out.push_str(&u.suffix);
        }
        Value::Str(s) => {
            if depth == 0 {
                out.push_str(s)
            } else {
                quote_str(s, out)
            }
        }
        Value::List(l) => {
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(x, out, depth + 1);
            }
            out.push(']');
        }
        Value::Dict(_) | Value::Schema(_) => {
            let d = v.as_dict().unwrap();
            out.push('{');
            for (i, (k, x)) in d.map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                quote_str(k, out);
                out.push_str(": ");
                write_repr(x, out, depth + 1);
            }
            out.push('}');
        }
        Value::Func(f) => out.push_str(&format!("{f:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Str;
    use crate::value::dict_of;

    #[test]
    fn str_of_containers() {
        let d = dict_of([(Str::from("key"), Value::str("value"))]);
        assert_eq!(to_str(&d), "{'key': 'value'}");
        let l = Value::from(vec![
            Value::Int(1),
            Value::None,
            Value::Bool(true),
            Value::Float(1.0),
        ]);
        assert_eq!(to_str(&l), "[1, None, True, 1.0]");
        assert_eq!(to_str(&Value::str("x")), "x");
    }
}
