//! Runtime type checks and conversions on assignment (`int` to `float`, dicts to schema
//! instances), with upstream's messages.

use std::rc::Rc;

use super::schema::as_schema_type;
use super::{Ctx, EvalError, EvalResult, Evaluator};
use crate::ast::{self, BasicType, LiteralType, Span, TypeKind};
use crate::value::{ErrKind, Func, Value};

/// `type X = T`.
pub struct TypeAlias {
    pub ty: &'static ast::Type,
    pub ctx: Ctx,
}

/// A type as upstream prints it.
pub fn type_str(t: &ast::Type) -> String {
    match &t.kind {
        TypeKind::Any => "any".into(),
        TypeKind::Basic(b) => match b {
            BasicType::Bool => "bool",
            BasicType::Int => "int",
            BasicType::Float => "float",
            BasicType::Str => "str",
        }
        .into(),
        TypeKind::Named(id) => id
            .names
            .iter()
            .map(|n| n.sym.as_str())
            .collect::<Vec<_>>()
            .join("."),
        TypeKind::List(e) => format!("[{}]", e.as_ref().map(|x| type_str(x)).unwrap_or_default()),
        TypeKind::Dict(k, v) => format!(
            "{{{}:{}}}",
            k.as_ref().map(|x| type_str(x)).unwrap_or_default(),
            v.as_ref().map(|x| type_str(x)).unwrap_or_default()
        ),
        TypeKind::Union(ts) => ts.iter().map(type_str).collect::<Vec<_>>().join(" | "),
        TypeKind::Literal(l) => match l {
            LiteralType::Bool(b) => format!("bool({})", if *b { "True" } else { "False" }),
            LiteralType::Int(i, s) => format!("int({i}{})", s.map(|s| s.as_str()).unwrap_or("")),
            LiteralType::Float(f) => format!("float({})", crate::value::float_to_str(*f)),
            LiteralType::Str(s) => format!("str({s})"),
            LiteralType::None => "NoneType".into(),
            LiteralType::Undefined => "UndefinedType".into(),
        },
        TypeKind::Function { .. } => "function".into(),
    }
}

impl Evaluator {
    /// Check `v` against `t`, converting where upstream does; a mismatch is a TypeError.
    pub fn convert_type(
        &self,
        ctx: &Ctx,
        v: Value,
        t: &'static ast::Type,
        span: Span,
    ) -> EvalResult<Value> {
        match self.try_convert(ctx, &v, t, span, false)? {
            Some(x) => Ok(x),
            None => Err(self.type_mismatch(ctx, &v, t, span)),
        }
    }

    /// Upstream's run-time type error: `expect <annotation>, got <type>`, and for a config
    /// that does not fit a schema, which keys and attributes do not match.
    pub(crate) fn type_mismatch(
        &self,
        ctx: &Ctx,
        v: &Value,
        t: &'static ast::Type,
        span: Span,
    ) -> EvalError {
        let got = v.type_name_full();
        let mut msg = format!("expect {}, got {got}", self.type_src(ctx, t));
        if let (TypeKind::Named(id), Some(d)) = (&t.kind, v.as_dict())
            && let Some(st) = self
                .eval_identifier(&type_ctx(ctx), id)
                .ok()
                .as_ref()
                .and_then(as_schema_type)
            && let Ok(Err(notes)) = self.config_fits(&st, d, span)
        {
            msg.push_str(". For details:\n");
            let (plain, shown) = (format!("Schema {}", st.name), self.details_name(id, &st));
            let notes: Vec<String> = notes
                .iter()
                .map(|n| match n.strip_prefix(&plain) {
                    Some(rest) => format!("Schema {shown}{rest}"),
                    None => n.clone(),
                })
                .collect();
            msg.push_str(&notes.join("\n"));
        }
        EvalError::new(ErrKind::Evaluation, msg, Some(span))
    }

