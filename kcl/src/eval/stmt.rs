//! Statements: assignments (to names, attribute paths and subscripts, with their operators),
//! unification (`a: S {...}`), `if`, `assert`, type aliases and definitions.

use super::*;

impl Evaluator {
    /// Execute a statement; returns the value of an expression statement.
    pub fn exec_stmt(&self, ctx: &Ctx, s: &'static Stmt) -> EvalResult<Option<Value>> {
        self.last_pos.set(Some(&s.span));
        match &s.kind {
            StmtKind::Expr(e) => {
                let v = self.eval(ctx, e)?;
                Ok(Some(v))
            }
            StmtKind::Assign(a) => {
                for t in &a.targets {
                    self.declare_lambda_local(ctx, t);
                }
                let mut v = self.eval(ctx, &a.value)?;
                if let Some(ty) = &a.ty {
                    v = self.convert_type(ctx, v, ty, a.value.span)?;
                }
                for t in &a.targets {
                    self.assign_target(ctx, t, v.clone(), a.ty.as_ref())?;
                }
                // the value assigned is the statement's value (a lambda's last statement)
                Ok(ctx.in_lambda.then_some(v))
            }
            StmtKind::AugAssign(a) => {
                self.declare_lambda_local(ctx, &a.target);
                let cur = self.read_target(ctx, &a.target)?;
                let rhs = self.eval(ctx, &a.value)?;
                let v = self.binop(a.op.bin_op(), &cur, &rhs, s.span)?;
                self.assign_target(ctx, &a.target, v.clone(), None)?;
                Ok(ctx.in_lambda.then_some(v))
            }
            StmtKind::Unification(u) => {
                if ctx.schema.is_none() && ctx.locals.is_none() {
                    return self.unify_global(ctx, u).map(|_| None);
                }
                let cur = self.lookup_opt_for_unify(ctx, u.target.sym)?;
                // `a: S {...}` onto an instance rebuilds it from the merged configs
                if let (Some(c @ Value::Schema(_)), ast::ExprKind::Schema(se)) =
                    (&cur, &u.value.kind)
                {
                    let cfg = self.eval(ctx, &se.config)?;
                    let ty = self.eval_identifier(ctx, &se.name)?;
                    if let Some(st) = schema::as_schema_type(&ty) {
                        let (pos, kw) = match &se.args {
                            Some(a) => self.eval_args(ctx, a)?,
                            None => (Vec::new(), Vec::new()),
                        };
                        if let Some(v) =
                            self.rebuild_merged(c, &cfg, Some((st, (pos, kw))), u.value.span)?
                        {
                            self.assign_path(ctx, u.target, &[], u.target.span, v, None)?;
                            return Ok(None);
                        }
                    }
                }
                let v = self.eval(ctx, &u.value)?;
                let v = match cur {
                    Some(c) if !c.is_none_or_undefined() => self.union_eval(c, &v, u.value.span)?,
                    _ => v,
                };
                self.assign_path(ctx, u.target, &[], u.target.span, v, None)?;
                Ok(None)
            }
            StmtKind::Assert(a) => {
                if let Some(c) = &a.if_cond
                    && !self.eval(ctx, c)?.truthy()
                {
                    return Ok(None);
                }
                if !self.eval(ctx, &a.test)?.truthy() {
                    // without a message (or with one that is no string: `any` passes the
                    // checker) upstream reports nothing more
                    let msg = match &a.msg {
                        Some(m) => match self.eval(ctx, m)? {
                            crate::value::Value::Str(s) => s.to_string(),
                            _ => String::new(),
                        },
                        None => String::new(),
                    };
                    // (at the line upstream's runtime walked last: the message's, or the
                    // condition's last part)
                    let at = self.walked_point(a.test.span);
                    return Err(EvalError::new(ErrKind::Assertion, msg, Some(at)));
                }
                Ok(None)
            }
            StmtKind::If(_) if ctx.schema.is_none() && ctx.locals.is_none() => {
                self.exec_top(ctx, s)
            }
            StmtKind::If(i) => {
                let body = if self.eval(ctx, &i.cond)?.truthy() {
                    &i.body
                } else {
                    &i.orelse
                };
                let mut last = None;
                for st in body {
                    last = self.exec_stmt(ctx, st)?;
                }
                Ok(last)
            }
            StmtKind::Import(_) => Ok(None),
            StmtKind::SchemaAttr(attr) => {
                if let Some(fr) = &ctx.schema {
                    self.exec_schema_attr(ctx, fr, attr, s.span)?;
                } else {
                    // a module-level `a: T = v` declaration
                    if let Some(val) = &attr.value {
                        let mut v = self.eval(ctx, val)?;
                        v = self.convert_type(ctx, v, &attr.ty, val.span)?;
                        self.assign_path(ctx, attr.name, &[], attr.name.span, v, Some(&attr.ty))?;
                    }
                }
                Ok(None)
            }
            StmtKind::Schema(sc) => {
                let ty = schema::SchemaType::from_stmt(sc, ctx.clone(), false);
                self.define(ctx, sc.name.sym, ty);
                Ok(None)
            }
            StmtKind::Rule(r) => {
                let ty = schema::SchemaType::from_rule(r, ctx.clone());
                self.define(ctx, r.name.sym, ty);
                Ok(None)
            }
            StmtKind::TypeAlias(t) => {
                let v = Value::Func(Rc::new(crate::value::Func::User {
                    name: Str::from(t.name.sym.as_str()),
                    data: Rc::new(types::TypeAlias {
                        ty: &t.ty,
                        ctx: ctx.clone(),
                    }),
                    is_type: false,
                }));
                self.define(ctx, t.name.sym, v);
                Ok(None)
            }
        }
    }

