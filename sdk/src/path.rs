//! Attribute paths: how kusion names a field inside a resource's attributes.
//!
//! Syntax: segments joined by `.`; a list index is `[N]`; a plain key is made of ASCII letters,
//! digits, `_` and `-`; any other key is written quoted in brackets: `["app.kubernetes.io/name"]`.
//! Examples: `spec.replicas`, `spec.ports[0].port`, `metadata.labels["app.kubernetes.io/name"]`.

use std::fmt;

use serde_json::{Map, Value};

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    /// An object key (`spec`, or `app.kubernetes.io/name` when written `["..."]`).
    Key(String),
    /// A list index, 0-based (`[0]`).
    Index(usize),
}

/// A parsed attribute path. `Display` prints it back in the syntax above, so
/// `FieldPath::parse(&p.to_string()) == Ok(p)`; the empty path (no segments) names the whole
/// value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FieldPath(pub Vec<Segment>);

/// Why a text is not a valid [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid field path {path:?} at byte {offset}: {reason}")]
pub struct PathError {
    /// The whole text that was parsed.
    pub path: String,
    /// Byte offset into `path` where parsing failed.
    pub offset: usize,
    /// What was expected there (`expected a key`, `path ends with '.'`, ...).
    pub reason: &'static str,
}

fn is_plain_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

impl FieldPath {
    /// The empty path: the whole value.
    pub fn root() -> Self {
        FieldPath(Vec::new())
    }

    /// This path followed by the object key `key`.
    pub fn child_key(&self, key: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_string()));
        FieldPath(segments)
    }

    /// This path followed by the list index `index`.
    pub fn child_index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        FieldPath(segments)
    }

    /// Whether `other` is this path or lies under it (segment-wise: `a.b` is a prefix of
    /// `a.b[0]`, not of `a.bc`). The root is a prefix of every path.
    pub fn is_prefix_of(&self, other: &FieldPath) -> bool {
        other.0.len() >= self.0.len() && other.0[..self.0.len()] == self.0[..]
    }

    /// Parse a whole string as a path.
    pub fn parse(text: &str) -> Result<FieldPath, PathError> {
        let (path, used) = Self::parse_prefix(text)?;
        if used != text.len() {
            return Err(PathError {
                path: text.into(),
                offset: used,
                reason: "unexpected character",
            });
        }
        Ok(path)
    }

    /// Parse the longest path at the start of `text`; returns the path and the bytes used.
    /// Stops at the first character that cannot continue a path (used for references embedded
    /// in longer strings, where a plain key ends at anything but `[A-Za-z0-9_-]`).
    pub fn parse_prefix(text: &str) -> Result<(FieldPath, usize), PathError> {
        let err = |offset, reason| PathError {
            path: text.to_string(),
            offset,
            reason,
        };
        let bytes = text.as_bytes();
        let mut segments = Vec::new();
        let mut i = 0;
        let mut expect_key = true;
        while i < bytes.len() {
            match bytes[i] {
                b'[' => {
                    let (segment, next) = parse_bracket(text, i).map_err(|(o, r)| err(o, r))?;
                    segments.push(segment);
                    i = next;
                    expect_key = false;
                }
                b'.' if !expect_key => {
                    i += 1;
                    expect_key = true;
                    if i >= bytes.len() {
                        return Err(err(i, "path ends with '.'"));
                    }
                }
                _ if expect_key => {
                    let start = i;
                    let rest = &text[i..];
                    let len: usize = rest
                        .chars()
                        .take_while(|c| is_plain_key_char(*c))
                        .map(char::len_utf8)
                        .sum();
                    if len == 0 {
                        return Err(err(i, "expected a key"));
                    }
                    segments.push(Segment::Key(text[start..start + len].to_string()));
                    i += len;
                    expect_key = false;
                }
                _ => break,
            }
        }
        if expect_key && !segments.is_empty() {
            return Err(err(i, "path ends with '.'"));
        }
        Ok((FieldPath(segments), i))
    }

    /// Look the path up in a JSON value.
    pub fn get<'a>(&self, value: &'a Value) -> Option<&'a Value> {
        walk(&self.0, value)
    }

    /// Look the path up in a JSON object given as its map (a resource's attributes), without
    /// wrapping the map in a value. The empty path names the map itself, which is no `Value`
    /// here: `None`.
    pub fn get_in<'a>(&self, map: &'a Map<String, Value>) -> Option<&'a Value> {
        match self.0.split_first()? {
            (Segment::Key(k), rest) => walk(rest, map.get(k)?),
            (Segment::Index(_), _) => None,
        }
    }

    /// Look the path up in a JSON value, for changing what is there.
    pub fn get_mut<'a>(&self, value: &'a mut Value) -> Option<&'a mut Value> {
        let mut current = value;
        for segment in &self.0 {
            current = match (segment, current) {
                (Segment::Key(k), Value::Object(map)) => map.get_mut(k)?,
                (Segment::Index(i), Value::Array(items)) => items.get_mut(*i)?,
                _ => return None,
            };
        }
        Some(current)
    }

    /// Remove the value at this path; returns it if it existed.
    pub fn remove(&self, value: &mut Value) -> Option<Value> {
        let (last, parent) = self.0.split_last()?;
        let parent = FieldPath(parent.to_vec()).get_mut(value)?;
        match (last, parent) {
            (Segment::Key(k), Value::Object(map)) => map.shift_remove(k),
            (Segment::Index(i), Value::Array(items)) if *i < items.len() => Some(items.remove(*i)),
            _ => None,
        }
    }
}

