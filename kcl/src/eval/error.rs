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
    /// Further errors the same check found, printed after this one: upstream's resolver
    /// reports every error of a package, not the first alone (boxed: every evaluation
    /// result carries the error's size).
    pub also: Option<Box<Vec<EvalError>>>,
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
            also: None,
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
            also: None,
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
    /// Upstream's hint under an error about changing the immutable variable `name`.
    pub(crate) fn with_mutable_hint(mut self, name: impl std::fmt::Display) -> Self {
        self.footer.push(format!(
            "change the variable name to '_{name}' to make it mutable"
        ));
        self
    }
}

/// How a snippet points into its line.
#[derive(Clone, Copy)]
enum Mark {
    /// A caret under the span's first character.
    Caret,
    /// The line the span starts on, without a column: upstream's runtime knows only the line
    /// it is on.
    Line,
    /// The line the span ends on, without a column (a failed check: upstream has evaluated
    /// up to its message).
    EndLine,
}

fn snippet(out: &mut String, span: Span, msg: &str, mark: Mark) {
    let mut loc = match mark {
        Mark::EndLine => {
            crate::ast::source_map().loc(span.file, span.hi.saturating_sub(1).max(span.lo))
        }
        _ => span.loc(),
    };
    let line_text = crate::ast::source_map()
        .get(span.file)
        .map(|f| f.line_text(loc.line.saturating_sub(1) as usize).to_string())
        .unwrap_or_default();
    let num = loc.line.to_string();
    let pad = " ".repeat(num.len());
    if !matches!(mark, Mark::Caret) {
        loc.col = 1;
    }
    out.push_str(&format!("{pad}--> {}\n", loc));
    out.push_str(&format!("{pad} |\n"));
    out.push_str(&format!("{num} | {line_text}\n"));
    match mark {
        Mark::Caret => {
            let caret_pad = crate::diag::caret_lead(&line_text, loc.col);
            out.push_str(&format!("{pad} | {caret_pad}^ {msg}\n"));
        }
        // upstream's layout of a label without a column: the message one space in
        _ if msg.is_empty() => out.push_str(&format!("{pad} | \n")),
        _ => out.push_str(&format!("{pad} |  {msg}\n")),
    }
    out.push_str(&format!("{pad} |\n"));
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.plain {
            return writeln!(f, "{}", self.msg);
        }
        let (code, title) = self.kind.code_title();
        let mut out = format!("error[{code}]: {title}\n");
        // upstream's runtime errors point at lines, not columns; but for a failed check the
        // instance it failed on has its column
        let (primary, note) = match self.kind {
            ErrKind::Evaluation | ErrKind::Assertion | ErrKind::RecursionLimit => {
                (Mark::Line, Mark::Line)
            }
            ErrKind::Schema if self.notes.is_empty() => (Mark::EndLine, Mark::EndLine),
            ErrKind::Schema => (Mark::Caret, Mark::EndLine),
            _ => (Mark::Caret, Mark::Caret),
        };
        match self.span {
            Some(sp) if sp.loc().line > 0 => snippet(&mut out, sp, &self.msg, primary),
            _ => out.push_str(&format!("{}\n", self.msg)),
        }
        for (sp, m) in &self.notes {
            // a note on a statement without source (added by `-O`) is its message alone
            if sp.loc().line > 0 {
                snippet(&mut out, *sp, m, note);
            } else {
                out.push_str(&format!("{m}\n"));
            }
        }
        for n in &self.footer {
            out.push_str(&format!("note: {n}\n"));
        }
        for e in self.also.iter().flat_map(|v| v.iter()) {
            out.push_str(&e.to_string());
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
