//! YAML string scalar style selection (plain, single-quoted, double-quoted, literal block),
//! following libyaml's scalar analysis and serde_yaml's "would this read back as a non-string"
//! rule.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrStyle {
    Plain,
    Single,
    Double,
    Literal,
}

/// Strings that read back as null, bool, int or float must be quoted.
fn ambiguous(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    if matches!(
        s,
        "~" | "null"
            | "Null"
            | "NULL"
            | "true"
            | "True"
            | "TRUE"
            | "false"
            | "False"
            | "FALSE"
            | "y"
            | "Y"
            | "yes"
            | "Yes"
            | "YES"
            | "n"
            | "N"
            | "no"
            | "No"
            | "NO"
            | "on"
            | "On"
            | "ON"
            | "off"
            | "Off"
            | "OFF"
    ) {
        return true;
    }
    let first = s.as_bytes()[0];
    if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) {
        // only numbers and `.inf`/`.nan` forms start otherwise; `NaN`, `inf` words below
        return is_nan_word(s);
    }
    if digits_but_not_number(s) {
        return true;
    }
    // YAML 1.1 ints with `_` separators and base-60 forms (`12:30`)
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    if body.starts_with(|c: char| c.is_ascii_digit())
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'_' || b == b':')
        && (body.contains('_') || body.contains(':'))
    {
        return true;
    }
    let unpos = match s.strip_prefix('+') {
        Some(u) if u.starts_with(['+', '-']) => return false,
        Some(u) => u,
        None => s,
    };
    let unsigned = unpos.strip_prefix('-').unwrap_or(unpos);
    for (p, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = unsigned.strip_prefix(p)
            && !rest.starts_with(['+', '-'])
            && i128::from_str_radix(rest, radix).is_ok()
        {
            return true;
        }
    }
    if !unsigned.starts_with(['+', '-'])
        && unsigned.bytes().all(|b| b.is_ascii_digit())
        && !unsigned.is_empty()
    {
        return true;
    }
    if matches!(unpos, ".inf" | ".Inf" | ".INF")
        || matches!(s, "-.inf" | "-.Inf" | "-.INF" | ".nan" | ".NaN" | ".NAN")
    {
        return true;
    }
    unpos.parse::<f64>().is_ok_and(|f| f.is_finite())
}

/// `nan` in any case is quoted by upstream's emitter (`inf` words are not).
fn is_nan_word(s: &str) -> bool {
    s.eq_ignore_ascii_case("nan")
}

fn digits_but_not_number(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    s.len() > 1 && s.starts_with('0') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

/// libyaml's printable characters, less NEL, which upstream escapes (the line and paragraph
/// separators it writes as they are).
fn printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || (0xA0..=0xD7FF).contains(&u)
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
        || (0x10000..=0x10FFFF).contains(&u)
}