/// Parses `[N]`, `["key"]` or `['key']` starting at `start` (which holds `[`).
fn parse_bracket(text: &str, start: usize) -> Result<(Segment, usize), (usize, &'static str)> {
    let bytes = text.as_bytes();
    let mut i = start + 1;
    match bytes.get(i) {
        Some(q @ (b'"' | b'\'')) => {
            let quote = *q;
            i += 1;
            let mut key = String::new();
            loop {
                let Some(c) = text[i..].chars().next() else {
                    return Err((i, "unterminated quoted key"));
                };
                if c as u32 == quote as u32 {
                    i += 1;
                    break;
                }
                if c == '\\' {
                    let Some(escaped) = text[i + 1..].chars().next() else {
                        return Err((i, "unterminated escape"));
                    };
                    key.push(escaped);
                    i += 1 + escaped.len_utf8();
                    continue;
                }
                key.push(c);
                i += c.len_utf8();
            }
            if bytes.get(i) != Some(&b']') {
                return Err((i, "expected ']' after quoted key"));
            }
            Ok((Segment::Key(key), i + 1))
        }
        Some(b'0'..=b'9') => {
            let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
            let index = text[i..i + digits]
                .parse::<usize>()
                .map_err(|_| (i, "index too large"))?;
            i += digits;
            if bytes.get(i) != Some(&b']') {
                return Err((i, "expected ']' after index"));
            }
            Ok((Segment::Index(index), i + 1))
        }
        _ => Err((i, "expected an index or a quoted key after '['")),
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Index(i) => write!(f, "[{i}]")?,
                Segment::Key(k) if !k.is_empty() && k.chars().all(is_plain_key_char) => {
                    if n > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Segment::Key(k) => {
                    f.write_str("[\"")?;
                    for c in k.chars() {
                        if c == '"' || c == '\\' {
                            f.write_str("\\")?;
                        }
                        write!(f, "{c}")?;
                    }
                    f.write_str("\"]")?;
                }
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for FieldPath {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FieldPath::parse(s)
    }
}

/// `segments` looked up from `value`.
fn walk<'a>(segments: &[Segment], value: &'a Value) -> Option<&'a Value> {
    let mut current = value;
    for segment in segments {
        current = match (segment, current) {
            (Segment::Key(k), Value::Object(map)) => map.get(k)?,
            (Segment::Index(i), Value::Array(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for text in [
            "spec.replicas",
            "spec.ports[0].port",
            "metadata.labels[\"app.kubernetes.io/name\"]",
            "[0]",
            "a[1][2].b",
        ] {
            let path = FieldPath::parse(text).unwrap();
            assert_eq!(path.to_string(), text);
        }
        let p = FieldPath::parse("a['x.y']").unwrap();
        assert_eq!(
            p.0,
            vec![Segment::Key("a".into()), Segment::Key("x.y".into())]
        );
    }

    #[test]
    fn rejects_bad_paths() {
        for text in ["a.", "a[", "a[x]", "a[\"x]", ".a", "a..b"] {
            assert!(FieldPath::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn prefix_stops_at_foreign_characters() {
        let (p, used) = FieldPath::parse_prefix("spec.ip/32 rest").unwrap();
        assert_eq!(used, 7);
        assert_eq!(p.to_string(), "spec.ip");
    }

    #[test]
    fn get_and_remove() {
        let mut v = serde_json::json!({"a": {"b": [1, {"c": 2}]}});
        assert_eq!(
            FieldPath::parse("a.b[1].c").unwrap().get(&v),
            Some(&serde_json::json!(2))
        );
        assert_eq!(
            FieldPath::parse("a.b[0]").unwrap().remove(&mut v),
            Some(serde_json::json!(1))
        );
        assert_eq!(v, serde_json::json!({"a": {"b": [{"c": 2}]}}));
    }

    #[test]
    fn get_in_a_map_matches_get_in_its_value() {
        let v = serde_json::json!({"a": {"b": [1, {"c": 2}]}});
        let map = v.as_object().unwrap();
        for path in ["a", "a.b[1].c", "a.b[5]", "x", "a.b.c"] {
            let p = FieldPath::parse(path).unwrap();
            assert_eq!(p.get_in(map), p.get(&v), "{path}");
        }
        assert_eq!(FieldPath::root().get_in(map), None);
    }
}
