//! Opening a stack folder for an operation the way `kusionctl apply -C <stack>` does (stack
//! settings, state store, runtimes, compile, policies), for the front ends that serve many
//! stacks from one process: `kusionctl controller` and `kusionctl server`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use kusion_kernel::operation::Stack;
use kusion_kernel::plugin::LoadedPlugins;
use kusion_kernel::policy::PolicyGuard;
use kusion_kernel::spec::Spec;
use kusion_sdk::runtime::Runtime;
use serde_json::Value;

pub(crate) struct StackOpener {
    pub(crate) plugins: LoadedPlugins,
    pub(crate) runtimes: Vec<Arc<dyn Runtime>>,
    /// The kusion configuration file policies are read from.
    pub(crate) config_file: Option<PathBuf>,
    pub(crate) set: Vec<String>,
    pub(crate) runtime_config: Value,
}

/// Where a stack's state goes, as `--state-dir` and `--state-backend` would say.
pub(crate) struct StateChoice<'a> {
    pub(crate) state_dir: Option<PathBuf>,
    pub(crate) backend: &'a str,
}

impl StackOpener {
    /// The compiled spec, the engine's stack and the policy guard of the stack in `dir`.
    pub(crate) fn open(
        &self,
        dir: &Path,
        state: StateChoice<'_>,
        exemptions: &[String],
        force_conflicts: bool,
    ) -> Result<(Spec, Stack, PolicyGuard)> {
        let (stack, guard) = self.open_engine(dir, state, exemptions, force_conflicts)?;
        let spec = self.compile(dir)?;
        Ok((spec, stack, guard))
    }

    /// The engine's stack (state store and runtimes) and the policy guard of the stack in `dir`,
    /// without compiling it: what a day-2 run on the stack needs.
    pub(crate) fn open_engine(
        &self,
        dir: &Path,
        state: StateChoice<'_>,
        exemptions: &[String],
        force_conflicts: bool,
    ) -> Result<(Stack, PolicyGuard)> {
        let settings = self.settings(dir, state, force_conflicts)?;
        let stack =
            crate::context::open_stack(dir, settings, &self.plugins, self.runtimes.clone())?;
        let guard = crate::policy::guard_from(
            self.config_file.as_deref(),
            &self.set,
            dir,
            &self.plugins,
            exemptions,
        )?;
        Ok((stack, guard))
    }

    /// The stack's KCL compiled to a spec, as `kusionctl compile` does.
    pub(crate) fn compile(&self, dir: &Path) -> Result<Spec> {
        crate::compile::spec_for(dir, &None, &self.plugins)?.ok_or_else(|| {
            anyhow::anyhow!("{} is not a stack folder (no stack.yaml)", dir.display())
        })
    }

    /// The stack's state store alone, where `kusionctl state` would look (the server's history).
    #[cfg(feature = "server")]
    pub(crate) fn state_store(
        &self,
        dir: &Path,
        state: StateChoice<'_>,
    ) -> Result<Arc<dyn kusion_kernel::state::StateStore>> {
        let settings = self.settings(dir, state, false)?;
        Ok(kusion_kernel::state::open(
            &settings.state_backend,
            settings.state_dir,
            &crate::context::default_stack_name(dir),
        )?)
    }

    /// The stack's settings with this opener's runtime configuration and the state choice.
    fn settings(
        &self,
        dir: &Path,
        state: StateChoice<'_>,
        force_conflicts: bool,
    ) -> Result<crate::context::StackSettings> {
        crate::context::stack_settings(
            dir,
            state.state_dir,
            state.backend.to_string(),
            self.runtime_config.clone(),
            force_conflicts,
        )
    }
}
