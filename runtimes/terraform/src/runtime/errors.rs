//! Provider diagnostics and protocol failures as kusion plugin errors, named by resource ID.

use super::*;

pub(super) fn err(kind: ErrorKind, id: &str, message: impl std::fmt::Display) -> PluginError {
    PluginError::new(kind, format!("{id}: {message}"))
}

/// Turn error diagnostics into one error; warnings are logged.
pub(super) fn check_diags(id: &str, what: &str, diags: &[Diagnostic]) -> PluginResult<()> {
    check_provider_diags(what, diags).map_err(|e| err(e.kind, id, e.message))
}

pub(super) fn check_provider_diags(what: &str, diags: &[Diagnostic]) -> PluginResult<()> {
    for d in diags.iter().filter(|d| !d.error) {
        tracing::warn!("{what}: {d}");
    }
    let errors: Vec<String> = diags
        .iter()
        .filter(|d| d.error)
        .map(|d| d.to_string())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(PluginError::new(
            ErrorKind::Rejected,
            format!("{what}: {}", errors.join("; ")),
        ))
    }
}

pub(super) fn rpc_error(id: &str, e: plugin::PluginError) -> PluginError {
    let e = plain_rpc_error(e);
    err(e.kind, id, e.message)
}

/// A protocol error as a plugin error, without naming a resource.
pub(super) fn plain_rpc_error(e: plugin::PluginError) -> PluginError {
    let kind = match &e {
        plugin::PluginError::Rpc {
            transport: true, ..
        } => ErrorKind::Unavailable,
        plugin::PluginError::Rpc { .. } => ErrorKind::Rejected,
        plugin::PluginError::Start { .. } | plugin::PluginError::Handshake { .. } => {
            ErrorKind::Unavailable
        }
        plugin::PluginError::Schema(_) => ErrorKind::Internal,
    };
    PluginError::new(kind, e.to_string())
}
