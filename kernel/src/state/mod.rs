//! State: what kusion believes exists, a per-step journal that survives a crash at any point,
//! the history of applies, and the lease that allows one writer per stack.
//!
//! Durability model: before an operation touches anything, every resource it may create, update
//! or delete is journaled as an intent (one durable write for the whole plan). Each finished
//! step appends an `Applied` or `Deleted` record and is durable before any step that depends on
//! it starts. Loading replays the journal over the last snapshot: an intent without an outcome
//! becomes a *pending* entry, naming a resource that may exist. A checkpoint writes a new
//! snapshot atomically and empties the journal; snapshots happen at the end of an operation and
//! when the journal outgrows the snapshot, so the bytes written stay linear in the work done.

pub mod backend;
pub mod check;
mod journal;
pub mod kms;
pub mod local;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "s3")]
pub mod s3;
pub mod seal;
pub mod writer;

use indexmap::IndexMap;
use kusion_sdk::Resource;
use serde::{Deserialize, Serialize};

pub use backend::{Backend, open};
pub use local::LocalStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(feature = "s3")]
pub use s3::{S3Config, S3Store};
pub use writer::Writer;

/// One resource as recorded in state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateEntry {
    /// The resource as applied (as its runtime returned it).
    pub resource: Resource,
    /// Opaque runtime data returned with the resource (e.g. a Terraform provider's private bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<String>,
    /// Attribute paths whose values are never shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive_paths: Vec<String>,
    /// The last operation on this resource started but its outcome was never recorded: it may or
    /// may not exist as `resource` describes. The next plan reads it live before deciding.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
    /// Unix milliseconds of the last change.
    #[serde(default)]
    pub updated_at: u64,
    /// Where the resource lives, as its runtime named it (`Runtime::target`, e.g. a cluster):
    /// part of the state key. Absent in entries written before targets existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The state key of a resource: its ID, qualified as `id@target` when its runtime names a
/// target, so one ID can live in several clusters of one stack.
pub fn state_key(id: &str, target: Option<&str>) -> String {
    match target {
        Some(t) => format!("{id}@{t}"),
        None => id.to_string(),
    }
}

/// The state keys of a spec's resources, given each one's target (see [`state_key`]).
pub fn state_keys(spec: &crate::spec::Spec, targets: &[Option<String>]) -> Vec<String> {
    spec.resources
        .iter()
        .zip(targets)
        .map(|(r, t)| state_key(&r.id, t.as_deref()))
        .collect()
}

impl StateEntry {
    /// This entry's key in [`State::resources`].
    pub fn key(&self) -> String {
        state_key(&self.resource.id, self.target.as_deref())
    }
}

/// A stack's state: entries keyed by [`state_key`], in the order they were first recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Increases with every checkpoint.
    pub serial: u64,
    /// Entries by state key, in the order they were first recorded.
    #[serde(with = "entries_as_list")]
    pub resources: IndexMap<String, StateEntry>,
    /// How sensitive values are sealed (absent until the first apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealing: Option<seal::Sealing>,
    /// The highest lease number whose writes this state holds: journal records written later
    /// under an older lease (a writer that lost the stack but had not noticed yet) are not
    /// replayed over it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fence: u64,
    /// Entries (by key) being handed to another stack by `state mv --to-stack`: recorded before
    /// the destination gets them and dropped with them once it has, so an interrupted move
    /// leaves them here, marked, and no plan of this stack deletes or re-adopts them.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub handoffs: IndexMap<String, Handoff>,
    /// While replaying: the records since the last `Fence` marker came from an older lease.
    #[serde(skip)]
    replay_skip: bool,
}

/// Where an entry is going (see [`State::handoffs`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handoff {
    /// The destination stack's state location (`StateStore::location`).
    pub to: String,
    /// The entry's key there.
    pub key: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

