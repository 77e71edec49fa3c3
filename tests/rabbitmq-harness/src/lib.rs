//! A private RabbitMQ broker for tests, with the management HTTP API.
//!
//! ```no_run
//! let rabbit = kusion_rabbitmq_harness::RabbitServer::start().expect("RabbitMQ must start");
//! let (status, body) = rabbit.api("GET", "/api/vhosts", None).unwrap();
//! ```
//!
//! Everything the broker writes lives in one temporary directory: database (`RABBITMQ_MNESIA_BASE`),
//! logs, the enabled-plugins file (so the management plugin is on without touching the system's
//! `/etc/rabbitmq/enabled_plugins`) and `HOME` (the Erlang cookie). The node name is unique per
//! broker and every port is free when chosen, so several test processes can run brokers at once.
//! The one thing shared is Erlang's port mapper (epmd, port 4369), which the first broker starts
//! and which outlives it, as it does for any Erlang node. Nothing here skips: a broker that does
//! not start is an error carrying its log.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a broker may take to answer: the first boot creates its database and, on a loaded
/// two-core machine, took 25-40 s.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// The user every fresh broker has.
pub const USER: &str = "guest";
pub const PASSWORD: &str = "guest";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "rabbitmq-server not found ($KUSION_RABBITMQ_SERVER, /usr/lib/rabbitmq/bin, PATH): install Debian's `rabbitmq-server` (scripts/setup.d/90-rabbitmq.sh)"
    )]
    NotInstalled,
    #[error("{what}: {detail}")]
    Io { what: String, detail: String },
    #[error("RabbitMQ did not start: {why}\nbroker output:\n{log}")]
    NotStarted { why: String, log: String },
    #[error("{method} {path}: {detail}")]
    Api {
        method: String,
        path: String,
        detail: String,
    },
}

/// A running broker; dropping it stops the broker and deletes its files.
pub struct RabbitServer {
    child: Child,
    dir: tempfile::TempDir,
    amqp_port: u16,
    management_port: u16,
    node: String,
    agent: ureq::Agent,
}

impl RabbitServer {
    /// Start a broker and wait until its management API answers.
    pub fn start() -> Result<RabbitServer, Error> {
        let server = find_server().ok_or(Error::NotInstalled)?;
        let dir = tempfile::Builder::new()
            .prefix("kusion-rabbitmq-")
            .tempdir()
            .map_err(|e| io("creating a temporary directory", e))?;
        let amqp_port = free_port()?;
        let management_port = free_port()?;
        let dist_port = free_port()?;
        let node = format!(
            "kusion-{}-{}@localhost",
            std::process::id(),
            dir.path()
                .file_name()
                .map(|n| n
                    .to_string_lossy()
                    .replace(|c: char| !c.is_ascii_alphanumeric(), ""))
                .unwrap_or_default()
        );
        let conf = dir.path().join("rabbitmq.conf");
        write(
            &conf,
            &format!(
                "listeners.tcp.default = 127.0.0.1:{amqp_port}\n\
                 management.tcp.ip = 127.0.0.1\n\
                 management.tcp.port = {management_port}\n\
                 loopback_users = none\n"
            ),
        )?;
        let plugins = dir.path().join("enabled_plugins");
        write(&plugins, "[rabbitmq_management].\n")?;
        let log = dir.path().join("broker.log");
        let output = std::fs::File::create(&log).map_err(|e| io("creating the broker log", e))?;
        let stderr = output
            .try_clone()
            .map_err(|e| io("creating the broker log", e))?;
        let path = |name: &str| dir.path().join(name);
        let child = Command::new(&server)
            .env("HOME", dir.path())
            .env("RABBITMQ_NODENAME", &node)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", amqp_port.to_string())
            .env("RABBITMQ_DIST_PORT", dist_port.to_string())
            .env("RABBITMQ_CONFIG_FILE", &conf)
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", &plugins)
            .env("RABBITMQ_MNESIA_BASE", path("mnesia"))
            .env("RABBITMQ_LOG_BASE", path("log"))
            .env("RABBITMQ_PLUGINS_EXPAND_DIR", path("plugins-expand"))
            .env("RABBITMQ_PID_FILE", path("broker.pid"))
            .env("RABBITMQ_LOGS", "-")
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(stderr)
            // Its own process group, so stopping it reaches the Erlang VM under the script.
            .process_group(0)
            .spawn()
            .map_err(|e| io(&format!("starting {}", server.display()), e))?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let mut broker = RabbitServer {
            child,
            dir,
            amqp_port,
            management_port,
            node,
            agent,
        };
        broker.wait_ready()?;
        tracing::info!(node = %broker.node, endpoint = %broker.endpoint(), "RabbitMQ broker started");
        Ok(broker)
    }

