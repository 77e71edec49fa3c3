//! The KCL lexer.
//!
//! Produces a flat token vector. Instead of INDENT/DEDENT tokens every token records whether it
//! starts a logical line (`nl`) and, if so, the indentation width of that line (`indent`, tabs
//! expanded to multiples of 8). The parser derives blocks from these two fields everywhere —
//! at module level, in schema bodies, and also inside brackets where config `if` blocks and
//! lambda bodies are laid out by indentation too. The lexer also keeps upstream's Python-style
//! indentation stack, which every line moves (inside brackets too, where upstream gives no
//! tokens), and gives a line outside brackets the width of the level upstream's indent and
//! dedent tokens leave the parser at; it reports inconsistent tabs, dedents to no enclosing
//! level, and dedents no block opened.

use crate::ast::{AugOp, Comment, FileId, Span, Symbol};
use crate::diag::Diagnostic;
use rustc_hash::FxHashMap;

mod token;

use token::keyword;
pub use token::{KEYWORDS, Tok, Token};

/// Result of lexing one file.
pub struct Lexed {
    /// Tokens, ending with [`Tok::Eof`].
    pub tokens: Vec<Token>,
    /// Comments in source order.
    pub comments: Vec<Comment>,
    /// Lexical errors.
    pub errors: Vec<Diagnostic>,
    /// Indices of the tokens (a line's first, or the end of file) where upstream's lexer
    /// gives a dedent no block opened: a line inside brackets indented deeper than the
    /// statement, ended by a line back at the statement's level (see `Lexer::silent_indent`).
    pub stray_dedents: Vec<u32>,
    /// Blocks whose lines are indented by at most this width get no dedent at the end of the
    /// file (0: every block gets one): a line inside brackets took their level away silently.
    pub eof_open_width: u32,
}

/// Lexes `src` (belonging to `file`); `base` is added to every offset (used for the
/// expressions embedded in string interpolations).
pub fn lex(src: &str, file: FileId, base: u32) -> Lexed {
    let mut lx = Lexer {
        src: src.as_bytes(),
        text: src,
        pos: 0,
        file,
        base,
        tokens: Vec::with_capacity(src.len() / 6 + 16),
        comments: Vec::new(),
        errors: Vec::new(),
        depth: 0,
        delims: Vec::new(),
        stack: vec![(0, 0)],
        shown: vec![(0, true)],
        stray_dedents: Vec::new(),
        eof_open_width: 0,
        syms: FxHashMap::default(),
    };
    lx.run();
    Lexed {
        tokens: lx.tokens,
        comments: lx.comments,
        errors: lx.errors,
        stray_dedents: lx.stray_dedents,
        eof_open_width: lx.eof_open_width,
    }
}

struct Lexer<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
    file: FileId,
    base: u32,
    tokens: Vec<Token>,
    comments: Vec<Comment>,
    errors: Vec<Diagnostic>,
    depth: u32,
    /// Open brackets, innermost last.
    delims: Vec<Tok>,
    /// Upstream's indentation stack: (width with tab=8, width with tab=1). Every line moves
    /// it, inside brackets too (silently there).
    stack: Vec<(u32, u32)>,
    /// The levels the parser has been shown (indents given and not yet dedented): the width
    /// the parser's tokens carry, and whether the level opened a block after a `:`. In step
    /// with `stack` until a line inside brackets moves `stack` alone.
    shown: Vec<(u32, bool)>,
    stray_dedents: Vec<u32>,
    eof_open_width: u32,
    /// Per-file cache in front of the global interner (one lock per distinct name per file).
    syms: FxHashMap<&'a str, Symbol>,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}
fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

impl<'a> Lexer<'a> {
    fn span(&self, lo: usize, hi: usize) -> Span {
        Span::new(self.file, self.base + lo as u32, self.base + hi as u32)
    }
    fn err(&mut self, lo: usize, hi: usize, msg: impl Into<String>) {
        if self.errors.len() < 100 {
            let sp = self.span(lo, hi);
            self.errors.push(Diagnostic::syntax(sp, msg));
        }
    }
    fn intern(&mut self, word: &'a str) -> Symbol {
        *self
            .syms
            .entry(word)
            .or_insert_with(|| Symbol::intern(word))
    }
    fn peek(&self, off: usize) -> u8 {
        *self.src.get(self.pos + off).unwrap_or(&0)
    }

