//! `str` methods (`"a".upper()`, `format`, `split`, ...).

use std::rc::Rc;

use super::{arg, str_arg, text_arg};
use crate::value::{self, Func, Host, RtError, RtResult, Str, Value};

/// Every `str` method name (the checker knows no other attributes of a string).
pub const METHODS: &[&str] = &[
    "capitalize",
    "count",
    "endswith",
    "find",
    "format",
    "index",
    "isalnum",
    "isalpha",
    "isdigit",
    "islower",
    "isspace",
    "istitle",
    "isupper",
    "join",
    "lower",
    "lstrip",
    "replace",
    "removeprefix",
    "removesuffix",
    "rfind",
    "rindex",
    "rsplit",
    "rstrip",
    "split",
    "splitlines",
    "startswith",
    "strip",
    "title",
    "upper",
    "chars",
];

/// A bound string method, if `name` is one.
pub fn str_method(recv: &Value, name: &str) -> Option<Value> {
    METHODS.contains(&name).then(|| {
        Value::Func(Rc::new(Func::Method {
            name: Str::from(name),
            recv: recv.clone(),
        }))
    })
}

fn opt_str(args: &[Value], kw: &[(Str, Value)], i: usize, name: &str) -> Option<String> {
    arg(args, kw, i, name)
        .filter(|v| !v.is_none_or_undefined())
        .map(value::to_str)
}

/// The substring argument of `count`, `find`, `startswith`...: another value is upstream's
/// "Invalid str object" for the method.
fn sub_arg(args: &[Value], kw: &[(Str, Value)], name: &str, method: &str) -> RtResult<Str> {
    match arg(args, kw, 0, name) {
        Some(Value::Str(s)) => Ok(s.clone()),
        Some(_) => Err(RtError::eval(format!("Invalid str object in str_{method}"))),
        None => str_arg(args, kw, 0, name, method),
    }
}

/// Whitespace for `split()`/`rsplit()` without a separator: upstream's ASCII set and `\x0b`.
fn split_space(c: char) -> bool {
    c.is_ascii_whitespace() || c == '\x0b'
}

/// `s.split(None, max)` as upstream computes it: runs of whitespace separate words; after
/// `max` words the rest is one item as it stands (`max` < 0: no limit).
fn split_ascii_whitespace(s: &str, max: i64) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut last, mut count) = (0, max);
    for (at, _) in s.match_indices(split_space) {
        if last == at {
            last += 1;
            continue;
        }
        if count == 0 {
            break;
        }
        out.push(&s[last..at]);
        last = at + 1;
        count -= 1;
    }
    if last != s.len() {
        out.push(&s[last..]);
    }
    out
}

/// `s.rsplit(None, max)`: words from the end, the rest one item as it stands.
fn rsplit_ascii_whitespace(s: &str, max: i64) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut hay, mut count) = (s, max);
    while let Some(at) = hay.rfind(split_space) {
        if at + 1 != hay.len() {
            if count == 0 {
                break;
            }
            out.push(&hay[at + 1..]);
            count -= 1;
        }
        hay = &hay[..at];
    }
    if !hay.is_empty() {
        out.push(hay);
    }
    out.reverse();
    out
}

/// The `start`/`end` arguments of `count`, `find`, `startswith`... as upstream takes them:
/// byte offsets (negative ones from the end, clamped), `None` when the window is empty the
/// wrong way round; an offset inside a character is upstream's failed unwrap.
fn byte_window(s: &str, args: &[Value], start_i: usize) -> RtResult<Option<(usize, usize)>> {
    let n = s.len() as i64;
    let norm = |x: i64| (if x < 0 { x + n } else { x }).clamp(0, n) as usize;
    let start_arg = args.get(start_i).and_then(|v| v.as_int());
    // a start past the end finds nothing, not even the empty string (Python's rule)
    if start_arg.is_some_and(|x| x > n) {
        return Ok(None);
    }
    let start = start_arg.map(norm).unwrap_or(0);
    let end = args
        .get(start_i + 1)
        .and_then(|v| v.as_int())
        .map(norm)
        .unwrap_or(n as usize);
    if start > end {
        return Ok(None);
    }
    match s.get(start..end) {
        Some(_) => Ok(Some((start, end))),
        None => Err(RtError::eval("called `Option::unwrap()` on a `None` value")),
    }
}

