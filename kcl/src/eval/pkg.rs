//! Building a package from its parsed modules: the names upstream's resolver lets a package
//! assign only once, the setters of each global (see `Setter`), and who keeps the syntax trees
//! its statements point into.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::*;
use crate::ast::walk::public_assignments;

impl Evaluator {
    /// Build a package from parsed modules.
    pub fn make_pkg(
        &self,
        path: &str,
        dir: PathBuf,
        modules: Vec<Arc<ast::Module>>,
    ) -> EvalResult<Rc<Pkg>> {
        let mut stmts: Vec<&'static Stmt> = Vec::new();
        let mut import_stmts = Vec::new();
        for m in &modules {
            // SAFETY: `modules` goes into the package and the evaluator below
            let m = unsafe { tree_of(m) };
            for (k, s) in m.body.iter().enumerate() {
                // the module docstring is no expression statement (it is not output)
                if k == 0
                    && let (Some(d), StmtKind::Expr(e)) = (&m.doc, &s.kind)
                    && d.span == e.span
                {
                    continue;
                }
                if let StmtKind::Import(i) = &s.kind {
                    import_stmts.push((m.file, i, s.span));
                }
                stmts.push(s);
            }
        }
        let mut assign_count: FxHashMap<Symbol, (usize, Span)> = FxHashMap::default();
        let mut type_names: FxHashMap<Symbol, Span> = FxHashMap::default();
        for s in &stmts {
            let n = match &s.kind {
                StmtKind::Schema(sc) => Some(sc.name),
                StmtKind::Rule(r) => Some(r.name),
                _ => None,
            };
            if let Some(n) = n
                && let Some(prev) = type_names.insert(n.sym, n.span)
            {
                let msg = format!("Unique key error name '{}'", n.sym);
                return Err(
                    EvalError::new(ErrKind::UniqueKey, msg, Some(s.span.shrink_to_lo()))
                        .with_note(prev, format!("The variable '{}' is declared here", n.sym)),
                );
            }
            if let StmtKind::TypeAlias(t) = &s.kind {
                type_names.entry(t.name.sym).or_insert(t.name.span);
            }
        }
        for s in stmts.iter() {
            // a public name is assigned once, counting both branches of a top-level `if` and
            // a type alias of that name, as upstream's resolver does
            let mut assigns: Vec<(ast::Name, Span)> = Vec::new();
            public_assignments(s, false, &mut assigns);
            for (n, sp) in assigns {
                // a schema, rule or type alias of the name (before or after) is its one
                // assignment; type aliases may be declared again
                if let Some(&decl) = type_names.get(&n.sym) {
                    return Err(EvalError::new(
                        ErrKind::Immutable,
                        format!(
                            "Can not change the value of '{}', because it was declared immutable",
                            n.sym
                        ),
                        Some(sp.shrink_to_lo()),
                    )
                    .with_note(decl, format!("The variable '{}' is declared here", n.sym))
                    .with_mutable_hint(n.sym));
                }
                let c = assign_count.entry(n.sym).or_insert((0, sp));
                c.0 += 1;
                if c.0 > 1 {
                    return Err(EvalError::new(
                        ErrKind::Immutable,
                        format!(
                            "Can not change the value of '{}', because it was declared immutable",
                            n.sym
                        ),
                        Some(n.span),
                    )
                    .with_note(c.1, format!("The variable '{}' is declared here", n.sym))
                    .with_mutable_hint(n.sym));
                }
            }
        }
        let mut setters: FxHashMap<Symbol, Vec<Setter>> = FxHashMap::default();
        for (i, s) in stmts.iter().enumerate() {
            let mut names = Vec::new();
            stmt_setters(s, None, &mut names);
            for (n, stop) in names {
                setters.entry(n).or_default().push(Setter { stmt: i, stop });
            }
        }
        let forward = schema::forward::Timeline::build(&stmts);
        let pkg = Rc::new(Pkg {
            path: path.to_string(),
            dir,
            _modules: modules.clone(),
            stmts,
            setters,
            lazy: RefCell::new(Lazy::default()),
            targets: RefCell::new(Vec::new()),
            stops: RefCell::new(Vec::new()),
            current: Cell::new(0),
            top: Cell::new(0),
            forward,
            globals: RefCell::new(FxHashMap::default()),
            order: RefCell::new(Vec::new()),
            imports: RefCell::new(FxHashMap::default()),
            import_stmts,
            imports_done: Cell::new(false),
            exprs: RefCell::new(Vec::new()),
            schema_expr_at: Cell::new(0),
            #[cfg(test)]
            _live: live::Token::new(),
        });
        self.pkgs.borrow_mut().insert(path.to_string(), pkg.clone());
        self.modules.borrow_mut().extend(modules);
        Ok(pkg)
    }
}

/// A module's syntax tree as the evaluator's `&'static` nodes.
///
/// The evaluator does not carry a lifetime: closures, schema types and type aliases are
/// `Func::User` values holding `Rc<dyn Any>`, and `Any` is `'static`, so a borrowed tree would
/// put a lifetime on `Value` (builtins, output, the public face, the policy host); an index
/// per node would add a lookup at every node evaluated. Instead the tree is borrowed from an
/// `Arc` that its holders keep: the package (`Pkg::_modules`) for its statements, and
/// through it every schema type, closure and type alias made there, since each holds
/// `Ctx::pkg`; the evaluator (`Evaluator::modules`) for positions it keeps between packages.
/// A value a host keeps after the run (an instance and its schema type) keeps its package.
///
/// # Safety
/// The caller keeps `m` in the package it builds and in the evaluator.
unsafe fn tree_of(m: &Arc<ast::Module>) -> &'static ast::Module {
    // SAFETY: an `Arc`'s value does not move and is not mutated (`Module` has no interior
    // mutability); every `&'static` node taken from it sits in a structure that also holds an
    // `Arc` of the module (see above), so it is never read after the module is freed.
    unsafe { &*Arc::as_ptr(m) }
}

/// The globals a package-level statement assigns, as upstream's lazy scope lists them: each
/// assignment inside an `if` (however nested) is a setter of its own that stops after it.
pub(super) fn stmt_setters(
    s: &'static Stmt,
    branch: Option<bool>,
    out: &mut Vec<(Symbol, Option<(&'static Stmt, bool)>)>,
) {
    let stop = branch.map(|b| (s, b));
    match &s.kind {
        StmtKind::Assign(a) => out.extend(a.targets.iter().map(|t| (t.name.sym, stop))),
        StmtKind::AugAssign(a) => out.push((a.target.name.sym, stop)),
        StmtKind::Unification(u) => out.push((u.target.sym, stop)),
        StmtKind::SchemaAttr(a) => out.push((a.name.sym, stop)),
        StmtKind::If(i) => {
            // the branch of the package-level `if` (nested ones run whole)
            for st in &i.body {
                stmt_setters(st, Some(branch.unwrap_or(false)), out);
            }
            for st in &i.orelse {
                stmt_setters(st, Some(branch.unwrap_or(true)), out);
            }
        }
        _ => {}
    }
}
