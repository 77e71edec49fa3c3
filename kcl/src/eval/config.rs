//! Config literals: keys, and entries with their operators (`:`, `=`, `+=`), `**` unpacking
//! and `if` entries, merged as upstream merges them.

use std::rc::Rc;

use super::expr::{conv_op, sym_str};
use super::{Ctx, EvalError, EvalResult, Evaluator, Scope};
use crate::ast::{self, Expr, ExprKind};
use crate::value::{self, ConfigOp, Dict, ErrKind, Str, Value};

impl Evaluator {
    /// A config key expression: identifiers are their own name.
    pub fn eval_key(&self, ctx: &Ctx, k: &'static Expr) -> EvalResult<Str> {
        match &k.kind {
            // a loop variable is its value; one that is no string is the empty key, as any
            // key value upstream reads as a string (the checker refuses those it can type)
            ExprKind::Ident(s) => match ctx.locals.as_ref().and_then(|l| l.loop_var(*s)) {
                Some(Value::Str(v)) => Ok(v),
                Some(_) => Ok(Str::from("")),
                None => Ok(sym_str(*s)),
            },
            ExprKind::Str(s) => Ok(Str::from(&**s)),
            _ => {
                let v = self.eval(ctx, k)?;
                // upstream reads the key as a string: anything else (an Undefined subscript,
                // an `any`-typed number) is the empty key
                let key = match v {
                    Value::Str(s) => s,
                    _ => Str::from(""),
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
        let scope = Scope::new_keys(ctx.locals.clone());
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
                                && inner.name_path().is_some()
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
                                // (upstream's run time indexes the first name of
                                // `a.b[0]` and drops the others)
                                k = inner;
                                while let ExprKind::Selector(x) = &k.kind {
                                    k = &x.value;
                                }
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
                    self.merge_key(scope, d, &k0, &v, (op0, idx0), en.span())?;
                }
                ast::ConfigEntryKind::Unpack { value: x, .. } => {
                    let v = self.eval(ctx, x)?;
                    match v.as_dict() {
                        Some(src) => {
                            // (keys the checker did not see, when the value's type was not
                            // known to it: a schema refuses an unknown one at run time)
                            let literal = matches!(x.kind, ExprKind::Config(_));
                            for (k, val) in &src.map {
                                if !literal {
                                    self.dynamic_keys.borrow_mut().insert(k.clone());
                                }
                                let (op, idx) = src.op_of_key(k);
                                value::merge_entry(d, k, val, op, idx, true)
                                    .map_err(|x| self.rt(x, en.span()))?;
                            }
                        }
                        None if v.is_none_or_undefined() => {}
                        // (a value of a statically known wrong type is the checker's error)
                        None => {
                            return Err(super::expr::unpack_error(&v, x.span));
                        }
                    }
                }
                ast::ConfigEntryKind::If(ci) => {
                    let body = if self.eval(ctx, &ci.cond)?.truthy() {
                        &ci.body
                    } else {
                        &ci.orelse
                    };
                    // upstream makes the branch's entries a config of their own, then merges
                    // it in: an index entry there (`b[0] = v`) finds no list unless the branch
                    // sets one
                    let mut nd = Dict::new();
                    self.eval_entries_in(ctx, scope, body, &mut nd)?;
                    for (k, v) in &nd.map {
                        self.merge_key(scope, d, k, v, nd.op_of_key(k), en.span())?;
                    }
                }
            }
        }
        Ok(())
    }
    /// One key's entry `k <op> v` merged into the config `d` (conflicts checked), its
    /// operator recorded and its value bound as a name for the entries after it.
    fn merge_key(
        &self,
        scope: &Scope,
        d: &mut Dict,
        k: &Str,
        v: &Value,
        (op, index): (ConfigOp, Option<i64>),
        span: crate::ast::Span,
    ) -> EvalResult<()> {
        // no instance is made again here (see `rebuild_in_config`): an instance merged into
        // an instance takes its attributes, a dict merged into one sets them in place, a dict
        // then an instance under one key is the instance's attributes laid over the dict
        let rb = |i: &Value, x: &Value| self.rebuild_in_config(i, x, span);
        // (the merge records the key's operator: the last entry's, as upstream's `a = S {}`
        // then `a: {...}` leaves `a` a union a schema merges with its default; and its last
        // index: `a[0] += [3]` then `a = [9]` overrides item 0 where this config is merged)
        value::merge_entry_with(d, k, v, op, index, true, &rb).map_err(|x| x.or_span(span))?;
        if let Some(nv) = d.map.get(k) {
            scope
                .vars
                .borrow_mut()
                .insert(crate::ast::Symbol::intern(k), nv.clone());
        }
        Ok(())
    }
}
