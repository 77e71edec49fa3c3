//! System modules: base64, base32, math, regex, json, yaml, datetime, net, units, crypto, file,
//! manifests, template, runtime, collection.

use std::net::IpAddr;

use base64::Engine;

use super::{arg, req, str_arg};
use crate::output::{PrintOpts, to_json, to_yaml, to_yaml_stream};
#[allow(unused_imports)]
use crate::value::to_str;
use crate::value::{self, Dict, Host, RtError, RtResult, Str, Value};

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

fn strip_private(v: &Value) -> Value {
    match v {
        Value::List(l) => Value::from(l.iter().map(strip_private).collect::<Vec<_>>()),
        Value::Dict(_) | Value::Schema(_) => {
            let mut d = Dict::new();
            for (k, x) in &v.as_dict().unwrap().map {
                if !k.starts_with('_') {
                    d.map.insert(k.clone(), strip_private(x));
                }
            }
            Value::from(d)
        }
        _ => v.clone(),
    }
}

fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::List(l) => Value::from(l.iter().map(sorted_keys).collect::<Vec<_>>()),
        Value::Dict(_) | Value::Schema(_) => {
            let mut items: Vec<(Str, Value)> = v
                .as_dict()
                .unwrap()
                .map
                .iter()
                .map(|(k, x)| (k.clone(), sorted_keys(x)))
                .collect();
            items.sort_by(|a, b| a.0.cmp(&b.0));
            value::dict_of(items)
        }
        _ => v.clone(),
    }
}

/// Options shared by `json.encode`, `yaml.encode` and the dump functions.
fn prep(v: &Value, args: A, kw: K, base: usize) -> (Value, PrintOpts) {
    let sort = flag(args, kw, base, "sort_keys");
    let ignore_private = flag(args, kw, base + 2, "ignore_private");
    let ignore_none = flag(args, kw, base + 3, "ignore_none");
    let mut v = if ignore_private {
        strip_private(v)
    } else {
        v.clone()
    };
    if ignore_none {
        v = v.without_none();
    }
    if sort {
        v = sorted_keys(&v);
    }
    (
        v,
        PrintOpts {
            sort_keys: false,
            drop_none: ignore_none,
            hide_private: false,
            quote_digit_start: true,
        },
    )
}

macro_rules! natives {
    ($name:expr, { $($k:literal => $f:expr),* $(,)? }) => {
        match $name {
            $($k => Some(Value::native($k, $f)),)*
            _ => None,
        }
    };
}

