//! Statement parsing: simple statements, imports, `if`, `type`, decorators, parameters, and the
//! indentation that delimits blocks; `schema` and `rule` statements are in `schema.rs`.

use super::{MAX_DEPTH, Parser};
use crate::ast::*;
use crate::lexer::Tok;
use std::sync::Arc;

/// Which body a statement is parsed in (schema bodies allow attributes, checks, mixins...).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    Plain,
    Schema,
}

/// The symbol operators between two operands: arithmetic, bitwise and comparison (`+` and `-`
/// as signs too).
pub(super) fn is_symbol_operator(tok: Tok) -> bool {
    matches!(
        tok,
        Tok::Minus
            | Tok::Plus
            | Tok::Star
            | Tok::StarStar
            | Tok::Slash
            | Tok::SlashSlash
            | Tok::Percent
            | Tok::Shl
            | Tok::Shr
            | Tok::Amp
            | Tok::Pipe
            | Tok::Caret
            | Tok::Lt
            | Tok::Gt
            | Tok::LtE
            | Tok::GtE
            | Tok::EqEq
            | Tok::NotEq
    )
}

/// Tokens no statement of upstream's blocks starts with (`unexpected token`): operators and
/// punctuation other than brackets and `~`, a sign included.
pub(super) fn is_operator_start(tok: Tok) -> bool {
    is_symbol_operator(tok)
        || matches!(
            tok,
            Tok::Comma
                | Tok::Colon
                | Tok::Dot
                | Tok::Ellipsis
                | Tok::Question
                | Tok::Dollar
                | Tok::Arrow
                | Tok::Assign
                | Tok::AugAssign(_)
        )
}

impl<'a> Parser<'a> {
    pub(super) fn ident_is(&self, n: usize, word: &str) -> bool {
        matches!(self.nth(n).tok, Tok::Ident(s) if s.as_str() == word)
    }

    /// The word itself, not a `$`-prefixed name spelled like it.
    pub(super) fn keyword_is(&self, n: usize, word: &str) -> bool {
        self.ident_is(n, word) && self.text(self.nth(n)) == word
    }

    pub(crate) fn parse_stmt(&mut self) -> Option<Stmt> {
        self.parse_stmt_in(Body::Plain)
    }

    pub(crate) fn parse_stmt_in(&mut self, body: Body) -> Option<Stmt> {
        if self.depth >= MAX_DEPTH {
            let t = self.tk();
            self.error(self.tspan(t), "statements nested too deeply");
            self.recover_to_line_end();
            return None;
        }
        self.depth += 1;
        let r = self.parse_stmt_inner(body);
        self.depth -= 1;
        r
    }

