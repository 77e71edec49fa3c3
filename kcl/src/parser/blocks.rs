//! Expressions with a braced body: quantifiers (`all x in xs { test }` and the others) and
//! lambdas (`lambda x: int -> int { stmts }`), and the parameter lists of lambdas, schemas and
//! rules.

use super::expr::selector;
use super::{Ctx, Parser};
use crate::ast::*;
use crate::diag::ErrorKind;
use crate::lexer::Tok;

impl<'a> Parser<'a> {
    pub(super) fn parse_quant(&mut self) -> Expr {
        let t = self.bump();
        let lo = t.lo;
        let op = match self.text(t) {
            "all" => QuantOp::All,
            "any" => QuantOp::Any,
            "map" => QuantOp::Map,
            _ => QuantOp::Filter,
        };
        // upstream's grammar takes one or two variables, each an identifier that may be
        // dotted (`i.j`: its resolver then says a loop variable must be an ordinary one)
        let mut vars: Vec<crate::ast::Name> = Vec::new();
        while let Some(mut n) = self.expect_ident() {
            while self.at(Tok::Dot) && !self.at_line_break() && !self.nth(1).nl {
                self.bump();
                let Some(attr) = self.expect_ident() else {
                    break;
                };
                let dotted = format!("{}.{}", n.sym.as_str(), attr.sym.as_str());
                n = crate::ast::Name {
                    sym: crate::ast::Symbol::intern(&dotted),
                    span: n.span.to(attr.span),
                };
            }
            vars.push(n);
            if vars.len() == 2 || !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::In, "in");
        let target = self.parse_quant_target();
        let brace = self.pos;
        if !self.expect(Tok::LBrace, "{") {
            return Expr::missing(self.since(lo));
        }
        self.lambda_braces.push(brace);
        self.ctx.push(Ctx::Brace);
        // `{` ending its line opens upstream's block body: one test on its own line, then a
        // dedent to the closing brace
        let body_indent = self.tk().nl.then(|| self.tk().indent);
        // the indentation of the line holding `{`: the body must be indented past it
        let header_indent = (0..=brace)
            .rev()
            .find(|&i| i == 0 || self.toks[i].nl)
            .map_or(0, |i| self.toks[i].indent);
        // a `{` ending the file wants the block body's indent: upstream finds the end of the
        // file (in an indented block outside brackets, its dedent)
        if self.at_eof() {
            let (_, span) = self.describe_current();
            let got = if self.ctx.len() == 1 && header_indent > 0 {
                "dedent"
            } else {
                "eof"
            };
            self.error(span, format!("expected one of [\"indent\"] got {got}"));
            self.ctx.pop();
            self.lambda_braces.pop();
            return Expr::missing(self.since(lo));
        }
        if let Some(ind) = body_indent
            && ind <= header_indent
            && !self.at_eof()
        {
            let t = self.tk();
            let got = t.tok.describe(self.text(t));
            self.error(
                self.tspan(t),
                format!("expected one of [\"indent\"] got {got}"),
            );
        }
        let (test, if_cond, _) = self.parse_test_if_msg();
        self.ctx.pop();
        let t = self.tk();
        match body_indent {
            Some(ind) if !self.at_eof() && (!t.nl || t.indent >= ind) => {
                let want = if t.nl { "dedent" } else { "newline" };
                let got = t.tok.describe(self.text(t));
                self.error(
                    self.tspan(t),
                    format!("expected one of [\"{want}\"] got {got}"),
                );
                self.skip_to_closer(Tok::RBrace);
            }
            // at the end of the file upstream's quantifier finds the last newline where it
            // wants `}`, or the dedent of the indented block holding it
            _ if self.at_eof() => {
                let (_, span) = self.describe_current();
                let got = if self.ctx.is_empty() && header_indent > 0 {
                    "dedent"
                } else {
                    "newline"
                };
                self.error(span, format!("expected one of [\"}}\"] got {got}"));
            }
            _ => {
                self.expect_closer(Tok::RBrace, "}");
            }
        }
        self.lambda_braces.pop();
        let q = QuantExpr {
            op,
            vars,
            target,
            test,
            if_cond,
        };
        Expr {
            kind: ExprKind::Quant(Box::new(q)),
            span: self.since(lo),
        }
    }

