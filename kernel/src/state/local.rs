//! The embedded default state backend: a directory on the local disk, no server.
//!
//! Layout: `state.json` (last snapshot), `journal.jsonl` (records since it), `releases/NNNNNNNN.json`
//! (history), `runs/N.json` (`kusionctl run` records), `lease.json` (the current lease) guarded by an advisory lock on `lease.guard` so that
//! reading, judging and replacing a lease is one atomic step across processes.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{
    JournalRecord, Lease, LeaseHolder, Release, RunRecord, State, StateError, StateStore,
    format_time, hostname, now_ms,
};

pub struct LocalStore {
    dir: PathBuf,
    journal: Mutex<Option<File>>,
}

impl LocalStore {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> LocalStore {
        LocalStore {
            dir: dir.into(),
            journal: Mutex::new(None),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(&self, e: impl std::fmt::Display) -> StateError {
        StateError::Io {
            location: self.dir.display().to_string(),
            message: e.to_string(),
        }
    }

    fn ensure_dir(&self) -> Result<(), StateError> {
        fs::create_dir_all(self.dir.join("releases")).map_err(|e| self.io(e))
    }

    fn journal_path(&self) -> PathBuf {
        self.dir.join("journal.jsonl")
    }

    /// Write `bytes` to `path` so that a crash leaves either the old or the new content.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<(), StateError> {
        self.ensure_dir()?;
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let mut f = File::create(&tmp).map_err(|e| self.io(format!("{}: {e}", tmp.display())))?;
        f.write_all(bytes).map_err(|e| self.io(e))?;
        f.sync_all().map_err(|e| self.io(e))?;
        drop(f);
        fs::rename(&tmp, path).map_err(|e| self.io(format!("{}: {e}", path.display())))?;
        self.sync_dir(path.parent().unwrap_or(&self.dir))
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), StateError> {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io(e))
    }

