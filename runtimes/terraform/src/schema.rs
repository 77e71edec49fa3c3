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
    /// Protocol 6's spelling of the answer (a protocol 5 answer is converted on arrival, see
    /// [`schema5_to6`]), so one piece of code reads either.
    raw: v6::get_provider_schema::Response,
    pub provider: Schema,
    /// The provider expects a plan call for destroys (ServerCapabilities.plan_destroy).
    pub plan_destroy: bool,
    converted: Mutex<HashMap<String, Arc<Schema>>>,
}

impl ProviderSchema {
    pub fn from_v5(resp: v5::get_provider_schema::Response) -> Result<ProviderSchema, CtyError> {
        let convert = |m: HashMap<String, v5::Schema>| {
            m.into_iter()
                .map(|(k, v)| (k, schema5_to6(v)))
                .collect::<HashMap<_, _>>()
        };
        ProviderSchema::from_v6(v6::get_provider_schema::Response {
            provider: resp.provider.map(schema5_to6),
            resource_schemas: convert(resp.resource_schemas),
            data_source_schemas: convert(resp.data_source_schemas),
            // (the caller reads them before)
            diagnostics: Vec::new(),
            provider_meta: resp.provider_meta.map(schema5_to6),
            server_capabilities: resp.server_capabilities.map(|c| v6::ServerCapabilities {
                plan_destroy: c.plan_destroy,
                get_provider_schema_optional: c.get_provider_schema_optional,
                move_resource_state: c.move_resource_state,
            }),
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
            raw: resp,
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
        let schema = self
            .raw
            .resource_schemas
            .get(type_name)
            .map(schema6)
            .transpose()?;
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
        let schema = self
            .raw
            .data_source_schemas
            .get(type_name)
            .map(schema6)
            .transpose()?;
        Ok(schema.map(|s| {
            let s = Arc::new(s);
            converted.insert(key, s.clone());
            s
        }))
    }

    /// Cache encoding: one byte of protocol version, then the protobuf message (always
    /// protocol 6's now; entries of protocol 5 written before still read).
    pub fn to_bytes(&self) -> Vec<u8> {
        [vec![6u8], self.raw.encode_to_vec()].concat()
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
        let r = &self.raw;
        let body = json!({
            "provider": r.provider.as_ref().map(json6).unwrap_or(Value::Null),
            "resource_schemas": schemas(&r.resource_schemas, json6),
            "data_source_schemas": schemas(&r.data_source_schemas, json6),
        });
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

/// A protocol 5 schema in protocol 6's messages: the two differ only in where an attribute's
/// `write_only` flag sits and in protocol 6's nested attribute types (protocol 5 has none).
fn schema5_to6(s: v5::Schema) -> v6::Schema {
    v6::Schema {
        version: s.version,
        block: s.block.map(block5_to6),
    }
}

fn block5_to6(b: v5::schema::Block) -> v6::schema::Block {
    v6::schema::Block {
        version: b.version,
        attributes: b
            .attributes
            .into_iter()
            .map(|a| v6::schema::Attribute {
                name: a.name,
                r#type: a.r#type,
                description: a.description,
                required: a.required,
                optional: a.optional,
                computed: a.computed,
                sensitive: a.sensitive,
                description_kind: a.description_kind,
                deprecated: a.deprecated,
                nested_type: None,
                write_only: a.write_only,
            })
            .collect(),
        block_types: b
            .block_types
            .into_iter()
            .map(|nb| v6::schema::NestedBlock {
                type_name: nb.type_name,
                block: nb.block.map(block5_to6),
                // (the same numbers in both protocols)
                nesting: nb.nesting,
                min_items: nb.min_items,
                max_items: nb.max_items,
            })
            .collect(),
        description: b.description,
        description_kind: b.description_kind,
        deprecated: b.deprecated,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A protocol 5 answer reads as the same answer spelled in protocol 6: the model, the
    /// terraform JSON (`write_only` included) and the cache round trip.
    #[test]
    fn protocol5_answer_reads_as_its_protocol6_spelling() {
        let attr5 = |name: &str, write_only: bool| v5::schema::Attribute {
            name: name.into(),
            r#type: b"\"string\"".to_vec(),
            optional: true,
            write_only,
            description: format!("{name} text"),
            ..Default::default()
        };
        let attr6 = |name: &str, write_only: bool| v6::schema::Attribute {
            name: name.into(),
            r#type: b"\"string\"".to_vec(),
            optional: true,
            write_only,
            description: format!("{name} text"),
            ..Default::default()
        };
        let schema5 = v5::Schema {
            version: 2,
            block: Some(v5::schema::Block {
                attributes: vec![attr5("a", false), attr5("secret", true)],
                block_types: vec![v5::schema::NestedBlock {
                    type_name: "rule".into(),
                    block: Some(v5::schema::Block {
                        attributes: vec![attr5("b", false)],
                        ..Default::default()
                    }),
                    nesting: 3,
                    min_items: 1,
                    max_items: 4,
                }],
                deprecated: true,
                ..Default::default()
            }),
        };
        let schema6 = v6::Schema {
            version: 2,
            block: Some(v6::schema::Block {
                attributes: vec![attr6("a", false), attr6("secret", true)],
                block_types: vec![v6::schema::NestedBlock {
                    type_name: "rule".into(),
                    block: Some(v6::schema::Block {
                        attributes: vec![attr6("b", false)],
                        ..Default::default()
                    }),
                    nesting: 3,
                    min_items: 1,
                    max_items: 4,
                }],
                deprecated: true,
                ..Default::default()
            }),
        };
        let from5 = ProviderSchema::from_v5(v5::get_provider_schema::Response {
            resource_schemas: [("x_thing".to_string(), schema5)].into(),
            server_capabilities: Some(v5::ServerCapabilities {
                plan_destroy: true,
                ..Default::default()
            }),
            ..Default::default()
        })
        .unwrap();
        let from6 = ProviderSchema::from_v6(v6::get_provider_schema::Response {
            resource_schemas: [("x_thing".to_string(), schema6)].into(),
            server_capabilities: Some(v6::ServerCapabilities {
                plan_destroy: true,
                ..Default::default()
            }),
            ..Default::default()
        })
        .unwrap();
        assert!(from5.plan_destroy);
        let model = from5.resource("x_thing").unwrap().unwrap();
        assert_eq!(model, from6.resource("x_thing").unwrap().unwrap());
        assert_eq!(model.block.block_types["rule"].nesting, Nesting::Set);
        let json = from5.to_terraform_json("p");
        assert_eq!(json, from6.to_terraform_json("p"));
        let attrs = &json["provider_schemas"]["p"]["resource_schemas"]["x_thing"]["block"];
        assert_eq!(attrs["attributes"]["secret"]["write_only"], true);
        let again = ProviderSchema::from_bytes(&from5.to_bytes()).unwrap();
        assert_eq!(again.to_terraform_json("p"), json);
    }
}
