//! State in a PostgreSQL database: many stacks share four tables, keyed by a stack name.
//!
//! Guarantees, mapped onto the database:
//! - the snapshot is one row, replaced together with the removal of the journal rows it absorbs
//!   in one transaction (a checkpoint is atomic);
//! - `append` inserts its records in one committed transaction (durable when it returns);
//! - `load` reads the snapshot and the journal in one repeatable-read transaction, so it never
//!   sees half of a checkpoint;
//! - the lease and release numbering are decided under a transaction-scoped advisory lock on the
//!   stack, and lease times come from the server's clock, so clients with skewed clocks agree on
//!   expiry;
//! - `kusionctl run` records are rows of their own table, numbered under the same lock (so
//!   concurrent runs get distinct, gap-free ids) and each written in one statement: a run that
//!   dies midway leaves its last complete row (status `running`), never a torn one.
//!
//! `postgres::Client` runs its own Tokio runtime and must not be called from inside another
//! one, while the kernel calls stores from async and plain threads alike; so the client lives on
//! a dedicated thread and each call is shipped to it.

use std::sync::Mutex;
use std::sync::mpsc;

use postgres::{Client, IsolationLevel, NoTls, Transaction};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::journal;
use super::local::{holder_is_dead, random_token};
use super::{
    JournalRecord, Lease, LeaseHolder, Release, RunRecord, State, StateError, StateStore,
    format_time,
};

type Job = Box<dyn FnOnce(&mut Option<Client>) + Send>;

/// A stack's state, lease, history and runs in PostgreSQL tables, shared by every process that names the same URL and stack.
pub struct PostgresStore {
    /// The connection URL without its password, for messages.
    display: String,
    stack: String,
    jobs: Mutex<mpsc::Sender<Job>>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kusion_state (
    stack text PRIMARY KEY,
    serial bigint NOT NULL,
    snapshot text NOT NULL
);
CREATE TABLE IF NOT EXISTS kusion_journal (
    stack text NOT NULL,
    seq bigserial NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (stack, seq)
);
CREATE TABLE IF NOT EXISTS kusion_lease (
    stack text PRIMARY KEY,
    token text NOT NULL,
    lease text NOT NULL,
    expires_at bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS kusion_release (
    stack text NOT NULL,
    revision bigint NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (stack, revision)
);
CREATE TABLE IF NOT EXISTS kusion_fence (
    stack text PRIMARY KEY,
    fence bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS kusion_run (
    stack text NOT NULL,
    id bigint NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (stack, id)
);
";

/// Advisory lock key that serialises schema creation across clients (CREATE TABLE IF NOT
/// EXISTS alone races on the catalog).
const SCHEMA_LOCK: i64 = 0x6b75_7369_6f6e;

/// The server's clock in Unix milliseconds.
const NOW_MS: &str = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint";

impl PostgresStore {
    /// Connect to `url` (a libpq-style `postgres://` URL) and use the state of `stack`.
    /// Creates the tables on first use.
    pub fn connect(url: &str, stack: &str) -> Result<PostgresStore, StateError> {
        let display = redact(url);
        let config: postgres::Config = url.parse().map_err(|e| StateError::Io {
            location: display.clone(),
            message: format!("bad PostgreSQL URL: {e}"),
        })?;
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("kusion-postgres".into())
            .spawn(move || {
                let mut client: Option<Client> = None;
                // Reconnect lazily after a dropped connection; each job sees the outcome.
                while let Ok(job) = rx.recv() {
                    if client.as_ref().is_none_or(|c| c.is_closed()) {
                        client = config.connect(NoTls).ok();
                    }
                    job(&mut client);
                }
            })
            .map_err(|e| StateError::Io {
                location: display.clone(),
                message: format!("starting the PostgreSQL thread: {e}"),
            })?;
        let store = PostgresStore {
            display,
            stack: stack.to_string(),
            jobs: Mutex::new(tx),
        };
        store.call(|c, _| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            tx.batch_execute(SCHEMA)?;
            tx.commit()
        })?;
        Ok(store)
    }

    /// The stack's name in the tables.
    pub fn stack(&self) -> &str {
        &self.stack
    }

    /// Run `f` on the client thread. Database errors become `StateError::Io` naming the store.
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client, &str) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, StateError> {
        self.try_call(move |c, stack| f(c, stack).map_err(Failure::Db))
    }

    fn try_call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client, &str) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, StateError> {
        let (done, result) = mpsc::sync_channel(1);
        let stack = self.stack.clone();
        let job: Job = Box::new(move |client| {
            let outcome = match client {
                Some(c) => f(c, &stack),
                None => Err(Failure::Unreachable),
            };
            let _ = done.send(outcome);
        });
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| self.io("the PostgreSQL thread stopped"))?;
        let outcome = result
            .recv()
            .map_err(|_| self.io("the PostgreSQL thread stopped"))?;
        outcome.map_err(|f| match f {
            Failure::Db(e) => self.io(describe(&e)),
            Failure::Unreachable => self.io("cannot connect to the server"),
            Failure::State(e) => e,
        })
    }

    fn io(&self, message: impl std::fmt::Display) -> StateError {
        StateError::Io {
            location: self.location(),
            message: message.to_string(),
        }
    }

    fn corrupt(&self, what: &str, e: impl std::fmt::Display) -> StateError {
        StateError::Corrupt {
            location: format!("{} ({what})", self.location()),
            message: e.to_string(),
        }
    }
}

