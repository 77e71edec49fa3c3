//! `kusionctl import --terraform-state SOURCE`: migrate from Terraform. The state (format v4,
//! from a file, an S3 backend object or the PostgreSQL backend) becomes kusion state, each
//! resource adopted with its attributes and the provider's private data (refreshed through the
//! Terraform runtime, as `terraform refresh` would), and the spec that manages them is written:
//! each resource's configuration as the runtime derives it from the recorded attributes (what a
//! user writes, not what the provider computes), so the next `preview` plans no change and
//! nothing is re-created.
//!
//! The spec follows the Terraform runtime's conventions (`runtimes/terraform/README.md`): IDs
//! `namespace:provider:type:name`, extensions `provider` (host/namespace/name/version),
//! `providerMeta` (the provider block) and `resourceType`, data sources as `mode: data`; the
//! private data travels in the runtime's envelope `{"schemaVersion": N, "private": base64}`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use kusion_kernel::manage::{self, Adoption};
use kusion_kernel::spec::Spec;
use kusion_sdk::Resource;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::args::{Output, SpecFormat};
use crate::config::read_runtime_config;
use crate::context::CommandContext;
use crate::{UsageError, exit};

/// What `import --terraform-state` was asked.
pub(crate) struct MigrateArgs {
    pub source: String,
    pub provider_config: Option<PathBuf>,
    pub provider_versions: Vec<String>,
    pub spec_out: Option<PathBuf>,
    pub format: SpecFormat,
    pub timeout: Option<Duration>,
}

/// Terraform's state, format v4 (Terraform 0.12 and later): the parts a migration reads.
#[derive(Debug, Deserialize)]
struct TfState {
    version: u64,
    #[serde(default)]
    resources: Vec<TfResource>,
}

#[derive(Debug, Deserialize)]
struct TfResource {
    #[serde(default)]
    module: Option<String>,
    mode: String,
    #[serde(rename = "type")]
    resource_type: String,
    name: String,
    provider: String,
    #[serde(default)]
    instances: Vec<TfInstance>,
}

#[derive(Debug, Deserialize)]
struct TfInstance {
    #[serde(default)]
    index_key: Option<Value>,
    #[serde(default)]
    schema_version: i64,
    #[serde(default)]
    attributes: Map<String, Value>,
    #[serde(default)]
    private: Option<String>,
    #[serde(default)]
    dependencies: Vec<String>,
    #[serde(default)]
    deposed: Option<String>,
}

/// A provider as Terraform's state names it: `provider["HOST/NAMESPACE/NAME"]` with an
/// optional `.ALIAS`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ProviderRef {
    host: String,
    namespace: String,
    name: String,
    alias: Option<String>,
}

impl ProviderRef {
    fn parse(text: &str) -> Result<ProviderRef> {
        let text = text.trim();
        let rest = text
            .strip_prefix("provider[\"")
            .or_else(|| text.split_once(".provider[\"").map(|(_, r)| r))
            .ok_or_else(|| anyhow!("provider {text:?} is not provider[\"HOST/NAMESPACE/NAME\"]"))?;
        let (source, tail) = rest
            .split_once("\"]")
            .ok_or_else(|| anyhow!("provider {text:?}: no closing \"]"))?;
        let alias = tail.strip_prefix('.').map(str::to_string);
        let parts: Vec<&str> = source.split('/').collect();
        let [host, namespace, name] = parts.as_slice() else {
            bail!("provider {text:?}: the source is not HOST/NAMESPACE/NAME");
        };
        Ok(ProviderRef {
            host: host.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            alias,
        })
    }

    fn source(&self) -> String {
        format!("{}/{}/{}", self.host, self.namespace, self.name)
    }

    /// The provider block's key in `--provider-config`: `aws`, or `aws.west`.
    fn local_name(&self) -> String {
        match &self.alias {
            Some(a) => format!("{}.{a}", self.name),
            None => self.name.clone(),
        }
    }
}

