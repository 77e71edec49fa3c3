//! Checker types and the assignability relation, printed the way upstream's resolver prints
//! them (`int(1)`, `str(a)`, `[int]`, `{str:any}`, `A | B`).

use std::hash::{Hash, Hasher};
use std::rc::Rc;

/// Index of a schema definition in the checker's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SchemaId(pub usize);

/// A static type. `Any` stands for everything the checker cannot pin down.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Any,
    None,
    Bool,
    Int,
    Float,
    Str,
    BoolLit(bool),
    IntLit(i64),
    FloatLit(f64),
    StrLit(std::sync::Arc<str>),
    List(Rc<Ty>),
    Dict(Rc<Ty>, Rc<Ty>),
    Union(Rc<[Ty]>),
    /// An instance of a schema.
    Schema(SchemaId),
    /// The schema itself (a name used as a value).
    SchemaType(SchemaId),
    /// A function: its parameters (names, for keyword arguments, and types; whether each has
    /// a default) and its return type.
    Func(Rc<FuncTy>),
    /// A number with a unit: `units.NumberMultiplier` (`None`) or a literal such as `1Ki`
    /// (kept as written: upstream never widens it, and no operator takes it).
    Unit(Option<std::sync::Arc<str>>),
    /// An imported module used as a value (named by its path, `math` or `pkg.sub`): upstream's
    /// resolver stores it nowhere, not even where `any` is expected.
    Module(std::sync::Arc<str>),
}

/// The type of a lambda or of a name annotated with a function type.
#[derive(Clone, Debug)]
pub struct FuncTy {
    /// `(name, type, has a default)`; a function type annotation (`(int) -> str`) names
    /// none, so no keyword argument fits it (as upstream).
    pub params: Vec<(Option<crate::ast::Symbol>, Ty, bool)>,
    pub ret: Ty,
    /// Where each parameter is declared, for "variable is defined here" notes (empty for
    /// builtins and function type annotations); no part of the type's identity.
    pub param_spans: Vec<crate::ast::Span>,
}

impl PartialEq for FuncTy {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params && self.ret == other.ret
    }
}

impl Hash for FuncTy {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.params.hash(state);
        self.ret.hash(state);
    }
}

/// Consistent with `PartialEq`: floats hash by value (both zeros alike); a NaN equals nothing,
/// so where it lands does not matter.
impl Hash for Ty {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Ty::BoolLit(b) => b.hash(state),
            Ty::IntLit(i) => i.hash(state),
            Ty::FloatLit(f) => (if *f == 0.0 { 0 } else { f.to_bits() }).hash(state),
            Ty::StrLit(s) => s.hash(state),
            Ty::List(e) => e.hash(state),
            Ty::Dict(k, v) => {
                k.hash(state);
                v.hash(state);
            }
            Ty::Union(ts) => ts.hash(state),
            Ty::Schema(id) | Ty::SchemaType(id) => id.hash(state),
            Ty::Func(f) => f.hash(state),
            Ty::Unit(u) => u.hash(state),
            Ty::Module(m) => m.hash(state),
            Ty::Any | Ty::None | Ty::Bool | Ty::Int | Ty::Float | Ty::Str => {}
        }
    }
}

/// Coarse classes for operator rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Num,
    Bool,
    Str,
    List,
    Dict,
    Schema,
}

