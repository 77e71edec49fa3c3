//! Provider schemas: conversion from the protocol messages to the [`crate::cty`] model, and the
//! on-disk cache keyed by the provider binary's checksum (GetSchema of the AWS provider is ~5 MB
//! and takes seconds; the answer only changes when the binary does).

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use indexmap::IndexMap;
use prost::Message;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::cty::{
    Attribute, Block, CtyError, NestedAttributes, NestedBlock, Nesting, Schema, Type,
};
use crate::proto::{tfplugin5 as v5, tfplugin6 as v6};

/// The provider's schema as it answered GetSchema (minus functions and ephemeral resources,
/// which our message definitions leave out), with resource and data source schemas converted to
/// the [`crate::cty`] model on first use: the AWS provider has ~1,500 resource types and an
/// operation touches a handful.
#[derive(Debug)]
pub struct ProviderSchema {
    raw: Raw,
    pub provider: Schema,
    /// The provider expects a plan call for destroys (ServerCapabilities.plan_destroy).
    pub plan_destroy: bool,
    converted: Mutex<HashMap<String, Arc<Schema>>>,
}

#[derive(Debug)]
enum Raw {
    V5(v5::get_provider_schema::Response),
    V6(v6::get_provider_schema::Response),
}

impl ProviderSchema {
    pub fn from_v5(resp: v5::get_provider_schema::Response) -> Result<ProviderSchema, CtyError> {
        let provider = resp
            .provider
            .as_ref()
            .map(schema5)
            .transpose()?
            .unwrap_or_default();
        let plan_destroy = resp
            .server_capabilities
            .as_ref()
            .is_some_and(|c| c.plan_destroy);
        Ok(ProviderSchema {
            raw: Raw::V5(resp),
            provider,
            plan_destroy,
            converted: Mutex::default(),
        })
    }

    pub fn from_v6(resp: v6::get_provider_schema::Response) -> Result<ProviderSchema, CtyError> {
        let provider = resp
            .provider
            .as_ref()
            .map(schema6)
            .transpose()?
            .unwrap_or_default();
        let plan_destroy = resp
            .server_capabilities
            .as_ref()
            .is_some_and(|c| c.plan_destroy);
        Ok(ProviderSchema {
            raw: Raw::V6(resp),
            provider,
            plan_destroy,
            converted: Mutex::default(),
        })
    }

    /// The schema of one managed resource type, `None` if the provider has no such type.
    pub fn resource(&self, type_name: &str) -> Result<Option<Arc<Schema>>, CtyError> {
        let mut converted = self.converted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = converted.get(type_name) {
            return Ok(Some(s.clone()));
        }
        let schema = match &self.raw {
            Raw::V5(r) => r.resource_schemas.get(type_name).map(schema5).transpose()?,
            Raw::V6(r) => r.resource_schemas.get(type_name).map(schema6).transpose()?,
        };
        Ok(schema.map(|s| {
            let s = Arc::new(s);
            converted.insert(type_name.to_string(), s.clone());
            s
        }))
    }

    /// The schema of one data source type, `None` if the provider has no such type.
    pub fn data_source(&self, type_name: &str) -> Result<Option<Arc<Schema>>, CtyError> {
        // Data sources share names with resources (`aws_s3_bucket`): keyed apart.
        let key = format!("data.{type_name}");
        let mut converted = self.converted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = converted.get(&key) {
            return Ok(Some(s.clone()));
        }
        let schema = match &self.raw {
            Raw::V5(r) => r
                .data_source_schemas
                .get(type_name)
                .map(schema5)
                .transpose()?,
            Raw::V6(r) => r
                .data_source_schemas
                .get(type_name)
                .map(schema6)
                .transpose()?,
        };
        Ok(schema.map(|s| {
            let s = Arc::new(s);
            converted.insert(key, s.clone());
            s
        }))
    }