pub(crate) fn run(ctx: &CommandContext, args: MigrateArgs, cancel: Arc<AtomicBool>) -> Result<u8> {
    let (text, beside) = load_source(&args.source)?;
    let state: TfState = serde_json::from_slice(&text)
        .with_context(|| format!("{}: not a Terraform state (JSON)", args.source))?;
    if state.version != 4 {
        bail!(
            "{}: Terraform state format v{}; only v4 (Terraform 0.12 and later) is read: run `terraform state pull` with a current terraform first",
            args.source,
            state.version
        );
    }
    let versions = provider_versions(beside.as_deref(), &args.provider_versions)?;
    let configs = match &args.provider_config {
        Some(path) => read_runtime_config(path)?,
        None => Value::Null,
    };
    let runtime = ctx
        .stack
        .registry
        .get("Terraform")
        .cloned()
        .ok_or_else(|| {
            anyhow!("no Terraform runtime is loaded (`kusionctl plugin list` says why)")
        })?;

    let mut adoptions = Vec::new();
    let mut spec = Spec::default();
    let mut skipped = Vec::new();
    // Terraform addresses (`aws_s3_bucket.logs`, `aws_sqs_queue.q[0]`) to kusion IDs, for
    // `dependencies`.
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    let mut pending: Vec<(Resource, Option<String>, Vec<String>, bool)> = Vec::new();
    for r in &state.resources {
        let provider = ProviderRef::parse(&r.provider)
            .with_context(|| format!("{}: resource {}.{}", args.source, r.resource_type, r.name))?;
        let version = versions.get(&provider.source()).ok_or_else(|| {
            UsageError(format!(
                "the version of provider {} is not known: put the state's .terraform.lock.hcl beside it, or pass --provider-version {}/{}=VERSION",
                provider.source(),
                provider.namespace,
                provider.name
            ))
        })?;
        let data = r.mode == "data";
        if !data && r.mode != "managed" {
            skipped.push(format!("{}.{} (mode {})", r.resource_type, r.name, r.mode));
            continue;
        }
        for instance in &r.instances {
            let address = address(r, instance.index_key.as_ref());
            if instance.deposed.is_some() {
                // A deposed object is one Terraform failed to delete: not part of the config.
                skipped.push(format!("{address} (deposed object)"));
                continue;
            }
            let mut name = match &r.module {
                Some(m) => format!("{}.{}", m.replace("module.", ""), r.name),
                None => r.name.clone(),
            };
            if data {
                name = format!("data.{name}");
            }
            if let Some(key) = &instance.index_key {
                name.push('-');
                name.push_str(&match key {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
            }
            let name: String = name
                .chars()
                .map(|c| {
                    if c == ':' || c.is_whitespace() {
                        '_'
                    } else {
                        c
                    }
                })
                .collect();
            let id = format!(
                "{}:{}:{}:{name}",
                provider.namespace, provider.name, r.resource_type
            );
            ids.insert(address.clone(), id.clone());
            let mut extensions = Map::new();
            extensions.insert(
                "provider".into(),
                json!(format!("{}/{version}", provider.source())),
            );
            if let Some(meta) = configs.get(provider.local_name()) {
                extensions.insert("providerMeta".into(), meta.clone());
            }
            extensions.insert("resourceType".into(), json!(r.resource_type));
            if data {
                extensions.insert("mode".into(), json!("data"));
            }
            let mut recorded = Resource::new(id, "Terraform", instance.attributes.clone());
            recorded.extensions = extensions;
            let private = (!data).then(|| {
                json!({
                    "schemaVersion": instance.schema_version,
                    "private": instance.private.clone().unwrap_or_default(),
                })
                .to_string()
            });
            pending.push((recorded, private, instance.dependencies.clone(), data));
        }
    }
    for (recorded, private, dependencies, data) in pending {
        // What a user writes for it: the runtime knows which attributes are configuration.
        let mut planned = runtime
            .configuration(&recorded)
            .map_err(|e| anyhow!("{}: its configuration: {}", recorded.id, e.message))?
            .unwrap_or_else(|| recorded.clone());
        planned.depends_on = dependencies
            .iter()
            .filter_map(|d| {
                ids.get(d.trim_start_matches("module."))
                    .or_else(|| ids.get(d))
            })
            .cloned()
            .collect();
        spec.resources.push(planned.clone());
        if !data {
            adoptions.push(Adoption {
                planned,
                recorded: Some(recorded),
                recorded_private: private,
            });
        }
    }
    if adoptions.is_empty() && spec.resources.is_empty() {
        bail!("{}: the state holds no resources", args.source);
    }
    let adopted = manage::adopt(
        adoptions,
        &ctx.stack,
        args.timeout,
        10,
        vec![format!("migrated from the Terraform state {}", args.source)],
        cancel,
    )?;
    let text = match args.format {
        SpecFormat::Yaml => kusion_kernel::spec::json_to_yaml(&serde_json::to_value(&spec)?),
        SpecFormat::Kcl => kcl_spec(&spec),
    };
    match &args.spec_out {
        Some(path) => std::fs::write(path, &text)
            .with_context(|| format!("writing the spec to {}", path.display()))?,
        None if ctx.output == Output::Human => print!("{text}"),
        None => {}
    }
    if ctx.output == Output::Json {
        println!(
            "{}",
            json!({"imported": adopted.keys, "revision": adopted.revision, "skipped": skipped,
                   "spec": if args.spec_out.is_none() { Some(&text) } else { None }})
        );
    } else {
        for s in &skipped {
            eprintln!("skipped: {s}");
        }
        eprintln!(
            "Imported {} resource(s) from {} into state (revision {}); nothing live was changed.{} `kusionctl preview` with that spec should show no changes.",
            adopted.keys.len(),
            args.source,
            adopted.revision,
            match &args.spec_out {
                Some(p) => format!(" The spec is in {}.", p.display()),
                None => String::new(),
            }
        );
    }
    Ok(exit::OK)
}

/// `type.name` or `type.name[key]` (`data.` first for data sources, as Terraform writes them
/// in `dependencies`).
fn address(r: &TfResource, key: Option<&Value>) -> String {
    let mut a = String::new();
    if let Some(m) = &r.module {
        a.push_str(m);
        a.push('.');
    }
    if r.mode == "data" {
        a.push_str("data.");
    }
    a.push_str(&format!("{}.{}", r.resource_type, r.name));
    match key {
        Some(Value::String(s)) => a.push_str(&format!("[{s:?}]")),
        Some(other) => a.push_str(&format!("[{other}]")),
        None => {}
    }
    a
}

/// The state's bytes, and the folder it came from (for its lock file) when it is a file.
fn load_source(source: &str) -> Result<(Vec<u8>, Option<PathBuf>)> {
    if source.starts_with("s3://") {
        return Ok((read_s3(source)?, None));
    }
    if source.starts_with("postgres://") || source.starts_with("postgresql://") {
        return Ok((read_postgres(source)?, None));
    }
    let path = Path::new(source);
    let bytes = std::fs::read(path).with_context(|| format!("reading {source}"))?;
    Ok((bytes, path.parent().map(Path::to_path_buf)))
}

/// The S3 backend's object: `s3://BUCKET/KEY?endpoint=URL&region=R` (credentials from the
/// usual AWS variables, as for kusion's own S3 state).
fn read_s3(source: &str) -> Result<Vec<u8>> {
    let url = url::Url::parse(source).with_context(|| format!("{source}: not a URL"))?;
    let bucket = url
        .host_str()
        .filter(|b| !b.is_empty())
        .ok_or_else(|| anyhow!("{source}: no bucket (s3://BUCKET/KEY)"))?;
    let key = url.path().trim_start_matches('/');
    if key.is_empty() {
        bail!("{source}: no key (s3://BUCKET/KEY)");
    }
    let mut endpoint = None;
    let mut region = None;
    for (k, v) in url.query_pairs() {
        match k.as_ref() {
            "endpoint" => endpoint = Some(v.into_owned()),
            "region" => region = Some(v.into_owned()),
            other => bail!("{source}: unknown parameter {other:?} (endpoint, region)"),
        }
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let endpoint = endpoint
        .or_else(|| env("AWS_ENDPOINT_URL_S3"))
        .or_else(|| env("AWS_ENDPOINT_URL"));
    let credentials = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
        (Some(k), Some(s)) => Some((k, s, env("AWS_SESSION_TOKEN"))),
        _ => None,
    };
    let store = kusion_kernel::state::S3Store::new(&kusion_kernel::state::S3Config {
        bucket: bucket.to_string(),
        prefix: String::new(),
        path_style: endpoint.is_some(),
        endpoint,
        region: region
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".into()),
        credentials,
    })?;
    store
        .read_object(key)?
        .ok_or_else(|| anyhow!("{source}: no such object"))
}

/// The PostgreSQL backend's row: `name` (the workspace) in `<schema>.states`.
fn read_postgres(source: &str) -> Result<Vec<u8>> {
    let mut url = url::Url::parse(source).with_context(|| format!("{source}: not a URL"))?;
    let mut workspace = "default".to_string();
    let mut schema = "terraform_remote_state".to_string();
    let mut rest = Vec::new();
    for (k, v) in url.query_pairs() {
        match k.as_ref() {
            "workspace" => workspace = v.into_owned(),
            "schema" => schema = v.into_owned(),
            _ => rest.push((k.into_owned(), v.into_owned())),
        }
    }
    if rest.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(rest);
    }
    if !schema
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        bail!("{source}: schema {schema:?} must be a plain identifier");
    }
    let mut client = postgres::Client::connect(url.as_str(), postgres::NoTls)
        .with_context(|| format!("connecting to {}", url.host_str().unwrap_or("PostgreSQL")))?;
    let row = client
        .query_opt(
            &format!("SELECT data FROM {schema}.states WHERE name = $1"),
            &[&workspace],
        )
        .with_context(|| format!("reading {schema}.states"))?
        .ok_or_else(|| anyhow!("{source}: no state for workspace {workspace:?}"))?;
    let data: String = row.get(0);
    Ok(data.into_bytes())
}

