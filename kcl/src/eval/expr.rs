//! Expression evaluation: one `eval` per expression kind, with configs, comprehensions,
//! quantifiers and calls.
//!
//! One file because it is the evaluator's expression half, a single recursive walk; schemas
//! (`schema.rs`) and statements (`mod.rs`) are apart.

use std::rc::Rc;

use super::{Closure, Ctx, EvalError, EvalResult, Evaluator, ModuleRef, Scope};
use crate::ast::{self, Expr, ExprKind, Span};
use crate::value::{self, ConfigOp, Dict, ErrKind, Func, RtError, Str, Value};

fn conv_bin(op: ast::BinOp) -> Option<value::BinOp> {
    use ast::BinOp as A;
    use value::BinOp as B;
    Some(match op {
        A::Add => B::Add,
        A::Sub => B::Sub,
        A::Mul => B::Mul,
        A::Div => B::Div,
        A::Mod => B::Mod,
        A::Pow => B::Pow,
        A::FloorDiv => B::FloorDiv,
        A::Shl => B::LShift,
        A::Shr => B::RShift,
        A::BitAnd => B::BitAnd,
        A::BitOr => B::BitOr,
        A::BitXor => B::BitXor,
        A::And | A::Or => return None,
    })
}

fn conv_cmp(op: ast::CmpOp) -> value::CmpOp {
    use ast::CmpOp as A;
    use value::CmpOp as B;
    match op {
        A::Eq => B::Eq,
        A::NotEq => B::NotEq,
        A::Lt => B::Lt,
        A::LtE => B::LtE,
        A::Gt => B::Gt,
        A::GtE => B::GtE,
        A::Is => B::Is,
        A::IsNot => B::IsNot,
        A::In => B::In,
        A::NotIn => B::NotIn,
    }
}

pub(crate) fn conv_op(op: ast::ConfigOp) -> ConfigOp {
    match op {
        ast::ConfigOp::Union => ConfigOp::Union,
        ast::ConfigOp::Override => ConfigOp::Override,
        ast::ConfigOp::Insert => ConfigOp::Insert,
    }
}

impl Evaluator {
    pub fn binop(&self, op: ast::BinOp, a: &Value, b: &Value, span: Span) -> EvalResult<Value> {
        match conv_bin(op) {
            Some(o) => {
                let r = value::binary(o, a, b).map_err(|e| self.rt(e, span))?;
                if let (true, Value::Int(i)) = (self.opts.strict_range_check, &r)
                    && i32::try_from(*i).is_err()
                {
                    return Err(EvalError::new(
                        ErrKind::Evaluation,
                        format!("{i}: A 32 bit integer overflow"),
                        Some(span),
                    ));
                }
                Ok(r)
            }
            None => Ok(match op {
                ast::BinOp::And => {
                    if a.truthy() {
                        b.clone()
                    } else {
                        a.clone()
                    }
                }
                _ => {
                    if a.truthy() {
                        a.clone()
                    } else {
                        b.clone()
                    }
                }
            }),
        }
    }

    /// Evaluate an expression. Deeply nested programs grow the stack on the heap instead of
    /// overflowing it; runaway recursion stops at the call-depth limit with an error.
    pub fn eval(&self, ctx: &Ctx, e: &'static Expr) -> EvalResult<Value> {
        stacker::maybe_grow(128 * 1024, 2 * 1024 * 1024, || self.eval_inner(ctx, e))
    }