    /// Cache encoding: one byte of protocol version, then the protobuf message.
    pub fn to_bytes(&self) -> Vec<u8> {
        match &self.raw {
            Raw::V5(r) => [vec![5u8], r.encode_to_vec()].concat(),
            Raw::V6(r) => [vec![6u8], r.encode_to_vec()].concat(),
        }
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<ProviderSchema> {
        let (version, body) = bytes.split_first()?;
        match version {
            5 => {
                ProviderSchema::from_v5(v5::get_provider_schema::Response::decode(body).ok()?).ok()
            }
            6 => {
                ProviderSchema::from_v6(v6::get_provider_schema::Response::decode(body).ok()?).ok()
            }
            _ => None,
        }
    }
}

impl ProviderSchema {
    /// The schema in the shape of `terraform providers schema -json` (one provider under
    /// `address`), so tools that read terraform's output (`kcl import -m terraformschema`) can
    /// read ours without the terraform CLI.
    pub fn to_terraform_json(&self, address: &str) -> serde_json::Value {
        use serde_json::{Map, Value, json};
        fn schemas<S>(m: &std::collections::HashMap<String, S>, f: fn(&S) -> Value) -> Value {
            // sorted, so the output depends only on the provider
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), f(&m[k])))
                    .collect::<Map<_, _>>(),
            )
        }
        let body = match &self.raw {
            Raw::V5(r) => json!({
                "provider": r.provider.as_ref().map(json5).unwrap_or(Value::Null),
                "resource_schemas": schemas(&r.resource_schemas, json5),
                "data_source_schemas": schemas(&r.data_source_schemas, json5),
            }),
            Raw::V6(r) => json!({
                "provider": r.provider.as_ref().map(json6).unwrap_or(Value::Null),
                "resource_schemas": schemas(&r.resource_schemas, json6),
                "data_source_schemas": schemas(&r.data_source_schemas, json6),
            }),
        };
        json!({"format_version": "1.0", "provider_schemas": {address: body}})
    }
}

/// Terraform's JSON leaves out false flags and empty strings; so do we.
fn put_common(
    o: &mut serde_json::Map<String, serde_json::Value>,
    description: &str,
    markdown: bool,
    flags: &[(&str, bool)],
) {
    use serde_json::Value;
    if !description.is_empty() {
        o.insert("description".into(), Value::from(description));
    }
    o.insert(
        "description_kind".into(),
        Value::from(if markdown { "markdown" } else { "plain" }),
    );
    for (k, v) in flags {
        if *v {
            o.insert((*k).into(), Value::Bool(true));
        }
    }
}

fn cty_json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|_| serde_json::Value::from("dynamic"))
}

fn nesting_name(n: Nesting) -> &'static str {
    match n {
        Nesting::Single => "single",
        Nesting::Group => "group",
        Nesting::List => "list",
        Nesting::Set => "set",
        Nesting::Map => "map",
    }
}

fn items(o: &mut serde_json::Map<String, serde_json::Value>, min: i64, max: i64) {
    if min > 0 {
        o.insert("min_items".into(), min.into());
    }
    if max > 0 {
        o.insert("max_items".into(), max.into());
    }
}

fn json5(s: &v5::Schema) -> serde_json::Value {
    serde_json::json!({"version": s.version, "block": s.block.as_ref().map(block_json5).unwrap_or_default()})
}

