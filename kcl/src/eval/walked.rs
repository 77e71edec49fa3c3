//! Where upstream's runtime reports an error: it knows only the node it walked last
//! (`panic_info`), not the node that failed. The evaluator keeps that node
//! ([`Evaluator::last_pos`]) and these turn it into the positions upstream prints.

use super::*;

impl Evaluator {
    /// Where upstream's runtime stands when the program has run: the node it walked last,
    /// inside the body of the schema the last statement instantiated when nothing was walked
    /// after it (`None` before any).
    pub fn program_end_pos(&self) -> Option<Span> {
        let last = self.last_pos.get();
        match self.body_walked.get() {
            Some((inner, restored))
                if restored.map(|p| p as *const Span) == last.map(|p| p as *const Span) =>
            {
                Some(*inner)
            }
            _ => last.copied(),
        }
    }

    /// Where upstream's runtime reports an error raised after the fact: the start of the
    /// node it walked last (`fallback` before any).
    pub(crate) fn walked_point(&self, fallback: Span) -> Span {
        self.last_pos
            .get()
            .map_or(fallback, |p| self.walked_point_of(p))
    }

    /// The start of node `p`, as a one-character span.
    pub(crate) fn walked_point_of(&self, p: &Span) -> Span {
        Span {
            file: p.file,
            lo: p.lo,
            hi: p.lo + 1,
        }
    }

    /// The start of the line upstream's runtime walked last: where an instance made by a
    /// type conversion (a dict in a schema-typed slot) stands, as upstream builds its config
    /// position from the runtime's line alone.
    pub(crate) fn walked_line_start(&self, fallback: Span) -> Span {
        line_start(self.walked_point(fallback))
    }

    /// Upstream's runtime knows only the line it walked last: an evaluation error of a node
    /// over several lines is on the line of the last part it evaluated (`[1,\n 2][5]` fails
    /// on the index's line). Nothing is evaluated while an error propagates, so where the
    /// evaluator last stood is where it was raised.
    #[cold]
    pub(super) fn at_walked_line(&self, mut err: EvalError) -> EvalError {
        if err.kind == ErrKind::Evaluation
            && err.notes.is_empty()
            && let Some(node) = err.span
            && let Some(p) = self.last_pos.get()
            && p.file == node.file
            && p.lo > node.lo
            && p.lo < node.hi
        {
            err.span = Some(self.walked_point(node));
        }
        err
    }
}

/// The first character of the line `p` starts on: where upstream's runtime, which knows a
/// line alone, reports an error.
pub(crate) fn line_start(p: Span) -> Span {
    let Some(f) = crate::ast::source_map().get(p.file) else {
        return p;
    };
    let lo = f.line_starts()[f.line_index(p.lo)];
    Span {
        file: p.file,
        lo,
        hi: lo + 1,
    }
}
