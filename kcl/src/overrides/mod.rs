//! `-O` overrides: `[:]a.b["c.d"]=value`, `a.b:value`, `a.b+=value`, `a.b-` applied to the
//! program's syntax tree before evaluation (so computed attributes see the new value), and
//! [`override_file`], which rewrites a source file's text in place.

use std::sync::Arc;

use crate::ast::{
    self, ConfigEntry, ConfigEntryKind, ConfigOp, Expr, ExprKind, FileId, Name, SelectorExpr, Span,
    Stmt, StmtKind, Symbol,
};
use crate::parser::loader::Program;

mod file;
pub use file::override_file;

/// One parsed override spec.
#[derive(Debug, Clone)]
pub struct Spec {
    pub path: Vec<String>,
    /// `None` deletes.
    pub op: Option<ConfigOp>,
    pub value: String,
}

/// Parse `[:]a.b.c=value`, `a.b:value`, `a.b+=value` and `a.b-` specs as upstream does: a
/// path segment may be a quoted key in brackets (`a["b.c"]`), empty segments are skipped, the
/// path is trimmed, and the first operator outside brackets ends it (a quoted key runs to
/// its closing quote or the path's end).
pub fn parse_spec(s: &str) -> Result<Spec, String> {
    let invalid = || {
        format!(
            "Invalid spec format '{s}', expected <field_path>=<filed_value>, <field_path>:<filed_value>, <field_path>+=<filed_value> or <field_path>-"
        )
    };
    // (a leading `:` names the main package, as upstream's command line takes it)
    let body = s.strip_prefix(':').unwrap_or(s);
    // (operators inside brackets belong to a key: `a["b=c"]=1`)
    let bytes = body.as_bytes();
    let mut bracket = false;
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'[' => bracket = true,
            b']' => bracket = false,
            _ if bracket => {}
            b'+' if bytes.get(i + 1) == Some(&b'=') => {
                return spec_at(body, i, 2, Some(ConfigOp::Insert)).ok_or_else(invalid)?;
            }
            b'=' => return spec_at(body, i, 1, Some(ConfigOp::Override)).ok_or_else(invalid)?,
            b':' => return spec_at(body, i, 1, Some(ConfigOp::Union)).ok_or_else(invalid)?,
            _ => {}
        }
    }
    let path = match body.strip_suffix('-') {
        Some(p) => parse_field_path(p.trim())?,
        None => Vec::new(),
    };
    if path.is_empty() {
        return Err(invalid());
    }
    Ok(Spec {
        path,
        op: None,
        value: String::new(),
    })
}

/// The spec whose operator (`len` bytes) is at `i`; `None` for an empty path or value.
fn spec_at(body: &str, i: usize, len: usize, op: Option<ConfigOp>) -> Option<Result<Spec, String>> {
    let (path, value) = (body[..i].trim(), &body[i + len..]);
    if path.is_empty() || value.trim().is_empty() {
        return None;
    }
    match parse_field_path(path) {
        Ok(path) if path.is_empty() => None,
        r => Some(r.map(|path| Spec {
            path,
            op,
            value: value.to_string(),
        })),
    }
}

/// `a.b["c.d"]` into its keys; a quoted key runs to its closing quote (or the end).
fn parse_field_path(p: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if !cur.is_empty() {
                    parts.push(std::mem::take(&mut cur));
                }
            }
            '[' => {
                if !cur.is_empty() {
                    parts.push(std::mem::take(&mut cur));
                }
                let q = match chars.next() {
                    Some(q @ ('"' | '\'')) => q,
                    _ => return Err("Expected opening quote after '['".into()),
                };
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == q {
                        closed = true;
                        break;
                    }
                    cur.push(c);
                }
                if closed && chars.next_if_eq(&']').is_none() {
                    return Err("Expected closing bracket".into());
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    Ok(parts)
}

/// Where upstream's override nodes are: nowhere (errors about them print their message alone).
const NOWHERE: Span = Span::new(FileId(u32::MAX), 0, 0);

