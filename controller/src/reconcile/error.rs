//! Why a reconcile failed, and the condition reason that names it.

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("stack {stack}: {message}")]
    Invalid { stack: String, message: String },
    /// The Stack names a Secret that is not there (or holds nothing usable): nothing can be
    /// fetched until someone creates it.
    #[error("stack {stack}: source secret {secret} (spec.source.secretRef): {message}")]
    SecretMissing {
        stack: String,
        secret: String,
        message: String,
    },
    #[error("stack {stack}: reading source secret {secret}: {source}")]
    Secret {
        stack: String,
        secret: String,
        source: kube::Error,
    },
    #[error("stack {stack}: fetching {url} {reference}: {source}")]
    Git {
        stack: String,
        url: String,
        reference: String,
        source: crate::git::GitError,
    },
    #[error("stack {stack} at {revision}: {message}")]
    Pipeline {
        stack: String,
        revision: String,
        message: String,
    },
    #[error("stack {stack} at {revision}: {summary}{}", failed_steps(.failures))]
    ApplyFailed {
        stack: String,
        revision: String,
        summary: String,
        failures: Vec<String>,
    },
    #[error("stack {stack}: {source}")]
    Kube { stack: String, source: kube::Error },
    #[error("stack {stack}: {message}")]
    Finalizer { stack: String, message: String },
}

fn failed_steps(failures: &[String]) -> String {
    if failures.is_empty() {
        String::new()
    } else {
        format!(": {}", failures.join("; "))
    }
}

impl ReconcileError {
    /// The condition reason naming what failed.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Invalid { .. } => "InvalidSpec",
            ReconcileError::SecretMissing { .. } => "SecretNotFound",
            ReconcileError::Secret { .. } => "SecretUnreadable",
            ReconcileError::Git { .. } => "FetchFailed",
            ReconcileError::Pipeline { .. } => "PlanFailed",
            ReconcileError::ApplyFailed { .. } => "ApplyFailed",
            ReconcileError::Kube { .. } => "ApiError",
            ReconcileError::Finalizer { .. } => "FinalizerFailed",
        }
    }

    /// True when retrying cannot help until someone changes something (the Stack or its
    /// Secret): the Stack is `Stalled`, though it is still retried with backoff, since a
    /// Secret's creation is not watched.
    pub fn stalls(&self) -> bool {
        matches!(
            self,
            ReconcileError::Invalid { .. } | ReconcileError::SecretMissing { .. }
        )
    }
}
