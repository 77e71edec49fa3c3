//! Operators on values: arithmetic with upstream's overflow rules, comparison (union is in
//! `union.rs`).

use std::cmp::Ordering;
use std::rc::Rc;

// (the syntax tree's operators: `and`/`or` short-circuit in the evaluator and reach no
// value operation)
pub use crate::ast::{BinOp, CmpOp};

use super::union::union;
use super::{RtError, RtResult, Value};

/// At run time upstream names plain types; literal forms (`int(1)`) come from the static
/// checker (`crate::types`), which sees the operands first.
fn unsupported(op: &str, a: &Value, b: &Value) -> RtError {
    // (upstream's `|` quotes the type names: `'"str"' and '"int"'`)
    if op == "|" {
        return RtError::eval(format!(
            "unsupported operand type(s) for |: '{:?}' and '{:?}'",
            a.type_name(),
            b.type_name()
        ));
    }
    RtError::eval(format!(
        "unsupported operand type(s) for {op}: '{}' and '{}'",
        a.type_name(),
        b.type_name()
    ))
}

fn int_result(r: i128) -> RtResult<Value> {
    if r > i64::MAX as i128 || r < i64::MIN as i128 {
        Err(RtError::eval(format!("{r}: A 64 bit integer overflow")))
    } else {
        Ok(Value::Int(r as i64))
    }
}

/// A float result: infinities stay (upstream's arithmetic allows them and prints them as
/// null); only `float()` refuses an infinite value.
fn float_result(f: f64) -> RtResult<Value> {
    Ok(Value::Float(f))
}

/// Upstream's check on `int + float` (either order): a sum beyond the 32-bit float range is an
/// error, worded as upstream's (which inserts a `+` after the first `e` of the message: `1e+39`,
/// and `numbe+r` when the value has no exponent, as for `inf`).
fn mixed_sum(f: f64) -> RtResult<Value> {
    if f.is_nan() || f.abs() <= f32::MAX as f64 {
        return Ok(Value::Float(f));
    }
    Err(f32_overflow(f))
}

/// Upstream's 32-bit float overflow error for `f`, worded as [`mixed_sum`] says.
fn f32_overflow(f: f64) -> RtError {
    let repr = if f.is_infinite() {
        if f > 0.0 {
            "inf".to_string()
        } else {
            "-inf".to_string()
        }
    } else {
        // the shortest digits that read back, with an exponent (`1.6069380442589903e60`)
        format!("{f:e}")
    };
    RtError::eval(format!("{repr}: A 32-bit floating point number overflow").replacen('e', "e+", 1))
}

/// Upstream's `-r` (strict range check) on an operation, before it runs. On two ints,
/// `+ - * ** << >>` fail when an operand or the operation in 32 bits overflows (the message
/// names the exact result); with a float operand, `+ - * **` fail when an operand or the
/// result is beyond the 32-bit float range. Other operators and operands are not checked.
pub fn strict_range_check(op: BinOp, a: &Value, b: &Value) -> RtResult<()> {
    use BinOp::*;
    let fits = |v: i64| i32::try_from(v).is_ok();
    if let (Value::Int(x), Value::Int(y)) = (a, b) {
        let (x, y) = (*x, *y);
        let (xi, yi, n) = (x as i32, y as i32, y as u32);
        let (overflow, exact) = match op {
            Add => (xi.checked_add(yi).is_none(), x as i128 + y as i128),
            Sub => (xi.checked_sub(yi).is_none(), x as i128 - y as i128),
            Mul => (xi.checked_mul(yi).is_none(), x as i128 * y as i128),
            Pow => (xi.checked_pow(n).is_none(), (x as i128).wrapping_pow(n)),
            Shl => (xi.checked_shl(n).is_none(), (x as i128).wrapping_shl(n)),
            Shr => (xi.checked_shr(n).is_none(), (x as i128).wrapping_shr(n)),
            _ => return Ok(()),
        };
        if overflow || !fits(x) || !fits(y) {
            return Err(RtError::eval(format!("{exact}: A 32 bit integer overflow")));
        }
        return Ok(());
    }
    let float = |v: &Value| match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    };
    if !matches!(a, Value::Float(_)) && !matches!(b, Value::Float(_)) {
        return Ok(());
    }
    let (Some(x), Some(y)) = (float(a), float(b)) else {
        return Ok(());
    };
    let beyond = |f: f64| f > f32::MAX as f64 || f < f32::MIN as f64;
    let r = match op {
        Add => x + y,
        Sub => x - y,
        Mul => x * y,
        Pow => x.powf(y),
        _ => return Ok(()),
    };
    let pow_exponent = op == Pow && !fits(y as i64);
    if beyond(x) || beyond(y) || pow_exponent || beyond(r) {
        return Err(f32_overflow(r));
    }
    Ok(())
}

