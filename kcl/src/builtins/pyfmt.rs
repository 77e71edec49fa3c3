//! `str.format`: upstream's port of Python's format mini-language, with its quirks kept
//! (users' golden files hold its output): only ints and floats take a format spec (a string,
//! a bool or a list prints as `str()` whatever the spec says), a float without a type prints
//! in exponent form outside 1e-5..1e16, an int formatted as a float is aligned twice, and
//! every error is an `EvaluationError` with upstream's words.

use crate::value::{self, RtError, RtResult, Str, Value};

/// `template.format(*args, **kw)`.
pub fn format(template: &str, args: &[Value], kw: &[(Str, Value)]) -> RtResult<String> {
    let parts = parse_template(template).ok_or_else(|| RtError::eval("format error"))?;
    let mut out = String::new();
    let mut auto = 0usize;
    for p in parts {
        match p {
            Part::Lit(s) => out.push_str(&s),
            Part::Field { name, spec } => {
                let v = lookup(&name, args, kw, &mut auto)?;
                out.push_str(&with_spec(&v, &spec)?);
            }
        }
    }
    Ok(out)
}

enum Part {
    Lit(String),
    Field { name: String, spec: String },
}

/// Literal text (`{{` and `}}` escaped) and `{name!conv:spec}` fields; `None` on an
/// unmatched brace. A spec may hold one level of nested braces, kept as text.
fn parse_template(t: &str) -> Option<Vec<Part>> {
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut rest = t;
    while let Some(c) = rest.chars().next() {
        let next = rest[c.len_utf8()..].chars().next();
        if (c == '{' || c == '}') && next == Some(c) {
            lit.push(c);
            rest = &rest[2..];
            continue;
        }
        if c == '}' {
            return None;
        }
        if c != '{' {
            lit.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(std::mem::take(&mut lit)));
        }
        let mut inner = String::new();
        let mut nested = false;
        let mut end = None;
        for (k, d) in rest.chars().enumerate().skip(1) {
            match d {
                '{' if nested => return None,
                '{' => nested = true,
                '}' if nested => nested = false,
                '}' => {
                    end = Some(k);
                    break;
                }
                _ => {}
            }
            inner.push(d);
        }
        let (head, spec) = match inner.split_once(':') {
            Some((h, s)) => (h, s.to_string()),
            None => (inner.as_str(), String::new()),
        };
        // a conversion (`!r`, `!s`) changes nothing upstream
        let name = head.split_once('!').map_or(head, |(n, _)| n).to_string();
        parts.push(Part::Field { name, spec });
        // upstream resumes at the closing brace's character index taken as a byte offset:
        // a field holding a multi-byte character shifts the rest (often into an error)
        rest = rest.get(end? + 1..)?;
    }
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    Some(parts)
}

/// The argument a field names: `{}`, `{0}`, `{name}`, then `.attr` and `[index]` parts.
fn lookup(name: &str, args: &[Value], kw: &[(Str, Value)], auto: &mut usize) -> RtResult<Value> {
    let first_end = name.find(['.', '[']).unwrap_or(name.len());
    let (first, mut rest) = name.split_at(first_end);
    let mut v = if first.is_empty() {
        *auto += 1;
        args.get(*auto - 1)
            .cloned()
            .ok_or_else(|| RtError::eval("argument tuple index out of range"))?
    } else if let Ok(i) = first.parse::<usize>() {
        if *auto != 0 {
            return Err(RtError::eval(
                "cannot switch from automatic field numbering to manual field specification",
            ));
        }
        args.get(i)
            .cloned()
            .ok_or_else(|| RtError::eval("argument tuple index out of range"))?
    } else {
        kw.iter()
            .find(|(k, _)| **k == *first)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| RtError::eval(format!("keyword argument '{first}' not found")))?
    };
    // a part upstream cannot read panics there; its message is Rust's unwrap
    let bad_part = || RtError::eval("called `Option::unwrap()` on a `None` value");
    while let Some(c) = rest.chars().next() {
        let key = if c == '.' {
            let end = rest[1..].find(['.', '[']).map_or(rest.len(), |e| e + 1);
            let attr = &rest[1..end];
            rest = &rest[end..];
            if attr.is_empty() {
                return Err(RtError::eval(
                    "called `Result::unwrap()` on an `Err` value: EmptyAttribute",
                ));
            }
            Err(attr.to_string())
        } else if c == '[' {
            let Some(close) = rest.find(']') else {
                return Err(RtError::eval(
                    "called `Result::unwrap()` on an `Err` value: MissingRightBracket",
                ));
            };
            let idx = &rest[1..close];
            rest = &rest[close + 1..];
            if idx.is_empty() {
                return Err(RtError::eval(
                    "called `Result::unwrap()` on an `Err` value: EmptyAttribute",
                ));
            }
            match idx.parse::<usize>() {
                Ok(n) => Ok(n),
                Err(_) => Err(idx.to_string()),
            }
        } else {
            return Err(RtError::eval(
                "called `Result::unwrap()` on an `Err` value: InvalidCharacterAfterRightBracket",
            ));
        };
        v = match (key, &v) {
            (Ok(n), Value::List(l)) => l.get(n).cloned().ok_or_else(bad_part)?,
            (Ok(n), _) => key_of(&v, &n.to_string()).ok_or_else(bad_part)?,
            (Err(k), _) => key_of(&v, &k).ok_or_else(bad_part)?,
        };
    }
    Ok(v)
}

