//! The layout of a schema type: its parents and mixins resolved, and the attributes and
//! statements of its body in the order an instance runs them, computed once per type.

use super::*;

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

    pub(super) fn layout(&self, ty: &Rc<SchemaType>, span: Span) -> EvalResult<Rc<Layout>> {
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
        let mut own_part = 0;
        for (ci, t) in chain.iter().enumerate() {
            if ci + 1 == chain.len() {
                own_part = parts.len();
            }
            parts.push(t.clone());
            for m in self.mixins_of(t)? {
                parts.push(m);
            }
        }
        let mut body = Vec::new();
        let mut declared: IndexMap<Str, AttrDecl, rustc_hash::FxBuildHasher> = IndexMap::default();
        let mut index_sig = None;
        let mut order: Vec<Str> = Vec::new();
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
                    let k: Str = crate::eval::expr::sym_str(a.name.sym);
                    for d in &a.decorators {
                        match decorator_name(d).as_str() {
                            "deprecated" | "info" => {}
                            _ => unknown_decorators.push((k.clone(), d, pi)),
                        }
                    }
                    if let Some(prev) = declared.get(&k)
                        && let (Some(_), true) = (prev.ty, prev.schema_attr)
                    {
                        // (a changed type is the checker's error, as upstream's resolver
                        // reports it, and none through a mixin)
                        if !prev.optional && a.optional && prev.part != pi && !s.is_mixin() {
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
                        // (the checker compares the types fully; here only two different
                        // scalar types, an int where a float is excepted)
                        if !is.any_other
                            && matches!(
                                (&is.value_ty.kind, &a.ty.kind),
                                (ast::TypeKind::Basic(_), ast::TypeKind::Basic(_))
                            )
                            && !(matches!(
                                is.value_ty.kind,
                                ast::TypeKind::Basic(ast::BasicType::Float)
                            ) && matches!(
                                a.ty.kind,
                                ast::TypeKind::Basic(ast::BasicType::Int)
                            ))
                            && crate::eval::types::type_str(&is.value_ty)
                                != crate::eval::types::type_str(&a.ty)
                            && !matches!(is.value_ty.kind, ast::TypeKind::Union(_))
                        {
                            return Err(EvalError::new(
                                ErrKind::IndexSignature,
                                format!(
                                    "the type '{}' of schema attribute '{k}' does not meet the index signature definition {}",
                                    crate::eval::types::type_str(&a.ty),
                                    index_sig_str(is)
                                ),
                                Some(a.name.span),
                            ));
                        }
                    }
                    // a mixin's declaration of an attribute its schema declares leaves it as
                    // the schema has it (its `a?` does not make it optional, its type is
                    // checked on the config's value only, at its statement)
                    let before = declared
                        .get(&k)
                        .filter(|d| s.is_mixin() && d.schema_attr)
                        .map(|d| (d.ty, d.converts, d.optional));
                    let (ty, converts, optional) = match before {
                        Some((ty, converts, optional)) => (ty, converts, optional && a.optional),
                        None => (Some(&a.ty), names_a_type(&a.ty), a.optional),
                    };
                    declared.insert(
                        k.clone(),
                        AttrDecl {
                            ty,
                            converts,
                            optional,
                            part: pi,
                            schema_attr: true,
                            at: Some(a.name.span),
                            at_pos: Some(&a.name.span),
                        },
                    );
                    if !order.contains(&k) {
                        order.push(k);
                    }
                } else {
                    let mut names = Vec::new();
                    collect_targets(st, &mut names);
                    for n in names {
                        let k: Str = crate::eval::expr::sym_str(n);
                        if !declared.contains_key(&k) {
                            declared.insert(
                                k.clone(),
                                AttrDecl {
                                    ty: None,
                                    converts: false,
                                    optional: true,
                                    part: pi,
                                    schema_attr: false,
                                    at: None,
                                    at_pos: None,
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
        let mut setters: FxHashMap<Symbol, super::Setters> = FxHashMap::default();
        for (i, (st, _)) in body.iter().enumerate() {
            let mut names = Vec::new();
            collect_targets(st, &mut names);
            for n in names {
                let e = setters.entry(n).or_default();
                if e.stmts.last() != Some(&i) {
                    e.stmts.push(i);
                }
            }
            if let StmtKind::SchemaAttr(a) = &st.kind
                && !names_a_type(&a.ty)
            {
                let e = setters.entry(a.name.sym).or_default();
                e.checked_at = e.checked_at.min(i);
            }
        }
        let (self_reading, valueless, lazy_setters, cyclic) = super::lazy::lazy_setters(&body);
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
        let converting = body
            .iter()
            .map(|(st, _)| {
                // upstream converts the value where a statement sets the attribute: its
                // declaration and any plain assignment to it
                let name = match &st.kind {
                    StmtKind::SchemaAttr(a) => a.name.sym,
                    StmtKind::Assign(a) if a.targets.len() == 1 && a.targets[0].path.is_empty() => {
                        a.targets[0].name.sym
                    }
                    StmtKind::AugAssign(a) if a.target.path.is_empty() => a.target.name.sym,
                    _ => return None,
                };
                declared
                    .get_full(name.as_str())
                    .filter(|(_, _, d)| d.converts)
                    .map(|(i, _, _)| i)
            })
            .collect();
        // an index signature is the schema's own: upstream's instance of a subschema takes no
        // key its base's signature would (the checks above still ran for each part)
        let index_sig = index_sig.filter(|(_, pi)| *pi == own_part);
        let declared_syms = declared.keys().map(|k| Symbol::intern(k)).collect();
        let l = Rc::new(Layout {
            parts,
            part_level,
            body,
            declared,
            declared_syms,
            converting,
            setters,
            self_reading,
            valueless,
            lazy_setters,
            cyclic,
            index_sig,
            order,
            required,
            unknown_decorators,
        });
        *ty.layout.borrow_mut() = Some(l.clone());
        Ok(l)
    }
}

/// Whether `t` names a schema or an alias anywhere (the only types a conversion can change a
/// value for).
pub(super) fn names_a_type(t: &ast::Type) -> bool {
    use ast::TypeKind as K;
    match &t.kind {
        K::Named(_) => true,
        K::List(e) => e.as_deref().is_some_and(names_a_type),
        K::Dict(k, v) => {
            k.as_deref().is_some_and(names_a_type) || v.as_deref().is_some_and(names_a_type)
        }
        K::Union(ts) => ts.iter().any(names_a_type),
        K::Any | K::Basic(_) | K::Literal(_) | K::Function { .. } => false,
    }
}

impl Layout {
    /// The instance's key order for an unusual key list (see `forward.rs`): the attributes of
    /// the levels it names, in its order, then the rest as usual.
    pub(super) fn forward_order(&self, steps: &[super::forward::Step]) -> Vec<Str> {
        let top = self.part_level.iter().copied().max().unwrap_or(0);
        let mut out: Vec<Str> = Vec::with_capacity(self.order.len());
        for level in super::forward::levels(steps, top) {
            for (pi, t) in self.parts.iter().enumerate() {
                let Some(st) = t.stmt.filter(|_| self.part_level[pi] == level) else {
                    continue;
                };
                for s in &st.body {
                    let mut names = Vec::new();
                    collect_targets(s, &mut names);
                    for n in names {
                        let k = crate::eval::expr::sym_str(n);
                        if self.order.contains(&k) && !out.contains(&k) {
                            out.push(k);
                        }
                    }
                }
            }
        }
        for k in &self.order {
            if !out.contains(k) {
                out.push(k.clone());
            }
        }
        out
    }
}
