//! `-O` overrides: `[pkg:]a.b.c=value`, `a.b:value`, `a.b+=value`, `a.b-` applied to the
//! program's syntax tree before evaluation (so computed attributes see the new value), and
//! [`override_file`], which rewrites a source file's text in place.

use std::path::Path;
use std::sync::Arc;

use crate::ast::{
    self, ConfigEntry, ConfigEntryKind, ConfigOp, Expr, ExprKind, FileId, Name, SelectorExpr, Span,
    Stmt, StmtKind, Symbol,
};
use crate::parser::loader::Program;

/// One parsed override spec.
#[derive(Debug, Clone)]
pub struct Spec {
    pub path: Vec<String>,
    /// `None` deletes.
    pub op: Option<ConfigOp>,
    pub value: String,
}

/// Parse `[pkg:]a.b.c=value` forms.
pub fn parse_spec(s: &str) -> Result<Spec, String> {
    let s = s.strip_prefix(':').unwrap_or(s);
    if let Some(p) = s.strip_suffix('-')
        && !p.contains('=')
        && !p.contains(':')
    {
        return Ok(Spec {
            path: p.split('.').map(String::from).collect(),
            op: None,
            value: String::new(),
        });
    }
    let bytes = s.as_bytes();
    for i in 0..bytes.len() {
        let (op, len) = match bytes[i] {
            b'+' if bytes.get(i + 1) == Some(&b'=') => (ConfigOp::Insert, 2),
            b'=' => (ConfigOp::Override, 1),
            b':' => (ConfigOp::Union, 1),
            _ => continue,
        };
        let path = &s[..i];
        if path.is_empty() {
            break;
        }
        return Ok(Spec {
            path: path.split('.').map(String::from).collect(),
            op: Some(op),
            value: s[i + len..].to_string(),
        });
    }
    Err(format!(
        "invalid override spec '{s}', expected path=value, path:value, path+=value or path-"
    ))
}

fn value_expr(text: &str) -> Result<Expr, String> {
    let m = crate::parser::parse_source("<override>", &format!("__override__ = {text}\n"))
        .map_err(|e| format!("invalid override value '{text}': {e}"))?;
    let Some(StmtKind::Assign(a)) = m.body.into_iter().next().map(|s| s.kind) else {
        return Err(format!("invalid override value '{text}'"));
    };
    // a bare name is a string, as upstream treats `-O a.b=value`; so is an operation
    // (`-O a=-3` sets '-3', `-O a=1+2` sets '1+2'), as upstream's override values
    Ok(match &a.value.kind {
        ExprKind::Ident(s) => Expr {
            kind: ExprKind::Str(Arc::from(s.as_str())),
            span: a.value.span,
        },
        ExprKind::Unary { .. } | ExprKind::Binary { .. } => Expr {
            kind: ExprKind::Str(Arc::from(text.trim())),
            span: a.value.span,
        },
        _ => a.value,
    })
}

fn name(s: &str) -> Name {
    Name {
        sym: Symbol::intern(s),
        span: Span::default(),
    }
}

fn key_matches(k: &Expr, s: &str) -> bool {
    match &k.kind {
        ExprKind::Ident(x) => x.as_str() == s,
        ExprKind::Str(x) => &**x == s,
        _ => false,
    }
}

fn config_entries(e: &mut Expr) -> Option<&mut Box<[ConfigEntry]>> {
    match &mut e.kind {
        ExprKind::Config(v) => Some(v),
        ExprKind::Schema(s) => config_entries(&mut s.config),
        ExprKind::Paren(x) => config_entries(x),
        _ => None,
    }
}

