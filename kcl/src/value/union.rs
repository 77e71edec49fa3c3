//! Union of values: `|`, repeated `:` config entries, `=` and `+=` entries merged into a config
//! (with upstream's conflict rule), and the checks a union makes before it merges.

use std::rc::Rc;

use super::ops::{BinOp, binary, equal};
use super::{ConfigOp, Dict, RtError, RtResult, Value};

/// Merge `b` into `a` the way `|` and repeated `:` entries do. With `check_conflict`, two
/// different non-config values for one key are an error (the `:` rule).
pub fn union(a: &Value, b: &Value, check_conflict: bool) -> RtResult<Value> {
    let mut out = a.clone();
    union_into::<RtError>(&mut out, b, check_conflict, 0, None, None)?;
    Ok(out)
}

/// Re-creates a schema instance with more config merged into the config it was built from
/// (`None`: it cannot be rebuilt, its attributes are merged instead). The evaluator supplies
/// it so a dict merged into a nested instance is coerced and checked like a fresh instance.
/// (`rb(inst, None)` makes `inst`'s schema again from `inst`'s config.)
pub type Rebuild<'a, E> = &'a dyn Fn(&Value, &Value) -> Result<Option<Value>, E>;

/// [`union`] consuming `a` (updated in place when nothing else shares it) that rebuilds the
/// schema instances it merges into through `rb`.
pub fn union_with<E: From<RtError>>(
    mut a: Value,
    b: &Value,
    check_conflict: bool,
    rb: Rebuild<'_, E>,
) -> Result<Value, E> {
    union_into(&mut a, b, check_conflict, 0, Some(rb), None)?;
    Ok(a)
}

fn union_into<E: From<RtError>>(
    a: &mut Value,
    b: &Value,
    check: bool,
    depth: usize,
    rb: Option<Rebuild<'_, E>>,
    path: Option<&Path<'_>>,
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
                    union_into(&mut x[i], v, check, depth + 1, rb, path)?;
                } else {
                    x.push(v.clone());
                }
            }
            Ok(())
        }
        (Value::Dict(_) | Value::Schema(_), Value::Dict(_) | Value::Schema(_)) => {
            if check && matches!(&*a, Value::Schema(_)) {
                check_union_at(a, b, depth, path)?;
            }
            if let (Some(rb), Value::Schema(_)) = (rb, &*a)
                && let Some(v) = rb(a, b)?
            {
                *a = v;
                return Ok(());
            }
            // an instance merged into a plain dict: the instance made again from both, with
            // the dict's keys first
            if let (Some(rb), Value::Dict(_), Value::Schema(bs)) = (rb, &*a, b)
                && let Some(v) = dict_then_instance(a, bs, check, depth, rb, path)?
            {
                *a = v;
                return Ok(());
            }
            // (without a way to rebuild it: its values override, what it was configured with
            // `:` merges into dicts, the dict's other keys stay)
            if let (Value::Dict(_), Value::Schema(bs)) = (&*a, b) {
                let unified = bs.unified_config();
                let ad = a.dict_mut().unwrap();
                return lay_attrs_over(ad, bs, |ad, k, v| match ad.map.get_mut(k) {
                    Some(cur) if unified.map.contains_key(k) && cur.is_config() => {
                        let at = Path::under(path, k);
                        union_into(cur, v, check, depth + 1, rb, Some(&at))
                    }
                    _ => {
                        ad.map.insert(k.clone(), v.clone());
                        Ok(())
                    }
                });
            }
            let bd = b.as_dict().unwrap();
            let ad = a.dict_mut().unwrap();
            for (k, v) in &bd.map {
                let (op, index) = bd.op_of_key(k);
                merge_entry_in(ad, k, v, op, index, check, depth, rb, path)?;
            }
            Ok(())
        }
        // None or Undefined unified with anything is the other side, even None with
        // Undefined (upstream's order of the two tests); unifying a value with None or
        // Undefined keeps the value (`{x: 1, x: None}` is `{x: 1}`)
        (Value::None | Value::Undefined, _) => {
            *a = b.clone();
            Ok(())
        }
        (_, Value::Undefined | Value::None) => Ok(()),
        // a list and a config do not merge, even where no conflict is checked (a schema's
        // default under its config's entry)
        (Value::List(_), Value::Dict(_) | Value::Schema(_))
        | (Value::Dict(_) | Value::Schema(_), Value::List(_)) => Err(RtError::eval(format!(
            "union failure, expect \"{}\", got \"{}\"",
            a.type_name(),
            b.type_name()
        ))
        .into()),
        _ => {
            *a = b.clone();
            Ok(())
        }
    }
}

