//! Operators on values: arithmetic with upstream's overflow rules, comparison, union.

use std::cmp::Ordering;
use std::rc::Rc;

use super::{ConfigOp, Dict, RtError, RtResult, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    FloorDiv,
    LShift,
    RShift,
    BitAnd,
    BitOr,
    BitXor,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::FloorDiv => "//",
            BinOp::LShift => "<<",
            BinOp::RShift => ">>",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtE,
    Gt,
    GtE,
    Is,
    IsNot,
    In,
    NotIn,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::NotEq => "!=",
            CmpOp::Lt => "<",
            CmpOp::LtE => "<=",
            CmpOp::Gt => ">",
            CmpOp::GtE => ">=",
            CmpOp::Is => "is",
            CmpOp::IsNot => "is not",
            CmpOp::In => "in",
            CmpOp::NotIn => "not in",
        }
    }
}

/// At run time upstream names plain types; literal forms (`int(1)`) come from the static
/// checker (`crate::types`), which sees the operands first.
fn unsupported(op: &str, a: &Value, b: &Value) -> RtError {
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
    let repr = if f.is_infinite() {
        if f > 0.0 {
            "inf".to_string()
        } else {
            "-inf".to_string()
        }
    } else {
        let mut s = String::new();
        super::float_to_yaml(f, &mut s);
        s
    };
    Err(RtError::eval(
        format!("{repr}: A 32-bit floating point number overflow").replacen('e', "e+", 1),
    ))
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
            return Err(unsupported(op.symbol(), a, b));
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
                Pow => match x.checked_pow(y as u32) {
                    Some(r) => Ok(Value::Int(r)),
                    None => Err(RtError::eval(format!(
                        "{}: A 64 bit integer overflow",
                        (x as i128).wrapping_pow(y as u32)
                    ))),
                },
                LShift | RShift if (y as u32) >= 64 => {
                    let r = if op == LShift {
                        (x as i128).wrapping_shl(y as u32)
                    } else {
                        (x as i128).wrapping_shr(y as u32)
                    };
                    Err(RtError::eval(format!("{r}: A 64 bit integer overflow")))
                }
                LShift => Ok(Value::Int(x.wrapping_shl(y as u32))),
                RShift => Ok(Value::Int(x >> y)),
                BitAnd => Ok(Value::Int(x & y)),
                BitOr => Ok(Value::Int(x | y)),
                BitXor => Ok(Value::Int(x ^ y)),
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
                    _ => Err(unsupported(op.symbol(), a, b)),
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
        (BitOr, Value::Dict(_), Value::Schema(_)) => Err(unsupported("|", a, b)),
        (BitOr, _, _)
            if (a.is_config() || b.is_config())
                && (a.is_config() || a.is_none_or_undefined())
                && (b.is_config() || b.is_none_or_undefined()) =>
        {
            union(a, b, true)
        }
        (BitOr, Value::None | Value::Undefined, Value::None | Value::Undefined) => Ok(b.clone()),
        (BitOr, Value::List(_), Value::List(_)) => union(a, b, true),
        (BitOr, Value::None | Value::Undefined, _) => Ok(b.clone()),
        (BitOr, _, Value::None | Value::Undefined) => Ok(a.clone()),
        _ => Err(unsupported(op.symbol(), a, b)),
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
            for (p, q) in x.iter().zip(y.iter()) {
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
                RtError::eval(e.msg.replacen("'<'", &format!("'{}'", op.symbol()), 1))
            })?;
            match op {
                Lt => o == Ordering::Less,
                LtE => o != Ordering::Greater,
                Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }
        }
        Is => match (a, b) {
            (Value::List(x), Value::List(y)) => Rc::ptr_eq(x, y) || (x.is_empty() && y.is_empty()),
            (Value::Dict(x), Value::Dict(y)) => Rc::ptr_eq(x, y) || (x.is_empty() && y.is_empty()),
            _ => equal(a, b) && std::mem::discriminant(a) == std::mem::discriminant(b),
        },
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
        Value::None | Value::Undefined => false,
        _ => {
            // upstream's run-time error names Python's exception in its message
            return Err(RtError::eval(format!(
                "TypeError: argument of type '{}' is not iterable",
                container.type_name()
            )));
        }
    })
}

/// Merge `b` into `a` the way `|` and repeated `:` entries do. With `check_conflict`, two
/// different non-config values for one key are an error (the `:` rule).
pub fn union(a: &Value, b: &Value, check_conflict: bool) -> RtResult<Value> {
    let mut out = a.clone();
    union_into::<RtError>(&mut out, b, check_conflict, 0, None)?;
    Ok(out)
}

/// Re-creates a schema instance with more config merged into the config it was built from
/// (`None`: it cannot be rebuilt, its attributes are merged instead). The evaluator supplies
/// it so a dict merged into a nested instance is coerced and checked like a fresh instance.
pub type Rebuild<'a, E> = &'a dyn Fn(&Value, &Value) -> Result<Option<Value>, E>;

