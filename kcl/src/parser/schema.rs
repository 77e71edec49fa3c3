//! `schema` and `rule` statements: the header (parents, mixins, parameters), the schema body
//! (attributes, index signatures, mixins, nested statements), and `check:` blocks.

use super::Parser;
use super::stmt::{Body, is_operator_start};
use crate::ast::*;
use crate::lexer::Tok;
use std::sync::Arc;

impl<'a> Parser<'a> {
    pub(super) fn parse_schema(
        &mut self,
        lo: u32,
        decorators: Vec<Decorator>,
        header_indent: u32,
    ) -> Option<Stmt> {
        let kw = self.bump();
        let kind = match self.text(kw) {
            "mixin" => SchemaKind::Mixin,
            "protocol" => SchemaKind::Protocol,
            _ => SchemaKind::Schema,
        };
        let (name, params) = self.parse_def_name()?;
        let mut parent = None;
        // (the header is one line: a `(` or `[` on the next one is no part of it)
        if self.at(Tok::LParen) && !self.at_line_break() {
            self.bump();
            // (upstream reads the parent on the header's line)
            self.ctx.push(super::Ctx::ParenLine);
            parent = self.parse_identifier();
            self.ctx.pop();
            if self.tk().nl && !self.at_eof() {
                // (the `)` on a later line is missing at the header line's end)
                self.expected_at_line_end(&[")"]);
            } else if !self.expect(Tok::RParen, ")") {
                // Upstream keeps going token by token from here.
                self.ctx.push(super::Ctx::Paren);
                while !self.at(Tok::RParen)
                    && !self.at(Tok::Colon)
                    && !self.at_eof()
                    && !self.tk().nl
                {
                    self.bump();
                }
                self.ctx.pop();
                self.eat(Tok::RParen);
            }
        }
        let for_host = self.parse_for_host_colon();
        let mut s = SchemaStmt {
            doc: None,
            name,
            kind,
            parent,
            for_host,
            params,
            mixins: Vec::new(),
            body: Vec::new(),
            decorators,
            checks: Vec::new(),
            index_signature: None,
        };
        self.parse_schema_body(&mut s, header_indent);
        Some(Stmt {
            kind: StmtKind::Schema(Box::new(s)),
            span: self.since(lo),
        })
    }

    /// A schema's or rule's name and its `[params]`, if any.
    fn parse_def_name(&mut self) -> Option<(Name, Option<Vec<Param>>)> {
        let name = self.expect_ident()?;
        let mut params = None;
        if self.at(Tok::LBracket) && !self.at_line_break() {
            self.bump();
            self.ctx.push(super::Ctx::Bracket);
            let p = self.parse_params(Tok::RBracket);
            self.ctx.pop();
            self.expect(Tok::RBracket, "]");
            params = Some(p);
            // upstream skips line breaks after the `]`: the header goes on at the next token
            // (unless that line is indented otherwise: its indent or dedent is what follows)
            if self.tk().nl && !self.at_eof() && self.tk().indent == self.line_indent {
                self.toks[self.pos].nl = false;
            }
        }
        Some((name, params))
    }

    /// The end of a schema's or rule's header: `for Protocol` if present, then `:` (the rest of
    /// the line skipped when it is missing).
    fn parse_for_host_colon(&mut self) -> Option<Identifier> {
        let mut for_host = None;
        if self.at(Tok::For) {
            self.bump();
            for_host = self.parse_identifier();
        }
        if !self.expect_header_colon() {
            self.recover_to_line_end();
        }
        for_host
    }

