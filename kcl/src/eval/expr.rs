//! Expression evaluation: one `eval` per expression kind, with selectors and subscripts.
//! Config literals are in `config.rs`, comprehensions and quantifiers in `comp.rs`, calls in
//! `call.rs`; schemas (`schema/`) and statements (`stmt.rs`) are apart.

use std::rc::Rc;

use super::call::PluginFn;
use super::{Closure, Ctx, EvalError, EvalResult, Evaluator, ModuleRef};
use crate::ast::{self, Expr, ExprKind, Span};
use crate::value::{self, ConfigOp, Dict, ErrKind, Func, Str, Value};

pub(crate) fn conv_op(op: ast::ConfigOp) -> ConfigOp {
    match op {
        ast::ConfigOp::Union => ConfigOp::Union,
        ast::ConfigOp::Override => ConfigOp::Override,
        ast::ConfigOp::Insert => ConfigOp::Insert,
    }
}

impl Evaluator {
    pub fn binop(&self, op: ast::BinOp, a: &Value, b: &Value, span: Span) -> EvalResult<Value> {
        if self.opts.strict_range_check {
            value::strict_range_check(op, a, b).map_err(|e| self.rt(e, span))?;
        }
        value::binary(op, a, b).map_err(|e| self.rt(e, span))
    }

    /// Evaluate an expression. Deeply nested programs grow the stack on the heap instead of
    /// overflowing it; runaway recursion stops at the call-depth limit with an error.
    pub fn eval(&self, ctx: &Ctx, e: &'static Expr) -> EvalResult<Value> {
        stacker::maybe_grow(128 * 1024, 2 * 1024 * 1024, || self.eval_inner(ctx, e))
    }