    fn wait_ready(&mut self) -> Result<(), Error> {
        let started = Instant::now();
        let mut last = String::from("no answer yet");
        while started.elapsed() < START_TIMEOUT {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Error::NotStarted {
                    why: format!("the broker exited with {status}"),
                    log: self.log(),
                });
            }
            match self.api("GET", "/api/overview", None) {
                Ok((200, _)) => return Ok(()),
                Ok((status, body)) => last = format!("{status}: {body}"),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(Error::NotStarted {
            why: format!(
                "the management API did not answer within {} s (last: {last})",
                START_TIMEOUT.as_secs()
            ),
            log: self.log(),
        })
    }

    /// `http://127.0.0.1:<management port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.authority())
    }

    /// `127.0.0.1:<management port>`: what a WASM runtime is granted.
    pub fn authority(&self) -> String {
        format!("127.0.0.1:{}", self.management_port)
    }

    pub fn amqp_port(&self) -> u16 {
        self.amqp_port
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// The broker's output so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// One management API call as guest/guest: the status and the body. `path` starts with
    /// `/api/`; a body is sent as JSON.
    pub fn api(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<(u16, String), Error> {
        use base64::Engine as _;
        let err = |detail: String| Error::Api {
            method: method.into(),
            path: path.into(),
            detail,
        };
        let url = format!("{}{path}", self.endpoint());
        let auth = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
        );
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("authorization", auth)
            .header("content-type", "application/json")
            .body(body.unwrap_or_default().to_string())
            .map_err(|e| err(e.to_string()))?;
        let mut response = self.agent.run(request).map_err(|e| err(e.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| err(e.to_string()))?;
        Ok((status, text))
    }
}

impl Drop for RabbitServer {
    fn drop(&mut self) {
        let Ok(pid) = i32::try_from(self.child.id()) else {
            return;
        };
        // SIGTERM to the broker's own group (its pid is the group id): a clean shutdown, then
        // SIGKILL if it lingers.
        unsafe { libc::kill(-pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

fn find_server() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("KUSION_RABBITMQ_SERVER") {
        return Some(PathBuf::from(path));
    }
    // The script itself, not /usr/sbin's wrapper, which switches to the `rabbitmq` user and its
    // system-wide files.
    let debian = Path::new("/usr/lib/rabbitmq/bin/rabbitmq-server");
    if debian.is_file() {
        return Some(debian.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("rabbitmq-server"))
            .find(|p| p.is_file())
    })
}

fn free_port() -> Result<u16, Error> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| io("finding a free port", e))
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| io(&format!("writing {}", path.display()), e))
}

fn io(what: &str, e: std::io::Error) -> Error {
    Error::Io {
        what: what.into(),
        detail: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two brokers side by side: each answers on its own port, objects made in one are not in
    /// the other, and a stopped broker's port stops answering.
    #[test]
    fn brokers_start_isolated_and_stop() {
        let a = RabbitServer::start().expect("RabbitMQ must start");
        let b = RabbitServer::start().expect("a second RabbitMQ must start");
        assert_ne!(a.endpoint(), b.endpoint());
        let (status, body) = a.api("PUT", "/api/vhosts/only-in-a", Some("{}")).unwrap();
        assert!(status == 201 || status == 204, "{status}: {body}");
        assert_eq!(a.api("GET", "/api/vhosts/only-in-a", None).unwrap().0, 200);
        assert_eq!(b.api("GET", "/api/vhosts/only-in-a", None).unwrap().0, 404);
        let port = a.authority();
        drop(a);
        assert!(
            std::net::TcpStream::connect(&port).is_err(),
            "{port} still answers after the broker was dropped"
        );
    }
}
