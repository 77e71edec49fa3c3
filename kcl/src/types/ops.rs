//! Operators: which unary, binary and comparison operators a type supports, and the type of
//! their result; joins of several types (`sup`).

use super::*;

impl<'a> Checker<'a> {
    /// Upstream's resolver table of unary operators: `+`/`-` take numbers, `~` ints and
    /// bools, `not` anything; the result has the operand's (variable) type, `not 1` included.
    pub(super) fn unary(&mut self, op: ast::UnaryOp, t: &Ty, span: Span) -> Ty {
        if t.is_any() {
            return Ty::Any;
        }
        let sub = |a: SchemaId, b: SchemaId| self.is_sub_schema(a, b);
        let v = literal_union_widened(t, &sub);
        let (ok, sym) = match op {
            ast::UnaryOp::Pos => (all_of(&v, is_num), "+"),
            ast::UnaryOp::Neg => (all_of(&v, is_num), "-"),
            ast::UnaryOp::Invert => (
                all_of(&v, |t| is_int(t) || matches!(t, Ty::Bool | Ty::BoolLit(_))),
                "~",
            ),
            ast::UnaryOp::Not => (true, "not"),
        };
        if ok {
            return v;
        }
        let msg = format!("bad operand type for unary {sym}: '{}'", self.ty_str(t));
        self.err(ErrKind::Type, msg, span.shrink_to_lo());
        Ty::Any
    }

