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
//! Where things are: this file holds the entry points, the checker's state and the package
//! order; `resolve.rs` names, imports, annotations and schema members; `stmt.rs` statements
//! and schema bodies; `checks.rs` `check:` blocks; `fit.rs` values against the type they must
//! have (assignments, config entries), `schema_config.rs` a config literal against its
//! schema, `whole.rs` the values checked once more whole; `infer.rs`
//! the type of an expression; `calls.rs` builtin, method, lambda and schema calls; `ops.rs`
//! operators and joins of types; `ty.rs` the type model and assignability; `sysmod.rs` the
//! system modules' signatures.
//!
//! Cost: one walk over every statement and expression, with schema member tables built lazily
//! and cached per schema; nothing is allocated for expressions that need no check.

mod calls;
mod checks;
mod config;
mod declare;
mod fit;
mod infer;
mod ops;
mod resolve;
mod schema_config;
mod schema_type;
mod stmt;
mod sysmod;
mod targets;
mod ty;
mod whole;

use std::cell::OnceCell;
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::ast::{self, Expr, ExprKind, FileId, Span, Stmt, StmtKind, Symbol};
use crate::eval::EvalError;
use crate::parser::loader::{ImportTarget, Program};
use crate::value::ErrKind;

use declare::{collect_annotated, collect_assigned};
use ops::*;
pub use ty::Ty;
use ty::{Kind, SchemaId, assignable, field_type_fits};

/// Check `program`; the first error found is returned, every later one with it (each
/// package's in source order, the packages in checking order: upstream's resolver reports
/// them all).
pub(crate) fn check_program(program: &Program) -> Result<Checked, EvalError> {
    let mut c = Checker::new(program);
    c.check_import_cycles()?;
    let mut all = Vec::new();
    for p in c.check_order() {
        c.check_pkg(p);
        all.append(&mut c.errors);
    }
    let mut errors = all.into_iter();
    match errors.next() {
        Some(mut first) => {
            let rest: Vec<EvalError> = errors.collect();
            first.also = (!rest.is_empty()).then(|| Box::new(rest));
            Err(first)
        }
        None => Ok(Checked {
            unchecked_configs: c.unchecked_configs,
        }),
    }
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
    /// Every name the body declares or assigns, in order (the candidates of upstream's "did
    /// you mean"; inherited attributes are not among them).
    in_scope: Vec<Symbol>,
    parents: Vec<SchemaId>,
    /// Attributes the schema's own body declares: the first declaration gives the type (and
    /// the place a note names), as upstream's resolver keeps it.
    declared: rustc_hash::FxHashSet<Symbol>,
}

