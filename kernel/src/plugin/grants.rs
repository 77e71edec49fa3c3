//! What a WASM plugin may use: per-call limits and the directories, environment and network it
//! is granted. Plain data, read from plugin manifests and the operator's configuration, so a
//! build without the WASM host still reads and checks them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Per-call limits of a WASM plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WasmLimits {
    /// Fuel per call; one unit is roughly one WebAssembly instruction.
    pub fuel: u64,
    /// Cap on the linear memory of one instance, in bytes.
    pub memory_bytes: usize,
    /// Wall-clock limit per call, in milliseconds. Fuel bounds computation; this also bounds a
    /// call that waits (a watch poll gets its own timeout on top, a runtime call at least the
    /// timeout its request carries).
    pub wall_clock_ms: u64,
}

impl Default for WasmLimits {
    fn default() -> Self {
        WasmLimits {
            fuel: 2_000_000_000,
            memory_bytes: 64 << 20,
            wall_clock_ms: 60_000,
        }
    }
}

/// What a WASM plugin may reach outside its sandbox. Used both for what a manifest asks and for
/// what the operator grants; the plugin gets the intersection ([`WasmGrants::intersect`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WasmGrants {
    /// Guest directory -> host directory. In a manifest the host side is ignored (only the guest
    /// path is asked for); in the operator's grant it says where the guest path points.
    pub dirs: BTreeMap<String, PathBuf>,
    /// Whether granted directories are writable (both sides must say so).
    pub writable: bool,
    /// Environment variable names passed through from the kernel's environment.
    pub env: Vec<String>,
    /// Outbound TCP/UDP and name lookups.
    pub network: bool,
    /// `host:port` pairs the plugin may send HTTP requests to (`wasi:http`). Operator side only:
    /// a manifest asks with `network = true`, since only the operator knows where its endpoints
    /// are. Independent of `network`, so HTTP to one endpoint can be granted without sockets.
    pub hosts: Vec<String>,
}

impl WasmGrants {
    /// What a plugin gets: asked for by its manifest and granted by the operator.
    pub fn intersect(asked: &WasmGrants, granted: &WasmGrants) -> WasmGrants {
        WasmGrants {
            dirs: asked
                .dirs
                .keys()
                .filter_map(|guest| {
                    granted
                        .dirs
                        .get(guest)
                        .map(|host| (guest.clone(), host.clone()))
                })
                .collect(),
            writable: asked.writable && granted.writable,
            env: asked
                .env
                .iter()
                .filter(|v| granted.env.contains(v))
                .cloned()
                .collect(),
            network: asked.network && granted.network,
            hosts: if asked.network {
                granted.hosts.clone()
            } else {
                Vec::new()
            },
        }
    }
}
