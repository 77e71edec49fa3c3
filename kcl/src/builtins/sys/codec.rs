//! The data-format modules: `base64`, `base32`, `json`, `yaml`, `manifests` and `template`
//! (encoding and decoding values and documents).

use base64::Engine;

use super::file::write_file;
use super::opt_int_arg;
use super::{A, K, R, flag};
use crate::builtins::text_arg;
use crate::builtins::{arg, req};
use crate::output::{PrintOpts, to_json, to_yaml, to_yaml_stream};
use crate::value::{self, Dict, Host, RtError, Str, Value};

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

/// `base64`.
pub(super) fn base64(name: &str) -> Option<Value> {
    natives!(name, {
        "encode" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::from(base64::engine::general_purpose::STANDARD.encode(text_arg(a, k, 0, "value", "encode")?.as_bytes()))) },
        "decode" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "value", "decode")?;
            let b = base64_decode(&s)?;
            // upstream unwraps both steps: its messages are the errors' debug forms
            let text = String::from_utf8(b).map_err(|e| {
                RtError::eval(format!("{UNWRAP_ERR}{:?}", e.utf8_error()))
            })?;
            Ok(Value::from(text))
        },
    })
}

/// RFC 7386 JSON merge patch: objects merge key by key, a `null` removes the key (the key
/// order of `target`, new keys after), anything else replaces the target.
fn merge_patch(target: serde_json::Value, patch: &serde_json::Value) -> serde_json::Value {
    let serde_json::Value::Object(p) = patch else {
        return patch.clone();
    };
    let mut t = match target {
        serde_json::Value::Object(t) => t,
        _ => serde_json::Map::new(),
    };
    for (key, v) in p {
        if v.is_null() {
            t.shift_remove(key);
        } else if let Some(slot) = t.get_mut(key) {
            *slot = merge_patch(std::mem::take(slot), v);
        } else {
            t.insert(key.clone(), merge_patch(serde_json::Value::Null, v));
        }
    }
    serde_json::Value::Object(t)
}

const UNWRAP_ERR: &str = "called `Result::unwrap()` on an `Err` value: ";

/// Standard base64 with or without its padding, as upstream's decoder; its errors as upstream's
/// (`InvalidLength` names no length there).
fn base64_decode(s: &str) -> Result<Vec<u8>, RtError> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const ENGINE: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    // upstream's decoder looks at a lone last symbol first: a length one past a multiple of
    // four is an invalid length, unless that symbol is not base64 at all
    let bytes = s.as_bytes();
    if bytes.len() % 4 == 1 {
        let last = bytes[bytes.len() - 1];
        let symbol = last.is_ascii_alphanumeric() || matches!(last, b'+' | b'/' | b'=');
        let shown = match symbol {
            true => "InvalidLength".to_string(),
            false => format!("InvalidByte({}, {last})", bytes.len() - 1),
        };
        return Err(RtError::eval(format!("{UNWRAP_ERR}{shown}")));
    }
    ENGINE.decode(bytes).map_err(|e| {
        let shown = match e {
            base64::DecodeError::InvalidLength(_) => "InvalidLength".to_string(),
            e => format!("{e:?}"),
        };
        RtError::eval(format!("{UNWRAP_ERR}{shown}"))
    })
}

/// `base32`.
pub(super) fn base32(name: &str) -> Option<Value> {
    natives!(name, {
        "encode" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::from(data_encoding::BASE32.encode(text_arg(a, k, 0, "value", "encode")?.as_bytes()))) },
        "decode" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "value", "decode")?;
            // a character no base32 text has is upstream's odd argument error; bytes that
            // are no UTF-8 are None
            match base32_decode(s.as_bytes()).map(String::from_utf8) {
                Some(Ok(t)) => Ok(Value::from(t)),
                Some(Err(_)) => Ok(Value::None),
                None => Err(RtError::eval(
                    "decode() missing 1 required positional argument: 'value'",
                )),
            }
        },
    })
}

/// `json`.
pub(super) fn json(name: &str) -> Option<Value> {
    natives!(name, {
        "encode" => |_: &mut dyn Host, a: A, k: K| -> R {
            let v = req(a, k, 0, "data", "encode")?;
            let (v, o) = prep(v, a, k, 1);
            let indent = opt_int_arg(a, k, 2, "indent")?.unwrap_or(0).max(0) as usize;
            Ok(Value::from(to_json(&v, o, indent)))
        },
        "decode" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "value", "decode")?;
            let j: serde_json::Value = serde_json::from_str(&s).map_err(|e| RtError::eval(e.to_string()))?;
            Ok(value::json::from_json(&j))
        },
        "validate" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "value", "validate")?;
            Ok(Value::Bool(serde_json::from_str::<serde_json::Value>(&s).is_ok()))
        },
        "merge" => |_: &mut dyn Host, a: A, k: K| -> R {
            let src = value::json::to_json(req(a, k, 0, "src", "merge")?);
            let patch = value::json::to_json(req(a, k, 1, "patch", "merge")?);
            Ok(value::json::from_json(&merge_patch(src, &patch)))
        },
        "dump_to_file" => |h: &mut dyn Host, a: A, k: K| -> R {
            let v = req(a, k, 0, "data", "dump_to_file")?;
            let path = text_arg(a, k, 1, "filename", "dump_to_file")?;
            let (v, o) = prep(v, a, k, 2);
            let indent = opt_int_arg(a, k, 3, "indent")?.unwrap_or(0).max(0) as usize;
            write_file(h, &path, &to_json(&v, o, indent))
        },
    })
}

