//! The embedded default state backend: a directory on the local disk, no server.
//!
//! Layout: `state.json` (last snapshot), `journal.jsonl` (records since it), `releases/NNNNNNNN.json`
//! (history), `runs/N.json` (`kusionctl run` records), `lease.json` (the current lease) guarded by an advisory lock on `lease.guard` so that
//! reading, judging and replacing a lease is one atomic step across processes. How a record is
//! written down is `journal.rs`, shared with the S3 backend.
//!
//! Over 800 lines because its tests (crash, torn-write and repair cases of this one layout) sit
//! beside it; the backend itself is about 750.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::check::Finding;
use super::journal::{self, Line};
use super::{
    JournalRecord, Lease, LeaseHolder, Release, RunRecord, State, StateError, StateStore,
    format_time, hostname, now_ms,
};

/// How long to wait for the guard lock before saying its holder is stuck.
const GUARD_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// A stack's state in a folder on the local disk: `state.json`, the journal, the lease, releases and runs.
pub struct LocalStore {
    dir: PathBuf,
    journal: Mutex<Option<File>>,
    /// `lease.guard`, opened once.
    guard: Mutex<Option<File>>,
    /// The lease last confirmed current: its file's identity (inode and modification time)
    /// and token. Every change of the lease replaces the file (a rename), so an unchanged
    /// identity means an unchanged lease and the file need not be read again.
    confirmed: Mutex<Option<(u64, i64, i64, String)>>,
}

impl LocalStore {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> LocalStore {
        LocalStore {
            dir: dir.into(),
            journal: Mutex::new(None),
            guard: Mutex::new(None),
            confirmed: Mutex::new(None),
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(&self, e: impl std::fmt::Display) -> StateError {
        StateError::Io {
            location: self.dir.display().to_string(),
            message: e.to_string(),
        }
    }

    /// An I/O error on `path`, named so that the user knows which file the system refused.
    fn io_at(&self, path: &Path, e: impl std::fmt::Display) -> StateError {
        self.io(format!("{}: {e}", path.display()))
    }

    fn ensure_dir(&self) -> Result<(), StateError> {
        private_dir(&self.dir.join("releases"))
            .map_err(|e| self.io_at(&self.dir.join("releases"), e))
    }

    fn journal_path(&self) -> PathBuf {
        self.dir.join("journal.jsonl")
    }

    /// Write `bytes` to `path` so that a crash leaves either the old or the new content.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<(), StateError> {
        self.ensure_dir()?;
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let written = (|| {
            let mut f = private_file(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()
        })();
        if let Err(e) = written {
            // A full or failing disk must not leave a half-written temporary behind.
            let _ = fs::remove_file(&tmp);
            return Err(self.io(format!("{}: {e}", tmp.display())));
        }
        if let Err(e) = fs::rename(&tmp, path) {
            let _ = fs::remove_file(&tmp);
            return Err(self.io(format!("{}: {e}", path.display())));
        }
        self.sync_dir(path.parent().unwrap_or(&self.dir))
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), StateError> {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io_at(dir, e))
    }