    /// A schema body's `-x: T` (at the `:` after the signed expression starting at `span`):
    /// upstream reads an annotated assignment whose target is no name, and wants its `=`.
    fn annotated_sign_expr(&mut self, span: Span, ind: u32) {
        self.bump();
        self.parse_type();
        let t = self.tk();
        if self.at(Tok::Assign) && !t.nl {
            self.error(
                self.span(span.lo, span.lo),
                "'UnaryExpression' is an illegal expression for assignment",
            );
        } else {
            // (upstream's `=` check finds the next line's first token, past the newline)
            let (got, at) = if t.tok == Tok::Eof {
                ("dedent".to_string(), self.prev_last_char())
            } else if t.nl && t.indent < ind {
                ("dedent".to_string(), self.span(t.lo, t.lo))
            } else if t.nl && t.indent > ind {
                ("indent".to_string(), self.span(t.lo, t.lo))
            } else {
                (t.tok.describe(self.text(t)), self.tspan(t))
            };
            self.error(at, format!("expected one of [\"=\"] got {got}"));
        }
        self.recover_to_line_end();
    }

    fn parse_schema_body(&mut self, s: &mut SchemaStmt, header_indent: u32) {
        let t = self.tk();
        // Upstream accepts a schema with an empty body; text after the header's colon on its
        // line leaves the body empty too and is read as the next statement
        // (`schema A: x: int = 1` is an empty schema and a variable `x`).
        if t.tok == Tok::Eof || !t.nl || t.indent <= header_indent {
            return;
        }
        let ind = t.indent;
        let mut first = true;
        let mut checked = false;
        // upstream takes `mixin [...]` only as the body's first statement (after its doc);
        // later it is an expression (a subscript of the name `mixin`)
        let mut mixin_allowed = true;
        while !self.at_eof() && !self.gave_up() {
            let t = self.tk();
            if t.nl && t.indent < ind && !first {
                break;
            }
            // the check block ends the schema body
            if checked && t.nl && t.indent == ind {
                let got = t.tok.describe(self.text(t));
                self.error(
                    self.tspan(t),
                    format!("expected one of [\"dedent\"] got {got}"),
                );
                self.skip_block(ind.saturating_sub(1));
                break;
            }
            if t.nl && t.indent > ind {
                self.error(self.tspan(t), "unexpected token 'indent'");
                self.skip_block(ind);
                continue;
            }
            let start = self.pos;
            self.stmt_start = self.pos;
            self.stray_dedent_at(start);
            let lo = t.lo;
            if first {
                first = false;
                if let Tok::Str { raw, triple } = t.tok {
                    let n1 = self.nth(1);
                    if n1.nl || n1.tok == Tok::Eof {
                        self.bump();
                        let v = self.decode_plain_string(t, raw, triple);
                        s.doc = Some(StrLit {
                            value: Arc::from(v),
                            span: self.tspan(t),
                        });
                        continue;
                    }
                }
            }
            let mixin_stmt = self.ident_is(0, "mixin") && self.nth(1).tok == Tok::LBracket;
            if self.keyword_is(0, "mixin") && !mixin_stmt && !self.nth(1).nl {
                // (`mixin` starts a mixin list in a schema body whatever follows it)
                self.bump();
                self.expect(Tok::LBracket, "[");
                self.recover_to_line_end();
            } else if mixin_stmt && !std::mem::replace(&mut mixin_allowed, false) {
                let e = self.parse_expr();
                let span = e.span;
                s.body.push(Stmt {
                    kind: StmtKind::Expr(e),
                    span,
                });
            } else if mixin_stmt {
                self.bump();
                self.bump();
                self.ctx.push(super::Ctx::Bracket);
                while !self.at(Tok::RBracket) && !self.at_eof() {
                    match self.parse_identifier() {
                        Some(id) => s.mixins.push(id),
                        None => break,
                    }
                    // (upstream needs no comma between the names)
                    self.eat(Tok::Comma);
                }
                self.ctx.pop();
                self.expect(Tok::RBracket, "]");
            } else if self.ident_is(0, "check") && self.nth(1).nl && self.nth(1).tok != Tok::Eof {
                // `check` ending its line: the keyword wants its `:`
                self.bump();
                self.expect_header_colon();
                self.recover_to_line_end();
            } else if self.ident_is(0, "check") && self.nth(1).tok == Tok::Eof {
                // ending the file too: then the block's indent, where the file's dedent is
                self.bump();
                let span = self.expected_at_line_end(&[":"]);
                self.expected_got(span, &["indent"], "dedent");
            } else if self.ident_is(0, "check")
                && !self.nth(1).nl
                && !matches!(self.nth(1).tok, Tok::Colon | Tok::Eof)
            {
                // `check` and anything but its `:` on the line: upstream's keyword wants the
                // `:` there, then reads on as the block
                let check_indent = if t.nl { t.indent } else { self.line_indent };
                self.bump();
                self.expected(&[":"]);
                let checks = self.parse_check_block(check_indent);
                s.checks.extend(checks);
                checked = true;
            } else if self.ident_is(0, "check") && self.nth(1).tok == Tok::Colon {
                let check_indent = if t.nl { t.indent } else { self.line_indent };
                self.bump();
                self.bump();
                let checks = self.parse_check_block(check_indent);
                s.checks.extend(checks);
                checked = true;
            } else if self.at(Tok::LBracket) && self.bracket_start() == BracketStart::Neither {
                let t = self.nth(1);
                let got = t.tok.describe(self.text(t));
                self.error(
                    self.tspan(t),
                    format!("expected a index signature or list expression here, got {got}"),
                );
                self.recover_to_line_end();
            } else if self.at(Tok::LBracket) && self.bracket_start() == BracketStart::IndexSignature
            {
                let sig = self.parse_index_signature();
                if s.index_signature.is_some() {
                    self.error(
                        sig.span,
                        "duplicate schema index signature definitions, only one is allowed in the schema",
                    );
                }
                s.index_signature = Some(sig);
            } else if self.at(Tok::LBracket) {
                // a list expression as a statement: upstream's schema body assigns to none
                // (`[a] = 1` stops before the `=`, which starts no statement)
                let e = self.parse_expr();
                let span = e.span;
                s.body.push(Stmt {
                    kind: StmtKind::Expr(e),
                    span,
                });
                if self.at(Tok::Assign) && !self.at_line_break() {
                    self.expected(super::expr::OPERAND_START);
                    self.recover_to_line_end();
                }
            } else if is_operator_start(self.tok()) {
                // upstream reads a schema body's statement (not one of its `if` blocks) as an
                // expression: a sign starts one (`- 1`), other operators are no expression
                if matches!(self.tok(), Tok::Minus | Tok::Plus) {
                    let e = self.parse_expr();
                    let span = e.span;
                    if self.at(Tok::Colon) && !self.at_line_break() {
                        self.annotated_sign_expr(span, ind);
                        continue;
                    }
                    s.body.push(Stmt {
                        kind: StmtKind::Expr(e),
                        span,
                    });
                } else {
                    let t = self.tk();
                    let what = t.tok.describe(self.text(t));
                    self.error(
                        self.tspan(t),
                        format!(
                            "expected one of [\"identifier\", \"literal\", \"(\", \"[\", \"{{\"] got {what}"
                        ),
                    );
                    self.recover_to_line_end();
                }
            } else if let Some(st) = self.parse_stmt_in(Body::Schema) {
                s.body.push(st);
            }
            mixin_allowed = false;
            // an operator after a statement on its line starts the next statement (above)
            if self.pos == start || self.tk().nl || !is_operator_start(self.tok()) {
                self.finish_stmt(start);
            }
            let _ = lo;
        }
        // a line inside brackets took the body's level off upstream's stack: the end of the
        // file gives no dedent to close it
        if self.at_eof() && ind <= self.eof_open_width {
            let at = self.prev_last_char();
            self.error(at, "expected one of [\"dedent\"] got eof");
        }
    }

