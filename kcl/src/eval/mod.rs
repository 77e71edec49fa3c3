//! The evaluator: loads packages, evaluates statements with upstream's order-independent
//! semantics (a name read before its remaining assignments ran triggers them first), builds
//! schema instances, and calls functions.
//!
//! Parsed modules are leaked (`&'static`, see [`Evaluator::make_pkg`]): closures and schema
//! types point into the AST without reference counting.

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
    /// The package's folder (not read by the evaluator today; kept with the package it names).
    #[allow(dead_code)]
    pub dir: PathBuf,
    stmts: Vec<&'static Stmt>,
    /// The statements that assign each global, in order (see [`Setter`]).
    setters: FxHashMap<Symbol, Vec<Setter>>,
    /// Upstream's lazy evaluation of globals (see [`Evaluator::get_global`]).
    lazy: RefCell<Lazy>,
    /// Names the running package-level statements assign, innermost last.
    targets: RefCell<Vec<Symbol>>,
    /// While setters run (see [`Setter`]), innermost last.
    stops: RefCell<Vec<Stop>>,
    /// The package-level statement running now (its address; also one inside an `if`).
    current: Cell<usize>,
    globals: RefCell<FxHashMap<Symbol, Value>>,
    /// Global names in first-assignment order (the output order).
    order: RefCell<Vec<Symbol>>,
    imports: RefCell<FxHashMap<(FileId, Symbol), Value>>,
    import_stmts: Vec<(FileId, &'static ast::ImportStmt, Span)>,
    imports_done: Cell<bool>,
    /// Values of top-level expression statements (configs, lists, numbers): output documents.
    pub exprs: RefCell<Vec<(Value, Span)>>,
}

