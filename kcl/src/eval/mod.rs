//! The evaluator: loads packages, evaluates statements with upstream's order-independent
//! semantics (a name read before its remaining assignments ran triggers them first), builds
//! schema instances, and calls functions. Here: the evaluator's state, packages, scopes and
//! name lookup; building a package from its modules is in `pkg.rs`, the lazy globals in
//! `globals.rs`, statements in `stmt.rs`, imports in `imports.rs`, a package's output in
//! `output.rs`, expressions in `expr.rs` (with `config.rs`, `comp.rs`, `call.rs`), schemas in
//! `schema/`, and where upstream's runtime reports an error (the node it walked last) in
//! `walked.rs`.
//!
//! Closures, schema types and statements point into the syntax trees as `&'static` nodes
//! without reference counting; the package that holds the module keeps it alive (see
//! [`Evaluator::make_pkg`]).

mod call;
mod comp;
mod config;
mod error;
mod expr;
mod globals;
use globals::Stop;
mod imports;
mod output;
mod pkg;
use pkg::stmt_setters;
mod schema;
mod stmt;
mod types;
mod walked;

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
    /// A schema attribute's conversion error notes where the instance is made.
    pub note_instances: bool,
    /// What `file.*` and `file.read_env` may reach.
    pub access: crate::access::Access,
    /// Schema expressions the checker did not check (see [`crate::types::Checked`]).
    pub unchecked_configs: rustc_hash::FxHashSet<Span>,
}

/// A loaded package: its statements (from every file) and global variables.
pub struct Pkg {
    pub path: String,
    /// The package's folder (not read by the evaluator today; kept with the package it names).
    #[allow(dead_code)]
    pub dir: PathBuf,
    /// The syntax trees `stmts` point into, and every schema type, closure and type alias made
    /// here (each holds this package through its `Ctx`): they live as long as the package.
    _modules: Vec<Arc<ast::Module>>,
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
    /// One past the index of the package-level statement running now (0: none).
    top: Cell<usize>,
    /// When the package's schemas got unusual key lists (see `schema::forward`).
    forward: Option<schema::forward::Timeline>,
    globals: RefCell<FxHashMap<Symbol, Value>>,
    /// Global names in first-assignment order (the output order).
    order: RefCell<Vec<Symbol>>,
    imports: RefCell<FxHashMap<(FileId, Symbol), Value>>,
    import_stmts: Vec<(FileId, &'static ast::ImportStmt, Span)>,
    imports_done: Cell<bool>,
    /// Values of top-level expression statements (configs, lists, numbers): output documents.
    pub exprs: RefCell<Vec<(Value, Span)>>,
    /// Where in `exprs` the last schema expression's value stands: the next one replaces it
    /// (upstream's rule; before any, index 0, whatever it holds).
    schema_expr_at: Cell<usize>,
    #[cfg(test)]
    _live: live::Token,
}

/// Packages alive on this thread, for the tests that check a run gives its memory back.
#[cfg(test)]
pub(crate) mod live {
    use std::cell::Cell;

    thread_local!(static LIVE: Cell<usize> = const { Cell::new(0) });

    pub(crate) struct Token;

    impl Token {
        pub(crate) fn new() -> Token {
            LIVE.with(|n| n.set(n.get() + 1));
            Token
        }
    }

    impl Drop for Token {
        fn drop(&mut self) {
            LIVE.with(|n| n.set(n.get() - 1));
        }
    }

