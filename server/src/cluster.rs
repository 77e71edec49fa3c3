//! The GitOps controller's `Stack` objects as the server shows them, and approving the plans they
//! wait on. The server does not talk to Kubernetes itself: the front end hands it a
//! [`ClusterStacks`] (`kusionctl server --kubeconfig` implements it with the controller's own
//! types), so a server started without a cluster simply has none.
//!
//! Access follows the token scopes with one key per namespace, [`namespace_scope`]
//! (`k8s/<namespace>`); a `*` scope covers every namespace.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The scope key of a Kubernetes namespace in a token's scopes.
pub fn namespace_scope(namespace: &str) -> String {
    format!("k8s/{namespace}")
}

/// A controller `Stack` as the API returns it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStack {
    pub namespace: String,
    pub name: String,
    /// The Git repository, reference and path the Stack follows.
    pub source: String,
    /// `apply` or `preview-only`.
    pub mode: String,
    pub require_approval: bool,
    pub suspended: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// The last plan: revision, hash and what it changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<ClusterPlan>,
    /// The hash of the plan waiting for approval, if one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_plan: Option<String>,
    /// Who approved the last approved plan through this API.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ClusterCondition>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPlan {
    pub revision: String,
    pub hash: String,
    pub create: usize,
    pub update: usize,
    pub replace: usize,
    pub delete: usize,
    pub unchanged: usize,
    /// `Action id` for every step that changes something.
    pub changes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{0}")]
    NotFound(String),
    /// Not the plan the Stack waits for, or the Stack changed meanwhile.
    #[error("{0}")]
    Conflict(String),
    /// The cluster could not be reached or answered with an error.
    #[error("{0}")]
    Unavailable(String),
}

/// What the server asks of the cluster.
pub trait ClusterStacks: Send + Sync + 'static {
    /// Every Stack in the cluster.
    fn list(&self) -> BoxFuture<'_, Result<Vec<ClusterStack>, ClusterError>>;
    /// One Stack.
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<ClusterStack, ClusterError>>;
    /// Approves the plan hashed `hash` if it is the one the Stack waits for; returns the Stack.
    fn approve<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        hash: &'a str,
        approver: &'a str,
    ) -> BoxFuture<'a, Result<ClusterStack, ClusterError>>;
}
