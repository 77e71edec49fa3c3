//! Walks over the syntax tree: every expression below a statement or an expression,
//! outermost first (for passes that look for names or shapes without evaluating).

use super::{ConfigEntry, ConfigEntryKind, Expr, ExprKind, Name, Span, Stmt, StmtKind, StrPart};

/// Public (not `_`) package-level names a statement assigns with `=`, through `if` bodies,
/// with each target's span; `dotted` counts `a.b = v` too (it changes `a`).
pub(crate) fn public_assignments(s: &Stmt, dotted: bool, out: &mut Vec<(Name, Span)>) {
    match &s.kind {
        StmtKind::Assign(a) => out.extend(
            a.targets
                .iter()
                .filter(|t| (dotted || t.path.is_empty()) && !t.name.sym.as_str().starts_with('_'))
                .map(|t| (t.name, t.span)),
        ),
        StmtKind::If(i) => {
            for st in i.body.iter().chain(&i.orelse) {
                public_assignments(st, dotted, out);
            }
        }
        _ => {}
    }
}

/// Every expression below `stmts`, outermost first.
pub(crate) fn walk_stmts<'a>(stmts: &'a [Stmt], f: &mut dyn FnMut(&'a Expr)) {
    for s in stmts {
        walk_stmt(s, f);
    }
}

pub(crate) fn walk_stmt<'a>(s: &'a Stmt, f: &mut dyn FnMut(&'a Expr)) {
    match &s.kind {
        StmtKind::Expr(e) => walk_expr(e, f),
        StmtKind::Unification(u) => walk_expr(&u.value, f),
        StmtKind::Assign(a) => {
            for t in &a.targets {
                walk_target(t, f);
            }
            walk_expr(&a.value, f);
        }
        StmtKind::AugAssign(a) => {
            walk_target(&a.target, f);
            walk_expr(&a.value, f);
        }
        StmtKind::Assert(a) => {
            walk_expr(&a.test, f);
            a.if_cond.iter().chain(&a.msg).for_each(|e| walk_expr(e, f));
        }
        StmtKind::If(i) => {
            walk_expr(&i.cond, f);
            walk_stmts(&i.body, f);
            walk_stmts(&i.orelse, f);
        }
        StmtKind::SchemaAttr(a) => {
            if let Some(v) = &a.value {
                walk_expr(v, f);
            }
        }
        StmtKind::Schema(sc) => {
            for p in sc.params.iter().flatten() {
                if let Some(d) = &p.default {
                    walk_expr(d, f);
                }
            }
            walk_stmts(&sc.body, f);
            for c in &sc.checks {
                walk_expr(&c.test, f);
                c.if_cond.iter().chain(&c.msg).for_each(|e| walk_expr(e, f));
            }
        }
        StmtKind::Rule(r) => {
            for c in &r.checks {
                walk_expr(&c.test, f);
                c.if_cond.iter().chain(&c.msg).for_each(|e| walk_expr(e, f));
            }
        }
        StmtKind::Import(_) | StmtKind::TypeAlias(_) => {}
    }
}

fn walk_target<'a>(t: &'a super::Target, f: &mut dyn FnMut(&'a Expr)) {
    for p in &t.path {
        if let super::TargetPath::Index(e) = p {
            walk_expr(e, f);
        }
    }
}

fn walk_entries<'a>(entries: &'a [ConfigEntry], f: &mut dyn FnMut(&'a Expr)) {
    for e in entries {
        match &e.kind {
            ConfigEntryKind::KeyValue { key, value, .. } => {
                walk_expr(key, f);
                walk_expr(value, f);
            }
            ConfigEntryKind::Unpack { value, .. } => walk_expr(value, f),
            ConfigEntryKind::If(i) => {
                walk_expr(&i.cond, f);
                walk_entries(&i.body, f);
                walk_entries(&i.orelse, f);
            }
        }
    }
}

pub(crate) fn walk_expr<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    f(e);
    let mut w = |x: &'a Expr| walk_expr(x, f);
    match &e.kind {
        ExprKind::JoinedStr(parts) => {
            for p in parts.iter() {
                if let StrPart::Interp { expr, .. } = p {
                    w(expr);
                }
            }
        }
        ExprKind::Unary { operand, .. } => w(operand),
        ExprKind::Binary { left, right, .. } => {
            w(left);
            w(right);
        }
        ExprKind::Compare(c) => {
            w(&c.left);
            c.ops.iter().for_each(|(_, x)| w(x));
        }
        ExprKind::If(i) => {
            w(&i.cond);
            w(&i.then);
            w(&i.orelse);
        }
        ExprKind::Selector(s) => w(&s.value),
        ExprKind::Subscript { value, index, .. } => {
            w(value);
            w(index);
        }
        ExprKind::Slice(s) => {
            w(&s.value);
            s.lower
                .iter()
                .chain(&s.upper)
                .chain(&s.step)
                .for_each(&mut w);
        }
        ExprKind::Call { func, args } => {
            w(func);
            args.args.iter().for_each(&mut w);
            args.keywords.iter().for_each(|k| w(&k.value));
        }
        ExprKind::Paren(x) | ExprKind::Starred(x) => w(x),
        ExprKind::As { value, .. } => w(value),
        ExprKind::List(items) => items.iter().for_each(&mut w),
        ExprKind::ListIf(i) => {
            w(&i.cond);
            i.body.iter().chain(&i.orelse).for_each(&mut w);
        }
        ExprKind::Config(entries) => walk_entries(entries, f),
        ExprKind::ListComp(c) => {
            w(&c.elt);
            for cl in &c.clauses {
                w(&cl.iter);
                cl.ifs.iter().for_each(&mut w);
            }
        }
        ExprKind::DictComp(c) => {
            w(&c.key);
            w(&c.value);
            for cl in &c.clauses {
                w(&cl.iter);
                cl.ifs.iter().for_each(&mut w);
            }
        }
        ExprKind::Quant(q) => {
            w(&q.target);
            w(&q.test);
            q.if_cond.iter().for_each(&mut w);
        }
        ExprKind::Schema(s) => {
            if let Some(a) = &s.args {
                a.args.iter().for_each(&mut w);
                a.keywords.iter().for_each(|k| w(&k.value));
            }
            w(&s.config);
        }
        ExprKind::Lambda(l) => {
            for p in &l.params {
                if let Some(d) = &p.default {
                    w(d);
                }
            }
            walk_stmts(&l.body, f);
        }
        _ => {}
    }
}