    /// `a: S {...}` at package level (the main package's declarations of one name are merged
    /// into one before evaluation, see `parser::merge`): a value the name already holds is
    /// unified with the new instance, whose values win (its defaults included), as upstream.
    fn unify_global(&self, ctx: &Ctx, u: &'static ast::UnificationStmt) -> EvalResult<()> {
        let pkg = &ctx.pkg;
        let name = u.target.sym;
        let existing = pkg
            .globals
            .borrow()
            .get(&name)
            .cloned()
            .filter(|v| !v.is_none_or_undefined());
        let v = self.eval(ctx, &u.value)?;
        let v = match existing {
            // a dict assigned before: upstream's result is the instance (its values winning),
            // listing the schema's attributes first, then the dict's other keys, then the
            // instance's own extra keys
            Some(Value::Dict(d)) if matches!(v, Value::Schema(_)) => {
                let merged = self.union_eval(Value::Dict(d.clone()), &v, u.value.span)?;
                match (&v, &merged, &v) {
                    (Value::Schema(inst), Value::Dict(m), _) => {
                        let order = self.declared_order(inst).unwrap_or_default();
                        let mut attrs = crate::value::Dict::new();
                        let keys = order
                            .iter()
                            .chain(d.map.keys())
                            .chain(inst.attrs.map.keys())
                            .chain(m.map.keys());
                        for k in keys {
                            if !attrs.map.contains_key(k)
                                && let Some(x) = m.map.get(k)
                            {
                                attrs.map.insert(k.clone(), x.clone());
                            }
                        }
                        attrs.ops = inst.attrs.ops.clone();
                        Value::Schema(std::rc::Rc::new(crate::value::SchemaInst {
                            attrs,
                            ..(**inst).clone()
                        }))
                    }
                    _ => merged,
                }
            }
            // (a value assigned after an earlier declaration, which the merge of the main
            // package leaves alone: upstream unifies with it, conflicts checked)
            Some(c) => self.union_checked(c, &v, u.value.span)?,
            None => v,
        };
        self.set_global_as(pkg, name, v, false);
        Ok(())
    }

    fn define(&self, ctx: &Ctx, name: Symbol, v: Value) {
        if let Some(l) = &ctx.locals {
            l.vars.borrow_mut().insert(name, v);
        } else {
            self.set_global(&ctx.pkg, name, v);
        }
    }

    fn lookup_opt_for_unify(&self, ctx: &Ctx, name: Symbol) -> EvalResult<Option<Value>> {
        if let Some(l) = &ctx.locals
            && let Some(v) = l.lookup(name)
        {
            return Ok(Some(v));
        }
        if let Some(fr) = &ctx.schema {
            return Ok(fr.attrs.borrow().get(name.as_str()).cloned());
        }
        Ok(ctx.pkg.globals.borrow().get(&name).cloned())
    }

