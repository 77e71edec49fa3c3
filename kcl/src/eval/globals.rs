//! Upstream's order-independent globals: every package-level statement runs in order, and a
//! global read before all its setters have run is computed through them first (see `Lazy` in `mod.rs`).
//! A setter run's stop (`Stop`, shared with the schemas' lazy scope) is here too.

use super::*;

impl Evaluator {
    /// Run a package: its schemas, rules and type aliases are defined first, then every
    /// statement runs in order.
    pub fn run_pkg(&self, pkg: &Rc<Pkg>) -> EvalResult<()> {
        self.run_pkg_stmts(pkg).map_err(|e| self.at_walked_line(e))
    }

    fn run_pkg_stmts(&self, pkg: &Rc<Pkg>) -> EvalResult<()> {
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
                    nested: false,
                },
                None => Stop {
                    if_stmt: 0,
                    or_else: false,
                    stop: 0,
                    reached: false,
                    nested: false,
                },
            });
        }
        let outer = pkg.top.replace(i + 1);
        let r = self.in_pkg(pkg, || self.exec_top(&ctx, s));
        pkg.top.set(outer);
        if setter.is_some() {
            pkg.stops.borrow_mut().pop();
            Stop::nested_run(&pkg.stops);
        }
        if let Ok(Some(v)) = &r {
            self.note_expr_value(pkg, s, v);
        }
        r.map(|_| ())
    }

    /// A top-level expression statement's value (one inside a top-level `if` too) is an
    /// output document: upstream outputs no call's value (a function may return nothing).
    fn note_expr_value(&self, pkg: &Rc<Pkg>, s: &'static Stmt, v: &Value) {
        let StmtKind::Expr(e) = &s.kind else {
            return;
        };
        // (None is a document: alone it prints `null`)
        if matches!(e.kind, crate::ast::ExprKind::Call { .. }) || matches!(v, Value::Undefined) {
            return;
        }
        // upstream outputs a function value as 0 and a unit as its float
        let v = match v {
            Value::Func(_) => Value::Int(0),
            Value::Unit(u) => Value::Float(u.value()),
            v => v.clone(),
        };
        let mut exprs = pkg.exprs.borrow_mut();
        // a schema expression's value (`S {..}`) takes the place of the one before it, or
        // of the first value when there was none, as upstream's
        if matches!(e.kind, crate::ast::ExprKind::Schema { .. }) {
            let at = pkg.schema_expr_at.get();
            if at < exprs.len() {
                exprs.remove(at);
            }
            exprs.push((v, s.span));
            pkg.schema_expr_at.set(exprs.len() - 1);
        } else {
            exprs.push((v, s.span));
        }
    }

    /// A package-level statement (also one inside a package-level `if`): the names it assigns
    /// are its targets while it runs; a setter run stops after its assignment.
    pub(super) fn exec_top(&self, ctx: &Ctx, s: &'static Stmt) -> EvalResult<Option<Value>> {
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
        let target = super::stmt::stmt_target(s);
        if let Some(t) = target {
            pkg.targets.borrow_mut().push(t);
        }
        let outer = pkg.current.replace(addr);
        let r = match &s.kind {
            StmtKind::If(i) => (|| {
                let cond = self.eval(ctx, &i.cond)?.truthy();
                // (a setter run by the condition may have reset the restriction)
                let only = only.and(Stop::branch_of(&pkg.stops, addr));
                let body = match (cond, only) {
                    (true, None | Some(false)) => &i.body,
                    (false, None | Some(true)) => &i.orelse,
                    _ => return Ok(None),
                };
                let mut last = None;
                for st in body {
                    last = self.exec_top(ctx, st)?;
                    // (a setter run of a name set in the branch outputs nothing)
                    if let Some(v) = &last
                        && pkg.stops.borrow().is_empty()
                    {
                        self.note_expr_value(pkg, st, v);
                    }
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

    pub(super) fn set_global(&self, pkg: &Rc<Pkg>, name: Symbol, v: Value) {
        self.set_global_as(pkg, name, v, true);
    }

    /// [`Self::set_global`]; without `recache`, a value a read computed ahead stays what
    /// later reads get (upstream's unification statement, run in order after such a read,
    /// merges onto that value again and outputs the result, but reads keep the first).
    pub(super) fn set_global_as(&self, pkg: &Rc<Pkg>, name: Symbol, v: Value, recache: bool) {
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
                if (*cal >= setters.len() || last == Some(pkg.current.get()))
                    && (recache || !lz.cache.contains_key(&name))
                {
                    lz.cache.insert(name, v.clone());
                }
            }
        }
        let mut g = pkg.globals.borrow_mut();
        if g.insert(name, v).is_none() {
            pkg.order.borrow_mut().push(name);
        }
    }
}

/// A setter run: for one inside an `if` statement, the statement's and the stop's addresses.
pub(super) struct Stop {
    pub(super) if_stmt: usize,
    pub(super) or_else: bool,
    pub(super) stop: usize,
    pub(super) reached: bool,
    /// Another setter ran inside this run (a name read ahead).
    pub(super) nested: bool,
}

impl Stop {
    /// A setter ran inside the innermost run. Upstream restricts a setter's `if` to its branch
    /// only while its current statement is that `if`; a setter run from the condition walks
    /// other statements, so the `if` then takes the branch its condition chooses.
    pub(super) fn nested_run(stops: &RefCell<Vec<Stop>>) {
        if let Some(top) = stops.borrow_mut().last_mut() {
            top.nested = true;
        }
    }

    /// The branch the `if` at `addr` is restricted to, if the innermost run restricts it.
    pub(super) fn branch_of(stops: &RefCell<Vec<Stop>>, addr: usize) -> Option<bool> {
        stops
            .borrow()
            .last()
            .filter(|t| t.if_stmt == addr && !t.nested)
            .map(|t| t.or_else)
    }
}
