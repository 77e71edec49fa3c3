//! KCL schemas from OpenAPI: the Kubernetes OpenAPI v2 (swagger) document and
//! CustomResourceDefinition YAML (`kcl import --openapi FILE --crd FILE -o DIR`).
//!
//! The output is a KCL package: one file per definition under folders named after its API
//! group and version (`api/apps/v1/deployment.k`), docstrings from the descriptions, optional
//! attributes for fields the source does not require, fixed `apiVersion`/`kind` for top-level
//! kinds, and `import`s between groups. Every file is passed through the formatter, and the
//! output depends only on the inputs (sorted everywhere), so regenerating is a no-op.

mod crd;
mod emit;
mod model;
mod swagger;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use emit::{snake, str_lit};
pub use model::{Attr, Check, SchemaDef, Ty};

/// An importer failure, naming the file and the place in the document.
#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Parse { path: PathBuf, msg: String },
    #[error("{at}: {msg}")]
    Schema { at: String, msg: String },
    #[error("generated {file} does not parse (importer bug): {msg}")]
    Generated { file: String, msg: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What to generate.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Package name written to `kcl.mod` (default `k8s`).
    pub package_name: Option<String>,
    /// Package version written to `kcl.mod` (default `0.1.0`).
    pub version: Option<String>,
    /// Only these swagger packages (`api.apps.v1` or `api/apps/v1`) and the packages they
    /// refer to, transitively; empty means all.
    pub include: Vec<String>,
}

/// A parsed source document.
#[derive(Debug, Clone)]
pub enum Source {
    /// A swagger document and its file name (for headers).
    OpenApi(String, serde_json::Value),
    /// The documents of one CRD YAML file and its file name.
    Crd(String, Vec<serde_json::Value>),
}

/// Reads a swagger JSON (or YAML) file.
pub fn read_openapi(path: &Path) -> Result<Source, OpenApiError> {
    let text = read(path)?;
    let doc: serde_json::Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(&text).map_err(|e| OpenApiError::Parse {
            path: path.to_path_buf(),
            msg: format!("line {} column {}: {e}", e.line(), e.column()),
        })?
    } else {
        serde_yaml_ng::from_str(&text).map_err(|e| OpenApiError::Parse {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?
    };
    Ok(Source::OpenApi(file_name(path), doc))
}

/// Reads a CRD YAML file (one or more documents).
pub fn read_crd(path: &Path) -> Result<Source, OpenApiError> {
    let text = read(path)?;
    let mut docs = Vec::new();
    for d in serde_yaml_ng::Deserializer::from_str(&text) {
        let v = <serde_json::Value as serde::Deserialize>::deserialize(d).map_err(|e| {
            OpenApiError::Parse {
                path: path.to_path_buf(),
                msg: e.to_string(),
            }
        })?;
        docs.push(v);
    }
    Ok(Source::Crd(file_name(path), docs))
}

fn read(path: &Path) -> Result<String, OpenApiError> {
    std::fs::read_to_string(path).map_err(|source| OpenApiError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Generates the package: relative file path -> contents (including `kcl.mod`).
pub fn generate(
    sources: &[Source],
    opts: &ImportOptions,
) -> Result<BTreeMap<String, String>, OpenApiError> {
    let mut defs: Vec<(String, SchemaDef)> = Vec::new();
    let mut object_meta = Ty::Dict(Box::new(Ty::Any));
    for src in sources {
        if let Source::OpenApi(name, doc) = src {
            let mut all = swagger::schemas(doc)?;
            if doc
                .pointer(&format!("/definitions/{OBJECT_META}"))
                .is_some()
            {
                let (pkg, name) = swagger::package_of(OBJECT_META);
                object_meta = Ty::Ref { pkg, name };
            }
            if !opts.include.is_empty() {
                all = closure(all, &opts.include);
            }
            defs.extend(all.into_iter().map(|d| (name.clone(), d)));
        }
    }
    for src in sources {
        if let Source::Crd(name, docs) = src {
            let named: Vec<(String, serde_json::Value)> =
                docs.iter().map(|d| (name.clone(), d.clone())).collect();
            let all = crd::schemas(&named, &object_meta)?;
            defs.extend(all.into_iter().map(|d| (name.clone(), d)));
        }
    }
    let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, d) in &defs {
        names
            .entry(d.pkg.clone())
            .or_default()
            .insert(d.name.clone());
    }
    let mut files = BTreeMap::new();
    for (origin, d) in &defs {
        let path = emit::file_path(d);
        let raw = emit::render(d, &names[&d.pkg], origin);
        let text = crate::fmt::format_source(&path, &raw).map_err(|e| OpenApiError::Generated {
            file: path.clone(),
            msg: e.to_string(),
        })?;
        if files.insert(path.clone(), text).is_some() {
            return Err(OpenApiError::Schema {
                at: d.source.clone(),
                msg: format!("two definitions map to the same file {path}"),
            });
        }
    }
    files.insert(
        "kcl.mod".into(),
        format!(
            "[package]\nname = \"{}\"\nedition = \"*\"\nversion = \"{}\"\n",
            opts.package_name.as_deref().unwrap_or("k8s"),
            opts.version.as_deref().unwrap_or("0.1.0"),
        ),
    );
    Ok(files)
}

/// The definitions of the `include`d packages and of every package they refer to.
fn closure(all: Vec<SchemaDef>, include: &[String]) -> Vec<SchemaDef> {
    let mut by_pkg: BTreeMap<String, Vec<SchemaDef>> = BTreeMap::new();
    for d in all {
        by_pkg.entry(d.pkg.clone()).or_default().push(d);
    }
    let mut want: Vec<String> = include
        .iter()
        .map(|p| p.trim_matches('/').replace('/', "."))
        .collect();
    let mut keep: BTreeSet<String> = BTreeSet::new();
    while let Some(p) = want.pop() {
        if !keep.insert(p.clone()) {
            continue;
        }
        let mut refs = BTreeSet::new();
        for d in by_pkg.get(&p).into_iter().flatten() {
            for a in &d.attrs {
                a.ty.packages(&mut refs);
            }
        }
        want.extend(refs.into_iter().filter(|r| !keep.contains(r)));
    }
    by_pkg
        .into_iter()
        .filter(|(p, _)| keep.contains(p))
        .flat_map(|(_, v)| v)
        .collect()
}

/// Writes the generated files under `dir` (creating folders); returns how many were written.
pub fn write_package(dir: &Path, files: &BTreeMap<String, String>) -> Result<usize, OpenApiError> {
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| OpenApiError::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| OpenApiError::Write { path, source })?;
    }
    Ok(files.len())
}
