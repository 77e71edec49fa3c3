//! Builtin functions (numeric ones in `num.rs`, `option()` in `option.rs`), string methods
//! (`strs.rs`, `pyfmt.rs`) and the system modules (`sys`).

mod num;
mod option;
mod pyfmt;
mod strs;
mod sys;

use crate::value::{self, Dict, Host, RtError, RtResult, Str, Value};

use num::{b_abs, b_bin, b_float, b_hex, b_int, b_oct, b_pow, b_round};
use option::b_option;
pub use strs::{METHODS as STR_METHODS, call_method, str_method};
pub use sys::{system_member, system_module_name};

pub(crate) fn arg<'a>(
    args: &'a [Value],
    kwargs: &'a [(Str, Value)],
    i: usize,
    name: &str,
) -> Option<&'a Value> {
    // a keyword wins over the positional argument at its place, as upstream's runtime reads
    // a builtin's arguments
    kwargs
        .iter()
        .find(|(k, _)| &**k == name)
        .map(|(_, v)| v)
        .or_else(|| args.get(i))
}

pub(crate) fn req<'a>(
    args: &'a [Value],
    kwargs: &'a [(Str, Value)],
    i: usize,
    name: &str,
    f: &str,
) -> RtResult<&'a Value> {
    arg(args, kwargs, i, name)
        .ok_or_else(|| RtError::ty(format!("{f}() missing required argument '{name}'")))
}

pub(crate) fn str_arg(
    args: &[Value],
    kwargs: &[(Str, Value)],
    i: usize,
    name: &str,
    f: &str,
) -> RtResult<Str> {
    match req(args, kwargs, i, name, f)? {
        Value::Str(s) => Ok(s.clone()),
        other => Err(RtError::ty(format!(
            "{f}() argument '{name}' must be str, not {}",
            other.type_name()
        ))),
    }
}

/// A string argument as upstream's runtime reads it for the system modules and for
/// `replace`/`removeprefix`/`removesuffix`: any other value (None, Undefined, a number through
/// `any`) is the empty string; only a missing one is an error.
pub(crate) fn text_arg(
    args: &[Value],
    kwargs: &[(Str, Value)],
    i: usize,
    name: &str,
    f: &str,
) -> RtResult<Str> {
    Ok(match req(args, kwargs, i, name, f)? {
        Value::Str(s) => s.clone(),
        _ => Str::from(""),
    })
}

/// Global builtin by name.
pub fn lookup(name: &str) -> Option<Value> {
    let f: value::NativeFn = match name {
        "print" => b_print,
        "len" => b_len,
        "sum" => b_sum,
        "reduce" => b_reduce,
        "max" => b_max,
        "min" => b_min,
        "abs" => b_abs,
        "int" => b_int,
        "float" => b_float,
        "str" => b_str,
        "bool" => b_bool,
        "list" => b_list,
        "dict" => b_dict,
        "typeof" => b_typeof,
        "option" => b_option,
        "multiplyof" => b_multiplyof,
        "isunique" => b_isunique,
        "sorted" => b_sorted,
        "range" => b_range,
        "zip" => b_zip,
        "all_true" => b_all,
        "any_true" => b_any,
        "ord" => b_ord,
        "hex" => b_hex,
        "oct" => b_oct,
        "bin" => b_bin,
        "round" => b_round,
        "pow" => b_pow,
        "isnullish" => b_isnullish,
        _ => return None,
    };
    Some(Value::native(leak_name(name), f))
}

fn leak_name(name: &str) -> &'static str {
    // names come from the fixed table above; map back to static strings
    match name {
        "print" => "print",
        "len" => "len",
        // the evaluator recognises `for x in range(n)` by this name (and counts lazily)
        "range" => "range",
        // `sum([...])` over a comprehension is summed as it runs (no temporary list)
        "sum" => "sum",
        _ => "builtin",
    }
}

