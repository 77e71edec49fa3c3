//! Names and types in scope: imports, schema look-up, type annotations, schema members, and the
//! names a body may use.

use super::*;

impl<'a> Checker<'a> {
    /// What a name of `file` imports, if anything.
    pub(super) fn import_target(&self, file: FileId, name: Symbol) -> Option<&'a ImportTarget> {
        match self.imports.get(&(file, name)) {
            Some(t) => Some(*t),
            // upstream collects the main package's imports from all its files
            None if self.file_pkg.get(&file) == Some(&self.main) => self
                .imports
                .iter()
                .find(|((f, n), _)| *n == name && self.file_pkg.get(f) == Some(&self.main))
                .map(|(_, t)| *t),
            None => None,
        }
    }

    pub(super) fn pkg_of_import(&self, file: FileId, name: Symbol) -> Option<usize> {
        match self.import_target(file, name)? {
            ImportTarget::Package(p) => self.pkg_index.get(&**p).copied(),
            _ => None,
        }
    }

    /// The system module (`math`) a name of `file` imports, if any.
    pub(super) fn system_module_of(&self, file: FileId, name: Symbol) -> Option<&'a str> {
        match self.import_target(file, name)? {
            ImportTarget::System(m) => Some(&**m),
            _ => None,
        }
    }

    /// The schema an identifier (`S` or `pkg.S`) names from `file` of package `pkg`.
    pub(super) fn resolve_schema(
        &self,
        pkg: usize,
        _file: FileId,
        names: &[ast::Name],
    ) -> Option<SchemaId> {
        match names {
            [n] => self.pkgs[pkg].schemas.get(&n.sym).copied(),
            [p, n] => {
                // a name is resolved in the file it is written in (merged declarations carry
                // entries of several files)
                let target = self.pkg_of_import(p.span.file, p.sym)?;
                self.pkgs[target].schemas.get(&n.sym).copied()
            }
            _ => None,
        }
    }

    /// An annotation as a checker type; anything not understood is `any`.
    pub(super) fn resolve_type(&mut self, pkg: usize, file: FileId, t: &ast::Type) -> Ty {
        use ast::{BasicType, LiteralType, TypeKind};
        match &t.kind {
            TypeKind::Any => Ty::Any,
            TypeKind::Basic(b) => match b {
                BasicType::Bool => Ty::Bool,
                BasicType::Int => Ty::Int,
                BasicType::Float => Ty::Float,
                BasicType::Str => Ty::Str,
            },
            TypeKind::Named(id) => {
                if let Some(s) = self.resolve_schema(pkg, file, &id.names) {
                    return Ty::Schema(s);
                }
                let alias = match id.names.as_slice() {
                    [n] => self.pkgs[pkg]
                        .aliases
                        .get(&n.sym)
                        .copied()
                        .map(|a| (pkg, a)),
                    [p, n] => self
                        .pkg_of_import(p.span.file, p.sym)
                        .and_then(|tp| self.pkgs[tp].aliases.get(&n.sym).copied().map(|a| (tp, a))),
                    _ => None,
                };
                match alias {
                    Some((ap, (at, af))) if self.alias_depth < 32 => {
                        self.alias_depth += 1;
                        let r = self.resolve_type(ap, af, at);
                        self.alias_depth -= 1;
                        r
                    }
                    _ => match id.names.as_slice() {
                        [m, n]
                            if n.sym.as_str() == "NumberMultiplier"
                                && self
                                    .system_module_of(m.span.file, m.sym)
                                    .and_then(crate::builtins::system_module_name)
                                    == Some("units") =>
                        {
                            Ty::Unit(None)
                        }
                        _ => Ty::Any,
                    },
                }
            }
            TypeKind::List(e) => Ty::List(Rc::new(match e {
                Some(e) => self.resolve_type(pkg, file, e),
                None => Ty::Any,
            })),
            TypeKind::Dict(k, v) => {
                let k = match k {
                    Some(k) => self.resolve_type(pkg, file, k),
                    None => Ty::Any,
                };
                let v = match v {
                    Some(v) => self.resolve_type(pkg, file, v),
                    None => Ty::Any,
                };
                Ty::Dict(Rc::new(k), Rc::new(v))
            }
            TypeKind::Union(ts) => {
                let ts: Vec<Ty> = ts.iter().map(|x| self.resolve_type(pkg, file, x)).collect();
                // a member written twice stays twice, as upstream's annotation types keep
                // them (`expected str | str`), and so does `any` (`int | any` is no `any`: an
                // `int | any` value is no `str`); everything else is the usual union
                let repeated = ts.iter().enumerate().any(|(i, t)| ts[..i].contains(t));
                let any = ts.iter().any(|t| matches!(t, Ty::Any));
                if (repeated || any) && !ts.iter().any(|t| matches!(t, Ty::Union(_))) {
                    Ty::Union(Rc::from(ts))
                } else {
                    Ty::union(ts)
                }
            }
            TypeKind::Literal(l) => match l {
                LiteralType::Bool(b) => Ty::BoolLit(*b),
                LiteralType::Int(i, None) => Ty::IntLit(*i),
                LiteralType::Int(i, Some(s)) => {
                    Ty::Unit(Some(std::sync::Arc::from(format!("{i}{}", s.as_str()))))
                }
                LiteralType::Float(f) => Ty::FloatLit(*f),
                LiteralType::Str(s) => Ty::StrLit(s.clone()),
                LiteralType::None => Ty::None,
                _ => Ty::Any,
            },
            TypeKind::Function { params, ret } => {
                let params = params
                    .iter()
                    .map(|p| (None, self.resolve_type(pkg, file, p), false))
                    .collect();
                let ret = match ret {
                    Some(r) => self.resolve_type(pkg, file, r),
                    None => Ty::Any,
                };
                Ty::Func(Rc::new(ty::FuncTy {
                    params,
                    ret,
                    param_spans: Vec::new(),
                }))
            }
        }
    }

    pub(super) fn schema_name(&self, id: SchemaId) -> &'static str {
        self.schemas[id.0].stmt.name.sym.as_str()
    }

    pub(super) fn members(&mut self, id: SchemaId) -> Rc<Members> {
        if let Some(m) = self.schemas[id.0].members.get() {
            if self.members_building.contains(&id) {
                self.members_cycle_hit = true;
            }
            return m.clone();
        }
        // a placeholder first, so an inheritance cycle ends. Upstream's schema in a cycle has
        // the attributes of every schema of the cycle (`A(A)`: its own), so a table built
        // while another of the cycle was still being built is not kept: the first schema of
        // the cycle asked for gets the whole cycle's, the others theirs when asked.
        let _ = self.schemas[id.0].members.set(Rc::new(Members::default()));
        self.members_building.insert(id);
        let outer_hit = std::mem::replace(&mut self.members_cycle_hit, false);
        let m = Rc::new(self.build_members(id));
        self.members_building.remove(&id);
        let hit = self.members_cycle_hit;
        self.members_cycle_hit = outer_hit || hit;
        let cell = &mut self.schemas[id.0].members;
        *cell = OnceCell::new();
        if !hit || self.members_building.is_empty() {
            let _ = cell.set(m.clone());
        }
        m
    }

    pub(super) fn build_members(&mut self, id: SchemaId) -> Members {
        let (st, pkg, file) = {
            let s = &self.schemas[id.0];
            (s.stmt, s.pkg, s.file)
        };
        // (an index signature whose key type is `None` or `Undefined` takes no key upstream)
        let takes_keys = st.index_signature.as_ref().is_some_and(|is| {
            !matches!(
                is.key_ty.kind,
                ast::TypeKind::Literal(ast::LiteralType::None | ast::LiteralType::Undefined)
            )
        });
        let mut m = Members {
            open: takes_keys || st.is_protocol() || st.for_host.is_some(),
            ..Default::default()
        };
        // parent and mixin members first; own declarations override them
        let mut bases: Vec<&ast::Identifier> = st.parent.iter().collect();
        bases.extend(st.mixins.iter());
        for b in bases {
            match self.resolve_schema(pkg, file, &b.names) {
                // a mixin or protocol as the base is upstream's inherit error, and then no
                // base at all
                Some(pid)
                    if st.parent.as_ref() == Some(b)
                        && (self.schemas[pid.0].stmt.is_mixin()
                            || self.schemas[pid.0].stmt.is_protocol()) => {}
                Some(pid) => {
                    let pm = self.members(pid);
                    // (a base's index signature is not inherited upstream; a base with an
                    // unknown base of its own leaves the attributes unknown)
                    m.open |= pm.unresolved;
                    m.unresolved |= pm.unresolved;
                    for k in &pm.order {
                        if let Some(v) = pm.attrs.get(k) {
                            // (an inherited attribute is no "did you mean" candidate
                            // upstream: `in_scope` holds the body's own names)
                            if !m.attrs.contains_key(k) {
                                m.order.push(*k);
                            }
                            m.attrs.insert(*k, v.clone());
                        }
                    }
                    m.parents.push(pid);
                    m.parents.extend(pm.parents.iter().copied());
                }
                // so is a base name that is not defined
                None if st.parent.as_ref() == Some(b)
                    && !self.name_defined_at(
                        &Env::top(pkg, file),
                        b.names[0].sym,
                        Some(b.names[0].span.lo),
                    ) => {}
                None => {
                    m.open = true;
                    m.unresolved = true;
                }
            }
        }
        if let Some(ps) = &st.params {
            for p in ps {
                m.add(p.name.sym, Ty::Any, p.name.span);
            }
        }
        self.collect_body_members(pkg, file, &st.body, &mut m, false);
        m
    }

    pub(super) fn collect_body_members(
        &mut self,
        pkg: usize,
        file: FileId,
        body: &[Stmt],
        m: &mut Members,
        in_if: bool,
    ) {
        for s in body {
            match &s.kind {
                // upstream's schema type has the body's own declarations as attributes; one
                // under an `if` is a name of the body, no attribute a config may set
                StmtKind::SchemaAttr(a) => {
                    let t = self.resolve_type(pkg, file, &a.ty);
                    if in_if {
                        m.add(a.name.sym, t, a.decl_span());
                    } else if m.declared.insert(a.name.sym) {
                        m.set(a.name.sym, t, a.decl_span());
                    }
                }
                StmtKind::Assign(a) => {
                    for t in &a.targets {
                        let ty = match &a.ty {
                            Some(ty) if t.path.is_empty() => self.resolve_type(pkg, file, ty),
                            _ => Ty::Any,
                        };
                        m.add(t.name.sym, ty, t.name.span);
                    }
                }
                StmtKind::AugAssign(a) => m.add(a.target.name.sym, Ty::Any, a.target.name.span),
                StmtKind::Unification(u) => m.add(u.target.sym, Ty::Any, u.target.span),
                StmtKind::If(i) => {
                    self.collect_body_members(pkg, file, &i.body, m, true);
                    self.collect_body_members(pkg, file, &i.orelse, m, true);
                }
                _ => {}
            }
        }
    }

    pub(super) fn is_sub_schema(&self, a: SchemaId, b: SchemaId) -> bool {
        if a == b {
            return true;
        }
        // walk the parent chain through the defining files' names
        let mut cur = a;
        for _ in 0..64 {
            let s = &self.schemas[cur.0];
            let Some(p) = &s.stmt.parent else {
                return false;
            };
            match self.resolve_schema(s.pkg, s.file, &p.names) {
                Some(pid) if pid == b => return true,
                Some(pid) => cur = pid,
                // unknown parent: assume it may match
                None => return true,
            }
        }
        true
    }

    pub(super) fn ty_str(&self, t: &Ty) -> String {
        t.display(&|id| self.schema_display(id))
    }

    /// Upstream's resolver names schema types without their package (`expected Aff, got Aff`
    /// for two packages' `Aff`).
    pub(super) fn schema_display(&self, id: SchemaId) -> String {
        self.schemas[id.0].stmt.name.sym.as_str().to_string()
    }

    /// The rule a call's callee names (`R`, `pkg.R`; not a local of that name), as a function
    /// of its own parameters: upstream's resolver checks a rule's arguments as a call's.
    pub(super) fn rule_params(&mut self, env: &Env, callee: &Expr) -> Option<ty::FuncTy> {
        let (pkg, name) = match &callee.kind {
            ExprKind::Ident(s) if env.locals.iter().all(|(n, _)| n != s) => (env.pkg, *s),
            ExprKind::Selector(x) if !x.optional => match &x.value.kind {
                ExprKind::Ident(m) => (self.pkg_of_import(callee.span.file, *m)?, x.attr.sym),
                _ => return None,
            },
            _ => return None,
        };
        let &(rule, file) = self.pkgs[pkg].rules.get(&name)?;
        Some(self.params_func(rule.params.as_deref(), pkg, file, Ty::Any))
    }

    /// A schema's own parameters (`schema A[a, b = 1]`; a derived schema does not take its
    /// base's, as upstream) as a function type returning an instance.
    pub(super) fn schema_params(&mut self, id: SchemaId) -> ty::FuncTy {
        let info = &self.schemas[id.0];
        let (stmt, pkg, file) = (info.stmt, info.pkg, info.file);
        self.params_func(stmt.params.as_deref(), pkg, file, Ty::Schema(id))
    }

    /// Declared parameters (of a schema or a rule, in `pkg`'s `file`) as a function type.
    fn params_func(
        &mut self,
        params: Option<&[ast::Param]>,
        pkg: usize,
        file: FileId,
        ret: Ty,
    ) -> ty::FuncTy {
        let params_ty = params
            .iter()
            .copied()
            .flatten()
            .map(|p| {
                let t = match &p.ty {
                    Some(t) => self.resolve_type(pkg, file, t),
                    None => Ty::Any,
                };
                (Some(p.name.sym), t, p.default.is_some())
            })
            .collect();
        let param_spans = params
            .iter()
            .copied()
            .flatten()
            .map(|p| p.name.span)
            .collect();
        ty::FuncTy {
            params: params_ty,
            ret,
            param_spans,
        }
    }

    pub(super) fn schema_is_plain(&self, id: SchemaId) -> bool {
        let st = self.schemas[id.0].stmt;
        !st.is_protocol() && !st.is_mixin()
    }

    pub(super) fn is_schema_member(&mut self, env: &Env, s: Symbol) -> bool {
        match env.schema {
            Some(id) => self.members(id).attrs.contains_key(&s),
            None => false,
        }
    }

    /// Is `s` a name where `env` is: a local, an attribute of the schema being checked, a
    /// name of the package, an import of the file (of any file, in the main package) or a
    /// builtin? Unknown where a base schema is unknown or inside a mixin.
    pub(super) fn name_defined(&mut self, env: &Env, s: Symbol) -> bool {
        self.name_defined_at(env, s, None)
    }

    /// [`Self::name_defined`] for a name written at byte `at`: a config literal's key is in
    /// scope only after its entry (`{b = a, a = 1}`: name 'a' is not defined), as upstream's
    /// config scope; a key set under an `if` entry is taken as defined.
    pub(super) fn name_defined_at(&mut self, env: &Env, s: Symbol, at: Option<u32>) -> bool {
        if env.lenient
            || env.locals.iter().any(|(n, _)| *n == s)
            || env
                .keys
                .iter()
                .any(|(k, end, _)| *k == s && at.is_none_or(|at| *end <= at || *end == u32::MAX))
        {
            return true;
        }
        if let Some(id) = env.schema {
            let m = self.members(id);
            if m.unresolved || m.attrs.contains_key(&s) || m.names.contains(&s) {
                return true;
            }
        }
        self.pkgs[env.pkg].defined.contains(&s)
            || self.imports.contains_key(&(env.file, s))
            || (env.pkg == self.main
                && self
                    .imports
                    .keys()
                    .any(|(f, n)| *n == s && self.file_pkg.get(f) == Some(&self.main)))
            || BUILTINS.contains(&s.as_str())
            || crate::builtins::lookup(s.as_str()).is_some()
    }

    /// Report `name '..' is not defined` (with upstream's suggestions) unless `s` is defined.
    pub(super) fn check_defined(&mut self, env: &Env, s: Symbol, span: Span) {
        if self.name_defined_at(env, s, Some(span.lo)) {
            return;
        }
        // candidates in upstream's scope order: builtins, package, schema, locals
        let mut cands: indexmap::IndexSet<&str> = BUILTINS.iter().copied().collect();
        // schemas and type aliases are in scope from the start; in the first scan of the
        // package's variables, a variable once that scan has declared it
        let p = &self.pkgs[env.pkg];
        let early = self.early_scope;
        let no_aliases = self.aliases_unoffered;
        cands.extend(
            p.defined
                .iter()
                .filter(|n| !(no_aliases && p.aliases.contains_key(n)))
                .filter(|n| {
                    !early
                        || p.schemas.contains_key(n)
                        || p.aliases.contains_key(n)
                        || self.reached.contains(n)
                })
                .map(|n| n.as_str()),
        );
        let imports: Vec<&str> = self
            .imports
            .keys()
            .filter(|(f, _)| *f == env.file)
            .map(|(_, n)| n.as_str())
            .collect();
        cands.extend(imports);
        if let Some(id) = env.schema {
            let m = self.members(id);
            cands.extend(m.in_scope.iter().map(|n| n.as_str()));
        }
        cands.extend(env.locals.iter().map(|(n, _)| n.as_str()));
        cands.extend(
            env.keys
                .iter()
                .filter(|(_, end, _)| *end <= span.lo)
                .map(|(n, _, _)| n.as_str()),
        );
        let msg = format!(
            "name '{}' is not defined{}",
            s.as_str(),
            did_you_mean(s.as_str(), cands.iter().copied())
        );
        self.err(ErrKind::Compile, msg, span);
    }

    /// The names a type annotation refers to must be defined (`name 'Foo' is not defined`).
    pub(super) fn check_type_names(&mut self, env: &Env, t: &ast::Type) {
        self.check_type_names_in(env, t, t.span, true);
    }

    /// The type of an `as` expression: upstream reports an unknown name where it is written.
    pub(super) fn check_as_type_names(&mut self, env: &Env, t: &ast::Type) {
        self.check_type_names_in(env, t, t.span, false);
    }

    /// `root`: the whole annotation, where upstream reports a missing module member (and, for
    /// an annotation, `at_root`, an unknown name).
    pub(super) fn check_type_names_in(
        &mut self,
        env: &Env,
        t: &ast::Type,
        root: Span,
        at_root: bool,
    ) {
        use ast::TypeKind;
        match &t.kind {
            TypeKind::Named(id) => {
                let n = id.names[0];
                if id.names.len() > 1 || n.sym.as_str() != "NumberMultiplier" {
                    // a type names a schema or alias of the package scope: upstream offers
                    // no attribute or local as a candidate
                    let at = if at_root { root.shrink_to_lo() } else { n.span };
                    self.check_defined(&env.package_scope(), n.sym, at);
                }
                if id.names.len() == 2 {
                    self.check_module_member(n.span.file, n.sym, id.names[1].sym, root);
                }
            }
            TypeKind::List(Some(e)) => self.check_type_names_in(env, e, root, at_root),
            TypeKind::Dict(k, v) => {
                for x in [k, v].into_iter().flatten() {
                    self.check_type_names_in(env, x, root, at_root);
                }
            }
            TypeKind::Union(ts) => {
                for x in ts {
                    self.check_type_names_in(env, x, root, at_root);
                }
            }
            TypeKind::Function { params, ret } => {
                for x in params.iter().chain(ret.iter().map(|b| &**b)) {
                    self.check_type_names_in(env, x, root, at_root);
                }
            }
            // upstream's resolver looks `None` and `Undefined` up as names in a type, and
            // finds neither
            TypeKind::Literal(l @ (ast::LiteralType::None | ast::LiteralType::Undefined)) => {
                let name = if matches!(l, ast::LiteralType::None) {
                    "None"
                } else {
                    "Undefined"
                };
                let at = if at_root { root.shrink_to_lo() } else { t.span };
                let msg = format!("name '{name}' is not defined");
                self.err(ErrKind::Compile, msg, at);
            }
            _ => {}
        }
    }

    /// `module.member` in a type: upstream's resolver wants the member to exist (a schema,
    /// alias or variable of a package; `units.NumberMultiplier` or a function of a system
    /// module).
    pub(super) fn check_module_member(
        &mut self,
        file: FileId,
        m: Symbol,
        member: Symbol,
        root: Span,
    ) {
        // a package is named by its path, a system module as imported
        let (found, module) = if let Some(p) = self.pkg_of_import(file, m) {
            let p = &self.pkgs[p];
            let found = p.schemas.contains_key(&member)
                || p.aliases.contains_key(&member)
                || p.defined.contains(&member);
            (found, p.path.to_string())
        } else if let Some(sm) = self.system_module_of(file, m) {
            let name = crate::builtins::system_module_name(sm).unwrap_or(sm);
            let found = (name == "units" && member.as_str() == "NumberMultiplier")
                || crate::builtins::system_member(name, member.as_str()).is_some();
            (found, sm.to_string())
        } else {
            (true, String::new())
        };
        if !found {
            let msg = format!(
                "attribute '{}' not found in 'module '{module}''",
                member.as_str()
            );
            self.err(ErrKind::Type, msg, root.shrink_to_lo());
        }
    }

    pub(super) fn lookup(&mut self, env: &Env, s: Symbol) -> Ty {
        self.lookup_at(env, s, None)
    }

    /// The type of the name `s` written at byte `at` (where known): a config literal's key is
    /// the type of the value its last entry before `at` gave it, as upstream's resolver binds
    /// keys in the config's scope (`{a = 1, b = a()}`: 'int(1)' object is not callable).
    pub(super) fn lookup_at(&mut self, env: &Env, s: Symbol, at: Option<u32>) -> Ty {
        if let Some((_, t)) = env.locals.iter().rev().find(|(n, _)| *n == s) {
            return t.clone();
        }
        // in a schema body an attribute wins over a config literal's key of the same name
        // (upstream's resolver looks the schema's scope up first)
        if let Some(id) = env.schema {
            let m = self.members(id);
            if let Some(a) = m.attrs.get(&s) {
                // an attribute without a declared type has its first assignment's, once the
                // body has reached it
                if a.0.is_any()
                    && let Some(t) = self.schema_assigned.get(&(id, s))
                {
                    return t.clone();
                }
                return a.0.clone();
            }
            if m.names.contains(&s)
                && let Some(t) = self.schema_assigned.get(&(id, s))
            {
                return t.clone();
            }
        }
        // (a key set only after `at`, or under an `if`, is not in scope there: the name is
        // the enclosing scope's)
        let bound = match at {
            Some(at) => env
                .keys
                .iter()
                .rev()
                .find(|(k, end, _)| *k == s && *end <= at)
                .map(|(_, _, v)| v.clone()),
            None => env.keys.iter().any(|(k, _, _)| *k == s).then_some(None),
        };
        if let Some(kv) = bound {
            return match kv.and_then(|kv| Some((self.key_tys.get(&kv.value)?.clone(), kv))) {
                Some((t, kv)) => kv.path.iter().rev().fold(t, |t, n| {
                    Ty::Dict(
                        Rc::new(Ty::StrLit(std::sync::Arc::from(n.as_str()))),
                        Rc::new(t),
                    )
                }),
                None => Ty::Any,
            };
        }
        if let Some(id) = env.schema {
            let m = self.members(id);
            if m.open {
                return Ty::Any;
            }
        }
        let p = &self.pkgs[env.pkg];
        // a private name annotated more than once has the type it ends with
        if let Some((t, _)) = p.private_final.get(&s) {
            return t.clone();
        }
        if let Some(&(t, f)) = p.globals.get(&s) {
            let pkg = env.pkg;
            return self.resolve_type(pkg, f, t);
        }
        if let Some(&id) = p.schemas.get(&s) {
            return Ty::SchemaType(id);
        }
        if let Some(&(e, f)) = p.unified.get(&s)
            && let ExprKind::Schema(se) = &e.kind
        {
            let pkg = env.pkg;
            if let Some(id) = self.resolve_schema(pkg, f, &se.name.names) {
                return Ty::Schema(id);
            }
        }
        let p = &self.pkgs[env.pkg];
        // a forward reference in the package being checked: its value is not typed yet
        if self.checking == Some(env.pkg)
            && p.inferred.contains_key(&s)
            && !p.assigned_ty.contains_key(&s)
        {
            return Ty::Any;
        }
        if let Some(t) = p.inferred_ty.get(&s) {
            return t.clone();
        }
        if let Some(&(e, f)) = p.inferred.get(&s) {
            let pkg = env.pkg;
            // `any` while it is being inferred ends self-references
            self.pkgs[pkg].inferred_ty.insert(s, Ty::Any);
            let env2 = Env::top(pkg, f);
            let saved = std::mem::take(&mut self.errors);
            let t = self.infer(&env2, e).variable_type();
            // errors inside the value are reported when its statement is checked
            self.errors = saved;
            self.pkgs[pkg].inferred_ty.insert(s, t.clone());
            return t;
        }
        // a name assigned more than once has its first assignment's type from there on
        if let Some(t) = self.pkgs[env.pkg].assigned_ty.get(&s) {
            return t.clone();
        }
        // an imported module as a value
        if let Some(ImportTarget::Package(m) | ImportTarget::System(m)) =
            self.import_target(env.file, s)
        {
            return Ty::Module(m.clone());
        }
        // a builtin function as a value has its signature's type (`len(str)`: expected str |
        // {any:any} | [any], got (any) -> str)
        if BUILTINS.contains(&s.as_str())
            && self.builtin_visible(env, s)
            && let Some(ps) = super::calls::builtin_fn_params(s.as_str())
        {
            return Ty::Func(Rc::new(ty::FuncTy {
                params: ps
                    .into_iter()
                    .map(|(n, t)| (Some(Symbol::intern(n)), t, true))
                    .collect(),
                ret: super::calls::builtin_fn_ret(s.as_str()).unwrap_or(Ty::Any),
                param_spans: Vec::new(),
            }));
        }
        Ty::Any
    }

    /// Whether every name a type annotation refers to is defined in the package scope.
    pub(super) fn type_names_defined(&mut self, env: &Env, t: &ast::Type) -> bool {
        use ast::TypeKind;
        match &t.kind {
            // (a dotted name's first part: an import of the file or a package-level name)
            TypeKind::Named(id) if id.names.len() > 1 => {
                let (n, m) = (id.names[0], id.names[1]);
                if self.imports.contains_key(&(env.file, n.sym)) {
                    // (an imported module's member must exist: asked without reporting)
                    let before = self.errors.len();
                    if id.names.len() == 2 {
                        self.check_module_member(n.span.file, n.sym, m.sym, t.span);
                    }
                    let ok = self.errors.len() == before;
                    self.errors.truncate(before);
                    ok
                } else {
                    self.name_defined(&env.package_scope(), n.sym)
                }
            }
            TypeKind::Named(id) => {
                id.names[0].sym.as_str() == "NumberMultiplier"
                    || self.name_defined(&env.package_scope(), id.names[0].sym)
            }
            TypeKind::List(Some(e)) => self.type_names_defined(env, e),
            TypeKind::Dict(k, v) => [k, v]
                .into_iter()
                .flatten()
                .all(|x| self.type_names_defined(env, x)),
            TypeKind::Union(ts) => ts.iter().all(|x| self.type_names_defined(env, x)),
            TypeKind::Literal(ast::LiteralType::None | ast::LiteralType::Undefined) => false,
            _ => true,
        }
    }
}

impl Members {
    /// Declare an attribute (over an inherited one; of its own body only the first
    /// declaration is declared, see `collect_body_members`).
    fn set(&mut self, s: Symbol, t: Ty, sp: Span) {
        if !self.attrs.contains_key(&s) {
            self.order.push(s);
        }
        if !self.names.contains(&s) && !self.in_scope.contains(&s) {
            self.in_scope.push(s);
        }
        self.attrs.insert(s, (t, sp));
    }
    /// A name introduced by assignment (or a parameter): an attribute only if declared.
    fn add(&mut self, s: Symbol, _t: Ty, _sp: Span) {
        if !self.attrs.contains_key(&s) && self.names.insert(s) {
            self.in_scope.push(s);
        }
    }
}
