//! JSON Schema (draft 4 to 2020-12) to KCL schemas: object schemas become schemas (nested ones
//! named after their parent and property, `$defs`/`definitions` after their name), `required`
//! decides `?`, `enum`/`const` become literal types, `oneOf`/`anyOf` unions, `allOf` a merged
//! schema, `additionalProperties` an index signature, and length, range, pattern, multiple
//! and uniqueness keywords `check:` lines.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::data::inline;
use super::schema_file::{Prop, Schema, camel, render, safe_name};
use super::{GenError, name, string};

struct Ctx<'a> {
    root: &'a Value,
    /// Generated schemas in discovery order.
    out: Vec<Schema>,
    taken: BTreeSet<String>,
    /// `$ref` pointer -> the schema generated for it.
    by_ref: HashMap<String, String>,
    /// `$ref`s being inlined, against cycles of non-object schemas.
    inlining: Vec<String>,
}

/// A JSON Schema document to KCL source.
pub fn jsonschema_to_kcl(path: &str, text: &str) -> Result<String, GenError> {
    let root: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| GenError::Parse {
            path: path.into(),
            msg: format!("line {} column {}: {e}", e.line(), e.column()),
        })?
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| GenError::Parse {
            path: path.into(),
            msg: e.to_string(),
        })?
    };
    if !root.is_object() {
        return Err(GenError::Unsupported {
            path: path.into(),
            msg: "a JSON Schema document must be an object".into(),
        });
    }
    let mut cx = Ctx {
        root: &root,
        out: Vec::new(),
        taken: BTreeSet::new(),
        by_ref: HashMap::new(),
        inlining: Vec::new(),
    };
    let root_name = safe_name(&camel(&root_name(&root, path)));
    if is_object_schema(&root) || root.get("allOf").is_some() {
        cx.by_ref.insert("#".into(), root_name.clone());
        cx.taken.insert(root_name.clone());
        cx.object_schema(&root, &root_name);
    } else if root.get("oneOf").is_some()
        || root.get("anyOf").is_some()
        || root.get("type").is_some()
    {
        // a non-object root: its type as a named type alias
        cx.taken.insert(root_name.clone());
        let t = cx.type_of(&root, &root_name);
        cx.out.push(Schema {
            name: String::new(),
            doc: format!("type {root_name} = {t}"),
            ..Schema::default()
        });
    }
    // definitions nobody refers to are still part of the document's vocabulary
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = root.get(key) {
            for (k, d) in defs {
                if is_object_schema(d) {
                    let ptr = format!("#/{key}/{}", k.replace('~', "~0").replace('/', "~1"));
                    cx.ref_type(&ptr, d);
                }
            }
        }
    }
    let mut aliases = Vec::new();
    let schemas: Vec<Schema> = cx
        .out
        .into_iter()
        .filter(|s| {
            if s.name.is_empty() {
                aliases.push(s.doc.clone());
                false
            } else {
                true
            }
        })
        .collect();
    let mut text = render(&schemas);
    for a in aliases {
        text.push_str(&a);
        text.push('\n');
    }
    Ok(text)
}

/// `$id`'s last segment without extension, else `title`, else the file name.
fn root_name(root: &Value, path: &str) -> String {
    let stem = |s: &str| {
        let last = s
            .trim_end_matches('#')
            .rsplit('/')
            .next()
            .unwrap_or(s)
            .to_string();
        last.split('.').next().unwrap_or(&last).to_string()
    };
    if let Some(id) = root.get("$id").or(root.get("id")).and_then(Value::as_str) {
        let s = stem(id);
        if !s.is_empty() {
            return s;
        }
    }
    if let Some(t) = root.get("title").and_then(Value::as_str) {
        return t.to_string();
    }
    stem(path)
}

