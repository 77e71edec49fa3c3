//! System modules: base64, base32, math, regex, json, yaml, datetime, net, units, crypto, file,
//! manifests, template, runtime, collection. The data formats are in `codec.rs`, `file` in
//! `file.rs`, `math` and `units` in `math.rs`, `net` in `net.rs`; the small ones are here.

use super::{arg, req, text_arg};
use crate::value::{Host, RtError, RtResult, Str, Value};

const MODULES: &[&str] = &[
    "base64",
    "base32",
    "math",
    "regex",
    "json",
    "yaml",
    "datetime",
    "net",
    "units",
    "crypto",
    "file",
    "manifests",
    "template",
    "runtime",
    "collection",
];

pub fn system_module_name(name: &str) -> Option<&'static str> {
    MODULES.iter().copied().find(|m| *m == name)
}

type R = RtResult<Value>;
type A<'a> = &'a [Value];
type K<'a> = &'a [(Str, Value)];

fn flag(args: A, kw: K, i: usize, name: &str) -> bool {
    arg(args, kw, i, name).is_some_and(|v| v.truthy())
}

macro_rules! natives {
    ($name:expr, { $($k:literal => $f:expr),* $(,)? }) => {
        match $name {
            $($k => Some(Value::native($k, $f)),)*
            _ => None,
        }
    };
}

// after the macro, which they use
mod codec;
mod file;
mod math;
mod net;

use file::resolve;