    fn parse_stmt_inner(&mut self, body: Body) -> Option<Stmt> {
        self.stmt_start = self.pos;
        // a word keyword that starts no statement or operand is a name to upstream's parser
        // (`else = 1` assigns, `for: int` declares)
        let t = self.tk();
        // a schema's own body has no imports: `import` there is a name too
        let schema_level = body == Body::Schema && !self.in_schema_if;
        if t.tok.is_word_keyword()
            && (!matches!(
                t.tok,
                Tok::Import | Tok::Assert | Tok::If | Tok::Not | Tok::Lambda
            ) || (schema_level && t.tok == Tok::Import))
        {
            self.keyword_as_name();
        }
        let t = self.tk();
        let lo = t.lo;
        let header_indent = if t.nl { t.indent } else { self.line_indent };
        match t.tok {
            Tok::At => {
                let decorators = self.parse_decorators();
                // the decorated statement starts a line indented as the decorator's
                let t = self.tk();
                if t.nl && t.indent > header_indent {
                    self.error(self.tspan(t), "unexpected token 'indent'");
                }
                return self.parse_decorated(lo, decorators, body);
            }
            Tok::Import => return self.parse_import(),
            Tok::Assert => {
                self.bump();
                let (test, if_cond, msg) = self.parse_test_if_msg();
                let kind = StmtKind::Assert(AssertStmt { test, if_cond, msg });
                return Some(Stmt {
                    kind,
                    span: self.since(lo),
                });
            }
            Tok::If => return Some(self.parse_if_stmt(header_indent, body)),
            // upstream's statements cannot start with an operator or punctuation other than
            // brackets and `~` (a sign included: `-x` alone is an error)
            tok if is_operator_start(tok) => {
                let what = t.tok.describe(self.text(t));
                self.error(self.tspan(t), format!("unexpected token '{what}'"));
                self.recover_to_line_end();
                return None;
            }
            // a statement starting with a quantifier word is an expression
            Tok::Ident(_) if super::expr::is_quant_word(self.text(t)) => {}
            // upstream's block statements starting with `type` are type aliases (`type = 1` and
            // `type X: T` are syntax errors there); a schema body and a one-line `if` body
            // read `type` as a name
            // (`$type` is a name everywhere)
            Tok::Ident(_) if body == Body::Plain && t.nl && self.text(t) == "type" => {
                return self.parse_type_alias(lo);
            }
            // upstream's definition keywords start a definition whatever follows them (`schema
            // = 1` is a schema without a name); a schema's own body reads them as names
            Tok::Ident(_)
                if !schema_level
                    && (self.keyword_is(0, "schema")
                        || self.keyword_is(0, "protocol")
                        || self.keyword_is(0, "mixin")
                        || self.keyword_is(0, "rule"))
                    && (!matches!(self.nth(1).tok, Tok::Ident(_)) || self.nth(1).nl) =>
            {
                if self.ident_is(0, "rule") {
                    return self.parse_rule(lo, Vec::new(), header_indent);
                }
                return self.parse_schema(lo, Vec::new(), header_indent);
            }
            Tok::Ident(_) => {
                if let Tok::Ident(_) = self.nth(1).tok {
                    let n1 = self.nth(1);
                    // a schema's own body defines no schemas, rules or aliases: the words are
                    // names there
                    if !n1.nl && !schema_level {
                        if self.ident_is(0, "schema")
                            || self.ident_is(0, "protocol")
                            || self.ident_is(0, "mixin")
                        {
                            return self.parse_schema(lo, Vec::new(), header_indent);
                        }
                        if self.ident_is(0, "rule") {
                            return self.parse_rule(lo, Vec::new(), header_indent);
                        }
                        if self.ident_is(0, "type") && self.nth(2).tok == Tok::Assign {
                            return self.parse_type_alias(lo);
                        }
                    }
                }
                // (in an `if` of a schema body these are a module's statements: `mixin` starts
                // a mixin's definition, `check:` declares an attribute)
                if schema_level {
                    if self.ident_is(0, "mixin") && self.nth(1).tok == Tok::LBracket {
                        return None; // handled by the schema body parser
                    }
                    if self.ident_is(0, "check") && self.nth(1).tok == Tok::Colon {
                        return None;
                    }
                }
                if (self.in_schema_if || body == Body::Plain)
                    && self.ident_is(0, "mixin")
                    && self.nth(1).tok == Tok::LBracket
                    && !self.nth(1).nl
                {
                    return self.parse_schema(lo, Vec::new(), header_indent);
                }
                // Attribute or annotated assignment: `name:` / `name?:`.
                // `name?:` is a schema attribute; elsewhere (an `if` in a schema body too,
                // whose statements upstream parses as a module's) upstream stops at the `?`
                let is_attr = (self.nth(1).tok == Tok::Colon && !self.nth(1).nl)
                    || (body == Body::Schema
                        && !self.in_schema_if
                        && self.nth(1).tok == Tok::Question
                        && !self.nth(1).nl);
                if is_attr {
                    return self.parse_attr_or_annotated(lo, Vec::new(), body);
                }
            }
            Tok::Str { .. } if body == Body::Schema && !self.in_schema_if => {
                let is_attr = (self.nth(1).tok == Tok::Colon && !self.nth(1).nl)
                    || (self.nth(1).tok == Tok::Question && self.nth(2).tok == Tok::Colon);
                if is_attr {
                    return self.parse_attr_or_annotated(lo, Vec::new(), body);
                }
            }
            _ => {}
        }
        self.parse_expr_stmt(lo, body)
    }