fn value_expr(text: &str) -> Result<Expr, String> {
    let src = format!("__override__ = {text}\n");
    crate::parser::parse_source("<override>", &src)
        .map_err(|e| format!("invalid override value '{text}': {e}"))?;
    // parsed again outside the source map: upstream's override nodes have no position, so
    // errors about them (an entry's value of the wrong type) print their message alone
    let (m, _) = crate::parser::parse_unregistered(&src);
    let Some(StmtKind::Assign(a)) = m.body.into_iter().next().map(|s| s.kind) else {
        return Err(format!("invalid override value '{text}'"));
    };
    // an operation is a string (`-O a=-3` sets '-3', `-O a=1+2` sets '1+2'), as upstream's
    // override values; a bare name stays a name (`-O a.b=c` refers to `c`)
    Ok(match &a.value.kind {
        ExprKind::Unary { .. } | ExprKind::Binary { .. } => Expr {
            kind: ExprKind::Str(Arc::from(text.trim())),
            span: NOWHERE,
        },
        _ => Expr {
            span: NOWHERE,
            ..a.value
        },
    })
}

fn name(s: &str) -> Name {
    Name {
        sym: Symbol::intern(s),
        span: NOWHERE,
    }
}

fn key_matches(k: &Expr, s: &str) -> bool {
    match &k.kind {
        ExprKind::Ident(x) => x.as_str() == s,
        ExprKind::Str(x) => &**x == s,
        _ => false,
    }
}

fn key_expr(path: &[String]) -> Expr {
    let mut e = Expr {
        kind: ExprKind::Ident(Symbol::intern(&path[0])),
        span: NOWHERE,
    };
    for p in &path[1..] {
        e = Expr {
            kind: ExprKind::Selector(Box::new(SelectorExpr {
                value: e,
                attr: name(p),
                optional: false,
            })),
            span: NOWHERE,
        };
    }
    e
}

/// Edits a config's entries (a boxed slice in the tree) as a vector.
fn edit_entries(entries: &mut Box<[ConfigEntry]>, f: impl FnOnce(&mut Vec<ConfigEntry>)) {
    let mut v = std::mem::take(entries).into_vec();
    f(&mut v);
    *entries = v.into_boxed_slice();
}

/// The names of a config key (`a`, `"a"`, `a.b.c`); none for other keys.
fn key_parts(k: &Expr) -> Vec<String> {
    match &k.kind {
        ExprKind::Ident(x) => vec![x.as_str().to_string()],
        ExprKind::Str(x) => vec![x.to_string()],
        ExprKind::Selector(x) if !x.optional => {
            let mut p = key_parts(&x.value);
            if !p.is_empty() {
                p.push(x.attr.sym.as_str().to_string());
            }
            p
        }
        _ => Vec::new(),
    }
}

