//! Shared test support: a moto server on a free port and the AWS provider configuration for it.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kusion_sdk::Resource;
use serde_json::{Map, Value, json};

pub const AWS_PROVIDER: &str = "registry.terraform.io/hashicorp/aws/5.100.0";
pub const AWS_MIRROR: &str = "/opt/tf-plugins";

/// A running `moto_server`, killed on drop.
pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Moto {
    /// Start moto on a free 127.0.0.1 port; panics (loudly) when it cannot.
    pub fn start() -> Moto {
        let binary =
            AWS_MIRROR.to_string() + "/registry.terraform.io/hashicorp/aws/5.100.0/linux_amd64";
        assert!(
            std::path::Path::new(&binary).is_dir(),
            "terraform-provider-aws 5.100.0 is not in the filesystem mirror {binary}: the machine image must provide it"
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::env::temp_dir().join(format!("moto-{port}.log"));
        let log_file = std::fs::File::create(&log).unwrap();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start moto_server (install it with scripts/setup.d/30-moto.sh): {e}")
            });
        let mut moto = Moto { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok()
                && ureq::get(&moto.url("/moto-api/")).call().is_ok()
            {
                return moto;
            }
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!(
                    "moto_server exited with {status} before serving; log: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer on port {port} within 60s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The provider configuration block pointing every service used at this moto.
    pub fn provider_meta(&self) -> Value {
        let endpoint = self.url("");
        json!({
            "access_key": "testing",
            "secret_key": "testing",
            "region": "us-east-1",
            "skip_credentials_validation": true,
            "skip_requesting_account_id": true,
            "skip_metadata_api_check": "true",
            "s3_use_path_style": true,
            "endpoints": [{
                "s3": endpoint, "iam": endpoint, "ec2": endpoint, "dynamodb": endpoint, "sts": endpoint
            }]
        })
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Terraform resource as the kernel hands it to the runtime.
pub fn resource(
    provider: &str,
    meta: &Value,
    resource_type: &str,
    name: &str,
    attributes: Value,
) -> Resource {
    let ns_name: Vec<&str> = provider.split('/').collect();
    let mut extensions = Map::new();
    extensions.insert("provider".into(), Value::from(provider));
    extensions.insert("providerMeta".into(), meta.clone());
    extensions.insert("resourceType".into(), Value::from(resource_type));
    let Value::Object(attributes) = attributes else {
        panic!("attributes must be an object")
    };
    let mut r = Resource::new(
        format!("{}:{}:{resource_type}:{name}", ns_name[1], ns_name[2]),
        "Terraform",
        attributes,
    );
    r.extensions = extensions;
    r
}

/// Runtime configuration for a test: logs and caches under `dir`, the machine's mirror, offline.
pub fn runtime_config(dir: &std::path::Path) -> Value {
    json!({
        "mirrors": [AWS_MIRROR],
        "logDir": dir.join("logs"),
        "stateDir": dir.join("state"),
        "pluginCacheDir": dir.join("plugins"),
        "schemaCacheDir": schema_cache(),
        "offline": true,
    })
}

/// Schemas are cached across test runs (the cache is keyed by the binary checksum).
pub fn schema_cache() -> PathBuf {
    let root = std::env::var_os("KUSION_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/kusion-rs")
        });
    root.join("terraform/schemas")
}

/// Paths (dotted) where two JSON values differ.
pub fn diff_paths(a: &Value, b: &Value) -> Vec<String> {
    fn walk(a: &Value, b: &Value, path: String, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        p,
                        out,
                    );
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (u, v)) in x.iter().zip(y).enumerate() {
                    walk(u, v, format!("{path}[{i}]"), out);
                }
            }
            _ if a != b => out.push(path),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(a, b, String::new(), &mut out);
    out
}

/// A TCP proxy in front of moto that kills a process (the provider) the moment a request
/// matching an armed pattern passes through: a crash at a known point of an apply. It also
/// records the request lines (`PUT /bucket HTTP/1.1`) in the order they arrive.
pub struct KillProxy {
    pub port: u16,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    trigger: std::sync::Arc<std::sync::Mutex<Option<(String, u32)>>>,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl KillProxy {
    pub fn start(target_port: u16) -> KillProxy {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let trigger: std::sync::Arc<std::sync::Mutex<Option<(String, u32)>>> = Default::default();
        let fired: std::sync::Arc<std::sync::atomic::AtomicBool> = Default::default();
        let requests: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
        let (t, f, log) = (trigger.clone(), fired.clone(), requests.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let Ok(mut server) = TcpStream::connect(("127.0.0.1", target_port)) else {
                    continue;
                };
                let (mut client_r, mut server_w) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (t, f, log) = (t.clone(), f.clone(), log.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut tail: Vec<u8> = Vec::new();
                    loop {
                        let n = match client_r.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        tail.extend_from_slice(&buf[..n]);
                        // Requests start a write of their own, so request lines start chunks
                        // or follow a previous body's CRLF.
                        for line in String::from_utf8_lossy(&buf[..n]).split("\r\n") {
                            let method = line.split(' ').next().unwrap_or_default();
                            if line.ends_with(" HTTP/1.1")
                                && ["GET", "PUT", "POST", "DELETE", "HEAD"].contains(&method)
                            {
                                log.lock().unwrap().push(line.to_string());
                            }
                        }
                        let armed = t.lock().unwrap().clone();
                        if let Some((pattern, pid)) = armed
                            && tail.windows(pattern.len()).any(|w| w == pattern.as_bytes())
                        {
                            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                            *t.lock().unwrap() = None;
                            f.store(true, Ordering::SeqCst);
                        }
                        let keep = tail.len().saturating_sub(256);
                        tail.drain(..keep);
                        if server_w.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = server_w.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server, &mut client);
                    let _ = client.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        KillProxy {
            port,
            requests,
            trigger,
            fired,
        }
    }

    /// Kill `pid` when a request containing `pattern` goes through.
    pub fn arm(&self, pattern: &str, pid: u32) {
        self.fired.store(false, std::sync::atomic::Ordering::SeqCst);
        *self.trigger.lock().unwrap() = Some((pattern.to_string(), pid));
    }

    /// Request lines seen so far, in arrival order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    pub fn fired(&self) -> bool {
        self.fired.load(std::sync::atomic::Ordering::SeqCst)
    }
}
