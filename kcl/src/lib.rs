//! `kusion-kcl`: the KCL configuration language.
//!
//! # Public face
//!
//! What other crates and tools use; everything else (lexer, parser internals, evaluator,
//! builtins, type checker, output printers, runtime values' internals) is `pub(crate)`.
//!
//! - **Parse**: [`parse_file`], [`parse_source`], [`parse_registered`], [`parse_with_errors`]
//!   give an [`ast::Module`] or [`diag::Diagnostics`] (several errors per file, rendered like
//!   upstream KCL). [`ast`] and [`diag`] are public because they are what parsing returns.
//! - **Load a package**: [`load_program`] with [`LoadOptions`] gives a [`Program`] (the main
//!   package and its imports); [`find_mod_root`] finds the folder of `kcl.mod`.
//! - **Check**: [`check`] runs the static checker over a loaded [`Program`].
//! - **Evaluate**: [`run`], [`run_full`], [`run_parts`] with [`RunOptions`] (and [`Allow`],
//!   [`Limits`], [`ParseCache`], [`PluginHook`]) give the output [`Value`] and the text `kcl run`
//!   prints, or a [`KclError`].
//! - **Rules for a host**: [`RuleProgram`] loads and checks files, lists the rules declared, and
//!   [`RuleSession`] evaluates the top level with options and instantiates a rule with values
//!   bound, giving [`Verdict::Pass`] or the failed check's message and location.
//! - **Format**: [`format_source`], [`format_module`].
//! - **Query/override**: [`override_file`] (`kcl run -O`, `kusionctl` stack overrides).
//! - **Values**: [`Value`], JSON conversions [`from_json`] / [`to_json`] and a few helpers
//!   ([`Value::get`], [`Value::dict`], [`Value::list`]); [`is_keyword`].
//! - **Tools**: [`cli`] (the `kcl` command line, also embedded by `kusionctl kcl`), [`pkg`] (the
//!   package manager: dependency resolution, OCI registry client, lock files), [`openapi`]
//!   (`kcl import` of OpenAPI/CRD documents), [`kclgen`] (KCL schemas from data and Terraform
//!   provider schemas) and, with the `lsp` feature, [`lsp`] (the language server).
//!
//! A few items are public only for this crate's integration tests, benches and fuzz targets;
//! they are `#[doc(hidden)]` and listed in the crate's README ("Public face").

pub(crate) mod access;
pub(crate) mod api;
pub mod ast;
pub(crate) mod builtins;
pub mod cli;
pub mod diag;
pub(crate) mod eval;
pub(crate) mod fmt;
pub mod kclgen;
pub(crate) mod lexer;
pub(crate) mod limits;
#[cfg(feature = "lsp")]
pub mod lsp;
pub mod openapi;
pub(crate) mod output;
pub(crate) mod overrides;
pub(crate) mod parser;
pub mod pkg;
pub(crate) mod run;
pub(crate) mod types;
pub(crate) mod value;

pub use ast::{FileId, Module, SourceMap, Span, Symbol, source_map};
pub use diag::{Diagnostic, Diagnostics, ErrorKind};
pub use fmt::{format_module, format_source};
pub use parser::{parse_file, parse_registered, parse_source, parse_with_errors};

pub use parser::loader::{ImportTarget, LoadOptions, Program, find_mod_root, load_program};

pub use api::{
    Binding, CheckFailure, Declared, RuleProgram, RuleSession, RuleType, Verdict, check, is_keyword,
};
pub use eval::{EvalError, PluginHook};
pub use limits::Limits;
pub use overrides::override_file;
pub use run::{
    Allow, KclError, ParseCache, Rendering, RunOptions, RunOutput, run, run_full, run_parts,
};
pub use value::json::{from_json, to_json};
pub use value::{ErrKind, Value};

// For this crate's integration tests, benches and fuzz targets only (see the README).
#[doc(hidden)]
pub use fmt::ast_fingerprint;
#[doc(hidden)]
pub use lexer::lex;
#[doc(hidden)]
pub use parser::generate::generate_config;
#[doc(hidden)]
pub use parser::parse_unregistered;

/// The `[profile] entries` of the `kcl.mod` in `dir` (what `kcl run` with no files runs).
pub fn cli_profile_entries(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>, KclError> {
    let m = parser::loader::read_mod_file(dir)
        .map_err(KclError::Other)?
        .ok_or_else(|| KclError::Other("No input KCL files or paths".into()))?;
    let files: Vec<std::path::PathBuf> = m
        .entries
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| {
            let p = std::path::PathBuf::from(s.replace("${KCL_MOD}", &dir.display().to_string()));
            // `${pkg:KCL_MOD}/...` is an external package's root, expanded later
            if p.is_absolute() || p.to_string_lossy().contains("KCL_MOD}") {
                p
            } else {
                dir.join(p)
            }
        })
        .collect();
    if files.is_empty() {
        return Err(KclError::Other("No input KCL files or paths".into()));
    }
    Ok(files)
}
