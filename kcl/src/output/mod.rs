//! YAML and JSON printing in upstream `kcl run`'s exact format.
//!
//! The YAML layout is libyaml's block style as serde_yaml drives it (sequences inside mappings
//! are not indented, no line folding); scalar quoting follows the same rules and is checked
//! against `serde_yaml_ng` in the tests.

use crate::value::Value;

mod scalar;
pub mod toml;

/// Printing options (`-n`, `-k`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PrintOpts {
    pub sort_keys: bool,
    pub drop_none: bool,
    /// Skip `_`-prefixed keys (what `kcl run` does unless `-H`).
    pub hide_private: bool,
    /// Quote strings starting with a digit (`'5m'`), as upstream's `yaml.encode` does.
    pub quote_digit_start: bool,
}

fn entries(v: &Value, o: PrintOpts) -> Vec<(&str, &Value)> {
    let d = v.as_dict().unwrap();
    let mut e: Vec<(&str, &Value)> = d
        .map
        .iter()
        .filter(|(k, v)| {
            !(matches!(v, Value::Undefined | Value::Func(_))
                || o.drop_none && matches!(v, Value::None)
                || o.hide_private && k.starts_with('_'))
        })
        .map(|(k, v)| (&**k, v))
        .collect();
    if o.sort_keys {
        e.sort_by(|a, b| a.0.cmp(b.0));
    }
    e
}

fn list_items(v: &Value, o: PrintOpts) -> Vec<&Value> {
    v.list_items()
        .unwrap()
        .iter()
        .filter(|v| {
            !(matches!(v, Value::Undefined | Value::Func(_))
                || o.drop_none && matches!(v, Value::None))
        })
        .collect()
}

/// One YAML document (no `---`), ending with a newline.
pub fn to_yaml(v: &Value, o: PrintOpts) -> String {
    let mut out = Out {
        s: String::with_capacity(256),
        sink: None,
        err: None,
    };
    yaml_into(v, o, &mut out);
    out.s
}

/// [`to_yaml`] written to `w` as it is produced (a large document is never held whole).
pub fn write_yaml(v: &Value, o: PrintOpts, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut out = Out {
        s: String::with_capacity(CHUNK + 4096),
        sink: Some(w),
        err: None,
    };
    yaml_into(v, o, &mut out);
    out.flush_at(0);
    match out.err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Bytes buffered before a streaming write.
const CHUNK: usize = 1 << 16;

/// YAML text being produced: kept whole, or handed to a writer in chunks.
struct Out<'a> {
    s: String,
    sink: Option<&'a mut dyn std::io::Write>,
    err: Option<std::io::Error>,
}

impl Out<'_> {
    /// Write the buffer out once it holds at least `min` bytes (streaming only).
    fn flush_at(&mut self, min: usize) {
        if let Some(w) = &mut self.sink
            && self.s.len() >= min
            && !self.s.is_empty()
        {
            if self.err.is_none()
                && let Err(e) = w.write_all(self.s.as_bytes())
            {
                self.err = Some(e);
            }
            self.s.clear();
        }
    }
}

impl std::ops::Deref for Out<'_> {
    type Target = String;
    fn deref(&self) -> &String {
        &self.s
    }
}

impl std::ops::DerefMut for Out<'_> {
    fn deref_mut(&mut self) -> &mut String {
        &mut self.s
    }
}

fn yaml_into(v: &Value, o: PrintOpts, out: &mut Out<'_>) {
    write_block_here(v, o, 0, out);
}

/// A value starting at the current position: a block map or sequence whose later lines are
/// indented by `ind`, or a scalar whose continuation lines are indented by at least one step
/// (libyaml indents a block scalar at the top level too).
fn write_block_here(v: &Value, o: PrintOpts, ind: usize, out: &mut Out<'_>) {
    match v {
        Value::Dict(_) | Value::Schema(_) if !entries(v, o).is_empty() => write_map(v, o, ind, out),
        Value::List(_) if !list_items(v, o).is_empty() => write_seq(v, o, ind, out),
        _ => {
            write_scalar(v, o, ind.max(2), out);
            out.push('\n');
        }
    }
}

fn indent(out: &mut String, n: usize) {
    for _ in 0..n {
        out.push(' ');
    }
}

