//! Upstream's pre-evaluation merge of the main package: every top-level `name: S {...}` and
//! `name = S {...}` of one name, across all files of the main package, becomes a single
//! statement at the position of the last one, holding all their config entries regrouped by
//! key. Evaluation order (so `Schema.instances()` order and the order of documents a renderer
//! builds from it) and the order of entries after such merges follow from this rewrite, so it
//! is done on the tree, as upstream does, rather than emulated during evaluation.
//!
//! Regrouping ([`unify_entries`]): entries are bucketed by key name (`a`, `"a"` and `a.b.c`
//! all go to bucket `a`; unpacks, `if` entries and computed keys share one bucket) in order of
//! first appearance, and an `=` entry drops the entries before it in its bucket; the same is
//! done recursively inside schema and config values. (Later upstream releases also fold the
//! entries of a bucket into its first schema expression; 0.12 and 0.13 do not.)

use std::sync::Arc;

use crate::ast::{
    ConfigEntry, ConfigEntryKind, ConfigOp, Expr, ExprKind, Module, SchemaExpr, Stmt, StmtKind,
    Symbol,
};

use super::loader::Program;

/// Merge the main package's repeated schema declarations (see the module docs).
pub fn merge_main(program: &mut Program) {
    let modules = &mut program.main.modules;
    // name -> (module, statement) of each declaration, in program order
    let mut decls: indexmap::IndexMap<Symbol, Vec<(usize, usize)>> = indexmap::IndexMap::new();
    for (mi, m) in modules.iter().enumerate() {
        for (si, s) in m.body.iter().enumerate() {
            match &s.kind {
                StmtKind::Unification(u) => decls.entry(u.target.sym).or_default().push((mi, si)),
                StmtKind::Assign(a) if matches!(a.value.kind, ExprKind::Schema(_)) => {
                    for t in a.targets.iter().filter(|t| t.path.is_empty()) {
                        match decls.get_mut(&t.name.sym) {
                            // a private name may be assigned again: the last assignment wins
                            Some(d) if t.name.sym.as_str().starts_with('_') => {
                                d.clear();
                                d.push((mi, si));
                            }
                            // a public one may not (reported later as immutable)
                            Some(_) => {}
                            None => {
                                decls.insert(t.name.sym, vec![(mi, si)]);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    decls.retain(|_, v| v.len() > 1);
    if decls.is_empty() {
        return;
    }
    let mut delete: Vec<(usize, usize)> = Vec::new();
    for (_, places) in decls {
        let mut items: Vec<ConfigEntry> = Vec::new();
        for &(mi, si) in &places {
            if let Some(entries) = schema_config(&modules[mi].body[si]) {
                items.extend(entries.iter().cloned());
            }
        }
        let &(mi, si) = places.last().unwrap();
        let unified = unify_entries(items);
        let m = Arc::make_mut(&mut modules[mi]);
        if let Some(cfg) = schema_config_mut(&mut m.body[si]) {
            cfg.kind = ExprKind::Config(unified.into_boxed_slice());
        }
        delete.extend(places[..places.len() - 1].iter().copied());
    }
    delete.sort_unstable();
    delete.dedup();
    for (mi, si) in delete.into_iter().rev() {
        let m: &mut Module = Arc::make_mut(&mut modules[mi]);
        m.body.remove(si);
    }
}

fn schema_of(s: &Stmt) -> Option<&SchemaExpr> {
    match &s.kind {
        StmtKind::Unification(u) => match &u.value.kind {
            ExprKind::Schema(se) => Some(se),
            _ => None,
        },
        StmtKind::Assign(a) => match &a.value.kind {
            ExprKind::Schema(se) => Some(se),
            _ => None,
        },
        _ => None,
    }
}

fn schema_config(s: &Stmt) -> Option<&[ConfigEntry]> {
    match &schema_of(s)?.config.kind {
        ExprKind::Config(es) => Some(es),
        _ => None,
    }
}

fn schema_config_mut(s: &mut Stmt) -> Option<&mut Expr> {
    let se = match &mut s.kind {
        StmtKind::Unification(u) => match &mut u.value.kind {
            ExprKind::Schema(se) => se,
            _ => return None,
        },
        StmtKind::Assign(a) => match &mut a.value.kind {
            ExprKind::Schema(se) => se,
            _ => return None,
        },
        _ => return None,
    };
    matches!(se.config.kind, ExprKind::Config(_)).then_some(&mut se.config)
}

/// The bucket of an entry: its key's (root) name, or `None` for unpacks, `if` entries and
/// computed keys.
fn bucket_name(e: &ConfigEntry) -> Option<&str> {
    let ConfigEntryKind::KeyValue { key, .. } = &e.kind else {
        return None;
    };
    if let ExprKind::Str(s) = &key.kind {
        return Some(s);
    }
    let mut k = key;
    loop {
        match &k.kind {
            ExprKind::Ident(s) => return Some(s.as_str()),
            ExprKind::Selector(x) if !x.optional => k = &x.value,
            _ => return None,
        }
    }
}

/// Upstream's regrouping of merged config entries (see the module docs).
pub fn unify_entries(entries: Vec<ConfigEntry>) -> Vec<ConfigEntry> {
    let mut buckets: indexmap::IndexMap<Option<String>, Vec<ConfigEntry>> =
        indexmap::IndexMap::new();
    for e in entries {
        let name = bucket_name(&e).map(str::to_string);
        let overrides = matches!(
            &e.kind,
            ConfigEntryKind::KeyValue { key, op: ConfigOp::Override, .. }
                if !matches!(key.kind, ExprKind::Selector(_))
        );
        let b = buckets.entry(name.clone()).or_default();
        if overrides && name.is_some() {
            b.clear();
        }
        b.push(e);
    }
    let mut out: Vec<ConfigEntry> = buckets.into_values().flatten().collect();
    for e in &mut out {
        if let ConfigEntryKind::KeyValue { value, .. } = &mut e.kind {
            unify_value(value);
        }
    }
    out
}

/// Regroup inside a schema or config value (through dotted keys' nesting).
fn unify_value(v: &mut Expr) {
    let es = match &mut v.kind {
        ExprKind::Schema(se) => match &mut se.config.kind {
            ExprKind::Config(es) => es,
            _ => return,
        },
        ExprKind::Config(es) => es,
        _ => return,
    };
    let items = std::mem::take(es).into_vec();
    *es = unify_entries(items).into_boxed_slice();
}