    fn run(&mut self) {
        let mut at_line_start = true;
        let mut nl = true;
        let mut indent = 0u32;
        // upstream ignores the indentation of a file's first line (`    a = 1` alone is a
        // valid program); the lines after it are measured against column 0
        let mut first_line = true;
        // errors about a line's indentation, by index: upstream lexes the line's first token
        // before its indentation, so that token's errors come first
        let mut indent_errors: Option<(usize, usize)> = None;
        loop {
            if at_line_start {
                // Measure indentation of the next non-blank line.
                let (w8, w1, start) = self.measure_indent();
                at_line_start = false;
                let b = self.peek(0);
                if b == b'\n' || b == b'\r' || b == b'#' || self.pos >= self.src.len() {
                    // Blank or comment-only line: no layout effect.
                    let _ = start;
                } else if nl && first_line {
                    first_line = false;
                    indent = 0;
                } else if nl {
                    indent = w8;
                    if self.depth == 0 {
                        let before = self.errors.len();
                        indent = self.check_indent(w8, w1, start);
                        indent_errors = Some((before, self.errors.len()));
                    } else {
                        self.silent_indent(w8, w1);
                    }
                }
            }
            if self.pos >= self.src.len() {
                break;
            }
            let b = self.src[self.pos];
            match b {
                b' ' | b'\t' | b'\x0c' => {
                    self.pos += 1;
                }
                b'\r' | b'\n' => {
                    first_line = false;
                    indent_errors = None;
                    self.pos += if b == b'\r' && self.peek(1) == b'\n' {
                        2
                    } else {
                        1
                    };
                    nl = true;
                    at_line_start = true;
                }
                b'#' => {
                    let lo = self.pos;
                    while self.pos < self.src.len()
                        && self.src[self.pos] != b'\n'
                        && self.src[self.pos] != b'\r'
                    {
                        self.pos += 1;
                    }
                    self.comments.push(Comment {
                        span: self.span(lo, self.pos),
                    });
                }
                // (a backslash ending the file continues nothing, as upstream accepts)
                b'\\'
                    if matches!(self.peek(1), b'\n' | b'\r') || self.pos + 1 == self.src.len() =>
                {
                    // Explicit line continuation: the next line continues this logical line.
                    self.pos += 1;
                    self.pos += match (self.peek(0), self.peek(1)) {
                        (b'\r', b'\n') => 2,
                        (b'\n' | b'\r', _) => 1,
                        _ => 0,
                    };
                }
                _ => {
                    let lo = self.pos;
                    let tok = self.token();
                    let hi = self.pos;
                    if let Some((from, to)) = indent_errors.take()
                        && to <= self.errors.len()
                    {
                        self.errors[from..].rotate_left(to - from);
                    }
                    if let Some(tok) = tok {
                        self.tokens.push(Token {
                            tok,
                            lo: self.base + lo as u32,
                            hi: self.base + hi as u32,
                            nl,
                            indent,
                        });
                        nl = false;
                    }
                }
            }
        }
        // upstream's end of file dedents every level left on its stack
        let levels = self.stack.len() - 1;
        self.dedent_shown(levels);
        self.eof_open_width = self.shown_top();
        let end = self.base + self.src.len() as u32;
        self.tokens.push(Token {
            tok: Tok::Eof,
            lo: end,
            hi: end,
            nl: true,
            indent: 0,
        });
    }

    /// Skips leading blanks of a line; returns (tab-8 width, tab-1 width, byte where text starts).
    fn measure_indent(&mut self) -> (u32, u32, usize) {
        let (mut w8, mut w1) = (0u32, 0u32);
        while self.pos < self.src.len() {
            match self.src[self.pos] {
                b' ' => {
                    w8 += 1;
                    w1 += 1;
                }
                b'\t' => {
                    w8 = (w8 / 8 + 1) * 8;
                    w1 += 1;
                }
                b'\x0c' => {
                    w8 = 0;
                    w1 = 0;
                }
                _ => break,
            }
            self.pos += 1;
        }
        (w8, w1, self.pos)
    }