/// Upstream's override of `path` in a config's entries: every entry of the path's first name
/// is followed (a config may repeat a key). At the last name, `=` replaces the value (the
/// entry keeps its operator), `:` merges a config or a same-named schema into the value's
/// config entry by entry and replaces other values, `+=` appends a list's items to a list
/// literal, `-` removes the entry. Where nothing changed, an entry `path op value` is added.
fn replace_path(
    entries: &mut Box<[ConfigEntry]>,
    path: &[String],
    op: Option<ConfigOp>,
    value: Option<&Expr>,
) -> bool {
    let Some(part) = path.first() else {
        return false;
    };
    let mut changed = false;
    let mut delete = Vec::new();
    for (i, en) in entries.iter_mut().enumerate() {
        let ConfigEntryKind::KeyValue { key, value: v, .. } = &mut en.kind else {
            continue;
        };
        if !key_matches(key, part) {
            continue;
        }
        // a new value takes the entry's place (upstream's errors then point at the entry)
        let at = Span::new(key.span.file, key.span.lo, v.span.hi);
        if path.len() > 1 {
            // (upstream keeps the last entry's answer)
            if let Some(inner) = config_entries_direct(v) {
                changed = replace_path(inner, &path[1..], op, value);
            }
            continue;
        }
        let (Some(op), Some(nv)) = (op, value) else {
            delete.push(i);
            changed = true;
            continue;
        };
        match op {
            ConfigOp::Override => {
                *v = placed(nv, at);
                changed = true;
            }
            ConfigOp::Union => match &nv.kind {
                ExprKind::Config(merged) => {
                    if let Some(inner) = config_entries_direct(v) {
                        changed = merge_entries(inner, merged);
                    }
                }
                ExprKind::Schema(ms) => {
                    if let ExprKind::Schema(se) = &mut v.kind
                        && same_name(&se.name, &ms.name)
                        && let ExprKind::Config(merged) = &ms.config.kind
                        && let ExprKind::Config(inner) = &mut se.config.kind
                    {
                        changed = merge_entries(inner, merged);
                    }
                }
                _ => {
                    *v = placed(nv, at);
                    changed = true;
                }
            },
            ConfigOp::Insert => {
                if let (ExprKind::List(add), ExprKind::List(items)) = (&nv.kind, &mut v.kind) {
                    let mut all = std::mem::take(items).into_vec();
                    all.extend(add.iter().cloned());
                    *items = all.into_boxed_slice();
                    changed = true;
                }
            }
        }
    }
    if !delete.is_empty() {
        let mut i = 0;
        edit_entries(entries, |e| {
            e.retain(|_| {
                i += 1;
                !delete.contains(&(i - 1))
            })
        });
    } else if let (Some(op), Some(v), false) = (op, value, changed) {
        edit_entries(entries, |e| {
            e.push(ConfigEntry {
                kind: ConfigEntryKind::KeyValue {
                    key: key_expr(path),
                    op,
                    value: v.clone(),
                },
            })
        });
        changed = true;
    }
    changed
}

/// A merged config's entries overridden one by one into `entries` (each with its own
/// operator); `**` and `if` entries are appended.
fn merge_entries(entries: &mut Box<[ConfigEntry]>, merged: &[ConfigEntry]) -> bool {
    let mut changed = false;
    for en in merged {
        let parts = match &en.kind {
            ConfigEntryKind::KeyValue { key, .. } => key_parts(key),
            _ => Vec::new(),
        };
        match &en.kind {
            ConfigEntryKind::KeyValue { op, value, .. } if !parts.is_empty() => {
                if replace_path(entries, &parts, Some(*op), Some(value)) {
                    changed = true;
                }
            }
            _ => {
                edit_entries(entries, |e| e.push(en.clone()));
                changed = true;
            }
        }
    }
    changed
}

