//! Numeric builtins: `abs`, `int` (with a base and unit literals), `float`, `hex`/`oct`/`bin`,
//! `round` and `pow`, with upstream's conversions and messages.

use super::{arg, req};
use crate::value::{self, Host, RtError, RtResult, Str, Value};

pub(super) fn b_abs(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    // upstream's abs is Undefined for anything but an int or a float (bools included)
    match req(args, kw, 0, "inval", "abs")? {
        Value::Int(i) => Ok(Value::Int(i.abs())),
        Value::Float(f) => Ok(Value::Float(f.abs())),
        _ => Ok(Value::Undefined),
    }
}

pub(super) fn b_int(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let v = arg(args, kw, 0, "number").cloned().unwrap_or(Value::Int(0));
    let base = arg(args, kw, 1, "base")
        .and_then(|b| b.as_int())
        .unwrap_or(10);
    match &v {
        Value::Int(_) => Ok(v),
        Value::Bool(b) => Ok(Value::Int(*b as i64)),
        Value::Float(f) => Ok(Value::Int(f.trunc() as i64)),
        Value::Unit(u) => Ok(Value::Int(u.value().trunc() as i64)),
        Value::Str(s) => str_to_int(s, base),
        other => Err(RtError::eval(format!(
            "int() argument must be a string or a number, not '{}'",
            other.type_name()
        ))),
    }
}

/// `int(s, base)` as upstream: base 10 is [`quantity`]; another base drops its `0x`, `0o` or
/// `0b` prefix and fails with Python's words; a base outside 2..=36 is Rust's panic.
fn str_to_int(s: &str, base: i64) -> RtResult<Value> {
    if base == 10 {
        return quantity(s).map(Value::Int);
    }
    // (upstream's radix is the base cut to 32 bits)
    let base = i64::from(base as u32);
    if !(2..=36).contains(&base) {
        return Err(RtError::eval(format!(
            "from_ascii_radix: radix must lie in the range `[2, 36]` - found {base}"
        )));
    }
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let prefix = match base {
        16 => ["0x", "0X"],
        8 => ["0o", "0O"],
        2 => ["0b", "0B"],
        _ => ["", ""],
    };
    let digits = prefix
        .iter()
        .find_map(|p| body.strip_prefix(p).filter(|_| !p.is_empty()))
        .unwrap_or(body);
    // from_str_radix takes a sign itself: one was already taken
    let ok = !digits.starts_with(['+', '-']);
    match i64::from_str_radix(digits, base as u32) {
        Ok(n) if ok => Ok(Value::Int(if neg { -n } else { n })),
        _ => Err(RtError::eval(format!(
            "invalid literal for int() with base {base}: '{s}'"
        ))),
    }
}

/// Upstream's quantity parse behind `int(s)`: a text ending in `i` may end in a two-letter
/// binary unit (`Ki`), any other one in a one-letter unit (`K`, `m`); the rest is Rust's
/// integer syntax (its parse error, unwrapped, is the message). Upstream slices the unit off
/// by bytes, so a cut inside a character is Rust's panic message; the multiplication wraps
/// and `n`, `u`, `m` multiply by 0.
fn quantity(s: &str) -> RtResult<i64> {
    let cut = |i: usize| -> RtResult<&str> {
        if s.is_char_boundary(i) {
            return Ok(&s[i..]);
        }
        let (at, c) = s
            .char_indices()
            .take_while(|(j, _)| *j <= i)
            .last()
            .unwrap_or((0, ' '));
        Err(RtError::eval(format!(
            "start byte index {i} is not a char boundary; it is inside {c:?} (bytes {at}..{} of string)",
            at + c.len_utf8()
        )))
    };
    let scale = |unit: &str| -> Option<i64> {
        let mut cs = unit.chars();
        let first = cs.next()?;
        let base: i64 = match cs.as_str() {
            "" => 1000,
            "i" => 1024,
            _ => return None,
        };
        Some(match first {
            'n' | 'u' | 'm' => 0,
            'k' | 'K' => base,
            'M' => base.pow(2),
            'G' => base.pow(3),
            'T' => base.pow(4),
            'P' => base.pow(5),
            _ => return None,
        })
    };
    let n = s.len();
    let width = if n >= 2 && s.ends_with('i') { 2 } else { 1 };
    let (number, mult) = match n.checked_sub(width) {
        Some(at) => match scale(cut(at)?) {
            Some(m) => (&s[..at], m),
            None => (s, 1),
        },
        None => (s, 1),
    };
    if number.is_empty() {
        return Err(RtError::eval("number can't be empty"));
    }
    let v = number.parse::<i64>().map_err(|e| {
        RtError::eval(format!(
            "called `Result::unwrap()` on an `Err` value: {e:?}"
        ))
    })?;
    Ok(v.wrapping_mul(mult))
}

pub(super) fn b_float(h: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let v = arg(args, kw, 0, "number")
        .cloned()
        .unwrap_or(Value::Float(0.0));
    match float_of(v)? {
        // upstream refuses an infinite float here, and under `-r` one beyond the 32-bit range
        // (the number is then `inf` as a 32-bit float; `inf` whatever its sign)
        Value::Float(f) if h.strict_range_check() && f.abs() > f32::MAX as f64 => Err(
            RtError::eval("inf: A 32-bit floating point number overflow"),
        ),
        Value::Float(f) if f.is_infinite() => Err(RtError::eval(
            "inf: A 64-bit floating point number overflow",
        )),
        v => Ok(v),
    }
}

