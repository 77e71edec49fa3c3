//! A small implementation of Terraform's value model ("cty") on top of `rmpv`.
//!
//! Providers exchange values as msgpack encoded against a type the schema dictates: objects carry
//! every attribute (nil when null), unknown values are msgpack extension type 0, values of the
//! dynamic pseudo-type travel as `[type-as-json, value]`. The spec and the state side of kusion
//! use plain JSON, where an unresolved `$kusion_path` reference stands for "not known yet".
//! This module converts between the two, guided by the schema.
//!
//! Over 800 lines: the type grammar, the schema blocks and the two codecs are one recursion
//! over [`Type`], read together (its tests are in `tests.rs`).

use indexmap::IndexMap;
use kusion_sdk::{FieldPath, Segment};
use rmpv::Value as Mp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value as Json};

/// Strings with this prefix are references the kernel has not resolved yet (dry-run only).
pub const UNKNOWN_MARKER: &str = "$kusion_path.";

/// A cty type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Type {
    Bool,
    Number,
    String,
    /// The dynamic pseudo-type: the value carries its own type.
    Dynamic,
    List(Box<Type>),
    Set(Box<Type>),
    Map(Box<Type>),
    Object(IndexMap<String, Type>),
    Tuple(Vec<Type>),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CtyError {
    #[error("invalid type description {0}")]
    BadType(String),
    #[error("at {path}: {message}")]
    Value { path: String, message: String },
}

fn value_err(path: &FieldPath, message: impl Into<String>) -> CtyError {
    let path = if path.0.is_empty() {
        "<root>".to_string()
    } else {
        path.to_string()
    };
    CtyError::Value {
        path,
        message: message.into(),
    }
}

impl Type {
    /// Parse the JSON type description a schema carries (`"string"`, `["list","string"]`,
    /// `["object",{"a":"number"}]`, `["object",{...},["optional_attr"]]`, `"dynamic"`).
    pub fn from_json(json: &Json) -> Result<Type, CtyError> {
        let bad = || CtyError::BadType(json.to_string());
        match json {
            Json::String(s) => match s.as_str() {
                "bool" => Ok(Type::Bool),
                "number" => Ok(Type::Number),
                "string" => Ok(Type::String),
                "dynamic" => Ok(Type::Dynamic),
                _ => Err(bad()),
            },
            Json::Array(items) => {
                let kind = items.first().and_then(Json::as_str).ok_or_else(bad)?;
                let arg = items.get(1).ok_or_else(bad)?;
                match kind {
                    "list" => Ok(Type::List(Box::new(Type::from_json(arg)?))),
                    "set" => Ok(Type::Set(Box::new(Type::from_json(arg)?))),
                    "map" => Ok(Type::Map(Box::new(Type::from_json(arg)?))),
                    "object" => {
                        let attrs = arg.as_object().ok_or_else(bad)?;
                        let mut out = IndexMap::new();
                        for (k, v) in attrs {
                            out.insert(k.clone(), Type::from_json(v)?);
                        }
                        Ok(Type::Object(out))
                    }
                    "tuple" => {
                        let elems = arg.as_array().ok_or_else(bad)?;
                        Ok(Type::Tuple(
                            elems
                                .iter()
                                .map(Type::from_json)
                                .collect::<Result<_, _>>()?,
                        ))
                    }
                    _ => Err(bad()),
                }
            }
            _ => Err(bad()),
        }
    }

    pub fn from_json_bytes(bytes: &[u8]) -> Result<Type, CtyError> {
        let json: Json =
            serde_json::from_slice(bytes).map_err(|e| CtyError::BadType(format!("{e}")))?;
        Type::from_json(&json)
    }

    /// The JSON type description (inverse of [`Type::from_json`]).
    pub fn to_json(&self) -> Json {
        match self {
            Type::Bool => Json::from("bool"),
            Type::Number => Json::from("number"),
            Type::String => Json::from("string"),
            Type::Dynamic => Json::from("dynamic"),
            Type::List(e) => Json::Array(vec!["list".into(), e.to_json()]),
            Type::Set(e) => Json::Array(vec!["set".into(), e.to_json()]),
            Type::Map(e) => Json::Array(vec!["map".into(), e.to_json()]),
            Type::Object(a) => {
                let attrs: Map<String, Json> =
                    a.iter().map(|(k, t)| (k.clone(), t.to_json())).collect();
                Json::Array(vec!["object".into(), Json::Object(attrs)])
            }
            Type::Tuple(e) => Json::Array(vec![
                "tuple".into(),
                Json::Array(e.iter().map(Type::to_json).collect()),
            ]),
        }
    }