/// The attributes of instance `bs` laid over the dict `ad` by `merge`, in the instance's
/// order; an attribute it leaves unset stays a key (as upstream's: `-S` finds it) and never
/// replaces the dict's value.
fn lay_attrs_over<E>(
    ad: &mut super::Dict,
    bs: &super::SchemaInst,
    mut merge: impl FnMut(&mut super::Dict, &super::Str, &Value) -> Result<(), E>,
) -> Result<(), E> {
    for (k, v) in &bs.attrs.map {
        if matches!(v, Value::Undefined) {
            if !ad.map.contains_key(k) {
                ad.map.insert(k.clone(), Value::Undefined);
            }
            continue;
        }
        merge(ad, k, v)?;
    }
    Ok(())
}

/// An instance `bs` merged into the plain dict `a`, as upstream does it: the instance's
/// values go into the dict (what it was configured with `:` as a union, conflicts checked as
/// between dicts; the rest as overrides; an attribute it leaves undefined keeps the dict's
/// value, or takes its place), then the schema is made again from the result, in the
/// schema's order (`|`, at its top or under a key). `None` when the instance cannot be made
/// again (a config's repeated key: the attributes are laid over the dict, in its order).
fn dict_then_instance<E: From<RtError>>(
    a: &mut Value,
    bs: &super::SchemaInst,
    check: bool,
    depth: usize,
    rb: Rebuild<'_, E>,
    path: Option<&Path<'_>>,
) -> Result<Option<Value>, E> {
    // (an instance that cannot be made again is left before the dict is touched, so the
    // caller's plain union does not merge its values twice)
    let (Some(origin), Some(_)) = (&bs.origin, &bs.ty) else {
        return Ok(None);
    };
    let ad = a.dict_mut().unwrap();
    lay_attrs_over(ad, bs, |ad, k, v| {
        let unified = origin
            .keys
            .iter()
            .any(|(ok, replaced)| ok == k && !replaced);
        // (an attribute it was configured with `+=` appends to the dict's value)
        let op = if unified {
            ConfigOp::Union
        } else if bs.attrs.op_of_key(k).0 == ConfigOp::Insert {
            ConfigOp::Insert
        } else {
            ConfigOp::Override
        };
        merge_entry_in(ad, k, v, op, None, check, depth, Some(rb), path)
    })?;
    let keys: super::ConfigKeys = ad
        .map
        .iter()
        .filter(|(_, v)| !matches!(v, Value::Undefined))
        .map(|(k, _)| (k.clone(), ad.op_of_key(k).0 != ConfigOp::Union))
        .collect();
    let inst = super::SchemaInst {
        name: bs.name.clone(),
        pkg: bs.pkg.clone(),
        attrs: ad.clone(),
        ty: bs.ty.clone(),
        span: bs.span,
        origin: Some(Rc::new(super::Origin {
            keys,
            args: origin.args.clone(),
            kwargs: origin.kwargs.clone(),
            open: true,
        })),
    };
    // (`None` merges nothing: the instance is made again from its config, in the schema's
    // order: under a key of `|` as at its top)
    rb(&Value::Schema(Rc::new(inst)), &Value::None)
}

/// `dict | instance` (`|` at run time): the instance made again from both in the schema's
/// order (see [`dict_then_instance`]); a plain union when it cannot be.
pub fn union_dict_instance<E: From<RtError>>(
    mut a: Value,
    b: &Value,
    rb: Rebuild<'_, E>,
) -> Result<Value, E> {
    if let (Value::Dict(_), Value::Schema(bs)) = (&a, b)
        && let Some(v) = dict_then_instance(&mut a, bs, true, 0, rb, None)?
    {
        return Ok(v);
    }
    union_with(a, b, true, rb)
}

