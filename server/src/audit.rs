//! The audit log: one entry per mutating call and per refused call, never rewritten. It names
//! the token's subject and ID, never the token.
//!
//! - The embedded default appends JSON lines (`O_APPEND`) to `audit.jsonl` in the server's
//!   data folder.
//! - With a PostgreSQL queue, entries go to `kusion_audit` in the same database, one row per
//!   entry in insertion order (`seq`). The server only inserts and selects: its role needs
//!   `INSERT, SELECT` on the table and `USAGE` on its sequence, and no `UPDATE`, `DELETE` or
//!   `TRUNCATE` (create the tables with another role, or revoke those from the server's, to
//!   make the log append-only for the server itself).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ServerError;
use crate::pgconn::{Failure, PgPool};

/// One audited call.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// RFC 3339, UTC.
    pub time: String,
    pub request_id: Option<String>,
    /// The token's subject; None when the caller was not authenticated.
    pub subject: Option<String>,
    pub token_id: Option<String>,
    pub method: String,
    /// The route template (`/api/v1/operations/{id}/approve`).
    pub action: String,
    /// The path called (what was acted on).
    pub target: String,
    /// The peer address.
    pub from: Option<String>,
    pub status: u16,
    /// `ok`, `denied` (401/403) or `failed`.
    pub result: String,
}

const AUDIT_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kusion_audit (
    seq bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    body text NOT NULL
);
";

pub enum AuditLog {
    File {
        path: PathBuf,
        file: Mutex<std::fs::File>,
    },
    Postgres(Arc<PgPool>),
}

impl AuditLog {
    /// The log in the file at `path` (created).
    pub fn open(path: &Path) -> Result<AuditLog, ServerError> {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options
            .open(path)
            .map_err(|e| ServerError::Io(format!("opening {}: {e}", path.display())))?;
        Ok(AuditLog::File {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// The log in `kusion_audit` on `pool` (created on first use).
    pub fn postgres(pool: Arc<PgPool>) -> Result<AuditLog, ServerError> {
        pool.ensure_schema(AUDIT_SCHEMA)?;
        Ok(AuditLog::Postgres(pool))
    }

    /// Appends `entry`, durable before the call returns.
    pub fn record(&self, entry: &AuditEntry) -> Result<(), ServerError> {
        let mut line = serde_json::to_vec(entry).map_err(|e| ServerError::Io(e.to_string()))?;
        match self {
            AuditLog::File { path, file } => {
                line.push(b'\n');
                let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
                // One write call per line, so concurrent writers never interleave inside a line.
                file.write_all(&line)
                    .and_then(|()| file.sync_data())
                    .map_err(|e| ServerError::Io(format!("appending to {}: {e}", path.display())))
            }
            AuditLog::Postgres(pool) => {
                let body = String::from_utf8(line).map_err(|e| ServerError::Io(e.to_string()))?;
                pool.call(move |c| {
                    c.execute("INSERT INTO kusion_audit (body) VALUES ($1)", &[&body])?;
                    Ok(())
                })
            }
        }
    }

    /// The entries in order; a torn last line (a crash mid-write) is skipped.
    pub fn read(&self) -> Result<Vec<AuditEntry>, ServerError> {
        match self {
            AuditLog::File { path, .. } => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ServerError::Io(format!("reading {}: {e}", path.display())))?;
                Ok(text
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect())
            }
            AuditLog::Postgres(pool) => pool.call(|c| {
                c.query("SELECT body FROM kusion_audit ORDER BY seq", &[])?
                    .iter()
                    .map(|row| {
                        serde_json::from_str(row.get(0)).map_err(|e| {
                            Failure::Other(ServerError::Io(format!("a stored audit entry: {e}")))
                        })
                    })
                    .collect()
            }),
        }
    }
}