/// Numbers as (int, float) views; bools count as ints in arithmetic.
enum Num {
    I(i64),
    F(f64),
}

fn num(v: &Value) -> Option<Num> {
    match v {
        Value::Int(i) => Some(Num::I(*i)),
        Value::Bool(b) => Some(Num::I(*b as i64)),
        Value::Float(f) => Some(Num::F(*f)),
        _ => None,
    }
}

fn py_floor_div(a: i64, b: i64) -> i128 {
    let (a, b) = (a as i128, b as i128);
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn py_mod_i(a: i64, b: i64) -> i64 {
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

/// `a <op> b`.
pub fn binary(op: BinOp, a: &Value, b: &Value) -> RtResult<Value> {
    use BinOp::*;
    // (`and`/`or` of two values; the evaluator short-circuits before it gets here)
    if matches!(op, And | Or) {
        return Ok(if a.truthy() == (op == And) { b } else { a }.clone());
    }
    // `x | None` and `None | x` are `x`, whatever `x` is
    if op == BitOr && a.is_none_or_undefined() != b.is_none_or_undefined() {
        return Ok(if a.is_none_or_undefined() { b } else { a }.clone());
    }
    // a list plus anything else is worded as upstream's runtime (as Python's)
    if op == Add && matches!(a, Value::List(_)) && !matches!(b, Value::List(_)) {
        return Err(RtError::eval(format!(
            "can only concatenate list (not \"{}\") to list",
            b.type_name()
        )));
    }
    if matches!(a, Value::Bool(_)) || matches!(b, Value::Bool(_)) {
        // bools are not numbers in KCL arithmetic
        if !(matches!(op, BitOr | BitAnd | BitXor)
            && matches!((a, b), (Value::Bool(_), Value::Bool(_))))
        {
            return Err(unsupported(op.as_str(), a, b));
        }
    }
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return match (x, y) {
            // upstream's runtime on two ints: overflow of +, * and ** is a 64-bit overflow
            // error (of -, a "32 bit" one, as upstream words it); / is a float division;
            // shifts by 64 or more (a negative count included) overflow; the rest follows
            // Rust's integer arithmetic beneath it, panics and wrapping included
            (Num::I(x), Num::I(y)) => match op {
                Add => int_result(x as i128 + y as i128),
                Sub => {
                    let r = x as i128 - y as i128;
                    if i64::try_from(r).is_err() {
                        return Err(RtError::eval(format!("{r}: A 32 bit integer overflow")));
                    }
                    Ok(Value::Int(r as i64))
                }
                Mul => int_result(x as i128 * y as i128),
                Div => float_result(x as f64 / y as f64),
                FloorDiv => match (x, y) {
                    (_, 0) => Err(RtError::eval("attempt to divide by zero")),
                    (i64::MIN, -1) => Err(RtError::eval("attempt to divide with overflow")),
                    _ => int_result(py_floor_div(x, y)),
                },
                Mod => match (x, y) {
                    (_, 0) => Err(RtError::eval(
                        "attempt to calculate the remainder with a divisor of zero",
                    )),
                    (i64::MIN, -1) => Err(RtError::eval(
                        "attempt to calculate the remainder with overflow",
                    )),
                    _ => Ok(Value::Int(py_mod_i(x, y))),
                },
                // an exponent or a shift count beyond 32 bits overflows whatever it
                // truncates to
                Pow => match x.checked_pow(y as u32).filter(|_| i32::try_from(y).is_ok()) {
                    Some(r) => Ok(Value::Int(r)),
                    None => Err(RtError::eval(format!(
                        "{}: A 64 bit integer overflow",
                        (x as i128).wrapping_pow(y as u32)
                    ))),
                },
                Shl | Shr if (y as u32) >= 64 || i32::try_from(y).is_err() => {
                    let r = if op == Shl {
                        (x as i128).wrapping_shl(y as u32)
                    } else {
                        (x as i128).wrapping_shr(y as u32)
                    };
                    Err(RtError::eval(format!("{r}: A 64 bit integer overflow")))
                }
                Shl => Ok(Value::Int(x.wrapping_shl(y as u32))),
                Shr => Ok(Value::Int(x >> y)),
                BitAnd => Ok(Value::Int(x & y)),
                BitOr => Ok(Value::Int(x | y)),
                BitXor => Ok(Value::Int(x ^ y)),
                And | Or => Err(unsupported(op.as_str(), a, b)),
            },
            (x, y) => {
                let mixed = matches!((&x, &y), (Num::I(_), Num::F(_)) | (Num::F(_), Num::I(_)));
                let xf = match x {
                    Num::I(i) => i as f64,
                    Num::F(f) => f,
                };
                let yf = match y {
                    Num::I(i) => i as f64,
                    Num::F(f) => f,
                };
                match op {
                    Add if mixed => mixed_sum(xf + yf),
                    Add => float_result(xf + yf),
                    Sub => float_result(xf - yf),
                    Mul => float_result(xf * yf),
                    // IEEE division (a zero divisor gives an infinity or NaN, printed as
                    // null) and Rust's remainder, as upstream
                    Div => float_result(xf / yf),
                    FloorDiv => Ok(Value::Float((xf / yf).floor())),
                    Mod => Ok(Value::Float(xf % yf)),
                    Pow => float_result(xf.powf(yf)),
                    _ => Err(unsupported(op.as_str(), a, b)),
                }
            }
        };
    }
    match (op, a, b) {
        (Add, Value::Str(x), Value::Str(y)) => {
            let mut s = String::with_capacity(x.len() + y.len());
            s.push_str(x);
            s.push_str(y);
            Ok(Value::from(s))
        }
        (Add, Value::List(x), Value::List(y)) => {
            let mut v = Vec::with_capacity(x.len() + y.len());
            v.extend(x.iter().cloned());
            v.extend(y.iter().cloned());
            Ok(Value::from(v))
        }
        (Mul, Value::Str(s), Value::Int(n)) | (Mul, Value::Int(n), Value::Str(s)) => {
            // upstream repeats by the count as an unsigned number: a negative one overflows
            if *n < 0 && !s.is_empty() {
                return Err(RtError::eval("capacity overflow"));
            }
            let times = (*n).max(0) as usize;
            crate::limits::check_items(s.len().saturating_mul(times), "the repeated string")?;
            Ok(Value::from(s.repeat(times)))
        }
        (Mul, Value::List(l), Value::Int(n)) | (Mul, Value::Int(n), Value::List(l)) => {
            let times = (*n).max(0) as usize;
            crate::limits::check_items(l.len().saturating_mul(times), "the repeated list")?;
            let mut v = Vec::with_capacity(l.len() * times);
            for _ in 0..(*n).max(0) {
                v.extend(l.iter().cloned());
            }
            Ok(Value::from(v))
        }
        (BitOr, _, _)
            if (a.is_config() || b.is_config())
                && (a.is_config() || a.is_none_or_undefined())
                && (b.is_config() || b.is_none_or_undefined()) =>
        {
            union(a, b, true)
        }
        (BitOr, Value::None | Value::Undefined, Value::None | Value::Undefined) => Ok(b.clone()),
        (BitOr, Value::List(_), Value::List(_)) => union(a, b, true),
        // a list with a config
        (BitOr, Value::Dict(_) | Value::Schema(_), Value::List(_))
        | (BitOr, Value::List(_), Value::Dict(_) | Value::Schema(_)) => {
            Err(RtError::eval(format!(
                "union failure, expect {:?}, got {:?}",
                a.type_name(),
                b.type_name()
            )))
        }
        (BitOr, Value::None | Value::Undefined, _) => Ok(b.clone()),
        (BitOr, _, Value::None | Value::Undefined) => Ok(a.clone()),
        _ => Err(unsupported(op.as_str(), a, b)),
    }
}

/// `-x` is upstream's `0 - x`: `-0.0` is `0.0`, and the int minimum wraps to itself.
pub fn unary_neg(v: &Value) -> RtResult<Value> {
    match v {
        Value::Int(i) => Ok(Value::Int(0i64.wrapping_sub(*i))),
        Value::Float(f) => Ok(Value::Float(0.0 - f)),
        _ => Err(RtError::eval(format!(
            "bad operand type for unary -: '{}'",
            v.type_name()
        ))),
    }
}
pub fn unary_pos(v: &Value) -> RtResult<Value> {
    match v {
        Value::Int(_) | Value::Float(_) => Ok(v.clone()),
        _ => Err(RtError::eval(format!(
            "bad operand type for unary +: '{}'",
            v.type_name()
        ))),
    }
}
pub fn unary_invert(v: &Value) -> RtResult<Value> {
    match v {
        Value::Int(i) => Ok(Value::Int(!i)),
        // upstream inverts the int view of anything else: a float's truncation, 0 for the
        // rest (a bool, a string, None: -1)
        Value::Float(f) => Ok(Value::Int(!(*f as i64))),
        _ => Ok(Value::Int(-1)),
    }
}
pub fn unary_not(v: &Value) -> Value {
    Value::Bool(!v.truthy())
}

/// Structural equality: ints equal floats of the same value, dicts compare as key sets.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Undefined, Value::Undefined) | (Value::None, Value::None) => true,
        (Value::Str(x), Value::Str(y)) => x == y,
        // a bool is not equal to a number (`True == 1` is False upstream)
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Bool(_), _) | (_, Value::Bool(_)) => false,
        (Value::List(x), Value::List(y)) => {
            Rc::ptr_eq(x, y)
                || (x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| equal(p, q)))
        }
        (Value::Dict(_) | Value::Schema(_), Value::Dict(_) | Value::Schema(_)) => {
            let (x, y) = (a.as_dict().unwrap(), b.as_dict().unwrap());
            x.len() == y.len()
                && x.map
                    .iter()
                    .all(|(k, v)| y.map.get(k).is_some_and(|w| equal(v, w)))
        }
        (Value::Func(x), Value::Func(y)) => Rc::ptr_eq(x, y),
        (Value::Unit(x), Value::Unit(y)) => x.value() == y.value(),
        _ => match (num(a), num(b)) {
            (Some(Num::I(x)), Some(Num::I(y))) => x == y,
            (Some(_), Some(_)) => a.as_f64() == b.as_f64(),
            _ => false,
        },
    }
}