/// A member of a system module.
pub fn system_member(module: &str, name: &str) -> Option<Value> {
    match module {
        "base64" => natives!(name, {
            "encode" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::from(base64::engine::general_purpose::STANDARD.encode(str_arg(a, k, 0, "value", "encode")?.as_bytes()))) },
            "decode" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = str_arg(a, k, 0, "value", "decode")?;
                let b = base64::engine::general_purpose::STANDARD.decode(s.as_bytes()).map_err(|e| RtError::eval(e.to_string()))?;
                Ok(Value::from(String::from_utf8_lossy(&b).into_owned()))
            },
        }),
        "base32" => natives!(name, {
            "encode" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::from(data_encoding::BASE32.encode(str_arg(a, k, 0, "value", "encode")?.as_bytes()))) },
            "decode" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = str_arg(a, k, 0, "value", "decode")?;
                // (bytes that are no UTF-8 are None too)
                Ok(match base32_decode(s.as_bytes()).map(String::from_utf8) {
                    Some(Ok(t)) => Value::from(t),
                    _ => Value::None,
                })
            },
        }),
        "math" => math_member(name),
        "regex" => natives!(name, {
            "match" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p) = (str_arg(a, k, 0, "string", "match")?, str_arg(a, k, 1, "pattern", "match")?);
                // unanchored, as upstream's `is_match`
                Ok(Value::Bool(compile(&p)?.is_match(&s).unwrap_or(false)))
            },
            "search" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p) = (str_arg(a, k, 0, "string", "search")?, str_arg(a, k, 1, "pattern", "search")?);
                Ok(Value::Bool(compile(&p)?.is_match(&s).map_err(|e| RtError::eval(e.to_string()))?))
            },
            "compile" => |_: &mut dyn Host, a: A, k: K| -> R {
                let p = str_arg(a, k, 0, "pattern", "compile")?;
                Ok(Value::Bool(compile(&p).is_ok()))
            },
            "replace" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p, r) = (str_arg(a, k, 0, "string", "replace")?, str_arg(a, k, 1, "pattern", "replace")?, str_arg(a, k, 2, "replace", "replace")?);
                let count = arg(a, k, 3, "count").and_then(|v| v.as_int()).unwrap_or(0);
                let re = compile(&p)?;
                Ok(Value::from(re.replacen(&s, count.max(0) as usize, &*r).into_owned()))
            },
            "split" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p) = (str_arg(a, k, 0, "string", "split")?, str_arg(a, k, 1, "pattern", "split")?);
                let maxsplit = arg(a, k, 2, "maxsplit").and_then(|v| v.as_int()).unwrap_or(0);
                let re = compile(&p)?;
                let mut out = Vec::new();
                let mut last = 0;
                for m in re.find_iter(&s) {
                    let m = m.map_err(|e| RtError::eval(e.to_string()))?;
                    out.push(Value::str(&s[last..m.start()]));
                    // upstream stops at `maxsplit` pieces and drops the rest
                    if maxsplit > 0 && out.len() >= maxsplit as usize {
                        return Ok(Value::from(out));
                    }
                    last = m.end();
                }
                out.push(Value::str(&s[last..]));
                Ok(Value::from(out))
            },
            "findall" => |_: &mut dyn Host, a: A, k: K| -> R {
                let (s, p) = (str_arg(a, k, 0, "string", "findall")?, str_arg(a, k, 1, "pattern", "findall")?);
                let re = compile(&p)?;
                let mut out = Vec::new();
                for c in re.captures_iter(&s) {
                    let c = c.map_err(|e| RtError::eval(e.to_string()))?;
                    // the whole match with at most one group, as upstream
                    if c.len() < 3 {
                        out.push(Value::str(c.get(0).map(|m| m.as_str()).unwrap_or("")));
                    } else {
                        out.push(Value::from((1..c.len()).map(|i| Value::str(c.get(i).map(|m| m.as_str()).unwrap_or(""))).collect::<Vec<_>>()));
                    }
                }
                Ok(Value::from(out))
            },
        }),
        "json" => natives!(name, {
            "encode" => |_: &mut dyn Host, a: A, k: K| -> R {
                let v = req(a, k, 0, "data", "encode")?;
                let (v, o) = prep(v, a, k, 1);
                let indent = arg(a, k, 2, "indent").and_then(|v| v.as_int()).unwrap_or(0).max(0) as usize;
                Ok(Value::from(to_json(&v, o, indent)))
            },
            "decode" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = str_arg(a, k, 0, "value", "decode")?;
                let j: serde_json::Value = serde_json::from_str(&s).map_err(|e| RtError::eval(e.to_string()))?;
                Ok(value::json::from_json(&j))
            },
            "validate" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = str_arg(a, k, 0, "value", "validate")?;
                Ok(Value::Bool(serde_json::from_str::<serde_json::Value>(&s).is_ok()))
            },
            "dump_to_file" => |h: &mut dyn Host, a: A, k: K| -> R {
                let v = req(a, k, 0, "data", "dump_to_file")?;
                let path = str_arg(a, k, 1, "filename", "dump_to_file")?;
                let (v, o) = prep(v, a, k, 2);
                let indent = arg(a, k, 3, "indent").and_then(|v| v.as_int()).unwrap_or(0).max(0) as usize;
                write_file(h, &path, &to_json(&v, o, indent))
            },
        }),
        "yaml" => natives!(name, {
            "encode" => |_: &mut dyn Host, a: A, k: K| -> R {
                let v = req(a, k, 0, "data", "encode")?;
                let (v, o) = prep(v, a, k, 1);
                Ok(Value::from(to_yaml(&v, o)))
            },
            "encode_all" => |_: &mut dyn Host, a: A, k: K| -> R {
                let v = req(a, k, 0, "data", "encode_all")?;
                let items = v.iter_items()?;
                let mut docs = Vec::new();
                for x in &items {
                    docs.push(prep(x, a, k, 1).0);
                }
                let o = prep(&Value::None, a, k, 1).1;
                let parts: Vec<String> = docs.iter().map(|d| to_yaml(d, o)).collect();
                Ok(Value::from(parts.join("\n---\n")))
            },
            "decode" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = str_arg(a, k, 0, "value", "decode")?;
                let y: serde_yaml_ng::Value = serde_yaml_ng::from_str(&s).map_err(|e| RtError::eval(e.to_string()))?;
                Ok(value::json::from_yaml(&y))
            },
            "decode_all" => |_: &mut dyn Host, a: A, k: K| -> R {
                use serde::Deserialize;
                let s = str_arg(a, k, 0, "value", "decode_all")?;
                let mut out = Vec::new();
                for d in serde_yaml_ng::Deserializer::from_str(&s) {
                    let y = serde_yaml_ng::Value::deserialize(d).map_err(|e| RtError::eval(e.to_string()))?;
                    out.push(value::json::from_yaml(&y));
                }
                Ok(Value::from(out))
            },
            "validate" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = str_arg(a, k, 0, "value", "validate")?;
                Ok(Value::Bool(serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&s).is_ok()))
            },
            "dump_to_file" => |h: &mut dyn Host, a: A, k: K| -> R {
                let v = req(a, k, 0, "data", "dump_to_file")?;
                let path = str_arg(a, k, 1, "filename", "dump_to_file")?;
                let (v, o) = prep(v, a, k, 2);
                write_file(h, &path, &to_yaml(&v, o))
            },
            "dump_all_to_file" => |h: &mut dyn Host, a: A, k: K| -> R {
                let v = req(a, k, 0, "data", "dump_all_to_file")?;
                let path = str_arg(a, k, 1, "filename", "dump_all_to_file")?;
                let docs: Vec<Value> = v.iter_items()?.iter().map(|x| prep(x, a, k, 2).0).collect();
                write_file(h, &path, &to_yaml_stream(&docs, PrintOpts::default()))
            },
        }),
        "manifests" => natives!(name, {
            "yaml_stream" => |h: &mut dyn Host, a: A, k: K| -> R {
                let v = req(a, k, 0, "values", "yaml_stream")?;
                let opts = arg(a, k, 1, "opts");
                let get = |n: &str| opts.and_then(|o| o.as_dict()).and_then(|d| d.get(n)).is_some_and(|v| v.truthy());
                let sep = opts.and_then(|o| o.as_dict()).and_then(|d| d.get("sep")).map(value::to_str).unwrap_or_else(|| "---".into());
                let mut docs = Vec::new();
                for x in v.iter_items()? {
                    let mut x = if get("ignore_private") { strip_private(&x) } else { x };
                    if get("ignore_none") {
                        x = x.without_none();
                    }
                    if get("sort_keys") {
                        x = sorted_keys(&x);
                    }
                    docs.push(x);
                }
                let o = PrintOpts { sort_keys: false, drop_none: get("ignore_none"), hide_private: false, quote_digit_start: false };
                let mut out = String::new();
                for (i, d) in docs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&sep);
                        out.push('\n');
                    }
                    out.push_str(&to_yaml(d, o));
                }
                h.set_output(out);
                Ok(Value::None)
            },
        }),
        "units" => units_member(name),
        "crypto" => natives!(name, {
            "md5" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<md5::Md5>(a, k) },
            "sha1" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha1::Sha1>(a, k) },
            "sha224" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha2::Sha224>(a, k) },
            "sha256" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha2::Sha256>(a, k) },
            "sha384" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha2::Sha384>(a, k) },
            "sha512" => |_: &mut dyn Host, a: A, k: K| -> R { hash::<sha2::Sha512>(a, k) },
            "blake3" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::from(blake3::hash(str_arg(a, k, 0, "value", "blake3")?.as_bytes()).to_hex().to_string())) },
            "uuid" => |_: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(uuid::Uuid::new_v4().to_string())) },
            "filesha256" => |h: &mut dyn Host, a: A, k: K| -> R {
                use sha2::Digest;
                let p = resolve(h, &str_arg(a, k, 0, "filepath", "filesha256")?);
                h.access().check_read("filesha256", &p)?;
                let b = std::fs::read(&p).map_err(|e| RtError::eval(format!("failed to read {}: {e}", p.display())))?;
                Ok(Value::from(hex(&sha2::Sha256::digest(&b))))
            },
        }),
        "datetime" => natives!(name, {
            "now" => |_: &mut dyn Host, a: A, k: K| -> R {
                let fmt = arg(a, k, 0, "format").map(value::to_str).unwrap_or_else(|| "%a %b %d %H:%M:%S %Y".into());
                Ok(Value::from(chrono::Local::now().format(&fmt).to_string()))
            },
            "today" => |_: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(chrono::Local::now().format("%Y-%m-%d %H:%M:%S%.6f").to_string())) },
            "ticks" => |_: &mut dyn Host, _a: A, _k: K| -> R {
                let n = chrono::Utc::now();
                Ok(Value::Float(n.timestamp() as f64 + n.timestamp_subsec_nanos() as f64 * 1e-9))
            },
            "date" => |_: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string())) },
            "validate" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = str_arg(a, k, 0, "date", "validate")?;
                let f = str_arg(a, k, 1, "format", "validate")?;
                let ok = chrono::NaiveDate::parse_from_str(&s, &f).is_ok() || chrono::NaiveDateTime::parse_from_str(&s, &f).is_ok() || chrono::NaiveTime::parse_from_str(&s, &f).is_ok();
                Ok(Value::Bool(ok))
            },
        }),
        "net" => net_member(name),
        "file" => natives!(name, {
            "read" => |h: &mut dyn Host, a: A, k: K| -> R {
                let arg = str_arg(a, k, 0, "filepath", "read")?;
                let p = resolve(h, &arg);
                h.access().check_read("read", &p)?;
                std::fs::read_to_string(&p).map(Value::from).map_err(|e| RtError::eval(format!("failed to access the file '{}': {e}", shown(h, &arg))))
            },
            "glob" => |h: &mut dyn Host, a: A, k: K| -> R {
                let pat = str_arg(a, k, 0, "pattern", "glob")?;
                let found = glob(h, &pat);
                // Only what the program may read is listed.
                let access = h.access();
                let found: Vec<Value> = found
                    .into_iter()
                    .filter(|p| access.check_read("glob", std::path::Path::new(p)).is_ok())
                    .map(Value::from)
                    .collect();
                Ok(Value::from(found))
            },
            "modpath" => |h: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(h.mod_root().display().to_string())) },
            "workdir" => |h: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(h.exec_workdir())) },
            "current" => |h: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(h.current_file())) },
            "exists" => |h: &mut dyn Host, a: A, k: K| -> R {
                let p = resolve(h, &str_arg(a, k, 0, "filepath", "exists")?);
                h.access().check_read("exists", &p)?;
                Ok(Value::Bool(p.exists()))
            },
            "abs" => |h: &mut dyn Host, a: A, k: K| -> R {
                let p = resolve(h, &str_arg(a, k, 0, "filepath", "abs")?);
                h.access().check_read("abs", &p)?;
                Ok(Value::from(std::fs::canonicalize(&p).unwrap_or(p).display().to_string()))
            },
            "mkdir" => |h: &mut dyn Host, a: A, k: K| -> R {
                let p = resolve(h, &str_arg(a, k, 0, "directory", "mkdir")?);
                h.access().check_write("mkdir", &p)?;
                let exist_ok = flag(a, k, 1, "exists");
                match std::fs::create_dir_all(&p) {
                    Ok(()) => Ok(Value::None),
                    Err(e) if exist_ok => { let _ = e; Ok(Value::None) },
                    Err(e) => Err(RtError::eval(format!("failed to create directory '{}': {e}", p.display()))),
                }
            },
            "delete" => |h: &mut dyn Host, a: A, k: K| -> R {
                let arg = str_arg(a, k, 0, "filepath", "delete")?;
                let p = resolve(h, &arg);
                h.access().check_write("delete", &p)?;
                let r = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
                r.map(|_| Value::None).map_err(|e| RtError::eval(format!("failed to delete '{}': {e}", shown(h, &arg))))
            },
            "cp" => |h: &mut dyn Host, a: A, k: K| -> R {
                let (sa, da) = (str_arg(a, k, 0, "src", "cp")?, str_arg(a, k, 1, "dest", "cp")?);
                let (s, d) = (resolve(h, &sa), resolve(h, &da));
                h.access().check_read("cp", &s)?;
                h.access().check_write("cp", &d)?;
                std::fs::copy(&s, &d).map(|_| Value::None).map_err(|e| RtError::eval(format!("Failed to copy from '{}' to '{}': {e}", shown(h, &sa), shown(h, &da))))
            },
            "mv" => |h: &mut dyn Host, a: A, k: K| -> R {
                let (sa, da) = (str_arg(a, k, 0, "src", "mv")?, str_arg(a, k, 1, "dest", "mv")?);
                let (s, d) = (resolve(h, &sa), resolve(h, &da));
                h.access().check_write("mv", &s)?;
                h.access().check_write("mv", &d)?;
                std::fs::rename(&s, &d).map(|_| Value::None).map_err(|e| RtError::eval(format!("Failed to move '{}' to '{}': {e}", shown(h, &sa), shown(h, &da))))
            },
            "size" => |h: &mut dyn Host, a: A, k: K| -> R {
                let arg = str_arg(a, k, 0, "filepath", "size")?;
                let p = resolve(h, &arg);
                h.access().check_read("size", &p)?;
                std::fs::metadata(&p).map(|m| Value::Int(m.len() as i64)).map_err(|e| RtError::eval(format!("failed to get size of '{}': {e}", shown(h, &arg))))
            },
            "write" => |h: &mut dyn Host, a: A, k: K| -> R {
                let p = str_arg(a, k, 0, "filepath", "write")?;
                let c = str_arg(a, k, 1, "content", "write")?;
                write_file(h, &p, &c)
            },
            "read_env" => |h: &mut dyn Host, a: A, k: K| -> R {
                let n = str_arg(a, k, 0, "key", "read_env")?;
                h.access().check_env(&n)?;
                Ok(std::env::var(&*n).map(Value::from).unwrap_or(Value::None))
            },
        }),
        "template" => natives!(name, {
            "execute" => |_: &mut dyn Host, a: A, k: K| -> R {
                let t = str_arg(a, k, 0, "template", "execute")?;
                let data = arg(a, k, 1, "data").cloned().unwrap_or_else(Value::empty_dict);
                let mut hb = handlebars::Handlebars::new();
                hb.register_helper("raw", Box::new(raw_helper));
                hb.render_template(&t, &value::json::to_json(&data)).map(Value::from).map_err(|e| RtError::eval(e.to_string()))
            },
            "html_escape" => |_: &mut dyn Host, a: A, k: K| -> R {
                let s = str_arg(a, k, 0, "data", "html_escape")?;
                Ok(Value::from(handlebars::html_escape(&s)))
            },
        }),
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
            "union_all" => |_: &mut dyn Host, a: A, k: K| -> R {
                let items = req(a, k, 0, "data", "union_all")?.iter_items()?;
                let mut acc = Value::empty_dict();
                for x in items {
                    acc = value::union(&acc, &x, false)?;
                }
                Ok(acc)
            },
        }),
        _ => None,
    }
}

