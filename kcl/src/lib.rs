//! `kusion-kcl`: the KCL configuration language.
//!
//! Front end (this module tree): [`lexer`], [`parser`], [`ast`], [`diag`] and [`fmt`].
//! Entry points: [`parse_file`] / [`parse_source`] give a [`ast::Module`] or
//! [`diag::Diagnostics`] (several errors per file, rendered like upstream KCL).

pub mod ast;
pub mod cli;
pub mod diag;
pub mod fmt;
pub mod lexer;
pub mod parser;

pub use ast::{FileId, Module, SourceMap, Span, Symbol, source_map};
pub use diag::{Diagnostic, Diagnostics, ErrorKind};
pub use fmt::{format_module, format_source};
pub use parser::{parse_file, parse_registered, parse_source, parse_with_errors};