    fn parse_expr_stmt(&mut self, lo: u32, body: Body) -> Option<Stmt> {
        // (a schema body's `[` that opened no index signature starts a list expression)
        let list_in_schema = body == Body::Schema && self.at(Tok::LBracket);
        let first = self.parse_expr();
        match self.tok() {
            // `expr: T = v`: upstream parses the declaration whatever the target, then wants
            // its `=` and only then finds the target no name (in a schema body too, where a
            // name's declaration took another path)
            Tok::Colon if !self.at_line_break() && !list_in_schema => {
                self.bump();
                let ty = self.parse_type();
                if !self.at(Tok::Assign) || self.at_line_break() {
                    self.want_declared_value();
                    self.expr_to_target(first);
                    return None;
                }
                self.bump();
                let value = self.parse_expr();
                let target = self.expr_to_target(first)?;
                let kind = StmtKind::Assign(AssignStmt {
                    targets: vec![target],
                    ty: Some(ty),
                    value,
                });
                Some(Stmt {
                    kind,
                    span: self.since(lo),
                })
            }
            Tok::Assign if !self.at_line_break() => {
                // upstream reads every `= expr` of the statement, then checks the targets
                let mut lhs = vec![first];
                let mut value;
                loop {
                    self.bump();
                    value = self.parse_expr();
                    if self.at(Tok::Assign) && !self.at_line_break() {
                        lhs.push(value);
                        continue;
                    }
                    break;
                }
                let n = lhs.len();
                let targets: Vec<Target> = lhs
                    .into_iter()
                    .filter_map(|e| self.expr_to_target(e))
                    .collect();
                if targets.len() != n {
                    return None;
                }
                let kind = StmtKind::Assign(AssignStmt {
                    targets,
                    ty: None,
                    value,
                });
                Some(Stmt {
                    kind,
                    span: self.since(lo),
                })
            }
            Tok::AugAssign(op) if !self.at_line_break() => {
                let target = self.expr_to_target(first)?;
                self.bump();
                let value = self.parse_expr();
                let kind = StmtKind::AugAssign(AugAssignStmt { target, op, value });
                Some(Stmt {
                    kind,
                    span: self.since(lo),
                })
            }
            _ => {
                let span = first.span;
                Some(Stmt {
                    kind: StmtKind::Expr(first),
                    span,
                })
            }
        }
    }

    /// Converts an expression on the left of `=` into an assignment target.
    pub(super) fn expr_to_target(&mut self, e: Expr) -> Option<Target> {
        let span = e.span;
        let mut path = Vec::new();
        let mut cur = e;
        loop {
            match cur.kind {
                ExprKind::Ident(sym) => {
                    path.reverse();
                    return Some(Target {
                        name: Name {
                            sym,
                            span: cur.span,
                        },
                        path,
                        span,
                    });
                }
                ExprKind::Selector(x) if !x.optional => {
                    let x = *x;
                    path.push(TargetPath::Attr(x.attr));
                    cur = x.value;
                }
                ExprKind::Subscript {
                    value,
                    index,
                    optional: false,
                } => {
                    path.push(TargetPath::Index(*index));
                    cur = *value;
                }
                ExprKind::Selector(_) => {
                    self.error(
                        cur.span,
                        "'SelectorExpression' is an illegal expression for assignment, because the left-hand side of an assignment expression may not be an optional attribute access.",
                    );
                    return None;
                }
                ExprKind::Missing => return None,
                ref k => {
                    let name = expr_kind_name(k);
                    self.error(
                        cur.span,
                        format!("'{name}' is an illegal expression for assignment"),
                    );
                    return None;
                }
            }
        }
    }