fn b_print(h: &mut dyn Host, args: &[Value], kwargs: &[(Str, Value)]) -> RtResult<Value> {
    // upstream accepts `sep` and ignores it: the values are always joined by a space
    let sep = " ";
    let end = kwargs
        .iter()
        .find(|(k, _)| &**k == "end")
        .map(|(_, v)| value::to_str(v))
        .unwrap_or_else(|| "\n".into());
    let s: Vec<String> = args.iter().map(value::to_str).collect();
    h.print(&format!("{}{}", s.join(sep), end));
    Ok(Value::None)
}

fn b_len(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    Ok(Value::Int(req(args, kw, 0, "inval", "len")?.len()? as i64))
}

fn b_sum(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let it = req(args, kw, 0, "iterable", "sum")?;
    let mut acc = arg(args, kw, 1, "start").cloned().unwrap_or(Value::Int(0));
    if matches!(acc, Value::Str(_)) && matches!(it, Value::List(_)) {
        return Err(RtError::eval("sum() can't sum strings"));
    }
    // a list is summed in place (no copy of a possibly large argument)
    if let Value::List(l) = it {
        for x in l.iter() {
            acc = value::binary(value::BinOp::Add, &acc, x)?;
        }
        return Ok(acc);
    }
    // upstream sums lists only; anything else (None, a dict, a string, a number) is Undefined
    Ok(Value::Undefined)
}

/// `reduce(function, iterable, initial)`: folds the items left to right with `function(acc, item)`.
fn b_reduce(h: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let f = req(args, kw, 0, "function", "reduce")?.clone();
    let mut items = req(args, kw, 1, "iterable", "reduce")?
        .iter_items()?
        .into_iter();
    let mut acc = match arg(args, kw, 2, "initial") {
        Some(v) => v.clone(),
        None => items
            .next()
            .ok_or_else(|| RtError::ty("reduce() of empty iterable with no initial value"))?,
    };
    for x in items {
        acc = h.call(&f, &[acc, x], &[])?;
    }
    Ok(acc)
}

fn minmax(args: &[Value], want: std::cmp::Ordering, f: &str) -> RtResult<Value> {
    // upstream's words: the argument count, then what a single argument is
    let items = match args {
        [] => {
            return Err(RtError::eval(format!(
                "{f}() takes exactly one argument (0 given)"
            )));
        }
        [a] => {
            let kind = match a {
                Value::List(_) => "list",
                Value::Str(_) => "str",
                Value::Dict(_) | Value::Schema(_) => "dict",
                _ => {
                    return Err(RtError::eval(format!(
                        "{} object is not iterable",
                        a.type_name()
                    )));
                }
            };
            let items = a.iter_items()?;
            if items.is_empty() {
                return Err(RtError::eval(format!("arg is an empty {kind}")));
            }
            items
        }
        _ => args.to_vec(),
    };
    // upstream compares every item, the first one included (with itself), as `x > best`
    // (`x < best` for min): a dict, None or Undefined fails even alone
    let op = if want == std::cmp::Ordering::Greater {
        ">"
    } else {
        "<"
    };
    let Some(mut best) = items.first().cloned() else {
        return Err(RtError::eval(format!("{f}() arg is an empty sequence")));
    };
    for x in items {
        let Ok(o) = value::ops_cmp(&x, &best) else {
            // (lists compare item by item: upstream names the first pair that does not)
            let (a, b) = incomparable(&x, &best);
            return Err(RtError::eval(format!(
                "'{op}' not supported between instances of '{}' and '{}'",
                a.type_name(),
                b.type_name()
            )));
        };
        if o == want {
            best = x;
        }
    }
    Ok(best)
}

