//! `kusion-controller`: GitOps for kusion stacks. A Kubernetes controller serving the `Stack`
//! custom resource ([`crd`]): it fetches the Stack's Git revision ([`git`]), compiles the stack,
//! runs the policies, plans against live state and applies when allowed, through the kernel's
//! one operation pipeline ([`kusion_kernel::policy::guarded_apply`], [`kusion_kernel::operation`]), and
//! reports in the Stack's `status` and in Kubernetes Events ([`reconcile`]). Several replicas
//! elect a leader through a Lease ([`leader`]).
//!
//! What turns a stack folder into a spec, a state store and runtimes (compiling KCL, the
//! stack's settings, plugins) is the front end's: it comes in as a [`StackLoader`], which
//! `kusionctl controller` implements with the same code `kusionctl apply -C <stack>` runs.

pub mod approval;
pub mod crd;
pub mod git;
pub mod leader;
pub mod reconcile;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kusion_kernel::operation::Stack as EngineStack;
use kusion_kernel::policy::PolicyGuard;
use kusion_kernel::spec::Spec;

pub use crd::{Stack, StackSpec, StackStatus};
pub use reconcile::{ControllerOptions, run};

/// A stack folder opened for one operation.
pub struct Prepared {
    /// The compiled spec.
    pub spec: Spec,
    /// Its state store and runtimes.
    pub stack: EngineStack,
    /// The policies that apply to it.
    pub guard: PolicyGuard,
}

/// What the controller asks of the front end for one reconcile.
pub struct LoadRequest<'a> {
    /// The stack's folder in the checked-out revision.
    pub dir: &'a Path,
    /// Where a `local` backend keeps this Stack's state (outside the checkout, which changes
    /// with every revision).
    pub state_dir: PathBuf,
    /// `local` or a remote backend URL.
    pub state_backend: &'a str,
    /// `RULE=reason` policy exemptions.
    pub exemptions: &'a [String],
    /// Take ownership of fields another writer changed (Kubernetes server-side apply conflicts,
    /// `--force-conflicts`): what correcting drift means.
    pub force_conflicts: bool,
}

/// Opens a checked-out stack folder: compile, settings, state store, runtimes, policies.
pub trait StackLoader: Send + Sync + 'static {
    fn load(&self, request: &LoadRequest<'_>) -> Result<Prepared, LoadError>;
}

/// A stack that could not be opened, with the front end's whole message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// The default lease duration for leader election.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