fn types(s: &Value) -> Vec<&str> {
    match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn is_object_schema(s: &Value) -> bool {
    let ts = types(s);
    s.get("properties").is_some()
        || s.get("patternProperties").is_some()
        || ts.contains(&"object") && s.get("additionalProperties").is_some_and(Value::is_object)
        || ts == ["object"] && s.get("allOf").is_some()
}

/// A JSON value as a KCL literal, if it has one.
fn literal(v: &Value) -> String {
    match v {
        Value::String(s) => string(s),
        _ => inline(v),
    }
}

/// A JSON scalar as a literal type: strings always in the escaped form, as a raw
/// triple-quoted string is no type.
fn literal_type(v: &Value) -> String {
    match v {
        Value::String(s) => crate::openapi::str_lit(s),
        _ => inline(v),
    }
}

fn num(v: Option<&Value>) -> Option<String> {
    v.and_then(|v| v.as_f64().map(|_| v.to_string()))
}

impl<'a> Ctx<'a> {
    fn fresh(&mut self, want: &str) -> String {
        let want = safe_name(want);
        let mut n = want.clone();
        let mut i = 1;
        while self.taken.contains(&n) {
            n = format!("{want}{i}");
            i += 1;
        }
        self.taken.insert(n.clone());
        n
    }

    fn resolve(&self, ptr: &str) -> Option<&'a Value> {
        let p = ptr.strip_prefix('#')?;
        if p.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(p)
    }

    /// The type of a `$ref`: a schema for object schemas (generated once), else the target's
    /// type inline.
    fn ref_type(&mut self, ptr: &str, target: &'a Value) -> String {
        if let Some(n) = self.by_ref.get(ptr) {
            return n.clone();
        }
        let last = ptr
            .rsplit('/')
            .next()
            .unwrap_or("Ref")
            .replace("~1", "/")
            .replace("~0", "~");
        if is_object_schema(target) {
            let n = self.fresh(&camel(&last));
            self.by_ref.insert(ptr.to_string(), n.clone());
            self.object_schema(target, &n);
            n
        } else if self.inlining.iter().any(|p| p == ptr) {
            "any".into()
        } else {
            self.inlining.push(ptr.to_string());
            let t = self.type_of(target, &camel(&last));
            self.inlining.pop();
            t
        }
    }

    /// The KCL type of schema `s`; object schemas become schemas named `hint`.
    fn type_of(&mut self, s: &'a Value, hint: &str) -> String {
        let Value::Object(m) = s else {
            return "any".into();
        };
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            return match self.resolve(r) {
                Some(t) => self.ref_type(r, t),
                None => "any".into(),
            };
        }
        if let Some(c) = m.get("const")
            && !c.is_array()
            && !c.is_object()
        {
            return literal_type(c);
        }
        if let Some(Value::Array(e)) = m.get("enum") {
            let lits: Vec<String> = e
                .iter()
                .filter(|v| !v.is_null())
                .map(|v| match v {
                    Value::Array(_) | Value::Object(_) => "any".into(),
                    _ => literal_type(v),
                })
                .collect();
            if !lits.is_empty() && !lits.iter().any(|l| l == "any") {
                return dedup(lits);
            }
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(alts)) = m.get(key) {
                // `{"type": "null"}` members make the value nullable, which `?` already allows
                let alts: Vec<&'a Value> = alts.iter().filter(|a| types(a) != ["null"]).collect();
                let ts: Vec<String> = alts
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        let h = if alts.len() == 1 {
                            hint.to_string()
                        } else {
                            format!("{hint}{}{i}", camel(key))
                        };
                        self.type_of(a, &h)
                    })
                    .collect();
                if ts.is_empty() {
                    return "None".into();
                }
                // members that only add constraints (`required`, ...) leave the own type
                if !ts.iter().any(|t| t == "any") {
                    return dedup(ts);
                }
            }
        }
        if is_object_schema(s) || m.get("allOf").is_some() && types(s).is_empty() {
            if let Some(Value::Array(all)) = m.get("allOf")
                && all.len() == 1
                && m.get("properties").is_none()
            {
                return self.type_of(&all[0], hint);
            }
            let n = self.fresh(hint);
            self.object_schema(s, &n);
            return n;
        }
        let mut ts = Vec::new();
        for t in types(s) {
            ts.push(match t {
                "string" => "str".into(),
                "integer" => "int".into(),
                "number" => "float".into(),
                "boolean" => "bool".into(),
                "null" => continue,
                "array" => format!("[{}]", self.items_type(m, hint)),
                "object" => match m.get("additionalProperties") {
                    Some(ap @ Value::Object(_)) => {
                        format!("{{str:{}}}", self.type_of(ap, &format!("{hint}Value")))
                    }
                    _ => "{str:any}".into(),
                },
                _ => "any".into(),
            });
        }
        if ts.is_empty() && types(s) == ["null"] {
            return "None".into();
        }
        if ts.is_empty() {
            if m.get("items").is_some() || m.get("prefixItems").is_some() {
                return format!("[{}]", self.items_type(m, hint));
            }
            return "any".into();
        }
        dedup(ts)
    }

    fn items_type(&mut self, m: &'a Map<String, Value>, hint: &str) -> String {
        let item_hint = format!("{hint}Item");
        match (m.get("items"), m.get("prefixItems")) {
            (Some(i @ Value::Object(_)), None) => self.type_of(i, &item_hint),
            // tuples (draft 4-7 `items: [...]`, 2020-12 `prefixItems`): any of their types
            (Some(Value::Array(a)), _) | (_, Some(Value::Array(a))) => {
                let ts: Vec<String> = a.iter().map(|i| self.type_of(i, &item_hint)).collect();
                if ts.is_empty() {
                    "any".into()
                } else {
                    dedup(ts)
                }
            }
            _ => "any".into(),
        }
    }

    /// The properties, required names and additional-properties schema of `s` with its
    /// `allOf` members merged in.
    fn gather(
        &self,
        s: &'a Value,
        props: &mut Vec<(&'a String, &'a Value)>,
        required: &mut BTreeSet<String>,
        extra: &mut Option<&'a Value>,
        depth: usize,
    ) {
        let s = match s
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
        {
            Some(t) if depth < 16 => t,
            _ => s,
        };
        if let Some(Value::Object(ps)) = s.get("properties") {
            for (k, v) in ps {
                if let Some(slot) = props.iter_mut().find(|(n, _)| *n == k) {
                    slot.1 = v;
                } else {
                    props.push((k, v));
                }
            }
        }
        if let Some(Value::Array(r)) = s.get("required") {
            required.extend(r.iter().filter_map(Value::as_str).map(String::from));
        }
        if let Some(ap) = s
            .get("additionalProperties")
            .or(s.get("unevaluatedProperties"))
        {
            *extra = Some(ap);
        } else if let Some(Value::Object(pp)) = s.get("patternProperties")
            && let Some(v) = pp.values().next()
        {
            *extra = Some(v);
        }
        if depth < 16
            && let Some(Value::Array(all)) = s.get("allOf")
        {
            for a in all {
                self.gather(a, props, required, extra, depth + 1);
            }
        }
    }

    fn object_schema(&mut self, s: &'a Value, schema_name: &str) {
        // reserve the slot first so parents precede the schemas they refer to
        let slot = self.out.len();
        self.out.push(Schema::default());
        let mut props = Vec::new();
        let mut required = BTreeSet::new();
        let mut extra = None;
        self.gather(s, &mut props, &mut required, &mut extra, 0);
        let mut out = Schema {
            name: schema_name.to_string(),
            doc: desc(s),
            ..Schema::default()
        };
        for (pname, ps) in props {
            let ty = self.type_of(ps, &format!("{schema_name}{}", camel(pname)));
            let req = required.contains(pname.as_str());
            // a default of another type than the attribute's (schemas have `"true"` for a
            // boolean) would make the schema fail to load
            let default = ps
                .get("default")
                .filter(|d| default_fits(d, &ty))
                .map(literal);
            out.checks.extend(checks(pname, ps, &ty, req));
            out.props.push(Prop {
                name: pname.clone(),
                ty,
                required: req,
                default,
                doc: desc(ps),
            });
        }
        out.index = match extra {
            Some(Value::Bool(true)) => Some("any".into()),
            Some(ap @ Value::Object(_)) => Some(self.type_of(ap, &format!("{schema_name}Value"))),
            _ => None,
        };
        self.out[slot] = out;
    }
}

