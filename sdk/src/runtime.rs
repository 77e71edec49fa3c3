//! The runtime plugin contract: per-resource verbs the kernel drives.
//!
//! Every verb is synchronous and may be called from several threads at once; a runtime that
//! talks to an async client keeps its own executor inside. "Absent" is a value (`None`), never
//! an error.
//!
//! Timeouts (`timeout` in the requests) are the time limit of one call (the operator's
//! `--timeout`, or a day-2 operation's own limit), sent as serde's `Duration`
//! (`{"secs": .., "nanos": ..}`); `None` means no limit. The kernel stops waiting when it passes
//! (the call is abandoned, not interrupted), so give up by then with
//! [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) rather than leave work running.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::PluginResult;
use crate::{AbiVersion, Resource};

/// What a runtime can do, declared up front so the kernel never discovers it by failure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// `apply(.., dry_run: true)` computes what the remote system would store without changing it.
    pub dry_run: bool,
    /// `watch` reports readiness after apply.
    pub watch: bool,
    /// `import` adopts an existing remote object.
    pub import: bool,
    /// Responses list sensitive attribute paths to be masked in every output.
    pub sensitive_fields: bool,
}

/// Who a runtime is and what it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeInfo {
    /// The runtime's name, used in messages and `kusionctl plugin list`.
    pub name: String,
    /// The runtime's own version (free text, usually `CARGO_PKG_VERSION`).
    pub version: String,
    /// The contract the runtime was built against: [`crate::ABI_VERSION`]. The kernel refuses to
    /// register a runtime whose version it does not [accept](AbiVersion::accepts).
    pub abi: AbiVersion,
    /// The resource `type`s this runtime serves (`Kubernetes`, `Terraform`, ...). Two loaded
    /// runtimes may not declare the same type: the second is refused.
    pub resource_types: Vec<String>,
    /// The optional behaviour the kernel may rely on.
    pub capabilities: Capabilities,
}

/// Create or update one resource, or (with `dry_run`) compute what it would become.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyRequest {
    /// The resource as recorded in state after the last successful apply, if any.
    pub prior: Option<Resource>,
    /// Opaque bytes the runtime returned with `prior` (e.g. a Terraform provider's private data).
    #[serde(default)]
    pub prior_private: Option<String>,
    /// The desired resource, with every `$kusion_path` reference already resolved (during a
    /// dry-run, references to values not yet known are left in place).
    pub planned: Resource,
    /// Compute the answer without changing anything remote: no write, no delete, no side effect
    /// (use the remote system's own dry run where it has one). The kernel sends it while
    /// planning, only to runtimes that declare [`Capabilities::dry_run`].
    pub dry_run: bool,
    /// Upper bound for this call; the runtime should give up (with a `Timeout` error) after it.
    #[serde(default)]
    pub timeout: Option<Duration>,
}

/// Result of [`Runtime::apply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyResponse {
    /// The resource as the remote system stores it (or would store it, for a dry-run), in the
    /// same shape as the planned resource so the two can be diffed.
    pub resource: Resource,
    /// Opaque data to keep in state next to the resource and hand back as `prior_private`.
    #[serde(default)]
    pub private: Option<String>,
    /// Attribute paths ([`FieldPath`](crate::FieldPath) syntax) whose values must never be
    /// shown: previews mask them and state keeps them sealed.
    #[serde(default)]
    pub sensitive_paths: Vec<String>,
    /// Attribute paths whose values are only known after a real apply.
    #[serde(default)]
    pub unknown_paths: Vec<String>,
    /// Attribute paths whose change forces the resource to be replaced. The kernel then plans
    /// `Replace` and calls `apply` with the prior object as for an update: the runtime itself
    /// deletes the old object (waiting until it is gone) and creates the new one.
    #[serde(default)]
    pub requires_replace: Vec<String>,
}

/// Read the live object behind a resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadRequest {
    /// The resource as recorded in state, if the kernel manages it already.
    pub prior: Option<Resource>,
    /// The opaque data stored with `prior` (see [`ApplyResponse::private`]).
    #[serde(default)]
    pub prior_private: Option<String>,
    /// The desired resource (references resolved) when there is a spec for it; `None` when only
    /// state is known (drift detection). At least one of `prior` and `planned` is set; find the
    /// object from whichever is.
    pub planned: Option<Resource>,
    /// Upper bound for this call (see the [module docs](self)).
    #[serde(default)]
    pub timeout: Option<Duration>,
}

/// Result of [`Runtime::read`] and [`Runtime::import`]; `resource: None` means absent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResponse {
    /// The live object in the same shape as the planned resource (so the two can be diffed), or
    /// `None` when it does not exist.
    pub resource: Option<Resource>,
    /// Opaque data to keep with the resource, as in [`ApplyResponse::private`].
    #[serde(default)]
    pub private: Option<String>,
    /// Attribute paths ([`FieldPath`](crate::FieldPath) syntax) whose values must never be shown.
    #[serde(default)]
    pub sensitive_paths: Vec<String>,
}