    /// In a lambda, `name = v` or `name op= v` where no scope holds `name` and the package's
    /// global `name` is not set yet (its statement comes later): upstream's evaluator makes
    /// `name` a local, Undefined, before it reads the value.
    fn declare_lambda_local(&self, ctx: &Ctx, t: &ast::Target) {
        if !ctx.in_lambda || ctx.schema.is_some() || !t.path.is_empty() {
            return;
        }
        let Some(l) = &ctx.locals else {
            return;
        };
        let name = t.name.sym;
        if l.lookup_binding(name).is_some()
            || !ctx.pkg.setters.contains_key(&name)
            || ctx.pkg.globals.borrow().contains_key(&name)
            || ctx.pkg.lazy.borrow().cache.contains_key(&name)
        {
            return;
        }
        l.vars.borrow_mut().insert(name, Value::Undefined);
    }

    fn read_target(&self, ctx: &Ctx, t: &'static ast::Target) -> EvalResult<Value> {
        let mut v = self.lookup(ctx, t.name.sym, t.name.span)?;
        for p in &t.path {
            v = match p {
                ast::TargetPath::Attr(n) => self.select(ctx, &v, n.sym.as_str(), false, n.span)?,
                ast::TargetPath::Index(e) => {
                    let i = self.eval(ctx, e)?;
                    self.subscript(&v, &i, false, e.span)?
                }
            };
        }
        Ok(v)
    }

    fn assign_target(
        &self,
        ctx: &Ctx,
        t: &'static ast::Target,
        v: Value,
        ty: Option<&ast::Type>,
    ) -> EvalResult<()> {
        self.assign_path(ctx, t.name, &t.path, t.span, v, ty)
    }

    fn assign_path(
        &self,
        ctx: &Ctx,
        tname: ast::Name,
        tpath: &'static [ast::TargetPath],
        tspan: Span,
        v: Value,
        ty: Option<&ast::Type>,
    ) -> EvalResult<()> {
        let t = TargetRef {
            name: tname,
            path: tpath,
            span: tspan,
        };
        let name = t.name.sym;
        let newv = if t.path.is_empty() {
            v
        } else {
            let immutable = || {
                EvalError::new(
                    ErrKind::Immutable,
                    format!(
                        "Can not change the value of '{name}', because it was declared immutable"
                    ),
                    Some(t.span),
                )
                .with_mutable_hint(name)
            };
            let top_level = ctx.schema.is_none() && ctx.locals.is_none();
            if top_level
                && !name.as_str().starts_with('_')
                && ctx.pkg.globals.borrow().contains_key(&name)
            {
                return Err(immutable());
            }
            // a name nobody assigns is no declaration: the path's first step fails on
            // Undefined (in `set_path`), as upstream's
            // (at package level through the lazy scope: run as a setter of a read ahead, the
            // statement reads the value its earlier setters make)
            let root = if top_level {
                self.get_global(&ctx.pkg, name, false)?
            } else {
                self.lookup_opt_for_unify(ctx, name)?
            }
            .unwrap_or(Value::Undefined);
            // `inst.a.b = v` on a schema instance rebuilds it with `{a: {b = v}}` merged into
            // its config: derived attributes follow and its checks run again, as upstream
            if matches!(root, Value::Schema(_))
                && t.path.iter().all(|p| matches!(p, ast::TargetPath::Attr(_)))
            {
                let mut extra = v.clone();
                let mut op = ConfigOp::Override;
                for p in t.path.iter().rev() {
                    let ast::TargetPath::Attr(n) = p else {
                        unreachable!()
                    };
                    let k: Str = Str::from(n.sym.as_str());
                    let mut d = crate::value::Dict::new();
                    d.map.insert(k.clone(), extra);
                    d.set_op(k, op, None);
                    extra = Value::from(d);
                    op = ConfigOp::Union;
                }
                let rebuilt = self.union_eval(root.clone(), &extra, t.span)?;
                return self.assign_path(ctx, tname, &[], tspan, rebuilt, ty);
            }
            let mut keys = Vec::new();
            for p in t.path {
                keys.push(match p {
                    ast::TargetPath::Attr(n) => (Value::str(n.sym.as_str()), true),
                    ast::TargetPath::Index(e) => (self.eval(ctx, e)?, false),
                });
            }
            set_path(root, &keys, v).map_err(|e| EvalError::from_rt(e, t.span))?
        };
        let _ = ty;
        if ctx.in_lambda {
            let l = ctx.locals.as_ref().unwrap();
            if ctx.schema.is_some()
                && l.lookup(name).is_none()
                && ctx
                    .schema
                    .as_ref()
                    .unwrap()
                    .attrs
                    .borrow()
                    .get(name.as_str())
                    .is_some()
            {
                // lambdas never write the enclosing schema's attributes
            }
            l.assign(name, newv);
            return Ok(());
        }
        if let Some(l) = &ctx.locals
            && l.lookup(name).is_some()
        {
            l.assign(name, newv);
            return Ok(());
        }
        if let Some(fr) = &ctx.schema {
            self.schema_set(ctx, fr, name, newv, t.span)?;
            if t.path.is_empty() {
                self.convert_nested_assign(fr, name, t.span)?;
            }
            return Ok(());
        }
        self.set_global(&ctx.pkg, name, newv);
        Ok(())
    }
}

