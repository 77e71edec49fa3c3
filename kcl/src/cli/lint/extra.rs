//! The findings the checker does not give: errors upstream's resolver reports that the checker
//! leaves to evaluation (comprehension loop variables), and the warnings beyond upstream's
//! lint: `unused-variable`, `shadowed-name`, `deprecated` and `unreachable`. Each walks the
//! syntax tree.

use std::collections::BTreeSet;

use crate::ast::walk::walk_stmts;
use crate::ast::{ConfigEntryKind, Expr, ExprKind, LambdaExpr, Span, Stmt, StmtKind, Symbol};

use super::{Finding, warning};

/// The names an expression tree reads (identifiers, and the roots of assignment paths).
fn reads(stmts: &[Stmt]) -> BTreeSet<Symbol> {
    let mut out = BTreeSet::new();
    walk_stmts(stmts, &mut |e| {
        if let ExprKind::Ident(s) = e.kind {
            out.insert(s);
        }
        if let ExprKind::Schema(s) = &e.kind
            && let Some(n) = s.name.names.first()
        {
            out.insert(n.sym);
        }
    });
    let mut targets = |s: &Stmt| {
        let ts: Vec<&crate::ast::Target> = match &s.kind {
            StmtKind::Assign(a) => a.targets.iter().collect(),
            StmtKind::AugAssign(a) => vec![&a.target],
            _ => Vec::new(),
        };
        for t in ts {
            if !t.path.is_empty() || matches!(s.kind, StmtKind::AugAssign(_)) {
                out.insert(t.name.sym);
            }
        }
    };
    fn each(stmts: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
        for s in stmts {
            f(s);
            if let StmtKind::If(i) = &s.kind {
                each(&i.body, f);
                each(&i.orelse, f);
            }
        }
    }
    each(stmts, &mut targets);
    out
}

