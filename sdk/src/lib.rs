//! `kusion-sdk`: everything a plugin needs and nothing of the kernel.
//!
//! Three plugin kinds exist:
//! - [`runtime::Runtime`]: creates, reads, updates, deletes and watches resources of some `type`
//!   (`Kubernetes`, `Terraform`, ...).
//! - [`function::FunctionPlugin`]: functions KCL code calls as `kcl_plugin.<module>.<fn>(...)`.
//! - [`policy::PolicyPlugin`]: evaluates a spec (and plan) and returns findings.
//!
//! All values that cross a plugin boundary are JSON-shaped ([`serde_json::Value`]), so the
//! kernel and a plugin only have to agree on this crate's types and its [`ABI_VERSION`].
//!
//! A native plugin is a `cdylib` that implements one trait and exports it with one line
//! (feature `native`, on by default):
#![cfg_attr(
    feature = "native",
    doc = "[`export_runtime!`], [`export_function_plugin!`] or [`export_policy_plugin!`]."
)]
#![cfg_attr(
    not(feature = "native"),
    doc = "`export_runtime!`, `export_function_plugin!` or `export_policy_plugin!` (not in this build)."
)]
//! A WASM plugin implements `wit/plugin.wit` with the helpers in [`abi::wire::guest`]. See
//! `README.md` for the author's guide.

#![deny(missing_docs)]

pub mod abi;
pub mod error;
pub mod function;
pub mod path;
pub mod policy;
pub mod resource;
pub mod runtime;

pub use error::{ErrorKind, PluginError, PluginResult};
pub use path::{FieldPath, Segment};
pub use resource::{Resource, ResourceType};
pub use serde_json::{Map, Value};

/// Version of the plugin contract. A plugin built against a different major version is refused;
/// a plugin built against an older minor version of the same major keeps loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AbiVersion {
    /// Incompatible changes bump it; the host refuses a plugin of another major.
    pub major: u32,
    /// Compatible additions bump it; the host accepts plugins of its own minor or older.
    pub minor: u32,
}

impl AbiVersion {
    /// Whether a plugin built against `plugin` can be used by a host built against `self`.
    pub fn accepts(self, plugin: AbiVersion) -> bool {
        self.major == plugin.major && plugin.minor <= self.minor
    }
}

impl std::fmt::Display for AbiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The contract version this build of the SDK implements.
///
/// - 1.0: verbs with JSON payloads.
/// - 1.1: native plugins also answer MessagePack calls (`call_msgpack`); the host uses them when
///   a library declares 1.1 or later and falls back to JSON for 1.0 libraries.
pub const ABI_VERSION: AbiVersion = AbiVersion { major: 1, minor: 1 };

/// The WIT package (name and version) WASM plugin components implement: `sdk/wit/plugin.wit`.
pub const WIT_PACKAGE: &str = "kusion:plugin@1.0.0";

#[cfg(test)]
mod wit_version_tests {
    #[test]
    fn wit_package_matches_the_wit_file() {
        let wit = include_str!("../wit/plugin.wit");
        assert!(
            wit.contains(&format!("package {};", super::WIT_PACKAGE)),
            "sdk/wit/plugin.wit declares another package than WIT_PACKAGE"
        );
    }
}