/// Apply one config entry `k <op> v` to `d` (`check`: `:` conflicts are errors).
pub fn merge_entry(
    d: &mut Dict,
    k: &super::Str,
    v: &Value,
    op: ConfigOp,
    index: Option<i64>,
    check: bool,
) -> RtResult<()> {
    undefined_indexed(d, k, op, index)?;
    merge_entry_in::<RtError>(d, k, v, op, index, check, 0, None, None)
}

/// In one config, an attribute set to Undefined is no list at all for `a[i]: v` (merged from
/// another dict it counts as an empty one: see `merge_entry_in`).
fn undefined_indexed(d: &Dict, k: &str, op: ConfigOp, index: Option<i64>) -> RtResult<()> {
    // (the attribute is looked up only for an indexed entry: every config entry passes here)
    if let (ConfigOp::Union, Some(i)) = (op, index)
        && let Some(Value::Undefined) = d.map.get(k)
    {
        return Err(RtError::eval(format!(
            "only list attribute can be union value with the index {}",
            i as i32
        )));
    }
    Ok(())
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
    undefined_indexed(d, k, op, index)?;
    merge_entry_in(d, k, v, op, index, check, 0, Some(rb), None)
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
    path: Option<&Path<'_>>,
) -> Result<(), E> {
    // upstream takes a config key's index as a 32-bit integer
    let index = index.map(|i| i64::from(i as i32));
    // the key's operator becomes this entry's; its index only when the entry has one
    // (upstream keeps the last index given: merged later, `a[0] += [3]` then `a = [9]`
    // overrides item 0)
    let kept = index.or_else(|| d.op_of_key(k).1);
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
            d.set_op(k.clone(), ConfigOp::Override, kept);
        }
        ConfigOp::Insert => {
            let cur = d.map.get(k).cloned().unwrap_or(Value::None);
            let new = match (&cur, v) {
                (Value::List(x), Value::List(y)) => {
                    let mut x = (**x).clone();
                    match index {
                        Some(i) => {
                            let idx = if i < 0 { x.len() as i64 + i } else { i };
                            if idx < 0 {
                                return Err(RtError::eval(format!(
                                    "index out of bounds: the len is {} but the index is {i}",
                                    x.len()
                                ))
                                .into());
                            }
                            // (upstream fails inserting an item there: inserting none is
                            // no failure)
                            if idx as usize > x.len() && !y.is_empty() {
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
                    Some(i) if i > 0 && matches!(v, Value::List(y) if !y.is_empty()) => {
                        return Err(RtError::eval(format!(
                            "insertion index (is {i}) should be <= len (is 0)"
                        ))
                        .into());
                    }
                    _ => v.clone(),
                },
                // anything else under `+=` meets upstream's own borrow failure (its message
                // is the text upstream prints: a program relying on it is wrong either way)
                (cur, _) if !cur.is_none_or_undefined() => {
                    return Err(RtError::eval("RefCell already mutably borrowed").into());
                }
                _ => binary(BinOp::Add, &cur, v)?,
            };
            d.map.insert(k.clone(), new);
            // still an insertion when this dict is merged into another later (the last
            // entry's operator is the key's, as upstream's: `l = [1]` then `l += [2]` appends
            // both to what `l` holds there)
            d.set_op(k.clone(), ConfigOp::Insert, kept);
        }
        ConfigOp::Union if index.is_some() => {
            let i = index.unwrap_or_default();
            let l = match d.map.get_mut(k) {
                Some(Value::List(l)) if !l.is_empty() => Rc::make_mut(l),
                None | Some(Value::Undefined | Value::List(_)) => {
                    return Err(RtError::eval(format!(
                        "only non-empty list attribute can be union value with the index {i}"
                    ))
                    .into());
                }
                Some(_) => {
                    return Err(RtError::eval(format!(
                        "only list attribute can be union value with the index {i}"
                    ))
                    .into());
                }
            };
            let idx = if i < 0 { l.len() as i64 + i } else { i };
            if idx < 0 || idx as usize >= l.len() {
                return Err(RtError::eval(format!(
                    "index out of bounds: the len is {} but the index is {}",
                    l.len(),
                    idx as u64
                ))
                .into());
            }
            let cur = &mut l[idx as usize];
            let ki = format!("{k}[{i}]");
            let at = Path::under(path, &ki);
            if check && !subsume(v, cur) {
                return Err(conflict_at(&ki, &at, cur, v).into());
            }
            union_into(cur, v, check, depth + 1, rb, Some(&at))?;
            d.set_op(k.clone(), ConfigOp::Union, kept);
        }
        ConfigOp::Union => match d.map.get_mut(k) {
            Some(cur) => {
                let at = Path::under(path, k);
                if check && !subsume(v, cur) {
                    return Err(conflict_at(k, &at, cur, v).into());
                }
                union_into(cur, v, check, depth + 1, rb, Some(&at))?;
                // a key's operator is its last entry's, as upstream's: `a = x` then `a: {..}`
                // merges into (not over) what `a` holds where this dict is merged later
                d.set_op(k.clone(), ConfigOp::Union, kept);
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

/// Where a union stands: the keys from the top of the values being merged down to the one
/// being merged (upstream's "union path", `a.b.c`).
struct Path<'a> {
    up: Option<&'a Path<'a>>,
    key: &'a str,
}

impl<'a> Path<'a> {
    fn under(up: Option<&'a Path<'a>>, key: &'a str) -> Path<'a> {
        Path { up, key }
    }
    fn dotted(&self) -> String {
        match self.up {
            Some(u) => format!("{}.{}", u.dotted(), self.key),
            None => self.key.to_string(),
        }
    }
}

/// [`conflict`] at the union path `at` (ending with `k`).
fn conflict_at(k: &str, at: &Path<'_>, old: &Value, new: &Value) -> RtError {
    conflict_on(k, &at.dotted(), old, new)
}

/// Upstream's conflict error (its first line names the innermost key, its union path the
/// keys down to it).
fn conflict_on(k: &str, path: &str, old: &Value, new: &Value) -> RtError {
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
    if k.is_empty() {
        return RtError::eval(format!("conflicting values between {n} and {}", show(old)));
    }
    RtError::eval(format!(
        "conflicting values on the attribute '{k}' between :\n    {}\nand\n    {n}\nwith union path :\n    {path}\ntry operator '=' to override the attribute, like:\n    {{...}} | {{\n            ...\n            {k} = {n}\n            ...\n    }}",
        show(old)
    ))
}

/// The conflicts a checked union of `b` into `a` would meet, found without changing `a`
/// (an instance is rebuilt from its config, but upstream checks against its values).
pub fn check_union(a: &Value, b: &Value, depth: usize) -> RtResult<()> {
    check_union_at(a, b, depth, None)
}

fn check_union_at(a: &Value, b: &Value, depth: usize, path: Option<&Path<'_>>) -> RtResult<()> {
    check_union_in(a, b, depth, path, false)
}

/// [`check_union_at`]; `of_instances`: `a` and `b` are two instances, whose attributes that
/// are instances on both sides upstream merges unchecked (inside a dict they are checked).
fn check_union_in(
    a: &Value,
    b: &Value,
    depth: usize,
    path: Option<&Path<'_>>,
    of_instances: bool,
) -> RtResult<()> {
    if depth > super::MAX_DEPTH {
        return Ok(());
    }
    match (a, b) {
        (Value::List(x), Value::List(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                check_union_at(p, q, depth + 1, path)?;
            }
            Ok(())
        }
        // an instance merged with an instance takes the other's values; only what the other
        // was configured with `:` must agree
        (Value::Dict(_) | Value::Schema(_), Value::Schema(bs)) => check_union_in(
            a,
            &Value::from(bs.unified_config()),
            depth,
            path,
            matches!(a, Value::Schema(_)),
        ),
        (Value::Dict(_) | Value::Schema(_), Value::Dict(_)) => {
            let (ad, bd) = (a.as_dict().unwrap(), b.as_dict().unwrap());
            for (k, v) in &bd.map {
                if bd.op_of_key(k).0 != ConfigOp::Union {
                    continue;
                }
                if let Some(cur) = ad.map.get(k) {
                    let at = Path::under(path, k);
                    if let (Value::Schema(_), Value::Schema(_)) = (cur, v) {
                        if !of_instances {
                            check_union_at(cur, v, depth + 1, Some(&at))?;
                        }
                        continue;
                    }
                    if !subsume(v, cur) {
                        return Err(conflict_at(k, &at, cur, v));
                    }
                    check_union_at(cur, v, depth + 1, Some(&at))?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