/// Call string method `name` on `recv`.
pub fn call_method(
    _h: &mut dyn Host,
    name: &str,
    recv: &Value,
    args: &[Value],
    kw: &[(Str, Value)],
) -> RtResult<Value> {
    let Value::Str(s) = recv else {
        return Err(RtError::ty(format!(
            "'{}' object has no attribute '{name}'",
            recv.type_name()
        )));
    };
    let s: &str = s;
    Ok(match name {
        "upper" => Value::from(s.to_uppercase()),
        "lower" => Value::from(s.to_lowercase()),
        "capitalize" => {
            let mut c = s.chars();
            Value::from(match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + &c.as_str().to_lowercase(),
                None => String::new(),
            })
        }
        // upstream's (Python's) rule: a lowercase letter after no cased one is titlecased,
        // an uppercase or titlecase letter after a cased one is lowercased, and any other
        // character (digits, CJK) ends the word
        "title" => {
            let mut out = String::new();
            let mut prev_cased = false;
            for ch in s.chars() {
                if ch.is_lowercase() {
                    if prev_cased {
                        out.push(ch);
                    } else {
                        push_titlecase(ch, &mut out);
                    }
                    prev_cased = true;
                } else if ch.is_uppercase() || is_titlecase_letter(ch) {
                    if prev_cased {
                        out.extend(ch.to_lowercase());
                    } else {
                        out.push(ch);
                    }
                    prev_cased = true;
                } else {
                    out.push(ch);
                    prev_cased = false;
                }
            }
            Value::from(out)
        }
        "count" => {
            let sub = sub_arg(args, kw, "sub", "count")?;
            let Some((a, b)) = byte_window(s, args, 1)? else {
                return Ok(Value::Int(0));
            };
            let hay = &s[a..b];
            Value::Int(if sub.is_empty() {
                hay.chars().count() as i64 + 1
            } else {
                hay.matches(&*sub).count() as i64
            })
        }
        "endswith" => {
            let sub = sub_arg(args, kw, "suffix", "endswith")?;
            let w = byte_window(s, args, 1)?;
            Value::Bool(w.is_some_and(|(a, b)| s[a..b].ends_with(&*sub)))
        }
        "startswith" => {
            let sub = sub_arg(args, kw, "prefix", "startswith")?;
            let w = byte_window(s, args, 1)?;
            Value::Bool(w.is_some_and(|(a, b)| s[a..b].starts_with(&*sub)))
        }
        "find" | "index" | "rfind" | "rindex" => {
            let sub = sub_arg(args, kw, "sub", name)?;
            let window = byte_window(s, args, 1)?;
            let ba = window.map_or(0, |(a, _)| a);
            let found = match window {
                None => None,
                Some((a, b)) if name.starts_with('r') => s[a..b].rfind(&*sub),
                Some((a, b)) => s[a..b].find(&*sub),
            };
            match found {
                // upstream's offsets are in bytes (`"ünïx".find("x")` is 5)
                Some(i) => Value::Int((ba + i) as i64),
                None if name.ends_with("index") => {
                    return Err(RtError::eval("substring not found"));
                }
                None => Value::Int(-1),
            }
        }
        "isalnum" => Value::Bool(!s.is_empty() && s.chars().all(char::is_alphanumeric)),
        "isalpha" => Value::Bool(!s.is_empty() && s.chars().all(char::is_alphabetic)),
        // upstream's digits: ASCII ones and the superscripts ⁰¹²³⁴-⁹ (compared as 16-bit
        // code units, as it does)
        "isdigit" => Value::Bool(
            !s.is_empty()
                && s.chars().all(|c| {
                    c.is_ascii_digit()
                        || matches!(
                            c as u32 as u16,
                            0x2070 | 0x00B9 | 0x00B2 | 0x00B3 | 0x2074..=0x2079
                        )
                }),
        ),
        "islower" => {
            Value::Bool(s.chars().any(char::is_lowercase) && !s.chars().any(char::is_uppercase))
        }
        "isupper" => {
            Value::Bool(s.chars().any(char::is_uppercase) && !s.chars().any(char::is_lowercase))
        }
        "isspace" => Value::Bool(!s.is_empty() && s.chars().all(char::is_whitespace)),
        "istitle" => {
            let mut prev_alpha = false;
            let mut ok = false;
            let mut bad = false;
            for ch in s.chars() {
                if ch.is_uppercase() || is_titlecase_letter(ch) {
                    if prev_alpha {
                        bad = true;
                    }
                    ok = true;
                    prev_alpha = true;
                } else if ch.is_lowercase() {
                    if !prev_alpha {
                        bad = true;
                    }
                    prev_alpha = true;
                } else {
                    prev_alpha = false;
                }
            }
            Value::Bool(ok && !bad)
        }
        "join" => {
            let it = super::req(args, kw, 0, "iter", "join")?;
            // a list is joined in place: no copy of it, no string per item
            let owned;
            let items: &[Value] = match it {
                Value::List(l) => l,
                // upstream iterates nothing else (None included) and says so at run time
                Value::None | Value::Undefined => {
                    return Err(RtError::eval(format!(
                        "'{}' object is not iterable",
                        it.type_name()
                    )));
                }
                other => {
                    owned = other.iter_items().map_err(|e| RtError::eval(e.msg))?;
                    &owned
                }
            };
            // upstream joins any item by its str() (`"-".join(["a", 1])` is "a-1")
            let mut out = String::new();
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(s);
                }
                match v {
                    Value::Str(x) => out.push_str(x),
                    other => out.push_str(&crate::value::to_str(other)),
                }
            }
            Value::from(out)
        }
        "strip" | "lstrip" | "rstrip" => {
            let chars = opt_str(args, kw, 0, "chars");
            let f = |c: char| match &chars {
                Some(cs) => cs.contains(c),
                None => c.is_whitespace(),
            };
            Value::from(match name {
                "strip" => s.trim_matches(f),
                "lstrip" => s.trim_start_matches(f),
                _ => s.trim_end_matches(f),
            })
        }
        "replace" => {
            let old = text_arg(args, kw, 0, "old", "replace")?;
            let new = text_arg(args, kw, 1, "new", "replace")?;
            match arg(args, kw, 2, "count").and_then(|v| v.as_int()) {
                Some(n) if n >= 0 => Value::from(s.replacen(&*old, &new, n as usize)),
                _ => Value::from(s.replace(&*old, &new)),
            }
        }
        "removeprefix" => {
            let p = text_arg(args, kw, 0, "prefix", name)?;
            Value::from(s.strip_prefix(&*p).unwrap_or(s))
        }
        "removesuffix" => {
            let p = text_arg(args, kw, 0, "suffix", name)?;
            Value::from(s.strip_suffix(&*p).unwrap_or(s))
        }
        "split" | "rsplit" => {
            // upstream's: a separator argument that is no string splits on "" (Rust's
            // split of the empty pattern); no separator splits on ASCII whitespace (and \x0b)
            let sep = match arg(args, kw, 0, "sep") {
                None | Some(Value::None | Value::Undefined) => None,
                Some(Value::Str(p)) => Some(p.to_string()),
                Some(_) => Some(String::new()),
            };
            let max = arg(args, kw, 1, "maxsplit")
                .filter(|v| !v.is_none_or_undefined())
                .and_then(|v| v.as_int())
                .unwrap_or(-1);
            let parts: Vec<&str> = match &sep {
                None if name == "split" => split_ascii_whitespace(s, max),
                None => rsplit_ascii_whitespace(s, max),
                Some(sep) if max < 0 && name == "split" => s.split(sep.as_str()).collect(),
                Some(sep) if max < 0 => {
                    let mut v: Vec<&str> = s.rsplit(sep.as_str()).collect();
                    v.reverse();
                    v
                }
                Some(sep) if name == "split" => s.splitn(max as usize + 1, sep.as_str()).collect(),
                Some(sep) => {
                    let mut v: Vec<&str> = s.rsplitn(max as usize + 1, sep.as_str()).collect();
                    v.reverse();
                    v
                }
            };
            Value::from(parts.into_iter().map(Value::str).collect::<Vec<_>>())
        }
        "splitlines" => {
            let keep = arg(args, kw, 0, "keepends").is_some_and(|v| v.truthy());
            let mut out = Vec::new();
            let mut cur = String::new();
            let mut it = s.chars().peekable();
            while let Some(c) = it.next() {
                if c == '\n' || c == '\r' {
                    let mut end = c.to_string();
                    if c == '\r' && it.peek() == Some(&'\n') {
                        it.next();
                        end.push('\n');
                    }
                    if keep {
                        cur.push_str(&end);
                    }
                    out.push(Value::from(std::mem::take(&mut cur)));
                } else {
                    cur.push(c);
                }
            }
            if !cur.is_empty() {
                out.push(Value::from(cur));
            }
            Value::from(out)
        }
        "format" => Value::from(super::pyfmt::format(s, args, kw)?),
        "chars" => Value::from(
            s.chars()
                .map(|c| Value::from(c.to_string()))
                .collect::<Vec<_>>(),
        ),
        _ => return Err(RtError::ty(format!("str object has no attribute '{name}'"))),
    })
}

