//! Schemas to KCL source text, one file per schema.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde_json::Value as Json;

use super::model::{SchemaDef, Ty};

use crate::lexer::KEYWORDS;

fn is_ident(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An attribute name as written in a schema body: bare, `$keyword`, or quoted.
pub fn attr_name(name: &str) -> String {
    if KEYWORDS.contains(&name) {
        format!("${name}")
    } else if is_ident(name) {
        name.to_string()
    } else {
        str_lit(name)
    }
}

/// An attribute name as used in an expression (check rules); quoted names cannot be.
pub fn attr_ref(name: &str) -> String {
    attr_name(name)
}

/// Whether `attr_ref` gives a usable expression for `name`.
pub fn referable(name: &str) -> bool {
    is_ident(name)
}

/// A KCL string literal (JSON escapes are KCL escapes; `${` would interpolate).
pub fn str_lit(s: &str) -> String {
    serde_json::to_string(s)
        .unwrap_or_default()
        .replace("${", "\\${")
}

/// A JSON value as a KCL literal.
pub fn json_lit(v: &Json) -> String {
    match v {
        Json::Null => "None".into(),
        Json::Bool(true) => "True".into(),
        Json::Bool(false) => "False".into(),
        Json::Number(n) => n.to_string(),
        Json::String(s) => str_lit(s),
        Json::Array(a) => format!(
            "[{}]",
            a.iter().map(json_lit).collect::<Vec<_>>().join(", ")
        ),
        Json::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", str_lit(k), json_lit(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `DeploymentSpec` -> `deployment_spec`, `APIVersions` -> `api_versions`,
/// `ServerAddressByClientCIDR` -> `server_address_by_client_cidr`.
pub fn snake(name: &str) -> String {
    let cs: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in cs.iter().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                let prev = cs[i - 1];
                let next_lower = cs.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
                if prev.is_ascii_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_ascii_uppercase() && next_lower)
                {
                    out.push('_');
                }
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out
}

/// The file of a schema, relative to the generated root.
pub fn file_path(def: &SchemaDef) -> String {
    let dir = def.pkg.replace('.', "/");
    if dir.is_empty() {
        format!("{}.k", snake(&def.name))
    } else {
        format!("{dir}/{}.k", snake(&def.name))
    }
}

/// Import aliases for `pkgs` as seen from `here`: the shortest unique tail of the package
/// path, joined (`apimachinery.pkg.apis.meta.v1` -> `metav1`), never clashing with a schema
/// name of `here`.
fn aliases(pkgs: &BTreeSet<String>, taken: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut used: BTreeSet<String> = taken.clone();
    for pkg in pkgs {
        let parts: Vec<&str> = pkg.split('.').collect();
        let mut n = 2.min(parts.len());
        let alias = loop {
            let a: String = parts[parts.len() - n..].concat();
            if !used.contains(&a) && !KEYWORDS.contains(&a.as_str()) {
                break a;
            }
            if n == parts.len() {
                // every tail taken: number it
                let mut k = 2;
                while used.contains(&format!("{a}{k}")) {
                    k += 1;
                }
                break format!("{a}{k}");
            }
            n += 1;
        };
        used.insert(alias.clone());
        out.insert(pkg.clone(), alias);
    }
    out
}

fn doc_lines(out: &mut String, text: &str, indent: &str) {
    // A raw docstring ends at the first `"""`.
    let text = text.replace("\"\"\"", "'''");
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{indent}{line}");
        }
    }
}

