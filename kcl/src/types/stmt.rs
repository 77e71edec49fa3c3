//! Statements and schema bodies: package walk, parameters, nested attributes and decorators
//! (a schema's type is built in `schema_type`, assignment targets are in `targets`, the
//! first scan of the package's declarations in `declare`).

use super::*;

impl<'a> Checker<'a> {
    pub(super) fn check_pkg(&mut self, pkg: usize) {
        let modules = self.pkgs[pkg].modules;
        // a schema or rule name defined twice in the package is reported before anything else
        // (at each later definition, then again at its name with the first one's; the last
        // definition is the one the package's names resolve to)
        let mut defined: FxHashMap<Symbol, Span> = FxHashMap::default();
        let mut first_name: FxHashMap<Symbol, Span> = FxHashMap::default();
        let mut aliases: FxHashMap<Symbol, Span> = FxHashMap::default();
        let mut again = Vec::new();
        let mut last_def: FxHashMap<Symbol, Span> = FxHashMap::default();
        for s in modules.iter().flat_map(|m| &m.body) {
            let name = match &s.kind {
                StmtKind::Schema(st) => st.name,
                StmtKind::Rule(r) => r.name,
                StmtKind::TypeAlias(t) => {
                    aliases.entry(t.name.sym).or_insert(t.name.span);
                    continue;
                }
                _ => continue,
            };
            first_name.entry(name.sym).or_insert(name.span);
            if let Some(earlier) = last_def.insert(name.sym, s.span) {
                self.overridden.insert(earlier);
            }
            if defined.insert(name.sym, s.span).is_some() {
                let msg = format!("Unique key error name '{}'", name.sym);
                self.err(ErrKind::UniqueKey, msg, s.span.shrink_to_lo());
                again.push(name);
            }
        }
        for name in again {
            let e = EvalError::new(
                ErrKind::UniqueKey,
                format!("Unique key error name '{}'", name.sym),
                Some(name.span.shrink_to_lo()),
            )
            .with_note(
                first_name[&name.sym].shrink_to_lo(),
                format!("The variable '{}' is declared here", name.sym),
            );
            self.errors.push(e);
        }
        // upstream's resolver then declares the package's variables in order, statement by
        // statement: a public name assigned twice (or a schema or alias name assigned) is
        // reported, then the statement's annotation (or unified schema) is resolved with only
        // the variables declared so far in scope; a module's type aliases come first
        let mut first: FxHashMap<Symbol, Span> = FxHashMap::default();
        self.early_scope = true;
        self.reached.clear();
        for m in modules {
            let env = Env::top(pkg, m.file);
            for s in &m.body {
                if let StmtKind::TypeAlias(t) = &s.kind {
                    // upstream reports an alias's unknown type name at the alias's name, first
                    // with no alias among the candidates, later (below) with them
                    self.aliases_unoffered = true;
                    self.check_type_names_in(&env, &t.ty, t.name.span, true);
                    self.aliases_unoffered = false;
                }
            }
            // a file's imports are immutable names of that file
            let imports: FxHashMap<Symbol, Span> = m
                .body
                .iter()
                .filter_map(|s| match &s.kind {
                    StmtKind::Import(i) => Some((i.local_name()?, s.span.shrink_to_lo())),
                    _ => None,
                })
                .collect();
            for s in &m.body {
                self.scan_declaration(pkg, &env, s, (&defined, &aliases, &imports), &mut first);
            }
        }
        self.early_scope = false;
        self.finish_private_annotations(pkg);
        // index signatures and attribute redeclarations are checked as the package's schema
        // types are built, before any statement is walked
        for m in modules {
            let env = Env::top(pkg, m.file);
            for s in &m.body {
                match &s.kind {
                    StmtKind::Schema(st) => self.build_schema_type(&env, st),
                    // a rule's type names its parents and its protocol
                    StmtKind::Rule(r) => {
                        for id in &r.parents {
                            if !self.is_rule(&env, id) {
                                let got = self.inherit_object_ty(&env, id);
                                let msg = format!("illegal rule type '{got}'");
                                self.err(ErrKind::IllegalInherit, msg, id.span.shrink_to_lo());
                            }
                        }
                        if let Some(id) = &r.for_host {
                            self.check_defined(&env, id.names[0].sym, id.names[0].span);
                        }
                    }
                    _ => {}
                }
            }
        }
        // base chains that come back to their schema, after every schema type is built (its
        // names' errors first)
        for m in modules {
            let env = Env::top(pkg, m.file);
            for s in &m.body {
                if let StmtKind::Schema(st) = &s.kind {
                    self.check_inherit_cycle(&env, st);
                }
            }
        }
        self.assigned.clear();
        self.checking = Some(pkg);
        for m in modules {
            self.declare_private_types(&Env::top(pkg, m.file), &m.body);
        }
        for m in modules {
            let env = Env::top(pkg, m.file);
            for s in &m.body {
                self.stmt_start = Some(s.span.shrink_to_lo());
                self.top_stmt(&env, s);
                // a config key's recorded type is read only inside its own literal: kept per
                // statement, the tables stay small (capacity is kept)
                self.key_want.clear();
                self.key_tys.clear();
            }
        }
        // a type name the schema-type phase reported is reported again by the walk: once
        let mut seen = rustc_hash::FxHashSet::default();
        self.errors
            .retain(|e| seen.insert((e.kind.code_title(), e.msg.clone(), e.span, e.notes.clone())));
    }

