//! The binary contract between the kernel and a plugin, below the plain-Rust traits.
//!
//! Plugin authors never touch this module directly: they implement [`crate::runtime::Runtime`],
//! [`crate::function::FunctionPlugin`] or [`crate::policy::PolicyPlugin`] and write one export
//! macro line ([`crate::export_runtime!`], [`crate::export_function_plugin!`],
//! [`crate::export_policy_plugin!`]) for a native `cdylib`, or call the [`wire`] helpers from a
//! WASM component's exports. The kernel's plugin host turns a loaded library back into the same
//! traits.
//!
//! Every call crosses as a verb plus a JSON payload ([`wire`]); the answer is JSON, or a
//! JSON-encoded [`crate::PluginError`]. JSON keeps the binary surface tiny (a handful of
//! `abi_stable` types) so the traits can grow fields without a new ABI major.

pub mod wire;

#[cfg(feature = "native")]
pub mod native;

use serde::{Deserialize, Serialize};

/// The three kinds of plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    Runtime,
    Function,
    Policy,
}

impl PluginKind {
    /// The number used for this kind in the native library declaration.
    pub const fn code(self) -> u32 {
        match self {
            PluginKind::Runtime => 1,
            PluginKind::Function => 2,
            PluginKind::Policy => 3,
        }
    }

    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            1 => Some(PluginKind::Runtime),
            2 => Some(PluginKind::Function),
            3 => Some(PluginKind::Policy),
            _ => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            PluginKind::Runtime => "runtime",
            PluginKind::Function => "function",
            PluginKind::Policy => "policy",
        }
    }
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PluginKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "runtime" => Ok(PluginKind::Runtime),
            "function" => Ok(PluginKind::Function),
            "policy" => Ok(PluginKind::Policy),
            other => Err(format!(
                "unknown plugin kind `{other}` (expected runtime, function or policy)"
            )),
        }
    }
}
