//! Lists, configs (dict literals) and call arguments: their items and entries, `if` items and
//! entries with their indented bodies, and the comprehension clauses lists and configs share.

use super::expr::OPERAND_START;
use super::{Ctx, Parser};
use crate::ast::*;
use crate::lexer::Tok;

impl<'a> Parser<'a> {
    pub(super) fn parse_list(&mut self) -> Expr {
        let lo = self.bump().lo;
        self.ctx.push(Ctx::Bracket);
        let mut elts = Vec::new();
        while !self.at(Tok::RBracket) && !self.at_eof() && !self.gave_up() {
            let start = self.pos;
            // `[for x in y]`: the comprehension's element is missing (upstream says so once
            // it has read the clauses and the `]`)
            let missing = (elts.is_empty() && self.at(Tok::For)).then(|| self.tspan(self.tk()));
            let item = match missing {
                Some(sp) => Expr::missing(sp),
                None => self.parse_list_item(),
            };
            if elts.is_empty() && self.at(Tok::For) {
                let clauses = self.parse_comp_clauses(false);
                self.close_comprehension(Tok::RBracket, "]");
                if let Some(sp) = missing {
                    self.error(sp, "missing list comp clause expression");
                }
                let span = self.since(lo);
                return Expr {
                    kind: ExprKind::ListComp(Box::new(ListComp { elt: item, clauses })),
                    span,
                };
            }
            elts.push(item);
            if elts.len() > 1 && self.at(Tok::For) {
                // upstream reads a comprehension of several elements to its `]`, then
                // refuses it
                let clauses = self.parse_comp_clauses(false);
                self.ctx.pop();
                self.expect_closer(Tok::RBracket, "]");
                let sp = elts[0].span;
                self.error(
                    Span {
                        lo: sp.lo,
                        hi: sp.lo,
                        ..sp
                    },
                    format!(
                        "multiple list comp clause expression found: expected 1, got {}",
                        elts.len()
                    ),
                );
                let elt = elts.swap_remove(0);
                return Expr {
                    kind: ExprKind::ListComp(Box::new(ListComp { elt, clauses })),
                    span: self.since(lo),
                };
            }
            // (a comma starting a line is where upstream wants the next item)
            if self.at(Tok::Comma) && self.tk().nl {
                self.expected(OPERAND_START);
                self.bump();
                continue;
            }
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
        self.expect_closer(Tok::RBracket, "]");
        Expr {
            kind: ExprKind::List(elts.into_boxed_slice()),
            span: self.since(lo),
        }
    }

    /// `(args)` of a call, schema instantiation or decorator; the current token is `(`.
    pub(crate) fn parse_call_args(&mut self) -> CallArgs {
        self.bump();
        // arguments starting on the `(` line stay on it (upstream's parser)
        let one_line = !self.tk().nl;
        self.ctx
            .push(if one_line { Ctx::ParenLine } else { Ctx::Paren });
        let mut args = CallArgs::default();
        while !self.at(Tok::RParen) && !self.at_eof() && !self.gave_up() {
            let start = self.pos;
            // (`for` starts no argument: upstream wants the `)` there)
            if (one_line && self.tk().nl) || self.at(Tok::For) {
                break;
            }
            if let (Tok::Ident(sym), Tok::Assign) = (self.tok(), self.nth(1).tok)
                && !(one_line && self.nth(1).nl)
            {
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
                // `expr = value`: upstream's keyword argument whose name is an identifier, a
                // dotted one naming its first part; any other expression is no name, which
                // it reports at the value
                if self.at(Tok::Assign) && !self.tk().nl {
                    self.bump();
                    // (upstream names a keyword argument by a dotted name's first part)
                    let name = e.name_path().map(|p| Name {
                        sym: p[0].0,
                        span: p[0].1,
                    });
                    if name.is_none() {
                        let (got, at) = self.describe_current();
                        self.expected_got(at, &["identifier"], &got);
                    }
                    let value = self.parse_expr();
                    if let Some(name) = name {
                        args.keywords.push(Keyword { name, value });
                    }
                } else {
                    if !args.keywords.is_empty() {
                        self.error(e.span, "positional argument follows keyword argument");
                    }
                    args.args.push(e);
                }
            }
            // a comma starting a line: the `)` of a one-line call is missing before it, and
            // elsewhere upstream wants the next argument there
            if self.at(Tok::Comma) && self.tk().nl {
                if one_line {
                    break;
                }
                self.expected(OPERAND_START);
                self.bump();
                continue;
            }
            // on the line, a token that starts no argument: upstream tries another argument
            // there, then wants a comma, and skips the token
            if self.pos != start
                && !self.tk().nl
                && !self.starts_item()
                && !matches!(
                    self.tok(),
                    Tok::Comma | Tok::RParen | Tok::RBracket | Tok::RBrace | Tok::Eof | Tok::For
                )
            {
                self.expected(OPERAND_START);
                self.expected(&[","]);
                self.bump();
                continue;
            }
            // Upstream needs no comma between arguments on one line (`f(1 2)`); an argument
            // on the next line without one ends the call (its `)` is missing there)
            if !self.eat(Tok::Comma) && (self.pos == start || !self.starts_item() || self.tk().nl) {
                break;
            }
            if self.pos == start {
                self.bump();
            }
        }
        if one_line {
            self.close_paren_line();
            self.ctx.pop();
        } else {
            self.ctx.pop();
            self.expect_closer(Tok::RParen, ")");
        }
        args
    }

    fn parse_list_item(&mut self) -> Expr {
        match self.tok() {
            // (the operand is a whole expression, a conditional too, as upstream's)
            Tok::Star => {
                let lo = self.bump().lo;
                let v = self.parse_expr();
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
        let (cond, body, orelse) =
            self.parse_if_parts(header_indent, Self::parse_list_if_body, Self::parse_list_if);
        self.depth -= 1;
        Expr {
            kind: ExprKind::ListIf(Box::new(ListIfItem { cond, body, orelse })),
            span: self.since(lo),
        }
    }

    fn parse_list_if_body(&mut self, header_indent: u32) -> Vec<Expr> {
        self.parse_if_body(header_indent, Tok::RBracket, |p, out| {
            out.push(p.parse_list_item())
        })
    }

    /// What follows a list or config `if`: `cond: body`, then an `elif` (one nested item that
    /// `nested` parses) or `else: body`, either lined up with the `if`.
    fn parse_if_parts<T>(
        &mut self,
        header_indent: u32,
        body: fn(&mut Self, u32) -> Vec<T>,
        nested: fn(&mut Self) -> T,
    ) -> (Expr, Vec<T>, Vec<T>) {
        // upstream's parser reads an `elif` chain in one loop: after an `elif` whose body is on
        // its line the chain ends (a further `elif` is no part of it; `else` still is), and
        // once an `elif` had an indented body every later one must too
        let is_elif = self.prev().tok == Tok::Elif;
        let outer = self.elif_block_seen;
        if !is_elif {
            self.elif_block_seen = false;
        }
        let cond = self.parse_expr();
        self.expect_colon_on_line();
        let inline = !self.tk().nl;
        if is_elif && inline && self.elif_block_seen {
            let t = self.tk();
            let got = t.tok.describe(self.text(t));
            self.error(
                self.tspan(t),
                format!("expected one of [\"indent\"] got {got}"),
            );
        }
        let then = body(self, header_indent);
        if is_elif && !inline {
            self.elif_block_seen = true;
        }
        let mut orelse = Vec::new();
        let t = self.tk();
        let aligned = !t.nl || t.indent == header_indent;
        if t.tok == Tok::Elif && aligned && !(is_elif && inline) {
            orelse.push(nested(self));
        } else if t.tok == Tok::Else && aligned {
            self.bump();
            self.expect_colon_on_line();
            orelse = body(self, header_indent);
        }
        if !is_elif {
            self.elif_block_seen = outer;
        }
        (cond, then, orelse)
    }

    /// The `:` of a list or config `if`/`elif`/`else` header, in brackets too on the header's
    /// line: on a later line it is missing at the line's end (upstream reads on from it).
    fn expect_colon_on_line(&mut self) {
        if self.tk().nl || self.at_eof() {
            self.expected_at_line_end(&[":"]);
            self.eat(Tok::Colon);
        } else {
            self.expect(Tok::Colon, ":");
        }
    }

    /// The body of a list or config `if`/`elif`/`else`: one item on the header's line, or an
    /// indented block of them (comma-separated or not) that ends at a dedent or at `closer`.
    fn parse_if_body<T>(
        &mut self,
        header_indent: u32,
        closer: Tok,
        item: impl Fn(&mut Self, &mut Vec<T>),
    ) -> Vec<T> {
        let mut out = Vec::new();
        let t = self.tk();
        if !t.nl {
            item(self, &mut out);
            return out;
        }
        if t.indent <= header_indent {
            // upstream's lexer gives a dedent for a shallower line; either way its parser
            // reports the token at the line's start with an empty span
            if t.tok == Tok::Eof {
                self.expected_indent();
            } else {
                let got = if t.indent < header_indent {
                    "dedent".to_string()
                } else {
                    t.tok.describe(self.text(t))
                };
                self.error(
                    self.span(t.lo, t.lo),
                    format!("expected one of [\"indent\"] got {got}"),
                );
            }
            return out;
        }
        let ind = t.indent;
        while !self.at_eof() && !self.at(closer) && !self.gave_up() {
            let t = self.tk();
            if t.nl && t.indent < ind {
                break;
            }
            let start = self.pos;
            item(self, &mut out);
            self.eat(Tok::Comma);
            if self.pos == start {
                self.bump();
            }
        }
        // an indented body running to the end of the file takes its last newline (upstream's
        // block): a closer wanted after it finds the end of the file
        if self.at_eof() {
            self.eof_newline_taken = true;
        }
        out
    }

    /// A comprehension's closer, its bracket's context still pushed: a line break before it
    /// is skipped (the closer is wanted from the next token), except at the end of the file.
    fn close_comprehension(&mut self, close: Tok, text: &str) {
        if self.at_eof() {
            self.ctx.pop();
            self.expect_closer(close, text);
        } else {
            self.expect_closer(close, text);
            self.ctx.pop();
        }
    }

    /// `for ... in ... [if ...]` clauses. `one_line`: a clause (or filter) on a later line is
    /// no part of them, as in upstream's config written on the `{` line.
    fn parse_comp_clauses(&mut self, one_line: bool) -> Vec<CompClause> {
        let mut clauses = Vec::new();
        while self.at(Tok::For) && !(one_line && self.tk().nl) {
            let lo = self.bump().lo;
            let mut targets = Vec::new();
            loop {
                // (upstream's lexer makes keywords names: `for in in xs` binds `in`)
                if !self.tk().nl && self.tok().is_upstream_name() {
                    self.keyword_as_name();
                }
                let Some(id) = self.parse_identifier() else {
                    break;
                };
                targets.push(id);
                // (a comma on the next line is past the clause's variables, in brackets too)
                if self.tk().nl || !self.eat(Tok::Comma) {
                    break;
                }
                // (the clause's variables stand on its line, in brackets too)
                if self.tk().nl {
                    self.expected_at_line_end(&["identifier"]);
                    break;
                }
            }
            // (inside brackets too, `in` belongs on the line of the clause's variables)
            if self.tk().nl || self.at_eof() {
                self.expected_at_line_end(&["in"]);
                self.eat(Tok::In);
            } else if !self.expect(Tok::In, "in") {
                // Recover like upstream: keep parsing what follows as the iterable.
            }
            let iter = self.parse_or_test();
            // one filter per clause, a full expression as upstream's (`if a if b else c` is
            // one conditional expression)
            let mut ifs = Vec::new();
            if self.at(Tok::If) && !(one_line && self.tk().nl) {
                self.bump();
                ifs.push(self.parse_expr());
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
        // upstream reads a config whose first entry stands on the `{` line as one line: an
        // entry on a later line is where it wants the `}`, and the config ends there
        let one_line = !self.tk().nl;
        let mut entries = Vec::new();
        while !self.at(Tok::RBrace) && !self.at_eof() && !self.gave_up() {
            let start = self.pos;
            if one_line && self.tk().nl {
                self.expected(&["}"]);
                self.indent_taken_at = Some(self.pos);
                self.ctx.pop();
                self.no_schema_brace = saved;
                return Expr {
                    kind: ExprKind::Config(entries.into_boxed_slice()),
                    span: self.since(lo),
                };
            }
            if entries.is_empty() && self.at(Tok::For) {
                // `{for x in y}`: the comprehension's entry is missing (upstream says so once
                // it has read the clauses and the `}`)
                let sp = self.tspan(self.tk());
                self.parse_comp_clauses(false);
                self.no_schema_brace = saved;
                self.close_comprehension(Tok::RBrace, "}");
                self.error(sp, "missing config comp clause expression");
                return Expr {
                    kind: ExprKind::Config(entries.into_boxed_slice()),
                    span: self.since(lo),
                };
            }
            let entry = self.parse_config_entry();
            if entries.is_empty()
                && self.at(Tok::For)
                && !(one_line && self.tk().nl)
                && let Some(ConfigEntry {
                    kind: ConfigEntryKind::KeyValue { key, op, value },
                    ..
                }) = entry
            {
                let clauses = self.parse_comp_clauses(one_line);
                self.no_schema_brace = saved;
                self.close_comprehension(Tok::RBrace, "}");
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
            if entries.len() > 1 && self.at(Tok::For) && !(one_line && self.tk().nl) {
                // as with lists, upstream reads a comprehension of several entries to its
                // `}`, then refuses it at the first entry
                self.parse_comp_clauses(one_line);
                self.ctx.pop();
                self.no_schema_brace = saved;
                self.expect_closer(Tok::RBrace, "}");
                let sp = entries[0].span();
                self.error(
                    Span { hi: sp.lo, ..sp },
                    format!(
                        "multiple config comp clause expression found: expected 1, got {}",
                        entries.len()
                    ),
                );
                return Expr {
                    kind: ExprKind::Config(entries.into_boxed_slice()),
                    span: self.since(lo),
                };
            }
            // (a comma starting a line is where upstream wants the next entry, or the `}` of
            // a one-line config)
            if self.at(Tok::Comma) && self.tk().nl {
                if !one_line {
                    self.expected(OPERAND_START);
                    self.expected(&[":", "=", "+="]);
                    self.bump();
                }
                continue;
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
        self.expect_closer(Tok::RBrace, "}");
        // the tree lives for the whole run: no growth slack (entries are ~100 bytes each)
        Expr {
            kind: ExprKind::Config(entries.into_boxed_slice()),
            span: self.since(lo),
        }
    }

    pub(super) fn parse_config_entry(&mut self) -> Option<ConfigEntry> {
        let t = self.tk();
        let lo = t.lo;
        match t.tok {
            Tok::StarStar => {
                self.bump();
                let v = self.parse_expr();
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
                    // a line break between the key and its operator is a newline to
                    // upstream's parser, in any config
                    _ if self.tk().nl && !self.at_eof() => {
                        let span = self.line_end_span();
                        self.error(span, "expected one of [\":\", \"=\", \"+=\"] got newline");
                        return None;
                    }
                    Tok::Colon => ConfigOp::Union,
                    Tok::Assign => ConfigOp::Override,
                    Tok::AugAssign(AugOp::Add) => ConfigOp::Insert,
                    // at the end of the file upstream's parser finds the last line's newline
                    // here, takes it and wants another entry (every closer after that finds
                    // the end of the file)
                    _ if self.at_eof() => {
                        let (_, span) = self.describe_current();
                        self.error(span, "expected one of [\":\", \"=\", \"+=\"] got newline");
                        if !self.eof_newline_taken {
                            self.eof_newline_taken = true;
                            self.expected_got(span, OPERAND_START, "eof");
                        }
                        return None;
                    }
                    _ => {
                        self.expected(&[":", "=", "+="]);
                        return None;
                    }
                };
                self.bump();
                // at the end of the file upstream finds the last line's newline where the
                // value should start
                // (a value on the next line too: the line break is a newline to upstream)
                let value = if self.at_eof() || self.tk().nl {
                    let span = self.expected_at_line_end(OPERAND_START);
                    Expr::missing(span)
                } else {
                    self.parse_expr()
                };
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
        let (cond, body, orelse) = self.parse_if_parts(
            header_indent,
            Self::parse_config_if_body,
            Self::parse_config_if,
        );
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
        self.parse_if_body(header_indent, Tok::RBrace, |p, out| {
            out.extend(p.parse_config_entry())
        })
    }
}