/// A per-stack table of JSON records numbered 1, 2, ... (releases, runs).
struct NumberedTable {
    table: &'static str,
    number: &'static str,
}

const RELEASES: NumberedTable = NumberedTable {
    table: "kusion_release",
    number: "revision",
};
const RUNS: NumberedTable = NumberedTable {
    table: "kusion_run",
    number: "id",
};

impl PostgresStore {
    /// Store `record` under the stack's next number (decided under the stack's advisory lock,
    /// so concurrent writers never pick the same one) and return that number.
    fn insert_numbered<T: Serialize + Clone + Send + 'static>(
        &self,
        table: &'static NumberedTable,
        record: &T,
        set_number: fn(&mut T, u64),
    ) -> Result<u64, StateError> {
        let mut owned = record.clone();
        let location = self.location();
        self.try_call(move |c, stack| {
            let mut tx = c.transaction()?;
            lock_stack(&mut tx, stack)?;
            let last: i64 = tx
                .query_one(
                    &format!(
                        "SELECT coalesce(max({}), 0)::bigint FROM {} WHERE stack = $1",
                        table.number, table.table
                    ),
                    &[&stack],
                )?
                .get(0);
            let number = last as u64 + 1;
            set_number(&mut owned, number);
            let body = serde_json::to_string(&owned).map_err(|e| {
                Failure::State(StateError::Io {
                    location: location.clone(),
                    message: e.to_string(),
                })
            })?;
            tx.execute(
                &format!(
                    "INSERT INTO {} (stack, {}, body) VALUES ($1, $2, $3)",
                    table.table, table.number
                ),
                &[&stack, &(number as i64), &body],
            )?;
            tx.commit()?;
            Ok(number)
        })
    }

    /// Replace record `number`; false when there is none.
    fn update_numbered<T: Serialize>(
        &self,
        table: &'static NumberedTable,
        number: u64,
        record: &T,
    ) -> Result<bool, StateError> {
        let body = serde_json::to_string(record).map_err(|e| self.io(e))?;
        let updated = self.call(move |c, stack| {
            c.execute(
                &format!(
                    "UPDATE {} SET body = $3 WHERE stack = $1 AND {} = $2",
                    table.table, table.number
                ),
                &[&stack, &(number as i64), &body],
            )
        })?;
        Ok(updated > 0)
    }

    /// Every record of the stack, in number order.
    fn list_numbered<T: DeserializeOwned>(
        &self,
        table: &'static NumberedTable,
    ) -> Result<Vec<T>, StateError> {
        let bodies = self.call(move |c, stack| {
            Ok(c.query(
                &format!(
                    "SELECT {}, body FROM {} WHERE stack = $1 ORDER BY {}",
                    table.number, table.table, table.number
                ),
                &[&stack],
            )?
            .into_iter()
            .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1)))
            .collect::<Vec<_>>())
        })?;
        bodies
            .into_iter()
            .map(|(number, body)| {
                serde_json::from_str(&body)
                    .map_err(|e| self.corrupt(&format!("{} {number}", table.table), e))
            })
            .collect()
    }
}

