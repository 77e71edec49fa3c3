//! One process's connections to the PostgreSQL that servers and workers share: a few
//! connection threads running statements (`PgPool::call`) and one listening connection
//! turning `NOTIFY`s into ticks of watch channels. The operation queue ([`crate::pgqueue`]),
//! the token store ([`crate::auth`]) and the audit log ([`crate::audit`]) use the same pool.
//!
//! The synchronous `postgres` client runs its own runtime and must not be called on a tokio
//! thread, so every statement runs on one of the pool's threads (as the kernel's PostgreSQL
//! state store does).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};
use tokio::sync::watch;

use crate::ServerError;

/// Serialises schema creation across processes (CREATE ... IF NOT EXISTS alone races on the
/// catalog).
const SCHEMA_LOCK: i64 = 0x6b75_7369_6f71;

/// Operations and their events changed (see [`crate::pgqueue`]).
pub const OPERATIONS_CHANNEL: &str = "kusion_operations";
/// A token was minted or revoked (see [`crate::auth`]).
pub const TOKENS_CHANNEL: &str = "kusion_tokens";

type Job = Box<dyn FnOnce(&mut Option<Client>) + Send>;

/// Why a statement failed.
pub(crate) enum Failure {
    Db(postgres::Error),
    Unreachable,
    Other(ServerError),
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Self {
        Failure::Db(e)
    }
}

pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host_end = rest.find('/').unwrap_or(rest.len());
            match rest[..host_end].rfind('@') {
                Some(at) => {
                    let user = rest[..at].split(':').next().unwrap_or("");
                    format!("{scheme}://{user}:***@{}", &rest[at + 1..])
                }
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    }
}

/// Sends `NOTIFY channel` at the transaction's commit, to every process's listener.
pub(crate) fn notify(
    tx: &mut postgres::Transaction<'_>,
    channel: &str,
) -> Result<(), postgres::Error> {
    tx.execute("SELECT pg_notify($1, '')", &[&channel])?;
    Ok(())
}

pub struct PgPool {
    display: String,
    jobs: Mutex<mpsc::Sender<Job>>,
    operations: Arc<watch::Sender<u64>>,
    tokens: Arc<watch::Sender<u64>>,
    stop: Arc<AtomicBool>,
}

impl Drop for PgPool {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl PgPool {
    /// Connects to `url` (a libpq-style `postgres://` URL) with `connections` threads and
    /// starts the listener.
    pub fn connect(url: &str, connections: usize) -> Result<PgPool, ServerError> {
        let display = redact(url);
        let config: postgres::Config = url
            .parse()
            .map_err(|e| ServerError::Io(format!("bad PostgreSQL URL {display}: {e}")))?;
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for n in 0..connections.max(1) {
            let (rx, config) = (rx.clone(), config.clone());
            std::thread::Builder::new()
                .name(format!("kusion-pg-{n}"))
                .spawn(move || {
                    let mut client: Option<Client> = None;
                    loop {
                        let job = {
                            let guard = rx.lock().unwrap_or_else(|p| p.into_inner());
                            guard.recv()
                        };
                        let Ok(job) = job else { return };
                        // Reconnect lazily after a dropped connection; each job sees the outcome.
                        if client.as_ref().is_none_or(|c| c.is_closed()) {
                            client = config.connect(NoTls).ok();
                        }
                        job(&mut client);
                    }
                })
                .map_err(|e| ServerError::Io(format!("starting a PostgreSQL thread: {e}")))?;
        }
        let operations = Arc::new(watch::channel(0u64).0);
        let tokens = Arc::new(watch::channel(0u64).0);
        let stop = Arc::new(AtomicBool::new(false));
        let pool = PgPool {
            display,
            jobs: Mutex::new(tx),
            operations: operations.clone(),
            tokens: tokens.clone(),
            stop: stop.clone(),
        };
        std::thread::Builder::new()
            .name("kusion-pg-listen".into())
            .spawn(move || listen(config, operations, tokens, stop))
            .map_err(|e| ServerError::Io(format!("starting the PostgreSQL listener: {e}")))?;
        Ok(pool)
    }