fn ordering(a: &Value, b: &Value) -> RtResult<Ordering> {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Ok(x.cmp(y)),
        (Value::List(x), Value::List(y)) => {
            // (equal items are skipped unordered, as upstream's: `[None, 1] < [None, 2]`)
            for (p, q) in x.iter().zip(y.iter()) {
                if equal(p, q) {
                    continue;
                }
                let o = ordering(p, q)?;
                if o != Ordering::Equal {
                    return Ok(o);
                }
            }
            Ok(x.len().cmp(&y.len()))
        }
        _ => match (num(a), num(b)) {
            (Some(Num::I(x)), Some(Num::I(y))) => Ok(x.cmp(&y)),
            (Some(_), Some(_)) => Ok(a
                .as_f64()
                .unwrap()
                .partial_cmp(&b.as_f64().unwrap())
                .unwrap_or(Ordering::Equal)),
            _ => Err(RtError::ty(format!(
                "'<' not supported between instances of '{}' and '{}'",
                a.type_name(),
                b.type_name()
            ))),
        },
    }
}

/// Total order used by `sorted`, `max`, `min`.
pub fn cmp_values(a: &Value, b: &Value) -> RtResult<Ordering> {
    ordering(a, b)
}

/// `a <op> b` for comparison operators.
pub fn compare(op: CmpOp, a: &Value, b: &Value) -> RtResult<bool> {
    use CmpOp::*;
    Ok(match op {
        Eq => equal(a, b),
        NotEq => !equal(a, b),
        Lt | LtE | Gt | GtE => {
            // upstream names the operator as written, as a runtime (evaluation) error
            let o = ordering(a, b).map_err(|e| {
                RtError::eval(e.msg.replacen("'<'", &format!("'{}'", op.as_str()), 1))
            })?;
            match op {
                Lt => o == Ordering::Less,
                LtE => o != Ordering::Greater,
                Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }
        }
        // upstream's run time compares values (`[1] is [1]`, `1 is 1.0`)
        Is => equal(a, b),
        IsNot => !compare(Is, a, b)?,
        In => contains(b, a)?,
        NotIn => !contains(b, a)?,
    })
}

