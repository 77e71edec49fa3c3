//! The static type checker: runs over a loaded program before evaluation and reports the errors
//! upstream KCL's resolver finds at compile time (config values that do not fit a schema
//! attribute's type, unknown schema members, bad `as` conversions, operators on types that
//! never support them, unknown schema-type attributes, re-assigned immutable variables, import
//! cycles, lambda return types and calls of known lambdas, `+=` of a non-list), in upstream's
//! wording.
//!
//! It is deliberately one-sided: a type it cannot pin down is `any`, and `any` is compatible
//! with everything, so it only rejects what upstream's resolver rejects. Types come from
//! literals, annotations, schema instantiations, lambdas (their parameters and the value of
//! their last statement), comprehensions over known lists and dicts, and package-level names
//! assigned once; everything else is left to the evaluator's run-time checks.
//!
//! Cost: one walk over every statement and expression, with schema member tables built lazily
//! and cached per schema; nothing is allocated for expressions that need no check.

mod sysmod;
mod ty;

use std::cell::OnceCell;
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::ast::{self, Expr, ExprKind, FileId, Span, Stmt, StmtKind, Symbol};
use crate::eval::EvalError;
use crate::parser::loader::{ImportTarget, Program};
use crate::value::ErrKind;

pub use ty::Ty;
use ty::{Kind, SchemaId, assignable};

/// Check `program`; the first error found (in source order of the main package, then imported
/// packages) is returned.
pub fn check_program(program: &Program) -> Result<(), EvalError> {
    let mut c = Checker::new(program);
    c.check_import_cycles()?;
    for p in c.check_order() {
        c.check_pkg(p);
        if let Some(e) = c.errors.into_iter().next() {
            return Err(e);
        }
        c.errors = Vec::new();
    }
    Ok(())
}

/// Every error the checker finds in the main package (in the order found), then the first of
/// each imported package: what `kcl lint` reports, as upstream's resolver reports them all.
pub(crate) fn check_program_all(program: &Program) -> Vec<EvalError> {
    let mut c = Checker::new(program);
    if let Err(e) = c.check_import_cycles() {
        return vec![e];
    }
    let mut out = Vec::new();
    for p in c.check_order() {
        c.check_pkg(p);
        let errors = std::mem::take(&mut c.errors);
        if p == c.main {
            out.extend(errors);
        } else {
            out.extend(errors.into_iter().next());
        }
    }
    out
}

/// Every error the checker finds in the main package alone (imported packages are read, not
/// checked): the language server checks each package as its own main package, so an edit
/// re-checks only the packages whose results can change.
pub(crate) fn check_main_package(program: &Program) -> Vec<EvalError> {
    let mut c = Checker::new(program);
    if let Err(e) = c.check_import_cycles() {
        return vec![e];
    }
    let main = c.main;
    c.check_pkg(main);
    c.errors
}

/// One schema definition and its lazily built member table.
struct SchemaInfo<'a> {
    stmt: &'a ast::SchemaStmt,
    pkg: usize,
    file: FileId,
    members: OnceCell<Rc<Members>>,
}

/// Attributes a schema accepts, with their declared types.
#[derive(Default)]
struct Members {
    attrs: FxHashMap<Symbol, (Ty, Span)>,
    /// Names in declaration order (for "did you mean" lists).
    order: Vec<Symbol>,
    /// Index signature, unresolved parent or mixin: any key may be valid.
    open: bool,
    /// A base schema could not be resolved: its attribute names are unknown.
    unresolved: bool,
    /// Names the schema's own body assigns without declaring them, and its parameters: names
    /// in its body, but no attributes a config may set (nor inherited).
    names: rustc_hash::FxHashSet<Symbol>,
    /// Every name in the body's scope in declaration order, assigned-only ones included (the
    /// candidates of upstream's "did you mean").
    in_scope: Vec<Symbol>,
    parents: Vec<SchemaId>,
}

