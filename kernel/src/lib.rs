//! `kusion-kernel`: the engine core of kusion-rs.
//!
//! - [`spec`]: the resource spec (`resources: [{id, type, attributes, dependsOn, extensions}]`),
//!   read from YAML or JSON, with validated [`id`]s.
//! - [`reference`](mod@reference): implicit `$kusion_path` references between resources.
//! - [`graph`]: the dependency DAG (cycle detection, transitive reduction, order).
//! - [`diff`]: field-level diffs with ignore-fields and masking of sensitive values.
//! - [`drift`]: recorded state against live resources, without a spec.
//! - [`plan`]: the 3-way plan (prior state, planned spec, live objects) -> an action per resource.
//! - [`select`]: targeted plans (`--target`): the spec and state narrowed to named resources.
//! - [`execute`]: the scheduler that executes a plan in parallel along the DAG.
//! - [`state`]: the `StateStore` trait, the journal and the embedded local backend.
//! - [`readiness`]: the hook judging readiness rules a resource carries (extension `readiness`).
//! - [`registry`]: which runtime serves which resource `type`.
//! - [`manage`]: import, `state rm` and `state mv`: what kusion manages, changed without
//!   changing what is live.
//! - [`rollback`]: which release a rollback returns to, and its spec restored from history.
//! - [`secret_ref`]: `ref://<store>/<name>` values read from secret-store plugins while planning
//!   and applying, never kept in clear.
//! - [`ops`]: day-2 operations (`kusionctl run`): restart, scale, rollback in batches.
//!
//! The kernel talks to runtimes only through `kusion_sdk::runtime::Runtime`.

// Every public item is documented.
#![warn(missing_docs)]

pub mod execute;
pub mod graph;
pub mod id;
pub mod manage;
pub mod operation;
pub mod ops;
mod par;
pub mod plan;
pub mod plugin;
pub mod policy;
pub mod readiness;
pub mod registry;
pub mod walk;

pub mod reference;
pub mod rollback;
pub mod secret_ref;
pub mod select;

pub mod diff;
pub mod drift;
pub mod spec;
pub mod state;

pub use kusion_sdk as sdk;
pub use kusion_sdk::Resource;
