//! Types as the editor shows them: a small lattice (`any`, scalars, lists, dicts, schemas and
//! their instances, unions, lambdas, packages, literals) with the few operations hover,
//! completion and the walk need (union, element and value types, widening).

use std::sync::Arc;

use crate::ast::Symbol;

/// A schema, by package index and name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SchemaRef {
    pub pkg: u32,
    pub name: Symbol,
}

/// A type as the editor shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum LTy {
    Any,
    None,
    Bool,
    Int,
    Float,
    Str,
    List(Box<LTy>),
    Dict(Box<LTy>, Box<LTy>),
    Schema(SchemaRef),
    /// A schema used as a value (its name): calling or instantiating it gives an instance.
    SchemaType(SchemaRef),
    Union(Vec<LTy>),
    /// A lambda: parameter texts and return type.
    Func(Arc<(Vec<String>, LTy)>),
    /// An imported package (index).
    Pkg(u32),
    /// An imported system module.
    SysModule(&'static str),
    /// A literal type as written (`"a"`, `1`, `True`).
    Lit(Arc<str>),
}

impl LTy {
    pub(super) fn union(ts: Vec<LTy>) -> LTy {
        let mut out: Vec<LTy> = Vec::new();
        for t in ts {
            match t {
                LTy::Union(inner) => {
                    for i in inner {
                        if !out.contains(&i) {
                            out.push(i);
                        }
                    }
                }
                t if !out.contains(&t) => out.push(t),
                _ => {}
            }
        }
        if out.contains(&LTy::Any) {
            return LTy::Any;
        }
        match out.len() {
            0 => LTy::Any,
            1 => out.pop().unwrap_or(LTy::Any),
            _ => LTy::Union(out),
        }
    }
    /// The schemas this type may be (a schema, or the schemas of a union).
    pub fn schemas(&self) -> Vec<SchemaRef> {
        match self {
            LTy::Schema(s) => vec![*s],
            LTy::Union(ts) => ts.iter().flat_map(|t| t.schemas()).collect(),
            _ => Vec::new(),
        }
    }
    /// The element type of a list (or `any`).
    pub(super) fn elem(&self) -> LTy {
        match self {
            LTy::List(e) => (**e).clone(),
            LTy::Union(ts) => LTy::union(ts.iter().map(|t| t.elem()).collect()),
            LTy::Str => LTy::Str,
            LTy::Dict(k, _) => (**k).clone(),
            _ => LTy::Any,
        }
    }
    /// The value type of a dict (or `any`).
    pub(super) fn value(&self) -> LTy {
        match self {
            LTy::Dict(_, v) => (**v).clone(),
            LTy::Union(ts) => LTy::union(ts.iter().map(|t| t.value()).collect()),
            _ => LTy::Any,
        }
    }
    /// Literal types widened to their base type (what an unannotated variable gets).
    pub(super) fn widen(self) -> LTy {
        match self {
            LTy::Lit(s) => {
                if s.starts_with('"') || s.starts_with('\'') {
                    LTy::Str
                } else if &*s == "True" || &*s == "False" {
                    LTy::Bool
                } else if s.contains('.') {
                    LTy::Float
                } else {
                    LTy::Int
                }
            }
            LTy::Union(ts) => LTy::union(ts.into_iter().map(LTy::widen).collect()),
            LTy::List(e) => LTy::List(Box::new(e.widen())),
            t => t,
        }
    }
}
