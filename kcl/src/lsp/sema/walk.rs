//! The walk of one file that resolves every name to its definition: scopes (module, schema,
//! lambda), declarations and assignments, type annotations and the scopes at a target
//! position. Expressions and config literals are walked in `walk/expr.rs`.

mod expr;

use std::sync::Arc;

use crate::ast::{self, ExprKind, FileId, Name, SchemaStmt, Span, Stmt, StmtKind, Symbol};
use crate::parser::loader::ImportTarget;

use super::{Def, LTy, Occ, Role, SchemaRef, Sema, ret_ty, signatures};

impl Sema {
    /// Resolves every name of a file (see [`Walker`]).
    pub fn walk_file(&self, file: FileId, target: Option<u32>) -> Walked {
        let pkg = self.pkg_of(file);
        let mut w = Walker::new(self, pkg, file, target);
        if let Some(m) = self.pkgs[pkg as usize]
            .modules
            .iter()
            .find(|m| m.file == file)
            .cloned()
        {
            w.stmts(&m.body, Ctx::Module);
        }
        Walked {
            occs: w.occs,
            configs: w.configs,
            scope: w.snapshot,
            hints: w.hints,
        }
    }
}

/// What a walk found.
pub struct Walked {
    /// Every resolved name, in source order.
    pub occs: Vec<Occ>,
    /// Config literals with their expected type (the schema whose attributes they set).
    pub configs: Vec<(Span, LTy)>,
    /// The names in scope at the target position, innermost first.
    pub scope: Option<ScopeSnapshot>,
    /// Unannotated assignments: the name and its inferred type.
    pub hints: Vec<(Span, LTy)>,
}

impl Walked {
    /// The innermost name at `pos`.
    pub fn occ_at(&self, pos: u32) -> Option<&Occ> {
        self.occs
            .iter()
            .filter(|o| o.span.lo <= pos && pos <= o.span.hi)
            .min_by_key(|o| o.span.hi - o.span.lo)
    }
    /// The innermost config literal around `pos` and its type.
    pub fn config_at(&self, pos: u32) -> Option<&(Span, LTy)> {
        self.configs
            .iter()
            .filter(|(s, _)| s.lo < pos && pos < s.hi)
            .min_by_key(|(s, _)| s.hi - s.lo)
    }
}

/// The scopes at a position (innermost first) and the enclosing schema, if any.
#[derive(Clone, Debug, Default)]
pub struct ScopeSnapshot {
    pub locals: Vec<(Symbol, Def, LTy)>,
    pub schema: Option<SchemaRef>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Module,
    Schema(SchemaRef),
    Lambda,
}

#[derive(Clone, Default)]
struct Scope {
    names: Vec<(Symbol, Def, LTy)>,
    schema: Option<SchemaRef>,
}

/// Resolves the names of one file.
pub struct Walker<'s> {
    sema: &'s Sema,
    pkg: u32,
    file: FileId,
    scopes: Vec<Scope>,
    occs: Vec<Occ>,
    configs: Vec<(Span, LTy)>,
    target: Option<u32>,
    snapshot: Option<ScopeSnapshot>,
    hints: Vec<(Span, LTy)>,
    /// Only typing (a variable's value): record nothing.
    pub(super) quiet: bool,
    depth: u32,
}

impl<'s> Walker<'s> {
    pub(super) fn new(sema: &'s Sema, pkg: u32, file: FileId, target: Option<u32>) -> Self {
        Walker {
            sema,
            pkg,
            file,
            scopes: Vec::new(),
            occs: Vec::new(),
            configs: Vec::new(),
            target,
            snapshot: None,
            hints: Vec::new(),
            quiet: false,
            depth: 0,
        }
    }

    fn occ(&mut self, span: Span, def: Def, role: Role, ty: LTy) {
        if !self.quiet && span.file == self.file {
            self.occs.push(Occ {
                span,
                def,
                role,
                ty,
            });
        }
    }

    /// Remembers the scopes when `span` holds the target position.
    fn mark(&mut self, span: Span) {
        if let Some(t) = self.target
            && !self.quiet
            && span.lo <= t
            && t <= span.hi
        {
            let mut snap = ScopeSnapshot::default();
            for s in self.scopes.iter().rev() {
                snap.locals.extend(s.names.iter().rev().cloned());
                if snap.schema.is_none() {
                    snap.schema = s.schema;
                }
            }
            self.snapshot = Some(snap);
        }
    }

    fn declare(&mut self, name: Name, ty: LTy) -> Def {
        let def = Def::Local {
            decl: name.span,
            name: name.sym,
        };
        self.occ(name.span, def.clone(), Role::Decl, ty.clone());
        if let Some(s) = self.scopes.last_mut() {
            s.names.push((name.sym, def.clone(), ty));
        }
        def
    }

