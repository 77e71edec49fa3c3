//! CustomResourceDefinition `openAPIV3Schema`s to schemas: the custom resource's kind, plus one
//! schema per nested object, named after its path (`ServiceMonitorSpecEndpoints`).

use std::collections::BTreeSet;

use serde_json::Value as Json;

use super::OpenApiError;
use super::emit::{json_lit, str_lit};
use super::model::{Attr, Check, SchemaDef, Ty};
use super::swagger::{desc, properties, scalar};

/// The package of a CRD version: `monitoring.coreos.com` `v1` -> `monitoring_coreos_com.v1`.
pub fn package_of(group: &str, version: &str) -> String {
    let g: String = group
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{g}.{version}")
}

/// `tlsConfig` -> `TlsConfig`, `x-kubernetes-foo` -> `XKubernetesFoo`.
fn pascal(s: &str) -> String {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut cs = p.chars();
            match cs.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + cs.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

struct Gen<'a> {
    pkg: String,
    source: String,
    /// `metadata` of the top-level kind: the ObjectMeta schema when the Kubernetes package is
    /// generated alongside, else a free-form dict.
    object_meta: &'a Ty,
    used: BTreeSet<String>,
    out: Vec<SchemaDef>,
}

impl Gen<'_> {
    fn unique(&mut self, base: String) -> String {
        let mut name = base.clone();
        let mut n = 1;
        while !self.used.insert(name.clone()) {
            n += 1;
            name = format!("{base}{n}");
        }
        name
    }

    /// The type of a property schema `p`; nested objects become schemas named `hint`.
    fn ty(&mut self, p: &Json, hint: &str, at: &str) -> Result<Ty, OpenApiError> {
        if p.get("x-kubernetes-int-or-string").and_then(Json::as_bool) == Some(true) {
            return Ok(Ty::IntOrStr);
        }
        let ty = p.get("type").and_then(Json::as_str);
        if let Some(values) = p.get("enum").and_then(Json::as_array) {
            let lits: Option<Vec<Ty>> = values
                .iter()
                .map(|v| v.as_str().map(|s| Ty::Lit(str_lit(s))))
                .collect();
            if let Some(lits) = lits.filter(|l| !l.is_empty() && ty == Some("string")) {
                return Ok(Ty::Union(lits));
            }
        }
        if let Some(t) = scalar(ty, p.get("format").and_then(Json::as_str)) {
            return Ok(t);
        }
        match ty {
            Some("array") => {
                let items = p.get("items").ok_or_else(|| OpenApiError::Schema {
                    at: at.to_string(),
                    msg: "array without items".into(),
                })?;
                Ok(Ty::List(Box::new(self.ty(
                    items,
                    hint,
                    &format!("{at}.items"),
                )?)))
            }
            Some("object") | None if has_props(p) => {
                let name = self.unique(hint.to_string());
                self.object(p, name.clone(), at, None)?;
                Ok(Ty::Ref {
                    pkg: self.pkg.clone(),
                    name,
                })
            }
            Some("object") => match p.get("additionalProperties") {
                Some(ap @ Json::Object(_)) => Ok(Ty::Dict(Box::new(self.ty(
                    ap,
                    &format!("{hint}Value"),
                    &format!("{at}.additionalProperties"),
                )?))),
                _ => Ok(Ty::Dict(Box::new(Ty::Any))),
            },
            None => Ok(Ty::Any),
            Some(other) => Err(OpenApiError::Schema {
                at: at.to_string(),
                msg: format!("unsupported type '{other}'"),
            }),
        }
    }

    /// Generates the schema `name` for the object schema `s` (and its nested objects).
    fn object(
        &mut self,
        s: &Json,
        name: String,
        at: &str,
        gvk: Option<(&str, &str)>,
    ) -> Result<(), OpenApiError> {
        let required: Vec<&str> = s
            .get("required")
            .and_then(Json::as_array)
            .map(|a| a.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        let props = properties(s);
        let mut attrs = Vec::new();
        let mut checks = Vec::new();
        for (pname, p) in props {
            let pat = format!("{at}.properties.{pname}");
            let mut attr = Attr {
                name: pname.clone(),
                ty: Ty::Any,
                doc: desc(p),
                required: required.contains(&pname.as_str()),
                default: p.get("default").map(json_lit),
            };
            match (gvk, pname.as_str()) {
                (Some((api_version, _)), "apiVersion") => {
                    attr.ty = Ty::Lit(str_lit(api_version));
                    attr.default = Some(str_lit(api_version));
                    attr.required = true;
                }
                (Some((_, kind)), "kind") => {
                    attr.ty = Ty::Lit(str_lit(kind));
                    attr.default = Some(str_lit(kind));
                    attr.required = true;
                }
                (Some(_), "metadata") => attr.ty = self.object_meta.clone(),
                (Some(_), "status") => continue,
                _ => {
                    attr.ty = self.ty(p, &format!("{name}{}", pascal(pname)), &pat)?;
                    checks.extend(rules(pname, p, &attr.ty));
                }
            }
            attrs.push(attr);
        }
        self.out.push(SchemaDef {
            pkg: self.pkg.clone(),
            name,
            doc: desc(s),
            attrs,
            checks,
            source: self.source.clone(),
        });
        Ok(())
    }
}

fn has_props(p: &Json) -> bool {
    p.get("properties")
        .and_then(Json::as_object)
        .is_some_and(|m| !m.is_empty())
}

