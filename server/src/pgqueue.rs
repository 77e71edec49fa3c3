//! [`PostgresQueue`]: operations and their events in PostgreSQL, shared by any number of
//! `kusionctl server` and `kusionctl worker` processes on any number of machines.
//!
//! - `kusion_operation`: one row per operation: the API's JSON document (`body`), its `status`
//!   (also in the document; the column is what claims and compare-and-set updates test),
//!   `position` (creation order), `claimed_by`, `heartbeat_at` (the database's clock, so
//!   skewed machines agree), `attempts` (claims since the operation last ended a run normally)
//!   and `event_seq` (the last event number).
//! - `kusion_operation_event`: `(operation, seq)` → JSON event. A sequence number is allocated
//!   by incrementing `event_seq` on the operation's row in the inserting transaction: the row
//!   lock orders concurrent writers from any process.
//!
//! A claim takes the oldest queued row with `FOR UPDATE SKIP LOCKED`, so concurrent claimers
//! never wait on or take the same row. Before claiming, the claimer re-queues running
//! operations whose worker has not heartbeaten for the timeout, or fails them once they have
//! been claimed `max_attempts` times (a day-2 run at once: it is never run again unasked), each
//! with a status event saying why. Every write
//! `NOTIFY`s `kusion_operations`; one listening connection per process turns that into ticks of
//! [`OperationQueue::changes`] (plus a tick a second, in case a notification is lost with a
//! connection).
//!
//! Statements run on the connection threads of a [`PgPool`], which the token store and audit
//! log of the same server share.

use std::sync::Arc;
use std::time::Duration;

use postgres::Transaction;
use tokio::sync::watch;

use crate::ServerError;
use crate::ops::{
    EventKind, Operation, OperationEvent, OperationKind, OperationQueue, OperationStatus,
};
pub use crate::pgconn::redact;
use crate::pgconn::{Failure, OPERATIONS_CHANNEL, PgPool};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kusion_operation (
    id text PRIMARY KEY,
    position bigserial NOT NULL,
    status text NOT NULL,
    body text NOT NULL,
    claimed_by text,
    heartbeat_at timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    event_seq bigint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS kusion_operation_queued
    ON kusion_operation (position) WHERE status = 'queued';
CREATE INDEX IF NOT EXISTS kusion_operation_running
    ON kusion_operation (heartbeat_at) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS kusion_operation_event (
    operation text NOT NULL REFERENCES kusion_operation (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (operation, seq)
);
";

/// How claims treat operations whose worker went silent.
#[derive(Debug, Clone)]
pub struct QueueOptions {
    /// A running operation whose worker has not heartbeaten for this long is re-queued (or
    /// failed) by the next claim. Keep it above the stack lease's TTL plus the heartbeat
    /// interval: then the dead worker's stack lease has expired before anyone re-runs it.
    pub heartbeat_timeout: Duration,
    /// Claims after which an operation whose worker died again ends failed.
    pub max_attempts: u32,
    /// Connection threads (each one connection).
    pub connections: usize,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            heartbeat_timeout: default_heartbeat_timeout(),
            max_attempts: 3,
            connections: 4,
        }
    }
}

/// The stack lease's TTL plus 15 s (a few heartbeats): a dead worker's lease has expired by
/// the time its operation is re-queued, wherever it ran.
pub fn default_heartbeat_timeout() -> Duration {
    kusion_kernel::operation::lease_ttl() + Duration::from_secs(15)
}

pub struct PostgresQueue {
    pool: Arc<PgPool>,
    options: QueueOptions,
}