struct TargetRef {
    name: ast::Name,
    path: &'static [ast::TargetPath],
    span: Span,
}

/// `root` with `v` set at `keys` (a value, and whether it is an attribute name rather than an
/// index). A step on None or Undefined, and an attribute of any value but a dict or instance,
/// fails as upstream's: an index is not subscriptable, an attribute on the way is not
/// loadable, and the last attribute cannot update the dict.
pub(super) fn set_path(root: Value, keys: &[(Value, bool)], v: Value) -> Result<Value, RtError> {
    if keys.is_empty() {
        return Ok(v);
    }
    let mut root = root;
    match (&mut root, &keys[0]) {
        (Value::List(l), (Value::Int(i), _)) => {
            let l = Rc::make_mut(l);
            // upstream takes the index as a 32-bit integer
            let i = i64::from(*i as i32);
            let idx = if i < 0 { l.len() as i64 + i } else { i };
            if idx < 0 || idx as usize >= l.len() {
                return Err(RtError::eval(format!(
                    "index out of bounds: the len is {} but the index is {i}",
                    l.len()
                )));
            }
            let cur = std::mem::take(&mut l[idx as usize]);
            l[idx as usize] = set_path(cur, &keys[1..], v)?;
            Ok(root)
        }
        (Value::Dict(_) | Value::Schema(_), (Value::Str(k), _)) => {
            let d = root.dict_mut().unwrap();
            let cur = d.map.get(&**k).cloned().unwrap_or(Value::Undefined);
            let nv = set_path(cur, &keys[1..], v)?;
            d.map.insert(k.clone(), nv);
            Ok(root)
        }
        // (an attribute of any other value fails as of None)
        (r, (k, attr)) if *attr || matches!(r, Value::Undefined | Value::None) => {
            let ty = r.type_name();
            Err(RtError::eval(match (attr, keys.len()) {
                (false, _) => format!(
                    "'{ty}' object is not subscriptable with '{}'",
                    k.type_name()
                ),
                (true, 1) => format!(
                    "failed to update the dict. An iterable of key-value pairs was expected, but got {ty}. Check if the syntax for updating the dictionary with the attribute '{}' is correct",
                    crate::value::to_str(k)
                ),
                (true, _) => format!(
                    "invalid value '{ty}' to load attribute '{}'",
                    crate::value::to_str(k)
                ),
            }))
        }
        // (an index that does not fit the value: upstream words it as a read)
        (r, (k, _)) => Err(RtError::eval(format!(
            "'{}' object is not subscriptable with '{}'",
            r.type_name(),
            k.type_name()
        ))),
    }
}

/// The name a statement assigns while it runs (upstream's "target": a read of it is the value
/// being assigned).
pub(crate) fn stmt_target(s: &Stmt) -> Option<Symbol> {
    match &s.kind {
        StmtKind::Assign(a) => a.targets.first().map(|t| t.name.sym),
        StmtKind::AugAssign(a) => Some(a.target.name.sym),
        StmtKind::Unification(u) => Some(u.target.sym),
        StmtKind::SchemaAttr(a) => Some(a.name.sym),
        _ => None,
    }
}

/// Binding a dotted parameter (`lambda a.b {}`, which upstream's parser accepts) stores
/// into an attribute of the undefined `a`, which fails as upstream's store does.
pub(super) fn dotted_param_error(name: &str) -> Option<RtError> {
    let mut names = name.split('.');
    names.next();
    let keys: Vec<(Value, bool)> = names.map(|n| (Value::from(n), true)).collect();
    if keys.is_empty() {
        return None;
    }
    set_path(Value::Undefined, &keys, Value::None).err()
}