/// [`union`] consuming `a` (updated in place when nothing else shares it) that rebuilds the
/// schema instances it merges into through `rb`.
pub fn union_with<E: From<RtError>>(
    mut a: Value,
    b: &Value,
    check_conflict: bool,
    rb: Rebuild<'_, E>,
) -> Result<Value, E> {
    union_into(&mut a, b, check_conflict, 0, Some(rb))?;
    Ok(a)
}

fn union_into<E: From<RtError>>(
    a: &mut Value,
    b: &Value,
    check: bool,
    depth: usize,
    rb: Option<Rebuild<'_, E>>,
) -> Result<(), E> {
    if depth > super::MAX_DEPTH {
        return Err(RtError::new(
            super::ErrKind::RecursionLimit,
            "maximum recursion depth exceeded",
        )
        .into());
    }
    match (&*a, b) {
        (Value::List(_), Value::List(y)) => {
            let Value::List(x) = a else { unreachable!() };
            let x = Rc::make_mut(x);
            for (i, v) in y.iter().enumerate() {
                if i < x.len() {
                    union_into(&mut x[i], v, check, depth + 1, rb)?;
                } else {
                    x.push(v.clone());
                }
            }
            Ok(())
        }
        (Value::Dict(_) | Value::Schema(_), Value::Dict(_) | Value::Schema(_)) => {
            if check && matches!(&*a, Value::Schema(_)) {
                check_union(a, b, depth)?;
            }
            if let (Some(rb), Value::Schema(_)) = (rb, &*a)
                && let Some(v) = rb(a, b)?
            {
                *a = v;
                return Ok(());
            }
            // an instance merged into a plain dict: its values override (what it was
            // configured with `:` merges into dicts), the dict's other keys stay
            if let (Value::Dict(_), Value::Schema(bs)) = (&*a, b) {
                let unified = bs.unified_config();
                let ad = a.dict_mut().unwrap();
                for (k, v) in &bs.attrs.map {
                    if matches!(v, Value::Undefined) {
                        continue;
                    }
                    match ad.map.get_mut(k) {
                        Some(cur) if unified.map.contains_key(k) && cur.is_config() => {
                            union_into(cur, v, check, depth + 1, rb)?;
                        }
                        _ => {
                            ad.map.insert(k.clone(), v.clone());
                        }
                    }
                }
                return Ok(());
            }
            let bd = b.as_dict().unwrap();
            let ad = a.dict_mut().unwrap();
            for (k, v) in &bd.map {
                let (op, index) = bd.op_of(k);
                merge_entry_in(ad, k, v, op, index, check, depth, rb)?;
            }
            Ok(())
        }
        // unifying with None or Undefined keeps the value (`{x: 1, x: None}` is `{x: 1}`)
        (_, Value::Undefined | Value::None) => Ok(()),
        _ => {
            *a = b.clone();
            Ok(())
        }
    }
}

/// Apply one config entry `k <op> v` to `d`.
pub fn merge_entry(
    d: &mut Dict,
    k: &super::Str,
    v: &Value,
    op: ConfigOp,
    index: Option<i64>,
    check: bool,
    depth: usize,
) -> RtResult<()> {
    merge_entry_in::<RtError>(d, k, v, op, index, check, depth, None)
}

/// [`merge_entry`] that rebuilds the schema instances it merges into through `rb`; `check`
/// is upstream's conflict check (repeated `:` keys of one config).
pub fn merge_entry_with<E: From<RtError>>(
    d: &mut Dict,
    k: &super::Str,
    v: &Value,
    op: ConfigOp,
    index: Option<i64>,
    check: bool,
    rb: Rebuild<'_, E>,
) -> Result<(), E> {
    merge_entry_in(d, k, v, op, index, check, 0, Some(rb))
}

