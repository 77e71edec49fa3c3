//! Diagnostics rendered in the upstream KCL (rustc-like) layout:
//!
//! ```text
//! error[E1001]: InvalidSyntax
//!  --> /abs/main.k:1:3
//!   |
//! 1 | a==
//!   |   ^ expected one of ["identifier", "literal", "(", "[", "{"] got newline
//!   |
//! ```
//!
//! Each label gets its own `-->` block; notes and suggestions follow the last block.

use crate::ast::{Span, source_map};
use std::borrow::Cow;
use std::fmt::Write as _;

/// Severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Stops compilation.
    Error,
    /// Reported, does not stop compilation.
    Warning,
}

/// The upstream error kinds: each has a code (`E1001`) and a title (`InvalidSyntax`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Syntax errors from the lexer and parser.
    InvalidSyntax,
    /// Tab/space mix-ups in indentation.
    TabError,
    /// Bad parameter lists (`non-default argument follows default argument`).
    IllegalParameterError,
    /// Assignment to an immutable variable.
    ImmutableError,
    /// Schema index signature misuse.
    IndexSignatureError,
    /// Type errors.
    TypeError,
    /// Name resolution and other compile errors.
    CompileError,
    /// Bad attribute (key type etc.).
    IllegalAttributeError,
    /// Bad schema inheritance.
    IllegalInheritError,
    /// Duplicate definitions.
    UniqueKeyError,
    /// Import that cannot be resolved.
    CannotFindModule,
    /// Runtime evaluation errors.
    EvaluationError,
}

impl ErrorKind {
    /// The code in brackets, e.g. `E1001`.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::InvalidSyntax
            | ErrorKind::TabError
            | ErrorKind::IllegalParameterError
            | ErrorKind::ImmutableError
            | ErrorKind::IndexSignatureError => "E1001",
            ErrorKind::TypeError => "E2G22",
            ErrorKind::CompileError => "E2L23",
            ErrorKind::IllegalAttributeError => "E2A31",
            ErrorKind::IllegalInheritError => "E2D34",
            ErrorKind::UniqueKeyError => "E2L28",
            ErrorKind::CannotFindModule => "E2F04",
            ErrorKind::EvaluationError => "E3M38",
        }
    }
    /// The title after the code, e.g. `InvalidSyntax`.
    pub fn title(self) -> &'static str {
        match self {
            ErrorKind::InvalidSyntax => "InvalidSyntax",
            ErrorKind::TabError => "TabError",
            ErrorKind::IllegalParameterError => "IllegalParameterError",
            ErrorKind::ImmutableError => "ImmutableError",
            ErrorKind::IndexSignatureError => "IndexSignatureError",
            ErrorKind::TypeError => "TypeError",
            ErrorKind::CompileError => "CompileError",
            ErrorKind::IllegalAttributeError => "IllegalAttributeError",
            ErrorKind::IllegalInheritError => "IllegalInheritError",
            ErrorKind::UniqueKeyError => "UniqueKeyError",
            ErrorKind::CannotFindModule => "CannotFindModule",
            ErrorKind::EvaluationError => "EvaluationError",
        }
    }
}

/// A message attached to a source position.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    /// Where (the caret goes under `span.lo`).
    pub span: Span,
    /// Text after the caret.
    pub message: String,
}

/// One diagnostic: a header, labelled source snippets, then notes and suggestions.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// Severity.
    pub level: Level,
    /// Code such as `E1001`; `None` renders a header without brackets.
    pub code: Option<Cow<'static, str>>,
    /// Header title, e.g. `InvalidSyntax`.
    pub title: Cow<'static, str>,
    /// Source snippets, primary first.
    pub labels: Vec<Label>,
    /// `note: ...` lines.
    pub notes: Vec<String>,
    /// `suggestion: ...` lines.
    pub suggestions: Vec<String>,
}

