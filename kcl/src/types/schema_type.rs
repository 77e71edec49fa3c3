//! A schema's type as upstream's resolver builds it before walking any statement: the
//! protocol and `for` rules, the index signature's key type, then attribute by attribute the
//! type's names, a changed declared type, a required attribute made optional and the fit to
//! the index signature.

use super::*;

impl<'a> Checker<'a> {
    /// An attribute's type against the schema's index signature (upstream: the attribute's
    /// name may not be the signature's key name; its type must be a subtype of the signature's
    /// value type, unless the signature takes `...`).
    fn check_index_attr(&mut self, env: &Env, is: &ast::IndexSignature, a: &ast::SchemaAttr) {
        // an unknown name in a type is the resolver's error, reported later and first
        if !self.type_names_defined(env, &is.value_ty) {
            return;
        }
        use crate::eval::type_str;
        let k = a.name.sym.as_str();
        if is.key_name.is_some_and(|kn| kn.sym == a.name.sym) {
            let msg = format!(
                "index signature attribute name '{k}' cannot have the same name as schema attributes"
            );
            // upstream points at the index signature, not at the attribute
            self.err(ErrKind::IndexSignature, msg, is.span);
            return;
        }
        // the attribute's type must be a subtype of the signature's value type (an int where
        // a float is, a string literal where a string is, a subschema where its base is)
        let fits = {
            let (want, got) = (
                self.resolve_type(env.pkg, env.file, &is.value_ty),
                self.resolve_type(env.pkg, env.file, &a.ty),
            );
            let sub = |x, y| self.is_sub_schema(x, y);
            sup_subsume(&got, &want, &sub)
        };
        if !is.any_other && !fits {
            let msg = format!(
                "the type '{}' of schema attribute '{k}' does not meet the index signature definition {}",
                type_str(&a.ty),
                crate::eval::index_sig_str(is)
            );
            self.err(ErrKind::IndexSignature, msg, a.name.span);
        }
    }

    /// Upstream builds each schema's type before it walks any statement, and reports as it
    /// goes: a protocol's name and body, then attribute by attribute its type's names, a
    /// change of a declared type (or a required attribute made optional) and the index
    /// signature. The first of these errors is this schema's.
    /// A base chain that comes back to the schema it starts from: upstream's resolver reports
    /// the circle once, at each member's name in the chain's order, from the member declared
    /// first.
    fn check_inherit_cycle(&mut self, env: &Env, st: &ast::SchemaStmt) {
        let Some(&start) = self.pkgs[env.pkg].schemas.get(&st.name.sym) else {
            return;
        };
        if self.cycle_reported.contains(&start) {
            return;
        }
        let mut chain = vec![start];
        let mut cur = start;
        loop {
            let info = &self.schemas[cur.0];
            let Some(p) = &info.stmt.parent else { return };
            let Some(next) = self.resolve_schema(info.pkg, info.file, &p.names) else {
                return;
            };
            if next == start {
                break;
            }
            // (a chain into a circle this schema is not on: that circle's own first member
            // reports it)
            if chain.contains(&next) || chain.len() > self.schemas.len() {
                return;
            }
            chain.push(next);
            cur = next;
        }
        // (upstream resolves a schema's own base inside its definition: `A(A)` passes here)
        if chain.len() < 2 {
            return;
        }
        // schemas of other packages are named with their package
        let names: Vec<String> = chain
            .iter()
            .map(|id| {
                let info = &self.schemas[id.0];
                let name = info.stmt.name.sym.as_str();
                match self.pkgs[info.pkg].path {
                    "__main__" | "" => name.to_string(),
                    p => format!("{p}.{name}"),
                }
            })
            .collect();
        let msg = format!(
            "There is a circular reference between schemas {}",
            names.join(", ")
        );
        for id in chain {
            self.cycle_reported.insert(id);
            let at = self.schemas[id.0].stmt.name.span.shrink_to_lo();
            self.err(ErrKind::Compile, msg.clone(), at);
        }
    }

    /// A base or protocol name that resolves to nothing: upstream's "not defined" where the
    /// name is, then an inherit error whose type is `any` (`want`: what it should have been).
    fn undefined_inherit(&mut self, env: &Env, id: &ast::Identifier, want: &str) {
        let n = self.errors.len();
        self.check_defined(env, id.names[0].sym, id.names[0].span);
        if self.errors.len() > n {
            let msg = format!("invalid schema inherit object type, expect {want}, got 'any'");
            self.err(ErrKind::IllegalInherit, msg, id.span.shrink_to_lo());
        }
    }