/// Lambda locals never read (`unused-variable`) and lambda parameters or locals that hide a
/// package-level name (`shadowed-name`); uses of `@deprecated` schema attributes in configs
/// (`deprecated`); dead statements (`unreachable`). None of these is in upstream's lint.
pub(super) fn extra_warnings(program: &crate::parser::loader::Program) -> Vec<Finding> {
    let modules = &program.main.modules;
    // package-level names: variables, schemas, rules, imports
    let mut globals: std::collections::HashMap<Symbol, Span> = Default::default();
    // `@deprecated` attributes by (schema, attribute)
    let mut deprecated: std::collections::HashMap<(Symbol, Symbol), String> = Default::default();
    let all_modules = modules
        .iter()
        .chain(program.packages.iter().flat_map(|(_, p)| p.modules.iter()));
    for m in modules {
        for s in &m.body {
            match &s.kind {
                StmtKind::Assign(a) => {
                    for t in &a.targets {
                        globals.entry(t.name.sym).or_insert(t.name.span);
                    }
                }
                StmtKind::Unification(u) => {
                    globals.entry(u.target.sym).or_insert(u.target.span);
                }
                StmtKind::Schema(sc) => {
                    globals.entry(sc.name.sym).or_insert(sc.name.span);
                }
                StmtKind::Rule(r) => {
                    globals.entry(r.name.sym).or_insert(r.name.span);
                }
                StmtKind::Import(i) => {
                    if let Some(n) = i.local_name() {
                        globals.entry(n).or_insert(s.span);
                    }
                }
                _ => {}
            }
        }
    }
    for m in all_modules {
        for s in &m.body {
            let StmtKind::Schema(sc) = &s.kind else {
                continue;
            };
            for b in &sc.body {
                let StmtKind::SchemaAttr(a) = &b.kind else {
                    continue;
                };
                for d in &a.decorators {
                    if d.name.names.last().map(|n| n.sym.as_str()) == Some("deprecated") {
                        deprecated.insert((sc.name.sym, a.name.sym), deprecation(a, d));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for m in modules {
        unreachable_warnings(&m.body, &mut out);
        walk_stmts(&m.body, &mut |e: &Expr| match &e.kind {
            ExprKind::Lambda(l) => {
                out.extend(lambda_warnings(l, &globals));
                unreachable_warnings(&l.body, &mut out);
            }
            ExprKind::Schema(s) if !deprecated.is_empty() => {
                let Some(schema) = s.name.names.last().map(|n| n.sym) else {
                    return;
                };
                let ExprKind::Config(entries) = &s.config.kind else {
                    return;
                };
                for en in entries.iter() {
                    let ConfigEntryKind::KeyValue { key, .. } = &en.kind else {
                        continue;
                    };
                    let attr = match &key.kind {
                        ExprKind::Ident(k) => *k,
                        ExprKind::Str(k) => Symbol::intern(k),
                        _ => continue,
                    };
                    if let Some(msg) = deprecated.get(&(schema, attr)) {
                        out.push(warning(
                            "deprecated",
                            "DeprecatedWarning",
                            key.span,
                            msg.clone(),
                            None,
                        ));
                    }
                }
            }
            _ => {}
        });
    }
    out
}

/// The evaluator's deprecation message for literal decorator arguments.
fn deprecation(a: &crate::ast::SchemaAttr, d: &crate::ast::Decorator) -> String {
    let lit = |e: &Expr| match &e.kind {
        ExprKind::Str(s) => s.to_string(),
        ExprKind::Int(i) => i.to_string(),
        ExprKind::Float(f) => f.to_string(),
        _ => String::new(),
    };
    let (mut version, mut reason) = (String::new(), String::new());
    // (keywords only, as the evaluator reads them)
    if let Some(args) = &d.args {
        for k in &args.keywords {
            match k.name.sym.as_str() {
                "version" => version = lit(&k.value),
                "reason" => reason = lit(&k.value),
                _ => {}
            }
        }
    }
    let mut msg = format!("{} was deprecated", a.name.sym.as_str());
    if !version.is_empty() {
        msg.push_str(&format!(" since version {version}"));
    }
    if !reason.is_empty() {
        msg.push_str(&format!(", {reason}"));
    }
    msg
}

fn lambda_warnings(
    l: &LambdaExpr,
    globals: &std::collections::HashMap<Symbol, Span>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let shadow = |name: Symbol, span: Span, what: &str| {
        globals.get(&name).map(|g| {
            let at = g.loc();
            warning(
                "shadowed-name",
                "ShadowedNameWarning",
                span,
                format!(
                    "{what} '{}' shadows the package-level name defined at {}:{}",
                    name.as_str(),
                    at.line,
                    at.col
                ),
                None,
            )
        })
    };
    for p in &l.params {
        out.extend(shadow(p.name.sym, p.name.span, "parameter"));
    }
    let used = reads(&l.body);
    let mut seen = BTreeSet::new();
    let last = l.body.len().saturating_sub(1);
    for (i, s) in l.body.iter().enumerate() {
        let StmtKind::Assign(a) = &s.kind else {
            continue;
        };
        // an assignment ending the body is the lambda's value: not unused
        let returned = i == last;
        for t in a.targets.iter().filter(|t| t.path.is_empty()) {
            let name = t.name.sym;
            if !seen.insert(name) {
                continue;
            }
            out.extend(shadow(name, t.name.span, "local variable"));
            if !returned && !name.as_str().starts_with('_') && !used.contains(&name) {
                out.push(warning(
                    "unused-variable",
                    "UnusedVariableWarning",
                    t.name.span,
                    format!("variable '{}' is assigned but never used", name.as_str()),
                    None,
                ));
            }
        }
    }
    out
}

/// Errors upstream's resolver reports that the checker (which runs before `kcl run`
/// evaluates) leaves to evaluation: comprehension loop variables that are dotted or more than
/// two.
pub(super) fn resolver_errors(program: &crate::parser::loader::Program) -> Vec<Finding> {
    use crate::diag::{Diagnostic, ErrorKind};
    let mut diags = Vec::new();
    for m in &program.main.modules {
        walk_stmts(&m.body, &mut |e: &Expr| {
            let clauses = match &e.kind {
                ExprKind::ListComp(c) => &c.clauses,
                ExprKind::DictComp(c) => &c.clauses,
                _ => return,
            };
            for cl in clauses {
                if let Some(t) = cl.targets.iter().find(|t| t.names.len() > 1) {
                    diags.push(Diagnostic::error(
                        ErrorKind::CompileError,
                        t.span,
                        "loop variables can only be ordinary identifiers",
                    ));
                } else if cl.targets.len() > 2 {
                    diags.push(Diagnostic::error(
                        ErrorKind::CompileError,
                        cl.targets[2].span,
                        format!(
                            "the number of loop variables is {}, which can only be 1 or 2",
                            cl.targets.len()
                        ),
                    ));
                }
            }
        });
    }
    diags
        .iter()
        .map(|d| {
            let l = d.span().map(|s| s.loc());
            Finding {
                error: true,
                code: d.code.as_deref().unwrap_or("").to_string(),
                title: d.title.to_string(),
                file: l.as_ref().map(|l| l.file.to_string()).unwrap_or_default(),
                line: l.as_ref().map_or(0, |l| l.line),
                col: l.as_ref().map_or(0, |l| l.col),
                message: d.message().to_string(),
                rendered: d.render(),
                delete: None,
                span: d.span(),
            }
        })
        .collect()
}

/// Statements that never run (`unreachable`): an `if` branch behind a literal condition, and
/// what follows an unconditional `assert False` in the same block.
fn unreachable_warnings(stmts: &[Stmt], out: &mut Vec<Finding>) {
    let literal = |e: &Expr| -> Option<bool> {
        match &e.kind {
            ExprKind::Bool(b) => Some(*b),
            ExprKind::None | ExprKind::Undefined => Some(false),
            ExprKind::Int(i) => Some(*i != 0),
            ExprKind::Paren(x) => match &x.kind {
                ExprKind::Bool(b) => Some(*b),
                _ => None,
            },
            _ => None,
        }
    };
    let mut dead_after: Option<Span> = None;
    for s in stmts {
        if let Some(at) = dead_after.take() {
            let l = at.loc();
            out.push(warning(
                "unreachable",
                "UnreachableCodeWarning",
                s.span,
                format!(
                    "unreachable code: the assertion at {}:{} always fails",
                    l.line, l.col
                ),
                None,
            ));
            break;
        }
        match &s.kind {
            StmtKind::Assert(a) if a.if_cond.is_none() && literal(&a.test) == Some(false) => {
                dead_after = Some(s.span);
            }
            StmtKind::If(i) => {
                let (dead, why) = match literal(&i.cond) {
                    Some(false) => (i.body.first(), "False"),
                    Some(true) => (i.orelse.first(), "True"),
                    None => (None, ""),
                };
                if let Some(d) = dead {
                    out.push(warning(
                        "unreachable",
                        "UnreachableCodeWarning",
                        d.span,
                        format!("unreachable code: the condition is always {why}"),
                        None,
                    ));
                }
                unreachable_warnings(&i.body, out);
                unreachable_warnings(&i.orelse, out);
            }
            StmtKind::Schema(sc) => unreachable_warnings(&sc.body, out),
            _ => {}
        }
    }
}