/// Whether `s` holds a line break (see [`is_break`]); most keys are ASCII without one, so the
/// bytes are scanned first.
pub(super) fn has_break(s: &str) -> bool {
    s.bytes().any(|b| b == b'\n' || b == b'\r' || b >= 0xC2) && s.chars().any(is_break)
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blankz(c: Option<char>) -> bool {
    match c {
        None => true,
        Some(c) => c == ' ' || c == '\t' || is_break(c) || c == '\0',
    }
}

struct Analysis {
    flow_plain: bool,
    block_plain: bool,
    single_ok: bool,
    block_ok: bool,
}

fn analyze(s: &str) -> Analysis {
    if s.is_empty() {
        return Analysis {
            flow_plain: false,
            block_plain: true,
            single_ok: true,
            block_ok: false,
        };
    }
    let (mut flow_ind, mut block_ind) = (s.starts_with("---") || s.starts_with("..."), false);
    if flow_ind {
        block_ind = true;
    }
    let (mut line_breaks, mut special) = (false, false);
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut prev_space, mut prev_break) = (false, false);
    let mut preceded_ws = true;
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len();
    for i in 0..n {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let followed_ws = is_blankz(next);
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => {
                    flow_ind = true;
                    block_ind = true;
                }
                '?' | ':' => {
                    flow_ind = true;
                    if followed_ws {
                        block_ind = true;
                    }
                }
                '-' if followed_ws => {
                    flow_ind = true;
                    block_ind = true;
                }
                _ => {}
            }
        } else {
            match c {
                ',' | '?' | '[' | ']' | '{' | '}' => flow_ind = true,
                ':' => {
                    flow_ind = true;
                    if followed_ws {
                        block_ind = true;
                    }
                }
                '#' if preceded_ws => {
                    flow_ind = true;
                    block_ind = true;
                }
                _ => {}
            }
        }
        if !printable(c) {
            special = true;
        }
        if is_break(c) {
            line_breaks = true;
        }
        if c == ' ' {
            if i == 0 {
                leading_space = true;
            }
            if i == n - 1 {
                trailing_space = true;
            }
            if prev_break {
                break_space = true;
            }
            prev_space = true;
            prev_break = false;
        } else if is_break(c) {
            if i == 0 {
                leading_break = true;
            }
            if i == n - 1 {
                trailing_break = true;
            }
            if prev_space {
                space_break = true;
            }
            prev_break = true;
            prev_space = false;
        } else {
            prev_space = false;
            prev_break = false;
        }
        preceded_ws = is_blankz(Some(c));
    }
    let mut a = Analysis {
        flow_plain: true,
        block_plain: true,
        single_ok: true,
        block_ok: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.flow_plain = false;
        a.block_plain = false;
    }
    if trailing_space {
        a.block_ok = false;
    }
    if break_space {
        a.flow_plain = false;
        a.block_plain = false;
        a.single_ok = false;
    }
    if space_break || special {
        a = Analysis {
            flow_plain: false,
            block_plain: false,
            single_ok: false,
            block_ok: false,
        };
    }
    if line_breaks {
        a.flow_plain = false;
        a.block_plain = false;
    }
    if flow_ind {
        a.flow_plain = false;
    }
    if block_ind {
        a.block_plain = false;
    }
    a
}

/// Quick accept for the common case: identifier-like text that cannot be mistaken for anything.
fn obviously_plain(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 5
        && b[0].is_ascii_alphabetic()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'/' | b'.'))
        && !matches!(b[0], b'i' | b'I' | b'n' | b'N')
}

/// The style serde_yaml + libyaml pick for a string in block context (`key` = simple-key position).
pub fn str_style(s: &str, key: bool) -> StrStyle {
    if obviously_plain(s) {
        return StrStyle::Plain;
    }
    let requested = if s.contains('\n') {
        StrStyle::Literal
    } else if ambiguous(s) {
        StrStyle::Single
    } else {
        StrStyle::Plain
    };
    let a = analyze(s);
    let mut style = requested;
    if style == StrStyle::Plain && (!a.block_plain || (s.is_empty() && key)) {
        style = StrStyle::Single;
    }
    if style == StrStyle::Single && !a.single_ok {
        style = StrStyle::Double;
    }
    if style == StrStyle::Literal && (!a.block_ok || key) {
        style = StrStyle::Double;
    }
    style
}

/// Write string `s`; `ind` is the indentation of the enclosing node (block scalars go 2 deeper).
pub fn write_str(s: &str, ind: usize, key: bool, out: &mut String) {
    write_str_opts(s, ind, key, false, out)
}

