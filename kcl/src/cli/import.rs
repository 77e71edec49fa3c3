//! `kcl import`: generate KCL schemas from OpenAPI (see `crate::openapi`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::openapi::{ImportOptions, generate, read_crd, read_openapi, write_package};

/// Arguments of `kcl import`.
#[derive(Args, Debug, Default)]
pub struct ImportArgs {
    /// Kubernetes OpenAPI v2 (swagger) document.
    #[arg(long = "openapi")]
    pub openapi: Option<PathBuf>,
    /// CustomResourceDefinition YAML files (repeatable).
    #[arg(long = "crd")]
    pub crd: Vec<PathBuf>,
    /// Output folder (the generated package's root).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Package name for the generated kcl.mod.
    #[arg(long = "name", default_value = "k8s")]
    pub name: String,
    /// Package version for the generated kcl.mod.
    #[arg(long = "version", default_value = "0.1.0")]
    pub version: String,
    /// Only these swagger packages (e.g. `api/apps/v1`) and what they refer to.
    #[arg(long = "include")]
    pub include: Vec<String>,
}

pub fn run(a: ImportArgs) -> anyhow::Result<ExitCode> {
    if a.openapi.is_none() && a.crd.is_empty() {
        anyhow::bail!("nothing to import: give --openapi FILE and/or --crd FILE");
    }
    let mut sources = Vec::new();
    if let Some(p) = &a.openapi {
        sources.push(read_openapi(p)?);
    }
    for p in &a.crd {
        sources.push(read_crd(p)?);
    }
    let opts = ImportOptions {
        package_name: Some(a.name),
        version: Some(a.version),
        include: a.include,
    };
    let files = generate(&sources, &opts)?;
    // files left from an earlier import would still be loaded with the package
    if a.output.is_dir() {
        let existing = crate::parser::loader::collect_k_files(std::slice::from_ref(&a.output))
            .unwrap_or_default();
        let stale: Vec<_> = existing
            .iter()
            .filter_map(|p| p.strip_prefix(&a.output).ok())
            .filter(|rel| !files.contains_key(&rel.to_string_lossy().replace('\\', "/")))
            .collect();
        if !stale.is_empty() {
            eprintln!(
                "warning: {} .k file(s) in {} are not part of this import (e.g. {}); remove them if they are stale",
                stale.len(),
                a.output.display(),
                stale[0].display()
            );
        }
    }
    let n = write_package(&a.output, &files)
        .with_context(|| format!("writing {}", a.output.display()))?;
    eprintln!("wrote {n} files to {}", a.output.display());
    Ok(ExitCode::SUCCESS)
}