    /// The URL without its password.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// Creates tables with `schema` (idempotent statements) under a lock shared by every
    /// process, so concurrent first starts do not race on the catalog.
    pub fn ensure_schema(&self, schema: &'static str) -> Result<(), ServerError> {
        self.call(move |c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            tx.batch_execute(schema)?;
            tx.commit()?;
            Ok(())
        })
    }

    /// Ticks on every `NOTIFY` of [`OPERATIONS_CHANNEL`], and once a second regardless.
    pub fn operation_changes(&self) -> watch::Receiver<u64> {
        self.operations.subscribe()
    }

    /// Ticks on every `NOTIFY` of [`TOKENS_CHANNEL`], and whenever the listener (re)connects
    /// (notifications may have been lost meanwhile).
    pub fn token_changes(&self) -> watch::Receiver<u64> {
        self.tokens.subscribe()
    }

    /// Runs `f` on a connection thread.
    pub(crate) fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, ServerError> {
        let (done, result) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |client| {
            let outcome = match client {
                Some(c) => f(c),
                None => Err(Failure::Unreachable),
            };
            let _ = done.send(outcome);
        });
        let stopped = || ServerError::Io(format!("the connection to {} stopped", self.display));
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| stopped())?;
        result.recv().map_err(|_| stopped())?.map_err(|f| match f {
            Failure::Db(e) => {
                ServerError::Io(format!("PostgreSQL at {}: {}", self.display, describe(&e)))
            }
            Failure::Unreachable => {
                ServerError::Io(format!("PostgreSQL at {}: cannot connect", self.display))
            }
            Failure::Other(e) => e,
        })
    }
}

/// Ticks `operations` on every notification of its channel and once a second regardless, and
/// `tokens` on its channel's notifications and on each (re)connection; reconnects when the
/// connection drops. Ends when the pool is dropped.
fn listen(
    config: postgres::Config,
    operations: Arc<watch::Sender<u64>>,
    tokens: Arc<watch::Sender<u64>>,
    stop: Arc<AtomicBool>,
) {
    let bump = |tick: &watch::Sender<u64>| tick.send_modify(|n| *n = n.wrapping_add(1));
    while !stop.load(Ordering::SeqCst) {
        let mut client = match config.connect(NoTls) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("the PostgreSQL listener cannot connect: {}", describe(&e));
                std::thread::sleep(Duration::from_secs(1));
                bump(&operations);
                bump(&tokens);
                continue;
            }
        };
        if let Err(e) = client.batch_execute(&format!(
            "LISTEN {OPERATIONS_CHANNEL}; LISTEN {TOKENS_CHANNEL}"
        )) {
            tracing::warn!("the PostgreSQL listener: {}", describe(&e));
            std::thread::sleep(Duration::from_secs(1));
            continue;
        }
        // Whatever was notified while there was no listening connection is unknown.
        bump(&tokens);
        while !stop.load(Ordering::SeqCst) && !client.is_closed() {
            // Wakes on the first notification or after a second; the watch channels coalesce
            // bursts for the waiters.
            let first = {
                let mut notifications = client.notifications();
                let mut iter = notifications.timeout_iter(Duration::from_secs(1));
                iter.next()
            };
            match first {
                Ok(Some(n)) => {
                    if n.channel() == TOKENS_CHANNEL {
                        bump(&tokens);
                    } else {
                        bump(&operations);
                    }
                    // Drain what else arrived, without waiting.
                    let mut more = client.notifications();
                    let mut pending = more.iter();
                    while let Ok(Some(n)) = pending.next() {
                        if n.channel() == TOKENS_CHANNEL {
                            bump(&tokens);
                        } else {
                            bump(&operations);
                        }
                    }
                }
                Ok(None) => bump(&operations),
                Err(e) => {
                    tracing::warn!("the PostgreSQL listener: {}", describe(&e));
                    bump(&operations);
                }
            }
        }
    }
}