/// [`write_str`], optionally quoting strings that start with a digit.
pub fn write_str_opts(s: &str, ind: usize, key: bool, quote_digit: bool, out: &mut String) {
    let mut style = str_style(s, key);
    let _ = quote_digit;
    // upstream quotes anything that starts like a number (`'100m'`, `'-text=apple'`, `'1a'`)
    if style == StrStyle::Plain
        && s.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.'))
    {
        style = StrStyle::Single;
    }
    match style {
        StrStyle::Plain => out.push_str(s),
        StrStyle::Single => {
            // a line or paragraph separator is a line break to libyaml: the text after it
            // (or the closing quote) is indented as a continuation line
            let mut broke = false;
            out.push('\'');
            if s.is_ascii() && !s.contains('\'') {
                out.push_str(s);
                out.push('\'');
                return;
            }
            for c in s.chars() {
                if matches!(c, '\u{2028}' | '\u{2029}') {
                    out.push(c);
                    broke = true;
                    continue;
                }
                if std::mem::take(&mut broke) {
                    out.extend(std::iter::repeat_n(' ', ind));
                }
                if c == '\'' {
                    out.push('\'');
                }
                out.push(c);
            }
            if broke {
                out.extend(std::iter::repeat_n(' ', ind));
            }
            out.push('\'');
        }
        StrStyle::Double => write_double(s, out),
        StrStyle::Literal => write_literal(s, ind, out),
    }
}