fn float_of(v: Value) -> RtResult<Value> {
    match &v {
        Value::Float(_) => Ok(v),
        Value::Int(i) => Ok(Value::Float(*i as f64)),
        Value::Bool(b) => Ok(Value::Float(*b as i64 as f64)),
        Value::Unit(u) => Ok(Value::Float(u.value())),
        Value::Str(s) => {
            // Rust's float syntax, as upstream: no spaces or underscores; inf and nan spelled
            // any case
            s.parse::<f64>().ok().map(Value::Float).ok_or_else(|| {
                RtError::eval(format!("invalid literal for float() with base 10: '{s}'"))
            })
        }
        // upstream converts anything else through its text, which never parses as a float
        other => Err(RtError::eval(format!(
            "invalid literal for float() with base 10: '{}'",
            value::to_str(other)
        ))),
    }
}

fn int_fmt(args: &[Value], kw: &[(Str, Value)], f: &str, pre: &str, radix: u32) -> RtResult<Value> {
    // anything but an int (a bool too) is Undefined to upstream's hex/oct/bin
    let Value::Int(i) = *req(args, kw, 0, "number", f)? else {
        return Ok(Value::Undefined);
    };
    let digits = match radix {
        16 => format!("{:x}", i.unsigned_abs()),
        8 => format!("{:o}", i.unsigned_abs()),
        _ => format!("{:b}", i.unsigned_abs()),
    };
    Ok(Value::from(format!(
        "{}{pre}{digits}",
        if i < 0 { "-" } else { "" }
    )))
}
pub(super) fn b_hex(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    int_fmt(args, kw, "hex", "0x", 16)
}
pub(super) fn b_oct(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    int_fmt(args, kw, "oct", "0o", 8)
}
pub(super) fn b_bin(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    int_fmt(args, kw, "bin", "0b", 2)
}
/// `round`, as upstream's runtime: without `ndigits` halves round away from zero and the
/// result is an int; with it the result is a float (an int too), and a scaled half rounds to
/// even.
pub(super) fn b_round(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let x = req(args, kw, 0, "number", "round")?;
    let nd = match arg(args, kw, 1, "ndigits") {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    let f = match x {
        Value::Int(i) => {
            return Ok(match nd {
                Some(_) => Value::Float(*i as f64),
                None => Value::Int(*i),
            });
        }
        Value::Float(f) => *f,
        _ => return Ok(Value::Undefined),
    };
    let Some(n) = nd else {
        return Ok(Value::Int(f.round() as i64));
    };
    if n == 0 {
        return Ok(Value::Float(f.round()));
    }
    let (y, pow1, pow2) = if n >= 0 {
        // as CPython: pow1 * pow2 is 10^n without overflowing either
        let (pow1, pow2) = if n > 22 {
            (10f64.powf((n - 22) as f64), 1e22)
        } else {
            (10f64.powf(n as f64), 1.0)
        };
        let y = (f * pow1) * pow2;
        if !y.is_finite() {
            return Ok(Value::Float(f));
        }
        (y, pow1, Some(pow2))
    } else {
        let pow1 = 10f64.powf(-n as f64);
        (f / pow1, pow1, None)
    };
    let mut z = y.round();
    if (y - z).abs() == 0.5 {
        z = 2.0 * (y / 2.0).round();
    }
    let z = match pow2 {
        Some(p2) => (z / p2) / pow1,
        None => z * pow1,
    };
    Ok(if z.is_finite() {
        Value::Float(z)
    } else {
        Value::Undefined
    })
}
/// `pow`: ints to a non-negative power through floats (saturating), as upstream.
pub(super) fn b_pow(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let x = req(args, kw, 0, "x", "pow")?;
    let y = req(args, kw, 1, "y", "pow")?;
    if let Some(z) = arg(args, kw, 2, "z").filter(|z| !z.is_none_or_undefined()) {
        // (upstream looks at a zero modulus before the other arguments' types)
        if matches!(z, Value::Int(0)) {
            return Err(RtError::eval("pow() 3rd argument cannot be 0"));
        }
        let (Value::Int(x), Value::Int(y), Value::Int(m)) = (x, y, z) else {
            return Err(RtError::eval(
                "pow() 3rd argument not allowed unless all arguments are integers",
            ));
        };
        if *m == 0 {
            return Err(RtError::eval("pow() 3rd argument cannot be 0"));
        }
        if *y < 0 {
            return Err(RtError::eval(
                "pow() 2nd argument cannot be negative when 3rd argument specified",
            ));
        }
        let (mut ans, mut base, m, mut e) = (1i128, *x as i128, *m as i128, *y as i128);
        while e > 0 {
            if e % 2 == 1 {
                ans = (ans * base) % m;
            }
            base = (base * base) % m;
            e /= 2;
        }
        return Ok(Value::Int(ans as i64));
    }
    Ok(match (x, y) {
        (Value::Int(x), Value::Int(y)) if *y >= 0 => Value::Int((*x as f64).powf(*y as f64) as i64),
        (Value::Int(x), Value::Int(y)) => Value::Float((*x as f64).powf(*y as f64)),
        (Value::Int(x), Value::Float(y)) => Value::Float((*x as f64).powf(*y)),
        (Value::Float(x), Value::Int(y)) => Value::Float(x.powf(*y as f64)),
        (Value::Float(x), Value::Float(y)) => Value::Float(x.powf(*y)),
        _ => Value::Undefined,
    })
}
