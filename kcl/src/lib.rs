//! The KCL configuration language: values, evaluator, builtins and output printers.

pub mod output;
pub mod value;
