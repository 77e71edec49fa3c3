//! A running provider process: go-plugin handshake, the gRPC connection over its unix socket,
//! one client type over protocol 5 and 6, and clean shutdown.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use kusion_sdk::{FieldPath, Segment};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;
use tonic::transport::{Channel, Endpoint};

use crate::proto::{plugin as gp, tfplugin5 as v5, tfplugin6 as v6};
use crate::schema::ProviderSchema;

/// go-plugin's handshake cookie for Terraform providers: a provider refuses to start without it.
const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
const MAGIC_COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";
/// Largest message accepted: GetSchema of big providers is ~5 MB, well over tonic's 4 MiB default.
const MAX_MESSAGE: usize = 64 << 20;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("starting provider {binary}: {message}")]
    Start { binary: String, message: String },
    #[error("provider {binary} handshake: {message}")]
    Handshake { binary: String, message: String },
    #[error("provider RPC {rpc} failed: {status}")]
    Rpc {
        rpc: &'static str,
        status: String,
        transport: bool,
    },
    #[error("provider sent an invalid schema: {0}")]
    Schema(String),
}

/// One diagnostic from the provider.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub error: bool,
    pub summary: String,
    pub detail: String,
    pub attribute: Option<FieldPath>,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail.trim())?;
        }
        if let Some(path) = &self.attribute
            && !path.0.is_empty()
        {
            write!(f, " (at {path})")?;
        }
        Ok(())
    }
}

pub struct PlanResult {
    pub planned_state: Vec<u8>,
    pub requires_replace: Vec<FieldPath>,
    pub planned_private: Vec<u8>,
    pub diagnostics: Vec<Diagnostic>,
}

pub struct StateResult {
    pub state: Vec<u8>,
    pub private: Vec<u8>,
    pub diagnostics: Vec<Diagnostic>,
}

pub struct ImportResult {
    pub resources: Vec<(String, Vec<u8>, Vec<u8>)>,
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Clone)]
enum Client {
    V5(v5::provider_client::ProviderClient<Channel>),
    V6(v6::provider_client::ProviderClient<Channel>),
}

/// A provider process and its connection. RPCs may run concurrently: the channel multiplexes
/// them over one HTTP/2 connection.
pub struct Provider {
    pub binary: PathBuf,
    pub protocol: u32,
    pub pid: u32,
    socket: Option<PathBuf>,
    channel: Channel,
    client: Client,
    child: Mutex<Option<Child>>,
    /// Set when a transport error showed the process is gone.
    dead: AtomicBool,
}

fn rpc_err(rpc: &'static str, status: tonic::Status) -> PluginError {
    // Transport-level failures (the process died, the socket closed) arrive as Unavailable /
    // Unknown with a transport cause; the provider's own errors come as diagnostics instead.
    let transport = matches!(
        status.code(),
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::Cancelled
            | tonic::Code::Internal
    );
    PluginError::Rpc {
        rpc,
        status: format!("{}: {}", status.code(), status.message()),
        transport,
    }
}

macro_rules! dv {
    ($m:ident, $bytes:expr) => {
        Some($m::DynamicValue {
            msgpack: $bytes,
            json: Vec::new(),
        })
    };
}

macro_rules! attr_path {
    ($m:ident, $a:expr) => {
        FieldPath(
            $a.steps
                .into_iter()
                .filter_map(|s| match s.selector? {
                    $m::attribute_path::step::Selector::AttributeName(n) => Some(Segment::Key(n)),
                    $m::attribute_path::step::Selector::ElementKeyString(k) => {
                        Some(Segment::Key(k))
                    }
                    $m::attribute_path::step::Selector::ElementKeyInt(i) => {
                        Some(Segment::Index(i.max(0) as usize))
                    }
                })
                .collect(),
        )
    };
}

macro_rules! diags {
    ($m:ident, $list:expr) => {
        $list
            .into_iter()
            .map(|d| Diagnostic {
                error: d.severity == $m::diagnostic::Severity::Error as i32,
                summary: d.summary,
                detail: d.detail,
                attribute: d.attribute.map(|a| attr_path!($m, a)),
            })
            .collect::<Vec<_>>()
    };
}