    /// Run `f` while holding the cross-process guard lock.
    fn guarded<T>(&self, f: impl FnOnce() -> Result<T, StateError>) -> Result<T, StateError> {
        let mut slot = self.guard.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            self.ensure_dir()?;
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(self.dir.join("lease.guard"))
                .map_err(|e| self.io_at(&self.dir.join("lease.guard"), e))?;
            *slot = Some(file);
        }
        let guard = slot.as_ref().expect("opened above");
        // Held only for short checks and renames; a holder that does not let go within this
        // time is stopped or hung, and waiting longer would hang this command too.
        let deadline = std::time::Instant::now() + GUARD_WAIT;
        loop {
            match guard.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(self.io(format!(
                        "{} stays locked by another process for more than {}s: a kusion process is stopped or hung in the middle of a state change; continue or end it",
                        self.dir.join("lease.guard").display(),
                        GUARD_WAIT.as_secs()
                    )));
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(self.io_at(&self.dir.join("lease.guard"), e));
                }
            }
        }
        let result = f();
        let _ = guard.unlock();
        result
    }

    fn read_lease(&self) -> Result<Option<Lease>, StateError> {
        let path = self.dir.join("lease.json");
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                StateError::Corrupt {
                    location: path.display().to_string(),
                    message: format!(
                        "{e} (once no kusion process works on this stack, `kusionctl state unlock` removes it)"
                    ),
                }
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_at(&path, e)),
        }
    }

    /// The last fencing number handed out (kept apart from `lease.json`, which is removed on
    /// release and by `state unlock`).
    fn read_fence(&self) -> Result<u64, StateError> {
        match fs::read_to_string(self.dir.join("fence")) {
            Ok(text) => Ok(text.trim().parse().unwrap_or(0)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(self.io_at(&self.dir.join("fence"), e)),
        }
    }

    /// Refuse a write whose lease is no longer the stack's (call under the guard lock).
    fn check_lease(&self, lease: &Lease) -> Result<(), StateError> {
        use std::os::unix::fs::MetadataExt;
        let identity = fs::metadata(self.dir.join("lease.json"))
            .ok()
            .map(|m| (m.ino(), m.mtime(), m.mtime_nsec()));
        let mut confirmed = self.confirmed.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some((ino, sec, nsec)), Some((c_ino, c_sec, c_nsec, token))) =
            (identity, confirmed.as_ref())
            && (ino, sec, nsec) == (*c_ino, *c_sec, *c_nsec)
            && *token == lease.token
        {
            return Ok(());
        }
        let current = self.read_lease()?;
        super::writer::check_current(&self.location(), lease, current.as_ref())?;
        *confirmed = identity.map(|(i, s, n)| (i, s, n, lease.token.clone()));
        Ok(())
    }

    /// Remove temporary files left by processes that died mid-write (call under the guard).
    fn remove_stale_temporaries(&self) {
        for (path, why) in self.loose_files() {
            if why.starts_with("a temporary") {
                let _ = fs::remove_file(path);
            }
        }
    }

    fn release_path(&self, revision: u64) -> PathBuf {
        self.dir
            .join("releases")
            .join(format!("{revision:08}.json"))
    }
}

/// Whether the process that holds `lease` is certainly gone (same host, no such pid).
pub(crate) fn holder_is_dead(holder: &LeaseHolder) -> bool {
    holder.host == hostname()
        && cfg!(target_os = "linux")
        && !Path::new(&format!("/proc/{}", holder.pid)).exists()
}

pub(crate) fn random_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(now_ms());
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

impl StateStore for LocalStore {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn load(&self) -> Result<State, StateError> {
        let snapshot = self.dir.join("state.json");
        let mut state = match fs::read(&snapshot) {
            Ok(bytes) => {
                serde_json::from_slice::<State>(&bytes).map_err(|e| StateError::Corrupt {
                    location: snapshot.display().to_string(),
                    message: e.to_string(),
                })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(self.io_at(&snapshot, e)),
        };
        let journal = self.journal_path();
        let bytes = match fs::read(&journal) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(state),
            Err(e) => return Err(self.io_at(&journal, e)),
        };
        let now = now_ms();
        for (n, line) in journal::lines(&bytes) {
            match line {
                Line::Record(text) => match journal::decode(text) {
                    Ok(record) => state.apply_record(&record, now),
                    Err(e) => {
                        return Err(StateError::Corrupt {
                            location: format!("{}:{n}", journal.display()),
                            message: format!(
                                "{e} (`kusionctl state check` describes the damage, `kusionctl state repair` fixes what it can)"
                            ),
                        });
                    }
                },
                // A crash or a full disk in the middle of an append leaves a last line without
                // its newline: that write was never acknowledged, so it is not replayed (and
                // the next append cuts it off).
                Line::Torn(_) => {}
            }
        }
        Ok(state)
    }

