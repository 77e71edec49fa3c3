//! An index signature's keys as an instance is made: the signature's default merged under each
//! extra key's value, the value converted to the signature's type, and the keys reordered (and
//! the key name's own key dropped) as upstream's temporary key-name attribute leaves them.

use super::*;

impl Evaluator {
    /// Apply the schema's index signature to `attrs`; the extra keys its checks run for, when
    /// it names its key (the key name's own key included).
    pub(super) fn index_signature_keys(
        &self,
        frame: &Rc<Frame>,
        layout: &Layout,
        attrs: &mut Dict,
        span: Span,
        body_walked: Option<&'static Span>,
    ) -> EvalResult<Vec<Value>> {
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
                let op = frame.config.op_of(&k).0;
                let merge_default = matches!(op, ConfigOp::Union | ConfigOp::Insert);
                // (a key set with `=`, to None or Undefined too, keeps its value, as upstream)
                if let (Some(def), true) = (&is.value, merge_default) {
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
                    v = if let (ConfigOp::Insert, Value::List(d), Value::List(add)) = (op, &dv, &v)
                    {
                        // `+=` appends to the default
                        Value::List(Rc::new(d.iter().chain(add.iter()).cloned().collect()))
                    } else if v.is_config() && dv.is_config() {
                        self.union_eval(dv, &v, span)?
                    } else if v.is_none_or_undefined() {
                        dv
                    } else {
                        v
                    };
                }
                if !v.is_none_or_undefined() {
                    let empty = matches!(&v, Value::Dict(d) if d.map.is_empty());
                    // (upstream checks the extra keys once the body has run: its runtime
                    // stands at the body's last node)
                    let at = body_walked.map_or(span, |p| self.walked_point_of(p));
                    v = self.convert_type(&cx, v, &is.value_ty, at)?;
                    // (an empty config made an instance missing a required attribute: a
                    // failed conversion upstream, as for an attribute)
                    if empty
                        && let Value::Schema(inst) = &v
                        && self.misses_required(inst)
                        && let Some(e) = self.empty_config_mismatch(&cx, &is.value_ty, span)
                    {
                        return Err(e);
                    }
                }
                attrs.map.insert(k, v);
            }
        }
        // the extra keys the checks run for (a key of the key name's own too, removed below)
        let extra_keys: Vec<Value> = match &layout.index_sig {
            Some((is, _)) if is.key_name.is_some() => attrs
                .map
                .keys()
                .filter(|k| !layout.declared.contains_key(*k))
                .map(|k| Value::Str(k.clone()))
                .collect(),
            _ => Vec::new(),
        };
        if let Some((is, _)) = &layout.index_sig
            && let Some(kn) = is.key_name
        {
            // upstream binds the key name as a temporary attribute before it adds the extra
            // keys one by one, then removes it by swapping the last key into its place: the
            // last extra key comes first, and a key of the key name's own is that attribute
            // (removed with it)
            let (n0, len) = (layout.order.len(), attrs.map.len());
            match attrs.map.get_index_of(kn.sym.as_str()) {
                Some(i) if !layout.declared.contains_key(kn.sym.as_str()) && n0 < len => {
                    attrs.map.move_index(i, n0);
                    attrs.map.swap_remove_index(n0);
                }
                _ if len >= n0 + 2 => attrs.map.move_index(len - 1, n0),
                _ => {}
            }
        }
        Ok(extra_keys)
    }
}

/// An index signature as upstream's messages write it (`[name: K]: V`).
pub(crate) fn index_sig_str(is: &ast::IndexSignature) -> String {
    // upstream reads a `None` or `Undefined` key type as a string literal of the name
    // without its first letter (`str(one)`, `str(ndefined)`)
    let key = match &is.key_ty.kind {
        ast::TypeKind::Literal(ast::LiteralType::None) => "str(one)".to_string(),
        ast::TypeKind::Literal(ast::LiteralType::Undefined) => "str(ndefined)".to_string(),
        _ => crate::eval::types::type_str(&is.key_ty),
    };
    format!(
        "[{}{key}]: {}",
        is.key_name
            .map(|n| format!("{}: ", n.sym))
            .unwrap_or_default(),
        crate::eval::types::type_str(&is.value_ty)
    )
}
