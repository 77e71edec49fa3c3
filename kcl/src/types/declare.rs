//! The package's first scan, before its statements are walked, as upstream's resolver makes
//! it: names assigned again (ImmutableError), annotations' type names, and the types of
//! private names annotated more than once.

use super::*;

/// Names declared before a package's statements: schemas and other definitions, type aliases,
/// and each file's imports.
/// A package's private names as its declaration scan meets their assignments: per name, the
/// type it has so far, its first annotation's type and place; and where each was assigned
/// last (annotated or not).
#[derive(Default)]
pub(super) struct PrivateScan {
    pub(super) annotated: indexmap::IndexMap<Symbol, (Ty, Ty, Span), rustc_hash::FxBuildHasher>,
    pub(super) latest: FxHashMap<Symbol, Span>,
}

pub(super) type Declared<'a> = (
    &'a FxHashMap<Symbol, Span>,
    &'a FxHashMap<Symbol, Span>,
    &'a FxHashMap<Symbol, Span>,
);

impl<'a> Checker<'a> {
    /// Upstream's first scan of one package-level statement: an assignment of a name
    /// declared before is an ImmutableError, and an annotation's type names must be defined;
    /// the statements under an `if` are scanned one by one, in order.
    pub(super) fn scan_declaration(
        &mut self,
        pkg: usize,
        env: &Env,
        s: &Stmt,
        (defined, aliases, imports): Declared<'_>,
        first: &mut FxHashMap<Symbol, Span>,
    ) {
        if let StmtKind::If(i) = &s.kind {
            for x in i.body.iter().chain(i.orelse.iter()) {
                self.scan_declaration(pkg, env, x, (defined, aliases, imports), first);
            }
            return;
        }
        self.check_reassigned(pkg, s, defined, aliases, imports, first);
        self.declare_globals(env, std::slice::from_ref(s));
        self.scan_private_assignment(pkg, env.file, s);
    }

    /// A public package-level name `s` assigns again (or a schema's, alias's or the file's
    /// import's name): upstream's
    /// ImmutableError. A unification declares its name too: a later assignment changes it (one
    /// before it does not), and upstream says it was declared at the latest declaration; one of
    /// an unknown schema is the resolver's error, reported by the declaration scan.
    pub(super) fn check_reassigned(
        &mut self,
        pkg: usize,
        s: &Stmt,
        defined: &FxHashMap<Symbol, Span>,
        aliases: &FxHashMap<Symbol, Span>,
        imports: &FxHashMap<Symbol, Span>,
        first: &mut FxHashMap<Symbol, Span>,
    ) {
        let mut assigns = Vec::new();
        // (`a.b = v` changes `a` too: upstream's ImmutableError once `a` is declared)
        crate::ast::walk::public_assignments(s, true, &mut assigns);
        for (n, sp) in assigns.into_iter().map(|(n, sp)| (n.sym, sp)) {
            let prev = defined
                .get(&n)
                .or_else(|| aliases.get(&n))
                .or_else(|| imports.get(&n))
                .or_else(|| first.get(&n))
                .copied();
            if let Some(prev) = prev {
                let e = EvalError::new(
                    ErrKind::Immutable,
                    format!("Can not change the value of '{n}', because it was declared immutable"),
                    Some(sp.shrink_to_lo()),
                )
                .with_note(prev, format!("The variable '{n}' is declared here"))
                .with_mutable_hint(n);
                self.errors.push(e);
                continue;
            }
            first.insert(n, sp);
        }
        let mut unified = Vec::new();
        public_unifications(s, &mut unified);
        for (n, sp, schema) in unified {
            if schema.is_some_and(|sc| !self.name_defined(&Env::top(pkg, sp.file), sc)) {
                continue;
            }
            first.insert(n, sp);
        }
    }

    /// A private package variable annotated again with another type, as upstream's resolver
    /// sees it while it scans the package's assignments: an annotation that changes the type
    /// the name has so far is an error (`any` changes nothing). See also
    /// [`Self::finish_private_annotations`].
    pub(super) fn scan_private_assignment(&mut self, pkg: usize, file: FileId, s: &Stmt) {
        let StmtKind::Assign(a) = &s.kind else { return };
        for (i, target) in a.targets.iter().enumerate() {
            let n = target.name.sym;
            if !target.path.is_empty() || !n.as_str().starts_with('_') {
                continue;
            }
            let at = target.span.shrink_to_lo();
            let ty = if i == 0 { a.ty.as_ref() } else { None };
            if let Some(ty) = ty {
                let t = self.resolve_type(pkg, file, ty);
                match self.private_scan.annotated.get(&n).map(|c| c.0.clone()) {
                    None => {
                        self.private_scan.annotated.insert(n, (t.clone(), t, at));
                    }
                    Some(cur) => {
                        if !cur.is_any() && self.ty_str(&t) != self.ty_str(&cur) {
                            let prev = self.private_scan.latest.get(&n).copied().unwrap_or(at);
                            self.type_change_error(n, &cur, at, prev, &cur);
                        }
                        if !t.is_any() {
                            self.private_scan.annotated.get_mut(&n).unwrap().0 = t;
                        }
                    }
                }
            }
            self.private_scan.latest.insert(n, at);
        }
    }