/// The KCL source of one schema. `names_in_pkg` are the schema names of its package (an import
/// alias must not shadow them).
pub fn render(def: &SchemaDef, names_in_pkg: &BTreeSet<String>, origin: &str) -> String {
    let mut pkgs = BTreeSet::new();
    for a in &def.attrs {
        a.ty.packages(&mut pkgs);
    }
    pkgs.remove(&def.pkg);
    let alias_of = aliases(&pkgs, names_in_pkg);
    let alias = |p: &str| alias_of.get(p).cloned().unwrap_or_else(|| p.to_string());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\"\"\"\nSchema {} of package {}, generated by `kcl import` from {origin} ({}).\nDo not edit: change the source and re-run the importer.\n\"\"\"",
        def.name,
        if def.pkg.is_empty() {
            "(root)"
        } else {
            &def.pkg
        },
        def.source,
    );
    for (pkg, a) in &alias_of {
        let _ = writeln!(s, "import {pkg} as {a}");
    }
    if def.checks.iter().any(|c| c.regex) {
        s.push_str("import regex\n");
    }
    let _ = writeln!(s, "\n\nschema {}:", def.name);
    s.push_str("    r\"\"\"\n");
    if def.doc.is_empty() {
        let _ = writeln!(s, "    {}", def.name);
    } else {
        doc_lines(&mut s, &def.doc, "    ");
    }
    if !def.attrs.is_empty() {
        s.push_str("\n    Attributes\n    ----------\n");
        for a in &def.attrs {
            // a fixed apiVersion/kind reads as a string with a default in the docs
            let ty = match &a.ty {
                Ty::Lit(l) if l.starts_with('"') => "str".to_string(),
                t => t.render(&def.pkg, &alias),
            };
            let _ = write!(s, "    {} : {ty}", attr_name(&a.name));
            if let Some(d) = &a.default {
                let _ = write!(s, ", default is {d}");
            }
            s.push_str(if a.required {
                ", required\n"
            } else {
                ", optional\n"
            });
            doc_lines(&mut s, &a.doc, "        ");
        }
    }
    s.push_str("    \"\"\"\n\n");
    for a in &def.attrs {
        let ty = a.ty.render(&def.pkg, &alias);
        let q = if a.required { "" } else { "?" };
        let _ = write!(s, "    {}{q}: {ty}", attr_name(&a.name));
        if let Some(d) = &a.default {
            let _ = write!(s, " = {d}");
        }
        s.push('\n');
    }
    if !def.checks.is_empty() {
        s.push_str("\n    check:\n");
        for c in &def.checks {
            let _ = writeln!(s, "        {}, {}", c.expr, str_lit(&c.message));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_file_names() {
        for (name, want) in [
            ("DeploymentSpec", "deployment_spec"),
            ("APIVersions", "api_versions"),
            ("ServerAddressByClientCIDR", "server_address_by_client_cidr"),
            ("JSONSchemaProps", "json_schema_props"),
            ("PodIP", "pod_ip"),
            ("HTTPGetAction", "http_get_action"),
            ("V1Beta1Thing", "v1_beta1_thing"),
        ] {
            assert_eq!(snake(name), want, "{name}");
        }
    }

    #[test]
    fn attribute_names_and_literals() {
        assert_eq!(attr_name("replicas"), "replicas");
        assert_eq!(attr_name("type"), "$type");
        assert_eq!(attr_name("not"), "$not");
        assert_eq!(
            attr_name("x-kubernetes-map-type"),
            "\"x-kubernetes-map-type\""
        );
        assert_eq!(attr_name("$ref"), "\"$ref\"");
        assert_eq!(str_lit("a\"b\n${x}"), "\"a\\\"b\\n\\${x}\"");
        assert_eq!(
            json_lit(&serde_json::json!({"a": [1, true, null]})),
            "{\"a\": [1, True, None]}"
        );
    }

    #[test]
    fn import_aliases_are_short_and_unique() {
        let pkgs: BTreeSet<String> = [
            "api.core.v1",
            "apimachinery.pkg.apis.meta.v1",
            "api.x.core.v1",
        ]
        .map(String::from)
        .into();
        let a = aliases(&pkgs, &BTreeSet::from(["metav1".to_string()]));
        assert_eq!(a["api.core.v1"], "corev1");
        assert_eq!(a["api.x.core.v1"], "xcorev1");
        assert_eq!(
            a["apimachinery.pkg.apis.meta.v1"], "apismetav1",
            "metav1 is a schema here"
        );
    }
}
