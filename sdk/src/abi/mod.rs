//! The binary contract between the kernel and a plugin, below the plain-Rust traits.
//!
//! Plugin authors never touch this module directly: they implement [`crate::runtime::Runtime`],
//! [`crate::function::FunctionPlugin`] or [`crate::policy::PolicyPlugin`] and write one export
//! macro line for a native `cdylib`
#![cfg_attr(
    feature = "native",
    doc = "([`crate::export_runtime!`], [`crate::export_function_plugin!`], [`crate::export_policy_plugin!`]),"
)]
#![cfg_attr(not(feature = "native"), doc = "(`export_*!`, feature `native`),")]
//! or call the [`wire`] helpers from a WASM component's exports. The kernel's plugin host turns
//! a loaded library back into the same traits.
//!
//! Every call crosses as a verb plus a JSON payload ([`wire`]); the answer is JSON, or a
//! JSON-encoded [`crate::PluginError`]. JSON keeps the binary surface tiny (a handful of
//! `abi_stable` types) so the traits can grow fields without a new ABI major.

pub mod wire;

#[cfg(feature = "native")]
pub mod native;

use serde::{Deserialize, Serialize};

/// The three kinds of plugin, as a manifest's `kind` names them (`runtime`, `function`,
/// `policy`). A library whose declared kind differs from its manifest's is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// Implements [`crate::runtime::Runtime`].
    Runtime,
    /// Implements [`crate::function::FunctionPlugin`].
    Function,
    /// Implements [`crate::policy::PolicyPlugin`].
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

    /// The kind of a [`PluginKind::code`]; `None` for a number no kind uses.
    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            1 => Some(PluginKind::Runtime),
            2 => Some(PluginKind::Function),
            3 => Some(PluginKind::Policy),
            _ => None,
        }
    }

    /// The kind's name as a manifest writes it (also its `Display` and `FromStr` form).
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