/// The entries of a config literal, or of a schema expression's config (no parentheses).
fn config_entries_direct(e: &mut Expr) -> Option<&mut Box<[ConfigEntry]>> {
    match &mut e.kind {
        ExprKind::Config(v) => Some(v),
        ExprKind::Schema(s) => match &mut s.config.kind {
            ExprKind::Config(v) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

fn same_name(a: &ast::Identifier, b: &ast::Identifier) -> bool {
    a.names.len() == b.names.len() && a.names.iter().zip(&b.names).all(|(x, y)| x.sym == y.sym)
}

/// Upstream's walk of a module for an override with a path (its `OverrideTransformer`): in
/// statement order, the first config literal it meets is overridden and the walk stops. A
/// statement assigning the root a config or schema expression offers that value (`armed`); a
/// unification of the root its schema's config; any other statement (an expression, an
/// assertion, `+=`, a rule's checks) every config literal in it, outside schema expressions and
/// lambdas, whatever it belongs to (so `-O a.b=1` can land in `filter k in {} {...}` before
/// `a`'s statement). `if` statements and schema bodies are not entered.
struct Walk<'a> {
    spec: &'a Spec,
    value: Option<&'a Expr>,
    armed: bool,
    done: bool,
}

impl Walk<'_> {
    fn lookup(&self, entries: &mut Box<[ConfigEntry]>) -> bool {
        replace_path(entries, &self.spec.path[1..], self.spec.op, self.value)
    }

    fn config(&mut self, entries: &mut Box<[ConfigEntry]>) {
        if self.lookup(entries) {
            self.done = true;
            self.armed = false;
        }
    }

    fn schema(&mut self, s: &mut ast::SchemaExpr) {
        if self.done || !self.armed {
            return;
        }
        if let ExprKind::Config(entries) = &mut s.config.kind
            && self.lookup(entries)
        {
            self.done = true;
        }
        self.armed = false;
    }

    fn exprs<'e>(&mut self, es: impl IntoIterator<Item = &'e mut Expr>) {
        for e in es {
            self.expr(e);
        }
    }

    fn args(&mut self, a: &mut ast::CallArgs) {
        self.exprs(a.args.iter_mut());
        self.exprs(a.keywords.iter_mut().map(|k| &mut k.value));
    }

    fn clauses(&mut self, cs: &mut [ast::CompClause]) {
        for c in cs {
            self.expr(&mut c.iter);
            self.exprs(c.ifs.iter_mut());
        }
    }

    fn expr(&mut self, e: &mut Expr) {
        if self.done {
            return;
        }
        match &mut e.kind {
            ExprKind::Config(entries) => self.config(entries),
            ExprKind::Schema(s) => self.schema(s),
            ExprKind::Unary { operand, .. } => self.expr(operand),
            ExprKind::Binary { left, right, .. } => {
                self.expr(left);
                self.expr(right);
            }
            ExprKind::Compare(c) => {
                self.expr(&mut c.left);
                self.exprs(c.ops.iter_mut().map(|(_, r)| r));
            }
            ExprKind::If(i) => {
                self.expr(&mut i.cond);
                self.expr(&mut i.then);
                self.expr(&mut i.orelse);
            }
            ExprKind::Selector(s) => self.expr(&mut s.value),
            ExprKind::Subscript { value, index, .. } => {
                self.expr(value);
                self.expr(index);
            }
            ExprKind::Slice(s) => {
                self.expr(&mut s.value);
                self.exprs(s.lower.iter_mut());
                self.exprs(s.upper.iter_mut());
                self.exprs(s.step.iter_mut());
            }
            ExprKind::Call { func, args } => {
                self.expr(func);
                self.args(args);
            }
            ExprKind::Paren(x) | ExprKind::Starred(x) | ExprKind::As { value: x, .. } => {
                self.expr(x)
            }
            ExprKind::List(items) => self.exprs(items.iter_mut()),
            ExprKind::ListIf(l) => {
                self.expr(&mut l.cond);
                self.exprs(l.body.iter_mut());
                self.exprs(l.orelse.iter_mut());
            }
            ExprKind::ListComp(c) => {
                self.expr(&mut c.elt);
                self.clauses(&mut c.clauses);
            }
            ExprKind::DictComp(c) => {
                self.expr(&mut c.key);
                self.expr(&mut c.value);
                self.clauses(&mut c.clauses);
            }
            ExprKind::Quant(q) => {
                self.expr(&mut q.target);
                self.expr(&mut q.test);
                self.exprs(q.if_cond.iter_mut());
            }
            ExprKind::JoinedStr(parts) => {
                for p in parts.iter_mut() {
                    if let ast::StrPart::Interp { expr, .. } = p {
                        self.expr(expr);
                    }
                }
            }
            _ => {}
        }
    }

    fn stmt(&mut self, st: &mut Stmt) {
        let root = self.spec.path[0].as_str();
        match &mut st.kind {
            StmtKind::Assign(a) => {
                if !matches!(a.value.kind, ExprKind::Schema(_) | ExprKind::Config(_)) {
                    return;
                }
                self.armed = a
                    .targets
                    .iter()
                    .any(|t| t.path.is_empty() && t.name.sym.as_str() == root);
                if self.armed {
                    self.expr(&mut a.value);
                }
            }
            StmtKind::Unification(u) => {
                if u.target.sym.as_str() == root {
                    self.armed = true;
                    self.expr(&mut u.value);
                }
            }
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::AugAssign(a) => self.expr(&mut a.value),
            StmtKind::Assert(a) => {
                self.expr(&mut a.test);
                self.exprs(a.if_cond.iter_mut());
                self.exprs(a.msg.iter_mut());
            }
            StmtKind::SchemaAttr(a) => {
                for d in &mut a.decorators {
                    if let Some(args) = &mut d.args {
                        self.args(args);
                    }
                }
                self.exprs(a.value.iter_mut());
            }
            StmtKind::Rule(r) => {
                for d in &mut r.decorators {
                    if let Some(args) = &mut d.args {
                        self.args(args);
                    }
                }
                for c in &mut r.checks {
                    self.expr(&mut c.test);
                    self.exprs(c.if_cond.iter_mut());
                    self.exprs(c.msg.iter_mut());
                }
                for p in r.params.iter_mut().flatten() {
                    self.exprs(p.default.iter_mut());
                }
            }
            StmtKind::If(_)
            | StmtKind::Schema(_)
            | StmtKind::Import(_)
            | StmtKind::TypeAlias(_) => {}
        }
    }
}

