//! Decoding of string literal tokens: prefixes, quotes, escapes and `${...}` interpolation.

/// Where the content of a string token lies, relative to the token start.
pub(crate) struct StrShape {
    /// Bytes of prefix + opening quotes.
    pub open: usize,
    /// Bytes of closing quotes actually present (0 for an unterminated literal).
    pub close: usize,
}

/// Measures prefix/quotes of a string token's text.
pub(crate) fn shape(text: &str, raw: bool, triple: bool) -> StrShape {
    let prefix = usize::from(raw);
    let qlen = if triple { 3 } else { 1 };
    let mut open = (prefix + qlen).min(text.len());
    let q = text.as_bytes().get(prefix).copied().unwrap_or(b'"');
    // upstream drops the line break right after the opening `"""` (as a heredoc would)
    if triple {
        let rest = &text.as_bytes()[open..];
        if rest.starts_with(b"\r\n") && rest.len() >= 2 + qlen {
            open += 2;
        } else if rest.starts_with(b"\n") && rest.len() > qlen {
            open += 1;
        }
    }
    let body = &text.as_bytes()[open..];
    let close = if body.len() >= qlen && body[body.len() - qlen..].iter().all(|&b| b == q) {
        // The closing quote must not be escaped (an unterminated `"abc\"` ends with `\"`).
        let before = &body[..body.len() - qlen];
        let backslashes = before.iter().rev().take_while(|&&b| b == b'\\').count();
        if backslashes % 2 == 0 { qlen } else { 0 }
    } else {
        0
    };
    StrShape { open, close }
}

/// Appends the decoded form of `s` (escape sequences processed) to `out`.
pub(crate) fn unescape(s: &str, out: &mut String) {
    if !s.contains('\\') {
        out.push_str(s);
        return;
    }
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        match e {
            '\n' => {}
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
            }
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            v = v * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            }
            // a character by its Unicode name (`\N{BULLET}`, any case), as upstream's lexer
            'N' if chars.peek() == Some(&'{') => {
                let rest: String = chars.clone().skip(1).take_while(|&c| c != '}').collect();
                match unicode_char(&rest) {
                    Some(c) => {
                        out.push(c);
                        // the braces and the name
                        for _ in 0..rest.chars().count() + 2 {
                            chars.next();
                        }
                    }
                    None => {
                        out.push('\\');
                        out.push('N');
                    }
                }
            }
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut hex = String::new();
                for _ in 0..n {
                    match chars.peek() {
                        Some(c) if c.is_ascii_hexdigit() => {
                            hex.push(*c);
                            chars.next();
                        }
                        _ => break,
                    }
                }
                match u32::from_str_radix(&hex, 16).ok() {
                    // a surrogate is the replacement character, as upstream's
                    Some(v) if hex.len() == n => out.push(char::from_u32(v).unwrap_or('\u{fffd}')),
                    _ => {
                        out.push('\\');
                        out.push(e);
                        out.push_str(&hex);
                    }
                }
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
}

/// The character with Unicode name `name` in any case; aliases (`LF`, `NBSP`) are no names
/// to upstream's lexer.
fn unicode_char(name: &str) -> Option<char> {
    let c = unicode_names2::character(name)?;
    let canonical = unicode_names2::name(c)?.to_string();
    canonical.eq_ignore_ascii_case(name).then_some(c)
}

/// Whether `s` (a non-raw string's content) has an escape upstream's lexer rejects: `\x`,
/// `\u` and `\U` without their 2, 4 or 8 hex digits (or beyond U+10FFFF), `\N` without a
/// braced name of a Unicode character.
pub(crate) fn bad_escape(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let n = match b.get(i + 1) {
            Some(b'x') => 2,
            Some(b'u') => 4,
            Some(b'U') => 8,
            Some(b'N') => {
                let rest = &b[i + 2..];
                let name = rest
                    .strip_prefix(b"{")
                    .and_then(|r| r.iter().position(|&c| c == b'}').map(|end| &r[..end]));
                let known = name
                    .and_then(|n| std::str::from_utf8(n).ok())
                    .is_some_and(|n| unicode_char(n).is_some());
                if !known {
                    return true;
                }
                i += 2;
                continue;
            }
            _ => {
                i += 2;
                continue;
            }
        };
        let hex = b.get(i + 2..i + 2 + n);
        match hex {
            Some(h) if h.iter().all(u8::is_ascii_hexdigit) => {
                let v = std::str::from_utf8(h)
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok());
                if v.is_none_or(|v| v > 0x10ffff) {
                    return true;
                }
            }
            _ => return true,
        }
        i += 2 + n;
    }
    false
}

/// Appends the decoded form of a literal piece of an interpolated string: as [`unescape`],
/// then upstream drops the backslash before each literal `${` (`"\\${x}"` is `${x}`).
pub(crate) fn unescape_literal(s: &str, out: &mut String) {
    if !s.contains("${") {
        return unescape(s, out);
    }
    let mut t = String::with_capacity(s.len());
    unescape(s, &mut t);
    out.push_str(&t.replace("\\${", "${"));
}