mod entries_as_list {
    use super::StateEntry;
    use indexmap::IndexMap;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        map: &IndexMap<String, StateEntry>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let list: Vec<&StateEntry> = map.values().collect();
        list.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<IndexMap<String, StateEntry>, D::Error> {
        let list = Vec::<StateEntry>::deserialize(d)?;
        Ok(list.into_iter().map(|e| (e.key(), e)).collect())
    }
}

/// What an operation intends to do to a resource (journaled before it starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum IntentKind {
    /// Create the resource.
    Create,
    /// Change it in place.
    Update,
    /// Delete it.
    Delete,
    /// Take over a live object.
    Import,
}

/// One journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum JournalRecord {
    /// The resource may be changed by the running operation.
    Intent {
        /// What the step does.
        kind: IntentKind,
        /// The resource as the step will apply it.
        resource: Resource,
        /// The resource's target; with the ID it makes the state key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
        /// Attribute paths whose values are sealed (besides the builtin ones).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sensitive_paths: Vec<String>,
    },
    /// The step finished and the resource now exists as described (keyed by the entry's key).
    Applied {
        /// The entry, as the runtime returned the resource.
        entry: StateEntry,
    },
    /// The step finished and the resource no longer exists. `id` holds the state key (the bare
    /// ID in journals written before targets existed, which is those entries' key).
    Deleted {
        /// The entry's key.
        id: String,
    },
    /// An intent was never acted on (its step was skipped or cancelled before calling the
    /// runtime): the entry under key `id` is restored to what it was before the intent.
    Revert {
        /// The entry's key.
        id: String,
        /// What it was before the intent (None: absent).
        previous: Option<StateEntry>,
    },
    /// Re-key an entry recorded without a target under the target its runtime now names
    /// (`from` is the bare ID, `to` is `id@target`). One record, so a crash leaves the entry
    /// under exactly one of the two keys. If `to` already exists it wins and `from` is dropped.
    Moved {
        /// The bare ID.
        from: String,
        /// The key with the target (`id@target`).
        to: String,
        /// The target.
        target: String,
    },
    /// The stack's sealing (its hash key, and how values are encrypted), recorded before the
    /// first value sealed with it.
    Sealing {
        /// The sealing.
        sealing: seal::Sealing,
    },
    /// The records that follow were written under lease number `fence` (each journal write
    /// starts with one). Records under a lease older than one already seen are ignored.
    Fence {
        /// The lease number.
        fence: u64,
    },
    /// `state mv --to-stack`: the entry under key `id` is being handed to another stack
    /// (`None`: the handoff is withdrawn).
    Handoff {
        /// The entry's key.
        id: String,
        /// Where it goes.
        handoff: Option<Handoff>,
    },
    /// `state mv`: the entry under key `from` now lives as `entry` (a new ID, so a new key).
    /// One record, so a crash leaves exactly one of the two: never both, which would plan the
    /// deletion of the old ID's live object, and never neither.
    Renamed {
        /// The old key.
        from: String,
        /// The entry under its new ID.
        entry: StateEntry,
    },
}

