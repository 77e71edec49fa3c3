//! What the server asks of its front end: the stacks of the Konfig checkout it serves, and each
//! stack opened for an operation. `kusionctl server` implements [`StackSource`] with the same
//! code `kusionctl apply -C <stack>` runs (compile, stack settings, plugins, policies), so the
//! server holds no step of its own between a stack folder and the kernel.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kusion_kernel::operation::Stack as EngineStack;
use kusion_kernel::ops::{ClusterConfig, OpsSpec};
use kusion_kernel::policy::PolicyGuard;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::StateStore;
use serde::Serialize;
use utoipa::ToSchema;

/// A stack of the checkout.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StackRef {
    pub project: String,
    pub stack: String,
    /// The stack folder.
    #[schema(value_type = String)]
    pub dir: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `requireApproval: true` in `stack.yaml`: an apply or destroy waits for a second person.
    pub require_approval: bool,
}

/// A stack opened for one operation: exactly what `kusionctl apply` works with.
pub struct Prepared {
    pub spec: Spec,
    pub stack: EngineStack,
    pub guard: PolicyGuard,
    /// The commit the spec was compiled from, when the checkout is a Git source's.
    pub revision: Option<String>,
}

/// A day-2 program opened for a run on a stack: exactly what `kusionctl run` works with.
pub struct PreparedRun {
    /// The operations the program declares, with their targets.
    pub spec: OpsSpec,
    /// The stack's state store (the run is recorded there and holds the stack's lease) and
    /// runtimes.
    pub stack: EngineStack,
    pub guard: PolicyGuard,
    /// The clusters the program may name.
    pub clusters: BTreeMap<String, ClusterConfig>,
    /// The commit the program was compiled from, when the checkout is a Git source's.
    pub revision: Option<String>,
}

/// A stack that could not be listed, compiled or opened, with the front end's whole message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

pub trait StackSource: Send + Sync + 'static {
    /// Every stack of the checkout.
    fn stacks(&self) -> Result<Vec<StackRef>, SourceError>;
    /// The stack's spec (its KCL compiled).
    fn compile(&self, stack: &StackRef) -> Result<Spec, SourceError>;
    /// The stack's state store alone (history reads need no compile or plugins).
    fn state(&self, stack: &StackRef) -> Result<Arc<dyn StateStore>, SourceError>;
    /// Compile, settings, state store, runtimes and policies, for a preview, apply or destroy.
    fn open(&self, stack: &StackRef) -> Result<Prepared, SourceError>;
    /// Compile the day-2 program at `program` (a `.k` file, its path relative to the checkout's
    /// root and inside it) with `args` (`-D KEY=VALUE`), and open the stack it runs on.
    fn open_run(
        &self,
        _stack: &StackRef,
        program: &str,
        _args: &[(String, String)],
    ) -> Result<PreparedRun, SourceError> {
        Err(SourceError(format!(
            "{program}: this server runs no day-2 programs"
        )))
    }
}
