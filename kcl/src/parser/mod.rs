//! The KCL parser: a hand-written recursive-descent parser over the token vector from
//! [`crate::lexer`], with error recovery (it keeps going after an error and reports several).
//!
//! Layout: blocks are recognised from each token's `nl`/`indent` fields (see the lexer docs).
//! A newline ends an expression except inside parentheses; at module/statement level (outside
//! any bracket) a newline where an operand is required is an error, inside `[]`/`{}` it is not.

mod annotated;
mod blocks;
mod collections;
mod expr;
pub mod generate;
mod imports;
mod literals;
pub mod loader;
pub mod merge;
mod report;
mod schema;
mod stmt;
pub(crate) mod strings;
mod types;

use crate::ast::{Expr, ExprKind, FileId, Module, Span, Stmt, StmtKind, StrLit, source_map};
use crate::diag::{Diagnostic, Diagnostics, ErrorKind};
use crate::lexer::{Tok, Token, lex};
use std::path::Path;
use std::sync::Arc;

/// Deepest nesting of expressions/blocks accepted, so hostile input cannot overflow the stack.
const MAX_DEPTH: u32 = 100;
/// Longest operator chain / list accepted in one node before giving up (keeps the tree shallow
/// enough for recursive consumers).
const MAX_CHAIN: usize = 1000;
/// Errors per file after which parsing stops.
const MAX_ERRORS: usize = 100;

/// Bracket contexts, innermost last.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ctx {
    Paren,
    /// Parentheses upstream's parser reads on one line (an expression's, a schema's parent,
    /// call arguments starting on the `(` line): a line break in them ends the line there.
    ParenLine,
    Bracket,
    Brace,
    /// A block lambda's body: braces holding statements, whose blocks upstream's lexer
    /// indents and dedents as outside brackets.
    Lambda,
}

pub(crate) struct Parser<'a> {
    src: &'a str,
    base: u32,
    file: FileId,
    toks: Vec<Token>,
    pos: usize,
    errors: Vec<Diagnostic>,
    ctx: Vec<Ctx>,
    depth: u32,
    /// Indentation of the logical line of the last consumed line-starting token.
    line_indent: u32,
    /// While parsing a quantifier target, `Name {` is not a schema instantiation.
    no_schema_brace: bool,
    /// Token positions of the `{` opening the lambda bodies being parsed.
    lambda_braces: Vec<usize>,
    /// How many `[`/`{` of type annotations enclose the current token (upstream's type parser
    /// does not read past a line's end there).
    type_brackets: u32,
    /// The token after the `}` closing a lambda whose body is a block: at the end of the file
    /// upstream's parser finds a newline there where it wants a `)` (a `]` finds the end).
    after_block_lambda: Option<usize>,
    /// Inside an `if` block of a schema body (where a declaration needs a value).
    in_schema_if: bool,
    /// A config entry at the end of the file took upstream's last newline (see
    /// `parse_config_entry`): closers after it find the end of the file.
    eof_newline_taken: bool,
    /// Token index where the current statement began (its line break is not an error).
    stmt_start: usize,
    /// Tokens where upstream's lexer gives a dedent no block opened (see `Lexed`).
    stray_dedents: Vec<u32>,
    /// See [`crate::lexer::Lexed::eof_open_width`].
    eof_open_width: u32,
    /// A token whose line's indent a one-line config took when it ended there (see
    /// `parse_config_or_dictcomp`): no unexpected indent is reported before it.
    indent_taken_at: Option<usize>,
    /// How many of `errors` (at the front) are upstream's lexer's (see `lex_error`).
    lex_errors: usize,
    /// In a list or config `if` chain: an `elif` had an indented body (see `parse_if_parts`).
    elif_block_seen: bool,
    /// Parsing the text of a `${...}` interpolation: its end is "eof", not a newline.
    embedded: bool,
    /// An indented block is expected (after a `:` line end).
    want_block: bool,
}

/// Parses a file from disk. The file is registered in the global source map under its
/// absolute path.
pub fn parse_file(path: impl AsRef<Path>) -> Result<Module, Diagnostics> {
    parse_registered(register_file(path.as_ref())?)
}

