//! TOML output (`kcl run --format toml`) in upstream's exact form.
//!
//! Upstream's `kcl` renders the YAML result, reads it back (an ordered map, or a plain Go map
//! with `--sort_keys`) and writes that with kcl-go's TOML encoder, a fork of BurntSushi/toml.
//! The same pipeline is followed here (our upstream-identical YAML, read back by
//! `serde_yaml_ng`) so YAML's typing of scalars carries over exactly, and the encoder's
//! layout rules are reproduced one for one: two-space indentation per table level, a blank
//! line before top-level tables, lists always inline (`[{a = 1}, {b = 2}]`) in insertion
//! order, and with sorted keys plain values before tables and lists of dicts as `[[a]]`.
//!
//! Where upstream fails, this fails with upstream's message (a value after a table, a null
//! list item). The one deviation: upstream's Go program crashes on a None dict value
//! (a panic in reflection); here that is an ordinary error naming the key and `-n`, which
//! drops None values (as it does upstream) and so is the explicit way to get TOML out.
//!
//! Upstream refuses most real configurations in key order (any plain value after a dict:
//! "unsupported to define 'b' after a table"), although TOML only needs each table's plain
//! values written before its sub-tables. `tables_last` (`--toml_tables_last`) does that,
//! keeping key order otherwise, so every result without None values has a TOML form.

use serde_yaml_ng::{Mapping, Value as Y};
use std::fmt::Write as _;

/// Why a result cannot be written as TOML.
#[derive(Debug, thiserror::Error)]
pub enum TomlError {
    /// Upstream's own message (exit 1 there too).
    #[error("{0}")]
    Upstream(String),
    /// TOML has no null; upstream crashes here.
    #[error(
        "toml: cannot encode the None value of '{0}' (TOML has no null); use -n/--disable_none to drop None values"
    )]
    NoneValue(String),
    #[error("toml: cannot read back the YAML result: {0}")]
    Yaml(String),
}

type R<T = ()> = Result<T, TomlError>;

const ERR_NIL_ELEMENT: &str = "toml: cannot encode array with nil element";
const ERR_NON_STRING: &str = "toml: cannot encode a map with non-string key type";
const ERR_NO_KEY: &str = "toml: top-level values must be Go maps, structs or yaml.MapSlice";

/// Convert the YAML text of a result (one document, or a `---` stream) to upstream's TOML.
#[cfg(test)]
pub fn yaml_to_toml(yaml: &str, sort_keys: bool) -> Result<String, TomlError> {
    yaml_to_toml_with(yaml, sort_keys, false)
}

/// [`yaml_to_toml`]; `tables_last` writes plain values before tables instead of failing.
pub fn yaml_to_toml_with(
    yaml: &str,
    sort_keys: bool,
    tables_last: bool,
) -> Result<String, TomlError> {
    let mut docs = Vec::new();
    for de in serde_yaml_ng::Deserializer::from_str(yaml) {
        let v: Y =
            serde::Deserialize::deserialize(de).map_err(|e| TomlError::Yaml(e.to_string()))?;
        docs.push(v);
    }
    if docs.len() <= 1 {
        let doc = docs.pop().unwrap_or(Y::Mapping(Mapping::new()));
        let mut s = encode_doc(&doc, sort_keys, tables_last, 1)?;
        s.push('\n');
        return Ok(s);
    }
    // a stream: one TOML document per YAML document, separated by a comment line
    let mut out = String::new();
    let n = docs.len();
    for (i, d) in docs.iter().enumerate() {
        out.push_str(&encode_doc(d, sort_keys, tables_last, i + 1)?);
        if i + 1 < n {
            out.push_str("\n# --- Document separator ---\n\n");
        }
    }
    Ok(out)
}

fn encode_doc(doc: &Y, sorted: bool, tables_last: bool, index: usize) -> R<String> {
    let Y::Mapping(_) = doc else {
        return Err(TomlError::Upstream(if sorted {
            format!("document {index} is not a map")
        } else {
            ERR_NO_KEY.to_string()
        }));
    };
    let mut e = Enc {
        out: String::new(),
        sorted,
        tables_last,
        has_written: false,
        has_written_table: false,
        in_table: false,
    };
    e.encode(&[], doc)?;
    Ok(e.out)
}