/// A member of a system module.
pub fn system_member(module: &str, name: &str) -> Option<Value> {
    match module {
        "base64" => codec::base64(name),
        "base32" => codec::base32(name),
        "math" => math::math(name),
        "regex" => natives!(name, {
            "match" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p) = (text_arg(a, k, 0, "string", "match")?, text_arg(a, k, 1, "pattern", "match")?);
                // unanchored, as upstream's `is_match`
                Ok(Value::Bool(compile(&p)?.is_match(&s).unwrap_or(false)))
            },
            "search" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p) = (text_arg(a, k, 0, "string", "search")?, text_arg(a, k, 1, "pattern", "search")?);
                Ok(Value::Bool(compile(&p)?.is_match(&s).map_err(|e| RtError::eval(e.to_string()))?))
            },
            "compile" => |_: &mut dyn Host, a: A, k: K| -> R {
                let p = text_arg(a, k, 0, "pattern", "compile")?;
                Ok(Value::Bool(compile(&p).is_ok()))
            },
            "replace" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p, r) = (text_arg(a, k, 0, "string", "replace")?, text_arg(a, k, 1, "pattern", "replace")?, text_arg(a, k, 2, "replace", "replace")?);
                let count = opt_int_arg(a, k, 3, "count")?.unwrap_or(0);
                let re = compile(&p)?;
                Ok(Value::from(re.replacen(&s, count.max(0) as usize, &*r).into_owned()))
            },
            "split" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p) = (text_arg(a, k, 0, "string", "split")?, text_arg(a, k, 1, "pattern", "split")?);
                let maxsplit = opt_int_arg(a, k, 2, "maxsplit")?.unwrap_or(0);
                let re = compile(&p)?;
                // upstream's loop: search again from the end of each match (an empty match does
                // not move it on), stop at `maxsplit` pieces and drop the rest
                let mut out = Vec::new();
                let mut pos = 0;
                while let Some(m) = re.find_from_pos(&s, pos).map_err(|e| RtError::eval(e.to_string()))? {
                    if maxsplit <= 0 && m.end() == pos {
                        // upstream loops here forever; say so instead
                        return Err(RtError::eval(format!(
                            "regex.split: the pattern '{p}' matches the empty string at position {pos}, so splitting never ends; give a maxsplit"
                        )));
                    }
                    out.push(Value::str(&s[pos..m.start()]));
                    pos = m.end();
                    if maxsplit > 0 && out.len() >= maxsplit as usize {
                        return Ok(Value::from(out));
                    }
                }
                out.push(Value::str(&s[pos..]));
                Ok(Value::from(out))
            },
            "findall" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p) = (text_arg(a, k, 0, "string", "findall")?, text_arg(a, k, 1, "pattern", "findall")?);
                let re = compile(&p)?;
                let mut out = Vec::new();
                // (a match the engine gives up on is skipped, as upstream's)
                for c in re.captures_iter(&s).flatten() {
                    // the whole match with at most one group, as upstream
                    if c.len() < 3 {
                        out.push(Value::str(c.get(0).map(|m| m.as_str()).unwrap_or("")));
                    } else {
                        // a group that took no part fails upstream's unwrap, with its text
                        let groups: Option<Vec<Value>> = (1..c.len()).map(|i| c.get(i).map(|m| Value::str(m.as_str()))).collect();
                        let groups = groups.ok_or_else(|| RtError::eval("called `Option::unwrap()` on a `None` value"))?;
                        out.push(Value::from(groups));
                    }
                }
                Ok(Value::from(out))
            },
        }),
        "json" => codec::json(name),
        "yaml" => codec::yaml(name),
        "manifests" => codec::manifests(name),
        "units" => math::units(name),
        "crypto" => natives!(name, {
            "md5" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<md5::Md5>(a, k) },
            "sha1" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha1::Sha1>(a, k) },
            "sha224" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha2::Sha224>(a, k) },
            "sha256" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha2::Sha256>(a, k) },
            "sha384" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha2::Sha384>(a, k) },
            "sha512" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha2::Sha512>(a, k) },
            "blake3" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::from(blake3::hash(&encoded(a, k, "blake3")?).to_hex().to_string())) },
            "uuid" => |_: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(uuid::Uuid::new_v4().to_string())) },
            "filesha256" => |h: &mut dyn Host, a: A, k: K| -> R {
                use sha2::Digest;
                let p = resolve(h, &text_arg(a, k, 0, "filepath", "filesha256")?);
                h.access().check_read("filesha256", &p)?;
                let b = std::fs::read(&p).map_err(|e| RtError::eval(format!("failed to access file '{}': {e}", text_arg(a, k, 0, "filepath", "filesha256").unwrap_or_default())))?;
                Ok(Value::from(hex(&sha2::Sha256::digest(&b))))
            },
        }),
        "datetime" => natives!(name, {
            "now" => |_: &mut dyn Host, a: A, k: K| -> R {
                let fmt = match arg(a, k, 0, "format") {
                    None => "%a %b %d %H:%M:%S %Y".into(),
                    Some(Value::Str(s)) => s.to_string(),
                    Some(_) => String::new(),
                };
                // a bad `%` directive is a formatting error, not a panic (upstream's message)
                let mut out = String::new();
                std::fmt::Write::write_fmt(&mut out, format_args!("{}", chrono::Local::now().format(&fmt)))
                    .map_err(|_| RtError::eval("a Display implementation returned an error unexpectedly: Error"))?;
                Ok(Value::from(out))
            },
            "today" => |_: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(chrono::Local::now().format("%Y-%m-%d %H:%M:%S%.6f").to_string())) },
            "ticks" => |_: &mut dyn Host, _a: A, _k: K| -> R {
                let n = chrono::Utc::now();
                Ok(Value::Float(n.timestamp() as f64 + n.timestamp_subsec_nanos() as f64 * 1e-9))
            },
            "date" => |_: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string())) },
            "validate" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = text_arg(a, k, 0, "date", "validate")?;
                let f = text_arg(a, k, 1, "format", "validate")?;
                let ok = chrono::NaiveDate::parse_from_str(&s, &f).is_ok() || chrono::NaiveDateTime::parse_from_str(&s, &f).is_ok() || chrono::NaiveTime::parse_from_str(&s, &f).is_ok();
                Ok(Value::Bool(ok))
            },
            // upstream's two checks are one parse: chrono's RFC 3339 reader (space or `t` for
            // `T`, a leap second, a `:` in the offset)
            "is_iso8601" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = text_arg(a, k, 0, "date", "is_iso8601")?;
                Ok(Value::Bool(chrono::DateTime::parse_from_rfc3339(&s).is_ok()))
            },
            "is_rfc3339" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = text_arg(a, k, 0, "date", "is_rfc3339")?;
                Ok(Value::Bool(chrono::DateTime::parse_from_rfc3339(&s).is_ok()))
            },
        }),
        "net" => net::net(name),
        "file" => file::file(name),
        "template" => codec::template(name),
        "runtime" => natives!(name, {
            "catch" => |h: &mut dyn Host, a: A, k: K| -> R {
                let f = req(a, k, 0, "func", "catch")?.clone();
                match h.call(&f, &[], &[]) {
                    // upstream returns Undefined (not None) when nothing failed: `== None` is
                    // False and the variable is left out of the output
                    Ok(_) => Ok(Value::Undefined),
                    Err(e) => Ok(Value::from(e.msg)),
                }
            },
        }),
        "collection" => natives!(name, {
            // upstream declares it, but its runtime has no such function: every call fails
            "union_all" => |_: &mut dyn Host, _: A, _: K| -> R {
                Err(RtError::eval("unknown kcl_collection_union_all"))
            },
        }),
        _ => None,
    }
}

/// Upstream's message for a pattern its regex crate refuses: the panic of an `unwrap` on the
/// error, named as that (older) crate's error variants are.
fn regex_error(pattern: &str, e: &fancy_regex::Error) -> String {
    use fancy_regex::{CompileError, Error, ParseError};
    let what = match e {
        Error::ParseError(_, ParseError::GeneralParseError(_)) => "ParseError".to_string(),
        Error::ParseError(_, kind) => format!("{kind:?}"),
        // the inner regex crate's own error (its Debug boxes the parse error's report)
        Error::CompileError(CompileError::InnerError(inner)) => match regex::Regex::new(pattern) {
            Err(re) => format!("InnerError({re:?})"),
            Ok(_) => format!("InnerError({inner:?})"),
        },
        other => format!("{other:?}"),
    };
    format!("called `Result::unwrap()` on an `Err` value: {what}")
}

