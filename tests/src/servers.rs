//! Throwaway servers for the state-backend tests: a PostgreSQL cluster and moto's S3 server,
//! each on a free 127.0.0.1 port, stopped (by exact PID) when dropped. Starting fails loudly;
//! nothing is skipped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
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

/// The directory holding PostgreSQL's server programs (`initdb`, `postgres`).
fn pg_bindir() -> PathBuf {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return dir;
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().join("bin"))
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions
        .into_iter()
        .rev()
        .find(|d| d.join("initdb").exists())
        .expect("PostgreSQL is not installed (scripts/setup.d/35-postgres.sh installs it)")
}

/// PostgreSQL refuses to run as root: when we are root, run it as this (uid, gid).
fn unprivileged_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("reading /etc/passwd");
    for name in ["postgres", "nobody"] {
        for line in passwd.lines() {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() > 3 && f[0] == name {
                return Some((f[2].parse().unwrap(), f[3].parse().unwrap()));
            }
        }
    }
    panic!("running as root and there is no `postgres` or `nobody` user to run PostgreSQL as");
}

fn as_user(cmd: &mut Command, user: Option<(u32, u32)>) -> &mut Command {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

/// A PostgreSQL cluster in a temporary directory (trust authentication, user `kusion`).
pub struct PgServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl PgServer {
    pub fn start() -> PgServer {
        let bin = pg_bindir();
        let dir = tempfile::tempdir().expect("temporary directory");
        let user = unprivileged_user();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("handing the PostgreSQL directory to its user");
        }
        let data = dir.path().join("data");
        let log = dir.path().join("server.log");
        let out = as_user(&mut Command::new(bin.join("initdb")), user)
            .args(["-D"])
            .arg(&data)
            .args(["-U", "kusion", "--auth=trust", "--no-sync", "-E", "UTF8"])
            .current_dir(dir.path())
            .output()
            .expect("running initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let logfile = std::fs::File::create(&log).unwrap();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&log, Some(uid), Some(gid)).unwrap();
        }
        let mut child = as_user(&mut Command::new(bin.join("postgres")), user)
            .arg("-D")
            .arg(&data)
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-k"])
            .arg(dir.path())
            .args(["-c", "fsync=off", "-c", "max_connections=50"])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(logfile.try_clone().unwrap())
            .stderr(logfile)
            .spawn()
            .expect("starting postgres");
        wait_for_port(port, &mut child, "postgres", &log);
        // Listening is not accepting: wait until a query works.
        let url = format!("postgres://kusion@127.0.0.1:{port}/postgres");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match postgres::Client::connect(&url, postgres::NoTls) {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => panic!("postgres does not answer: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        PgServer {
            child,
            port,
            _dir: dir,
        }
    }

    /// A connection URL for database `postgres`.
    pub fn url(&self) -> String {
        format!("postgres://kusion@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // SIGINT is PostgreSQL's fast shutdown.
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
        let mut child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
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
