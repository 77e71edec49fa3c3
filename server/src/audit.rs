//! The audit log: one JSON line per mutating call and per refused call, appended (`O_APPEND`,
//! never rewritten) to `audit.jsonl` in the server's data folder. It names the token's subject
//! and ID, never the token.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ServerError;

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

pub struct AuditLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl AuditLog {
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
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Appends `entry` as one line, synced before the call returns.
    pub fn record(&self, entry: &AuditEntry) -> Result<(), ServerError> {
        let mut line = serde_json::to_vec(entry).map_err(|e| ServerError::Io(e.to_string()))?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // One write call per line, so concurrent writers never interleave inside a line.
        file.write_all(&line)
            .and_then(|()| file.sync_data())
            .map_err(|e| ServerError::Io(format!("appending to {}: {e}", self.path.display())))
    }

    /// The entries in order; a torn last line (a crash mid-write) is skipped.
    pub fn read(&self) -> Result<Vec<AuditEntry>, ServerError> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| ServerError::Io(format!("reading {}: {e}", self.path.display())))?;
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect())
    }
}
