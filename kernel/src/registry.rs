//! Which runtime serves which resource `type`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kusion_sdk::runtime::{Runtime, RuntimeInfo};

/// Why a runtime cannot be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Two runtimes claim one resource type.
    #[error("resource type {resource_type:?} is served by both {first:?} and {second:?}")]
    Conflict {
        /// The type.
        resource_type: String,
        /// The runtime registered first.
        first: String,
        /// The one registered now.
        second: String,
    },
    /// The runtime plugin was built for another plugin ABI.
    #[error("runtime {name:?} was built for plugin ABI {plugin} but this kusion speaks {host}")]
    Abi {
        /// The runtime.
        name: String,
        /// Its ABI.
        plugin: kusion_sdk::AbiVersion,
        /// The ABI this kernel speaks.
        host: kusion_sdk::AbiVersion,
    },
}

/// The runtimes available to one operation, the secret stores its plans read, and the evaluator
/// of resources' own readiness rules.
#[derive(Clone, Default)]
pub struct Registry {
    by_type: BTreeMap<String, (RuntimeInfo, Arc<dyn Runtime>)>,
    secrets: crate::secret_ref::SecretStores,
    readiness: Option<Arc<dyn crate::readiness::ReadinessHook>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Add a runtime for every type it declares.
    pub fn register(&mut self, runtime: Arc<dyn Runtime>) -> Result<(), RegistryError> {
        let info = runtime.describe();
        if !kusion_sdk::ABI_VERSION.accepts(info.abi) {
            return Err(RegistryError::Abi {
                name: info.name,
                plugin: info.abi,
                host: kusion_sdk::ABI_VERSION,
            });
        }
        for t in &info.resource_types {
            if let Some((existing, _)) = self.by_type.get(t) {
                return Err(RegistryError::Conflict {
                    resource_type: t.clone(),
                    first: existing.name.clone(),
                    second: info.name.clone(),
                });
            }
        }
        for t in &info.resource_types {
            self.by_type
                .insert(t.clone(), (info.clone(), runtime.clone()));
        }
        Ok(())
    }

    /// Resolve `ref://` values of the schemes `plugin` declares (the crate's `secret_ref`).
    pub fn register_secret_store(
        &mut self,
        name: &str,
        plugin: Arc<dyn kusion_sdk::function::FunctionPlugin>,
    ) {
        self.secrets.add(name, plugin);
    }

    /// The stack folder secret stores read relative file references from.
    pub fn set_secret_workdir(&mut self, dir: &std::path::Path) {
        self.secrets.set_workdir(dir);
    }

    /// The secret stores `ref://` values are read from.
    pub fn secret_stores(&self) -> &crate::secret_ref::SecretStores {
        &self.secrets
    }

    /// Judge resources' readiness rules (extension `readiness`) with `hook`; without one such a
    /// resource fails as unsupported (see [`crate::readiness`]).
    pub fn set_readiness(&mut self, hook: Arc<dyn crate::readiness::ReadinessHook>) {
        self.readiness = Some(hook);
    }

    /// The hook judging readiness rules, when one is set.
    pub fn readiness(&self) -> Option<&Arc<dyn crate::readiness::ReadinessHook>> {
        self.readiness.as_ref()
    }

    /// The runtime serving `resource_type`.
    pub fn get(&self, resource_type: &str) -> Option<&Arc<dyn Runtime>> {
        self.by_type.get(resource_type).map(|(_, r)| r)
    }

    /// What the runtime serving `resource_type` says of itself.
    pub fn info(&self, resource_type: &str) -> Option<&RuntimeInfo> {
        self.by_type.get(resource_type).map(|(i, _)| i)
    }

    /// Every type a runtime serves.
    pub fn types(&self) -> BTreeSet<String> {
        self.by_type.keys().cloned().collect()
    }

    /// Each distinct runtime once.
    pub fn runtimes(&self) -> Vec<(RuntimeInfo, Arc<dyn Runtime>)> {
        let mut seen = BTreeSet::new();
        self.by_type
            .values()
            .filter(|(info, _)| seen.insert(info.name.clone()))
            .map(|(i, r)| (i.clone(), r.clone()))
            .collect()
    }
}