struct PkgInfo<'a> {
    path: &'a str,
    modules: &'a [std::sync::Arc<ast::Module>],
    schemas: FxHashMap<Symbol, SchemaId>,
    aliases: FxHashMap<Symbol, (&'a ast::Type, FileId)>,
    /// Annotated package-level variables.
    globals: FxHashMap<Symbol, (&'a ast::Type, FileId)>,
    /// Rules: a config may set only the attributes of the protocol a rule is for.
    rules: FxHashMap<Symbol, (&'a ast::RuleStmt, FileId)>,
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
    /// A private name annotated more than once with other types: the type it ends with (its
    /// last annotation but `any`) and where it is assigned last (see `check_private_annotations`).
    private_final: FxHashMap<Symbol, (Ty, Span)>,
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
    /// Package-level schema and rule definitions a later one of the same name replaces.
    overridden: rustc_hash::FxHashSet<Span>,
    /// Schemas whose member tables are being built, and whether a build met one of them.
    members_building: rustc_hash::FxHashSet<SchemaId>,
    members_cycle_hit: bool,
    /// The config `if` entry about to be checked is an `elif`.
    config_elif: bool,
    /// Where upstream's resolver last stood: the last statement begun or name resolved.
    resolved_at: Span,
    /// The declared return type of the lambda whose body is being checked.
    lambda_ret_at: Option<Span>,
    alias_depth: u32,
    /// Start of the package-level statement being checked: where upstream reports a lambda
    /// whose last statement is an assignment of the wrong type.
    stmt_start: Option<Span>,
    /// The type of the receiver of the selector last inferred (`x` of `x.attr`), by the
    /// receiver's span: a method call's receiver type without inferring it again.
    last_receiver: Option<(Span, Ty)>,
    /// Lambda bodies being checked: their assignments bind locals, not package names.
    lambda_depth: u32,
    /// The names the enclosing lambda bodies assign anywhere: a lambda written in one sees
    /// them all (itself, for recursion, and names assigned after it), as upstream's resolver.
    lambda_names: Vec<Symbol>,
    /// The package-level names assigned by the statements before the one being checked
    /// (see `check_immutable`): a lambda's `x op= v` on one of them is upstream's
    /// ImmutableError.
    assigned: FxHashMap<Symbol, Span>,
    /// The type a schema's unannotated attribute got from its first assignment in the body.
    schema_assigned: FxHashMap<(SchemaId, Symbol), Ty>,
    /// The package whose statements are being checked in order: there, a package-level name
    /// whose assignment is not reached yet is `any`, as in upstream's resolver.
    checking: Option<usize>,
    /// The package-level names the statements checked so far (in the package being checked)
    /// define: upstream offers a variable as "did you mean" only once it is in scope.
    reached: rustc_hash::FxHashSet<Symbol>,
    /// In upstream's first scan of the package's variables (see `declare_globals`): only the
    /// variables in `reached` are in scope for "did you mean".
    early_scope: bool,
    /// Type aliases are no "did you mean" candidates (upstream's first look at an alias).
    aliases_unoffered: bool,
    /// The annotations of private names seen by the declaration scan so far (see
    /// `scan_private_assignment`).
    private_scan: declare::PrivateScan,
    /// The values of config keys (by span) whose types later entries may need, and the types
    /// inferred for them (see `lookup_at`).
    key_want: rustc_hash::FxHashSet<Span>,
    key_tys: FxHashMap<Span, Ty>,
    /// How deep in `if` statements of a schema body the statement being checked is.
    schema_if_depth: u32,
    /// Attributes declared inside `if` statements of a schema body: the first type and where.
    schema_nested: FxHashMap<(SchemaId, Symbol), (Ty, Span)>,
    /// A config literal is being checked against the schemas of a union that also holds other
    /// types: upstream names the schemas as a union ("to 'schema S'").
    mixed_union: bool,
    /// Schemas whose inheritance circle was reported.
    cycle_reported: rustc_hash::FxHashSet<SchemaId>,
    /// Schema expressions whose config and arguments were not checked (see [`Checked`]).
    unchecked_configs: rustc_hash::FxHashSet<Span>,
}

/// What the evaluator learns from the check of a program that passed it.
#[derive(Default)]
pub(crate) struct Checked {
    /// Schema expressions on a name of type `any` or `None` (`t {a = 1}` in a lambda over a
    /// schema `t`), by span: upstream's resolver does not walk their config, so a key the
    /// schema does not declare is a run-time error there, not a compile error.
    pub(crate) unchecked_configs: rustc_hash::FxHashSet<Span>,
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
    /// The locals that are loop variables: as a config key such a name is its value.
    loop_vars: Rc<Vec<Symbol>>,
    /// Keys of the enclosing config literals, with where each entry ends: names in their
    /// values; keys of the entries before a name are its "did you mean" candidates, as
    /// upstream's (not the key of the entry the name is in).
    keys: Rc<Vec<(Symbol, u32, Option<KeyVal>)>>,
    /// Inside a mixin: its names may be its host's attributes (upstream does not resolve
    /// them), so unknown names are not errors.
    lenient: bool,
}

impl Env {
    /// A package-level statement of `file`.
    fn top(pkg: usize, file: FileId) -> Env {
        Env {
            pkg,
            file,
            schema: None,
            locals: Rc::new(Vec::new()),
            loop_vars: Rc::new(Vec::new()),
            keys: Rc::new(Vec::new()),
            lenient: false,
        }
    }

    /// The package's own scope, where a type's names are looked up: no attributes, locals
    /// or config keys.
    fn package_scope(&self) -> Env {
        Env {
            schema: None,
            locals: Rc::new(Vec::new()),
            loop_vars: Rc::new(Vec::new()),
            keys: Rc::new(Vec::new()),
            ..self.clone()
        }
    }

    fn with_local(&self, s: Symbol, t: Ty) -> Env {
        let mut l = (*self.locals).clone();
        l.push((s, t));
        let loop_vars = match self.loop_vars.contains(&s) {
            true => Rc::new(self.loop_vars.iter().copied().filter(|v| *v != s).collect()),
            false => self.loop_vars.clone(),
        };
        Env {
            locals: Rc::new(l),
            loop_vars,
            ..self.clone()
        }
    }

    /// A comprehension's or quantifier's loop variable.
    fn with_loop_var(&self, s: Symbol, t: Ty) -> Env {
        let mut env = self.with_local(s, t);
        let mut v = (*env.loop_vars).clone();
        v.push(s);
        env.loop_vars = Rc::new(v);
        env
    }

    /// The type of loop variable `s` in scope, if it is one.
    fn loop_var_ty(&self, s: Symbol) -> Option<Ty> {
        if !self.loop_vars.contains(&s) {
            return None;
        }
        self.locals
            .iter()
            .rev()
            .find(|(n, _)| *n == s)
            .map(|(_, t)| t.clone())
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
            overridden: Default::default(),
            unchecked_configs: Default::default(),
            members_building: Default::default(),
            members_cycle_hit: false,
            config_elif: false,
            resolved_at: Span::default(),
            lambda_ret_at: None,
            alias_depth: 0,
            stmt_start: None,
            last_receiver: None,
            lambda_depth: 0,
            lambda_names: Vec::new(),
            assigned: FxHashMap::default(),
            schema_assigned: FxHashMap::default(),
            checking: None,
            reached: Default::default(),
            early_scope: false,
            aliases_unoffered: false,
            private_scan: declare::PrivateScan::default(),
            key_want: Default::default(),
            key_tys: FxHashMap::default(),
            schema_if_depth: 0,
            schema_nested: FxHashMap::default(),
            mixed_union: false,
            cycle_reported: Default::default(),
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
                rules: FxHashMap::default(),
                inferred: FxHashMap::default(),
                inferred_ty: FxHashMap::default(),
                unified: FxHashMap::default(),
                assigned_ty: FxHashMap::default(),
                private_final: FxHashMap::default(),
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
                            // a name defined twice names its last definition
                            info.schemas.insert(st.name.sym, id);
                        }
                        StmtKind::TypeAlias(t) => {
                            info.aliases.insert(t.name.sym, (&t.ty, m.file));
                        }
                        StmtKind::Rule(r) => {
                            info.rules.insert(r.name.sym, (r, m.file));
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
                            // an annotation under an `if` types the name everywhere too
                            // (upstream's first scan goes through `if` bodies)
                            collect_annotated(&i.body, m.file, &mut info.globals);
                            collect_annotated(&i.orelse, m.file, &mut info.globals);
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
                let msg = format!(
                    "There is a circular reference between modules {}",
                    names.join(", ")
                );
                // (at the import of each package of the cycle, in its order)
                let mut errors = cycle.iter().enumerate().map(|(k, &from)| {
                    let next = cycle[(k + 1) % cycle.len()];
                    let at = edges[from]
                        .iter()
                        .find(|(t, _)| *t == next)
                        .map_or(sp, |(_, s)| *s);
                    EvalError::new(ErrKind::Compile, msg.clone(), Some(at.shrink_to_lo()))
                });
                let mut first = errors.next().expect("a cycle has a package");
                let rest: Vec<EvalError> = errors.collect();
                first.also = (!rest.is_empty()).then(|| Box::new(rest));
                return Err(first);
            }
        }
        Ok(())
    }

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
        // upstream's resolver leaves an empty key to the run time
        ExprKind::Str(s) if !s.is_empty() => Some(vec![(Symbol::intern(s), key.span)]),
        // (a string before a dot, `"a".b`, makes the key an expression: an attribute of a
        // string, as upstream reads it)
        _ => key.name_path(),
    }
}