    /// Looks a name up: local scopes, the package, the file's imports, builtins.
    fn lookup(&self, sym: Symbol) -> Option<(Def, LTy)> {
        for s in self.scopes.iter().rev() {
            if let Some((_, d, t)) = s.names.iter().rev().find(|(n, _, _)| *n == sym) {
                return Some((d.clone(), t.clone()));
            }
            if let Some(sr) = s.schema
                && let Some(m) = self.sema.member(sr, sym)
            {
                return Some((
                    Def::Attr {
                        schema: m.owner,
                        attr: sym,
                        decl: m.decl,
                    },
                    m.ty,
                ));
            }
        }
        if self.sema.top(self.pkg, sym).is_some() {
            return Some((
                Def::Top {
                    pkg: self.pkg,
                    name: sym,
                },
                self.sema.top_ty(self.pkg, sym),
            ));
        }
        if let Some((t, decl)) = self.sema.import(self.file, sym) {
            return Some((
                Def::Import {
                    decl: *decl,
                    name: sym,
                },
                self.sema.import_ty(t),
            ));
        }
        let f = signatures::builtin(sym.as_str())?;
        Some((
            Def::Builtin(f.name),
            LTy::Func(Arc::new((
                f.params.iter().map(|p| p.to_string()).collect(),
                ret_ty(f.ret),
            ))),
        ))
    }

    fn stmts(&mut self, body: &[Stmt], ctx: Ctx) {
        for s in body {
            self.stmt(s, ctx);
        }
    }

    fn stmt(&mut self, s: &Stmt, ctx: Ctx) {
        self.mark(s.span);
        match &s.kind {
            StmtKind::Expr(e) => {
                self.expr(e, &LTy::Any);
            }
            StmtKind::Import(i) => {
                if let Some((t, _)) = self.sema.program.import_target(i).map(|t| (t.clone(), ())) {
                    let def = match &t {
                        ImportTarget::Package(_) => self.sema.target_pkg(&t).map(Def::Pkg),
                        ImportTarget::System(m) => crate::parser::loader::SYSTEM_MODULES
                            .iter()
                            .find(|s| **s == &**m)
                            .map(|s| Def::SysModule(s)),
                        ImportTarget::Plugin(_) => None,
                    };
                    let ty = self.sema.import_ty(&t);
                    if let (Some(def), Some(last)) = (def, i.names.last()) {
                        self.occ(last.span, def, Role::ImportPath, ty.clone());
                    }
                    if let Some(local) = i.local_name() {
                        let decl = i.asname.map(|a| a.span).or_else(|| {
                            i.names
                                .last()
                                .filter(|_| i.asname.is_none())
                                .map(|n| n.span)
                        });
                        if let (Some(decl), Some(a)) = (decl, i.asname) {
                            self.occ(a.span, Def::Import { decl, name: local }, Role::Decl, ty);
                        }
                    }
                }
            }
            StmtKind::Assign(a) => {
                let expected = match &a.ty {
                    Some(t) => {
                        self.type_refs(t);
                        self.sema.resolve_type(self.pkg, self.file, t)
                    }
                    None => LTy::Any,
                };
                // a target that already holds a schema instance types the config it is given
                let mut expected = expected;
                if expected == LTy::Any
                    && let [t] = a.targets.as_slice()
                    && t.path.is_empty()
                    && let Some((_, ty)) = self.lookup(t.name.sym)
                    && !ty.schemas().is_empty()
                {
                    expected = ty;
                }
                let vt = self.expr(&a.value, &expected);
                let ty = if a.ty.is_some() {
                    expected.clone()
                } else {
                    vt.clone().widen()
                };
                for t in &a.targets {
                    self.target(t, ctx, &ty);
                    if a.ty.is_none()
                        && t.path.is_empty()
                        && ctx != Ctx::Lambda
                        && !matches!(ty, LTy::Any)
                        && !matches!(a.value.kind, ExprKind::Schema(_) | ExprKind::Lambda(_))
                    {
                        self.hints.push((t.name.span, ty.clone()));
                    }
                }
            }
            StmtKind::AugAssign(a) => {
                self.expr(&a.value, &LTy::Any);
                let ty = self.lookup(a.target.name.sym).map_or(LTy::Any, |x| x.1);
                self.target(&a.target, ctx, &ty);
            }
            StmtKind::Unification(u) => {
                let t = self.expr(&u.value, &LTy::Any);
                let def = self.bind(u.target, ctx, &t);
                self.occ(u.target.span, def, Role::Decl, t);
            }
            StmtKind::Assert(a) => {
                self.expr(&a.test, &LTy::Any);
                if let Some(c) = &a.if_cond {
                    self.expr(c, &LTy::Any);
                }
                if let Some(m) = &a.msg {
                    self.expr(m, &LTy::Any);
                }
            }
            StmtKind::If(i) => {
                self.expr(&i.cond, &LTy::Any);
                self.stmts(&i.body, ctx);
                self.stmts(&i.orelse, ctx);
            }
            StmtKind::SchemaAttr(a) => {
                for d in &a.decorators {
                    self.decorator(d);
                }
                self.type_refs(&a.ty);
                let ty = self.sema.resolve_type(self.pkg, self.file, &a.ty);
                if let Ctx::Schema(sr) = ctx {
                    let def = Def::Attr {
                        schema: sr,
                        attr: a.name.sym,
                        decl: a.name.span,
                    };
                    self.occ(a.name.span, def, Role::Decl, ty.clone());
                } else {
                    self.occ(
                        a.name.span,
                        Def::Top {
                            pkg: self.pkg,
                            name: a.name.sym,
                        },
                        Role::Decl,
                        ty.clone(),
                    );
                }
                if let Some(v) = &a.value {
                    self.expr(v, &ty);
                }
            }
            StmtKind::Schema(sc) => self.schema_stmt(sc, s.span),
            StmtKind::Rule(r) => {
                for d in &r.decorators {
                    self.decorator(d);
                }
                self.occ(
                    r.name.span,
                    Def::Top {
                        pkg: self.pkg,
                        name: r.name.sym,
                    },
                    Role::Decl,
                    LTy::Any,
                );
                for p in &r.parents {
                    self.ident_ref(p);
                }
                if let Some(h) = &r.for_host {
                    self.ident_ref(h);
                }
                self.scopes.push(Scope::default());
                self.mark(s.span);
                if let Some(ps) = &r.params {
                    self.params(ps);
                }
                for c in &r.checks {
                    self.check_expr(c);
                }
                self.scopes.pop();
            }
            StmtKind::TypeAlias(t) => {
                self.occ(
                    t.name.span,
                    Def::Top {
                        pkg: self.pkg,
                        name: t.name.sym,
                    },
                    Role::Decl,
                    LTy::Any,
                );
                self.type_refs(&t.ty);
            }
        }
    }

