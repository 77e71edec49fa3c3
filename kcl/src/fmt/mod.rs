//! The KCL formatter (`kcl fmt`): prints a module in the canonical style — 4-space indents,
//! single spaces around binary operators, `key: value` / `key = value` config entries, one
//! statement per line, multi-line lists/configs kept multi-line (one item per line, no commas)
//! and single-line ones kept on one line, comments kept, runs of blank lines collapsed to one,
//! one blank line after the import block and around schema/rule definitions.
//!
//! Literals (strings, numbers) are printed exactly as written, so formatting never changes a
//! value; the formatter is idempotent and the AST (spans aside) is preserved, which the tests
//! and `kcl fmt --verify` check with [`ast_fingerprint`].
//!
//! Over 800 lines: it is one printer, a walk of the syntax tree whose statement and
//! expression rules share the comment and line-break bookkeeping.

use crate::ast::*;
use crate::diag::Diagnostics;
use crate::parser::parse_source;

/// Formats KCL source text. Fails with the syntax errors when the text does not parse.
pub fn format_source(name: &str, text: &str) -> Result<String, Diagnostics> {
    let m = parse_source(name, text)?;
    Ok(format_module(&m, text))
}

/// Formats a parsed module; `src` must be the text it was parsed from.
pub fn format_module(m: &Module, src: &str) -> String {
    let mut p = Printer {
        src,
        out: String::with_capacity(src.len() + src.len() / 8),
        indent: 0,
        comments: &m.comments,
        ci: 0,
        last_hi: 0,
        bound: u32::MAX,
        stmt_head: false,
    };
    p.module(m);
    p.out
}

/// A span-free rendering of a module's statements, for checking that formatting preserved
/// the tree. Two modules with the same fingerprint have the same AST up to positions.
pub fn ast_fingerprint(m: &Module) -> String {
    strip_spans(&format!("{:?}", m.body))
}