/// One statement assigning a global: a package-level statement, or an `if` statement that
/// assigns it in `stop`, in its body or (`or_else`) in its else branch. Run as a setter, such
/// an `if` runs only that branch, when its condition takes it, up to and including `stop`.
#[derive(Clone, Copy)]
struct Setter {
    stmt: usize,
    stop: Option<(&'static Stmt, bool)>,
}

// States of a schema body's statements (see `schema::Frame`).
pub(crate) const PENDING: u8 = 0;
pub(crate) const RUNNING: u8 = 1;
pub(crate) const DONE: u8 = 2;

/// A setter run: for one inside an `if` statement, the statement's and the stop's addresses.
struct Stop {
    if_stmt: usize,
    or_else: bool,
    stop: usize,
    reached: bool,
}

/// Upstream's lazy scope of a package's globals. Every statement runs in order; a global read
/// before all its setters have run is computed by running its last setter first (which reads
/// the value before it through the earlier setters) and cached: statements read ahead of their
/// turn run twice, as upstream runs them (instances are created twice, `_x += [2]` appends
/// twice).
#[derive(Default)]
struct Lazy {
    cache: FxHashMap<Symbol, Value>,
    /// How deep each name is being computed through its setters (0: not).
    levels: FxHashMap<Symbol, usize>,
    /// How many setters of each name have run at level 0.
    cal: FxHashMap<Symbol, usize>,
}

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
    /// Schema bodies running now (`schema_frames`) and schema expressions being evaluated
    /// (`schema_exprs`): an instance's required attributes are checked when it is made, before
    /// its `check:` block, only at the top (no enclosing body, at most its own expression), as
    /// upstream does; nested instances are checked with the instance holding them.
    pub(crate) schema_frames: Cell<u32>,
    pub(crate) schema_exprs: Cell<u32>,
    /// Set for the next instance made when a merge (`inst | {...}`) rebuilds an instance: its
    /// unknown keys are upstream's run-time error, not the one its resolver reports for a
    /// config written out.
    pub(crate) merging: Cell<bool>,
    /// Config literals being evaluated: upstream's scopes, like a lambda's or a
    /// comprehension's (see `get_global`).
    pub(crate) config_depth: Cell<u32>,
    /// The schema being instantiated next is called (`R()`), not given a config (`R {}`): a
    /// rule's failed check is then reported alone (see `run_checks`).
    pub(crate) by_call: Cell<bool>,
    /// Config keys written as interpolated strings (`"${k}": v`): upstream's resolver never
    /// sees them, so an unknown one is its run time's 'No attribute named' error.
    pub(crate) dynamic_keys: RefCell<rustc_hash::FxHashSet<Str>>,
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
            schema_frames: Cell::new(0),
            schema_exprs: Cell::new(0),
            merging: Cell::new(false),
            config_depth: Cell::new(0),
            by_call: Cell::new(false),
            dynamic_keys: RefCell::new(Default::default()),
            origins: Default::default(),
            config_ops: Default::default(),
            track_instances,
            running: RefCell::new(Vec::new()),
            comp_len: Cell::new(0),
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
            // Leaked on purpose: the evaluator holds `&'static` AST nodes. Not an owned or
            // borrowed design because (1) closures, schema types and type aliases live in
            // values as `Func::User { data: Rc<dyn Any> }`, and `Any` needs `'static`, so a
            // borrowing evaluator would need a lifetime on `Value` itself (builtins, output,
            // the public face, the policy host); (2) statement indices into kept `Arc`s would
            // add a lookup at every node the ~40 `&'static` signatures here reach; (3) it would
            // not free a run anyway: a package's globals hold closures and schema types whose
            // `Ctx` holds the package (an `Rc` cycle), so that cycle has to be broken first
            // (e.g. clearing globals when the evaluator drops), after which `Pkg` could own
            // these `Arc`s. Cost now: a module parsed once (the parse cache shares them) stays
            // for the process.
            let m: &'static ast::Module = Box::leak(Box::new(m));
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
        let mut setters: FxHashMap<Symbol, Vec<Setter>> = FxHashMap::default();
        for (i, s) in stmts.iter().enumerate() {
            let mut names = Vec::new();
            stmt_setters(s, None, &mut names);
            for (n, stop) in names {
                setters.entry(n).or_default().push(Setter { stmt: i, stop });
            }
        }
        let pkg = Rc::new(Pkg {
            path: path.to_string(),
            dir,
            stmts,
            setters,
            lazy: RefCell::new(Lazy::default()),
            targets: RefCell::new(Vec::new()),
            stops: RefCell::new(Vec::new()),
            current: Cell::new(0),
            globals: RefCell::new(FxHashMap::default()),
            order: RefCell::new(Vec::new()),
            imports: RefCell::new(FxHashMap::default()),
            import_stmts,
            imports_done: Cell::new(false),
            exprs: RefCell::new(Vec::new()),
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

    /// Run a package: its schemas, rules and type aliases are defined first, then every
    /// statement runs in order.
    pub fn run_pkg(&self, pkg: &Rc<Pkg>) -> EvalResult<()> {
        self.resolve_imports(pkg)?;
        for s in &pkg.stmts {
            if matches!(
                s.kind,
                StmtKind::Schema(_) | StmtKind::Rule(_) | StmtKind::TypeAlias(_)
            ) {
                let ctx = self.ctx(pkg, s.span.file);
                self.in_pkg(pkg, || self.exec_stmt(&ctx, s))?;
            }
        }
        for i in 0..pkg.stmts.len() {
            self.run_top(pkg, i, None)?;
        }
        Ok(())
    }

    /// Run package-level statement `i` (in order, or as a setter of a global read ahead of
    /// it: `stop` ends an `if` statement after the assignment that setter stands for).
    fn run_top(&self, pkg: &Rc<Pkg>, i: usize, setter: Option<&Setter>) -> EvalResult<()> {
        let s = pkg.stmts[i];
        if matches!(
            s.kind,
            StmtKind::Import(_) | StmtKind::Schema(_) | StmtKind::Rule(_) | StmtKind::TypeAlias(_)
        ) {
            return Ok(());
        }
        let ctx = self.ctx(pkg, s.span.file);
        if let Some(st) = setter {
            pkg.stops.borrow_mut().push(match st.stop {
                Some((stop, or_else)) => Stop {
                    if_stmt: s as *const Stmt as usize,
                    or_else,
                    stop: stop as *const Stmt as usize,
                    reached: false,
                },
                None => Stop {
                    if_stmt: 0,
                    or_else: false,
                    stop: 0,
                    reached: false,
                },
            });
        }
        let r = self.in_pkg(pkg, || self.exec_top(&ctx, s));
        if setter.is_some() {
            pkg.stops.borrow_mut().pop();
        }
        // upstream outputs no call's value (a function may return nothing)
        if let (Ok(Some(v)), StmtKind::Expr(e)) = (&r, &s.kind)
            && !matches!(e.kind, crate::ast::ExprKind::Call { .. })
            && !matches!(v, Value::None | Value::Undefined)
        {
            // upstream outputs a function value as 0 and a unit as its float
            let v = match v {
                Value::Func(_) => Value::Int(0),
                Value::Unit(u) => Value::Float(u.value()),
                v => v.clone(),
            };
            pkg.exprs.borrow_mut().push((v, s.span));
        }
        r.map(|_| ())
    }

    /// A package-level statement (also one inside a package-level `if`): the names it assigns
    /// are its targets while it runs; a setter run stops after its assignment.
    fn exec_top(&self, ctx: &Ctx, s: &'static Stmt) -> EvalResult<Option<Value>> {
        let pkg = &ctx.pkg;
        let addr = s as *const Stmt as usize;
        // the branch a setter run is restricted to (`Some(true)`: the else branch)
        let mut only = None;
        if let Some(top) = pkg.stops.borrow_mut().last_mut() {
            if top.reached {
                return Ok(None);
            }
            if top.stop == addr {
                top.reached = true;
            }
            if top.if_stmt == addr {
                only = Some(top.or_else);
            }
        }
        let target = match &s.kind {
            StmtKind::Assign(a) => a.targets.first().map(|t| t.name.sym),
            StmtKind::AugAssign(a) => Some(a.target.name.sym),
            StmtKind::Unification(u) => Some(u.target.sym),
            StmtKind::SchemaAttr(a) => Some(a.name.sym),
            _ => None,
        };
        if let Some(t) = target {
            pkg.targets.borrow_mut().push(t);
        }
        let outer = pkg.current.replace(addr);
        let r = match &s.kind {
            StmtKind::If(i) => (|| {
                let cond = self.eval(ctx, &i.cond)?.truthy();
                let body = match (cond, only) {
                    (true, None | Some(false)) => &i.body,
                    (false, None | Some(true)) => &i.orelse,
                    _ => return Ok(None),
                };
                let mut last = None;
                for st in body {
                    last = self.exec_top(ctx, st)?;
                }
                Ok(last)
            })(),
            _ => self.exec_stmt(ctx, s),
        };
        pkg.current.set(outer);
        if target.is_some() {
            pkg.targets.borrow_mut().pop();
        }
        r
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
                        crate::value::json::to_json(v).to_string()
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
                                crate::value::json::to_json(x).to_string()
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
                .and_then(|v| v.first().map(|x| x.stmt))
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
                is_type: false,
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

    /// Read a global of `pkg` the way upstream's lazy scope does: the value being assigned by
    /// the running statement reads as it is; a cached value is final; else the name's setters
    /// run, last first, each reading the value before it through the one before it.
    ///
    /// Read from a nested scope (`nested`: a lambda, a comprehension, a config literal), a
    /// setter run this way leaves the package's variable as it was, as upstream's stores
    /// that value in the scope it ran in: the statement, when reached, starts afresh (a
    /// unification does not merge onto it).
    pub fn get_global(
        &self,
        pkg: &Rc<Pkg>,
        name: Symbol,
        nested: bool,
    ) -> EvalResult<Option<Value>> {
        let Some(setters) = pkg.setters.get(&name) else {
            return Ok(pkg.globals.borrow().get(&name).cloned());
        };
        let current = || {
            Some(
                pkg.globals
                    .borrow()
                    .get(&name)
                    .cloned()
                    .unwrap_or(Value::Undefined),
            )
        };
        let level = pkg.lazy.borrow().levels.get(&name).copied().unwrap_or(0);
        if pkg.targets.borrow().last() == Some(&name) && (level == 0 || setters.len() <= 1) {
            return Ok(current());
        }
        if let Some(v) = pkg.lazy.borrow().cache.get(&name) {
            return Ok(Some(v.clone()));
        }
        let next = level + 1;
        if next > setters.len() {
            return Ok(current());
        }
        let setter = setters[setters.len() - next];
        pkg.lazy.borrow_mut().levels.insert(name, next);
        let before = nested.then(|| pkg.globals.borrow().get(&name).cloned());
        self.run_top(pkg, setter.stmt, Some(&setter))?;
        let v = current();
        if let Some(before) = before {
            let mut g = pkg.globals.borrow_mut();
            match before {
                Some(b) => {
                    g.insert(name, b);
                }
                None => {
                    if g.remove(&name).is_some() {
                        let mut order = pkg.order.borrow_mut();
                        if let Some(i) = order.iter().rposition(|n| *n == name) {
                            order.remove(i);
                        }
                    }
                }
            }
        }
        let mut lz = pkg.lazy.borrow_mut();
        lz.levels.insert(name, level);
        if let Some(v) = &v {
            lz.cache.insert(name, v.clone());
        }
        Ok(v)
    }

    fn set_global(&self, pkg: &Rc<Pkg>, name: Symbol, v: Value) {
        {
            let mut lz = pkg.lazy.borrow_mut();
            // at level 0, the value of the last setter (or of every setter having run) is final
            if lz.levels.get(&name).copied().unwrap_or(0) == 0 {
                let setters = pkg.setters.get(&name).map_or(&[][..], Vec::as_slice);
                let cal = lz.cal.entry(name).or_insert(0);
                *cal += 1;
                let last = setters.last().map(|st| match st.stop {
                    Some((stop, _)) => stop as *const Stmt as usize,
                    None => pkg.stmts[st.stmt] as *const Stmt as usize,
                });
                if *cal >= setters.len() || last == Some(pkg.current.get()) {
                    lz.cache.insert(name, v.clone());
                }
            }
        }
        let mut g = pkg.globals.borrow_mut();
        if g.insert(name, v).is_none() {
            pkg.order.borrow_mut().push(name);
        }
    }

    /// A package-level name declared by unification (`a: S {...}`) stands for its schema where
    /// it is called or given a config, as upstream's (`a()` and `a {...}` make a new `S`, the
    /// instance's config left out); `None` for other names, and where a local or a schema
    /// attribute may shadow it.
    pub(crate) fn unified_schema(&self, ctx: &Ctx, name: Symbol) -> EvalResult<Option<Value>> {
        if ctx.schema.is_some()
            || ctx
                .locals
                .as_ref()
                .is_some_and(|l| l.lookup(name).is_some())
        {
            return Ok(None);
        }
        let Some(setters) = ctx.pkg.setters.get(&name) else {
            return Ok(None);
        };
        for st in setters.iter().filter(|st| st.stop.is_none()) {
            if let StmtKind::Unification(u) = &ctx.pkg.stmts[st.stmt].kind
                && let crate::ast::ExprKind::Schema(se) = &u.value.kind
            {
                return self.eval_identifier(ctx, &se.name).map(Some);
            }
        }
        Ok(None)
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
        let nested = ctx.locals.is_some() || ctx.schema.is_some() || self.config_depth.get() > 0;
        if let Some(v) = self.get_global(&ctx.pkg, name, nested)? {
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
        // a name no scope has is Undefined at run time, as in upstream's evaluator: its
        // resolver reports the unknown names it looks at, and leaves some alone (rule checks,
        // `format`'s keyword arguments, the index of an `any` value)
        let _ = span;
        Ok(Value::Undefined)
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
                    v = self.convert_type(ctx, v, ty, a.value.span)?;
                }
                for t in &a.targets {
                    self.assign_target(ctx, t, v.clone(), a.ty.as_ref())?;
                }
                // the value assigned is the statement's value (a lambda's last statement)
                Ok(ctx.in_lambda.then_some(v))
            }
            StmtKind::AugAssign(a) => {
                let cur = self.read_target(ctx, &a.target)?;
                let rhs = self.eval(ctx, &a.value)?;
                let v = self.binop(a.op.bin_op(), &cur, &rhs, s.span)?;
                self.assign_target(ctx, &a.target, v.clone(), None)?;
                Ok(ctx.in_lambda.then_some(v))
            }
            StmtKind::Unification(u) => {
                if ctx.schema.is_none() && ctx.locals.is_none() {
                    return self.unify_global(ctx, u).map(|_| None);
                }
                let cur = self.lookup_opt_for_unify(ctx, u.target.sym)?;
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
                    // without a message upstream reports nothing more
                    return Err(EvalError::new(ErrKind::Assertion, msg, Some(a.test.span)));
                }
                Ok(None)
            }
            StmtKind::If(_) if ctx.schema.is_none() && ctx.locals.is_none() => {
                self.exec_top(ctx, s)
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
                    is_type: false,
                }));
                self.define(ctx, t.name.sym, v);
                Ok(None)
            }
        }
    }

    /// `a: S {...}` at package level (the main package's declarations of one name are merged
    /// into one before evaluation, see `parser::merge`): a value the name already holds is
    /// unified with the new instance, whose values win (its defaults included), as upstream.
    fn unify_global(&self, ctx: &Ctx, u: &'static ast::UnificationStmt) -> EvalResult<()> {
        let pkg = &ctx.pkg;
        let name = u.target.sym;
        let existing = pkg
            .globals
            .borrow()
            .get(&name)
            .cloned()
            .filter(|v| !v.is_none_or_undefined());
        let v = self.eval(ctx, &u.value)?;
        let v = match existing {
            // a dict assigned before: upstream's result is the instance (its values winning),
            // listing the schema's attributes first, then the dict's other keys, then the
            // instance's own extra keys
            Some(Value::Dict(d)) if matches!(v, Value::Schema(_)) => {
                let merged = self.union_eval(Value::Dict(d.clone()), &v, u.value.span)?;
                match (&v, &merged, &v) {
                    (Value::Schema(inst), Value::Dict(m), _) => {
                        let order = self.declared_order(inst).unwrap_or_default();
                        let mut attrs = crate::value::Dict::new();
                        let keys = order
                            .iter()
                            .chain(d.map.keys())
                            .chain(inst.attrs.map.keys())
                            .chain(m.map.keys());
                        for k in keys {
                            if !attrs.map.contains_key(k)
                                && let Some(x) = m.map.get(k)
                            {
                                attrs.map.insert(k.clone(), x.clone());
                            }
                        }
                        attrs.ops = inst.attrs.ops.clone();
                        Value::Schema(std::rc::Rc::new(crate::value::SchemaInst {
                            attrs,
                            ..(**inst).clone()
                        }))
                    }
                    _ => merged,
                }
            }
            Some(c) => self.union_eval(c, &v, u.value.span)?,
            None => v,
        };
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
                    // an index into nothing: upstream's subscript error
                    if let Some(ast::TargetPath::Index(ix)) = t.path.first() {
                        let i = self.eval(ctx, ix)?;
                        return Err(EvalError::new(
                            ErrKind::Evaluation,
                            format!(
                                "'{ty}' object is not subscriptable with '{}'",
                                i.type_name()
                            ),
                            Some(t.span),
                        ));
                    }
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

/// The globals a package-level statement assigns, as upstream's lazy scope lists them: each
/// assignment inside an `if` (however nested) is a setter of its own that stops after it.
fn stmt_setters(
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