    /// Run `f` while holding the cross-process guard lock.
    fn guarded<T>(&self, f: impl FnOnce() -> Result<T, StateError>) -> Result<T, StateError> {
        self.ensure_dir()?;
        let guard = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join("lease.guard"))
            .map_err(|e| self.io(e))?;
        guard.lock().map_err(|e| self.io(e))?;
        let result = f();
        let _ = guard.unlock();
        result
    }

    fn read_lease(&self) -> Result<Option<Lease>, StateError> {
        let path = self.dir.join("lease.json");
        match fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| StateError::Corrupt {
                        location: path.display().to_string(),
                        message: e.to_string(),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io(e)),
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
            Err(e) => return Err(self.io(e)),
        };
        let journal = self.journal_path();
        let file = match File::open(&journal) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(state),
            Err(e) => return Err(self.io(e)),
        };
        let now = now_ms();
        let mut lines = BufReader::new(file).lines().enumerate().peekable();
        while let Some((n, line)) = lines.next() {
            let line = line.map_err(|e| self.io(e))?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<JournalRecord>(&line) {
                Ok(record) => state.apply_record(&record, now),
                // A crash in the middle of an append leaves a torn last line: that step never
                // became durable, so it is dropped. A bad line anywhere else is corruption.
                Err(_) if lines.peek().is_none() => break,
                Err(e) => {
                    return Err(StateError::Corrupt {
                        location: format!("{}:{}", journal.display(), n + 1),
                        message: e.to_string(),
                    });
                }
            }
        }
        Ok(state)
    }

    fn append(&self, records: &[JournalRecord]) -> Result<(), StateError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buffer = Vec::with_capacity(records.len() * 256);
        for record in records {
            serde_json::to_writer(&mut buffer, record).map_err(|e| self.io(e))?;
            buffer.push(b'\n');
        }
        let mut guard = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            self.ensure_dir()?;
            let path = self.journal_path();
            let existed = path.exists();
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| self.io(e))?;
            if !existed {
                self.sync_dir(&self.dir)?;
            }
            *guard = Some(f);
        }
        let f = guard.as_mut().expect("journal opened above");
        f.write_all(&buffer).map_err(|e| self.io(e))?;
        f.sync_data().map_err(|e| self.io(e))
    }

    fn checkpoint(&self, state: &State) -> Result<(), StateError> {
        let bytes = serde_json::to_vec(state).map_err(|e| self.io(e))?;
        self.write_atomic(&self.dir.join("state.json"), &bytes)?;
        // Records already in the snapshot are idempotent if replayed, so truncating after the
        // rename is crash-safe.
        let mut guard = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        *guard = None;
        match OpenOptions::new().write(true).open(self.journal_path()) {
            Ok(f) => {
                f.set_len(0).map_err(|e| self.io(e))?;
                f.sync_all().map_err(|e| self.io(e))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io(e)),
        }
    }

    fn journal_len(&self) -> Result<u64, StateError> {
        match fs::metadata(self.journal_path()) {
            Ok(m) => Ok(m.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(self.io(e)),
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
            let lease = Lease {
                holder: holder.clone(),
                token: random_token(),
                acquired_at: now,
                expires_at: now + ttl_ms,
            };
            let bytes = serde_json::to_vec_pretty(&lease).map_err(|e| self.io(e))?;
            self.write_atomic(&self.dir.join("lease.json"), &bytes)?;
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
                fs::remove_file(self.dir.join("lease.json")).map_err(|e| self.io(e))?;
            }
            Ok(())
        })
    }

    fn force_unlock(&self) -> Result<Option<Lease>, StateError> {
        self.guarded(|| {
            let current = self.read_lease()?;
            if current.is_some() {
                fs::remove_file(self.dir.join("lease.json")).map_err(|e| self.io(e))?;
            }
            Ok(current)
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

    fn releases(&self) -> Result<Vec<Release>, StateError> {
        let mut revisions = self.releases_on_disk()?;
        revisions.sort_unstable();
        revisions.into_iter().map(|r| self.release(r)).collect()
    }

    fn create_run(&self, run: &mut RunRecord) -> Result<u64, StateError> {
        self.guarded(|| {
            let last = numbered_files(&self.dir.join("runs"))
                .map_err(|e| self.io(e))?
                .into_iter()
                .max()
                .unwrap_or(0);
            run.id = last + 1;
            fs::create_dir_all(self.dir.join("runs")).map_err(|e| self.io(e))?;
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
        let mut ids = numbered_files(&self.dir.join("runs")).map_err(|e| self.io(e))?;
        ids.sort_unstable();
        ids.into_iter()
            .map(|id| {
                let path = self.run_path(id);
                let bytes = fs::read(&path).map_err(|e| self.io(e))?;
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
            Err(e) => return Err(self.io(e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| StateError::Corrupt {
            location: path.display().to_string(),
            message: e.to_string(),
        })
    }
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
    fn run_path(&self, id: u64) -> PathBuf {
        self.dir.join("runs").join(format!("{id}.json"))
    }

    fn releases_on_disk(&self) -> Result<Vec<u64>, StateError> {
        let dir = self.dir.join("releases");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
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

    #[test]
    fn journal_replay_and_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        assert!(store.load().unwrap().resources.is_empty());
        store
            .append(&[
                JournalRecord::Intent {
                    kind: IntentKind::Create,
                    resource: entry("a").resource,
                    target: None,
                },
                JournalRecord::Intent {
                    kind: IntentKind::Create,
                    resource: entry("b").resource,
                    target: None,
                },
                JournalRecord::Applied { entry: entry("a") },
            ])
            .unwrap();
        let state = store.load().unwrap();
        assert!(!state.resources["a"].pending);
        assert!(
            state.resources["b"].pending,
            "an intent without outcome is pending"
        );
        store.checkpoint(&state).unwrap();
        assert_eq!(store.journal_len().unwrap(), 0);
        store
            .append(&[JournalRecord::Deleted { id: "a".into() }])
            .unwrap();
        let state = store.load().unwrap();
        assert_eq!(state.resources.keys().collect::<Vec<_>>(), vec!["b"]);
    }

    #[test]
    fn torn_last_line_is_dropped_but_middle_corruption_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        store
            .append(&[JournalRecord::Applied { entry: entry("a") }])
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
