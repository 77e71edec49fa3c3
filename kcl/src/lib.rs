//! `kusion-kcl`: the KCL configuration language.
//!
//! Front end (this module tree): [`lexer`], [`parser`], [`ast`], [`diag`] and [`fmt`].
//! Entry points: [`parse_file`] / [`parse_source`] give a [`ast::Module`] or
//! [`diag::Diagnostics`] (several errors per file, rendered like upstream KCL).
//!
//! Evaluation: [`value`] (the runtime values), [`eval`] (resolver and evaluator), [`builtins`]
//! (builtin functions and system modules) and [`output`] (YAML/JSON printing).

pub mod access;
pub mod ast;
pub mod builtins;
pub mod cli;
pub mod diag;
pub mod eval;
pub mod fmt;
pub mod kclgen;
pub mod lexer;
pub mod limits;
#[cfg(feature = "lsp")]
pub mod lsp;
pub mod openapi;
pub mod output;
pub mod overrides;
pub mod parser;
pub mod pkg;
pub mod run;
pub mod types;
pub mod value;

pub use ast::{FileId, Module, SourceMap, Span, Symbol, source_map};
pub use diag::{Diagnostic, Diagnostics, ErrorKind};
pub use fmt::{format_module, format_source};
pub use parser::{parse_file, parse_registered, parse_source, parse_with_errors};

pub use eval::{EvalError, PluginHook};
pub use run::{KclError, Rendering, RunOptions, RunOutput, run, run_full, run_parts};

/// The `[profile] entries` of the `kcl.mod` in `dir` (what `kcl run` with no files runs).
pub fn cli_profile_entries(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>, KclError> {
    let text = std::fs::read_to_string(dir.join("kcl.mod"))
        .map_err(|_| KclError::Other("No input KCL files or paths".into()))?;
    let mut in_profile = false;
    let mut buf = String::new();
    let mut collecting = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') && !collecting {
            in_profile = t == "[profile]";
            continue;
        }
        if in_profile && (collecting || t.starts_with("entries")) {
            buf.push_str(t);
            collecting = !t.contains(']');
            if !collecting {
                break;
            }
        }
    }
    let list = buf
        .split_once('[')
        .map(|(_, r)| r.trim_end_matches(']'))
        .unwrap_or("");
    let files: Vec<std::path::PathBuf> = list
        .split(',')
        .map(|s| s.trim().trim_matches('"').trim_matches('\''))
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
