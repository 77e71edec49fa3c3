//! The evaluator: loads packages, evaluates statements with upstream's order-independent
//! semantics (a name read before its remaining assignments ran triggers them first), builds
//! schema instances, and calls functions.
//!
//! Parsed modules are leaked (`&'static`): a program's AST lives for the whole run anyway, and
//! static references let closures and schema types point into it without reference counting.

mod error;
mod expr;
mod schema;
mod types;

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::ast::{self, FileId, Span, Stmt, StmtKind, Symbol};
use crate::parser::loader::{ImportTarget, Program};
use crate::value::{ConfigOp, ErrKind, RtError, Str, Value};

pub use error::{EvalError, EvalResult};
pub use schema::SchemaType;
pub(crate) use schema::index_sig_str;
pub(crate) use types::type_str;

/// A host-provided handler for `kcl_plugin.<module>.<function>(...)` calls.
pub trait PluginHook {
    /// Call `function` of plugin `module` with JSON-shaped arguments.
    fn call(
        &self,
        module: &str,
        function: &str,
        args: &[serde_json::Value],
        kwargs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<serde_json::Value, String>;
}

/// Settings of one evaluation.
#[derive(Clone, Default)]
pub struct EvalOptions {
    /// `-D key=value` / settings-file options for `option()`.
    pub args: Vec<(String, Value)>,
    /// `-E name=path` external packages.
    pub external_pkgs: Vec<(String, PathBuf)>,
    /// Directory `file.*` functions resolve relative paths against.
    pub work_dir: PathBuf,
    /// The work directory as given by the caller (`file.workdir()`; empty for `kcl run`).
    pub exec_workdir: String,
    /// The `kcl_plugin` handler.
    pub plugin: Option<Rc<dyn PluginHook>>,
    /// `-r`: integers must fit in 32 bits.
    pub strict_range_check: bool,
    /// What `file.*` and `file.read_env` may reach.
    pub access: crate::access::Access,
}

/// A loaded package: its statements (from every file) and global variables.
pub struct Pkg {
    pub path: String,
    pub dir: PathBuf,
    stmts: Vec<&'static Stmt>,
    setters: FxHashMap<Symbol, Setters>,
    state: RefCell<Vec<u8>>,
    globals: RefCell<FxHashMap<Symbol, Value>>,
    /// Global names in first-assignment order (the output order).
    order: RefCell<Vec<Symbol>>,
    imports: RefCell<FxHashMap<(FileId, Symbol), Value>>,
    import_stmts: Vec<(FileId, &'static ast::ImportStmt, Span)>,
    imports_done: Cell<bool>,
    /// Values of top-level expression statements (configs, lists, numbers): output documents.
    pub exprs: RefCell<Vec<(Value, Span)>>,
    /// The name an `if` statement run for its value is watched for, and whether it was set.
    watch: Cell<Option<Symbol>>,
    watched_set: Cell<bool>,
}

const PENDING: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;

/// A local scope (lambda body, comprehension).
pub struct Scope {
    vars: RefCell<FxHashMap<Symbol, Value>>,
    parent: Option<Rc<Scope>>,
    /// A comprehension's or quantifier's loop scope: its variables are also config keys
    /// (`{name: v} for name in names` uses the variable's value as the key, as upstream).
    looped: bool,
}

impl Scope {
    fn new(parent: Option<Rc<Scope>>) -> Rc<Scope> {
        Rc::new(Scope {
            vars: RefCell::new(FxHashMap::default()),
            parent,
            looped: false,
        })
    }
    fn new_loop(parent: Option<Rc<Scope>>) -> Rc<Scope> {
        Rc::new(Scope {
            vars: RefCell::new(FxHashMap::default()),
            parent,
            looped: true,
        })
    }
    /// The value of a loop variable `s`, when the nearest binding of `s` is one.
    fn loop_var(&self, s: Symbol) -> Option<Value> {
        if let Some(v) = self.vars.borrow().get(&s) {
            return self.looped.then(|| v.clone());
        }
        self.parent.as_ref().and_then(|p| p.loop_var(s))
    }
    fn lookup(&self, s: Symbol) -> Option<Value> {
        if let Some(v) = self.vars.borrow().get(&s) {
            return Some(v.clone());
        }
        self.parent.as_ref().and_then(|p| p.lookup(s))
    }
    /// Assign to the innermost scope that has the name, else this one.
    fn assign(self: &Rc<Self>, s: Symbol, v: Value) {
        let mut cur = Some(self.clone());
        while let Some(sc) = cur {
            if let Some(slot) = sc.vars.borrow_mut().get_mut(&s) {
                *slot = v;
                return;
            }
            cur = sc.parent.clone();
        }
        self.vars.borrow_mut().insert(s, v);
    }
}

/// Where evaluation currently is: package, local scopes and the schema instance being built.
#[derive(Clone)]
pub struct Ctx {
    pub pkg: Rc<Pkg>,
    pub locals: Option<Rc<Scope>>,
    pub schema: Option<Rc<schema::Frame>>,
    pub file: FileId,
    /// Inside a lambda body assignments create locals.
    pub in_lambda: bool,
}

/// An imported module value.
pub enum ModuleRef {
    Pkg(Rc<Pkg>),
    System(&'static str),
    Plugin(String),
}

/// A lambda closure.
pub struct Closure {
    pub lambda: &'static ast::LambdaExpr,
    pub ctx: Ctx,
}

/// A package's folder and its parsed modules, shared with the parse cache.
type PackageSources = (PathBuf, Vec<Arc<ast::Module>>);

/// The evaluator of one program run.
pub struct Evaluator {
    pub opts: EvalOptions,
    pub root: PathBuf,
    /// Parsed but not yet evaluated packages of the program.
    sources: RefCell<FxHashMap<String, PackageSources>>,
    import_targets: FxHashMap<Span, ImportTarget>,
    pkgs: RefCell<FxHashMap<String, Rc<Pkg>>>,
    depth: Cell<usize>,
    /// Text printed by `print()`, in order.
    pub stdout: RefCell<String>,
    /// Set by `manifests.yaml_stream`: replaces the YAML output.
    pub output_override: RefCell<Option<String>>,
    /// Warnings (deprecated decorators) to print on stderr.
    pub warnings: RefCell<Vec<String>>,
    /// Set when a schema instance was created without all its required attributes.
    pub(crate) incomplete: Cell<bool>,
    /// Set by a builtin calling back into KCL (`reduce`, `sorted(key=...)`): the callee's
    /// parameter types are reported with upstream's runtime wording.
    pub(crate) builtin_call: Cell<bool>,
    /// Item count of the comprehension loop that just started, when its result has exactly
    /// that many items (so the list is allocated once, without growth slack).
    pub(crate) comp_len: Cell<usize>,
    /// Whether the program's text mentions `instances` at all: only then is every instance
    /// recorded for `Schema.instances()` (the record keeps each one alive, intermediate
    /// instances of a merge included).
    pub(crate) track_instances: bool,
    /// The packages whose code is running, innermost last (kept only when `track_instances`):
    /// an instance belongs to the package of the code that creates it, and `S.instances()`
    /// lists those the main package created, as upstream does.
    pub(crate) running: RefCell<Vec<Rc<Pkg>>>,
    /// Shared instance origins by config keys (see `origin_of`).
    pub(crate) origins: RefCell<FxHashMap<crate::value::ConfigKeys, Rc<crate::value::Origin>>>,
    /// The entry operators each config literal (by its entries' address) produced last: a
    /// literal evaluated in a loop yields the same operators every time, and the instances made
    /// from it keep them, so they share one copy (see `eval_entries`).
    pub(crate) config_ops: RefCell<FxHashMap<usize, Rc<crate::value::Ops>>>,
}

/// Whether any source file of the program selects an attribute named `instances` (a cheap,
/// conservative stand-in for "calls `Schema.instances()`"; the word in prose does not count).
fn mentions_instances(program: &Program) -> bool {
    let pkgs = std::iter::once(&program.main).chain(program.packages.iter().map(|(_, p)| p));
    pkgs.flat_map(|p| p.modules.iter()).any(|m| {
        crate::ast::source_map().get(m.file).is_none_or(|src| {
            src.text.match_indices("instances").any(|(i, _)| {
                let before = src.text[..i].trim_end_matches([' ', '\t', '\\', '\n', '\r']);
                let after = src.text[i + "instances".len()..].chars().next();
                before.ends_with('.') && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
    })
}

/// The statements assigning one global, in order; almost always one (no allocation then).
enum Setters {
    One(usize),
    Many(Vec<usize>),
}

impl Setters {
    fn push(&mut self, i: usize) {
        match self {
            Setters::One(j) if *j != i => *self = Setters::Many(vec![*j, i]),
            Setters::One(_) => {}
            Setters::Many(v) if v.last() != Some(&i) => v.push(i),
            Setters::Many(_) => {}
        }
    }
    fn as_slice(&self) -> &[usize] {
        match self {
            Setters::One(i) => std::slice::from_ref(i),
            Setters::Many(v) => v,
        }
    }
}

/// Deepest nesting of calls / schema instantiations before a clear error.
const MAX_CALL_DEPTH: usize = 2000;

impl Evaluator {
    /// An evaluator over a loaded program; returns it with the main package's modules.
    pub fn new(program: Program, opts: EvalOptions) -> (Self, Vec<Arc<ast::Module>>) {
        let track_instances = mentions_instances(&program);
        let mut sources = FxHashMap::default();
        for (k, p) in program.packages.iter() {
            sources.insert(k.to_string(), (p.path.clone(), p.modules.clone()));
        }
        let ev = Evaluator {
            opts,
            root: program.root.clone(),
            sources: RefCell::new(sources),
            import_targets: program.imports,
            pkgs: RefCell::new(FxHashMap::default()),
            depth: Cell::new(0),
            stdout: RefCell::new(String::new()),
            output_override: RefCell::new(None),
            warnings: RefCell::new(Vec::new()),
            incomplete: Cell::new(false),
            origins: Default::default(),
            config_ops: Default::default(),
            track_instances,
            running: RefCell::new(Vec::new()),
            comp_len: Cell::new(0),
            builtin_call: Cell::new(false),
        };
        (ev, program.main.modules)
    }

    /// Build a package from parsed modules.
    pub fn make_pkg(
        &self,
        path: &str,
        dir: PathBuf,
        modules: Vec<Arc<ast::Module>>,
    ) -> EvalResult<Rc<Pkg>> {
        let mut stmts: Vec<&'static Stmt> = Vec::new();
        let mut import_stmts = Vec::new();
        for m in modules {
            // statements are borrowed for the whole run; a shared module stays alive (and is
            // not copied) by leaking one reference to it
            let m: &'static ast::Module = Box::leak(Box::new(m));
            for s in &m.body {
                if let StmtKind::Import(i) = &s.kind {
                    import_stmts.push((m.file, i, s.span));
                }
                stmts.push(s);
            }
        }
        let mut setters: FxHashMap<Symbol, Setters> = FxHashMap::default();
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
        for (i, s) in stmts.iter().enumerate() {
            let mut names = Vec::new();
            stmt_targets(s, &mut names);
            for n in names {
                setters
                    .entry(n)
                    .and_modify(|e| e.push(i))
                    .or_insert(Setters::One(i));
            }
            // a public name is assigned once, counting both branches of a top-level `if` and
            // a type alias of that name, as upstream's resolver does
            let mut assigns: Vec<(ast::Name, Span)> = Vec::new();
            public_assignments(s, &mut assigns);
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
                    .with_note(decl, format!("The variable '{}' is declared here", n.sym)));
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
                    .with_note(c.1, format!("The variable '{}' is declared here", n.sym)));
                }
            }
        }
        let n = stmts.len();
        let pkg = Rc::new(Pkg {
            path: path.to_string(),
            dir,
            stmts,
            setters,
            state: RefCell::new(vec![PENDING; n]),
            globals: RefCell::new(FxHashMap::default()),
            order: RefCell::new(Vec::new()),
            imports: RefCell::new(FxHashMap::default()),
            import_stmts,
            imports_done: Cell::new(false),
            exprs: RefCell::new(Vec::new()),
            watch: Cell::new(None),
            watched_set: Cell::new(false),
        });
        self.pkgs.borrow_mut().insert(path.to_string(), pkg.clone());
        Ok(pkg)
    }

    pub(crate) fn ctx(&self, pkg: &Rc<Pkg>, file: FileId) -> Ctx {
        Ctx {
            pkg: pkg.clone(),
            locals: None,
            schema: None,
            file,
            in_lambda: false,
        }
    }

    /// Run every statement of a package (each at most once).
    pub fn run_pkg(&self, pkg: &Rc<Pkg>) -> EvalResult<()> {
        self.resolve_imports(pkg)?;
        for i in 0..pkg.stmts.len() {
            self.run_global_stmt(pkg, i)?;
        }
        Ok(())
    }

    fn run_global_stmt(&self, pkg: &Rc<Pkg>, i: usize) -> EvalResult<()> {
        if pkg.state.borrow()[i] != PENDING {
            return Ok(());
        }
        pkg.state.borrow_mut()[i] = RUNNING;
        let s = pkg.stmts[i];
        let ctx = self.ctx(pkg, s.span.file);
        let r = self.in_pkg(pkg, || self.exec_stmt(&ctx, s));
        pkg.state.borrow_mut()[i] = DONE;
        if let (Ok(Some(v)), StmtKind::Expr(_)) = (&r, &s.kind)
            && matches!(
                v,
                Value::Dict(_)
                    | Value::Schema(_)
                    | Value::List(_)
                    | Value::Int(_)
                    | Value::Float(_)
                    | Value::Bool(_)
            )
        {
            pkg.exprs.borrow_mut().push((v.clone(), s.span));
        }
        r.map(|_| ())
    }

    /// Check required attributes of every schema instance reachable from the package's globals.
    pub fn check_pkg_required(&self, pkg: &Rc<Pkg>) -> EvalResult<()> {
        if !self.incomplete.get() {
            return Ok(());
        }
        let mut vals: Vec<Value> = pkg
            .order
            .borrow()
            .iter()
            .filter_map(|s| pkg.globals.borrow().get(s).cloned())
            .collect();
        vals.extend(pkg.exprs.borrow().iter().map(|(v, _)| v.clone()));
        for v in &vals {
            self.check_required(v, 0)?;
        }
        Ok(())
    }

    /// Top-level expression values merged into one document (`None` when there are none).
    pub fn expr_output(&self, pkg: &Rc<Pkg>) -> EvalResult<Option<Value>> {
        let ex = pkg.exprs.borrow();
        if let Some((v, sp)) = ex.iter().find(|(v, _)| !v.is_config())
            && pkg
                .order
                .borrow()
                .iter()
                .any(|s| !s.as_str().starts_with('_'))
        {
            return Err(EvalError::new(
                ErrKind::Evaluation,
                // upstream shows the value as JSON (`true`, `"s"`)
                format!(
                    "conflicting values between {{...}} and {}",
                    if matches!(v, Value::List(_)) {
                        "[...]".to_string()
                    } else {
                        crate::builtins::to_json_value(v).to_string()
                    }
                ),
                Some(*sp),
            ));
        }
        let mut acc: Option<Value> = None;
        for (v, sp) in ex.iter() {
            acc = Some(match acc {
                None => v.clone(),
                Some(a) => {
                    // configs merge; anything else (lists included) must be equal
                    if !(a.is_config() && v.is_config()) && a != *v {
                        let show = |x: &Value| {
                            if x.is_config() {
                                "{...}".to_string()
                            } else if matches!(x, Value::List(_)) {
                                "[...]".to_string()
                            } else {
                                crate::builtins::to_json_value(x).to_string()
                            }
                        };
                        return Err(EvalError::new(
                            ErrKind::Evaluation,
                            format!("conflicting values between {} and {}", show(v), show(&a)),
                            Some(*sp),
                        ));
                    }
                    crate::value::union(&a, v, false).map_err(|e| self.rt(e, *sp))?
                }
            });
        }
        Ok(acc)
    }

    /// The package's output: top-level public values in order.
    pub fn pkg_output(&self, pkg: &Rc<Pkg>, show_hidden: bool) -> crate::value::Dict {
        let mut d = crate::value::Dict::new();
        let g = pkg.globals.borrow();
        // statement order, whatever order the lazy evaluation assigned them in
        let mut names: Vec<Symbol> = pkg.order.borrow().clone();
        names.sort_by_key(|s| {
            pkg.setters
                .get(s)
                .and_then(|v| v.as_slice().first().copied())
                .unwrap_or(usize::MAX)
        });
        for sym in names.iter() {
            let name = sym.as_str();
            if name.starts_with('_') && !show_hidden {
                continue;
            }
            if let Some(v) = g.get(sym) {
                if matches!(v, Value::Func(_)) {
                    continue;
                }
                d.map.insert(Str::from(name), v.clone());
            }
        }
        d
    }

    // ------------------------------------------------------------------- imports ------

    fn resolve_imports(&self, pkg: &Rc<Pkg>) -> EvalResult<()> {
        if pkg.imports_done.replace(true) {
            return Ok(());
        }
        for (file, imp, span) in &pkg.import_stmts {
            let Some(local) = imp.local_name() else {
                continue;
            };
            let v = self.import(pkg, *file, imp, *span)?;
            pkg.imports.borrow_mut().insert((*file, local), v);
        }
        Ok(())
    }

    fn import(
        &self,
        _pkg: &Rc<Pkg>,
        _file: FileId,
        imp: &ast::ImportStmt,
        span: Span,
    ) -> EvalResult<Value> {
        let last = imp.names.last().map(|n| n.sym.as_str()).unwrap_or("");
        let modval = |m: ModuleRef| {
            Value::Func(Rc::new(crate::value::Func::User {
                name: Str::from(last),
                data: Rc::new(m),
            }))
        };
        match self.import_targets.get(&imp.path_span) {
            Some(ImportTarget::System(m)) => match crate::builtins::system_module_name(m) {
                Some(n) => Ok(modval(ModuleRef::System(n))),
                None => Err(EvalError::new(
                    ErrKind::Compile,
                    format!("unknown system module '{m}'"),
                    Some(span),
                )),
            },
            Some(ImportTarget::Plugin(p)) => Ok(modval(ModuleRef::Plugin(p.to_string()))),
            Some(ImportTarget::Package(path)) => {
                if let Some(p) = self.pkgs.borrow().get(&**path) {
                    return Ok(modval(ModuleRef::Pkg(p.clone())));
                }
                let src = self.sources.borrow_mut().remove(&**path);
                let Some((dir, modules)) = src else {
                    return Err(EvalError::new(
                        ErrKind::Compile,
                        format!("pkgpath {path} not found in the program"),
                        Some(span),
                    ));
                };
                let p = self.make_pkg(path, dir, modules)?;
                self.run_pkg(&p)?;
                Ok(modval(ModuleRef::Pkg(p)))
            }
            None => Err(EvalError::new(
                ErrKind::Compile,
                format!("pkgpath {} not found in the program", imp.path),
                Some(span),
            )),
        }
    }

    // ------------------------------------------------------------------- names --------

    /// Read a global of `pkg`, running its pending assignments first.
    pub fn get_global(&self, pkg: &Rc<Pkg>, name: Symbol) -> EvalResult<Option<Value>> {
        if let Some(idx) = pkg.setters.get(&name).map(Setters::as_slice) {
            // a name read while one of its own assignments runs sees its current value
            if !idx.iter().any(|&i| pkg.state.borrow()[i] == RUNNING) {
                for &i in idx {
                    if pkg.state.borrow()[i] != PENDING {
                        continue;
                    }
                    if !matches!(pkg.stmts[i].kind, StmtKind::If(_)) {
                        self.run_global_stmt(pkg, i)?;
                        continue;
                    }
                    // Upstream runs a name's assignments when it is read before them; an `if`
                    // among them whose taken branch does not assign the name leaves it
                    // Undefined (`_x = 1` then `if False: _x = 2` reads as Undefined there,
                    // though as 1 in statement order).
                    let outer = (
                        pkg.watch.replace(Some(name)),
                        pkg.watched_set.replace(false),
                    );
                    let r = self.run_global_stmt(pkg, i);
                    let set = pkg.watched_set.get();
                    pkg.watch.set(outer.0);
                    pkg.watched_set.set(outer.1);
                    r?;
                    if !set {
                        self.set_global(pkg, name, Value::Undefined);
                    }
                }
            }
        }
        Ok(pkg.globals.borrow().get(&name).cloned())
    }

    fn set_global(&self, pkg: &Rc<Pkg>, name: Symbol, v: Value) {
        if pkg.watch.get() == Some(name) {
            pkg.watched_set.set(true);
        }
        let mut g = pkg.globals.borrow_mut();
        if g.insert(name, v).is_none() {
            pkg.order.borrow_mut().push(name);
        }
    }

    /// Resolve a name in `ctx`.
    pub fn lookup(&self, ctx: &Ctx, name: Symbol, span: Span) -> EvalResult<Value> {
        if let Some(l) = &ctx.locals
            && let Some(v) = l.lookup(name)
        {
            return Ok(v);
        }
        if let Some(fr) = &ctx.schema
            && let Some(v) = self.schema_lookup(fr, name)?
        {
            return Ok(v);
        }
        if let Some(v) = self.get_global(&ctx.pkg, name)? {
            return Ok(v);
        }
        // imports are per file: the file the name is written in (a merged declaration holds
        // entries of several files), else the current one
        for file in [span.file, ctx.file] {
            if let Some(v) = ctx.pkg.imports.borrow().get(&(file, name)) {
                return Ok(v.clone());
            }
        }
        // imports of other files of the same package are visible too in upstream's resolver
        // only through their own file; fall back to builtins
        if let Some(v) = crate::builtins::lookup(name.as_str()) {
            return Ok(v);
        }
        // the main package's imports are visible from all its files, as upstream collects
        // them package-wide before resolving
        if ctx.pkg.path == "__main__"
            && let Some(v) = ctx
                .pkg
                .imports
                .borrow()
                .iter()
                .find(|((_, n), _)| *n == name)
                .map(|(_, v)| v.clone())
        {
            return Ok(v);
        }
        Err(EvalError::new(
            ErrKind::Compile,
            format!("name '{name}' is not defined"),
            Some(span),
        ))
    }

    // ---------------------------------------------------------------- statements ------

    /// Execute a statement; returns the value of an expression statement.
    pub fn exec_stmt(&self, ctx: &Ctx, s: &'static Stmt) -> EvalResult<Option<Value>> {
        match &s.kind {
            StmtKind::Expr(e) => {
                let v = self.eval(ctx, e)?;
                Ok(Some(v))
            }
            StmtKind::Assign(a) => {
                let mut v = self.eval(ctx, &a.value)?;
                if let Some(ty) = &a.ty {
                    // a computed dict (not a literal the checker saw) that does not fit the
                    // annotated schema fails the runtime check, in upstream's words
                    let computed = matches!(v, Value::Dict(_))
                        && !matches!(
                            a.value.kind,
                            ast::ExprKind::Config(_) | ast::ExprKind::Schema(_)
                        );
                    v = self.convert_type(ctx, v, ty, a.value.span).map_err(|e| {
                        if computed && e.kind != ErrKind::Type {
                            EvalError::new(
                                ErrKind::Evaluation,
                                format!(
                                    "expect {}, got dict. For details:\n{}",
                                    types::type_str(ty),
                                    e.msg
                                ),
                                Some(s.span),
                            )
                        } else {
                            e
                        }
                    })?;
                }
                for t in &a.targets {
                    self.assign_target(ctx, t, v.clone(), a.ty.as_ref())?;
                }
                Ok(None)
            }
            StmtKind::AugAssign(a) => {
                let cur = self.read_target(ctx, &a.target)?;
                let rhs = self.eval(ctx, &a.value)?;
                let v = self.binop(a.op.bin_op(), &cur, &rhs, s.span)?;
                self.assign_target(ctx, &a.target, v, None)?;
                Ok(None)
            }
            StmtKind::Unification(u) => {
                if ctx.schema.is_none() && ctx.locals.is_none() {
                    return self.unify_global(ctx, u).map(|_| None);
                }
                let cur = self.lookup_opt_for_unify(ctx, u.target.sym)?;
                self.incomplete.set(true);
                // `a: S {...}` onto an instance rebuilds it from the merged configs
                if let (Some(c @ Value::Schema(_)), ast::ExprKind::Schema(se)) =
                    (&cur, &u.value.kind)
                {
                    let cfg = self.eval(ctx, &se.config)?;
                    let ty = self.eval_identifier(ctx, &se.name)?;
                    if let Some(st) = schema::as_schema_type(&ty) {
                        let (pos, kw) = match &se.args {
                            Some(a) => self.eval_args(ctx, a)?,
                            None => (Vec::new(), Vec::new()),
                        };
                        if let Some(v) =
                            self.rebuild_merged(c, &cfg, Some((st, (pos, kw))), u.value.span)?
                        {
                            self.assign_path(ctx, u.target, &[], u.target.span, v, None)?;
                            return Ok(None);
                        }
                    }
                }
                let v = self.eval(ctx, &u.value)?;
                let v = match cur {
                    Some(c) if !c.is_none_or_undefined() => self.union_eval(c, &v, u.value.span)?,
                    _ => v,
                };
                self.assign_path(ctx, u.target, &[], u.target.span, v, None)?;
                Ok(None)
            }
            StmtKind::Assert(a) => {
                if let Some(c) = &a.if_cond
                    && !self.eval(ctx, c)?.truthy()
                {
                    return Ok(None);
                }
                if !self.eval(ctx, &a.test)?.truthy() {
                    let msg = match &a.msg {
                        Some(m) => crate::value::to_str(&self.eval(ctx, m)?),
                        None => String::new(),
                    };
                    return Err(EvalError::new(
                        ErrKind::Assertion,
                        if msg.is_empty() {
                            "AssertionError".to_string()
                        } else {
                            msg
                        },
                        Some(a.test.span),
                    ));
                }
                Ok(None)
            }
            StmtKind::If(i) => {
                let body = if self.eval(ctx, &i.cond)?.truthy() {
                    &i.body
                } else {
                    &i.orelse
                };
                let mut last = None;
                for st in body {
                    last = self.exec_stmt(ctx, st)?;
                }
                Ok(last)
            }
            StmtKind::Import(_) => Ok(None),
            StmtKind::SchemaAttr(attr) => {
                if let Some(fr) = &ctx.schema {
                    self.exec_schema_attr(ctx, fr, attr, s.span)?;
                } else {
                    // a module-level `a: T = v` declaration
                    if let Some(val) = &attr.value {
                        let mut v = self.eval(ctx, val)?;
                        v = self.convert_type(ctx, v, &attr.ty, val.span)?;
                        self.assign_path(ctx, attr.name, &[], attr.name.span, v, Some(&attr.ty))?;
                    }
                }
                Ok(None)
            }
            StmtKind::Schema(sc) => {
                let ty = schema::SchemaType::from_stmt(sc, ctx.clone(), false);
                self.define(ctx, sc.name.sym, ty);
                Ok(None)
            }
            StmtKind::Rule(r) => {
                let ty = schema::SchemaType::from_rule(r, ctx.clone());
                self.define(ctx, r.name.sym, ty);
                Ok(None)
            }
            StmtKind::TypeAlias(t) => {
                let v = Value::Func(Rc::new(crate::value::Func::User {
                    name: Str::from(t.name.sym.as_str()),
                    data: Rc::new(types::TypeAlias {
                        ty: &t.ty,
                        ctx: ctx.clone(),
                    }),
                }));
                self.define(ctx, t.name.sym, v);
                Ok(None)
            }
        }
    }

    /// `a: S {...}` at package level: every such statement for `a` is merged into one config
    /// and the schema is instantiated once, as upstream unifies them.
    fn unify_global(&self, ctx: &Ctx, u: &'static ast::UnificationStmt) -> EvalResult<()> {
        let pkg = &ctx.pkg;
        let name = u.target.sym;
        let idxs = pkg
            .setters
            .get(&name)
            .map(|v| v.as_slice().to_vec())
            .unwrap_or_default();
        let mut exprs: Vec<&'static ast::Expr> = Vec::new();
        for i in idxs {
            let st = pkg.stmts[i];
            if let StmtKind::Unification(u2) = &st.kind {
                let state = pkg.state.borrow()[i];
                if state == PENDING || std::ptr::eq(u2, u) {
                    exprs.push(&u2.value);
                    pkg.state.borrow_mut()[i] = if state == PENDING { DONE } else { state };
                }
            }
        }
        let Some(first) = exprs.first() else {
            return Ok(());
        };
        let ast::ExprKind::Schema(_) = &first.kind else {
            let v = self.eval(ctx, first)?;
            self.set_global(pkg, name, v);
            return Ok(());
        };
        // an earlier instance contributes the config it was built from
        let mut merged = match pkg.globals.borrow().get(&name) {
            Some(Value::Schema(s)) if s.origin.is_some() => Value::from(s.config()),
            Some(v) => v
                .as_dict()
                .cloned()
                .map(Value::from)
                .unwrap_or_else(Value::empty_dict),
            None => Value::empty_dict(),
        };
        for e in &exprs {
            // each statement's names resolve in its own file (imports are per file)
            let fctx = Ctx {
                file: e.span.file,
                ..ctx.clone()
            };
            let cfg = match &e.kind {
                ast::ExprKind::Schema(s2) => self.eval(&fctx, &s2.config)?,
                _ => self.eval(&fctx, e)?,
            };
            merged = self.union_eval(merged, &cfg, e.span)?;
        }
        // the last statement's schema and arguments win
        let last = exprs
            .iter()
            .rev()
            .find(|e| matches!(e.kind, ast::ExprKind::Schema(_)))
            .copied()
            .unwrap_or(first);
        let ast::ExprKind::Schema(se) = &last.kind else {
            unreachable!()
        };
        let fctx = Ctx {
            file: last.span.file,
            ..ctx.clone()
        };
        let ty = self.eval_identifier(&fctx, &se.name)?;
        let (pos, kw) = match &se.args {
            Some(a) => self.eval_args(&fctx, a)?,
            None => (Vec::new(), Vec::new()),
        };
        let v =
            self.instantiate_value(&fctx, &ty, &pos, &kw, merged, first.span, se.config.span)?;
        self.set_global(pkg, name, v);
        Ok(())
    }

    fn define(&self, ctx: &Ctx, name: Symbol, v: Value) {
        if let Some(l) = &ctx.locals {
            l.vars.borrow_mut().insert(name, v);
        } else {
            self.set_global(&ctx.pkg, name, v);
        }
    }

    fn lookup_opt_for_unify(&self, ctx: &Ctx, name: Symbol) -> EvalResult<Option<Value>> {
        if let Some(l) = &ctx.locals
            && let Some(v) = l.lookup(name)
        {
            return Ok(Some(v));
        }
        if let Some(fr) = &ctx.schema {
            return Ok(fr.attrs.borrow().get(name.as_str()).cloned());
        }
        Ok(ctx.pkg.globals.borrow().get(&name).cloned())
    }

    fn read_target(&self, ctx: &Ctx, t: &'static ast::Target) -> EvalResult<Value> {
        let mut v = self.lookup(ctx, t.name.sym, t.name.span)?;
        for p in &t.path {
            v = match p {
                ast::TargetPath::Attr(n) => self.select(ctx, &v, n.sym.as_str(), false, n.span)?,
                ast::TargetPath::Index(e) => {
                    let i = self.eval(ctx, e)?;
                    self.subscript(&v, &i, false, e.span)?
                }
            };
        }
        Ok(v)
    }

    fn assign_target(
        &self,
        ctx: &Ctx,
        t: &'static ast::Target,
        v: Value,
        ty: Option<&ast::Type>,
    ) -> EvalResult<()> {
        self.assign_path(ctx, t.name, &t.path, t.span, v, ty)
    }

    fn assign_path(
        &self,
        ctx: &Ctx,
        tname: ast::Name,
        tpath: &'static [ast::TargetPath],
        tspan: Span,
        v: Value,
        ty: Option<&ast::Type>,
    ) -> EvalResult<()> {
        let t = TargetRef {
            name: tname,
            path: tpath,
            span: tspan,
        };
        let name = t.name.sym;
        let newv = if t.path.is_empty() {
            v
        } else {
            if ctx.schema.is_none() && ctx.locals.is_none() && !name.as_str().starts_with('_') {
                return Err(EvalError::new(
                    ErrKind::Immutable,
                    format!(
                        "Can not change the value of '{name}', because it was declared immutable"
                    ),
                    Some(t.span),
                ));
            }
            let root = match self.lookup_opt_for_unify(ctx, name)? {
                Some(r) if !r.is_none_or_undefined() => r,
                other => {
                    let ty = match other {
                        Some(Value::None) => "NoneType",
                        _ => "UndefinedType",
                    };
                    let attr = match t.path.first() {
                        Some(ast::TargetPath::Attr(n)) => n.sym.as_str().to_string(),
                        _ => name.as_str().to_string(),
                    };
                    return Err(EvalError::new(
                        ErrKind::Evaluation,
                        format!(
                            "failed to update the dict. An iterable of key-value pairs was expected, but got {ty}. Check if the syntax for updating the dictionary with the attribute '{attr}' is correct"
                        ),
                        Some(t.span),
                    ));
                }
            };
            // `inst.a.b = v` on a schema instance rebuilds it with `{a: {b = v}}` merged into
            // its config: derived attributes follow and its checks run again, as upstream
            if matches!(root, Value::Schema(_))
                && t.path.iter().all(|p| matches!(p, ast::TargetPath::Attr(_)))
            {
                let mut extra = v.clone();
                let mut op = ConfigOp::Override;
                for p in t.path.iter().rev() {
                    let ast::TargetPath::Attr(n) = p else {
                        unreachable!()
                    };
                    let k: Str = Str::from(n.sym.as_str());
                    let mut d = crate::value::Dict::new();
                    d.map.insert(k.clone(), extra);
                    d.set_op(k, op, None);
                    extra = Value::from(d);
                    op = ConfigOp::Union;
                }
                let rebuilt = self.union_eval(root.clone(), &extra, t.span)?;
                return self.assign_path(ctx, tname, &[], tspan, rebuilt, ty);
            }
            let mut keys = Vec::new();
            for p in t.path {
                keys.push(match p {
                    ast::TargetPath::Attr(n) => Value::str(n.sym.as_str()),
                    ast::TargetPath::Index(e) => self.eval(ctx, e)?,
                });
            }
            set_path(root, &keys, v).map_err(|e| EvalError::from_rt(e, t.span))?
        };
        let _ = ty;
        if ctx.in_lambda {
            let l = ctx.locals.as_ref().unwrap();
            if ctx.schema.is_some()
                && l.lookup(name).is_none()
                && ctx
                    .schema
                    .as_ref()
                    .unwrap()
                    .attrs
                    .borrow()
                    .get(name.as_str())
                    .is_some()
            {
                // lambdas never write the enclosing schema's attributes
            }
            l.assign(name, newv);
            return Ok(());
        }
        if let Some(l) = &ctx.locals
            && l.lookup(name).is_some()
        {
            l.assign(name, newv);
            return Ok(());
        }
        if let Some(fr) = &ctx.schema {
            self.schema_set(ctx, fr, name, newv, t.span)?;
            return Ok(());
        }
        if name.as_str().starts_with('_')
            && let Some(prev) = ctx.pkg.globals.borrow().get(&name)
            && let (Some(a), Some(b)) = (simple_type(prev), simple_type(&newv))
            && a != b
        {
            return Err(EvalError::new(
                ErrKind::Type,
                format!("expected {a}, got {}", shown_type(&newv)),
                Some(t.span),
            ));
        }
        self.set_global(&ctx.pkg, name, newv);
        Ok(())
    }

    /// Run `f` as code of package `pkg` (see `running`).
    pub(crate) fn in_pkg<T>(&self, pkg: &Rc<Pkg>, f: impl FnOnce() -> T) -> T {
        if !self.track_instances {
            return f();
        }
        self.running.borrow_mut().push(pkg.clone());
        let r = f();
        self.running.borrow_mut().pop();
        r
    }

    /// The package of the code running now.
    pub(crate) fn running_pkg(&self) -> Option<Rc<Pkg>> {
        self.running.borrow().last().cloned()
    }

    pub(crate) fn enter(&self, span: Span) -> EvalResult<()> {
        let d = self.depth.get() + 1;
        if d > MAX_CALL_DEPTH {
            return Err(EvalError::new(
                ErrKind::RecursionLimit,
                "maximum recursion depth exceeded",
                Some(span),
            ));
        }
        self.depth.set(d);
        Ok(())
    }
    pub(crate) fn leave(&self) {
        self.depth.set(self.depth.get() - 1);
    }

    pub fn rt(&self, e: RtError, span: Span) -> EvalError {
        EvalError::from_rt(e, span)
    }
}

/// Inferred type of simple values (scalars and lists of one scalar type), for re-assignments.
fn simple_type(v: &Value) -> Option<String> {
    match v {
        Value::Str(_) => Some("str".into()),
        Value::Int(_) => Some("int".into()),
        Value::Bool(_) => Some("bool".into()),
        Value::List(l) if !l.is_empty() => {
            let t = simple_type(&l[0])?;
            l.iter()
                .all(|x| simple_type(x).as_deref() == Some(&t))
                .then(|| format!("[{t}]"))
        }
        _ => None,
    }
}

fn shown_type(v: &Value) -> String {
    match v {
        Value::List(l) => format!(
            "[{}]",
            l.iter()
                .map(|x| x.type_with_value())
                .collect::<Vec<_>>()
                .join(" | ")
        ),
        _ => v.type_with_value(),
    }
}

struct TargetRef {
    name: ast::Name,
    path: &'static [ast::TargetPath],
    span: Span,
}

/// Public names a top-level statement assigns with `=` (and type aliases), through `if`s.
fn public_assignments(s: &Stmt, out: &mut Vec<(ast::Name, Span)>) {
    match &s.kind {
        StmtKind::Assign(a) => out.extend(
            a.targets
                .iter()
                .filter(|t| t.path.is_empty() && !t.name.sym.as_str().starts_with('_'))
                .map(|t| (t.name, t.span)),
        ),
        StmtKind::If(i) => {
            for st in i.body.iter().chain(i.orelse.iter()) {
                public_assignments(st, out);
            }
        }
        _ => {}
    }
}

/// Names a top-level statement assigns (for the lazy setter table).
fn stmt_targets(s: &Stmt, out: &mut Vec<Symbol>) {
    match &s.kind {
        StmtKind::Assign(a) => out.extend(a.targets.iter().map(|t| t.name.sym)),
        StmtKind::AugAssign(a) => out.push(a.target.name.sym),
        StmtKind::Unification(u) => out.push(u.target.sym),
        StmtKind::SchemaAttr(a) => out.push(a.name.sym),
        StmtKind::If(i) => {
            for st in i.body.iter().chain(i.orelse.iter()) {
                stmt_targets(st, out);
            }
        }
        StmtKind::Schema(s) => out.push(s.name.sym),
        StmtKind::Rule(r) => out.push(r.name.sym),
        StmtKind::TypeAlias(t) => out.push(t.name.sym),
        _ => {}
    }
}

/// `root.k1[k2]... = v` with copy-on-write.
fn set_path(root: Value, keys: &[Value], v: Value) -> Result<Value, RtError> {
    if keys.is_empty() {
        return Ok(v);
    }
    let mut root = root;
    match (&mut root, &keys[0]) {
        (Value::List(l), Value::Int(i)) => {
            let l = Rc::make_mut(l);
            let idx = if *i < 0 { l.len() as i64 + i } else { *i };
            if idx < 0 || idx as usize >= l.len() {
                return Err(RtError::eval(format!(
                    "index out of bounds: the len is {} but the index is {i}",
                    l.len()
                )));
            }
            let cur = std::mem::take(&mut l[idx as usize]);
            l[idx as usize] = set_path(cur, &keys[1..], v)?;
            Ok(root)
        }
        (Value::Dict(_) | Value::Schema(_), Value::Str(k)) => {
            let d = root.dict_mut().unwrap();
            let cur = d.map.get(&**k).cloned().unwrap_or(Value::Undefined);
            let nv = set_path(cur, &keys[1..], v)?;
            d.map.insert(k.clone(), nv);
            Ok(root)
        }
        (Value::Undefined | Value::None, Value::Str(k)) if keys.len() > 1 => {
            // intermediate levels of an existing value may be created
            let mut d = crate::value::Dict::new();
            d.map
                .insert(k.clone(), set_path(Value::Undefined, &keys[1..], v)?);
            Ok(Value::from(d))
        }
        (r, k) => Err(RtError::eval(format!(
            "'{}' object does not support item assignment with key '{}'",
            r.type_name(),
            crate::value::to_str(k)
        ))),
    }
}

/// Keys as shared strings.
pub fn key(s: &str) -> Str {
    Str::from(s)
}
