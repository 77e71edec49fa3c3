//! A throwaway PostgreSQL server for tests: `initdb` into a temporary directory, `pg_ctl start`
//! on a free local port with trust authentication, stopped and deleted on drop.
//!
//! ```no_run
//! let pg = kusion_pg_harness::PgServer::start().expect("PostgreSQL must start");
//! let url = pg.url(); // postgres://kusion@127.0.0.1:<port>/postgres
//! let other = pg.create_database("state_test").unwrap(); // a fresh database, its URL
//! ```
//!
//! The server binaries are looked up in `$KUSION_PG_BIN`, `/usr/lib/postgresql/<newest>/bin`,
//! then `PATH` (Debian's `postgresql` package; `scripts/setup.d/50-postgres.sh` installs it).
//! PostgreSQL refuses to run as root, so under root the server runs as the `postgres` user (or
//! `$KUSION_PG_USER`) through `runuser`. Nothing here skips: a server that cannot start is an
//! error carrying the server log.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Why the server could not be started or used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "PostgreSQL server binaries (initdb, pg_ctl) not found in $KUSION_PG_BIN, /usr/lib/postgresql/*/bin or PATH: install Debian's `postgresql` package (scripts/setup.d/50-postgres.sh)"
    )]
    NotInstalled,
    #[error(
        "running as root, and PostgreSQL refuses to run as root; no user `{0}` to run it as (install Debian's `postgresql` package, which creates it, or set KUSION_PG_USER)"
    )]
    NoUser(String),
    #[error("{what}: {detail}")]
    Io { what: String, detail: String },
    #[error("{command} failed ({status}):\n{output}")]
    Command {
        command: String,
        status: String,
        output: String,
    },
}

/// A running server; dropping it stops the server and deletes its files.
pub struct PgServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    run_as: Option<String>,
}

/// The database superuser the harness creates (no password: trust authentication).
pub const SUPERUSER: &str = "kusion";

impl PgServer {
    /// Create a cluster and start it; waits until it accepts connections.
    pub fn start() -> Result<PgServer, Error> {
        let bin = find_bin().ok_or(Error::NotInstalled)?;
        let run_as = if unsafe { libc::geteuid() } == 0 {
            let user = std::env::var("KUSION_PG_USER").unwrap_or_else(|_| "postgres".into());
            Some(user)
        } else {
            None
        };
        // Under root the server user must be able to reach the directory: /tmp always is.
        let base = if run_as.is_some() {
            PathBuf::from("/tmp")
        } else {
            std::env::temp_dir()
        };
        let dir = tempfile::Builder::new()
            .prefix("kusion-pg-")
            .tempdir_in(&base)
            .map_err(|e| io(format!("creating a directory in {}", base.display()), e))?;
        if let Some(user) = &run_as {
            chown(dir.path(), user)?;
        }
        let mut server = PgServer {
            dir,
            bin,
            port: 0,
            run_as,
        };
        server.initdb()?;
        // The free port is only free until someone else takes it: retry on a bind failure.
        let mut last = None;
        for _ in 0..5 {
            server.port = free_port()?;
            match server.pg_ctl_start() {
                Ok(()) => return Ok(server),
                Err(e) if e.to_string().contains("could not bind") => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("the loop ran"))
    }

    /// `postgres://kusion@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    /// The URL of another database on this server.
    pub fn url_for(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{database}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Create a database and return its URL (for tests that want isolation on one server).
    pub fn create_database(&self, name: &str) -> Result<String, Error> {
        let createdb = self.bin.join("createdb");
        let mut cmd = Command::new(&createdb);
        cmd.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            SUPERUSER,
        ])
        .arg(name);
        // The client is fine as root; only the server refuses.
        run(&mut cmd, "createdb")?;
        Ok(self.url_for(name))
    }

