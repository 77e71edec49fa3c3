//! How the parser reports: syntax errors in upstream's words and places (`expected one of
//! [..] got ..`, the newline a missing operand is found at), and the expectations that report.

use super::*;

impl Parser<'_> {
    pub(super) fn error(&mut self, span: Span, msg: impl Into<String>) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(Diagnostic::syntax(span, msg));
        }
    }
    /// An error upstream's lexer reports (it lexes the whole file before parsing): among
    /// the lexer's errors, in source order, before any parse error.
    pub(super) fn lex_error(&mut self, span: Span, msg: impl Into<String>) {
        if self.errors.len() >= MAX_ERRORS {
            return;
        }
        let n = self.lex_errors.min(self.errors.len());
        let at = self.errors[..n].partition_point(|d| d.span().is_some_and(|s| s.lo <= span.lo));
        self.errors.insert(at, Diagnostic::syntax(span, msg));
        self.lex_errors = n + 1;
    }
    pub(super) fn error_kind(
        &mut self,
        kind: ErrorKind,
        span: Span,
        msg: impl Into<String>,
    ) -> &mut Diagnostic {
        self.errors.push(Diagnostic::error(kind, span, msg));
        self.errors.last_mut().expect("just pushed")
    }
    /// Whether the lexer already reported an error inside `span` (a malformed number), which
    /// upstream reports once.
    pub(super) fn lexer_reported(&self, span: Span) -> bool {
        self.errors
            .iter()
            .filter_map(Diagnostic::span)
            .any(|s| s.file == span.file && s.lo >= span.lo && s.lo < span.hi)
    }
    pub(super) fn gave_up(&self) -> bool {
        self.errors.len() >= MAX_ERRORS
    }
    /// How the current token is named in "got X" messages, and where to point.
    pub(super) fn describe_current(&self) -> (String, Span) {
        let t = self.tk();
        // an interpolation's text is followed by a line end at its end (upstream parses it as
        // a line), which `[...]` and `{...}` skip
        if self.embedded && t.tok == Tok::Eof {
            let end = self.base + self.src.len() as u32;
            let what = match self.ctx.last() {
                Some(Ctx::Bracket | Ctx::Brace) => "eof",
                _ => "newline",
            };
            return (what.to_string(), self.span(end, end + 1));
        }
        // a block header's line ended: upstream wants an indent and names the next line's
        // first token when that line is not indented further
        if t.nl && self.want_block && t.tok != Tok::Eof && t.indent == self.line_indent {
            return (t.tok.describe(self.text(t)), self.tspan(t));
        }
        // (a block lambda's lines end as outside brackets)
        let in_lambda = self.ctx.last() == Some(&Ctx::Lambda);
        if t.nl
            && (self.line_level() || t.tok == Tok::Eof || in_lambda || self.cut_after_operator())
        {
            // Point at the end of the previous line (its last character, blanks and a
            // comment included), as upstream does.
            let at = if self.pos == 0 {
                t.lo
            } else {
                self.line_end_span().lo
            };
            // at the end of the file upstream's lexer has ended the last line (a newline): a
            // missing operand finds it inside brackets too (only where `[...]` and `{...}`
            // want their closer are newlines skipped, see `expect`), and the start of a block (also an `if` entry's, inside braces) finds the end of file or,
            // on an indented line, a dedent
            let what = if t.tok == Tok::Eof && self.want_block && !self.embedded {
                if self.line_indent > 0 {
                    "dedent"
                } else {
                    "eof"
                }
            } else if t.tok == Tok::Eof && (self.embedded || self.ctx.last() == Some(&Ctx::Lambda))
            {
                "eof"
            } else if self.want_block && t.tok != Tok::Eof && t.indent < self.line_indent {
                // (a block header took its line's newline: the block finds the dedent)
                "dedent"
            } else {
                // (upstream's lexer ends a line with a newline before any indent or dedent of
                // the next one: that newline is what a missing operand or token finds)
                "newline"
            };
            return (what.to_string(), self.span(at, at + 1));
        }
        (t.tok.describe(self.text(t)), self.tspan(t))
    }
    /// The current token, a word keyword, read as the name it spells (upstream's parser takes
    /// keywords as names where a name may stand).
    pub(super) fn keyword_as_name(&mut self) {
        let t = self.tk();
        let sym = crate::ast::Symbol::intern(self.text(t));
        let i = self.pos.min(self.toks.len() - 1);
        self.toks[i].tok = Tok::Ident(sym);
    }
    /// Reports a missing indented block.
    pub(super) fn expected_indent(&mut self) {
        self.want_block = true;
        self.expected(&["indent"]);
        self.want_block = false;
    }
    /// Where upstream's parser finds the newline ending the previous token's line: under the
    /// line's last character (what follows the token there is blanks or a comment).
    pub(super) fn line_end_span(&self) -> Span {
        let p = self.prev();
        let rest = self.src.get((p.hi - self.base) as usize..).unwrap_or("");
        let eol = rest.find(['\n', '\r']).unwrap_or(rest.len()) as u32;
        let at = (p.hi + eol).saturating_sub(1).max(p.lo);
        self.span(at, at + 1)
    }
    /// Reports `expected one of [..] got X` at the current token.
    pub(super) fn expected(&mut self, what: &[&str]) {
        let (got, span) = self.describe_current();
        self.expected_got(span, what, &got);
    }
    /// Reports `expected one of [..] got {got}` at `span`.
    pub(super) fn expected_got(&mut self, span: Span, what: &[&str], got: &str) {
        let list = what
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(", ");
        self.error(span, format!("expected one of [{list}] got {got}"));
    }
    /// Reports `expected one of [..] got newline` where upstream's parser finds the line's
    /// newline (under its last character, see `line_end_span`); returns that place.
    pub(super) fn expected_at_line_end(&mut self, what: &[&str]) -> Span {
        let span = self.line_end_span();
        self.expected_got(span, what, "newline");
        span
    }
    /// The `:` ending a block header (`if c:`, `schema S:`, `check:`): missing at the end of
    /// its line, upstream's parser finds the line's newline, whatever the next line's indent.
    pub(super) fn expect_header_colon(&mut self) -> bool {
        let t = self.tk();
        // (after a schema's `[params]` upstream's lexer has skipped that newline)
        if t.nl && t.tok != Tok::Eof && !self.at(Tok::Colon) && self.prev().tok != Tok::RBracket {
            let (_, span) = self.describe_current();
            self.error(span, "expected one of [\":\"] got newline");
            return false;
        }
        // the next token after `]`, wherever it is
        if t.nl && !self.at(Tok::Colon) && self.prev().tok == Tok::RBracket {
            let (got, span) = match t.tok {
                Tok::Eof => ("eof".to_string(), self.tspan(self.prev())),
                _ if t.indent > self.line_indent => ("indent".to_string(), self.tspan(t)),
                _ if t.indent < self.line_indent => ("dedent".to_string(), self.span(t.lo, t.lo)),
                _ => (t.tok.describe(self.text(t)), self.span(t.lo, t.lo)),
            };
            self.error(span, format!("expected one of [\":\"] got {got}"));
            return false;
        }
        self.expect(Tok::Colon, ":")
    }
    /// Consumes `t` or reports it as expected (named `name`). Returns whether it was there.
    pub(super) fn expect(&mut self, t: Tok, name: &str) -> bool {
        if self.at(t) && !(self.nl_break() && t != Tok::Eof && self.line_sensitive(t)) {
            self.bump();
            return true;
        }
        if self.at_eof() && matches!(t, Tok::RBrace | Tok::RBracket | Tok::RParen) {
            let (_, span) = self.describe_current();
            if self.eof_newline_taken {
                self.error(span, format!("expected one of [\"{name}\"] got eof"));
                return false;
            }
            // upstream's parser finds the file's last newline where it wants a `)` of a `(`
            // not ending its line (after one that does, as after `{` and `[`, see below)
            if t == Tok::RParen
                && (self.after_block_lambda == Some(self.pos)
                    || self.open_paren_continues_its_line())
            {
                self.error(span, format!("expected one of [\"{name}\"] got newline"));
            } else if let Some(brace) = self.newline_at_eof() {
                // a `{` or `[` ending its line opens a block of entries: at the end of the
                // file upstream's parser finds the last newline where it wants another entry
                // (or, in a one-line `{`, its `}`)
                let msg = if brace {
                    "expected one of [\"}\"] got newline"
                } else {
                    "expected one of [\"identifier\", \"literal\", \"(\", \"[\", \"{\"] got newline"
                };
                self.error(span, msg);
            } else {
                // inside `{...}` and `[...]` upstream's lexer skips the last newline
                self.error(span, format!("expected one of [\"{name}\"] got eof"));
            }
            return false;
        }
        self.expected(&[name]);
        false
    }
}