    fn schema_stmt(&mut self, sc: &SchemaStmt, span: Span) {
        for d in &sc.decorators {
            self.decorator(d);
        }
        let sr = SchemaRef {
            pkg: self.pkg,
            name: sc.name.sym,
        };
        self.occ(
            sc.name.span,
            Def::Top {
                pkg: self.pkg,
                name: sc.name.sym,
            },
            Role::Decl,
            LTy::SchemaType(sr),
        );
        for b in sc.parent.iter().chain(&sc.for_host).chain(&sc.mixins) {
            self.ident_ref(b);
        }
        self.scopes.push(Scope {
            names: Vec::new(),
            schema: Some(sr),
        });
        self.mark(span);
        if let Some(ps) = &sc.params {
            self.params(ps);
        }
        if let Some(ix) = &sc.index_signature {
            self.type_refs(&ix.key_ty);
            self.type_refs(&ix.value_ty);
            if let Some(k) = ix.key_name {
                let kt = self.sema.resolve_type(self.pkg, self.file, &ix.key_ty);
                self.declare(k, kt);
            }
            if let Some(v) = &ix.value {
                self.expr(v, &LTy::Any);
            }
        }
        self.stmts(&sc.body, Ctx::Schema(sr));
        for c in &sc.checks {
            self.check_expr(c);
        }
        self.scopes.pop();
    }

    fn check_expr(&mut self, c: &ast::CheckExpr) {
        self.mark(c.span);
        self.expr(&c.test, &LTy::Any);
        if let Some(x) = &c.if_cond {
            self.expr(x, &LTy::Any);
        }
        if let Some(x) = &c.msg {
            self.expr(x, &LTy::Any);
        }
    }

    fn decorator(&mut self, d: &ast::Decorator) {
        if let Some(a) = &d.args {
            self.call_args(a);
        }
    }

    fn params(&mut self, ps: &[ast::Param]) {
        for p in ps {
            let ty = match &p.ty {
                Some(t) => {
                    self.type_refs(t);
                    self.sema.resolve_type(self.pkg, self.file, t)
                }
                None => LTy::Any,
            };
            if let Some(d) = &p.default {
                self.expr(d, &ty);
            }
            self.declare(p.name, ty);
        }
    }

