//! Expression parsing (type annotations are in `types.rs`).
//!
//! One file because it is one grammar: a precedence-climbing descent from `parse_expr` to
//! `parse_primary`, whose rules call each other in both directions (configs hold expressions,
//! lambdas hold statements); splitting it would scatter the grammar over files that all need
//! each other.

use super::strings::{Piece, shape, split_interpolations, unescape};
use super::{Ctx, MAX_CHAIN, MAX_DEPTH, Parser};
use crate::ast::*;
use crate::lexer::{Tok, lex};
use std::sync::Arc;

pub(crate) const OPERAND_START: &[&str] = &["identifier", "literal", "(", "[", "{"];

impl<'a> Parser<'a> {
    pub(super) fn enter(&mut self) -> bool {
        if self.depth >= MAX_DEPTH {
            let t = self.tk();
            self.error(self.tspan(t), "expression nested too deeply");
            return false;
        }
        self.depth += 1;
        true
    }

    /// Full expression: lambda, ternary `a if c else b`, or an `or` test.
    pub(crate) fn parse_expr(&mut self) -> Expr {
        if !self.enter() {
            let t = self.bump();
            return Expr::missing(self.tspan(t));
        }
        let e = self.parse_expr_inner();
        self.depth -= 1;
        e
    }

    fn parse_expr_inner(&mut self) -> Expr {
        let e = self.parse_or_test();
        if self.at(Tok::If) && !self.at_line_break() {
            self.bump();
            let cond = self.parse_or_test();
            if !self.expect(Tok::Else, "else") {
                return Expr {
                    span: e.span.to(cond.span),
                    kind: ExprKind::If(Box::new(IfExpr {
                        cond,
                        then: e.clone(),
                        orelse: Expr::missing(e.span),
                    })),
                };
            }
            let orelse = self.parse_expr();
            let span = e.span.to(orelse.span);
            return Expr {
                kind: ExprKind::If(Box::new(IfExpr {
                    cond,
                    then: e,
                    orelse,
                })),
                span,
            };
        }
        e
    }

    /// `or` level (no ternary).
    pub(crate) fn parse_or_test(&mut self) -> Expr {
        let mut left = self.parse_and_test();
        let mut n = 0;
        while self.at(Tok::Or) && !self.at_line_break() {
            self.bump();
            let right = self.parse_and_test();
            left = bin(BinOp::Or, left, right);
            n += 1;
            if n > MAX_CHAIN {
                self.too_long();
                break;
            }
        }
        left
    }

    pub(super) fn too_long(&mut self) {
        let t = self.tk();
        self.error(self.tspan(t), "expression too long");
        self.recover_to_line_end();
    }

    fn parse_and_test(&mut self) -> Expr {
        let mut left = self.parse_not_test();
        let mut n = 0;
        while self.at(Tok::And) && !self.at_line_break() {
            self.bump();
            let right = self.parse_not_test();
            left = bin(BinOp::And, left, right);
            n += 1;
            if n > MAX_CHAIN {
                self.too_long();
                break;
            }
        }
        left
    }

    /// `not` is a unary operator like `-` (see [`Self::parse_unary`]).
    fn parse_not_test(&mut self) -> Expr {
        self.parse_comparison()
    }

    fn parse_comparison(&mut self) -> Expr {
        let left = self.parse_binary(0);
        let mut ops = Vec::new();
        loop {
            if self.at_line_break() {
                break;
            }
            let op = match self.tok() {
                Tok::EqEq => CmpOp::Eq,
                Tok::NotEq => CmpOp::NotEq,
                Tok::Lt => CmpOp::Lt,
                Tok::LtE => CmpOp::LtE,
                Tok::Gt => CmpOp::Gt,
                Tok::GtE => CmpOp::GtE,
                Tok::In => CmpOp::In,
                Tok::Not if self.nth(1).tok == Tok::In => {
                    self.bump();
                    CmpOp::NotIn
                }
                Tok::Is => {
                    if self.nth(1).tok == Tok::Not {
                        self.bump();
                        CmpOp::IsNot
                    } else {
                        CmpOp::Is
                    }
                }
                _ => break,
            };
            self.bump();
            let right = self.parse_binary(0);
            ops.push((op, right));
            if ops.len() > MAX_CHAIN {
                self.too_long();
                break;
            }
        }
        if ops.is_empty() {
            return left;
        }
        let span = left
            .span
            .to(ops.last().map(|(_, e)| e.span).unwrap_or(left.span));
        Expr {
            kind: ExprKind::Compare(Box::new(CompareExpr { left, ops })),
            span,
        }
    }