    /// A line starting inside brackets: upstream's lexer gives no indent or dedent there but
    /// moves its indentation stack all the same, so the lines after the brackets are measured
    /// against levels the parser never saw open (`a = [` / `    1]` / `b = 2` gives a dedent
    /// no block opened) or saw open and never closed (a closing `]` at column 0 inside an `if`
    /// body takes the body's level away: the next line at column 0 stays in the body).
    fn silent_indent(&mut self, w8: u32, w1: u32) {
        let top = self.stack.last().map_or(0, |&(t, _)| t);
        if w8 > top {
            self.stack.push((w8, w1));
        } else if w8 < top {
            self.pop_levels(w8);
        }
    }

    /// Pops the levels deeper than `w8`, one dedent each. Where `w8` matches none of the
    /// levels left, the last level popped goes back on the stack (upstream's lexer keeps it,
    /// and its last dedent is an invalid one). Returns the dedents and whether `w8` matched.
    fn pop_levels(&mut self, w8: u32) -> (usize, bool) {
        let mut last = None;
        let mut dedents = 0;
        while self.stack.len() > 1 && self.stack.last().is_some_and(|&(t, _)| w8 < t) {
            last = self.stack.pop();
            dedents += 1;
        }
        let top = self.stack.last().map_or(0, |&(t, _)| t);
        match last {
            Some(level) if w8 != top => {
                self.stack.push(level);
                (dedents, false)
            }
            _ => (dedents, true),
        }
    }

    fn shown_top(&self) -> u32 {
        self.shown.last().map_or(0, |&(w, _)| w)
    }

    /// Gives the parser `n` dedents: each closes the innermost level it was shown, and one
    /// with no such level left is a stray dedent before the next token.
    fn dedent_shown(&mut self, n: usize) {
        let mut stray = false;
        for _ in 0..n {
            if self.shown.len() > 1 {
                self.shown.pop();
            } else {
                stray = true;
            }
        }
        if stray {
            self.stray_dedents.push(self.tokens.len() as u32);
        }
    }

    /// Validates a new logical line's indentation against upstream's stack outside brackets
    /// and returns the width the parser should use: the level the parser is shown the line at.
    fn check_indent(&mut self, w8: u32, w1: u32, start: usize) -> u32 {
        let &(top8, top1) = self.stack.last().unwrap_or(&(0, 0));
        if w8 > top8 {
            if w1 <= top1 {
                self.err(
                    start,
                    start,
                    "inconsistent use of tabs and spaces in indentation",
                );
                return self.shown_top();
            }
            let block = self.tokens.last().is_some_and(|t| t.tok == Tok::Colon);
            self.stack.push((w8, w1));
            // (a level above one the parser still holds open: deeper than that one)
            let width = w8.max(self.shown_top() + 1);
            self.shown.push((width, block));
            return width;
        }
        if w8 == top8 {
            if w1 != top1 {
                self.err(
                    start,
                    start,
                    "inconsistent use of tabs and spaces in indentation",
                );
            }
            return self.shown_top();
        }
        let (dedents, matched) = self.pop_levels(w8);
        if !matched {
            // the last dedent is the invalid one: upstream's parser reports it where it would
            // end a block and stays in the block; with no level left it is a stray dedent
            self.dedent_shown(dedents - 1);
            let closes_block = match self.shown.last() {
                Some(&(_, block)) if self.shown.len() > 1 => block,
                _ => {
                    self.dedent_shown(1);
                    false
                }
            };
            if closes_block {
                // (upstream counts the spaces past the level the line fell back to)
                let popped = self.stack.pop();
                let past = w8 - self.stack.last().map_or(0, |&(t, _)| t);
                self.stack.extend(popped);
                self.err(
                    start,
                    start,
                    format!(
                        "invalid indentation with {past} space{}, try to align indents by adding or removing spaces",
                        if past == 1 { "" } else { "s" }
                    ),
                );
            }
        } else {
            self.dedent_shown(dedents);
            if self.stack.last().is_some_and(|&(_, t1)| w1 != t1) {
                self.err(
                    start,
                    start,
                    "inconsistent use of tabs and spaces in indentation",
                );
            }
        }
        self.shown_top()
    }

