//! A schema's type as upstream's resolver builds it before walking any statement: the
//! protocol and `for` rules, the index signature's key type, then attribute by attribute the
//! type's names, a changed declared type, a required attribute made optional and the fit to
//! the index signature; a base, mixin or rule parent that is no schema; and an attribute's
//! default (`=`, `+=`, `|=`) against its type.

use super::*;

impl<'a> Checker<'a> {
    /// An attribute declared inside an `if` of a schema body, as upstream's resolver takes it
    /// (an annotated assignment): a type declared for it before (in the body or an earlier
    /// `if`) must fit the new one, and the value is checked against the body's declaration
    /// wherever it is, else the earlier one, else its own type.
    /// A schema attribute's default `v` against its type: upstream reads config literals in
    /// it against the type only where that is one schema; else it checks the value whole.
    /// An attribute's value against its type: `=` and the augmented operators as an
    /// assignment, `|=` as the union of the value with the type (upstream's resolver).
    pub(super) fn check_attr_value(&mut self, env: &Env, a: &ast::SchemaAttr, v: &Expr, ty: &Ty) {
        match a.op {
            Some(ast::AttrOp::Aug(op)) if op.bin_op() == ast::BinOp::BitOr => {
                let vt = self.infer(env, v);
                let at = a.name.span.shrink_to_lo();
                let t = self.binary(ast::BinOp::BitOr, &vt, ty, at);
                self.fits(&t, ty, at, None);
            }
            _ => self.check_attr_default(env, v, ty, a.name.span),
        }
    }

    pub(super) fn check_attr_default(&mut self, env: &Env, v: &Expr, ty: &Ty, name: Span) {
        if matches!(ty, Ty::Schema(_)) {
            self.check_assigned(env, v, ty, name, Some(name));
        } else {
            self.check_whole(env, v, ty, name, Some(name));
        }
    }