    /// Binary operators by precedence climbing: `|` < `^` < `&` < shifts < `+ -` < `* / // %`,
    /// then `as` casts bind loosest of the arithmetic forms (`a + b as T` casts the sum).
    fn parse_binary(&mut self, min_prec: u8) -> Expr {
        let mut left = self.parse_power();
        let mut n = 0;
        loop {
            if self.at_line_break() {
                break;
            }
            if self.at(Tok::As) && min_prec == 0 {
                self.bump();
                let ty = self.parse_type();
                let span = left.span.to(ty.span);
                left = Expr {
                    kind: ExprKind::As {
                        value: Box::new(left),
                        ty: Box::new(ty),
                    },
                    span,
                };
                continue;
            }
            let Some((op, prec)) = binop(self.tok()) else {
                break;
            };
            if prec < min_prec {
                break;
            }
            self.bump();
            if !self.enter() {
                break;
            }
            let right = self.parse_binary(prec + 1);
            self.depth -= 1;
            left = bin(op, left, right);
            n += 1;
            if n > MAX_CHAIN {
                self.too_long();
                break;
            }
        }
        left
    }

    /// `+ - ~ not` apply, as in upstream's grammar (`unary_expr: un_op primary_expr`), to a
    /// primary expression only: `not a == b` is `(not a) == b`, `-2 ** 2` is `(-2) ** 2`,
    /// and `- -1` or `not -1` is a syntax error.
    fn parse_unary(&mut self) -> Expr {
        let op = match self.tok() {
            Tok::Plus => UnaryOp::Pos,
            Tok::Minus => UnaryOp::Neg,
            Tok::Tilde => UnaryOp::Invert,
            Tok::Not => UnaryOp::Not,
            _ => return self.parse_postfix(),
        };
        let lo = self.bump().lo;
        if !self.enter() {
            return Expr::missing(self.since(lo));
        }
        self.keyword_as_operand_name();
        let operand = self.parse_postfix();
        self.depth -= 1;
        let span = self.span(lo, operand.span.hi);
        Expr {
            kind: ExprKind::Unary {
                op,
                operand: Box::new(operand),
            },
            span,
        }
    }

    /// Whether the current token, on the same line, starts an expression (upstream then
    /// parses another list item, config entry, argument or statement without a separator).
    pub(crate) fn starts_expr(&self) -> bool {
        !self.at_line_break()
            && matches!(
                self.tok(),
                Tok::Ident(_)
                    | Tok::Number
                    | Tok::Str { .. }
                    | Tok::True
                    | Tok::False
                    | Tok::None
                    | Tok::Undefined
                    | Tok::LParen
                    | Tok::LBracket
                    | Tok::LBrace
                    | Tok::Lambda
                    | Tok::Not
            )
    }

    /// A list item or config entry: an expression, an unpacking or an `if` entry.
    fn starts_item(&self) -> bool {
        self.starts_expr()
            || (!self.at_line_break() && matches!(self.tok(), Tok::Star | Tok::StarStar | Tok::If))
    }

    /// Upstream's parser reads a keyword right after a unary operator as a name (`not not x` is
    /// `not` applied to a variable named `not`, followed by the statement `x`); the resolver
    /// then reports the undefined name, not a syntax error.
    fn keyword_as_operand_name(&mut self) {
        let t = self.tk();
        let keyword = matches!(
            t.tok,
            Tok::Import
                | Tok::As
                | Tok::If
                | Tok::Elif
                | Tok::Else
                | Tok::For
                | Tok::In
                | Tok::Not
                | Tok::And
                | Tok::Or
                | Tok::Is
                | Tok::Assert
        );
        if keyword && !self.nl_break() {
            let sym = crate::ast::Symbol::intern(self.text(t));
            let i = self.pos.min(self.toks.len() - 1);
            self.toks[i].tok = Tok::Ident(sym);
        }
    }

    /// `**` chains associate to the left, as upstream's precedence climbing does
    /// (`2 ** 3 ** 2` is 64).
    fn parse_power(&mut self) -> Expr {
        let mut left = self.parse_unary();
        let mut n = 0;
        while self.at(Tok::StarStar) && !self.at_line_break() {
            self.bump();
            let exp = self.parse_unary();
            left = bin(BinOp::Pow, left, exp);
            n += 1;
            if n > MAX_CHAIN {
                self.too_long();
                break;
            }
        }
        left
    }

    fn parse_postfix(&mut self) -> Expr {
        let mut e = self.parse_primary();
        let mut n = 0;
        loop {
            n += 1;
            if n > MAX_CHAIN {
                self.too_long();
                break;
            }
            if self.at_line_break() {
                break;
            }
            match self.tok() {
                Tok::Dot => {
                    self.bump();
                    let Some(attr) = self.expect_ident() else {
                        break;
                    };
                    e = selector(e, attr, false);
                }
                Tok::Question if self.nth(1).tok == Tok::Dot && !self.nth(1).nl => {
                    self.bump();
                    self.bump();
                    let Some(attr) = self.expect_ident() else {
                        break;
                    };
                    e = selector(e, attr, true);
                }
                Tok::Question if self.nth(1).tok == Tok::LBracket && !self.nth(1).nl => {
                    self.bump();
                    e = self.parse_subscript(e, true);
                }
                Tok::LBracket => e = self.parse_subscript(e, false),
                Tok::LParen => {
                    let args = self.parse_call_args();
                    if self.at(Tok::LBrace)
                        && !self.at_line_break()
                        && !self.no_schema_brace
                        && let Some(name) = expr_to_identifier(&e)
                    {
                        e = self.parse_schema_expr(name, Some(args));
                        continue;
                    }
                    let span = self.since(e.span.lo);
                    e = Expr {
                        kind: ExprKind::Call {
                            func: Box::new(e),
                            args: Box::new(args),
                        },
                        span,
                    };
                }
                Tok::LBrace if !self.no_schema_brace => {
                    let Some(name) = expr_to_identifier(&e) else {
                        break;
                    };
                    e = self.parse_schema_expr(name, None);
                }
                _ => break,
            }
        }
        e
    }