    /// What a schema body's `[` starts, decided as upstream's parser does from the three
    /// tokens after it (a line break counting as one): a line break or `]` starts a list; a
    /// name starts an index signature when one of the next two tokens is `:` (`[k: T]`,
    /// `[T]:`), else a list (`[a.b]`, `[k = str]`); `...` and a name start an index signature;
    /// anything else is neither (`[1]`, `["a"]`, `[[T]]`).
    fn bracket_start(&self) -> BracketStart {
        // (`None`: a line break, a token to upstream's lexer here, and so is an indent or a
        // dedent after it when the next line's indentation differs)
        let here = self.pos.min(self.toks.len() - 1);
        let indent = self.toks[..=here]
            .iter()
            .rev()
            .find(|t| t.nl)
            .map_or(0, |t| t.indent);
        let mut la: [Option<Tok>; 3] = [None; 3];
        let (mut n, mut k) = (0, 1);
        while n < 3 {
            let t = self.nth(k);
            if t.nl || t.tok == Tok::Eof {
                la[n] = None;
                n += 1;
                if t.tok != Tok::Eof && t.indent != indent && n < 3 {
                    la[n] = None;
                    n += 1;
                }
            }
            if n < 3 {
                la[n] = Some(t.tok);
                n += 1;
            }
            if t.tok == Tok::Eof {
                break;
            }
            k += 1;
        }
        let colon = Some(Tok::Colon);
        match la {
            [None | Some(Tok::RBracket), ..] => BracketStart::List,
            [Some(t0), t1, t2] if t0.is_upstream_name() && t1 != colon && t2 != colon => {
                BracketStart::List
            }
            [Some(Tok::Ellipsis), Some(t1), _] if t1.is_upstream_name() => {
                BracketStart::IndexSignature
            }
            [Some(t0), ..] if t0.is_upstream_name() => BracketStart::IndexSignature,
            _ => BracketStart::Neither,
        }
    }