fn contains(container: &Value, item: &Value) -> RtResult<bool> {
    Ok(match container {
        Value::Str(s) => match item {
            Value::Str(i) => s.contains(&**i),
            _ => false,
        },
        Value::List(l) => l.iter().any(|x| equal(x, item)),
        Value::Dict(_) | Value::Schema(_) => match item {
            Value::Str(k) => container.as_dict().unwrap().map.contains_key(&**k),
            _ => false,
        },
        _ => {
            // upstream's run-time error names Python's exception in its message
            return Err(RtError::eval(format!(
                "TypeError: argument of type '{}' is not iterable",
                container.type_name()
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Str, dict_of};

    #[test]
    fn int_overflow_is_an_error() {
        let e = binary(BinOp::Add, &Value::Int(i64::MAX), &Value::Int(1)).unwrap_err();
        assert_eq!(e.msg, "9223372036854775808: A 64 bit integer overflow");
    }

    #[test]
    fn python_division_rules() {
        assert_eq!(
            binary(BinOp::FloorDiv, &Value::Int(-7), &Value::Int(2)).unwrap(),
            Value::Int(-4)
        );
        assert_eq!(
            binary(BinOp::Mod, &Value::Int(-7), &Value::Int(3)).unwrap(),
            Value::Int(2)
        );
        assert!(
            matches!(binary(BinOp::Div, &Value::Int(7), &Value::Int(2)).unwrap(), Value::Float(f) if f == 3.5)
        );
        // upstream divides ints as floats: a zero divisor gives an infinity
        assert!(
            matches!(binary(BinOp::Div, &Value::Int(1), &Value::Int(0)).unwrap(), Value::Float(f) if f.is_infinite())
        );
        assert!(binary(BinOp::FloorDiv, &Value::Int(1), &Value::Int(0)).is_err());
    }

    #[test]
    fn union_merges_nested_and_overrides() {
        let a = dict_of([(Str::from("a"), dict_of([(Str::from("x"), Value::Int(1))]))]);
        let b = dict_of([(Str::from("a"), dict_of([(Str::from("y"), Value::Int(2))]))]);
        let u = binary(BinOp::BitOr, &a, &b).unwrap();
        assert_eq!(super::super::to_str(&u), "{'a': {'x': 1, 'y': 2}}");
        let c = dict_of([(Str::from("k"), Value::Int(1))]);
        let d = dict_of([(Str::from("k"), Value::Int(2))]);
        assert!(union(&c, &d, true).is_err());
        assert_eq!(union(&c, &d, false).unwrap(), d);
    }

    #[test]
    fn comparisons() {
        assert!(compare(CmpOp::Lt, &Value::Int(1), &Value::Float(1.5)).unwrap());
        assert!(
            compare(
                CmpOp::In,
                &Value::str("a"),
                &Value::from(vec![Value::str("a")])
            )
            .unwrap()
        );
        assert!(compare(CmpOp::Lt, &Value::str("a"), &Value::Int(1)).is_err());
        assert!(Value::Int(1) == Value::Float(1.0));
    }
}