fn raw_helper(
    h: &handlebars::Helper,
    _: &handlebars::Handlebars,
    _: &handlebars::Context,
    _: &mut handlebars::RenderContext,
    out: &mut dyn handlebars::Output,
) -> handlebars::HelperResult {
    if let Some(p) = h.param(0) {
        match p.value() {
            serde_json::Value::String(s) => out.write(s)?,
            other => out.write(&other.to_string())?,
        }
    }
    Ok(())
}

fn compile(p: &str) -> RtResult<fancy_regex::Regex> {
    // programs call regex functions per item with a handful of patterns: compile each once
    thread_local! {
        static CACHE: std::cell::RefCell<rustc_hash::FxHashMap<String, fancy_regex::Regex>> = Default::default();
    }
    if let Some(r) = CACHE.with(|c| c.borrow().get(p).cloned()) {
        return Ok(r);
    }
    let r = fancy_regex::Regex::new(p)
        .map_err(|e| RtError::eval(format!("invalid regex pattern '{p}': {e}")))?;
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() > 256 {
            c.clear();
        }
        c.insert(p.to_string(), r.clone());
    });
    Ok(r)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn hash<D: sha2::Digest>(a: A, k: K) -> R {
    let s = str_arg(a, k, 0, "value", "hash")?;
    Ok(Value::from(hex(&D::digest(s.as_bytes()))))
}

