//! The statements of a schema body as an instance runs them: attribute declarations and
//! assignments, reading and setting attributes in the instance's frame.

use super::*;

impl Evaluator {
    pub(super) fn run_schema_stmt(&self, fr: &Rc<Frame>, i: usize) -> EvalResult<()> {
        if fr.state.borrow()[i] != PENDING {
            return Ok(());
        }
        fr.state.borrow_mut()[i] = RUNNING;
        let outer = fr.running.replace(i);
        let (st, pi) = fr.layout.body[i];
        let ctx = Ctx {
            schema: Some(fr.clone()),
            ..fr.ctxs[pi].clone()
        };
        // (whether the lazy scope had cached the attribute this statement may convert)
        let mut cached_before = true;
        let r = match &fr.lazy {
            Some(lz) => {
                if let Some((k, _)) =
                    fr.layout.converting[i].and_then(|j| fr.layout.declared.get_index(j))
                {
                    cached_before = lz.has_cached(Symbol::intern(k));
                }
                self.in_pkg(&ctx.pkg, || self.exec_lazy_stmt(&ctx, lz, st))
            }
            None => self.in_pkg(&ctx.pkg, || self.exec_stmt(&ctx, st)),
        };
        fr.state.borrow_mut()[i] = DONE;
        fr.running.set(outer);
        r?;
        // upstream converts an attribute's value to its type where the attribute is declared
        // (a config dict becomes the schema instance, defaults included), so the statements
        // after it read the instance
        if let Some(j) = fr.layout.converting[i] {
            self.convert_declared(fr, j, st.span, cached_before)?;
        }
        // a declaration without a value is type-checked against the config's entry here (one
        // with a value checks it where it merges it: see `exec_schema_attr`)
        if let StmtKind::SchemaAttr(a) = &st.kind
            && a.value.is_none()
            && !fr.config.map.is_empty()
            && fr.config.map.contains_key(a.name.sym.as_str())
        {
            let v = fr.attrs.borrow().get(a.name.sym.as_str()).cloned();
            if let Some(v) = v {
                self.check_entry_fits(&ctx, fr, a, &v, st.span)?;
            }
        }
        Ok(())
    }

    /// The value `v` the config's entry gave attribute `attr` at its statement must fit
    /// the attribute's type (`ctx`: the statement's); values of types naming a schema are
    /// checked by their conversion.
    fn check_entry_fits(
        &self,
        ctx: &Ctx,
        fr: &Rc<Frame>,
        attr: &'static ast::SchemaAttr,
        v: &Value,
        span: Span,
    ) -> EvalResult<()> {
        if v.is_none_or_undefined() || super::layout::names_a_type(&attr.ty) {
            return Ok(());
        }
        let t = &attr.ty;
        let fits = crate::eval::types::fits_plain(v, t);
        debug_assert_eq!(
            fits,
            self.try_convert_value(ctx, v, t, span)?.is_some(),
            "fits_plain differs from try_convert"
        );
        if fits {
            return Ok(());
        }
        let at = self.walked_point(span);
        let mut e = self.type_mismatch(ctx, v, t, at);
        // (asked for, where the instance is made follows, as at the body's end)
        if self.opts.note_instances && fr.span.loc().line > 0 {
            e.footer
                .push(format!("the instance is made at {}", fr.span.loc()));
        }
        Err(e)
    }

