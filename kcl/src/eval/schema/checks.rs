//! What an instance must satisfy once built: required attributes, `check:` blocks, rules,
//! deprecated attributes, and whether a config fits a schema.

use super::*;

impl Evaluator {
    pub(super) fn check_frame_required(
        &self,
        frame: &Frame,
        name: &str,
        span: Span,
    ) -> EvalResult<()> {
        let attrs = frame.attrs.borrow();
        for k in &frame.layout.required {
            if attrs.get(k).is_none_or(|v| v.is_none_or_undefined()) {
                return Err(required_error(
                    k,
                    name,
                    self.last_pos.get().copied().or(Some(span)),
                ));
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
        let mut extra = extra_keys(ty, &layout, config);
        if extra.is_empty() {
            return Ok(Ok(()));
        }
        extra.extend(missing_attrs(ty, &layout, config));
        Ok(Err(extra))
    }

    /// Upstream's explanation of converting `config` to schema `ty`: the keys the schema does
    /// not have (none when it has an index signature), then its required attributes the
    /// config lacks.
    pub(crate) fn conversion_notes(
        &self,
        ty: &Rc<SchemaType>,
        config: &Dict,
        span: Span,
    ) -> EvalResult<(Vec<String>, Vec<String>)> {
        let layout = self.layout(ty, span)?;
        Ok((
            extra_keys(ty, &layout, config),
            missing_attrs(ty, &layout, config),
        ))
    }

    /// Upstream's failed conversion of an empty config to the schema type `t` of an
    /// attribute: `expect S, got dict` with each required attribute as missing (defaults or
    /// not). `None` when `t` is no schema.
    pub(super) fn empty_config_mismatch(
        &self,
        ctx: &Ctx,
        t: &'static ast::Type,
        span: Span,
    ) -> Option<EvalError> {
        let ast::TypeKind::Named(id) = &t.kind else {
            return None;
        };
        let tv = self.eval_identifier(&crate::eval::types::type_ctx(ctx), id);
        let st = as_schema_type(&tv.ok()?)?;
        let layout = self.layout(&st, span).ok()?;
        let mut msg = format!("expect {}, got dict. For details:", self.type_src(ctx, t));
        let shown = self.details_name(id, &st);
        for (k, d) in &layout.declared {
            let mixin = layout.parts[d.part].stmt.is_some_and(|s| s.is_mixin());
            if d.schema_attr && !d.optional && !mixin {
                msg.push_str(&format!("\nSchema {shown}'s attribute {k} is missing"));
            }
        }
        // (upstream's conversion ran the schema's body first: its runtime stands there)
        let at = self.body_end_pos(&st, span).copied().unwrap_or(span);
        Some(EvalError::new(ErrKind::Evaluation, msg, Some(at)))
    }

    /// Whether a required attribute of instance `s` has no value.
    pub(super) fn misses_required(&self, s: &SchemaInst) -> bool {
        first_missing_required(s).is_some()
    }

    /// The required attributes of instance `v` itself, reported at `at`.
    pub(crate) fn check_own_required(&self, v: &Value, at: Span) -> EvalResult<()> {
        if let Value::Schema(s) = v
            && let Some(k) = first_missing_required(s)
        {
            return Err(required_error(&k, &s.name, Some(at)));
        }
        Ok(())
    }

    /// The required attributes of every schema instance in `v` (recursively).
    pub fn check_required(&self, v: &Value, depth: usize) -> EvalResult<()> {
        if depth > value::MAX_DEPTH {
            return Ok(());
        }
        match v {
            Value::Schema(s) => {
                if let Some(k) = first_missing_required(s) {
                    return Err(required_error(&k, &s.name, s.span));
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

    pub(super) fn deprecated(
        &self,
        ctx: &Ctx,
        d: &'static ast::Decorator,
        name: &str,
        span: Span,
    ) -> EvalResult<()> {
        self.deprecated_in(ctx, d, name, span, false)
    }

    /// `at_walked`: reported where upstream's runtime last stood (a schema or rule called).
    pub(super) fn deprecated_in(
        &self,
        ctx: &Ctx,
        d: &'static ast::Decorator,
        name: &str,
        span: Span,
        at_walked: bool,
    ) -> EvalResult<()> {
        let (mut version, mut reason, mut strict) = (String::new(), String::new(), true);
        if let Some(a) = &d.args {
            for k in &a.keywords {
                let v = self.eval(ctx, &k.value)?;
                // (None is no text: upstream reads a string argument or nothing)
                let text = |v: &Value| match v {
                    Value::None | Value::Undefined => String::new(),
                    v => value::to_str(v),
                };
                match k.name.sym.as_str() {
                    "version" => version = text(&v),
                    "reason" => reason = text(&v),
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
            // upstream's runtime reads the keywords only: positional arguments are
            // evaluated and left unused
            for x in &a.args {
                self.eval(ctx, x)?;
            }
        }
        // upstream's wording: the blank after "deprecated" stays when there is no version
        let mut msg = format!("{name} was deprecated ");
        if !version.is_empty() {
            msg.push_str(&format!("since version {version}"));
        }
        if !reason.is_empty() {
            msg.push_str(&format!(", {reason}"));
        }
        if strict {
            let at = if at_walked {
                self.walked_point(span)
            } else {
                span
            };
            Err(EvalError::new(ErrKind::Evaluation, msg, Some(at)))
        } else {
            self.warnings.borrow_mut().push(format!("warning: {msg}"));
            Ok(())
        }
    }

    /// A schema's or a rule's checks. A failed check is upstream's "Instance check failed" at
    /// the instantiation with the condition as a note; that of a rule called (`R()`, `alone`)
    /// is the condition's message alone, at the condition.
    pub(super) fn run_checks(
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
                // upstream's runtime reports the line it last walked: the message, or the
                // condition's last part (inside a lambda it called, too)
                let at = self.walked_point(ch.span);
                if alone {
                    return Err(EvalError::new(ErrKind::Schema, msg, Some(at)));
                }
                return Err(
                    EvalError::new(ErrKind::Schema, "Instance check failed", Some(span))
                        .with_note(at, msg),
                );
            }
        }
        Ok(())
    }

    /// A rule called (`R()`) or instantiated (`R {...}`): its protocol's instance, its
    /// decorators, its parents' checks and its own, as upstream's rule body. The value is
    /// the protocol's instance, or an empty dict for a rule without one.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_rule(
        &self,
        ty: &Rc<SchemaType>,
        r: &'static ast::RuleStmt,
        args: &[Value],
        kwargs: &[(Str, Value)],
        config: Dict,
        span: Span,
        by_call: bool,
    ) -> EvalResult<Value> {
        let call = RuleCall {
            args,
            kwargs,
            span,
            by_call,
        };
        let (c, host) = self.rule_scope(ty, r, &call, config)?;
        for d in &r.decorators {
            // (an unknown decorator is the checker's error)
            if decorator_name(d) == "deprecated" {
                self.deprecated_in(&ty.def_ctx, d, &ty.name, span, by_call)?;
            }
        }
        self.run_rule_checks(ty, r, &c, span, by_call)?;
        Ok(host.unwrap_or_else(|| Value::Dict(Rc::new(Dict::new()))))
    }

    /// The scope a rule's checks see: its parameters, and its protocol's attributes set from
    /// the config (with the protocol's instance).
    fn rule_scope(
        &self,
        ty: &Rc<SchemaType>,
        r: &'static ast::RuleStmt,
        call: &RuleCall<'_>,
        config: Dict,
    ) -> EvalResult<(Ctx, Option<Value>)> {
        let RuleCall {
            args,
            kwargs,
            span,
            by_call,
        } = *call;
        let scope = Scope::new(None);
        if let Some(ps) = &r.params {
            for (i, p) in ps.iter().enumerate() {
                let v = self.param_value(ty, p, i, args, kwargs)?;
                scope.vars.borrow_mut().insert(p.name.sym, v);
            }
        }
        let mut host = None;
        let mut vars = config.clone();
        if let Some(h) = &r.for_host {
            let v = self.eval_identifier(&ty.def_ctx, h)?;
            if let Some(pt) = as_schema_type(&v) {
                // (its required attributes are checked before the rule's decorators and
                // checks: upstream reports a missing one at the rule's expression, or called
                // (`R()`) at the protocol's last statement, where its runtime stands)
                self.schema_frames.set(self.schema_frames.get() + 1);
                let made = self.instantiate(&pt, &[], &[], config, span);
                self.schema_frames.set(self.schema_frames.get() - 1);
                let inst = made?;
                let at = match by_call {
                    true => self.body_end_pos(&pt, span).copied().unwrap_or(span),
                    false => span,
                };
                self.check_own_required(&inst, at)?;
                if let Value::Schema(s) = &inst {
                    vars = s.attrs.clone();
                }
                host = Some(inst);
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
        Ok((c, host))
    }

    /// A rule's parents' checks, then its own. As upstream, a parent's checks run in the
    /// scope of the rule called (its parameters and protocol attributes), in the parent's
    /// package.
    fn run_rule_checks(
        &self,
        ty: &Rc<SchemaType>,
        r: &'static ast::RuleStmt,
        c: &Ctx,
        span: Span,
        by_call: bool,
    ) -> EvalResult<()> {
        for p in &r.parents {
            let v = self.eval_identifier(&ty.def_ctx, p)?;
            if let Some(pt) = as_schema_type(&v)
                && let Some(pr) = pt.rule
            {
                let pc = Ctx {
                    locals: c.locals.clone(),
                    schema: None,
                    in_lambda: false,
                    ..pt.def_ctx.clone()
                };
                self.run_rule_checks(&pt, pr, &pc, span, by_call)?;
            }
        }
        self.run_checks(c, &r.checks, span, by_call)
    }
}

/// How a rule is run: its call's arguments, where, and whether called (`R()`) or
/// instantiated (`R {...}`).
#[derive(Clone, Copy)]
struct RuleCall<'a> {
    args: &'a [Value],
    kwargs: &'a [(Str, Value)],
    span: Span,
    by_call: bool,
}

pub(super) fn decorator_name(d: &ast::Decorator) -> String {
    d.name
        .names
        .iter()
        .map(|n| n.sym.as_str())
        .collect::<Vec<_>>()
        .join(".")
}

pub(super) fn similar(a: &str, b: &str) -> bool {
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

/// The first required attribute of instance `s` without a value (its layout's order).
fn first_missing_required(s: &SchemaInst) -> Option<Str> {
    let ty = s.ty.clone()?.downcast::<SchemaType>().ok()?;
    let layout = ty.layout.borrow();
    layout
        .as_ref()?
        .required
        .iter()
        .find(|k| s.attrs.get(k).is_none_or(|v| v.is_none_or_undefined()))
        .cloned()
}

fn required_error(attr: &str, schema: &str, span: Option<Span>) -> EvalError {
    EvalError::new(
        ErrKind::Evaluation,
        format!("attribute '{attr}' of {schema} is required and can't be None or Undefined"),
        span,
    )
}

fn is_mixin_attr(layout: &Layout, d: &AttrDecl) -> bool {
    layout.parts[d.part].stmt.is_some_and(|s| s.is_mixin())
}

/// "Schema S does not contain attribute k" for each public key of `config` that is no
/// attribute of `ty` (none when it has an index signature).
fn extra_keys(ty: &SchemaType, layout: &Layout, config: &Dict) -> Vec<String> {
    if layout.index_sig.is_some() {
        return Vec::new();
    }
    let is_attr = |k: &str| {
        layout
            .declared
            .get(k)
            .is_some_and(|d| d.schema_attr && !is_mixin_attr(layout, d))
    };
    config
        .map
        .keys()
        .filter(|k| !k.starts_with('_') && !is_attr(k))
        .map(|k| format!("Schema {} does not contain attribute {k}", ty.name))
        .collect()
}

/// "Schema S's attribute k is missing" for each required attribute `config` lacks.
fn missing_attrs(ty: &SchemaType, layout: &Layout, config: &Dict) -> Vec<String> {
    layout
        .declared
        .iter()
        .filter(|(k, d)| {
            d.schema_attr
                && !d.optional
                && !is_mixin_attr(layout, d)
                && !config.map.contains_key(*k)
        })
        .map(|(k, _)| format!("Schema {}'s attribute {k} is missing", ty.name))
        .collect()
}