    pub(super) fn stmt(&mut self, env: &Env, s: &Stmt) {
        // (errors of earlier statements do not stop this one's checks)
        let before = self.errors.len();
        self.resolved_at = s.span.shrink_to_lo();
        match &s.kind {
            StmtKind::Expr(e) => {
                self.infer(env, e);
            }
            StmtKind::Unification(u) => {
                // upstream resolves `x: S {...}`'s schema name as a type, in the package scope
                if let ExprKind::Schema(se) = &u.value.kind
                    && let [n] = se.name.names.as_slice()
                    && !self.name_defined(env, n.sym)
                {
                    self.check_defined(&env.package_scope(), n.sym, n.span);
                    return;
                }
                self.infer(env, &u.value);
            }
            StmtKind::Assign(a) => {
                let top = env.schema.is_none() && self.lambda_depth == 0;
                // in a lambda, `a.b = v` wants `a` in scope (resolved before the value)
                if self.lambda_depth > 0 {
                    for t in a.targets.iter().filter(|t| !t.path.is_empty()) {
                        self.check_defined(env, t.name.sym, t.name.span.shrink_to_lo());
                        if self.errors.len() > before {
                            return;
                        }
                    }
                }
                match (&a.ty, a.targets.as_slice()) {
                    // `a: T = b = v` checks the value once, at the first target
                    (Some(t), [target, ..]) => {
                        self.check_type_names(env, t);
                        let mut ty = self.resolve_type(env.pkg, env.file, t);
                        // a private name annotated elsewhere with another type: this
                        // annotation may not change it, and the value must fit that type
                        if top
                            && target.path.is_empty()
                            && let Some((last, last_at)) = self.pkgs[env.pkg]
                                .private_final
                                .get(&target.name.sym)
                                .cloned()
                        {
                            if !ty.is_any() && self.ty_str(&ty) != self.ty_str(&last) {
                                let at = target.span.shrink_to_lo();
                                self.type_change_error(target.name.sym, &ty, at, last_at, &last);
                            }
                            ty = last;
                        }
                        self.check_assigned(env, &a.value, &ty, target.span, Some(target.span));
                        if top && target.path.is_empty() {
                            self.pkgs[env.pkg]
                                .assigned_ty
                                .entry(target.name.sym)
                                .or_insert(ty);
                        }
                    }
                    // a module's name (an import of this file) assigned: upstream checks the
                    // value against the module too, after the ImmutableError
                    (None, [target])
                        if top
                            && target.path.is_empty()
                            && let Some(ImportTarget::Package(m) | ImportTarget::System(m)) =
                                self.import_target(env.file, target.name.sym) =>
                    {
                        let m = Ty::Module(m.clone());
                        let t = self.infer(env, &a.value);
                        self.fits(&t, &m, target.span, None);
                    }
                    // a package-level name assigned again keeps its first type
                    (None, [target])
                        if top
                            && target.path.is_empty()
                            && let Some(ty) = self.pkgs[env.pkg]
                                .assigned_ty
                                .get(&target.name.sym)
                                .filter(|t| !t.is_any())
                                .cloned() =>
                    {
                        self.check_assigned(env, &a.value, &ty, target.span, Some(target.span));
                    }
                    // in a schema body: the attribute's declared type, else its first
                    // assignment's
                    (None, [target])
                        if self.lambda_depth == 0
                            && target.path.is_empty()
                            && let Some(id) = env.schema =>
                    {
                        let key = (id, target.name.sym);
                        let declared = self
                            .members(id)
                            .attrs
                            .get(&target.name.sym)
                            .map(|a| a.0.clone())
                            .filter(|t| !t.is_any())
                            .or_else(|| self.schema_assigned.get(&key).cloned())
                            .filter(|t| !t.is_any());
                        match declared {
                            Some(ty) => self.check_assigned(
                                env,
                                &a.value,
                                &ty,
                                target.span,
                                Some(target.span),
                            ),
                            None => {
                                let t = self.infer(env, &a.value).variable_type();
                                self.fits(&t, &Ty::Any, target.span, None);
                                let t = sup(vec![t], &|x, y| self.is_sub_schema(x, y));
                                self.schema_assigned.insert(key, t);
                            }
                        }
                    }
                    // `x[i] = v`, `x.k = v`: the value against the type at the path
                    (None, [target])
                        if !target.path.is_empty()
                            && let Some(ty) = self.path_target_type(env, target) =>
                    {
                        self.check_value(env, &a.value, &ty, target.span, None);
                    }
                    _ => {
                        let t = self.infer(env, &a.value);
                        if let Some(target) = a.targets.first() {
                            self.fits(&t, &Ty::Any, target.span, None);
                        }
                        // each of several targets assigned before keeps its first type
                        if top && a.targets.len() > 1 {
                            for target in a.targets.iter().filter(|t| t.path.is_empty()) {
                                let known = self.pkgs[env.pkg]
                                    .assigned_ty
                                    .get(&target.name.sym)
                                    .filter(|t| !t.is_any())
                                    .cloned();
                                if let Some(ty) = known {
                                    self.fits(&t, &ty, target.span, None);
                                }
                            }
                        }
                        // the variable's type: literals widened, then upstream's sup (`int |
                        // float` from round() is `float`)
                        let var_ty = sup(vec![t.variable_type()], &|x, y| self.is_sub_schema(x, y));
                        if top {
                            for target in a.targets.iter().filter(|t| t.path.is_empty()) {
                                self.pkgs[env.pkg]
                                    .assigned_ty
                                    .entry(target.name.sym)
                                    .and_modify(|old| {
                                        // a first value of unknown type (None) is no type yet
                                        if old.is_any() {
                                            *old = var_ty.clone();
                                        }
                                    })
                                    .or_insert_with(|| var_ty.clone());
                            }
                        }
                    }
                }
            }
            StmtKind::AugAssign(a) => {
                // in a lambda, a package-level variable assigned before is found first, even
                // under a parameter or local of its name: upstream reports it immutable
                let n = a.target.name.sym;
                if self.lambda_depth > 0
                    && a.target.path.is_empty()
                    && !n.as_str().starts_with('_')
                    && let Some(&first) = self.assigned.get(&n)
                {
                    let e = EvalError::new(
                        ErrKind::Immutable,
                        format!("Immutable variable '{n}' is modified during compiling"),
                        Some(a.target.span),
                    )
                    .with_note(
                        first,
                        format!("The variable '{n}' is declared here firstly"),
                    )
                    .with_mutable_hint(n);
                    self.errors.push(e);
                    return;
                }
                // upstream resolves the target before the value
                self.check_defined(env, a.target.name.sym, a.target.span.shrink_to_lo());
                if self.errors.len() > before {
                    return;
                }
                let r = self.infer(env, &a.value);
                let l = if a.target.path.is_empty() {
                    Some(self.lookup(env, a.target.name.sym))
                } else {
                    self.path_target_type(env, &a.target)
                };
                if let Some(l) = l {
                    let before = self.errors.len();
                    let t = self.binary(a.op.bin_op(), &l, &r, a.target.span);
                    // the result must fit the target's type (a list's new items, a dict's
                    // new entries checked as a whole value is)
                    if self.errors.len() == before && !l.is_any() {
                        if matches!(a.op.bin_op(), ast::BinOp::Add | ast::BinOp::BitOr) {
                            self.check_parts(env, &a.value, &l, a.target.span);
                        }
                        self.fits(&t, &l, a.target.span, None);
                        self.drop_repeated_errors(before);
                    }
                }
            }
            StmtKind::Assert(a) => {
                self.infer(env, &a.test);
                if let Some(c) = &a.if_cond {
                    self.infer(env, c);
                }
                if let Some(m) = &a.msg {
                    self.check_value(env, m, &Ty::Str, m.span, None);
                }
            }
            StmtKind::If(i) => {
                self.infer(env, &i.cond);
                let in_schema = u32::from(env.schema.is_some());
                self.schema_if_depth += in_schema;
                for s in i.body.iter().chain(&i.orelse) {
                    self.stmt(env, s);
                }
                self.schema_if_depth -= in_schema;
            }
            StmtKind::SchemaAttr(a) => {
                self.decorator_args(env, &a.decorators);
                self.check_type_names(env, &a.ty);
                if self.schema_if_depth > 0
                    && let Some(id) = env.schema
                {
                    self.nested_schema_attr(env, id, a);
                    return;
                }
                if let Some(v) = &a.value {
                    // upstream checks the value against the schema's type of the attribute:
                    // its first declaration in the body
                    let first = env.schema.and_then(|id| {
                        self.schemas[id.0]
                            .stmt
                            .body
                            .iter()
                            .find_map(|s| match &s.kind {
                                StmtKind::SchemaAttr(b) if b.name.sym == a.name.sym => Some(&b.ty),
                                _ => None,
                            })
                    });
                    let ty = self.resolve_type(env.pkg, env.file, first.unwrap_or(&a.ty));
                    self.check_attr_value(env, a, v, &ty);
                }
            }
            // a schema or rule defined in a block (an `if` body, a lambda): upstream's resolver
            // registers only a module's own definitions, and finds no type under the name
            StmtKind::Schema(st)
                if !self.pkgs[env.pkg]
                    .schemas
                    .get(&st.name.sym)
                    .is_some_and(|id| std::ptr::eq(self.schemas[id.0].stmt, &**st)) =>
            {
                self.undefined_definition(st.name, "schema");
            }
            StmtKind::Rule(r)
                if !self.pkgs[env.pkg]
                    .rules
                    .get(&r.name.sym)
                    .is_some_and(|(def, _)| std::ptr::eq(*def, &**r)) =>
            {
                self.undefined_definition(r.name, "rule");
            }
            StmtKind::Schema(st) => {
                self.decorator_args(env, &st.decorators);
                // (a mixin's name was checked as the schema type was built)
                // (a schema that is no mixin has its protocol refused, not looked up)
                let host = st.for_host.iter().filter(|_| st.is_mixin());
                for b in st.parent.iter().chain(&st.mixins).chain(host) {
                    self.check_defined(env, b.names[0].sym, b.names[0].span);
                }
                if self.errors.len() > before {
                    return;
                }
                // a mixin is no base, and a mixin's name says it is one
                if let Some(p) = &st.parent
                    && let Some(pid) = self.resolve_schema(env.pkg, env.file, &p.names)
                    && (self.schemas[pid.0].stmt.is_mixin()
                        || self.schemas[pid.0].stmt.is_protocol())
                {
                    let name = p.names.last().map(|n| n.sym.as_str()).unwrap_or_default();
                    let msg =
                        format!("invalid schema inherit object type, expect schema, got '{name}'");
                    self.err(ErrKind::IllegalInherit, msg, p.span.shrink_to_lo());
                }
                if let Some(h) = &st.for_host {
                    self.check_protocol(env, h);
                }
                let id = self.pkgs[env.pkg].schemas.get(&st.name.sym).copied();
                let mut senv = Env {
                    schema: id,
                    lenient: env.lenient || st.is_mixin(),
                    ..env.clone()
                };
                if let Some(ps) = &st.params {
                    for p in ps {
                        if let Some(t) = &p.ty {
                            self.check_type_names(env, t);
                        }
                        let t = match &p.ty {
                            Some(t) => self.resolve_type(env.pkg, env.file, t),
                            None => Ty::Any,
                        };
                        senv = senv.with_local(p.name.sym, t);
                    }
                    self.check_param_order(ps);
                }
                for s in &st.body {
                    self.stmt(&senv, s);
                }
                if let Some(ix) = &st.index_signature {
                    // (a `None` or `Undefined` key type is taken as it is, see schema_type.rs)
                    if !matches!(
                        ix.key_ty.kind,
                        ast::TypeKind::Literal(
                            ast::LiteralType::None | ast::LiteralType::Undefined
                        )
                    ) {
                        self.check_type_names(&senv, &ix.key_ty);
                    }
                    self.check_type_names(&senv, &ix.value_ty);
                    // the key name is a name in the signature's value and the checks
                    if let Some(k) = &ix.key_name {
                        senv = senv.with_local(k.sym, Ty::Str);
                    }
                    // its default against its value type, at the signature
                    if let Some(v) = &ix.value {
                        let vt = self.resolve_type(env.pkg, env.file, &ix.value_ty);
                        self.check_value(&senv, v, &vt, ix.span.shrink_to_lo(), None);
                    }
                }
                self.infer_schema_checks(&senv, &st.checks);
            }
            StmtKind::TypeAlias(t) => self.check_type_names_in(env, &t.ty, t.name.span, true),
            StmtKind::Rule(r) => {
                self.decorator_args(env, &r.decorators);
                if let Some(ps) = &r.params {
                    self.check_param_order(ps);
                }
                // its checks are typed with the protocol's attributes (and its parameters) in
                // scope, as upstream's resolver does; a rule with parents, or a protocol not
                // found, is left to the run time
                if let Some(h) = &r.for_host {
                    self.check_protocol(env, h);
                }
                let host = match &r.for_host {
                    Some(h) => match self.resolve_schema(env.pkg, env.file, &h.names) {
                        Some(id) => Some(id),
                        None => return,
                    },
                    None => None,
                };
                if !r.parents.is_empty() {
                    return;
                }
                // (upstream reports no unknown name there)
                let mut renv = Env {
                    schema: host,
                    lenient: true,
                    ..env.clone()
                };
                for p in r.params.iter().flatten() {
                    let t = match &p.ty {
                        Some(t) => self.resolve_type(env.pkg, env.file, t),
                        None => Ty::Any,
                    };
                    renv = renv.with_local(p.name.sym, t);
                }
                self.infer_checks(&renv, &r.checks);
            }
            StmtKind::Import(_) => {}
        }
    }

