//! Mapping of client and server failures to plugin errors that name the resource.

use kusion_sdk::{ErrorKind, PluginError};

/// A server answer or transport failure, for resource `id`, while doing `action`.
pub fn from_kube(id: &str, action: &str, err: kube::Error) -> PluginError {
    match err {
        kube::Error::Api(status) => {
            let kind = match status.code {
                _ if rejects_input(&status) => ErrorKind::InvalidInput,
                409 => ErrorKind::Conflict,
                400 | 422 | 415 => ErrorKind::InvalidInput,
                404 | 401 | 403 | 405 => ErrorKind::Rejected,
                408 | 504 => ErrorKind::Timeout,
                429 | 500..=599 => ErrorKind::Unavailable,
                _ => ErrorKind::Rejected,
            };
            let reason = if status.reason.is_empty() {
                String::new()
            } else {
                format!(" {}", status.reason)
            };
            PluginError::new(
                kind,
                format!(
                    "{id}: {action} failed: {} (HTTP {}{reason})",
                    status.message, status.code
                ),
            )
        }
        other => {
            let kind = match &other {
                kube::Error::SerdeError(_) => ErrorKind::Internal,
                kube::Error::Discovery(_) => ErrorKind::Rejected,
                kube::Error::InferConfig(_) | kube::Error::BuildRequest(_) => {
                    ErrorKind::InvalidInput
                }
                _ => ErrorKind::Unavailable,
            };
            PluginError::new(kind, format!("{id}: {action} failed: {other}"))
        }
    }
}

/// Whether the server refused the object itself. Besides 400/422, kube-apiserver 1.20 answers a
/// server-side apply whose body does not fit the schema with a 500 "failed to create typed patch
/// object": retrying cannot help, so it counts as bad input, not as the server being down.
pub fn rejects_input(status: &kube::core::Status) -> bool {
    matches!(status.code, 400 | 422)
        || (status.code == 500
            && status
                .message
                .contains("failed to create typed patch object"))
}

/// Whether the error is the server saying the object (or its kind) does not exist.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

/// For a failure to reach the server at all (connection refused, DNS, TLS, timeouts while
/// connecting), the innermost cause; `None` for answers the server gave.
pub fn transport_cause(err: &kube::Error) -> Option<String> {
    match err {
        kube::Error::HyperError(_) | kube::Error::Service(_) => {}
        _ => return None,
    }
    let mut cause: &dyn std::error::Error = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    Some(cause.to_string())
}