    /// How many packages of evaluators on this thread are still alive.
    pub(crate) fn packages() -> usize {
        LIVE.with(Cell::get)
    }
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
    /// A config literal's keys, names for its later entries.
    keys: bool,
}

impl Pkg {
    /// Drops the values the package holds (globals, imports, output documents): closures and
    /// schema types keep their package through their context, an `Rc` cycle that would
    /// otherwise outlive the run (see `Evaluator`'s `Drop`).
    fn release_values(&self) {
        // taken out first so no value is dropped while a cell is borrowed
        let globals = std::mem::take(&mut *self.globals.borrow_mut());
        for v in globals.values() {
            if let Some(t) = schema::as_schema_type(v) {
                t.release();
            }
        }
        let lazy = std::mem::take(&mut self.lazy.borrow_mut().cache);
        let imports = std::mem::take(&mut *self.imports.borrow_mut());
        let exprs = std::mem::take(&mut *self.exprs.borrow_mut());
        drop((globals, lazy, imports, exprs));
    }
}

impl Drop for Evaluator {
    /// A host that evaluates again and again in one process (`kusionctl server`, the policy
    /// plugin) must get each run's memory back: the cycles through package values are cut
    /// here. Values the host took out of the run stay valid; a function among them can no
    /// longer reach its package's globals, and nothing can call it without an evaluator.
    fn drop(&mut self) {
        for pkg in self.pkgs.get_mut().values() {
            pkg.release_values();
        }
        // a closure made in a schema body or a lambda can sit among the values of the frame or
        // scope it captured
        for (frame, scope) in std::mem::take(self.captures.get_mut()) {
            if let Some(f) = frame.upgrade() {
                drop(std::mem::take(&mut *f.attrs.borrow_mut()));
            }
            let mut scope = scope.upgrade();
            while let Some(s) = scope {
                drop(std::mem::take(&mut *s.vars.borrow_mut()));
                scope = s.parent.clone();
            }
        }
        drop(std::mem::take(self.running.get_mut()));
        drop(std::mem::take(self.origins.get_mut()));
        drop(std::mem::take(self.config_ops.get_mut()));
    }
}

impl Scope {
    fn new(parent: Option<Rc<Scope>>) -> Rc<Scope> {
        Rc::new(Scope {
            vars: RefCell::new(FxHashMap::default()),
            parent,
            looped: false,
            keys: false,
        })
    }
    fn new_loop(parent: Option<Rc<Scope>>) -> Rc<Scope> {
        Rc::new(Scope {
            vars: RefCell::new(FxHashMap::default()),
            parent,
            looped: true,
            keys: false,
        })
    }
    fn new_keys(parent: Option<Rc<Scope>>) -> Rc<Scope> {
        Rc::new(Scope {
            vars: RefCell::new(FxHashMap::default()),
            parent,
            looped: false,
            keys: true,
        })
    }
    /// A scope holding the values every scope of `chain` binds now (the innermost binding of
    /// each name), in front of the chain itself; `None` without local scopes.
    fn snapshot(chain: &Option<Rc<Scope>>) -> Option<Rc<Scope>> {
        let top = chain.as_ref()?;
        let mut vars: FxHashMap<Symbol, Value> = FxHashMap::default();
        let mut cur = Some(top.clone());
        while let Some(sc) = cur {
            for (k, v) in sc.vars.borrow().iter() {
                vars.entry(*k).or_insert_with(|| v.clone());
            }
            cur = sc.parent.clone();
        }
        Some(Rc::new(Scope {
            vars: RefCell::new(vars),
            parent: Some(top.clone()),
            looped: false,
            keys: false,
        }))
    }
    /// The value of `s` and whether a config literal's key binds it.
    fn lookup_binding(&self, s: Symbol) -> Option<(Value, bool)> {
        if let Some(v) = self.vars.borrow().get(&s) {
            return Some((v.clone(), self.keys));
        }
        self.parent.as_ref().and_then(|p| p.lookup_binding(s))
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

impl Ctx {
    /// This context with a fresh scope for a comprehension's loop variables.
    fn in_loop(&self) -> Ctx {
        Ctx {
            locals: Some(Scope::new_loop(self.locals.clone())),
            ..self.clone()
        }
    }
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
    /// Its first dotted parameter (`lambda a.b {}`), which fails every call; found once
    /// here, not at each call.
    pub dotted: Option<ast::Symbol>,
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
    /// The expression or statement evaluated last: where upstream's runtime places an error
    /// raised after the fact (a required attribute found missing, as its panic position is
    /// the node it walked last).
    pub(crate) last_pos: Cell<Option<&'static Span>>,
    /// The node a schema body walked last, and the position restored after it (see
    /// [`Evaluator::program_end_pos`]).
    pub(crate) body_walked: Cell<Option<(&'static Span, Option<&'static Span>)>>,
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
    /// Names declared by unification that a config was given to (`a {...}`): a call of one
    /// then makes a new instance of its schema (see `unified_schema`).
    pub(crate) unified_configured: RefCell<rustc_hash::FxHashSet<Symbol>>,
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
    /// The schema frame and local scope each closure was made in (see `Drop`).
    captures: RefCell<Vec<(std::rc::Weak<schema::Frame>, std::rc::Weak<Scope>)>>,
    /// Every module given to [`Evaluator::make_pkg`]: positions kept between packages
    /// (`last_pos`, `body_walked`) and nodes keyed by address stay valid for the run even
    /// where a package is replaced (`kcl test` makes one main package per test file).
    modules: RefCell<Vec<Arc<ast::Module>>>,
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
            last_pos: Cell::new(None),
            body_walked: Cell::new(None),
            schema_exprs: Cell::new(0),
            merging: Cell::new(false),
            config_depth: Cell::new(0),
            by_call: Cell::new(false),
            dynamic_keys: RefCell::new(Default::default()),
            unified_configured: RefCell::new(Default::default()),
            origins: Default::default(),
            config_ops: Default::default(),
            track_instances,
            running: RefCell::new(Vec::new()),
            comp_len: Cell::new(0),
            captures: RefCell::new(Vec::new()),
            modules: RefCell::new(Vec::new()),
        };
        (ev, program.main.modules)
    }