/// The override value put where `old` was: upstream gives it the position of what it
/// replaces (a config entry from its key, a statement's value), so errors point there.
fn placed(nv: &Expr, at: Span) -> Expr {
    let mut v = nv.clone();
    v.span = at;
    v
}

/// `root = value`, `root: value`, `root += value` on a statement's value (upstream's top-level
/// override): `:` merges a config (or a same-named schema's config) into a config or schema
/// value and replaces other values, `+=` extends a list literal. Whether it changed.
fn override_value(v: &mut Expr, op: ConfigOp, nv: &Expr, unification: bool) -> bool {
    let nv = placed(nv, v.span);
    match (op, &nv.kind) {
        (ConfigOp::Union, ExprKind::Config(merged)) => match config_entries_direct(v) {
            Some(inner) => merge_entries(inner, merged),
            None => false,
        },
        (ConfigOp::Union, ExprKind::Schema(ms)) => {
            if let ExprKind::Schema(se) = &mut v.kind
                && same_name(&se.name, &ms.name)
                && let ExprKind::Config(merged) = &ms.config.kind
                && let ExprKind::Config(inner) = &mut se.config.kind
            {
                merge_entries(inner, merged)
            } else {
                false
            }
        }
        // a unification only takes a schema expression
        (_, ExprKind::Schema(_)) if unification => {
            *v = nv;
            true
        }
        _ if unification => false,
        (ConfigOp::Insert, ExprKind::List(add)) => {
            let ExprKind::List(items) = &mut v.kind else {
                return false;
            };
            let mut all = std::mem::take(items).into_vec();
            all.extend(add.iter().cloned());
            *items = all.into_boxed_slice();
            true
        }
        (ConfigOp::Insert, _) => false,
        _ => {
            *v = nv;
            true
        }
    }
}

/// `a = b = v` with the root among its targets becomes one statement per target, as upstream
/// splits them before overriding (so only the root's copy of the value changes).
fn split_multi_assign(body: &mut Vec<Stmt>, root: &str) {
    let hit = |st: &Stmt| {
        matches!(&st.kind, StmtKind::Assign(a) if a.targets.len() > 1
            && a.targets.iter().any(|t| t.name.sym.as_str() == root))
    };
    if !body.iter().any(hit) {
        return;
    }
    let mut out = Vec::with_capacity(body.len() + 1);
    for st in std::mem::take(body) {
        match st.kind {
            StmtKind::Assign(a)
                if a.targets.len() > 1 && a.targets.iter().any(|t| t.name.sym.as_str() == root) =>
            {
                for t in a.targets {
                    out.push(Stmt {
                        kind: StmtKind::Assign(ast::AssignStmt {
                            targets: vec![t],
                            ty: a.ty.clone(),
                            value: a.value.clone(),
                        }),
                        span: st.span,
                    });
                }
            }
            kind => out.push(Stmt {
                kind,
                span: st.span,
            }),
        }
    }
    *body = out;
}