struct PkgInfo<'a> {
    path: &'a str,
    modules: &'a [std::sync::Arc<ast::Module>],
    schemas: FxHashMap<Symbol, SchemaId>,
    aliases: FxHashMap<Symbol, (&'a ast::Type, FileId)>,
    /// Annotated package-level variables.
    globals: FxHashMap<Symbol, (&'a ast::Type, FileId)>,
    dup_schemas: Vec<Symbol>,
    /// Unannotated package-level names assigned exactly once (by a plain top-level `=`),
    /// typed lazily by their value with literals widened, as upstream does.
    inferred: FxHashMap<Symbol, (&'a Expr, FileId)>,
    inferred_ty: FxHashMap<Symbol, Ty>,
    /// Package-level names declared by unification (`x: S {...}`), in any file: their type is
    /// the schema's, as upstream's resolver knows it before the statement is reached.
    unified: FxHashMap<Symbol, (&'a Expr, FileId)>,
    /// The type each package-level name got from its first assignment (its annotation, else
    /// its value's variable type): later plain assignments must fit it, as upstream's.
    assigned_ty: FxHashMap<Symbol, Ty>,
    /// Every name the package defines at its top level, in order of definition.
    defined: indexmap::IndexSet<Symbol, rustc_hash::FxBuildHasher>,
}

struct Checker<'a> {
    program: &'a Program,
    pkgs: Vec<PkgInfo<'a>>,
    pkg_index: FxHashMap<&'a str, usize>,
    main: usize,
    schemas: Vec<SchemaInfo<'a>>,
    /// `import` bindings per file.
    imports: FxHashMap<(FileId, Symbol), &'a ImportTarget>,
    file_pkg: FxHashMap<FileId, usize>,
    errors: Vec<EvalError>,
    alias_depth: u32,
    /// Start of the package-level statement being checked: where upstream reports a lambda
    /// whose last statement is an assignment of the wrong type.
    stmt_start: Option<Span>,
    /// The type of the receiver of the selector last inferred (`x` of `x.attr`), by the
    /// receiver's span: a method call's receiver type without inferring it again.
    last_receiver: Option<(Span, Ty)>,
    /// Lambda bodies being checked: their assignments bind locals, not package names.
    lambda_depth: u32,
    /// The type a schema's unannotated attribute got from its first assignment in the body.
    schema_assigned: FxHashMap<(SchemaId, Symbol), Ty>,
}

/// Lexical context of the expression being checked.
#[derive(Clone)]
struct Env {
    pkg: usize,
    file: FileId,
    schema: Option<SchemaId>,
    /// Local names (lambda parameters, loop variables) shadow globals; their types are `any`
    /// unless annotated.
    locals: Rc<Vec<(Symbol, Ty)>>,
    /// Keys of the enclosing config literals, with where each entry ends: names in their
    /// values; keys of the entries before a name are its "did you mean" candidates, as
    /// upstream's (not the key of the entry the name is in).
    keys: Rc<Vec<(Symbol, u32)>>,
    /// Inside a mixin: its names may be its host's attributes (upstream does not resolve
    /// them), so unknown names are not errors.
    lenient: bool,
}

impl Env {
    fn with_local(&self, s: Symbol, t: Ty) -> Env {
        let mut l = (*self.locals).clone();
        l.push((s, t));
        Env {
            locals: Rc::new(l),
            ..self.clone()
        }
    }
}

impl<'a> Checker<'a> {
    fn new(program: &'a Program) -> Self {
        let mut c = Checker {
            program,
            pkgs: Vec::new(),
            pkg_index: FxHashMap::default(),
            main: 0,
            schemas: Vec::new(),
            imports: FxHashMap::default(),
            file_pkg: FxHashMap::default(),
            errors: Vec::new(),
            alias_depth: 0,
            stmt_start: None,
            last_receiver: None,
            lambda_depth: 0,
            schema_assigned: FxHashMap::default(),
        };
        let all = std::iter::once(&program.main).chain(program.packages.iter().map(|(_, p)| p));
        for p in all {
            let idx = c.pkgs.len();
            let mut info = PkgInfo {
                path: &p.pkgpath,
                modules: &p.modules,
                schemas: FxHashMap::default(),
                aliases: FxHashMap::default(),
                globals: FxHashMap::default(),
                dup_schemas: Vec::new(),
                inferred: FxHashMap::default(),
                inferred_ty: FxHashMap::default(),
                unified: FxHashMap::default(),
                assigned_ty: FxHashMap::default(),
                defined: Default::default(),
            };
            let mut counts: FxHashMap<Symbol, u32> = FxHashMap::default();
            for m in &p.modules {
                c.file_pkg.insert(m.file, idx);
                let mut names = Vec::new();
                collect_defined(&m.body, &mut names);
                info.defined.extend(names);
                for s in &m.body {
                    match &s.kind {
                        StmtKind::Schema(st) => {
                            let id = SchemaId(c.schemas.len());
                            c.schemas.push(SchemaInfo {
                                stmt: st,
                                pkg: idx,
                                file: m.file,
                                members: OnceCell::new(),
                            });
                            // a name defined twice is the evaluator's error to report
                            if info.schemas.insert(st.name.sym, id).is_some() {
                                info.dup_schemas.push(st.name.sym);
                            }
                        }
                        StmtKind::TypeAlias(t) => {
                            info.aliases.insert(t.name.sym, (&t.ty, m.file));
                        }
                        StmtKind::Assign(a) => {
                            if let (Some(t), [target]) = (&a.ty, a.targets.as_slice())
                                && target.path.is_empty()
                            {
                                info.globals.insert(target.name.sym, (t, m.file));
                            }
                            for t in &a.targets {
                                *counts.entry(t.name.sym).or_default() += 1;
                            }
                            if let (None, [target]) = (&a.ty, a.targets.as_slice())
                                && target.path.is_empty()
                            {
                                info.inferred.insert(target.name.sym, (&a.value, m.file));
                            }
                        }
                        StmtKind::Unification(u) => {
                            *counts.entry(u.target.sym).or_default() += 2;
                            info.unified
                                .entry(u.target.sym)
                                .or_insert((&u.value, m.file));
                        }
                        StmtKind::If(i) => {
                            let mut names = Vec::new();
                            collect_assigned(&i.body, &mut names);
                            collect_assigned(&i.orelse, &mut names);
                            for n in names {
                                *counts.entry(n).or_default() += 2;
                            }
                        }
                        StmtKind::Import(i) => {
                            if let (Some(t), Some(n)) = (program.import_target(i), i.local_name()) {
                                c.imports.insert((m.file, n), t);
                            }
                        }
                        _ => {}
                    }
                }
            }
            info.inferred
                .retain(|k, _| counts.get(k) == Some(&1) && !info.globals.contains_key(k));
            for d in std::mem::take(&mut info.dup_schemas) {
                info.schemas.remove(&d);
            }
            c.pkg_index.insert(&p.pkgpath, idx);
            c.pkgs.push(info);
        }
        c.main = 0;
        c
    }

    fn err(&mut self, kind: ErrKind, msg: String, span: Span) {
        self.errors.push(EvalError::new(kind, msg, Some(span)));
    }

    // ------------------------------------------------------------- imports ------

    /// `import` cycles between packages of the program.
    fn check_import_cycles(&self) -> Result<(), EvalError> {
        // edges: package -> imported packages, with the import statement span
        let n = self.pkgs.len();
        let mut edges: Vec<Vec<(usize, Span)>> = vec![Vec::new(); n];
        for (pi, p) in self.pkgs.iter().enumerate() {
            for m in p.modules {
                for s in &m.body {
                    if let StmtKind::Import(i) = &s.kind
                        && let Some(ImportTarget::Package(path)) = self.program.import_target(i)
                        && let Some(&to) = self.pkg_index.get(&**path)
                    {
                        edges[pi].push((to, s.span));
                    }
                }
            }
        }
        // a package that imports the main package's own files closes a cycle through main
        let mut state = vec![0u8; n];
        let mut stack: Vec<usize> = Vec::new();
        fn dfs(
            u: usize,
            edges: &[Vec<(usize, Span)>],
            state: &mut [u8],
            stack: &mut Vec<usize>,
        ) -> Option<(Vec<usize>, Span)> {
            state[u] = 1;
            stack.push(u);
            for &(v, sp) in &edges[u] {
                if state[v] == 1 {
                    let start = stack.iter().position(|&x| x == v).unwrap_or(0);
                    return Some((stack[start..].to_vec(), sp));
                }
                if state[v] == 0
                    && let Some(r) = dfs(v, edges, state, stack)
                {
                    return Some(r);
                }
            }
            stack.pop();
            state[u] = 2;
            None
        }
        for s in 0..n {
            if state[s] == 0
                && let Some((cycle, sp)) = dfs(s, &edges, &mut state, &mut stack)
            {
                let names: Vec<&str> = cycle.iter().map(|&i| self.pkgs[i].path).collect();
                let next = cycle[1 % cycle.len()];
                let sp = edges[cycle[0]]
                    .iter()
                    .find(|(t, _)| *t == next)
                    .map(|(_, s)| *s)
                    .unwrap_or(sp);
                return Err(EvalError::new(
                    ErrKind::Compile,
                    format!(
                        "There is a circular reference between modules {}",
                        names.join(", ")
                    ),
                    Some(sp.shrink_to_lo()),
                ));
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------- types --------

    /// Packages in upstream's resolver order: an imported package is checked when the
    /// package importing it starts (its own imports first, in statement order), so its errors
    /// come before the importer's; the main package last.
    fn check_order(&self) -> Vec<usize> {
        fn visit(c: &Checker<'_>, p: usize, seen: &mut Vec<bool>, out: &mut Vec<usize>) {
            seen[p] = true;
            for m in c.pkgs[p].modules {
                for st in &m.body {
                    let StmtKind::Import(imp) = &st.kind else {
                        continue;
                    };
                    if let Some(ImportTarget::Package(path)) = c.program.import_target(imp)
                        && let Some(&q) = c.pkg_index.get(&**path)
                        && !seen[q]
                    {
                        visit(c, q, seen, out);
                    }
                }
            }
            out.push(p);
        }
        let mut seen = vec![false; self.pkgs.len()];
        let mut out = Vec::with_capacity(self.pkgs.len());
        visit(self, self.main, &mut seen, &mut out);
        // packages no import reaches (none in a loaded program) keep their load order
        let main = out.pop();
        out.extend((0..self.pkgs.len()).filter(|&p| !seen[p]));
        out.extend(main);
        out
    }

    fn pkg_of_import(&self, file: FileId, name: Symbol) -> Option<usize> {
        let target = match self.imports.get(&(file, name)) {
            Some(t) => *t,
            // upstream collects the main package's imports from all its files
            None if self.file_pkg.get(&file) == Some(&self.main) => self
                .imports
                .iter()
                .find(|((f, n), _)| *n == name && self.file_pkg.get(f) == Some(&self.main))
                .map(|(_, t)| *t)?,
            None => return None,
        };
        match target {
            ImportTarget::Package(p) => self.pkg_index.get(&**p).copied(),
            _ => None,
        }
    }

    /// The system module (`math`) a name of `file` imports, if any.
    fn system_module_of(&self, file: FileId, name: Symbol) -> Option<&'a str> {
        let target = match self.imports.get(&(file, name)) {
            Some(t) => *t,
            None if self.file_pkg.get(&file) == Some(&self.main) => self
                .imports
                .iter()
                .find(|((f, n), _)| *n == name && self.file_pkg.get(f) == Some(&self.main))
                .map(|(_, t)| *t)?,
            None => return None,
        };
        match target {
            ImportTarget::System(m) => Some(&**m),
            _ => None,
        }
    }

    /// The schema an identifier (`S` or `pkg.S`) names from `file` of package `pkg`.
    fn resolve_schema(&self, pkg: usize, _file: FileId, names: &[ast::Name]) -> Option<SchemaId> {
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
    fn resolve_type(&mut self, pkg: usize, file: FileId, t: &ast::Type) -> Ty {
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
                    _ => Ty::Any,
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
                Ty::union(ts)
            }
            TypeKind::Literal(l) => match l {
                LiteralType::Bool(b) => Ty::BoolLit(*b),
                LiteralType::Int(i, None) => Ty::IntLit(*i),
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
                Ty::Func(Rc::new(ty::FuncTy { params, ret }))
            }
        }
    }

    fn schema_name(&self, id: SchemaId) -> &'static str {
        self.schemas[id.0].stmt.name.sym.as_str()
    }

    fn members(&mut self, id: SchemaId) -> Rc<Members> {
        if let Some(m) = self.schemas[id.0].members.get() {
            return m.clone();
        }
        // a placeholder first, so an inheritance cycle ends (the evaluator reports cycles)
        let _ = self.schemas[id.0].members.set(Rc::new(Members {
            open: true,
            unresolved: true,
            ..Default::default()
        }));
        let m = Rc::new(self.build_members(id));
        let cell = &mut self.schemas[id.0].members;
        *cell = OnceCell::new();
        let _ = cell.set(m.clone());
        m
    }

    fn build_members(&mut self, id: SchemaId) -> Members {
        let (st, pkg, file) = {
            let s = &self.schemas[id.0];
            (s.stmt, s.pkg, s.file)
        };
        let mut m = Members {
            open: st.index_signature.is_some() || st.is_protocol() || st.for_host.is_some(),
            ..Default::default()
        };
        // parent and mixin members first; own declarations override them
        let mut bases: Vec<&ast::Identifier> = st.parent.iter().collect();
        bases.extend(st.mixins.iter());
        for b in bases {
            match self.resolve_schema(pkg, file, &b.names) {
                // inheriting from a mixin is an error the evaluator reports
                Some(pid)
                    if self.schemas[pid.0].stmt.is_mixin() && st.parent.as_ref() == Some(b) =>
                {
                    m.open = true;
                    m.unresolved = true;
                }
                Some(pid) => {
                    let pm = self.members(pid);
                    m.open |= pm.open;
                    m.unresolved |= pm.unresolved;
                    for k in &pm.order {
                        if let Some(v) = pm.attrs.get(k) {
                            if !m.attrs.contains_key(k) {
                                m.order.push(*k);
                                m.in_scope.push(*k);
                            }
                            m.attrs.insert(*k, v.clone());
                        }
                    }
                    m.parents.push(pid);
                    m.parents.extend(pm.parents.iter().copied());
                }
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
        self.collect_body_members(pkg, file, &st.body, &mut m);
        m
    }

    fn collect_body_members(&mut self, pkg: usize, file: FileId, body: &[Stmt], m: &mut Members) {
        for s in body {
            match &s.kind {
                StmtKind::SchemaAttr(a) => {
                    let t = self.resolve_type(pkg, file, &a.ty);
                    m.set(a.name.sym, t, a.name.span);
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
                    self.collect_body_members(pkg, file, &i.body, m);
                    self.collect_body_members(pkg, file, &i.orelse, m);
                }
                _ => {}
            }
        }
    }

    // ------------------------------------------------------------- walk ---------

    fn check_pkg(&mut self, pkg: usize) {
        let modules = self.pkgs[pkg].modules;
        // a schema or rule name defined twice in the package is reported before anything else
        let mut defined: FxHashMap<Symbol, Span> = FxHashMap::default();
        let mut aliases: FxHashMap<Symbol, Span> = FxHashMap::default();
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
            if defined.insert(name.sym, s.span).is_some() {
                let msg = format!("Unique key error name '{}'", name.sym);
                self.err(ErrKind::UniqueKey, msg, s.span.shrink_to_lo());
                return;
            }
        }
        // a public name assigned twice (or a schema or alias name assigned) comes next
        let mut first: FxHashMap<Symbol, Span> = FxHashMap::default();
        for s in modules.iter().flat_map(|m| &m.body) {
            let mut assigns = Vec::new();
            public_assignments(s, &mut assigns);
            for (n, sp) in assigns {
                let prev = defined
                    .get(&n)
                    .or_else(|| aliases.get(&n))
                    .or_else(|| first.get(&n))
                    .copied();
                if let Some(prev) = prev {
                    let e = EvalError::new(
                        ErrKind::Immutable,
                        format!(
                            "Can not change the value of '{n}', because it was declared immutable"
                        ),
                        Some(sp.shrink_to_lo()),
                    )
                    .with_note(prev, format!("The variable '{n}' is declared here"));
                    self.errors.push(e);
                    return;
                }
                first.insert(n, sp);
            }
        }
        // index signatures are checked as the package's schema types are built, before any
        // statement is walked
        for s in modules.iter().flat_map(|m| &m.body) {
            if let StmtKind::Schema(st) = &s.kind {
                self.check_index_signature(st);
                if !self.errors.is_empty() {
                    return;
                }
            }
        }
        let mut assigned: FxHashMap<Symbol, Span> = FxHashMap::default();
        for m in modules {
            let env = Env {
                pkg,
                file: m.file,
                schema: None,
                locals: Rc::new(Vec::new()),
                keys: Rc::new(Vec::new()),
                lenient: false,
            };
            for s in &m.body {
                self.check_immutable(s, &mut assigned);
                self.stmt_start = Some(s.span.shrink_to_lo());
                self.stmt(&env, s);
                if !self.errors.is_empty() {
                    return;
                }
            }
        }
    }

    /// `x op= v` on a package-level name that is not `_`-prefixed.
    fn check_immutable(&mut self, s: &Stmt, assigned: &mut FxHashMap<Symbol, Span>) {
        match &s.kind {
            StmtKind::Assign(a) => {
                for t in &a.targets {
                    if t.path.is_empty() {
                        assigned.entry(t.name.sym).or_insert(t.span);
                    }
                }
            }
            StmtKind::AugAssign(a) => {
                let n = a.target.name;
                if a.target.path.is_empty()
                    && !n.sym.as_str().starts_with('_')
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
                    );
                    self.errors.push(e);
                }
            }
            _ => {}
        }
    }

    fn stmt(&mut self, env: &Env, s: &Stmt) {
        match &s.kind {
            StmtKind::Expr(e) => {
                self.infer(env, e);
            }
            StmtKind::Unification(u) => {
                // upstream resolves `x: S {...}`'s schema name as a type: an unknown one is
                // reported without "did you mean"
                if let ExprKind::Schema(se) = &u.value.kind
                    && let [n] = se.name.names.as_slice()
                    && !self.name_defined(env, n.sym)
                {
                    let msg = format!("name '{}' is not defined", n.sym);
                    self.err(ErrKind::Compile, msg, n.span);
                    return;
                }
                self.infer(env, &u.value);
            }
            StmtKind::Assign(a) => {
                let top = env.schema.is_none() && self.lambda_depth == 0;
                match (&a.ty, a.targets.as_slice()) {
                    // `a: T = b = v` checks the value once, at the first target
                    (Some(t), [target, ..]) => {
                        self.check_type_names(env, t);
                        let ty = self.resolve_type(env.pkg, env.file, t);
                        self.check_value(env, &a.value, &ty, target.span, Some(target.span));
                        if top && target.path.is_empty() {
                            self.pkgs[env.pkg]
                                .assigned_ty
                                .entry(target.name.sym)
                                .or_insert(ty);
                        }
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
                        self.check_value(env, &a.value, &ty, target.span, Some(target.span));
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
                            Some(ty) => {
                                self.check_value(env, &a.value, &ty, target.span, Some(target.span))
                            }
                            None => {
                                let t = self.infer(env, &a.value).variable_type();
                                let t = sup(vec![t], &|x, y| self.is_sub_schema(x, y));
                                self.schema_assigned.insert(key, t);
                            }
                        }
                    }
                    _ => {
                        let t = self.infer(env, &a.value);
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
                // upstream resolves the target before the value
                self.check_defined(env, a.target.name.sym, a.target.span.shrink_to_lo());
                if !self.errors.is_empty() {
                    return;
                }
                let r = self.infer(env, &a.value);
                if a.target.path.is_empty() {
                    let l = self.lookup(env, a.target.name.sym);
                    self.binary(a.op.bin_op(), &l, &r, a.target.span);
                }
            }
            StmtKind::Assert(a) => {
                self.infer(env, &a.test);
                if let Some(c) = &a.if_cond {
                    self.infer(env, c);
                }
                if let Some(m) = &a.msg {
                    self.infer(env, m);
                }
            }
            StmtKind::If(i) => {
                self.infer(env, &i.cond);
                for s in i.body.iter().chain(&i.orelse) {
                    self.stmt(env, s);
                }
            }
            StmtKind::SchemaAttr(a) => {
                self.decorator_args(env, &a.decorators);
                self.check_type_names(env, &a.ty);
                if let Some(v) = &a.value {
                    let ty = self.resolve_type(env.pkg, env.file, &a.ty);
                    if matches!(a.op, Some(ast::AttrOp::Assign) | None) {
                        self.check_value(env, v, &ty, a.name.span, Some(a.name.span));
                    } else {
                        self.infer(env, v);
                    }
                }
            }
            StmtKind::Schema(st) => {
                self.decorator_args(env, &st.decorators);
                if st.is_protocol() && !st.name.sym.as_str().ends_with("Protocol") {
                    let msg = "schema protocol name must end with 'Protocol'".to_string();
                    self.err(ErrKind::Compile, msg, st.name.span);
                }
                for b in st.parent.iter().chain(&st.mixins).chain(&st.for_host) {
                    self.check_defined(env, b.names[0].sym, b.names[0].span);
                }
                if !self.errors.is_empty() {
                    return;
                }
                // a mixin is no base, and a mixin's name says it is one
                if let Some(p) = &st.parent
                    && let Some(pid) = self.resolve_schema(env.pkg, env.file, &p.names)
                    && self.schemas[pid.0].stmt.is_mixin()
                {
                    let name = p.names.last().map(|n| n.sym.as_str()).unwrap_or_default();
                    let msg =
                        format!("invalid schema inherit object type, expect schema, got '{name}'");
                    self.err(ErrKind::IllegalInherit, msg, p.span.shrink_to_lo());
                }
                for m in &st.mixins {
                    let name = m.names.last().map(|n| n.sym.as_str()).unwrap_or_default();
                    if !name.ends_with("Mixin") {
                        let msg =
                            format!("a valid mixin name should end with 'Mixin', got '{name}'");
                        self.err(ErrKind::Name, msg, m.span.shrink_to_lo());
                    }
                }
                if !self.errors.is_empty() {
                    return;
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
                self.check_field_types(env, st);
                if !self.errors.is_empty() {
                    return;
                }
                for s in &st.body {
                    self.stmt(&senv, s);
                }
                if let Some(ix) = &st.index_signature {
                    self.check_type_names(&senv, &ix.key_ty);
                    self.check_type_names(&senv, &ix.value_ty);
                    // the key name is a name in the signature's value and the checks
                    if let Some(k) = &ix.key_name {
                        senv = senv.with_local(k.sym, Ty::Str);
                    }
                    if let Some(v) = &ix.value {
                        self.infer(&senv, v);
                    }
                }
                for c in &st.checks {
                    self.infer(&senv, &c.test);
                    if let Some(x) = &c.if_cond {
                        self.infer(&senv, x);
                    }
                    if let Some(x) = &c.msg {
                        self.infer(&senv, x);
                    }
                }
            }
            StmtKind::TypeAlias(t) => self.check_type_names(env, &t.ty),
            StmtKind::Rule(r) => {
                if let Some(ps) = &r.params {
                    self.check_param_order(ps);
                }
            }
            StmtKind::Import(_) => {}
        }
    }

    /// Upstream's resolver checks a parameter list (schema, rule, lambda) as it reaches it: no
    /// parameter without a default after one with a default, each offending default reported
    /// from the last.
    fn check_param_order(&mut self, params: &[ast::Param]) {
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

    /// A schema's own attributes must fit its own index signature (upstream's resolver checks
    /// every schema, instantiated or not).
    fn check_index_signature(&mut self, st: &ast::SchemaStmt) {
        let Some(is) = &st.index_signature else {
            return;
        };
        use crate::eval::type_str;
        for s in &st.body {
            let StmtKind::SchemaAttr(a) = &s.kind else {
                continue;
            };
            let k = a.name.sym.as_str();
            if is.key_name.is_some_and(|kn| kn.sym == a.name.sym) {
                let msg = format!(
                    "index signature attribute name '{k}' cannot have the same name as schema attributes"
                );
                // upstream points at the index signature, not at the attribute
                self.err(ErrKind::IndexSignature, msg, is.span);
                return;
            }
            if !is.any_other
                && !matches!(
                    is.value_ty.kind,
                    ast::TypeKind::Any | ast::TypeKind::Union(_)
                )
                && type_str(&is.value_ty) != type_str(&a.ty)
            {
                let msg = format!(
                    "the type '{}' of schema attribute '{k}' does not meet the index signature definition {}",
                    type_str(&a.ty),
                    crate::eval::index_sig_str(is)
                );
                self.err(ErrKind::IndexSignature, msg, a.name.span);
                return;
            }
        }
    }

    /// A schema may not redeclare an inherited attribute with another type.
    fn check_field_types(&mut self, env: &Env, st: &ast::SchemaStmt) {
        let Some(parent) = &st.parent else { return };
        let Some(pid) = self.resolve_schema(env.pkg, env.file, &parent.names) else {
            return;
        };
        if self.schemas[pid.0].stmt.is_mixin() {
            return;
        }
        let pm = self.members(pid);
        for s in &st.body {
            if let StmtKind::SchemaAttr(a) = &s.kind
                && let Some((pt, _)) = pm.attrs.get(&a.name.sym)
                && !pt.is_any()
            {
                let nt = self.resolve_type(env.pkg, env.file, &a.ty);
                if nt.is_any() || self.ty_str(pt) == self.ty_str(&nt) {
                    continue;
                }
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
                return;
            }
        }
    }

    /// Check `e` against `expected`; errors go to `span` with a "defined here" note at
    /// `def` (where the expected type was declared).
    fn check_value(&mut self, env: &Env, e: &Expr, expected: &Ty, span: Span, def: Option<Span>) {
        if expected.is_any() {
            self.infer(env, e);
            return;
        }
        let inner = strip_paren(e);
        match (&inner.kind, expected) {
            (ExprKind::Config(entries), Ty::Schema(id)) => {
                self.check_schema_config(env, entries, &[*id]);
                return;
            }
            (ExprKind::Config(entries), Ty::Union(ts))
                if ts.iter().all(|t| matches!(t, Ty::Schema(_))) =>
            {
                let ids: Vec<SchemaId> = ts
                    .iter()
                    .filter_map(|t| match t {
                        Ty::Schema(i) => Some(*i),
                        _ => None,
                    })
                    .collect();
                self.check_schema_config(env, entries, &ids);
                return;
            }
            (ExprKind::Config(entries), Ty::Dict(kt, vt)) => {
                self.check_dict_config(env, entries, expected, kt, vt, def);
                return;
            }
            // a list of configs where a list of schemas is expected: each config against the
            // schema (dicts against a dict type are compared as a whole list type)
            (ExprKind::List(items), Ty::List(et))
                if matches!(**et, Ty::Schema(_))
                    && !items.is_empty()
                    && items
                        .iter()
                        .all(|it| matches!(strip_paren(it).kind, ExprKind::Config(_))) =>
            {
                for it in items.iter() {
                    self.check_value(env, it, et, it.span, def);
                }
                return;
            }
            // configs merged into a schema slot (`base | {k = v}`): upstream merges the
            // entries' types and checks each against the schema, so each side is checked
            (
                ExprKind::Binary {
                    op: ast::BinOp::BitOr,
                    left,
                    right,
                },
                Ty::Schema(_),
            ) => {
                self.infer(env, inner);
                let before = self.errors.len();
                self.check_value(env, left, expected, span, def);
                self.check_value(env, right, expected, span, def);
                // the sides' own errors were found once already
                let mut seen: Vec<(String, Option<Span>)> = self.errors[..before]
                    .iter()
                    .map(|e| (e.msg.clone(), e.span))
                    .collect();
                let mut i = before;
                while i < self.errors.len() {
                    let k = (self.errors[i].msg.clone(), self.errors[i].span);
                    if seen.contains(&k) {
                        self.errors.remove(i);
                    } else {
                        seen.push(k);
                        i += 1;
                    }
                }
                return;
            }
            _ => {}
        }
        let got = self.infer(env, e);
        self.fits(&got, expected, span, def);
    }

    /// Whether `got` fits `expected`; if not, upstream's type error at `span` (with a note at
    /// the declaration `def`).
    fn fits(&mut self, got: &Ty, expected: &Ty, span: Span, def: Option<Span>) -> bool {
        if !assignable(got, expected, &|a, b| self.is_sub_schema(a, b)) {
            let (es, gs) = (self.ty_str(expected), self.ty_str(got));
            let mut err = EvalError::new(
                ErrKind::Type,
                format!("expected {es}, got {gs}"),
                Some(span.shrink_to_lo()),
            );
            if let Some(d) = def
                && d != span
            {
                err = err.with_note(
                    d.shrink_to_lo(),
                    format!("variable is defined here, its type is {es}, but got {gs}"),
                );
            }
            self.errors.push(err);
            return false;
        }
        true
    }

    /// Upstream rejects config keys statically known not to be strings; false when reported.
    fn check_str_key(&mut self, t: &Ty, span: Span) -> bool {
        let stringy = |t: &Ty| t.is_any() || matches!(t, Ty::Str | Ty::StrLit(_));
        let ok = match t {
            Ty::Union(ts) => ts.iter().any(stringy),
            t => stringy(t),
        };
        if !ok {
            let msg = format!("A attribute must be string type, got '{}'", self.ty_str(t));
            self.err(ErrKind::Attribute, msg, span);
        }
        ok
    }

    /// Entries of a config literal checked against a dict type `{K:V}`.
    fn check_dict_config(
        &mut self,
        env: &Env,
        entries: &[ast::ConfigEntry],
        dict_ty: &Ty,
        kt: &Ty,
        vt: &Ty,
        def: Option<Span>,
    ) {
        let env = &self.config_env(env, entries);
        for en in entries {
            match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, op, value } => {
                    let kty = match &key.kind {
                        ExprKind::Ident(s) => Some(Ty::StrLit(std::sync::Arc::from(s.as_str()))),
                        ExprKind::Str(s) => Some(Ty::StrLit(s.clone())),
                        ExprKind::Selector(_) => None,
                        _ => {
                            let t = self.infer(env, key);
                            if !self.check_str_key(&t, key.span) {
                                continue;
                            }
                            Some(t)
                        }
                    };
                    if let Some(kty) = kty
                        && !assignable(&kty, kt, &|a, b| self.is_sub_schema(a, b))
                    {
                        let (es, gs) = (self.ty_str(dict_ty), self.ty_str(&kty));
                        let mut err = EvalError::new(
                            ErrKind::Type,
                            format!("expected {es}, got {gs}"),
                            Some(key.span.shrink_to_lo()),
                        );
                        if let Some(d) = def {
                            err = err.with_note(
                                d.shrink_to_lo(),
                                format!("variable is defined here, its type is {es}, but got {gs}"),
                            );
                        }
                        self.errors.push(err);
                        continue;
                    }
                    if matches!(key.kind, ExprKind::Selector(_)) {
                        let t = self.infer(env, value);
                        self.check_insert(*op, &t, value.span);
                    } else if *op == ast::ConfigOp::Insert {
                        let t = self.infer(env, value);
                        if self.fits(&t, vt, key.span, def) {
                            self.check_insert(*op, &t, value.span);
                        }
                    } else {
                        self.check_value(env, value, vt, key.span, def);
                    }
                }
                ast::ConfigEntryKind::Unpack { value: v, .. } => {
                    self.infer(env, v);
                }
                ast::ConfigEntryKind::If(ci) => {
                    self.infer(env, &ci.cond);
                    self.check_dict_config(env, &ci.body, dict_ty, kt, vt, def);
                    self.check_dict_config(env, &ci.orelse, dict_ty, kt, vt, def);
                }
            }
        }
    }

    /// Entries of a config literal used as the config of a schema (or a union of schemas).
    fn check_schema_config(&mut self, env: &Env, entries: &[ast::ConfigEntry], ids: &[SchemaId]) {
        let env = &self.config_env(env, entries);
        for en in entries {
            match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, op, value } => {
                    let Some(path) = key_path(key) else {
                        self.infer(env, key);
                        let t = self.infer(env, value);
                        self.check_insert(*op, &t, value.span);
                        continue;
                    };
                    let mut cur: Vec<SchemaId> = ids.to_vec();
                    let mut found: Option<(Ty, Span)> = None;
                    let mut ok = true;
                    for (i, (name, nspan)) in path.iter().enumerate() {
                        if cur.is_empty() {
                            ok = false;
                            break;
                        }
                        let mut hit: Option<(Ty, Span)> = None;
                        let mut open = false;
                        for &id in &cur {
                            let m = self.members(id);
                            open |= m.open;
                            if let Some(a) = m.attrs.get(name) {
                                hit = Some(a.clone());
                                break;
                            }
                        }
                        match hit {
                            Some(h) => {
                                cur = match &h.0 {
                                    Ty::Schema(s) => vec![*s],
                                    Ty::Union(ts)
                                        if ts.iter().all(|t| matches!(t, Ty::Schema(_))) =>
                                    {
                                        ts.iter()
                                            .filter_map(|t| match t {
                                                Ty::Schema(s) => Some(*s),
                                                _ => None,
                                            })
                                            .collect()
                                    }
                                    _ => Vec::new(),
                                };
                                found = Some(h);
                            }
                            None if open => {
                                ok = false;
                                break;
                            }
                            None => {
                                let msg = self.cannot_add(&cur, name);
                                let sp = if i == 0 { key.span } else { *nspan };
                                self.err(ErrKind::Compile, msg, sp.shrink_to_lo());
                                ok = false;
                                break;
                            }
                        }
                        if i + 1 < path.len()
                            && !matches!(found, Some((Ty::Schema(_) | Ty::Union(_), _)))
                        {
                            ok = false;
                            break;
                        }
                    }
                    match found {
                        Some((t, def)) if ok && *op != ast::ConfigOp::Insert => {
                            self.check_value(env, value, &t, key.span, Some(def));
                        }
                        Some((t, def)) if ok => {
                            let got = self.infer(env, value);
                            if self.fits(&got, &t, key.span, Some(def)) {
                                self.check_insert(*op, &got, value.span);
                            }
                        }
                        _ => {
                            let t = self.infer(env, value);
                            self.check_insert(*op, &t, value.span);
                        }
                    }
                }
                ast::ConfigEntryKind::Unpack { value: v, .. } => {
                    self.infer(env, v);
                }
                ast::ConfigEntryKind::If(ci) => {
                    self.infer(env, &ci.cond);
                    self.check_schema_config(env, &ci.body, ids);
                    self.check_schema_config(env, &ci.orelse, ids);
                }
            }
        }
    }

    /// `key += value` appends to a list: upstream rejects a value statically known not to be
    /// one.
    fn check_insert(&mut self, op: ast::ConfigOp, t: &Ty, span: Span) {
        let list = |t: &Ty| matches!(t, Ty::Any | Ty::List(_));
        let ok = match t {
            Ty::Union(ts) => ts.iter().all(list),
            t => list(t),
        };
        if op == ast::ConfigOp::Insert && !ok {
            let msg = format!("only list type can in inserted, got '{}'", self.ty_str(t));
            self.err(ErrKind::Attribute, msg, span.shrink_to_lo());
        }
    }

    fn cannot_add(&mut self, ids: &[SchemaId], name: &Symbol) -> String {
        if ids.len() > 1 {
            let names: Vec<&str> = ids.iter().map(|i| self.schema_name(*i)).collect();
            return format!(
                "Cannot add member '{}' to 'schemas {:?}'",
                name.as_str(),
                names
            );
        }
        let m = self.members(ids[0]);
        let sname = self.schema_name(ids[0]);
        // upstream offers the schema's own attributes only, not inherited ones
        let own: Vec<Symbol> = self.schemas[ids[0].0]
            .stmt
            .body
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::SchemaAttr(a) => Some(a.name.sym),
                _ => None,
            })
            .collect();
        format!(
            "Cannot add member '{}' to schema '{sname}'{}",
            name.as_str(),
            did_you_mean(
                name.as_str(),
                m.order
                    .iter()
                    .filter(|s| own.contains(s))
                    .map(|s| s.as_str())
            )
        )
    }

    fn is_sub_schema(&self, a: SchemaId, b: SchemaId) -> bool {
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

    fn ty_str(&self, t: &Ty) -> String {
        t.display(&|id| self.schema_display(id))
    }

    /// Upstream's resolver names schema types without their package (`expected Aff, got Aff`
    /// for two packages' `Aff`).
    fn schema_display(&self, id: SchemaId) -> String {
        self.schemas[id.0].stmt.name.sym.as_str().to_string()
    }

    /// The type of `e` (`any` when unknown), checking sub-expressions on the way.
    fn infer(&mut self, env: &Env, e: &Expr) -> Ty {
        match &e.kind {
            ExprKind::Int(i) => Ty::IntLit(*i),
            ExprKind::Float(f) => Ty::FloatLit(*f),
            ExprKind::Bool(b) => Ty::BoolLit(*b),
            ExprKind::Str(s) => Ty::StrLit(s.clone()),
            ExprKind::None => Ty::None,
            // upstream types `Undefined` as `NoneType`
            ExprKind::Undefined => Ty::None,
            ExprKind::NumberUnit { .. } => Ty::Any,
            ExprKind::JoinedStr(parts) => {
                for p in parts {
                    if let ast::StrPart::Interp { expr, spec } = p {
                        // upstream's resolver knows two format specs, and checks the spec
                        // before the expression
                        if let Some(spec) = spec.as_deref()
                            && !matches!(spec.to_ascii_lowercase().as_str(), "#json" | "#yaml")
                        {
                            let msg = format!("{spec} is a invalid format spec");
                            self.err(ErrKind::Compile, msg, expr.span);
                        }
                        self.infer(env, expr);
                    }
                }
                Ty::Str
            }
            ExprKind::Ident(s) => {
                self.check_defined(env, *s, e.span);
                self.lookup(env, *s)
            }
            ExprKind::Paren(x) => self.infer(env, x),
            ExprKind::Unary { op, operand } => {
                let t = self.infer(env, operand);
                self.unary(*op, &t, operand.span)
            }
            ExprKind::Binary { op, left, right } => {
                let l = self.infer(env, left);
                let r = self.infer(env, right);
                self.binary(*op, &l, &r, e.span)
            }
            ExprKind::Compare(c) => {
                // upstream compares a union as its variable type: literals widened (`"a" |
                // "b"` is `str`), subsumed members dropped, a None member making it `any`
                let mut l = self.infer(env, &c.left);
                l = literal_union_widened(&l, &|a, b| self.is_sub_schema(a, b));
                for (op, r) in &c.ops {
                    let rt = self.infer(env, r);
                    let rt = literal_union_widened(&rt, &|a, b| self.is_sub_schema(a, b));
                    if !compare_allowed(*op, &l, &rt) {
                        let msg = format!(
                            "unsupported operand type(s) for {}: '{}' and '{}'",
                            op.as_str(),
                            self.ty_str(&l),
                            self.ty_str(&rt)
                        );
                        self.err(ErrKind::Type, msg, e.span.shrink_to_lo());
                    }
                    l = rt;
                }
                Ty::Bool
            }
            ExprKind::If(x) => {
                self.infer(env, &x.cond);
                let a = self.infer(env, &x.then);
                let b = self.infer(env, &x.orelse);
                if a.is_any() || b.is_any() {
                    Ty::Any
                } else {
                    sup(vec![a, b], &|x, y| self.is_sub_schema(x, y))
                }
            }
            ExprKind::Selector(x) => {
                let (value, attr) = (&x.value, &x.attr);
                if let ExprKind::Ident(s) = &value.kind
                    && env.locals.iter().all(|(n, _)| n != s)
                    && !self.is_schema_member(env, *s)
                    && let Some(tp) = self.pkg_of_import(value.span.file, *s)
                {
                    if let Some(&id) = self.pkgs[tp].schemas.get(&attr.sym) {
                        return Ty::SchemaType(id);
                    }
                    if let Some(&(t, f)) = self.pkgs[tp].globals.get(&attr.sym) {
                        return self.resolve_type(tp, f, t);
                    }
                    return Ty::Any;
                }
                // a member a system module does not have: upstream's resolver error
                if let ExprKind::Ident(sym) = &value.kind
                    && env.locals.iter().all(|(n, _)| n != sym)
                    && !self.is_schema_member(env, *sym)
                    && let Some(m) = self.system_module_of(value.span.file, *sym)
                {
                    let name = crate::builtins::system_module_name(m).unwrap_or(m);
                    if crate::builtins::system_member(name, attr.sym.as_str()).is_none() {
                        let msg = format!(
                            "attribute '{}' not found in 'module '{m}''",
                            attr.sym.as_str()
                        );
                        self.err(ErrKind::Type, msg, value.span.shrink_to_lo());
                        return Ty::Any;
                    }
                    return match sysmod::signature(name, attr.sym.as_str()) {
                        Some(f) => Ty::Func(f),
                        None => Ty::Any,
                    };
                }
                let t = self.infer(env, value);
                self.last_receiver = Some((value.span, t.clone()));
                match t {
                    Ty::SchemaType(id) => {
                        if attr.sym.as_str() != "instances" {
                            let name = self.schema_name(id);
                            let a = attr.sym.as_str();
                            let msg = if similar("instances", a) {
                                format!(
                                    "attribute '{a}' not found in '{name}', did you mean '[\"instances\"]'?"
                                )
                            } else {
                                format!("attribute '{a}' not found in '{name}'")
                            };
                            self.err(ErrKind::Type, msg, value.span.shrink_to_lo());
                        }
                        Ty::Any
                    }
                    Ty::Schema(id) => {
                        let m = self.members(id);
                        match m.attrs.get(&attr.sym) {
                            Some(a) => a.0.clone(),
                            None => {
                                if !m.open {
                                    let msg = format!(
                                        "attribute '{}' not found in '{}'{}",
                                        attr.sym.as_str(),
                                        self.schema_name(id),
                                        did_you_mean(
                                            attr.sym.as_str(),
                                            m.order.iter().map(|s| s.as_str())
                                        )
                                    );
                                    self.err(ErrKind::Type, msg, value.span.shrink_to_lo());
                                }
                                Ty::Any
                            }
                        }
                    }
                    // upstream's resolver knows these types have no attributes but the string
                    // methods
                    Ty::Str
                    | Ty::StrLit(_)
                    | Ty::Int
                    | Ty::IntLit(_)
                    | Ty::Float
                    | Ty::FloatLit(_)
                    | Ty::Bool
                    | Ty::BoolLit(_)
                    | Ty::None
                    | Ty::Func(_)
                    | Ty::List(_) => {
                        let str_method = matches!(t, Ty::Str | Ty::StrLit(_))
                            && crate::builtins::STR_METHODS.contains(&attr.sym.as_str());
                        // `?.` changes nothing here: upstream's resolver checks the type
                        if !str_method {
                            let msg = format!(
                                "attribute '{}' not found in '{}'",
                                attr.sym.as_str(),
                                self.ty_str(&t)
                            );
                            // at the name for a dotted name (upstream's one identifier), else
                            // at the attribute
                            let at = if dotted(value).is_some() {
                                value.span.shrink_to_lo()
                            } else {
                                attr.span.shrink_to_lo()
                            };
                            self.err(ErrKind::Type, msg, at);
                        }
                        Ty::Any
                    }
                    // a dict's attribute is one of its values (upstream knows a literal's type
                    // per key, which a union of the values' types does not tell)
                    Ty::Dict(_, v) if !matches!(*v, Ty::Union(_)) => (*v).clone(),
                    _ => Ty::Any,
                }
            }
            ExprKind::Subscript { value, index, .. } => {
                let t = self.infer(env, value);
                let it = self.infer(env, index);
                // upstream's resolver knows what cannot be subscripted, and with what
                if self.not_subscriptable(&t, value.span) {
                    return Ty::Any;
                }
                match &t {
                    Ty::Str | Ty::StrLit(_) | Ty::List(_) if !int_index(&it) => {
                        let msg = format!("expected int, got {}", self.ty_str(&it));
                        self.err(ErrKind::Type, msg, index.span.shrink_to_lo());
                        return Ty::Any;
                    }
                    Ty::Dict(..) | Ty::Schema(_) | Ty::SchemaType(_)
                        if it.kind().is_some_and(|k| k != Kind::Str) =>
                    {
                        let msg = format!("invalid dict/schema key type: '{}'", self.ty_str(&it));
                        self.err(ErrKind::Compile, msg, value.span.shrink_to_lo());
                        return Ty::Any;
                    }
                    _ => {}
                }
                match t {
                    Ty::List(e) => (*e).clone(),
                    Ty::Dict(_, v) => (*v).clone(),
                    Ty::Str | Ty::StrLit(_) => Ty::Str,
                    _ => Ty::Any,
                }
            }
            ExprKind::Slice(sl) => {
                let t = self.infer(env, &sl.value);
                let bounds: Vec<(Ty, Span)> = [&sl.lower, &sl.upper, &sl.step]
                    .into_iter()
                    .flatten()
                    .map(|x| (self.infer(env, x), x.span))
                    .collect();
                if self.not_subscriptable(&t, sl.value.span) {
                    return Ty::Any;
                }
                match &t {
                    Ty::Str | Ty::StrLit(_) | Ty::List(_) => {
                        if let Some((bt, at)) = bounds.iter().find(|(bt, _)| !int_index(bt)) {
                            let msg = format!("expected int, got {}", self.ty_str(bt));
                            self.err(ErrKind::Type, msg, at.shrink_to_lo());
                            return Ty::Any;
                        }
                        t.widen()
                    }
                    Ty::Dict(..) | Ty::Schema(_) => {
                        let msg = "unhashable type: 'slice'".to_string();
                        self.err(ErrKind::Compile, msg, sl.value.span.shrink_to_lo());
                        Ty::Any
                    }
                    _ => Ty::Any,
                }
            }
            ExprKind::Call { func, args } => {
                let mut func_ty = Ty::Any;
                let arity = self.builtin_arity(env, func, &mut func_ty);
                // a method's receiver, before the arguments are inferred
                let on_str = match &func.kind {
                    ExprKind::Selector(x) if !x.optional => {
                        matches!(self.receiver_ty(env, &x.value), Ty::Str | Ty::StrLit(_))
                    }
                    _ => false,
                };
                if arity.is_none()
                    && let Ty::Func(f) = &func_ty
                {
                    // upstream names the callee by its dotted path; other callees are
                    // checked at run time
                    return self.lambda_call(env, dotted(func), f, args, e.span);
                }
                if arity.is_none()
                    && let Ty::SchemaType(id) = func_ty
                    && self.schema_is_plain(id)
                {
                    let f = self.schema_params(id);
                    return self.lambda_call(env, dotted(func), &f, args, e.span);
                }
                let arg_tys: Vec<Ty> = args.args.iter().map(|a| self.infer(env, a)).collect();
                let kw_tys: Vec<Ty> = args
                    .keywords
                    .iter()
                    .map(|k| self.infer(env, &k.value))
                    .collect();
                if let ExprKind::Ident(s) = &func.kind
                    && let Some(params) = builtin_fn_params(s.as_str())
                    && self.builtin_visible(env, *s)
                {
                    self.builtin_args(s.as_str(), &params, args, &arg_tys, &kw_tys);
                }
                if on_str
                    && args.keywords.is_empty()
                    && let ExprKind::Selector(x) = &func.kind
                    && let Some(params) = str_method_params(x.attr.sym.as_str())
                {
                    self.builtin_args(x.attr.sym.as_str(), &params, args, &arg_tys, &[]);
                }
                let builtin = arity.is_some();
                if let Some((name, min, max)) = arity
                    && args.keywords.is_empty()
                {
                    self.check_arity(&name, min, max, &args.args, e.span);
                }
                // what upstream's resolver knows builtins and string methods return
                match &func.kind {
                    ExprKind::Ident(s) if builtin || self.builtin_visible(env, *s) => {
                        if let Some(t) = builtin_fn_ret(s.as_str()) {
                            return t;
                        }
                    }
                    ExprKind::Selector(x) if !x.optional => {
                        if on_str && let Some(t) = str_method_ret(x.attr.sym.as_str()) {
                            return t;
                        }
                    }
                    _ => {}
                }
                match func_ty {
                    Ty::Func(f) => f.ret.clone(),
                    _ => Ty::Any,
                }
            }
            ExprKind::List(items) => {
                let mut ts = Vec::with_capacity(items.len());
                let mut known = true;
                for x in items {
                    // `*xs` brings the unpacked list's items (a dict's keys)
                    let t = match &x.kind {
                        ExprKind::Starred(inner) => match self.infer(env, inner) {
                            Ty::List(e) => (*e).clone(),
                            Ty::Dict(k, _) => (*k).clone(),
                            _ => Ty::Any,
                        },
                        _ => self.infer(env, x),
                    };
                    if t.is_any() || matches!(x.kind, ExprKind::ListIf(_)) {
                        known = false;
                    }
                    ts.push(t);
                }
                if known && !ts.is_empty() {
                    Ty::List(Rc::new(sup(ts, &|x, y| self.is_sub_schema(x, y))))
                } else {
                    Ty::List(Rc::new(Ty::Any))
                }
            }
            ExprKind::ListIf(li) => {
                self.infer(env, &li.cond);
                for x in li.body.iter().chain(&li.orelse) {
                    self.infer(env, x);
                }
                Ty::Any
            }
            ExprKind::Starred(x) => {
                self.infer(env, x);
                Ty::Any
            }
            ExprKind::Config(entries) => self.infer_config(env, entries),
            ExprKind::ListComp(c) => {
                let env2 = self.comp_env(env, &c.clauses);
                let t = match &c.elt.kind {
                    ExprKind::Starred(_) => {
                        self.infer(&env2, &c.elt);
                        Ty::Any
                    }
                    _ => self.infer(&env2, &c.elt),
                };
                Ty::List(Rc::new(t))
            }
            ExprKind::DictComp(c) => {
                let env2 = self.comp_env(env, &c.clauses);
                let k = self.infer(&env2, &c.key);
                let v = self.infer(&env2, &c.value);
                if k.is_any() || v.is_any() {
                    Ty::Dict(Rc::new(Ty::Any), Rc::new(Ty::Any))
                } else {
                    Ty::Dict(Rc::new(k), Rc::new(v))
                }
            }
            ExprKind::Quant(q) => {
                let it = self.infer(env, &q.target);
                let tys = loop_var_types(&it, q.vars.len());
                let mut env2 = env.clone();
                for (i, v) in q.vars.iter().enumerate() {
                    env2 = env2.with_local(v.sym, tys.get(i).cloned().unwrap_or(Ty::Any));
                }
                let test = self.infer(&env2, &q.test);
                if let Some(c) = &q.if_cond {
                    self.infer(&env2, c);
                }
                // upstream: all/any are bool, filter keeps the iterated type, map lists the
                // test's
                match q.op {
                    ast::QuantOp::All | ast::QuantOp::Any => Ty::Bool,
                    ast::QuantOp::Filter if matches!(it, Ty::List(_) | Ty::Dict(..)) => it,
                    ast::QuantOp::Map => Ty::List(Rc::new(test)),
                    _ => Ty::Any,
                }
            }
            ExprKind::Schema(se) => {
                let head = se.name.names[0];
                self.check_defined(env, head.sym, head.span);
                let id = self.resolve_schema(env.pkg, env.file, &se.name.names);
                match (&se.args, id) {
                    (Some(a), Some(id)) if self.schema_is_plain(id) => {
                        let f = self.schema_params(id);
                        let name = se
                            .name
                            .names
                            .iter()
                            .map(|n| n.sym.as_str())
                            .collect::<Vec<_>>();
                        self.lambda_call(env, Some(name.join(".")), &f, a, e.span);
                    }
                    (Some(a), _) => {
                        for x in &a.args {
                            self.infer(env, x);
                        }
                        for k in &a.keywords {
                            self.infer(env, &k.value);
                        }
                    }
                    (None, _) => {}
                }
                match (id, &strip_paren(&se.config).kind) {
                    (Some(id), ExprKind::Config(entries)) if self.schema_is_plain(id) => {
                        self.check_schema_config(env, entries, &[id]);
                        Ty::Schema(id)
                    }
                    (Some(id), _) if self.schema_is_plain(id) => {
                        self.infer(env, &se.config);
                        Ty::Schema(id)
                    }
                    _ => {
                        self.infer(env, &se.config);
                        Ty::Any
                    }
                }
            }
            ExprKind::Lambda(l) => {
                self.check_param_order(&l.params);
                let mut env2 = env.clone();
                let mut params = Vec::with_capacity(l.params.len());
                for p in &l.params {
                    if let Some(d) = &p.default {
                        self.infer(env, d);
                    }
                    if let Some(t) = &p.ty {
                        self.check_type_names(env, t);
                    }
                    let t = match &p.ty {
                        Some(t) => self.resolve_type(env.pkg, env.file, t),
                        None => Ty::Any,
                    };
                    env2 = env2.with_local(p.name.sym, t.clone());
                    params.push((Some(p.name.sym), t, p.default.is_some()));
                }
                // assignments in the body are locals
                let mut locals = Vec::new();
                collect_assigned(&l.body, &mut locals);
                for s in locals {
                    env2 = env2.with_local(s, Ty::Any);
                }
                if let Some(t) = &l.ret {
                    self.check_type_names(env, t);
                }
                let declared = l
                    .ret
                    .as_ref()
                    .map(|t| self.resolve_type(env.pkg, env.file, t));
                let ret = self.lambda_body(&env2, &l.body, declared.as_ref());
                Ty::Func(Rc::new(ty::FuncTy {
                    params,
                    ret: declared.unwrap_or(ret),
                }))
            }
            ExprKind::As { value, ty } => {
                let got = self.infer(env, value);
                self.check_type_names(env, ty);
                let t = self.resolve_type(env.pkg, env.file, ty);
                let sub = |a: SchemaId, b: SchemaId| self.is_sub_schema(a, b);
                if !got.is_any()
                    && !t.is_any()
                    && !assignable(&got, &t, &sub)
                    && !assignable(&t, &got, &sub)
                {
                    let msg = format!(
                        "Conversion of type '{}' to type '{}' may be a mistake because neither type sufficiently overlaps with the other",
                        self.ty_str(&got),
                        self.ty_str(&t)
                    );
                    self.err(ErrKind::Type, msg, value.span.shrink_to_lo());
                }
                t
            }
            ExprKind::Missing => Ty::Any,
        }
    }

    /// Schemas whose instances the checker understands fully (no protocol/mixin host magic).
    /// The positional arity (name as upstream prints it, required, most) of a call to a
    /// builtin function or to a method of a value known to be a string; infers `func` on the way.
    fn builtin_arity(
        &mut self,
        env: &Env,
        func: &Expr,
        func_ty: &mut Ty,
    ) -> Option<(String, usize, Option<usize>)> {
        match &func.kind {
            ExprKind::Ident(s) => {
                let shadowed = !self.builtin_visible(env, *s);
                *func_ty = self.infer(env, func);
                let (min, max) = builtin_fn_arity(s.as_str()).filter(|_| !shadowed)?;
                Some((s.as_str().to_string(), min, max))
            }
            ExprKind::Selector(x) if !x.optional => {
                *func_ty = self.infer(env, func);
                // the receiver's type, where it is known without inferring it again
                let t = self.receiver_ty(env, &x.value);
                if !matches!(t, Ty::Str | Ty::StrLit(_)) {
                    return None;
                }
                let (min, max) = str_method_arity(x.attr.sym.as_str())?;
                // upstream names the call by its dotted path, or the method alone
                let name = match dotted(func) {
                    Some(d) => d,
                    None => x.attr.sym.as_str().to_string(),
                };
                Some((name, min, max))
            }
            _ => {
                *func_ty = self.infer(env, func);
                None
            }
        }
    }

    /// The type of a method call's receiver, where it is known without inferring it again: a
    /// literal, a name, or the receiver of the selector inferred last.
    fn receiver_ty(&mut self, env: &Env, recv: &Expr) -> Ty {
        match &recv.kind {
            ExprKind::Str(_) | ExprKind::JoinedStr(_) => Ty::Str,
            ExprKind::Ident(s) => self.lookup(env, *s),
            _ => match &self.last_receiver {
                Some((sp, t)) if *sp == recv.span => t.clone(),
                _ => Ty::Any,
            },
        }
    }

    /// Whether `s` names the builtin function there (no local, member or global of the name).
    fn builtin_visible(&mut self, env: &Env, s: Symbol) -> bool {
        !(env.locals.iter().any(|(n, _)| *n == s)
            || self.is_schema_member(env, s)
            || self.pkgs[env.pkg].defined.contains(&s)
            || self.imports.contains_key(&(env.file, s)))
    }

    /// A call of a lambda whose parameters are known: upstream's static checks of argument
    /// counts, keyword names and argument types; the value has the lambda's return type.
    fn lambda_call(
        &mut self,
        env: &Env,
        name: Option<String>,
        f: &ty::FuncTy,
        args: &ast::CallArgs,
        at: Span,
    ) -> Ty {
        let start = self.errors.len();
        for (i, a) in args.args.iter().enumerate() {
            match f.params.get(i) {
                Some((_, t, _)) => self.check_value(env, a, t, a.span, None),
                None => {
                    self.infer(env, a);
                    if let Some(name) = &name
                        && self.errors.len() == start
                    {
                        let n = f.params.len();
                        let msg = format!(
                            "\"{name}\" takes {n} positional {} but {} were given",
                            if n > 1 { "arguments" } else { "argument" },
                            args.args.len()
                        );
                        self.err(ErrKind::Compile, msg, a.span.shrink_to_lo());
                    }
                }
            }
        }
        for k in &args.keywords {
            match f.params.iter().find(|(p, _, _)| *p == Some(k.name.sym)) {
                Some((_, t, _)) => self.check_value(env, &k.value, t, k.value.span, None),
                None => {
                    self.infer(env, &k.value);
                    if let Some(name) = &name
                        && self.errors.len() == start
                    {
                        let names = f
                            .params
                            .iter()
                            .filter_map(|(p, _, _)| p.map(|p| p.as_str()));
                        let msg = format!(
                            "\"{name}\" got an unexpected keyword argument '{}'{}",
                            k.name.sym,
                            did_you_mean_or(k.name.sym.as_str(), names)
                        );
                        self.err(ErrKind::Compile, msg, k.name.span.shrink_to_lo());
                    }
                }
            }
        }
        let required = f.params.iter().filter(|(_, _, d)| !d).count();
        let given = args.args.len() + args.keywords.len();
        if name.is_some() && self.errors.len() == start && given < required {
            let msg = format!(
                "expected {required} positional {}, found {given}",
                if required > 1 {
                    "arguments"
                } else {
                    "argument"
                }
            );
            self.err(ErrKind::Compile, msg, at.shrink_to_lo());
        }
        f.ret.clone()
    }

    /// Whether `t` is a type upstream's resolver says cannot be subscripted (scalars, None,
    /// functions, and unions without a None member); reports it at `at`.
    fn not_subscriptable(&mut self, t: &Ty, at: Span) -> bool {
        let bad = match t {
            Ty::Int
            | Ty::IntLit(_)
            | Ty::Float
            | Ty::FloatLit(_)
            | Ty::Bool
            | Ty::BoolLit(_)
            | Ty::None
            | Ty::Func(_) => true,
            Ty::Union(ts) => !ts.iter().any(|t| matches!(t, Ty::None | Ty::Any)),
            _ => false,
        };
        if bad {
            let msg = format!("'{}' object is not subscriptable", self.ty_str(t));
            self.err(ErrKind::Compile, msg, at.shrink_to_lo());
        }
        bad
    }

    /// Upstream's static checks of a builtin's argument types and keyword names. A value of
    /// unknown type (`any`, None) passes, as upstream's; a schema instance is not a dict here
    /// (`len(instance)` is a type error upstream).
    fn builtin_args(
        &mut self,
        name: &str,
        params: &[(&str, Ty)],
        args: &ast::CallArgs,
        arg_tys: &[Ty],
        kw_tys: &[Ty],
    ) {
        if args
            .args
            .iter()
            .any(|a| matches!(a.kind, ExprKind::Starred(_)))
        {
            return;
        }
        let fits = |got: &Ty, want: &Ty, this: &Self| {
            assignable(got, want, &|a, b| this.is_sub_schema(a, b))
        };
        for ((a, got), (_, want)) in args.args.iter().zip(arg_tys).zip(params) {
            if !fits(got, want, self) {
                let msg = format!("expected {}, got {}", self.ty_str(want), self.ty_str(got));
                self.err(ErrKind::Type, msg, a.span.shrink_to_lo());
            }
        }
        for (k, got) in args.keywords.iter().zip(kw_tys) {
            match params.iter().find(|(p, _)| *p == k.name.sym.as_str()) {
                Some((_, want)) => {
                    if !fits(got, want, self) {
                        let msg =
                            format!("expected {}, got {}", self.ty_str(want), self.ty_str(got));
                        self.err(ErrKind::Type, msg, k.value.span.shrink_to_lo());
                    }
                }
                None => {
                    let msg = format!(
                        "\"{name}\" got an unexpected keyword argument '{}'{}",
                        k.name.sym,
                        did_you_mean_or(k.name.sym.as_str(), params.iter().map(|(p, _)| *p))
                    );
                    self.err(ErrKind::Compile, msg, k.name.span.shrink_to_lo());
                }
            }
        }
    }

    /// Upstream's static argument-count errors: too few at the call, too many at the first
    /// argument beyond the last parameter.
    fn check_arity(&mut self, name: &str, min: usize, max: Option<usize>, args: &[Expr], at: Span) {
        let plural = |n: usize| if n > 1 { "arguments" } else { "argument" };
        if args.len() < min {
            let msg = format!(
                "expected {min} positional {}, found {}",
                plural(min),
                args.len()
            );
            self.err(ErrKind::Compile, msg, at);
        } else if let Some(max) = max
            && args.len() > max
        {
            let msg = format!(
                "\"{name}\" takes {max} positional {} but {} were given",
                plural(max),
                args.len()
            );
            self.err(ErrKind::Compile, msg, args[max].span);
        }
    }

    /// A schema's own parameters (`schema A[a, b = 1]`; a derived schema does not take its
    /// base's, as upstream) as a function type returning an instance.
    fn schema_params(&mut self, id: SchemaId) -> ty::FuncTy {
        let info = &self.schemas[id.0];
        let (stmt, pkg, file) = (info.stmt, info.pkg, info.file);
        let params = stmt
            .params
            .iter()
            .flatten()
            .map(|p| {
                let t = match &p.ty {
                    Some(t) => self.resolve_type(pkg, file, t),
                    None => Ty::Any,
                };
                (Some(p.name.sym), t, p.default.is_some())
            })
            .collect();
        ty::FuncTy {
            params,
            ret: Ty::Schema(id),
        }
    }

    fn schema_is_plain(&self, id: SchemaId) -> bool {
        let st = self.schemas[id.0].stmt;
        !st.is_protocol() && !st.is_mixin()
    }

    fn is_schema_member(&mut self, env: &Env, s: Symbol) -> bool {
        match env.schema {
            Some(id) => self.members(id).attrs.contains_key(&s),
            None => false,
        }
    }

    /// Checks a lambda body and returns the type of its value, the last statement's (upstream:
    /// an expression, an assignment or an assertion; anything else is a compile error). The
    /// value must fit the declared return type.
    fn lambda_body(&mut self, env: &Env, body: &[Stmt], declared: Option<&Ty>) -> Ty {
        self.lambda_depth += 1;
        let t = self.lambda_body_inner(env, body, declared);
        self.lambda_depth -= 1;
        t
    }

    fn lambda_body_inner(&mut self, env: &Env, body: &[Stmt], declared: Option<&Ty>) -> Ty {
        let n = body.len();
        // a local takes the type of its first assignment in the body's own statements
        let mut env = env.clone();
        let mut typed: Vec<Symbol> = Vec::new();
        for s in &body[..n.saturating_sub(1)] {
            if let StmtKind::Assign(a) = &s.kind
                && let [t] = a.targets.as_slice()
                && t.path.is_empty()
            {
                let ty = match &a.ty {
                    Some(x) => {
                        self.stmt(&env, s);
                        self.resolve_type(env.pkg, env.file, x)
                    }
                    None => self.infer(&env, &a.value).variable_type(),
                };
                if !typed.contains(&t.name.sym) {
                    typed.push(t.name.sym);
                    env = env.with_local(t.name.sym, ty);
                }
            } else {
                self.stmt(&env, s);
            }
        }
        let env = &env;
        let Some(last) = body.last() else {
            return Ty::Any;
        };
        let (got, at) = match &last.kind {
            StmtKind::Expr(x) => {
                if let Some(rt) = declared
                    && matches!(strip_paren(x).kind, ExprKind::Config(_))
                {
                    // a config literal is checked member by member against the declared type
                    self.check_value(env, x, rt, x.span, None);
                    return rt.clone();
                }
                (self.infer(env, x), x.span)
            }
            StmtKind::Assign(a) => {
                if a.ty.is_some() {
                    self.stmt(env, last);
                }
                let t = self.infer(env, &a.value);
                (t, self.stmt_start.unwrap_or(last.span))
            }
            StmtKind::AugAssign(_) | StmtKind::Assert(_) => {
                self.stmt(env, last);
                (Ty::Any, last.span)
            }
            _ => {
                self.stmt(env, last);
                self.err(
                    ErrKind::Compile,
                    "The last statement of the lambda body must be a expression e.g., x, 1, etc."
                        .into(),
                    last.span.shrink_to_lo(),
                );
                return Ty::Any;
            }
        };
        if let Some(rt) = declared
            && !assignable(&got, rt, &|a, b| self.is_sub_schema(a, b))
        {
            let msg = format!("expected {}, got {}", self.ty_str(rt), self.ty_str(&got));
            self.err(ErrKind::Type, msg, at.shrink_to_lo());
        }
        got
    }

    fn comp_env(&mut self, env: &Env, clauses: &[ast::CompClause]) -> Env {
        let mut env2 = env.clone();
        for c in clauses {
            let it = self.infer(&env2, &c.iter);
            // a number, a bool or a literal None is never iterable
            let scalar = matches!(
                it,
                Ty::Bool | Ty::BoolLit(_) | Ty::Int | Ty::IntLit(_) | Ty::Float | Ty::FloatLit(_)
            ) || matches!(
                strip_paren(&c.iter).kind,
                ExprKind::None | ExprKind::Undefined
            );
            if scalar {
                let msg = format!("'{}' object is not iterable", self.ty_str(&it));
                self.err(ErrKind::Compile, msg, c.iter.span.shrink_to_lo());
            }
            let tys = loop_var_types(&it, c.targets.len());
            for (i, t) in c.targets.iter().enumerate() {
                let ty = match (t.names.len(), tys.get(i)) {
                    (1, Some(ty)) => ty.clone(),
                    _ => Ty::Any,
                };
                for n in &t.names {
                    env2 = env2.with_local(n.sym, ty.clone());
                }
            }
            for x in &c.ifs {
                self.infer(&env2, x);
            }
        }
        env2
    }

    fn infer_config(&mut self, env: &Env, entries: &[ast::ConfigEntry]) -> Ty {
        let env = &self.config_env(env, entries);
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        let mut known = true;
        for en in entries {
            match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, value, op } => {
                    let kt = match &key.kind {
                        ExprKind::Ident(s) => Ty::StrLit(std::sync::Arc::from(s.as_str())),
                        ExprKind::Str(s) => Ty::StrLit(s.clone()),
                        ExprKind::Selector(_) => {
                            known = false;
                            Ty::Any
                        }
                        _ => {
                            let t = self.infer(env, key);
                            self.check_str_key(&t, key.span);
                            t
                        }
                    };
                    let vt = self.infer(env, value);
                    self.check_insert(*op, &vt, value.span);
                    if kt.is_any() || vt.is_any() {
                        known = false;
                    }
                    ks.push(kt);
                    vs.push(vt);
                }
                // `**d` brings the unpacked dict's key and value types
                ast::ConfigEntryKind::Unpack { value: v, .. } => match self.infer(env, v) {
                    Ty::Dict(kt, vt) => {
                        ks.push((*kt).clone());
                        vs.push((*vt).clone());
                    }
                    _ => known = false,
                },
                ast::ConfigEntryKind::If(ci) => {
                    self.infer(env, &ci.cond);
                    self.infer_config(env, &ci.body);
                    self.infer_config(env, &ci.orelse);
                    known = false;
                }
            }
        }
        if known && !ks.is_empty() {
            let sub = |x, y| self.is_sub_schema(x, y);
            Ty::Dict(Rc::new(sup(ks, &sub)), Rc::new(sup(vs, &sub)))
        } else if entries.is_empty() {
            Ty::Dict(Rc::new(Ty::Any), Rc::new(Ty::Any))
        } else {
            Ty::Any
        }
    }

    /// Is `s` a name where `env` is: a local, an attribute of the schema being checked, a
    /// name of the package, an import of the file (of any file, in the main package) or a
    /// builtin? Unknown where a base schema is unknown or inside a mixin.
    fn name_defined(&mut self, env: &Env, s: Symbol) -> bool {
        if env.lenient
            || env.locals.iter().any(|(n, _)| *n == s)
            || env.keys.iter().any(|(k, _)| *k == s)
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
    fn check_defined(&mut self, env: &Env, s: Symbol, span: Span) {
        if self.name_defined(env, s) {
            return;
        }
        // candidates in upstream's scope order: builtins, package, schema, locals
        let mut cands: indexmap::IndexSet<&str> = BUILTINS.iter().copied().collect();
        cands.extend(self.pkgs[env.pkg].defined.iter().map(|n| n.as_str()));
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
                .filter(|(_, end)| *end <= span.lo)
                .map(|(n, _)| n.as_str()),
        );
        let msg = format!(
            "name '{}' is not defined{}",
            s.as_str(),
            did_you_mean(s.as_str(), cands.iter().copied())
        );
        self.err(ErrKind::Compile, msg, span);
    }

    /// The names a type annotation refers to must be defined (`name 'Foo' is not defined`).
    fn check_type_names(&mut self, env: &Env, t: &ast::Type) {
        use ast::TypeKind;
        match &t.kind {
            TypeKind::Named(id) => {
                let n = id.names[0];
                if id.names.len() > 1 || n.sym.as_str() != "NumberMultiplier" {
                    // a type names a schema or alias of the package scope: upstream offers
                    // no attribute or local as a candidate
                    let penv = Env {
                        schema: None,
                        locals: Rc::new(Vec::new()),
                        keys: Rc::new(Vec::new()),
                        ..env.clone()
                    };
                    self.check_defined(&penv, n.sym, n.span);
                }
            }
            TypeKind::List(Some(e)) => self.check_type_names(env, e),
            TypeKind::Dict(k, v) => {
                for x in [k, v].into_iter().flatten() {
                    self.check_type_names(env, x);
                }
            }
            TypeKind::Union(ts) => {
                for x in ts {
                    self.check_type_names(env, x);
                }
            }
            TypeKind::Function { params, ret } => {
                for x in params.iter().chain(ret.iter().map(|b| &**b)) {
                    self.check_type_names(env, x);
                }
            }
            _ => {}
        }
    }

    /// The keys of a config literal are names in its values (and in nested configs), as
    /// upstream resolves `{name = "a", b = name}`.
    fn config_env(&self, env: &Env, entries: &[ast::ConfigEntry]) -> Env {
        let mut keys = Vec::new();
        collect_keys(entries, &mut keys);
        if keys.is_empty() {
            return env.clone();
        }
        let mut l = (*env.keys).clone();
        l.extend(keys);
        Env {
            keys: Rc::new(l),
            ..env.clone()
        }
    }

    fn decorator_args(&mut self, env: &Env, ds: &[ast::Decorator]) {
        for d in ds {
            // upstream knows `deprecated` and `info` only, whether or not the schema is used
            if let [n] = d.name.names.as_slice()
                && !matches!(n.sym.as_str(), "deprecated" | "info")
            {
                let msg = format!("UnKnown decorator {}", n.sym);
                self.err(ErrKind::Compile, msg, n.span.shrink_to_lo());
                return;
            }
            if let Some(a) = &d.args {
                for x in &a.args {
                    self.infer(env, x);
                }
                for k in &a.keywords {
                    self.infer(env, &k.value);
                }
            }
        }
    }

    fn lookup(&mut self, env: &Env, s: Symbol) -> Ty {
        if let Some((_, t)) = env.locals.iter().rev().find(|(n, _)| *n == s) {
            return t.clone();
        }
        if env.keys.iter().any(|(k, _)| *k == s) {
            return Ty::Any;
        }
        if let Some(id) = env.schema {
            let m = self.members(id);
            if let Some(a) = m.attrs.get(&s) {
                return a.0.clone();
            }
            if m.open {
                return Ty::Any;
            }
        }
        let p = &self.pkgs[env.pkg];
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
        if let Some(t) = p.inferred_ty.get(&s) {
            return t.clone();
        }
        if let Some(&(e, f)) = p.inferred.get(&s) {
            let pkg = env.pkg;
            // `any` while it is being inferred ends self-references
            self.pkgs[pkg].inferred_ty.insert(s, Ty::Any);
            let env2 = Env {
                pkg,
                file: f,
                schema: None,
                locals: Rc::new(Vec::new()),
                keys: Rc::new(Vec::new()),
                lenient: false,
            };
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
        Ty::Any
    }

    /// Upstream's resolver table of unary operators: `+`/`-` take numbers, `~` ints and
    /// bools, `not` anything; the result has the operand's (variable) type, `not 1` included.
    fn unary(&mut self, op: ast::UnaryOp, t: &Ty, span: Span) -> Ty {
        if t.is_any() {
            return Ty::Any;
        }
        let sub = |a: SchemaId, b: SchemaId| self.is_sub_schema(a, b);
        let v = literal_union_widened(t, &sub);
        let (ok, sym) = match op {
            ast::UnaryOp::Pos => (all_of(&v, is_num), "+"),
            ast::UnaryOp::Neg => (all_of(&v, is_num), "-"),
            ast::UnaryOp::Invert => (
                all_of(&v, |t| is_int(t) || matches!(t, Ty::Bool | Ty::BoolLit(_))),
                "~",
            ),
            ast::UnaryOp::Not => (true, "not"),
        };
        if ok {
            return v;
        }
        let msg = format!("bad operand type for unary {sym}: '{}'", self.ty_str(t));
        self.err(ErrKind::Type, msg, span.shrink_to_lo());
        Ty::Any
    }

    /// Upstream's resolver table of binary operators: the result type, or a type error for
    /// operand types that never work together. Unions of literals count as their variable
    /// type (`1 | 2` is `int`); `any` works with everything. Ints divide to an int (the
    /// run-time value is a float; an annotation `int` then fails at run time, as upstream).
    fn binary(&mut self, op: ast::BinOp, l: &Ty, r: &Ty, span: Span) -> Ty {
        use ast::BinOp as B;
        let sub = |a: SchemaId, b: SchemaId| self.is_sub_schema(a, b);
        let (t1, t2) = (
            literal_union_widened(l, &sub),
            literal_union_widened(r, &sub),
        );
        if t1.is_any() || t2.is_any() {
            return Ty::Any;
        }
        // a union counts when all its members do (`int | float` is a number)
        let int = |t: &Ty| all_of(t, is_int);
        let float = |t: &Ty| match t {
            Ty::Union(ts) => ts.iter().any(is_float),
            t => is_float(t),
        };
        let num = |t: &Ty| all_of(t, is_num);
        let str_ = |t: &Ty| all_of(t, |t| matches!(t, Ty::Str | Ty::StrLit(_)));
        let number = |a: &Ty, b: &Ty| {
            if float(a) || float(b) {
                Ty::Float
            } else {
                Ty::Int
            }
        };
        let mul_val = |t: &Ty| {
            let one = |t: &Ty| num(t) || str_(t) || matches!(t, Ty::List(_));
            match t {
                Ty::Union(ts) => ts.iter().all(one),
                t => one(t),
            }
        };
        let zero = |t: &Ty| match t {
            Ty::IntLit(0) => true,
            Ty::FloatLit(f) => *f == 0.0,
            _ => false,
        };
        let items = |a: &Ty, b: &Ty| match (a, b) {
            (Ty::List(x), Ty::List(y)) => {
                Ty::List(Rc::new(Ty::union(vec![(**x).clone(), (**y).clone()])))
            }
            _ => Ty::Any,
        };
        let result = match op {
            B::Add if num(&t1) && num(&t2) => Some(number(&t1, &t2)),
            B::Add if str_(&t1) && str_(&t2) => Some(Ty::Str),
            B::Add if matches!((&t1, &t2), (Ty::List(_), Ty::List(_))) => Some(items(&t1, &t2)),
            B::Sub | B::Pow if num(&t1) && num(&t2) => Some(number(&t1, &t2)),
            B::Mul if num(&t1) && num(&t2) => Some(number(&t1, &t2)),
            B::Mul if int(&t1) && mul_val(&t2) => Some(t2.clone()),
            B::Mul if mul_val(&t1) && int(&t2) => Some(t1.clone()),
            B::Div | B::FloorDiv | B::Mod if num(&t1) && num(&t2) => {
                if zero(&t2) {
                    self.err(
                        ErrKind::Type,
                        "integer division or modulo by zero".to_string(),
                        span.shrink_to_lo(),
                    );
                }
                Some(if op == B::Mod {
                    Ty::Int
                } else {
                    number(&t1, &t2)
                })
            }
            B::Shl | B::Shr | B::BitXor | B::BitAnd if int(&t1) && int(&t2) => Some(Ty::Int),
            B::BitOr if int(&t1) && int(&t2) => Some(Ty::Int),
            B::BitOr if matches!(t1, Ty::None) => Some(t2.clone()),
            B::BitOr if matches!(t2, Ty::None) => Some(t1.clone()),
            B::BitOr if matches!((&t1, &t2), (Ty::List(_), Ty::List(_))) => Some(items(&t1, &t2)),
            B::BitOr => match (&t1, &t2) {
                (Ty::Dict(k1, v1), Ty::Dict(k2, v2)) => Some(Ty::Dict(
                    Rc::new(Ty::union(vec![(**k1).clone(), (**k2).clone()])),
                    Rc::new(Ty::union(vec![(**v1).clone(), (**v2).clone()])),
                )),
                (Ty::Schema(_), Ty::Schema(_) | Ty::Dict(..)) => Some(t1.clone()),
                _ => None,
            },
            B::And => Some(Ty::Bool),
            B::Or => Some(Ty::union(vec![t1.clone(), t2.clone()])),
            _ => None,
        };
        // what a union became: upstream's `sup` of the members
        let sub = |x, y| self.is_sub_schema(x, y);
        let result = result.map(|t| match t {
            Ty::Union(ts) => sup(ts.to_vec(), &sub),
            Ty::List(e) if matches!(*e, Ty::Union(_)) => {
                Ty::List(Rc::new(sup(vec![(*e).clone()], &sub)))
            }
            Ty::Dict(k, v) if matches!(*k, Ty::Union(_)) || matches!(*v, Ty::Union(_)) => Ty::Dict(
                Rc::new(sup(vec![(*k).clone()], &sub)),
                Rc::new(sup(vec![(*v).clone()], &sub)),
            ),
            t => t,
        });
        match result {
            Some(t) => t,
            None => {
                let msg = format!(
                    "unsupported operand type(s) for {}: '{}' and '{}'",
                    op.as_str(),
                    self.ty_str(l),
                    self.ty_str(r)
                );
                self.err(ErrKind::Type, msg, span.shrink_to_lo());
                Ty::Any
            }
        }
    }
}

