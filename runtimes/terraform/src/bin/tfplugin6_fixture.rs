//! A small Terraform provider speaking protocol 6, used by the tests to cover tfplugin6 end to
//! end (handshake, schema with a nested attribute, configure, plan/apply/read/import, shutdown).
//!
//! It manages files: resource `fixture_file` writes `content` to `<root>/<path>`, where `root`
//! is the provider configuration. `path` forces replacement, `sha256` and `id` are computed,
//! `secret` is sensitive, `labels` is a protocol-6 nested attribute.

use std::path::PathBuf;
use std::sync::Mutex;

use kusion_runtime_terraform::cty::{self, Block};
use kusion_runtime_terraform::proto::health::health_server::{Health, HealthServer};
use kusion_runtime_terraform::proto::health::{HealthCheckRequest, HealthCheckResponse};
use kusion_runtime_terraform::proto::plugin::Empty;
use kusion_runtime_terraform::proto::plugin::grpc_controller_server::{
    GrpcController, GrpcControllerServer,
};
use kusion_runtime_terraform::proto::tfplugin6::provider_server::{Provider, ProviderServer};
use kusion_runtime_terraform::proto::tfplugin6::*;
use kusion_runtime_terraform::schema::ProviderSchema;
use kusion_sdk::FieldPath;
use rmpv::Value as Mp;
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

const COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
const COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";
const TYPE_NAME: &str = "fixture_file";

fn attr(
    name: &str,
    ty: &str,
    required: bool,
    optional: bool,
    computed: bool,
    sensitive: bool,
) -> schema::Attribute {
    schema::Attribute {
        name: name.into(),
        r#type: format!("\"{ty}\"").into_bytes(),
        required,
        optional,
        computed,
        sensitive,
        ..Default::default()
    }
}