    /// A quantifier's target, as upstream's grammar allows it: a (dotted) name, a string, a
    /// list or a config literal (`all x in f(y) {...}` is a syntax error there).
    fn parse_quant_target(&mut self) -> Expr {
        let t = self.tk();
        match t.tok {
            Tok::Ident(sym) if !matches!(sym.as_str(), "any" | "all" | "map" | "filter") => {
                self.bump();
                let mut e = Expr {
                    kind: ExprKind::Ident(sym),
                    span: self.tspan(t),
                };
                while self.at(Tok::Dot) && !self.at_line_break() {
                    self.bump();
                    let Some(attr) = self.expect_member() else {
                        break;
                    };
                    e = selector(e, attr, false);
                }
                // Upstream takes subscripts after the name, then selectors (`?.` too) and
                // further subscripts; never a call (`all x in a[1:] {`, `a[0]?.b {`).
                if self.at(Tok::LBracket) && !self.at_line_break() {
                    // subscripts and selectors only
                    e = self.parse_trailers(e, false);
                }
                e
            }
            Tok::Ident(_) | Tok::None | Tok::Undefined | Tok::Lambda => {
                self.expected(&["None", "Undefined", "lambda", "any", "all", "map", "filter"]);
                Expr::missing(self.span(t.lo, t.lo))
            }
            Tok::Str { .. } | Tok::LBracket | Tok::LBrace => self.parse_primary(),
            // `True` and `False` are names to upstream's parser there (its resolver then finds
            // no such name); of the other literals only a string may be a target
            Tok::True | Tok::False => {
                self.bump();
                let sym = Symbol::intern(self.text(t));
                Expr {
                    kind: ExprKind::Ident(sym),
                    span: self.tspan(t),
                }
            }
            Tok::Number => {
                self.expected(&["str"]);
                Expr::missing(self.span(t.lo, t.lo))
            }
            Tok::LParen => {
                self.expected(&["[", "{"]);
                Expr::missing(self.span(t.lo, t.lo))
            }
            _ => {
                self.expected(&["identifier", "literal"]);
                Expr::missing(self.span(t.lo, t.lo))
            }
        }
    }

    pub(super) fn parse_lambda(&mut self) -> Expr {
        let lo = self.bump().lo;
        let mut params = Vec::new();
        if self.at(Tok::LBrace) && self.braced_lambda_params() {
            // `lambda {a: T} -> R {...}`: the first braces hold the parameters.
            self.bump();
            self.ctx.push(Ctx::Paren);
            params = self.parse_params(Tok::RBrace);
            self.ctx.pop();
            self.expect(Tok::RBrace, "}");
        } else if matches!(self.tok(), Tok::LParen | Tok::LBracket) && !self.tk().nl {
            // (upstream's lambda has no bracketed parameter list: it wants the body there)
            self.expected(&["{"]);
            return Expr::missing(self.since(lo));
        } else if !self.at(Tok::LBrace) && !self.at(Tok::Arrow) {
            // (upstream reads the header on one line: a default value ends with it)
            self.ctx.push(Ctx::ParenLine);
            params = self.parse_params(Tok::LBrace);
            self.ctx.pop();
        }
        // upstream reads a lambda's header on one line, in brackets too
        let ret = if self.at(Tok::Arrow) && !self.tk().nl {
            self.bump();
            Some(self.parse_type())
        } else {
            None
        };
        let brace = self.pos;
        // without a return type upstream still takes `->` here
        if ret.is_none() && (!self.at(Tok::LBrace) || self.tk().nl) {
            // (the end of the file in brackets is a line end to upstream's lambda header)
            if self.tk().nl || (self.at_eof() && !self.ctx.is_empty()) {
                let msg = "expected one of [\"->\", \"{\"] got newline";
                self.error(self.line_end_span(), msg);
            } else {
                self.expected(&["->", "{"]);
            }
            return Expr::missing(self.since(lo));
        }
        if ret.is_some() && self.at(Tok::LBrace) && self.tk().nl {
            self.error(self.line_end_span(), "expected one of [\"{\"] got newline");
            return Expr::missing(self.since(lo));
        }
        if !self.expect(Tok::LBrace, "{") {
            return Expr::missing(self.since(lo));
        }
        self.lambda_braces.push(brace);
        self.ctx.push(Ctx::Lambda);
        let saved = self.no_schema_brace;
        self.no_schema_brace = false;
        let t = self.tk();
        let block = t.nl;
        let body = if block {
            self.parse_lambda_body()
        } else {
            self.parse_inline_stmts()
        };
        self.no_schema_brace = saved;
        self.ctx.pop();
        if !self.expect(Tok::RBrace, "}") {
            self.skip_to_closer(Tok::RBrace);
        } else if block {
            self.after_block_lambda = Some(self.pos);
        }
        self.lambda_braces.pop();
        let l = LambdaExpr { params, ret, body };
        Expr {
            kind: ExprKind::Lambda(Box::new(l)),
            span: self.since(lo),
        }
    }

    /// A block lambda's statements, up to its `}`: upstream keeps no indentation level for
    /// the body itself, so a line indented less (or more) than the first one still belongs
    /// to it (the blocks of statements inside it are indented as usual).
    fn parse_lambda_body(&mut self) -> Vec<Stmt> {
        let mut body = Vec::new();
        while !self.at_eof() && !self.gave_up() {
            if matches!(self.tok(), Tok::RBrace | Tok::RBracket | Tok::RParen) {
                break;
            }
            self.parse_stmt_into(&mut body);
        }
        body
    }