    /// The type a JSON value has when nothing else is known (used for dynamic values).
    fn infer(json: &Json) -> Type {
        match json {
            Json::Null => Type::Dynamic,
            Json::Bool(_) => Type::Bool,
            Json::Number(_) => Type::Number,
            Json::String(_) => Type::String,
            Json::Array(items) => Type::Tuple(items.iter().map(Type::infer).collect()),
            Json::Object(map) => Type::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), Type::infer(v)))
                    .collect(),
            ),
        }
    }
}

/// How a nested block (or protocol-6 nested attribute) repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Nesting {
    Single,
    /// Like `Single`, but never null: absent means "all attributes null".
    Group,
    List,
    Set,
    Map,
}

/// One attribute of a block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribute {
    /// The value type; for a nested attribute this is the type implied by `nested`.
    pub ty: Type,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<NestedAttributes>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub optional: bool,
    #[serde(default)]
    pub computed: bool,
    #[serde(default)]
    pub sensitive: bool,
}

/// Protocol 6 nested attribute structure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NestedAttributes {
    pub nesting: Nesting,
    pub attributes: IndexMap<String, Attribute>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NestedBlock {
    pub nesting: Nesting,
    pub block: Block,
    #[serde(default)]
    pub min_items: i64,
    #[serde(default)]
    pub max_items: i64,
}

/// A configuration block: attributes and nested blocks.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Block {
    pub attributes: IndexMap<String, Attribute>,
    pub block_types: IndexMap<String, NestedBlock>,
}

/// A resource type's schema: its version and top-level block.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Schema {
    pub version: i64,
    pub block: Block,
}

impl NestedAttributes {
    pub fn implied_type(&self) -> Type {
        let object = Type::Object(
            self.attributes
                .iter()
                .map(|(k, a)| (k.clone(), a.ty.clone()))
                .collect(),
        );
        wrap(self.nesting, object)
    }
}

fn wrap(nesting: Nesting, object: Type) -> Type {
    match nesting {
        Nesting::Single | Nesting::Group => object,
        Nesting::List => Type::List(Box::new(object)),
        Nesting::Set => Type::Set(Box::new(object)),
        Nesting::Map => Type::Map(Box::new(object)),
    }
}

impl Block {
    /// The object type a value of this block has.
    pub fn implied_type(&self) -> Type {
        let mut attrs: IndexMap<String, Type> = self
            .attributes
            .iter()
            .map(|(k, a)| (k.clone(), a.ty.clone()))
            .collect();
        for (name, nb) in &self.block_types {
            attrs.insert(name.clone(), wrap(nb.nesting, nb.block.implied_type()));
        }
        Type::Object(attrs)
    }