    /// `[name: T]: V`, `[T]: V`, `[...T]: V`, `[name: ...T]: V`, each with an optional
    /// `= default`, read as upstream's parser does (a name is the key's type when `]` follows
    /// it, else the key's name, and `:` must follow).
    fn parse_index_signature(&mut self) -> IndexSignature {
        let lo = self.bump().lo;
        // upstream's parser skips no line break in an index signature's brackets
        self.ctx.push(super::Ctx::ParenLine);
        let mut any_other = false;
        let mut key_name = None;
        if self.eat(Tok::Ellipsis) {
            any_other = true;
        } else if self.nth(1).tok != Tok::RBracket {
            let t = self.bump();
            key_name = Some(Name {
                sym: crate::ast::Symbol::intern(self.text(t)),
                span: self.tspan(t),
            });
            // (upstream reads the name as a dotted one: a `.` wants a name after it)
            let mut dotted = true;
            while dotted && self.at(Tok::Dot) && !self.tk().nl {
                self.bump();
                dotted = self.expect_ident().is_some();
            }
            if !dotted || !self.expect(Tok::Colon, ":") {
                self.recover_to_line_end();
                self.ctx.pop();
                let span = self.since(lo);
                let any = Type {
                    kind: crate::ast::TypeKind::Any,
                    span,
                };
                return IndexSignature {
                    key_name,
                    key_ty: any.clone(),
                    value_ty: any,
                    value: None,
                    any_other,
                    span,
                };
            }
            if self.eat(Tok::Ellipsis) {
                any_other = true;
            }
        }
        let key_ty = self.parse_type();
        self.ctx.pop();
        self.expect(Tok::RBracket, "]");
        self.expect(Tok::Colon, ":");
        let value_ty = self.parse_type();
        let value = if self.at(Tok::Assign) && !self.at_line_break() {
            self.bump();
            Some(self.parse_expr())
        } else {
            None
        };
        IndexSignature {
            key_name,
            key_ty,
            value_ty,
            value,
            any_other,
            span: self.since(lo),
        }
    }