/// Provider versions: `.terraform.lock.hcl` in `dir`, then `--provider-version` (which wins).
fn provider_versions(dir: Option<&Path>, given: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    if let Some(dir) = dir {
        let lock = dir.join(".terraform.lock.hcl");
        if let Ok(text) = std::fs::read_to_string(&lock) {
            let mut current: Option<String> = None;
            for line in text.lines() {
                let line = line.trim();
                if let Some(rest) = line.strip_prefix("provider \"") {
                    current = rest.split('"').next().map(str::to_string);
                } else if let (Some(source), Some(rest)) = (&current, line.strip_prefix("version"))
                    && let Some(v) = rest.trim_start().strip_prefix('=')
                {
                    out.insert(source.clone(), v.trim().trim_matches('"').to_string());
                    current = None;
                }
            }
        }
    }
    for g in given {
        let (source, version) = g.split_once('=').ok_or_else(|| {
            UsageError(format!(
                "--provider-version {g:?}: expected SOURCE=VERSION (hashicorp/aws=5.100.0)"
            ))
        })?;
        let source = match source.split('/').count() {
            2 => format!("registry.terraform.io/{source}"),
            3 => source.to_string(),
            _ => {
                return Err(UsageError(format!(
                    "--provider-version {g:?}: the source is NAMESPACE/NAME or HOST/NAMESPACE/NAME"
                ))
                .into());
            }
        };
        out.insert(source, version.trim_start_matches('v').to_string());
    }
    Ok(out)
}