    /// The server's log so far (for test failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// A command for a server binary, run as the server user when we are root.
    fn server_cmd(&self, tool: &str) -> Command {
        let program = self.bin.join(tool);
        match &self.run_as {
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", user, "--"]).arg(program);
                cmd
            }
            None => Command::new(program),
        }
    }

    fn initdb(&self) -> Result<(), Error> {
        let mut cmd = self.server_cmd("initdb");
        cmd.arg("-D")
            .arg(self.data())
            .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-locale"])
            .arg("--no-sync")
            .arg("--no-instructions");
        run(&mut cmd, "initdb").map(drop)
    }

    fn pg_ctl_start(&self) -> Result<(), Error> {
        // Durability is irrelevant for a throwaway server; skipping fsync makes tests faster.
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            self.port,
            self.dir.path().display()
        );
        let mut cmd = self.server_cmd("pg_ctl");
        cmd.arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.log_path())
            .args(["-w", "-t", "60", "-o", &options, "start"]);
        run(&mut cmd, "pg_ctl start").map(drop).map_err(|e| {
            let log = self.log();
            match e {
                Error::Command {
                    command,
                    status,
                    output,
                } => Error::Command {
                    command,
                    status,
                    output: format!("{output}\nserver log:\n{log}"),
                },
                other => other,
            }
        })
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if self.port == 0 {
            return;
        }
        let mut cmd = self.server_cmd("pg_ctl");
        cmd.arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"]);
        if let Err(e) = run(&mut cmd, "pg_ctl stop") {
            tracing::warn!(error = %e, "stopping the test PostgreSQL server");
        }
    }
}

fn io(what: String, e: std::io::Error) -> Error {
    Error::Io {
        what,
        detail: e.to_string(),
    }
}

fn run(cmd: &mut Command, name: &str) -> Result<Output, Error> {
    let out = cmd
        .output()
        .map_err(|e| io(format!("running {name} ({cmd:?})"), e))?;
    if out.status.success() {
        return Ok(out);
    }
    Err(Error::Command {
        command: format!("{cmd:?}"),
        status: out.status.to_string(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    })
}

fn free_port() -> Result<u16, Error> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| io("finding a free port".into(), e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| io("finding a free port".into(), e))
}

/// The directory holding `initdb` and `pg_ctl`.
fn find_bin() -> Option<PathBuf> {
    let has_tools = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(d) = std::env::var_os("KUSION_PG_BIN").map(PathBuf::from) {
        return has_tools(&d).then_some(d);
    }
    // Debian keeps server binaries off PATH, one folder per major version; take the newest.
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((major, e.path().join("bin")))
        })
        .filter(|(_, d)| has_tools(d))
        .collect();
    versions.sort();
    if let Some((_, d)) = versions.pop() {
        return Some(d);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .find(|d| has_tools(d))
        .map(|d| {
            // A PATH entry may be a symlink farm (/usr/local/bin): use the real folder so the
            // companion binaries (postgres, createdb) are found next to it.
            std::fs::canonicalize(d.join("initdb"))
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .unwrap_or(d)
        })
}

fn chown(path: &Path, user: &str) -> Result<(), Error> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let name = CString::new(user).map_err(|_| Error::NoUser(user.to_string()))?;
    // SAFETY: getpwnam returns a pointer into static storage or null; read it at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err(Error::NoUser(user.to_string()));
    }
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Io {
        what: format!("chown {}", path.display()),
        detail: "path contains a NUL byte".into(),
    })?;
    // SAFETY: a valid C string and plain ids.
    if unsafe { libc::chown(c_path.as_ptr(), uid, gid) } != 0 {
        return Err(io(
            format!("chown {} to {user}", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_accepts_connections_and_stops() {
        let pg = PgServer::start().unwrap_or_else(|e| panic!("PostgreSQL must start: {e}"));
        let port = pg.port();
        let url = pg.create_database("harness_check").unwrap();
        assert!(url.ends_with("/harness_check"), "{url}");
        // A second create of the same name fails: the server really answers.
        let err = pg.create_database("harness_check").unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        let data = pg.data();
        drop(pg);
        assert!(!data.exists(), "the cluster directory is removed on drop");
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "the server stopped"
        );
    }
}