fn resolve(h: &mut dyn Host, p: &str) -> std::path::PathBuf {
    let p = p.replace("${KCL_MOD}", &h.mod_root().display().to_string());
    let pb = std::path::PathBuf::from(&p);
    if pb.is_absolute() {
        pb
    } else {
        h.workdir().join(pb)
    }
}

/// A path argument as upstream's messages show it: as written (`${KCL_MOD}` expanded), relative
/// paths not joined to the working directory, as the `kcl` command line prints them.
fn shown(h: &mut dyn Host, p: &str) -> String {
    p.replace("${KCL_MOD}", &h.mod_root().display().to_string())
}

fn write_file(h: &mut dyn Host, p: &str, content: &str) -> R {
    let path = resolve(h, p);
    h.access().check_write("write", &path)?;
    std::fs::write(&path, content)
        .map(|_| Value::None)
        .map_err(|e| RtError::eval(format!("Failed to create file '{}': {e}", shown(h, p))))
}

fn glob(h: &mut dyn Host, pat: &str) -> Vec<String> {
    // a small `*`/`?` matcher over one directory level per path segment
    let base = h.workdir();
    let abs = pat.starts_with('/');
    let mut cur: Vec<std::path::PathBuf> = vec![if abs { "/".into() } else { base.clone() }];
    for seg in pat.split('/').filter(|s| !s.is_empty()) {
        let mut next = Vec::new();
        for d in &cur {
            if seg.contains(['*', '?']) {
                if let Ok(rd) = std::fs::read_dir(d) {
                    let mut names: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
                    names.sort();
                    for n in names {
                        if wild(seg, &n.file_name().unwrap_or_default().to_string_lossy()) {
                            next.push(n);
                        }
                    }
                }
            } else {
                let n = d.join(seg);
                if n.exists() {
                    next.push(n);
                }
            }
        }
        cur = next;
    }
    cur.into_iter()
        .map(|p| {
            if abs {
                p.display().to_string()
            } else {
                p.strip_prefix(&base)
                    .map(|x| x.display().to_string())
                    .unwrap_or_else(|_| p.display().to_string())
            }
        })
        .collect()
}