fn key_of(v: &Value, k: &str) -> Option<Value> {
    match v {
        Value::Dict(d) => d.get(k).cloned(),
        Value::Schema(s) => s.attrs.get(k).cloned(),
        _ => None,
    }
}

/// A value under a spec: ints and floats through the mini-language, the rest as `str()`.
fn with_spec(v: &Value, spec: &str) -> RtResult<String> {
    let r = match v {
        Value::Int(i) => Spec::parse(spec).and_then(|s| s.int(*i)),
        Value::Float(f) => Spec::parse(spec).and_then(|s| s.float(*f)),
        _ => return Ok(value::to_str(v)),
    };
    r.map_err(RtError::eval)
}

#[derive(Clone, Copy, PartialEq)]
enum Align {
    Left,
    Right,
    AfterSign,
    Center,
}

struct Spec {
    fill: Option<char>,
    align: Option<Align>,
    /// `+`, `-` or ` `
    sign: char,
    alt: bool,
    width: Option<usize>,
    group: Option<char>,
    precision: Option<usize>,
    ty: Option<char>,
}

fn align_of(c: char) -> Option<Align> {
    match c {
        '<' => Some(Align::Left),
        '>' => Some(Align::Right),
        '=' => Some(Align::AfterSign),
        '^' => Some(Align::Center),
        _ => None,
    }
}

/// Leading ASCII digits as a number: `Ok(None)` without digits; too many is an error.
fn digits(s: &str) -> Result<(Option<usize>, &str), &'static str> {
    let n = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if n == 0 {
        return Ok((None, s));
    }
    let v = s[..n]
        .parse::<usize>()
        .map_err(|_| "Too many decimal digits in format string")?;
    // upstream ignores a width that does not fit its 32-bit count ("{:4294967295}" is no
    // padding); a width of a gigabyte or more is refused rather than allocated
    if v >= u32::MAX as usize {
        return Ok((None, &s[n..]));
    }
    if v >= 1 << 30 {
        return Err("format width too large");
    }
    Ok((Some(v), &s[n..]))
}

