//! Terraform provider schemas (`terraform providers schema -json`) to KCL schemas: one schema
//! per resource type (`aws_s3_bucket` -> `AwsS3Bucket`) with its settable attributes typed
//! (required without `?`), nested blocks and object-typed attributes as schemas of their own
//! (named after the resource and the block), and sets checked for uniqueness. Attributes that
//! are computed only (outputs such as `arn`) cannot be set in a configuration, so they are left
//! out of the attributes and listed in the docstring.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::schema_file::{Prop, Schema, camel, render, safe_name};
use super::{GenError, name};

struct Ctx {
    out: BTreeMap<String, Schema>,
    /// Every resource schema's name, so a nested schema never takes one.
    resources: BTreeSet<String>,
}

/// A `terraform providers schema -json` document to KCL source.
pub fn terraform_to_kcl(path: &str, text: &str) -> Result<String, GenError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| GenError::Parse {
        path: path.into(),
        msg: format!("line {} column {}: {e}", e.line(), e.column()),
    })?;
    let Some(Value::Object(providers)) = doc.get("provider_schemas") else {
        return Err(GenError::Unsupported {
            path: path.into(),
            msg: "no \"provider_schemas\": not `terraform providers schema -json` output".into(),
        });
    };
    let mut resources: Vec<(&String, &Value)> = Vec::new();
    for p in providers.values() {
        if let Some(Value::Object(rs)) = p.get("resource_schemas") {
            resources.extend(rs.iter());
        }
    }
    let mut cx = Ctx {
        out: BTreeMap::new(),
        resources: resources
            .iter()
            .map(|(k, _)| safe_name(&camel(k)))
            .collect(),
    };
    for (rtype, r) in resources {
        let n = safe_name(&camel(rtype));
        let block = r.get("block").unwrap_or(&Value::Null);
        let mut s = cx.block_schema(block, &n);
        s.doc = resource_doc(rtype, block, &s.doc);
        cx.out.insert(n, s);
    }
    let schemas: Vec<Schema> = cx.out.into_values().collect();
    Ok(render(&schemas))
}

/// The resource's docstring: its description, then the computed-only attributes.
fn resource_doc(rtype: &str, block: &Value, desc: &str) -> String {
    let mut doc = if desc.trim().is_empty() {
        format!("Terraform resource {rtype}.")
    } else {
        desc.to_string()
    };
    let computed: Vec<&String> = block
        .get("attributes")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(_, a)| computed_only(a))
                .map(|(k, _)| k)
                .collect()
        })
        .unwrap_or_default();
    if !computed.is_empty() {
        doc.push_str("\n\nComputed by the provider (not settable): ");
        doc.push_str(
            &computed
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        );
        doc.push('.');
    }
    doc
}