    fn parse_import(&mut self) -> Option<Stmt> {
        let lo = self.bump().lo;
        let path_lo = self.tk().lo;
        let mut level = 0u32;
        let mut path = String::new();
        loop {
            match self.tok() {
                Tok::Dot if !self.tk().nl => {
                    level += 1;
                    path.push('.');
                    self.bump();
                }
                Tok::Ellipsis if !self.tk().nl => {
                    level += 3;
                    path.push_str("...");
                    self.bump();
                }
                _ => break,
            }
        }
        let mut names = Vec::new();
        match self.expect_ident() {
            Some(n) => {
                path.push_str(n.sym.as_str());
                names.push(n);
            }
            None => {
                self.recover_to_line_end();
                return None;
            }
        }
        while self.at(Tok::Dot) && !self.tk().nl {
            self.bump();
            path.push('.');
            match self.expect_ident() {
                Some(n) => {
                    path.push_str(n.sym.as_str());
                    names.push(n);
                }
                None => {
                    // Keep the rest of the dotted path text so later stages can name it.
                    while matches!(self.tok(), Tok::Dot | Tok::Ident(_)) && !self.tk().nl {
                        let t = self.bump();
                        if let Tok::Ident(s) = t.tok {
                            names.push(Name {
                                sym: s,
                                span: self.tspan(t),
                            });
                        }
                        path.push_str(self.text(t));
                    }
                    break;
                }
            }
        }
        let path_span = self.since(path_lo);
        let mut asname = None;
        if self.at(Tok::As) && !self.tk().nl {
            self.bump();
            asname = self.expect_ident();
        }
        let kind = StmtKind::Import(ImportStmt {
            path: Arc::from(path),
            level,
            names,
            path_span,
            asname,
        });
        Some(Stmt {
            kind,
            span: self.since(lo),
        })
    }

    /// `test [if cond [else orelse]] [, msg]` as used by `assert` and check blocks.
    pub(crate) fn parse_test_if_msg(&mut self) -> (Expr, Option<Expr>, Option<Expr>) {
        // (no conditional expression here: upstream ends the test at its `if` guard, so in
        // `a if b else c` the `else` and what follows are the next expressions on the line)
        let test = self.parse_or_test();
        let mut if_cond = None;
        if self.at(Tok::If) && !self.at_line_break() {
            self.bump();
            if_cond = Some(self.parse_or_test());
        }
        let mut msg = None;
        if self.at(Tok::Comma) && !self.at_line_break() {
            self.bump();
            msg = Some(self.parse_expr());
        }
        (test, if_cond, msg)
    }

    fn parse_if_stmt(&mut self, header_indent: u32, body_kind: Body) -> Stmt {
        let lo = self.bump().lo;
        let cond = self.parse_expr();
        let body = self.parse_suite_in(header_indent, body_kind);
        let mut orelse = Vec::new();
        let t = self.tk();
        // (a stray dedent before it ends the statement: the line is a statement of its own)
        let aligned = (!t.nl || t.indent == header_indent) && !self.stray_dedent_before(self.pos);
        if t.tok == Tok::Elif && aligned {
            orelse.push(self.parse_if_stmt(header_indent, body_kind));
        } else if t.tok == Tok::Else && aligned {
            self.bump();
            orelse = self.parse_suite_in(header_indent, body_kind);
        }
        let kind = StmtKind::If(IfStmt { cond, body, orelse });
        Stmt {
            kind,
            span: self.since(lo),
        }
    }

    fn parse_suite_in(&mut self, header_indent: u32, body_kind: Body) -> Vec<Stmt> {
        if body_kind == Body::Plain {
            return self.parse_suite(header_indent);
        }
        // Inside a schema body an `if` block may set attributes (a declaration there needs a
        // value, as upstream parses it)
        if !self.expect_header_colon() {
            self.recover_to_line_end();
        }
        let outer = std::mem::replace(&mut self.in_schema_if, true);
        let out = self.parse_schema_if_suite(header_indent, body_kind);
        self.in_schema_if = outer;
        out
    }