    fn parse_schema_expr(&mut self, name: Identifier, args: Option<CallArgs>) -> Expr {
        let lo = name.span.lo;
        let config = self.parse_config_or_dictcomp();
        let span = self.since(lo);
        Expr {
            kind: ExprKind::Schema(Box::new(SchemaExpr { name, args, config })),
            span,
        }
    }

    fn parse_subscript(&mut self, value: Expr, optional: bool) -> Expr {
        self.bump(); // [
        self.ctx.push(Ctx::Bracket);
        let mut parts: [Option<Expr>; 3] = [None, None, None];
        let mut colons = 0;
        let mut extra_seen = false;
        loop {
            if self.at(Tok::Colon) {
                self.bump();
                colons += 1;
                if colons > 2 {
                    self.unexpected();
                    break;
                }
                continue;
            }
            if self.at(Tok::RBracket) || self.at_eof() {
                break;
            }
            if parts[colons].is_some() {
                let comma = self.at(Tok::Comma);
                if !comma && !self.starts_expr() {
                    self.expected(&["]"]);
                    break;
                }
                // Upstream reads further expressions inside the brackets and reports them.
                if colons == 0 && !extra_seen {
                    let t = self.tk();
                    self.error(self.tspan(t), "a list should have only one expr");
                }
                extra_seen = true;
                if comma {
                    self.expected(OPERAND_START);
                    self.bump();
                    continue;
                }
                let extra = self.parse_expr();
                let end = self.span(extra.span.hi, extra.span.hi);
                self.error(end, "consecutive exprs found");
                continue;
            }
            parts[colons] = Some(self.parse_expr());
        }
        self.ctx.pop();
        self.expect(Tok::RBracket, "]");
        let span = self.since(value.span.lo);
        let [lower, upper, step] = parts;
        if colons == 0 {
            let index = match lower {
                Some(i) => i,
                None => {
                    self.error(span, "expected expression got ]");
                    Expr::missing(span)
                }
            };
            return Expr {
                kind: ExprKind::Subscript {
                    value: Box::new(value),
                    index: Box::new(index),
                    optional,
                },
                span,
            };
        }
        Expr {
            kind: ExprKind::Slice(Box::new(SliceExpr {
                value,
                lower,
                upper,
                step,
                optional,
            })),
            span,
        }
    }

    /// `(args)` of a call, schema instantiation or decorator; the current token is `(`.
    pub(crate) fn parse_call_args(&mut self) -> CallArgs {
        self.bump();
        self.ctx.push(Ctx::Paren);
        let mut args = CallArgs::default();
        while !self.at(Tok::RParen) && !self.at_eof() && !self.gave_up() {
            let start = self.pos;
            if let (Tok::Ident(sym), Tok::Assign) = (self.tok(), self.nth(1).tok) {
                let t = self.bump();
                self.bump();
                let value = self.parse_expr();
                args.keywords.push(Keyword {
                    name: Name {
                        sym,
                        span: self.tspan(t),
                    },
                    value,
                });
            } else {
                let e = self.parse_expr();
                if !args.keywords.is_empty() {
                    self.error(e.span, "positional argument follows keyword argument");
                }
                args.args.push(e);
            }
            // Upstream needs no comma between arguments either (`f(1 2)`).
            if !self.eat(Tok::Comma) && (self.pos == start || !self.starts_item()) {
                break;
            }
            if self.pos == start {
                self.bump();
            }
        }
        self.ctx.pop();
        if !self.expect(Tok::RParen, ")") {
            self.skip_to_closer(Tok::RParen);
        }
        args
    }

    /// Error recovery inside a bracket: skip to (and consume) the matching closer.
    fn skip_to_closer(&mut self, close: Tok) {
        let mut depth = 0;
        while !self.at_eof() {
            let t = self.tok();
            match t {
                Tok::LParen | Tok::LBracket | Tok::LBrace => depth += 1,
                Tok::RParen | Tok::RBracket | Tok::RBrace => {
                    if depth == 0 {
                        if t == close {
                            self.bump();
                        }
                        return;
                    }
                    depth -= 1;
                }
                _ => {}
            }
            if self.tk().nl && depth == 0 && self.top_level() {
                return;
            }
            self.bump();
        }
    }