/// The expression `a.b.c` (a config entry's key, a schema expression's name) from its names.
fn path_expr(path: &[(Symbol, Span)]) -> Option<Expr> {
    let (first, rest) = path.split_first()?;
    let mut key = Expr {
        kind: ExprKind::Ident(first.0),
        span: first.1,
    };
    for &(sym, span) in rest {
        key = Expr {
            span: key.span.to(span),
            kind: ExprKind::Selector(Box::new(ast::SelectorExpr {
                value: key,
                attr: ast::Name { sym, span },
                optional: false,
            })),
        };
    }
    Some(key)
}

/// Public package-level names a statement declares by unification (`x: S {}`, through `if`
/// bodies), with where each statement starts.
fn public_unifications(s: &Stmt, out: &mut Vec<(Symbol, Span, Option<Symbol>)>) {
    match &s.kind {
        StmtKind::Unification(u) if !u.target.sym.as_str().starts_with('_') => {
            let schema = match &u.value.kind {
                ExprKind::Schema(se) => se.name.names.first().map(|n| n.sym),
                _ => None,
            };
            out.push((u.target.sym, s.span, schema))
        }
        StmtKind::If(i) => {
            for st in i.body.iter().chain(&i.orelse) {
                public_unifications(st, out);
            }
        }
        _ => {}
    }
}