    fn token(&mut self) -> Option<Tok> {
        let b = self.src[self.pos];
        let lo = self.pos;
        // Identifiers, keywords and string prefixes.
        if b == b'_' || b.is_ascii_alphabetic() || b >= 0x80 {
            if (b == b'r' || b == b'R') && matches!(self.peek(1), b'"' | b'\'') {
                self.pos += 1;
                return Some(self.string(true));
            }
            let c = self.text[self.pos..].chars().next().unwrap_or('\0');
            if !is_ident_start(c) {
                self.pos += c.len_utf8().max(1);
                self.err(
                    lo,
                    self.pos,
                    format!("invalid character '{c}' in identifier"),
                );
                return None;
            }
            self.ident_end();
            let word = &self.text[lo..self.pos];
            return Some(keyword(word).unwrap_or_else(|| Tok::Ident(self.intern(word))));
        }
        if b.is_ascii_digit() {
            self.number();
            return Some(Tok::Number);
        }
        match b {
            b'"' | b'\'' => return Some(self.string(false)),
            b'$' => {
                let c = self.text[self.pos + 1..].chars().next().unwrap_or('\0');
                if is_ident_start(c) {
                    self.pos += 1;
                    let s = self.pos;
                    self.ident_end();
                    let word = &self.text[s..self.pos];
                    return Some(Tok::Ident(self.intern(word)));
                }
                self.pos += 1;
                return Some(Tok::Dollar);
            }
            _ => {}
        }
        if b == b';' {
            // Upstream's lexer reports a semicolon and drops it; statements need no separator.
            self.pos += 1;
            self.err(
                lo,
                self.pos,
                "the semicolon ';' here is unnecessary, please remove it",
            );
            return None;
        }
        let (tok, len) = match (b, self.peek(1), self.peek(2)) {
            (b'*', b'*', b'=') => (Tok::AugAssign(AugOp::Pow), 3),
            (b'/', b'/', b'=') => (Tok::AugAssign(AugOp::FloorDiv), 3),
            (b'<', b'<', b'=') => (Tok::AugAssign(AugOp::Shl), 3),
            (b'>', b'>', b'=') => (Tok::AugAssign(AugOp::Shr), 3),
            (b'.', b'.', b'.') => (Tok::Ellipsis, 3),
            (b'*', b'*', _) => (Tok::StarStar, 2),
            (b'/', b'/', _) => (Tok::SlashSlash, 2),
            (b'<', b'<', _) => (Tok::Shl, 2),
            (b'>', b'>', _) => (Tok::Shr, 2),
            (b'<', b'=', _) => (Tok::LtE, 2),
            (b'>', b'=', _) => (Tok::GtE, 2),
            (b'=', b'=', _) => (Tok::EqEq, 2),
            (b'!', b'=', _) => (Tok::NotEq, 2),
            // (upstream's `>=` and `>>` take the `>` first: `b ->= 1` is `b - >= 1`)
            (b'-', b'>', c) if c != b'=' && c != b'>' => (Tok::Arrow, 2),
            (b'+', b'=', _) => (Tok::AugAssign(AugOp::Add), 2),
            (b'-', b'=', _) => (Tok::AugAssign(AugOp::Sub), 2),
            (b'*', b'=', _) => (Tok::AugAssign(AugOp::Mul), 2),
            (b'/', b'=', _) => (Tok::AugAssign(AugOp::Div), 2),
            (b'%', b'=', _) => (Tok::AugAssign(AugOp::Mod), 2),
            (b'&', b'=', _) => (Tok::AugAssign(AugOp::BitAnd), 2),
            (b'|', b'=', _) => (Tok::AugAssign(AugOp::BitOr), 2),
            (b'^', b'=', _) => (Tok::AugAssign(AugOp::BitXor), 2),
            (b'(', _, _) => (Tok::LParen, 1),
            (b')', _, _) => (Tok::RParen, 1),
            (b'[', _, _) => (Tok::LBracket, 1),
            (b']', _, _) => (Tok::RBracket, 1),
            (b'{', _, _) => (Tok::LBrace, 1),
            (b'}', _, _) => (Tok::RBrace, 1),
            (b',', _, _) => (Tok::Comma, 1),
            (b':', _, _) => (Tok::Colon, 1),
            (b'.', _, _) => (Tok::Dot, 1),
            (b'?', _, _) => (Tok::Question, 1),
            (b'@', _, _) => (Tok::At, 1),
            (b'=', _, _) => (Tok::Assign, 1),
            (b'+', _, _) => (Tok::Plus, 1),
            (b'-', _, _) => (Tok::Minus, 1),
            (b'*', _, _) => (Tok::Star, 1),
            (b'/', _, _) => (Tok::Slash, 1),
            (b'%', _, _) => (Tok::Percent, 1),
            (b'&', _, _) => (Tok::Amp, 1),
            (b'|', _, _) => (Tok::Pipe, 1),
            (b'^', _, _) => (Tok::Caret, 1),
            (b'~', _, _) => (Tok::Tilde, 1),
            (b'<', _, _) => (Tok::Lt, 1),
            (b'>', _, _) => (Tok::Gt, 1),
            _ => {
                let c = self.text[self.pos..].chars().next().unwrap_or('\0');
                self.pos += c.len_utf8().max(1);
                // a backslash not ending its line: upstream's (Python's) words
                let msg = if c == '\\' {
                    "unexpected character after line continuation character".to_string()
                } else {
                    format!("unexpected character '{}'", c.escape_debug())
                };
                self.err(lo, self.pos, msg);
                return None;
            }
        };
        match tok {
            Tok::LParen | Tok::LBracket | Tok::LBrace => {
                self.depth += 1;
                self.delims.push(tok);
            }
            Tok::RParen | Tok::RBracket | Tok::RBrace => {
                self.depth = self.depth.saturating_sub(1);
                // upstream's lexer checks nesting, in its own words per closer
                let (open, msg) = match tok {
                    Tok::RParen => (Tok::LParen, "error nesting on close paren"),
                    Tok::RBrace => (Tok::LBrace, "error nesting on close brace"),
                    _ => (Tok::LBracket, "mismatched closing delimiter"),
                };
                if self.delims.pop() != Some(open) {
                    self.err(lo, lo + len, msg);
                }
            }
            _ => {}
        }
        self.pos += len;
        Some(tok)
    }