fn strip_spans(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("Span { file: ") {
        out.push_str(&rest[..i]);
        match rest[i..].find('}') {
            Some(j) => rest = &rest[i + j + 1..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

struct Printer<'a> {
    src: &'a str,
    out: String,
    indent: usize,
    comments: &'a [Comment],
    ci: usize,
    /// Source offset of the end of the last printed element (for blank-line detection).
    last_hi: u32,
    /// Start of the statement after the one being printed (bounds block-tail comments).
    bound: u32,
    /// Nothing of a block statement is written yet: a name `type` there would start a type
    /// alias, so it keeps (or gets) its `$` escape.
    stmt_head: bool,
}

impl Printer<'_> {
    fn col_of(&self, pos: u32) -> usize {
        let pos = (pos as usize).min(self.src.len());
        let start = self.src[..pos].rfind('\n').map(|i| i + 1).unwrap_or(0);
        pos - start
    }
    /// Comments after a block's last statement that are still indented like the block (and
    /// come before `bound`) stay inside the block.
    fn tail_comments(&mut self, bound: u32, body_lo: u32) {
        let min_col = self.col_of(body_lo);
        if min_col == 0 {
            return;
        }
        while self.ci < self.comments.len() {
            let c = self.comments[self.ci].span;
            if c.lo >= bound || self.col_of(c.lo) < min_col {
                break;
            }
            self.block_comments_before(c.lo + 1, true);
        }
    }
}

const IND: &str = "    ";

impl<'a> Printer<'a> {
    fn text(&self, sp: Span) -> &'a str {
        self.src.get(sp.lo as usize..sp.hi as usize).unwrap_or("")
    }
    fn w(&mut self, s: &str) {
        self.stmt_head = false;
        self.out.push_str(s);
    }
    fn pad(&mut self) {
        for _ in 0..self.indent {
            self.out.push_str(IND);
        }
    }
    /// A blank (whitespace-only) line lies strictly between `lo` and `hi` in the source.
    fn blank_between(&self, lo: u32, hi: u32) -> bool {
        if hi <= lo {
            return false;
        }
        let gap = self.src.get(lo as usize..hi as usize).unwrap_or("");
        let mut lines = gap.split('\n');
        lines.next();
        let mut mids: Vec<&str> = lines.collect();
        mids.pop();
        mids.iter().any(|l| l.trim().is_empty())
    }
    fn line_of(&self, pos: u32) -> usize {
        self.src.as_bytes()[..(pos as usize).min(self.src.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
    }

    // ------------------------------------------------------------ comments --------

    /// Own-line comments before `pos`, each on its own line at the current indent
    /// (block style: lines end with a newline).
    fn block_comments_before(&mut self, pos: u32, allow_blank: bool) {
        while self.ci < self.comments.len() && self.comments[self.ci].span.lo < pos {
            let c = self.comments[self.ci].span;
            if allow_blank
                && self.blank_between(self.last_hi, c.lo)
                && !self.out.is_empty()
                && !self.out.ends_with("\n\n")
            {
                self.out.push('\n');
            }
            self.pad();
            let t = self.text(c).trim_end().to_string();
            self.w(&t);
            self.out.push('\n');
            self.last_hi = c.hi;
            self.ci += 1;
        }
    }
    /// Comments before `pos` inside a multi-line bracket (lines start with a newline).
    fn inner_comments_before(&mut self, pos: u32) {
        while self.ci < self.comments.len() && self.comments[self.ci].span.lo < pos {
            let c = self.comments[self.ci].span;
            if self.blank_between(self.last_hi, c.lo) {
                self.out.push('\n');
            }
            self.out.push('\n');
            self.pad();
            let t = self.text(c).trim_end().to_string();
            self.w(&t);
            self.last_hi = c.hi;
            self.ci += 1;
        }
    }
    /// A comment on the same source line as `end` (and before `limit`) goes at the line end.
    fn trailing_comment(&mut self, end: u32, limit: u32) {
        if self.ci < self.comments.len() {
            let c = self.comments[self.ci].span;
            if c.lo >= end.saturating_sub(1)
                && c.lo < limit
                && self.line_of(c.lo) == self.line_of(end.saturating_sub(1))
            {
                let t = self.text(c).trim_end().to_string();
                self.w("  ");
                self.w(&t);
                self.last_hi = c.hi;
                self.ci += 1;
            }
        }
    }
    fn next_comment_lo(&self) -> u32 {
        self.comments
            .get(self.ci)
            .map(|c| c.span.lo)
            .unwrap_or(u32::MAX)
    }

    // ------------------------------------------------------------ statements ------

    fn module(&mut self, m: &Module) {
        self.block(&m.body, u32::MAX, true);
        // Comments after the last statement.
        self.block_comments_before(u32::MAX, true);
        while self.out.ends_with("\n\n") {
            self.out.pop();
        }
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
    }

    /// Prints statements at the current indent. `end` bounds trailing comments.
    fn block(&mut self, body: &[Stmt], end: u32, module_level: bool) {
        for (i, s) in body.iter().enumerate() {
            let first = i == 0;
            let prev = if first { None } else { Some(&body[i - 1]) };
            let forced = module_level
                && prev.is_some_and(|p| {
                    is_definition(p)
                        || is_definition(s)
                        || (matches!(p.kind, StmtKind::Import(_))
                            && !matches!(s.kind, StmtKind::Import(_)))
                });
            if forced && !self.out.ends_with("\n\n") && !self.out.is_empty() {
                self.out.push('\n');
            }
            let had_comments = self.next_comment_lo() < s.span.lo;
            self.block_comments_before(s.span.lo, !first || module_level);
            // A blank line between the last comment (or statement) and this statement is kept,
            // except at the very start of a nested block.
            let may_blank = !first
                || (module_level && had_comments)
                || (had_comments && !self.out.ends_with(":\n"));
            if may_blank
                && !self.out.is_empty()
                && !self.out.ends_with("\n\n")
                && self.blank_between(self.last_hi, s.span.lo)
            {
                self.out.push('\n');
            }
            let next = body.get(i + 1).map(|n| n.span.lo).unwrap_or(end);
            self.bound = next;
            self.stmt_head = true;
            self.stmt(s);
            self.trailing_comment(s.span.hi, next);
            self.out.push('\n');
            self.last_hi = self.last_hi.max(s.span.hi);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Schema(d) => return self.schema(d, s.span),
            StmtKind::Rule(r) => return self.rule(r, s.span),
            StmtKind::If(i) => return self.if_stmt(i, false),
            StmtKind::SchemaAttr(a) => {
                self.decorators(&a.decorators);
            }
            _ => {}
        }
        self.pad();
        match &s.kind {
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Unification(u) => {
                self.name(u.target);
                self.w(": ");
                self.expr(&u.value);
            }
            StmtKind::Assign(a) => {
                for (i, t) in a.targets.iter().enumerate() {
                    self.target(t);
                    if i == 0
                        && let Some(ty) = &a.ty
                    {
                        self.w(": ");
                        self.ty(ty);
                    }
                    self.w(" = ");
                }
                self.expr(&a.value);
            }
            StmtKind::AugAssign(a) => {
                self.target(&a.target);
                self.w(" ");
                self.w(a.op.as_str());
                self.w(" ");
                self.expr(&a.value);
            }
            StmtKind::Assert(a) => {
                self.w("assert ");
                self.expr(&a.test);
                if let Some(c) = &a.if_cond {
                    self.w(" if ");
                    self.expr(c);
                }
                if let Some(m) = &a.msg {
                    self.w(", ");
                    self.expr(m);
                }
            }
            StmtKind::Import(i) => {
                self.w("import ");
                self.w(&i.path);
                if let Some(a) = &i.asname {
                    self.w(" as ");
                    self.w(a.sym.as_str());
                }
            }
            StmtKind::SchemaAttr(a) => {
                if a.quoted {
                    let t = self.text(a.name.span);
                    self.w(t);
                } else {
                    self.name(a.name);
                }
                if a.optional {
                    self.w("?");
                }
                self.w(": ");
                self.ty(&a.ty);
                if let (Some(op), Some(v)) = (a.op, &a.value) {
                    match op {
                        AttrOp::Assign => self.w(" = "),
                        AttrOp::Aug(o) => {
                            self.w(" ");
                            self.w(o.as_str());
                            self.w(" ");
                        }
                    }
                    self.expr(v);
                }
            }
            StmtKind::TypeAlias(t) => {
                self.w("type ");
                self.w(t.name.sym.as_str());
                self.w(" = ");
                self.ty(&t.ty);
            }
            StmtKind::Schema(_) | StmtKind::Rule(_) | StmtKind::If(_) => {}
        }
    }

    /// Identifiers that are keywords must keep their `$` escape.
    fn name(&mut self, n: Name) {
        let s = n.sym.as_str();
        if is_reserved(s) || self.text(n.span).starts_with('$') || (self.stmt_head && s == "type") {
            self.w("$");
        }
        self.w(s);
    }

    fn target(&mut self, t: &Target) {
        self.name(t.name);
        for p in &t.path {
            match p {
                TargetPath::Attr(n) => {
                    self.w(".");
                    self.name(*n);
                }
                TargetPath::Index(e) => {
                    self.w("[");
                    self.expr(e);
                    self.w("]");
                }
            }
        }
    }

    fn if_stmt(&mut self, i: &IfStmt, is_elif: bool) {
        self.pad();
        self.w(if is_elif { "elif " } else { "if " });
        self.expr(&i.cond);
        self.w(":\n");
        let bound = self.bound;
        let else_lo = i.orelse.first().map(|o| o.span.lo).unwrap_or(bound);
        self.indent += 1;
        self.block(&i.body, else_lo, false);
        if let Some(f) = i.body.first() {
            self.tail_comments(else_lo, f.span.lo);
        }
        self.indent -= 1;
        self.bound = bound;
        if let [only] = i.orelse.as_slice()
            && let StmtKind::If(inner) = &only.kind
            && self.text(only.span).starts_with("elif")
        {
            self.block_comments_before(only.span.lo, false);
            return self.if_stmt(inner, true);
        }
        if !i.orelse.is_empty() {
            self.pad();
            self.w("else:\n");
            self.indent += 1;
            self.block(&i.orelse, bound, false);
            if let Some(f) = i.orelse.first() {
                self.tail_comments(bound, f.span.lo);
            }
            self.indent -= 1;
        }
        // The caller adds the newline after a statement; an if statement already ended one.
        if self.out.ends_with('\n') {
            self.out.pop();
        }
    }

    fn decorators(&mut self, ds: &[Decorator]) {
        for d in ds {
            self.pad();
            self.w("@");
            self.identifier(&d.name);
            if let Some(a) = &d.args {
                self.call_args(a);
            }
            self.out.push('\n');
        }
    }

    fn params(&mut self, ps: &[Param]) {
        for (i, p) in ps.iter().enumerate() {
            if i > 0 {
                self.w(", ");
            }
            self.name(p.name);
            if let Some(t) = &p.ty {
                self.w(": ");
                self.ty(t);
            }
            if let Some(d) = &p.default {
                self.w(" = ");
                self.expr(d);
            }
        }
    }

    fn schema(&mut self, s: &SchemaStmt, _span: Span) {
        let bound = self.bound;
        let keyword = match s.kind {
            SchemaKind::Schema => "schema ",
            SchemaKind::Mixin => "mixin ",
            SchemaKind::Protocol => "protocol ",
        };
        self.def_header_start(&s.decorators, keyword, s.name, s.params.as_deref());
        if let Some(p) = &s.parent {
            self.w("(");
            self.identifier(p);
            self.w(")");
        }
        self.def_header_end(s.for_host.as_ref(), s.doc.as_ref());
        if !s.mixins.is_empty() {
            let first = s.mixins[0].span.lo;
            self.block_comments_before(first, false);
            self.pad();
            self.w("mixin [");
            let multi = self.src[..first as usize]
                .rfind('[')
                .is_some_and(|b| self.src[b..first as usize].contains('\n'));
            if multi {
                self.indent += 1;
                for (i, m) in s.mixins.iter().enumerate() {
                    self.out.push('\n');
                    self.pad();
                    self.identifier(m);
                    if i + 1 < s.mixins.len() {
                        self.w(",");
                    }
                }
                self.indent -= 1;
                self.out.push('\n');
                self.pad();
            } else {
                self.comma_sep(&s.mixins, |f, m| f.identifier(m));
            }
            self.w("]\n");
            self.last_hi = s.mixins.last().map(|m| m.span.hi).unwrap_or(first);
        }
        // Body statements and the index signature, in source order.
        let mut items: Vec<(u32, Option<&Stmt>)> =
            s.body.iter().map(|st| (st.span.lo, Some(st))).collect();
        if let Some(sig) = &s.index_signature {
            items.push((sig.span.lo, None));
            items.sort_by_key(|(lo, _)| *lo);
        }
        let check_lo = s.checks.first().map(|c| c.span.lo).unwrap_or(bound);
        for (i, (lo, st)) in items.iter().enumerate() {
            let has_comments = self.next_comment_lo() < *lo;
            let blank = (i > 0 || s.doc.is_some() || !s.mixins.is_empty())
                && !has_comments
                && self.blank_between(self.last_hi, *lo);
            self.block_comments_before(*lo, true);
            if blank && !self.out.ends_with("\n\n") {
                self.out.push('\n');
            }
            self.bound = items
                .get(i + 1)
                .map(|(l, _)| *l)
                .unwrap_or(check_lo.min(bound));
            let hi = match st {
                Some(st) => {
                    self.stmt(st);
                    st.span.hi
                }
                None => {
                    let sig = s.index_signature.as_ref().expect("index signature item");
                    self.pad();
                    self.index_signature(sig);
                    sig.span.hi
                }
            };
            let next = items.get(i + 1).map(|(l, _)| *l).unwrap_or(check_lo);
            self.trailing_comment(hi, next);
            self.out.push('\n');
            self.last_hi = hi;
        }
        if !s.checks.is_empty() {
            if !self.out.ends_with(":\n") && !self.out.ends_with("\n\n") {
                self.out.push('\n');
            }
            self.block_comments_before(s.checks[0].span.lo.saturating_sub(1), false);
            self.pad();
            self.w("check:\n");
            self.indent += 1;
            self.checks(&s.checks, bound);
            self.tail_comments(bound, s.checks[0].span.lo);
            self.indent -= 1;
        }
        if let Some((lo, _)) = items.first() {
            self.tail_comments(bound, *lo);
        }
        self.indent -= 1;
        if self.out.ends_with('\n') {
            self.out.pop();
        }
    }

    fn checks(&mut self, checks: &[CheckExpr], end: u32) {
        for (i, c) in checks.iter().enumerate() {
            let blank = i > 0
                && self.next_comment_lo() >= c.span.lo
                && self.blank_between(self.last_hi, c.span.lo);
            self.block_comments_before(c.span.lo, i > 0);
            if blank && !self.out.ends_with("\n\n") {
                self.out.push('\n');
            }
            self.pad();
            self.expr(&c.test);
            if let Some(cond) = &c.if_cond {
                self.w(" if ");
                self.expr(cond);
            }
            if let Some(m) = &c.msg {
                self.w(", ");
                self.expr(m);
            }
            let next = checks.get(i + 1).map(|n| n.span.lo).unwrap_or(end);
            self.trailing_comment(c.span.hi, next);
            self.out.push('\n');
            self.last_hi = c.span.hi;
        }
    }

    fn index_signature(&mut self, sig: &IndexSignature) {
        self.w("[");
        if let Some(n) = sig.key_name {
            self.name(n);
            self.w(": ");
        }
        if sig.any_other {
            self.w("...");
        }
        self.ty(&sig.key_ty);
        self.w("]: ");
        self.ty(&sig.value_ty);
        if let Some(v) = &sig.value {
            self.w(" = ");
            self.expr(v);
        }
    }

    fn rule(&mut self, r: &RuleStmt, _span: Span) {
        let bound = self.bound;
        self.def_header_start(&r.decorators, "rule ", r.name, r.params.as_deref());
        if !r.parents.is_empty() {
            self.w("(");
            self.comma_sep(&r.parents, |f, p| f.identifier(p));
            self.w(")");
        }
        self.def_header_end(r.for_host.as_ref(), r.doc.as_ref());
        self.checks(&r.checks, bound);
        self.indent -= 1;
        if self.out.ends_with('\n') {
            self.out.pop();
        }
    }

    /// The start of a schema's or rule's header: its decorators, then `keyword name[params]`.
    fn def_header_start(
        &mut self,
        decorators: &[Decorator],
        keyword: &str,
        name: Name,
        params: Option<&[Param]>,
    ) {
        self.decorators(decorators);
        self.pad();
        self.w(keyword);
        self.w(name.sym.as_str());
        if let Some(ps) = params {
            self.w("[");
            self.params(ps);
            self.w("]");
        }
    }

    /// The end of a schema's or rule's header (`for Protocol:`) and its docstring, which open
    /// the body's indentation.
    fn def_header_end(&mut self, for_host: Option<&Identifier>, doc: Option<&StrLit>) {
        if let Some(h) = for_host {
            self.w(" for ");
            self.identifier(h);
        }
        self.w(":\n");
        self.indent += 1;
        if let Some(d) = doc {
            self.block_comments_before(d.span.lo, false);
            self.pad();
            let t = self.text(d.span);
            self.w(t);
            self.out.push('\n');
            self.last_hi = d.span.hi;
        }
    }

    /// `a, b, c` on one line, each item printed by `item`.
    fn comma_sep<T>(&mut self, items: &[T], item: impl Fn(&mut Self, &T)) {
        for (i, it) in items.iter().enumerate() {
            if i > 0 {
                self.w(", ");
            }
            item(self, it);
        }
    }

    fn identifier(&mut self, id: &Identifier) {
        for (i, n) in id.names.iter().enumerate() {
            if i > 0 {
                self.w(".");
            }
            self.name(*n);
        }
    }

    // ------------------------------------------------------------ types -----------

    fn ty(&mut self, t: &Type) {
        match &t.kind {
            TypeKind::Any => self.w("any"),
            TypeKind::Basic(b) => self.w(match b {
                BasicType::Bool => "bool",
                BasicType::Int => "int",
                BasicType::Float => "float",
                BasicType::Str => "str",
            }),
            TypeKind::Named(id) => self.identifier(id),
            TypeKind::List(e) => {
                self.w("[");
                if let Some(e) = e {
                    self.ty(e);
                }
                self.w("]");
            }
            TypeKind::Dict(k, v) => {
                self.w("{");
                if let Some(k) = k {
                    self.ty(k);
                }
                self.w(":");
                if let Some(v) = v {
                    self.ty(v);
                }
                self.w("}");
            }
            TypeKind::Union(ms) => {
                for (i, m) in ms.iter().enumerate() {
                    if i > 0 {
                        self.w(" | ");
                    }
                    self.ty(m);
                }
            }
            TypeKind::Literal(_) => {
                let s = self.text(t.span);
                self.w(s);
            }
            TypeKind::Function { params, ret } => {
                self.w("(");
                self.comma_sep(params, |f, p| f.ty(p));
                self.w(")");
                if let Some(r) = ret {
                    self.w(" -> ");
                    self.ty(r);
                }
            }
        }
    }

    // ------------------------------------------------------------ expressions -----

    /// Whether a bracketed sequence was laid out over several lines: a line break after the
    /// opening bracket or between two items.
    fn multiline(&self, open_lo: u32, items: &[Span]) -> bool {
        let Some(first) = items.first() else {
            return false;
        };
        if self
            .src
            .get(open_lo as usize..first.lo as usize)
            .is_some_and(|g| g.contains('\n'))
        {
            return true;
        }
        items.windows(2).any(|w| {
            self.src
                .get(w[0].hi as usize..w[1].lo as usize)
                .is_some_and(|g| g.contains('\n'))
        })
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Ident(s) => self.name(Name {
                sym: *s,
                span: e.span,
            }),
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::NumberUnit { .. }
            | ExprKind::Str(_)
            | ExprKind::JoinedStr(_) => {
                let t = self.text(e.span);
                self.w(t);
            }
            ExprKind::Bool(b) => self.w(if *b { "True" } else { "False" }),
            ExprKind::None => self.w("None"),
            ExprKind::Undefined => self.w("Undefined"),
            ExprKind::Unary { op, operand } => {
                self.w(match op {
                    UnaryOp::Pos => "+",
                    UnaryOp::Neg => "-",
                    UnaryOp::Invert => "~",
                    UnaryOp::Not => "not ",
                });
                self.expr(operand);
            }
            ExprKind::Binary { op, left, right } => {
                self.expr(left);
                self.w(" ");
                self.w(op.as_str());
                self.w(" ");
                self.expr(right);
            }
            ExprKind::Compare(c) => {
                self.expr(&c.left);
                for (op, r) in &c.ops {
                    self.w(" ");
                    self.w(op.as_str());
                    self.w(" ");
                    self.expr(r);
                }
            }
            ExprKind::If(x) => {
                self.expr(&x.then);
                self.w(" if ");
                self.expr(&x.cond);
                self.w(" else ");
                self.expr(&x.orelse);
            }
            ExprKind::Selector(x) => {
                self.expr(&x.value);
                self.w(if x.optional { "?." } else { "." });
                self.name(x.attr);
            }
            ExprKind::Subscript {
                value,
                index,
                optional,
            } => {
                self.expr(value);
                self.w(if *optional { "?[" } else { "[" });
                self.expr(index);
                self.w("]");
            }
            ExprKind::Slice(s) => {
                self.expr(&s.value);
                self.w(if s.optional { "?[" } else { "[" });
                if let Some(l) = &s.lower {
                    self.expr(l);
                }
                self.w(":");
                if let Some(u) = &s.upper {
                    self.expr(u);
                }
                if let Some(st) = &s.step {
                    self.w(":");
                    self.expr(st);
                }
                self.w("]");
            }
            ExprKind::Call { func, args } => {
                self.expr(func);
                self.call_args(args);
            }
            ExprKind::Paren(inner) => {
                self.w("(");
                self.expr(inner);
                self.w(")");
            }
            ExprKind::List(items) => self.list(e.span, items),
            ExprKind::ListIf(li) => self.list_if(li, false),
            ExprKind::Starred(v) => {
                self.w("*");
                self.expr(v);
            }
            ExprKind::Config(entries) => self.config(e.span, entries),
            ExprKind::ListComp(c) => {
                self.w("[");
                self.expr(&c.elt);
                self.clauses(&c.clauses);
                self.w("]");
            }
            ExprKind::DictComp(c) => {
                self.w("{");
                self.expr(&c.key);
                self.config_op(c.op);
                self.expr(&c.value);
                self.clauses(&c.clauses);
                self.w("}");
            }
            ExprKind::Quant(q) => {
                self.w(q.op.as_str());
                self.w(" ");
                self.comma_sep(&q.vars, |f, v| f.name(*v));
                self.w(" in ");
                self.expr(&q.target);
                let brace = self.src[q.target.span.hi as usize..]
                    .find('{')
                    .map(|o| q.target.span.hi as usize + o)
                    .unwrap_or(0);
                let multi = self
                    .src
                    .get(brace..q.test.span.lo as usize)
                    .is_some_and(|g| g.contains('\n'));
                if multi {
                    self.w(" {\n");
                    self.indent += 1;
                    self.pad();
                } else {
                    self.w(" {");
                }
                self.expr(&q.test);
                if let Some(c) = &q.if_cond {
                    self.w(" if ");
                    self.expr(c);
                }
                if multi {
                    self.indent -= 1;
                    self.w("\n");
                    self.pad();
                }
                self.w("}");
            }
            ExprKind::Schema(s) => {
                self.identifier(&s.name);
                if let Some(a) = &s.args {
                    self.call_args(a);
                }
                self.w(" ");
                self.expr(&s.config);
            }
            ExprKind::Lambda(l) => self.lambda(l, e.span),
            ExprKind::As { value, ty } => {
                self.expr(value);
                self.w(" as ");
                self.ty(ty);
            }
            ExprKind::Missing => {}
        }
    }

    fn call_args(&mut self, a: &CallArgs) {
        self.w("(");
        let mut first = true;
        for e in &a.args {
            if !first {
                self.w(", ");
            }
            first = false;
            self.expr(e);
        }
        for k in &a.keywords {
            if !first {
                self.w(", ");
            }
            first = false;
            self.name(k.name);
            self.w("=");
            self.expr(&k.value);
        }
        self.w(")");
    }

    fn clauses(&mut self, cs: &[CompClause]) {
        for c in cs {
            self.w(" for ");
            self.comma_sep(&c.targets, |f, t| f.identifier(t));
            self.w(" in ");
            self.expr(&c.iter);
            for f in &c.ifs {
                self.w(" if ");
                self.expr(f);
            }
        }
    }

    fn config_op(&mut self, op: ConfigOp) {
        self.w(match op {
            ConfigOp::Union => ": ",
            ConfigOp::Override => " = ",
            ConfigOp::Insert => " += ",
        });
    }

    fn list(&mut self, span: Span, items: &[Expr]) {
        let spans: Vec<Span> = items.iter().map(|i| i.span).collect();
        let multi = self.multiline(span.lo, &spans)
            || items.iter().any(|i| matches!(i.kind, ExprKind::ListIf(_)));
        if items.is_empty() {
            self.w("[]");
            return;
        }
        if !multi {
            self.w("[");
            self.comma_sep(items, |f, it| f.expr(it));
            self.w("]");
            return;
        }
        self.w("[");
        self.indent += 1;
        self.last_hi = span.lo + 1;
        for (i, it) in items.iter().enumerate() {
            self.inner_comments_before(it.span.lo);
            if i > 0 && self.blank_between(self.last_hi, it.span.lo) {
                self.out.push('\n');
            }
            self.out.push('\n');
            self.pad();
            if let ExprKind::ListIf(li) = &it.kind {
                self.list_if(li, false);
            } else {
                self.expr(it);
            }
            let next = items.get(i + 1).map(|n| n.span.lo).unwrap_or(span.hi);
            self.trailing_comment(it.span.hi, next);
            self.last_hi = self.last_hi.max(it.span.hi);
        }
        self.inner_comments_before(span.hi.saturating_sub(1));
        self.indent -= 1;
        self.out.push('\n');
        self.pad();
        self.w("]");
        self.last_hi = span.hi;
    }

    /// A list `if` branch's items, one a line, a level deeper than the `if`.
    fn list_if_items(&mut self, items: &[Expr]) {
        self.indent += 1;
        for it in items {
            self.inner_comments_before(it.span.lo);
            self.out.push('\n');
            self.pad();
            self.expr(it);
            self.last_hi = it.span.hi;
        }
        self.indent -= 1;
    }

    /// `if` item of a list; printed as a block (we are at the item's position on its line).
    fn list_if(&mut self, li: &ListIfItem, is_elif: bool) {
        self.w(if is_elif { "elif " } else { "if " });
        self.expr(&li.cond);
        self.w(":");
        self.list_if_items(&li.body);
        if let [only] = li.orelse.as_slice()
            && let ExprKind::ListIf(inner) = &only.kind
            && self.text(only.span).starts_with("elif")
        {
            self.out.push('\n');
            self.pad();
            return self.list_if(inner, true);
        }
        if !li.orelse.is_empty() {
            self.out.push('\n');
            self.pad();
            self.w("else:");
            self.list_if_items(&li.orelse);
        }
    }

    fn config(&mut self, span: Span, entries: &[ConfigEntry]) {
        if entries.is_empty() {
            self.w("{}");
            return;
        }
        let spans: Vec<Span> = entries.iter().map(|e| e.span()).collect();
        let multi = self.multiline(span.lo, &spans)
            || entries
                .iter()
                .any(|e| matches!(e.kind, ConfigEntryKind::If(_)));
        if !multi {
            self.w("{");
            self.comma_sep(entries, |f, en| f.entry(en));
            self.w("}");
            return;
        }
        self.w("{");
        self.indent += 1;
        self.last_hi = span.lo + 1;
        self.entries_multiline(entries, span.hi);
        self.inner_comments_before(span.hi.saturating_sub(1));
        self.indent -= 1;
        self.out.push('\n');
        self.pad();
        self.w("}");
        self.last_hi = span.hi;
    }

    fn entries_multiline(&mut self, entries: &[ConfigEntry], end: u32) {
        for (i, en) in entries.iter().enumerate() {
            self.inner_comments_before(en.span().lo);
            if i > 0 && self.blank_between(self.last_hi, en.span().lo) {
                self.out.push('\n');
            }
            self.out.push('\n');
            self.pad();
            self.entry(en);
            let next = entries.get(i + 1).map(|n| n.span().lo).unwrap_or(end);
            self.trailing_comment(en.span().hi, next);
            self.last_hi = self.last_hi.max(en.span().hi);
        }
    }

    fn entry(&mut self, en: &ConfigEntry) {
        match &en.kind {
            ConfigEntryKind::KeyValue { key, op, value } => {
                self.expr(key);
                self.config_op(*op);
                self.expr(value);
            }
            ConfigEntryKind::Unpack { value: v, .. } => {
                self.w("**");
                self.expr(v);
            }
            ConfigEntryKind::If(ci) => self.config_if(ci, false, en.span()),
        }
    }

    fn config_if(&mut self, ci: &ConfigIf, is_elif: bool, span: Span) {
        self.w(if is_elif { "elif " } else { "if " });
        self.expr(&ci.cond);
        self.w(":");
        self.indent += 1;
        let body_end = ci.orelse.first().map(|o| o.span().lo).unwrap_or(span.hi);
        self.entries_multiline(&ci.body, body_end);
        self.indent -= 1;
        if let [only] = ci.orelse.as_slice()
            && let ConfigEntryKind::If(inner) = &only.kind
            && self.text(only.span()).starts_with("elif")
        {
            self.inner_comments_before(only.span().lo);
            self.out.push('\n');
            self.pad();
            return self.config_if(inner, true, only.span());
        }
        if !ci.orelse.is_empty() {
            self.inner_comments_before(ci.orelse[0].span().lo.saturating_sub(1));
            self.out.push('\n');
            self.pad();
            self.w("else:");
            self.indent += 1;
            self.entries_multiline(&ci.orelse, span.hi);
            self.indent -= 1;
        }
    }

    fn lambda(&mut self, l: &LambdaExpr, span: Span) {
        self.w("lambda");
        if !l.params.is_empty() {
            self.w(" ");
            self.params(&l.params);
        }
        if let Some(r) = &l.ret {
            self.w(" -> ");
            self.ty(r);
        }
        self.w(" {\n");
        self.indent += 1;
        let saved = self.last_hi;
        self.block(&l.body, span.hi, false);
        self.block_comments_before(span.hi.saturating_sub(1), false);
        self.indent -= 1;
        self.pad();
        self.w("}");
        self.last_hi = saved.max(span.hi);
    }
}

fn is_definition(s: &Stmt) -> bool {
    matches!(s.kind, StmtKind::Schema(_) | StmtKind::Rule(_))
}

/// Words that can only be used as names with a `$` prefix.
fn is_reserved(s: &str) -> bool {
    matches!(
        s,
        "True"
            | "False"
            | "None"
            | "Undefined"
            | "import"
            | "as"
            | "if"
            | "elif"
            | "else"
            | "for"
            | "in"
            | "not"
            | "and"
            | "or"
            | "is"
            | "lambda"
            | "assert"
    )
}
