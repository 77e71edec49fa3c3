//! `kusion-kcl`: the KCL configuration language.
//!
//! Front end (this module tree): [`lexer`], [`parser`], [`ast`], [`diag`] and [`fmt`].
//! Entry points: [`parse_file`] / [`parse_source`] give a [`ast::Module`] or
//! [`diag::Diagnostics`] (several errors per file, rendered like upstream KCL).
//!
//! Evaluation: [`value`] (the runtime values), [`eval`] (resolver and evaluator), [`builtins`]
//! (builtin functions and system modules) and [`output`] (YAML/JSON printing).

pub mod ast;
pub mod builtins;
pub mod cli;
pub mod diag;
pub mod eval;
pub mod lexer;
pub mod output;
pub mod parser;
pub mod value;

pub use ast::{FileId, Module, SourceMap, Span, Symbol, source_map};
pub use diag::{Diagnostic, Diagnostics, ErrorKind};
pub use parser::{parse_file, parse_registered, parse_source, parse_with_errors};