    fn eval_inner(&self, ctx: &Ctx, e: &'static Expr) -> EvalResult<Value> {
        self.last_pos.set(Some(&e.span));
        match &e.kind {
            // (a module is only a selector's receiver: as a value it is Undefined)
            ExprKind::Ident(s) => self.lookup_value(ctx, *s, e.span),
            ExprKind::Int(i) => Ok(Value::Int(*i)),
            ExprKind::Float(f) => Ok(Value::Float(*f)),
            ExprKind::NumberUnit { value, suffix } => Ok(Value::Unit(Rc::new(value::Unit {
                raw: *value as f64,
                suffix: Str::from(suffix.as_str()),
            }))),
            ExprKind::Str(s) => Ok(Value::Str(Str::from(&**s))),
            ExprKind::JoinedStr(parts) => {
                let mut out = String::new();
                for p in parts {
                    match p {
                        ast::StrPart::Lit(s) => out.push_str(s),
                        ast::StrPart::Interp { expr, spec } => {
                            let v = self.eval(ctx, expr)?;
                            match spec.as_deref().map(|x| x.to_ascii_lowercase()).as_deref() {
                                Some("#json") => {
                                    out.push_str(&crate::output::to_json(&v, Default::default(), 0))
                                }
                                Some("#yaml") => {
                                    out.push_str(&crate::output::to_yaml(&v, Default::default()))
                                }
                                Some(_) => {
                                    return Err(EvalError::new(
                                        ErrKind::Compile,
                                        format!(
                                            "{} is a invalid format spec",
                                            spec.as_deref().unwrap_or("")
                                        ),
                                        Some(expr.span),
                                    ));
                                }
                                None => out.push_str(&value::to_str(&v)),
                            }
                        }
                    }
                }
                Ok(Value::from(out))
            }
            ExprKind::Bool(b) => Ok(Value::Bool(*b)),
            ExprKind::None => Ok(Value::None),
            ExprKind::Undefined => Ok(Value::Undefined),
            ExprKind::Unary { op, operand } => {
                let v = self.eval(ctx, operand)?;
                match op {
                    ast::UnaryOp::Not => Ok(value::unary_not(&v)),
                    ast::UnaryOp::Neg => value::unary_neg(&v).map_err(|x| self.rt(x, e.span)),
                    ast::UnaryOp::Pos => value::unary_pos(&v).map_err(|x| self.rt(x, e.span)),
                    ast::UnaryOp::Invert => value::unary_invert(&v).map_err(|x| self.rt(x, e.span)),
                }
            }
            ExprKind::Binary { op, left, right } => {
                let a = self.eval(ctx, left)?;
                match op {
                    ast::BinOp::And if !a.truthy() => return Ok(a),
                    ast::BinOp::Or if a.truthy() => return Ok(a),
                    _ => {}
                }
                let b = self.eval(ctx, right)?;
                if *op == ast::BinOp::BitOr {
                    // (a conflict is reported where upstream's runtime walked last)
                    return self.bit_or(a, b, e.span).map_err(|mut x| {
                        if x.kind == ErrKind::Evaluation
                            && x.msg.starts_with("conflicting values")
                            && let Some(p) = self.program_end_pos()
                        {
                            x.span = Some(p);
                        }
                        x
                    });
                }
                self.binop(*op, &a, &b, e.span)
            }
            ExprKind::Compare(c) => {
                let mut a = self.eval(ctx, &c.left)?;
                for (op, r) in &c.ops {
                    let b = self.eval(ctx, r)?;
                    if !value::compare(*op, &a, &b).map_err(|x| self.rt(x, e.span))? {
                        return Ok(Value::Bool(false));
                    }
                    a = b;
                }
                Ok(Value::Bool(true))
            }
            ExprKind::If(x) => {
                if self.eval(ctx, &x.cond)?.truthy() {
                    self.eval(ctx, &x.then)
                } else {
                    self.eval(ctx, &x.orelse)
                }
            }
            ExprKind::Selector(x) => {
                let v = match &x.value.kind {
                    ExprKind::Ident(s) => self.lookup(ctx, *s, x.value.span)?,
                    _ => self.eval(ctx, &x.value)?,
                };
                self.select(ctx, &v, x.attr.sym.as_str(), x.optional, x.attr.span)
            }
            ExprKind::Subscript {
                value,
                index,
                optional,
            } => {
                let v = self.eval(ctx, value)?;
                // `?[` guards a falsy receiver (None, an empty dict, list or string, 0...)
                if *optional && !v.truthy() {
                    return Ok(Value::None);
                }
                let i = self.eval(ctx, index)?;
                self.subscript(&v, &i, *optional, e.span)
            }
            ExprKind::Slice(s) => {
                let v = self.eval(ctx, &s.value)?;
                if s.optional && !v.truthy() {
                    return Ok(Value::None);
                }
                // as upstream at run time: a bound that is not an int (bool, str, float, None)
                // is no bound
                let get = |x: &'static Option<Expr>| -> EvalResult<Option<i64>> {
                    match x {
                        Some(x) => match self.eval(ctx, x)? {
                            Value::Int(i) => Ok(Some(i)),
                            _ => Ok(None),
                        },
                        None => Ok(None),
                    }
                };
                let (lo, hi, st) = (get(&s.lower)?, get(&s.upper)?, get(&s.step)?);
                crate::builtins::slice(&v, lo, hi, st).map_err(|x| self.rt(x, e.span))
            }
            ExprKind::Call { func, args } => {
                // (a call of such a name makes a new instance only once a config was given
                // to the name (`a {...}`); before that, upstream calls the instance: Undefined)
                let unified = match &func.kind {
                    ExprKind::Ident(n) if self.unified_configured.borrow().contains(n) => {
                        self.unified_schema(ctx, *n)?
                    }
                    _ => None,
                };
                let f = match unified {
                    Some(t) => t,
                    None => self.eval(ctx, func)?,
                };
                if f.is_none_or_undefined()
                    && match &func.kind {
                        ExprKind::Selector(x) => x.optional,
                        ExprKind::Subscript { optional, .. } => *optional,
                        _ => false,
                    }
                {
                    // `a?.f()` on a falsy receiver short-circuits the call too (Undefined)
                    return Ok(Value::Undefined);
                }
                if let Some(v) = self.fused_call(ctx, &f, args, e.span)? {
                    return Ok(v);
                }
                let (pos, kw) = self.eval_args(ctx, args)?;
                self.call_value(ctx, &f, &pos, &kw, e.span)
            }
            ExprKind::Paren(x) => self.eval(ctx, x),
            ExprKind::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    self.eval_list_item(ctx, it, &mut out)?;
                }
                Ok(Value::from(out))
            }
            ExprKind::ListIf(_) | ExprKind::Starred(_) => {
                let mut out = Vec::new();
                self.eval_list_item(ctx, e, &mut out)?;
                Ok(Value::from(out))
            }
            ExprKind::Config(entries) => {
                let mut d = Dict::with_capacity(entries.len());
                self.config_depth.set(self.config_depth.get() + 1);
                let r = self.eval_entries(ctx, entries, &mut d);
                self.config_depth.set(self.config_depth.get() - 1);
                r?;
                Ok(Value::from(d))
            }
            ExprKind::ListComp(c) => {
                let mut out = Vec::new();
                let c2 = ctx.in_loop();
                let mut first = true;
                self.comp(&c2, &c.clauses, 0, &mut |this, cx| {
                    if first {
                        // read before the element runs (it may hold comprehensions of its own)
                        let n = this.comp_len.get();
                        crate::limits::check_items(n, "the list comprehension")
                            .map_err(|x| this.rt(x, e.span))?;
                        out.reserve_exact(n);
                        first = false;
                    }
                    let v = this.eval(cx, &c.elt)?;
                    out.push(v);
                    if out.len() & 0xfff == 0 {
                        crate::limits::check_items(out.len(), "the list comprehension")
                            .map_err(|x| this.rt(x, e.span))?;
                    }
                    Ok(())
                })?;
                // results are often long-lived (large generated lists): drop the growth slack
                out.shrink_to_fit();
                Ok(Value::from(out))
            }
            ExprKind::DictComp(c) => {
                let mut d = Dict::new();
                let c2 = ctx.in_loop();
                self.comp(&c2, &c.clauses, 0, &mut |this, cx| {
                    let k = match this.eval(cx, &c.key)? {
                        Value::Str(s) => s,
                        // upstream's key of anything but a string (typed any, so the
                        // checker let it through) is empty
                        _ => Str::from(""),
                    };
                    let v = this.eval(cx, &c.value)?;
                    value::merge_entry(&mut d, &k, &v, conv_op(c.op), None, true)
                        .map_err(|x| this.rt(x, c.key.span))?;
                    if d.len() & 0xfff == 0 {
                        crate::limits::check_items(d.len(), "the dict comprehension")
                            .map_err(|x| this.rt(x, c.key.span))?;
                    }
                    Ok(())
                })?;
                Ok(Value::from(d))
            }
            ExprKind::Quant(q) => self.quant(ctx, q, e.span, false),
            ExprKind::Schema(s) => {
                let unified = match s.name.names.as_slice() {
                    [n] => {
                        let t = self.unified_schema(ctx, n.sym)?;
                        if t.is_some() {
                            self.unified_configured.borrow_mut().insert(n.sym);
                        }
                        t
                    }
                    _ => None,
                };
                let ty = match unified {
                    Some(t) => t,
                    None => self.eval_identifier(ctx, &s.name)?,
                };
                // the expression counts from before its config: instances made inside the
                // config are nested (see `schema_exprs`)
                self.schema_exprs.set(self.schema_exprs.get() + 1);
                let r = (|| {
                    let cfg = self.eval(ctx, &s.config)?;
                    let (pos, kw) = match &s.args {
                        Some(a) => self.eval_args(ctx, a)?,
                        None => (Vec::new(), Vec::new()),
                    };
                    // (upstream's runtime stands at the expression again when it calls)
                    self.last_pos.set(Some(&e.span));
                    self.instantiate_value(ctx, &ty, &pos, &kw, cfg, e.span, s.config.span)
                })();
                self.schema_exprs.set(self.schema_exprs.get() - 1);
                r
            }
            ExprKind::Lambda(l) => {
                // the local variables as they are now, before the live scopes: upstream's
                // closure keeps the values its locals have when it is made (each loop
                // iteration's own), and finds names assigned later in the scopes
                let ctx = Ctx {
                    locals: super::Scope::snapshot(&ctx.locals),
                    ..ctx.clone()
                };
                self.captured(&ctx);
                Ok(Value::Func(Rc::new(Func::User {
                    name: Str::from("lambda"),
                    data: Rc::new(Closure {
                        lambda: l,
                        ctx,
                        dotted: l
                            .params
                            .iter()
                            .map(|p| p.name.sym)
                            .find(|s| s.as_str().contains('.')),
                    }),
                    is_type: false,
                })))
            }
            ExprKind::As { value, ty } => {
                let v = self.eval(ctx, value)?;
                let got = match (&v, &ty.kind) {
                    (Value::Schema(s), ast::TypeKind::Named(_)) => Some(if &*s.pkg == "__main__" {
                        s.name.to_string()
                    } else {
                        format!("{}.{}", s.pkg, s.name)
                    }),
                    _ => None,
                };
                // `as` is upstream's strict check: an instance must be of that schema (not a
                // subschema), where assignments accept any instance
                let mut refused = None;
                let strict_ok = match (&v, &ty.kind) {
                    (Value::Schema(inst), ast::TypeKind::Named(id)) => {
                        let tctx = Ctx {
                            schema: None,
                            locals: None,
                            in_lambda: false,
                            ..ctx.clone()
                        };
                        match self
                            .eval_identifier(&tctx, id)
                            .ok()
                            .as_ref()
                            .and_then(super::schema::as_schema_type)
                        {
                            Some(st) => {
                                let ok = super::schema::is_exact_instance(inst, &st);
                                if !ok {
                                    refused = Some((st, inst.attrs.clone()));
                                }
                                ok
                            }
                            None => true,
                        }
                    }
                    _ => true,
                };
                let conv = if strict_ok {
                    self.convert_type(ctx, v, ty, e.span)
                } else {
                    Err(EvalError::new(ErrKind::Type, String::new(), Some(e.span)))
                };
                conv.map_err(|err| match got {
                    // a schema cast that fails at run time reads like upstream's runtime
                    // check, which explains it as a conversion of the instance's attributes
                    Some(got) if err.kind == ErrKind::Type => {
                        let notes = refused
                            .and_then(|(st, attrs)| self.conversion_notes(&st, &attrs, e.span).ok())
                            .map(|(extra, missing)| [extra, missing].concat())
                            .unwrap_or_default();
                        let mut msg = format!("expect {}, got {got}", super::types::type_str(ty));
                        if !notes.is_empty() {
                            msg.push_str(". For details:\n");
                            msg.push_str(&notes.join("\n"));
                        }
                        EvalError::new(ErrKind::Evaluation, msg, err.span)
                    }
                    _ => err,
                })
            }
            ExprKind::Missing => Err(EvalError::new(
                ErrKind::Compile,
                "invalid syntax",
                Some(e.span),
            )),
        }
    }

    /// `a | b` (see `union.rs` and `schema/merge.rs` for what each pair of kinds does).
    fn bit_or(&self, a: Value, b: Value, span: Span) -> EvalResult<Value> {
        if let (Value::Dict(_), Value::Dict(_)) | (Value::List(_), Value::List(_)) = (&a, &b) {
            return self.union_checked(a, &b, span);
        }
        // `schema | dict` keeps the schema type and re-checks it; conflicts are
        // found against the instance's values, as upstream merges into them
        if let (Value::Schema(sa), Value::Schema(sb)) = (&a, &b) {
            value::check_union(&a, &b, 0).map_err(|x| self.rt(x, span))?;
            if let Some(v) = self.union_instances(sa, sb, span)? {
                // the merge may have cleared a required attribute
                self.check_required_at_top(&v)?;
                return Ok(v);
            }
        }
        // `dict | instance`: the instance made again from both
        if let (Value::Dict(_), Value::Schema(_)) = (&a, &b) {
            let rb = |i: &Value, x: &Value| match x {
                Value::None => self.rebuild_merged(i, x, None, span),
                _ => self.rebuild_nested(i, x, span),
            };
            return value::union_dict_instance(a, &b, &rb).map_err(|x: EvalError| x.or_span(span));
        }
        if let (Value::Schema(_), true) = (&a, b.is_config()) {
            value::check_union(&a, &b, 0).map_err(|x| self.rt(x, span))?;
            if let Some(v) = self.rebuild_merged(&a, &b, None, span)? {
                return Ok(super::schema::keys_as_overrides(v));
            }
            let u = self.union_checked(a, &b, span)?;
            // the merge may have cleared a required attribute
            self.check_required_at_top(&u)?;
            return Ok(u);
        }
        self.binop(ast::BinOp::BitOr, &a, &b, span)
    }

    pub fn eval_identifier(&self, ctx: &Ctx, id: &ast::Identifier) -> EvalResult<Value> {
        let mut v = self.lookup(ctx, id.names[0].sym, id.names[0].span)?;
        for n in &id.names[1..] {
            v = self.select(ctx, &v, n.sym.as_str(), false, n.span)?;
        }
        Ok(v)
    }

    pub fn eval_args(&self, ctx: &Ctx, a: &'static ast::CallArgs) -> EvalResult<Args> {
        let mut pos = Vec::with_capacity(a.args.len());
        for x in &a.args {
            if let ExprKind::Starred(inner) = &x.kind {
                let v = self.eval(ctx, inner)?;
                pos.extend(v.iter_items().map_err(|e| self.rt(e, x.span))?);
            } else {
                pos.push(self.eval(ctx, x)?);
            }
        }
        let mut kw = Vec::with_capacity(a.keywords.len());
        for k in &a.keywords {
            kw.push((sym_str(k.name.sym), self.eval(ctx, &k.value)?));
        }
        Ok((pos, kw))
    }

    fn eval_list_item(&self, ctx: &Ctx, it: &'static Expr, out: &mut Vec<Value>) -> EvalResult<()> {
        match &it.kind {
            ExprKind::Starred(x) => {
                let v = self.eval(ctx, x)?;
                match v {
                    Value::None | Value::Undefined => {}
                    Value::List(_) | Value::Dict(_) | Value::Schema(_) => {
                        out.extend(v.iter_items().map_err(|e| self.rt(e, it.span))?)
                    }
                    // (a statically known wrong type is the checker's error)
                    _ => {
                        return Err(unpack_error(&v, it.span));
                    }
                }
            }
            ExprKind::ListIf(li) => {
                let body = if self.eval(ctx, &li.cond)?.truthy() {
                    &li.body
                } else {
                    &li.orelse
                };
                for b in body {
                    self.eval_list_item(ctx, b, out)?;
                }
            }
            _ => out.push(self.eval(ctx, it)?),
        }
        Ok(())
    }

    /// `v.name`.
    pub fn select(
        &self,
        ctx: &Ctx,
        v: &Value,
        name: &str,
        optional: bool,
        span: Span,
    ) -> EvalResult<Value> {
        // `?.` guards a falsy receiver, as upstream's (None, empty values, 0...)
        if optional && !v.truthy() {
            return Ok(Value::None);
        }
        match v {
            Value::Dict(d) => Ok(d.get(name).cloned().unwrap_or(Value::Undefined)),
            Value::Schema(s) => match s.attrs.get(name) {
                Some(x) => Ok(x.clone()),
                // an attribute the schema does not declare is an error (upstream's runtime
                // check; its resolver reports what it can see statically)
                None if !super::schema::declares(s, name) => Err(EvalError::new(
                    ErrKind::Evaluation,
                    format!("schema '{}' attribute '{name}' not found", s.name),
                    Some(span),
                )),
                None => Ok(Value::Undefined),
            },
            Value::Str(_) => match crate::builtins::str_method(v, name) {
                Some(m) => Ok(m),
                None => Err(EvalError::new(
                    ErrKind::Evaluation,
                    format!("str object attr '{name}' not found"),
                    Some(span),
                )),
            },
            Value::Func(f) => match &**f {
                Func::User { data, .. } => {
                    if let Some(m) = data.downcast_ref::<ModuleRef>() {
                        return match m {
                            ModuleRef::Pkg(p) => {
                                match self.get_global(p, crate::ast::Symbol::intern(name), false)? {
                                    Some(x) => Ok(x),
                                    None => Err(EvalError::new(
                                        ErrKind::Type,
                                        format!(
                                            "attribute '{name}' not found in 'module '{}''",
                                            p.path
                                        ),
                                        Some(span),
                                    )),
                                }
                            }
                            ModuleRef::System(m) => crate::builtins::system_member(m, name)
                                .ok_or_else(|| {
                                    EvalError::new(
                                        ErrKind::Type,
                                        format!("attribute '{name}' not found in 'module '{m}''"),
                                        Some(span),
                                    )
                                }),
                            ModuleRef::Plugin(p) => Ok(Value::Func(Rc::new(Func::User {
                                name: Str::from(format!("{p}.{name}")),
                                data: Rc::new(PluginFn {
                                    module: p.clone(),
                                    func: name.to_string(),
                                }),
                                is_type: false,
                            }))),
                        };
                    }
                    if let Some(st) = data.downcast_ref::<super::SchemaType>() {
                        // schema type attributes: `Schema.instances()` etc.
                        if name == "instances" {
                            // slots of instances still being made, or that failed, are
                            // Undefined
                            let insts: Vec<(Str, Value)> = st
                                .instances
                                .borrow()
                                .iter()
                                .filter(|(_, v)| !v.is_undefined())
                                .cloned()
                                .collect();
                            return Ok(Value::native_bound(insts));
                        }
                    }
                    let _ = ctx;
                    Err(func_attr_error(name, span))
                }
                _ => Err(func_attr_error(name, span)),
            },
            // upstream's runtime words
            _ => Err(EvalError::new(
                ErrKind::Evaluation,
                format!(
                    "invalid value '{}' to load attribute '{name}'",
                    v.type_name()
                ),
                Some(span),
            )),
        }
    }

    pub fn subscript(&self, v: &Value, i: &Value, optional: bool, span: Span) -> EvalResult<Value> {
        match (v, i) {
            (Value::None | Value::Undefined, _) if optional => Ok(Value::None),
            (Value::List(l), _) => {
                let Value::Int(idx) = *i else {
                    return Err(not_subscriptable(v, i, span));
                };
                Ok(l[checked_index("list", l.len(), idx, span)?].clone())
            }
            // a missing key is Undefined, also for `?[` (which only guards the receiver)
            (Value::Dict(_) | Value::Schema(_), Value::Str(k)) => Ok(v
                .as_dict()
                .unwrap()
                .get(k)
                .cloned()
                .unwrap_or(Value::Undefined)),
            (Value::Dict(_) | Value::Schema(_), _) => Ok(v
                .as_dict()
                .unwrap()
                .get(&value::to_str(i))
                .cloned()
                .unwrap_or(Value::Undefined)),
            (Value::Str(s), _) => {
                let Value::Int(idx) = *i else {
                    return Err(not_subscriptable(v, i, span));
                };
                let chars: Vec<char> = s.chars().collect();
                // upstream bounds a non-negative index by the length in bytes and then finds
                // no character past the last one
                let short = i64::from(idx as i32);
                if short >= chars.len() as i64 && short < s.len() as i64 {
                    return Err(EvalError::new(
                        ErrKind::Evaluation,
                        "called `Option::unwrap()` on a `None` value",
                        Some(span),
                    ));
                }
                let j = checked_index("string", chars.len(), idx, span)?;
                Ok(Value::from(chars[j].to_string()))
            }
            _ => Err(not_subscriptable(v, i, span)),
        }
    }
}

