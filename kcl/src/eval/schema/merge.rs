//! Merging schema instances: `inst | {...}`, repeated `a: S {...}` and a dict merged into a
//! nested instance rebuild the instance from its origin, so computed attributes and checks
//! run again, as upstream.

use super::*;

impl Evaluator {
    /// Rebuild schema instance `inst` with `extra` merged into the config it was made from
    /// (computed attributes see the new values). `ty_args` replaces the type and arguments.
    pub(crate) fn rebuild_merged(
        &self,
        inst: &Value,
        extra: &Value,
        ty_args: Option<(Rc<SchemaType>, crate::eval::expr::Args)>,
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
        let base = s.config();
        let base_keys: Vec<Str> = base.map.keys().cloned().collect();
        let merged = self.union_eval(Value::from(base), extra, span)?;
        let mut cfg = merged.as_dict().cloned().unwrap_or_default();
        let (ty, (args, kwargs)) =
            ty_args.unwrap_or((ty, (origin.args.clone(), origin.kwargs.clone())));
        // an index signature's default is not merged under a key the merged dict adds with
        // `:` (upstream unions the value into the instance as it is)
        if let Some(ed) = extra.as_dict() {
            let added: Vec<&Str> = ed
                .map
                .keys()
                .filter(|k| !base_keys.contains(k) && ed.op_of_key(k) == (ConfigOp::Union, None))
                .collect();
            if !added.is_empty() {
                let layout = self.layout(&ty, span)?;
                if layout.index_sig.is_some() {
                    for k in added {
                        if !layout.declared.contains_key(k) {
                            cfg.set_op(k.clone(), ConfigOp::Override, None);
                        }
                    }
                }
            }
        }
        // the instance's own keys hold final values: upstream makes the schema again from
        // them as overrides (a default is not merged with them a second time)
        for k in base_keys {
            cfg.set_op(k, ConfigOp::Override, None);
        }
        self.enter(span)?;
        self.merging.set(true);
        let r = self.instantiate(&ty, &args, &kwargs, cfg, span);
        self.leave();
        r.map(|v| Some(inserts_applied(v)))
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
            // (only a config's entries make an instance again from a dict merged with it)
            Value::None => Ok(None),
            other => self.rebuild_merged(inst, other, None, span),
        }
    }

    /// One instance merged with another (`a | b`, `attr: S {...}` over an instance), as
    /// upstream's evaluator does it: every attribute `b` has overrides `a`'s (a dict `b` was
    /// configured with `:` merges into it), then `a`'s schema is instantiated again with the
    /// config keys of both, holding the merged values. So `b`'s defaults win over what `a` was
    /// configured with (`R {c = 5} | R {}` is `R {}`), and `a`'s attributes `b` leaves
    /// undefined stay where they are config keys of `a` (an attribute only set in place, by a
    /// dict merged into it in a config, is made again from the schema: upstream drops it).
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
        let rb = |i: &Value, x: &Value| self.rebuild_nested(i, x, span);
        let merged = self.merged_attrs(a, b, &rb, span)?;
        let mut cfg = Dict::with_capacity(origin.keys.len() + b_keys.len());
        for (k, _) in origin.keys.iter().chain(b_keys) {
            if cfg.map.contains_key(k) {
                continue;
            }
            if let Some(v) = merged.map.get(k) {
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

    /// Instance `b` merged into instance `a` under one key of a config literal (`m: S {..}`
    /// twice, or repeated declarations of a global, merged into one config): upstream merges
    /// the attributes only, as `|` would before making the schema again, and does not make it
    /// again (no check runs, computed attributes keep `b`'s values). The result keeps `a`'s
    /// config keys alone, so a later `|` makes the schema again from those (what only `b`
    /// configured then falls back to its default, as upstream's).
    pub(crate) fn union_instances_in_config(
        &self,
        a: &value::SchemaInst,
        b: &value::SchemaInst,
        span: Span,
    ) -> EvalResult<Option<Value>> {
        if a.origin.is_none() || a.ty.is_none() {
            return Ok(None);
        }
        let rb = |i: &Value, x: &Value| self.rebuild_in_config(i, x, span);
        let attrs = self.merged_attrs(a, b, &rb, span)?;
        let origin = match &a.origin {
            Some(o) if o.open => Some(origin_with_keys(open_keys(&attrs), o)),
            o => o.clone(),
        };
        Ok(Some(Value::Schema(Rc::new(value::SchemaInst {
            attrs,
            origin,
            ..a.clone()
        }))))
    }

    /// What merging a value into instance `i` under one key of a config literal does, as
    /// upstream's config merge, which makes no instance again: another instance merges
    /// attribute by attribute ([`Self::union_instances_in_config`]); `None` (a dict then an
    /// instance, already merged into `i`) is `i` itself; a dict sets `i`'s attributes in place,
    /// its keys becoming config keys of `i` only when `i` was made from a dict
    /// ([`value::Origin::open`]).
    pub(crate) fn rebuild_in_config(
        &self,
        i: &Value,
        x: &Value,
        span: Span,
    ) -> EvalResult<Option<Value>> {
        match (i, x) {
            (Value::Schema(a), Value::Schema(b)) => self.union_instances_in_config(a, b, span),
            (Value::Schema(_), Value::None) => Ok(Some(i.clone())),
            (Value::Schema(a), Value::Dict(_)) if a.origin.as_ref().is_some_and(|o| o.open) => {
                let origin = a.origin.as_ref().unwrap();
                let rb = |i: &Value, x: &Value| self.rebuild_in_config(i, x, span);
                // (its conflicts were checked before: see `union_into`)
                let attrs = value::union_with(Value::from(a.attrs.clone()), x, false, &rb)
                    .map_err(|e| e.or_span(span))?;
                let Value::Dict(attrs) = attrs else {
                    return Ok(None);
                };
                let attrs = Rc::unwrap_or_clone(attrs);
                Ok(Some(Value::Schema(Rc::new(value::SchemaInst {
                    origin: Some(origin_with_keys(open_keys(&attrs), origin)),
                    attrs,
                    ..(**a).clone()
                }))))
            }
            (Value::Schema(_), _) => Ok(None),
            _ => self.rebuild_nested(i, x, span),
        }
    }

    /// `a`'s attributes with `b`'s laid over them, as upstream's union of two instances' values:
    /// every attribute `b` has overrides (a dict `b` was configured with `:` merges into `a`'s
    /// through `rb`; `b`'s `+=` list appends), an attribute `b` leaves undefined keeps `a`'s,
    /// and `b`'s operators are recorded for the keys it sets.
    fn merged_attrs(
        &self,
        a: &value::SchemaInst,
        b: &value::SchemaInst,
        rb: value::Rebuild<'_, EvalError>,
        span: Span,
    ) -> EvalResult<Dict> {
        let b_keys: &[(Str, bool)] = b.origin.as_ref().map(|o| &*o.keys).unwrap_or_default();
        let mut merged = a.attrs.clone();
        for (k, bv) in &b.attrs.map {
            if matches!(bv, Value::Undefined) {
                // an attribute the other leaves unset keeps this one's value, but None gives
                // way to it (upstream's union takes the right side when the left is None)
                if let Some(av @ Value::None) = merged.map.get_mut(k) {
                    *av = Value::Undefined;
                }
                continue;
            }
            let unify = b_keys.iter().any(|(bk, replaced)| bk == k && !replaced);
            let (op, index) = b.attrs.op_of_key(k);
            let nv = match merged.map.get(k) {
                Some(av) if unify && av.is_config() && bv.is_config() => {
                    value::union_with(av.clone(), bv, false, rb).map_err(|e| e.or_span(span))?
                }
                // `env += [...]` appends to what the other instance holds
                Some(av @ Value::List(_))
                    if op == ConfigOp::Insert && matches!(bv, Value::List(_)) =>
                {
                    self.binop(ast::BinOp::Add, av, bv, span)?
                }
                _ => bv.clone(),
            };
            merged.map.insert(k.clone(), nv);
            merged.set_op(k.clone(), op, index);
        }
        Ok(merged)
    }

    /// The origin record of an instance built from `config`; shared between instances when
    /// there are no arguments (most configs of one schema have the same keys).
    pub(super) fn origin_of(
        &self,
        config: &Dict,
        args: &[Value],
        kwargs: &[(Str, Value)],
    ) -> Rc<value::Origin> {
        let keys: Vec<(Str, bool)> = config
            .map
            .keys()
            .map(|k| (k.clone(), config.op_of_key(k).0 != ConfigOp::Union))
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
            open: false,
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
        value::union_with(a, b, true, &self.rebuild_for_union(span)).map_err(|e| e.or_span(span))
    }

    /// How a union rebuilds the instances it merges into: one that receives config is made
    /// again with it; a dict then an instance under one key is the instance made again from
    /// both, its keys set with `=`, as at the top of `dict | instance`.
    pub(crate) fn rebuild_for_union(
        &self,
        span: Span,
    ) -> impl Fn(&Value, &Value) -> EvalResult<Option<Value>> + '_ {
        move |i: &Value, x: &Value| match x {
            Value::None => Ok(self
                .rebuild_merged(i, x, None, span)?
                .map(keys_as_overrides)),
            _ => self.rebuild_nested(i, x, span),
        }
    }
}