impl State {
    /// Apply one journal record (used by replay and by the writer's in-memory copy).
    pub fn apply_record(&mut self, record: &JournalRecord, now: u64) {
        if let JournalRecord::Fence { fence } = record {
            self.replay_skip = *fence < self.fence;
            if !self.replay_skip {
                self.fence = *fence;
            }
            return;
        }
        if self.replay_skip {
            return;
        }
        match record {
            JournalRecord::Intent {
                kind,
                resource,
                target,
                sensitive_paths,
            } => {
                let key = state_key(&resource.id, target.as_deref());
                match self.resources.get_mut(&key) {
                    Some(entry) => entry.pending = true,
                    None if *kind != IntentKind::Delete => {
                        self.resources.insert(
                            key,
                            StateEntry {
                                resource: resource.clone(),
                                private: None,
                                sensitive_paths: sensitive_paths.clone(),
                                pending: true,
                                updated_at: now,
                                target: target.clone(),
                            },
                        );
                    }
                    None => {}
                }
            }
            JournalRecord::Applied { entry } => {
                self.resources.insert(entry.key(), entry.clone());
            }
            JournalRecord::Moved { from, to, target } => {
                if let Some(mut entry) = self.resources.shift_remove(from)
                    && !self.resources.contains_key(to)
                {
                    entry.target = Some(target.clone());
                    self.resources.insert(to.clone(), entry);
                }
            }
            JournalRecord::Deleted { id } => {
                self.resources.shift_remove(id);
                self.handoffs.shift_remove(id);
            }
            JournalRecord::Handoff { id, handoff } => match handoff {
                Some(h) if self.resources.contains_key(id) => {
                    self.handoffs.insert(id.clone(), h.clone());
                }
                _ => {
                    self.handoffs.shift_remove(id);
                }
            },
            JournalRecord::Renamed { from, entry } => {
                if self.resources.shift_remove(from).is_some() {
                    self.resources.insert(entry.key(), entry.clone());
                }
            }
            JournalRecord::Sealing { sealing } => self.sealing = Some(sealing.clone()),
            JournalRecord::Fence { .. } => unreachable!("handled above"),
            JournalRecord::Revert { id, previous } => match previous {
                Some(entry) => {
                    self.resources.insert(id.clone(), entry.clone());
                }
                None => {
                    self.resources.shift_remove(id);
                }
            },
        }
    }
}

/// Who holds (or wants) a stack's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseHolder {
    /// Who (`$KUSION_OWNER`, else the user).
    pub owner: String,
    /// The machine.
    pub host: String,
    /// The process.
    pub pid: u32,
    /// The operation holding it (`apply`, `destroy`, `run` ...).
    pub operation: String,
}

impl LeaseHolder {
    /// The current process as a lease holder for `operation`.
    pub fn current(operation: &str) -> LeaseHolder {
        let owner = std::env::var("KUSION_OWNER")
            .or_else(|_| std::env::var("USER"))
            .or_else(|_| std::env::var("LOGNAME"))
            .ok()
            .or_else(user_from_uid)
            .unwrap_or_else(|| "unknown".to_string());
        LeaseHolder {
            owner,
            host: hostname(),
            pid: std::process::id(),
            operation: operation.to_string(),
        }
    }
}

impl std::fmt::Display for LeaseHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} on {} (pid {}, {})",
            self.owner, self.host, self.pid, self.operation
        )
    }
}

/// The login name of this process's uid, from /etc/passwd (no USER in cron or CI).
fn user_from_uid() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)? == uid).then(|| name.to_string())
    })
}

/// This machine's name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".to_string())
}

/// A held lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// Who holds it.
    pub holder: LeaseHolder,
    /// Random token so only the acquirer can renew or release it.
    pub token: String,
    /// When it was taken (ms since the epoch).
    pub acquired_at: u64,
    /// When it expires unless renewed (ms since the epoch).
    pub expires_at: u64,
    /// Fencing number: each lease of a stack gets a larger one than every lease before it
    /// (kept by the store even after a lease is released or removed). Journal and snapshot
    /// writes carry the lease and are refused once it is no longer the stack's current one.
    /// 0 in leases written before fencing existed.
    #[serde(default)]
    pub fence: u64,
}

impl Lease {
    /// Whether `current` (the stack's lease as stored) is still this lease.
    pub fn is_current(&self, current: Option<&Lease>) -> bool {
        current.is_some_and(|c| c.token == self.token)
    }
}

/// How a release or run ended (or that it is still running).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReleaseStatus {
    /// Under way (or its process died: see the lease).
    Running,
    /// Every step succeeded.
    Succeeded,
    /// A step failed.
    Failed,
    /// Stopped on request (Ctrl-C, cancel) before every step ran.
    Interrupted,
}