/// Whether a default value can be the value of an attribute of KCL type `ty`.
fn default_fits(d: &Value, ty: &str) -> bool {
    if ty == "any" {
        return !d.is_null();
    }
    let has = |t: &str| ty.split(" | ").any(|p| p == t);
    match d {
        Value::Null => false,
        Value::Bool(b) => has("bool") || has(if *b { "True" } else { "False" }),
        Value::Number(n) if n.is_f64() => has("float") || has(&n.to_string()),
        Value::Number(n) => has("int") || has("float") || has(&n.to_string()),
        Value::String(s) => has("str") || has(&crate::openapi::str_lit(s)),
        Value::Array(_) => ty.starts_with('['),
        // a dict or a schema
        Value::Object(_) => {
            !["str", "int", "float", "bool"].iter().any(|p| has(p)) && !ty.starts_with('[')
        }
    }
}

fn desc(s: &Value) -> String {
    s.get("description")
        .or(s.get("title"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn dedup(ts: Vec<String>) -> String {
    let mut seen = Vec::new();
    for t in ts {
        if !seen.contains(&t) {
            seen.push(t);
        }
    }
    seen.join(" | ")
}

/// `check:` lines for the constraints on property `p`, skipped when an optional `p` is unset.
/// Upstream guards with `if p`, which also skips 0, "" and [] (so `minimum: 1` let 0 through);
/// `isnullish` skips only None and Undefined.
/// Each keyword applies to one JSON type (`minLength` to strings, `minItems` to arrays, ...),
/// so a check is written only where the attribute's KCL type is that type: `len()` of a
/// schema instance or `regex.match` on a union is a type error.
fn checks(p: &str, s: &Value, ty: &str, required: bool) -> Vec<String> {
    // a quoted attribute name cannot be referred to in an expression
    if !super::is_ident(p) {
        return Vec::new();
    }
    let n = name(p);
    let mut out = Vec::new();
    let num_ty = matches!(ty, "int" | "float" | "int | float" | "float | int");
    let str_ty = ty == "str";
    let list_ty = ty.starts_with('[');
    let dict_ty = ty.starts_with('{');
    // a bound and whether it is exclusive; draft 4: a boolean modifying minimum/maximum,
    // later: a number of its own
    let bound = |inclusive: &str, exclusive: &str| match s.get(exclusive) {
        Some(Value::Bool(true)) => (num(s.get(inclusive)), true),
        Some(v @ Value::Number(_)) => (Some(v.to_string()), true),
        _ => (num(s.get(inclusive)), false),
    };
    let (min, xmin) = bound("minimum", "exclusiveMinimum");
    let (max, xmax) = bound("maximum", "exclusiveMaximum");
    if num_ty {
        if let Some(v) = max {
            out.push(format!("{n} {} {v}", if xmax { "<" } else { "<=" }));
        }
        if let Some(v) = min {
            out.push(format!("{n} {} {v}", if xmin { ">" } else { ">=" }));
        }
    }
    for (kw, op, applies) in [
        ("maxLength", "<=", str_ty),
        ("minLength", ">=", str_ty),
        ("maxItems", "<=", list_ty),
        ("minItems", ">=", list_ty),
        ("maxProperties", "<=", dict_ty),
        ("minProperties", ">=", dict_ty),
    ] {
        if let Some(v) = s.get(kw).and_then(Value::as_u64).filter(|_| applies) {
            out.push(format!("len({n}) {op} {v}"));
        }
    }
    if let Some(re) = s.get("pattern").and_then(Value::as_str).filter(|_| str_ty) {
        let lit = if re.contains('"') || re.ends_with('\\') || re.contains('\n') {
            crate::openapi::str_lit(re)
        } else {
            format!("r\"{re}\"")
        };
        out.push(format!("regex.match({n}, {lit})"));
    }
    if let Some(m) = s.get("multipleOf") {
        // the builtin takes ints only
        if (m.is_u64() || m.is_i64()) && ty == "int" {
            out.push(format!("multiplyof({n}, {m})"));
        }
    }
    if s.get("uniqueItems") == Some(&Value::Bool(true)) && list_ty {
        out.push(format!("isunique({n})"));
    }
    if !required {
        for c in &mut out {
            c.push_str(&super::guard(&n));
        }
    }
    out
}