/// Instance `v`, made again from a config holding `+=` entries, with those entries recorded
/// as `=`: their items are in its values now, and upstream makes an instance again from
/// entries set with `=` (merged later, the list is not appended to a second time).
fn inserts_applied(v: Value) -> Value {
    let Value::Schema(mut s) = v else {
        return v;
    };
    if s.attrs.ops.as_ref().is_some_and(|o| o.any_insert()) {
        let si = Rc::make_mut(&mut s);
        if let Some(o) = &mut si.attrs.ops {
            Rc::make_mut(o).inserts_as_overrides();
        }
    }
    Value::Schema(s)
}

/// The config keys of an instance made from a dict ([`value::Origin::open`]): every
/// attribute it holds.
fn open_keys(attrs: &Dict) -> value::ConfigKeys {
    attrs
        .map
        .iter()
        .filter(|(_, v)| !v.is_undefined())
        .map(|(k, _)| (k.clone(), attrs.op_of_key(k).0 != ConfigOp::Union))
        .collect()
}

/// `o` (its arguments) with other config keys.
fn origin_with_keys(keys: value::ConfigKeys, o: &value::Origin) -> Rc<value::Origin> {
    Rc::new(value::Origin {
        keys,
        args: o.args.clone(),
        kwargs: o.kwargs.clone(),
        open: o.open,
    })
}

/// The instance `v` (an instance merged with a dict at run time, `inst | {...}`) with every
/// config key recorded as set with `=`: merged again later, its values override, as
/// upstream's (a `+=` or `:` of the merged dict is not kept).
pub(crate) fn keys_as_overrides(v: Value) -> Value {
    let Value::Schema(mut s) = v else {
        return v;
    };
    let Some(o) = &s.origin else {
        return Value::Schema(s);
    };
    if o.keys.iter().all(|(_, replaced)| *replaced)
        && s.attrs.ops.as_ref().is_none_or(|ops| ops.all_override())
    {
        return Value::Schema(s);
    }
    let keys: value::ConfigKeys = o.keys.iter().map(|(k, _)| (k.clone(), true)).collect();
    let origin = origin_with_keys(keys.clone(), o);
    let si = Rc::make_mut(&mut s);
    for (k, _) in keys.iter() {
        if si.attrs.map.contains_key(k) {
            si.attrs.set_op(k.clone(), ConfigOp::Override, None);
        }
    }
    si.origin = Some(origin);
    Value::Schema(s)
}