impl Spec {
    fn parse(text: &str) -> Result<Spec, &'static str> {
        let mut s = text;
        // a conversion inside the spec (`{:!r}`) is skipped too
        if let Some(r) = s.strip_prefix('!')
            && let Some(c) = r.chars().next()
            && matches!(c, 's' | 'r' | 'a' | 'b')
        {
            s = &r[c.len_utf8()..];
        }
        let mut it = s.chars();
        let (c0, c1) = (it.next(), it.next());
        let (mut fill, mut align) = match (c0, c1.and_then(align_of)) {
            (Some(f), Some(a)) => {
                s = &s[f.len_utf8() + 1..];
                (Some(f), Some(a))
            }
            (Some(a), _) if align_of(a).is_some() => {
                s = &s[1..];
                (None, align_of(a))
            }
            _ => (None, None),
        };
        let mut sign = '-';
        if let Some(c @ ('+' | '-' | ' ')) = s.chars().next() {
            sign = c;
            s = &s[1..];
        }
        let alt = s.starts_with('#');
        if alt {
            s = &s[1..];
        }
        let zero = s.starts_with('0');
        if zero {
            s = &s[1..];
        }
        let (width, r) = digits(s)?;
        s = r;
        let group = match s.chars().next() {
            Some(c @ (',' | '_')) => {
                s = &s[1..];
                Some(c)
            }
            _ => None,
        };
        let mut precision = None;
        if let Some(r) = s.strip_prefix('.') {
            let (p, r) = digits(r)?;
            if p.is_some() {
                precision = p;
                s = r;
            }
        }
        let mut ty = None;
        if let Some(c) = s.chars().next()
            && "sbcdoxXeEfFgGn%".contains(c)
        {
            ty = Some(c);
            s = &s[1..];
        }
        if !s.is_empty() {
            return Err("Invalid format specifier");
        }
        if zero && fill.is_none() {
            fill = Some('0');
            align = align.or(Some(Align::AfterSign));
        }
        Ok(Spec {
            fill,
            align,
            sign,
            alt,
            width,
            group,
            precision,
            ty,
        })
    }

    fn sign_str(&self, negative: bool) -> &'static str {
        match (negative, self.sign) {
            (true, _) => "-",
            (false, '+') => "+",
            (false, ' ') => " ",
            _ => "",
        }
    }

    fn group(&self, digits: String) -> Result<String, &'static str> {
        let Some(sep) = self.group else {
            return Ok(digits);
        };
        let every = match self.ty {
            None | Some('d' | 'n' | 'f' | 'F') => 3,
            Some('b' | 'o' | 'x' | 'X') => 4,
            _ => return Err("Separators only valid for numbers!"),
        };
        let (int, frac) = match digits.split_once('.') {
            Some((a, b)) => (a, Some(b)),
            None => (digits.as_str(), None),
        };
        let mut out = String::new();
        let mut left = int.chars().count();
        for c in int.chars() {
            out.push(c);
            left -= 1;
            if left > 0 && left % every == 0 {
                out.push(sep);
            }
        }
        if let Some(f) = frac {
            out.push('.');
            out.push_str(f);
        }
        Ok(out)
    }

    fn pad(&self, body: &str, sign: &str) -> String {
        // upstream counts bytes, not characters
        let need = self
            .width
            .map_or(0, |w| w.saturating_sub(body.len() + sign.len()));
        let fill: String = std::iter::repeat_n(self.fill.unwrap_or(' '), need).collect();
        match self.align.unwrap_or(Align::Right) {
            Align::Left => format!("{sign}{body}{fill}"),
            Align::Right => format!("{fill}{sign}{body}"),
            Align::AfterSign => format!("{sign}{fill}{body}"),
            Align::Center => {
                let l: String = fill.chars().take(need / 2).collect();
                let r: String = fill.chars().skip(need / 2).collect();
                format!("{l}{sign}{body}{r}")
            }
        }
    }

    fn int(&self, n: i64) -> Result<String, &'static str> {
        let m = n.unsigned_abs();
        let prefix = match (self.alt, self.ty) {
            (true, Some('b')) => "0b",
            (true, Some('o')) => "0o",
            (true, Some('x' | 'X')) => "0x",
            _ => "",
        };
        let raw = match self.ty {
            None | Some('d' | 'n') => m.to_string(),
            Some('b') => format!("{m:b}"),
            Some('o') => format!("{m:o}"),
            Some('x') => format!("{m:x}"),
            Some('X') => format!("{m:X}"),
            // upstream formats the float fully (sign and width included), then aligns again
            Some('e' | 'E' | 'f' | 'F' | '%') => self.float(n as f64)?,
            Some(c @ ('s' | 'c' | 'g' | 'G')) => return Err(unknown_code(c, "int")),
            Some(_) => return Err("Invalid format specifier"),
        };
        let body = format!("{prefix}{}", self.group(raw)?);
        Ok(self.pad(&body, self.sign_str(n < 0)))
    }

    fn float(&self, f: f64) -> Result<String, &'static str> {
        let p = self.precision.unwrap_or(6);
        let m = f.abs();
        let upper = matches!(self.ty, Some('E' | 'F' | 'G'));
        let raw = match self.ty {
            _ if m.is_nan() && self.ty != Some('%') => nan_inf("nan", upper),
            _ if m.is_infinite() && self.ty != Some('%') => nan_inf("inf", upper),
            Some('f' | 'F') => format!("{m:.p$}"),
            Some('e' | 'E') => exponent(m, p, if upper { 'E' } else { 'e' }),
            Some('g' | 'G') => general(m, p.max(1), if upper { 'E' } else { 'e' }),
            Some('%') if m.is_nan() => "nan%".into(),
            Some('%') if m.is_infinite() => "inf%".into(),
            Some('%') => format!("{:.p$}%", m * 100.0),
            Some('n') => {
                return Err("Format code 'n' for object of type 'float' not implemented yet");
            }
            None => plain_float(m),
            Some(c) => return Err(unknown_code(c, "float")),
        };
        let body = self.group(raw)?;
        Ok(self.pad(&body, self.sign_str(f < 0.0)))
    }
}