    /// A schema as upstream's conversion details name it: a main-package schema by its name,
    /// one named through an import whose alias is its package path as written (`pkg.S`),
    /// any other with `@` and its package path (`@pkg.sub.S`, and `@pkg.S` written `S`
    /// inside `pkg`).
    pub(crate) fn details_name(
        &self,
        id: &ast::Identifier,
        st: &crate::eval::SchemaType,
    ) -> String {
        if &*st.pkgpath == "__main__" || st.pkgpath.is_empty() {
            return st.name.to_string();
        }
        match id.names.as_slice() {
            [alias, _] if alias.sym.as_str() == &*st.pkgpath => {
                format!("{}.{}", st.pkgpath, st.name)
            }
            _ => format!("@{}.{}", st.pkgpath, st.name),
        }
    }

    /// A type as upstream's run-time messages print it: as written, string literals quoted,
    /// schemas of other packages with their package path.
    pub(crate) fn type_src(&self, ctx: &Ctx, t: &'static ast::Type) -> String {
        match &t.kind {
            TypeKind::Named(id) => match self
                .eval_identifier(&type_ctx(ctx), id)
                .ok()
                .as_ref()
                .and_then(as_schema_type)
            {
                Some(st) if &*st.pkgpath != "__main__" && !st.pkgpath.is_empty() => {
                    format!("{}.{}", st.pkgpath, st.name)
                }
                _ => type_str(t),
            },
            TypeKind::List(e) => format!(
                "[{}]",
                e.as_ref()
                    .map(|x| self.type_src(ctx, x))
                    .unwrap_or_default()
            ),
            TypeKind::Dict(k, v) => format!(
                "{{{}:{}}}",
                k.as_ref()
                    .map(|x| self.type_src(ctx, x))
                    .unwrap_or_default(),
                v.as_ref()
                    .map(|x| self.type_src(ctx, x))
                    .unwrap_or_default()
            ),
            TypeKind::Union(ts) => ts
                .iter()
                .map(|x| self.type_src(ctx, x))
                .collect::<Vec<_>>()
                .join(" | "),
            TypeKind::Literal(l) => match l {
                LiteralType::Bool(b) => if *b { "True" } else { "False" }.into(),
                LiteralType::Int(i, s) => format!("{i}{}", s.map(|s| s.as_str()).unwrap_or("")),
                LiteralType::Float(f) => crate::value::float_to_str(*f),
                // upstream's runtime type string: the text as it is, double quotes escaped
                LiteralType::Str(s) => format!("\"{}\"", s.replace('"', "\\\"")),
                LiteralType::None => "None".into(),
                LiteralType::Undefined => "Undefined".into(),
            },
            _ => type_str(t),
        }
    }

    /// [`Self::try_convert`] for the schema evaluator: `None` when the value does not fit
    /// (the final type check reports it).
    pub(crate) fn try_convert_value(
        &self,
        ctx: &Ctx,
        v: &Value,
        t: &'static ast::Type,
        span: Span,
    ) -> EvalResult<Option<Value>> {
        self.try_convert(ctx, v, t, span, false)
    }

