//! Evaluation errors with source positions, printed rustc-style like upstream.

use std::fmt;

use crate::ast::Span;
use crate::value::{ErrKind, RtError};

/// An error with the place it happened and optional extra notes (`variable is defined here`).
#[derive(Debug, Clone)]
pub struct EvalError {
    pub kind: ErrKind,
    pub msg: String,
    pub span: Option<Span>,
    pub notes: Vec<(Span, String)>,
    /// `note: ...` lines after the snippets.
    pub footer: Vec<String>,
    /// Set for plain-text errors that upstream prints without a code (e.g. CLI argument errors).
    pub plain: bool,
}

impl EvalError {
    pub fn new(kind: ErrKind, msg: impl Into<String>, span: Option<Span>) -> Self {
        EvalError {
            kind,
            msg: msg.into(),
            span,
            notes: Vec::new(),
            footer: Vec::new(),
            plain: false,
        }
    }
    pub fn plain(msg: impl Into<String>) -> Self {
        EvalError {
            kind: ErrKind::Evaluation,
            msg: msg.into(),
            span: None,
            notes: Vec::new(),
            footer: Vec::new(),
            plain: true,
        }
    }
    pub fn from_rt(e: RtError, span: Span) -> Self {
        EvalError::new(e.kind, e.msg, Some(span))
    }
    /// Attach `span` to an error raised without one.
    pub fn or_span(mut self, span: Span) -> Self {
        self.span.get_or_insert(span);
        self
    }
    pub fn with_note(mut self, span: Span, msg: impl Into<String>) -> Self {
        self.notes.push((span, msg.into()));
        self
    }
}

fn snippet(out: &mut String, span: Span, msg: &str) {
    let loc = span.loc();
    let line_text = crate::ast::source_map()
        .get(span.file)
        .map(|f| f.line_text(loc.line.saturating_sub(1) as usize).to_string())
        .unwrap_or_default();
    let num = loc.line.to_string();
    let pad = " ".repeat(num.len());
    out.push_str(&format!("{pad}--> {}\n", loc));
    out.push_str(&format!("{pad} |\n"));
    out.push_str(&format!("{num} | {line_text}\n"));
    let caret_pad = " ".repeat(loc.col.saturating_sub(1) as usize);
    out.push_str(&format!("{pad} | {caret_pad}^ {msg}\n"));
    out.push_str(&format!("{pad} |\n"));
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.plain {
            return writeln!(f, "{}", self.msg);
        }
        let (code, title) = self.kind.code_title();
        let mut out = format!("error[{code}]: {title}\n");
        match self.span {
            Some(sp) if sp.loc().line > 0 => snippet(&mut out, sp, &self.msg),
            _ => out.push_str(&format!("{}\n", self.msg)),
        }
        for (sp, m) in &self.notes {
            // a note on a statement without source (added by `-O`) is its message alone
            if sp.loc().line > 0 {
                snippet(&mut out, *sp, m);
            } else {
                out.push_str(&format!("{m}\n"));
            }
        }
        for n in &self.footer {
            out.push_str(&format!("note: {n}\n"));
        }
        f.write_str(&out)
    }
}

impl std::error::Error for EvalError {}

pub type EvalResult<T> = Result<T, EvalError>;

/// A runtime error without a position yet (the caller adds one with [`EvalError::or_span`]).
impl From<RtError> for EvalError {
    fn from(e: RtError) -> Self {
        EvalError::new(e.kind, e.msg, None)
    }
}
