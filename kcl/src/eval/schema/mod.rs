//! Schema types and instantiation: parent first, then own body, then mixins; the config is laid
//! over the body's defaults as each attribute is set; then types, required attributes and
//! `check:` blocks. The type's layout is in `layout.rs`, the body's statements in `body.rs`,
//! the checks in `checks.rs`, an index signature's keys in `index_sig.rs`, merging instances in
//! `merge.rs`, and the key order of a schema defined before its base in `forward.rs`.

mod body;
mod checks;
pub(crate) mod forward;
mod index_sig;
mod layout;
mod lazy;
mod merge;

use checks::{decorator_name, similar};
pub(crate) use index_sig::index_sig_str;
pub(crate) use merge::keys_as_overrides;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use indexmap::IndexMap;
use rustc_hash::{FxHashMap, FxHashSet};

use super::walked::line_start;
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
    /// The keys of `declared` as symbols (looked up by name reads in the body).
    declared_syms: rustc_hash::FxHashSet<Symbol>,
    /// Per body statement: the index in `declared` of the attribute it declares, when that
    /// attribute's type may convert its value (see `AttrDecl::converts`).
    converting: Vec<Option<usize>>,
    /// Per attribute: the statements setting it, and where it is checked (one table: every
    /// read in a body looks it up).
    setters: FxHashMap<Symbol, Setters>,
    /// Attributes a statement of theirs reads while assigning them (see `lazy.rs`).
    self_reading: FxHashSet<Symbol>,
    /// Attributes declared somewhere without a value.
    valueless: FxHashSet<Symbol>,
    /// Every attribute's setters as upstream's lazy scope lists them (when `self_reading` or
    /// `valueless` is not empty).
    lazy_setters: lazy::LazySetters,
    /// Attributes read each other in a circle (see `lazy.rs`).
    cyclic: bool,
    index_sig: Option<(&'static ast::IndexSignature, usize)>,
    /// Attribute names in declaration order (the instance's key order).
    order: Vec<Str>,
    /// Non-optional attributes.
    pub required: Vec<Str>,
    /// `@deprecated` attributes with their decorator.
    /// Attribute decorators other than `deprecated`/`info` (an error when instantiated).
    unknown_decorators: Vec<(Str, &'static ast::Decorator, usize)>,
}

impl SchemaType {
    pub fn from_stmt(s: &'static ast::SchemaStmt, ctx: Ctx, _nested: bool) -> Value {
        Self::callable(s.name.sym.as_str(), Some(s), None, ctx)
    }
    pub fn from_rule(r: &'static ast::RuleStmt, ctx: Ctx) -> Value {
        Self::callable(r.name.sym.as_str(), None, Some(r), ctx)
    }

    /// The type as the value its name is bound to: a function that instantiates it.
    fn callable(
        name: &str,
        stmt: Option<&'static ast::SchemaStmt>,
        rule: Option<&'static ast::RuleStmt>,
        ctx: Ctx,
    ) -> Value {
        let name = Str::from(name);
        let t = SchemaType {
            name: name.clone(),
            pkgpath: Str::from(ctx.pkg.path.as_str()),
            stmt,
            rule,
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

/// An attribute's statements in a schema body.
struct Setters {
    /// The statements assigning it.
    stmts: Vec<usize>,
    /// For an attribute declared with a type of no schema, the statement declaring it first
    /// (a read from a statement before it checks the value against the type there, as
    /// upstream's lazy evaluation runs that statement); `usize::MAX` for none.
    checked_at: usize,
}

impl Default for Setters {
    fn default() -> Self {
        Setters {
            stmts: Vec::new(),
            checked_at: usize::MAX,
        }
    }
}

/// A declared attribute.
#[derive(Clone)]
pub struct AttrDecl {
    pub ty: Option<&'static ast::Type>,
    /// `ty` names a schema or alias somewhere, so a config value may change when converted to
    /// it; any other type leaves a fitting value as it is.
    pub converts: bool,
    pub optional: bool,
    /// Index of the schema (in the layout's parts) that declares it.
    pub part: usize,
    pub schema_attr: bool,
    /// Where it is declared: upstream's runtime checks a value against the type there.
    pub at: Option<Span>,
    /// The same place, for the runtime position (see [`Evaluator::last_pos`]).
    pub at_pos: Option<&'static Span>,
}

/// The instance being built.
pub struct Frame {
    pub attrs: RefCell<Dict>,
    pub config: Rc<Dict>,
    layout: Rc<Layout>,
    /// Per-part evaluation contexts (definition package + parameter scope).
    ctxs: Vec<Ctx>,
    state: RefCell<Vec<u8>>,
    /// The body statement running (`usize::MAX` between statements).
    running: Cell<usize>,
    /// Upstream's lazy scope, when the instance has attributes whose statements give another
    /// value when run again (see `lazy.rs`).
    lazy: Option<Box<lazy::SchemaLazy>>,
    /// Where the instance is made (an attribute's `@deprecated` is reported there).
    span: Span,
}

impl Frame {
    /// Whether the schema (or a base or mixin) declares or assigns attribute `name`.
    pub(crate) fn declares(&self, name: Symbol) -> bool {
        self.layout.declared_syms.contains(&name)
    }
}

impl SchemaType {
    /// Drops what ties the type to itself (its layout lists the type among its parts; its
    /// instances hold the type): called when the run ends (see `Pkg::release_values`).
    pub(crate) fn release(&self) {
        let layout = self.layout.borrow_mut().take();
        let instances = std::mem::take(&mut *self.instances.borrow_mut());
        drop((layout, instances));
    }
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

/// Whether `inst` was made by schema `ty` itself, no subschema of it (upstream's `as`).
pub fn is_exact_instance(inst: &SchemaInst, ty: &Rc<SchemaType>) -> bool {
    let Some(t) = &inst.ty else { return false };
    t.clone()
        .downcast::<SchemaType>()
        .is_ok_and(|cur| same_schema(&cur, ty))
}

/// One schema: the same type, or the same name in related package paths (one file can be
/// loaded both as part of its folder package and on its own).
fn same_schema(a: &Rc<SchemaType>, b: &Rc<SchemaType>) -> bool {
    let related = |x: &str, y: &str| {
        x == y || x.starts_with(&format!("{y}.")) || y.starts_with(&format!("{x}."))
    };
    Rc::ptr_eq(a, b) || (a.name == b.name && related(&a.pkgpath, &b.pkgpath))
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
    /// The value of a schema's or rule's parameter `p` (the `i`th): the positional argument,
    /// else the keyword argument, else its default (evaluated where the type is defined), else
    /// `None`.
    pub(crate) fn param_value(
        &self,
        ty: &SchemaType,
        p: &'static ast::Param,
        i: usize,
        args: &[Value],
        kwargs: &[(Str, Value)],
    ) -> EvalResult<Value> {
        Ok(if i < args.len() {
            args[i].clone()
        } else if let Some((_, v)) = kwargs.iter().find(|(k, _)| &**k == p.name.sym.as_str()) {
            v.clone()
        } else if let Some(d) = &p.default {
            self.eval(&ty.def_ctx, d)?
        } else {
            Value::None
        })
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
            if matches!(ty_val, Value::Schema(_)) {
                // (a `:` entry must agree with what the instance holds, as in `inst | {..}`;
                // upstream's runtime stands at the config's last entry)
                value::check_union(ty_val, &cfg, 0)
                    .map_err(|e| self.rt(e, self.walked_point(span)))?;
            }
            if matches!(ty_val, Value::Schema(_))
                && let Some(v) = self.rebuild_merged(ty_val, &cfg, None, span)?
            {
                return Ok(v);
            }
            // `dict {..}`-like forms on a non-schema: upstream unions the config into the
            // value (None takes it as it is)
            if ty_val.is_config() {
                return value::union(ty_val, &cfg, false).map_err(|e| self.rt(e, span));
            }
            if ty_val.is_none_or_undefined() {
                return Ok(cfg);
            }
            let msg = if matches!(ty_val, Value::List(_)) {
                format!(
                    "union failure, expect \"list\", got \"{}\"",
                    cfg.type_name()
                )
            } else {
                format!(
                    "unsupported operand type(s) for |: '\"{}\"' and '\"{}\"'",
                    ty_val.type_name(),
                    cfg.type_name()
                )
            };
            return Err(EvalError::new(ErrKind::Evaluation, msg, Some(span)));
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

    /// Where upstream's runtime stands once an instance of `ty` is made: the last check's
    /// condition, else the last statement of the body that runs last.
    pub(crate) fn body_end_pos(&self, ty: &Rc<SchemaType>, span: Span) -> Option<&'static Span> {
        let layout = self.layout(ty, span).ok()?;
        let stmts = || layout.parts.iter().rev().filter_map(|p| p.stmt);
        stmts()
            .find_map(|s| s.checks.last().map(|c| &c.test.span))
            .or_else(|| stmts().find_map(|s| s.body.last().map(|b| &b.span)))
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
        // (upstream's runtime position is back at the caller's once the body has run)
        let caller_pos = self.last_pos.get();
        self.schema_frames.set(self.schema_frames.get() + 1);
        let r = self.instantiate_frame(ty, args, kwargs, config, span, caller_pos, by_call);
        self.schema_frames.set(self.schema_frames.get() - 1);
        if r.is_ok() {
            self.last_pos.set(caller_pos);
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn instantiate_frame(
        &self,
        ty: &Rc<SchemaType>,
        args: &[Value],
        kwargs: &[(Str, Value)],
        config: Dict,
        span: Span,
        caller_pos: Option<&'static Span>,
        by_call: bool,
    ) -> EvalResult<Value> {
        let merged = self.merging.replace(false);
        // (made again by a merge, upstream's runtime reports a failed check on the line it
        // walked last before the merge: it walks nothing of the merge itself)
        let merge_line = merged.then(|| self.program_end_pos()).flatten();
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
        // each schema of the chain binds its own parameters from the same arguments (by
        // position and by name, as upstream calls every base with the call's arguments); a
        // mixin's body sees the parameters of the schema it is mixed into
        let mut part_scopes: Vec<Rc<Scope>> = Vec::with_capacity(layout.parts.len());
        for t in &layout.parts {
            if t.stmt.is_some_and(|s| s.is_mixin())
                && let Some(host) = part_scopes.last()
            {
                part_scopes.push(host.clone());
                continue;
            }
            let sc = Scope::new(None);
            if let Some(ps) = t.stmt.and_then(|s| s.params.as_ref()) {
                for (i, p) in ps.iter().enumerate() {
                    if let Some(e) = crate::eval::stmt::dotted_param_error(p.name.sym.as_str()) {
                        return Err(self.rt(e, span));
                    }
                    let v = self.param_value(t, p, i, args, kwargs)?;
                    let v = match &p.ty {
                        Some(pt) if !v.is_none_or_undefined() => {
                            self.convert_type(&t.def_ctx, v, pt, span)?
                        }
                        _ => v,
                    };
                    sc.vars.borrow_mut().insert(p.name.sym, v);
                }
            }
            part_scopes.push(sc);
        }
        for t in &layout.parts {
            for d in t.stmt.map(|s| s.decorators.as_slice()).unwrap_or_default() {
                match decorator_name(d).as_str() {
                    // called (`S()`), upstream reports it where it last walked: the
                    // decorator's arguments, or without any the last statement of the body
                    // it ran first; instantiated (`S {}`), at the expression
                    "deprecated" => {
                        let bare = by_call && d.args.is_none();
                        let at = match t.stmt.and_then(|s| last_walked_stmt(&s.body)) {
                            Some(end) if bare => *end,
                            _ => span,
                        };
                        self.deprecated_in(&t.def_ctx, d, &t.name, at, by_call && !bare)?
                    }
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
        let ctxs: Vec<Ctx> = layout
            .parts
            .iter()
            .zip(&part_scopes)
            .map(|(t, sc)| Ctx {
                locals: Some(sc.clone()),
                in_lambda: false,
                schema: None,
                ..t.def_ctx.clone()
            })
            .collect();
        let mut attrs = Dict::with_capacity(layout.order.len() + config.len());
        match ty.stmt.and_then(|st| {
            let pkg = &ty.def_ctx.pkg;
            let running = pkg.top.get().checked_sub(1);
            pkg.forward
                .as_ref()?
                .steps(st as *const ast::SchemaStmt as usize, running)
        }) {
            Some(steps) => {
                for k in layout.forward_order(&steps) {
                    attrs.map.insert(k, Value::Undefined);
                }
            }
            None => {
                for k in &layout.order {
                    attrs.map.insert(k.clone(), Value::Undefined);
                }
            }
        }
        let lazy = lazy::SchemaLazy::new(&layout, &config);
        // the config is visible from the start (under upstream's lazy scope, an attribute
        // with statements gets its entry where they set it)
        for (k, v) in &config.map {
            let (op, _) = config.op_of_key(k);
            if lazy
                .as_ref()
                .is_some_and(|lz| lz.is_volatile(Symbol::intern(k)))
            {
                continue;
            }
            let laid = |cur: &Value| match op {
                ConfigOp::Insert if !cur.is_none_or_undefined() => {
                    value::binary(value::BinOp::Add, cur, v).unwrap_or(v.clone())
                }
                _ => v.clone(),
            };
            match attrs.map.get_mut(k) {
                Some(slot) => *slot = laid(slot),
                None => {
                    attrs.map.insert(k.clone(), laid(&Value::Undefined));
                }
            }
        }
        let n = layout.body.len();
        let frame = Rc::new(Frame {
            attrs: RefCell::new(attrs),
            config,
            layout: layout.clone(),
            ctxs,
            state: RefCell::new(vec![PENDING; n]),
            running: Cell::new(usize::MAX),
            lazy,
            span,
        });
        let mut level = 0;
        for i in 0..n {
            if let Some(lz) = &frame.lazy {
                let l = layout.part_level[layout.body[i].1];
                if l != level {
                    lz.enter_level(level);
                    level = l;
                }
                // a statement read ahead of its turn runs again in it, as upstream's
                if lz.stmts[i] && frame.state.borrow()[i] == DONE {
                    frame.state.borrow_mut()[i] = PENDING;
                }
            }
            self.run_schema_stmt(&frame, i)?;
        }
        // the checks read at the instance's own level (which may have no statements)
        if let Some(lz) = &frame.lazy
            && layout.part_level.last().is_some_and(|l| *l != level)
        {
            lz.enter_level(level);
        }

        // unknown config keys (an index signature takes any key here: one whose key type
        // lists strings refuses others in upstream's resolver only, as ours does)
        for k in frame.config.map.keys() {
            let unknown = !layout.declared.contains_key(k) && layout.index_sig.is_none();
            // upstream's resolver skips an empty key: only the run time refuses it
            if unknown
                && (merged
                    || k.is_empty()
                    || self.dynamic_keys.borrow().contains(k)
                    || self.opts.unchecked_configs.contains(&span))
            {
                let msg = format!("No attribute named '{k}' in the schema '{}'", ty.name);
                // upstream's runtime is then on the body's last statement
                let at = layout.body.last().map_or(span, |(st, _)| st.span);
                return Err(EvalError::new(ErrKind::Evaluation, msg, Some(at)));
            }
            if unknown {
                let cands: Vec<&str> = layout
                    .declared
                    .keys()
                    .filter(|d| similar(d, k))
                    .map(|d| &**d)
                    .collect();
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
        // (the node the body walked last, for where the program ends: see `program_end_pos`)
        let body_walked = self.last_pos.get();
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
                // (upstream converts the value at its declaration: its runtime stands there)
                if d.at_pos.is_some() {
                    self.last_pos.set(d.at_pos);
                }
                // upstream reports the declaration's line; asked for, the instance's place
                // follows as a note, so an error inside a vendored model names the user's file
                let nv = self
                    .convert_type(&c, v, t, d.at.unwrap_or(span))
                    .map_err(|mut e| {
                        if self.opts.note_instances
                            && d.at.is_some()
                            && e.span == d.at
                            && span.loc().line > 0
                        {
                            e.footer
                                .push(format!("the instance is made at {}", span.loc()));
                        }
                        e
                    })?;
                attrs.map.insert(k.clone(), nv);
            }
        }
        // the extra keys the checks run for (see `index_sig.rs`)
        let extra_keys =
            self.index_signature_keys(&frame, &layout, &mut attrs, span, body_walked)?;
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
        let has_checks = layout
            .parts
            .iter()
            .any(|t| t.stmt.is_some_and(|s| !s.checks.is_empty()));
        if top && !keyed {
            // (instantiated, `S {}`, upstream reports a missing attribute at the expression;
            // called, `S()`, where its body last stood)
            self.last_pos
                .set(if by_call { body_walked } else { caller_pos });
            self.check_frame_required(&frame, &ty.name, span)?;
        }
        // checks, base first; with an index signature key name, once per extra key
        let sig_keys: Vec<Value> = if keyed { extra_keys } else { Vec::new() };
        for (pi, t) in layout.parts.iter().enumerate() {
            let Some(s) = t.stmt else { continue };
            if s.checks.is_empty() {
                continue;
            }
            let c = Ctx {
                schema: Some(frame.clone()),
                ..frame.ctxs[pi].clone()
            };
            // (a base's checks read through the cache its level ended with)
            let level = layout.part_level[pi];
            if let Some(lz) = &frame.lazy {
                lz.swap_level_cache(level);
                lz.forget_insert_declared(level);
            }
            let r = (|| -> EvalResult<()> {
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
                Ok(())
            })();
            if let Some(lz) = &frame.lazy {
                lz.swap_level_cache(level);
            }
            r.map_err(|mut e| {
                if let Some(p) = merge_line
                    && e.span == Some(span)
                    && e.msg == "Instance check failed"
                {
                    e.span = Some(line_start(p));
                }
                e
            })?;
        }
        let walked = if has_checks {
            self.last_pos.get()
        } else {
            body_walked
        };
        if top && keyed {
            self.last_pos.set(caller_pos);
            self.check_frame_required(&frame, &ty.name, span)?;
        }
        if let Some(inner) = walked {
            self.body_walked.set(Some((inner, caller_pos)));
        }
        if let Some(lz) = &frame.lazy {
            lz.done.set(true);
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
                    let (op, idx) = frame.config.op_of_key(k);
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
}

/// The statement of `body` run last when all of it runs (into an `if`'s first branch).
fn last_walked_stmt(body: &'static [ast::Stmt]) -> Option<&'static Span> {
    let last = body.last()?;
    match &last.kind {
        ast::StmtKind::If(i) => last_walked_stmt(&i.body).or(Some(&last.span)),
        _ => Some(&last.span),
    }
}