/// The pair of values that makes comparing `a` with `b` fail: the first unequal items of two
/// lists that do not compare, however deep; else `a` and `b` themselves.
fn incomparable<'v>(a: &'v Value, b: &'v Value) -> (&'v Value, &'v Value) {
    if let (Value::List(x), Value::List(y)) = (a, b) {
        for (p, q) in x.iter().zip(y.iter()) {
            if p == q {
                continue;
            }
            if value::ops_cmp(p, q).is_err() {
                return incomparable(p, q);
            }
            break;
        }
    }
    (a, b)
}

fn b_max(_: &mut dyn Host, args: &[Value], _: &[(Str, Value)]) -> RtResult<Value> {
    minmax(args, std::cmp::Ordering::Greater, "max")
}
fn b_min(_: &mut dyn Host, args: &[Value], _: &[(Str, Value)]) -> RtResult<Value> {
    minmax(args, std::cmp::Ordering::Less, "min")
}

fn b_str(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    Ok(match arg(args, kw, 0, "x") {
        Some(v) => Value::from(value::to_str(v)),
        None => Value::str(""),
    })
}

fn b_bool(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    match arg(args, kw, 0, "x") {
        Some(v) => Ok(Value::Bool(v.truthy())),
        None => Err(RtError::eval("bool() takes exactly one argument (0 given)")),
    }
}

fn b_list(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    Ok(match arg(args, kw, 0, "x") {
        // upstream's list() of a string steps through its bytes, taking the nth character:
        // past the first non-ASCII one it runs out of characters (its failed unwrap)
        Some(Value::Str(s)) if !s.is_ascii() => {
            return Err(RtError::eval("called `Option::unwrap()` on a `None` value"));
        }
        Some(v @ (Value::None | Value::Undefined)) => {
            return Err(RtError::eval(format!(
                "'{}' object is not iterable",
                v.type_name()
            )));
        }
        Some(v) => Value::from(v.iter_items()?),
        None => Value::from(Vec::new()),
    })
}

fn b_dict(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let mut d = Dict::new();
    if let Some(v) = args.first() {
        match v {
            Value::Dict(_) | Value::Schema(_) => {
                for (k, x) in &v.as_dict().unwrap().map {
                    d.map.insert(k.clone(), x.clone());
                }
            }
            Value::List(_) | Value::Str(_) => {
                // upstream's dict() of a sequence: every element must be a pair (in order,
                // the first that is not fails), then the first element keys the second and
                // the rest are dropped
                let items = v.iter_items()?;
                for (i, p) in items.iter().enumerate() {
                    let n = match p {
                        Value::List(_) | Value::Str(_) | Value::Dict(_) | Value::Schema(_) => {
                            p.iter_items()?.len()
                        }
                        other => {
                            return Err(RtError::eval(format!(
                                "'{}' object is not iterable",
                                other.type_name()
                            )));
                        }
                    };
                    if n != 2 {
                        return Err(RtError::eval(format!(
                            "dictionary update sequence element #{i} has length {n}; 2 is required"
                        )));
                    }
                }
                match items.as_slice() {
                    [] => {}
                    [_] => {
                        return Err(RtError::eval("called `Option::unwrap()` on a `None` value"));
                    }
                    [k, v, ..] => {
                        d.map.insert(Str::from(value::to_str(k)), v.clone());
                    }
                }
            }
            other => {
                return Err(RtError::eval(format!(
                    "'{}' object is not iterable",
                    other.type_name()
                )));
            }
        }
    }
    for (k, v) in kw {
        d.map.insert(k.clone(), v.clone());
    }
    Ok(Value::from(d))
}

fn b_typeof(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let v = req(args, kw, 0, "x", "typeof")?;
    let full = arg(args, kw, 1, "full_name").is_some_and(|v| v.truthy());
    Ok(Value::from(match v {
        Value::Schema(s) if full && !s.pkg.is_empty() && &*s.pkg != "__main__" => {
            format!("{}.{}", s.pkg, s.name)
        }
        Value::Schema(s) => s.name.to_string(),
        Value::None => "None".into(),
        Value::Undefined => "UndefinedType".into(),
        other => other.type_name(),
    }))
}