    /// A schema's or rule's `check:` block: each condition, its `if` and its message.
    /// What a mixin or a rule is `for` must be a protocol (declared so, or a schema named
    /// `...Protocol`, which upstream takes for one).
    fn check_protocol(&mut self, env: &Env, h: &ast::Identifier) {
        if let Some(id) = self.resolve_schema(env.pkg, env.file, &h.names)
            && !self.schemas[id.0].stmt.is_protocol()
            && !self.schemas[id.0]
                .stmt
                .name
                .sym
                .as_str()
                .ends_with("Protocol")
        {
            let name = h.names.last().map(|n| n.sym.as_str()).unwrap_or_default();
            let msg = format!("invalid schema inherit object type, expect protocol, got '{name}'");
            self.err(ErrKind::IllegalInherit, msg, h.span.shrink_to_lo());
        }
    }

    /// Upstream's resolver checks a parameter list (schema, rule, lambda) as it reaches it: no
    /// parameter without a default after one with a default, each offending default reported
    /// from the last.
    pub(super) fn check_param_order(&mut self, params: &[ast::Param]) {
        let mut seen_required = false;
        for p in params.iter().rev() {
            match &p.default {
                None => seen_required = true,
                Some(d) if seen_required => {
                    let mut e = EvalError::new(
                        ErrKind::IllegalParameter,
                        "non-default argument follows default argument",
                        Some(d.span),
                    );
                    e.footer.push("A default argument".into());
                    self.errors.push(e);
                }
                Some(_) => {}
            }
        }
    }