fn wild(p: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (p.chars().collect(), s.chars().collect());
    fn go(p: &[char], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('*') => (0..=s.len()).any(|i| go(&p[1..], &s[i..])),
            Some('?') => !s.is_empty() && go(&p[1..], &s[1..]),
            Some(c) => s.first() == Some(c) && go(&p[1..], &s[1..]),
        }
    }
    go(&p, &s)
}

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
fn math_member(name: &str) -> Option<Value> {
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
        "log1p" => f1!("log1p", |x| (x + 1.0).ln_1p()),
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
            match num_arg(a, k, 0, "x", "factorial")? {
                Num::I(x) if x >= 0 => Ok(Value::Int(fact(x)?)),
                Num::F(x) if x >= 0.0 && (x as i64 as f64) == x => Ok(Value::Float(fact(x as i64)? as f64)),
                _ => Err(RtError::eval("factorial() only accepts integral values")),
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

fn units_member(name: &str) -> Option<Value> {
    // constants
    let c = |f: f64| Some(Value::Float(f));
    let ci = |i: i64| Some(Value::Int(i));
    match name {
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
                let f = x
                    .as_f64()
                    .ok_or_else(|| RtError::ty("units conversion expects a number"))?;
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

fn ip(a: A, k: K, f: &str) -> RtResult<Option<IpAddr>> {
    Ok(str_arg(a, k, 0, "ip", f)?.parse::<IpAddr>().ok())
}

/// Upstream's globally routable IPv4: no private, shared, documentation, benchmarking or
/// reserved range.
fn v4_global(v: std::net::Ipv4Addr) -> bool {
    let o = v.octets();
    !(v.is_private()
        || v.is_loopback()
        || v.is_link_local()
        || v.is_broadcast()
        || v.is_documentation()
        || v.is_unspecified()
        || v.is_multicast()
        || (o[0] == 100 && o[1] & 0xc0 == 64)
        || (o[0] == 198 && o[1] & 0xfe == 18)
        || o[0] >= 240
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        || o[0] == 0)
}

/// Go's `net.SplitHostPort` (upstream's), with its reasons for refusing an address.
fn split_host_port(s: &str) -> Result<(String, String), &'static str> {
    let i = s.rfind(':').ok_or("missing port")?;
    let (host, j, k) = if s.starts_with('[') {
        let end = s.find(']').ok_or("missing ']'")?;
        if end + 1 == s.len() {
            return Err("missing port");
        }
        if end + 1 != i {
            return Err(if s.as_bytes()[end + 1] == b':' {
                "too many colons"
            } else {
                "missing port"
            });
        }
        (&s[1..end], 1, end + 1)
    } else {
        let host = &s[..i];
        if host.contains(':') {
            return Err("too many colons");
        }
        (host, 0, 0)
    };
    if s[j..].contains('[') {
        return Err("unexpected '['");
    }
    if s[k..].contains(']') {
        return Err("unexpected ']'");
    }
    Ok((host.to_string(), s[i + 1..].to_string()))
}

fn net_member(name: &str) -> Option<Value> {
    natives!(name, {
        "split_host_port" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = str_arg(a, k, 0, "ip_end_point", "split_host_port")?;
            let (h, p) = split_host_port(&s)
                .map_err(|why| RtError::eval(format!("ip_end_point \"{s}\" {why}")))?;
            Ok(Value::from(vec![Value::from(h), Value::from(p)]))
        },
        "join_host_port" => |_: &mut dyn Host, a: A, k: K| -> R {
            let h = value::to_str(req(a, k, 0, "host", "join_host_port")?);
            let p = value::to_str(req(a, k, 1, "port", "join_host_port")?);
            Ok(Value::from(if h.contains(':') { format!("[{h}]:{p}") } else { format!("{h}:{p}") }))
        },
        "fqdn" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(arg(a, k, 0, "name").cloned().unwrap_or(Value::str(""))) },
        "parse_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(ip(a, k, "parse_IP")?.map(|i| Value::from(i.to_string())).unwrap_or(Value::str(""))) },
        "to_IP4" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(match ip(a, k, "to_IP4")? { Some(IpAddr::V4(v)) => Value::from(v.to_string()), Some(IpAddr::V6(v)) => v.to_ipv4_mapped().map(|x| Value::from(x.to_string())).unwrap_or(Value::str("")), None => Value::str("") }) },
        "to_IP16" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(match ip(a, k, "to_IP16")? { Some(IpAddr::V4(v)) => Value::from(v.to_ipv6_mapped().to_string()), Some(IpAddr::V6(v)) => Value::from(v.to_string()), None => Value::str("") }) },
        "to_IP6" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(match ip(a, k, "to_IP6")? { Some(IpAddr::V4(v)) => Value::from(v.to_ipv6_mapped().to_string()), Some(IpAddr::V6(v)) => Value::from(v.to_string()), None => Value::str("") }) },
        "IP_string" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(ip(a, k, "IP_string")?.map(|i| Value::from(i.to_string())).unwrap_or(Value::str(""))) },
        "is_IPv4" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(matches!(ip(a, k, "is_IPv4")?, Some(IpAddr::V4(_))))) },
        "is_IPv6" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(matches!(ip(a, k, "is_IPv6")?, Some(IpAddr::V6(_))))) },
        "is_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(ip(a, k, "is_IP")?.is_some())) },
        "is_loopback_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(ip(a, k, "is_loopback_IP")?.is_some_and(|i| i.is_loopback()))) },
        "is_multicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(ip(a, k, "is_multicast_IP")?.is_some_and(|i| i.is_multicast()))) },
        "is_interface_local_multicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(matches!(ip(a, k, "x")?, Some(IpAddr::V6(v)) if v.segments()[0] & 0xff0f == 0xff01))) },
        "is_link_local_multicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Bool(match ip(a, k, "x")? {
                Some(IpAddr::V4(v)) => v.octets()[0] == 224 && v.octets()[1] == 0 && v.octets()[2] == 0,
                Some(IpAddr::V6(v)) => v.segments()[0] & 0xff0f == 0xff02,
                None => false,
            }))
        },
        "is_link_local_unicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Bool(match ip(a, k, "x")? {
                Some(IpAddr::V4(v)) => v.is_link_local(),
                Some(IpAddr::V6(v)) => v.segments()[0] & 0xffc0 == 0xfe80,
                None => false,
            }))
        },
        "is_global_unicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Bool(match ip(a, k, "x")? {
                // upstream's: a globally routable address (no private, shared, documentation,
                // benchmarking or reserved range); for IPv6 the 2000::/3 unicast block but its
                // documentation prefix
                Some(IpAddr::V4(v)) => v4_global(v),
                Some(IpAddr::V6(v)) => {
                    let s = v.segments();
                    // a NAT64 address (64:ff9b::/96) is as global as the IPv4 it holds
                    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                        let [a, b, c, d] = [s[6] >> 8, s[6] & 0xff, s[7] >> 8, s[7] & 0xff];
                        v4_global(std::net::Ipv4Addr::new(a as u8, b as u8, c as u8, d as u8))
                    } else {
                        s[0] & 0xe000 == 0x2000 && !(s[0] == 0x2001 && s[1] == 0x0db8)
                    }
                }
                None => false,
            }))
        },
        "is_unspecified_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(ip(a, k, "x")?.is_some_and(|i| i.is_unspecified()))) },
    })
}