fn b_multiplyof(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let a = req(args, kw, 0, "a", "multiplyof")?
        .as_int()
        .ok_or_else(|| RtError::ty("multiplyof() expects int arguments"))?;
    let b = req(args, kw, 1, "b", "multiplyof")?
        .as_int()
        .ok_or_else(|| RtError::ty("multiplyof() expects int arguments"))?;
    // upstream's remainder: its arithmetic panics as the error message
    match a.checked_rem(b) {
        Some(r) => Ok(Value::Bool(r == 0)),
        None if b == 0 => Err(RtError::eval(
            "attempt to calculate the remainder with a divisor of zero",
        )),
        None => Err(RtError::eval(
            "attempt to calculate the remainder with overflow",
        )),
    }
}

fn b_isunique(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let v = req(args, kw, 0, "inval", "isunique")?;
    // a value that is no list, dict or instance (a string too) is not unique, as upstream
    if !matches!(v, Value::List(_) | Value::Dict(_) | Value::Schema(_)) {
        return Ok(Value::Bool(false));
    }
    let items = v.iter_items()?;
    for i in 0..items.len() {
        for j in 0..i {
            if items[i] == items[j] {
                return Ok(Value::Bool(false));
            }
        }
    }
    Ok(Value::Bool(true))
}

fn b_sorted(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let v = req(args, kw, 0, "inval", "sorted")?;
    // upstream sorts strings, lists and dicts only (None and Undefined included)
    if !matches!(
        v,
        Value::Str(_) | Value::List(_) | Value::Dict(_) | Value::Schema(_)
    ) {
        return Err(RtError::eval("sorted only for str|list|dict type"));
    }
    let mut items = v.iter_items()?;
    let reverse = arg(args, kw, 1, "reverse").is_some_and(|v| v.truthy());
    let mut err = None;
    // upstream sorts descending with the comparison turned around (not by reversing the
    // ascending result): equal items keep their order and errors name the types swapped
    items.sort_by(|a, b| {
        let o = if reverse {
            value::sort_cmp(b, a)
        } else {
            value::sort_cmp(a, b)
        };
        o.unwrap_or_else(|e| {
            err.get_or_insert(e);
            std::cmp::Ordering::Equal
        })
    });
    if let Some(e) = err {
        return Err(e);
    }
    Ok(Value::from(items))
}

fn b_range(_: &mut dyn Host, args: &[Value], _: &[(Str, Value)]) -> RtResult<Value> {
    // an argument that is no integer makes upstream's range() Undefined (its resolver
    // rejects the ones it can see)
    let Some(ints) = args.iter().map(Value::as_int).collect::<Option<Vec<i64>>>() else {
        return Ok(Value::Undefined);
    };
    let (start, stop, step) = match ints.len() {
        1 => (0, ints[0], 1),
        2 => (ints[0], ints[1], 1),
        3 => (ints[0], ints[1], ints[2]),
        // upstream's range() without arguments is Undefined
        0 => return Ok(Value::Undefined),
        _ => return Err(RtError::ty("range expected 1 to 3 arguments")),
    };
    if step == 0 {
        return Err(RtError::eval("range() step argument must not be zero"));
    }
    let n = if step > 0 {
        (stop as i128 - start as i128 + step as i128 - 1) / step as i128
    } else {
        (start as i128 - stop as i128 - step as i128 - 1) / -(step as i128)
    };
    crate::limits::check_items(n.max(0) as usize, "range()")?;
    let mut out = Vec::with_capacity(n.clamp(0, 1 << 24) as usize);
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        out.push(Value::Int(i));
        // upstream's counter wraps past the 64-bit ends and goes on from the other side, so
        // the count above may be short: the item limit is checked as the list grows
        if out.len() % (1 << 16) == 0 {
            crate::limits::check_items(out.len(), "range()")?;
        }
        i = i.wrapping_add(step);
    }
    Ok(Value::from(out))
}

