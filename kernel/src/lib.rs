//! `kusion-kernel`: the engine core of kusion-rs.
//!
//! - [`spec`]: the resource spec (`resources: [{id, type, attributes, dependsOn, extensions}]`),
//!   read from YAML or JSON, with validated IDs.
//! - [`graph`]: the dependency DAG (cycle detection, transitive reduction, order).
//! - [`diff`]: field-level diffs with ignore-fields and masking of sensitive values.
//! - [`drift`]: recorded state against live resources, without a spec.
//! - [`plan`]: the 3-way plan (prior state, planned spec, live objects) -> an action per resource.
//! - [`execute`]: the scheduler that executes a plan in parallel along the DAG.
//! - [`state`]: the `StateStore` trait, the journal and the embedded local backend.
//! - [`readiness`]: the hook judging readiness rules a resource carries (extension `readiness`).
//! - [`registry`]: which runtime serves which resource `type`.
//! - [`manage`]: import, `state rm` and `state mv`: what kusion manages, changed without
//!   changing what is live.
//! - [`rollback`]: which release a rollback returns to, and its spec restored from history.
//! - [`ops`]: day-2 operations (`kusionctl run`): restart, scale, rollback in batches.
//!
//! Inside the crate only: `id` (resource ID rules), `reference` (`$kusion_path` references
//! between resources), `select` (`--target`: the spec and state narrowed to named resources),
//! `secret_ref` (`ref://<store>/<name>` values read from secret-store plugins, never kept in
//! clear) and `walk` (the bounded-concurrency DAG walk): front ends reach them through `plan`,
//! `execute` and `operation`.
//!
//! The kernel talks to runtimes only through `kusion_sdk::runtime::Runtime`.

// Every public item is documented.
#![warn(missing_docs)]

pub mod execute;
pub mod graph;
pub(crate) mod id;
pub mod manage;
pub mod operation;
pub mod ops;
mod par;
pub mod plan;
pub mod plugin;
pub mod policy;
pub mod readiness;
pub mod registry;
pub(crate) mod walk;

pub(crate) mod reference;
pub mod rollback;
pub(crate) mod secret_ref;
pub(crate) mod select;

pub mod diff;
pub mod drift;
pub mod spec;
pub mod state;

pub use kusion_sdk as sdk;
pub use kusion_sdk::Resource;