    pub(super) fn build_schema_type(&mut self, env: &Env, st: &ast::SchemaStmt) {
        self.check_inherit_cycle(env, st);
        // upstream checks its mixins' names as it builds the type, before any body is walked
        for m in &st.mixins {
            let name = m.names.last().map(|n| n.sym.as_str()).unwrap_or_default();
            if !name.ends_with("Mixin") {
                let msg = format!("a valid mixin name should end with 'Mixin', got '{name}'");
                self.err(ErrKind::Name, msg, m.span.shrink_to_lo());
            }
        }
        // the base is looked up as the type is built: an unknown name is upstream's name error
        // and an inherit error (its type is any), a mixin an inherit error (the walk reports
        // them again: the copies are dropped)
        if let Some(p) = &st.parent
            && self.resolve_schema(env.pkg, env.file, &p.names).is_none()
        {
            self.undefined_inherit(env, p, "schema");
        } else if let Some(p) = &st.parent
            && let Some(pid) = self.resolve_schema(env.pkg, env.file, &p.names)
            && (self.schemas[pid.0].stmt.is_mixin() || self.schemas[pid.0].stmt.is_protocol())
        {
            let name = p.names.last().map(|n| n.sym.as_str()).unwrap_or_default();
            let msg = format!("invalid schema inherit object type, expect schema, got '{name}'");
            self.err(ErrKind::IllegalInherit, msg, p.span.shrink_to_lo());
        }
        // (the package's other schemas' errors do not stop this one's checks)
        let before = self.errors.len();
        if let Some(h) = &st.for_host
            && !st.is_mixin()
        {
            // (upstream goes on with the attributes, and never looks the protocol up)
            let msg = "only schema mixin can inherit from protocol".to_string();
            self.err(ErrKind::IllegalInherit, msg, h.span.shrink_to_lo());
        }
        // a mixin's protocol is looked up before its attributes' types (the walk reports it
        // again, kept once)
        if let Some(h) = &st.for_host
            && st.is_mixin()
            && self.resolve_schema(env.pkg, env.file, &h.names).is_none()
        {
            self.undefined_inherit(env, h, "protocol");
        }
        if st.is_protocol() {
            if !st.name.sym.as_str().ends_with("Protocol") {
                let msg = "schema protocol name must end with 'Protocol'".to_string();
                // (upstream's message points after the name)
                self.err(ErrKind::Compile, msg, st.name.span.shrink_to_hi());
                return;
            }
            let only_attrs = st.params.is_none()
                && st.mixins.is_empty()
                && st.checks.is_empty()
                && st
                    .body
                    .iter()
                    .all(|b| matches!(b.kind, StmtKind::SchemaAttr(_)));
            if !only_attrs {
                let msg = "a protocol is only allowed to define attributes in it".to_string();
                self.err(ErrKind::Compile, msg, st.name.span.shrink_to_lo());
                return;
            }
        }
        // the index signature's key type: a string, string literals or their union
        if let Some(is) = &st.index_signature {
            // (upstream takes a `None` or `Undefined` key type as it is)
            let none_key = matches!(
                is.key_ty.kind,
                ast::TypeKind::Literal(ast::LiteralType::None | ast::LiteralType::Undefined)
            );
            if !none_key && !self.type_names_defined(env, &is.key_ty) {
                self.check_type_names(env, &is.key_ty);
            }
            // then its value type's names, before the key type is judged (and before any
            // attribute's type)
            if self.errors.len() == before {
                self.check_type_names(env, &is.value_ty);
            }
            if self.errors.len() == before && !none_key {
                let kt = self.resolve_type(env.pkg, env.file, &is.key_ty);
                fn stringy(t: &Ty) -> bool {
                    match t {
                        Ty::Str | Ty::StrLit(_) => true,
                        Ty::Union(ts) => ts.iter().all(stringy),
                        _ => false,
                    }
                }
                if !stringy(&kt) {
                    let msg = format!("invalid index signature key type: '{}'", self.ty_str(&kt));
                    self.err(ErrKind::IndexSignature, msg, st.name.span);
                }
            }
            if self.errors.len() > before {
                return;
            }
        }
        // an unknown or mixin base is the walk's error: the attribute types are not looked at
        let base = st
            .parent
            .as_ref()
            .map(|id| self.resolve_schema(env.pkg, env.file, &id.names));
        let base_ok = match base {
            None => true,
            Some(b) => b.is_some_and(|b| !self.schemas[b.0].stmt.is_mixin()),
        };
        let parent = base
            .flatten()
            .filter(|p| !self.schemas[p.0].stmt.is_mixin())
            .map(|p| (p, self.members(p)));
        let mut first: FxHashMap<Symbol, (Ty, bool)> = FxHashMap::default();
        for s in &st.body {
            let StmtKind::SchemaAttr(a) = &s.kind else {
                continue;
            };
            if !self.type_names_defined(env, &a.ty) {
                if base_ok {
                    self.check_type_names(env, &a.ty);
                }
                if self.errors.len() > before {
                    return;
                }
                continue;
            }
            self.check_field_type(env, a, &mut first, parent.as_ref());
            if self.errors.len() == before
                && let Some(is) = &st.index_signature
            {
                self.check_index_attr(env, is, a);
            }
            if self.errors.len() > before {
                return;
            }
        }
    }