fn block_json5(b: &v5::schema::Block) -> serde_json::Value {
    use serde_json::{Map, Value};
    let mut o = Map::new();
    let attrs: Map<String, Value> = b
        .attributes
        .iter()
        .map(|a| {
            let mut m = Map::new();
            m.insert("type".into(), cty_json(&a.r#type));
            put_common(
                &mut m,
                &a.description,
                a.description_kind == 1,
                &[
                    ("required", a.required),
                    ("optional", a.optional),
                    ("computed", a.computed),
                    ("sensitive", a.sensitive),
                    ("deprecated", a.deprecated),
                    ("write_only", a.write_only),
                ],
            );
            (a.name.clone(), Value::Object(m))
        })
        .collect();
    if !attrs.is_empty() {
        o.insert("attributes".into(), Value::Object(attrs));
    }
    let blocks: Map<String, Value> = b
        .block_types
        .iter()
        .map(|nb| {
            let mut m = Map::new();
            m.insert(
                "nesting_mode".into(),
                nesting_name(nesting5(nb.nesting)).into(),
            );
            m.insert(
                "block".into(),
                nb.block.as_ref().map(block_json5).unwrap_or_default(),
            );
            items(&mut m, nb.min_items, nb.max_items);
            (nb.type_name.clone(), Value::Object(m))
        })
        .collect();
    if !blocks.is_empty() {
        o.insert("block_types".into(), Value::Object(blocks));
    }
    put_common(
        &mut o,
        &b.description,
        b.description_kind == 1,
        &[("deprecated", b.deprecated)],
    );
    Value::Object(o)
}

fn json6(s: &v6::Schema) -> serde_json::Value {
    serde_json::json!({"version": s.version, "block": s.block.as_ref().map(block_json6).unwrap_or_default()})
}

fn attr_json6(a: &v6::schema::Attribute) -> serde_json::Value {
    use serde_json::{Map, Value};
    let mut m = Map::new();
    match &a.nested_type {
        Some(obj) => {
            let mut n = Map::new();
            n.insert(
                "attributes".into(),
                Value::Object(
                    obj.attributes
                        .iter()
                        .map(|i| (i.name.clone(), attr_json6(i)))
                        .collect(),
                ),
            );
            n.insert(
                "nesting_mode".into(),
                nesting_name(object_nesting6(obj.nesting)).into(),
            );
            m.insert("nested_type".into(), Value::Object(n));
        }
        None => {
            m.insert("type".into(), cty_json(&a.r#type));
        }
    }
    put_common(
        &mut m,
        &a.description,
        a.description_kind == 1,
        &[
            ("required", a.required),
            ("optional", a.optional),
            ("computed", a.computed),
            ("sensitive", a.sensitive),
            ("deprecated", a.deprecated),
            ("write_only", a.write_only),
        ],
    );
    Value::Object(m)
}

fn block_json6(b: &v6::schema::Block) -> serde_json::Value {
    use serde_json::{Map, Value};
    let mut o = Map::new();
    let attrs: Map<String, Value> = b
        .attributes
        .iter()
        .map(|a| (a.name.clone(), attr_json6(a)))
        .collect();
    if !attrs.is_empty() {
        o.insert("attributes".into(), Value::Object(attrs));
    }
    let blocks: Map<String, Value> = b
        .block_types
        .iter()
        .map(|nb| {
            let mut m = Map::new();
            m.insert(
                "nesting_mode".into(),
                nesting_name(nesting6(nb.nesting)).into(),
            );
            m.insert(
                "block".into(),
                nb.block.as_ref().map(block_json6).unwrap_or_default(),
            );
            items(&mut m, nb.min_items, nb.max_items);
            (nb.type_name.clone(), Value::Object(m))
        })
        .collect();
    if !blocks.is_empty() {
        o.insert("block_types".into(), Value::Object(blocks));
    }
    put_common(
        &mut o,
        &b.description,
        b.description_kind == 1,
        &[("deprecated", b.deprecated)],
    );
    Value::Object(o)
}

fn schema5(s: &v5::Schema) -> Result<Schema, CtyError> {
    Ok(Schema {
        version: s.version,
        block: s
            .block
            .as_ref()
            .map(block5)
            .transpose()?
            .unwrap_or_default(),
    })
}

fn schema6(s: &v6::Schema) -> Result<Schema, CtyError> {
    Ok(Schema {
        version: s.version,
        block: s
            .block
            .as_ref()
            .map(block6)
            .transpose()?
            .unwrap_or_default(),
    })
}

fn nesting5(n: i32) -> Nesting {
    use v5::schema::nested_block::NestingMode as M;
    match M::try_from(n).unwrap_or(M::Invalid) {
        M::List => Nesting::List,
        M::Set => Nesting::Set,
        M::Map => Nesting::Map,
        M::Group => Nesting::Group,
        M::Single | M::Invalid => Nesting::Single,
    }
}

fn nesting6(n: i32) -> Nesting {
    use v6::schema::nested_block::NestingMode as M;
    match M::try_from(n).unwrap_or(M::Invalid) {
        M::List => Nesting::List,
        M::Set => Nesting::Set,
        M::Map => Nesting::Map,
        M::Group => Nesting::Group,
        M::Single | M::Invalid => Nesting::Single,
    }
}

fn object_nesting6(n: i32) -> Nesting {
    use v6::schema::object::NestingMode as M;
    match M::try_from(n).unwrap_or(M::Invalid) {
        M::List => Nesting::List,
        M::Set => Nesting::Set,
        M::Map => Nesting::Map,
        M::Single | M::Invalid => Nesting::Single,
    }
}

fn block5(b: &v5::schema::Block) -> Result<Block, CtyError> {
    let mut out = Block::default();
    for a in &b.attributes {
        let ty = Type::from_json_bytes(&a.r#type)?;
        out.attributes.insert(
            a.name.clone(),
            Attribute {
                ty,
                nested: None,
                required: a.required,
                optional: a.optional,
                computed: a.computed,
                sensitive: a.sensitive,
            },
        );
    }
    for nb in &b.block_types {
        let block = nb
            .block
            .as_ref()
            .map(block5)
            .transpose()?
            .unwrap_or_default();
        out.block_types.insert(
            nb.type_name.clone(),
            NestedBlock {
                nesting: nesting5(nb.nesting),
                block,
                min_items: nb.min_items,
                max_items: nb.max_items,
            },
        );
    }
    Ok(out)
}

fn attribute6(a: &v6::schema::Attribute) -> Result<Attribute, CtyError> {
    let (ty, nested) = match &a.nested_type {
        Some(obj) => {
            let mut attributes = IndexMap::new();
            for inner in &obj.attributes {
                attributes.insert(inner.name.clone(), attribute6(inner)?);
            }
            let nested = NestedAttributes {
                nesting: object_nesting6(obj.nesting),
                attributes,
            };
            (nested.implied_type(), Some(nested))
        }
        None => (Type::from_json_bytes(&a.r#type)?, None),
    };
    Ok(Attribute {
        ty,
        nested,
        required: a.required,
        optional: a.optional,
        computed: a.computed,
        sensitive: a.sensitive,
    })
}

fn block6(b: &v6::schema::Block) -> Result<Block, CtyError> {
    let mut out = Block::default();
    for a in &b.attributes {
        out.attributes.insert(a.name.clone(), attribute6(a)?);
    }
    for nb in &b.block_types {
        let block = nb
            .block
            .as_ref()
            .map(block6)
            .transpose()?
            .unwrap_or_default();
        out.block_types.insert(
            nb.type_name.clone(),
            NestedBlock {
                nesting: nesting6(nb.nesting),
                block,
                min_items: nb.min_items,
                max_items: nb.max_items,
            },
        );
    }
    Ok(out)
}

/// Checksums of provider binaries, remembered by (path, size, mtime) so a 700 MB binary is
/// hashed once, not per operation.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ChecksumIndex {
    entries: HashMap<String, (u64, u128, String)>,
}

/// SHA-256 of a file, hex-encoded, memoised in `<cache_dir>/checksums.json`.
pub fn binary_checksum(binary: &Path, cache_dir: &Path) -> std::io::Result<String> {
    let meta = fs::metadata(binary)?;
    let mtime = meta
        .modified()?
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let index_path = cache_dir.join("checksums.json");
    let mut index: ChecksumIndex = fs::read(&index_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let key = binary.to_string_lossy().to_string();
    if let Some((size, time, sum)) = index.entries.get(&key)
        && *size == meta.len()
        && *time == mtime
    {
        return Ok(sum.clone());
    }
    let sum = sha256_file(binary)?;
    index.entries.insert(key, (meta.len(), mtime, sum.clone()));
    if let Ok(bytes) = serde_json::to_vec(&index) {
        // A failed cache write only costs a re-hash next time.
        let _ = write_atomic(&index_path, &bytes);
    }
    Ok(sum)
}

pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

fn schema_path(cache_dir: &Path, checksum: &str) -> PathBuf {
    // `.v2`: entries written before data sources were kept lack their schemas.
    cache_dir.join("schemas").join(format!("{checksum}.v2.pb"))
}

/// The cached schema for a binary checksum, if present and readable.
pub fn load_cached(cache_dir: &Path, checksum: &str) -> Option<ProviderSchema> {
    ProviderSchema::from_bytes(&fs::read(schema_path(cache_dir, checksum)).ok()?)
}

pub fn store_cached(
    cache_dir: &Path,
    checksum: &str,
    schema: &ProviderSchema,
) -> std::io::Result<()> {
    write_atomic(&schema_path(cache_dir, checksum), &schema.to_bytes())
}

fn validation_path(cache_dir: &Path, checksum: &str, config: &[u8]) -> PathBuf {
    let key = hex::encode(Sha256::digest(
        [checksum.as_bytes(), b"\0", config].concat(),
    ));
    cache_dir.join("validated").join(key)
}

/// A provider configuration this binary already accepted: its prepared form (possibly empty).
/// Validating the AWS provider's configuration with an `endpoints` block costs seconds, and the
/// verdict depends only on the binary and the configuration.
pub fn load_validated(cache_dir: &Path, checksum: &str, config: &[u8]) -> Option<Vec<u8>> {
    fs::read(validation_path(cache_dir, checksum, config)).ok()
}

pub fn store_validated(
    cache_dir: &Path,
    checksum: &str,
    config: &[u8],
    prepared: &[u8],
) -> std::io::Result<()> {
    write_atomic(&validation_path(cache_dir, checksum, config), prepared)
}