    fn append(&self, lease: &Lease, records: &[JournalRecord]) -> Result<(), StateError> {
        if records.is_empty() {
            return Ok(());
        }
        let buffer = journal::encode(records).map_err(|e| self.io(e))?;
        let mut journal = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        // The lease is checked under the guard, but the write and its fsync happen outside it,
        // so a writer stopped mid-write (SIGSTOP) holds no lock others need. A takeover during
        // the write is harmless: the write starts with a `Fence` marker of the older lease,
        // which replay ignores after the newer one's records.
        self.guarded(|| {
            self.check_lease(lease)?;
            if journal.is_none() {
                let path = self.journal_path();
                let existed = path.exists();
                // A write torn by a crash or a full disk left a partial last line, which
                // loading ignores; it must go before anything is written after it.
                if existed && let Some(dropped) = truncate_torn_tail(&path).map_err(|e| self.io_at(&path, e))? {
                    tracing::warn!(
                        "{}: dropped a torn last line ({dropped} bytes) left by an interrupted write",
                        path.display()
                    );
                }
                let f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(&path)
                    .map_err(|e| self.io_at(&path, e))?;
                if !existed {
                    self.sync_dir(&self.dir)?;
                }
                *journal = Some(f);
            }
            Ok(())
        })?;
        let f = journal.as_mut().expect("journal opened above");
        let written = f.write_all(&buffer).and_then(|()| f.sync_data());
        if let Err(e) = written {
            // What reached the file may be a torn line: reopen (and trim it) next time.
            *journal = None;
            return Err(self.io(format!("{}: {e}", self.journal_path().display())));
        }
        // Tell a writer that lost the stack during the write at once.
        self.check_lease(lease)
    }

