//! Day-2 operations (`kusionctl run`): what a program declares with the `kusion.ops` KCL package
//! ([`spec`]), how a run is checked before it acts ([`check`]) and how it is carried out through
//! the runtimes' `operate` and `watch` verbs ([`exec`]). Runs are recorded in the state backend
//! next to releases ([`crate::state::RunRecord`]) as they happen ([`record`]).

pub mod check;
pub mod exec;
pub mod record;
pub mod spec;

pub use check::{CheckError, CheckedRun};
pub use exec::{RunEvent, RunReport, TargetReport, TargetStatus, execute, preflight};
pub use spec::{ClusterConfig, Condition, Operation, OpsError, OpsSpec, Target, Unresolved};