/// The shared string of an identifier: every dict key written as a name reuses one
/// allocation (keys repeat across thousands of configs).
pub(crate) fn sym_str(s: crate::ast::Symbol) -> Str {
    thread_local! {
        static KEYS: std::cell::RefCell<Vec<Option<Str>>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    KEYS.with(|k| {
        let mut k = k.borrow_mut();
        let i = s.as_u32() as usize;
        if k.len() <= i {
            k.resize(i + 1, None);
        }
        k[i].get_or_insert_with(|| Str::from(s.as_str())).clone()
    })
}

/// Evaluated call arguments: positional and keyword.
pub type Args = (Vec<Value>, Vec<(Str, Value)>);

/// A zero-argument function returning a fixed value (`Schema.instances()`).
pub struct Bound(pub Vec<(Str, Value)>);

impl Value {
    fn native_bound(v: Vec<(Str, Value)>) -> Value {
        Value::Func(Rc::new(Func::User {
            name: Str::from("instances"),
            data: Rc::new(Bound(v)),
            is_type: false,
        }))
    }
}

impl EvalError {
    pub fn at(self, span: Span) -> Self {
        if self.span.is_none() {
            EvalError {
                span: Some(span),
                ..self
            }
        } else {
            self
        }
    }
}

/// `idx` (negative from the end) as a position in a `what` of `len` items, or upstream's words
/// for an index out of range: a negative one is reported by the Rust runtime beneath it.
/// Upstream's runtime takes the index as 32 bits (`"ab"[4294967297]` is `"b"`) and names the
/// written index when past the end, the 32-bit one when before the start.
fn checked_index(what: &str, len: usize, idx: i64, span: Span) -> EvalResult<usize> {
    let n = len as i64;
    let short = i64::from(idx as i32);
    let j = if short < 0 { n + short } else { short };
    if j < 0 || j >= n {
        let msg = if short < 0 {
            format!("index out of bounds: the len is {n} but the index is {short}")
        } else {
            format!("{what} index out of range: {idx}")
        };
        return Err(EvalError::new(ErrKind::Evaluation, msg, Some(span)));
    }
    Ok(j as usize)
}

/// Upstream's run-time error for an attribute of a function value (a lambda, a schema type):
/// its runtime words them as a schema type's.
fn func_attr_error(name: &str, span: Span) -> EvalError {
    EvalError::new(
        ErrKind::Evaluation,
        format!("schema object attr '{name}' not found"),
        Some(span),
    )
}

/// Upstream's run-time error for `v[i]` where `v` cannot be indexed by `i` (a list or string by
/// anything but an int, or a value that is not a list, string, dict or schema).
fn not_subscriptable(v: &Value, i: &Value, span: Span) -> EvalError {
    EvalError::new(
        ErrKind::Evaluation,
        format!(
            "'{}' object is not subscriptable with '{}'",
            v.type_name(),
            i.type_name()
        ),
        Some(span),
    )
}

/// Upstream's run-time error for `*v` or `**v` of a value that is no list, dict or schema
/// instance (a statically known wrong type is the checker's error).
pub(super) fn unpack_error(v: &Value, span: Span) -> EvalError {
    EvalError::new(
        ErrKind::Evaluation,
        format!(
            "only list, dict and schema object can be used with unpack operators * and **, got {}",
            value::to_str(v)
        ),
        Some(span),
    )
}
