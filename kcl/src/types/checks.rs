//! `check:` blocks of schemas and rules, walked in upstream's resolver's order.

use super::*;

impl Checker<'_> {
    /// A schema's `check:` block as upstream's resolver walks it: each check's message, then its
    /// condition, then its test. A condition that is a name (or dotted name) is reported where
    /// the resolver last stood (the last name it resolved, else the last statement of the
    /// body, else the schema), not where it is written.
    pub(super) fn infer_schema_checks(&mut self, env: &Env, checks: &[ast::CheckExpr]) {
        for c in checks {
            if let Some(x) = &c.msg {
                self.check_value(env, x, &Ty::Str, x.span, None);
            }
            if let Some(x) = &c.if_cond {
                let at = self.resolved_at;
                let before = self.errors.len();
                self.infer(env, x);
                if is_dotted_name(x) {
                    for e in &mut self.errors[before..] {
                        e.span = Some(at);
                    }
                }
            }
            self.infer(env, &c.test);
        }
    }

    pub(super) fn infer_checks(&mut self, env: &Env, checks: &[ast::CheckExpr]) {
        for c in checks {
            self.infer(env, &c.test);
            if let Some(x) = &c.if_cond {
                self.infer(env, x);
            }
            // a message is a string (or None), as for `assert`
            if let Some(x) = &c.msg {
                self.check_value(env, x, &Ty::Str, x.span, None);
            }
        }
    }
}

/// `a` or `a.b.c`: upstream's identifier node.
fn is_dotted_name(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Ident(_) => true,
        ExprKind::Selector(s) => !s.optional && is_dotted_name(&s.value),
        _ => false,
    }
}
