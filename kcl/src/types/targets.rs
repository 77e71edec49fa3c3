//! Assignment targets: the immutability of package-level names (checked statement by
//! statement, as upstream walks them) and the type at a target's path (`x[i]`, `x.k`).

use super::*;

impl<'a> Checker<'a> {
    /// A package-level statement: an `if`'s statements are package-level too, each checked
    /// for immutability just before its own checks (upstream walks them in that order).
    pub(super) fn top_stmt(&mut self, env: &Env, s: &Stmt) {
        // a schema or rule defined again later: upstream checks the last definition only
        if self.overridden.contains(&s.span) {
            return;
        }
        if let StmtKind::If(i) = &s.kind {
            self.infer(env, &i.cond);
            for st in i.body.iter().chain(&i.orelse) {
                self.top_stmt(env, st);
            }
            return;
        }
        let mut assigned = std::mem::take(&mut self.assigned);
        self.check_immutable(s, &mut assigned);
        self.assigned = assigned;
        self.stmt(env, s);
    }

    /// `x op= v` on a package-level name that is not `_`-prefixed.
    pub(super) fn check_immutable(&mut self, s: &Stmt, assigned: &mut FxHashMap<Symbol, Span>) {
        match &s.kind {
            // (`a.b = v` declares `a` too)
            StmtKind::Assign(a) => {
                for t in &a.targets {
                    assigned.entry(t.name.sym).or_insert(t.span);
                }
            }
            // (statements in `if` bodies are package-level too: see `top_stmt`)
            StmtKind::AugAssign(a) => {
                let n = a.target.name;
                // an augmented assignment declares a name not assigned before it
                if a.target.path.is_empty() && !assigned.contains_key(&n.sym) {
                    assigned.insert(n.sym, a.target.span);
                    return;
                }
                // (upstream reports none where the value is a schema expression; `a.b += v`
                // modifies `a`)
                if !n.sym.as_str().starts_with('_')
                    && !matches!(strip_paren(&a.value).kind, ExprKind::Schema(_))
                    && let Some(&first) = assigned.get(&n.sym)
                {
                    let e = EvalError::new(
                        ErrKind::Immutable,
                        format!(
                            "Immutable variable '{}' is modified during compiling",
                            n.sym
                        ),
                        Some(a.target.span),
                    )
                    .with_note(
                        first,
                        format!("The variable '{}' is declared here firstly", n.sym),
                    )
                    .with_mutable_hint(n.sym);
                    self.errors.push(e);
                }
            }
            _ => {}
        }
    }

    /// The type at an assignment target's path (`x[i]`, `x.k`, nested): a list's item, a
    /// dict's value, a schema's attribute; `None` where it is unknown or `any`.
    /// A name the path selects that the type there does not have is upstream's resolver
    /// error, at the target.
    /// The type of member `member` of the module imported as `m` in `file`, where known.
    fn module_member_type(&mut self, file: FileId, m: Symbol, member: Symbol) -> Option<Ty> {
        if let Some(tp) = self.pkg_of_import(file, m) {
            if let Some(&id) = self.pkgs[tp].schemas.get(&member) {
                return Some(Ty::SchemaType(id));
            }
            if let Some(&(t, f)) = self.pkgs[tp].globals.get(&member) {
                return Some(self.resolve_type(tp, f, t));
            }
            // (a member without an annotation: its inferred type, widened)
            let file = self.pkgs[tp].modules.first()?.file;
            let t = self.lookup(&Env::top(tp, file), member);
            return (!t.is_any()).then(|| t.variable_type());
        }
        let sm = self.system_module_of(file, m)?;
        let name = crate::builtins::system_module_name(sm).unwrap_or(sm);
        sysmod::signature(name, member.as_str()).map(Ty::Func)
    }

    pub(super) fn path_target_type(&mut self, env: &Env, t: &ast::Target) -> Option<Ty> {
        let mut ty = self.lookup(env, t.name.sym);
        let at = t.span.shrink_to_lo();
        for p in &t.path {
            // a dict's or an instance's key that is statically no string: upstream's
            // resolver error, at the target
            if let (ast::TargetPath::Index(ix), Ty::Dict(..) | Ty::Schema(_)) = (p, &ty) {
                let it = self.infer(env, ix);
                if it.kind().is_some_and(|k| k != super::Kind::Str) {
                    let msg = format!("invalid dict/schema key type: '{}'", self.ty_str(&it));
                    self.err(ErrKind::Compile, msg, at);
                    return None;
                }
            }
            // a list's index that is statically no integer: upstream's type error, at it
            if let (ast::TargetPath::Index(ix), Ty::List(_)) = (p, &ty) {
                let it = self.infer(env, ix);
                if !super::ops::int_index(&it) {
                    let msg = format!("expected int, got {}", self.ty_str(&it));
                    self.err(ErrKind::Type, msg, ix.span.shrink_to_lo());
                    return None;
                }
            }
            ty = match (p, &ty) {
                (ast::TargetPath::Index(_), Ty::List(et)) => (**et).clone(),
                (ast::TargetPath::Index(_) | ast::TargetPath::Attr(_), Ty::Dict(_, vt)) => {
                    (**vt).clone()
                }
                (ast::TargetPath::Attr(n), Ty::Schema(id)) => {
                    let members = self.members(*id);
                    match members.attrs.get(&n.sym) {
                        Some(a) => a.0.clone(),
                        None => {
                            if !members.open {
                                let msg = self.cannot_add(&[*id], &n.sym);
                                self.err(ErrKind::Compile, msg, at);
                                let msg = format!(
                                    "attribute '{}' not found in '{}'",
                                    n.sym,
                                    self.schema_name(*id)
                                );
                                self.err(ErrKind::Type, msg, at);
                            }
                            return None;
                        }
                    }
                }
                // a module's member assigned: upstream's resolver looks the member up, and
                // the value must fit the member's type
                (ast::TargetPath::Attr(n), Ty::Module(_)) => {
                    let before = self.errors.len();
                    self.check_module_member(t.name.span.file, t.name.sym, n.sym, t.span);
                    if self.errors.len() > before {
                        return None;
                    }
                    self.module_member_type(t.name.span.file, t.name.sym, n.sym)?
                }
                // a string's item is a string; a scalar has no items
                (ast::TargetPath::Index(_), Ty::Str | Ty::StrLit(_)) => Ty::Str,
                (ast::TargetPath::Index(_), _) if self.not_subscriptable(&ty.clone(), at) => {
                    return None;
                }
                (ast::TargetPath::Attr(n), _) if ty.has_no_attributes() => {
                    let msg = format!("attribute '{}' not found in '{}'", n.sym, self.ty_str(&ty));
                    self.err(ErrKind::Type, msg, at);
                    return None;
                }
                _ => return None,
            };
        }
        (!ty.is_any()).then_some(ty)
    }
}
