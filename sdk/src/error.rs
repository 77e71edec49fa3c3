//! The structured error every plugin call can return.

use serde::{Deserialize, Serialize};

/// What went wrong, coarsely, so the kernel can decide whether to retry or give up.
///
/// The kernel shows the kind with the message (`Conflict: ...`). On the wire it is the camelCase
/// name (`invalidInput`, `unavailable`, ...).
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
    /// The coarse class of the failure; see [`ErrorKind`].
    pub kind: ErrorKind,
    /// For the operator: name the resource ID and what was refused; never a secret value.
    pub message: String,
    /// Whether the same call may succeed if repeated. [`PluginError::new`] sets it for
    /// `Unavailable` and `Timeout`; the kernel reports it and keeps re-opening a recovery watch
    /// after a day-2 operation only while errors are retryable.
    #[serde(default)]
    pub retryable: bool,
}

impl PluginError {
    /// An error of `kind`, retryable exactly when `kind` is `Unavailable` or `Timeout` (set
    /// [`PluginError::retryable`] afterwards to say otherwise).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let retryable = matches!(kind, ErrorKind::Unavailable | ErrorKind::Timeout);
        PluginError {
            kind,
            message: message.into(),
            retryable,
        }
    }
    /// An [`ErrorKind::InvalidInput`] error: the request (attributes, ID, configuration) is wrong.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }
    /// An [`ErrorKind::Internal`] error: the plugin itself broke (a bug, a broken invariant).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    /// An [`ErrorKind::Unsupported`] error: this plugin has no such verb, function or type.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }
}

/// The result of every plugin call.
pub type PluginResult<T> = Result<T, PluginError>;
