//! The structured error every plugin call can return.

use serde::{Deserialize, Serialize};

/// What went wrong, coarsely, so the kernel can decide whether to retry or give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
    /// The request itself is wrong (bad attributes, malformed ID); retrying will not help.
    InvalidInput,
    /// The remote system refused because of a conflicting owner or version.
    Conflict,
    /// The remote system could not be reached or answered with a server error.
    Unavailable,
    /// The call did not finish in time.
    Timeout,
    /// The plugin does not support this verb or resource (see its declared capabilities).
    Unsupported,
    /// The plugin panicked or broke its contract.
    Internal,
    /// The remote system rejected the call for another reason.
    Rejected,
}

/// An error returned by a plugin call: a kind, a message meant for a person, and whether the same
/// call may succeed if repeated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct PluginError {
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default)]
    pub retryable: bool,
}

impl PluginError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let retryable = matches!(kind, ErrorKind::Unavailable | ErrorKind::Timeout);
        PluginError {
            kind,
            message: message.into(),
            retryable,
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }
}

pub type PluginResult<T> = Result<T, PluginError>;