    /// Convert declared attribute `j`'s value to its type where a statement set it: a config
    /// dict becomes the schema instance, defaults included, so the statements after it read
    /// the instance (as upstream's runtime). `cached_before`: whether the lazy scope had
    /// cached the attribute before the statement.
    fn convert_declared(
        &self,
        fr: &Rc<Frame>,
        j: usize,
        span: Span,
        cached_before: bool,
    ) -> EvalResult<()> {
        let Some((k, d)) = fr.layout.declared.get_index(j) else {
            return Ok(());
        };
        let Some(t) = d.ty else {
            return Ok(());
        };
        let cur = fr
            .attrs
            .borrow()
            .get(k)
            .filter(|v| v.is_config() && !matches!(v, Value::Schema(_)))
            .cloned();
        if let Some(v) = cur {
            let c = Ctx {
                schema: Some(fr.clone()),
                ..fr.ctxs[d.part].clone()
            };
            if let Some(nv) = self.try_convert_value(&c, &v, t, span)? {
                self.refuse_empty_config(&c, &v, &nv, t, span)?;
                // (what the lazy scope cached at the statement is the converted value)
                if let Some(lz) = &fr.lazy
                    && !cached_before
                {
                    lz.converted(Symbol::intern(k), &nv);
                }
                fr.attrs.borrow_mut().map.insert(k.clone(), nv);
            }
        }
        Ok(())
    }

    /// A plain assignment to a declared attribute inside a statement of the body (an `if`)
    /// converts as one of the body's own does.
    pub(crate) fn convert_nested_assign(
        &self,
        fr: &Rc<Frame>,
        name: Symbol,
        span: Span,
    ) -> EvalResult<()> {
        let i = fr.running.get();
        if fr.lazy.is_some() || fr.layout.converting.get(i).is_none_or(|c| c.is_some()) {
            return Ok(());
        }
        match fr.layout.declared.get_full(name.as_str()) {
            Some((j, _, d)) if d.converts => self.convert_declared(fr, j, span, true),
            _ => Ok(()),
        }
    }

    /// Upstream's instance of an empty config that leaves a required attribute unset is a
    /// failed conversion of the dict.
    fn refuse_empty_config(
        &self,
        ctx: &Ctx,
        v: &Value,
        converted: &Value,
        t: &'static ast::Type,
        span: Span,
    ) -> EvalResult<()> {
        if matches!(v, Value::Dict(d) if d.map.is_empty())
            && let Value::Schema(inst) = converted
            && self.misses_required(inst)
            && let Some(e) = self.empty_config_mismatch(ctx, t, span)
        {
            return Err(e);
        }
        Ok(())
    }

    /// A name read inside a schema body: its attribute (after running pending assignments).
    pub(crate) fn schema_lookup(&self, fr: &Rc<Frame>, name: Symbol) -> EvalResult<Option<Value>> {
        if let Some(lz) = &fr.lazy
            && lz.is_volatile(name)
            && !lz.done.get()
        {
            return self.lazy_schema_read(fr, lz, name).map(Some);
        }
        if let Some(set) = fr.layout.setters.get(&name) {
            // a name read while one of its own assignments runs sees its current value
            if !set.stmts.iter().any(|&i| fr.state.borrow()[i] == RUNNING) {
                for &i in &set.stmts {
                    if fr.state.borrow()[i] == PENDING {
                        self.run_schema_stmt(fr, i)?;
                    }
                }
            }
            if fr.running.get() < set.checked_at {
                self.check_read_ahead(fr, name)?;
            }
        }
        let a = fr.attrs.borrow();
        match a.map.get(name.as_str()) {
            Some(v) => Ok(Some(v.clone())),
            None => Ok(None),
        }
    }

    /// An attribute read by a statement before the one declaring it: upstream's lazy
    /// evaluation runs that declaration first, so its value is checked against the type
    /// there (reported at the declaration).
    #[cold]
    fn check_read_ahead(&self, fr: &Rc<Frame>, name: Symbol) -> EvalResult<()> {
        let Some(d) = fr.layout.declared.get(name.as_str()) else {
            return Ok(());
        };
        let v = fr.attrs.borrow().map.get(name.as_str()).cloned();
        let (Some(t), Some(v)) = (d.ty, v) else {
            return Ok(());
        };
        if v.is_none_or_undefined() {
            return Ok(());
        }
        let c = Ctx {
            schema: Some(fr.clone()),
            ..fr.ctxs[d.part].clone()
        };
        let before = self.last_pos.get();
        if d.at_pos.is_some() {
            self.last_pos.set(d.at_pos);
        }
        let at = d.at.unwrap_or_default();
        self.convert_type(&c, v, t, at)?;
        self.last_pos.set(before);
        Ok(())
    }