    /// At `{` after `lambda`: is it a parameter list (the matching `}` is followed by `->` or
    /// another `{`)?
    fn braced_lambda_params(&self) -> bool {
        let mut depth = 0usize;
        let mut i = 0;
        loop {
            match self.nth(i).tok {
                Tok::LBrace | Tok::LParen | Tok::LBracket => depth += 1,
                Tok::RBrace | Tok::RParen | Tok::RBracket => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        let next = self.nth(i + 1);
                        return matches!(next.tok, Tok::Arrow | Tok::LBrace) && !next.nl;
                    }
                }
                Tok::Eof => return false,
                _ => {}
            }
            i += 1;
        }
    }

    /// Statements of a lambda body that starts on the `{` line (`lambda x { x + 1 }`).
    fn parse_inline_stmts(&mut self) -> Vec<Stmt> {
        let mut out = Vec::new();
        while !self.at(Tok::RBrace) && !self.at_eof() && !self.gave_up() {
            let start = self.pos;
            if let Some(s) = self.parse_stmt() {
                out.push(s);
            }
            if self.pos == start {
                self.unexpected();
                self.bump();
            }
            if !self.tk().nl
                && !self.at(Tok::RBrace)
                && !self.at_eof()
                && self.pos != start
                && !self.starts_stmt()
            {
                self.unexpected();
                self.bump();
            }
        }
        out
    }

    /// `[a, b: T = d]` parameters; reports defaults followed by non-defaults like upstream.
    pub(crate) fn parse_params(&mut self, close: Tok) -> Vec<Param> {
        let mut params = Vec::new();
        loop {
            // a lambda's parameters end with their line
            // (a trailing comma before a lambda's `->` too)
            if self.at(close)
                || self.at_eof()
                || (close == Tok::LBrace && (self.tk().nl || self.at(Tok::Arrow)))
            {
                break;
            }
            let lo = self.tk().lo;
            // (a keyword or constant is a name to upstream's parameter list: `lambda if {}`)
            let t = self.tk();
            let word = t.tok.is_word_keyword()
                || matches!(t.tok, Tok::True | Tok::False | Tok::None | Tok::Undefined);
            let name = if word && !self.nl_break() {
                self.bump();
                Some(crate::ast::Name {
                    sym: crate::ast::Symbol::intern(self.text(t)),
                    span: self.tspan(t),
                })
            } else {
                self.expect_ident()
            };
            let Some(mut name) = name else {
                break;
            };
            // upstream's parameter is an identifier, which may be dotted (`a.b`): it names no
            // variable, and binding it fails at run time
            while self.at(Tok::Dot)
                && !self.at_line_break()
                && matches!(self.nth(1).tok, Tok::Ident(_))
                && !self.nth(1).nl
            {
                self.bump();
                let attr = self.bump();
                let dotted = format!("{}.{}", name.sym.as_str(), self.text(attr));
                name = crate::ast::Name {
                    sym: crate::ast::Symbol::intern(&dotted),
                    span: name.span.to(self.tspan(attr)),
                };
            }
            // (the `:` and `=` of an unbraced header too)
            let on_line = |p: &Self| close != Tok::LBrace || !p.tk().nl;
            let ty = if on_line(self) && self.eat(Tok::Colon) {
                Some(self.parse_type())
            } else {
                None
            };
            let default = if on_line(self) && self.eat(Tok::Assign) {
                Some(self.parse_expr())
            } else {
                None
            };
            params.push(Param {
                name,
                ty,
                default,
                span: self.since(lo),
            });
            // Upstream needs no comma between parameters (`lambda x y {}`).
            let next_name = matches!(self.tok(), Tok::Ident(_)) && !self.at_line_break();
            // a lambda's parameter list runs to its `->` or `{`, a schema's to its `]`:
            // anything else on the line is where upstream wants the next parameter's name
            let more = matches!(close, Tok::LBrace | Tok::RBracket)
                && !self.at(Tok::Arrow)
                && !self.at(close)
                && !self.at_eof()
                && !self.tk().nl;
            // (a lambda's comma on the next line is past its header's line)
            let comma = self.at(Tok::Comma)
                && !(close == Tok::LBrace && self.tk().nl)
                && self.eat(Tok::Comma);
            if !comma && !next_name && !more {
                break;
            }
        }
        self.check_param_order(&params);
        params
    }

    pub(crate) fn check_param_order(&mut self, params: &[Param]) {
        let mut seen_required = false;
        for p in params.iter().rev() {
            match &p.default {
                None => seen_required = true,
                Some(d) if seen_required => {
                    self.error_kind(
                        ErrorKind::IllegalParameterError,
                        d.span,
                        "non-default argument follows default argument",
                    )
                    .notes
                    .push("A default argument".into());
                }
                Some(_) => {}
            }
        }
    }
}
