//! The one way to change a stack's state: a held lease, renewed in the background, that every
//! journal and snapshot write carries (fencing), and that is checked again before anything is
//! changed outside (a runtime call) whenever renewals have fallen behind — after the process
//! was paused (SIGSTOP, a stalled VM) past the lease's life, another process may own the stack.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::seal::Sealer;
use super::{JournalRecord, Lease, LeaseHolder, State, StateError, StateStore};

/// A stack's lease, held for one operation. Dropping it stops the renewals and releases the
/// lease (unless it was lost).
pub struct Writer {
    inner: Arc<Inner>,
    renewer: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

struct Inner {
    store: Arc<dyn StateStore>,
    ttl: Duration,
    lease: Mutex<Held>,
    /// Set once the lease is known to be someone else's (or gone): nothing more is written
    /// and no new action starts.
    lost: AtomicBool,
    /// Raised with `lost`, so the operation stops starting steps.
    cancel: Arc<AtomicBool>,
    /// Seals sensitive values before they are written (set once the state is loaded).
    sealer: std::sync::OnceLock<Arc<Sealer>>,
    /// A new sealing record still to be journaled before the first write.
    sealing_pending: Mutex<Option<super::seal::Sealing>>,
}

struct Held {
    lease: Lease,
    /// When the lease was last confirmed (acquired or renewed), on this machine's monotonic
    /// clock, which keeps counting while the process is stopped.
    confirmed: Instant,
}

impl Writer {
    /// Take the stack's lease for `holder`, renewed every third of `ttl` until dropped.
    /// `cancel` is raised if the lease is lost.
    pub fn acquire(
        store: Arc<dyn StateStore>,
        holder: &LeaseHolder,
        ttl: Duration,
        cancel: Arc<AtomicBool>,
    ) -> Result<Writer, StateError> {
        let lease = store.acquire_lease(holder, ttl.as_millis() as u64)?;
        let inner = Arc::new(Inner {
            store,
            ttl,
            lease: Mutex::new(Held {
                lease,
                confirmed: Instant::now(),
            }),
            lost: AtomicBool::new(false),
            cancel,
            sealer: std::sync::OnceLock::new(),
            sealing_pending: Mutex::new(None),
        });
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let renewing = inner.clone();
        let handle = std::thread::Builder::new()
            .name("kusion-lease".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(renewing.ttl / 3)
                {
                    if renewing.lost.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Err(e) = renewing.renew() {
                        // A store that cannot be reached is tried again at the next tick;
                        // `ensure_live` refuses to act once the lease may have expired.
                        tracing::warn!("renewing the state lease: {e}");
                    }
                }
            })
            .map_err(|e| StateError::Io {
                location: "lease".into(),
                message: format!("starting the lease renewer: {e}"),
            })?;
        Ok(Writer {
            inner,
            renewer: Some((stop, handle)),
        })
    }

    /// [`Writer::acquire`], retrying while another process holds the stack, for up to `wait`
    /// (or until `cancel` is raised); then the last `Locked` error.
    pub fn acquire_waiting(
        store: Arc<dyn StateStore>,
        holder: &LeaseHolder,
        ttl: Duration,
        cancel: Arc<AtomicBool>,
        wait: Duration,
    ) -> Result<Writer, StateError> {
        let deadline = Instant::now() + wait;
        loop {
            match Writer::acquire(store.clone(), holder, ttl, cancel.clone()) {
                Err(StateError::Locked { .. })
                    if Instant::now() < deadline && !cancel.load(Ordering::SeqCst) =>
                {
                    std::thread::sleep(Duration::from_millis(250));
                }
                other => return other,
            }
        }
    }