    /// One `test [if cond] [, msg]` line of a check block.
    fn parse_check_expr(&mut self) -> CheckExpr {
        let lo = self.tk().lo;
        let (test, if_cond, msg) = self.parse_test_if_msg();
        CheckExpr {
            test,
            if_cond,
            msg,
            span: self.since(lo),
        }
    }

    fn parse_check_block(&mut self, header_indent: u32) -> Vec<CheckExpr> {
        let mut out = Vec::new();
        let t = self.tk();
        if !t.nl && t.tok != Tok::Eof {
            // upstream's check block always starts on its own line
            self.expected(&["indent"]);
            out.push(self.parse_check_expr());
            return out;
        }
        if t.tok == Tok::Eof || t.indent <= header_indent {
            self.expected_indent();
            return out;
        }
        let ind = t.indent;
        while !self.at_eof() && !self.gave_up() {
            let t = self.tk();
            if t.nl && t.indent < ind {
                break;
            }
            // a line starting with no operand: upstream's lexer has taken the line break, so
            // the token itself is what it got (not the newline)
            let operand = super::expr::starts_operand(t.tok)
                || matches!(t.tok, Tok::Minus | Tok::Plus | Tok::Tilde | Tok::Eof)
                || t.tok.is_word_keyword();
            if !operand {
                let got = t.tok.describe(self.text(t));
                self.expected_got(self.tspan(t), super::expr::OPERAND_START, &got);
                self.bump();
                continue;
            }
            let start = self.pos;
            self.stmt_start = self.pos;
            out.push(self.parse_check_expr());
            // upstream reads on the line as the next check expression (`x = 1` is the check
            // `x` and a missing operand before the `=`; a keyword there is a name)
            let t = self.tk();
            if !t.nl
                && t.tok != Tok::Eof
                && self.pos != start
                && !self.starts_expr()
                && !t.tok.is_word_keyword()
            {
                self.expected(super::expr::OPERAND_START);
                self.bump();
                continue;
            }
            self.finish_stmt(start);
        }
        out
    }

    pub(super) fn parse_rule(
        &mut self,
        lo: u32,
        decorators: Vec<Decorator>,
        header_indent: u32,
    ) -> Option<Stmt> {
        self.bump();
        let (name, params) = self.parse_def_name()?;
        let mut parents = Vec::new();
        if self.at(Tok::LParen) && !self.at_line_break() {
            self.bump();
            self.ctx.push(super::Ctx::Paren);
            while !self.at(Tok::RParen) && !self.at_eof() {
                match self.parse_identifier() {
                    Some(id) => parents.push(id),
                    None => break,
                }
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
            self.ctx.pop();
            self.expect(Tok::RParen, ")");
        }
        let for_host = self.parse_for_host_colon();
        let mut doc = None;
        let t = self.tk();
        // a rule's checks start on the next line, indented
        if !t.nl && t.tok != Tok::Eof {
            let got = t.tok.describe(self.text(t));
            self.error(
                self.tspan(t),
                format!("expected one of [\"indent\"] got {got}"),
            );
        }
        if let Tok::Str { raw, triple } = t.tok
            && t.nl
            && t.indent > header_indent
            && (self.nth(1).nl || self.nth(1).tok == Tok::Eof)
        {
            self.bump();
            let v = self.decode_plain_string(t, raw, triple);
            doc = Some(StrLit {
                value: Arc::from(v),
                span: self.tspan(t),
            });
        }
        let checks = if doc.is_some() && (self.at_eof() || self.tk().indent <= header_indent) {
            Vec::new()
        } else {
            self.parse_check_block(header_indent)
        };
        let r = RuleStmt {
            doc,
            name,
            parents,
            for_host,
            params,
            decorators,
            checks,
        };
        Some(Stmt {
            kind: StmtKind::Rule(Box::new(r)),
            span: self.since(lo),
        })
    }
}

/// What a schema body's `[` starts (see `Parser::bracket_start`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum BracketStart {
    List,
    IndexSignature,
    Neither,
}