/// The spec as a KCL file: `resources = [...]`, values as KCL literals.
fn kcl_spec(spec: &Spec) -> String {
    let value = serde_json::to_value(spec).unwrap_or(Value::Null);
    let mut out = String::from(
        "# Migrated from a Terraform state by `kusionctl import --terraform-state`.\n",
    );
    out.push_str("resources = ");
    kcl_value(&value["resources"], 0, &mut out);
    out.push('\n');
    out
}

fn kcl_value(v: &Value, depth: usize, out: &mut String) {
    let pad = "    ".repeat(depth + 1);
    let close = "    ".repeat(depth);
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        // JSON string escapes are KCL's too; `$` is not special in a plain string.
        Value::String(s) => out.push_str(&serde_json::to_string(s).unwrap_or_default()),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push_str("[\n");
            for item in items {
                out.push_str(&pad);
                kcl_value(item, depth + 1, out);
                out.push('\n');
            }
            out.push_str(&close);
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            out.push_str("{\n");
            for (k, item) in map {
                out.push_str(&pad);
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(" = ");
                kcl_value(item, depth + 1, out);
                out.push('\n');
            }
            out.push_str(&close);
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_parse_as_terraform_writes_them() {
        let p = ProviderRef::parse(r#"provider["registry.terraform.io/hashicorp/aws"]"#).unwrap();
        assert_eq!(p.source(), "registry.terraform.io/hashicorp/aws");
        assert_eq!(p.local_name(), "aws");
        let p =
            ProviderRef::parse(r#"provider["registry.terraform.io/hashicorp/aws"].west"#).unwrap();
        assert_eq!(p.local_name(), "aws.west");
        let p = ProviderRef::parse(r#"module.net.provider["registry.terraform.io/hashicorp/aws"]"#)
            .unwrap();
        assert_eq!(p.name, "aws");
        assert!(ProviderRef::parse("aws").is_err());
    }

    #[test]
    fn versions_come_from_the_lock_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".terraform.lock.hcl"),
            "provider \"registry.terraform.io/hashicorp/aws\" {\n  version     = \"5.100.0\"\n  constraints = \"5.100.0\"\n  hashes = [\n    \"h1:x\",\n  ]\n}\n",
        )
        .unwrap();
        let v = provider_versions(Some(dir.path()), &["hashicorp/random=v3.6.0".into()]).unwrap();
        assert_eq!(v["registry.terraform.io/hashicorp/aws"], "5.100.0");
        assert_eq!(v["registry.terraform.io/hashicorp/random"], "3.6.0");
        assert!(provider_versions(None, &["nonsense".into()]).is_err());
    }

    #[test]
    fn kcl_literals() {
        let spec: Spec = serde_json::from_value(json!({"resources": [{"id": "a:b:c:d", "type": "Terraform",
            "attributes": {"tags": {"k": "v \"q\""}, "n": 1, "on": true, "none": null, "list": []}}]}))
        .unwrap();
        let text = kcl_spec(&spec);
        assert!(text.contains(r#""k" = "v \"q\"""#), "{text}");
        assert!(text.contains(r#""on" = True"#), "{text}");
        assert!(text.contains(r#""list" = []"#), "{text}");
    }
}
