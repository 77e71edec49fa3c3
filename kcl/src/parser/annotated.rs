//! Attributes and annotated assignments (`name: T = value`, `name?: T`), and the values
//! upstream's parser reads after them: a schema's path and arguments, and a config literal
//! without braces after a call.

use super::Parser;
use super::stmt::Body;
use crate::ast::*;
use crate::lexer::Tok;

impl<'a> Parser<'a> {
    /// `name[?]: T [op value]` in a schema body, or at module level `name: T = v`
    /// (annotated assignment), `name: Schema {...}` (unification) or a bare declaration.
    pub(super) fn parse_attr_or_annotated(
        &mut self,
        lo: u32,
        decorators: Vec<Decorator>,
        body: Body,
    ) -> Option<Stmt> {
        let t = self.bump();
        let (name, quoted) = match t.tok {
            Tok::Ident(sym) => (
                Name {
                    sym,
                    span: self.tspan(t),
                },
                false,
            ),
            Tok::Str { raw, triple } => {
                let s = self.decode_plain_string(t, raw, triple);
                (
                    Name {
                        sym: Symbol::intern(&s),
                        span: self.tspan(t),
                    },
                    true,
                )
            }
            _ => {
                self.expected(&["identifier"]);
                return None;
            }
        };
        let optional = self.eat(Tok::Question);
        if !self.expect(Tok::Colon, ":") {
            self.recover_to_line_end();
            return None;
        }
        if !optional && !quoted && decorators.is_empty() {
            // Unification `name: Schema {...}` / `name: Schema(args) {...}`?
            let save = self.pos;
            let nerr = self.errors.len();
            let is_schema_expr = {
                let mut i = 0;
                // a builtin type name is a type here (`a: int {` wants `=`), as upstream's
                // (on the `:`'s line: a name on the next line is a missing type)
                let mut ok = !self.nth(0).nl
                    && matches!(self.nth(0).tok, Tok::Ident(s)
                    if !matches!(s.as_str(), "int" | "float" | "str" | "bool"));
                // a keyword is a name to upstream's parser there (`f: lambda {a = 1}` unifies
                // with a schema named `lambda`, which its resolver then does not find)
                let keyword = !ok
                    && !self.nth(0).nl
                    && self.nth(0).tok.is_word_keyword()
                    && self.nth(1).tok == Tok::LBrace
                    && !self.nth(1).nl;
                ok |= keyword;
                while ok && self.nth(i + 1).tok == Tok::Dot {
                    i += 2;
                    ok = super::expr::is_member_token(self.nth(i).tok);
                }
                ok && matches!(self.nth(i + 1).tok, Tok::LBrace | Tok::LParen)
                    && !self.nth(i + 1).nl
            };
            if is_schema_expr {
                // upstream's unification takes a schema expression, nothing after it (`a: S {}
                // | {}` is an unexpected '|')
                let value = self.parse_schema_path_and_args();
                if matches!(value.kind, ExprKind::Schema(_)) {
                    let kind = StmtKind::Unification(UnificationStmt {
                        target: name,
                        value,
                    });
                    return Some(Stmt {
                        kind,
                        span: self.since(lo),
                    });
                }
                // `name: f(args)` without a `{`: upstream's parser takes the token after the
                // arguments (or the line break) for the config's `{` and reads entries
                if let ExprKind::Call { func, .. } = &value.kind
                    && matches!(func.kind, ExprKind::Ident(_) | ExprKind::Selector(_))
                {
                    let value = self.unbraced_config_after_call(value);
                    return Some(Stmt {
                        kind: StmtKind::Expr(value),
                        span: self.since(lo),
                    });
                }
                self.pos = save;
                self.errors.truncate(nerr);
            }
        }
        let ty = self.parse_type();
        let mut op = None;
        let mut value = None;
        // `a: T = b = v`: upstream assigns every target (each must be a name)
        let mut more_targets = Vec::new();
        match self.tok() {
            Tok::Assign if !self.at_line_break() => {
                self.bump();
                op = Some(AttrOp::Assign);
                let mut v = self.parse_expr();
                while self.at(Tok::Assign) && !self.at_line_break() {
                    self.bump();
                    let next = self.parse_expr();
                    let prev = std::mem::replace(&mut v, next);
                    if let Some(t) = self.expr_to_target(prev) {
                        more_targets.push(t);
                    }
                }
                value = Some(v);
            }
            Tok::AugAssign(a)
                if !self.at_line_break() && body != Body::Plain && !self.in_schema_if =>
            {
                self.bump();
                op = Some(AttrOp::Aug(a));
                value = Some(self.parse_expr());
            }
            _ if body == Body::Plain || self.in_schema_if => self.want_declared_value(),
            // in a schema the declaration ends after its type: a value, or another statement
            // on the same line (`x: int y = 1`), follows
            _ if !self.at_line_break() && !self.at_eof() && !self.starts_stmt() => {
                self.expected(super::expr::OPERAND_START);
                self.recover_to_line_end();
            }
            _ => {}
        }
        if (body == Body::Plain || !more_targets.is_empty())
            && !optional
            && !quoted
            && decorators.is_empty()
            && op == Some(AttrOp::Assign)
        {
            let target = Target {
                name,
                path: Vec::new(),
                span: name.span,
            };
            let value = value.unwrap_or_else(|| Expr::missing(name.span));
            let mut targets = vec![target];
            targets.extend(more_targets);
            let kind = StmtKind::Assign(AssignStmt {
                targets,
                ty: Some(ty),
                value,
            });
            return Some(Stmt {
                kind,
                span: self.since(lo),
            });
        }
        let kind = StmtKind::SchemaAttr(SchemaAttr {
            doc: None,
            name,
            quoted,
            optional,
            ty,
            op,
            value,
            decorators,
        });
        Some(Stmt {
            kind,
            span: self.since(lo),
        })
    }