fn is_int(t: &Ty) -> bool {
    matches!(t, Ty::Int | Ty::IntLit(_))
}

fn is_float(t: &Ty) -> bool {
    matches!(t, Ty::Float | Ty::FloatLit(_))
}

fn is_num(t: &Ty) -> bool {
    is_int(t) || is_float(t)
}

/// Whether a value of type `t` may index a list or string statically: an int or bool, or a type
/// not known here (None is left to run time, as upstream's).
fn int_index(t: &Ty) -> bool {
    match t {
        Ty::Any | Ty::None | Ty::SchemaType(_) => true,
        Ty::Union(_) => false,
        t => t.kind().is_none() || matches!(t, Ty::Int | Ty::IntLit(_) | Ty::Bool | Ty::BoolLit(_)),
    }
}

/// Whether upstream's resolver takes `l op r` (operands already widened):
/// - ordering: numbers and bools only; strings, lists, None and configs are rejected when
///   their types are known (a union is known when each member is);
/// - `in`: one iterable kind on the right (a union of two iterables is not one);
/// - `==`/`!=`: anything against `any` or None; primitives (unions of them too), two lists,
///   or two configs (dicts, schema instances, schemas);
/// - `is`: anything against `any` or None; numbers and bools only.
fn compare_allowed(op: ast::CmpOp, l: &Ty, r: &Ty) -> bool {
    use ast::CmpOp as C;
    let num = |t: &Ty| all_of(t, |t| matches!(t.kind(), Some(Kind::Num | Kind::Bool)));
    match op {
        C::Lt | C::LtE | C::Gt | C::GtE => {
            let known = |t: &Ty| all_of(t, |t| matches!(t, Ty::None) || t.kind().is_some());
            !(l.is_mapping() || r.is_mapping() || (known(l) && known(r) && !(num(l) && num(r))))
        }
        C::In | C::NotIn => {
            r.is_any()
                || matches!(r, Ty::SchemaType(_))
                || matches!(
                    r.kind(),
                    Some(Kind::Str | Kind::List | Kind::Dict | Kind::Schema)
                )
        }
        C::Eq | C::NotEq | C::Is | C::IsNot => {
            let free = |t: &Ty| matches!(t, Ty::Any | Ty::None);
            // only types whose rules are known here are judged
            let judged = |t: &Ty| {
                all_of(t, |t| {
                    t.kind().is_some() || matches!(t, Ty::Func(_) | Ty::SchemaType(_))
                })
            };
            if free(l) || free(r) || !judged(l) || !judged(r) {
                return true;
            }
            if matches!(op, C::Is | C::IsNot) {
                return num(l) && num(r);
            }
            let prim = |t: &Ty| {
                all_of(t, |t| {
                    matches!(t.kind(), Some(Kind::Num | Kind::Bool | Kind::Str))
                })
            };
            let config = |t: &Ty| matches!(t, Ty::Dict(..) | Ty::Schema(_) | Ty::SchemaType(_));
            (prim(l) && prim(r))
                || matches!((l, r), (Ty::List(_), Ty::List(_)))
                || (config(l) && config(r))
        }
    }
}