fn provider_schema() -> get_provider_schema::Response {
    let provider = Schema {
        version: 0,
        block: Some(schema::Block {
            attributes: vec![attr("root", "string", true, false, false, false)],
            ..Default::default()
        }),
    };
    let labels = schema::Attribute {
        name: "labels".into(),
        nested_type: Some(schema::Object {
            attributes: vec![
                attr("team", "string", false, true, false, false),
                attr("tier", "string", false, true, false, false),
            ],
            nesting: schema::object::NestingMode::Single as i32,
            ..Default::default()
        }),
        optional: true,
        ..Default::default()
    };
    let file = Schema {
        version: 1,
        block: Some(schema::Block {
            attributes: vec![
                attr("id", "string", false, false, true, false),
                attr("path", "string", true, false, false, false),
                attr("content", "string", true, false, false, false),
                attr("secret", "string", false, true, false, true),
                attr("sha256", "string", false, false, true, false),
                labels,
            ],
            ..Default::default()
        }),
    };
    get_provider_schema::Response {
        provider: Some(provider),
        resource_schemas: [(TYPE_NAME.to_string(), file)].into_iter().collect(),
        server_capabilities: Some(ServerCapabilities {
            plan_destroy: true,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn error(summary: impl Into<String>) -> Diagnostic {
    Diagnostic {
        severity: diagnostic::Severity::Error as i32,
        summary: summary.into(),
        ..Default::default()
    }
}

fn step(name: &str) -> AttributePath {
    AttributePath {
        steps: vec![attribute_path::Step {
            selector: Some(attribute_path::step::Selector::AttributeName(name.into())),
        }],
    }
}

fn dv(value: &Mp) -> Option<DynamicValue> {
    Some(DynamicValue {
        msgpack: cty::to_bytes(value),
        json: Vec::new(),
    })
}

struct Fixture {
    provider_block: Block,
    file_block: Block,
    root: Mutex<Option<PathBuf>>,
}

impl Fixture {
    fn decode(&self, block: &Block, value: Option<&DynamicValue>) -> Result<Json, Status> {
        let bytes = value.map(|v| v.msgpack.as_slice()).unwrap_or_default();
        let mp = cty::from_bytes(bytes).map_err(|e| Status::invalid_argument(e.to_string()))?;
        cty::decode(
            &block.implied_type(),
            &mp,
            &FieldPath::root(),
            &mut Vec::new(),
        )
        .map_err(|e| Status::invalid_argument(e.to_string()))
    }

    fn encode(&self, value: &Json) -> Result<Mp, Status> {
        if value.is_null() {
            return Ok(Mp::Nil);
        }
        self.file_block
            .encode(value, false)
            .map_err(|e| Status::internal(e.to_string()))
    }

    fn root(&self) -> Result<PathBuf, Status> {
        self.root
            .lock()
            .unwrap()
            .clone()
            .ok_or_else(|| Status::failed_precondition("provider is not configured"))
    }

    /// The state of the file at `path` as it is on disk (None when absent).
    fn observe(&self, base: &Json, path: &str) -> Result<Option<Json>, Status> {
        let full = self.root()?.join(path);
        match std::fs::read_to_string(&full) {
            Ok(content) => {
                let mut state = base.clone();
                state["id"] = json!(path);
                state["path"] = json!(path);
                state["sha256"] = json!(hex::encode(Sha256::digest(content.as_bytes())));
                state["content"] = json!(content);
                Ok(Some(state))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Status::internal(format!("{}: {e}", full.display()))),
        }
    }
}

/// Replace the values of `keys` in an encoded object by unknown values.
fn mark_unknown(value: &mut Mp, keys: &[&str]) {
    if let Mp::Map(entries) = value {
        for (k, v) in entries.iter_mut() {
            if k.as_str().is_some_and(|k| keys.contains(&k)) {
                *v = cty::unknown();
            }
        }
    }
}

#[tonic::async_trait]
impl Provider for Fixture {
    async fn get_metadata(
        &self,
        _: Request<get_metadata::Request>,
    ) -> Result<Response<get_metadata::Response>, Status> {
        Ok(Response::new(get_metadata::Response {
            server_capabilities: Some(ServerCapabilities {
                plan_destroy: true,
                ..Default::default()
            }),
            resources: vec![get_metadata::ResourceMetadata {
                type_name: TYPE_NAME.into(),
            }],
            ..Default::default()
        }))
    }

    async fn get_provider_schema(
        &self,
        _: Request<get_provider_schema::Request>,
    ) -> Result<Response<get_provider_schema::Response>, Status> {
        Ok(Response::new(provider_schema()))
    }

    async fn validate_provider_config(
        &self,
        request: Request<validate_provider_config::Request>,
    ) -> Result<Response<validate_provider_config::Response>, Status> {
        let config = self.decode(&self.provider_block, request.get_ref().config.as_ref())?;
        let mut diagnostics = Vec::new();
        if config["root"].as_str().is_none_or(str::is_empty) {
            diagnostics.push(Diagnostic {
                attribute: Some(step("root")),
                ..error("root must be a directory path")
            });
        }
        Ok(Response::new(validate_provider_config::Response {
            diagnostics,
        }))
    }

    async fn validate_resource_config(
        &self,
        _: Request<validate_resource_config::Request>,
    ) -> Result<Response<validate_resource_config::Response>, Status> {
        Ok(Response::new(validate_resource_config::Response::default()))
    }

    async fn upgrade_resource_state(
        &self,
        request: Request<upgrade_resource_state::Request>,
    ) -> Result<Response<upgrade_resource_state::Response>, Status> {
        let raw = request
            .get_ref()
            .raw_state
            .as_ref()
            .map(|r| r.json.clone())
            .unwrap_or_default();
        let mut json: Json = serde_json::from_slice(&raw)
            .map_err(|e| Status::invalid_argument(format!("raw state: {e}")))?;
        // Version 0 of this resource called the content attribute "text".
        if request.get_ref().version == 0
            && let Some(text) = json.as_object_mut().and_then(|m| m.remove("text"))
        {
            json["content"] = text;
        }
        let upgraded = self.encode(&json)?;
        Ok(Response::new(upgrade_resource_state::Response {
            upgraded_state: dv(&upgraded),
            diagnostics: Vec::new(),
        }))
    }

    async fn configure_provider(
        &self,
        request: Request<configure_provider::Request>,
    ) -> Result<Response<configure_provider::Response>, Status> {
        let config = self.decode(&self.provider_block, request.get_ref().config.as_ref())?;
        let root = PathBuf::from(config["root"].as_str().unwrap_or_default());
        if !root.is_dir() {
            return Ok(Response::new(configure_provider::Response {
                diagnostics: vec![error(format!("root {} is not a directory", root.display()))],
            }));
        }
        *self.root.lock().unwrap() = Some(root);
        Ok(Response::new(configure_provider::Response::default()))
    }

    async fn read_resource(
        &self,
        request: Request<read_resource::Request>,
    ) -> Result<Response<read_resource::Response>, Status> {
        let r = request.get_ref();
        let current = self.decode(&self.file_block, r.current_state.as_ref())?;
        let path = current["path"].as_str().unwrap_or_default().to_string();
        let new_state = self.observe(&current, &path)?.unwrap_or(Json::Null);
        Ok(Response::new(read_resource::Response {
            new_state: dv(&self.encode(&new_state)?),
            private: r.private.clone(),
            ..Default::default()
        }))
    }

    async fn read_data_source(
        &self,
        request: Request<read_data_source::Request>,
    ) -> Result<Response<read_data_source::Response>, Status> {
        // The fixture declares no data sources.
        Ok(Response::new(read_data_source::Response {
            diagnostics: vec![error(format!(
                "no data source {:?}",
                request.get_ref().type_name
            ))],
            ..Default::default()
        }))
    }

    async fn plan_resource_change(
        &self,
        request: Request<plan_resource_change::Request>,
    ) -> Result<Response<plan_resource_change::Response>, Status> {
        // One line per plan in `<root>/.plan-calls`: lets tests see which dry-runs planned.
        if let Ok(root) = self.root() {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(root.join(".plan-calls"))
            {
                let _ = writeln!(f, "{}", request.get_ref().type_name);
            }
        }
        let r = request.get_ref();
        let prior = self.decode(&self.file_block, r.prior_state.as_ref())?;
        let proposed = self.decode(&self.file_block, r.proposed_new_state.as_ref())?;
        if proposed.is_null() {
            return Ok(Response::new(plan_resource_change::Response {
                planned_state: dv(&Mp::Nil),
                ..Default::default()
            }));
        }
        let mut planned = self.encode(&proposed)?;
        let mut requires_replace = Vec::new();
        if prior.is_null() {
            mark_unknown(&mut planned, &["id", "sha256"]);
        } else {
            if prior["path"] != proposed["path"] {
                requires_replace.push(step("path"));
                mark_unknown(&mut planned, &["id"]);
            }
            if prior["content"] != proposed["content"] {
                mark_unknown(&mut planned, &["sha256"]);
            }
        }
        Ok(Response::new(plan_resource_change::Response {
            planned_state: dv(&planned),
            requires_replace,
            planned_private: b"fixture-private".to_vec(),
            ..Default::default()
        }))
    }

    async fn apply_resource_change(
        &self,
        request: Request<apply_resource_change::Request>,
    ) -> Result<Response<apply_resource_change::Response>, Status> {
        let r = request.get_ref();
        let prior = self.decode(&self.file_block, r.prior_state.as_ref())?;
        let planned_mp = cty::from_bytes(
            r.planned_state
                .as_ref()
                .map(|v| v.msgpack.as_slice())
                .unwrap_or_default(),
        )
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let root = self.root()?;
        if planned_mp.is_nil() {
            let path = prior["path"].as_str().unwrap_or_default();
            match std::fs::remove_file(root.join(path)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Ok(Response::new(apply_resource_change::Response {
                        diagnostics: vec![error(e.to_string())],
                        ..Default::default()
                    }));
                }
            }
            return Ok(Response::new(apply_resource_change::Response {
                new_state: dv(&Mp::Nil),
                ..Default::default()
            }));
        }
        let planned = self.decode(&self.file_block, r.planned_state.as_ref())?;
        let path = planned["path"].as_str().unwrap_or_default().to_string();
        let content = planned["content"].as_str().unwrap_or_default();
        if let Err(e) = std::fs::write(root.join(&path), content) {
            return Ok(Response::new(apply_resource_change::Response {
                diagnostics: vec![error(format!("writing {path}: {e}"))],
                ..Default::default()
            }));
        }
        let state = self.observe(&planned, &path)?.unwrap_or(Json::Null);
        Ok(Response::new(apply_resource_change::Response {
            new_state: dv(&self.encode(&state)?),
            private: r.planned_private.clone(),
            ..Default::default()
        }))
    }

    async fn import_resource_state(
        &self,
        request: Request<import_resource_state::Request>,
    ) -> Result<Response<import_resource_state::Response>, Status> {
        let id = request.get_ref().id.clone();
        let Some(state) = self.observe(&json!({}), &id)? else {
            return Ok(Response::new(import_resource_state::Response {
                diagnostics: vec![error(format!("no file {id}"))],
                ..Default::default()
            }));
        };
        Ok(Response::new(import_resource_state::Response {
            imported_resources: vec![import_resource_state::ImportedResource {
                type_name: TYPE_NAME.into(),
                state: dv(&self.encode(&state)?),
                private: Vec::new(),
            }],
            ..Default::default()
        }))
    }

    async fn stop_provider(
        &self,
        _: Request<stop_provider::Request>,
    ) -> Result<Response<stop_provider::Response>, Status> {
        Ok(Response::new(stop_provider::Response::default()))
    }
}

struct Controller(mpsc::Sender<()>);

#[tonic::async_trait]
impl GrpcController for Controller {
    async fn shutdown(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        let _ = self.0.try_send(());
        Ok(Response::new(Empty {}))
    }
}

struct HealthCheck;

#[tonic::async_trait]
impl Health for HealthCheck {
    async fn check(
        &self,
        _: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        Ok(Response::new(HealthCheckResponse { status: 1 }))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var(COOKIE_KEY).as_deref() != Ok(COOKIE_VALUE) {
        eprintln!(
            "This binary is a plugin. It is started by a Terraform-protocol client, not run directly."
        );
        std::process::exit(1);
    }
    let offered = std::env::var("PLUGIN_PROTOCOL_VERSIONS").unwrap_or_default();
    if !offered.split(',').any(|v| v.trim() == "6") {
        eprintln!("client does not offer protocol 6 (offered: {offered:?})");
        std::process::exit(1);
    }
    let schema = ProviderSchema::from_v6(provider_schema())?;
    let file_block = schema
        .resource(TYPE_NAME)?
        .map(|s| s.block.clone())
        .unwrap_or_default();
    let (tx, mut rx) = mpsc::channel(1);
    let fixture = Fixture {
        provider_block: schema.provider.block.clone(),
        file_block,
        root: Mutex::new(None),
    };
    let socket =
        std::env::temp_dir().join(format!("tfplugin6-fixture-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket)?;
    println!("1|6|unix|{}|grpc|", socket.display());
    let server = tonic::transport::Server::builder()
        .add_service(ProviderServer::new(fixture))
        .add_service(GrpcControllerServer::new(Controller(tx)))
        .add_service(HealthServer::new(HealthCheck))
        .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener));
    // Exit as soon as the controller asks, like go-plugin servers do: a graceful drain would
    // wait for the client to hang up its connection first.
    tokio::select! {
        result = server => result?,
        _ = rx.recv() => {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let _ = std::fs::remove_file(&socket);
    Ok(())
}
