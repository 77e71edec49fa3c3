//! Expression parsing: a precedence-climbing descent from `parse_expr` to `parse_primary`,
//! with postfix trailers (calls, subscripts, selectors) and schema expressions. The rules it
//! reaches are in sibling files: literals (`literals.rs`), lists, configs and call arguments
//! (`collections.rs`), quantifiers and lambdas (`blocks.rs`), type annotations (`types.rs`).

use super::{Ctx, MAX_CHAIN, MAX_DEPTH, Parser};
use crate::ast::*;
use crate::lexer::Tok;

pub(crate) const OPERAND_START: &[&str] = &["identifier", "literal", "(", "[", "{"];

impl<'a> Parser<'a> {
    /// The name after a `.`: upstream's parser takes a keyword or constant there too (`y.if`,
    /// `y.None` select an attribute of that name).
    pub(super) fn expect_member(&mut self) -> Option<crate::ast::Name> {
        let t = self.tk();
        if is_member_token(t.tok) && !matches!(t.tok, Tok::Ident(_)) && !self.nl_break() {
            // (a name from here on: what follows is not after an operator)
            self.keyword_as_name();
            self.bump();
            return Some(crate::ast::Name {
                sym: crate::ast::Symbol::intern(self.text(t)),
                span: self.tspan(t),
            });
        }
        self.expect_ident()
    }

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
            // (the `else` belongs on the condition's line, inside brackets too)
            let cut = self.tk().nl
                && (matches!(self.ctx.last(), Some(Ctx::Bracket | Ctx::Brace))
                    || (!self.at_eof()
                        && (self.line_level() || self.ctx.last() == Some(&Ctx::Lambda))));
            if cut {
                self.expected_at_line_end(&["else"]);
            }
            if cut || !self.expect(Tok::Else, "else") {
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

    /// `or` level (no ternary), and `as` casts, which bind loosest of all binary operators
    /// (`a == b as T` and `a or b as T` cast the whole).
    pub(crate) fn parse_or_test(&mut self) -> Expr {
        let mut left = self.left_chain(Tok::Or, BinOp::Or, Self::parse_and_test);
        while self.at(Tok::As) && !self.at_line_break() {
            self.bump();
            // `any` starts a quantifier to upstream's parser (`any x in xs {...}`), whose
            // variable name must follow
            let ty = if self.ident_is(0, "any") {
                let t = self.bump();
                self.expected(&["identifier"]);
                Type {
                    kind: crate::ast::TypeKind::Any,
                    span: self.tspan(t),
                }
            } else {
                self.parse_type()
            };
            let span = left.span.to(ty.span);
            left = Expr {
                kind: ExprKind::As {
                    value: Box::new(left),
                    ty: Box::new(ty),
                },
                span,
            };
        }
        left
    }

    /// `a op b op c ...` on one logical line, associating to the left; a chain longer than
    /// `MAX_CHAIN` is an error (keeps the tree shallow for recursive consumers).
    fn left_chain(&mut self, tok: Tok, op: BinOp, operand: fn(&mut Self) -> Expr) -> Expr {
        let mut left = operand(self);
        let mut n = 0;
        while self.at(tok) && !self.at_line_break() {
            self.bump();
            let right = operand(self);
            left = bin(op, left, right);
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
        self.left_chain(Tok::And, BinOp::And, Self::parse_not_test)
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
                Tok::Not if self.nth(1).tok == Tok::In && !self.nth(1).nl => {
                    self.bump();
                    CmpOp::NotIn
                }
                Tok::Is => {
                    // (`is` then `not` on the next line: the operand is missing at the line's end)
                    if self.nth(1).tok == Tok::Not && !self.nth(1).nl {
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

    /// Binary operators by precedence climbing: `|` < `^` < `&` < shifts < `+ -` < `* / // %`
    /// (`as` casts are read above `or`, see [`Self::parse_or_test`]).
    fn parse_binary(&mut self, min_prec: u8) -> Expr {
        let mut left = self.parse_power();
        let mut n = 0;
        loop {
            if self.at_line_break() {
                break;
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
        // (an operand wanted on this line: a unary operator on the next one is not it)
        if self.nl_break() {
            return self.parse_postfix();
        }
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
        !self.at_line_break() && starts_operand(self.tok())
    }

    /// A list item, config entry or call argument: an expression, an unpacking or an `if`
    /// entry; a keyword other than `for` starts one too, as a name to upstream's parser
    /// (`[True else]`, `{a = 1 else = 2}`).
    pub(super) fn starts_item(&self) -> bool {
        let t = self.tok();
        self.starts_expr()
            || (!self.at_line_break()
                && (matches!(t, Tok::Star | Tok::StarStar | Tok::If)
                    || (t.is_word_keyword() && t != Tok::For)))
    }

    /// Upstream's parser reads a keyword right after a unary operator as a name (`not not x` is
    /// `not` applied to a variable named `not`, followed by the statement `x`); the resolver
    /// then reports the undefined name, not a syntax error.
    fn keyword_as_operand_name(&mut self) {
        let t = self.tk();
        // `lambda` starts an operand of its own
        let keyword = t.tok.is_word_keyword() && t.tok != Tok::Lambda;
        if keyword && !self.nl_break() {
            self.keyword_as_name();
        }
    }

    /// `**` chains associate to the left, as upstream's precedence climbing does
    /// (`2 ** 3 ** 2` is 64).
    fn parse_power(&mut self) -> Expr {
        self.left_chain(Tok::StarStar, BinOp::Pow, Self::parse_unary)
    }

    pub(super) fn parse_postfix(&mut self) -> Expr {
        let e = self.parse_primary();
        self.parse_postfix_from(e)
    }

    /// Selectors, subscripts, calls and schema configs after `e`.
    pub(super) fn parse_postfix_from(&mut self, e: Expr) -> Expr {
        self.parse_trailers(e, true)
    }

    /// Selectors and subscripts after `e`, and with `calls` calls and schema configs too (a
    /// quantifier's target takes none, and a selector missing its name ends it there without
    /// the placeholder name upstream's recovered tree selects elsewhere).
    pub(super) fn parse_trailers(&mut self, mut e: Expr, calls: bool) -> Expr {
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
                    let Some(attr) = self.expect_member() else {
                        if !calls {
                            break;
                        }
                        // upstream's recovered tree selects a placeholder name, which its
                        // resolver then looks up
                        let t = self.tk();
                        let missing = crate::ast::Name {
                            sym: crate::ast::Symbol::intern("[missing name]"),
                            span: self.tspan(t).shrink_to_lo(),
                        };
                        e = selector(e, missing, false);
                        break;
                    };
                    e = selector(e, attr, false);
                }
                Tok::Question if self.nth(1).tok == Tok::Dot && !self.nth(1).nl => {
                    self.bump();
                    self.bump();
                    let Some(attr) = self.expect_member() else {
                        break;
                    };
                    e = selector(e, attr, true);
                }
                Tok::Question if self.nth(1).tok == Tok::LBracket && !self.nth(1).nl => {
                    self.bump();
                    e = self.parse_subscript(e, true);
                }
                Tok::LBracket => e = self.parse_subscript(e, false),
                Tok::LParen if calls => {
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
                Tok::LBrace if calls && !self.no_schema_brace => {
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

    pub(super) fn parse_schema_expr(&mut self, name: Identifier, args: Option<CallArgs>) -> Expr {
        let lo = name.span.lo;
        let config = self.parse_config_or_dictcomp();
        let span = self.since(lo);
        Expr {
            kind: ExprKind::Schema(Box::new(SchemaExpr { name, args, config })),
            span,
        }
    }

    pub(super) fn parse_subscript(&mut self, value: Expr, optional: bool) -> Expr {
        self.bump(); // [
        self.ctx.push(Ctx::Bracket);
        let mut parts: [Option<Expr>; 3] = [None, None, None];
        let mut colons = 0;
        let mut extra_seen = false;
        let mut line_break_seen = false;
        loop {
            // upstream reads a subscript's brackets on one line: a line break in them is where
            // an operand (or, after one, the closing bracket) was wanted
            // (the end of the file ends the last line too)
            if (self.tk().nl || self.at_eof()) && !line_break_seen {
                line_break_seen = true;
                if parts[colons].is_none() && !self.at(Tok::Colon) {
                    self.expected_at_line_end(OPERAND_START);
                } else if colons == 0 {
                    let span = self.line_end_span();
                    self.error(span, "a list should have only one expr");
                } else {
                    self.expected_at_line_end(&["]"]);
                }
            }
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
                // (upstream reads a keyword there as a name: `b[x for x in y]` is two exprs)
                let keyword = self.tok().is_word_keyword() && !self.at_line_break();
                if !comma && !self.starts_expr() && !keyword {
                    // a token no bracket closes (`x[1 = 2]`): upstream reads on for another
                    // expression, a list's second item or a slice's missing operand
                    let closer = matches!(self.tok(), Tok::RParen | Tok::RBrace | Tok::RBracket);
                    if !closer && !self.at_line_break() && !self.at_eof() && !extra_seen {
                        if colons == 0 {
                            let t = self.tk();
                            self.error(self.tspan(t), "a list should have only one expr");
                        } else {
                            self.expected(OPERAND_START);
                        }
                    }
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
        let closed = self.expect(Tok::RBracket, "]");
        let span = self.since(value.span.lo);
        let [lower, upper, step] = parts;
        if colons == 0 {
            let index = match lower {
                Some(i) => i,
                // `x[]`: upstream's parser takes the `]` and wants the index after it
                None if closed && !line_break_seen => {
                    // (a line break after it is upstream's newline, in brackets too)
                    let (got, at) = if self.tk().nl && !self.at_eof() {
                        ("newline".to_string(), self.line_end_span())
                    } else {
                        self.describe_current()
                    };
                    self.error(at, format!("expected expression got {got}"));
                    Expr::missing(span)
                }
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

    /// The closing bracket `close`, or an error and a skip to (and past) the matching one.
    pub(super) fn expect_closer(&mut self, close: Tok, text: &str) {
        if !self.expect(close, text) {
            self.skip_to_closer(close);
        }
    }

    /// Error recovery inside a bracket: skip to (and consume) the matching closer.
    pub(super) fn skip_to_closer(&mut self, close: Tok) {
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

    pub(super) fn parse_primary(&mut self) -> Expr {
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
                self.ctx.push(Ctx::ParenLine);
                // inside brackets a schema expression's braces are unambiguous again
                let saved = std::mem::replace(&mut self.no_schema_brace, false);
                let inner = self.parse_expr();
                self.no_schema_brace = saved;
                self.close_paren_line();
                self.ctx.pop();
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
            // upstream's parser reads any other word keyword where an operand starts as a
            // name (`x = else` is the undefined name 'else')
            tok if tok.is_word_keyword() => {
                // (a name from here on: what follows is not after an operator)
                self.keyword_as_name();
                self.bump();
                Expr {
                    kind: ExprKind::Ident(crate::ast::Symbol::intern(self.text(t))),
                    span,
                }
            }
            _ => {
                self.expected(OPERAND_START);
                Expr::missing(self.span(t.lo, t.lo))
            }
        }
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
pub(super) fn expr_to_identifier(e: &Expr) -> Option<Identifier> {
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

pub(super) fn selector(value: Expr, attr: Name, optional: bool) -> Expr {
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

/// A token that can name a member after a `.`: an identifier, a keyword or a constant.
pub(super) fn is_member_token(t: Tok) -> bool {
    matches!(
        t,
        Tok::Ident(_) | Tok::True | Tok::False | Tok::None | Tok::Undefined
    ) || t.is_word_keyword()
}

/// Whether `t` starts an expression that is no signed operand (`-x` after an operand is a
/// binary minus).
pub(super) fn starts_operand(t: Tok) -> bool {
    matches!(
        t,
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
