//! `tf-provider-schema PROVIDER_BINARY [ADDRESS]`: starts a Terraform provider, asks it for its
//! schema (GetSchema / GetProviderSchema) and prints it as `terraform providers schema -json`
//! does, so `kcl import -m terraformschema` works from a provider binary alone, without the
//! terraform CLI or a working directory:
//!
//! `tf-provider-schema terraform-provider-aws_v5.100.0_x5 > aws.json && kcl import -m terraformschema aws.json`
//!
//! ADDRESS (default: the binary's type name, `aws`) is the key under `provider_schemas`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use kusion_runtime_terraform::plugin::Provider;

/// `terraform-provider-aws_v5.100.0_x5` -> `aws`.
fn type_name(binary: &std::path::Path) -> String {
    let file = binary
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rest = file.strip_prefix("terraform-provider-").unwrap_or(&file);
    rest.split('_').next().unwrap_or(rest).to_string()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let Some(binary) = args.next().map(PathBuf::from) else {
        eprintln!("usage: tf-provider-schema PROVIDER_BINARY [ADDRESS]");
        std::process::exit(2);
    };
    let address = args
        .next()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_else(|| type_name(&binary));
    // the provider's own log lines go to a file: stdout carries the JSON
    let log = std::env::temp_dir().join(format!("tf-provider-schema-{}.log", std::process::id()));
    let provider = Provider::start(&binary, Some(&log))
        .await
        .with_context(|| format!("starting {}", binary.display()))?;
    let result = provider.get_schema().await;
    provider.shutdown(Duration::from_secs(5)).await;
    let _ = std::fs::remove_file(&log);
    let (schema, diagnostics) = result.context("GetSchema")?;
    for d in &diagnostics {
        eprintln!("{d:?}");
    }
    let json = schema.to_terraform_json(&address);
    println!("{}", serde_json::to_string(&json)?);
    Ok(())
}