/// The TOML type of a value, as the encoder classifies it (`tomlTypeOfGo`).
#[derive(PartialEq, Clone, Copy)]
enum Ty {
    Scalar,
    Array,
    ArrayHash,
    Hash,
}

struct Enc {
    out: String,
    /// Upstream reads YAML into a Go map with `--sort_keys`, else into an ordered map; the
    /// encoder treats the two differently (see the module docs).
    sorted: bool,
    tables_last: bool,
    has_written: bool,
    has_written_table: bool,
    in_table: bool,
}

fn key_str(key: &[String]) -> String {
    key.iter()
        .map(|k| maybe_quoted(k))
        .collect::<Vec<_>>()
        .join(".")
}

fn is_bare(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn maybe_quoted(k: &str) -> String {
    if is_bare(k) {
        k.to_string()
    } else {
        format!("\"{}\"", escape(k))
    }
}

fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\u{8}' => o.push_str("\\b"),
            '\t' => o.push_str("\\t"),
            '\n' => o.push_str("\\n"),
            '\u{c}' => o.push_str("\\f"),
            '\r' => o.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

fn with(key: &[String], k: &str) -> Vec<String> {
    let mut v = key.to_vec();
    v.push(k.to_string());
    v
}

fn str_key(k: &Y) -> R<&str> {
    match k {
        Y::String(s) => Ok(s),
        _ => Err(TomlError::Upstream(ERR_NON_STRING.into())),
    }
}

impl Enc {
    fn w(&mut self, s: &str) {
        self.out.push_str(s);
        self.has_written = true;
    }

    fn newline(&mut self) {
        if self.has_written {
            self.w("\n");
        }
    }

    fn indent(key: &[String]) -> String {
        "  ".repeat(key.len().saturating_sub(1))
    }

    fn ty(&self, v: &Y) -> R<Option<Ty>> {
        Ok(Some(match v {
            Y::Null => return Ok(None),
            Y::Bool(_) | Y::Number(_) | Y::String(_) => Ty::Scalar,
            Y::Sequence(s) => {
                if self.is_table_array(s)? {
                    Ty::ArrayHash
                } else {
                    Ty::Array
                }
            }
            // an ordered map is a Go slice of items to the encoder: an "array of tables"
            // unless empty, so it never counts as a table itself
            Y::Mapping(m) if !self.sorted => {
                if m.is_empty() {
                    Ty::Array
                } else {
                    Ty::ArrayHash
                }
            }
            Y::Mapping(_) => Ty::Hash,
            Y::Tagged(t) => return self.ty(&t.value),
        }))
    }

    fn is_table_array(&self, s: &[Y]) -> R<bool> {
        if s.is_empty() {
            return Ok(false);
        }
        let mut all = true;
        for x in s {
            match self.ty(x)? {
                None => return Err(TomlError::Upstream(ERR_NIL_ELEMENT.into())),
                Some(t) => all &= t == Ty::Hash,
            }
        }
        Ok(all)
    }

    fn encode(&mut self, key: &[String], v: &Y) -> R {
        if let Y::Mapping(m) = v
            && !self.sorted
        {
            return self.table(key, m);
        }
        let is_map = matches!(v, Y::Mapping(_));
        if !self.in_table && self.has_written_table && !is_map && !self.tables_last {
            return Err(TomlError::Upstream(format!(
                "unsupported to define '{}' after a table, ref: https://toml.io/en/v1.0.0#table",
                key_str(key)
            )));
        }
        match v {
            Y::Null => Ok(()),
            Y::Bool(_) | Y::Number(_) | Y::String(_) => self.key_value(key, v, false),
            Y::Sequence(s) => {
                if self.ty(v)? == Some(Ty::ArrayHash) {
                    self.array_of_tables(key, s)
                } else {
                    self.key_value(key, v, false)
                }
            }
            Y::Mapping(m) => self.table(key, m),
            Y::Tagged(t) => self.encode(key, &t.value),
        }
    }

    fn array_of_tables(&mut self, key: &[String], s: &[Y]) -> R {
        if key.is_empty() {
            return Err(TomlError::Upstream(ERR_NO_KEY.into()));
        }
        for x in s {
            let Y::Mapping(m) = x else { continue };
            self.newline();
            let h = format!("{}[[{}]]", Self::indent(key), key_str(key));
            self.w(&h);
            self.newline();
            self.map(key, m, false)?;
        }
        Ok(())
    }

    fn table(&mut self, key: &[String], m: &Mapping) -> R {
        self.in_table = true;
        if key.len() == 1 {
            self.newline();
        }
        if !key.is_empty() {
            self.has_written_table = true;
            let h = format!("{}[{}]", Self::indent(key), key_str(key));
            self.w(&h);
            self.newline();
        }
        self.map(key, m, false)?;
        self.in_table = false;
        Ok(())
    }

    fn map(&mut self, key: &[String], m: &Mapping, inline: bool) -> R {
        if self.sorted {
            self.go_map(key, m, inline)
        } else {
            self.map_slice(key, m, inline)
        }
    }

    /// An ordered map (`yaml.MapSlice`): entries in order, tables where they fall.
    fn map_slice(&mut self, key: &[String], m: &Mapping, inline: bool) -> R {
        let mut items: Vec<(&str, &Y)> = m
            .iter()
            .map(|(k, v)| Ok((str_key(k)?, v)))
            .collect::<R<_>>()?;
        if self.tables_last && !inline {
            // stable: key order is kept within plain values and within tables
            items.sort_by_key(|(_, v)| matches!(v, Y::Mapping(_)));
        }
        if inline {
            self.w("{");
        }
        let n = items.len();
        for (i, (k, v)) in items.into_iter().enumerate() {
            if matches!(v, Y::Null) {
                return Err(TomlError::NoneValue(key_str(&with(key, k))));
            }
            self.member(key, k, v, inline, i + 1 != n)?;
        }
        if inline {
            self.w("}");
        }
        Ok(())
    }

    /// A Go map: keys sorted, plain values first, then tables; None values are skipped.
    fn go_map(&mut self, key: &[String], m: &Mapping, inline: bool) -> R {
        let mut direct = Vec::new();
        let mut sub = Vec::new();
        for (k, v) in m {
            let k = str_key(k)?;
            match self.ty(v)? {
                Some(Ty::Hash | Ty::ArrayHash) => sub.push((k, v)),
                _ => direct.push((k, v)),
            }
        }
        if inline {
            self.w("{");
        }
        let trail = !sub.is_empty();
        for (group, trail) in [(direct, trail), (sub, false)] {
            let mut group = group;
            group.sort_by(|a, b| a.0.cmp(b.0));
            let n = group.len();
            for (i, (k, v)) in group.into_iter().enumerate() {
                if matches!(v, Y::Null) {
                    continue;
                }
                self.member(key, k, v, inline, trail || i + 1 != n)?;
            }
        }
        if inline {
            self.w("}");
        }
        Ok(())
    }

    /// One member `k` of the map at `key`: `k = v` inside an inline table (then `, ` when
    /// `comma`), else a key or table of its own.
    fn member(&mut self, key: &[String], k: &str, v: &Y, inline: bool, comma: bool) -> R {
        if inline {
            self.key_value(&[k.to_string()], v, true)?;
            if comma {
                self.w(", ");
            }
        } else {
            self.encode(&with(key, k), v)?;
        }
        Ok(())
    }

    fn key_value(&mut self, key: &[String], v: &Y, inline: bool) -> R {
        if key.is_empty() {
            return self.element(key, v);
        }
        let h = format!(
            "{}{} = ",
            Self::indent(key),
            maybe_quoted(&key[key.len() - 1])
        );
        self.w(&h);
        self.element(key, v)?;
        if !inline {
            self.newline();
        }
        Ok(())
    }

    fn element(&mut self, key: &[String], v: &Y) -> R {
        match v {
            Y::Null => Err(TomlError::NoneValue(key_str(key))),
            Y::Bool(b) => {
                self.w(if *b { "true" } else { "false" });
                Ok(())
            }
            Y::Number(n) => {
                let s = if let Some(i) = n.as_i64() {
                    i.to_string()
                } else if let Some(u) = n.as_u64() {
                    u.to_string()
                } else {
                    go_float(n.as_f64().unwrap_or(f64::NAN))
                };
                self.w(&s);
                Ok(())
            }
            Y::String(s) => {
                let q = format!("\"{}\"", escape(s));
                self.w(&q);
                Ok(())
            }
            Y::Sequence(s) => {
                self.w("[");
                let n = s.len();
                for (i, x) in s.iter().enumerate() {
                    self.element(key, x)?;
                    if i + 1 != n {
                        self.w(", ");
                    }
                }
                self.w("]");
                Ok(())
            }
            Y::Mapping(m) => self.map(key, m, true),
            Y::Tagged(t) => self.element(key, &t.value),
        }
    }
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)` plus the `.0` TOML needs; Rust's `Display` for
/// `f64` is the same shortest round-trip digits without an exponent.
fn go_float(f: f64) -> String {
    if f.is_nan() {
        return if f.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if f.is_infinite() {
        return if f < 0.0 { "-inf" } else { "inf" }.into();
    }
    let s = format!("{f}");
    if s.contains('.') { s } else { s + ".0" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(y: &str) -> String {
        yaml_to_toml(y, false).unwrap()
    }

    // the expectations of kcl-go's own encoder tests (gentoml_test.go), read as YAML
    #[test]
    fn ordered_like_kcl_go() {
        assert_eq!(
            t("b_key: value1\na_key: value2\nc_key: value3\n"),
            "b_key = \"value1\"\na_key = \"value2\"\nc_key = \"value3\"\n\n"
        );
        assert_eq!(
            t(
                "outer_key2: outer_value2\nouter_key1:\n  inner_key1: inner_value1\n  inner_key2: inner_value2\n"
            ),
            "outer_key2 = \"outer_value2\"\n\n[outer_key1]\n  inner_key1 = \"inner_value1\"\n  inner_key2 = \"inner_value2\"\n\n"
        );
        assert_eq!(
            t(
                "simple_key: simple_value\nkey_with_slices:\n- inner_key1: value1\n- inner_key2: value2\n"
            ),
            "simple_key = \"simple_value\"\nkey_with_slices = [{inner_key1 = \"value1\"}, {inner_key2 = \"value2\"}]\n\n"
        );
    }

    #[test]
    fn value_after_table_is_upstreams_error() {
        let e = yaml_to_toml("a:\n  x: 1\nb: 2\n", false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unsupported to define 'b' after a table, ref: https://toml.io/en/v1.0.0#table"
        );
        // sorted keys put plain values first, so the same data encodes
        assert_eq!(
            yaml_to_toml("a:\n  x: 1\nb: 2\n", true).unwrap(),
            "b = 2\n\n[a]\n  x = 1\n\n"
        );
    }

    #[test]
    fn tables_last_keeps_order_otherwise() {
        assert_eq!(
            yaml_to_toml_with(
                "z: 1\na:\n  y: 1\n  x:\n    k: v\n  w: 2\nb: [1]\n",
                false,
                true
            )
            .unwrap(),
            "z = 1\nb = [1]\n\n[a]\n  y = 1\n  w = 2\n  [a.x]\n    k = \"v\"\n\n"
        );
    }

    #[test]
    fn nulls() {
        assert!(matches!(
            yaml_to_toml("a:\n  b: null\n", false),
            Err(TomlError::NoneValue(k)) if k == "a.b"
        ));
        assert_eq!(
            yaml_to_toml("a: [1, null]\n", false)
                .unwrap_err()
                .to_string(),
            ERR_NIL_ELEMENT
        );
        // a Go map skips nil values
        assert_eq!(yaml_to_toml("a: null\nb: 1\n", true).unwrap(), "b = 1\n\n");
    }

    #[test]
    fn scalars_and_keys() {
        assert_eq!(
            t("f: 1.0\ng: 1.5e-07\nh: .inf\n'a b': \"q\\\"\\t\\u0001\"\n"),
            "f = 1.0\ng = 0.00000015\nh = inf\n\"a b\" = \"q\\\"\\t\\u0001\"\n\n"
        );
        assert_eq!(t("{}\n"), "\n");
        assert_eq!(t("a: []\nb: {}\n"), "a = []\n\n[b]\n\n");
    }

    #[test]
    fn sorted_lists_of_dicts_are_tables() {
        assert_eq!(
            yaml_to_toml("x:\n- b: 1\n  a: 2\n- c: 3\n", true).unwrap(),
            "[[x]]\n  a = 2\n  b = 1\n\n[[x]]\n  c = 3\n\n"
        );
    }

    #[test]
    fn stream() {
        assert_eq!(
            t("a: 1\n---\nb: 2\n"),
            "a = 1\n\n# --- Document separator ---\n\nb = 2\n"
        );
    }
}