    /// (`item`: `v` is an item of a list or dict being converted)
    fn try_convert(
        &self,
        ctx: &Ctx,
        v: &Value,
        t: &'static ast::Type,
        span: Span,
        item: bool,
    ) -> EvalResult<Option<Value>> {
        if v.is_none_or_undefined() {
            return Ok(Some(v.clone()));
        }
        Ok(match &t.kind {
            TypeKind::Any => Some(v.clone()),
            TypeKind::Basic(b) => basic_fits(*b, v).then(|| v.clone()),
            TypeKind::Named(id) => {
                if id
                    .names
                    .last()
                    .is_some_and(|n| n.sym.as_str() == "NumberMultiplier")
                {
                    return Ok(matches!(v, Value::Unit(_)).then(|| v.clone()));
                }
                let tv = self.eval_identifier(&type_ctx(ctx), id)?;
                if let Some(st) = as_schema_type(&tv) {
                    match v {
                        // upstream's runtime check is not strict about schema types: any
                        // instance fits a schema-typed slot (its resolver checks what it can
                        // see statically; `as` is the strict conversion)
                        Value::Schema(_) => Some(v.clone()),
                        // (a rule's value is a dict: no dict becomes one)
                        Value::Dict(_) if st.rule.is_some() => None,
                        // a dict becomes an instance only when its keys fit the schema
                        Value::Dict(d) => match self.config_fits(&st, d, span)? {
                            Ok(()) => {
                                let before = self.last_pos.get();
                                let at = self.walked_line_start(span);
                                let inst = self.instantiate(&st, &[], &[], (**d).clone(), at)?;
                                // upstream checks a converted item's required attributes as it
                                // makes it (inside a schema body too), where its runtime stood
                                // before the item's own body (a whole value is checked where it
                                // is used: see `empty_config_mismatch`)
                                if item {
                                    self.check_own_required(
                                        &inst,
                                        before.copied().unwrap_or(span),
                                    )?;
                                }
                                // (a converted value's body leaves upstream's runtime standing
                                // in it: the next item's failure is reported there)
                                if let Some(at) = self.body_end_pos(&st, span) {
                                    self.last_pos.set(Some(at));
                                }
                                Some(inst)
                            }
                            Err(_) => None,
                        },
                        _ => None,
                    }
                } else if let Value::Func(f) = &tv {
                    match &**f {
                        Func::User { data, .. } => match data.downcast_ref::<TypeAlias>() {
                            Some(a) => {
                                let c = a.ctx.clone();
                                self.try_convert(&c, v, a.ty, span, item)?
                            }
                            None => None,
                        },
                        _ => None,
                    }
                } else {
                    None
                }
            }
            TypeKind::List(e) => match v {
                Value::List(l) => match e {
                    Some(et) => {
                        let mut out = Vec::with_capacity(l.len());
                        let mut changed = false;
                        for x in l.iter() {
                            match self.try_convert(ctx, x, et, span, true)? {
                                Some(y) => {
                                    changed |= !same(&y, x);
                                    out.push(y)
                                }
                                None => return Ok(None),
                            }
                        }
                        Some(if changed { Value::from(out) } else { v.clone() })
                    }
                    None => Some(v.clone()),
                },
                _ => None,
            },
            TypeKind::Dict(_, vt) => match v {
                Value::Dict(d) => match vt {
                    Some(vt) => {
                        // copied only when a value actually changes (most dicts already fit)
                        let mut nd: Option<crate::value::Dict> = None;
                        for (i, (_, x)) in d.map.iter().enumerate() {
                            match self.try_convert(ctx, x, vt, span, true)? {
                                Some(y) if !same(&y, x) => {
                                    let nd = nd.get_or_insert_with(|| (**d).clone());
                                    if let Some((_, slot)) = nd.map.get_index_mut(i) {
                                        *slot = y;
                                    }
                                }
                                Some(_) => {}
                                None => return Ok(None),
                            }
                        }
                        Some(nd.map(Value::from).unwrap_or_else(|| v.clone()))
                    }
                    None => Some(v.clone()),
                },
                // a schema instance does not fit a dict type (upstream: `expect {str:any}, got S`)
                _ => None,
            },
            TypeKind::Union(ts) => {
                // exact matches first so `int | float` keeps an int
                for t2 in ts {
                    if exact(v, t2) {
                        return Ok(Some(v.clone()));
                    }
                }
                // the first member the value converts to is taken, its failures included (a
                // config fitting a schema's keys is instantiated there, as upstream's)
                for t2 in ts {
                    if let Some(x) = self.try_convert(ctx, v, t2, span, item)? {
                        return Ok(Some(x));
                    }
                }
                None
            }
            TypeKind::Literal(l) => literal_fits(l, v).then(|| v.clone()),
            TypeKind::Function { .. } => matches!(v, Value::Func(_)).then(|| v.clone()),
        })
    }
}

