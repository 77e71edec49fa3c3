//! `kusion-runtime-terraform`: the `Terraform` runtime plugin.
//!
//! Instead of running the `terraform` CLI, it starts provider binaries itself (go-plugin
//! handshake) and speaks the provider protocol (tfplugin5 / tfplugin6) over gRPC.
//!
//! - [`install`]: find a provider in filesystem mirrors / the plugin cache, or download it.
//! - [`plugin`]: the provider process, its connection and one client over both protocols.
//! - [`schema`]: schema conversion and the on-disk schema cache keyed by binary checksum.
//! - [`cty`]: Terraform's value model on msgpack, and the JSON <-> msgpack conversion.
//! - [`runtime`]: the kusion [`kusion_sdk::runtime::Runtime`] implementation.

pub mod cty;
pub mod install;
pub mod plugin;
pub mod runtime;
pub mod schema;

pub use runtime::{TerraformConfig, TerraformRuntime};

/// Protocol code generated from the project's own definitions in `proto/`.
pub mod proto {
    #![allow(clippy::all, clippy::pedantic)]
    pub mod tfplugin5 {
        tonic::include_proto!("tfplugin5");
    }
    pub mod tfplugin6 {
        tonic::include_proto!("tfplugin6");
    }
    pub mod plugin {
        tonic::include_proto!("plugin");
    }
    pub mod health {
        tonic::include_proto!("grpc.health.v1");
    }
}

// Loadable by kusionctl as a native plugin (see plugin.toml). Building the runtime only fails
// when no executor thread can be started; the ABI shim turns that panic into a load error.
kusion_sdk::export_runtime!(|| TerraformRuntime::new().expect("starting the Terraform runtime"));