    /// Paths of sensitive values present (non-null) in `value`, for masking.
    pub fn sensitive_paths(&self, value: &Json) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_sensitive(value, &FieldPath::root(), &mut out);
        out
    }

    fn collect_sensitive(&self, value: &Json, path: &FieldPath, out: &mut Vec<String>) {
        let Json::Object(map) = value else { return };
        for (name, attr) in &self.attributes {
            let Some(v) = map.get(name) else { continue };
            if v.is_null() {
                continue;
            }
            let p = path.child_key(name);
            if attr.sensitive {
                out.push(p.to_string());
            } else if let Some(nested) = &attr.nested {
                let block = Block {
                    attributes: nested.attributes.clone(),
                    block_types: IndexMap::new(),
                };
                for_each_nested(nested.nesting, v, &p, |item, ip| {
                    block.collect_sensitive(item, ip, out)
                });
            }
        }
        for (name, nb) in &self.block_types {
            let Some(v) = map.get(name) else { continue };
            let p = path.child_key(name);
            for_each_nested(nb.nesting, v, &p, |item, ip| {
                nb.block.collect_sensitive(item, ip, out)
            });
        }
    }

    /// Encode a block value (spec attributes or stored state) to msgpack. Every attribute is
    /// present in the output; absent list/set/map blocks become empty collections (as a
    /// configuration without such blocks means), absent single blocks null.
    /// `allow_unknown` turns unresolved `$kusion_path` strings into unknown values (dry-run).
    pub fn encode(&self, value: &Json, allow_unknown: bool) -> Result<Mp, CtyError> {
        self.encode_at(value, &FieldPath::root(), allow_unknown, false)
    }

    /// Like [`Block::encode`] for a configuration: refuses values for read-only attributes.
    pub fn encode_config(&self, value: &Json, allow_unknown: bool) -> Result<Mp, CtyError> {
        self.encode_at(value, &FieldPath::root(), allow_unknown, true)
    }

    fn encode_at(
        &self,
        value: &Json,
        path: &FieldPath,
        allow_unknown: bool,
        config: bool,
    ) -> Result<Mp, CtyError> {
        if allow_unknown && is_unknown_marker(value) {
            return Ok(unknown());
        }
        let empty = Map::new();
        let map = match value {
            Json::Null => &empty,
            Json::Object(map) => map,
            other => {
                return Err(value_err(
                    path,
                    format!("expected an object, found {}", kind(other)),
                ));
            }
        };
        for key in map.keys() {
            if !self.attributes.contains_key(key) && !self.block_types.contains_key(key) {
                return Err(value_err(
                    &path.child_key(key),
                    "unsupported attribute: the provider's schema has no such attribute or block",
                ));
            }
        }
        let mut out = Vec::with_capacity(self.attributes.len() + self.block_types.len());
        for (name, attr) in &self.attributes {
            let p = path.child_key(name);
            let v = map.get(name).unwrap_or(&Json::Null);
            if config && attr.computed && !attr.optional && !attr.required && !v.is_null() {
                return Err(value_err(
                    &p,
                    "this attribute is read-only (computed by the provider) and cannot be set",
                ));
            }
            out.push((
                Mp::from(name.as_str()),
                encode(&attr.ty, v, &p, allow_unknown)?,
            ));
        }
        for (name, nb) in &self.block_types {
            let p = path.child_key(name);
            let v = map.get(name).unwrap_or(&Json::Null);
            let encoded = if allow_unknown && is_unknown_marker(v) {
                unknown()
            } else {
                match (nb.nesting, v) {
                    (Nesting::Single, Json::Null) => Mp::Nil,
                    (Nesting::Single | Nesting::Group, v) => {
                        // A one-element list is accepted for single blocks (Terraform JSON habit).
                        let v = match v {
                            Json::Array(items) if items.len() == 1 => &items[0],
                            v => v,
                        };
                        nb.block.encode_at(v, &p, allow_unknown, config)?
                    }
                    (Nesting::List | Nesting::Set, Json::Null) => Mp::Array(Vec::new()),
                    (Nesting::List | Nesting::Set, Json::Object(_)) => {
                        // A single object where a list of blocks is expected: one block.
                        Mp::Array(vec![nb.block.encode_at(
                            v,
                            &p.child_index(0),
                            allow_unknown,
                            config,
                        )?])
                    }
                    (Nesting::List | Nesting::Set, Json::Array(items)) => Mp::Array(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, item)| {
                                nb.block
                                    .encode_at(item, &p.child_index(i), allow_unknown, config)
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    (Nesting::Map, Json::Null) => Mp::Map(Vec::new()),
                    (Nesting::Map, Json::Object(entries)) => Mp::Map(
                        entries
                            .iter()
                            .map(|(k, item)| {
                                Ok((
                                    Mp::from(k.as_str()),
                                    nb.block.encode_at(
                                        item,
                                        &p.child_key(k),
                                        allow_unknown,
                                        config,
                                    )?,
                                ))
                            })
                            .collect::<Result<_, CtyError>>()?,
                    ),
                    (_, other) => {
                        return Err(value_err(
                            &p,
                            format!("expected block(s), found {}", kind(other)),
                        ));
                    }
                }
            };
            out.push((Mp::from(name.as_str()), encoded));
        }
        Ok(Mp::Map(out))
    }

    /// Terraform's "proposed new state": the configuration, with computed attributes the
    /// configuration leaves null taken from the prior state.
    pub fn proposed_new(&self, prior: &Json, config: &Json) -> Json {
        let empty = Map::new();
        let prior_map = prior.as_object().unwrap_or(&empty);
        let Json::Object(config_map) = config else {
            return config.clone();
        };
        let mut out = Map::new();
        for (name, attr) in &self.attributes {
            let c = config_map.get(name).unwrap_or(&Json::Null);
            let p = prior_map.get(name).unwrap_or(&Json::Null);
            let v = if attr.computed && c.is_null() {
                p.clone()
            } else {
                c.clone()
            };
            out.insert(name.clone(), v);
        }
        for (name, nb) in &self.block_types {
            let c = config_map.get(name).unwrap_or(&Json::Null);
            let p = prior_map.get(name).unwrap_or(&Json::Null);
            let v = match (nb.nesting, c) {
                (Nesting::Single | Nesting::Group, Json::Object(_)) => nb.block.proposed_new(p, c),
                (Nesting::List, Json::Array(items)) => {
                    let prior_items = p.as_array();
                    Json::Array(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, item)| {
                                let pi =
                                    prior_items.and_then(|pi| pi.get(i)).unwrap_or(&Json::Null);
                                nb.block.proposed_new(pi, item)
                            })
                            .collect(),
                    )
                }
                (Nesting::Set, Json::Array(items)) => {
                    // Set elements have no identity: pair each configured element with a prior
                    // element that agrees on every configured (non-null) attribute.
                    let prior_items: Vec<&Json> =
                        p.as_array().map(|a| a.iter().collect()).unwrap_or_default();
                    Json::Array(
                        items
                            .iter()
                            .map(|item| {
                                let matching = prior_items
                                    .iter()
                                    .find(|pi| config_agrees(item, pi))
                                    .copied()
                                    .unwrap_or(&Json::Null);
                                nb.block.proposed_new(matching, item)
                            })
                            .collect(),
                    )
                }
                (Nesting::Map, Json::Object(entries)) => Json::Object(
                    entries
                        .iter()
                        .map(|(k, item)| {
                            (
                                k.clone(),
                                nb.block.proposed_new(p.get(k).unwrap_or(&Json::Null), item),
                            )
                        })
                        .collect(),
                ),
                _ => c.clone(),
            };
            out.insert(name.clone(), v);
        }
        Json::Object(out)
    }
}