/// Adopt an existing remote object as the given planned resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportRequest {
    /// The spec resource the remote object becomes; answer the object in its shape.
    pub planned: Resource,
    /// A runtime-specific identifier of the remote object (`kusionstack.io/import-id`). `None`:
    /// find the object from `planned` (its ID, or that extension).
    #[serde(default)]
    pub import_id: Option<String>,
    /// Upper bound for this call (see the [module docs](self)).
    #[serde(default)]
    pub timeout: Option<Duration>,
}

/// Delete the remote object behind a resource. Deleting an absent object succeeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteRequest {
    /// The resource as recorded in state.
    pub resource: Resource,
    /// The opaque data stored with it (see [`ApplyResponse::private`]).
    #[serde(default)]
    pub private: Option<String>,
    /// Upper bound for this call (see the [module docs](self)).
    #[serde(default)]
    pub timeout: Option<Duration>,
}

/// Follow a resource (and what it owns) until it is ready or failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchRequest {
    /// The resource to follow, as just applied (or as named by a [`RecoveryHint`]).
    pub resource: Resource,
}

/// How healthy a watched object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Health {
    /// Not ready yet; the kernel keeps watching until its watch timeout.
    Progressing,
    /// Ready; as a resource's overall health it ends the kernel's wait successfully.
    Ready,
    /// Failed for good (a crash loop, a rejected rollout): the kernel's wait ends in an error.
    Failed,
}

/// One row of the live watch table (`Type Kind Name Detail`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    /// The object's kind (runtime-specific: `Deployment`, `Pod`, ...).
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// How healthy this object is.
    pub health: Health,
    /// One line for people (`2/3 replicas available`, why it failed).
    pub detail: String,
}

/// A snapshot of a watched resource: its overall health and the objects it owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchEvent {
    /// The resource's overall health; this is what the kernel waits on.
    pub health: Health,
    /// Why the resource is not ready, or why it failed.
    pub detail: String,
    /// The resource itself and the objects it owns, one table row each.
    pub objects: Vec<ObjectStatus>,
    /// The watched object as the runtime last saw it live (unprojected, with its status), for
    /// readiness rules the host judges ([`EXT_READINESS`]). Runtimes that cannot say leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
}

/// Extension holding a resource's own readiness rule: an expression over the live object (e.g.
/// `status.phase == "Active"`) that the host judges on every watch event carrying
/// [`WatchEvent::object`]. A runtime that sees it keeps watching after its built-in rules say
/// ready, until the host has had its say and drops the watch.
pub const EXT_READINESS: &str = "readiness";

/// The answer of one poll of a [`Watch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WatchPoll {
    /// Something changed: the current snapshot.
    Event(WatchEvent),
    /// Nothing new within the poll's timeout.
    Pending,
    /// The watch ended; no further events will come.
    Closed,
}

/// A running watch. Dropping it stops the watch.
pub trait Watch: Send {
    /// Wait up to `timeout` for the next event.
    fn poll(&mut self, timeout: Duration) -> PluginResult<WatchPoll>;
}

/// One day-2 operation a runtime can perform on a live object (see [`Runtime::operations`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationInfo {
    /// The operation's name as [`OperateRequest::operation`] carries it (`restart`, `scale`,
    /// `rollback`, ...).
    pub name: String,
    /// Object kinds it applies to (runtime-specific, e.g. `Pod`, `Deployment`); empty means any.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// One line for people.
    #[serde(default)]
    pub description: String,
}

/// Perform one day-2 operation (restart, scale, rollback, ...) on one live object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperateRequest {
    /// The object, named by its resource ID; `attributes` may hold only what identifies it
    /// (`apiVersion`, `kind`, `metadata.name`/`namespace`), `extensions` say where it lives.
    pub resource: Resource,
    /// One of the names the runtime declared in [`Runtime::operations`].
    pub operation: String,
    /// Operation parameters (`{"replicas": 3}` for a scale, `{"toRevision": 2}` for a rollback).
    #[serde(default)]
    pub params: Value,
    /// Check that the operation can be done (the object exists, the parameters fit) and say what
    /// it would do, without changing anything.
    #[serde(default)]
    pub dry_run: bool,
    /// Upper bound for the operation itself (see the [module docs](self)).
    #[serde(default)]
    pub timeout: Option<Duration>,
}

