//! `kusionctl plugin`: signing keys, signing a plugin manifest, and the list of plugins with
//! their trust and health.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, anyhow};

use crate::args::Output;
use crate::context::CommandContext;
use crate::exit;
use kusion_kernel::plugin::Status;

pub(crate) fn keygen(key_file: &Path) -> Result<u8> {
    use std::os::unix::fs::OpenOptionsExt;
    let pkcs8 = kusion_kernel::plugin::trust::generate_key().map_err(|e| anyhow!(e))?;
    let public = kusion_kernel::plugin::trust::public_key(&pkcs8).map_err(|e| anyhow!(e))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(key_file)
        .with_context(|| format!("{}", key_file.display()))?;
    f.write_all(&pkcs8)?;
    println!("{public}");
    eprintln!(
        "Private key written to {}; give operators the public key above for [plugins.trusted_keys].",
        key_file.display()
    );
    Ok(exit::OK)
}

pub(crate) fn sign(manifest_path: &Path, key: &Path, publisher: &str) -> Result<u8> {
    use kusion_kernel::plugin::{Manifest, manifest::sha256_file, trust};
    let pkcs8 = std::fs::read(key).with_context(|| format!("{}", key.display()))?;
    let mut manifest = Manifest::load(manifest_path)?;
    let file = manifest.file_path(manifest_path)?;
    let sum = sha256_file(&file)?;
    manifest.sha256 = Some(sum.clone());
    manifest.publisher = Some(publisher.to_string());
    manifest.signature = Some(trust::sign(&pkcs8, &manifest, &sum).map_err(|e| anyhow!(e))?);
    std::fs::write(manifest_path, toml::to_string(&manifest)?)
        .with_context(|| format!("{}", manifest_path.display()))?;
    println!(
        "Signed {} {} ({}) as {publisher}.",
        manifest.name,
        manifest.version,
        file.display()
    );
    Ok(exit::OK)
}

pub(crate) fn list(ctx: &CommandContext) -> Result<u8> {
    let entries = &ctx.plugins.entries;
    if ctx.output == Output::Json {
        println!("{}", serde_json::to_value(entries)?);
        return Ok(exit::OK);
    }
    if entries.is_empty() {
        println!(
            "No plugins found (searched --set plugins.path, $KUSION_PLUGIN_PATH, ~/.kusion/plugins and <kusionctl's folder>/../lib/kusion/plugins)."
        );
        return Ok(exit::OK);
    }
    let mut table = crate::render::plain_table(vec![
        "Name",
        "Kind",
        "Format",
        "Version",
        "ABI",
        "Capabilities",
        "Status",
    ]);
    for e in entries {
        let status = match &e.status {
            Status::Loaded => ctx
                .styles
                .green()
                .apply_to("loaded".to_string())
                .to_string(),
            Status::Disabled(why) => format!("disabled: {why}"),
            Status::Refused(why) => ctx
                .styles
                .red()
                .apply_to(format!("refused: {why}"))
                .to_string(),
        };
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        table.add_row(vec![
            e.name.clone(),
            opt(e.kind.map(|k| k.to_string())),
            opt(e.format.map(|f| format!("{f:?}").to_lowercase())),
            opt(e.version.clone()),
            opt(e.abi.map(|a| a.to_string())),
            e.capabilities.join(" "),
            status,
        ]);
    }
    println!("{table}");
    Ok(exit::OK)
}
