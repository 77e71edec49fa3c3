//! The data as KCL: the config `value = Schema {...}` generated from the data, with a map from
//! each piece of the generated text back to its data path (`$.ports[1].containerPort`), and
//! the removal of a value by its path (after a violation, the rest is validated again).

use std::fmt::Write as _;

use super::data::{Data, Node, Pos, map_pos};

/// Where a piece of the generated KCL came from.
pub(super) struct Origin {
    pub(super) lo: usize,
    pub(super) hi: usize,
    pub(super) path: String,
    pub(super) pos: Pos,
}

pub(super) struct Gen {
    pub(super) text: String,
    pub(super) origins: Vec<Origin>,
}

fn kcl_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '$' => o.push_str("\\$"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A config key: a name where it can be one (so the checker judges it as an attribute, as
/// upstream's generated config does), else a string.
fn kcl_key(k: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "True",
        "False",
        "None",
        "Undefined",
        "import",
        "as",
        "rule",
        "schema",
        "mixin",
        "protocol",
        "check",
        "for",
        "assert",
        "if",
        "elif",
        "else",
        "or",
        "and",
        "not",
        "in",
        "is",
        "lambda",
        "all",
        "any",
        "filter",
        "map",
    ];
    let ident = k.starts_with(|c: char| c.is_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_alphanumeric() || c == '_');
    if ident && !KEYWORDS.contains(&k) {
        k.to_string()
    } else {
        kcl_str(k)
    }
}

pub(super) fn child_path(parent: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !key.starts_with(|c: char| c.is_ascii_digit());
    if bare {
        format!("{parent}.{key}")
    } else {
        format!(
            "{parent}[{}]",
            serde_json::to_string(key).unwrap_or_default()
        )
    }
}

impl Gen {
    pub(super) fn value(&mut self, n: &Node, path: &str) {
        match &n.data {
            Data::Null => self.text.push_str("None"),
            Data::Bool(b) => self.text.push_str(if *b { "True" } else { "False" }),
            Data::Int(i) => {
                let _ = write!(self.text, "{i}");
            }
            Data::Float(f) => {
                if f.is_nan() {
                    self.text.push_str("float(\"nan\")");
                } else if f.is_infinite() {
                    self.text.push_str(if *f > 0.0 {
                        "float(\"inf\")"
                    } else {
                        "float(\"-inf\")"
                    });
                } else {
                    let s = format!("{f:?}");
                    self.text.push_str(&s);
                }
            }
            Data::Str(s) => self.text.push_str(&kcl_str(s)),
            Data::List(items) => {
                self.text.push('[');
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        self.text.push_str(", ");
                    }
                    let p = format!("{path}[{i}]");
                    let lo = self.text.len();
                    self.value(it, &p);
                    self.origins.push(Origin {
                        lo,
                        hi: self.text.len(),
                        path: p,
                        pos: it.pos,
                    });
                }
                self.text.push(']');
            }
            Data::Map(entries) => {
                self.text.push_str("{\n");
                for (k, kpos, v) in entries {
                    let p = child_path(path, k);
                    let lo = self.text.len();
                    self.text.push_str(&kcl_key(k));
                    self.text.push_str(": ");
                    self.value(v, &p);
                    self.origins.push(Origin {
                        lo,
                        hi: self.text.len(),
                        path: p,
                        pos: *kpos,
                    });
                    self.text.push('\n');
                }
                self.text.push('}');
            }
        }
    }
}

/// The KCL instantiating `schema` with the data (`name = Schema {...}`, a list of them for a
/// list), and where each part came from.
pub(super) fn generate(root: &Node, schema: &str, name: &str) -> Gen {
    let mut g = Gen {
        text: format!("{name} = "),
        origins: Vec::new(),
    };
    let lo = g.text.len();
    match &root.data {
        Data::List(items) => {
            g.text.push('[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    g.text.push_str(", ");
                }
                let p = format!("$[{i}]");
                let lo = g.text.len();
                g.text.push_str(schema);
                g.text.push(' ');
                g.value(it, &p);
                g.origins.push(Origin {
                    lo,
                    hi: g.text.len(),
                    path: p,
                    pos: map_pos(it),
                });
            }
            g.text.push(']');
        }
        _ => {
            g.text.push_str(schema);
            g.text.push(' ');
            g.value(root, "$");
        }
    }
    g.origins.push(Origin {
        lo,
        hi: g.text.len(),
        path: "$".into(),
        pos: map_pos(root),
    });
    g.text.push('\n');
    g
}

/// Remove the value at a data path (`$`, `.key`, `["key"]`, `[i]`); false when absent.
pub(super) fn remove_path(root: &mut Node, path: &str) -> bool {
    let steps = parse_path(path);
    let Some((last, init)) = steps.split_last() else {
        return false;
    };
    let mut cur = root;
    for s in init {
        let next = match (&mut cur.data, s) {
            (Data::Map(e), Step::Key(k)) => e.iter_mut().find(|(x, _, _)| x == k).map(|x| &mut x.2),
            (Data::List(l), Step::Index(i)) => l.get_mut(*i),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return false,
        }
    }
    match (&mut cur.data, last) {
        (Data::Map(e), Step::Key(k)) => {
            let before = e.len();
            e.retain(|(x, _, _)| x != k);
            e.len() != before
        }
        (Data::List(l), Step::Index(i)) if *i < l.len() => {
            l.remove(*i);
            true
        }
        _ => false,
    }
}

pub(super) enum Step {
    Key(String),
    Index(usize),
}

pub(super) fn parse_path(path: &str) -> Vec<Step> {
    let mut out = Vec::new();
    let b = path.strip_prefix('$').unwrap_or(path);
    let mut rest = b;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            out.push(Step::Key(r[..end].to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("[\"") {
            // a JSON string up to the closing `"]`
            let mut de = serde_json::Deserializer::from_str(&rest[1..]).into_iter::<String>();
            match de.next() {
                Some(Ok(k)) => {
                    let used = de.byte_offset();
                    out.push(Step::Key(k));
                    rest = rest[1 + used..].strip_prefix(']').unwrap_or("");
                }
                _ => {
                    let _ = r;
                    break;
                }
            }
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').unwrap_or(r.len());
            match r[..end].parse() {
                Ok(i) => out.push(Step::Index(i)),
                Err(_) => break,
            }
            rest = r.get(end + 1..).unwrap_or("");
        } else {
            break;
        }
    }
    out
}
