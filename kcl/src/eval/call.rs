//! Calls: of builtins, methods, lambdas (closures), schema types and plugin functions, with
//! argument binding and the return type; and [`HostCtx`], the bridge builtins call back
//! through.

use std::rc::Rc;

use super::expr::Bound;
use super::{Closure, Ctx, EvalError, EvalResult, Evaluator, Scope};
use crate::ast::Span;
use crate::value::{self, ErrKind, Func, RtError, Str, Value};

impl Evaluator {
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
                    inner: None,
                };
                f(&mut host, args, kwargs).map_err(|e| host.error_at(e))
            }
            Func::Method { name, recv } => {
                let mut host = HostCtx {
                    ev: self,
                    ctx: ctx.clone(),
                    span,
                    inner: None,
                };
                crate::builtins::call_method(&mut host, name, recv, args, kwargs)
                    .map_err(|e| host.error_at(e))
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
                        inner: None,
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
        if let Some(e) = c
            .dotted
            .and_then(|s| super::stmt::dotted_param_error(s.as_str()))
        {
            return Err(self.rt(e, span));
        }
        // Upstream evaluates every default at each call, converted to its parameter's type
        // (a default that does not fit fails there, at the default, even when an argument is
        // given), before it binds the arguments.
        // (no allocation for a lambda without defaults: calls are hot)
        let mut defaults = Vec::new();
        if params.iter().any(|p| p.default.is_some()) {
            for p in params {
                defaults.push(match &p.default {
                    Some(d) => {
                        let v = self.eval(&ctx, d)?;
                        Some(match &p.ty {
                            Some(t) => self.convert_type(&ctx, v, t, d.span)?,
                            None => v,
                        })
                    }
                    None => None,
                });
            }
        }
        // Upstream checks argument counts and keyword names only statically (where the callee
        // is known, see types::Checker::lambda_call); at run time extra arguments and unknown
        // keywords are ignored, a missing argument is its default or None, and a keyword
        // argument wins over a positional one.
        let mut defaults = defaults.into_iter();
        for (i, p) in params.iter().enumerate() {
            let default = defaults.next().flatten();
            let given =
                if let Some((_, v)) = kwargs.iter().find(|(k, _)| &**k == p.name.sym.as_str()) {
                    Some(v.clone())
                } else {
                    args.get(i).cloned()
                };
            let v = match (given, default) {
                (Some(v), _) => match &p.ty {
                    Some(t) => self.convert_type(&ctx, v, t, span)?,
                    None => v,
                },
                (None, Some(d)) => d,
                (None, None) => match &p.ty {
                    Some(t) => self.convert_type(&ctx, Value::None, t, span)?,
                    None => Value::None,
                },
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
        // (upstream's runtime then stands on the body's last node: a return value of the
        // wrong type is reported there)
        let at = self.last_pos.get().copied().unwrap_or(span);
        match &c.lambda.ret {
            Some(t) => self.convert_type(&ctx, last, t, at),
            None => Ok(last),
        }
    }
}

/// A plugin function value.
pub struct PluginFn {
    pub module: String,
    pub func: String,
}

/// The bridge builtins use to reach the evaluator.
pub struct HostCtx<'a> {
    pub ev: &'a Evaluator,
    pub ctx: Ctx,
    pub span: Span,
    /// The error of a function the builtin called back, with its own position (upstream's
    /// runtime reports it where it stood inside that function).
    inner: Option<(RtError, EvalError)>,
}

impl HostCtx<'_> {
    /// The builtin's error: a callback's own when the builtin passed it on, else at the call.
    fn error_at(&mut self, e: RtError) -> EvalError {
        match self.inner.take() {
            Some((passed, inner)) if passed == e => inner,
            _ => self.ev.rt(e, self.span),
        }
    }
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
            // a failed check reports its own message (to a builtin that reads it)
            let rt = match e
                .notes
                .iter()
                .find_map(|(_, m)| m.strip_prefix("Check failed on the condition: "))
            {
                Some(m) => RtError::new(e.kind, m.to_string()),
                None => RtError::new(e.kind, e.msg.clone()),
            };
            self.inner = Some((rt.clone(), e));
            rt
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
    fn strict_range_check(&self) -> bool {
        self.ev.opts.strict_range_check
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
