//! `kusion-kernel`: the engine core of kusion-rs.
//!
//! - [`spec`]: the resource spec (`resources: [{id, type, attributes, dependsOn, extensions}]`),
//!   read from YAML or JSON, with validated [`id`]s.
//! - [`reference`]: implicit `$kusion_path` references between resources.
//! - [`graph`]: the dependency DAG (cycle detection, transitive reduction, order).
//! - [`diff`]: field-level diffs with ignore-fields and masking of sensitive values.
//! - [`plan`]: the 3-way plan (prior state, planned spec, live objects) -> an action per resource.
//! - [`apply`]: the scheduler that executes a plan in parallel along the DAG.
//! - [`state`]: the `StateStore` trait, the journal and the embedded local backend.
//! - [`readiness`]: the hook judging readiness rules a resource carries (extension `readiness`).
//! - [`registry`]: which runtime serves which resource `type`.
//! - [`ops`]: day-2 operations (`kusionctl run`): restart, scale, rollback in batches.
//!
//! The kernel talks to runtimes only through `kusion_sdk::runtime::Runtime`.

pub mod apply;
pub mod graph;
pub mod id;
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

pub mod diff;
pub mod spec;
pub mod state;

pub use kusion_sdk as sdk;
pub use kusion_sdk::Resource;