    /// The value of `name: S {...}` / `name: S(args)...` as upstream's unification reads it:
    /// a dotted name, its arguments and a config (stopping after the arguments when no `{`
    /// follows on the line).
    pub(super) fn parse_schema_path_and_args(&mut self) -> Expr {
        // a name (`all` and `lambda` included: see the caller)
        let t = self.bump();
        let mut e = Expr {
            kind: ExprKind::Ident(Symbol::intern(self.text(t))),
            span: self.tspan(t),
        };
        while self.at(Tok::Dot) {
            self.bump();
            let Some(attr) = self.expect_member() else {
                return e;
            };
            e = super::expr::selector(e, attr, false);
        }
        if !self.at(Tok::LParen) {
            // the schema expression ends the statement (`x: S {}()` calls nothing)
            if self.at(Tok::LBrace)
                && !self.at_line_break()
                && let Some(name) = super::expr::expr_to_identifier(&e)
            {
                return self.parse_schema_expr(name, None);
            }
            return self.parse_postfix_from(e);
        }
        let args = self.parse_call_args();
        if self.at(Tok::LBrace)
            && !self.at_line_break()
            && let Some(name) = super::expr::expr_to_identifier(&e)
        {
            return self.parse_schema_expr(name, Some(args));
        }
        let span = self.since(e.span.lo);
        Expr {
            kind: ExprKind::Call {
                func: Box::new(e),
                args: Box::new(args),
            },
            span,
        }
    }

    /// Whether a blank or comment-only line lies between the previous token and the current.
    pub(super) fn lines_skipped_before_current(&self) -> bool {
        let (p, t) = (self.prev(), self.tk());
        let between = self
            .src
            .get((p.hi - self.base) as usize..(t.lo - self.base) as usize)
            .unwrap_or("");
        between.matches('\n').count() > 1
    }

    /// Upstream's unification after `name: f(args)` with no `{`: the next token, or the line
    /// break, stands for the `{`; entries follow (on that line only, unless a line break
    /// follows the stand-in), then a `}` that cannot be there.
    pub(super) fn unbraced_config_after_call(&mut self, call: Expr) -> Expr {
        let multi_line = if self.at_line_break() || self.at_eof() {
            // a blank or comment line before the entries is one more line break, read inside
            // the stand-in braces: the entries then run on to the end
            !self.at_eof() && self.lines_skipped_before_current()
        } else {
            self.bump();
            self.at_line_break()
        };
        let indented = self.tk().nl && !self.at_eof() && self.tk().indent > self.line_indent;
        if indented {
            let span = self.tspan(self.tk());
            self.error(span, "unexpected token 'indent'");
        }
        if !multi_line && self.tk().nl && !self.at_eof() {
            // the line break is the stand-in: the entries' line does not start a statement
            let pos = self.pos;
            self.toks[pos].nl = false;
        }
        // one line of entries sees its line break (as upstream's does); several lines of them
        // are read as inside braces
        if multi_line {
            self.ctx.push(super::Ctx::Brace);
        }
        let mut first = true;
        while !self.at(Tok::RBrace) && !self.at_eof() && !self.gave_up() {
            if !multi_line && !first && self.tk().nl {
                break;
            }
            first = false;
            let start = self.pos;
            self.parse_config_entry();
            if self.eat(Tok::Comma) {
                continue;
            }
            if self.pos == start {
                if !self.tk().nl {
                    self.expected(super::expr::OPERAND_START);
                }
                self.bump();
            }
        }
        if multi_line {
            self.ctx.pop();
        }
        if self.at(Tok::RBrace) {
            self.bump();
        } else if self.at_eof() {
            // upstream points at the file's last token (its end-of-file token stands there)
            let got = if indented { "newline" } else { "eof" };
            let last = self.prev();
            self.error(
                self.tspan(last),
                format!("expected one of [\"}}\"] got {got}"),
            );
        } else {
            let t = self.tk();
            let got = t.tok.describe(self.text(t));
            self.error(
                self.span(t.lo, t.lo),
                format!("expected one of [\"}}\"] got {got}"),
            );
        }
        call
    }

    /// Upstream wants a value for a declaration outside a schema; it reports the next line's
    /// first token (or the end of the file).
    pub(super) fn want_declared_value(&mut self) {
        let t = self.tk();
        let (got, span) = if self.at_eof() {
            // an indented block ends in a dedent before the end of the file
            let what = if self.line_indent > 0 {
                "dedent"
            } else {
                "eof"
            };
            (what.to_string(), self.describe_current().1)
        } else if t.nl && t.indent != self.line_indent {
            // newlines are skipped there, but not a change of indentation
            let what = if t.indent > self.line_indent {
                "indent"
            } else {
                "dedent"
            };
            (what.to_string(), self.tspan(t))
        } else {
            (t.tok.describe(self.text(t)), self.tspan(t))
        };
        self.error(span, format!("expected one of [\"=\"] got {got}"));
    }
}