    /// The store this writer writes to.
    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.inner.store
    }

    /// The lease as last confirmed.
    pub fn lease(&self) -> Lease {
        self.inner.held().lease.clone()
    }

    /// Whether the lease was lost (another process owns the stack now).
    pub fn is_lost(&self) -> bool {
        self.inner.lost.load(Ordering::SeqCst)
    }

    /// Call before changing anything outside the state (a runtime call): refuses once the lease
    /// is lost, and confirms it with the store first when renewals have fallen behind (the
    /// process was paused), so a resumed process never acts on a lease someone else now holds.
    pub fn ensure_live(&self) -> Result<(), StateError> {
        self.inner.ensure_live()
    }

    /// Seal sensitive values with `sealer` from now on (once, after loading the state). A new
    /// or changed sealing is journaled with the first write.
    pub fn set_sealer(&self, sealer: Arc<Sealer>) -> Result<(), StateError> {
        sealer
            .require_key_for_writes()
            .map_err(|e| StateError::Io {
                location: self.inner.store.location(),
                message: e.to_string(),
            })?;
        *self
            .inner
            .sealing_pending
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = sealer.fresh.clone();
        self.inner.sealer.set(sealer).map_err(|_| StateError::Io {
            location: self.inner.store.location(),
            message: "the state's sealer was set twice".into(),
        })
    }

    /// Durably append journal records under the lease, sensitive values sealed.
    pub fn append(&self, records: &[JournalRecord]) -> Result<(), StateError> {
        let pending = self
            .inner
            .sealing_pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let sealer = self.inner.sealer.get();
        if pending.is_none() && sealer.is_none() {
            return self
                .inner
                .write(|store, lease| store.append(lease, records));
        }
        let mut sealed = Vec::with_capacity(records.len() + 1);
        if let Some(sealing) = &pending {
            sealed.push(JournalRecord::Sealing {
                sealing: sealing.clone(),
            });
        }
        for record in records {
            let mut record = record.clone();
            if let Some(sealer) = sealer {
                sealer.seal_record(&mut record);
            }
            sealed.push(record);
        }
        self.inner
            .write(|store, lease| store.append(lease, &sealed))?;
        if pending.is_some() {
            *self
                .inner
                .sealing_pending
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = None;
        }
        Ok(())
    }

    /// Replace the snapshot under the lease; sensitive values in `state` are sealed in place.
    pub fn checkpoint(&self, state: &mut State) -> Result<(), StateError> {
        if let Some(sealer) = self.inner.sealer.get() {
            if state.sealing.is_none() {
                state.sealing = Some(sealer.sealing.clone());
            }
            for entry in state.resources.values_mut() {
                sealer.seal_entry(entry);
            }
        }
        self.inner
            .write(|store, lease| store.checkpoint(lease, state))?;
        *self
            .inner
            .sealing_pending
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        Ok(())
    }
}

impl Inner {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.lease.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fenced(&self, lease: &Lease) -> StateError {
        let now = match self.store.current_lease() {
            Ok(Some(current)) => format!("lease #{} is held by {}", current.fence, current.holder),
            Ok(None) => "the lease was removed, e.g. by `kusionctl state unlock`".to_string(),
            Err(e) => format!("the current lease cannot be read: {e}"),
        };
        StateError::Fenced {
            location: self.store.location(),
            fence: lease.fence,
            now,
        }
    }

    fn lose(&self, error: &StateError) {
        if !self.lost.swap(true, Ordering::SeqCst) {
            tracing::error!("{error}");
            self.cancel.store(true, Ordering::SeqCst);
        }
    }