    /// Notes what a closure made in `ctx` captures, so the run's end can cut the cycle it may
    /// close (a lambda kept in the frame or scope it captured).
    pub(crate) fn captured(&self, ctx: &Ctx) {
        if ctx.schema.is_none() && ctx.locals.is_none() {
            return;
        }
        let frame = ctx
            .schema
            .as_ref()
            .map_or_else(std::rc::Weak::new, Rc::downgrade);
        let scope = ctx
            .locals
            .as_ref()
            .map_or_else(std::rc::Weak::new, Rc::downgrade);
        self.captures.borrow_mut().push((frame, scope));
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

    // ------------------------------------------------------------------- imports ------

    // ------------------------------------------------------------------- names --------

    /// A package-level name declared by unification (`a: S {...}`) stands for its schema where
    /// it is called or given a config, as upstream's (`a()` and `a {...}` make a new `S`, the
    /// instance's config left out); `None` for other names, and where a local or a schema
    /// attribute may shadow it.
    pub(crate) fn unified_schema(&self, ctx: &Ctx, name: Symbol) -> EvalResult<Option<Value>> {
        // the package's statements first: calls of names nobody declares by unification (nearly
        // all) stop here without walking the local scopes
        let Some(setters) = ctx.pkg.setters.get(&name) else {
            return Ok(None);
        };
        let Some(se) = setters
            .iter()
            .filter(|st| st.stop.is_none())
            .find_map(|st| match &ctx.pkg.stmts[st.stmt].kind {
                StmtKind::Unification(u) => match &u.value.kind {
                    crate::ast::ExprKind::Schema(se) => Some(se),
                    _ => None,
                },
                _ => None,
            })
        else {
            return Ok(None);
        };
        if ctx.schema.is_some()
            || ctx
                .locals
                .as_ref()
                .is_some_and(|l| l.lookup(name).is_some())
        {
            return Ok(None);
        }
        self.eval_identifier(ctx, &se.name).map(Some)
    }

    /// Resolve a name in `ctx`.
    pub fn lookup(&self, ctx: &Ctx, name: Symbol, span: Span) -> EvalResult<Value> {
        self.lookup_as(ctx, name, span, false)
    }

    /// The value of the name `name` read as a value: an imported module is Undefined there
    /// (upstream), where [`Evaluator::lookup`] gives it (a selector's receiver, a type name).
    pub(crate) fn lookup_value(&self, ctx: &Ctx, name: Symbol, span: Span) -> EvalResult<Value> {
        self.lookup_as(ctx, name, span, true)
    }

    fn lookup_as(&self, ctx: &Ctx, name: Symbol, span: Span, value: bool) -> EvalResult<Value> {
        if let Some(l) = &ctx.locals
            && let Some((v, key)) = l.lookup_binding(name)
        {
            // in a schema body (not a lambda in it) upstream's runtime finds an attribute of
            // the schema before a config literal's key of that name
            if let Some(fr) = &ctx.schema
                && key
                && !ctx.in_lambda
                && fr.declares(name)
            {
                return Ok(self.schema_lookup(fr, name)?.unwrap_or(Value::Undefined));
            }
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
                return Ok(if value { Value::Undefined } else { v.clone() });
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
            return Ok(if value { Value::Undefined } else { v });
        }
        // a name no scope has is Undefined at run time, as in upstream's evaluator: its
        // resolver reports the unknown names it looks at, and leaves some alone (rule checks,
        // `format`'s keyword arguments, the index of an `any` value)
        let _ = span;
        Ok(Value::Undefined)
    }

    // ---------------------------------------------------------------- statements ------

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