/// Whether `v` fits `t`, a type that names no schema or alias ([`Evaluator::try_convert`]
/// gives such a value back unchanged or not at all): the same answer without building the
/// converted value. Debug builds check it against `try_convert` where it is used.
pub(crate) fn fits_plain(v: &Value, t: &ast::Type) -> bool {
    if v.is_none_or_undefined() {
        return true;
    }
    match &t.kind {
        TypeKind::Any => true,
        TypeKind::Basic(b) => basic_fits(*b, v),
        TypeKind::List(e) => match v {
            Value::List(l) => e
                .as_deref()
                .is_none_or(|et| l.iter().all(|x| fits_plain(x, et))),
            _ => false,
        },
        TypeKind::Dict(_, vt) => match v {
            Value::Dict(d) => vt
                .as_deref()
                .is_none_or(|vt| d.map.values().all(|x| fits_plain(x, vt))),
            _ => false,
        },
        TypeKind::Union(ts) => ts.iter().any(|t2| fits_plain(v, t2)),
        TypeKind::Literal(l) => literal_fits(l, v),
        TypeKind::Function { .. } => matches!(v, Value::Func(_)),
        // (not reached: the caller checks the type names none)
        TypeKind::Named(_) => true,
    }
}

fn basic_fits(b: BasicType, v: &Value) -> bool {
    matches!(
        (b, v),
        (BasicType::Bool, Value::Bool(_))
            | (BasicType::Int, Value::Int(_))
            | (BasicType::Float, Value::Float(_))
            | (BasicType::Str, Value::Str(_))
            // upstream keeps an int stored under a float type as an int
            | (BasicType::Float, Value::Int(_))
    )
}

fn literal_fits(l: &LiteralType, v: &Value) -> bool {
    match (l, v) {
        (LiteralType::Bool(b), Value::Bool(x)) => b == x,
        (LiteralType::Int(i, None), Value::Int(x)) => i == x,
        // a unit literal type holds that number multiplier
        (LiteralType::Int(i, Some(s)), Value::Unit(u)) => {
            u.raw == *i as f64 && &*u.suffix == s.as_str()
        }
        (LiteralType::Float(f), Value::Float(x)) => f == x,
        (LiteralType::Str(s), Value::Str(x)) => **s == **x && runtime_str_literal(s),
        _ => false,
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::List(x), Value::List(y)) => Rc::ptr_eq(x, y),
        (Value::Dict(x), Value::Dict(y)) => Rc::ptr_eq(x, y),
        (Value::Schema(x), Value::Schema(y)) => Rc::ptr_eq(x, y),
        (Value::None, Value::None) | (Value::Undefined, Value::Undefined) => true,
        (Value::Int(_), Value::Int(_))
        | (Value::Str(_), Value::Str(_))
        | (Value::Bool(_), Value::Bool(_)) => true,
        (Value::Float(_), Value::Float(_)) => true,
        _ => false,
    }
}

fn exact(v: &Value, t: &ast::Type) -> bool {
    matches!(
        (&t.kind, v),
        (TypeKind::Basic(BasicType::Int), Value::Int(_))
            | (TypeKind::Basic(BasicType::Float), Value::Float(_))
            | (TypeKind::Basic(BasicType::Str), Value::Str(_))
            | (TypeKind::Basic(BasicType::Bool), Value::Bool(_))
    )
}

/// Type names are package-level names, never attributes or locals.
pub(crate) fn type_ctx(ctx: &Ctx) -> Ctx {
    Ctx {
        schema: None,
        locals: None,
        in_lambda: false,
        ..ctx.clone()
    }
}

/// Whether upstream's runtime can match a string literal type: it reads the type back from
/// its text, and no value matches one holding a backslash or a character Rust's debug
/// format escapes (control and format characters, separators other than the space).
fn runtime_str_literal(s: &str) -> bool {
    // (the usual literal is printable ASCII)
    if s.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'\\') {
        return true;
    }
    !s.chars()
        .any(|c| c == '\\' || (c != '"' && c != '\'' && c.escape_debug().len() > 1))
}