/// What can go wrong on the client thread.
enum Failure {
    Db(postgres::Error),
    Unreachable,
    State(StateError),
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Self {
        Failure::Db(e)
    }
}

/// A database error with the server's message when there is one.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// The URL without a password.
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

fn lock_stack(tx: &mut Transaction<'_>, stack: &str) -> Result<i64, postgres::Error> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('kusion-stack:' || $1, 0))",
        &[&stack],
    )?;
    Ok(tx.query_one(NOW_MS, &[])?.get(0))
}

fn read_lease(tx: &mut Transaction<'_>, stack: &str) -> Result<Option<String>, postgres::Error> {
    Ok(tx
        .query_opt("SELECT lease FROM kusion_lease WHERE stack = $1", &[&stack])?
        .map(|r| r.get(0)))
}

fn write_lease(tx: &mut Transaction<'_>, stack: &str, lease: &Lease) -> Result<(), Failure> {
    let text = serde_json::to_string(lease).map_err(|e| {
        Failure::State(StateError::Io {
            location: stack.to_string(),
            message: e.to_string(),
        })
    })?;
    tx.execute(
        "INSERT INTO kusion_lease (stack, token, lease, expires_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (stack) DO UPDATE SET token = $2, lease = $3, expires_at = $4",
        &[&stack, &lease.token, &text, &(lease.expires_at as i64)],
    )?;
    Ok(())
}

/// Refuse the transaction's write unless `lease` is the stack's lease. The row is locked until
/// the transaction ends, so no one takes the stack over between the check and the write.
fn check_lease(
    tx: &mut Transaction<'_>,
    stack: &str,
    location: &str,
    lease: &Lease,
) -> Result<(), Failure> {
    let current = tx
        .query_opt(
            "SELECT lease FROM kusion_lease WHERE stack = $1 FOR SHARE",
            &[&stack],
        )?
        .map(|r| parse_lease(location, r.get(0)))
        .transpose()?;
    super::writer::check_current(location, lease, current.as_ref()).map_err(Failure::State)
}

fn parse_lease(location: &str, text: &str) -> Result<Lease, Failure> {
    serde_json::from_str(text).map_err(|e| {
        Failure::State(StateError::Corrupt {
            location: format!("{location} (lease)"),
            message: e.to_string(),
        })
    })
}

impl StateStore for PostgresStore {
    fn location(&self) -> String {
        format!("{} stack {}", self.display, self.stack)
    }

    fn load(&self) -> Result<State, StateError> {
        let (snapshot, journal) = self.call(|c, stack| {
            let mut tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let snapshot: Option<String> = tx
                .query_opt(
                    "SELECT snapshot FROM kusion_state WHERE stack = $1",
                    &[&stack],
                )?
                .map(|r| r.get(0));
            let journal: Vec<(i64, String)> = tx
                .query(
                    "SELECT seq, record FROM kusion_journal WHERE stack = $1 ORDER BY seq",
                    &[&stack],
                )?
                .into_iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            tx.commit()?;
            Ok((snapshot, journal))
        })?;
        let mut state = match snapshot {
            Some(text) => {
                serde_json::from_str::<State>(&text).map_err(|e| self.corrupt("kusion_state", e))?
            }
            None => State::default(),
        };
        let now = super::now_ms();
        for (seq, text) in journal {
            // Rows are whole or absent (each append is one transaction), so any bad row is
            // corruption rather than a torn write.
            let record = journal::decode(text.as_bytes())
                .map_err(|e| self.corrupt(&format!("kusion_journal seq {seq}"), e))?;
            state.apply_record(&record, now);
        }
        Ok(state)
    }