    fn parse_schema_if_suite(&mut self, header_indent: u32, body_kind: Body) -> Vec<Stmt> {
        let t = self.tk();
        if !t.nl && t.tok != Tok::Eof {
            // (a decorator's `@` there is a missing expression first, as upstream parses it)
            if t.tok == Tok::At {
                self.expected(super::expr::OPERAND_START);
            }
            return self.parse_stmt_in(body_kind).into_iter().collect();
        }
        if t.tok == Tok::Eof || t.indent <= header_indent {
            self.expected_indent();
            return Vec::new();
        }
        let mut out = Vec::new();
        let ind = t.indent;
        // the width of lines indented past the block (one unexpected indent for their run)
        let mut over = ind;
        while !self.at_eof() && !self.gave_up() {
            let t = self.tk();
            if t.nl && t.indent < ind {
                break;
            }
            if t.nl {
                if t.indent > over && self.indent_taken_at != Some(self.pos) {
                    self.error(self.tspan(t), "unexpected token 'indent'");
                }
                over = t.indent;
            }
            let start = self.pos;
            self.stray_dedent_at(start);
            if let Some(s) = self.parse_stmt_in(body_kind) {
                out.push(s);
            }
            self.finish_stmt(start);
        }
        out
    }

    fn parse_decorators(&mut self) -> Vec<Decorator> {
        let mut out = Vec::new();
        while self.at(Tok::At) {
            self.stmt_start = self.pos;
            let lo = self.bump().lo;
            // (upstream parses an expression after `@`, then wants it a name: what starts no
            // expression is both a missing expression and a missing name; a keyword is a name)
            // (a sign starts that expression: the name is then wanted after it)
            // (`not` and `lambda` start one too)
            if matches!(
                self.tok(),
                Tok::Plus | Tok::Minus | Tok::Tilde | Tok::Not | Tok::Lambda
            ) {
                self.parse_expr();
                if self.tk().nl || self.at_eof() {
                    self.expected_at_line_end(&["identifier"]);
                } else {
                    self.expected(&["identifier"]);
                }
                self.recover_to_line_end();
                continue;
            }
            if !self.starts_expr() && !self.tok().is_word_keyword() {
                self.expected(super::expr::OPERAND_START);
            }
            if self.tok().is_word_keyword() && !self.at_line_break() {
                self.keyword_as_name();
            }
            let Some(name) = self.parse_identifier() else {
                self.recover_to_line_end();
                continue;
            };
            let args = if self.at(Tok::LParen) && !self.tk().nl {
                Some(self.parse_call_args())
            } else {
                None
            };
            out.push(Decorator {
                name,
                args,
                span: self.since(lo),
            });
            // (what follows on its line is the decorated statement, as on the next line)
        }
        out
    }

    fn parse_decorated(&mut self, lo: u32, decorators: Vec<Decorator>, body: Body) -> Option<Stmt> {
        self.stmt_start = self.pos;
        let t = self.tk();
        let header_indent = if t.nl { t.indent } else { self.line_indent };
        if self.ident_is(0, "schema") || self.ident_is(0, "mixin") || self.ident_is(0, "protocol") {
            return self.parse_schema(lo, decorators, header_indent);
        }
        if self.ident_is(0, "rule") {
            return self.parse_rule(lo, decorators, header_indent);
        }
        // in a schema body the decorated attribute must follow in the body: a line indented
        // less is upstream's dedent
        // (a schema's `if` block, as a module's block, finds no statement there)
        if body == Body::Schema && t.nl && t.tok != Tok::Eof && t.indent < self.line_indent {
            let span = self.span(t.lo, t.lo);
            let msg = if self.in_schema_if {
                "unexpected token 'dedent'"
            } else {
                "expected one of [\"identifier\"] got dedent"
            };
            self.error(span, msg);
            return None;
        }
        // (a schema's `if` block declares as a module does: `name?:` is no declaration there)
        if matches!(t.tok, Tok::Ident(_) | Tok::Str { .. })
            && ((body == Body::Schema && !self.in_schema_if) || self.nth(1).tok == Tok::Colon)
        {
            return self.parse_attr_or_annotated(lo, decorators, body);
        }
        // outside a schema upstream parses whatever statement follows and drops the
        // decorators (`@info` over `a = 1`)
        // (so does a schema's `if` block)
        if (body == Body::Plain || self.in_schema_if) && !self.at_eof() {
            return self.parse_stmt_in(body);
        }
        // in an indented block of statements (a module's or a schema's `if`) the end of the
        // file is the block's dedent, where no statement starts
        if (body == Body::Plain || self.in_schema_if) && self.line_indent > 0 && self.at_eof() {
            let (_, span) = self.describe_current();
            self.error(span, "unexpected token 'dedent'");
            return None;
        }
        // in a schema body a decorator decorates an attribute: at the end of the file upstream
        // finds the body's dedent instead
        if body == Body::Schema && self.line_indent > 0 && self.at_eof() {
            let (_, span) = self.describe_current();
            self.error(span, "expected one of [\"identifier\"] got dedent");
            return None;
        }
        // nothing after the decorator at all
        if self.at_eof() {
            let (_, span) = self.describe_current();
            self.error(span, "unexpected token 'eof'");
            return None;
        }
        // (in a schema body upstream wants the decorated attribute's name, on this line or
        // the next)
        if body == Body::Schema {
            let t = self.tk();
            let got = t.tok.describe(self.text(t));
            self.expected_got(self.tspan(t), &["identifier"], &got);
        } else {
            self.expected(&["schema", "rule", "identifier"]);
        }
        None
    }