/// RFC 4648 base32 decoding as upstream's (the `base32` crate's): letters of either case,
/// up to six trailing `=` dropped from the length, an inner `=` read as zero bits, a short
/// last group allowed; `None` (KCL's None) on any other character.
fn base32_decode(data: &[u8]) -> Option<Vec<u8>> {
    let mut unpadded = data.len();
    for i in 1..=data.len().min(6) {
        if data[data.len() - i] != b'=' {
            break;
        }
        unpadded -= 1;
    }
    let out_len = unpadded * 5 / 8;
    let mut out = Vec::with_capacity(data.len().div_ceil(8) * 5);
    for chunk in data.chunks(8) {
        let mut buf = [0u8; 8];
        for (i, &c) in chunk.iter().enumerate() {
            buf[i] = match c.to_ascii_uppercase() {
                c @ b'A'..=b'Z' => c - b'A',
                c @ b'2'..=b'7' => c - b'2' + 26,
                b'=' => 0,
                _ => return None,
            };
        }
        out.push((buf[0] << 3) | (buf[1] >> 2));
        out.push((buf[1] << 6) | (buf[2] << 1) | (buf[3] >> 4));
        out.push((buf[3] << 4) | (buf[4] >> 1));
        out.push((buf[4] << 7) | (buf[5] << 2) | (buf[6] >> 3));
        out.push((buf[6] << 5) | buf[7]);
    }
    out.truncate(out_len);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::tests::NoHost;

    fn call(m: &str, f: &str, args: Vec<Value>) -> Value {
        let Some(Value::Func(func)) = system_member(m, f) else {
            panic!("no {m}.{f}")
        };
        let value::Func::Native { f, .. } = &*func else {
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