    fn parse_primary(&mut self) -> Expr {
        let t = self.tk();
        if self.nl_break() {
            self.expected(OPERAND_START);
            return Expr::missing(self.span(t.lo, t.lo));
        }
        let span = self.tspan(t);
        match t.tok {
            Tok::Ident(sym) => {
                // a quantifier word always starts a quantifier, as upstream parses it (`$all`
                // is the name)
                if is_quant_word(self.text(t)) {
                    return self.parse_quant();
                }
                self.bump();
                Expr {
                    kind: ExprKind::Ident(sym),
                    span,
                }
            }
            Tok::Number => {
                self.bump();
                self.number_expr(t)
            }
            Tok::Str { raw, triple } => {
                self.bump();
                self.string_expr(t, raw, triple)
            }
            Tok::True => {
                self.bump();
                Expr {
                    kind: ExprKind::Bool(true),
                    span,
                }
            }
            Tok::False => {
                self.bump();
                Expr {
                    kind: ExprKind::Bool(false),
                    span,
                }
            }
            Tok::None => {
                self.bump();
                Expr {
                    kind: ExprKind::None,
                    span,
                }
            }
            Tok::Undefined => {
                self.bump();
                Expr {
                    kind: ExprKind::Undefined,
                    span,
                }
            }
            Tok::LParen => {
                self.bump();
                self.ctx.push(Ctx::Paren);
                // inside brackets a schema expression's braces are unambiguous again
                let saved = std::mem::replace(&mut self.no_schema_brace, false);
                let inner = self.parse_expr();
                self.no_schema_brace = saved;
                self.ctx.pop();
                if !self.expect(Tok::RParen, ")") {
                    self.skip_to_closer(Tok::RParen);
                }
                Expr {
                    kind: ExprKind::Paren(Box::new(inner)),
                    span: self.since(t.lo),
                }
            }
            Tok::LBracket => {
                let saved = std::mem::replace(&mut self.no_schema_brace, false);
                let l = self.parse_list();
                self.no_schema_brace = saved;
                l
            }
            Tok::LBrace => self.parse_config_or_dictcomp(),
            Tok::Lambda => self.parse_lambda(),
            _ => {
                self.expected(OPERAND_START);
                Expr::missing(self.span(t.lo, t.lo))
            }
        }
    }

    fn number_expr(&mut self, t: crate::lexer::Token) -> Expr {
        let span = self.tspan(t);
        let text = self.text(t);
        match parse_number(text) {
            Ok(kind) => Expr { kind, span },
            Err(msg) => {
                self.error(span, msg);
                Expr::missing(span)
            }
        }
    }

    /// Decodes a string token with no interpolation processing (docstrings, attribute names).
    pub(crate) fn decode_plain_string(
        &self,
        t: crate::lexer::Token,
        raw: bool,
        triple: bool,
    ) -> String {
        let text = self.text(t);
        let sh = shape(text, raw, triple);
        let content = &text[sh.open..text.len() - sh.close];
        let mut out = String::with_capacity(content.len());
        if raw {
            out.push_str(content);
        } else {
            unescape(content, &mut out);
        }
        out
    }

    fn string_expr(&mut self, t: crate::lexer::Token, raw: bool, triple: bool) -> Expr {
        let span = self.tspan(t);
        let text = self.text(t);
        let sh = shape(text, raw, triple);
        let content = &text[sh.open..text.len() - sh.close];
        if raw || (!content.contains('\\') && !content.contains("${")) {
            // Common case: no escapes, one allocation straight into the Arc.
            return Expr {
                kind: ExprKind::Str(Arc::from(content)),
                span,
            };
        }
        if !content.contains("${") {
            let mut out = String::with_capacity(content.len());
            if raw {
                out.push_str(content);
            } else {
                unescape(content, &mut out);
            }
            return Expr {
                kind: ExprKind::Str(Arc::from(out)),
                span,
            };
        }
        let content_base = t.lo + sh.open as u32;
        let mut parts = Vec::new();
        for piece in split_interpolations(content) {
            match piece {
                Piece::Lit(a, b) => {
                    let mut s = String::new();
                    unescape(&content[a..b], &mut s);
                    parts.push(StrPart::Lit(Arc::from(s)));
                }
                Piece::Unclosed(at) => {
                    let lo = content_base + at as u32;
                    self.error(
                        self.span(lo, lo + 2),
                        "invalid string interpolation expression: missing '}'",
                    );
                    let mut s = String::new();
                    unescape(&content[at..], &mut s);
                    parts.push(StrPart::Lit(Arc::from(s)));
                }
                Piece::Interp { expr: (a, b), spec } => {
                    let lo = content_base + a as u32;
                    let expr_text = &content[a..b];
                    let expr = self.parse_embedded_expr(expr_text, lo);
                    if let Some((a, b)) = spec {
                        let text = &content[a..b];
                        let trimmed = text.trim_start();
                        if !trimmed.starts_with('#') {
                            let at = content_base + (a + text.len() - trimmed.len()) as u32;
                            self.error(
                                self.span(at, at + 1),
                                "invalid joined string spec without #",
                            );
                        }
                    }
                    let spec = spec.map(|(a, b)| Arc::from(content[a..b].trim_start()));
                    parts.push(StrPart::Interp { expr, spec });
                }
            }
        }
        if parts.iter().all(|p| matches!(p, StrPart::Lit(_))) {
            // Only escaped `\${`: a plain string after all.
            let mut joined = String::new();
            for p in &parts {
                if let StrPart::Lit(s) = p {
                    joined.push_str(s);
                }
            }
            return Expr {
                kind: ExprKind::Str(Arc::from(joined)),
                span,
            };
        }
        Expr {
            kind: ExprKind::JoinedStr(parts.into_boxed_slice()),
            span,
        }
    }

