//! Throwaway servers for the state-backend tests: moto's S3 server on a free 127.0.0.1 port,
//! stopped (by exact PID) when dropped. Starting fails loudly; nothing is skipped. PostgreSQL
//! comes from the `kusion-pg-harness` crate (tests/pg-harness), shared with the CMDB plugin.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free local port")
}

fn wait_for_port(port: u16, child: &mut Child, what: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{what} exited with {status} before listening: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "{what} did not listen on port {port} within 60 s: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// `moto_server`'s application, serving one request at a time: moto checks a conditional write
/// (`If-None-Match: *`, which the S3 state backend's numbering and lease rely on) and then
/// stores, not in one step, so two concurrent writers could both win, which S3 never lets
/// happen. A lock around each request makes moto's conditional writes atomic, as S3's are.
const MOTO_ONE_AT_A_TIME: &str = r#"
import sys, threading
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
def one_at_a_time(environ, start_response):
    with lock:
        return list(app(environ, start_response))
run_simple(sys.argv[1], int(sys.argv[2]), one_at_a_time, threaded=True)
"#;

/// moto's S3 server on a free port, with credentials exported for this process's children.
pub struct MotoServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl MotoServer {
    pub fn start() -> MotoServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        let log = dir.path().join("moto.log");
        let port = free_port();
        let logfile = std::fs::File::create(&log).unwrap();
        let mut child = Command::new("python3")
            .args(["-c", MOTO_ONE_AT_A_TIME, "127.0.0.1", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(logfile.try_clone().unwrap())
            .stderr(logfile)
            .spawn()
            .expect("starting moto_server (scripts/setup.d/30-moto.sh installs it)");
        wait_for_port(port, &mut child, "moto_server", &log);
        MotoServer {
            child,
            port,
            _dir: dir,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Create `bucket` (signed with the fixed test credentials).
    pub fn create_bucket(&self, bucket: &str) {
        use rusty_s3::S3Action;
        let b = rusty_s3::Bucket::new(
            self.endpoint().parse().unwrap(),
            rusty_s3::UrlStyle::Path,
            bucket.to_string(),
            "us-east-1",
        )
        .unwrap();
        let (key, secret) = Self::credentials();
        let creds = rusty_s3::Credentials::new(key, secret);
        let url = b.create_bucket(&creds).sign(Duration::from_secs(60));
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut resp = agent.put(url.as_str()).send(&[][..]).expect("CreateBucket");
        let status = resp.status().as_u16();
        let body = resp.body_mut().read_to_string().unwrap_or_default();
        assert_eq!(status, 200, "CreateBucket {bucket}: {body}");
    }

    pub fn credentials() -> (&'static str, &'static str) {
        ("kusion-test", "kusion-test-secret")
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