    /// An attribute's type against the schema's index signature: a subtype of the signature's
    /// value type, unless the signature takes `...` (its key name clashing with the
    /// attribute's name is reported before, in `build_schema_type`).
    fn check_index_attr(&mut self, env: &Env, is: &ast::IndexSignature, a: &ast::SchemaAttr) {
        // an unknown name in a type is the resolver's error, reported later and first
        if !self.type_names_defined(env, &is.value_ty) {
            return;
        }
        use crate::eval::type_str;
        let k = a.name.sym.as_str();
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
                self.index_sig_display(env, is)
            );
            self.err(ErrKind::IndexSignature, msg, a.decl_span());
        }
    }

    /// An index signature as upstream's messages show it: its types as written, a type
    /// alias's as the type it names.
    fn index_sig_display(&mut self, env: &Env, is: &ast::IndexSignature) -> String {
        let written = crate::eval::index_sig_str(is);
        let is_alias = |c: &mut Self, t: &ast::Type| match &t.kind {
            ast::TypeKind::Named(id) => c.resolve_schema(env.pkg, env.file, &id.names).is_none(),
            _ => false,
        };
        if !is_alias(self, &is.key_ty) && !is_alias(self, &is.value_ty) {
            return written;
        }
        let show = |c: &mut Self, t: &ast::Type| {
            if is_alias(c, t) {
                let r = c.resolve_type(env.pkg, env.file, t);
                c.ty_str(&r)
            } else {
                crate::eval::type_str(t)
            }
        };
        let key = show(self, &is.key_ty);
        let value = show(self, &is.value_ty);
        let name = is
            .key_name
            .map(|n| format!("{}: ", n.sym))
            .unwrap_or_default();
        format!("[{name}{key}]: {value}")
    }

    /// Upstream builds each schema's type before it walks any statement, and reports as it
    /// goes: a protocol's name and body, then attribute by attribute its type's names, a
    /// change of a declared type (or a required attribute made optional) and the index
    /// signature. The first of these errors is this schema's.
    /// A base chain that comes back to the schema it starts from: upstream's resolver reports
    /// the circle once, at each member's name in the chain's order, from the member declared
    /// first.
    pub(super) fn check_inherit_cycle(&mut self, env: &Env, st: &ast::SchemaStmt) {
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

    /// A base or protocol name that is no schema: upstream's "not defined" where the name is
    /// when nothing has it, then an inherit error naming what it is (`want`: what it should
    /// have been).
    fn undefined_inherit(&mut self, env: &Env, id: &ast::Identifier, want: &str) {
        let got = self.inherit_object_ty(env, id);
        let msg = format!("invalid schema inherit object type, expect {want}, got '{got}'");
        self.err(ErrKind::IllegalInherit, msg, id.span.shrink_to_lo());
    }

    /// The type upstream's resolver gives a base, mixin, protocol or rule parent that is not
    /// what it should be, as it builds the definitions, before any variable is typed: an
    /// undefined name (reported) and a variable without a declared type are `any`, a rule
    /// or schema is its name, a schema's attribute its declared type; an unknown member is
    /// reported where the path starts.
    pub(super) fn inherit_object_ty(&mut self, env: &Env, id: &ast::Identifier) -> String {
        let first = id.names[0];
        let at = id.span.shrink_to_lo();
        // a package's member: its declared type, `any` for a variable without one
        if let [_, member, rest @ ..] = &id.names[..]
            && let Some(tp) = self.pkg_of_import(env.file, first.sym)
        {
            let q = &self.pkgs[tp];
            let t = if let Some(&(t, f)) = q.globals.get(&member.sym) {
                self.resolve_type(tp, f, t)
            } else if let Some(&sid) = q.schemas.get(&member.sym) {
                Ty::Schema(sid)
            } else if let Some((r, _)) = q.rules.get(&member.sym)
                && rest.is_empty()
            {
                return r.name.sym.as_str().to_string();
            } else if q.defined.contains(&member.sym) {
                Ty::Any
            } else {
                let msg = format!(
                    "attribute '{}' not found in 'module '{}''",
                    member.sym.as_str(),
                    q.path
                );
                self.err(ErrKind::Type, msg, at);
                Ty::Any
            };
            return self.member_path_ty(t, rest, at);
        }
        let p = &self.pkgs[env.pkg];
        if let Some(&(t, f)) = p.globals.get(&first.sym) {
            let t = self.resolve_type(env.pkg, f, t);
            return self.member_path_ty(t, &id.names[1..], at);
        }
        if id.names.len() == 1
            && let Some((r, _)) = p.rules.get(&first.sym)
        {
            return r.name.sym.as_str().to_string();
        }
        if id.names.len() == 1
            && let Some(&sid) = p.schemas.get(&first.sym)
        {
            return self.schema_display(sid);
        }
        if p.inferred.contains_key(&first.sym)
            || p.assigned_ty.contains_key(&first.sym)
            || p.unified.contains_key(&first.sym)
        {
            return "any".into();
        }
        let n = self.errors.len();
        self.check_defined(env, first.sym, first.span);
        if self.errors.len() > n {
            return "any".into();
        }
        let t = match self.lookup(&Env::top(env.pkg, env.file), first.sym) {
            Ty::SchemaType(sid) => Ty::Schema(sid),
            t => t,
        };
        self.member_path_ty(t, &id.names[1..], at)
    }

    /// The type `names` select from `t` in a definition's base or parent: a schema's declared
    /// attribute, a module's member; `any` past anything else or an unknown member (reported).
    fn member_path_ty(&mut self, mut t: Ty, names: &[ast::Name], at: Span) -> String {
        for n in names {
            let a = n.sym.as_str();
            t = match t {
                Ty::Schema(sid) | Ty::SchemaType(sid) => {
                    let m = self.members(sid);
                    match m.attrs.get(&n.sym) {
                        Some(ty) => ty.0.clone(),
                        None => {
                            let msg =
                                format!("attribute '{a}' not found in '{}'", self.schema_name(sid));
                            self.err(ErrKind::Type, msg, at);
                            Ty::Any
                        }
                    }
                }
                // (a package's member is left to the walk)
                Ty::Module(m) => match crate::builtins::system_module_name(&m) {
                    None => Ty::Any,
                    Some(sys) => match crate::builtins::system_member(sys, a) {
                        Some(_) => match sysmod::signature(sys, a) {
                            Some(f) => Ty::Func(f),
                            None => Ty::Any,
                        },
                        None => {
                            let msg = format!("attribute '{a}' not found in 'module '{m}''");
                            self.err(ErrKind::Type, msg, at);
                            Ty::Any
                        }
                    },
                },
                Ty::Dict(_, v) => (*v).clone(),
                Ty::Any | Ty::Str | Ty::StrLit(_) => Ty::Any,
                t => {
                    let msg = format!("attribute '{a}' not found in '{}'", self.ty_str(&t));
                    self.err(ErrKind::Type, msg, at);
                    Ty::Any
                }
            };
        }
        self.ty_str(&t)
    }

    /// Whether `id` names a rule (of this package or an imported one).
    pub(super) fn is_rule(&self, env: &Env, id: &ast::Identifier) -> bool {
        match &id.names[..] {
            [r] => self.pkgs[env.pkg].rules.contains_key(&r.sym),
            [m, r] => self
                .pkg_of_import(env.file, m.sym)
                .is_some_and(|tp| self.pkgs[tp].rules.contains_key(&r.sym)),
            _ => false,
        }
    }

    pub(super) fn build_schema_type(&mut self, env: &Env, st: &ast::SchemaStmt) {
        // the base is looked up as the type is built: an unknown name is upstream's name error
        // and an inherit error (its type is any), a mixin an inherit error (the walk reports
        // them again: the copies are dropped)
        // (a rule is a base to upstream's resolver)
        if let Some(p) = &st.parent
            && self.resolve_schema(env.pkg, env.file, &p.names).is_none()
            && !self.is_rule(env, p)
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
        // then each mixin's name and what it is, before any body is walked
        for m in &st.mixins {
            let name = m.names.last().map(|n| n.sym.as_str()).unwrap_or_default();
            if !name.ends_with("Mixin") {
                let msg = format!("a valid mixin name should end with 'Mixin', got '{name}'");
                self.err(ErrKind::Name, msg, m.span.shrink_to_lo());
            }
            if self.resolve_schema(env.pkg, env.file, &m.names).is_none() {
                let got = self.inherit_object_ty(env, m);
                let msg = format!("illegal schema mixin object type, expected mixin, got '{got}'");
                self.err(ErrKind::IllegalInherit, msg, m.span.shrink_to_lo());
            }
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
        // an index signature's key name that an attribute has: upstream's first error of the
        // attributes
        if let Some(is) = &st.index_signature
            && let Some(kn) = is.key_name
            && st
                .body
                .iter()
                .any(|s| matches!(&s.kind, StmtKind::SchemaAttr(a) if a.name.sym == kn.sym))
        {
            let msg = format!(
                "index signature attribute name '{}' cannot have the same name as schema attributes",
                kn.sym
            );
            // upstream points at the index signature, not at the attribute
            self.err(ErrKind::IndexSignature, msg, is.span);
        }
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
            // every declaration is checked, as upstream's resolver does
            let at = self.errors.len();
            self.check_field_type(env, a, &mut first, parent.as_ref());
            if self.errors.len() == at
                && let Some(is) = &st.index_signature
            {
                self.check_index_attr(env, is, a);
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
        let required_to_optional = |this: &mut Self| {
            let msg = format!(
                "can't change the required schema attribute of '{}' to optional",
                a.name.sym
            );
            this.err(ErrKind::Type, msg, a.decl_span());
        };
        // a redeclaration is compared with the body's first declaration; upstream reports both
        // a changed type and a required one made optional
        if let Some((et, optional)) = first.get(&a.name.sym).cloned() {
            if !field_type_fits(&nt, &et, &|x, y| self.is_sub_schema(x, y)) {
                let msg = format!(
                    "can't change schema field type of '{}' from {} to {}",
                    a.name.sym,
                    self.ty_str(&et),
                    self.ty_str(&nt)
                );
                self.err(ErrKind::Type, msg, a.decl_span());
            }
            if !optional && a.optional {
                required_to_optional(self);
            }
            return;
        }
        first.insert(a.name.sym, (nt.clone(), a.optional));
        let Some((pid, pm)) = parent else { return };
        let parent_ty = pm.attrs.get(&a.name.sym).map(|(pt, _)| pt);
        // (a narrower type is no change: `any` to `int`, `float` to `int`, a union to a member)
        if let Some(pt) = parent_ty
            && !field_type_fits(&nt, pt, &|x, y| self.is_sub_schema(x, y))
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
            self.err(ErrKind::Type, msg, a.decl_span());
        }
        if a.optional && self.inherited_required(*pid, a.name.sym) == Some(true) {
            required_to_optional(self);
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
