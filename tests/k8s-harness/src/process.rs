//! Child processes owned by exact PID.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use crate::{HarnessError, Result};

type SpawnReply = mpsc::Sender<std::io::Result<Child>>;

/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, so every child is
/// forked by one thread that lives as long as the process: children die with the test process
/// even when nobody drops their [`Proc`] (a control plane kept in a `static`).
fn spawner() -> &'static Mutex<mpsc::Sender<(Command, SpawnReply)>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<(Command, SpawnReply)>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<(Command, SpawnReply)>();
        std::thread::Builder::new()
            .name("k8s-harness-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                // The sender lives in a static, so this loop only ends with the process.
                loop {
                    std::thread::park();
                }
            })
            .expect("spawning a thread");
        Mutex::new(tx)
    })
}

pub(crate) struct Proc {
    pub name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &str, bin: &Path, args: &[String], log: &Path) -> Result<Proc> {
        let spawn_err = |source| HarnessError::Spawn {
            name: name.to_string(),
            source,
        };
        let out = std::fs::File::create(log)?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(bin);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: only async-signal-safe libc calls run between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let (tx, rx) = mpsc::channel();
        spawner()
            .lock()
            .map_err(|_| spawn_err(std::io::Error::other("spawner lock poisoned")))?
            .send((cmd, tx))
            .map_err(|_| spawn_err(std::io::Error::other("spawner thread is gone")))?;
        let child = rx
            .recv()
            .map_err(|_| spawn_err(std::io::Error::other("spawner thread is gone")))?
            .map_err(spawn_err)?;
        tracing::debug!(name, pid = child.id(), "started");
        Ok(Proc {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(HarnessError::Exited {
                name: self.name.clone(),
                status: status.to_string(),
                log_tail: self.log_tail(30),
            }),
        }
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // The flag dump at start-up says nothing about why a process died.
        let all: Vec<&str> = text.lines().filter(|l| !l.contains("] FLAG: --")).collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGKILL this exact child and reap it (no process-name matching anywhere).
    pub fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}
