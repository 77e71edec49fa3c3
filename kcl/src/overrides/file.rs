//! `-O` on a source file: the text rewritten in place (`kcl` editing a configuration, e.g.
//! bumping an image tag), as opposed to the override of a program's tree in [`super`].

use std::path::Path;

use super::{Spec, key_matches, parse_spec};
use crate::ast::{self, ConfigEntry, ConfigEntryKind, ConfigOp, Expr, ExprKind, Span, StmtKind};

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