/// `check:` lines for the JSON-schema validations KCL can express directly.
///
/// Each keyword constrains one JSON type (`pattern` strings, `minimum` numbers, `minItems`
/// arrays), as the API server applies it. On a single-typed attribute the check is written
/// plainly; on a union (`int | str`, quantities, `any`) it is guarded by `typeof` and the value
/// cast, because upstream's checker rejects `regex.match`, `len` or `>=` on a union.
fn rules(name: &str, p: &Json, ty: &Ty) -> Vec<Check> {
    if !super::emit::referable(name) {
        return Vec::new();
    }
    let r = super::emit::attr_ref(name);
    let union = matches!(ty, Ty::IntOrStr | Ty::Quantity | Ty::Any);
    // (operand, guard) for a keyword on JSON numbers / strings / arrays, or None when the
    // attribute can never hold that JSON type
    let nullish = format!("if {r} not in [None, Undefined]");
    let number = match ty {
        Ty::Int | Ty::Float => Some((r.clone(), nullish.clone())),
        _ if union => Some((
            format!("float({r})"),
            format!("if typeof({r}) in [\"int\", \"float\"]"),
        )),
        _ => None,
    };
    let string = match ty {
        Ty::Str => Some((r.clone(), nullish.clone())),
        _ if union => Some((format!("{r} as str"), format!("if typeof({r}) == \"str\""))),
        _ => None,
    };
    let array = match ty {
        Ty::List(_) => Some((r.clone(), nullish.clone())),
        _ => None,
    };
    let num = |k: &str| p.get(k).filter(|v| v.is_number()).map(json_lit);
    let excl = |k: &str| p.get(k).and_then(Json::as_bool) == Some(true);
    let mut out = Vec::new();
    let mut push = |on: &Option<(String, String)>,
                    expr: &dyn Fn(&str) -> String,
                    message: String,
                    regex: bool| {
        if let Some((operand, guard)) = on {
            out.push(Check {
                expr: format!("{} {guard}", expr(operand)),
                message,
                regex,
            })
        }
    };
    if let Some(min) = num("minimum") {
        let op = if excl("exclusiveMinimum") { ">" } else { ">=" };
        push(
            &number,
            &|v| format!("{v} {op} {min}"),
            format!("{name} must be {op} {min}"),
            false,
        );
    }
    if let Some(max) = num("maximum") {
        let op = if excl("exclusiveMaximum") { "<" } else { "<=" };
        push(
            &number,
            &|v| format!("{v} {op} {max}"),
            format!("{name} must be {op} {max}"),
            false,
        );
    }
    for (k, op, what, on) in [
        ("minLength", ">=", "length", &string),
        ("maxLength", "<=", "length", &string),
        ("minItems", ">=", "number of items", &array),
        ("maxItems", "<=", "number of items", &array),
    ] {
        if let Some(n) = p.get(k).and_then(Json::as_u64) {
            push(
                on,
                &|v| format!("len({v}) {op} {n}"),
                format!("{name}: {what} must be {op} {n}"),
                false,
            );
        }
    }
    if let Some(pat) = p.get("pattern").and_then(Json::as_str) {
        // Raw strings cannot hold a quote; such (rare) patterns are left to the server.
        if !pat.contains('"') && !pat.ends_with('\\') {
            push(
                &string,
                &|v| format!("regex.match({v}, r\"{pat}\")"),
                format!("{name} must match the pattern {pat}"),
                true,
            );
        }
    }
    out
}

/// Schemas for every version of every CRD in `docs` (YAML documents already parsed).
pub fn schemas(docs: &[(String, Json)], object_meta: &Ty) -> Result<Vec<SchemaDef>, OpenApiError> {
    let mut out = Vec::new();
    for (file, doc) in docs {
        if doc.is_null() {
            continue;
        }
        let kind = doc.get("kind").and_then(Json::as_str).unwrap_or_default();
        if kind != "CustomResourceDefinition" {
            return Err(OpenApiError::Schema {
                at: file.clone(),
                msg: format!("expected a CustomResourceDefinition, found kind '{kind}'"),
            });
        }
        let spec = &doc["spec"];
        let field = |v: &Json, k: &str| -> Result<String, OpenApiError> {
            v.get(k)
                .and_then(Json::as_str)
                .map(String::from)
                .ok_or_else(|| OpenApiError::Schema {
                    at: format!("{file}: spec"),
                    msg: format!("missing `{k}`"),
                })
        };
        let group = field(spec, "group")?;
        let crd_kind = field(&spec["names"], "kind")?;
        // apiextensions.k8s.io/v1 lists versions with a schema each; v1beta1 may share one.
        let mut versions = spec
            .get("versions")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        if versions.is_empty() {
            versions.push(serde_json::json!({"name": field(spec, "version")?}));
        }
        let shared = spec.pointer("/validation/openAPIV3Schema");
        for v in &versions {
            let version = field(v, "name")?;
            let Some(schema) = v.pointer("/schema/openAPIV3Schema").or(shared) else {
                continue;
            };
            let pkg = package_of(&group, &version);
            let api_version = format!("{group}/{version}");
            let mut g = Gen {
                pkg: pkg.clone(),
                source: format!("{file}: {crd_kind} {api_version}"),
                object_meta,
                used: BTreeSet::new(),
                out: Vec::new(),
            };
            g.used.insert(crd_kind.clone());
            g.object(
                schema,
                crd_kind.clone(),
                &format!("{file}: {crd_kind}.{version}"),
                Some((&api_version, &crd_kind)),
            )?;
            out.extend(g.out);
        }
    }
    Ok(out)
}