/// What a config literal's key is bound to in the values after its entry: the value (by its
/// span, whose type the checker records when it infers it) and, for `a.b.c = v`, the names
/// after the root (`a` is `{b = {c = v}}`, as upstream's parser rewrites such keys).
#[derive(Clone)]
struct KeyVal {
    value: Span,
    // boxed, not shared: nearly every path is empty, and an empty box allocates nothing
    path: Box<[Symbol]>,
}

/// The names a config literal's keys bind (`a`, `"a"`, the root of `a.b` and of `a[0]`).
fn collect_keys(entries: &[ast::ConfigEntry], out: &mut Vec<(Symbol, u32, Option<KeyVal>)>) {
    for en in entries {
        match &en.kind {
            ast::ConfigEntryKind::KeyValue { key, value, .. } => {
                let mut k = key;
                let mut path = Vec::new();
                let mut typed = true;
                loop {
                    match &k.kind {
                        ExprKind::Selector(x) => {
                            path.push(x.attr.sym);
                            k = &x.value;
                        }
                        ExprKind::Subscript { value, .. } => {
                            typed = false;
                            k = value;
                        }
                        _ => break,
                    }
                }
                path.reverse();
                let val = typed.then(|| KeyVal {
                    value: value.span,
                    path: path.into(),
                });
                match &k.kind {
                    ExprKind::Ident(s) => out.push((*s, en.span().hi, val)),
                    ExprKind::Str(s) => out.push((Symbol::intern(s), en.span().hi, val)),
                    _ => {}
                }
            }
            // keys set under an `if` are names only inside its body, after their entry
            // (upstream's config scope): not in the condition, the `else` or the entries
            // around it
            ast::ConfigEntryKind::If(_) => {}
            ast::ConfigEntryKind::Unpack { .. } => {}
        }
    }
}

/// Names a block defines at its level (assignments, declarations, schemas, rules, aliases;
/// through `if` bodies); an augmented assignment defines nothing.
fn collect_defined(body: &[Stmt], out: &mut Vec<Symbol>) {
    collect_defined_in(body, out, false);
}

/// (`nested`: in an `if` body, where upstream's resolver defines no schemas, rules or type
/// aliases)
fn collect_defined_in(body: &[Stmt], out: &mut Vec<Symbol>, nested: bool) {
    for s in body {
        match &s.kind {
            // `x += v` does not define `x` (upstream: "name 'x' is not defined")
            StmtKind::Assign(a) => out.extend(a.targets.iter().map(|t| t.name.sym)),
            StmtKind::Unification(u) => out.push(u.target.sym),
            StmtKind::SchemaAttr(a) => out.push(a.name.sym),
            StmtKind::Schema(st) if !nested => out.push(st.name.sym),
            StmtKind::Rule(r) if !nested => out.push(r.name.sym),
            StmtKind::TypeAlias(t) if !nested => out.push(t.name.sym),
            StmtKind::If(i) => {
                collect_defined_in(&i.body, out, true);
                collect_defined_in(&i.orelse, out, true);
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