    fn checkpoint(&self, lease: &Lease, state: &State) -> Result<(), StateError> {
        let bytes = serde_json::to_vec(state).map_err(|e| self.io(e))?;
        let mut journal = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        self.guarded(|| {
            self.check_lease(lease)?;
            self.write_atomic(&self.dir.join("state.json"), &bytes)?;
            // Records already in the snapshot are idempotent if replayed, so truncating after
            // the rename is crash-safe.
            *journal = None;
            match OpenOptions::new().write(true).open(self.journal_path()) {
                Ok(f) => {
                    f.set_len(0)
                        .map_err(|e| self.io_at(&self.journal_path(), e))?;
                    f.sync_all()
                        .map_err(|e| self.io_at(&self.journal_path(), e))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(self.io_at(&self.journal_path(), e)),
            }
        })
    }

    fn journal_len(&self) -> Result<u64, StateError> {
        match fs::metadata(self.journal_path()) {
            Ok(m) => Ok(m.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(self.io_at(&self.journal_path(), e)),
        }
    }

    fn acquire_lease(&self, holder: &LeaseHolder, ttl_ms: u64) -> Result<Lease, StateError> {
        self.guarded(|| {
            let now = now_ms();
            if let Some(existing) = self.read_lease()?
                && existing.expires_at > now
                && !holder_is_dead(&existing.holder)
            {
                return Err(StateError::Locked {
                    holder: existing.holder,
                    expires: format_time(existing.expires_at),
                });
            }
            let previous = self.read_lease()?.map_or(0, |l| l.fence);
            let fence = previous.max(self.read_fence()?) + 1;
            self.write_atomic(&self.dir.join("fence"), fence.to_string().as_bytes())?;
            let lease = Lease {
                holder: holder.clone(),
                token: random_token(),
                acquired_at: now,
                expires_at: now + ttl_ms,
                fence,
            };
            let bytes = serde_json::to_vec_pretty(&lease).map_err(|e| self.io(e))?;
            self.write_atomic(&self.dir.join("lease.json"), &bytes)?;
            self.remove_stale_temporaries();
            Ok(lease)
        })
    }

    fn renew_lease(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StateError> {
        self.guarded(|| {
            match self.read_lease()? {
                Some(current) if current.token == lease.token => {}
                _ => return Err(StateError::LeaseLost),
            }
            let renewed = Lease {
                expires_at: now_ms() + ttl_ms,
                ..lease.clone()
            };
            let bytes = serde_json::to_vec_pretty(&renewed).map_err(|e| self.io(e))?;
            self.write_atomic(&self.dir.join("lease.json"), &bytes)?;
            Ok(renewed)
        })
    }

    fn release_lease(&self, lease: &Lease) -> Result<(), StateError> {
        self.guarded(|| {
            if let Some(current) = self.read_lease()?
                && current.token == lease.token
            {
                fs::remove_file(self.dir.join("lease.json"))
                    .map_err(|e| self.io_at(&self.dir.join("lease.json"), e))?;
            }
            Ok(())
        })
    }

    fn force_unlock(&self) -> Result<Option<Lease>, StateError> {
        self.guarded(|| {
            // A lease that cannot be read is removed too: it must never lock a stack for good.
            let current = match self.read_lease() {
                Ok(lease) => lease,
                Err(StateError::Corrupt { location, message }) => {
                    tracing::warn!("removing an unreadable lease {location}: {message}");
                    None
                }
                Err(e) => return Err(e),
            };
            match fs::remove_file(self.dir.join("lease.json")) {
                Ok(()) => Ok(current),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(self.io_at(&self.dir.join("lease.json"), e)),
            }
        })
    }

    fn current_lease(&self) -> Result<Option<Lease>, StateError> {
        self.read_lease()
    }

    fn create_release(&self, release: &mut Release) -> Result<u64, StateError> {
        self.guarded(|| {
            let last = self.releases_on_disk()?.into_iter().max().unwrap_or(0);
            release.revision = last + 1;
            let bytes = serde_json::to_vec_pretty(release).map_err(|e| self.io(e))?;
            self.write_atomic(&self.release_path(release.revision), &bytes)?;
            Ok(release.revision)
        })
    }

    fn update_release(&self, release: &Release) -> Result<(), StateError> {
        let bytes = serde_json::to_vec_pretty(release).map_err(|e| self.io(e))?;
        self.write_atomic(&self.release_path(release.revision), &bytes)
    }

    fn inspect(&self) -> Result<Vec<Finding>, StateError> {
        let mut findings = Vec::new();
        let journal = self.journal_path();
        match fs::read(&journal) {
            Ok(bytes) => {
                for (n, line) in journal::lines(&bytes) {
                    match line {
                        Line::Torn(text) => findings.push(Finding::warning(
                            format!(
                                "{}:{n}: a torn last line ({} bytes) from an interrupted write; it was never acknowledged and is dropped by the next write",
                                journal.display(),
                                text.len()
                            ),
                            true,
                        )),
                        Line::Record(text) => {
                            if let Err(e) = journal::decode(text) {
                                let salvage = journal::salvage_record(text).map_or(String::new(), |(dropped, _)| {
                                    format!("; its last {} bytes are a whole record, kept by repair, the {dropped} bytes before it dropped", text.len() - dropped)
                                });
                                findings.push(Finding::error(
                                    format!("{}:{n}: unreadable journal line ({e}){salvage}", journal.display()),
                                    true,
                                ));
                            }
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(self.io_at(&journal, e)),
        }
        let snapshot = self.dir.join("state.json");
        if let Ok(bytes) = fs::read(&snapshot)
            && let Err(e) = serde_json::from_slice::<State>(&bytes)
        {
            findings.push(Finding::error(
                format!(
                    "{}: unreadable snapshot ({e}); nothing can rebuild it without guessing: restore it from a backup",
                    snapshot.display()
                ),
                false,
            ));
        }
        for (path, why) in self.loose_files() {
            findings.push(Finding::warning(format!("{}: {why}", path.display()), true));
        }
        Ok(findings)
    }

    fn repair(&self, lease: &Lease) -> Result<Vec<String>, StateError> {
        let mut done = Vec::new();
        let mut journal = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        self.guarded(|| {
            self.check_lease(lease)?;
            *journal = None;
            let path = self.journal_path();
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(self.io_at(&path, e)),
            };
            let mut kept = Vec::with_capacity(bytes.len());
            let mut changed = false;
            for (n, line) in journal::lines(&bytes) {
                match line {
                    Line::Torn(text) => {
                        changed = true;
                        done.push(format!(
                            "{}:{n}: dropped a torn last line ({} bytes), never acknowledged",
                            path.display(),
                            text.len()
                        ));
                    }
                    Line::Record(text) => {
                        if journal::decode(text).is_ok() {
                            kept.extend_from_slice(text);
                            kept.push(b'\n');
                            continue;
                        }
                        changed = true;
                        match journal::salvage_record(text) {
                            Some((dropped, record)) => {
                                kept.extend_from_slice(record);
                                kept.push(b'\n');
                                done.push(format!(
                                    "{}:{n}: dropped {dropped} bytes of a torn write in front of a whole record, kept the record",
                                    path.display()
                                ));
                            }
                            None => done.push(format!(
                                "{}:{n}: dropped an unreadable line ({} bytes): {}",
                                path.display(),
                                text.len(),
                                String::from_utf8_lossy(&text[..text.len().min(120)])
                            )),
                        }
                    }
                }
            }
            if changed {
                self.write_atomic(&path, &kept)?;
            }
            for (file, why) in self.loose_files() {
                if why.starts_with("readable") {
                    use std::os::unix::fs::PermissionsExt;
                    fs::set_permissions(&file, fs::Permissions::from_mode(if file.is_dir() { 0o700 } else { 0o600 }))
                        .map_err(|e| self.io_at(&file, e))?;
                    done.push(format!("{}: made private to its owner", file.display()));
                } else {
                    let _ = fs::remove_file(&file);
                    done.push(format!("{}: removed ({why})", file.display()));
                }
            }
            Ok(())
        })?;
        Ok(done)
    }

    fn latest_revision(&self) -> Result<Option<u64>, StateError> {
        Ok(self.releases_on_disk()?.into_iter().max())
    }

    fn releases(&self) -> Result<Vec<Release>, StateError> {
        let mut revisions = self.releases_on_disk()?;
        revisions.sort_unstable();
        revisions.into_iter().map(|r| self.release(r)).collect()
    }

    fn create_run(&self, run: &mut RunRecord) -> Result<u64, StateError> {
        self.guarded(|| {
            let last = numbered_files(&self.dir.join("runs"))
                .map_err(|e| self.io_at(&self.dir.join("runs"), e))?
                .into_iter()
                .max()
                .unwrap_or(0);
            run.id = last + 1;
            private_dir(&self.dir.join("runs"))
                .map_err(|e| self.io_at(&self.dir.join("runs"), e))?;
            let bytes = serde_json::to_vec_pretty(run).map_err(|e| self.io(e))?;
            self.write_atomic(&self.run_path(run.id), &bytes)?;
            Ok(run.id)
        })
    }

    fn update_run(&self, run: &RunRecord) -> Result<(), StateError> {
        let path = self.run_path(run.id);
        // Like the remote backends: only a created run can be updated.
        if !path.is_file() {
            return Err(StateError::NoSuchRun(run.id));
        }
        let bytes = serde_json::to_vec_pretty(run).map_err(|e| self.io(e))?;
        self.write_atomic(&path, &bytes)
    }

    fn runs(&self) -> Result<Vec<RunRecord>, StateError> {
        let mut ids = numbered_files(&self.dir.join("runs"))
            .map_err(|e| self.io_at(&self.dir.join("runs"), e))?;
        ids.sort_unstable();
        ids.into_iter()
            .map(|id| {
                let path = self.run_path(id);
                let bytes = fs::read(&path).map_err(|e| self.io_at(&path, e))?;
                serde_json::from_slice(&bytes).map_err(|e| StateError::Corrupt {
                    location: path.display().to_string(),
                    message: e.to_string(),
                })
            })
            .collect()
    }

    fn release(&self, revision: u64) -> Result<Release, StateError> {
        let path = self.release_path(revision);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StateError::NoSuchRelease(revision));
            }
            Err(e) => return Err(self.io_at(&path, e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| StateError::Corrupt {
            location: path.display().to_string(),
            message: e.to_string(),
        })
    }
}

/// Create a file readable by its owner only (state may hold values derived from secrets).
fn private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// Create a directory (and its parents) accessible by its owner only.
fn private_dir(path: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// If the file's last line has no newline (an append torn by a crash, a full disk or an I/O
/// error), cut it off; returns how many bytes were dropped. A torn line was never acknowledged,
/// so nothing durable is lost.
pub(crate) fn truncate_torn_tail(path: &Path) -> std::io::Result<Option<u64>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = OpenOptions::new().read(true).write(true).open(path)?;
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))?;
    f.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(None);
    }
    // Scan backwards for the end of the last whole line.
    let mut end = len;
    let mut keep = 0;
    let mut chunk = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut chunk[..n])?;
        if let Some(i) = chunk[..n].iter().rposition(|b| *b == b'\n') {
            keep = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    f.set_len(keep)?;
    f.sync_all()?;
    Ok(Some(len - keep))
}

/// `<n>.json` file numbers in a directory (none when it does not exist).
fn numbered_files(dir: &Path) -> std::io::Result<Vec<u64>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse().ok())
        })
        .collect())
}