    /// An assigned value against the declared type `ty`: config literals in it read against
    /// the type, then the value's type at the target `span` as upstream's assignment check
    /// takes it (a dict literal meeting a schema compared by its attributes, one level).
    pub(super) fn check_assigned(
        &mut self,
        env: &Env,
        v: &Expr,
        ty: &Ty,
        span: Span,
        def: Option<Span>,
    ) {
        self.check_value(env, v, ty, span, def);
        let before = self.errors.len();
        self.check_parts(env, v, ty, span);
        self.drop_repeated_errors(before);
    }

    /// Upstream's errors for a schema or rule defined where its resolver does not register it.
    fn undefined_definition(&mut self, name: ast::Name, what: &str) {
        // (a lambda's body is walked twice by upstream's resolver: the name is taken then)
        if self.lambda_depth > 0 {
            let msg = format!("Unique key error name '{}'", name.sym);
            self.err(ErrKind::UniqueKey, msg, name.span.shrink_to_lo());
        }
        let msg = format!("name '{}' is not defined", name.sym);
        self.err(ErrKind::Compile, msg, name.span.shrink_to_lo());
        let msg = format!("expected {what} type, got any");
        self.err(ErrKind::Type, msg, name.span.shrink_to_lo());
    }

    fn nested_schema_attr(&mut self, env: &Env, id: SchemaId, a: &ast::SchemaAttr) {
        let new = self.resolve_type(env.pkg, env.file, &a.ty);
        let in_body = self.schemas[id.0]
            .stmt
            .body
            .iter()
            .find_map(|s| match &s.kind {
                StmtKind::SchemaAttr(b) if b.name.sym == a.name.sym => Some(b),
                _ => None,
            })
            .map(|b| (self.resolve_type(env.pkg, env.file, &b.ty), b.name.span));
        let earlier = match &in_body {
            Some((t, at)) if at.lo < a.name.span.lo => Some((t.clone(), *at)),
            _ => self.schema_nested.get(&(id, a.name.sym)).cloned(),
        };
        // an attribute only assigned before (`b = 1`) has its value's type there
        let earlier = match earlier {
            None if in_body.is_none() && a.value.is_some() => {
                self.assigned_attr_type(env, id, a.name.sym, a.name.span)
            }
            e => e,
        };
        if let Some((old, at)) = &earlier
            && !assignable(old, &new, &|x, y| self.is_sub_schema(x, y))
        {
            let msg = format!(
                "can not change the type of '{}' to {}",
                a.name.sym,
                self.ty_str(&new)
            );
            let note = format!("expected {}", self.ty_str(old));
            let e = EvalError::new(ErrKind::Type, msg, Some(a.name.span.shrink_to_lo()))
                .with_note(at.shrink_to_lo(), note);
            self.errors.push(e);
        }
        // (upstream's annotated assignment: the type the name has, unless that is `any`)
        let want = in_body
            .map(|(t, _)| t)
            .or_else(|| earlier.map(|(t, _)| t))
            .filter(|t| !t.is_any())
            .unwrap_or_else(|| new.clone());
        self.schema_nested
            .entry((id, a.name.sym))
            .or_insert((new.clone(), a.name.span));
        if let Some(v) = &a.value {
            // (upstream checks the value against its own annotation first, then against the
            // attribute's type)
            if !new.is_any() && new != want {
                let before = self.errors.len();
                self.check_attr_value(env, a, v, &new);
                if self.errors.len() > before {
                    return;
                }
            }
            self.check_attr_value(env, a, v, &want);
        }
    }