fn parse_operation(body: &str) -> Result<Operation, Failure> {
    serde_json::from_str(body)
        .map_err(|e| Failure::Other(ServerError::Io(format!("a stored operation: {e}"))))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, Failure> {
    serde_json::to_string(value).map_err(|e| Failure::Other(ServerError::Io(e.to_string())))
}

/// Appends an event in `tx`, allocating its number under the operation row's lock.
fn insert_event(
    tx: &mut Transaction<'_>,
    id: &str,
    kind: EventKind,
) -> Result<OperationEvent, Failure> {
    let Some(row) = tx.query_opt(
        "UPDATE kusion_operation SET event_seq = event_seq + 1 WHERE id = $1 RETURNING event_seq",
        &[&id],
    )?
    else {
        return Err(Failure::Other(ServerError::NotFound(format!(
            "operation {id}"
        ))));
    };
    let seq: i64 = row.get(0);
    let event = OperationEvent {
        seq: seq as u64,
        time: crate::ops::now_rfc3339(),
        kind,
    };
    tx.execute(
        "INSERT INTO kusion_operation_event (operation, seq, body) VALUES ($1, $2, $3)",
        &[&id, &seq, &to_json(&event)?],
    )?;
    notify(tx)?;
    Ok(event)
}

/// Delivered at commit, to every process's listener.
fn notify(tx: &mut Transaction<'_>) -> Result<(), postgres::Error> {
    crate::pgconn::notify(tx, OPERATIONS_CHANNEL)
}

impl PostgresQueue {
    /// Connects to `url` (a libpq-style `postgres://` URL) and creates the tables on first use.
    pub fn connect(url: &str, options: QueueOptions) -> Result<PostgresQueue, ServerError> {
        let pool = Arc::new(PgPool::connect(url, options.connections)?);
        Self::with_pool(pool, options)
    }

    /// The queue on `pool` (its connections are shared with the pool's other users), creating
    /// the tables on first use.
    pub fn with_pool(
        pool: Arc<PgPool>,
        options: QueueOptions,
    ) -> Result<PostgresQueue, ServerError> {
        pool.ensure_schema(SCHEMA)?;
        Ok(PostgresQueue { pool, options })
    }

    /// The connections this queue runs on: the token store and audit log share them.
    pub fn pool(&self) -> Arc<PgPool> {
        self.pool.clone()
    }

    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, ServerError> {
        self.pool.call(f)
    }

    /// Re-queues (or fails, past `max_attempts`) running operations whose worker went silent.
    /// Each row is taken with SKIP LOCKED, so two claimers never handle the same one.
    fn requeue_stale(&self) -> Result<usize, ServerError> {
        let timeout = self.options.heartbeat_timeout.as_secs_f64();
        let max_attempts = self.options.max_attempts as i32;
        let changed = self.call(move |c| {
            let mut tx = c.transaction()?;
            let rows = tx.query(
                "SELECT id, body, attempts, claimed_by,
                        to_char(heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')
                 FROM kusion_operation
                 WHERE status = 'running'
                   AND heartbeat_at < clock_timestamp() - make_interval(secs => $1)
                 ORDER BY position
                 FOR UPDATE SKIP LOCKED",
                &[&timeout],
            )?;
            let mut changed = 0;
            for row in rows {
                let id: String = row.get(0);
                let mut op = parse_operation(row.get(1))?;
                let attempts: i32 = row.get(2);
                let worker: Option<String> = row.get(3);
                let last: Option<String> = row.get(4);
                let worker = worker.unwrap_or_else(|| "?".into());
                let last = last.unwrap_or_else(|| "?".into());
                let (status, message) = if op.kind == OperationKind::Run {
                    // A day-2 program may act on what its first attempt changed: not re-run.
                    let message = format!(
                        "worker {worker} stopped heartbeating (last at {last}) during a day-2 \
                         run; it is not run again unasked: its run record says which targets \
                         were acted on (`acting` ones may have been changed)"
                    );
                    op.error = Some(message.clone());
                    (OperationStatus::Failed, message)
                } else if attempts >= max_attempts {
                    let message = format!(
                        "worker {worker} stopped heartbeating (last at {last}); the operation's \
                         workers died {attempts} times, so it is given up: check the stack's state \
                         and release history before starting it again"
                    );
                    op.error = Some(message.clone());
                    (OperationStatus::Failed, message)
                } else {
                    (
                        OperationStatus::Queued,
                        format!(
                            "worker {worker} stopped heartbeating (last at {last}); re-queued \
                             (attempt {} of {max_attempts} next)",
                            attempts + 1
                        ),
                    )
                };
                op.status = status;
                op.updated_at = crate::ops::now_rfc3339();
                insert_event(
                    &mut tx,
                    &id,
                    EventKind::Status {
                        status,
                        message: Some(message),
                    },
                )?;
                tx.execute(
                    "UPDATE kusion_operation SET status = $2, body = $3, claimed_by = NULL,
                         heartbeat_at = NULL,
                         attempts = CASE WHEN $2 = 'queued' THEN attempts ELSE 0 END
                     WHERE id = $1",
                    &[&id, &status.name(), &to_json(&op)?],
                )?;
                changed += 1;
            }
            tx.commit()?;
            Ok(changed)
        })?;
        if changed > 0 {
            tracing::warn!("re-queued or failed {changed} operation(s) of silent workers");
        }
        Ok(changed)
    }
}

impl OperationQueue for PostgresQueue {
    fn create(&self, operation: &Operation) -> Result<(), ServerError> {
        let op = operation.clone();
        self.call(move |c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "INSERT INTO kusion_operation (id, status, body) VALUES ($1, $2, $3)",
                &[&op.id, &op.status.name(), &to_json(&op)?],
            )?;
            insert_event(&mut tx, &op.id, crate::ops::queued_event())?;
            tx.commit()?;
            Ok(())
        })
    }

    fn get(&self, id: &str) -> Result<Option<Operation>, ServerError> {
        let id = id.to_string();
        self.call(move |c| {
            c.query_opt("SELECT body FROM kusion_operation WHERE id = $1", &[&id])?
                .map(|row| parse_operation(row.get(0)))
                .transpose()
        })
    }

    fn list(&self) -> Result<Vec<Operation>, ServerError> {
        self.call(|c| {
            c.query("SELECT body FROM kusion_operation ORDER BY position", &[])?
                .iter()
                .map(|row| parse_operation(row.get(0)))
                .collect()
        })
    }

    fn update(
        &self,
        operation: &Operation,
        expected: OperationStatus,
    ) -> Result<bool, ServerError> {
        let mut op = operation.clone();
        op.updated_at = crate::ops::now_rfc3339();
        self.call(move |c| {
            let mut tx = c.transaction()?;
            // A running operation belongs to the worker that claimed it: one whose operation was
            // re-queued and claimed by another worker must not overwrite the new run.
            let n = tx.execute(
                "UPDATE kusion_operation
                 SET body = $2, status = $3,
                     claimed_by = CASE WHEN $3 = 'running' THEN claimed_by END,
                     heartbeat_at = CASE WHEN $3 = 'running' THEN heartbeat_at END,
                     attempts = CASE WHEN $3 = 'running' THEN attempts ELSE 0 END
                 WHERE id = $1 AND status = $4
                   AND ($4 <> 'running' OR claimed_by IS NOT DISTINCT FROM $5)",
                &[
                    &op.id,
                    &to_json(&op)?,
                    &op.status.name(),
                    &expected.name(),
                    &op.worker,
                ],
            )?;
            if n == 1 {
                notify(&mut tx)?;
            }
            tx.commit()?;
            Ok(n == 1)
        })
    }

    fn claim(&self, worker: &str) -> Result<Option<Operation>, ServerError> {
        self.requeue_stale()?;
        let worker = worker.to_string();
        self.call(move |c| {
            let mut tx = c.transaction()?;
            let Some(row) = tx.query_opt(
                "SELECT id, body FROM kusion_operation WHERE status = 'queued'
                 ORDER BY position LIMIT 1 FOR UPDATE SKIP LOCKED",
                &[],
            )?
            else {
                return Ok(None);
            };
            let id: String = row.get(0);
            let mut op = parse_operation(row.get(1))?;
            op.status = OperationStatus::Running;
            op.worker = Some(worker.clone());
            op.updated_at = crate::ops::now_rfc3339();
            tx.execute(
                "UPDATE kusion_operation
                 SET status = 'running', body = $2, claimed_by = $3,
                     heartbeat_at = clock_timestamp(), attempts = attempts + 1
                 WHERE id = $1",
                &[&id, &to_json(&op)?, &worker],
            )?;
            notify(&mut tx)?;
            tx.commit()?;
            Ok(Some(op))
        })
    }

    fn heartbeat(&self, id: &str, worker: &str) -> Result<bool, ServerError> {
        let (id, worker) = (id.to_string(), worker.to_string());
        self.call(move |c| {
            let n = c.execute(
                "UPDATE kusion_operation SET heartbeat_at = clock_timestamp()
                 WHERE id = $1 AND status = 'running' AND claimed_by = $2",
                &[&id, &worker],
            )?;
            Ok(n == 1)
        })
    }

    fn heartbeat_every(&self) -> Option<Duration> {
        // Several beats fit in the timeout, so one slow statement does not cost the claim.
        Some(
            (self.options.heartbeat_timeout / 5)
                .clamp(Duration::from_millis(200), Duration::from_secs(10)),
        )
    }

    fn push_event(&self, id: &str, kind: EventKind) -> Result<OperationEvent, ServerError> {
        let id = id.to_string();
        self.call(move |c| {
            let mut tx = c.transaction()?;
            let event = insert_event(&mut tx, &id, kind)?;
            tx.commit()?;
            Ok(event)
        })
    }

    fn events(&self, id: &str, after: u64) -> Result<Vec<OperationEvent>, ServerError> {
        let id = id.to_string();
        let after = after.min(i64::MAX as u64) as i64;
        self.call(move |c| {
            c.query(
                "SELECT body FROM kusion_operation_event WHERE operation = $1 AND seq > $2
                 ORDER BY seq",
                &[&id, &after],
            )?
            .iter()
            .map(|row| {
                serde_json::from_str(row.get(0)).map_err(|e| {
                    Failure::Other(ServerError::Io(format!("a stored event of {id}: {e}")))
                })
            })
            .collect()
        })
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.pool.operation_changes()
    }

    fn shared(&self) -> bool {
        true
    }
}