    fn renew(&self) -> Result<(), StateError> {
        let lease = self.held().lease.clone();
        let started = Instant::now();
        match self.store.renew_lease(&lease, self.ttl.as_millis() as u64) {
            Ok(renewed) => {
                let mut held = self.held();
                held.lease = renewed;
                // The store's expiry counts from when it handled the request, which is no
                // earlier than when it was sent.
                held.confirmed = started;
                Ok(())
            }
            Err(StateError::LeaseLost | StateError::Fenced { .. }) => {
                let e = self.fenced(&lease);
                self.lose(&e);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn ensure_live(&self) -> Result<(), StateError> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(self.fenced(&self.held().lease));
        }
        // Renewals run every third of the lease's life; past half of it, they have stalled.
        if self.held().confirmed.elapsed() < self.ttl / 2 {
            return Ok(());
        }
        self.renew()
    }

    fn write(
        &self,
        write: impl FnOnce(&dyn StateStore, &Lease) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let lease = self.held().lease.clone();
        if self.lost.load(Ordering::SeqCst) {
            return Err(self.fenced(&lease));
        }
        match write(&*self.store, &lease) {
            Err(e @ StateError::Fenced { .. }) => {
                self.lose(&e);
                Err(e)
            }
            Err(StateError::LeaseLost) => {
                let e = self.fenced(&lease);
                self.lose(&e);
                Err(e)
            }
            other => other,
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some((stop, handle)) = self.renewer.take() {
            drop(stop);
            let _ = handle.join();
        }
        if !self.inner.lost.load(Ordering::SeqCst) {
            let lease = self.inner.held().lease.clone();
            if let Err(e) = self.inner.store.release_lease(&lease) {
                tracing::warn!("releasing the state lease: {e}");
            }
        }
    }
}

/// A lease that is still the stack's (for stores checking a write): `Ok` when `current` is
/// `lease`, else the refusal to report.
pub(crate) fn check_current(
    location: &str,
    lease: &Lease,
    current: Option<&Lease>,
) -> Result<(), StateError> {
    if lease.is_current(current) {
        return Ok(());
    }
    Err(StateError::Fenced {
        location: location.to_string(),
        fence: lease.fence,
        now: match current {
            Some(c) => format!("lease #{} is held by {}", c.fence, c.holder),
            None => "the lease was removed, e.g. by `kusionctl state unlock`".to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::seal::{KeySource, Sealer};
    use crate::state::{IntentKind, LocalStore, StateEntry};
    use kusion_sdk::Resource;
    use serde_json::json;

    fn secret_resource() -> Resource {
        let mut r = Resource::new("t:db", "Test", Default::default());
        r.attributes.insert("password".into(), json!("hunter2"));
        r.attributes.insert("user".into(), json!("admin"));
        r
    }

    fn all_bytes(dir: &std::path::Path) -> String {
        let mut out = String::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            if e.path().is_file() {
                out.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()));
            }
        }
        out
    }

    #[test]
    fn journal_and_snapshot_never_hold_sensitive_values() {
        for key in [None, Some(KeySource::Passphrase("correct horse".into()))] {
            let dir = tempfile::tempdir().unwrap();
            let store: Arc<dyn StateStore> = Arc::new(LocalStore::new(dir.path()));
            let writer = Writer::acquire(
                store.clone(),
                &LeaseHolder::current("test"),
                Duration::from_secs(60),
                Arc::new(AtomicBool::new(false)),
            )
            .unwrap();
            let sealer = Arc::new(Sealer::for_state(&State::default(), key.as_ref()).unwrap());
            writer.set_sealer(sealer.clone()).unwrap();
            let sensitive = vec!["password".to_string()];
            writer
                .append(&[
                    JournalRecord::Intent {
                        kind: IntentKind::Create,
                        resource: secret_resource(),
                        target: None,
                        sensitive_paths: sensitive.clone(),
                    },
                    JournalRecord::Applied {
                        entry: StateEntry {
                            resource: secret_resource(),
                            private: None,
                            sensitive_paths: sensitive.clone(),
                            pending: false,
                            updated_at: 0,
                            target: None,
                        },
                    },
                ])
                .unwrap();
            assert!(!all_bytes(dir.path()).contains("hunter2"));
            let mut state = store.load().unwrap();
            assert!(state.sealing.is_some(), "the sealing is journaled first");
            assert_eq!(
                state.resources["t:db"].resource.attributes["user"],
                json!("admin")
            );
            // The next process finds the same stack key: equal values still match.
            let again = Sealer::for_state(&state, key.as_ref()).unwrap();
            let sealed = state.resources["t:db"].resource.attributes["password"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(again.matches(&sealed, &json!("hunter2")));
            if key.is_some() {
                let mut clear = state.clone();
                again.unseal_state(&mut clear);
                assert_eq!(
                    clear.resources["t:db"].resource.attributes["password"],
                    json!("hunter2")
                );
            }
            state.serial += 1;
            writer.checkpoint(&mut state).unwrap();
            assert!(!all_bytes(dir.path()).contains("hunter2"));
        }
    }

    #[test]
    fn a_lost_lease_stops_writes_and_actions() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn StateStore> = Arc::new(LocalStore::new(dir.path()));
        let cancel = Arc::new(AtomicBool::new(false));
        let writer = Writer::acquire(
            store.clone(),
            &LeaseHolder::current("test"),
            Duration::from_secs(2),
            cancel.clone(),
        )
        .unwrap();
        writer.ensure_live().unwrap();
        store.force_unlock().unwrap();
        let other = store
            .acquire_lease(&LeaseHolder::current("other"), 60_000)
            .unwrap();
        // As after a pause: the writer's renewals fell behind, so it asks the store first.
        writer.inner.held().confirmed = Instant::now() - Duration::from_secs(5);
        let e = writer.ensure_live().unwrap_err().to_string();
        assert!(
            e.contains(&format!("lease #{} is held by", other.fence)),
            "{e}"
        );
        assert!(writer.is_lost() && cancel.load(Ordering::SeqCst));
        assert!(writer.append(&[]).is_err() || writer.is_lost());
        drop(writer);
        assert_eq!(
            store.current_lease().unwrap().unwrap().token,
            other.token,
            "a lost writer leaves the new holder's lease alone"
        );
    }
}
