//! Compiles the project's own protocol definitions with `protox` (pure Rust, no protoc binary).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/tfplugin5.proto",
        "proto/tfplugin6.proto",
        "proto/plugin.proto",
        "proto/health.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        // Servers are generated for the protocol-6 test fixture provider.
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