    /// Upstream's resolver table of binary operators: the result type, or a type error for
    /// operand types that never work together. Unions of literals count as their variable
    /// type (`1 | 2` is `int`); `any` works with everything. Ints divide to an int (the
    /// run-time value is a float; an annotation `int` then fails at run time, as upstream).
    pub(super) fn binary(&mut self, op: ast::BinOp, l: &Ty, r: &Ty, span: Span) -> Ty {
        use ast::BinOp as B;
        let sub = |a: SchemaId, b: SchemaId| self.is_sub_schema(a, b);
        let (t1, t2) = (
            literal_union_widened(l, &sub),
            literal_union_widened(r, &sub),
        );
        if t1.is_any() || t2.is_any() {
            return Ty::Any;
        }
        // a union counts when all its members do (`int | float` is a number)
        let int = |t: &Ty| all_of(t, is_int);
        let float = |t: &Ty| match t {
            Ty::Union(ts) => ts.iter().any(is_float),
            t => is_float(t),
        };
        let num = |t: &Ty| all_of(t, is_num);
        let str_ = |t: &Ty| all_of(t, |t| matches!(t, Ty::Str | Ty::StrLit(_)));
        let number = |a: &Ty, b: &Ty| {
            if float(a) || float(b) {
                Ty::Float
            } else {
                Ty::Int
            }
        };
        let mul_val = |t: &Ty| {
            let one = |t: &Ty| num(t) || str_(t) || matches!(t, Ty::List(_));
            match t {
                Ty::Union(ts) => ts.iter().all(one),
                t => one(t),
            }
        };
        let zero = |t: &Ty| match t {
            Ty::IntLit(0) => true,
            Ty::FloatLit(f) => *f == 0.0,
            _ => false,
        };
        let items = |a: &Ty, b: &Ty| match (a, b) {
            (Ty::List(x), Ty::List(y)) => {
                Ty::List(Rc::new(Ty::union(vec![(**x).clone(), (**y).clone()])))
            }
            _ => Ty::Any,
        };
        let result = match op {
            B::Add if num(&t1) && num(&t2) => Some(number(&t1, &t2)),
            B::Add if str_(&t1) && str_(&t2) => Some(Ty::Str),
            B::Add if matches!((&t1, &t2), (Ty::List(_), Ty::List(_))) => Some(items(&t1, &t2)),
            B::Sub | B::Pow if num(&t1) && num(&t2) => Some(number(&t1, &t2)),
            B::Mul if num(&t1) && num(&t2) => Some(number(&t1, &t2)),
            B::Mul if int(&t1) && mul_val(&t2) => Some(t2.clone()),
            B::Mul if mul_val(&t1) && int(&t2) => Some(t1.clone()),
            B::Div | B::FloorDiv | B::Mod if num(&t1) && num(&t2) => {
                if zero(&t2) {
                    self.err(
                        ErrKind::Type,
                        "integer division or modulo by zero".to_string(),
                        span.shrink_to_lo(),
                    );
                }
                Some(if op == B::Mod {
                    Ty::Int
                } else {
                    number(&t1, &t2)
                })
            }
            B::Shl | B::Shr | B::BitXor | B::BitAnd if int(&t1) && int(&t2) => Some(Ty::Int),
            B::BitOr if int(&t1) && int(&t2) => Some(Ty::Int),
            B::BitOr if matches!(t1, Ty::None) => Some(t2.clone()),
            B::BitOr if matches!(t2, Ty::None) => Some(t1.clone()),
            B::BitOr if matches!((&t1, &t2), (Ty::List(_), Ty::List(_))) => Some(items(&t1, &t2)),
            B::BitOr => match (&t1, &t2) {
                (Ty::Dict(k1, v1), Ty::Dict(k2, v2)) => Some(Ty::Dict(
                    Rc::new(Ty::union(vec![(**k1).clone(), (**k2).clone()])),
                    Rc::new(Ty::union(vec![(**v1).clone(), (**v2).clone()])),
                )),
                (Ty::Schema(_), Ty::Schema(_) | Ty::SchemaType(_) | Ty::Dict(..)) => {
                    Some(t1.clone())
                }
                // upstream's checker takes a schema's type as its instance here; the union
                // fails at run time ('"type"' and '"dict"')
                (Ty::SchemaType(id), Ty::Schema(_) | Ty::SchemaType(_) | Ty::Dict(..)) => {
                    Some(Ty::Schema(*id))
                }
                _ => None,
            },
            B::And => Some(Ty::Bool),
            B::Or => Some(Ty::union(vec![t1.clone(), t2.clone()])),
            _ => None,
        };
        // what a union became: upstream's `sup` of the members
        let sub = |x, y| self.is_sub_schema(x, y);
        let result = result.map(|t| match t {
            Ty::Union(ts) => sup(ts.to_vec(), &sub),
            Ty::List(e) if matches!(*e, Ty::Union(_)) => {
                Ty::List(Rc::new(sup(vec![(*e).clone()], &sub)))
            }
            Ty::Dict(k, v) if matches!(*k, Ty::Union(_)) || matches!(*v, Ty::Union(_)) => Ty::Dict(
                Rc::new(sup(vec![(*k).clone()], &sub)),
                Rc::new(sup(vec![(*v).clone()], &sub)),
            ),
            t => t,
        });
        match result {
            Some(t) => t,
            None => {
                let msg = format!(
                    "unsupported operand type(s) for {}: '{}' and '{}'",
                    op.as_str(),
                    self.ty_str(l),
                    self.ty_str(r)
                );
                self.err(ErrKind::Type, msg, span.shrink_to_lo());
                Ty::Any
            }
        }
    }
}

pub(super) fn is_int(t: &Ty) -> bool {
    matches!(t, Ty::Int | Ty::IntLit(_))
}

pub(super) fn is_float(t: &Ty) -> bool {
    matches!(t, Ty::Float | Ty::FloatLit(_))
}

pub(super) fn is_num(t: &Ty) -> bool {
    is_int(t) || is_float(t)
}

/// Whether a value of type `t` may index a list or string statically: an int or bool, or a type
/// not known here (None is left to run time, as upstream's).
pub(super) fn int_index(t: &Ty) -> bool {
    match t {
        Ty::Any | Ty::None | Ty::SchemaType(_) => true,
        // (a bool is no index to upstream's resolver, nor a number with a unit)
        Ty::Union(_) | Ty::Unit(_) => false,
        t => t.kind().is_none() || matches!(t, Ty::Int | Ty::IntLit(_)),
    }
}

