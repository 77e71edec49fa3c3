//! The data file with positions: JSON or YAML read by one YAML 1.2 parser that keeps the line
//! and column of every node, so a violation can be shown where it is in the data.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A line and column (1-based) in the data file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pos {
    pub line: usize,
    pub col: usize,
}

/// A data value and where it starts.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub pos: Pos,
    pub data: Data,
}

#[derive(Clone, Debug)]
pub(crate) enum Data {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Node>),
    /// Entries with the position of each key.
    Map(Vec<(String, Pos, Node)>),
}

#[derive(Default)]
struct Collect {
    events: Vec<(Event, Marker)>,
}

impl MarkedEventReceiver for Collect {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        self.events.push((ev, mark));
    }
}

/// Parse YAML (or JSON) text into a [`Node`] tree: the first document.
pub(crate) fn parse_data(text: &str) -> Result<Node, String> {
    let mut c = Collect::default();
    let mut p = Parser::new_from_str(text);
    p.load(&mut c, false).map_err(|e| e.to_string())?;
    let mut anchors = std::collections::HashMap::new();
    let mut i = 0;
    // skip StreamStart / DocumentStart
    while i < c.events.len() && matches!(c.events[i].0, Event::StreamStart | Event::DocumentStart) {
        i += 1;
    }
    if i >= c.events.len() || matches!(c.events[i].0, Event::StreamEnd) {
        return Ok(Node {
            pos: Pos { line: 1, col: 1 },
            data: Data::Null,
        });
    }
    build(&c.events, &mut i, &mut anchors)
}

fn pos(m: &Marker) -> Pos {
    // yaml-rust2's columns are 0-based
    Pos {
        line: m.line(),
        col: m.col() + 1,
    }
}

fn build(
    ev: &[(Event, Marker)],
    i: &mut usize,
    anchors: &mut std::collections::HashMap<usize, Node>,
) -> Result<Node, String> {
    let (e, m) = ev.get(*i).ok_or("unexpected end of the data")?;
    *i += 1;
    let at = pos(m);
    let (node, anchor) = match e {
        Event::Scalar(v, style, anchor, tag) => {
            let data = if *style != TScalarStyle::Plain
                || tag.as_ref().is_some_and(|t| t.suffix == "str")
            {
                Data::Str(v.clone())
            } else {
                plain_scalar(v)
            };
            (Node { pos: at, data }, *anchor)
        }
        Event::Alias(id) => {
            let n = anchors
                .get(id)
                .cloned()
                .ok_or_else(|| format!("unknown alias at line {}", at.line))?;
            return Ok(n);
        }
        Event::SequenceStart(anchor, _) => {
            let mut items = Vec::new();
            while !matches!(ev.get(*i).map(|x| &x.0), Some(Event::SequenceEnd) | None) {
                items.push(build(ev, i, anchors)?);
            }
            *i += 1;
            (
                Node {
                    pos: at,
                    data: Data::List(items),
                },
                *anchor,
            )
        }
        Event::MappingStart(anchor, _) => {
            let mut entries = Vec::new();
            while !matches!(ev.get(*i).map(|x| &x.0), Some(Event::MappingEnd) | None) {
                let k = build(ev, i, anchors)?;
                let key = match k.data {
                    Data::Str(s) => s,
                    Data::Int(n) => n.to_string(),
                    Data::Float(f) => f.to_string(),
                    Data::Bool(b) => b.to_string(),
                    Data::Null => "null".into(),
                    _ => {
                        return Err(format!(
                            "line {}: a mapping key must be a scalar",
                            k.pos.line
                        ));
                    }
                };
                let v = build(ev, i, anchors)?;
                entries.push((key, k.pos, v));
            }
            *i += 1;
            (
                Node {
                    pos: at,
                    data: Data::Map(entries),
                },
                *anchor,
            )
        }
        other => return Err(format!("unexpected YAML event {other:?}")),
    };
    if anchor > 0 {
        anchors.insert(anchor, node.clone());
    }
    Ok(node)
}

/// A plain scalar by YAML 1.2's core schema (JSON's literals included).
fn plain_scalar(v: &str) -> Data {
    match v {
        "" | "~" | "null" | "Null" | "NULL" => return Data::Null,
        "true" | "True" | "TRUE" => return Data::Bool(true),
        "false" | "False" | "FALSE" => return Data::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Data::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Data::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Data::Float(f64::NAN),
        _ => {}
    }
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = v.parse::<i64>() {
            return Data::Int(n);
        }
    } else if let Some(h) = v.strip_prefix("0x")
        && let Ok(n) = i64::from_str_radix(h, 16)
    {
        return Data::Int(n);
    } else if let Some(o) = v.strip_prefix("0o")
        && let Ok(n) = i64::from_str_radix(o, 8)
    {
        return Data::Int(n);
    }
    let looks_numeric = v
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_digit() || b == b'-' || b == b'+' || b == b'.');
    if looks_numeric && let Ok(f) = v.parse::<f64>() {
        return Data::Float(f);
    }
    Data::Str(v.to_string())
}

/// Where a dict's text starts: its first key (a block mapping's own mark is after it).
pub(super) fn map_pos(n: &Node) -> Pos {
    match &n.data {
        Data::Map(e) if !e.is_empty() => e[0].1,
        _ => n.pos,
    }
}