    /// Parses the text of a `${...}` interpolation located at absolute offset `lo`.
    fn parse_embedded_expr(&mut self, text: &'a str, lo: u32) -> Expr {
        let lexed = lex(text, self.file, lo);
        let mut sub = Parser::new(text, lo, self.file, lexed.tokens);
        sub.embedded = true;
        sub.depth = self.depth;
        sub.ctx.push(Ctx::Paren);
        let ok_start = !sub.at_eof();
        let e = if ok_start {
            sub.parse_expr()
        } else {
            Expr::missing(self.span(lo, lo))
        };
        // like upstream, errors inside the interpolation are reported as they are (`"${ {a
        // = 1} }"`: the first `}` ended it), leftover text as an invalid interpolation
        if lexed.errors.is_empty() && !sub.errors.is_empty() {
            let errs = std::mem::take(&mut sub.errors);
            for d in errs {
                if self.errors.len() < super::MAX_ERRORS {
                    self.errors.push(d);
                }
            }
            return Expr::missing(self.span(lo, lo + text.len() as u32));
        }
        if !lexed.errors.is_empty() || !sub.at_eof() || !ok_start {
            let shown = text.trim();
            let at = lo + (text.len() - text.trim_start().len()) as u32;
            self.error(
                self.span(at, at + 1),
                format!("invalid string interpolation expression: '{shown}'"),
            );
            return Expr::missing(self.span(lo, lo + text.len() as u32));
        }
        e
    }

    fn parse_list(&mut self) -> Expr {
        let lo = self.bump().lo;
        self.ctx.push(Ctx::Bracket);
        let mut elts = Vec::new();
        while !self.at(Tok::RBracket) && !self.at_eof() && !self.gave_up() {
            let start = self.pos;
            let item = self.parse_list_item();
            if elts.is_empty() && self.at(Tok::For) {
                let clauses = self.parse_comp_clauses();
                self.ctx.pop();
                if !self.expect(Tok::RBracket, "]") {
                    self.skip_to_closer(Tok::RBracket);
                }
                let span = self.since(lo);
                return Expr {
                    kind: ExprKind::ListComp(Box::new(ListComp { elt: item, clauses })),
                    span,
                };
            }
            elts.push(item);
            if self.eat(Tok::Comma) || self.at(Tok::RBracket) {
                continue;
            }
            // Upstream needs no comma between items (`[1 2]` is a list of two).
            if self.tk().nl || (self.pos != start && self.starts_item()) {
                continue;
            }
            if self.pos != start && !matches!(self.tok(), Tok::RParen | Tok::RBrace | Tok::Eof) {
                // Upstream tries another item here, then wants a comma, and skips the token.
                self.expected(OPERAND_START);
                self.expected(&[","]);
                self.bump();
                continue;
            }
            self.expected(&["]"]);
            if self.pos == start {
                self.bump();
            }
            break;
        }
        self.ctx.pop();
        if !self.expect(Tok::RBracket, "]") {
            self.skip_to_closer(Tok::RBracket);
        }
        Expr {
            kind: ExprKind::List(elts.into_boxed_slice()),
            span: self.since(lo),
        }
    }

    fn parse_list_item(&mut self) -> Expr {
        match self.tok() {
            Tok::Star => {
                let lo = self.bump().lo;
                let v = self.parse_or_test();
                Expr {
                    span: self.span(lo, v.span.hi),
                    kind: ExprKind::Starred(Box::new(v)),
                }
            }
            Tok::If => self.parse_list_if(),
            _ => self.parse_expr(),
        }
    }

    fn parse_list_if(&mut self) -> Expr {
        let t = self.bump();
        let lo = t.lo;
        let header_indent = if t.nl { t.indent } else { self.line_indent };
        if !self.enter() {
            return Expr::missing(self.since(lo));
        }
        let cond = self.parse_expr();
        self.expect(Tok::Colon, ":");
        let body = self.parse_list_if_body(header_indent);
        let mut orelse = Vec::new();
        let t = self.tk();
        let aligned = !t.nl || t.indent == header_indent;
        if t.tok == Tok::Elif && aligned {
            orelse.push(self.parse_list_if());
        } else if t.tok == Tok::Else && aligned {
            self.bump();
            self.expect(Tok::Colon, ":");
            orelse = self.parse_list_if_body(header_indent);
        }
        self.depth -= 1;
        Expr {
            kind: ExprKind::ListIf(Box::new(ListIfItem { cond, body, orelse })),
            span: self.since(lo),
        }
    }

    fn parse_list_if_body(&mut self, header_indent: u32) -> Vec<Expr> {
        let mut out = Vec::new();
        let t = self.tk();
        if !t.nl {
            out.push(self.parse_list_item());
            return out;
        }
        if t.indent <= header_indent {
            self.expected_indent();
            return out;
        }
        let ind = t.indent;
        while !self.at_eof() && !self.at(Tok::RBracket) && !self.gave_up() {
            let t = self.tk();
            if t.nl && t.indent < ind {
                break;
            }
            let start = self.pos;
            out.push(self.parse_list_item());
            self.eat(Tok::Comma);
            if self.pos == start {
                self.bump();
            }
        }
        out
    }