    /// Binds an assignment target's root name: package-level, a schema attribute, or local.
    fn bind(&mut self, name: Name, ctx: Ctx, ty: &LTy) -> Def {
        match ctx {
            Ctx::Module => Def::Top {
                pkg: self.pkg,
                name: name.sym,
            },
            Ctx::Schema(sr) => match self.sema.member(sr, name.sym) {
                Some(m) => Def::Attr {
                    schema: m.owner,
                    attr: name.sym,
                    decl: m.decl,
                },
                None => Def::Local {
                    decl: name.span,
                    name: name.sym,
                },
            },
            Ctx::Lambda => {
                if let Some(s) = self.scopes.last()
                    && let Some((_, d, _)) = s.names.iter().find(|(n, _, _)| *n == name.sym)
                {
                    return d.clone();
                }
                let def = Def::Local {
                    decl: name.span,
                    name: name.sym,
                };
                if let Some(s) = self.scopes.last_mut() {
                    s.names.push((name.sym, def.clone(), ty.clone()));
                }
                def
            }
        }
    }

    fn target(&mut self, t: &ast::Target, ctx: Ctx, ty: &LTy) {
        let def = self.bind(t.name, ctx, ty);
        let role = match (&def, ctx) {
            (Def::Local { decl, .. }, _) if *decl == t.name.span => Role::Decl,
            (Def::Top { pkg, name }, _)
                if self.sema.top(*pkg, *name).map(|x| x.name.span) == Some(t.name.span) =>
            {
                Role::Decl
            }
            (Def::Attr { decl, .. }, _) if *decl == t.name.span => Role::Decl,
            _ => Role::Write,
        };
        let root_ty = if t.path.is_empty() {
            ty.clone()
        } else {
            self.lookup(t.name.sym).map_or(LTy::Any, |x| x.1)
        };
        self.occ(t.name.span, def, role, root_ty.clone());
        let mut cur = root_ty;
        for p in &t.path {
            match p {
                ast::TargetPath::Attr(n) => {
                    if let Some((mt, d)) = self.sema.member_of(&cur, n.sym) {
                        self.occ(n.span, d, Role::Write, mt.clone());
                        cur = mt;
                    } else {
                        cur = LTy::Any;
                    }
                }
                ast::TargetPath::Index(e) => {
                    self.expr(e, &LTy::Any);
                    cur = cur.elem();
                }
            }
        }
    }

    /// References in a type annotation.
    fn type_refs(&mut self, t: &ast::Type) {
        use ast::TypeKind;
        match &t.kind {
            TypeKind::Named(id) => {
                self.ident_ref(id);
            }
            TypeKind::List(Some(e)) => self.type_refs(e),
            TypeKind::Dict(k, v) => {
                if let Some(k) = k {
                    self.type_refs(k);
                }
                if let Some(v) = v {
                    self.type_refs(v);
                }
            }
            TypeKind::Union(ts) => ts.iter().for_each(|x| self.type_refs(x)),
            TypeKind::Function { params, ret } => {
                params.iter().for_each(|x| self.type_refs(x));
                if let Some(r) = ret {
                    self.type_refs(r);
                }
            }
            _ => {}
        }
    }

    /// A dotted name in type position (`S`, `pkg.S`).
    fn ident_ref(&mut self, id: &ast::Identifier) -> Option<SchemaRef> {
        match id.names.as_slice() {
            [n] => {
                if let Some(top) = self.sema.top(self.pkg, n.sym) {
                    let ty = self.sema.top_ty(self.pkg, n.sym);
                    let _ = top;
                    self.occ(
                        n.span,
                        Def::Top {
                            pkg: self.pkg,
                            name: n.sym,
                        },
                        Role::Type,
                        ty,
                    );
                }
            }
            [p, n] => {
                if let Some((t, decl)) = self.sema.import(self.file, p.sym).cloned() {
                    let ty = self.sema.import_ty(&t);
                    self.occ(p.span, Def::Import { decl, name: p.sym }, Role::Read, ty);
                    if let Some(tp) = self.sema.target_pkg(&t)
                        && self.sema.top(tp, n.sym).is_some()
                    {
                        let ty = self.sema.top_ty(tp, n.sym);
                        self.occ(
                            n.span,
                            Def::Top {
                                pkg: tp,
                                name: n.sym,
                            },
                            Role::Type,
                            ty,
                        );
                    }
                }
            }
            _ => {}
        }
        self.sema.resolve_schema(self.pkg, self.file, &id.names)
    }

    fn call_args(&mut self, a: &ast::CallArgs) {
        for x in &a.args {
            self.expr(x, &LTy::Any);
        }
        for k in &a.keywords {
            self.expr(&k.value, &LTy::Any);
        }
    }
}