/// Reads `path` into the global source map.
pub(crate) fn register_file(path: &Path) -> Result<FileId, Diagnostics> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Diagnostics::from(Diagnostic::plain(
            ErrorKind::CannotFindModule,
            format!("cannot read {}: {e}", path.display()),
        ))
    })?;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let name = abs.display().to_string();
    Ok(source_map().add(name, Some(&abs), text).id)
}

/// [`parse_file`] for a program about to be resolved and run: see [`parse_for_program`].
pub(crate) fn parse_program_file(path: &Path) -> Result<Module, Diagnostics> {
    parse_for_program(register_file(path)?)
}

/// Parses a file of a program about to be resolved: a parameter list out of order
/// (`IllegalParameterError`) is upstream's resolver's error, not its parser's, so a file whose
/// only errors are those parses (the resolver reports them where it reaches them, after
/// errors of earlier statements), and next to syntax errors they come after all of those.
pub(crate) fn parse_for_program(file: FileId) -> Result<Module, Diagnostics> {
    let (m, mut errors) = parse_with_errors(file);
    let resolver_error = |d: &Diagnostic| d.title == ErrorKind::IllegalParameterError.title();
    if errors.iter().all(resolver_error) {
        return Ok(m);
    }
    errors.sort_by_key(resolver_error);
    Err(Diagnostics(errors))
}

/// Parses `text`, registering it in the global source map under `name`.
pub fn parse_source(name: &str, text: &str) -> Result<Module, Diagnostics> {
    let file = source_map().add(name, None, text);
    parse_registered(file.id)
}

/// Parses a file already in the source map. Returns the module even when there are errors,
/// together with the diagnostics (for tools that want a partial tree).
pub fn parse_with_errors(file: FileId) -> (Module, Vec<Diagnostic>) {
    let Some(sf) = source_map().get(file) else {
        let m = Module {
            file,
            filename: Arc::from("<unknown>"),
            doc: None,
            body: Vec::new(),
            comments: Vec::new(),
        };
        return (
            m,
            vec![Diagnostic::plain(
                ErrorKind::InvalidSyntax,
                "unknown source file",
            )],
        );
    };
    parse_text_as(file, sf.name.clone(), &sf.text)
}

/// Parses `text` without registering it in the source map (spans use a dummy file id, so
/// diagnostics cannot be rendered with a snippet). For fuzzing and throwaway checks, where
/// registering every input would grow the map without bound.
pub fn parse_unregistered(text: &str) -> (Module, Vec<Diagnostic>) {
    parse_text_as(FileId(u32::MAX), Arc::from("<unregistered>"), text)
}

fn parse_text_as(file: FileId, filename: Arc<str>, text: &str) -> (Module, Vec<Diagnostic>) {
    let lexed = lex(text, file, 0);
    let mut p = Parser::new(text, 0, file, lexed.tokens);
    p.errors = lexed.errors;
    p.lex_errors = p.errors.len();
    p.stray_dedents = lexed.stray_dedents;
    p.eof_open_width = lexed.eof_open_width;
    let body = p.parse_module_body();
    // upstream's module docstring is a long (triple-quoted) string opening the file; any other
    // leading string is an expression statement whose value is output
    let long = |e: &Expr| {
        let src = text.get(e.span.lo as usize..).unwrap_or("");
        let src = src.strip_prefix(['r', 'R']).unwrap_or(src);
        src.starts_with("\"\"\"") || src.starts_with("'''")
    };
    let doc = body.first().and_then(|s| match &s.kind {
        StmtKind::Expr(e) if long(e) => match &e.kind {
            ExprKind::Str(v) => Some(StrLit {
                value: v.clone(),
                span: e.span,
            }),
            // an interpolated docstring is its text as written
            ExprKind::JoinedStr(_) => {
                let raw = text
                    .get(e.span.lo as usize..e.span.hi as usize)
                    .unwrap_or("");
                let raw = raw.trim_start_matches(['r', 'R']);
                Some(StrLit {
                    value: Arc::from(raw.get(3..raw.len().saturating_sub(3)).unwrap_or("")),
                    span: e.span,
                })
            }
            _ => None,
        },
        _ => None,
    });
    // Lexer errors first (upstream lexes the whole file before parsing), then parser errors
    // in the order they were found; but a dedent's width is checked by upstream's parser
    // where the block ends, so that error stands among the parser's by position.
    let errors = indentation_among_parse_errors(p.errors, p.lex_errors);
    let m = Module {
        file,
        filename,
        doc,
        body,
        comments: lexed.comments,
    };
    (m, errors)
}