fn write_double(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '\0' => out.push_str("\\0"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{85}' => out.push_str("\\N"),
            '\u{a0}' => out.push_str("\\_"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if !printable(c) || c == '\u{feff}' => {
                let u = c as u32;
                if u <= 0xFF {
                    out.push_str(&format!("\\x{u:02X}"));
                } else if u <= 0xFFFF {
                    out.push_str(&format!("\\u{u:04X}"));
                } else {
                    out.push_str(&format!("\\U{u:08X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_literal(s: &str, ind: usize, out: &mut String) {
    out.push('|');
    let first = s.chars().next();
    if first.is_some_and(|c| c == ' ' || is_break(c)) {
        out.push('2');
    }
    // libyaml's chomping: strip without a final break, keep when the string is one break or
    // ends in two
    let mut rev = s.chars().rev();
    let chomp = match (rev.next(), rev.next()) {
        (Some(c), _) if !is_break(c) => "-",
        (Some(_), None) => "+",
        (Some(_), Some(p)) if is_break(p) => "+",
        _ => "",
    };
    out.push_str(chomp);
    // (keep-chomping's trailing empty lines are in `body`); a line or paragraph separator
    // breaks the line too: libyaml indents what follows any break, and nothing after one
    let body = s.strip_suffix('\n').unwrap_or(s);
    out.push('\n');
    let mut line = |piece: &str| {
        // the piece's text, without the break that ends it
        let text = piece
            .strip_suffix(['\n', '\u{2028}', '\u{2029}'])
            .unwrap_or(piece);
        if !text.is_empty() {
            out.extend(std::iter::repeat_n(' ', ind));
        }
        out.push_str(piece);
    };
    if body.is_ascii() {
        body.split_inclusive('\n').for_each(&mut line);
    } else {
        body.split_inclusive(['\n', '\u{2028}', '\u{2029}'])
            .for_each(&mut line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(s: &str) -> String {
        let mut out = String::from("k: ");
        write_str(s, 2, false, &mut out);
        out.trim_end_matches('\n').to_string()
    }

    /// Expected renderings recorded from upstream KCL (`kcl_lib`).
    #[test]
    fn styles_match_upstream() {
        let cases = [
            ("abc", "k: abc\n"),
            ("123", "k: '123'\n"),
            ("true", "k: 'true'\n"),
            ("yes", "k: 'yes'\n"),
            ("on", "k: 'on'\n"),
            ("n", "k: 'n'\n"),
            ("y", "k: 'y'\n"),
            ("NaN", "k: 'NaN'\n"),
            ("nan", "k: 'nan'\n"),
            ("nAn", "k: 'nAn'\n"),
            ("inf", "k: inf\n"),
            (".inf", "k: '.inf'\n"),
            ("1e5", "k: '1e5'\n"),
            ("1_000", "k: '1_000'\n"),
            ("0o17", "k: '0o17'\n"),
            ("+1", "k: '+1'\n"),
            (".5", "k: '.5'\n"),
            ("0x1f", "k: '0x1f'\n"),
            ("0123", "k: '0123'\n"),
            ("1.", "k: '1.'\n"),
            ("12:30", "k: '12:30'\n"),
            ("---", "k: '---'\n"),
            ("@a", "k: '@a'\n"),
            ("%a", "k: '%a'\n"),
            ("`a", "k: '`a'\n"),
            ("a, b", "k: a, b\n"),
            ("[a]", "k: '[a]'\n"),
            ("{a}", "k: '{a}'\n"),
            ("!a", "k: '!a'\n"),
            ("&a", "k: '&a'\n"),
            ("*a", "k: '*a'\n"),
            ("|a", "k: '|a'\n"),
            (">a", "k: '>a'\n"),
            ("'a", "k: '''a'\n"),
            ("\"a", "k: '\"a'\n"),
            ("quote'q\"d", "k: quote'q\"d\n"),
            ("a\\b", "k: a\\b\n"),
            ("a: b", "k: 'a: b'\n"),
            ("  lead", "k: '  lead'\n"),
            (" trailing ", "k: ' trailing '\n"),
            ("-", "k: '-'\n"),
            ("- a", "k: '- a'\n"),
            ("a #b", "k: 'a #b'\n"),
            ("a#b", "k: a#b\n"),
            ("?", "k: '?'\n"),
            (":", "k: ':'\n"),
            ("a:", "k: 'a:'\n"),
            ("", "k: ''\n"),
            ("~", "k: '~'\n"),
            ("null", "k: 'null'\n"),
            ("tab\there", "k: \"tab\\there\"\n"),
            ("\ta", "k: \"\\ta\"\n"),
            ("a\u{85}b", "k: \"a\\Nb\"\n"),
            ("\u{a0}x", "k: \u{a0}x\n"),
            ("\u{1}", "k: \"\\x01\"\n"),
            ("café ñ", "k: café ñ\n"),
            ("multi\nline", "k: |-\n  multi\n  line\n"),
            ("a\n", "k: |\n  a\n"),
            ("line1\nline2\n\n", "k: |+\n  line1\n  line2\n\n"),
            ("\n", "k: |2+\n"),
            ("a\n b", "k: |-\n  a\n   b\n"),
            ("  \n  ", "k: \"  \\n  \"\n"),
            ("a  \nb", "k: \"a  \\nb\"\n"),
            ("x: y x: y ", "k: 'x: y x: y '\n"),
            ("word word end", "k: word word end\n"),
            ("http://example.com/a?b=c", "k: http://example.com/a?b=c\n"),
            ("10Gi", "k: '10Gi'\n"),
            ("1Ki", "k: '1Ki'\n"),
            ("-1", "k: '-1'\n"),
            ("-0.5", "k: '-0.5'\n"),
            ("1e-3", "k: '1e-3'\n"),
            ("3.14e5", "k: '3.14e5'\n"),
            ("12e1", "k: '12e1'\n"),
            ("True", "k: 'True'\n"),
            ("FALSE", "k: 'FALSE'\n"),
            ("Off", "k: 'Off'\n"),
            ("a\r\nb", "k: \"a\\r\\nb\"\n"),
            ("é", "k: é\n"),
            ("#x", "k: '#x'\n"),
            ("a,b", "k: a,b\n"),
            ("1-2", "k: '1-2'\n"),
            ("v1.2.3", "k: v1.2.3\n"),
            ("nginx:1.7.9", "k: nginx:1.7.9\n"),
            ("0", "k: '0'\n"),
            ("00", "k: '00'\n"),
            ("-0", "k: '-0'\n"),
            ("0x", "k: '0x'\n"),
            ("0b101", "k: '0b101'\n"),
            ("1 2", "k: '1 2'\n"),
        ];
        for (s, want) in cases {
            assert_eq!(ours(s), want.trim_end_matches('\n'), "string {s:?}");
        }
    }
}
