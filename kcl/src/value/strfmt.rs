//! `str()` and the Python-like repr used for values nested in lists and dicts.

use super::{Value, float_to_str, num::fmt_unit_raw};

/// `str(v)` and `"${v}"`.
pub fn to_str(v: &Value) -> String {
    let mut out = String::new();
    write_str(v, &mut out, 0, false);
    out
}

/// Upstream's quoting of a dict key or value: single quotes unless the string holds a
/// double quote; nothing is escaped except `"` when the string holds both quote kinds.
fn quote_str(s: &str, out: &mut String) {
    if !s.contains('"') {
        out.push('\'');
        out.push_str(s);
        out.push('\'');
    } else if !s.contains('\'') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push('"');
        out.push_str(&s.replace('"', "\\\""));
        out.push('"');
    }
}

fn write_str(v: &Value, out: &mut String, depth: usize, in_dict: bool) {
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
            if in_dict {
                quote_str(s, out)
            } else {
                out.push_str(s)
            }
        }
        Value::List(l) => {
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(x, out, depth + 1, false);
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
                write_str(x, out, depth + 1, true);
            }
            out.push('}');
        }
        // (upstream's string of any function value: lambdas, builtins, methods, schema types)
        Value::Func(_) => out.push_str("function"),
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
        // strings print bare in lists, quoted (upstream's way) as dict keys and values
        let l = Value::from(vec![
            Value::str("a"),
            dict_of([
                (Str::from("it's"), Value::str("say \"hi\"")),
                (Str::from("k"), Value::str("both ' \"")),
            ]),
        ]);
        assert_eq!(to_str(&l), r#"[a, {'it's': "say "hi"", 'k': "both ' \""}]"#);
        assert_eq!(to_str(&Value::str("x")), "x");
    }
}