    /// A schema may not redeclare an attribute of its own body with a type its first
    /// declaration does not take, nor make a required one optional; nor an inherited attribute
    /// with another type. `first`: the body's declarations so far.
    fn check_field_type(
        &mut self,
        env: &Env,
        a: &ast::SchemaAttr,
        first: &mut FxHashMap<Symbol, (Ty, bool)>,
        parent: Option<&(SchemaId, Rc<Members>)>,
    ) {
        let nt = self.resolve_type(env.pkg, env.file, &a.ty);
        if let Some((et, optional)) = first.get(&a.name.sym).cloned() {
            if !field_type_fits(&nt, &et, &|x, y| self.is_sub_schema(x, y)) {
                let msg = format!(
                    "can't change schema field type of '{}' from {} to {}",
                    a.name.sym,
                    self.ty_str(&et),
                    self.ty_str(&nt)
                );
                self.err(ErrKind::Type, msg, a.name.span);
                return;
            }
            if !optional && a.optional {
                let msg = format!(
                    "can't change the required schema attribute of '{}' to optional",
                    a.name.sym
                );
                self.err(ErrKind::Type, msg, a.name.span);
                return;
            }
        } else {
            first.insert(a.name.sym, (nt.clone(), a.optional));
        }
        let Some((pid, pm)) = parent else { return };
        let parent_ty = pm.attrs.get(&a.name.sym).map(|(pt, _)| pt);
        if a.optional
            && self.inherited_required(*pid, a.name.sym) == Some(true)
            && parent_ty
                .is_none_or(|pt| pt.is_any() || nt.is_any() || self.ty_str(pt) == self.ty_str(&nt))
        {
            let msg = format!(
                "can't change the required schema attribute of '{}' to optional",
                a.name.sym
            );
            self.err(ErrKind::Type, msg, a.name.span);
            return;
        }
        if let Some(pt) = parent_ty
            && !pt.is_any()
            && !nt.is_any()
            && self.ty_str(pt) != self.ty_str(&nt)
        {
            // upstream names the new type on both sides
            let shown = match &a.ty.kind {
                ast::TypeKind::Named(id) => id
                    .names
                    .last()
                    .map(|n| n.sym.as_str().to_string())
                    .unwrap_or_default(),
                _ => self.ty_str(&nt),
            };
            let msg = format!(
                "can't change schema field type of '{}' from {shown} to {shown}",
                a.name.sym
            );
            self.err(ErrKind::Type, msg, a.name.span);
        }
    }

    /// Whether the nearest declaration of attribute `name` in schema `id` or its bases makes
    /// it required (None: not declared there).
    fn inherited_required(&mut self, id: SchemaId, name: Symbol) -> Option<bool> {
        let mut cur = Some(id);
        let mut seen = 0;
        while let Some(c) = cur {
            // an inheritance cycle is another check's error
            seen += 1;
            if seen > 64 {
                return None;
            }
            let info = &self.schemas[c.0];
            let (stmt, pkg, file) = (info.stmt, info.pkg, info.file);
            let declared = stmt.body.iter().find_map(|s| match &s.kind {
                StmtKind::SchemaAttr(a) if a.name.sym == name => Some(!a.optional),
                _ => None,
            });
            if declared.is_some() {
                return declared;
            }
            cur = stmt
                .parent
                .as_ref()
                .and_then(|p| self.resolve_schema(pkg, file, &p.names));
        }
        None
    }
}