/// Python-style `"{} {name} {0}".format(...)`, with `{{`/`}}` escapes and simple specs.
/// Unicode's titlecase letters (category Lt): a word may start with one (`ǅungla`).
fn is_titlecase_letter(ch: char) -> bool {
    matches!(
        ch,
        '\u{01C5}'
            | '\u{01C8}'
            | '\u{01CB}'
            | '\u{01F2}'
            | '\u{1F88}'..='\u{1F8F}'
            | '\u{1F98}'..='\u{1F9F}'
            | '\u{1FA8}'..='\u{1FAF}'
            | '\u{1FBC}'
            | '\u{1FCC}'
            | '\u{1FFC}'
    )
}

/// A word's first letter in titlecase, as upstream's `title()` (Unicode's titlecase
/// mapping, which differs from the uppercase one for digraphs, ligatures, Greek letters with
/// ypogegrammeni, `ß` and Georgian letters); everything else uppercased.
fn push_titlecase(ch: char, out: &mut String) {
    let mapped: &str = match ch {
        '\u{01C4}'..='\u{01C6}' => "\u{01C5}",
        '\u{01C7}'..='\u{01C9}' => "\u{01C8}",
        '\u{01CA}'..='\u{01CC}' => "\u{01CB}",
        '\u{01F1}'..='\u{01F3}' => "\u{01F2}",
        '\u{00DF}' => "Ss",
        '\u{FB00}' => "Ff",
        '\u{FB01}' => "Fi",
        '\u{FB02}' => "Fl",
        '\u{FB03}' => "Ffi",
        '\u{FB04}' => "Ffl",
        '\u{FB05}' | '\u{FB06}' => "St",
        '\u{0587}' => "\u{0535}\u{0582}",
        '\u{FB13}' => "\u{0544}\u{0576}",
        '\u{FB14}' => "\u{0544}\u{0565}",
        '\u{FB15}' => "\u{0544}\u{056B}",
        '\u{FB16}' => "\u{054E}\u{0576}",
        '\u{FB17}' => "\u{0544}\u{056D}",
        '\u{1FB2}' => "\u{1FBA}\u{0345}",
        '\u{1FB4}' => "\u{0386}\u{0345}",
        '\u{1FC2}' => "\u{1FCA}\u{0345}",
        '\u{1FC4}' => "\u{0389}\u{0345}",
        '\u{1FF2}' => "\u{1FFA}\u{0345}",
        '\u{1FF4}' => "\u{038F}\u{0345}",
        '\u{1FB7}' => "\u{0391}\u{0342}\u{0345}",
        '\u{1FC7}' => "\u{0397}\u{0342}\u{0345}",
        '\u{1FF7}' => "\u{03A9}\u{0342}\u{0345}",
        // (the titlecase letters are their own titlecase; a letter with ypogegrammeni
        // takes the titlecase letter, not capital plus iota)
        c if is_titlecase_letter(c) => {
            out.push(c);
            return;
        }
        c @ ('\u{1F80}'..='\u{1F87}' | '\u{1F90}'..='\u{1F97}' | '\u{1FA0}'..='\u{1FA7}') => {
            out.extend(char::from_u32(c as u32 + 8));
            return;
        }
        '\u{1FB3}' => "\u{1FBC}",
        '\u{1FC3}' => "\u{1FCC}",
        '\u{1FF3}' => "\u{1FFC}",
        // Georgian letters have no titlecase form (their uppercase is Mtavruli)
        c @ ('\u{10D0}'..='\u{10FA}' | '\u{10FD}'..='\u{10FF}') => {
            out.push(c);
            return;
        }
        c => {
            out.extend(c.to_uppercase());
            return;
        }
    };
    out.push_str(mapped);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::tests::NoHost;

    fn m(s: &str, name: &str, args: Vec<Value>) -> Value {
        call_method(&mut NoHost(String::new()), name, &Value::str(s), &args, &[]).unwrap()
    }

    #[test]
    fn string_methods() {
        assert_eq!(m("abc", "upper", vec![]), Value::str("ABC"));
        assert_eq!(m("hello world", "title", vec![]), Value::str("Hello World"));
        assert_eq!(
            m("a,b,c", "split", vec![Value::str(",")]),
            Value::from(vec![Value::str("a"), Value::str("b"), Value::str("c")])
        );
        assert_eq!(
            m("a b  c", "split", vec![]),
            Value::from(vec![Value::str("a"), Value::str("b"), Value::str("c")])
        );
        assert_eq!(
            m(
                "-",
                "join",
                vec![Value::from(vec![Value::str("a"), Value::str("b")])]
            ),
            Value::str("a-b")
        );
        assert_eq!(
            m("{} and {}", "format", vec![Value::Int(1), Value::str("x")]),
            Value::str("1 and x")
        );
        assert_eq!(m("  x ", "strip", vec![]), Value::str("x"));
        assert_eq!(m("hello", "find", vec![Value::str("l")]), Value::Int(2));
        assert_eq!(m("hello", "rfind", vec![Value::str("l")]), Value::Int(3));
        assert_eq!(
            m(
                "aaa",
                "replace",
                vec![Value::str("a"), Value::str("b"), Value::Int(2)]
            ),
            Value::str("bba")
        );
    }
}
