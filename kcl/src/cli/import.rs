//! `kcl import`: upstream's `kcl import [-m MODE] [-o OUTPUT] [-f] FILE...` (data and JSON
//! Schema / Terraform schemas to one KCL file each, see `crate::gen`; OpenAPI and CRDs to a
//! package, see `crate::openapi`), plus the older `--openapi FILE --crd FILE -o DIR` form.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::kclgen::DataMode;
use crate::openapi::{ImportOptions, generate, read_crd, read_openapi, write_package};

/// Arguments of `kcl import`.
#[derive(Args, Debug, Default)]
pub struct ImportArgs {
    /// Files to convert (upstream's form; their kind is given by --mode).
    pub files: Vec<PathBuf>,
    /// auto, json, yaml, toml, jsonschema, terraformschema, openapi or crd. `auto` goes by
    /// extension, and for `.json` by content (`$schema`, `"provider_schemas"`).
    #[arg(short = 'm', long = "mode", default_value = "auto")]
    pub mode: String,
    /// Kubernetes OpenAPI v2 (swagger) document (older form, with -o DIR).
    #[arg(long = "openapi")]
    pub openapi: Option<PathBuf>,
    /// CustomResourceDefinition YAML files (older form, repeatable).
    #[arg(long = "crd")]
    pub crd: Vec<PathBuf>,
    /// The output file (`-` for standard output; default `<input name>.k`), or for openapi and
    /// crd the folder the package folder is written in (default `.`; with --openapi/--crd the
    /// package root itself).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Overwrite an existing output file.
    #[arg(short = 'f', long = "force")]
    pub force: bool,
    /// Accepted for upstream compatibility: specs are not validated before generation.
    #[arg(short = 's', long = "skip-validation")]
    pub skip_validation: bool,
    /// openapi/crd: the package folder under the output folder.
    #[arg(short = 'p', long = "package", default_value = "models")]
    pub package: String,
    /// Package name for the generated kcl.mod (default: --package, or `k8s` with --openapi).
    #[arg(long = "name")]
    pub name: Option<String>,
    /// Package version for the generated kcl.mod.
    #[arg(long = "version", default_value = "0.1.0")]
    pub version: String,
    /// Only these swagger packages (e.g. `api/apps/v1`) and what they refer to.
    #[arg(long = "include")]
    pub include: Vec<String>,
}

pub fn run(a: ImportArgs) -> anyhow::Result<ExitCode> {
    if a.openapi.is_some() || !a.crd.is_empty() {
        let Some(out) = a.output.clone() else {
            anyhow::bail!("--openapi/--crd need -o DIR (or use `kcl import -m openapi FILE`)");
        };
        if !a.files.is_empty() {
            anyhow::bail!("give the files either after -m MODE or with --openapi/--crd, not both");
        }
        let name = a.name.clone().unwrap_or_else(|| "k8s".into());
        return package(
            a.openapi.iter().cloned().collect(),
            a.crd.clone(),
            &out,
            name,
            &a,
        );
    }
    if a.files.is_empty() {
        anyhow::bail!(
            "nothing to import: give FILE... (with -m MODE), or --openapi FILE / --crd FILE"
        );
    }
    let mode = a.mode.to_ascii_lowercase();
    match mode.as_str() {
        "openapi" | "crd" => {
            let dir = a.output.clone().unwrap_or_else(|| PathBuf::from("."));
            let out = dir.join(&a.package);
            let name = a.name.clone().unwrap_or_else(|| a.package.clone());
            let (o, c) = if mode == "openapi" {
                (a.files.clone(), Vec::new())
            } else {
                (Vec::new(), a.files.clone())
            };
            return package(o, c, &out, name, &a);
        }
        "gostruct" | "proto" => {
            anyhow::bail!("import mode {mode} is not supported by this implementation");
        }
        _ => {}
    }
    let fixed = match mode.as_str() {
        "auto" => None,
        "json" => Some(DataMode::Json),
        "yaml" => Some(DataMode::Yaml),
        "toml" => Some(DataMode::Toml),
        "jsonschema" => Some(DataMode::JsonSchema),
        "terraformschema" => Some(DataMode::TerraformSchema),
        _ => anyhow::bail!(
            "invalid mode: {} (auto, json, yaml, toml, jsonschema, terraformschema, openapi, crd)",
            a.mode
        ),
    };
    for file in &a.files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let Some(m) = fixed.or_else(|| crate::kclgen::detect(file, &text)) else {
            anyhow::bail!(
                "failed to detect the import mode of {}: give -m MODE",
                file.display()
            );
        };
        let code = crate::kclgen::convert(m, &file.display().to_string(), &text)?;
        write_output(file, a.output.as_deref(), a.force, &code)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Upstream's output rule: `-o -` prints, `-o FILE` writes there, else `<stem>.k` in the
/// current folder; an existing file is kept unless --force.
fn write_output(
    input: &Path,
    output: Option<&Path>,
    force: bool,
    code: &str,
) -> anyhow::Result<()> {
    if output == Some(Path::new("-")) {
        std::io::stdout().write_all(code.as_bytes())?;
        return Ok(());
    }
    let target = match output {
        Some(o) => o.to_path_buf(),
        None => {
            let stem = input
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "out".into());
            PathBuf::from(format!("{stem}.k"))
        }
    };
    if target.exists() && !force {
        anyhow::bail!(
            "output file already exist, use --force to overwrite: {}",
            target.display()
        );
    }
    std::fs::write(&target, code)
        .with_context(|| format!("failed to create output file: {}", target.display()))?;
    eprintln!("wrote {}", target.display());
    Ok(())
}

fn package(
    openapi: Vec<PathBuf>,
    crds: Vec<PathBuf>,
    out: &Path,
    name: String,
    a: &ImportArgs,
) -> anyhow::Result<ExitCode> {
    let mut sources = Vec::new();
    for p in &openapi {
        sources.push(read_openapi(p)?);
    }
    for p in &crds {
        sources.push(read_crd(p)?);
    }
    let opts = ImportOptions {
        package_name: Some(name),
        version: Some(a.version.clone()),
        include: a.include.clone(),
    };
    let files = generate(&sources, &opts)?;
    // files left from an earlier import would still be loaded with the package
    if out.is_dir() {
        let existing =
            crate::parser::loader::collect_k_files(&[out.to_path_buf()]).unwrap_or_default();
        let stale: Vec<_> = existing
            .iter()
            .filter_map(|p| p.strip_prefix(out).ok())
            .filter(|rel| !files.contains_key(&rel.to_string_lossy().replace('\\', "/")))
            .collect();
        if !stale.is_empty() {
            eprintln!(
                "warning: {} .k file(s) in {} are not part of this import (e.g. {}); remove them if they are stale",
                stale.len(),
                out.display(),
                stale[0].display()
            );
        }
    }
    let n = write_package(out, &files).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("wrote {n} files to {}", out.display());
    Ok(ExitCode::SUCCESS)
}