/// One RPC on whichever protocol the provider speaks. Inside each arm `$m` names that
/// protocol's generated module, `$c` its client and `$r` the response message, so a single
/// request/response mapping written against `$m` serves tfplugin5 and tfplugin6 alike (their
/// messages share field names). RPCs that protocol 6 renamed take one call per protocol.
macro_rules! rpc {
    ($self:ident, $m:ident, $c:ident, $r:ident;
     v5 $name5:literal => $call5:expr => $map5:expr;
     v6 $name6:literal => $call6:expr => $map6:expr) => {{
        let result = match $self.client.clone() {
            Client::V5(mut $c) => {
                use crate::proto::tfplugin5 as $m;
                $call5.await.map_err(|s| rpc_err($name5, s)).map(|$r| {
                    let $r = $r.into_inner();
                    $map5
                })
            }
            Client::V6(mut $c) => {
                use crate::proto::tfplugin6 as $m;
                $call6.await.map_err(|s| rpc_err($name6, s)).map(|$r| {
                    let $r = $r.into_inner();
                    $map6
                })
            }
        };
        $self.check(result)
    }};
    ($self:ident, $m:ident, $c:ident, $r:ident; $name:literal => $call:expr => $map:expr) => {
        rpc!($self, $m, $c, $r; v5 $name => $call => $map; v6 $name => $call => $map)
    };
}

fn msgpack(value: Option<impl Into<Vec<u8>>>) -> Vec<u8> {
    value.map(Into::into).unwrap_or_default()
}

impl From<v5::DynamicValue> for Vec<u8> {
    fn from(v: v5::DynamicValue) -> Self {
        v.msgpack
    }
}
impl From<v6::DynamicValue> for Vec<u8> {
    fn from(v: v6::DynamicValue) -> Self {
        v.msgpack
    }
}

/// Parsed go-plugin handshake line: `core|protocol|network|address|grpc[|cert]`.
#[derive(Debug, PartialEq, Eq)]
pub struct Handshake {
    pub protocol: u32,
    pub network: String,
    pub address: String,
}

pub fn parse_handshake(line: &str) -> Result<Handshake, String> {
    let parts: Vec<&str> = line.trim().split('|').collect();
    if parts.len() < 5 {
        return Err(format!(
            "expected core|protocol|network|address|grpc, got {line:?}"
        ));
    }
    if parts[0] != "1" {
        return Err(format!(
            "unsupported go-plugin core version {:?} in {line:?}",
            parts[0]
        ));
    }
    let protocol: u32 = parts[1]
        .parse()
        .map_err(|_| format!("bad protocol version {:?} in {line:?}", parts[1]))?;
    if protocol != 5 && protocol != 6 {
        return Err(format!(
            "provider chose protocol {protocol}; supported: 5, 6"
        ));
    }
    if parts[4] != "grpc" {
        return Err(format!("provider speaks {:?}, not grpc", parts[4]));
    }
    if parts.get(5).is_some_and(|c| !c.is_empty()) {
        return Err("provider requires TLS (AutoMTLS), which is not requested".into());
    }
    if parts[2] != "unix" && parts[2] != "tcp" {
        return Err(format!("unsupported network {:?}", parts[2]));
    }
    Ok(Handshake {
        protocol,
        network: parts[2].into(),
        address: parts[3].into(),
    })
}

