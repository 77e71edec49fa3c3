//! Literal expressions: numbers (with unit suffixes), strings in all their quotings, and the
//! `${...}` interpolations inside strings, parsed as embedded expressions.

use super::strings::{
    Piece, bad_escape, dedent_pieces, shape, split_interpolations, unescape, unescape_literal,
};
use super::{Ctx, Parser};
use crate::ast::*;
use crate::lexer::{Tok, lex};
use std::sync::Arc;

impl<'a> Parser<'a> {
    pub(super) fn number_expr(&mut self, t: crate::lexer::Token) -> Expr {
        let span = self.tspan(t);
        let text = self.text(t);
        match parse_number(text) {
            Ok(kind) => Expr { kind, span },
            Err(msg) => {
                if !self.lexer_reported(span) {
                    self.error(span, msg);
                }
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

    /// Reports an escape upstream cannot read (at the content's start, where upstream
    /// points); whether there was one.
    pub(super) fn bad_string_escape(
        &mut self,
        t: crate::lexer::Token,
        raw: bool,
        triple: bool,
    ) -> bool {
        let text = self.text(t);
        // (most strings have no escape at all)
        if raw || !text.contains('\\') {
            return false;
        }
        let sh = shape(text, raw, triple);
        let content = &text[sh.open..text.len() - sh.close];
        let bad = content.contains('\\') && bad_escape(content);
        if bad {
            let lo = t.lo + sh.open as u32;
            self.lex_error(self.span(lo, lo + 1), "invalid string syntax");
        }
        bad
    }

    pub(super) fn string_expr(&mut self, t: crate::lexer::Token, raw: bool, triple: bool) -> Expr {
        let span = self.tspan(t);
        let text = self.text(t);
        let sh = shape(text, raw, triple);
        let content = &text[sh.open..text.len() - sh.close];
        let escapes = !raw && content.contains('\\');
        if escapes {
            self.bad_string_escape(t, raw, triple);
        }
        if !triple && (raw || (!escapes && !content.contains("${"))) {
            // Common case: no escapes, one allocation straight into the Arc.
            return Expr {
                kind: ExprKind::Str(Arc::from(content)),
                span,
            };
        }
        if raw || !content.contains("${") {
            let mut out = String::with_capacity(content.len());
            if raw {
                out.push_str(content);
            } else {
                unescape(content, &mut out);
            }
            if triple {
                out = dedent_pieces(&[Some(&out)]).swap_remove(0);
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
                    unescape_literal(&content[a..b], &mut s);
                    parts.push(StrPart::Lit(Arc::from(s)));
                }
                Piece::Unclosed(at) => {
                    // upstream points at the token after the string, or at its line's last
                    // character when the line ends there
                    let next = self.tk();
                    let end = if !next.nl && next.tok != Tok::Eof {
                        next.lo
                    } else {
                        let from = (t.hi - self.base) as usize;
                        let nl = self.src[from.min(self.src.len())..]
                            .find('\n')
                            .map_or(self.src.len(), |i| from + i);
                        (nl as u32 + self.base).saturating_sub(1).max(t.hi - 1)
                    };
                    self.error(self.span(end, end + 1), "invalid joined string");
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
                            // upstream lexes the spec first: a number with a suffix no unit
                            // has is its lexer's error
                            if let Some(at) = bad_number_suffix(text) {
                                let at = content_base + (a + at) as u32;
                                self.error(self.span(at, at + 1), "invalid int binary suffix");
                            }
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
        if triple {
            let texts: Vec<Option<&str>> = parts
                .iter()
                .map(|p| match p {
                    StrPart::Lit(s) => Some(&**s),
                    StrPart::Interp { .. } => None,
                })
                .collect();
            let dedented = dedent_pieces(&texts);
            for (p, text) in parts.iter_mut().zip(dedented) {
                if let StrPart::Lit(s) = p {
                    *s = Arc::from(text);
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
        // `${}`: upstream reports the empty expression at the `$`, then parses it anyway
        if text.is_empty() && self.errors.len() < super::MAX_ERRORS {
            let at = lo.saturating_sub(2);
            self.error(
                self.span(at, at + 1),
                "invalid string interpolation expression: ''",
            );
        }
        let e = sub.parse_expr();
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
        // a string left open inside (its quote's end was the interpolation's `}`) is the
        // lexer's error, as upstream reports it
        if let Some(d) = lexed.errors.iter().find(|d| {
            d.labels
                .first()
                .is_some_and(|l| l.message == "unterminated string")
        }) {
            if self.errors.len() < super::MAX_ERRORS {
                self.errors.push(d.clone());
            }
            return Expr::missing(self.span(lo, lo + text.len() as u32));
        }
        if !lexed.errors.is_empty() || !sub.at_eof() {
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
}

/// Parses the text of a number token (the lexer has checked its shape) as upstream converts
/// it: a prefix `0x`, `0o`, `0b` or a leading `0` sets the base, one `_` may follow the
/// prefix, and other underscores only between digits; a float has no underscore.
pub(crate) fn parse_number(text: &str) -> Result<ExprKind, String> {
    let radix = match text.as_bytes() {
        [b'0', b'x', ..] => 16,
        [b'0', b'o', ..] => 8,
        [b'0', b'b', ..] => 2,
        _ => 10,
    };
    let prefix = if radix == 10 { 0 } else { 2 };
    let digits_end = text[prefix..]
        .find(|c: char| match radix {
            16 => !(c.is_ascii_hexdigit() || c == '_'),
            _ => c.is_alphabetic() && c != 'e' && c != 'E',
        })
        .map_or(text.len(), |i| i + prefix);
    let (num, suffix) = text.split_at(digits_end);
    let is_float = radix == 10 && num.contains(['.', 'e', 'E']);
    if is_float {
        // upstream drops any suffix of a float
        return (!num.contains('_'))
            .then(|| num.parse::<f64>().ok())
            .flatten()
            .map(ExprKind::Float)
            .ok_or_else(|| format!("expected one of [\"float\"] got {text}"));
    }
    let (radix, digits) = match radix {
        10 if num.len() > 1 && num.starts_with('0') => (8, &num[1..]),
        10 => (10, num),
        r => (r, &num[prefix..]),
    };
    let digits = digits.strip_prefix('_').unwrap_or(digits);
    let well_formed = !digits.starts_with('_') && !digits.ends_with('_') && !digits.contains("__");
    // upstream reads an integer literal as 64 unsigned bits and keeps them as a signed
    // integer: 0xffffffffffffffff is -1, 9223372036854775808 is i64::MIN
    let value = well_formed
        .then(|| match digits.contains('_') {
            true => u64::from_str_radix(&digits.replace('_', ""), radix).ok(),
            false => u64::from_str_radix(digits, radix).ok(),
        })
        .flatten()
        .map(|v| v as i64)
        .ok_or_else(|| format!("expected one of [\"int\"] got {text}"))?;
    if suffix.is_empty() {
        return Ok(ExprKind::Int(value));
    }
    let suffix = NumberSuffix::parse(suffix).ok_or("invalid int binary suffix")?;
    Ok(ExprKind::NumberUnit { value, suffix })
}

/// Where in `text` a number is followed by letters that are no unit suffix (`2f` in `.2f`), as
/// upstream's lexer reads an interpolation's format spec.
fn bad_number_suffix(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'));
        if !starts {
            i += 1;
            continue;
        }
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let e = i;
        while i < b.len() && b[i].is_ascii_alphabetic() {
            i += 1;
        }
        if i > e && NumberSuffix::parse(&text[e..i]).is_none() {
            return Some(s);
        }
    }
    None
}