    /// The (widened) type of the first plain assignment `name = v` of schema `id`'s body
    /// before `before`, and where it is; `None` where that is `any` or there is none.
    fn assigned_attr_type(
        &mut self,
        env: &Env,
        id: SchemaId,
        name: Symbol,
        before: Span,
    ) -> Option<(Ty, Span)> {
        let stmt = self.schemas[id.0].stmt;
        let (t, v) = stmt.body.iter().find_map(|s| match &s.kind {
            StmtKind::Assign(x) if s.span.lo < before.lo => x
                .targets
                .iter()
                .find(|t| t.path.is_empty() && t.name.sym == name)
                .map(|t| (t, &x.value)),
            _ => None,
        })?;
        let n = self.errors.len();
        let ty = self.infer(env, v).variable_type();
        self.errors.truncate(n);
        (!ty.is_any() && !matches!(ty, Ty::None)).then_some((ty, t.span))
    }

    pub(super) fn decorator_args(&mut self, env: &Env, ds: &[ast::Decorator]) {
        for d in ds {
            // upstream knows `deprecated` and `info` only, whether or not the schema is used
            if let [n] = d.name.names.as_slice()
                && !matches!(n.sym.as_str(), "deprecated" | "info")
            {
                let msg = format!("UnKnown decorator {}", n.sym);
                self.err(ErrKind::Compile, msg, n.span.shrink_to_lo());
                return;
            }
            let Some(a) = &d.args else {
                continue;
            };
            if let [n] = d.name.names.as_slice()
                && n.sym.as_str() == "deprecated"
            {
                // upstream's resolver checks `deprecated(version: str = "", reason: str = "",
                // strict: bool = True)` as a call: argument count, keywords and types
                let param = |n: &str, t: Ty| (Some(Symbol::intern(n)), t, true);
                let f = ty::FuncTy {
                    params: vec![
                        param("version", Ty::Str),
                        param("reason", Ty::Str),
                        param("strict", Ty::Bool),
                    ],
                    ret: Ty::None,
                    param_spans: Vec::new(),
                };
                self.lambda_call(env, Some("deprecated".into()), &f, a, d.span);
                continue;
            }
            for x in &a.args {
                self.infer(env, x);
            }
            for k in &a.keywords {
                self.infer(env, &k.value);
            }
        }
    }
}