/// Block mapping whose first key starts at the current position (already indented).
fn write_map(v: &Value, o: PrintOpts, ind: usize, out: &mut Out<'_>) {
    for (i, (k, val)) in entries(v, o).into_iter().enumerate() {
        out.flush_at(CHUNK);
        if i > 0 {
            indent(out, ind);
        }
        // a key over more than one line or 128 bytes takes libyaml's complex-key form, its
        // value following `: ` on the same line
        if k.len() > 128 || scalar::has_break(k) {
            out.push_str("? ");
            scalar::write_str(k, ind + 2, false, out);
            out.push('\n');
            indent(out, ind);
            out.push_str(": ");
            write_block_here(val, o, ind + 2, out);
            continue;
        }
        scalar::write_str(k, ind, true, out);
        out.push(':');
        write_value_after_key(val, o, ind, out);
    }
}

fn write_value_after_key(val: &Value, o: PrintOpts, ind: usize, out: &mut Out<'_>) {
    match val {
        Value::Dict(_) | Value::Schema(_) if !entries(val, o).is_empty() => {
            out.push('\n');
            indent(out, ind + 2);
            write_map(val, o, ind + 2, out);
        }
        Value::List(_) if !list_items(val, o).is_empty() => {
            out.push('\n');
            indent(out, ind);
            write_seq(val, o, ind, out);
        }
        _ => {
            out.push(' ');
            write_scalar(val, o, ind + 2, out);
            out.push('\n');
        }
    }
}

fn write_seq(v: &Value, o: PrintOpts, ind: usize, out: &mut Out<'_>) {
    for (i, item) in list_items(v, o).into_iter().enumerate() {
        out.flush_at(CHUNK);
        if i > 0 {
            indent(out, ind);
        }
        out.push_str("- ");
        write_block_here(item, o, ind + 2, out);
    }
}

fn write_scalar(v: &Value, o: PrintOpts, ind: usize, out: &mut String) {
    match v {
        // a lambda encoded by itself: upstream writes its function pointer, which is 0 for one
        Value::Func(f) if matches!(**f, crate::value::Func::User { is_type: false, .. }) => {
            out.push('0')
        }
        Value::None | Value::Undefined | Value::Func(_) => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(itoa(*i).as_str()),
        Value::Float(f) => crate::value::float_to_yaml(*f, out),
        // number multipliers print as floats (`1Ki` -> `1024.0`), as upstream
        Value::Unit(u) => crate::value::float_to_yaml(u.value(), out),
        Value::Str(s) => scalar::write_str_opts(s, ind, false, o.quote_digit_start, out),
        Value::List(_) => out.push_str("[]"),
        Value::Dict(_) | Value::Schema(_) => out.push_str("{}"),
    }
}

fn itoa(i: i64) -> String {
    i.to_string()
}

/// Several documents separated by `---` (upstream's `yaml_stream` and multi-value output).
pub fn to_yaml_stream(docs: &[Value], o: PrintOpts) -> String {
    let mut out = String::new();
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&to_yaml(d, o));
    }
    out
}

/// JSON text; `indent` 0 means compact with `", "`/`": "` separators (upstream's `json.encode`).
pub fn to_json(v: &Value, o: PrintOpts, indent_by: usize) -> String {
    let mut out = String::new();
    write_json(v, o, indent_by, 0, &mut out);
    out
}