impl Ty {
    /// The operator class of a fully known type (`None` for any, None, unions, schema types).
    pub fn kind(&self) -> Option<Kind> {
        Some(match self {
            Ty::Int | Ty::IntLit(_) | Ty::Float | Ty::FloatLit(_) => Kind::Num,
            Ty::Bool | Ty::BoolLit(_) => Kind::Bool,
            Ty::Str | Ty::StrLit(_) => Kind::Str,
            Ty::List(_) => Kind::List,
            Ty::Dict(..) => Kind::Dict,
            Ty::Schema(_) => Kind::Schema,
            _ => return Option::None,
        })
    }
    /// The type a variable gets from its value, as upstream's resolver infers it: literal
    /// types widened, and `None`/`Undefined` as `any`, also inside lists, dicts and unions.
    pub fn variable_type(&self) -> Ty {
        match self {
            Ty::None => Ty::Any,
            Ty::List(e) => Ty::List(Rc::new(e.variable_type())),
            Ty::Dict(k, v) => Ty::Dict(Rc::new(k.variable_type()), Rc::new(v.variable_type())),
            Ty::Union(ts) => Ty::union(ts.iter().map(|t| t.variable_type()).collect()),
            t => t.widen(),
        }
    }
    pub fn is_any(&self) -> bool {
        matches!(self, Ty::Any)
    }
    /// Strings, numbers and bools, literal or not.
    pub fn is_scalar(&self) -> bool {
        matches!(
            self,
            Ty::Str
                | Ty::StrLit(_)
                | Ty::Int
                | Ty::IntLit(_)
                | Ty::Float
                | Ty::FloatLit(_)
                | Ty::Bool
                | Ty::BoolLit(_)
        )
    }
    /// Types upstream's resolver knows to have no attributes (a string's methods aside).
    pub fn has_no_attributes(&self) -> bool {
        self.is_scalar() || matches!(self, Ty::None | Ty::Func(_) | Ty::List(_))
    }
    /// Dicts and schema instances (no ordering comparison is defined on them).
    pub fn is_mapping(&self) -> bool {
        matches!(self, Ty::Dict(..) | Ty::Schema(_))
    }
    /// Literal types widened to their base type.
    pub fn widen(&self) -> Ty {
        match self {
            Ty::BoolLit(_) => Ty::Bool,
            Ty::IntLit(_) => Ty::Int,
            Ty::FloatLit(_) => Ty::Float,
            Ty::StrLit(_) => Ty::Str,
            t => t.clone(),
        }
    }
    /// A union of `ts`, flattened and without duplicates; `any` absorbs everything.
    pub fn union(ts: Vec<Ty>) -> Ty {
        let mut out: Vec<Ty> = Vec::with_capacity(ts.len());
        // Members by hash: a list literal of 10,000 distinct records makes a union of 10,000
        // types, and a linear `contains` per member made checking it quadratic.
        let mut by_hash: rustc_hash::FxHashMap<u64, Vec<usize>> = Default::default();
        let mut add = |t: Ty, out: &mut Vec<Ty>| {
            let h = {
                let mut hasher = rustc_hash::FxHasher::default();
                t.hash(&mut hasher);
                hasher.finish()
            };
            let same = by_hash.entry(h).or_default();
            if !same.iter().any(|&i| out[i] == t) {
                same.push(out.len());
                out.push(t);
            }
        };
        for t in ts {
            match t {
                Ty::Union(us) => {
                    for u in us.iter() {
                        add(u.clone(), &mut out);
                    }
                }
                Ty::Any => return Ty::Any,
                t => add(t, &mut out),
            }
        }
        match out.len() {
            0 => Ty::Any,
            1 => out.pop().unwrap_or(Ty::Any),
            _ => Ty::Union(out.into()),
        }
    }
    /// Upstream's spelling; `schema` names a schema id.
    pub fn display(&self, schema: &dyn Fn(SchemaId) -> String) -> String {
        match self {
            Ty::Any => "any".into(),
            Ty::None => "NoneType".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Float => "float".into(),
            Ty::Str => "str".into(),
            Ty::BoolLit(b) => format!("bool({})", if *b { "True" } else { "False" }),
            Ty::IntLit(i) => format!("int({i})"),
            Ty::FloatLit(f) => format!("float({f})"),
            Ty::StrLit(s) => format!("str({s})"),
            Ty::List(e) => format!("[{}]", e.display(schema)),
            Ty::Dict(k, v) => format!("{{{}:{}}}", k.display(schema), v.display(schema)),
            Ty::Union(ts) => ts
                .iter()
                .map(|t| t.display(schema))
                .collect::<Vec<_>>()
                .join(" | "),
            Ty::Schema(id) => schema(*id),
            Ty::SchemaType(id) => schema(*id),
            Ty::Unit(None) => "number_multiplier".into(),
            Ty::Unit(Some(lit)) => format!("number_multiplier({lit})"),
            Ty::Module(m) => format!("module '{m}'"),
            Ty::Func(f) => format!(
                "({}) -> {}",
                f.params
                    .iter()
                    .map(|(_, t, _)| t.display(schema))
                    .collect::<Vec<_>>()
                    .join(", "),
                f.ret.display(schema)
            ),
        }
    }
}

