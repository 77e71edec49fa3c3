//! The importer's intermediate form: schemas with typed attributes, independent of whether
//! they came from a swagger document or a CRD.

use std::collections::BTreeSet;

/// A KCL type as the generator writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    Str,
    Int,
    Float,
    Bool,
    Any,
    /// `int | str` (Kubernetes IntOrString and `x-kubernetes-int-or-string`).
    IntOrStr,
    /// A resource quantity: written as a string by convention, but JSON numbers are valid too.
    Quantity,
    List(Box<Ty>),
    Dict(Box<Ty>),
    /// A schema: its package (dotted, relative to the generated root) and name.
    Ref {
        pkg: String,
        name: String,
    },
    /// A literal value type such as `"apps/v1"` (already rendered as KCL).
    Lit(String),
    Union(Vec<Ty>),
}

impl Ty {
    /// The type as KCL text, naming schemas of `here` bare and others through `alias`.
    pub fn render(&self, here: &str, alias: &dyn Fn(&str) -> String) -> String {
        match self {
            Ty::Str => "str".into(),
            Ty::Int => "int".into(),
            Ty::Float => "float".into(),
            Ty::Bool => "bool".into(),
            Ty::Any => "any".into(),
            Ty::IntOrStr => "int | str".into(),
            Ty::Quantity => "int | float | str".into(),
            Ty::List(t) => format!("[{}]", t.render_inner(here, alias)),
            Ty::Dict(t) => format!("{{str:{}}}", t.render_inner(here, alias)),
            Ty::Ref { pkg, name } if pkg == here => name.clone(),
            Ty::Ref { pkg, name } => format!("{}.{name}", alias(pkg)),
            Ty::Lit(s) => s.clone(),
            Ty::Union(ts) => ts
                .iter()
                .map(|t| t.render(here, alias))
                .collect::<Vec<_>>()
                .join(" | "),
        }
    }

    /// Union types nested in a list or dict need no parentheses in KCL (`[int | str]`).
    fn render_inner(&self, here: &str, alias: &dyn Fn(&str) -> String) -> String {
        self.render(here, alias)
    }

    /// Packages this type refers to.
    pub fn packages(&self, out: &mut BTreeSet<String>) {
        match self {
            Ty::List(t) | Ty::Dict(t) => t.packages(out),
            Ty::Ref { pkg, .. } => {
                out.insert(pkg.clone());
            }
            Ty::Union(ts) => ts.iter().for_each(|t| t.packages(out)),
            _ => {}
        }
    }
}

/// One attribute of a generated schema.
#[derive(Debug, Clone)]
pub struct Attr {
    /// The field name as it appears in the object (`x-kubernetes-list-type`, `type`).
    pub name: String,
    pub ty: Ty,
    pub doc: String,
    pub required: bool,
    /// A KCL literal for the default value.
    pub default: Option<String>,
}

/// A validation rule carried over from the source schema, rendered as a `check:` line.
#[derive(Debug, Clone)]
pub struct Check {
    pub expr: String,
    pub message: String,
    /// Needs `import regex`.
    pub regex: bool,
}

/// One generated schema (one file).
#[derive(Debug, Clone)]
pub struct SchemaDef {
    /// Dotted package path relative to the generated root (`api.apps.v1`).
    pub pkg: String,
    pub name: String,
    pub doc: String,
    pub attrs: Vec<Attr>,
    pub checks: Vec<Check>,
    /// Where it came from, for the file header (`io.k8s.api.apps.v1.Deployment`).
    pub source: String,
}