fn flag(a: &Value, k: &str) -> bool {
    a.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn computed_only(a: &Value) -> bool {
    flag(a, "computed") && !flag(a, "optional") && !flag(a, "required")
}

fn attr_doc(a: &Value) -> String {
    let mut d = a
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string();
    for (k, note) in [("sensitive", "Sensitive."), ("deprecated", "Deprecated.")] {
        if flag(a, k) {
            if !d.is_empty() {
                d.push(' ');
            }
            d.push_str(note);
        }
    }
    d
}

impl Ctx {
    /// A free name for a nested schema: never a resource's, numbered on a clash.
    fn fresh(&self, want: &str) -> String {
        let mut n = safe_name(want);
        if self.resources.contains(&n) {
            n.push_str("Block");
        }
        let base = n.clone();
        let mut i = 1;
        while self.resources.contains(&n) || self.out.contains_key(&n) {
            n = format!("{base}{i}");
            i += 1;
        }
        n
    }

    fn block_schema(&mut self, block: &Value, sname: &str) -> Schema {
        let mut s = Schema {
            name: sname.to_string(),
            doc: block
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            ..Schema::default()
        };
        if let Some(Value::Object(attrs)) = block.get("attributes") {
            for (k, a) in attrs {
                if computed_only(a) {
                    continue;
                }
                let hint = format!("{sname}{}", camel(k));
                let (ty, set) = if let Some(nt) = a.get("nested_type") {
                    self.nested_attr_type(nt, &hint)
                } else {
                    let t = a.get("type").unwrap_or(&Value::Null);
                    (self.type_of(t, &hint), is_set(t))
                };
                let required = flag(a, "required");
                self.push(&mut s, k, ty, required, attr_doc(a), set, None, None);
            }
        }
        if let Some(Value::Object(blocks)) = block.get("block_types") {
            for (k, b) in blocks {
                let inner = b.get("block").unwrap_or(&Value::Null);
                let n = self.fresh(&format!("{sname}{}", camel(k)));
                // reserve before recursing so inner blocks do not take the name
                self.out.insert(n.clone(), Schema::default());
                let nested = self.block_schema(inner, &n);
                self.out.insert(n.clone(), nested);
                let min = b.get("min_items").and_then(Value::as_u64).unwrap_or(0);
                let max = b.get("max_items").and_then(Value::as_u64).unwrap_or(0);
                let mode = b
                    .get("nesting_mode")
                    .and_then(Value::as_str)
                    .unwrap_or("list");
                let (ty, many) = match mode {
                    "single" | "group" => (n, false),
                    "map" => (format!("{{str:{n}}}"), false),
                    _ => (format!("[{n}]"), true),
                };
                let doc = inner
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let (lo, hi) = if many {
                    (Some(min).filter(|&m| m > 1), Some(max).filter(|&m| m > 0))
                } else {
                    (None, None)
                };
                self.push(&mut s, k, ty, min > 0, doc, false, lo, hi);
            }
        }
        s
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &self,
        s: &mut Schema,
        k: &str,
        ty: String,
        required: bool,
        doc: String,
        set: bool,
        min: Option<u64>,
        max: Option<u64>,
    ) {
        if super::is_ident(k) {
            let n = name(k);
            let guard = if required {
                String::new()
            } else {
                super::guard(&n)
            };
            if set {
                s.checks.push(format!("isunique({n}){guard}"));
            }
            if let Some(m) = min {
                s.checks.push(format!("len({n}) >= {m}{guard}"));
            }
            if let Some(m) = max {
                s.checks.push(format!("len({n}) <= {m}{guard}"));
            }
        }
        s.props.push(Prop {
            name: k.to_string(),
            ty,
            required,
            default: None,
            doc,
        });
    }

    /// A protocol 6 attribute with `nested_type` (attributes of its own).
    fn nested_attr_type(&mut self, nt: &Value, hint: &str) -> (String, bool) {
        let n = self.fresh(hint);
        self.out.insert(n.clone(), Schema::default());
        let s = self.block_schema(nt, &n);
        self.out.insert(n.clone(), s);
        match nt
            .get("nesting_mode")
            .and_then(Value::as_str)
            .unwrap_or("single")
        {
            "list" => (format!("[{n}]"), false),
            "set" => (format!("[{n}]"), true),
            "map" => (format!("{{str:{n}}}"), false),
            _ => (n, false),
        }
    }

    /// A cty type (`"string"`, `["list", T]`, `["object", {...}]`, ...) as KCL.
    fn type_of(&mut self, t: &Value, hint: &str) -> String {
        match t {
            Value::String(p) => match p.as_str() {
                "string" => "str".into(),
                // cty numbers are arbitrary precision: whole or not
                "number" => "int | float".into(),
                "bool" => "bool".into(),
                _ => "any".into(),
            },
            Value::Array(a) => match (a.first().and_then(Value::as_str), a.get(1)) {
                (Some("list" | "set"), Some(e)) => format!("[{}]", self.type_of(e, hint)),
                (Some("map"), Some(e)) => format!("{{str:{}}}", self.type_of(e, hint)),
                (Some("object"), Some(Value::Object(fields))) => self.object_type(fields, hint),
                _ => "any".into(),
            },
            _ => "any".into(),
        }
    }

    /// An object type: a schema whose attributes are all optional (null is a valid value for
    /// each in Terraform).
    fn object_type(&mut self, fields: &Map<String, Value>, hint: &str) -> String {
        let n = self.fresh(hint);
        self.out.insert(n.clone(), Schema::default());
        let mut s = Schema {
            name: n.clone(),
            ..Schema::default()
        };
        for (k, ft) in fields {
            let ty = self.type_of(ft, &format!("{n}{}", camel(k)));
            self.push(&mut s, k, ty, false, String::new(), is_set(ft), None, None);
        }
        self.out.insert(n.clone(), s);
        n
    }
}

fn is_set(t: &Value) -> bool {
    t.get(0).and_then(Value::as_str) == Some("set")
}