fn config_agrees(config: &Json, prior: &Json) -> bool {
    match (config, prior) {
        (Json::Object(c), Json::Object(p)) => {
            c.iter().all(|(k, v)| v.is_null() || p.get(k) == Some(v))
        }
        _ => false,
    }
}

fn for_each_nested(
    nesting: Nesting,
    value: &Json,
    path: &FieldPath,
    mut f: impl FnMut(&Json, &FieldPath),
) {
    match (nesting, value) {
        (Nesting::Single | Nesting::Group, v) => f(v, path),
        (Nesting::List | Nesting::Set, Json::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                f(item, &path.child_index(i));
            }
        }
        (Nesting::Map, Json::Object(entries)) => {
            for (k, item) in entries {
                f(item, &path.child_key(k));
            }
        }
        _ => {}
    }
}

fn is_unknown_marker(value: &Json) -> bool {
    matches!(value, Json::String(s) if s.starts_with(UNKNOWN_MARKER))
}

/// The msgpack encoding of an unknown value: extension type 0 with one zero byte.
pub fn unknown() -> Mp {
    Mp::Ext(0, vec![0])
}

fn kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a bool",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

fn encode_number(n: &Number) -> Mp {
    if let Some(i) = n.as_i64() {
        Mp::from(i)
    } else if let Some(u) = n.as_u64() {
        Mp::from(u)
    } else {
        Mp::F64(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Encode a JSON value against a type, converting the way Terraform's type conversion does
/// (numbers and bools to strings, numeric strings to numbers, ...).
pub fn encode(
    ty: &Type,
    value: &Json,
    path: &FieldPath,
    allow_unknown: bool,
) -> Result<Mp, CtyError> {
    if value.is_null() {
        return Ok(Mp::Nil);
    }
    if allow_unknown && is_unknown_marker(value) {
        return Ok(unknown());
    }
    let mismatch = |want: &str| value_err(path, format!("expected {want}, found {}", kind(value)));
    Ok(match ty {
        Type::String => match value {
            Json::String(s) => Mp::from(s.as_str()),
            Json::Number(n) => Mp::from(n.to_string()),
            Json::Bool(b) => Mp::from(b.to_string()),
            _ => return Err(mismatch("a string")),
        },
        Type::Number => match value {
            Json::Number(n) => encode_number(n),
            Json::String(s) => {
                let n: Number = serde_json::from_str(s.trim()).map_err(|_| {
                    value_err(path, format!("expected a number, found the string {s:?}"))
                })?;
                encode_number(&n)
            }
            _ => return Err(mismatch("a number")),
        },
        Type::Bool => match value {
            Json::Bool(b) => Mp::Boolean(*b),
            Json::String(s) if s == "true" => Mp::Boolean(true),
            Json::String(s) if s == "false" => Mp::Boolean(false),
            _ => return Err(mismatch("a bool")),
        },
        Type::List(elem) | Type::Set(elem) => match value {
            Json::Array(items) => Mp::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| encode(elem, item, &path.child_index(i), allow_unknown))
                    .collect::<Result<_, _>>()?,
            ),
            _ => return Err(mismatch("a list")),
        },
        Type::Tuple(elems) => match value {
            Json::Array(items) if items.len() == elems.len() => Mp::Array(
                elems
                    .iter()
                    .zip(items)
                    .enumerate()
                    .map(|(i, (t, item))| encode(t, item, &path.child_index(i), allow_unknown))
                    .collect::<Result<_, _>>()?,
            ),
            _ => return Err(mismatch(&format!("a list of {} elements", elems.len()))),
        },
        Type::Map(elem) => match value {
            Json::Object(entries) => Mp::Map(
                entries
                    .iter()
                    .map(|(k, item)| {
                        Ok((
                            Mp::from(k.as_str()),
                            encode(elem, item, &path.child_key(k), allow_unknown)?,
                        ))
                    })
                    .collect::<Result<_, CtyError>>()?,
            ),
            _ => return Err(mismatch("a map")),
        },
        Type::Object(attrs) => match value {
            Json::Object(entries) => {
                if let Some(extra) = entries.keys().find(|k| !attrs.contains_key(*k)) {
                    return Err(value_err(&path.child_key(extra), "unsupported attribute"));
                }
                Mp::Map(
                    attrs
                        .iter()
                        .map(|(k, t)| {
                            Ok((
                                Mp::from(k.as_str()),
                                encode(
                                    t,
                                    entries.get(k).unwrap_or(&Json::Null),
                                    &path.child_key(k),
                                    allow_unknown,
                                )?,
                            ))
                        })
                        .collect::<Result<_, CtyError>>()?,
                )
            }
            _ => return Err(mismatch("an object")),
        },
        Type::Dynamic => {
            let inferred = Type::infer(value);
            let type_json = serde_json::to_vec(&inferred.to_json()).unwrap_or_default();
            Mp::Array(vec![
                Mp::Binary(type_json),
                encode(&inferred, value, path, allow_unknown)?,
            ])
        }
    })
}

/// Decode a msgpack value of type `ty` into JSON. Unknown values become `null` and their paths
/// are pushed to `unknowns`.
pub fn decode(
    ty: &Type,
    value: &Mp,
    path: &FieldPath,
    unknowns: &mut Vec<FieldPath>,
) -> Result<Json, CtyError> {
    if let Mp::Ext(0, _) = value {
        unknowns.push(path.clone());
        return Ok(Json::Null);
    }
    if value.is_nil() {
        return Ok(Json::Null);
    }
    let mismatch = || {
        value_err(
            path,
            format!("provider sent {value} where {} was expected", type_name(ty)),
        )
    };
    Ok(match ty {
        Type::String => Json::String(mp_str(value).ok_or_else(mismatch)?.to_string()),
        Type::Bool => Json::Bool(value.as_bool().ok_or_else(mismatch)?),
        Type::Number => decode_number(value).ok_or_else(mismatch)?,
        Type::List(elem) | Type::Set(elem) => {
            let items = value.as_array().ok_or_else(mismatch)?;
            Json::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| decode(elem, item, &path.child_index(i), unknowns))
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::Tuple(elems) => {
            let items = value.as_array().ok_or_else(mismatch)?;
            if items.len() != elems.len() {
                return Err(mismatch());
            }
            Json::Array(
                elems
                    .iter()
                    .zip(items)
                    .enumerate()
                    .map(|(i, (t, item))| decode(t, item, &path.child_index(i), unknowns))
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::Map(elem) => {
            let entries = value.as_map().ok_or_else(mismatch)?;
            let mut out = Map::new();
            for (k, item) in entries {
                let key = mp_str(k).ok_or_else(mismatch)?;
                out.insert(
                    key.to_string(),
                    decode(elem, item, &path.child_key(key), unknowns)?,
                );
            }
            Json::Object(out)
        }
        Type::Object(attrs) => {
            let entries = value.as_map().ok_or_else(mismatch)?;
            let mut out = Map::new();
            for (name, t) in attrs {
                let item = entries
                    .iter()
                    .find(|(k, _)| mp_str(k) == Some(name.as_str()))
                    .map(|(_, v)| v)
                    .unwrap_or(&Mp::Nil);
                out.insert(
                    name.clone(),
                    decode(t, item, &path.child_key(name), unknowns)?,
                );
            }
            Json::Object(out)
        }
        Type::Dynamic => {
            let pair = value
                .as_array()
                .filter(|a| a.len() == 2)
                .ok_or_else(mismatch)?;
            let type_bytes = match &pair[0] {
                Mp::Binary(b) => b.as_slice(),
                Mp::String(s) => s.as_bytes(),
                _ => return Err(mismatch()),
            };
            let actual =
                Type::from_json_bytes(type_bytes).map_err(|e| value_err(path, e.to_string()))?;
            decode(&actual, &pair[1], path, unknowns)?
        }
    })
}

fn type_name(ty: &Type) -> String {
    ty.to_json().to_string()
}

fn mp_str(value: &Mp) -> Option<&str> {
    match value {
        Mp::String(s) => s.as_str(),
        _ => None,
    }
}

fn decode_number(value: &Mp) -> Option<Json> {
    match value {
        Mp::Integer(i) => {
            if let Some(v) = i.as_i64() {
                Some(Json::from(v))
            } else {
                i.as_u64().map(Json::from)
            }
        }
        Mp::F32(f) => float_json(f64::from(*f)),
        Mp::F64(f) => float_json(*f),
        // cty writes numbers that do not fit a float64 as decimal strings.
        Mp::String(s) => serde_json::from_str::<Number>(s.as_str()?)
            .ok()
            .map(Json::Number),
        _ => None,
    }
}

fn float_json(f: f64) -> Option<Json> {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Some(Json::from(f as i64))
    } else {
        Number::from_f64(f).map(Json::Number)
    }
}

/// Serialise a msgpack value to bytes.
pub fn to_bytes(value: &Mp) -> Vec<u8> {
    let mut buf = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = rmpv::encode::write_value(&mut buf, value);
    buf
}

/// Parse msgpack bytes; empty input is a null value.
pub fn from_bytes(bytes: &[u8]) -> Result<Mp, CtyError> {
    if bytes.is_empty() {
        return Ok(Mp::Nil);
    }
    rmpv::decode::read_value(&mut &bytes[..]).map_err(|e| CtyError::Value {
        path: "<root>".into(),
        message: format!("invalid msgpack from provider: {e}"),
    })
}

/// Drop null members of objects, recursively: how state and responses are shown (absent and
/// null mean the same to the provider, and [`Block::encode`] restores them).
pub fn strip_nulls(value: Json) -> Json {
    match value {
        Json::Object(map) => Json::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

/// Convert a provider attribute path to a kusion field path.
pub fn field_path(steps: impl IntoIterator<Item = Segment>) -> FieldPath {
    FieldPath(steps.into_iter().collect())
}

#[cfg(test)]
mod tests;