/// One resource's outcome in a release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseStep {
    /// The resource's state key.
    pub id: String,
    /// What was done (`Create`, `Update` ...).
    pub action: String,
    /// How it ended (`succeeded`, `failed`, `skipped`, `cancelled`).
    pub outcome: String,
    /// The failure's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One numbered entry of a stack's history: an apply or destroy with its spec and result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Release {
    /// The release's number, from 1.
    pub revision: u64,
    /// `apply`, `destroy`, `import` ...
    pub operation: String,
    /// Who made it.
    pub holder: LeaseHolder,
    /// When it started (ms since the epoch).
    pub started_at: u64,
    /// When it ended.
    #[serde(default)]
    pub finished_at: Option<u64>,
    /// How it ended.
    pub status: ReleaseStatus,
    /// The spec it applied (empty for a destroy).
    pub spec: crate::spec::Spec,
    /// Each resource's outcome.
    #[serde(default)]
    pub steps: Vec<ReleaseStep>,
    /// Free-form notes recorded with the release (policy exemptions, flags).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// A rollback: the earlier release whose spec this one applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<u64>,
}

impl Release {
    /// A release starting now (numbered when the store creates it), with no steps, notes or
    /// rollback source yet.
    pub fn running(operation: &str, holder: &LeaseHolder, spec: crate::spec::Spec) -> Release {
        Release {
            revision: 0,
            operation: operation.to_string(),
            holder: holder.clone(),
            started_at: now_ms(),
            finished_at: None,
            status: ReleaseStatus::Running,
            spec,
            steps: Vec::new(),
            notes: Vec::new(),
            rollback_of: None,
        }
    }
}

/// One target's outcome in a recorded run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTargetRecord {
    /// The target's name.
    pub target: String,
    /// Its operation.
    pub operation: String,
    /// How it ended (`recovered`, `failed`, `not started`, `interrupted`, `acting`).
    pub outcome: String,
    /// Why it failed or was not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One `kusionctl run`: who ran which program with which arguments, when, and how it ended.
/// Numbered separately from releases (a run changes live objects, not the stack's resources).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// The run's number, from 1 (apart from release numbers).
    pub id: u64,
    /// Who ran it.
    pub holder: LeaseHolder,
    /// The program file.
    pub program: String,
    /// `-D key=value` arguments as given.
    #[serde(default)]
    pub args: Vec<String>,
    /// When it started (ms since the epoch).
    pub started_at: u64,
    /// When it ended.
    #[serde(default)]
    pub finished_at: Option<u64>,
    /// How it ended.
    pub status: ReleaseStatus,
    /// One line per operation (`Restart restart-web: 4 targets in 2 batches`).
    #[serde(default)]
    pub operations: Vec<String>,
    /// Each target's outcome.
    #[serde(default)]
    pub targets: Vec<RunTargetRecord>,
    /// What else happened (an interruption, a refusal).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Why a state store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The store could not be read or written.
    #[error("state at {location}: {message}")]
    Io {
        /// Where the state is.
        location: String,
        /// What failed.
        message: String,
    },
    /// What the store holds cannot be read as state.
    #[error("state at {location} is corrupt: {message}")]
    Corrupt {
        /// Where the state is.
        location: String,
        /// What is wrong.
        message: String,
    },
    #[error(
        "the stack is locked by {holder} until {expires}; wait, or run `kusionctl state unlock` if that process is gone"
    )]
    /// Another process holds the stack's lease.
    Locked {
        /// Who.
        holder: LeaseHolder,
        /// Until when.
        expires: String,
    },
    /// This process's lease was taken over or removed.
    #[error("the lease was lost (taken over or unlocked by someone else)")]
    LeaseLost,
    /// A write carried a lease that is no longer the stack's: another process took the stack
    /// over (or `state unlock` removed the lease), so this writer must stop.
    #[error(
        "refused to write state at {location}: this process's lease #{fence} is no longer the stack's ({now}); it stops without changing anything more"
    )]
    Fenced {
        /// Where the state is.
        location: String,
        /// This process's lease number.
        fence: u64,
        /// Who holds the stack now, in words.
        now: String,
    },
    /// The release does not exist.
    #[error("no release {0}")]
    NoSuchRelease(u64),
    /// The run does not exist.
    #[error("no run {0}")]
    NoSuchRun(u64),
    /// The backend keeps no run records.
    #[error("state at {location}: this backend does not record runs")]
    RunsUnsupported {
        /// Where the state is.
        location: String,
    },
}