/// What to watch to know an operation's effect has settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryHint {
    /// The resource whose [`Runtime::watch`] health says whether the object recovered (for a
    /// deleted pod, the workload that recreates it).
    pub watch: Resource,
    /// Objects (by [`ObjectStatus::kind`] and name) that must no longer appear among the
    /// watch's objects before a `Ready` event counts: the replaced originals.
    #[serde(default)]
    pub gone: Vec<ObjectRef>,
    /// At least this many objects of `ready_kind` must be `Ready` in the same event.
    #[serde(default)]
    pub min_ready: Option<u32>,
    /// The [`ObjectStatus::kind`] `min_ready` counts (`Pod`); `min_ready` is ignored without it.
    #[serde(default)]
    pub ready_kind: Option<String>,
}

/// An owned object named in a watch event.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// As in [`ObjectStatus::kind`].
    pub kind: String,
    /// As in [`ObjectStatus::name`].
    pub name: String,
}

/// Result of [`Runtime::operate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperateResponse {
    /// What was done (or, for a dry-run, would be done), for people.
    pub summary: String,
    /// How to tell the object recovered; `None` when there is nothing to wait for.
    #[serde(default)]
    pub recovery: Option<RecoveryHint>,
    /// The workload that owns the object (its resource ID), when the runtime knows it.
    #[serde(default)]
    pub owner: Option<String>,
}

/// A runtime serves the resources of one or more `type`s.
///
/// `operations`, `operate` and `target` came after the first release of the contract: they have
/// default bodies (no operations, no target), and a host reaching a plugin built before them gets
/// `Unsupported` for the new verbs, which it reads as "none". So older plugins keep loading and
/// working.
pub trait Runtime: Send + Sync {
    /// Who the runtime is, the types it serves and its capabilities. The kernel asks when it
    /// loads the runtime and may ask again: keep it cheap, and the same for the runtime's
    /// lifetime.
    fn describe(&self) -> RuntimeInfo;
    /// Called once per operation, before any verb, with the operator's configuration for this
    /// runtime (kubeconfig paths, provider mirrors, ...); not called when there is none. An error
    /// keeps the runtime from loading: fail with `InvalidInput` naming the bad key.
    fn configure(&self, config: &Value) -> PluginResult<()>;
    /// Make the remote object match `planned` (creating it if needed), or with `dry_run` only
    /// compute what it would become. The kernel records the answer of a real apply in state.
    fn apply(&self, request: &ApplyRequest) -> PluginResult<ApplyResponse>;
    /// Read the live object; `resource: None` when it does not exist (not an error). Called for
    /// every resource on every plan and drift check, so it must not change anything.
    fn read(&self, request: &ReadRequest) -> PluginResult<ReadResponse>;
    /// Adopt an existing remote object without changing it, answered in `planned`'s shape
    /// (`resource: None` when there is no such object). Declare [`Capabilities::import`] if
    /// implemented.
    fn import(&self, request: &ImportRequest) -> PluginResult<ReadResponse>;
    /// Delete the remote object; succeed if it is already gone.
    fn delete(&self, request: &DeleteRequest) -> PluginResult<()>;
    /// Start following a resource until it is ready or failed; the kernel polls the handle and
    /// drops it when done. After an apply the kernel watches only runtimes declaring
    /// [`Capabilities::watch`]; it also watches what an [`OperateResponse::recovery`] names.
    fn watch(&self, request: &WatchRequest) -> PluginResult<Box<dyn Watch>>;

    /// The day-2 operations this runtime performs (declared, never discovered by failure).
    fn operations(&self) -> Vec<OperationInfo> {
        Vec::new()
    }

    /// Perform one operation on one live object.
    fn operate(&self, request: &OperateRequest) -> PluginResult<OperateResponse> {
        Err(crate::PluginError::unsupported(format!(
            "{}: this runtime has no operation `{}`",
            request.resource.id, request.operation
        )))
    }

    /// Where `resource` lives when the runtime serves several places with one resource ID (a
    /// Kubernetes cluster): the kernel keys state by `id@target`, so the same ID may be applied
    /// to two targets in one stack. `None` (the default) means the one place the runtime is
    /// configured for; the key is the bare ID. Must be cheap and must not touch the network: it
    /// is asked for every resource on every plan. An error (a malformed extension) stops the
    /// plan: guessing `None` would re-key the resource and plan its deletion.
    fn target(&self, resource: &Resource) -> PluginResult<Option<String>> {
        let _ = resource;
        Ok(None)
    }

    /// The configuration that produces `recorded` (a resource as state or a read holds it): its
    /// attributes without those only the runtime or the remote side sets (computed values,
    /// server metadata, status), so that a spec holding the answer plans no change against it.
    /// Used to write the spec of adopted objects (a migration from Terraform's state). The
    /// default, and a plugin built before this verb (`Unsupported`), answers `None`: the
    /// runtime cannot tell, and the caller keeps the attributes as they are.
    fn configuration(&self, recorded: &Resource) -> PluginResult<Option<Resource>> {
        let _ = recorded;
        Ok(None)
    }
}