    fn eval_inner(&self, ctx: &Ctx, e: &'static Expr) -> EvalResult<Value> {
        match &e.kind {
            ExprKind::Ident(s) => self.lookup(ctx, *s, e.span),
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
                    if let (Value::Dict(_), Value::Dict(_)) | (Value::List(_), Value::List(_)) =
                        (&a, &b)
                    {
                        return self.union_checked(a, &b, e.span);
                    }
                    // `schema | dict` keeps the schema type and re-checks it; conflicts are
                    // found against the instance's values, as upstream merges into them
                    if let (Value::Schema(sa), Value::Schema(sb)) = (&a, &b) {
                        value::check_union(&a, &b, 0).map_err(|x| self.rt(x, e.span))?;
                        if let Some(v) = self.union_instances(sa, sb, e.span)? {
                            // the merge may have cleared a required attribute
                            self.check_required_at_top(&v)?;
                            return Ok(v);
                        }
                    }
                    if let (Value::Schema(_), true) = (&a, b.is_config()) {
                        value::check_union(&a, &b, 0).map_err(|x| self.rt(x, e.span))?;
                        if let Some(v) = self.rebuild_merged(&a, &b, None, e.span)? {
                            return Ok(v);
                        }
                        let u = self.union_checked(a, &b, e.span)?;
                        // the merge may have cleared a required attribute
                        self.check_required_at_top(&u)?;
                        return Ok(u);
                    }
                }
                self.binop(*op, &a, &b, e.span)
            }
            ExprKind::Compare(c) => {
                let mut a = self.eval(ctx, &c.left)?;
                for (op, r) in &c.ops {
                    let b = self.eval(ctx, r)?;
                    if !value::compare(conv_cmp(*op), &a, &b).map_err(|x| self.rt(x, e.span))? {
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
                let v = self.eval(ctx, &x.value)?;
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
                let unified = match &func.kind {
                    ExprKind::Ident(n) => self.unified_schema(ctx, *n)?,
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
                let scope = Scope::new_loop(ctx.locals.clone());
                let c2 = Ctx {
                    locals: Some(scope),
                    ..ctx.clone()
                };
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
                let scope = Scope::new_loop(ctx.locals.clone());
                let c2 = Ctx {
                    locals: Some(scope),
                    ..ctx.clone()
                };
                self.comp(&c2, &c.clauses, 0, &mut |this, cx| {
                    let k = match this.eval(cx, &c.key)? {
                        Value::Str(s) => s,
                        // upstream's key of anything but a string (typed any, so the
                        // checker let it through) is empty
                        _ => Str::from(""),
                    };
                    let v = this.eval(cx, &c.value)?;
                    value::ops_merge_entry(&mut d, &k, &v, conv_op(c.op), None, true)
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
                    [n] => self.unified_schema(ctx, n.sym)?,
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
                    self.instantiate_value(ctx, &ty, &pos, &kw, cfg, e.span, s.config.span)
                })();
                self.schema_exprs.set(self.schema_exprs.get() - 1);
                r
            }
            ExprKind::Lambda(l) => Ok(Value::Func(Rc::new(Func::User {
                name: Str::from("lambda"),
                data: Rc::new(Closure {
                    lambda: l,
                    ctx: ctx.clone(),
                }),
                is_type: false,
            }))),
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
                // `as` is upstream's strict check: an instance must be of that schema (or a
                // subschema), where assignments accept any instance
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
                            Some(st) => super::schema::is_instance_of(self, inst, &st),
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
                    // a schema cast that fails at run time reads like upstream's runtime check
                    Some(got) if err.kind == ErrKind::Type => EvalError::new(
                        ErrKind::Evaluation,
                        format!(
                            "expect {}, got {got}. For details:\n{got} is not that schema or one of its subschemas",
                            super::types::type_str(ty)
                        ),
                        err.span,
                    ),
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
                    _ => out.extend(v.iter_items().map_err(|e| self.rt(e, it.span))?),
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

    /// A config key expression: identifiers are their own name.
    pub fn eval_key(&self, ctx: &Ctx, k: &'static Expr) -> EvalResult<Str> {
        match &k.kind {
            ExprKind::Ident(s) => match ctx.locals.as_ref().and_then(|l| l.loop_var(*s)) {
                Some(Value::Str(v)) => Ok(v),
                Some(other) => Err(EvalError::new(
                    ErrKind::Attribute,
                    format!(
                        "A attribute must be string type, got '{}'",
                        other.type_plain_nested()
                    ),
                    Some(k.span),
                )),
                None => Ok(sym_str(*s)),
            },
            ExprKind::Str(s) => Ok(Str::from(&**s)),
            _ => {
                let v = self.eval(ctx, k)?;
                let key = match v {
                    Value::Str(s) => s,
                    other => Str::from(value::to_str(&other)),
                };
                if matches!(k.kind, ExprKind::JoinedStr(_)) {
                    self.dynamic_keys.borrow_mut().insert(key.clone());
                }
                Ok(key)
            }
        }
    }

    pub fn eval_entries(
        &self,
        ctx: &Ctx,
        entries: &'static [ast::ConfigEntry],
        d: &mut Dict,
    ) -> EvalResult<()> {
        // keys written earlier in a config are names for the entries after them
        let scope = Scope::new(ctx.locals.clone());
        let c2 = Ctx {
            locals: Some(scope.clone()),
            ..ctx.clone()
        };
        self.eval_entries_in(&c2, &scope, entries, d)?;
        if let Some(ops) = &mut d.ops {
            let mut cache = self.config_ops.borrow_mut();
            let key = entries.as_ptr() as usize;
            match cache.get(&key) {
                Some(shared) if **shared == **ops => *ops = shared.clone(),
                _ => {
                    if let Some(fresh) = Rc::get_mut(ops) {
                        fresh.shrink_to_fit();
                    }
                    cache.insert(key, ops.clone());
                }
            }
        }
        Ok(())
    }

    fn eval_entries_in(
        &self,
        ctx: &Ctx,
        scope: &Rc<Scope>,
        entries: &'static [ast::ConfigEntry],
        d: &mut Dict,
    ) -> EvalResult<()> {
        for en in entries {
            match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, op, value } => {
                    let op = conv_op(*op);
                    // `a.b.c: v` nests; `a[0] = v` updates a list element
                    let mut path: Vec<Str> = Vec::new();
                    let mut index: Option<i64> = None;
                    let mut k = key;
                    loop {
                        match &k.kind {
                            ExprKind::Selector(x) if !x.optional => {
                                path.push(sym_str(x.attr.sym));
                                k = &x.value;
                            }
                            ExprKind::Subscript {
                                value: inner,
                                index: idx,
                                optional: false,
                            } if path.is_empty()
                                && index.is_none()
                                && matches!(inner.kind, ExprKind::Ident(_))
                                && matches!(
                                    idx.kind,
                                    ExprKind::Int(_) | ExprKind::Unary { .. }
                                ) =>
                            {
                                let i = self.eval(ctx, idx)?;
                                index = Some(i.as_int().ok_or_else(|| {
                                    EvalError::new(
                                        ErrKind::Type,
                                        "list index must be an integer",
                                        Some(idx.span),
                                    )
                                })?);
                                k = inner;
                            }
                            _ => break,
                        }
                    }
                    path.push(self.eval_key(ctx, k)?);
                    path.reverse();
                    let k0 = path[0].clone();
                    let v = self.eval(ctx, value)?;
                    // build nested dicts from the inside out
                    let mut v = v;
                    let mut op_inner = op;
                    for seg in path[1..].iter().rev() {
                        let mut nd = Dict::new();
                        nd.map.insert(seg.clone(), v);
                        nd.set_op(seg.clone(), op_inner, None);
                        v = Value::from(nd);
                        op_inner = ConfigOp::Union;
                    }
                    let op0 = if path.len() > 1 { ConfigOp::Union } else { op };
                    let idx0 = if path.len() > 1 { None } else { index };
                    // an instance merged into an instance (`r: R {...}` twice) is rebuilt; a
                    // dict merged into an instance here only sets its attributes (upstream:
                    // they do not become config keys of it)
                    let span = en.span();
                    let rb = |i: &Value, x: &Value| match x {
                        Value::Schema(_) => self.rebuild_nested(i, x, span),
                        _ => Ok(None),
                    };
                    value::merge_entry_with(d, &k0, &v, op0, idx0, true, &rb)
                        .map_err(|x| x.or_span(span))?;
                    // the last entry's operator is the key's (upstream: `a = S {}` then
                    // `a: {...}` leaves `a` a union, so a schema merges it with its default)
                    d.set_op(k0.clone(), op0, idx0);
                    if let Some(nv) = d.map.get(&k0) {
                        scope
                            .vars
                            .borrow_mut()
                            .insert(crate::ast::Symbol::intern(&k0), nv.clone());
                    }
                }
                ast::ConfigEntryKind::Unpack { value: x, .. } => {
                    let v = self.eval(ctx, x)?;
                    match v.as_dict() {
                        Some(src) => {
                            for (k, val) in &src.map {
                                let (op, idx) = src.op_of(k);
                                value::ops_merge_entry(d, k, val, op, idx, true)
                                    .map_err(|x| self.rt(x, en.span()))?;
                            }
                        }
                        None if v.is_none_or_undefined() => {}
                        None => {
                            return Err(EvalError::new(
                                ErrKind::Type,
                                format!(
                                    "only dict and schema can be used ** unpack, got '{}'",
                                    v.type_name()
                                ),
                                Some(x.span),
                            ));
                        }
                    }
                }
                ast::ConfigEntryKind::If(ci) => {
                    let body = if self.eval(ctx, &ci.cond)?.truthy() {
                        &ci.body
                    } else {
                        &ci.orelse
                    };
                    self.eval_entries_in(ctx, scope, body, d)?;
                }
            }
        }
        Ok(())
    }

    fn comp(
        &self,
        ctx: &Ctx,
        clauses: &'static [ast::CompClause],
        i: usize,
        f: &mut dyn FnMut(&Self, &Ctx) -> EvalResult<()>,
    ) -> EvalResult<()> {
        if i == clauses.len() {
            return f(self, ctx);
        }
        let c = &clauses[i];
        if c.targets.len() > 2 {
            return Err(EvalError::new(
                ErrKind::Compile,
                format!(
                    "the number of loop variables is {}, which can only be 1 or 2",
                    c.targets.len()
                ),
                Some(c.targets[0].span),
            ));
        }
        if let Some(t) = c.targets.iter().find(|t| t.names.len() > 1) {
            return Err(EvalError::new(
                ErrKind::Compile,
                "loop variables can only be ordinary identifiers",
                Some(t.span),
            ));
        }
        let scope = ctx.locals.as_ref().unwrap();
        let vars: Vec<crate::ast::Symbol> = c.targets.iter().map(|t| t.names[0].sym).collect();
        // `for i in range(n)` counts without building the list
        let (it, pairs): (Value, Box<dyn Iterator<Item = (Value, Value)>>) =
            match self.range_call(ctx, &c.iter)? {
                Some((start, stop, step)) => {
                    let n = range_len(start, stop, step);
                    let items = (0..n)
                        .map(move |k| (Value::Int(k as i64), Value::Int(start + k as i64 * step)));
                    (Value::None, Box::new(items))
                }
                None => {
                    let it = self.eval(ctx, &c.iter)?;
                    let pairs = iter_pairs(&it).map_err(|e| self.rt(e, c.iter.span))?;
                    (it, pairs)
                }
            };
        // one unfiltered clause: the result has exactly as many items (see `comp_len`)
        self.comp_len
            .set(if clauses.len() == 1 && c.ifs.is_empty() {
                pairs.size_hint().1.unwrap_or(0)
            } else {
                0
            });
        for (a, b) in pairs {
            crate::limits::tick().map_err(|x| self.rt(x, c.iter.span))?;
            {
                let mut vs = scope.vars.borrow_mut();
                if vars.len() >= 2 {
                    vs.insert(vars[0], a);
                    vs.insert(vars[1], b);
                } else {
                    vs.insert(vars[0], single(&it, a, b));
                }
            }
            let mut ok = true;
            for cond in &c.ifs {
                if !self.eval(ctx, cond)?.truthy() {
                    ok = false;
                    break;
                }
            }
            if ok {
                self.comp(ctx, clauses, i + 1, f)?;
            }
        }
        Ok(())
    }

    /// `sum([x for ...])` and `len(map x in xs {...})` with the builtins: the same result
    /// without building the list first (these are where large temporary lists come from).
    fn fused_call(
        &self,
        ctx: &Ctx,
        f: &Value,
        args: &'static ast::CallArgs,
        span: Span,
    ) -> EvalResult<Option<Value>> {
        let Value::Func(ff) = f else {
            return Ok(None);
        };
        let Func::Native { name, .. } = &**ff else {
            return Ok(None);
        };
        let [arg] = args.args.as_slice() else {
            return Ok(None);
        };
        if !args.keywords.is_empty() {
            return Ok(None);
        }
        match (*name, &arg.kind) {
            ("sum", ExprKind::ListComp(c)) => {
                let scope = Scope::new_loop(ctx.locals.clone());
                let c2 = Ctx {
                    locals: Some(scope),
                    ..ctx.clone()
                };
                let mut acc = Value::Int(0);
                self.comp(&c2, &c.clauses, 0, &mut |this, cx| {
                    let v = this.eval(cx, &c.elt)?;
                    acc =
                        value::binary(value::BinOp::Add, &acc, &v).map_err(|x| this.rt(x, span))?;
                    Ok(())
                })?;
                Ok(Some(acc))
            }
            ("len", ExprKind::Quant(q)) if q.op == ast::QuantOp::Map => {
                self.quant(ctx, q, arg.span, true).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// `(start, stop, step)` when `e` is a call of the builtin `range` (not a shadowing name).
    fn range_call(&self, ctx: &Ctx, e: &'static Expr) -> EvalResult<Option<(i64, i64, i64)>> {
        let ExprKind::Call { func, args } = &e.kind else {
            return Ok(None);
        };
        let ExprKind::Ident(name) = &func.kind else {
            return Ok(None);
        };
        if name.as_str() != "range" || !args.keywords.is_empty() {
            return Ok(None);
        }
        match self.lookup(ctx, *name, func.span)? {
            Value::Func(f) if matches!(&*f, Func::Native { name: "range", .. }) => {}
            _ => return Ok(None),
        }
        let mut ints = Vec::with_capacity(3);
        for a in &args.args {
            match self.eval(ctx, a)? {
                Value::Int(i) => ints.push(i),
                // anything unusual goes through the builtin for its error
                _ => return Ok(None),
            }
        }
        Ok(match ints[..] {
            [stop] => Some((0, stop, 1)),
            [start, stop] => Some((start, stop, 1)),
            [start, stop, step] if step != 0 => Some((start, stop, step)),
            _ => None,
        })
    }

    /// `count_only`: a `map` returns how many items it would produce (for `len(map ...)`).
    fn quant(
        &self,
        ctx: &Ctx,
        q: &'static ast::QuantExpr,
        span: Span,
        count_only: bool,
    ) -> EvalResult<Value> {
        let it = self.eval(ctx, &q.target)?;
        let scope = Scope::new_loop(ctx.locals.clone());
        let c2 = Ctx {
            locals: Some(scope.clone()),
            ..ctx.clone()
        };
        let pairs = iter_pairs(&it).map_err(|e| self.rt(e, span))?;
        let mut list_out = Vec::new();
        if q.op == ast::QuantOp::Map && q.if_cond.is_none() && !count_only {
            // exactly one item per element: no growth slack in a long-lived list
            list_out.reserve_exact(pairs.size_hint().1.unwrap_or(0));
        }
        let mut count: i64 = 0;
        // upstream filters a dict in place, swap-removing each rejected key (the last entry
        // takes its place), so the order of what stays is upstream's
        let mut removed: Vec<value::Str> = Vec::new();
        // upstream filters a string in place: unchanged it is the string, else an error
        let mut str_removed = false;
        for (a, b) in pairs {
            let orig_a = a.clone();
            let orig_b = b.clone();
            {
                let mut vs = scope.vars.borrow_mut();
                if q.vars.len() >= 2 {
                    vs.insert(q.vars[0].sym, a);
                    vs.insert(q.vars[1].sym, b);
                } else {
                    vs.insert(q.vars[0].sym, single(&it, a, b));
                }
            }
            if let Some(c) = &q.if_cond
                && !self.eval(&c2, c)?.truthy()
            {
                str_removed = true;
                continue;
            }
            let t = self.eval(&c2, &q.test)?;
            if q.op == ast::QuantOp::Filter && !t.truthy() {
                str_removed = true;
            }
            match q.op {
                ast::QuantOp::All => {
                    if !t.truthy() {
                        return Ok(Value::Bool(false));
                    }
                }
                ast::QuantOp::Any => {
                    if t.truthy() {
                        return Ok(Value::Bool(true));
                    }
                }
                ast::QuantOp::Map if count_only => count += 1,
                ast::QuantOp::Map => list_out.push(t),
                ast::QuantOp::Filter => {
                    if it.is_config() {
                        if !t.truthy()
                            && let Value::Str(k) = &orig_a
                        {
                            removed.push(k.clone());
                        }
                    } else if t.truthy() {
                        {
                            list_out.push(single(&it, orig_a, orig_b));
                        }
                    }
                }
            }
        }
        Ok(match q.op {
            ast::QuantOp::All => Value::Bool(true),
            ast::QuantOp::Any => Value::Bool(false),
            ast::QuantOp::Map if count_only => Value::Int(count),
            ast::QuantOp::Map => Value::from(list_out),
            // upstream cannot remove from a schema instance either
            ast::QuantOp::Filter
                if matches!(it, Value::Str(_))
                    || (matches!(it, Value::Schema(_)) && str_removed) =>
            {
                if str_removed {
                    return Err(EvalError::new(
                        ErrKind::Evaluation,
                        "only list, dict and schema can be removed item".to_string(),
                        Some(span),
                    ));
                }
                it.clone()
            }
            ast::QuantOp::Filter => {
                let mut dict_out = Dict::new();
                if it.is_config() {
                    let src = match &it {
                        Value::Dict(d) => Some(&d.map),
                        Value::Schema(s) => Some(&s.attrs.map),
                        _ => None,
                    };
                    if let Some(m) = src {
                        dict_out.map = m.clone();
                        // a dict's kept entries keep their operators (`d | filter ...` with
                        // `name = v` kept overrides `d`'s name, as upstream)
                        if let Value::Dict(d) = &it {
                            dict_out.ops = d.ops.clone();
                        }
                        for k in &removed {
                            dict_out.map.swap_remove(k);
                            dict_out.set_op(k.clone(), value::ConfigOp::Union, None);
                        }
                    }
                }
                if let Value::Schema(s) = &it {
                    Value::Schema(Rc::new(value::SchemaInst {
                        attrs: dict_out,
                        ..(**s).clone()
                    }))
                } else if it.is_config() {
                    Value::from(dict_out)
                } else {
                    Value::from(list_out)
                }
            }
        })
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
                let n = l.len() as i64;
                let j = if idx < 0 { n + idx } else { idx };
                if j < 0 || j >= n {
                    return Err(EvalError::new(
                        ErrKind::Evaluation,
                        index_error("list", n, idx),
                        Some(span),
                    ));
                }
                Ok(l[j as usize].clone())
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
                let n = chars.len() as i64;
                let j = if idx < 0 { n + idx } else { idx };
                if j < 0 || j >= n {
                    return Err(EvalError::new(
                        ErrKind::Evaluation,
                        index_error("string", n, idx),
                        Some(span),
                    ));
                }
                Ok(Value::from(chars[j as usize].to_string()))
            }
            _ => Err(not_subscriptable(v, i, span)),
        }
    }

    /// Call any callable value.
    pub fn call_value(
        &self,
        ctx: &Ctx,
        f: &Value,
        args: &[Value],
        kwargs: &[(Str, Value)],
        span: Span,
    ) -> EvalResult<Value> {
        crate::limits::tick().map_err(|x| self.rt(x, span))?;
        // upstream's run time calls anything: a value that is no function gives Undefined
        // (its resolver reports what it can see statically)
        let Value::Func(func) = f else {
            return Ok(Value::Undefined);
        };
        self.enter(span)?;
        let r = self.call_func(ctx, func, args, kwargs, span);
        self.leave();
        r
    }

    fn call_func(
        &self,
        ctx: &Ctx,
        func: &Rc<Func>,
        args: &[Value],
        kwargs: &[(Str, Value)],
        span: Span,
    ) -> EvalResult<Value> {
        match &**func {
            Func::Native { f, .. } => {
                let mut host = HostCtx {
                    ev: self,
                    ctx: ctx.clone(),
                    span,
                };
                f(&mut host, args, kwargs).map_err(|e| self.rt(e, span))
            }
            Func::Method { name, recv } => {
                let mut host = HostCtx {
                    ev: self,
                    ctx: ctx.clone(),
                    span,
                };
                crate::builtins::call_method(&mut host, name, recv, args, kwargs)
                    .map_err(|e| self.rt(e, span))
            }
            Func::User { data, .. } => {
                if let Some(c) = data.downcast_ref::<Closure>() {
                    return self.call_closure(c, args, kwargs, span);
                }
                if data.downcast_ref::<super::SchemaType>().is_some() {
                    let v = Value::Func(func.clone());
                    self.by_call.set(true);
                    return self.instantiate_value(
                        ctx,
                        &v,
                        args,
                        kwargs,
                        Value::empty_dict(),
                        span,
                        span,
                    );
                }
                if let Some(p) = data.downcast_ref::<PluginFn>() {
                    let mut host = HostCtx {
                        ev: self,
                        ctx: ctx.clone(),
                        span,
                    };
                    return value::Host::plugin(&mut host, &p.module, &p.func, args, kwargs)
                        .map_err(|e| self.rt(e, span));
                }
                if let Some(b) = data.downcast_ref::<Bound>() {
                    // `S.instances()`: those the main package created; `instances(True)` (or
                    // `full_pkg=True`): all, grouped by package in order of first appearance
                    let full = args
                        .first()
                        .or_else(|| {
                            kwargs
                                .iter()
                                .find(|(k, _)| &**k == "full_pkg")
                                .map(|(_, v)| v)
                        })
                        .is_some_and(|v| v.truthy());
                    let out: Vec<Value> = if full {
                        let mut pkgs: Vec<&Str> = Vec::new();
                        for (p, _) in &b.0 {
                            if !pkgs.contains(&p) {
                                pkgs.push(p);
                            }
                        }
                        pkgs.iter()
                            .flat_map(|p| b.0.iter().filter(move |(q, _)| q == *p))
                            .map(|(_, v)| v.clone())
                            .collect()
                    } else {
                        b.0.iter()
                            .filter(|(p, _)| &**p == "__main__")
                            .map(|(_, v)| v.clone())
                            .collect()
                    };
                    return Ok(Value::from(out));
                }
                Err(EvalError::new(
                    ErrKind::Type,
                    "object is not callable",
                    Some(span),
                ))
            }
        }
    }

    pub fn call_closure(
        &self,
        c: &Closure,
        args: &[Value],
        kwargs: &[(Str, Value)],
        span: Span,
    ) -> EvalResult<Value> {
        let pkg = c.ctx.pkg.clone();
        self.in_pkg(&pkg, || self.call_closure_in(c, args, kwargs, span))
    }

    fn call_closure_in(
        &self,
        c: &Closure,
        args: &[Value],
        kwargs: &[(Str, Value)],
        span: Span,
    ) -> EvalResult<Value> {
        let scope = Scope::new(c.ctx.locals.clone());
        let ctx = Ctx {
            locals: Some(scope.clone()),
            in_lambda: true,
            ..c.ctx.clone()
        };
        let params = &c.lambda.params;
        // Upstream checks argument counts and keyword names only statically (where the callee
        // is known, see types::Checker::lambda_call); at run time extra arguments and unknown
        // keywords are ignored, a missing argument is its default or None, and a keyword
        // argument wins over a positional one.
        for (i, p) in params.iter().enumerate() {
            let v = if let Some((_, v)) = kwargs.iter().find(|(k, _)| &**k == p.name.sym.as_str()) {
                v.clone()
            } else if i < args.len() {
                args[i].clone()
            } else if let Some(d) = &p.default {
                self.eval(&ctx, d)?
            } else {
                Value::None
            };
            let v = match &p.ty {
                Some(t) => self.convert_type(&ctx, v, t, span)?,
                None => v,
            };
            scope.vars.borrow_mut().insert(p.name.sym, v);
        }
        // the value of the last statement: an expression's, an assignment's (the value
        // assigned), else Undefined (an empty body, an assert), as upstream
        let mut last = Value::Undefined;
        for st in &c.lambda.body {
            match self.exec_stmt(&ctx, st)? {
                Some(v) => last = v,
                None if matches!(st.kind, crate::ast::StmtKind::If(_)) => {}
                None => last = Value::Undefined,
            }
        }
        match &c.lambda.ret {
            Some(t) => self.convert_type(&ctx, last, t, span),
            None => Ok(last),
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

/// A plugin function value.
pub struct PluginFn {
    pub module: String,
    pub func: String,
}

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

/// What a single loop variable binds: the key for dicts, the item otherwise.
/// How many items `range(start, stop, step)` yields (`step` is not 0).
fn range_len(start: i64, stop: i64, step: i64) -> usize {
    let (span, step) = if step > 0 {
        (stop as i128 - start as i128, step as i128)
    } else {
        (start as i128 - stop as i128, -(step as i128))
    };
    if span <= 0 {
        0
    } else {
        ((span + step - 1) / step) as usize
    }
}

fn single(container: &Value, a: Value, b: Value) -> Value {
    if container.is_config() { a } else { b }
}

/// Loop pairs: list -> (index, item); dict -> (key, value); str -> (index, char). A single loop
/// variable binds the item for lists and strings and the key for dicts ([`single`]).
fn iter_pairs(v: &Value) -> Result<Box<dyn Iterator<Item = (Value, Value)>>, RtError> {
    Ok(match v {
        // lazily over a shared snapshot: a 200k-item list costs no second copy
        Value::List(l) => {
            let l = l.clone();
            Box::new((0..l.len()).map(move |i| (Value::Int(i as i64), l[i].clone())))
        }
        Value::Dict(_) | Value::Schema(_) => Box::new(
            v.as_dict()
                .unwrap()
                .map
                .iter()
                .map(|(k, x)| (Value::Str(k.clone()), x.clone()))
                .collect::<Vec<_>>()
                .into_iter(),
        ),
        Value::Str(s) => Box::new(
            s.chars()
                .enumerate()
                .map(|(i, c)| (Value::Int(i as i64), Value::from(c.to_string())))
                .collect::<Vec<_>>()
                .into_iter(),
        ),
        // upstream: an evaluation error, not an empty loop
        Value::None | Value::Undefined => {
            return Err(RtError::eval(format!(
                "'{}' object is not iterable",
                v.type_name()
            )));
        }
        other => {
            return Err(RtError::ty(format!(
                "'{}' object is not iterable",
                other.type_name()
            )));
        }
    })
}

/// The bridge builtins use to reach the evaluator.
pub struct HostCtx<'a> {
    pub ev: &'a Evaluator,
    pub ctx: Ctx,
    pub span: Span,
}

impl value::Host for HostCtx<'_> {
    fn option(&mut self, key: &str) -> Option<Value> {
        self.ev
            .opts
            .args
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }
    fn call(
        &mut self,
        f: &Value,
        args: &[Value],
        kwargs: &[(Str, Value)],
    ) -> Result<Value, RtError> {
        let r = self.ev.call_value(&self.ctx, f, args, kwargs, self.span);
        r.map_err(|e| {
            // a failed check reports its own message
            match e
                .notes
                .iter()
                .find_map(|(_, m)| m.strip_prefix("Check failed on the condition: "))
            {
                Some(m) => RtError::new(e.kind, m.to_string()),
                None => RtError::new(e.kind, e.msg),
            }
        })
    }
    fn print(&mut self, text: &str) {
        self.ev.stdout.borrow_mut().push_str(text);
    }
    fn set_output(&mut self, text: String) {
        *self.ev.output_override.borrow_mut() = Some(text);
    }
    fn workdir(&self) -> std::path::PathBuf {
        self.ev.opts.work_dir.clone()
    }
    fn exec_workdir(&self) -> String {
        self.ev.opts.exec_workdir.clone()
    }
    fn current_file(&self) -> String {
        crate::ast::source_map()
            .get(self.ctx.file)
            .map(|f| f.name.to_string())
            .unwrap_or_default()
    }
    fn mod_root(&self) -> std::path::PathBuf {
        self.ev.root.clone()
    }
    fn access(&self) -> std::borrow::Cow<'_, crate::access::Access> {
        std::borrow::Cow::Borrowed(&self.ev.opts.access)
    }
    fn plugin(
        &mut self,
        module: &str,
        func: &str,
        args: &[Value],
        kwargs: &[(Str, Value)],
    ) -> Result<Value, RtError> {
        let Some(h) = &self.ev.opts.plugin else {
            return Err(RtError::eval(format!(
                "the plugin 'kcl_plugin.{module}' is not available (no plugin host configured) when calling '{func}'"
            )));
        };
        let jargs: Vec<serde_json::Value> = args.iter().map(crate::value::json::to_json).collect();
        let mut jk = serde_json::Map::new();
        for (k, v) in kwargs {
            jk.insert(k.to_string(), crate::value::json::to_json(v));
        }
        let r = h
            .call(module, func, &jargs, &jk)
            .map_err(|e| RtError::eval(format!("kcl_plugin.{module}.{func}: {e}")))?;
        Ok(crate::value::json::from_json(&r))
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

/// Upstream's words for an index out of range: a negative one is reported by the Rust
/// runtime beneath it.
fn index_error(what: &str, len: i64, idx: i64) -> String {
    if idx < 0 {
        format!("index out of bounds: the len is {len} but the index is {idx}")
    } else {
        format!("{what} index out of range: {idx}")
    }
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