    fn parse_comp_clauses(&mut self) -> Vec<CompClause> {
        let mut clauses = Vec::new();
        while self.at(Tok::For) {
            let lo = self.bump().lo;
            let mut targets = Vec::new();
            while let Some(id) = self.parse_identifier() {
                targets.push(id);
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
            if !self.expect(Tok::In, "in") {
                // Recover like upstream: keep parsing what follows as the iterable.
            }
            let iter = self.parse_or_test();
            let mut ifs = Vec::new();
            while self.at(Tok::If) {
                self.bump();
                ifs.push(self.parse_or_test());
            }
            clauses.push(CompClause {
                targets,
                iter,
                ifs,
                span: self.since(lo),
            });
        }
        clauses
    }

    /// `{ entries }` or `{ k: v for ... }`; the current token is `{`.
    pub(crate) fn parse_config_or_dictcomp(&mut self) -> Expr {
        let lo = self.tk().lo;
        if !self.expect(Tok::LBrace, "{") {
            return Expr::missing(self.span(lo, lo));
        }
        self.ctx.push(Ctx::Brace);
        let saved = self.no_schema_brace;
        self.no_schema_brace = false;
        let mut entries = Vec::new();
        while !self.at(Tok::RBrace) && !self.at_eof() && !self.gave_up() {
            let start = self.pos;
            let entry = self.parse_config_entry();
            if entries.is_empty()
                && self.at(Tok::For)
                && let Some(ConfigEntry {
                    kind: ConfigEntryKind::KeyValue { key, op, value },
                    ..
                }) = entry
            {
                let clauses = self.parse_comp_clauses();
                self.ctx.pop();
                self.no_schema_brace = saved;
                if !self.expect(Tok::RBrace, "}") {
                    self.skip_to_closer(Tok::RBrace);
                }
                let comp = DictComp {
                    key,
                    op,
                    value,
                    clauses,
                };
                return Expr {
                    kind: ExprKind::DictComp(Box::new(comp)),
                    span: self.since(lo),
                };
            }
            if let Some(e) = entry {
                entries.push(e);
            }
            if self.eat(Tok::Comma) || self.at(Tok::RBrace) {
                continue;
            }
            // Upstream needs no comma between entries (`{a = 1 b = 2}`).
            if (self.tk().nl || self.starts_item()) && self.pos != start {
                continue;
            }
            if self.pos != start && !matches!(self.tok(), Tok::RParen | Tok::RBracket | Tok::Eof) {
                // Upstream tries another entry here and skips the token.
                self.expected(OPERAND_START);
                self.bump();
                continue;
            }
            self.expected(&["}"]);
            if self.pos == start {
                self.bump();
            } else {
                self.recover_to_line_end();
            }
        }
        self.ctx.pop();
        self.no_schema_brace = saved;
        if !self.expect(Tok::RBrace, "}") {
            self.skip_to_closer(Tok::RBrace);
        }
        // the tree lives for the whole run: no growth slack (entries are ~100 bytes each)
        Expr {
            kind: ExprKind::Config(entries.into_boxed_slice()),
            span: self.since(lo),
        }
    }

    fn parse_config_entry(&mut self) -> Option<ConfigEntry> {
        let t = self.tk();
        let lo = t.lo;
        match t.tok {
            Tok::StarStar => {
                self.bump();
                let v = self.parse_or_test();
                Some(ConfigEntry {
                    kind: ConfigEntryKind::Unpack {
                        span: self.span(lo, v.span.hi),
                        value: v,
                    },
                })
            }
            Tok::If => Some(self.parse_config_if()),
            _ => {
                let key = self.parse_expr();
                let op = match self.tok() {
                    Tok::Colon => ConfigOp::Union,
                    Tok::Assign => ConfigOp::Override,
                    Tok::AugAssign(AugOp::Add) => ConfigOp::Insert,
                    _ => {
                        self.expected(&[":", "=", "+="]);
                        return None;
                    }
                };
                self.bump();
                let value = self.parse_expr();
                let entry = ConfigEntry {
                    kind: ConfigEntryKind::KeyValue { key, op, value },
                };
                // the span is derived from the key and value (see `ConfigEntry::span`)
                debug_assert!(
                    !self.errors.is_empty() || entry.span() == self.span(lo, entry.span().hi),
                    "config entry span"
                );
                Some(entry)
            }
        }
    }

    fn parse_config_if(&mut self) -> ConfigEntry {
        let t = self.bump();
        let lo = t.lo;
        let header_indent = if t.nl { t.indent } else { self.line_indent };
        if !self.enter() {
            return ConfigEntry {
                kind: ConfigEntryKind::If(Box::new(ConfigIf {
                    cond: Expr::missing(self.tspan(t)),
                    body: Vec::new(),
                    orelse: Vec::new(),
                    span: self.since(lo),
                })),
            };
        }
        let cond = self.parse_expr();
        self.expect(Tok::Colon, ":");
        let body = self.parse_config_if_body(header_indent);
        let mut orelse = Vec::new();
        let t = self.tk();
        let aligned = !t.nl || t.indent == header_indent;
        if t.tok == Tok::Elif && aligned {
            orelse.push(self.parse_config_if());
        } else if t.tok == Tok::Else && aligned {
            self.bump();
            self.expect(Tok::Colon, ":");
            orelse = self.parse_config_if_body(header_indent);
        }
        self.depth -= 1;
        ConfigEntry {
            kind: ConfigEntryKind::If(Box::new(ConfigIf {
                cond,
                body,
                orelse,
                span: self.since(lo),
            })),
        }
    }

    fn parse_config_if_body(&mut self, header_indent: u32) -> Vec<ConfigEntry> {
        let mut out = Vec::new();
        let t = self.tk();
        if !t.nl {
            out.extend(self.parse_config_entry());
            return out;
        }
        if t.indent <= header_indent {
            self.expected_indent();
            return out;
        }
        let ind = t.indent;
        while !self.at_eof() && !self.at(Tok::RBrace) && !self.gave_up() {
            let t = self.tk();
            if t.nl && t.indent < ind {
                break;
            }
            let start = self.pos;
            out.extend(self.parse_config_entry());
            self.eat(Tok::Comma);
            if self.pos == start {
                self.bump();
            }
        }
        out
    }

    fn parse_quant(&mut self) -> Expr {
        let t = self.bump();
        let lo = t.lo;
        let op = match self.text(t) {
            "all" => QuantOp::All,
            "any" => QuantOp::Any,
            "map" => QuantOp::Map,
            _ => QuantOp::Filter,
        };
        let mut vars = Vec::new();
        while let Some(n) = self.expect_ident() {
            vars.push(n);
            if !self.eat(Tok::Comma) {
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
        let (test, if_cond, _) = self.parse_test_if_msg();
        self.ctx.pop();
        if !self.expect(Tok::RBrace, "}") {
            self.skip_to_closer(Tok::RBrace);
        }
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
                    let Some(attr) = self.expect_ident() else {
                        break;
                    };
                    e = selector(e, attr, false);
                }
                // Upstream takes subscripts after the name, then selectors (`?.` too) and
                // further subscripts; never a call (`all x in a[1:] {`, `a[0]?.b {`).
                if self.at(Tok::LBracket) && !self.at_line_break() {
                    e = self.parse_quant_target_trailers(e);
                }
                e
            }
            Tok::Ident(_) | Tok::None | Tok::Undefined | Tok::Lambda => {
                self.expected(&["None", "Undefined", "lambda", "any", "all", "map", "filter"]);
                Expr::missing(self.span(t.lo, t.lo))
            }
            Tok::Str { .. } | Tok::LBracket | Tok::LBrace => self.parse_primary(),
            _ => {
                self.expected(&["identifier", "literal"]);
                Expr::missing(self.span(t.lo, t.lo))
            }
        }
    }