fn b_zip(_: &mut dyn Host, args: &[Value], _: &[(Str, Value)]) -> RtResult<Value> {
    // (None is no empty iterable here, unlike in a loop)
    if let Some(a) = args.iter().find(|a| a.is_none_or_undefined()) {
        return Err(RtError::eval(format!(
            "'{}' object is not iterable",
            a.type_name()
        )));
    }
    let lists: Vec<Vec<Value>> = args
        .iter()
        .map(|a| a.iter_items())
        .collect::<RtResult<_>>()?;
    let n = lists.iter().map(Vec::len).min().unwrap_or(0);
    Ok(Value::from(
        (0..n)
            .map(|i| Value::from(lists.iter().map(|l| l[i].clone()).collect::<Vec<_>>()))
            .collect::<Vec<_>>(),
    ))
}

/// What all_true/any_true look at: a list's items or a dict's values; anything else (a
/// string, None, a number) is false for both, as upstream.
fn truth_items(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::List(l) => Some(l.to_vec()),
        Value::Dict(d) => Some(d.map.values().cloned().collect()),
        Value::Schema(s) => Some(s.attrs.map.values().cloned().collect()),
        _ => None,
    }
}

fn b_all(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let v = req(args, kw, 0, "inval", "all_true")?;
    Ok(Value::Bool(
        truth_items(v).is_some_and(|xs| xs.iter().all(Value::truthy)),
    ))
}
fn b_any(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    let v = req(args, kw, 0, "inval", "any_true")?;
    Ok(Value::Bool(
        truth_items(v).is_some_and(|xs| xs.iter().any(Value::truthy)),
    ))
}
fn b_ord(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    // upstream's runtime gives Undefined for anything but a string
    let Value::Str(s) = req(args, kw, 0, "c", "ord")? else {
        return Ok(Value::Undefined);
    };
    let mut it = s.chars();
    match (it.next(), it.next()) {
        (Some(c), None) => Ok(Value::Int(c as i64)),
        // upstream counts the length in bytes here (one character is accepted either way)
        _ => Err(RtError::eval(format!(
            "ord() expected string of length 1, but string of length {} found",
            s.len()
        ))),
    }
}
fn b_isnullish(_: &mut dyn Host, args: &[Value], kw: &[(Str, Value)]) -> RtResult<Value> {
    Ok(Value::Bool(
        req(args, kw, 0, "x", "isnullish")?.is_none_or_undefined(),
    ))
}

