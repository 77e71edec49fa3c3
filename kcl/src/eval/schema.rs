//! Schema types and instantiation: parent first, then own body, then mixins; the config is laid
//! over the body's defaults as each attribute is set; then types, required attributes and
//! `check:` blocks.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use indexmap::IndexMap;
use rustc_hash::FxHashMap;

use super::{Ctx, DONE, EvalError, EvalResult, Evaluator, PENDING, RUNNING, Scope};
use crate::ast::{self, Span, Stmt, StmtKind, Symbol};
use crate::value::{self, ConfigOp, Dict, ErrKind, Func, SchemaInst, Str, Value};

/// A schema (or rule / mixin / protocol) type value.
pub struct SchemaType {
    pub name: Str,
    pub pkgpath: Str,
    pub stmt: Option<&'static ast::SchemaStmt>,
    pub rule: Option<&'static ast::RuleStmt>,
    pub def_ctx: Ctx,
    /// Instances with the package whose code created them.
    pub instances: RefCell<Vec<(Str, Value)>>,
    layout: RefCell<Option<Rc<Layout>>>,
}

/// What instantiation needs from a schema and its bases/mixins, computed once per type.
pub struct Layout {
    parts: Vec<Rc<SchemaType>>,
    /// Inheritance level of each part (base 0; a mixin shares its host's level).
    part_level: Vec<u32>,
    body: Vec<(&'static Stmt, usize)>,
    declared: IndexMap<Str, AttrDecl, rustc_hash::FxBuildHasher>,
    setters: FxHashMap<Symbol, Vec<usize>>,
    index_sig: Option<(&'static ast::IndexSignature, usize)>,
    /// Attribute names in declaration order (the instance's key order).
    order: Vec<Str>,
    /// Non-optional attributes.
    pub required: Vec<Str>,
    /// `@deprecated` attributes with their decorator.
    deprecated: Vec<(Str, &'static ast::Decorator, usize)>,
    /// Attribute decorators other than `deprecated`/`info` (an error when instantiated).
    unknown_decorators: Vec<(Str, &'static ast::Decorator, usize)>,
}

impl SchemaType {
    pub fn from_stmt(s: &'static ast::SchemaStmt, ctx: Ctx, _nested: bool) -> Value {
        let name: Str = Str::from(s.name.sym.as_str());
        let t = SchemaType {
            name: name.clone(),
            pkgpath: Str::from(ctx.pkg.path.as_str()),
            stmt: Some(s),
            rule: None,
            def_ctx: ctx,
            instances: RefCell::new(Vec::new()),
            layout: RefCell::new(None),
        };
        Value::Func(Rc::new(Func::User {
            name,
            data: Rc::new(t),
            is_type: true,
        }))
    }
    pub fn from_rule(r: &'static ast::RuleStmt, ctx: Ctx) -> Value {
        let name: Str = Str::from(r.name.sym.as_str());
        let t = SchemaType {
            name: name.clone(),
            pkgpath: Str::from(ctx.pkg.path.as_str()),
            stmt: None,
            rule: Some(r),
            def_ctx: ctx,
            instances: RefCell::new(Vec::new()),
            layout: RefCell::new(None),
        };
        Value::Func(Rc::new(Func::User {
            name,
            data: Rc::new(t),
            is_type: true,
        }))
    }
}

/// A declared attribute.
#[derive(Clone)]
pub struct AttrDecl {
    pub ty: Option<&'static ast::Type>,
    pub optional: bool,
    /// Index of the schema (in the layout's parts) that declares it.
    pub part: usize,
    pub schema_attr: bool,
}

/// The instance being built.
pub struct Frame {
    pub attrs: RefCell<Dict>,
    pub config: Rc<Dict>,
    layout: Rc<Layout>,
    /// Per-part evaluation contexts (definition package + parameter scope).
    ctxs: Vec<Ctx>,
    state: RefCell<Vec<u8>>,
    /// Inheritance level of the code running in this frame (see `reapply_insert`).
    level: Cell<u32>,
    /// `(level, attribute)` pairs already touched, when the config has a `+=` entry.
    touched: RefCell<Vec<(u32, Symbol)>>,
    has_insert: bool,
}

/// Downcast a value to a schema type.
pub fn as_schema_type(v: &Value) -> Option<Rc<SchemaType>> {
    match v {
        Value::Func(f) => match &**f {
            Func::User { data, .. } => data.clone().downcast::<SchemaType>().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// Does the schema `inst` was built from declare attribute `name` (unknown: yes)?
pub fn declares(inst: &SchemaInst, name: &str) -> bool {
    let Some(ty) = inst
        .ty
        .clone()
        .and_then(|t| t.downcast::<SchemaType>().ok())
    else {
        return true;
    };
    if ty.rule.is_some() {
        return true;
    }
    let l = ty.layout.borrow();
    match l.as_ref() {
        Some(l) => l.declared.contains_key(name),
        None => true,
    }
}

/// Is `inst` an instance of `ty` or of one of its subtypes?
pub fn is_instance_of(ev: &Evaluator, inst: &SchemaInst, ty: &Rc<SchemaType>) -> bool {
    let Some(t) = &inst.ty else { return false };
    let Ok(mut cur) = t.clone().downcast::<SchemaType>() else {
        return false;
    };
    loop {
        // by name: one file can be loaded both as part of its folder package and on its own
        let related = |a: &str, b: &str| {
            a == b || a.starts_with(&format!("{b}.")) || b.starts_with(&format!("{a}."))
        };
        if Rc::ptr_eq(&cur, ty) || (cur.name == ty.name && related(&cur.pkgpath, &ty.pkgpath)) {
            return true;
        }
        match ev.parent_of(&cur) {
            Ok(Some(p)) => cur = p,
            _ => return false,
        }
    }
}

fn collect_targets(s: &Stmt, out: &mut Vec<Symbol>) {
    match &s.kind {
        StmtKind::Assign(a) => out.extend(a.targets.iter().map(|t| t.name.sym)),
        StmtKind::AugAssign(a) => out.push(a.target.name.sym),
        StmtKind::Unification(u) => out.push(u.target.sym),
        StmtKind::SchemaAttr(a) => out.push(a.name.sym),
        StmtKind::If(i) => {
            for st in i.body.iter().chain(i.orelse.iter()) {
                collect_targets(st, out);
            }
        }
        _ => {}
    }
}

impl Evaluator {
    pub(crate) fn parent_of(&self, t: &Rc<SchemaType>) -> EvalResult<Option<Rc<SchemaType>>> {
        let Some(s) = t.stmt else { return Ok(None) };
        let Some(p) = &s.parent else { return Ok(None) };
        let v = self.eval_identifier(&t.def_ctx, p)?;
        match as_schema_type(&v) {
            Some(x) => Ok(Some(x)),
            None => Err(EvalError::new(
                ErrKind::Compile,
                format!(
                    "illegal parent schema '{}'",
                    p.names
                        .iter()
                        .map(|n| n.sym.as_str())
                        .collect::<Vec<_>>()
                        .join(".")
                ),
                Some(p.span),
            )),
        }
    }

    fn mixins_of(&self, t: &Rc<SchemaType>) -> EvalResult<Vec<Rc<SchemaType>>> {
        let Some(s) = t.stmt else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for m in &s.mixins {
            let v = self.eval_identifier(&t.def_ctx, m)?;
            match as_schema_type(&v) {
                Some(x) => out.push(x),
                None => {
                    return Err(EvalError::new(
                        ErrKind::Compile,
                        "illegal mixin",
                        Some(m.span),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Instantiate `ty_val` (a schema type value) with a config value.
    #[allow(clippy::too_many_arguments)]
    pub fn instantiate_value(
        &self,
        _ctx: &Ctx,
        ty_val: &Value,
        args: &[Value],
        kwargs: &[(Str, Value)],
        cfg: Value,
        span: Span,
        cfg_span: Span,
    ) -> EvalResult<Value> {
        if let Value::Func(f) = ty_val
            && let Func::User { data, .. } = &**f
            && let Some(a) = data.downcast_ref::<super::types::TypeAlias>()
            && let ast::TypeKind::Named(id) = &a.ty.kind
        {
            let t = self.eval_identifier(&a.ctx, id)?;
            return self.instantiate_value(_ctx, &t, args, kwargs, cfg, span, cfg_span);
        }
        let Some(ty) = as_schema_type(ty_val) else {
            // `inst {..}` on a schema instance: upstream instantiates its schema again from
            // the instance's config and this one (a new instance, listed by instances())
            if matches!(ty_val, Value::Schema(_))
                && let Some(v) = self.rebuild_merged(ty_val, &cfg, None, span)?
            {
                return Ok(v);
            }
            // `dict {..}`-like forms on a non-schema: union
            if ty_val.is_config() {
                return value::union(ty_val, &cfg, false).map_err(|e| self.rt(e, span));
            }
            return Err(EvalError::new(
                ErrKind::Type,
                format!("'{}' is not a schema", ty_val.type_name()),
                Some(span),
            ));
        };
        let cfg_dict = match cfg {
            Value::Dict(d) => Rc::unwrap_or_clone(d),
            Value::Schema(s) => s.attrs.clone(),
            Value::None | Value::Undefined => Dict::new(),
            other => {
                return Err(EvalError::new(
                    ErrKind::Type,
                    format!("expect schema config, got {}", other.type_name()),
                    Some(cfg_span),
                ));
            }
        };
        self.enter(span)?;
        let r = self.instantiate(&ty, args, kwargs, cfg_dict, span);
        self.leave();
        r
    }

    /// The attributes an instance's schema declares, in declaration order.
    pub(crate) fn declared_order(&self, inst: &SchemaInst) -> Option<Vec<Str>> {
        let ty = inst.ty.clone()?.downcast::<SchemaType>().ok()?;
        let layout = self.layout(&ty, inst.span.unwrap_or_default()).ok()?;
        Some(layout.order.clone())
    }

    fn layout(&self, ty: &Rc<SchemaType>, span: Span) -> EvalResult<Rc<Layout>> {
        if let Some(l) = ty.layout.borrow().as_ref() {
            return Ok(l.clone());
        }
        // base first
        let mut chain = vec![ty.clone()];
        while let Some(p) = self.parent_of(chain.last().unwrap())? {
            if let Some(i) = chain.iter().position(|c| Rc::ptr_eq(c, &p)) {
                // schemas of other packages are named with their package, as upstream does
                let names: Vec<String> = chain[i..]
                    .iter()
                    .map(|c| match &*c.pkgpath {
                        "__main__" | "" => c.name.to_string(),
                        p => format!("{p}.{}", c.name),
                    })
                    .collect();
                let msg = format!(
                    "There is a circular reference between schemas {}",
                    names.join(", ")
                );
                return Err(EvalError::new(ErrKind::Compile, msg, Some(span)));
            }
            if p.stmt.is_some_and(|s| s.is_mixin()) {
                let msg = format!(
                    "invalid schema inherit object type, expect schema, got '{}'",
                    p.name
                );
                return Err(EvalError::new(ErrKind::IllegalInherit, msg, Some(span)));
            }
            chain.push(p);
        }
        chain.reverse();
        let mut parts: Vec<Rc<SchemaType>> = Vec::new();
        for t in &chain {
            parts.push(t.clone());
            for m in self.mixins_of(t)? {
                parts.push(m);
            }
        }
        let mut body = Vec::new();
        let mut declared: IndexMap<Str, AttrDecl, rustc_hash::FxBuildHasher> = IndexMap::default();
        let mut index_sig = None;
        let mut order: Vec<Str> = Vec::new();
        let mut deprecated = Vec::new();
        let mut unknown_decorators = Vec::new();
        for (pi, t) in parts.iter().enumerate() {
            let Some(s) = t.stmt else { continue };
            if let Some(is) = &s.index_signature {
                index_sig = Some((is, pi));
                // attributes declared before the signature must fit it too
                for (k, d) in declared.iter() {
                    if let (Some(kn), true) = (&is.key_name, d.schema_attr)
                        && kn.sym.as_str() == &**k
                    {
                        return Err(EvalError::new(
                            ErrKind::IndexSignature,
                            format!(
                                "index signature attribute name '{k}' cannot have the same name as schema attributes"
                            ),
                            Some(is.span),
                        ));
                    }
                }
            }
            for st in &s.body {
                if let StmtKind::SchemaAttr(a) = &st.kind {
                    let k: Str = super::expr::sym_str(a.name.sym);
                    for d in &a.decorators {
                        match decorator_name(d).as_str() {
                            "deprecated" => deprecated.push((k.clone(), d, pi)),
                            "info" => {}
                            _ => unknown_decorators.push((k.clone(), d, pi)),
                        }
                    }
                    if let Some(prev) = declared.get(&k)
                        && let (Some(pt), true) = (prev.ty, prev.schema_attr)
                    {
                        let short = |t: &ast::Type| match &t.kind {
                            ast::TypeKind::Named(id) => id
                                .names
                                .last()
                                .map(|n| n.sym.as_str().to_string())
                                .unwrap_or_default(),
                            _ => super::types::type_str(t),
                        };
                        let (ps, ns) = (short(pt), short(&a.ty));
                        if ps != ns && prev.part != pi {
                            return Err(EvalError::new(
                                ErrKind::Type,
                                format!(
                                    // upstream prints the new type on both sides
                                    "can't change schema field type of '{k}' from {ns} to {ns}"
                                ),
                                Some(a.name.span),
                            ));
                        }
                        if !prev.optional && a.optional && prev.part != pi {
                            return Err(EvalError::new(
                                ErrKind::Type,
                                format!(
                                    "can't change the required schema attribute of '{k}' to optional"
                                ),
                                Some(a.name.span),
                            ));
                        }
                    }
                    // upstream checks a schema's own attributes against its own index
                    // signature (a subschema's attributes are not)
                    if let Some((is, sig_part)) = &index_sig
                        && *sig_part == pi
                    {
                        if let Some(kn) = &is.key_name
                            && kn.sym == a.name.sym
                        {
                            return Err(EvalError::new(
                                ErrKind::IndexSignature,
                                format!(
                                    "index signature attribute name '{k}' cannot have the same name as schema attributes"
                                ),
                                Some(a.name.span),
                            ));
                        }
                        if !is.any_other
                            && !matches!(is.value_ty.kind, ast::TypeKind::Any)
                            && super::types::type_str(&is.value_ty) != super::types::type_str(&a.ty)
                            && !matches!(is.value_ty.kind, ast::TypeKind::Union(_))
                        {
                            return Err(EvalError::new(
                                ErrKind::IndexSignature,
                                format!(
                                    "the type '{}' of schema attribute '{k}' does not meet the index signature definition {}",
                                    super::types::type_str(&a.ty),
                                    index_sig_str(is)
                                ),
                                Some(a.name.span),
                            ));
                        }
                    }
                    declared.insert(
                        k.clone(),
                        AttrDecl {
                            ty: Some(&a.ty),
                            optional: a.optional,
                            part: pi,
                            schema_attr: true,
                        },
                    );
                    if !order.contains(&k) {
                        order.push(k);
                    }
                } else {
                    let mut names = Vec::new();
                    collect_targets(st, &mut names);
                    for n in names {
                        let k: Str = super::expr::sym_str(n);
                        if !declared.contains_key(&k) {
                            declared.insert(
                                k.clone(),
                                AttrDecl {
                                    ty: None,
                                    optional: true,
                                    part: pi,
                                    schema_attr: false,
                                },
                            );
                        }
                        if !order.contains(&k) {
                            order.push(k);
                        }
                    }
                }
                body.push((st, pi));
            }
        }
        let mut setters: FxHashMap<Symbol, Vec<usize>> = FxHashMap::default();
        for (i, (st, _)) in body.iter().enumerate() {
            let mut names = Vec::new();
            collect_targets(st, &mut names);
            for n in names {
                let e = setters.entry(n).or_default();
                if e.last() != Some(&i) {
                    e.push(i);
                }
            }
        }
        let required = declared
            .iter()
            .filter(|(_, d)| d.schema_attr && !d.optional)
            .map(|(k, _)| k.clone())
            .collect();
        let mut part_level = Vec::with_capacity(parts.len());
        let mut level = 0u32;
        for (i, p) in parts.iter().enumerate() {
            if i > 0 && !p.stmt.is_some_and(|s| s.is_mixin()) {
                level += 1;
            }
            part_level.push(level);
        }
        let l = Rc::new(Layout {
            parts,
            part_level,
            body,
            declared,
            setters,
            index_sig,
            order,
            required,
            deprecated,
            unknown_decorators,
        });
        *ty.layout.borrow_mut() = Some(l.clone());
        Ok(l)
    }

    pub fn instantiate(
        &self,
        ty: &Rc<SchemaType>,
        args: &[Value],
        kwargs: &[(Str, Value)],
        config: Dict,
        span: Span,
    ) -> EvalResult<Value> {
        let by_call = self.by_call.replace(false);
        if let Some(r) = ty.rule {
            return self.run_rule(ty, r, args, kwargs, config, span, by_call);
        }
        self.schema_frames.set(self.schema_frames.get() + 1);
        let r = self.instantiate_frame(ty, args, kwargs, config, span);
        self.schema_frames.set(self.schema_frames.get() - 1);
        r
    }

    fn instantiate_frame(
        &self,
        ty: &Rc<SchemaType>,
        args: &[Value],
        kwargs: &[(Str, Value)],
        config: Dict,
        span: Span,
    ) -> EvalResult<Value> {
        let merged = self.merging.replace(false);
        let layout = self.layout(ty, span)?;
        // `S.instances()` lists an instance where its instantiation starts (upstream: the outer
        // instance before those its body creates): a slot now, filled when it is complete (an
        // instance that fails leaves an Undefined slot, which is not listed)
        let slots: Vec<(Rc<SchemaType>, usize)> = if self.track_instances {
            let mut qualified_bases: Vec<&Rc<SchemaType>> = Vec::new();
            let mut prev: Option<&Rc<SchemaType>> = None;
            for t in layout.parts.iter() {
                let Some(st) = t.stmt else { continue };
                if st.is_mixin() {
                    continue;
                }
                if let (Some(par), Some(base)) = (&st.parent, prev)
                    && par.names.len() > 1
                {
                    qualified_bases.push(base);
                }
                prev = Some(t);
            }
            let creator: Str = self
                .running_pkg()
                .map(|p| Str::from(p.path.as_str()))
                .unwrap_or_else(|| Str::from("__main__"));
            layout
                .parts
                .iter()
                .filter(|t| {
                    t.stmt
                        .is_some_and(|s| s.kind == ast::SchemaKind::Schema && !s.is_mixin())
                })
                // upstream files an instance under a base by the package path its child
                // names it with: `pkg.Base` is that package's, a bare `Base` the
                // instantiating package's (so a base of another package named bare, as
                // inside its own package, does not list it)
                .filter(|t| {
                    Rc::ptr_eq(t, ty)
                        || *t.pkgpath == *creator
                        || qualified_bases.iter().any(|q| Rc::ptr_eq(q, t))
                })
                .map(|t| {
                    let mut v = t.instances.borrow_mut();
                    v.push((creator.clone(), Value::Undefined));
                    (t.clone(), v.len() - 1)
                })
                .collect()
        } else {
            Vec::new()
        };
        let origin = self.origin_of(&config, args, kwargs);
        let config = Rc::new(config);
        // parameters bind in a scope visible to every body
        let params_scope = Scope::new(None);
        if let Some(ps) = ty.stmt.and_then(|s| s.params.as_ref()) {
            for (i, p) in ps.iter().enumerate() {
                let v = if i < args.len() {
                    args[i].clone()
                } else if let Some((_, v)) =
                    kwargs.iter().find(|(k, _)| &**k == p.name.sym.as_str())
                {
                    v.clone()
                } else if let Some(d) = &p.default {
                    self.eval(&ty.def_ctx, d)?
                } else {
                    Value::None
                };
                let v = match &p.ty {
                    Some(t) if !v.is_none_or_undefined() => {
                        self.convert_type(&ty.def_ctx, v, t, span)?
                    }
                    _ => v,
                };
                params_scope.vars.borrow_mut().insert(p.name.sym, v);
            }
        }
        for t in &layout.parts {
            for d in t.stmt.map(|s| s.decorators.as_slice()).unwrap_or_default() {
                match decorator_name(d).as_str() {
                    "deprecated" => self.deprecated(&t.def_ctx, d, &t.name, span)?,
                    "info" => {}
                    other => {
                        let msg = format!("UnKnown decorator {other}");
                        return Err(EvalError::new(ErrKind::Evaluation, msg, Some(d.span)));
                    }
                }
            }
        }
        if let Some((_, d, _)) = layout.unknown_decorators.first() {
            let msg = format!("UnKnown decorator {}", decorator_name(d));
            return Err(EvalError::new(ErrKind::Evaluation, msg, Some(d.span)));
        }
        for (k, d, pi) in &layout.deprecated {
            if config.get(k).is_some_and(|v| !v.is_none_or_undefined()) {
                self.deprecated(&layout.parts[*pi].def_ctx, d, k, span)?;
            }
        }
        let ctxs: Vec<Ctx> = layout
            .parts
            .iter()
            .map(|t| Ctx {
                locals: Some(params_scope.clone()),
                in_lambda: false,
                schema: None,
                ..t.def_ctx.clone()
            })
            .collect();
        let mut attrs = Dict::with_capacity(layout.order.len() + config.len());
        for k in &layout.order {
            attrs.map.insert(k.clone(), Value::Undefined);
        }
        // the config is visible from the start
        for (k, v) in &config.map {
            let (op, _) = config.op_of(k);
            let cur = attrs.map.get(k).cloned().unwrap_or(Value::Undefined);
            let nv = match op {
                ConfigOp::Insert if !cur.is_none_or_undefined() => {
                    value::binary(value::BinOp::Add, &cur, v).unwrap_or(v.clone())
                }
                _ => v.clone(),
            };
            attrs.map.insert(k.clone(), nv);
        }
        let n = layout.body.len();
        let has_insert = config.ops.as_ref().is_some_and(|o| o.any_insert());
        let frame = Rc::new(Frame {
            attrs: RefCell::new(attrs),
            config,
            layout: layout.clone(),
            ctxs,
            state: RefCell::new(vec![PENDING; n]),
            level: Cell::new(0),
            touched: RefCell::new(Vec::new()),
            has_insert,
        });
        for i in 0..n {
            self.run_schema_stmt(&frame, i)?;
        }
        // unknown config keys; an index signature whose key type lists strings admits those
        let sig_keys: Option<Vec<Str>> = match &layout.index_sig {
            Some((is, pi)) => self.str_literals(&frame.ctxs[*pi], &is.key_ty),
            None => None,
        };
        for k in frame.config.map.keys() {
            let unknown = !layout.declared.contains_key(k)
                && match (&layout.index_sig, &sig_keys) {
                    (None, _) => true,
                    (Some(_), Some(allowed)) => !allowed.contains(k),
                    (Some(_), None) => false,
                };
            // upstream's resolver skips an empty key: only the run time refuses it
            if unknown && (merged || k.is_empty() || self.dynamic_keys.borrow().contains(k)) {
                let msg = format!("No attribute named '{k}' in the schema '{}'", ty.name);
                return Err(EvalError::new(ErrKind::Evaluation, msg, Some(span)));
            }
            if unknown {
                // an index signature's literal keys: upstream's suggestions (the `suggestions`
                // crate: `bar` for `baz`, nothing for `barx`)
                let sugg: Vec<String>;
                let cands: Vec<&str> = match &sig_keys {
                    Some(allowed) => {
                        sugg = suggestions::provide_suggestions(k, allowed.iter().map(|d| &**d));
                        sugg.iter().map(String::as_str).collect()
                    }
                    None => layout
                        .declared
                        .keys()
                        .filter(|d| similar(d, k))
                        .map(|d| &**d)
                        .collect(),
                };
                let msg = if cands.is_empty() {
                    format!("Cannot add member '{k}' to schema '{}'", ty.name)
                } else {
                    format!(
                        "Cannot add member '{k}' to schema '{}', did you mean '{:?}'?",
                        ty.name, cands
                    )
                };
                return Err(EvalError::new(ErrKind::Compile, msg, Some(span)));
            }
        }
        // types
        let mut attrs = frame.attrs.borrow().clone();
        for (k, d) in &layout.declared {
            let Some(v) = attrs.map.get(k).cloned() else {
                continue;
            };
            if let Some(t) = d.ty
                && !v.is_none_or_undefined()
            {
                let c = Ctx {
                    schema: Some(frame.clone()),
                    ..frame.ctxs[d.part].clone()
                };
                let nv = self.convert_type(&c, v, t, span)?;
                attrs.map.insert(k.clone(), nv);
            }
        }
        if let Some((is, pi)) = &layout.index_sig {
            let keys: Vec<Str> = attrs
                .map
                .keys()
                .filter(|k| !layout.declared.contains_key(*k))
                .cloned()
                .collect();
            for k in keys {
                let cx = Ctx {
                    schema: Some(frame.clone()),
                    ..frame.ctxs[*pi].clone()
                };
                let mut v = attrs.map.get(&k).cloned().unwrap_or_default();
                let merge_default = frame.config.op_of(&k).0 == ConfigOp::Union;
                if let (Some(def), true) = (&is.value, merge_default || v.is_none_or_undefined()) {
                    // the signature's default is merged under the given value
                    let sc = Scope::new(cx.locals.clone());
                    if let Some(kn) = &is.key_name {
                        sc.vars.borrow_mut().insert(kn.sym, Value::Str(k.clone()));
                    }
                    let c2 = Ctx {
                        locals: Some(sc),
                        ..cx.clone()
                    };
                    let dv = self.eval(&c2, def)?;
                    v = if v.is_config() && dv.is_config() {
                        self.union_eval(dv, &v, span)?
                    } else if v.is_none_or_undefined() {
                        dv
                    } else {
                        v
                    };
                }
                if !v.is_none_or_undefined() {
                    v = self.convert_type(&cx, v, &is.value_ty, span)?;
                }
                attrs.map.insert(k, v);
            }
        }
        if let Some((is, _)) = &layout.index_sig
            && is.key_name.is_some()
        {
            // upstream binds the key name as a temporary attribute before it adds the extra
            // keys one by one, then removes it by swapping the last key into its place: the
            // last extra key comes first
            let (n0, len) = (layout.order.len(), attrs.map.len());
            if len >= n0 + 2 {
                attrs.map.move_index(len - 1, n0);
            }
        }
        *frame.attrs.borrow_mut() = attrs;
        // required attributes, recursively through the values, at the top only (see
        // `schema_frames`): before the checks, or after them with an index signature key name
        let top = self.schema_frames.get() == 1 && self.schema_exprs.get() <= 1;
        // An index signature's key name binds per extra key only in the schema that declares
        // it: an instance of a schema inheriting one runs its checks once (as upstream).
        let key_name = layout
            .index_sig
            .filter(|(_, pi)| Rc::ptr_eq(&layout.parts[*pi], ty))
            .and_then(|(is, _)| is.key_name);
        let keyed = key_name.is_some();
        if top && !keyed {
            self.check_frame_required(&frame, &ty.name, span)?;
        }
        // checks, base first; with an index signature key name, once per extra key
        let sig_keys: Vec<Value> = match &layout.index_sig {
            Some(_) if keyed => frame
                .attrs
                .borrow()
                .map
                .keys()
                .filter(|k| !layout.declared.contains_key(*k))
                .map(|k| Value::Str(k.clone()))
                .collect(),
            _ => Vec::new(),
        };
        // checks run at the instance's own (most derived) level
        frame
            .level
            .set(layout.part_level.last().copied().unwrap_or(0));
        for (pi, t) in layout.parts.iter().enumerate() {
            let Some(s) = t.stmt else { continue };
            if s.checks.is_empty() {
                continue;
            }
            let c = Ctx {
                schema: Some(frame.clone()),
                ..frame.ctxs[pi].clone()
            };
            match key_name {
                // once per extra key: never without one
                Some(kn) => {
                    for k in sig_keys.iter().cloned() {
                        let sc = Scope::new(c.locals.clone());
                        sc.vars.borrow_mut().insert(kn.sym, k);
                        let c2 = Ctx {
                            locals: Some(sc),
                            ..c.clone()
                        };
                        self.run_checks(&c2, &s.checks, span, false)?;
                    }
                }
                None => self.run_checks(&c, &s.checks, span, false)?,
            }
        }
        if top && keyed {
            self.check_frame_required(&frame, &ty.name, span)?;
        }
        // closures created in the body keep the frame; they still need the final attributes
        let mut attrs = if Rc::strong_count(&frame) > 1 {
            frame.attrs.borrow().clone()
        } else {
            std::mem::take(&mut *frame.attrs.borrow_mut())
        };
        // unset optional attributes stay, as Undefined: upstream shows them in str(), `in` and iteration (outputs drop them)
        // instances are long-lived (they are the output): drop the growth slack
        attrs.map.shrink_to_fit();
        // an instance keeps its config's `=` and `+=` operators, as upstream's schema values
        // do: merged into another value later (`a | inst`, lists of instances), its entries
        // override or append instead of unifying
        attrs.ops = None;
        if let Some(ops) = &frame.config.ops {
            if ops.keys_within(&attrs.map) && ops.keys_within(&frame.config.map) {
                // The usual case: every config key is an attribute; share the operators.
                attrs.ops = Some(ops.clone());
            } else {
                for k in frame.config.map.keys() {
                    let (op, idx) = frame.config.op_of(k);
                    if op != ConfigOp::Union && attrs.map.contains_key(k) {
                        attrs.set_op(k.clone(), op, idx);
                    }
                }
            }
        }
        let inst = Value::Schema(Rc::new(SchemaInst {
            name: ty.name.clone(),
            pkg: ty.pkgpath.clone(),
            attrs,
            ty: Some(ty.clone() as Rc<dyn std::any::Any>),
            span: Some(span),
            origin: Some(origin),
        }));
        // `Base.instances()` includes instances of its subschemas
        for (t, i) in slots {
            if let Some(slot) = t.instances.borrow_mut().get_mut(i) {
                slot.1 = inst.clone();
            }
        }
        Ok(inst)
    }

    fn check_frame_required(&self, frame: &Frame, name: &str, span: Span) -> EvalResult<()> {
        let attrs = frame.attrs.borrow();
        for k in &frame.layout.required {
            if attrs.get(k).is_none_or(|v| v.is_none_or_undefined()) {
                return Err(required_error(k, name, Some(span)));
            }
        }
        for x in attrs.map.values() {
            self.check_required(x, 1)?;
        }
        Ok(())
    }

    /// Whether a config fits schema `ty` the way upstream's runtime type conversion asks
    /// before making an instance of it: every key is an attribute of the schema or a base
    /// (or private, or taken by an index signature). Otherwise, upstream's explanation lines.
    pub(crate) fn config_fits(
        &self,
        ty: &Rc<SchemaType>,
        config: &Dict,
        span: Span,
    ) -> EvalResult<Result<(), Vec<String>>> {
        let layout = self.layout(ty, span)?;
        let mixin = |d: &AttrDecl| layout.parts[d.part].stmt.is_some_and(|s| s.is_mixin());
        let is_attr = |k: &str| {
            layout
                .declared
                .get(k)
                .is_some_and(|d| d.schema_attr && !mixin(d))
        };
        let mut notes = Vec::new();
        if layout.index_sig.is_none() {
            for k in config.map.keys() {
                if !k.starts_with('_') && !is_attr(k) {
                    notes.push(format!("Schema {} does not contain attribute {k}", ty.name));
                }
            }
        }
        if notes.is_empty() {
            return Ok(Ok(()));
        }
        for (k, d) in &layout.declared {
            if d.schema_attr && !d.optional && !mixin(d) && !config.map.contains_key(k) {
                notes.push(format!("Schema {}'s attribute {k} is missing", ty.name));
            }
        }
        Ok(Err(notes))
    }

    /// The required attributes of every schema instance in `v` (recursively).
    pub fn check_required(&self, v: &Value, depth: usize) -> EvalResult<()> {
        if depth > value::MAX_DEPTH {
            return Ok(());
        }
        match v {
            Value::Schema(s) => {
                if let Some(ty) = s.ty.clone().and_then(|t| t.downcast::<SchemaType>().ok())
                    && let Some(l) = ty.layout.borrow().as_ref()
                {
                    for k in &l.required {
                        if s.attrs.get(k).is_none_or(|v| v.is_none_or_undefined()) {
                            return Err(required_error(k, &s.name, s.span));
                        }
                    }
                }
                for x in s.attrs.map.values() {
                    self.check_required(x, depth + 1)?;
                }
            }
            Value::Dict(d) => {
                for x in d.map.values() {
                    self.check_required(x, depth + 1)?;
                }
            }
            Value::List(l) => {
                for x in l.iter() {
                    self.check_required(x, depth + 1)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// `check_required` of a value made outside any schema body or expression (a merge of
    /// instances at the top).
    pub(crate) fn check_required_at_top(&self, v: &Value) -> EvalResult<()> {
        if self.schema_frames.get() == 0 && self.schema_exprs.get() == 0 {
            self.check_required(v, 0)?;
        }
        Ok(())
    }

    fn deprecated(
        &self,
        ctx: &Ctx,
        d: &'static ast::Decorator,
        name: &str,
        span: Span,
    ) -> EvalResult<()> {
        let (mut version, mut reason, mut strict) = (String::new(), String::new(), true);
        if let Some(a) = &d.args {
            for k in &a.keywords {
                let v = self.eval(ctx, &k.value)?;
                match k.name.sym.as_str() {
                    "version" => version = value::to_str(&v),
                    "reason" => reason = value::to_str(&v),
                    "strict" => strict = v.truthy(),
                    other => {
                        return Err(EvalError::new(
                            ErrKind::Evaluation,
                            format!("deprecated() got an unexpected keyword argument '{other}'"),
                            Some(k.name.span),
                        ));
                    }
                }
            }
            if let Some(x) = a.args.first() {
                version = value::to_str(&self.eval(ctx, x)?);
            }
        }
        let mut msg = format!("{name} was deprecated");
        if !version.is_empty() {
            msg.push_str(&format!(" since version {version}"));
        }
        if !reason.is_empty() {
            msg.push_str(&format!(", {reason}"));
        }
        if strict {
            Err(EvalError::new(ErrKind::Evaluation, msg, Some(span)))
        } else {
            self.warnings.borrow_mut().push(format!("warning: {msg}"));
            Ok(())
        }
    }

    /// Rebuild schema instance `inst` with `extra` merged into the config it was made from
    /// (computed attributes see the new values). `ty_args` replaces the type and arguments.
    pub(crate) fn rebuild_merged(
        &self,
        inst: &Value,
        extra: &Value,
        ty_args: Option<(Rc<SchemaType>, super::expr::Args)>,
        span: Span,
    ) -> EvalResult<Option<Value>> {
        let Value::Schema(s) = inst else {
            return Ok(None);
        };
        let (Some(origin), Some(t)) = (&s.origin, &s.ty) else {
            return Ok(None);
        };
        let Ok(ty) = t.clone().downcast::<SchemaType>() else {
            return Ok(None);
        };
        let base = Value::from(s.config());
        let merged = self.union_eval(base, extra, span)?;
        let cfg = merged.as_dict().cloned().unwrap_or_default();
        let (ty, (args, kwargs)) =
            ty_args.unwrap_or((ty, (origin.args.clone(), origin.kwargs.clone())));
        self.enter(span)?;
        self.merging.set(true);
        let r = self.instantiate(&ty, &args, &kwargs, cfg, span);
        self.leave();
        r.map(Some)
    }

    /// A config merged into a nested instance (`B {a: {x = 1}}` onto a default `a = A {}`,
    /// `b | {a: {...}}`): rebuild it from its config plus the new one, so the result is
    /// coerced, recomputed and checked as upstream does. Instances of another schema, or
    /// without a recorded config, are merged attribute by attribute.
    pub(crate) fn rebuild_nested(
        &self,
        inst: &Value,
        extra: &Value,
        span: Span,
    ) -> EvalResult<Option<Value>> {
        let Value::Schema(s) = inst else {
            return Ok(None);
        };
        match extra {
            Value::Schema(e) => self.union_instances(s, e, span),
            other => self.rebuild_merged(inst, other, None, span),
        }
    }

    /// One instance merged with another (`a | b`, `attr: S {...}` over an instance), as
    /// upstream's evaluator does it: every attribute `b` has overrides `a`'s (a dict `b` was
    /// configured with `:` merges into it), then `a`'s schema is instantiated again with the
    /// config keys of both, holding the merged values. So `b`'s defaults win over what `a` was
    /// configured with (`R {c = 5} | R {}` is `R {}`), and `a`'s attributes `b` leaves
    /// undefined stay.
    pub(crate) fn union_instances(
        &self,
        a: &value::SchemaInst,
        b: &value::SchemaInst,
        span: Span,
    ) -> EvalResult<Option<Value>> {
        let (Some(origin), Some(t)) = (&a.origin, &a.ty) else {
            return Ok(None);
        };
        let Ok(ty) = t.clone().downcast::<SchemaType>() else {
            return Ok(None);
        };
        let b_keys: &[(Str, bool)] = b.origin.as_ref().map(|o| &*o.keys).unwrap_or_default();
        let mut merged = a.attrs.map.clone();
        for (k, bv) in &b.attrs.map {
            if matches!(bv, Value::Undefined) {
                continue;
            }
            let unify = b_keys.iter().any(|(bk, replaced)| bk == k && !replaced);
            let nv = match merged.get(k) {
                Some(av) if unify && av.is_config() && bv.is_config() => {
                    self.union_eval(av.clone(), bv, span)?
                }
                // `env += [...]` appends to what the other instance holds
                Some(av @ Value::List(_))
                    if b.attrs.op_of(k).0 == ConfigOp::Insert && matches!(bv, Value::List(_)) =>
                {
                    self.binop(ast::BinOp::Add, av, bv, span)?
                }
                _ => bv.clone(),
            };
            merged.insert(k.clone(), nv);
        }
        let mut cfg = Dict::with_capacity(origin.keys.len() + b_keys.len());
        for (k, _) in origin.keys.iter().chain(b_keys) {
            if cfg.map.contains_key(k) {
                continue;
            }
            if let Some(v) = merged.get(k) {
                cfg.map.insert(k.clone(), v.clone());
                cfg.set_op(k.clone(), ConfigOp::Override, None);
            }
        }
        self.enter(span)?;
        self.merging.set(true);
        let r = self.instantiate(&ty, &origin.args, &origin.kwargs, cfg, span);
        self.leave();
        r.map(Some)
    }

    /// The origin record of an instance built from `config`; shared between instances when
    /// there are no arguments (most configs of one schema have the same keys).
    fn origin_of(
        &self,
        config: &Dict,
        args: &[Value],
        kwargs: &[(Str, Value)],
    ) -> Rc<value::Origin> {
        let keys: Vec<(Str, bool)> = config
            .map
            .keys()
            .map(|k| (k.clone(), config.op_of(k).0 != ConfigOp::Union))
            .collect();
        let mut cache = self.origins.borrow_mut();
        if args.is_empty()
            && kwargs.is_empty()
            && let Some(o) = cache.get(keys.as_slice())
        {
            return o.clone();
        }
        let keys: value::ConfigKeys = match cache.get(keys.as_slice()) {
            Some(o) => o.keys.clone(),
            None => keys.into(),
        };
        let o = Rc::new(value::Origin {
            keys: keys.clone(),
            args: args.to_vec(),
            kwargs: kwargs.to_vec(),
        });
        if args.is_empty() && kwargs.is_empty() {
            cache.insert(keys, o.clone());
        }
        o
    }

    /// Merge `b` into `a`, rebuilding the schema instances that receive config (no conflict
    /// check: a config laid over defaults, or configs already checked).
    pub(crate) fn union_eval(&self, a: Value, b: &Value, span: Span) -> EvalResult<Value> {
        let rb = |i: &Value, x: &Value| self.rebuild_nested(i, x, span);
        value::union_with(a, b, false, &rb).map_err(|e| e.or_span(span))
    }

    /// [`Self::union_eval`] with upstream's conflict check (`|`, repeated `:` keys of one
    /// config): unequal scalars or lists under a `:` key are an error.
    pub(crate) fn union_checked(&self, a: Value, b: &Value, span: Span) -> EvalResult<Value> {
        let rb = |i: &Value, x: &Value| self.rebuild_nested(i, x, span);
        value::union_with(a, b, true, &rb).map_err(|e| e.or_span(span))
    }

    /// A schema's or a rule's checks. A failed check is upstream's "Instance check failed" at
    /// the instantiation with the condition as a note; that of a rule called (`R()`, `alone`)
    /// is the condition's message alone, at the condition.
    fn run_checks(
        &self,
        c: &Ctx,
        checks: &'static [ast::CheckExpr],
        span: Span,
        alone: bool,
    ) -> EvalResult<()> {
        for ch in checks {
            if let Some(cond) = &ch.if_cond
                && !self.eval(c, cond)?.truthy()
            {
                continue;
            }
            if !self.eval(c, &ch.test)?.truthy() {
                let msg = match &ch.msg {
                    Some(m) => format!(
                        "Check failed on the condition: {}",
                        value::to_str(&self.eval(c, m)?)
                    ),
                    None => "Check failed on the condition".to_string(),
                };
                if alone {
                    return Err(EvalError::new(ErrKind::Schema, msg, Some(ch.span)));
                }
                return Err(
                    EvalError::new(ErrKind::Schema, "Instance check failed", Some(span))
                        .with_note(ch.span, msg),
                );
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_rule(
        &self,
        ty: &Rc<SchemaType>,
        r: &'static ast::RuleStmt,
        args: &[Value],
        kwargs: &[(Str, Value)],
        config: Dict,
        span: Span,
        by_call: bool,
    ) -> EvalResult<Value> {
        for p in &r.parents {
            let v = self.eval_identifier(&ty.def_ctx, p)?;
            if let Some(pt) = as_schema_type(&v) {
                self.instantiate(&pt, args, kwargs, config.clone(), span)?;
            }
        }
        let scope = Scope::new(None);
        if let Some(ps) = &r.params {
            for (i, p) in ps.iter().enumerate() {
                let v = if i < args.len() {
                    args[i].clone()
                } else if let Some((_, v)) =
                    kwargs.iter().find(|(k, _)| &**k == p.name.sym.as_str())
                {
                    v.clone()
                } else if let Some(d) = &p.default {
                    self.eval(&ty.def_ctx, d)?
                } else {
                    Value::None
                };
                scope.vars.borrow_mut().insert(p.name.sym, v);
            }
        }
        // a rule for a protocol has the protocol's attributes (defaults and types included),
        // set from its config, and shows them as its value
        let mut attrs = Dict::new();
        let mut vars = config.clone();
        if let Some(h) = &r.for_host {
            let v = self.eval_identifier(&ty.def_ctx, h)?;
            if let Some(pt) = as_schema_type(&v)
                && let Value::Schema(inst) = self.instantiate(&pt, &[], &[], config, span)?
            {
                attrs = inst.attrs.clone();
                vars = attrs.clone();
            }
        }
        for (k, v) in &vars.map {
            scope.vars.borrow_mut().insert(Symbol::intern(k), v.clone());
        }
        let c = Ctx {
            locals: Some(scope),
            schema: None,
            in_lambda: false,
            ..ty.def_ctx.clone()
        };
        self.run_checks(&c, &r.checks, span, by_call)?;
        Ok(Value::Schema(Rc::new(SchemaInst {
            name: ty.name.clone(),
            pkg: ty.pkgpath.clone(),
            attrs,
            ty: Some(ty.clone() as Rc<dyn std::any::Any>),
            span: Some(span),
            origin: None,
        })))
    }

    fn run_schema_stmt(&self, fr: &Rc<Frame>, i: usize) -> EvalResult<()> {
        if fr.state.borrow()[i] != PENDING {
            return Ok(());
        }
        fr.state.borrow_mut()[i] = RUNNING;
        let (st, pi) = fr.layout.body[i];
        let ctx = Ctx {
            schema: Some(fr.clone()),
            ..fr.ctxs[pi].clone()
        };
        let level = fr.layout.part_level[pi];
        let outer = fr.level.replace(level);
        if fr.has_insert
            && let StmtKind::SchemaAttr(a) = &st.kind
            && a.value.is_none()
        {
            self.reapply_insert(fr, a.name.sym, level, st.span)?;
        }
        let r = self.in_pkg(&ctx.pkg, || self.exec_stmt(&ctx, st));
        fr.level.set(outer);
        fr.state.borrow_mut()[i] = DONE;
        r?;
        // upstream converts an attribute's value to its type where the attribute is declared
        // (a config dict becomes the schema instance, defaults included), so the statements
        // after it read the instance
        let StmtKind::SchemaAttr(a) = &st.kind else {
            return Ok(());
        };
        let cur = fr.attrs.borrow().get(a.name.sym.as_str()).cloned();
        if let Some(d) = fr.layout.declared.get(a.name.sym.as_str())
            && let Some(t) = d.ty
            && let Some(v) = cur
            && v.is_config()
            && !matches!(v, Value::Schema(_))
        {
            let c = Ctx {
                schema: Some(fr.clone()),
                ..fr.ctxs[d.part].clone()
            };
            if let Ok(Some(nv)) = self.try_convert_value(&c, &v, t, st.span) {
                fr.attrs
                    .borrow_mut()
                    .map
                    .insert(Str::from(a.name.sym.as_str()), nv);
            }
        }
        Ok(())
    }

    /// Upstream's evaluator keeps one record of evaluated attributes per inheritance level:
    /// the first time code of a derived level touches an attribute (reads it, or declares it
    /// again without a value), the base levels' statements for it run again. Those are
    /// idempotent except for a declaration without a value under a `+=` config entry, which
    /// appends the entry once more each time it runs (`labels += [1]` on a schema whose child
    /// reads `labels` yields `[1, 1]`). That effect, and only it, is reproduced here.
    fn reapply_insert(
        &self,
        fr: &Rc<Frame>,
        name: Symbol,
        level: u32,
        span: Span,
    ) -> EvalResult<()> {
        if level == 0 || fr.touched.borrow().contains(&(level, name)) {
            return Ok(());
        }
        fr.touched.borrow_mut().push((level, name));
        let k = name.as_str();
        let Some(cv) = fr.config.map.get(k) else {
            return Ok(());
        };
        if fr.config.op_of(k).0 != ConfigOp::Insert {
            return Ok(());
        }
        let Some(setters) = fr.layout.setters.get(&name) else {
            return Ok(());
        };
        let mut times = 0;
        for &i in setters {
            let (st, pi) = fr.layout.body[i];
            let valueless = matches!(&st.kind, StmtKind::SchemaAttr(a) if a.value.is_none());
            let l = fr.layout.part_level[pi];
            match (l.cmp(&level), valueless) {
                (std::cmp::Ordering::Greater, _) | (std::cmp::Ordering::Equal, true) => {}
                (std::cmp::Ordering::Less, true) => times += 1,
                // set by this level's own statement (nothing runs again), or by a base
                // statement with a value (which resets the attribute when it runs again)
                (_, false) => return Ok(()),
            }
        }
        for _ in 0..times {
            let cur = fr
                .attrs
                .borrow()
                .get(k)
                .cloned()
                .unwrap_or(Value::Undefined);
            let nv = if cur.is_none_or_undefined() {
                cv.clone()
            } else {
                self.binop(ast::BinOp::Add, &cur, cv, span)?
            };
            fr.attrs.borrow_mut().map.insert(Str::from(k), nv);
        }
        Ok(())
    }

    /// A name read inside a schema body: its attribute (after running pending assignments).
    pub(crate) fn schema_lookup(&self, fr: &Rc<Frame>, name: Symbol) -> EvalResult<Option<Value>> {
        if let Some(idx) = fr.layout.setters.get(&name) {
            // a name read while one of its own assignments runs sees its current value
            if !idx.iter().any(|&i| fr.state.borrow()[i] == RUNNING) {
                for &i in idx {
                    if fr.state.borrow()[i] == PENDING {
                        self.run_schema_stmt(fr, i)?;
                    }
                }
            }
        }
        if fr.has_insert {
            let span = Span::default();
            self.reapply_insert(fr, name, fr.level.get(), span)?;
        }
        let a = fr.attrs.borrow();
        match a.map.get(name.as_str()) {
            Some(v) => Ok(Some(v.clone())),
            None => Ok(None),
        }
    }

    /// Set an attribute from the body: the config entry for it is laid on top.
    pub(crate) fn schema_set(
        &self,
        _ctx: &Ctx,
        fr: &Rc<Frame>,
        name: Symbol,
        v: Value,
        span: Span,
    ) -> EvalResult<()> {
        let k = name.as_str();
        let nv = match fr.config.map.get_key_value(k) {
            // `attr: None` in a config keeps the schema's default
            Some((_, Value::None))
                if fr.config.op_of(k).0 == ConfigOp::Union && !v.is_none_or_undefined() =>
            {
                v
            }
            Some((kk, cv)) => {
                let (op, idx) = fr.config.op_of(kk);
                let mut d = Dict::new();
                d.map.insert(kk.clone(), v);
                let rb = |i: &Value, x: &Value| self.rebuild_nested(i, x, span);
                value::merge_entry_with(&mut d, kk, cv, op, idx, false, &rb)
                    .map_err(|e| e.or_span(span))?;
                d.map.swap_remove(&**kk).unwrap_or(Value::Undefined)
            }
            None => v,
        };
        let mut a = fr.attrs.borrow_mut();
        match a.map.get_mut(k) {
            Some(slot) => *slot = nv,
            None => {
                a.map.insert(Str::from(k), nv);
            }
        }
        Ok(())
    }

    pub(crate) fn exec_schema_attr(
        &self,
        ctx: &Ctx,
        fr: &Rc<Frame>,
        attr: &'static ast::SchemaAttr,
        span: Span,
    ) -> EvalResult<()> {
        let Some(val) = &attr.value else {
            return Ok(());
        };
        // a config entry that overrides the attribute (`a = v`) replaces its default, which
        // upstream then never evaluates (no errors, no instances from it)
        let k = attr.name.sym.as_str();
        if !matches!(attr.op, Some(ast::AttrOp::Aug(_)))
            && fr.config.map.contains_key(k)
            && fr.config.op_of(k) == (ConfigOp::Override, None)
        {
            return self.schema_set(ctx, fr, attr.name.sym, Value::Undefined, span);
        }
        let v = self.eval(ctx, val)?;
        let v = match attr.op {
            Some(ast::AttrOp::Aug(op)) => {
                let cur = fr
                    .attrs
                    .borrow()
                    .get(attr.name.sym.as_str())
                    .cloned()
                    .unwrap_or(Value::Undefined);
                if cur.is_none_or_undefined() {
                    v
                } else {
                    self.binop(op.bin_op(), &cur, &v, span)?
                }
            }
            _ => v,
        };
        self.schema_set(ctx, fr, attr.name.sym, v, span)
    }
}

fn decorator_name(d: &ast::Decorator) -> String {
    d.name
        .names
        .iter()
        .map(|n| n.sym.as_str())
        .collect::<Vec<_>>()
        .join(".")
}

pub(crate) fn index_sig_str(is: &ast::IndexSignature) -> String {
    format!(
        "[{}{}]: {}",
        is.key_name
            .map(|n| format!("{}: ", n.sym))
            .unwrap_or_default(),
        super::types::type_str(&is.key_ty),
        super::types::type_str(&is.value_ty)
    )
}

fn similar(a: &str, b: &str) -> bool {
    // cheap edit-distance-1-ish suggestion, as upstream's "did you mean"
    let (la, lb) = (a.chars().count(), b.chars().count());
    if la.abs_diff(lb) > 2 {
        return false;
    }
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    if common >= la.min(lb).saturating_sub(1) && common > 0 {
        return true;
    }
    // one mistyped letter (`wirker` for `worker`)
    la == lb && la >= 3 && a.chars().zip(b.chars()).filter(|(x, y)| x != y).count() == 1
}

fn required_error(attr: &str, schema: &str, span: Option<Span>) -> EvalError {
    EvalError::new(
        ErrKind::Evaluation,
        format!("attribute '{attr}' of {schema} is required and can't be None or Undefined"),
        span,
    )
}