/// Where a stack's state lives. Implementations must make `append` durable before returning,
/// `checkpoint` atomic, and `acquire_lease` atomic across processes.
///
/// Fencing: `append` and `checkpoint` carry the writer's lease and must refuse
/// ([`StateError::Fenced`]) when it is not the stack's current lease, checked in the same
/// atomic step as the write where the backend allows it. Use them through [`Writer`].
pub trait StateStore: Send + Sync {
    /// Human-readable location (a path or URL) for messages.
    fn location(&self) -> String;
    /// The last snapshot with the journal replayed over it.
    fn load(&self) -> Result<State, StateError>;
    /// Durably append journal records, if `lease` is still the stack's lease.
    fn append(&self, lease: &Lease, records: &[JournalRecord]) -> Result<(), StateError>;
    /// Atomically replace the snapshot with `state` and empty the journal, if `lease` is still
    /// the stack's lease.
    fn checkpoint(&self, lease: &Lease, state: &State) -> Result<(), StateError>;
    /// Bytes in the journal since the last checkpoint (to decide when to compact).
    fn journal_len(&self) -> Result<u64, StateError>;

    /// Take the stack's lease for `ttl_ms` when nobody holds a live one.
    fn acquire_lease(&self, holder: &LeaseHolder, ttl_ms: u64) -> Result<Lease, StateError>;
    /// Extend a lease this process holds.
    fn renew_lease(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StateError>;
    /// Let a lease go.
    fn release_lease(&self, lease: &Lease) -> Result<(), StateError>;
    /// Remove any lease, even one that cannot be read; returns the lease that was removed when
    /// it could be read.
    fn force_unlock(&self) -> Result<Option<Lease>, StateError>;
    /// The lease, if any.
    fn current_lease(&self) -> Result<Option<Lease>, StateError>;

    /// Record a new release; its `revision` is assigned by the store and returned.
    fn create_release(&self, release: &mut Release) -> Result<u64, StateError>;
    /// Rewrite a release (its status and steps as the operation goes on).
    fn update_release(&self, release: &Release) -> Result<(), StateError>;
    /// Every release, oldest first.
    fn releases(&self) -> Result<Vec<Release>, StateError>;
    /// One release.
    fn release(&self, revision: u64) -> Result<Release, StateError>;
    /// The highest release number, without reading the releases.
    fn latest_revision(&self) -> Result<Option<u64>, StateError>;

    /// Damage in the stored bytes that only this backend can see (a torn or unreadable journal
    /// line, temporary files left by a crash, files others can read). Backends whose writes
    /// are whole transactions have nothing to add.
    fn inspect(&self) -> Result<Vec<check::Finding>, StateError> {
        Ok(Vec::new())
    }

    /// Fix the damage [`StateStore::inspect`] reports as repairable, under `lease`, without
    /// guessing; returns what was done, dropped data named.
    fn repair(&self, lease: &Lease) -> Result<Vec<String>, StateError> {
        let _ = lease;
        Ok(Vec::new())
    }

    /// Record a new run (`kusionctl run`); its `id` is assigned by the store and returned.
    /// Added after the first backends: the defaults refuse, so a backend without runs says so.
    fn create_run(&self, run: &mut RunRecord) -> Result<u64, StateError> {
        let _ = run;
        Err(StateError::RunsUnsupported {
            location: self.location(),
        })
    }
    /// Rewrite a run's record as it goes on.
    fn update_run(&self, run: &RunRecord) -> Result<(), StateError> {
        let _ = run;
        Err(StateError::RunsUnsupported {
            location: self.location(),
        })
    }
    /// Every recorded run, oldest first.
    fn runs(&self) -> Result<Vec<RunRecord>, StateError> {
        Err(StateError::RunsUnsupported {
            location: self.location(),
        })
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// RFC 3339 text for a Unix-milliseconds time.
pub fn format_time(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(t).to_string()
}