fn compile(p: &str) -> RtResult<fancy_regex::Regex> {
    // programs call regex functions per item with a handful of patterns: compile each once
    thread_local! {
        static CACHE: std::cell::RefCell<rustc_hash::FxHashMap<String, fancy_regex::Regex>> = Default::default();
    }
    if let Some(r) = CACHE.with(|c| c.borrow().get(p).cloned()) {
        return Ok(r);
    }
    let r = fancy_regex::Regex::new(p).map_err(|e| RtError::eval(regex_error(p, &e)))?;
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() > 256 {
            c.clear();
        }
        c.insert(p.to_string(), r.clone());
    });
    Ok(r)
}

/// An int argument of a system-module function, as upstream's runtime reads it (a bool is
/// its number; anything else is "invalid int value").
pub(super) fn int_arg(a: A, k: K, i: usize, name: &str, f: &str) -> RtResult<i64> {
    opt_int_arg(a, k, i, name)?
        .ok_or_else(|| RtError::ty(format!("{f}() missing required argument '{name}'")))
}

/// An optional int argument: absent is `None`, present and no number "invalid int value".
pub(super) fn opt_int_arg(a: A, k: K, i: usize, name: &str) -> RtResult<Option<i64>> {
    match arg(a, k, i, name) {
        None => Ok(None),
        Some(Value::Int(n)) => Ok(Some(*n)),
        Some(Value::Bool(b)) => Ok(Some(*b as i64)),
        Some(_) => Err(RtError::eval("invalid int value")),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn hash<D: sha2::Digest>(a: A, k: K) -> R {
    Ok(Value::from(hex(&D::digest(encoded(a, k, "hash")?))))
}

/// The bytes a `crypto` function hashes: its `value` in the WHATWG `encoding` named (UTF-8
/// when none is), with upstream's errors for an unknown label and an unmappable character.
fn encoded(a: A, k: K, f: &str) -> RtResult<Vec<u8>> {
    let s = text_arg(a, k, 0, "value", f)?;
    let Some(label) = arg(a, k, 1, "encoding") else {
        return Ok(s.as_bytes().to_vec());
    };
    // upstream's label: lower case, spaces become dashes (so " latin1 " is no label)
    let label = match label {
        Value::Str(l) => l.to_lowercase().replace(' ', "-"),
        _ => String::new(),
    };
    const UNWRAP: &str = "called `Result::unwrap()` on an `Err` value: ";
    let enc = encoding_rs::Encoding::for_label(label.as_bytes())
        .ok_or_else(|| RtError::eval(format!("{UNWRAP}unknown encoding {label}")))?;
    let (bytes, _, unmappable) = enc.encode(&s);
    if unmappable {
        return Err(RtError::eval(format!(
            "{UNWRAP}encoding errors occurred while encoding to {label}"
        )));
    }
    Ok(bytes.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::tests::NoHost;

    fn call(m: &str, f: &str, args: Vec<Value>) -> Value {
        let Some(Value::Func(func)) = system_member(m, f) else {
            panic!("no {m}.{f}")
        };
        let crate::value::Func::Native { f, .. } = &*func else {
            unreachable!()
        };
        f(&mut NoHost(String::new()), &args, &[]).unwrap()
    }

    #[test]
    fn encodings_and_hashes() {
        assert_eq!(
            call("base64", "encode", vec![Value::str("abc")]),
            Value::str("YWJj")
        );
        assert_eq!(
            call("base64", "decode", vec![Value::str("YWJj")]),
            Value::str("abc")
        );
        assert_eq!(
            call("base32", "encode", vec![Value::str("abc")]),
            Value::str("MFRGG===")
        );
        assert_eq!(
            call("crypto", "md5", vec![Value::str("abc")]),
            Value::str("900150983cd24fb0d6963f7d28e17f72")
        );
    }

    #[test]
    fn regex_json_yaml() {
        assert_eq!(
            call(
                "regex",
                "match",
                vec![Value::str("abc123"), Value::str("[a-z]+")]
            ),
            Value::Bool(true)
        );
        // unanchored, as upstream's `is_match`
        assert_eq!(
            call(
                "regex",
                "match",
                vec![Value::str("1abc"), Value::str("[a-z]+")]
            ),
            Value::Bool(true)
        );
        assert_eq!(
            call(
                "regex",
                "match",
                vec![Value::str("1abc"), Value::str("^[a-z]+")]
            ),
            Value::Bool(false)
        );
        let d = call(
            "json",
            "decode",
            vec![Value::str(r#"{"a": [1, 2.5, null]}"#)],
        );
        assert_eq!(
            call("json", "encode", vec![d.clone()]),
            Value::str(r#"{"a": [1, 2.5, null]}"#)
        );
        assert_eq!(
            call("yaml", "encode", vec![d]),
            Value::str("a:\n- 1\n- 2.5\n- null\n")
        );
    }

    #[test]
    fn math_and_net() {
        assert_eq!(
            call("math", "floor", vec![Value::Float(2.7)]),
            Value::Int(2)
        );
        assert_eq!(
            call("net", "is_IP", vec![Value::str("10.0.0.1")]),
            Value::Bool(true)
        );
        assert_eq!(
            call("net", "split_host_port", vec![Value::str("a.b:80")]),
            Value::from(vec![Value::str("a.b"), Value::str("80")])
        );
    }
}