    /// Set an attribute from the body: the config entry for it is laid on top.
    pub(crate) fn schema_set(
        &self,
        ctx: &Ctx,
        fr: &Rc<Frame>,
        name: Symbol,
        v: Value,
        span: Span,
    ) -> EvalResult<()> {
        self.schema_set_entry(ctx, fr, name, v, span).map(drop)
    }

    /// [`Self::schema_set`]; the value set when the config had an entry for the attribute.
    fn schema_set_entry(
        &self,
        _ctx: &Ctx,
        fr: &Rc<Frame>,
        name: Symbol,
        v: Value,
        span: Span,
    ) -> EvalResult<Option<Value>> {
        let k = name.as_str();
        let mut had_entry = true;
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
                // (a default dict then the config's instance: the instance made again from
                // both, in the schema's order)
                let rb = self.rebuild_for_union(span);
                value::merge_entry_with(&mut d, kk, cv, op, idx, false, &rb)
                    .map_err(|e| e.or_span(span))?;
                d.map.swap_remove(&**kk).unwrap_or(Value::Undefined)
            }
            None => {
                had_entry = false;
                v
            }
        };
        if let Some(lz) = &fr.lazy {
            lz.note_set(&fr.layout, name, &nv);
        }
        let set = if had_entry {
            nv.clone()
        } else {
            Value::Undefined
        };
        let mut a = fr.attrs.borrow_mut();
        match a.map.get_mut(k) {
            Some(slot) => *slot = nv,
            None => {
                a.map.insert(Str::from(k), nv);
            }
        }
        Ok(had_entry.then_some(set))
    }

    pub(crate) fn exec_schema_attr(
        &self,
        ctx: &Ctx,
        fr: &Rc<Frame>,
        attr: &'static ast::SchemaAttr,
        span: Span,
    ) -> EvalResult<()> {
        let k = attr.name.sym.as_str();
        // upstream runs an attribute's decorators where its statement runs: `@deprecated`
        // fails (or warns) when the config sets the attribute
        for d in &attr.decorators {
            if decorator_name(d) == "deprecated" && fr.config.map.contains_key(k) {
                self.deprecated(ctx, d, k, fr.span)?;
            }
        }
        // a config entry that overrides the attribute (`a = v`) replaces its default and its
        // `+=` statements, which upstream then never evaluates (no errors, no instances from it)
        let overridden =
            fr.config.map.contains_key(k) && fr.config.op_of(k) == (ConfigOp::Override, None);
        let Some(val) = &attr.value else {
            // an entry still carrying an index (`a[0] += [3]` then `a = [9]` in one config)
            // is merged onto the unset attribute here, as upstream's: an `=` finds no list
            if fr.config.op_of(k).1.is_some() && fr.config.map.contains_key(k) {
                return self.schema_set(ctx, fr, attr.name.sym, Value::Undefined, span);
            }
            if let Some(lz) = &fr.lazy
                && self.lazy_declare_insert(fr, lz, attr.name.sym, span)?
            {
                return Ok(());
            }
            // a required attribute declared with one literal type (`name: "x"`, `n: 1`) has
            // that value unless the config gives one, as upstream's
            if let Some(v) = literal_type_value(attr)
                && !overridden
            {
                return self.schema_set(ctx, fr, attr.name.sym, v, span);
            }
            // under upstream's lazy scope the config's entry is laid where the attribute is
            // declared (the attribute is Undefined before)
            if let Some(lz) = &fr.lazy
                && lz.is_volatile(attr.name.sym)
                && fr.config.map.contains_key(k)
            {
                let cur = fr
                    .attrs
                    .borrow()
                    .get(k)
                    .cloned()
                    .unwrap_or(Value::Undefined);
                if matches!(cur, Value::Undefined) {
                    // (the entry as it is, `None` included)
                    let cv = fr.config.map.get(k).cloned().unwrap_or(Value::Undefined);
                    lz.declared(fr, attr.name.sym, cv);
                    return Ok(());
                }
                return self.schema_set(ctx, fr, attr.name.sym, cur, span);
            }
            return Ok(());
        };
        if overridden {
            if let Some(v) =
                self.schema_set_entry(ctx, fr, attr.name.sym, Value::Undefined, span)?
            {
                self.check_entry_fits(ctx, fr, attr, &v, span)?;
            }
            return Ok(());
        }
        // `a: T |= v` unions `v` into the value an earlier body statement gave `a` (a base
        // schema's, the config's entry laid on top), or is `v` when none did; any other
        // `a: T op= v` declares `a` as `a: T = v` does: upstream applies the operator to
        // neither value
        let v = self.eval(ctx, val)?;
        let v = match attr.op {
            Some(ast::AttrOp::Aug(op)) if op.bin_op() == ast::BinOp::BitOr => {
                let set_before = fr
                    .layout
                    .setters
                    .get(&attr.name.sym)
                    .and_then(|s| s.stmts.first())
                    .is_some_and(|&j| {
                        !matches!(&fr.layout.body[j].0.kind,
                            StmtKind::SchemaAttr(a) if std::ptr::eq(a, attr))
                    });
                let cur = if set_before {
                    fr.attrs
                        .borrow()
                        .get(k)
                        .cloned()
                        .unwrap_or(Value::Undefined)
                } else {
                    Value::Undefined
                };
                if cur.is_none_or_undefined() {
                    v
                } else {
                    self.binop(op.bin_op(), &cur, &v, span)?
                }
            }
            _ => v,
        };
        // an attribute declared in an `if` of the body is no declaration the instance checks
        // at its end: upstream checks (and converts) its value against the type where it is
        let nested = !fr
            .layout
            .declared
            .get(k)
            .is_some_and(|d| d.at == Some(attr.name.span));
        // a default the config merges into is converted to the type first (`spec: Spec = {..}`
        // becomes an instance the config's entry is then unioned into), as upstream's
        // (a dict or list of schemas is converted after the merge: upstream checks no
        // converted item's required attributes there)
        let v = if !nested
            && matches!(attr.ty.kind, ast::TypeKind::Named(_))
            && v.is_config()
            && fr.config.map.contains_key(k)
        {
            match self.try_convert_value(ctx, &v, &attr.ty, span)? {
                Some(nv) => {
                    self.refuse_empty_config(ctx, &v, &nv, &attr.ty, span)?;
                    nv
                }
                None => v,
            }
        } else if nested && !v.is_none_or_undefined() {
            self.convert_type(ctx, v, &attr.ty, span)?
        } else {
            v
        };
        // the config's entry merged here is type-checked here, before the statements after
        // it run (upstream's union of the entry checks it against the attribute's type);
        // values of types naming a schema are checked by their conversion
        if let Some(v) = self.schema_set_entry(ctx, fr, attr.name.sym, v, span)? {
            self.check_entry_fits(ctx, fr, attr, &v, span)?;
        }
        Ok(())
    }
}

/// The value a required attribute typed by a single literal (`"x"`, `1`, `1.5`, `True`,
/// `2Ki`) and declared without one takes.
fn literal_type_value(attr: &ast::SchemaAttr) -> Option<Value> {
    if attr.optional {
        return None;
    }
    let ast::TypeKind::Literal(l) = &attr.ty.kind else {
        return None;
    };
    Some(match l {
        ast::LiteralType::Bool(b) => Value::Bool(*b),
        ast::LiteralType::Int(i, None) => Value::Int(*i),
        ast::LiteralType::Int(i, Some(suffix)) => Value::Unit(Rc::new(crate::value::Unit {
            raw: *i as f64,
            suffix: crate::value::Str::from(suffix.as_str()),
        })),
        ast::LiteralType::Float(f) => Value::Float(*f),
        ast::LiteralType::Str(s) => Value::Str(crate::value::Str::from(&**s)),
        ast::LiteralType::None | ast::LiteralType::Undefined => return None,
    })
}
