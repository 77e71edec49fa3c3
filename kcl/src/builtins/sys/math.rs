//! The `math` and `units` modules.

use super::{A, K, R};
use crate::builtins::{arg, req};
use crate::value::{self, Host, RtError, RtResult, Value};

/// The number argument `i` of a `math` function: an int stays an int (upstream computes
/// several functions differently for ints and floats).
enum Num {
    I(i64),
    F(f64),
}

fn num_arg(args: A, kw: K, i: usize, name: &str, f: &str) -> RtResult<Num> {
    match arg(args, kw, i, name) {
        Some(Value::Int(x)) => Ok(Num::I(*x)),
        Some(Value::Float(x)) => Ok(Num::F(*x)),
        _ => Err(RtError::eval(format!(
            "{f}() takes exactly one argument (0 given)"
        ))),
    }
}

/// `math`, as upstream's runtime computes it: on an int, `ceil`/`floor` return it,
/// `log`/`log2` truncate to an int, `log1p(x)` is `ln(1 + (x + 1))`, `pow` of ints is an int
/// (wrapping) unless the exponent is negative.
pub(super) fn math(name: &str) -> Option<Value> {
    macro_rules! f1 {
        ($n:literal, $f:expr) => {
            |_: &mut dyn Host, a: A, k: K| -> R {
                let g: fn(f64) -> f64 = $f;
                Ok(Value::Float(match num_arg(a, k, 0, "x", $n)? {
                    Num::I(x) => g(x as f64),
                    Num::F(x) => g(x),
                }))
            }
        };
    }
    natives!(name, {
        "ceil" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Int(match num_arg(a, k, 0, "x", "ceil")? { Num::I(x) => x, Num::F(x) => x.ceil() as i64 }))
        },
        "floor" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Int(match num_arg(a, k, 0, "x", "floor")? { Num::I(x) => x, Num::F(x) => x.floor() as i64 }))
        },
        "exp" => f1!("exp", f64::exp),
        "expm1" => f1!("expm1", f64::exp_m1),
        // upstream adds the 1 before converting: an int wraps at the 64-bit end
        "log1p" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Float(match num_arg(a, k, 0, "x", "log1p")? {
                Num::I(x) => (x.wrapping_add(1) as f64).ln_1p(),
                Num::F(x) => (x + 1.0).ln_1p(),
            }))
        },
        "log10" => f1!("log10", f64::log10),
        "sqrt" => f1!("sqrt", f64::sqrt),
        "log2" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(match num_arg(a, k, 0, "x", "log2")? {
                Num::I(x) => Value::Int((x as f64).log2() as i64),
                Num::F(x) => Value::Float(x.log2()),
            })
        },
        "log" => |_: &mut dyn Host, a: A, k: K| -> R {
            // only a float base counts: upstream reads an int one as absent (base e)
            let base = match arg(a, k, 1, "e") {
                Some(Value::Float(b)) => *b,
                _ => std::f64::consts::E,
            };
            Ok(match num_arg(a, k, 0, "x", "log")? {
                Num::I(x) => Value::Int((x as f64).log(base) as i64),
                Num::F(x) => Value::Float(x.log(base)),
            })
        },
        "pow" => |_: &mut dyn Host, a: A, k: K| -> R {
            let x = num_arg(a, k, 0, "x", "pow")?;
            let n = num_arg(a, k, 1, "n", "pow")?;
            Ok(match (x, n) {
                (Num::I(x), Num::I(n)) if n < 0 => Value::Float((x as f64).powf(n as f64)),
                (Num::I(x), Num::I(n)) => Value::Int(x.wrapping_pow(n as u32)),
                (Num::I(x), Num::F(n)) => Value::Float((x as f64).powf(n)),
                (Num::F(x), Num::I(n)) => Value::Float(x.powi(n as i32)),
                (Num::F(x), Num::F(n)) => Value::Float(x.powf(n)),
            })
        },
        "factorial" => |_: &mut dyn Host, a: A, k: K| -> R {
            let fact = |n: i64| -> RtResult<i64> {
                if n >= 21 {
                    return Err(RtError::eval("factorial() result overflow"));
                }
                Ok((2..=n).product::<i64>().max(1))
            };
            match arg(a, k, 0, "x") {
                Some(Value::Int(x)) if *x >= 0 => Ok(Value::Int(fact(*x)?)),
                Some(Value::Float(x)) if *x >= 0.0 && (*x as i64 as f64) == *x => Ok(Value::Float(fact(*x as i64)? as f64)),
                Some(_) => Err(RtError::eval("factorial() only accepts integral values")),
                None => Err(RtError::eval("factorial() takes exactly one argument (0 given)")),
            }
        },
        "gcd" => |_: &mut dyn Host, a: A, k: K| -> R {
            let (Some(Value::Int(x)), Some(Value::Int(y))) = (arg(a, k, 0, "a"), arg(a, k, 1, "b")) else {
                return Err(RtError::eval(format!("gcd() takes exactly two arguments ({} given)", a.len())));
            };
            let (mut x, mut y) = (x.unsigned_abs(), y.unsigned_abs());
            while y != 0 { let t = x % y; x = y; y = t; }
            Ok(Value::Int(x as i64))
        },
        "isfinite" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Bool(match num_arg(a, k, 0, "x", "isfinite")? { Num::I(_) => true, Num::F(x) => x.is_finite() }))
        },
        "isinf" => |_: &mut dyn Host, a: A, k: K| -> R {
            if let Some(Value::Bool(_)) = arg(a, k, 0, "x") {
                return Ok(Value::Bool(false));
            }
            Ok(Value::Bool(match num_arg(a, k, 0, "x", "isinf")? { Num::I(_) => false, Num::F(x) => x.is_infinite() }))
        },
        "isnan" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Bool(match num_arg(a, k, 0, "x", "isnan")? { Num::I(_) => false, Num::F(x) => x.is_nan() }))
        },
        "modf" => |_: &mut dyn Host, a: A, k: K| -> R {
            let (f, t) = match num_arg(a, k, 0, "x", "modf")? {
                Num::I(x) => (0.0, x as f64),
                Num::F(x) if x.is_infinite() => (0.0_f64.copysign(x), x),
                Num::F(x) if x.is_nan() => (x, x),
                Num::F(x) => (x.fract(), x.trunc()),
            };
            Ok(Value::from(vec![Value::Float(f), Value::Float(t)]))
        },
    })
}

