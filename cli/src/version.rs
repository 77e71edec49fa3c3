//! `kusionctl version` and `--version`: what this build is and which plugin contracts it speaks.

use anyhow::Result;
use kusion_kernel::plugin::{LoadedPlugins, Status};
use serde_json::json;

use crate::exit;

/// The commit kusionctl was built from (`unknown` outside a git checkout).
pub const COMMIT: &str = env!("KUSION_GIT_COMMIT");

/// `kusionctl --version`: one line, no plugin loading (it must work when plugins are broken).
pub const SHORT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KUSION_GIT_COMMIT"),
    ")"
);

/// `kusionctl version [-o json]`.
pub fn run(plugins: &LoadedPlugins, json: bool) -> Result<u8> {
    let abi = kusion_sdk::ABI_VERSION.to_string();
    let wit = kusion_sdk::WIT_PACKAGE;
    if json {
        let list: Vec<_> = plugins
            .entries
            .iter()
            .map(|e| {
                json!({
                    "name": e.name,
                    "kind": e.kind,
                    "format": e.format,
                    "version": e.version,
                    "abi": e.abi.map(|a| a.to_string()),
                    "status": e.status,
                    "manifest": e.manifest,
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "version": env!("CARGO_PKG_VERSION"),
                "commit": COMMIT,
                "pluginAbi": abi,
                "witPackage": wit,
                "plugins": list,
            })
        );
        return Ok(exit::OK);
    }
    println!("kusionctl {}", env!("CARGO_PKG_VERSION"));
    println!("commit      {COMMIT}");
    println!("plugin ABI  {abi} (native plugins)");
    println!("WIT         {wit} (WASM plugins)");
    if plugins.entries.is_empty() {
        println!("plugins     none found");
    } else {
        println!("plugins:");
        for e in &plugins.entries {
            let abi = e.abi.map_or("-".to_string(), |a| a.to_string());
            let status = match &e.status {
                Status::Loaded => "loaded".to_string(),
                Status::Disabled(_) => "disabled".to_string(),
                Status::Refused(_) => "refused (see `kusionctl plugin list`)".to_string(),
            };
            println!(
                "  {:<18} {:<8} ABI {:<5} {status}",
                e.name,
                e.version.as_deref().unwrap_or("-"),
                abi
            );
        }
    }
    Ok(exit::OK)
}
