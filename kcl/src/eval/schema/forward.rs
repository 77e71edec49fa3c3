//! Upstream's key order for an instance of a schema defined before its base, or made before
//! the schema's own statement has run.
//!
//! Upstream defines a package's schemas as its statements run. A schema's key list is its
//! base's list as defined at that moment, then its own attributes; a base not yet defined is
//! defined on the spot, but only one level deep (its own undefined base adds nothing), and an
//! instance made before its schema's statement uses such a shallow definition. Keys missing
//! from the list follow in the usual order (base first). A package that defines every base
//! before the statements that could need it never sees this and keeps no timeline.

use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::ast::{SchemaKind, Stmt, StmtKind};

/// A step of a key list, relative to the schema it belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Step {
    /// The attributes of the schema `n` levels up (0: its own, with its mixins').
    Level(u32),
    /// The attributes of every schema from `n` levels up to the base, base first.
    From(u32),
}

#[derive(Clone, Copy)]
enum Base {
    None,
    /// A base from another package (defined before this package runs).
    Outside,
    /// A base among this package's schemas (its index in `Timeline::stmt`).
    Local(usize),
}

/// When each of a package's schemas got which key list.
pub(crate) struct Timeline {
    /// Per schema: its statement's index among the package's statements.
    stmt: Vec<usize>,
    base: Vec<Base>,
    /// Per schema, by its statement's address.
    by_addr: FxHashMap<usize, usize>,
    /// Per schema: `(statement index, key list)` in the order the statements define them.
    events: Vec<Vec<(usize, Rc<[Step]>)>>,
}

impl Timeline {
    /// The package's timeline, or `None` when no schema can get an unusual key list.
    pub(crate) fn build(stmts: &[&'static Stmt]) -> Option<Timeline> {
        let mut idx: FxHashMap<crate::ast::Symbol, usize> = FxHashMap::default();
        let mut t = Timeline {
            stmt: Vec::new(),
            base: Vec::new(),
            by_addr: FxHashMap::default(),
            events: Vec::new(),
        };
        let mut schemas = Vec::new();
        for (i, s) in stmts.iter().enumerate() {
            if let StmtKind::Schema(sc) = &s.kind
                && sc.kind == SchemaKind::Schema
            {
                idx.insert(sc.name.sym, t.stmt.len());
                t.by_addr.insert(&**sc as *const _ as usize, t.stmt.len());
                t.stmt.push(i);
                schemas.push(&**sc);
            }
        }
        t.base = schemas
            .iter()
            .map(|sc| match &sc.parent {
                None => Base::None,
                Some(p) => match p.names.as_slice() {
                    [n] => idx.get(&n.sym).map_or(Base::Outside, |&j| Base::Local(j)),
                    _ => Base::Outside,
                },
            })
            .collect();
        // nothing unusual unless some schema's local base is defined after a statement that
        // could instantiate the schema or define it (its own statement included)
        let first_plain = stmts
            .iter()
            .position(|s| {
                !matches!(
                    s.kind,
                    StmtKind::Schema(_)
                        | StmtKind::Rule(_)
                        | StmtKind::TypeAlias(_)
                        | StmtKind::Import(_)
                )
            })
            .unwrap_or(usize::MAX);
        let unusual = (0..t.stmt.len()).any(|j| match t.base[j] {
            Base::Local(p) => t.stmt[p] > first_plain.min(t.stmt[j]),
            _ => false,
        });
        if !unusual {
            return None;
        }
        t.events = vec![Vec::new(); t.stmt.len()];
        for j in 0..t.stmt.len() {
            let at = t.stmt[j];
            let list = t.define(j, at, false);
            t.events[j].push((at, list));
        }
        Some(t)
    }

    /// Schema `j`'s key list when its statement runs while statement `now` runs in order, or
    /// `lazily` (a use ahead of its statement). In order, a base not defined yet is defined
    /// lazily on the spot, and stays so. A lazy definition defines a base written before it
    /// again (lazily, not kept) and follows no base written after it, defined or not.
    fn define(&mut self, j: usize, now: usize, lazily: bool) -> Rc<[Step]> {
        let Base::Local(p) = self.base[j] else {
            return Rc::from([Step::From(1), Step::Level(0)]);
        };
        if lazily {
            if self.stmt[p] < self.stmt[j] {
                return own_after(&self.define(p, now, true));
            }
            return Rc::from([Step::Level(0)]);
        }
        if let Some(l) = self.latest(p, now) {
            return own_after(&l);
        }
        let l = self.define(p, now, true);
        self.events[p].push((now, l.clone()));
        own_after(&l)
    }

    /// The key list of the schema whose statement is at `addr` for an instance made while
    /// top-level statement `running` runs (`None`: after the package ran), when it is not
    /// the usual one (every level, base first).
    pub(crate) fn steps(&self, addr: usize, running: Option<usize>) -> Option<Rc<[Step]>> {
        let &j = self.by_addr.get(&addr)?;
        let list = match running {
            None => self.events[j].last().map(|(_, l)| l.clone())?,
            Some(at) => match self.latest(j, at) {
                Some(l) => l,
                // made ahead of its statement: defined lazily there (nothing is recorded; a
                // later use ahead of it defines it alike)
                None => self.lazy_copy().define(j, at, true),
            },
        };
        (*list != [Step::From(1), Step::Level(0)]).then_some(list)
    }

    /// A scratch copy whose events a lazy definition may add to.
    fn lazy_copy(&self) -> Timeline {
        Timeline {
            stmt: self.stmt.clone(),
            base: self.base.clone(),
            by_addr: FxHashMap::default(),
            events: self.events.clone(),
        }
    }

    /// The list the schema got last, up to statement `at`.
    fn latest(&self, j: usize, at: usize) -> Option<Rc<[Step]>> {
        self.events[j]
            .iter()
            .rev()
            .find(|(i, _)| *i <= at)
            .map(|(_, l)| l.clone())
    }
}

/// A subschema's list from its base's: the base's steps one level further up, then its own.
fn own_after(base: &[Step]) -> Rc<[Step]> {
    base.iter()
        .map(|s| match *s {
            Step::Level(n) => Step::Level(n + 1),
            Step::From(n) => Step::From(n + 1),
        })
        .chain([Step::Level(0)])
        .collect()
}

/// The inheritance levels (0: the base) a key list names in order, each once, for a schema at
/// level `top`.
pub(crate) fn levels(steps: &[Step], top: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for s in steps {
        let range = match *s {
            Step::Level(n) if n <= top => (top - n)..=(top - n),
            Step::From(n) if n <= top => 0..=(top - n),
            _ => continue,
        };
        for l in range {
            if !out.contains(&l) {
                out.push(l);
            }
        }
    }
    out
}