    /// `a.b.c` as an [`Identifier`].
    pub(crate) fn parse_identifier(&mut self) -> Option<Identifier> {
        let first = self.expect_ident()?;
        let mut names = vec![first];
        while self.at(Tok::Dot) && !self.tk().nl {
            self.bump();
            names.push(self.expect_member()?);
        }
        let span = first
            .span
            .to(names.last().map(|n| n.span).unwrap_or(first.span));
        Some(Identifier { names, span })
    }

    fn parse_type_alias(&mut self, lo: u32) -> Option<Stmt> {
        self.bump();
        // upstream parses an expression for the name: where that fails, its error names what
        // it found; a dotted name is one name, any other expression (`T == "a"`, `+T`) is no
        // identifier, and the `=` is wanted after all of it
        let errors = self.errors.len();
        let e = self.parse_expr();
        if self.errors.len() > errors {
            self.recover_to_line_end();
            return None;
        }
        let name = e.name_path().map(|p| {
            let text: Vec<&str> = p.iter().map(|(s, _)| s.as_str()).collect();
            crate::ast::Name {
                sym: crate::ast::Symbol::intern(&text.join(".")),
                span: e.span,
            }
        });
        if name.is_none() {
            self.error(e.span.shrink_to_lo(), "expected identifier");
        }
        self.expect(Tok::Assign, "=");
        let ty = self.parse_type();
        Some(Stmt {
            kind: StmtKind::TypeAlias(TypeAliasStmt { name: name?, ty }),
            span: self.since(lo),
        })
    }
}

/// Upstream's name for an expression kind in "illegal expression" messages.
pub(crate) fn expr_kind_name(k: &ExprKind) -> &'static str {
    match k {
        ExprKind::Ident(_) => "IdentifierExpression",
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::NumberUnit { .. } => {
            "NumberLitExpression"
        }
        ExprKind::Str(_) => "StringLitExpression",
        ExprKind::JoinedStr(_) => "JoinedStringExpression",
        ExprKind::Bool(_) | ExprKind::None | ExprKind::Undefined => "NameConstantLitExpression",
        ExprKind::Unary { .. } => "UnaryExpression",
        ExprKind::Binary { .. } => "BinaryExpression",
        ExprKind::Compare { .. } => "CompareExpression",
        ExprKind::If { .. } => "IfExpression",
        ExprKind::Selector { .. } => "SelectorExpression",
        ExprKind::Subscript { .. } | ExprKind::Slice(_) => "SubscriptExpression",
        ExprKind::Call { .. } => "CallExpression",
        ExprKind::Paren(_) => "ParenExpression",
        ExprKind::List(_) => "ListExpression",
        ExprKind::ListIf(_) => "ListIfItemExpression",
        ExprKind::Starred(_) => "StarredExpression",
        ExprKind::Config(_) => "ConfigExpression",
        ExprKind::ListComp(_) => "ListCompExpression",
        ExprKind::DictComp(_) => "DictCompExpression",
        ExprKind::Quant(_) => "QuantExpression",
        ExprKind::Schema(_) => "SchemaExpression",
        ExprKind::Lambda(_) => "LambdaExpression",
        ExprKind::As { .. } => "AsExpression",
        ExprKind::Missing => "MissingExpression",
    }
}