/// Whether upstream's resolver takes `l op r` (operands already widened):
/// - ordering: numbers and bools only; strings, lists, None and configs are rejected when
///   their types are known (a union is known when each member is);
/// - `in`: one iterable kind on the right (a union of two iterables is not one);
/// - `==`/`!=`: anything against `any` or None (a number with a unit too); primitives (unions
///   of them too), two lists, or two configs (dicts, schema instances, schemas);
/// - `is`: anything against `any` or None; numbers and bools only.
pub(super) fn compare_allowed(op: ast::CmpOp, l: &Ty, r: &Ty) -> bool {
    use ast::CmpOp as C;
    let num = |t: &Ty| all_of(t, |t| matches!(t.kind(), Some(Kind::Num | Kind::Bool)));
    // a number with a unit compares with nothing (membership and identity aside)
    let unit = |t: &Ty| match t {
        Ty::Union(ts) => ts.iter().any(|t| matches!(t, Ty::Unit(_))),
        t => matches!(t, Ty::Unit(_)),
    };
    // (against `any`, left to the run time; `==` and `!=` against None)
    let free = |t: &Ty| matches!(t, Ty::Any | Ty::None);
    if (unit(l) || unit(r))
        && !matches!(op, C::In | C::NotIn | C::Is | C::IsNot)
        && !(l.is_any() || r.is_any())
        && !(matches!(op, C::Eq | C::NotEq) && (free(l) || free(r)))
    {
        return false;
    }
    // a module is compared with nothing but `any` and None (membership aside)
    if (matches!(l, Ty::Module(_)) || matches!(r, Ty::Module(_))) && !matches!(op, C::In | C::NotIn)
    {
        return matches!(op, C::Eq | C::NotEq | C::Is | C::IsNot) && (free(l) || free(r));
    }
    match op {
        // (`any` on either side is left to the run time)
        C::Lt | C::LtE | C::Gt | C::GtE if l.is_any() || r.is_any() => true,
        C::Lt | C::LtE | C::Gt | C::GtE => {
            let known = |t: &Ty| all_of(t, |t| matches!(t, Ty::None) || t.kind().is_some());
            // (a schema's type is ordered as its instances are: not at all)
            let mapping = |t: &Ty| t.is_mapping() || matches!(t, Ty::SchemaType(_));
            !(mapping(l) || mapping(r) || (known(l) && known(r) && !(num(l) && num(r))))
        }
        C::In | C::NotIn => {
            l.is_any()
                || r.is_any()
                || matches!(r, Ty::SchemaType(_))
                || matches!(
                    r.kind(),
                    Some(Kind::Str | Kind::List | Kind::Dict | Kind::Schema)
                )
        }
        C::Eq | C::NotEq | C::Is | C::IsNot => {
            let free = |t: &Ty| matches!(t, Ty::Any | Ty::None);
            // only types whose rules are known here are judged
            let judged = |t: &Ty| {
                all_of(t, |t| {
                    t.kind().is_some() || matches!(t, Ty::Func(_) | Ty::SchemaType(_))
                })
            };
            if free(l) || free(r) || !judged(l) || !judged(r) {
                return true;
            }
            if matches!(op, C::Is | C::IsNot) {
                return num(l) && num(r);
            }
            let prim = |t: &Ty| {
                all_of(t, |t| {
                    matches!(t.kind(), Some(Kind::Num | Kind::Bool | Kind::Str))
                })
            };
            let config = |t: &Ty| matches!(t, Ty::Dict(..) | Ty::Schema(_) | Ty::SchemaType(_));
            // upstream compares lists and configs with `==` only: `!=` on them is its
            // resolver's "unsupported operand"
            (prim(l) && prim(r))
                || (op == C::Eq
                    && (matches!((l, r), (Ty::List(_), Ty::List(_))) || (config(l) && config(r))))
        }
    }
}

/// `f` of a type, or of every member of a union.
pub(super) fn all_of(t: &Ty, f: impl Fn(&Ty) -> bool) -> bool {
    match t {
        Ty::Union(ts) => ts.iter().all(f),
        t => f(t),
    }
}