pub(super) fn units(name: &str) -> Option<Value> {
    // constants
    let c = |f: f64| Some(Value::Float(f));
    let ci = |i: i64| Some(Value::Int(i));
    match name {
        // the type's name used as a value: upstream's runtime gives 1.0
        "NumberMultiplier" => return c(1.0),
        "n" => return c(1e-9),
        "u" => return c(1e-6),
        "m" => return c(1e-3),
        "k" | "K" => return ci(1000),
        "M" => return ci(1_000_000),
        "G" => return ci(1_000_000_000),
        "T" => return ci(1_000_000_000_000),
        "P" => return ci(1_000_000_000_000_000),
        "Ki" => return ci(1 << 10),
        "Mi" => return ci(1 << 20),
        "Gi" => return ci(1 << 30),
        "Ti" => return ci(1 << 40),
        "Pi" => return ci(1 << 50),
        _ => {}
    }
    macro_rules! to {
        ($suf:literal) => {
            |_: &mut dyn Host, a: A, k: K| -> R {
                let x = req(a, k, 0, "num", "to_unit")?;
                // upstream reads a value that is no number as 0 for the integer suffixes and
                // through `float(str(x))` for the fractional ones
                let f = match x {
                    Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::Unit(_) => x
                        .as_f64()
                        .ok_or_else(|| RtError::ty("units conversion expects a number"))?,
                    _ if !matches!($suf, "n" | "u" | "m") => {
                        return Ok(Value::from(format!("0{}", $suf)));
                    }
                    _ => {
                        let text = value::to_str(x);
                        text.parse::<f64>().map_err(|_| {
                            RtError::eval(format!(
                                "invalid literal for float() with base 10: '{text}'"
                            ))
                        })?
                    }
                };
                let m = value::unit_multiplier($suf).unwrap();
                let r = f / m;
                Ok(Value::from(format!("{}{}", r as i64, $suf)))
            }
        };
    }
    natives!(name, {
        "to_n" => to!("n"), "to_u" => to!("u"), "to_m" => to!("m"), "to_K" => to!("K"), "to_M" => to!("M"), "to_G" => to!("G"),
        "to_T" => to!("T"), "to_P" => to!("P"), "to_Ki" => to!("Ki"), "to_Mi" => to!("Mi"), "to_Gi" => to!("Gi"), "to_Ti" => to!("Ti"), "to_Pi" => to!("Pi"),
    })
}