/// One override on one module, as upstream's: whether it found its place (otherwise the
/// caller appends a statement).
fn apply_module(body: &mut Vec<Stmt>, spec: &Spec, value: &Option<Expr>) -> bool {
    let root = spec.path[0].as_str();
    split_multi_assign(body, root);
    if spec.path.len() == 1 {
        let Some((op, nv)) = spec.op.zip(value.as_ref()) else {
            let before = body.len();
            body.retain(|st| match &st.kind {
                StmtKind::Assign(a) => {
                    !(a.targets.len() == 1
                        && a.targets[0].path.is_empty()
                        && a.targets[0].name.sym.as_str() == root)
                }
                StmtKind::Unification(u) => u.target.sym.as_str() != root,
                _ => true,
            });
            return body.len() != before;
        };
        // every statement of the root is overridden
        let mut changed = false;
        for st in body.iter_mut() {
            let (v, unification) = match &mut st.kind {
                StmtKind::Assign(a)
                    if a.targets.len() == 1
                        && a.targets[0].path.is_empty()
                        && a.targets[0].name.sym.as_str() == root =>
                {
                    (&mut a.value, false)
                }
                StmtKind::AugAssign(a)
                    if a.target.path.is_empty() && a.target.name.sym.as_str() == root =>
                {
                    (&mut a.value, false)
                }
                StmtKind::Unification(u) if u.target.sym.as_str() == root => (&mut u.value, true),
                _ => continue,
            };
            changed |= override_value(v, op, nv, unification);
        }
        return changed;
    }
    let mut walk = Walk {
        spec,
        value: value.as_ref(),
        armed: false,
        done: false,
    };
    for st in body.iter_mut() {
        walk.stmt(st);
        if walk.done {
            break;
        }
    }
    walk.done
}

/// Apply override specs to the main package.
pub fn apply(program: &mut Program, specs: &[String]) -> Result<(), String> {
    for s in specs {
        let spec = parse_spec(s)?;
        let value = match spec.op {
            Some(_) => Some(value_expr(&spec.value)?),
            None => None,
        };
        // upstream applies an override to each file of the main package on its own: a file
        // that does not define the root gets it appended (so with several files a root
        // defined in one of them is assigned twice, upstream's ImmutableError)
        // upstream's added statements have no position: errors print their message alone
        for m in program.main.modules.iter_mut() {
            // copy-on-write: a module shared with other programs (a parse cache) stays intact
            let m = std::sync::Arc::make_mut(m);
            if apply_module(&mut m.body, &spec, &value) {
                continue;
            }
            let (Some(op), Some(v)) = (spec.op, value.clone()) else {
                continue;
            };
            // a missing root with a path gets a config holding the path (upstream adds
            // `a = {b.c = v}` for `-O a.b.c=v`)
            let v = if spec.path.len() > 1 {
                Expr {
                    kind: ExprKind::Config(Box::new([ConfigEntry {
                        kind: ConfigEntryKind::KeyValue {
                            key: key_expr(&spec.path[1..]),
                            op,
                            value: v,
                        },
                    }])),
                    span: NOWHERE,
                }
            } else {
                v
            };
            let target = ast::Target {
                name: name(&spec.path[0]),
                path: Vec::new(),
                span: NOWHERE,
            };
            // the statement upstream adds: `a = v`, `a: S {...}` for a schema merged with ':',
            // `a += v`
            let kind = match op {
                ConfigOp::Union if matches!(v.kind, ExprKind::Schema(_)) => {
                    StmtKind::Unification(ast::UnificationStmt {
                        target: target.name,
                        value: v,
                    })
                }
                ConfigOp::Insert => StmtKind::AugAssign(ast::AugAssignStmt {
                    target,
                    op: ast::AugOp::Add,
                    value: v,
                }),
                _ => StmtKind::Assign(ast::AssignStmt {
                    targets: vec![target],
                    ty: None,
                    value: v,
                }),
            };
            m.body.push(Stmt {
                kind,
                span: NOWHERE,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_forms() {
        let s = parse_spec(":a.b=1").unwrap();
        assert_eq!(s.path, vec!["a", "b"]);
        assert_eq!(s.op, Some(ConfigOp::Override));
        assert!(parse_spec("a.b-").unwrap().op.is_none());
        assert_eq!(parse_spec("a+=[1]").unwrap().op, Some(ConfigOp::Insert));
    }
}