impl LocalStore {
    /// Files that should not be there or not be readable by others: temporaries of dead
    /// writers, and state written by versions that created files with the umask's mode.
    fn loose_files(&self) -> Vec<(PathBuf, String)> {
        use std::os::unix::fs::PermissionsExt;
        let mut out = Vec::new();
        for dir in [
            self.dir.clone(),
            self.dir.join("releases"),
            self.dir.join("runs"),
        ] {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            if let Ok(meta) = fs::metadata(&dir)
                && meta.permissions().mode() & 0o077 != 0
            {
                out.push((dir.clone(), "readable by others than its owner".to_string()));
            }
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some((_, pid)) = name.rsplit_once(".tmp-")
                    && let Ok(pid) = pid.parse::<u32>()
                    && pid != std::process::id()
                    && !Path::new(&format!("/proc/{pid}")).exists()
                {
                    out.push((
                        path,
                        "a temporary file of a process that died while writing".to_string(),
                    ));
                    continue;
                }
                if let Ok(meta) = entry.metadata()
                    && meta.is_file()
                    && meta.permissions().mode() & 0o077 != 0
                {
                    out.push((path, "readable by others than its owner".to_string()));
                }
            }
        }
        out
    }

    fn run_path(&self, id: u64) -> PathBuf {
        self.dir.join("runs").join(format!("{id}.json"))
    }

    fn releases_on_disk(&self) -> Result<Vec<u64>, StateError> {
        let dir = self.dir.join("releases");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io_at(&dir, e)),
        };
        Ok(entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .and_then(|n| n.parse().ok())
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{IntentKind, ReleaseStatus, StateEntry};
    use kusion_sdk::Resource;

    fn entry(id: &str) -> StateEntry {
        StateEntry {
            resource: Resource::new(id, "Test", Default::default()),
            private: None,
            sensitive_paths: vec![],
            pending: false,
            updated_at: 1,
            target: None,
        }
    }

    fn lease(store: &LocalStore) -> Lease {
        store
            .acquire_lease(&LeaseHolder::current("test"), 600_000)
            .unwrap()
    }

    #[test]
    fn journal_replay_and_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        assert!(store.load().unwrap().resources.is_empty());
        let lease = lease(&store);
        store
            .append(
                &lease,
                &[
                    JournalRecord::Intent {
                        kind: IntentKind::Create,
                        resource: entry("a").resource,
                        target: None,
                        sensitive_paths: vec![],
                    },
                    JournalRecord::Intent {
                        kind: IntentKind::Create,
                        resource: entry("b").resource,
                        target: None,
                        sensitive_paths: vec![],
                    },
                    JournalRecord::Applied { entry: entry("a") },
                ],
            )
            .unwrap();
        let state = store.load().unwrap();
        assert!(!state.resources["a"].pending);
        assert!(
            state.resources["b"].pending,
            "an intent without outcome is pending"
        );
        store.checkpoint(&lease, &state).unwrap();
        assert_eq!(store.journal_len().unwrap(), 0);
        store
            .append(&lease, &[JournalRecord::Deleted { id: "a".into() }])
            .unwrap();
        let state = store.load().unwrap();
        assert_eq!(state.resources.keys().collect::<Vec<_>>(), vec!["b"]);
    }

    #[test]
    fn torn_last_line_is_dropped_but_middle_corruption_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let lease = lease(&store);
        store
            .append(&lease, &[JournalRecord::Applied { entry: entry("a") }])
            .unwrap();
        let journal = dir.path().join("journal.jsonl");
        let mut text = fs::read_to_string(&journal).unwrap();
        text.push_str("{\"op\":\"applied\",\"entry\":{\"reso");
        fs::write(&journal, &text).unwrap();
        assert_eq!(store.load().unwrap().resources.len(), 1);
        text.push_str("\n{\"op\":\"deleted\",\"id\":\"a\"}\n");
        fs::write(&journal, &text).unwrap();
        let e = store.load().unwrap_err();
        assert!(e.to_string().contains("journal.jsonl:2"), "{e}");
        assert!(e.to_string().contains("state repair"), "{e}");
    }

    /// A write torn by a full disk or a crash, then more appends (by a later process): the torn
    /// line is cut off before anything is written after it, so the stack stays loadable.
    #[test]
    fn append_after_a_torn_line_cuts_it_off() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal.jsonl");
        {
            let store = LocalStore::new(dir.path());
            let lease = lease(&store);
            store
                .append(&lease, &[JournalRecord::Applied { entry: entry("a") }])
                .unwrap();
            store.release_lease(&lease).unwrap();
        }
        let text = fs::read_to_string(&journal).unwrap();
        // A whole record without its newline is torn too: its write was never acknowledged.
        let whole_record =
            serde_json::to_string(&JournalRecord::Applied { entry: entry("x") }).unwrap();
        for torn in [
            "{\"op\":\"applied\",\"entry\":{\"reso",
            whole_record.as_str(),
        ] {
            fs::write(&journal, format!("{text}{torn}")).unwrap();
            let store = LocalStore::new(dir.path());
            assert_eq!(
                store.load().unwrap().resources.keys().collect::<Vec<_>>(),
                vec!["a"]
            );
            let lease = lease(&store);
            store
                .append(&lease, &[JournalRecord::Applied { entry: entry("b") }])
                .unwrap();
            let state = store.load().unwrap();
            assert_eq!(state.resources.keys().collect::<Vec<_>>(), vec!["a", "b"]);
            let left: Vec<_> = store
                .inspect()
                .unwrap()
                .into_iter()
                .filter(|f| !f.message.contains("readable by others"))
                .collect();
            assert!(left.is_empty(), "nothing left to repair: {left:?}");
            store.release_lease(&lease).unwrap();
        }
    }

    /// A journal written by a version that appended straight after a torn line: `state check`
    /// names the damage and `state repair` keeps the whole record, drops the torn bytes.
    #[test]
    fn repair_salvages_a_record_written_after_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal.jsonl");
        let store = LocalStore::new(dir.path());
        let a = serde_json::to_string(&JournalRecord::Applied { entry: entry("a") }).unwrap();
        let b = serde_json::to_string(&JournalRecord::Applied { entry: entry("b") }).unwrap();
        let c = serde_json::to_string(&JournalRecord::Applied { entry: entry("c") }).unwrap();
        fs::create_dir_all(dir.path()).unwrap();
        fs::write(
            &journal,
            format!("{a}\n{{\"op\":\"applied\",\"ent{b}\n{c}\n"),
        )
        .unwrap();
        let e = store.load().unwrap_err().to_string();
        assert!(e.contains("journal.jsonl:2"), "{e}");
        let found: Vec<_> = store
            .inspect()
            .unwrap()
            .into_iter()
            .filter(|f| !f.message.contains("readable by others"))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].repairable && found[0].message.contains("kept by repair"),
            "{found:?}"
        );
        let lease = lease(&store);
        let done = store.repair(&lease).unwrap();
        assert!(done[0].contains("dropped 20 bytes"), "{done:?}");
        assert_eq!(
            store.load().unwrap().resources.keys().collect::<Vec<_>>(),
            vec!["a", "b", "c"]
        );
        // A line with nothing whole in it is dropped and named.
        fs::write(&journal, format!("{a}\ngarbage\n{c}\n")).unwrap();
        let done = store.repair(&lease).unwrap();
        assert!(
            done[0].contains("dropped an unreadable line") && done[0].contains("garbage"),
            "{done:?}"
        );
        assert_eq!(
            store.load().unwrap().resources.keys().collect::<Vec<_>>(),
            vec!["a", "c"]
        );
    }

    #[test]
    fn writes_with_a_lease_that_is_not_current_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let first = lease(&store);
        store
            .append(&first, &[JournalRecord::Applied { entry: entry("a") }])
            .unwrap();
        // `state unlock` (or `rm lease.json`) while the first writer runs, then a second one.
        store.force_unlock().unwrap();
        let e = store
            .append(&first, &[JournalRecord::Applied { entry: entry("b") }])
            .unwrap_err();
        assert!(matches!(e, StateError::Fenced { fence: 1, .. }), "{e}");
        assert!(e.to_string().contains("removed"), "{e}");
        let second = lease(&store);
        assert_eq!(
            second.fence, 2,
            "fences grow even after the lease file is gone"
        );
        for result in [
            store.append(&first, &[JournalRecord::Applied { entry: entry("b") }]),
            store.checkpoint(&first, &State::default()),
        ] {
            let e = result.unwrap_err();
            assert!(e.to_string().contains("lease #2 is held by"), "{e}");
        }
        store
            .append(&second, &[JournalRecord::Applied { entry: entry("c") }])
            .unwrap();
        assert_eq!(
            store.load().unwrap().resources.keys().collect::<Vec<_>>(),
            vec!["a", "c"]
        );
    }

    #[test]
    fn an_unreadable_lease_is_removed_by_unlock() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        lease(&store);
        fs::write(dir.path().join("lease.json"), "{\"holder\": tr").unwrap();
        let e = store
            .acquire_lease(&LeaseHolder::current("apply"), 1000)
            .unwrap_err();
        assert!(e.to_string().contains("state unlock"), "{e}");
        assert_eq!(store.force_unlock().unwrap(), None);
        let next = lease(&store);
        assert_eq!(next.fence, 2);
    }

    #[test]
    fn state_files_are_private_and_stale_temporaries_go() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("state");
        let store = LocalStore::new(&state_dir);
        let lease = lease(&store);
        store
            .append(&lease, &[JournalRecord::Applied { entry: entry("a") }])
            .unwrap();
        store.checkpoint(&lease, &store.load().unwrap()).unwrap();
        store.release_lease(&lease).unwrap();
        for name in ["state.json", "journal.jsonl", "lease.guard", "fence", "."] {
            let mode = fs::metadata(state_dir.join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{name} is {mode:o}");
        }
        // A process that died while writing left its temporary file behind.
        let stale = state_dir.join(format!("state.tmp-{}", u32::MAX - 3));
        fs::write(&stale, "partial").unwrap();
        let _ = store
            .acquire_lease(&LeaseHolder::current("apply"), 1000)
            .unwrap();
        assert!(!stale.exists());
    }

    #[test]
    fn lease_is_exclusive_and_expires() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let me = LeaseHolder::current("apply");
        let lease = store.acquire_lease(&me, 60_000).unwrap();
        let e = store
            .acquire_lease(&LeaseHolder::current("destroy"), 60_000)
            .unwrap_err();
        assert!(matches!(e, StateError::Locked { .. }));
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        let lease = store.renew_lease(&lease, 0).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let taken = store
            .acquire_lease(&LeaseHolder::current("destroy"), 60_000)
            .unwrap();
        assert!(matches!(
            store.renew_lease(&lease, 1000),
            Err(StateError::LeaseLost)
        ));
        store.release_lease(&lease).unwrap();
        assert!(
            store.current_lease().unwrap().is_some(),
            "releasing a lost lease leaves the new holder alone"
        );
        store.release_lease(&taken).unwrap();
        assert!(store.current_lease().unwrap().is_none());
    }

    #[test]
    fn dead_holder_on_this_host_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let mut ghost = LeaseHolder::current("apply");
        ghost.pid = u32::MAX - 1;
        store.acquire_lease(&ghost, 600_000).unwrap();
        store
            .acquire_lease(&LeaseHolder::current("apply"), 600_000)
            .unwrap();
    }

    #[test]
    fn releases_are_numbered() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        for _ in 0..3 {
            let mut r = Release {
                revision: 0,
                operation: "apply".into(),
                holder: LeaseHolder::current("apply"),
                started_at: now_ms(),
                finished_at: None,
                status: ReleaseStatus::Running,
                spec: Default::default(),
                steps: vec![],
                notes: vec![],
                rollback_of: None,
            };
            store.create_release(&mut r).unwrap();
            r.status = ReleaseStatus::Succeeded;
            store.update_release(&r).unwrap();
        }
        let all = store.releases().unwrap();
        assert_eq!(
            all.iter().map(|r| r.revision).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert!(matches!(
            store.release(9),
            Err(StateError::NoSuchRelease(9))
        ));
    }
}