fn key_expr(path: &[String]) -> Expr {
    let mut e = Expr {
        kind: ExprKind::Ident(Symbol::intern(&path[0])),
        span: Span::default(),
    };
    for p in &path[1..] {
        e = Expr {
            kind: ExprKind::Selector(Box::new(SelectorExpr {
                value: e,
                attr: name(p),
                optional: false,
            })),
            span: Span::default(),
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

fn apply_entries(
    entries: &mut Box<[ConfigEntry]>,
    path: &[String],
    spec: &Spec,
    value: &Option<Expr>,
) -> bool {
    replace_path(entries, path, spec.op, value.as_ref())
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
        if path.len() > 1 {
            // (upstream keeps the last entry's answer)
            if let Some(inner) = config_entries(v) {
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
                *v = nv.clone();
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
                    *v = nv.clone();
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

fn apply_module(body: &mut Vec<Stmt>, spec: &Spec, value: &Option<Expr>) -> bool {
    let root = &spec.path[0];
    let mut found = false;
    for st in body.iter_mut() {
        let target_val: Option<&mut Expr> = match &mut st.kind {
            StmtKind::Assign(a)
                if a.targets
                    .iter()
                    .any(|t| t.path.is_empty() && t.name.sym.as_str() == root) =>
            {
                Some(&mut a.value)
            }
            StmtKind::Unification(u) if u.target.sym.as_str() == root => Some(&mut u.value),
            _ => None,
        };
        let Some(v) = target_val else { continue };
        if spec.path.len() == 1 {
            found = true;
            if let Some(nv) = value {
                *v = nv.clone();
            }
        } else if let Some(entries) = config_entries(v) {
            found = true;
            apply_entries(entries, &spec.path[1..], spec, value);
            // upstream overrides the first statement of the file that holds the path
            break;
        }
        // (a path into a value that is no config literal finds nothing there: upstream then
        // appends the root, a second assignment)
    }
    if spec.op.is_none() && spec.path.len() == 1 {
        body.retain(|st| !matches!(&st.kind, StmtKind::Assign(a) if a.targets.iter().any(|t| t.name.sym.as_str() == root)));
    }
    found
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
        let nowhere = Span::new(FileId(u32::MAX), 0, 0);
        for m in program.main.modules.iter_mut() {
            // copy-on-write: a module shared with other programs (a parse cache) stays intact
            let m = std::sync::Arc::make_mut(m);
            if apply_module(&mut m.body, &spec, &value) {
                continue;
            }
            let Some(op) = spec.op else { continue };
            if spec.path.len() > 1 && op == ast::ConfigOp::Insert {
                continue;
            }
            // a missing root with a path gets a config holding the path (upstream adds
            // `a = {b.c = v}` for `-O a.b.c=v`)
            let value = if spec.path.len() > 1 {
                Some(Expr {
                    kind: ExprKind::Config(Box::new([ConfigEntry {
                        kind: ConfigEntryKind::KeyValue {
                            key: key_expr(&spec.path[1..]),
                            op,
                            value: value.clone().unwrap(),
                        },
                    }])),
                    span: nowhere,
                })
            } else {
                value.clone()
            };
            let t = ast::Target {
                name: name(&spec.path[0]),
                path: Vec::new(),
                span: nowhere,
            };
            m.body.push(Stmt {
                kind: StmtKind::Assign(ast::AssignStmt {
                    targets: vec![t],
                    ty: None,
                    value: value.unwrap(),
                }),
                span: nowhere,
            });
        }
    }
    Ok(())
}

/// Rewrite `file` in place with the override specs (e.g. bump an image tag). Returns whether
/// the text changed. Existing entries get their value replaced; missing ones are added as a
/// new line at the end of the innermost config found; `path-` removes the entry's line.
pub fn override_file(file: &Path, specs: &[String]) -> Result<bool, String> {
    let mut text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let orig = text.clone();
    for s in specs {
        let spec = parse_spec(s)?;
        let m = crate::parser::parse_source(&file.display().to_string(), &text)
            .map_err(|e| e.to_string())?;
        if let Some(edit) = plan_edit(&m, &text, &spec)? {
            let (lo, hi, rep) = edit;
            text.replace_range(lo..hi, &rep);
        }
    }
    if text != orig {
        std::fs::write(file, &text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        return Ok(true);
    }
    Ok(false)
}

fn op_str(op: ConfigOp) -> &'static str {
    match op {
        ConfigOp::Union => ": ",
        ConfigOp::Override => " = ",
        ConfigOp::Insert => " += ",
    }
}

fn find_entries(e: &Expr) -> Option<(&[ConfigEntry], Span)> {
    match &e.kind {
        ExprKind::Config(v) => Some((v, e.span)),
        ExprKind::Schema(s) => find_entries(&s.config),
        ExprKind::Paren(x) => find_entries(x),
        _ => None,
    }
}

fn line_start(text: &str, pos: usize) -> usize {
    text[..pos].rfind('\n').map(|i| i + 1).unwrap_or(0)
}

fn plan_edit(
    m: &ast::Module,
    text: &str,
    spec: &Spec,
) -> Result<Option<(usize, usize, String)>, String> {
    let root = &spec.path[0];
    for st in &m.body {
        let v = match &st.kind {
            StmtKind::Assign(a)
                if a.targets
                    .iter()
                    .any(|t| t.path.is_empty() && t.name.sym.as_str() == root) =>
            {
                &a.value
            }
            StmtKind::Unification(u) if u.target.sym.as_str() == root => &u.value,
            _ => continue,
        };
        if spec.path.len() == 1 {
            return Ok(spec
                .op
                .map(|_| (v.span.lo as usize, v.span.hi as usize, spec.value.clone())));
        }
        let mut cur = v;
        let mut rest = &spec.path[1..];
        loop {
            let Some((entries, cspan)) = find_entries(cur) else {
                return Ok(None);
            };
            let hit = entries.iter().find(|en| matches!(&en.kind, ConfigEntryKind::KeyValue { key, .. } if key_matches(key, &rest[0])));
            match hit {
                Some(en) => {
                    let ConfigEntryKind::KeyValue { value, .. } = &en.kind else {
                        unreachable!()
                    };
                    if rest.len() > 1 {
                        cur = value;
                        rest = &rest[1..];
                        continue;
                    }
                    return Ok(Some(match spec.op {
                        Some(op) => (
                            en.span().lo as usize,
                            en.span().hi as usize,
                            format!("{}{}{}", rest[0], op_str(op), spec.value),
                        ),
                        None => {
                            let lo = line_start(text, en.span().lo as usize);
                            let hi = text[en.span().hi as usize..]
                                .find('\n')
                                .map(|i| en.span().hi as usize + i + 1)
                                .unwrap_or(text.len());
                            (lo, hi, String::new())
                        }
                    }));
                }
                None => {
                    let Some(op) = spec.op else { return Ok(None) };
                    let key = rest.join(".");
                    // insert before the closing brace, indented like the last entry
                    let close = cspan.hi as usize - 1;
                    let indent = entries.last().map(|e| {
                        let ls = line_start(text, e.span().lo as usize);
                        text[ls..e.span().lo as usize].to_string()
                    });
                    let ins = match indent {
                        Some(ind)
                            if !ind.trim().is_empty()
                                || text[line_start(text, close)..close].trim().is_empty() =>
                        {
                            let ls = line_start(text, close);
                            return Ok(Some((
                                ls,
                                ls,
                                format!("{ind}{key}{}{}\n", op_str(op), spec.value),
                            )));
                        }
                        _ => format!(" {key}{}{} ", op_str(op), spec.value),
                    };
                    return Ok(Some((close, close, ins)));
                }
            }
        }
    }
    Ok(None)
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

    #[test]
    fn rewrite_file_bumps_image() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("main.k");
        std::fs::write(
            &f,
            "app = {\n    image = \"nginx:1.0\"\n    replicas = 1\n}\n",
        )
        .unwrap();
        assert!(override_file(&f, &["app.image=\"nginx:2.0\"".to_string()]).unwrap());
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "app = {\n    image = \"nginx:2.0\"\n    replicas = 1\n}\n"
        );
        assert!(override_file(&f, &["app.port=80".to_string()]).unwrap());
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "app = {\n    image = \"nginx:2.0\"\n    replicas = 1\n    port = 80\n}\n"
        );
        assert!(override_file(&f, &["app.replicas-".to_string()]).unwrap());
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "app = {\n    image = \"nginx:2.0\"\n    port = 80\n}\n"
        );
    }
}