    fn ident_end(&mut self) {
        while self.pos < self.src.len() {
            let b = self.src[self.pos];
            if b == b'_' || b.is_ascii_alphanumeric() {
                self.pos += 1;
            } else if b >= 0x80 {
                let c = self.text[self.pos..].chars().next().unwrap_or('\0');
                if is_ident_continue(c) {
                    self.pos += c.len_utf8();
                } else {
                    break;
                }
            } else {
                break;
            }
        }
    }

    /// Digits and underscores; whether there was a digit (`hex`: hexadecimal ones too).
    fn eat_digits(&mut self, hex: bool) -> bool {
        let mut any = false;
        while let Some(&c) = self.src.get(self.pos) {
            if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
                any = true;
            } else if c != b'_' {
                break;
            }
            self.pos += 1;
        }
        any
    }

    /// A number as upstream's lexer reads it: `0x`, `0o`, `0b` (lower case only) and `0`
    /// followed by a digit are two-character base prefixes (the last one octal), a prefix
    /// needs a digit after it, a fraction or exponent makes a float (decimal only), and
    /// letters glued on are a suffix (a unit for an int, dropped for a float). The digits of
    /// a binary or octal literal after its prefix are checked here; the parser converts the
    /// text (and says so when it cannot).
    fn number(&mut self) {
        let lo = self.pos;
        let first = self.src[lo];
        self.pos += 1;
        let mut radix = 10u32;
        if first == b'0' {
            let has_digits = match self.peek(0) {
                b'x' => {
                    radix = 16;
                    self.pos += 1;
                    self.eat_digits(true)
                }
                b'o' | b'b' => {
                    radix = if self.peek(0) == b'o' { 8 } else { 2 };
                    self.pos += 1;
                    self.eat_digits(false)
                }
                b'0'..=b'9' => {
                    radix = 8;
                    self.pos += 1;
                    self.eat_digits(false)
                }
                b'_' => {
                    self.eat_digits(false);
                    true
                }
                _ => true,
            };
            if !has_digits {
                self.number_suffix(false, true);
                self.err(lo, self.pos, "no valid digits found for number");
                return;
            }
        } else {
            self.eat_digits(false);
        }
        let digits_end = self.pos;
        let mut is_float = false;
        let mut empty_exponent = false;
        let after = self.peek(1);
        if self.peek(0) == b'.'
            && after != b'.'
            && !(after.is_ascii_alphabetic() || after == b'_' || after >= 0x80)
        {
            is_float = true;
            self.pos += 1;
            if self.peek(0).is_ascii_digit() {
                self.eat_digits(false);
                if matches!(self.peek(0), b'e' | b'E') {
                    self.pos += 1;
                    empty_exponent = !self.eat_exponent();
                }
            }
        } else if radix != 16 && matches!(self.peek(0), b'e' | b'E') {
            is_float = true;
            self.pos += 1;
            empty_exponent = !self.eat_exponent();
        }
        let suffix_ok = self.number_suffix(is_float, empty_exponent || (is_float && radix != 10));
        if empty_exponent {
            self.err(lo, self.pos, "expected at least one digit in exponent");
        } else if is_float && radix != 10 {
            let name = match radix {
                16 => "hexadecimal",
                8 => "octal",
                _ => "binary",
            };
            self.err(
                lo,
                self.pos,
                format!("{name} float literal is not supported"),
            );
        } else if !is_float && radix != 10 && radix != 16 {
            let digits = lo + 2;
            if let Some(at) = (digits..digits_end)
                .find(|&i| self.src[i] != b'_' && !(self.src[i] as char).is_digit(radix))
            {
                let (s, e) = (self.base as usize + at, self.base as usize + at + 1);
                let msg =
                    format!("invalid digit for a base {radix} literal, start: {s}, stop: {e}");
                self.err(at, at + 1, msg);
            } else if !suffix_ok {
                self.err(lo, self.pos, "invalid int binary suffix");
            }
        } else if !suffix_ok {
            self.err(lo, self.pos, "invalid int binary suffix");
        }
    }

    /// An exponent's sign and digits; whether it had a digit.
    fn eat_exponent(&mut self) -> bool {
        if matches!(self.peek(0), b'+' | b'-') {
            self.pos += 1;
        }
        self.eat_digits(false)
    }

    /// Letters glued to a number: fine for a float or a number already in error, else they
    /// must name a unit.
    fn number_suffix(&mut self, is_float: bool, in_error: bool) -> bool {
        let s = self.pos;
        if s >= self.src.len() || !is_ident_start(self.text[s..].chars().next().unwrap_or('0')) {
            return true;
        }
        self.ident_end();
        is_float || in_error || crate::ast::NumberSuffix::parse(&self.text[s..self.pos]).is_some()
    }

    fn string(&mut self, raw: bool) -> Tok {
        let lo = self.pos;
        let q = self.src[self.pos];
        let triple = self.peek(1) == q && self.peek(2) == q;
        self.pos += if triple { 3 } else { 1 };
        if !triple {
            return self.one_line_string(lo, q, raw);
        }
        loop {
            if self.pos >= self.src.len() {
                self.pos = self.src.len();
                self.err(lo, lo, "unterminated string");
                return Tok::Str { raw, triple };
            }
            let b = self.src[self.pos];
            if b == b'\\' {
                self.pos += 2;
                continue;
            }
            if b == q {
                if !triple {
                    self.pos += 1;
                    return Tok::Str { raw, triple };
                }
                if self.peek(1) == q && self.peek(2) == q {
                    self.pos += 3;
                    return Tok::Str { raw, triple };
                }
            }
            self.pos += 1;
        }
    }

    /// A `"..."` or `'...'` string after its quote, read as upstream's lexer reads it: a
    /// character followed by a line break ends an unterminated string there (a `\` too), so
    /// only a line break right after the quote is taken in, and the string then runs to its
    /// quote on the next line. A line break in the string is invalid syntax.
    fn one_line_string(&mut self, lo: usize, q: u8, raw: bool) -> Tok {
        let src = self.src;
        let mut i = self.pos;
        let mut line_break = false;
        let terminated = loop {
            let Some(&c) = src.get(i) else {
                break false;
            };
            i += 1;
            if c == q {
                break true;
            }
            match c {
                b'\\' if matches!(src.get(i), Some(&n) if n == b'\\' || n == q) => {
                    i += 1;
                    continue;
                }
                b'\n' | b'\r' => line_break = true,
                _ => {}
            }
            if matches!(src.get(i), Some(b'\n' | b'\r')) {
                break false;
            }
        };
        self.pos = i;
        if !terminated {
            self.err(lo, lo, "unterminated string");
        }
        if line_break {
            self.err(lo, lo, "invalid string syntax");
        }
        Tok::Str { raw, triple: false }
    }
}