fn json_str(s: &str, out: &mut String) {
    out.push('"');
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_nl(out: &mut String, indent_by: usize, level: usize) {
    if indent_by > 0 {
        out.push('\n');
        indent(out, indent_by * level);
    }
}

/// A JSON number from a float (or a number multiplier, printed as its float value).
fn json_float(f: f64, out: &mut String) {
    if f.is_finite() {
        let mut b = ryu::Buffer::new();
        let s = b.format_finite(f);
        // serde_json style: `1e+20`
        match s.find('e') {
            Some(i) if !s[i + 1..].starts_with('-') => {
                out.push_str(&s[..=i]);
                out.push('+');
                out.push_str(&s[i + 1..]);
            }
            _ => out.push_str(s),
        }
    } else {
        // serde_json, which upstream prints through, has no NaN or infinity
        out.push_str("null");
    }
}

fn write_json(v: &Value, o: PrintOpts, ib: usize, level: usize, out: &mut String) {
    match v {
        // a lambda encoded by itself: upstream writes its function pointer, which is 0 for one
        Value::Func(f) if matches!(**f, crate::value::Func::User { is_type: false, .. }) => {
            out.push('0')
        }
        Value::None | Value::Undefined | Value::Func(_) => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => json_float(*f, out),
        Value::Unit(u) => json_float(u.value(), out),
        Value::Str(s) => json_str(s, out),
        Value::List(_) => {
            let items = list_items(v, o);
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, x) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                    if ib == 0 {
                        out.push(' ');
                    }
                }
                json_nl(out, ib, level + 1);
                write_json(x, o, ib, level + 1, out);
            }
            json_nl(out, ib, level);
            out.push(']');
        }
        Value::Dict(_) | Value::Schema(_) => {
            let e = entries(v, o);
            if e.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, x)) in e.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                    if ib == 0 {
                        out.push(' ');
                    }
                }
                json_nl(out, ib, level + 1);
                json_str(k, out);
                out.push_str(": ");
                write_json(x, o, ib, level + 1, out);
            }
            json_nl(out, ib, level);
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Str;
    use crate::value::{Dict, dict_of};

    fn k(s: &str) -> Str {
        Str::from(s)
    }

    #[test]
    fn streamed_yaml_is_the_same_text() {
        // large enough to be written in several chunks
        let items: Vec<Value> = (0..20_000)
            .map(|i| {
                let mut d = crate::value::Dict::new();
                d.insert(k("name"), Value::str(&format!("svc-{i}")));
                d.insert(k("port"), Value::Int(i));
                Value::from(d)
            })
            .collect();
        let mut top = crate::value::Dict::new();
        top.insert(k("items"), Value::from(items));
        top.insert(k("n"), Value::Int(1));
        let v = Value::from(top);
        let o = PrintOpts::default();
        let mut buf = Vec::new();
        write_yaml(&v, o, &mut buf).unwrap();
        assert!(buf.len() > 4 * CHUNK);
        assert_eq!(String::from_utf8(buf).unwrap(), to_yaml(&v, o));
    }

    #[test]
    fn yaml_layout() {
        let inner = dict_of([
            (k("a"), Value::Int(1)),
            (k("b"), Value::from(vec![Value::Int(1), Value::Int(2)])),
        ]);
        let v = dict_of([
            (k("a"), Value::Int(1)),
            (k("e"), Value::from(Vec::new())),
            (k("f"), Value::from(Dict::new())),
            (
                k("j"),
                Value::from(vec![
                    Value::Int(1),
                    inner,
                    Value::from(vec![Value::Int(3), Value::from(vec![Value::Int(4)])]),
                ]),
            ),
            (k("n"), Value::Float(3.25)),
            (k("d"), Value::str("multi\nline")),
            (k("t"), Value::str("a\n")),
            (k("z"), Value::None),
        ]);
        let want = "a: 1\ne: []\nf: {}\nj:\n- 1\n- a: 1\n  b:\n  - 1\n  - 2\n- - 3\n  - - 4\n'n': 3.25\nd: |-\n  multi\n  line\nt: |\n  a\nz: null\n";
        assert_eq!(to_yaml(&v, PrintOpts::default()), want);
        let nn = to_yaml(
            &v,
            PrintOpts {
                drop_none: true,
                sort_keys: true,
                ..Default::default()
            },
        );
        assert!(nn.starts_with("a: 1\nd: |-"));
        assert!(!nn.contains("z:"));
    }

    #[test]
    fn json_layout() {
        let v = dict_of([
            (k("a"), Value::Int(1)),
            (
                k("b"),
                Value::from(vec![Value::Float(1e20), Value::str("x\"")]),
            ),
        ]);
        assert_eq!(
            to_json(&v, PrintOpts::default(), 0),
            r#"{"a": 1, "b": [1e+20, "x\""]}"#
        );
        assert_eq!(
            to_json(&v, PrintOpts::default(), 4),
            "{\n    \"a\": 1,\n    \"b\": [\n        1e+20,\n        \"x\\\"\"\n    ]\n}"
        );
    }
}