/// `yaml`.
pub(super) fn yaml(name: &str) -> Option<Value> {
    natives!(name, {
        "encode" => |_: &mut dyn Host, a: A, k: K| -> R {
            let v = req(a, k, 0, "data", "encode")?;
            let (v, o) = prep(v, a, k, 1);
            Ok(Value::from(to_yaml(&v, o)))
        },
        "encode_all" => |_: &mut dyn Host, a: A, k: K| -> R {
            let v = req(a, k, 0, "data", "encode_all")?;
            if v.is_none_or_undefined() {
                return Err(RtError::eval("invalid list value"));
            }
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
            let s = text_arg(a, k, 0, "value", "decode")?;
            // (one document: through JSON's data model, as upstream reads it)
            let j: serde_json::Value = serde_yaml_ng::from_str(&s).map_err(|e| RtError::eval(e.to_string()))?;
            Ok(value::json::from_json(&j))
        },
        "decode_all" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "value", "decode_all")?;
            let docs = value::json::yaml_documents(&s).map_err(|e| RtError::eval(e.to_string()))?;
            Ok(Value::from(docs))
        },
        "validate" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "value", "validate")?;
            // a stream is valid when each of its documents is
            Ok(Value::Bool(value::json::yaml_documents(&s).is_ok()))
        },
        "dump_to_file" => |h: &mut dyn Host, a: A, k: K| -> R {
            let v = req(a, k, 0, "data", "dump_to_file")?;
            let path = text_arg(a, k, 1, "filename", "dump_to_file")?;
            let (v, o) = prep(v, a, k, 2);
            write_file(h, &path, &to_yaml(&v, o))
        },
        "dump_all_to_file" => |h: &mut dyn Host, a: A, k: K| -> R {
            let v = req(a, k, 0, "data", "dump_all_to_file")?;
            let path = text_arg(a, k, 1, "filename", "dump_all_to_file")?;
            let docs: Vec<Value> = v.iter_items()?.iter().map(|x| prep(x, a, k, 2).0).collect();
            write_file(h, &path, &to_yaml_stream(&docs, PrintOpts::default()))
        },
    })
}

/// `manifests`.
pub(super) fn manifests(name: &str) -> Option<Value> {
    natives!(name, {
        "yaml_stream" => |h: &mut dyn Host, a: A, k: K| -> R {
            let v = req(a, k, 0, "values", "yaml_stream")?;
            let opts = arg(a, k, 1, "opts");
            if let Some(o) = opts.filter(|o| o.as_dict().is_none()) {
                return Err(RtError::eval(format!(
                    "Invalid options arguments in yaml_stream(): expect config, got {}",
                    o.type_name()
                )));
            }
            let get = |n: &str| opts.and_then(|o| o.as_dict()).and_then(|d| d.get(n)).is_some_and(|v| v.truthy());
            let sep = opts.and_then(|o| o.as_dict()).and_then(|d| d.get("sep")).map(value::to_str).unwrap_or_else(|| "---".into());
            // upstream takes a list only
            if !matches!(v, Value::List(_)) {
                return Err(RtError::eval("invalid list value"));
            }
            // given options hide private keys unless they say otherwise; no options show them
            let ignore_private = match opts.and_then(|o| o.as_dict()) {
                Some(d) => d.get("ignore_private").is_none_or(|v| v.truthy()),
                None => false,
            };
            let mut docs = Vec::new();
            for x in v.iter_items()? {
                let mut x = if ignore_private { strip_private(&x) } else { x };
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
    })
}

/// `template` (handlebars).
pub(super) fn template(name: &str) -> Option<Value> {
    natives!(name, {
        "execute" => |_: &mut dyn Host, a: A, k: K| -> R {
            let t = text_arg(a, k, 0, "template", "execute")?;
            let data = arg(a, k, 1, "data").cloned().unwrap_or_else(Value::empty_dict);
            if data.as_dict().is_none() {
                return Err(RtError::eval("invalid dict value"));
            }
            let mut hb = handlebars::Handlebars::new();
            hb.register_helper("raw", Box::new(raw_helper));
            // (upstream registers the template under this name and reports handlebars'
            // errors in their debug form)
            hb.register_template_string("template", &*t)
                .map_err(|e| RtError::eval(format!("register template failed: {e:?}")))?;
            hb.render("template", &value::json::to_json(&data))
                .map(Value::from)
                .map_err(|e| RtError::eval(format!("render template failed: {e:?}")))
        },
        "html_escape" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "data", "html_escape")?;
            Ok(Value::from(handlebars::html_escape(&s)))
        },
    })
}

fn raw_helper(
    h: &handlebars::Helper,
    _: &handlebars::Handlebars,
    _: &handlebars::Context,
    _: &mut handlebars::RenderContext,
    out: &mut dyn handlebars::Output,
) -> handlebars::HelperResult {
    // upstream's helper needs its parameter: `{{raw}}`, `{{{raw}}}` and the raw block fail
    let Some(p) = h.param(0) else {
        return Err(handlebars::RenderErrorReason::Other("Parameter not found".into()).into());
    };
    match p.value() {
        serde_json::Value::String(s) => out.write(s)?,
        other => out.write(&other.to_string())?,
    }
    Ok(())
}

/// RFC 4648 base32 decoding as upstream's (the `base32` crate's): letters of either case,
/// up to six trailing `=` dropped from the length, an inner `=` read as zero bits, a short
/// last group allowed; `None` on any other character.
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