    /// After the scan: a private name has its last type, and a first annotation of another
    /// type (one the last does not take in, as `float` takes `int`) is an error at it, noted
    /// at the name's last assignment. The statements' own annotations are checked against
    /// that type as they are walked.
    pub(super) fn finish_private_annotations(&mut self, pkg: usize) {
        let scan = std::mem::take(&mut self.private_scan);
        for (n, (last_ty, first_ty, first_at)) in scan.annotated {
            let last_at = scan.latest.get(&n).copied().unwrap_or(first_at);
            let sub = |a: SchemaId, b: SchemaId| self.is_sub_schema(a, b);
            if self.ty_str(&first_ty) != self.ty_str(&last_ty)
                && !sup_subsume(&first_ty, &last_ty, &sub)
            {
                self.type_change_error(n, &last_ty, first_at, last_at, &last_ty);
            }
            if !last_ty.is_any() {
                self.pkgs[pkg].assigned_ty.insert(n, last_ty.clone());
            }
            self.pkgs[pkg].private_final.insert(n, (last_ty, last_at));
        }
    }

    /// Upstream's "can not change the type of 'n' to T" at `at`, noted "expected E" at `note`.
    pub(super) fn type_change_error(
        &mut self,
        n: Symbol,
        to: &Ty,
        at: Span,
        note: Span,
        expected: &Ty,
    ) {
        let e = EvalError::new(
            ErrKind::Type,
            format!("can not change the type of '{n}' to {}", self.ty_str(to)),
            Some(at),
        )
        .with_note(note, format!("expected {}", self.ty_str(expected)));
        self.errors.push(e);
    }

    /// A private package variable (the only kind assigned more than once) has the type of
    /// its annotation or of the schema it is unified with before any statement is checked:
    /// upstream checks every assignment of the name against it, earlier ones included.
    pub(super) fn declare_private_types(&mut self, env: &Env, stmts: &[Stmt]) {
        for s in stmts {
            let (name, ty) = match &s.kind {
                StmtKind::Assign(a) => match (&a.ty, a.targets.as_slice()) {
                    (Some(t), [target, ..]) if target.path.is_empty() => {
                        (target.name.sym, self.resolve_type(env.pkg, env.file, t))
                    }
                    _ => continue,
                },
                // the schema a name is unified with types its assignments, public or not
                StmtKind::Unification(u) => match &u.value.kind {
                    ExprKind::Schema(se) => {
                        match self.resolve_schema(env.pkg, env.file, &se.name.names) {
                            Some(id) => {
                                self.pkgs[env.pkg]
                                    .assigned_ty
                                    .entry(u.target.sym)
                                    .or_insert(Ty::Schema(id));
                                continue;
                            }
                            None => continue,
                        }
                    }
                    _ => continue,
                },
                StmtKind::If(i) => {
                    self.declare_private_types(env, &i.body);
                    self.declare_private_types(env, &i.orelse);
                    continue;
                }
                _ => continue,
            };
            if name.as_str().starts_with('_') && !ty.is_any() {
                self.pkgs[env.pkg].assigned_ty.entry(name).or_insert(ty);
            }
        }
    }

    /// Upstream's first scan of package-level assignments and unifications (also under `if`):
    /// each annotation (or unified schema name) is resolved, then its names are in scope.
    pub(super) fn declare_globals(&mut self, env: &Env, stmts: &[Stmt]) {
        for s in stmts {
            match &s.kind {
                StmtKind::Assign(a) => {
                    if let Some(t) = &a.ty {
                        self.check_type_names(env, t);
                    }
                    for t in &a.targets {
                        self.reached.insert(t.name.sym);
                    }
                }
                StmtKind::Unification(u) => {
                    if let ExprKind::Schema(se) = &u.value.kind
                        && let [n] = &se.name.names[..]
                    {
                        self.check_defined(&env.package_scope(), n.sym, n.span);
                    }
                    self.reached.insert(u.target.sym);
                }
                StmtKind::If(i) => {
                    self.declare_globals(env, &i.body);
                    self.declare_globals(env, &i.orelse);
                }
                _ => {}
            }
            if !self.errors.is_empty() {
                return;
            }
        }
    }
}

/// Names assigned anywhere in a block (lambda bodies make them locals).
pub(super) fn collect_assigned(body: &[Stmt], out: &mut Vec<Symbol>) {
    for s in body {
        match &s.kind {
            StmtKind::Assign(a) => out.extend(a.targets.iter().map(|t| t.name.sym)),
            StmtKind::AugAssign(a) => out.push(a.target.name.sym),
            StmtKind::Unification(u) => out.push(u.target.sym),
            StmtKind::If(i) => {
                collect_assigned(&i.body, out);
                collect_assigned(&i.orelse, out);
            }
            _ => {}
        }
    }
}

/// The annotated names `=` assigns in `body` (through nested `if` bodies), with their types.
pub(super) fn collect_annotated<'a>(
    body: &'a [Stmt],
    file: FileId,
    out: &mut FxHashMap<Symbol, (&'a ast::Type, FileId)>,
) {
    for s in body {
        match &s.kind {
            StmtKind::Assign(a) => {
                if let (Some(t), [target]) = (&a.ty, a.targets.as_slice())
                    && target.path.is_empty()
                {
                    out.insert(target.name.sym, (t, file));
                }
            }
            StmtKind::If(i) => {
                collect_annotated(&i.body, file, out);
                collect_annotated(&i.orelse, file, out);
            }
            _ => {}
        }
    }
}