impl Provider {
    /// Start the binary, complete the handshake and connect. Provider output goes to `log`
    /// (or to this process' stderr when `log` is `None`).
    pub async fn start(binary: &Path, log: Option<&Path>) -> Result<Arc<Provider>, PluginError> {
        let start_err = |message: String| PluginError::Start {
            binary: binary.display().to_string(),
            message,
        };
        let hs_err = |message: String| PluginError::Handshake {
            binary: binary.display().to_string(),
            message,
        };
        let mut cmd = Command::new(binary);
        cmd.env(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)
            .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let log_file = match log {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| start_err(format!("log directory {}: {e}", dir.display())))?;
                }
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| start_err(format!("log file {}: {e}", path.display())))?;
                cmd.stderr(f.try_clone().map_err(|e| start_err(e.to_string()))?);
                Some(f)
            }
            None => {
                cmd.stderr(Stdio::inherit());
                None
            }
        };
        let mut child = cmd.spawn().map_err(|e| start_err(e.to_string()))?;
        let pid = child.id().unwrap_or(0);
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| start_err("no stdout pipe".into()))?;
        let mut lines = BufReader::new(stdout).lines();
        let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
            loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        if line.contains('|') {
                            return parse_handshake(&line);
                        }
                    }
                    Ok(None) => {
                        return Err(
                            "provider exited before the handshake (see its log)".to_string()
                        );
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
        })
        .await;
        let handshake = match handshake {
            Ok(Ok(h)) => h,
            Ok(Err(message)) => {
                let _ = child.kill().await;
                return Err(hs_err(message));
            }
            Err(_) => {
                let _ = child.kill().await;
                return Err(hs_err(format!(
                    "no handshake line within {}s",
                    HANDSHAKE_TIMEOUT.as_secs()
                )));
            }
        };
        // Whatever else the process prints on stdout belongs in its log.
        let mut out_log = log_file.map(tokio::fs::File::from_std);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                match out_log.as_mut() {
                    Some(f) => {
                        let _ = f.write_all(format!("{line}\n").as_bytes()).await;
                    }
                    None => eprintln!("{line}"),
                }
            }
        });

        let endpoint =
            Endpoint::try_from("http://provider.invalid").map_err(|e| hs_err(e.to_string()))?;
        let (channel, socket) = if handshake.network == "unix" {
            let path = PathBuf::from(&handshake.address);
            let connect_path = path.clone();
            let channel = endpoint
                .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                    let p = connect_path.clone();
                    async move {
                        Ok::<_, std::io::Error>(TokioIo::new(
                            tokio::net::UnixStream::connect(p).await?,
                        ))
                    }
                }))
                .await
                .map_err(|e| hs_err(format!("connecting to {}: {e}", path.display())))?;
            (channel, Some(path))
        } else {
            let channel = Endpoint::try_from(format!("http://{}", handshake.address))
                .map_err(|e| hs_err(e.to_string()))?
                .connect()
                .await
                .map_err(|e| hs_err(format!("connecting to {}: {e}", handshake.address)))?;
            (channel, None)
        };
        let client = match handshake.protocol {
            5 => Client::V5(
                v5::provider_client::ProviderClient::new(channel.clone())
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE),
            ),
            _ => Client::V6(
                v6::provider_client::ProviderClient::new(channel.clone())
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE),
            ),
        };
        let provider = Arc::new(Provider {
            binary: binary.to_path_buf(),
            protocol: handshake.protocol,
            pid,
            socket,
            channel,
            client,
            child: Mutex::new(Some(child)),
            dead: AtomicBool::new(false),
        });
        provider.forward_stdio(log);
        Ok(provider)
    }

    /// go-plugin servers forward the provider's stdout/stderr over GRPCStdio; drain it into the
    /// log so the provider never blocks on a full pipe.
    fn forward_stdio(&self, log: Option<&Path>) {
        let mut client = gp::grpc_stdio_client::GrpcStdioClient::new(self.channel.clone());
        let log = log.map(Path::to_path_buf);
        tokio::spawn(async move {
            let Ok(response) = client.stream_stdio(gp::Empty {}).await else {
                return;
            };
            let mut stream = response.into_inner();
            let mut file = match log {
                Some(path) => tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .await
                    .ok(),
                None => None,
            };
            while let Ok(Some(chunk)) = stream.message().await {
                match file.as_mut() {
                    Some(f) => {
                        let _ = f.write_all(&chunk.data).await;
                    }
                    None => eprint!("{}", String::from_utf8_lossy(&chunk.data)),
                }
            }
        });
    }

    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    fn check<T>(&self, result: Result<T, PluginError>) -> Result<T, PluginError> {
        if let Err(PluginError::Rpc {
            transport: true, ..
        }) = &result
        {
            self.dead.store(true, Ordering::Relaxed);
        }
        result
    }

    pub async fn get_schema(&self) -> Result<(ProviderSchema, Vec<Diagnostic>), PluginError> {
        let result = rpc!(self, m, c, r;
            v5 "GetSchema" => c.get_schema(m::get_provider_schema::Request {})
                => (diags!(m, r.diagnostics.clone()), ProviderSchema::from_v5(r));
            v6 "GetProviderSchema" => c.get_provider_schema(m::get_provider_schema::Request {})
                => (diags!(m, r.diagnostics.clone()), ProviderSchema::from_v6(r)));
        let (diagnostics, schema) = result?;
        let schema = schema.map_err(|e| PluginError::Schema(e.to_string()))?;
        Ok((schema, diagnostics))
    }

    /// Validate the provider configuration (PrepareProviderConfig / ValidateProviderConfig).
    /// Returns the prepared configuration when the provider offers one.
    pub async fn validate_provider_config(
        &self,
        config: Vec<u8>,
    ) -> Result<(Option<Vec<u8>>, Vec<Diagnostic>), PluginError> {
        rpc!(self, m, c, r;
            v5 "PrepareProviderConfig" => c.prepare_provider_config(
                m::prepare_provider_config::Request { config: dv!(m, config) })
                => (
                    r.prepared_config.map(|v| v.msgpack).filter(|b| !b.is_empty()),
                    diags!(m, r.diagnostics),
                );
            v6 "ValidateProviderConfig" => c.validate_provider_config(
                m::validate_provider_config::Request { config: dv!(m, config) })
                => (None, diags!(m, r.diagnostics)))
    }

    pub async fn configure(&self, config: Vec<u8>) -> Result<Vec<Diagnostic>, PluginError> {
        const VERSION: &str = "1.11.4";
        rpc!(self, m, c, r;
            v5 "Configure" => c.configure(m::configure::Request {
                terraform_version: VERSION.into(),
                config: dv!(m, config),
                client_capabilities: Some(m::ClientCapabilities { deferral_allowed: false }),
            }) => diags!(m, r.diagnostics);
            v6 "ConfigureProvider" => c.configure_provider(m::configure_provider::Request {
                terraform_version: VERSION.into(),
                config: dv!(m, config),
                client_capabilities: Some(m::ClientCapabilities {
                    deferral_allowed: false,
                    write_only_attributes_allowed: false,
                }),
            }) => diags!(m, r.diagnostics))
    }

    pub async fn upgrade_state(
        &self,
        type_name: &str,
        version: i64,
        json: Vec<u8>,
    ) -> Result<(Vec<u8>, Vec<Diagnostic>), PluginError> {
        rpc!(self, m, c, r; "UpgradeResourceState" => c.upgrade_resource_state(
            m::upgrade_resource_state::Request {
                type_name: type_name.into(),
                version,
                raw_state: Some(m::RawState { json, flatmap: Default::default() }),
            })
            => (msgpack(r.upgraded_state), diags!(m, r.diagnostics)))
    }

    pub async fn read(
        &self,
        type_name: &str,
        state: Vec<u8>,
        private: Vec<u8>,
    ) -> Result<StateResult, PluginError> {
        rpc!(self, m, c, r; "ReadResource" => c.read_resource(m::read_resource::Request {
            type_name: type_name.into(),
            current_state: dv!(m, state),
            private,
            provider_meta: None,
            client_capabilities: None,
        })
        => StateResult {
            state: msgpack(r.new_state),
            private: r.private,
            diagnostics: diags!(m, r.diagnostics),
        })
    }

    /// ReadDataSource: the data source's state for a configuration (no private bytes).
    pub async fn read_data_source(
        &self,
        type_name: &str,
        config: Vec<u8>,
    ) -> Result<StateResult, PluginError> {
        rpc!(self, m, c, r; "ReadDataSource" => c.read_data_source(m::read_data_source::Request {
            type_name: type_name.into(),
            config: dv!(m, config),
            provider_meta: None,
            client_capabilities: None,
        })
        => StateResult {
            state: msgpack(r.state),
            private: Vec::new(),
            diagnostics: diags!(m, r.diagnostics),
        })
    }

    pub async fn plan(
        &self,
        type_name: &str,
        prior: Vec<u8>,
        proposed: Vec<u8>,
        config: Vec<u8>,
        prior_private: Vec<u8>,
    ) -> Result<PlanResult, PluginError> {
        rpc!(self, m, c, r; "PlanResourceChange" => c.plan_resource_change(
        m::plan_resource_change::Request {
            type_name: type_name.into(),
            prior_state: dv!(m, prior),
            proposed_new_state: dv!(m, proposed),
            config: dv!(m, config),
            prior_private,
            provider_meta: None,
            client_capabilities: None,
        })
        => PlanResult {
            planned_state: msgpack(r.planned_state),
            requires_replace: r
                .requires_replace
                .into_iter()
                .map(|a| attr_path!(m, a))
                .collect(),
            planned_private: r.planned_private,
            diagnostics: diags!(m, r.diagnostics),
        })
    }

    pub async fn apply(
        &self,
        type_name: &str,
        prior: Vec<u8>,
        planned: Vec<u8>,
        config: Vec<u8>,
        planned_private: Vec<u8>,
    ) -> Result<StateResult, PluginError> {
        rpc!(self, m, c, r; "ApplyResourceChange" => c.apply_resource_change(
        m::apply_resource_change::Request {
            type_name: type_name.into(),
            prior_state: dv!(m, prior),
            planned_state: dv!(m, planned),
            config: dv!(m, config),
            planned_private,
            provider_meta: None,
        })
        => StateResult {
            state: msgpack(r.new_state),
            private: r.private,
            diagnostics: diags!(m, r.diagnostics),
        })
    }

    pub async fn import(&self, type_name: &str, id: &str) -> Result<ImportResult, PluginError> {
        rpc!(self, m, c, r; "ImportResourceState" => c.import_resource_state(
        m::import_resource_state::Request {
            type_name: type_name.into(),
            id: id.into(),
            client_capabilities: None,
        })
        => ImportResult {
            resources: r
                .imported_resources
                .into_iter()
                .map(|i| (i.type_name, msgpack(i.state), i.private))
                .collect(),
            diagnostics: diags!(m, r.diagnostics),
        })
    }

    /// Ask the process to exit (GRPCController.Shutdown); kill it by PID when it does not within
    /// the grace period, and remove the socket file it may leave behind.
    pub async fn shutdown(&self, grace: Duration) {
        let Some(mut child) = self.child.lock().await.take() else {
            return;
        };
        if !self.is_dead() {
            let mut controller =
                gp::grpc_controller_client::GrpcControllerClient::new(self.channel.clone());
            let _ = tokio::time::timeout(grace, controller.shutdown(gp::Empty {})).await;
        }
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            tracing::warn!(pid = self.pid, binary = %self.binary.display(), "provider did not exit after Shutdown; killing it");
            let _ = child.kill().await;
        }
        if let Some(socket) = &self.socket {
            let _ = std::fs::remove_file(socket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_lines() {
        assert_eq!(
            parse_handshake("1|5|unix|/tmp/plugin2880515784|grpc|\n").unwrap(),
            Handshake {
                protocol: 5,
                network: "unix".into(),
                address: "/tmp/plugin2880515784".into()
            }
        );
        assert_eq!(
            parse_handshake("1|6|tcp|127.0.0.1:1234|grpc")
                .unwrap()
                .protocol,
            6
        );
        assert!(
            parse_handshake("1|4|unix|/tmp/x|grpc|")
                .unwrap_err()
                .contains("protocol 4")
        );
        assert!(parse_handshake("1|5|unix|/tmp/x|netrpc|").is_err());
        assert!(parse_handshake("2|5|unix|/tmp/x|grpc|").is_err());
        assert!(
            parse_handshake("1|5|unix|/tmp/x|grpc|MIIB")
                .unwrap_err()
                .contains("TLS")
        );
        assert!(parse_handshake("hello").is_err());
    }
}