impl Diagnostic {
    /// An error of `kind` with one label.
    pub fn error(kind: ErrorKind, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            level: Level::Error,
            code: Some(Cow::Borrowed(kind.code())),
            title: Cow::Borrowed(kind.title()),
            labels: vec![Label {
                span,
                message: message.into(),
            }],
            notes: Vec::new(),
            suggestions: Vec::new(),
        }
    }
    /// A syntax error (`error[E1001]: InvalidSyntax`).
    pub fn syntax(span: Span, message: impl Into<String>) -> Self {
        Self::error(ErrorKind::InvalidSyntax, span, message)
    }
    /// An error that has no source position (e.g. a missing file).
    pub fn plain(kind: ErrorKind, message: impl Into<String>) -> Self {
        Diagnostic {
            level: Level::Error,
            code: Some(Cow::Borrowed(kind.code())),
            title: Cow::Borrowed(kind.title()),
            labels: Vec::new(),
            notes: vec![message.into()],
            suggestions: Vec::new(),
        }
    }
    /// Adds a secondary label.
    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }
    /// Adds `suggestion:` lines.
    pub fn with_suggestions(mut self, s: impl IntoIterator<Item = String>) -> Self {
        self.suggestions.extend(s);
        self
    }
    /// Adds a `note:` line.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
    /// The primary message (first label's, else first note's, else the title).
    pub fn message(&self) -> &str {
        self.labels
            .first()
            .map(|l| l.message.as_str())
            .or(self.notes.first().map(String::as_str))
            .unwrap_or(&self.title)
    }
    /// The primary span, if any.
    pub fn span(&self) -> Option<Span> {
        self.labels.first().map(|l| l.span)
    }
    /// Renders the diagnostic in the upstream layout (ends with a newline).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let level = match self.level {
            Level::Error => "error",
            Level::Warning => "warning",
        };
        match &self.code {
            Some(c) => {
                let _ = writeln!(out, "{level}[{c}]: {}", self.title);
            }
            None => {
                let _ = writeln!(out, "{level}: {}", self.title);
            }
        }
        for label in &self.labels {
            render_label(
                &mut out,
                label,
                self.title == ErrorKind::InvalidSyntax.title(),
            );
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        for s in &self.suggestions {
            let _ = writeln!(out, "suggestion: {s}");
        }
        out
    }
}

fn render_label(out: &mut String, label: &Label, syntax: bool) {
    let Some(file) = source_map().get(label.span.file) else {
        // no source (a statement `-O` added): upstream prints the message alone
        let _ = writeln!(out, "{}", label.message);
        return;
    };
    let (line, col) = file.line_col(label.span.lo);
    let width = line.to_string().len();
    let pad = " ".repeat(width);
    let _ = writeln!(out, "{pad}--> {}:{line}:{col}", file.name);
    let _ = writeln!(out, "{pad} |");
    let text = file.line_text(line as usize - 1);
    let _ = writeln!(out, "{line} | {text}");
    // an empty span at a line's start (upstream's dedent, or the next line's token where it
    // looked past a line end) is rendered without a caret, as upstream's; so is a syntax error
    // at a line's first token, but for a line end found where something was expected
    let looked_past = ["got newline", "got eof", "'newline'", "'eof'"]
        .iter()
        .any(|end| label.message.ends_with(end));
    if col == 1 && (label.span.lo == label.span.hi || (syntax && !looked_past)) {
        let _ = writeln!(out, "{pad} |  {}", label.message);
    } else {
        let lead = caret_lead(text, col);
        let _ = writeln!(out, "{pad} | {lead}^ {}", label.message);
    }
    let _ = writeln!(out, "{pad} |");
}

/// The blanks before a caret under column `col` (1-based, in chars) of `line`: as upstream's
/// renderer, each character before it takes its display width (a CJK character two, a tab or
/// another control character none).
pub(crate) fn caret_lead(line: &str, col: u32) -> String {
    let width: usize = line
        .chars()
        .take(col.saturating_sub(1) as usize)
        .map(|c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0))
        .sum();
    " ".repeat(width)
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

/// A list of diagnostics; the error type of parsing and loading.
#[derive(Clone, Debug, Default, PartialEq, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// True when there is at least one error-level diagnostic.
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.level == Level::Error)
    }
    /// Appends one diagnostic.
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Number of diagnostics.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Iterates over the diagnostics.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }
    /// Renders every diagnostic, one after another.
    pub fn render(&self) -> String {
        self.0.iter().map(Diagnostic::render).collect()
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Diagnostics(vec![d])
    }
}

impl std::fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