/// Whether a value of type `got` may be stored where `expected` is declared. Unknown parts
/// (`any`, schema types used as values) are always accepted.
pub fn assignable(got: &Ty, expected: &Ty, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> bool {
    use Ty::*;
    match (got, expected) {
        (Module(_), _) => false,
        (Union(gs), Any) => !gs.iter().any(|g| matches!(g, Module(_))),
        (Any, _) | (_, Any) | (None, _) | (SchemaType(_), _) => true,
        (Union(gs), _) => gs.iter().all(|g| assignable(g, expected, sub)),
        (_, Union(es)) => es.iter().any(|e| assignable(got, e, sub)),
        (BoolLit(a), BoolLit(b)) => a == b,
        (IntLit(a), IntLit(b)) => a == b,
        (FloatLit(a), FloatLit(b)) => a == b,
        (IntLit(a), FloatLit(b)) => (*a as f64) == *b,
        (StrLit(a), StrLit(b)) => a == b,
        // a non-literal value may hold the literal: decided at run time
        (Bool, BoolLit(_)) | (Int, IntLit(_) | FloatLit(_)) | (Float, FloatLit(_)) => true,
        (Str, StrLit(_)) => true,
        (Bool | BoolLit(_), Bool) => true,
        (Int | IntLit(_), Int | Float) => true,
        (Float | FloatLit(_), Float) => true,
        // upstream's resolver lets a bool literal stand for a float (not for an int; a bool
        // that is no literal stands for neither)
        (BoolLit(_), Float) => true,
        (Str | StrLit(_), Str) => true,
        (List(a), List(b)) => assignable(a, b, sub),
        (Dict(k1, v1), Dict(k2, v2)) => assignable(k1, k2, sub) && assignable(v1, v2, sub),
        // a dict literal becomes the schema (members are checked where the literal is written)
        (Dict(..), Schema(_)) => true,
        // an instance is not a dict: upstream refuses `x: {str:any} = S {}` (and at run time)
        (Schema(_), Dict(..)) => false,
        (Schema(a), Schema(b)) => sub(*a, *b),
        // a unit literal is a number multiplier (and only itself as a literal)
        (Unit(_), Unit(Option::None)) => true,
        (Unit(a), Unit(b)) => a == b,
        // parameters the other way round: the expected function's arguments must fit the
        // given one's parameters, literally (`(int) -> R` does not take `(int(1)) -> R`)
        (Func(g), Func(e)) => {
            g.params.len() == e.params.len()
                && g.params
                    .iter()
                    .zip(&e.params)
                    .all(|((_, gp, _), (_, ep, _))| {
                        assignable(ep, gp, sub)
                            && !(!ep.is_any() && ep.widen() == *ep && gp.widen() != *gp)
                    })
                && assignable(&g.ret, &e.ret, sub)
        }
        _ => false,
    }
}

/// Whether an attribute redeclared in its schema's body with type `new` keeps to the type
/// `first` of its first declaration, as upstream's resolver decides it: `new` must be a subtype,
/// where `any` is no subtype of anything else and a non-literal number or bool is no subtype of
/// a literal (a `str` is of a string literal).
pub fn field_type_fits(new: &Ty, first: &Ty, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> bool {
    use Ty::*;
    match (new, first) {
        (_, Any) => true,
        (Any, _) => false,
        (Union(ns), _) => ns.iter().all(|n| field_type_fits(n, first, sub)),
        (_, Union(fs)) => fs.iter().any(|f| field_type_fits(new, f, sub)),
        (Int, IntLit(_) | FloatLit(_)) | (Float, FloatLit(_)) | (Bool, BoolLit(_)) => false,
        (List(a), List(b)) => field_type_fits(a, b, sub),
        (Dict(k1, v1), Dict(k2, v2)) => {
            field_type_fits(k1, k2, sub) && field_type_fits(v1, v2, sub)
        }
        _ => assignable(new, first, sub),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unions_flatten_and_drop_duplicates_in_first_seen_order() {
        let lit = |s: &str| Ty::StrLit(s.into());
        let many: Vec<Ty> = (0..20_000).map(|i| lit(&format!("app-{i}"))).collect();
        let twice: Vec<Ty> = many.iter().chain(many.iter()).cloned().collect();
        let Ty::Union(members) = Ty::union(twice) else {
            panic!("a union")
        };
        assert_eq!(&members[..], &many[..]);
        let nested = Ty::union(vec![
            Ty::Int,
            Ty::union(vec![Ty::Int, lit("a")]),
            Ty::FloatLit(0.0),
            Ty::FloatLit(-0.0),
        ]);
        assert_eq!(
            nested,
            Ty::Union(vec![Ty::Int, lit("a"), Ty::FloatLit(0.0)].into())
        );
        assert_eq!(Ty::union(vec![Ty::Int, Ty::Any]), Ty::Any);
    }
}