/// The lexer's `invalid indentation` errors (among the first `lexed`) moved before the first
/// parser error found after their position.
fn indentation_among_parse_errors(mut errors: Vec<Diagnostic>, lexed: usize) -> Vec<Diagnostic> {
    let lexed = lexed.min(errors.len());
    let is_indent = |d: &Diagnostic| d.message().starts_with("invalid indentation");
    if !errors[..lexed].iter().any(is_indent) || lexed == errors.len() {
        return errors;
    }
    let parsed = errors.split_off(lexed);
    let (moved, mut out): (Vec<_>, Vec<_>) = errors.into_iter().partition(is_indent);
    let pos = |d: &Diagnostic| d.span().map_or(u32::MAX, |s| s.lo);
    let mut moved = moved.into_iter().peekable();
    for d in parsed {
        while let Some(m) = moved.next_if(|m| pos(m) <= pos(&d)) {
            out.push(m);
        }
        out.push(d);
    }
    out.extend(moved);
    out
}

/// Parses a registered file, failing when any error was reported.
pub fn parse_registered(file: FileId) -> Result<Module, Diagnostics> {
    let (m, errors) = parse_with_errors(file);
    if errors.is_empty() {
        Ok(m)
    } else {
        Err(Diagnostics(errors))
    }
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str, base: u32, file: FileId, toks: Vec<Token>) -> Self {
        Parser {
            src,
            base,
            file,
            toks,
            pos: 0,
            errors: Vec::new(),
            ctx: Vec::new(),
            depth: 0,
            line_indent: 0,
            no_schema_brace: false,
            lambda_braces: Vec::new(),
            type_brackets: 0,
            after_block_lambda: None,
            in_schema_if: false,
            eof_newline_taken: false,
            stmt_start: 0,
            stray_dedents: Vec::new(),
            eof_open_width: 0,
            indent_taken_at: None,
            lex_errors: 0,
            elif_block_seen: false,
            embedded: false,
            want_block: false,
        }
    }

    // ------------------------------------------------------------ token access ----

    fn tk(&self) -> Token {
        self.toks[self.pos.min(self.toks.len() - 1)]
    }
    fn tok(&self) -> Tok {
        self.tk().tok
    }
    fn nth(&self, n: usize) -> Token {
        self.toks[(self.pos + n).min(self.toks.len() - 1)]
    }
    fn prev(&self) -> Token {
        if self.pos == 0 {
            self.toks[0]
        } else {
            self.toks[(self.pos - 1).min(self.toks.len() - 1)]
        }
    }
    fn at(&self, t: Tok) -> bool {
        self.tok() == t
    }
    fn at_eof(&self) -> bool {
        self.tok() == Tok::Eof
    }
    fn bump(&mut self) -> Token {
        let t = self.tk();
        if t.nl && t.tok != Tok::Eof {
            self.line_indent = t.indent;
        }
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }
    fn eat(&mut self, t: Tok) -> bool {
        if self.at(t) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn text(&self, t: Token) -> &'a str {
        let lo = (t.lo - self.base) as usize;
        let hi = (t.hi - self.base) as usize;
        self.src.get(lo..hi).unwrap_or("")
    }
    fn span(&self, lo: u32, hi: u32) -> Span {
        Span::new(self.file, lo, hi)
    }
    fn tspan(&self, t: Token) -> Span {
        self.span(t.lo, t.hi)
    }
    /// Span from `lo` to the end of the last consumed token.
    fn since(&self, lo: u32) -> Span {
        let hi = self.prev().hi.max(lo);
        self.span(lo, hi)
    }

    /// Whether a newline before the current token ends the current construct.
    fn nl_significant(&self) -> bool {
        self.ctx.last() != Some(&Ctx::Paren)
    }
    /// The current token starts a new logical line and that matters here.
    fn at_line_break(&self) -> bool {
        self.tk().nl && self.nl_significant()
    }
    /// Outside any bracket.
    fn top_level(&self) -> bool {
        self.ctx.is_empty()
    }
    /// Where a line break ends the line (outside brackets, or in one-line parentheses).
    fn line_level(&self) -> bool {
        matches!(self.ctx.last(), None | Some(Ctx::ParenLine))
    }
    /// The `)` of one-line parentheses (the context still pushed): on a later line it is
    /// missing where the line ended, and nothing is skipped (upstream reads on from there).
    fn close_paren_line(&mut self) {
        if self.tk().nl && !self.at_eof() {
            self.expected(&[")"]);
        } else if !self.expect(Tok::RParen, ")") {
            self.skip_to_closer(Tok::RParen);
        }
    }
    /// The current token is on a new line where the statement needs more tokens (an error
    /// outside brackets).
    fn nl_break(&self) -> bool {
        // (a block lambda's statements end at line ends too: upstream's lexer does not
        // join lines inside its braces)
        self.tk().nl
            && (self.line_level() || self.ctx.last() == Some(&Ctx::Lambda))
            && self.pos != self.stmt_start
            || self.cut_after_operator()
    }
    /// Inside `[...]` or `{...}`, the current token starts a line right after an operator or
    /// keyword that wants more on its line: upstream's parser skips a line break there only
    /// between items and entries (after `[`, `{`, `,`, `:` or `=`), so the operand is missing.
    fn cut_after_operator(&self) -> bool {
        self.tk().nl
            && self.pos > 0
            && matches!(self.ctx.last(), Some(Ctx::Bracket | Ctx::Brace))
            && (stmt::is_symbol_operator(self.prev().tok)
                || matches!(
                    self.prev().tok,
                    Tok::Tilde
                        | Tok::And
                        | Tok::Or
                        | Tok::Not
                        | Tok::In
                        | Tok::Is
                        | Tok::If
                        | Tok::Else
                        | Tok::For
                        | Tok::Dot
                ))
    }

    /// Whether the innermost `(` still open at the current token has something after it on
    /// its own line (it does not end its line).
    fn open_paren_continues_its_line(&self) -> bool {
        let end = self.pos.min(self.toks.len());
        let mut depth = 0usize;
        for i in (0..end).rev() {
            match self.toks[i].tok {
                Tok::RBrace | Tok::RBracket | Tok::RParen => depth += 1,
                Tok::LBrace | Tok::LBracket | Tok::LParen if depth > 0 => depth -= 1,
                Tok::LParen => {
                    return self
                        .toks
                        .get(i + 1)
                        .is_some_and(|n| !n.nl && n.tok != Tok::Eof);
                }
                _ => {}
            }
        }
        false
    }

    /// At the end of the file inside brackets: whether upstream's lexer has emitted the last
    /// newline (it does when the last line holding a token is indented), and if so whether
    /// the innermost unclosed bracket is a one-line `{` (whose entries stop at the newline, so
    /// a `}` is wanted rather than another entry).
    fn newline_at_eof(&self) -> Option<bool> {
        let end = self.pos.min(self.toks.len());
        let last_line_indent = self.toks[..end]
            .iter()
            .rev()
            .find(|t| t.nl && t.tok != Tok::Eof)
            .map_or(0, |t| t.indent);
        if last_line_indent == 0 {
            return None;
        }
        let mut depth = 0usize;
        for i in (0..end).rev() {
            let t = self.toks[i].tok;
            match t {
                Tok::RBrace | Tok::RBracket | Tok::RParen => depth += 1,
                Tok::LBrace | Tok::LBracket | Tok::LParen if depth > 0 => depth -= 1,
                // a lambda's body is a block of statements: upstream finds the end of the file
                Tok::LBrace if self.lambda_braces.last() == Some(&i) => return None,
                Tok::LBrace | Tok::LBracket | Tok::LParen => {
                    // (a `{` that is the file's last token ends its line too)
                    let ends_line = self
                        .toks
                        .get(i + 1)
                        .is_some_and(|n| n.nl || n.tok == Tok::Eof);
                    return Some(t == Tok::LBrace && !ends_line);
                }
                _ => {}
            }
        }
        None
    }
    /// Whether the current token, on the same line, starts a statement.
    fn starts_stmt(&self) -> bool {
        // (a word keyword starting a statement is a name to upstream's parser: `type S = str
        // as int` is the alias and the names `as` and `int`)
        self.starts_expr()
            || (!self.at_line_break()
                && (matches!(self.tok(), Tok::Import | Tok::Assert | Tok::If | Tok::At)
                    || self.tok().is_word_keyword()))
    }
    /// Tokens that may not be taken from the next line at statement level.
    fn line_sensitive(&self, t: Tok) -> bool {
        matches!(t, Tok::Colon | Tok::Assign | Tok::In)
    }
    /// Reports upstream's unexpected dedent where one stands before token `i`: at the line's
    /// start, or at the end of the file after the last line's end.
    fn stray_dedent_at(&mut self, i: usize) {
        if !self.stray_dedent_before(i) {
            return;
        }
        self.stray_dedents.retain(|&j| j as usize != i);
        let t = self.toks[i.min(self.toks.len() - 1)];
        let span = if t.tok == Tok::Eof {
            self.prev_last_char()
        } else {
            self.span(t.lo, t.lo)
        };
        self.error(span, "unexpected token 'dedent'");
    }
    /// Whether upstream gives a stray dedent before token `i`.
    fn stray_dedent_before(&self, i: usize) -> bool {
        self.stray_dedents.binary_search(&(i as u32)).is_ok()
    }
    /// The last character of the previous token: where upstream reports the end of the file.
    fn prev_last_char(&self) -> Span {
        let p = self.prev();
        let at = p.hi.saturating_sub(1).max(p.lo);
        self.span(at, at + 1)
    }
    fn unexpected(&mut self) {
        let (got, span) = self.describe_current();
        self.error(span, format!("unexpected token '{got}'"));
    }
    fn expect_ident(&mut self) -> Option<crate::ast::Name> {
        let t = self.tk();
        if let Tok::Ident(sym) = t.tok
            && !self.nl_break()
        {
            self.bump();
            return Some(crate::ast::Name {
                sym,
                span: self.tspan(t),
            });
        }
        self.expected(&["identifier"]);
        None
    }

    // ------------------------------------------------------------ module ----------

    fn parse_module_body(&mut self) -> Vec<Stmt> {
        let mut body = Vec::new();
        while !self.at_eof() && !self.gave_up() {
            let t = self.tk();
            if t.nl && t.indent > 0 {
                if self.indent_taken_at != Some(self.pos) {
                    self.error(self.tspan(t), "unexpected token 'indent'");
                }
                // Parse the over-indented lines as if they were not indented.
                let ind = t.indent;
                let stmts = self.parse_block_stmts(ind, false);
                body.extend(stmts);
                continue;
            }
            self.parse_stmt_into(&mut body);
        }
        self.stray_dedent_at(self.pos);
        // the tree lives for the whole run: no growth slack (statements are ~200 bytes each)
        body.shrink_to_fit();
        body
    }

    /// Parses statements of a block whose lines are indented by `indent`. Stops at a dedent,
    /// at end of input, or (inside brackets) at a closing bracket.
    fn parse_block_stmts(&mut self, indent: u32, in_brackets: bool) -> Vec<Stmt> {
        let mut body = Vec::new();
        while !self.at_eof() && !self.gave_up() {
            let t = self.tk();
            if in_brackets && matches!(t.tok, Tok::RBrace | Tok::RBracket | Tok::RParen) {
                break;
            }
            if t.nl && t.indent < indent {
                break;
            }
            if t.nl && t.indent > indent {
                if self.indent_taken_at != Some(self.pos) {
                    self.error(self.tspan(t), "unexpected token 'indent'");
                }
                let nested = self.parse_block_stmts(t.indent, in_brackets);
                body.extend(nested);
                continue;
            }
            self.parse_stmt_into(&mut body);
        }
        body
    }

    /// Parses one statement (possibly a `;`-separated run) and checks the line ends after it.
    fn parse_stmt_into(&mut self, body: &mut Vec<Stmt>) {
        let start = self.pos;
        self.stray_dedent_at(start);
        if let Some(s) = self.parse_stmt() {
            body.push(s);
        }
        self.finish_stmt(start);
    }

    /// After a simple statement: the next token must start a new line (or close a bracket).
    fn finish_stmt(&mut self, start: usize) {
        let t = self.tk();
        let closer = matches!(t.tok, Tok::RBrace | Tok::RBracket | Tok::RParen);
        let at_end = t.nl || (!self.top_level() && closer);
        if t.tok == Tok::Eof || (at_end && self.pos != start) {
            return;
        }
        // Upstream's statements need no line break between them (`a = 1 b = 2`).
        if self.pos != start && self.starts_stmt() {
            return;
        }
        // Junk after a statement, or a token no statement starts with: report and skip it,
        // and let the caller parse on from the next token (upstream recovers token by token,
        // so `a, b = 1, 2` reports each comma).
        self.unexpected();
        self.bump();
    }

    /// Parses the block after a compound statement header (`if x:` etc.). `header_indent` is
    /// the indentation of the header line. Consumes the `:`.
    fn parse_suite(&mut self, header_indent: u32) -> Vec<Stmt> {
        if !self.expect_header_colon() {
            self.recover_to_line_end();
        }
        self.parse_suite_after_colon(header_indent)
    }

    fn parse_suite_after_colon(&mut self, header_indent: u32) -> Vec<Stmt> {
        let t = self.tk();
        let in_brackets = !self.top_level();
        if !t.nl && t.tok != Tok::Eof {
            // `if x: a = 1` on one line.
            let mut body = Vec::new();
            let start = self.pos;
            // (a sign starts an expression there, as upstream parses it, not a refused
            // statement)
            if matches!(t.tok, Tok::Plus | Tok::Minus | Tok::Tilde) {
                let e = self.parse_expr();
                let span = e.span;
                body.push(Stmt {
                    kind: StmtKind::Expr(e),
                    span,
                });
                return body;
            }
            // (upstream parses an expression there first: a token no statement starts with,
            // or a decorator's `@`, is a missing expression before it is an unexpected token)
            if (!self.starts_stmt() || t.tok == Tok::At)
                && !matches!(
                    t.tok,
                    Tok::RParen
                        | Tok::RBracket
                        | Tok::RBrace
                        | Tok::Star
                        | Tok::StarStar
                        | Tok::Plus
                        | Tok::Minus
                        | Tok::Tilde
                )
            {
                self.expected(expr::OPERAND_START);
            }
            if let Some(s) = self.parse_stmt() {
                body.push(s);
            }
            if self.pos == start {
                self.bump();
            }
            return body;
        }
        if t.tok == Tok::Eof || t.indent <= header_indent {
            self.expected_indent();
            return Vec::new();
        }
        if self.depth >= MAX_DEPTH {
            self.error(self.tspan(t), "blocks nested too deeply");
            self.skip_block(header_indent);
            return Vec::new();
        }
        self.depth += 1;
        let body = self.parse_block_stmts(t.indent, in_brackets);
        self.depth -= 1;
        body
    }

    /// Skips every line indented deeper than `indent`.
    fn skip_block(&mut self, indent: u32) {
        while !self.at_eof() {
            let t = self.tk();
            if t.nl && t.indent <= indent {
                break;
            }
            self.bump();
        }
    }

    /// Skips to the next token that starts a line (or a closer of the current bracket).
    fn recover_to_line_end(&mut self) {
        let mut depth = 0i32;
        while !self.at_eof() {
            let t = self.tk();
            if t.nl && depth <= 0 && self.nl_significant() {
                break;
            }
            match t.tok {
                Tok::LParen | Tok::LBracket | Tok::LBrace => depth += 1,
                Tok::RParen | Tok::RBracket | Tok::RBrace => {
                    if depth == 0 {
                        break;
                    }
                    depth -= 1;
                }
                _ => {}
            }
            self.bump();
        }
    }
}