fn nan_inf(s: &str, upper: bool) -> String {
    if upper { s.to_uppercase() } else { s.into() }
}

fn unknown_code(c: char, ty: &str) -> &'static str {
    // the messages are static in upstream; build the few that exist
    match (c, ty) {
        ('s', "int") => "Unknown format code 's' for object of type 'int'",
        ('c', "int") => "Unknown format code 'c' for object of type 'int'",
        ('g', "int") => "Unknown format code 'g' for object of type 'int'",
        ('G', "int") => "Unknown format code 'G' for object of type 'int'",
        ('d', _) => "Unknown format code 'd' for object of type 'float'",
        ('b', _) => "Unknown format code 'b' for object of type 'float'",
        ('o', _) => "Unknown format code 'o' for object of type 'float'",
        ('x', _) => "Unknown format code 'x' for object of type 'float'",
        ('X', _) => "Unknown format code 'X' for object of type 'float'",
        ('s', _) => "Unknown format code 's' for object of type 'float'",
        ('c', _) => "Unknown format code 'c' for object of type 'float'",
        _ => "Invalid format specifier",
    }
}

/// Rust's `{:.p$e}` (`1.5e3`) in Python's form (`1.5e+03`).
fn exponent(m: f64, p: usize, e: char) -> String {
    let r = format!("{m:.p$e}");
    let (base, exp) = r.split_once('e').unwrap_or((&r, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    format!("{base}{e}{}", exp_digits(exp))
}

/// An exponent with its sign and at least two digits.
fn exp_digits(exp: i64) -> String {
    format!(
        "{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.unsigned_abs()
    )
}

fn trim_zeros(s: String) -> String {
    if !s.contains('.') {
        return s;
    }
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `g`: fixed or exponent form by the exponent, trailing zeros removed.
fn general(m: f64, p: usize, e: char) -> String {
    let r = format!("{m:.*e}", p - 1);
    let (base, exp) = r.split_once('e').unwrap_or((&r, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i64 {
        // upstream cuts the mantissa's text to p + 1 characters
        let base: String = base.chars().take(p + 1).collect();
        format!("{}{e}{}", trim_zeros(base), exp_digits(exp))
    } else {
        let prec = (p as i64 - 1 - exp).max(0) as usize;
        trim_zeros(format!("{m:.prec$}"))
    }
}

/// A float with no format type: shortest digits, in exponent form outside 1e-5..1e16.
fn plain_float(m: f64) -> String {
    let r = format!("{m:e}");
    let (base, exp) = r.split_once('e').unwrap_or((&r, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    if exp > -5 && exp < 16 {
        if (m - m.round()).abs() < f64::EPSILON {
            format!("{m:.1}")
        } else {
            m.to_string()
        }
    } else {
        format!("{base}e{}", exp_digits(exp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(t: &str, args: Vec<Value>) -> String {
        format(t, &args, &[]).unwrap_or_else(|e| format!("error: {}", e.msg))
    }

    #[test]
    fn specs_as_upstream_prints_them() {
        assert_eq!(f("{:>5}|", vec![Value::Int(12)]), "   12|");
        assert_eq!(f("{:<5}|", vec![Value::from("ab")]), "ab|");
        assert_eq!(f("{:08.3f}", vec![Value::Float(-1.23456)]), "-001.235");
        assert_eq!(f("{:g}", vec![Value::Float(123456789.0)]), "1.23457e+08");
        assert_eq!(f("{:,}", vec![Value::Int(1234567)]), "1,234,567");
        assert_eq!(f("{:_b}", vec![Value::Int(255)]), "1111_1111");
        assert_eq!(f("{}", vec![Value::Float(1e20)]), "1e+20");
        assert_eq!(f("{}", vec![Value::Float(1e-5)]), "1e-05");
        assert_eq!(f("{:*^9}|", vec![Value::Int(-12)]), "***-12***|");
        assert_eq!(
            f("{:abc}", vec![Value::Int(1)]),
            "error: Invalid format specifier"
        );
        assert_eq!(f("{", vec![Value::Int(1)]), "error: format error");
    }
}