#[allow(clippy::too_many_arguments)]
fn merge_entry_in<E: From<RtError>>(
    d: &mut Dict,
    k: &super::Str,
    v: &Value,
    op: ConfigOp,
    index: Option<i64>,
    check: bool,
    depth: usize,
    rb: Option<Rebuild<'_, E>>,
) -> Result<(), E> {
    match op {
        ConfigOp::Override => {
            if let Some(i) = index {
                match d.map.get_mut(k) {
                    Some(Value::List(l)) => {
                        let l = Rc::make_mut(l);
                        let idx = if i < 0 { l.len() as i64 + i } else { i };
                        if idx < 0 || idx as usize >= l.len() {
                            return Err(RtError::eval(format!(
                                "index out of bounds: the len is {} but the index is {i}",
                                l.len()
                            ))
                            .into());
                        }
                        if v.is_undefined() {
                            l.remove(idx as usize);
                        } else {
                            l[idx as usize] = v.clone();
                        }
                    }
                    _ => {
                        return Err(RtError::eval(format!(
                            "only list attribute can be override value with the index {i}"
                        ))
                        .into());
                    }
                }
            } else {
                d.map.insert(k.clone(), v.clone());
            }
            d.set_op(k.clone(), ConfigOp::Override, None);
        }
        ConfigOp::Insert => {
            let cur = d.map.get(k).cloned().unwrap_or(Value::None);
            let new = match (&cur, v) {
                (Value::List(x), Value::List(y)) => {
                    let mut x = (**x).clone();
                    match index {
                        Some(i) => {
                            let idx = if i < 0 { x.len() as i64 + i } else { i };
                            if idx < 0 || idx as usize > x.len() {
                                return Err(RtError::eval(format!(
                                    "insertion index (is {i}) should be <= len (is {})",
                                    x.len()
                                ))
                                .into());
                            }
                            for (j, item) in y.iter().enumerate() {
                                x.insert(idx as usize + j, item.clone());
                            }
                        }
                        None => x.extend(y.iter().cloned()),
                    }
                    Value::from(x)
                }
                (Value::None | Value::Undefined, Value::List(_)) => match index {
                    Some(i) if i < 0 => {
                        return Err(RtError::eval(format!(
                            "index out of bounds: the len is 0 but the index is {i}"
                        ))
                        .into());
                    }
                    Some(i) if i > 0 => {
                        return Err(RtError::eval(format!(
                            "insertion index (is {i}) should be <= len (is 0)"
                        ))
                        .into());
                    }
                    _ => v.clone(),
                },
                _ => binary(BinOp::Add, &cur, v)?,
            };
            d.map.insert(k.clone(), new);
            if cur.is_none_or_undefined() {
                // still an insertion when this dict is merged into another later
                d.set_op(k.clone(), ConfigOp::Insert, index);
            }
        }
        ConfigOp::Union => match d.map.get_mut(k) {
            Some(cur) => {
                if check && !subsume(v, cur) {
                    return Err(conflict(k, cur, v).into());
                }
                union_into(cur, v, check, depth + 1, rb)?;
            }
            None => {
                d.map.insert(k.clone(), v.clone());
            }
        },
    }
    Ok(())
}

/// Upstream's idempotence check of a `:` merge (`value_subsume`): may `new` be unified with
/// `old`? Scalars must be equal, lists of equal length element by element; configs always
/// (their entries are checked as they merge).
pub fn subsume(new: &Value, old: &Value) -> bool {
    if new.is_none_or_undefined() || old.is_none_or_undefined() || equal(new, old) {
        return true;
    }
    match (new, old) {
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| subsume(p, q))
        }
        (Value::Dict(_) | Value::Schema(_), Value::Dict(_) | Value::Schema(_)) => true,
        _ => false,
    }
}

/// Upstream's conflict error (its first line names the innermost key).
pub fn conflict(k: &str, old: &Value, new: &Value) -> RtError {
    let show = |v: &Value| {
        if v.is_config() {
            "{...}".to_string()
        } else if matches!(v, Value::List(_)) {
            "[...]".to_string()
        } else {
            crate::output::to_json(v, crate::output::PrintOpts::default(), 0)
        }
    };
    let n = show(new);
    RtError::eval(format!(
        "conflicting values on the attribute '{k}' between :\n    {}\nand\n    {n}\nwith union path :\n    {k}\ntry operator '=' to override the attribute, like:\n    {{...}} | {{\n            ...\n            {k} = {n}\n            ...\n    }}",
        show(old)
    ))
}

/// The conflicts a checked union of `b` into `a` would meet, found without changing `a`
/// (an instance is rebuilt from its config, but upstream checks against its values).
pub fn check_union(a: &Value, b: &Value, depth: usize) -> RtResult<()> {
    if depth > super::MAX_DEPTH {
        return Ok(());
    }
    match (a, b) {
        (Value::List(x), Value::List(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                check_union(p, q, depth + 1)?;
            }
            Ok(())
        }
        // an instance merged with an instance takes the other's values; only what the other
        // was configured with `:` must agree
        (Value::Dict(_) | Value::Schema(_), Value::Schema(bs)) => {
            check_union(a, &Value::from(bs.unified_config()), depth)
        }
        (Value::Dict(_) | Value::Schema(_), Value::Dict(_)) => {
            let (ad, bd) = (a.as_dict().unwrap(), b.as_dict().unwrap());
            for (k, v) in &bd.map {
                if bd.op_of(k).0 != ConfigOp::Union {
                    continue;
                }
                if let Some(cur) = ad.map.get(k) {
                    if let (Value::Schema(_), Value::Schema(_)) = (cur, v) {
                        check_union(cur, v, depth + 1)?;
                        continue;
                    }
                    if !subsume(v, cur) {
                        return Err(conflict(k, cur, v));
                    }
                    check_union(cur, v, depth + 1)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
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