    fn append(&self, lease: &Lease, records: &[JournalRecord]) -> Result<(), StateError> {
        if records.is_empty() {
            return Ok(());
        }
        let lines = records
            .iter()
            .map(journal::encode_one)
            .collect::<Result<Vec<String>, _>>()
            .map_err(|e| self.io(e))?;
        let lease = lease.clone();
        let location = self.location();
        self.try_call(move |c, stack| {
            let mut tx = c.transaction()?;
            check_lease(&mut tx, stack, &location, &lease)?;
            tx.execute(
                "INSERT INTO kusion_journal (stack, record)
                 SELECT $1, r FROM unnest($2::text[]) WITH ORDINALITY AS t(r, n) ORDER BY n",
                &[&stack, &lines],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    fn checkpoint(&self, lease: &Lease, state: &State) -> Result<(), StateError> {
        let text = serde_json::to_string(state).map_err(|e| self.io(e))?;
        let serial = state.serial as i64;
        let lease = lease.clone();
        let location = self.location();
        self.try_call(move |c, stack| {
            let mut tx = c.transaction()?;
            check_lease(&mut tx, stack, &location, &lease)?;
            tx.execute(
                "INSERT INTO kusion_state (stack, serial, snapshot) VALUES ($1, $2, $3)
                 ON CONFLICT (stack) DO UPDATE SET serial = $2, snapshot = $3",
                &[&stack, &serial, &text],
            )?;
            tx.execute("DELETE FROM kusion_journal WHERE stack = $1", &[&stack])?;
            tx.commit()?;
            Ok(())
        })
    }

    fn journal_len(&self) -> Result<u64, StateError> {
        self.call(|c, stack| {
            let n: i64 = c
                .query_one(
                    "SELECT coalesce(sum(octet_length(record)), 0)::bigint
                     FROM kusion_journal WHERE stack = $1",
                    &[&stack],
                )?
                .get(0);
            Ok(n as u64)
        })
    }

    fn acquire_lease(&self, holder: &LeaseHolder, ttl_ms: u64) -> Result<Lease, StateError> {
        let holder = holder.clone();
        let location = self.location();
        self.try_call(move |c, stack| {
            let mut tx = c.transaction()?;
            let now = lock_stack(&mut tx, stack)? as u64;
            if let Some(text) = read_lease(&mut tx, stack)? {
                let existing = parse_lease(&location, &text)?;
                if existing.expires_at > now && !holder_is_dead(&existing.holder) {
                    return Err(Failure::State(StateError::Locked {
                        holder: existing.holder,
                        expires: format_time(existing.expires_at),
                    }));
                }
            }
            let fence: i64 = tx
                .query_one(
                    "INSERT INTO kusion_fence (stack, fence) VALUES ($1, 1)
                     ON CONFLICT (stack) DO UPDATE SET fence = kusion_fence.fence + 1
                     RETURNING fence",
                    &[&stack],
                )?
                .get(0);
            let lease = Lease {
                holder,
                token: random_token(),
                acquired_at: now,
                expires_at: now + ttl_ms,
                fence: fence as u64,
            };
            write_lease(&mut tx, stack, &lease)?;
            tx.commit()?;
            Ok(lease)
        })
    }

    fn renew_lease(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StateError> {
        let lease = lease.clone();
        let location = self.location();
        self.try_call(move |c, stack| {
            let mut tx = c.transaction()?;
            let now = lock_stack(&mut tx, stack)? as u64;
            match read_lease(&mut tx, stack)? {
                Some(text) if parse_lease(&location, &text)?.token == lease.token => {}
                _ => return Err(Failure::State(StateError::LeaseLost)),
            }
            let renewed = Lease {
                expires_at: now + ttl_ms,
                ..lease
            };
            write_lease(&mut tx, stack, &renewed)?;
            tx.commit()?;
            Ok(renewed)
        })
    }

    fn release_lease(&self, lease: &Lease) -> Result<(), StateError> {
        let token = lease.token.clone();
        self.call(move |c, stack| {
            c.execute(
                "DELETE FROM kusion_lease WHERE stack = $1 AND token = $2",
                &[&stack, &token],
            )?;
            Ok(())
        })
    }

    fn force_unlock(&self) -> Result<Option<Lease>, StateError> {
        let location = self.location();
        self.try_call(move |c, stack| {
            let row = c.query_opt(
                "DELETE FROM kusion_lease WHERE stack = $1 RETURNING lease",
                &[&stack],
            )?;
            // An unreadable lease is removed all the same: it must never lock a stack for good.
            Ok(row.and_then(|r| parse_lease(&location, r.get(0)).ok()))
        })
    }

    fn current_lease(&self) -> Result<Option<Lease>, StateError> {
        let location = self.location();
        self.try_call(move |c, stack| {
            let row = c.query_opt("SELECT lease FROM kusion_lease WHERE stack = $1", &[&stack])?;
            row.map(|r| parse_lease(&location, r.get(0))).transpose()
        })
    }

    fn create_release(&self, release: &mut Release) -> Result<u64, StateError> {
        release.revision = self.insert_numbered(&RELEASES, release, |r, n| r.revision = n)?;
        Ok(release.revision)
    }

    fn update_release(&self, release: &Release) -> Result<(), StateError> {
        if !self.update_numbered(&RELEASES, release.revision, release)? {
            return Err(StateError::NoSuchRelease(release.revision));
        }
        Ok(())
    }

    fn releases(&self) -> Result<Vec<Release>, StateError> {
        self.list_numbered(&RELEASES)
    }

    fn latest_revision(&self) -> Result<Option<u64>, StateError> {
        self.call(|c, stack| {
            let n: Option<i64> = c
                .query_one(
                    "SELECT max(revision) FROM kusion_release WHERE stack = $1",
                    &[&stack],
                )?
                .get(0);
            Ok(n.map(|n| n as u64))
        })
    }

    fn release(&self, revision: u64) -> Result<Release, StateError> {
        let body = self.call(move |c, stack| {
            Ok(c.query_opt(
                "SELECT body FROM kusion_release WHERE stack = $1 AND revision = $2",
                &[&stack, &(revision as i64)],
            )?
            .map(|r| r.get::<_, String>(0)))
        })?;
        let body = body.ok_or(StateError::NoSuchRelease(revision))?;
        serde_json::from_str(&body)
            .map_err(|e| self.corrupt(&format!("kusion_release {revision}"), e))
    }

    fn create_run(&self, run: &mut RunRecord) -> Result<u64, StateError> {
        // Runs do not take the stack's lease (they change live objects, not state); the
        // advisory lock taken while numbering keeps concurrent runs from picking the same id.
        run.id = self.insert_numbered(&RUNS, run, |r, n| r.id = n)?;
        Ok(run.id)
    }

    fn update_run(&self, run: &RunRecord) -> Result<(), StateError> {
        if !self.update_numbered(&RUNS, run.id, run)? {
            return Err(StateError::NoSuchRun(run.id));
        }
        Ok(())
    }

    fn runs(&self) -> Result<Vec<RunRecord>, StateError> {
        self.list_numbered(&RUNS)
    }
}