/// A raw piece of string content: literal text or an interpolation.
pub(crate) enum Piece {
    /// Byte range (relative to content) of literal, still-escaped text.
    Lit(usize, usize),
    /// Byte range of the expression text and optional byte range of the format spec.
    Interp {
        expr: (usize, usize),
        spec: Option<(usize, usize)>,
    },
    /// `${` without a matching `}` starting at this byte.
    Unclosed(usize),
}

/// Splits string content into literal and `${...}` pieces. As upstream (which looks for `${`
/// in the unescaped text), backslashes right before `${` make it literal text, still wanting
/// its `}`; see [`unescape_literal`].
pub(crate) fn split_interpolations(s: &str) -> Vec<Piece> {
    let b = s.as_bytes();
    let mut pieces = Vec::new();
    let mut lit_start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => {
                let run = b[i..].iter().take_while(|&&c| c == b'\\').count();
                let j = i + run;
                if b.get(j) == Some(&b'$') && b.get(j + 1) == Some(&b'{') {
                    match find_close(b, j + 2) {
                        Some((end, _)) => i = end + 1,
                        None => {
                            pieces.push(Piece::Unclosed(lit_start));
                            return pieces;
                        }
                    }
                } else {
                    // an odd run's last backslash escapes the next character
                    i = j + run % 2;
                }
            }
            b'$' if b.get(i + 1) == Some(&b'{') => {
                let start = i + 2;
                match find_close(b, start) {
                    Some((end, colon)) => {
                        if lit_start < i {
                            pieces.push(Piece::Lit(lit_start, i));
                        }
                        let (expr, spec) = match colon {
                            Some(c) => ((start, c), Some((c + 1, end))),
                            None => ((start, end), None),
                        };
                        pieces.push(Piece::Interp { expr, spec });
                        i = end + 1;
                        lit_start = i;
                    }
                    None => {
                        if lit_start < i {
                            pieces.push(Piece::Lit(lit_start, i));
                        }
                        pieces.push(Piece::Unclosed(i));
                        return pieces;
                    }
                }
            }
            _ => i += 1,
        }
    }
    if lit_start < b.len() {
        pieces.push(Piece::Lit(lit_start, b.len()));
    }
    pieces
}

/// Finds the `}` closing an interpolation starting at `start`, and a top-level `:` that
/// introduces a format spec. Like upstream, the first `}` closes it, even inside a quoted
/// string (`"${'a}'}"` is an unterminated string there, and a dict literal cannot be
/// interpolated); a `:` inside quotes or brackets (an opened brace too) starts no spec.
fn find_close(b: &[u8], start: usize) -> Option<(usize, Option<usize>)> {
    let mut depth = 0i32;
    let mut colon = None;
    let mut quote: Option<u8> = None;
    let mut i = start;
    while i < b.len() {
        match (quote, b[i]) {
            (_, b'}') => return Some((i, colon)),
            (Some(_), b'\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, c @ (b'\'' | b'"')) => quote = Some(c),
            // (an opening brace, never closed here, still holds its `:`: `${{"a": 1}}` is
            // an unclosed dict to upstream, not a spec)
            (None, b'[' | b'(' | b'{') => depth += 1,
            (None, b')' | b']') => depth -= 1,
            (None, b':') if depth == 0 && colon.is_none() => colon = Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// How many leading blanks (spaces and tabs, one each) upstream strips from every line of a
/// triple-quoted string (kcl#2100, after escapes): the fewest a line with text has. Blank lines
/// do not count, except a last one that is not empty (the closing quotes' indentation).
/// `text` stands an interpolation in for a non-blank character.
fn dedent_margin(text: &str) -> usize {
    let last = text.rsplit('\n').next().unwrap_or("");
    let last_start = text.len() - last.len();
    let mut margin = usize::MAX;
    let mut at = 0;
    for line in text.split('\n') {
        let blanks = line
            .bytes()
            .take_while(|&b| b == b' ' || b == b'\t')
            .count();
        if blanks < line.len() || (at == last_start && !line.is_empty()) {
            margin = margin.min(blanks);
        }
        at += line.len() + 1;
    }
    if margin == usize::MAX { 0 } else { margin }
}

/// A triple-quoted string's pieces with the common indentation of its lines stripped, as
/// upstream does (see [`dedent_margin`]); `None` stands for an interpolation.
pub(crate) fn dedent_pieces(pieces: &[Option<&str>]) -> Vec<String> {
    let probe: String = pieces.iter().map(|p| p.unwrap_or("$")).collect();
    let margin = dedent_margin(&probe);
    let mut out = Vec::with_capacity(pieces.len());
    // blanks still to strip on the current line (none once it has text)
    let mut strip = margin;
    for p in pieces {
        let Some(text) = p else {
            strip = 0;
            out.push(String::new());
            continue;
        };
        let mut s = String::with_capacity(text.len());
        for c in text.chars() {
            if c == '\n' {
                strip = margin;
                s.push(c);
            } else if strip > 0 && (c == ' ' || c == '\t') {
                strip -= 1;
            } else {
                strip = 0;
                s.push(c);
            }
        }
        out.push(s);
    }
    out
}
