//! Approving a Stack's recorded plan from outside `kubectl`: what `kusionctl server`'s API calls.
//!
//! An approval is the same annotation a person would write by hand
//! ([`APPROVE_ANNOTATION`] = the plan's hash), plus who gave it ([`APPROVED_BY_ANNOTATION`]).
//! Keeping it on the Stack object means the cluster holds the decision: it survives a restart
//! of the server or the controller, and the controller needs no channel to the server. The
//! controller applies a plan only when the plan it computes under the state lease has exactly
//! the approved hash, so approving a plan that has since changed approves nothing.

use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::crd::{APPROVE_ANNOTATION, APPROVED_BY_ANNOTATION, Stack};

#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("no Stack {namespace}/{name}")]
    NotFound { namespace: String, name: String },
    /// The Stack waits for no plan, or for a different one than the caller saw.
    #[error("{0}")]
    Conflict(String),
    #[error("Stack {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        source: kube::Error,
    },
}

/// Records `approver`'s approval of the plan hashed `hash` on the Stack `namespace/name`, if
/// that is the plan the Stack is waiting for. Returns the Stack as patched.
pub async fn approve_plan(
    client: kube::Client,
    namespace: &str,
    name: &str,
    hash: &str,
    approver: &str,
) -> Result<Stack, ApprovalError> {
    let api: Api<Stack> = Api::namespaced(client, namespace);
    let kube_error = |source| ApprovalError::Kube {
        namespace: namespace.to_string(),
        name: name.to_string(),
        source,
    };
    let stack = api
        .get_opt(name)
        .await
        .map_err(kube_error)?
        .ok_or_else(|| ApprovalError::NotFound {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })?;
    let pending = stack.status.as_ref().and_then(|s| s.pending_plan.clone());
    match pending {
        None => {
            return Err(ApprovalError::Conflict(format!(
                "Stack {namespace}/{name} is waiting for no plan"
            )));
        }
        Some(p) if p != hash => {
            return Err(ApprovalError::Conflict(format!(
                "Stack {namespace}/{name} waits for plan {p}, not {hash}: the plan changed since it was read"
            )));
        }
        Some(_) => {}
    }
    // The resourceVersion makes the write conditional: a Stack changed since the read (a new
    // spec, a new pending plan) refuses the patch instead of taking a stale approval.
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": stack.metadata.resource_version,
            "annotations": {
                APPROVE_ANNOTATION: hash,
                APPROVED_BY_ANNOTATION: approver,
            }
        }
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| match e {
            kube::Error::Api(ref r) if r.code == 409 => ApprovalError::Conflict(format!(
                "Stack {namespace}/{name} changed while it was being approved; read it again"
            )),
            e => kube_error(e),
        })
}

/// Every Stack the client may list (all namespaces).
pub async fn list_stacks(client: kube::Client) -> Result<Vec<Stack>, kube::Error> {
    let api: Api<Stack> = Api::all(client);
    Ok(api.list(&Default::default()).await?.items)
}

/// One Stack, if it is there.
pub async fn get_stack(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Stack>, kube::Error> {
    Api::<Stack>::namespaced(client, namespace)
        .get_opt(name)
        .await
}
