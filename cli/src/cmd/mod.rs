//! Subcommands, one file each: what the command reads from its arguments, which kernel
//! operation it calls, and how it prints the result.

pub(crate) mod apply;
pub(crate) mod compile;
#[cfg(feature = "controller")]
pub(crate) mod controller;
pub(crate) mod drift;
pub(crate) mod graph;
pub(crate) mod import;
pub(crate) mod kcl;
pub(crate) mod plugin;
pub(crate) mod plugin_test;
pub(crate) mod rollback;
pub(crate) mod run;
#[cfg(feature = "server")]
pub(crate) mod server;
pub(crate) mod state;
pub(crate) mod tfstate;