/// `f` of a type, or of every member of a union.
fn all_of(t: &Ty, f: impl Fn(&Ty) -> bool) -> bool {
    match t {
        Ty::Union(ts) => ts.iter().all(f),
        t => f(t),
    }
}

/// Whether `a` is a subtype of `b` for upstream's `sup` (only `any` is above everything).
fn subsumed(a: &Ty, b: &Ty, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> bool {
    match (a, b) {
        (_, Ty::Any) => true,
        (Ty::Any, _) => false,
        (Ty::Union(xs), _) => xs.iter().all(|x| subsumed(x, b, sub)),
        (_, Ty::Union(ys)) => ys.iter().any(|y| subsumed(a, y, sub)),
        (Ty::IntLit(_), Ty::Int)
        | (Ty::FloatLit(_), Ty::Float)
        | (Ty::StrLit(_), Ty::Str)
        | (Ty::BoolLit(_), Ty::Bool) => true,
        (Ty::List(x), Ty::List(y)) => subsumed(x, y, sub),
        (Ty::Dict(k1, v1), Ty::Dict(k2, v2)) => subsumed(k1, k2, sub) && subsumed(v1, v2, sub),
        (Ty::Schema(x), Ty::Schema(y)) => sub(*x, *y),
        _ => a == b,
    }
}

/// Upstream's `sup` of the types of an `if` expression's branches, an `or`, or a literal's
/// items: members flattened and deduplicated in order, then a member another one subsumes
/// dropped (None is below everything, an int below a float, a literal below its type, a
/// schema below its base), removed the way upstream's ordered set removes (swapping the last
/// member in), so the order of what is left is upstream's.
fn sup(ts: Vec<Ty>, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> Ty {
    let t = Ty::union(ts);
    let Ty::Union(members) = t else {
        return t;
    };
    let mut set: Vec<Ty> = members.to_vec();
    // pairwise: a literal of thousands of distinct records would be quadratic, and such a
    // union only ever shows in an error message
    if set.len() > 256 {
        set.retain(|t| !matches!(t, Ty::None));
        return Ty::Union(set.into());
    }
    let mut remove: Vec<Ty> = Vec::new();
    for i in 0..set.len() {
        for j in i + 1..set.len() {
            let (a, b) = (&set[i], &set[j]);
            if sup_subsume(a, b, sub) {
                if !remove.contains(a) {
                    remove.push(a.clone());
                }
            } else if sup_subsume(b, a, sub) && !remove.contains(b) {
                remove.push(b.clone());
            }
        }
    }
    for r in remove {
        if let Some(i) = set.iter().position(|x| *x == r) {
            set.swap_remove(i);
        }
    }
    match set.len() {
        0 => Ty::Any,
        1 => set.pop().unwrap_or(Ty::Any),
        _ => Ty::Union(set.into()),
    }
}

/// Upstream's `subsume` as its `sup` uses it.
fn sup_subsume(a: &Ty, b: &Ty, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> bool {
    match (a, b) {
        (_, Ty::Any) | (Ty::None, _) => true,
        (Ty::Union(xs), _) => xs.iter().all(|x| sup_subsume(x, b, sub)),
        (_, Ty::Union(ys)) => ys.iter().any(|y| sup_subsume(a, y, sub)),
        (Ty::Schema(x), Ty::Schema(y)) => sub(*x, *y),
        (Ty::List(x), Ty::List(y)) => sup_subsume(x, y, sub),
        (Ty::Dict(k1, v1), Ty::Dict(k2, v2)) => {
            sup_subsume(k1, k2, sub) && sup_subsume(v1, v2, sub)
        }
        (Ty::Int | Ty::IntLit(_), Ty::Float | Ty::FloatLit(_))
        | (Ty::IntLit(_), Ty::Int)
        | (Ty::FloatLit(_), Ty::Float)
        | (Ty::StrLit(_), Ty::Str)
        | (Ty::BoolLit(_), Ty::Bool) => true,
        _ => a == b,
    }
}

/// A union of literal types as its variable type (`1 | 2` is `int`), as upstream's resolver
/// reads operands: members widened, and a member another one subsumes dropped (`[{str:any}]
/// | [any]` is `[any]`); other types as they are.
fn literal_union_widened(t: &Ty, sub: &dyn Fn(SchemaId, SchemaId) -> bool) -> Ty {
    let Ty::Union(ts) = t else {
        return t.clone();
    };
    let Ty::Union(ws) = Ty::union(ts.iter().map(Ty::variable_type).collect()) else {
        return Ty::union(ts.iter().map(Ty::variable_type).collect());
    };
    let keep: Vec<Ty> = ws
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            !ws.iter()
                .enumerate()
                .any(|(j, b)| j != *i && subsumed(a, b, sub) && !subsumed(b, a, sub))
        })
        .map(|(_, a)| a.clone())
        .collect();
    Ty::union(keep)
}

impl Members {
    /// Declare an attribute (a later declaration in the same body wins).
    fn set(&mut self, s: Symbol, t: Ty, sp: Span) {
        if !self.attrs.contains_key(&s) {
            self.order.push(s);
            if !self.names.contains(&s) {
                self.in_scope.push(s);
            }
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

fn strip_paren(e: &Expr) -> &Expr {
    match &e.kind {
        ExprKind::Paren(x) => strip_paren(x),
        _ => e,
    }
}

/// `a`, `"a"` or `a.b.c` as a config key path.
fn key_path(key: &Expr) -> Option<Vec<(Symbol, Span)>> {
    match &key.kind {
        ExprKind::Ident(s) => Some(vec![(*s, key.span)]),
        ExprKind::Str(s) => Some(vec![(Symbol::intern(s), key.span)]),
        ExprKind::Selector(x) if !x.optional => {
            let mut p = key_path(&x.value)?;
            p.push((x.attr.sym, x.attr.span));
            Some(p)
        }
        _ => None,
    }
}

/// Names assigned anywhere in a block (lambda bodies make them locals).
fn collect_assigned(body: &[Stmt], out: &mut Vec<Symbol>) {
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

/// Public package-level names a statement assigns with `=` (through `if` bodies).
fn public_assignments(s: &Stmt, out: &mut Vec<(Symbol, Span)>) {
    match &s.kind {
        StmtKind::Assign(a) => out.extend(
            a.targets
                .iter()
                .filter(|t| t.path.is_empty() && !t.name.sym.as_str().starts_with('_'))
                .map(|t| (t.name.sym, t.span)),
        ),
        StmtKind::If(i) => {
            for st in i.body.iter().chain(&i.orelse) {
                public_assignments(st, out);
            }
        }
        _ => {}
    }
}

/// The names a config literal's keys bind (`a`, `"a"`, the root of `a.b` and of `a[0]`).
fn collect_keys(entries: &[ast::ConfigEntry], out: &mut Vec<(Symbol, u32)>) {
    for en in entries {
        match &en.kind {
            ast::ConfigEntryKind::KeyValue { key, .. } => {
                let mut k = key;
                loop {
                    match &k.kind {
                        ExprKind::Selector(x) => k = &x.value,
                        ExprKind::Subscript { value, .. } => k = value,
                        _ => break,
                    }
                }
                match &k.kind {
                    ExprKind::Ident(s) => out.push((*s, en.span().hi)),
                    ExprKind::Str(s) => out.push((Symbol::intern(s), en.span().hi)),
                    _ => {}
                }
            }
            ast::ConfigEntryKind::If(ci) => {
                let from = out.len();
                collect_keys(&ci.body, out);
                collect_keys(&ci.orelse, out);
                // keys set under an `if` are never offered as "did you mean" (upstream)
                for k in &mut out[from..] {
                    k.1 = u32::MAX;
                }
            }
            ast::ConfigEntryKind::Unpack { .. } => {}
        }
    }
}

/// Names a block defines at its level (assignments, declarations, schemas, rules, aliases;
/// through `if` bodies); an augmented assignment defines nothing.
fn collect_defined(body: &[Stmt], out: &mut Vec<Symbol>) {
    for s in body {
        match &s.kind {
            // `x += v` does not define `x` (upstream: "name 'x' is not defined")
            StmtKind::Assign(a) => out.extend(a.targets.iter().map(|t| t.name.sym)),
            StmtKind::Unification(u) => out.push(u.target.sym),
            StmtKind::SchemaAttr(a) => out.push(a.name.sym),
            StmtKind::Schema(st) => out.push(st.name.sym),
            StmtKind::Rule(r) => out.push(r.name.sym),
            StmtKind::TypeAlias(t) => out.push(t.name.sym),
            StmtKind::If(i) => {
                collect_defined(&i.body, out);
                collect_defined(&i.orelse, out);
            }
            _ => {}
        }
    }
}

/// Upstream's builtin functions, in the order of its builtin scope (the order of its "did you
/// mean" candidates).
const BUILTINS: &[&str] = &[
    "option",
    "print",
    "multiplyof",
    "isunique",
    "len",
    "abs",
    "all_true",
    "any_true",
    "hex",
    "bin",
    "oct",
    "ord",
    "sorted",
    "range",
    "max",
    "min",
    "sum",
    "pow",
    "round",
    "zip",
    "int",
    "float",
    "bool",
    "str",
    "list",
    "dict",
    "typeof",
];

/// `a.b.c` as text, when `e` is a chain of names.
fn dotted(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Ident(s) => Some(s.as_str().to_string()),
        ExprKind::Selector(x) if !x.optional => {
            Some(format!("{}.{}", dotted(&x.value)?, x.attr.sym.as_str()))
        }
        _ => None,
    }
}

/// Positional arity (required, most) of upstream's builtin functions, where measured against
/// it (`None`: not bounded here, because upstream checks argument types first).
fn builtin_fn_arity(name: &str) -> Option<(usize, Option<usize>)> {
    Some(match name {
        "len" | "abs" | "float" | "hex" | "bin" | "oct" => (1, Some(1)),
        "int" | "round" => (1, Some(2)),
        "str" | "list" => (0, Some(1)),
        "pow" => (2, Some(3)),
        "multiplyof" => (2, Some(2)),
        "sorted" | "typeof" | "option" | "ord" | "isunique" | "all_true" | "any_true" | "sum" => {
            (1, None)
        }
        _ => return None,
    })
}

/// The parameters (name, type) of upstream's builtin functions with a fixed parameter list, as
/// its resolver declares them (`print`, `max`, `min` and `zip` are variadic: unchecked).
fn builtin_fn_params(name: &str) -> Option<Vec<(&'static str, Ty)>> {
    let sig: &[(&str, &str)] = match name {
        "option" => &[
            ("key", "str"),
            ("type", "str"),
            ("required", "bool"),
            ("default", "any"),
            ("help", "str"),
        ],
        "multiplyof" => &[("a", "int"), ("b", "int")],
        "isunique" | "all_true" | "any_true" => &[("inval", "[any]")],
        "len" => &[("inval", "str | {any:any} | [any]")],
        "abs" => &[("inval", "any")],
        "hex" | "bin" | "oct" => &[("number", "int")],
        "ord" => &[("c", "str")],
        "sorted" => &[("inval", "str | {any:any} | [any]"), ("reverse", "bool")],
        "range" => &[("start", "int"), ("stop", "int"), ("step", "int")],
        "sum" => &[("iterable", "[any]"), ("start", "any")],
        "pow" => &[("x", "num"), ("y", "num"), ("z", "num")],
        "round" => &[("number", "num"), ("ndigits", "int")],
        "int" => &[("number", "any"), ("base", "int")],
        "float" => &[("number", "any")],
        "bool" | "str" | "list" | "dict" => &[("x", "any")],
        "typeof" => &[("x", "any"), ("full_name", "bool")],
        _ => return None,
    };
    Some(
        sig.iter()
            .map(|(n, t)| (*n, sysmod::parse_ty(&t.replace(' ', ""))))
            .collect(),
    )
}

/// Positional arity (required, most) of upstream's string methods.
fn str_method_arity(name: &str) -> Option<(usize, Option<usize>)> {
    Some(match name {
        "upper" | "lower" | "capitalize" | "title" | "isalnum" | "isalpha" | "isdigit"
        | "islower" | "isupper" | "isspace" | "istitle" | "chars" => (0, Some(0)),
        "count" | "endswith" | "startswith" | "find" | "index" | "rfind" | "rindex" => (1, Some(3)),
        "join" | "removeprefix" | "removesuffix" => (1, Some(1)),
        "strip" | "lstrip" | "rstrip" | "splitlines" => (0, Some(1)),
        "split" | "rsplit" => (0, Some(2)),
        "replace" => (2, Some(3)),
        _ => return None,
    })
}

/// The loop variables' types where the iterated value's type is known, as variable types
/// (upstream: `for x in [1]` binds an `int`).
fn loop_var_types(it: &Ty, n: usize) -> Vec<Ty> {
    match (it, n) {
        (Ty::List(e), 1) => vec![e.variable_type()],
        (Ty::List(e), 2) => vec![Ty::Int, e.variable_type()],
        (Ty::Dict(k, _), 1) => vec![k.variable_type()],
        (Ty::Dict(k, v), 2) => vec![k.variable_type(), v.variable_type()],
        (Ty::Str | Ty::StrLit(_), 1) => vec![Ty::Str],
        (Ty::Str | Ty::StrLit(_), 2) => vec![Ty::Int, Ty::Str],
        _ => Vec::new(),
    }
}

/// Upstream's parameter types of the string methods that take arguments (checked positionally).
fn str_method_params(name: &str) -> Option<Vec<(&'static str, Ty)>> {
    let s = || Ty::Str;
    let i = || Ty::Int;
    Some(match name {
        "count" | "find" | "index" | "rfind" | "rindex" => {
            vec![("sub", s()), ("start", i()), ("end", i())]
        }
        "endswith" | "startswith" => vec![("val", s()), ("start", i()), ("end", i())],
        "removeprefix" => vec![("prefix", s())],
        "removesuffix" => vec![("suffix", s())],
        "strip" | "lstrip" | "rstrip" => vec![("chars", s())],
        "splitlines" => vec![("keepends", Ty::Bool)],
        "split" | "rsplit" => vec![("sep", s()), ("maxsplit", i())],
        "replace" => vec![("old", s()), ("new", s()), ("count", i())],
        "join" => vec![("iter", Ty::List(Rc::new(Ty::Any)))],
        _ => return None,
    })
}

/// The type a builtin function's call has (where it does not depend on the arguments).
fn builtin_fn_ret(name: &str) -> Option<Ty> {
    Some(match name {
        "len" | "int" | "ord" => Ty::Int,
        "float" => Ty::Float,
        "str" | "hex" | "bin" | "oct" | "typeof" => Ty::Str,
        "isunique" | "all_true" | "any_true" | "multiplyof" | "bool" => Ty::Bool,
        "round" | "pow" => Ty::union(vec![Ty::Int, Ty::Float]),
        "range" => Ty::List(Rc::new(Ty::Int)),
        "sorted" | "zip" | "list" => Ty::List(Rc::new(Ty::Any)),
        "dict" => Ty::Dict(Rc::new(Ty::Any), Rc::new(Ty::Any)),
        _ => return None,
    })
}

/// The type a string method's call has.
fn str_method_ret(name: &str) -> Option<Ty> {
    Some(match name {
        "upper" | "lower" | "capitalize" | "title" | "format" | "join" | "removeprefix"
        | "removesuffix" | "strip" | "lstrip" | "rstrip" | "replace" => Ty::Str,
        "isalnum" | "isalpha" | "isdigit" | "islower" | "isupper" | "isspace" | "istitle"
        | "endswith" | "startswith" => Ty::Bool,
        "count" | "find" | "index" | "rfind" | "rindex" => Ty::Int,
        "split" | "rsplit" | "splitlines" => Ty::List(Rc::new(Ty::Str)),
        _ => return None,
    })
}

/// Upstream's "did you mean" list (the `suggestions` crate it uses), as it prints it.
fn did_you_mean<'s>(name: &str, cands: impl IntoIterator<Item = &'s str>) -> String {
    let s = suggestions::provide_suggestions(name, cands);
    if s.is_empty() {
        String::new()
    } else {
        format!(", did you mean '{s:?}'?")
    }
}

/// Upstream's "did you mean" for a keyword argument: the suggestions joined by "or".
fn did_you_mean_or<'s>(name: &str, cands: impl IntoIterator<Item = &'s str>) -> String {
    let s = suggestions::provide_suggestions(name, cands);
    if s.is_empty() {
        String::new()
    } else {
        format!(", did you mean '{}'?", s.join(" or "))
    }
}

/// Upstream's "did you mean" closeness: a small edit distance relative to the length.
fn similar(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    let d = prev[b.len()];
    d > 0 && d * 3 <= a.len().max(b.len())
}