/// `v[lo:hi:step]` for lists and strings.
pub fn slice(v: &Value, lo: Option<i64>, hi: Option<i64>, step: Option<i64>) -> RtResult<Value> {
    let step = step.unwrap_or(1);
    if step == 0 {
        return Err(RtError::eval("slice step cannot be zero"));
    }
    let idx = |n: i64| -> Vec<usize> {
        let norm = |x: i64, def: i64| -> i64 {
            let x = if x < 0 { x + n } else { x };
            if step > 0 {
                x.clamp(0, n)
            } else {
                x.clamp(-1, n - 1)
            }
            .min(if step > 0 { n } else { def.max(n - 1) })
        };
        let (start, stop) = if step > 0 {
            (
                lo.map(|x| norm(x, 0)).unwrap_or(0),
                hi.map(|x| norm(x, n)).unwrap_or(n),
            )
        } else {
            (
                lo.map(|x| norm(x, n - 1)).unwrap_or(n - 1),
                hi.map(|x| norm(x, -1)).unwrap_or(-1),
            )
        };
        let mut out = Vec::new();
        let mut i = start;
        while (step > 0 && i < stop) || (step < 0 && i > stop) {
            if i >= 0 && i < n {
                out.push(i as usize);
            }
            i += step;
        }
        out
    };
    match v {
        Value::List(l) => Ok(Value::from(
            idx(l.len() as i64)
                .into_iter()
                .map(|i| l[i].clone())
                .collect::<Vec<_>>(),
        )),
        Value::Str(s) => {
            let chars: Vec<char> = s.chars().collect();
            Ok(Value::from(
                idx(chars.len() as i64)
                    .into_iter()
                    .map(|i| chars[i])
                    .collect::<String>(),
            ))
        }
        other => Err(RtError::eval(format!(
            "invalid slice object {}",
            other.type_name()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) struct NoHost(pub String);
    impl Host for NoHost {
        fn option(&mut self, _: &str) -> Option<Value> {
            None
        }
        fn call(&mut self, _: &Value, _: &[Value], _: &[(Str, Value)]) -> RtResult<Value> {
            Err(RtError::eval("no calls"))
        }
        fn print(&mut self, t: &str) {
            self.0.push_str(t)
        }
        fn set_output(&mut self, _: String) {}
        fn workdir(&self) -> std::path::PathBuf {
            ".".into()
        }
        fn mod_root(&self) -> std::path::PathBuf {
            ".".into()
        }
        fn plugin(&mut self, m: &str, _: &str, _: &[Value], _: &[(Str, Value)]) -> RtResult<Value> {
            Err(RtError::eval(format!("no plugin {m}")))
        }
    }

    fn call(name: &str, args: Vec<Value>) -> RtResult<Value> {
        let Some(Value::Func(f)) = lookup(name) else {
            panic!("no builtin {name}")
        };
        let value::Func::Native { f, .. } = &*f else {
            unreachable!()
        };
        f(&mut NoHost(String::new()), &args, &[])
    }

    #[test]
    fn numeric_builtins() {
        assert_eq!(
            call("int", vec![Value::str("0x10"), Value::Int(16)]).unwrap(),
            Value::Int(16)
        );
        assert_eq!(call("int", vec![Value::Float(3.9)]).unwrap(), Value::Int(3));
        assert_eq!(
            call("sum", vec![Value::from(vec![Value::Int(1), Value::Int(2)])]).unwrap(),
            Value::Int(3)
        );
        assert_eq!(
            call("max", vec![Value::Int(1), Value::Int(5), Value::Int(2)]).unwrap(),
            Value::Int(5)
        );
        assert!(call("max", vec![Value::from(Vec::new())]).is_err());
        assert_eq!(call("abs", vec![Value::Int(-3)]).unwrap(), Value::Int(3));
        assert_eq!(
            call("multiplyof", vec![Value::Int(10), Value::Int(5)]).unwrap(),
            Value::Bool(true)
        );
    }

    #[test]
    fn collection_builtins() {
        let l = Value::from(vec![Value::Int(3), Value::Int(1), Value::Int(2)]);
        assert_eq!(
            value::to_str(&call("sorted", vec![l.clone()]).unwrap()),
            "[1, 2, 3]"
        );
        assert_eq!(call("isunique", vec![l]).unwrap(), Value::Bool(true));
        assert_eq!(
            value::to_str(
                &call("range", vec![Value::Int(0), Value::Int(6), Value::Int(2)]).unwrap()
            ),
            "[0, 2, 4]"
        );
        assert_eq!(
            value::to_str(&slice(&Value::str("Hello"), Some(-1), None, None).unwrap()),
            "o"
        );
        assert_eq!(
            value::to_str(
                &slice(
                    &Value::from(vec![Value::Int(1), Value::Int(2), Value::Int(3)]),
                    None,
                    None,
                    Some(-1)
                )
                .unwrap()
            ),
            "[3, 2, 1]"
        );
    }

    #[test]
    fn print_goes_to_host() {
        let Some(Value::Func(f)) = lookup("print") else {
            panic!()
        };
        let value::Func::Native { f, .. } = &*f else {
            unreachable!()
        };
        let mut h = NoHost(String::new());
        f(&mut h, &[Value::str("a"), Value::Int(1)], &[]).unwrap();
        assert_eq!(h.0, "a 1\n");
    }
}