/// Whether `a` is a subtype of `b` for upstream's `sup` (only `any` is above everything).
pub(super) fn subsumed(a: &Ty, b: &Ty, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> bool {
    match (a, b) {
        (_, Ty::Any) => true,
        (Ty::Any, _) => false,
        (Ty::Union(xs), _) => xs.iter().all(|x| subsumed(x, b, sub)),
        (_, Ty::Union(ys)) => ys.iter().any(|y| subsumed(a, y, sub)),
        (Ty::IntLit(_), Ty::Int)
        | (Ty::FloatLit(_), Ty::Float)
        | (Ty::StrLit(_), Ty::Str)
        | (Ty::BoolLit(_), Ty::Bool) => true,
        (Ty::List(x), Ty::List(y)) => subsumed(x, y, sub),
        (Ty::Dict(k1, v1), Ty::Dict(k2, v2)) => subsumed(k1, k2, sub) && subsumed(v1, v2, sub),
        (Ty::Schema(x), Ty::Schema(y)) => sub(*x, *y),
        _ => a == b,
    }
}

/// Upstream's `sup` of the types of an `if` expression's branches, an `or`, or a literal's
/// items: members flattened and deduplicated in order, then a member another one subsumes
/// dropped (None is below everything, an int below a float, a literal below its type, a
/// schema below its base), removed the way upstream's ordered set removes (swapping the last
/// member in), so the order of what is left is upstream's.
pub(super) fn sup(ts: Vec<Ty>, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> Ty {
    let t = Ty::union(ts);
    let Ty::Union(members) = t else {
        return t;
    };
    let mut set: Vec<Ty> = members.to_vec();
    // pairwise: a literal of thousands of distinct records would be quadratic, and such a
    // union only ever shows in an error message
    if set.len() > 256 {
        set.retain(|t| !matches!(t, Ty::None));
        return Ty::Union(set.into());
    }
    let mut remove: Vec<Ty> = Vec::new();
    for i in 0..set.len() {
        for j in i + 1..set.len() {
            let (a, b) = (&set[i], &set[j]);
            if sup_subsume(a, b, sub) {
                if !remove.contains(a) {
                    remove.push(a.clone());
                }
            } else if sup_subsume(b, a, sub) && !remove.contains(b) {
                remove.push(b.clone());
            }
        }
    }
    for r in remove {
        if let Some(i) = set.iter().position(|x| *x == r) {
            set.swap_remove(i);
        }
    }
    match set.len() {
        0 => Ty::Any,
        1 => set.pop().unwrap_or(Ty::Any),
        _ => Ty::Union(set.into()),
    }
}

/// Upstream's `subsume` as its `sup` uses it.
pub(super) fn sup_subsume(a: &Ty, b: &Ty, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> bool {
    match (a, b) {
        (_, Ty::Any) | (Ty::None, _) => true,
        (Ty::Union(xs), _) => xs.iter().all(|x| sup_subsume(x, b, sub)),
        (_, Ty::Union(ys)) => ys.iter().any(|y| sup_subsume(a, y, sub)),
        (Ty::Schema(x), Ty::Schema(y)) => sub(*x, *y),
        (Ty::List(x), Ty::List(y)) => sup_subsume(x, y, sub),
        (Ty::Dict(k1, v1), Ty::Dict(k2, v2)) => {
            sup_subsume(k1, k2, sub) && sup_subsume(v1, v2, sub)
        }
        (Ty::Int | Ty::IntLit(_), Ty::Float | Ty::FloatLit(_))
        | (Ty::IntLit(_), Ty::Int)
        | (Ty::FloatLit(_), Ty::Float)
        | (Ty::StrLit(_), Ty::Str)
        | (Ty::BoolLit(_), Ty::Bool) => true,
        // upstream's `sup` also drops a `str` beside a string literal (`{a = s, b = "y"}`
        // has values of type 'str(y)'), unlike other literals
        (Ty::Str, Ty::StrLit(_)) => true,
        _ => a == b,
    }
}

/// A union of literal types as its variable type (`1 | 2` is `int`), as upstream's resolver
/// reads operands: members widened, and a member another one subsumes dropped (`[{str:any}]
/// | [any]` is `[any]`); other types as they are.
pub(super) fn literal_union_widened(t: &Ty, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> Ty {
    let Ty::Union(ts) = t else {
        return t.clone();
    };
    let Ty::Union(ws) = Ty::union(ts.iter().map(Ty::variable_type).collect()) else {
        return Ty::union(ts.iter().map(Ty::variable_type).collect());
    };
    let keep: Vec<Ty> = ws
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            !ws.iter()
                .enumerate()
                .any(|(j, b)| j != *i && subsumed(a, b, sub) && !subsumed(b, a, sub))
        })
        .map(|(_, a)| a.clone())
        .collect();
    Ty::union(keep)
}
