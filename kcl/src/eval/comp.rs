//! Comprehensions (list and dict, with several `for`/`if` clauses), quantifiers (`all`,
//! `any`, `map`, `filter`), and the builtin calls fused with them (`sum`, `len`, `range`).

use std::rc::Rc;

use super::{Ctx, EvalError, EvalResult, Evaluator, Scope};
use crate::ast::{self, Expr, ExprKind, Span};
use crate::value::{self, Dict, ErrKind, Func, RtError, Value};

impl Evaluator {
    pub(super) fn comp(
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
                Some(c.targets[1].span.shrink_to_hi()),
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
                    // (a failure is where upstream's runtime last stood: a name defined
                    // further down was just evaluated there)
                    let at = self.last_pos.get().copied().unwrap_or(c.iter.span);
                    let pairs = iter_pairs(&it).map_err(|e| self.rt(e, at))?;
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
    pub(super) fn fused_call(
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
                let c2 = ctx.in_loop();
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
    pub(super) fn quant(
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
        let at = self.last_pos.get().copied().unwrap_or(span);
        let pairs = iter_pairs(&it).map_err(|e| self.rt(e, at))?;
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
        // upstream: an evaluation error for any other value (None and Undefined too: not an
        // empty loop)
        other => {
            return Err(RtError::eval(format!(
                "'{}' object is not iterable",
                other.type_name()
            )));
        }
    })
}