    /// Subscripts and selectors after a quantifier target's name (see `parse_quant_target`).
    fn parse_quant_target_trailers(&mut self, mut e: Expr) -> Expr {
        let mut n = 0;
        loop {
            n += 1;
            if n > MAX_CHAIN {
                self.too_long();
                break;
            }
            if self.at_line_break() {
                break;
            }
            let optional = self.at(Tok::Question) && !self.nth(1).nl;
            let next = if optional {
                self.nth(1).tok
            } else {
                self.tok()
            };
            match next {
                Tok::LBracket => {
                    if optional {
                        self.bump();
                    }
                    e = self.parse_subscript(e, optional);
                }
                Tok::Dot => {
                    if optional {
                        self.bump();
                    }
                    self.bump();
                    let Some(attr) = self.expect_ident() else {
                        break;
                    };
                    e = selector(e, attr, optional);
                }
                _ => break,
            }
        }
        e
    }

    fn parse_lambda(&mut self) -> Expr {
        let lo = self.bump().lo;
        let mut params = Vec::new();
        if self.at(Tok::LBrace) && self.braced_lambda_params() {
            // `lambda {a: T} -> R {...}`: the first braces hold the parameters.
            self.bump();
            self.ctx.push(Ctx::Paren);
            params = self.parse_params(Tok::RBrace);
            self.ctx.pop();
            self.expect(Tok::RBrace, "}");
        } else if !self.at(Tok::LBrace) && !self.at(Tok::Arrow) {
            self.ctx.push(Ctx::Paren);
            params = self.parse_params(Tok::LBrace);
            self.ctx.pop();
        }
        let ret = if self.eat(Tok::Arrow) {
            Some(self.parse_type())
        } else {
            None
        };
        let brace = self.pos;
        if !self.expect(Tok::LBrace, "{") {
            return Expr::missing(self.since(lo));
        }
        self.lambda_braces.push(brace);
        self.ctx.push(Ctx::Brace);
        let saved = self.no_schema_brace;
        self.no_schema_brace = false;
        let t = self.tk();
        let body = if t.nl {
            self.parse_block_stmts(t.indent, true)
        } else {
            self.parse_inline_stmts()
        };
        self.no_schema_brace = saved;
        self.ctx.pop();
        if !self.expect(Tok::RBrace, "}") {
            self.skip_to_closer(Tok::RBrace);
        }
        self.lambda_braces.pop();
        let l = LambdaExpr { params, ret, body };
        Expr {
            kind: ExprKind::Lambda(Box::new(l)),
            span: self.since(lo),
        }
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
}

fn bin(op: BinOp, left: Expr, right: Expr) -> Expr {
    let span = left.span.to(right.span);
    Expr {
        kind: ExprKind::Binary {
            op,
            left: Box::new(left),
            right: Box::new(right),
        },
        span,
    }
}

/// Binary operator and precedence for a token (higher binds tighter).
fn binop(t: Tok) -> Option<(BinOp, u8)> {
    Some(match t {
        Tok::Pipe => (BinOp::BitOr, 1),
        Tok::Caret => (BinOp::BitXor, 2),
        Tok::Amp => (BinOp::BitAnd, 3),
        Tok::Shl => (BinOp::Shl, 4),
        Tok::Shr => (BinOp::Shr, 4),
        Tok::Plus => (BinOp::Add, 5),
        Tok::Minus => (BinOp::Sub, 5),
        Tok::Star => (BinOp::Mul, 6),
        Tok::Slash => (BinOp::Div, 6),
        Tok::SlashSlash => (BinOp::FloorDiv, 6),
        Tok::Percent => (BinOp::Mod, 6),
        _ => return None,
    })
}

/// `a.b.c` (identifiers and plain selectors only) as an [`Identifier`].
fn expr_to_identifier(e: &Expr) -> Option<Identifier> {
    let mut names = Vec::new();
    let mut cur = e;
    loop {
        match &cur.kind {
            ExprKind::Ident(sym) => {
                names.push(Name {
                    sym: *sym,
                    span: cur.span,
                });
                names.reverse();
                return Some(Identifier {
                    names,
                    span: e.span,
                });
            }
            ExprKind::Selector(x) if !x.optional => {
                names.push(x.attr);
                cur = &x.value;
            }
            _ => return None,
        }
    }
}

/// Parses the text of a number token.
pub(crate) fn parse_number(text: &str) -> Result<ExprKind, String> {
    let clean: String;
    let t = if text.contains('_') {
        clean = text.replace('_', "");
        clean.as_str()
    } else {
        text
    };
    let radix = match t.get(..2) {
        Some("0x" | "0X") => Some(16),
        Some("0o" | "0O") => Some(8),
        Some("0b" | "0B") => Some(2),
        _ => None,
    };
    // a leading zero makes a decimal-looking literal octal, as upstream reads `010` as 8
    if t.len() > 1 && t.starts_with('0') && t.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return i64::from_str_radix(&t[1..], 8)
            .map(ExprKind::Int)
            .map_err(|_| format!("invalid number literal '{text}'"));
    }
    if let Some(r) = radix {
        if t.len() == 2 {
            return Err("no valid digits found for number".into());
        }
        return i64::from_str_radix(&t[2..], r)
            .map(ExprKind::Int)
            .map_err(|_| format!("invalid number literal '{text}'"));
    }
    let digits_end = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    // A trailing `e`/`E` with no exponent is not part of the number (e.g. no such suffix).
    let is_float = num.contains(['.', 'e', 'E']);
    // upstream drops any suffix of a float
    if !suffix.is_empty() && is_float {
        return num
            .parse::<f64>()
            .map(ExprKind::Float)
            .map_err(|_| format!("invalid number literal '{text}'"));
    }
    if !suffix.is_empty() {
        let s = NumberSuffix::parse(suffix).ok_or("invalid int binary suffix")?;
        let v = num
            .parse::<i64>()
            .map_err(|_| format!("invalid number literal '{text}'"))?;
        return Ok(ExprKind::NumberUnit {
            value: v,
            suffix: s,
        });
    }
    if is_float {
        return num
            .parse::<f64>()
            .map(ExprKind::Float)
            .map_err(|_| format!("invalid number literal '{text}'"));
    }
    match num.parse::<i64>() {
        Ok(v) => Ok(ExprKind::Int(v)),
        Err(_) if num.bytes().all(|b| b.is_ascii_digit()) && !num.is_empty() => Err(format!(
            "integer literal '{text}' is too large for a 64-bit integer"
        )),
        Err(_) => Err(format!("invalid number literal '{text}'")),
    }
}

/// `value.attr` (or `value?.attr`), spanning both.
fn selector(value: Expr, attr: Name, optional: bool) -> Expr {
    let span = value.span.to(attr.span);
    Expr {
        kind: ExprKind::Selector(Box::new(SelectorExpr {
            value,
            attr,
            optional,
        })),
        span,
    }
}

/// `all`, `any`, `map` and `filter` written bare: the start of a quantifier expression.
pub(crate) fn is_quant_word(text: &str) -> bool {
    matches!(text, "all" | "any" | "map" | "filter")
}
