//! The walk through expressions: every name an expression reads, and config literals, whose
//! keys name the attributes of the schema the context expects and whose values are walked
//! expecting those attributes' types.

use std::sync::Arc;

use crate::ast::{self, ConfigEntry, ConfigEntryKind, Expr, ExprKind, Span, StmtKind, Symbol};

use super::super::{LTy, Role, SchemaRef};
use super::{Ctx, Scope, Walker};

impl Walker<'_> {
    /// Walks an expression expecting `expected` (the schema of a config literal comes from
    /// it), and returns its type.
    pub fn expr(&mut self, e: &Expr, expected: &LTy) -> LTy {
        if self.depth > 200 {
            return LTy::Any;
        }
        self.depth += 1;
        self.mark(e.span);
        let t = self.expr_inner(e, expected);
        self.depth -= 1;
        t
    }

    fn expr_inner(&mut self, e: &Expr, expected: &LTy) -> LTy {
        match &e.kind {
            ExprKind::Ident(sym) => match self.lookup(*sym) {
                Some((d, t)) => {
                    self.occ(e.span, d, Role::Read, t.clone());
                    t
                }
                None => LTy::Any,
            },
            ExprKind::Int(i) => LTy::Lit(Arc::from(i.to_string())),
            ExprKind::Float(f) => LTy::Lit(Arc::from(format!("{f:?}"))),
            ExprKind::NumberUnit { .. } => LTy::Int,
            ExprKind::Str(s) => LTy::Lit(Arc::from(format!("{s:?}"))),
            ExprKind::JoinedStr(parts) => {
                for p in parts.iter() {
                    if let ast::StrPart::Interp { expr, .. } = p {
                        self.expr(expr, &LTy::Any);
                    }
                }
                LTy::Str
            }
            ExprKind::Bool(b) => LTy::Lit(Arc::from(if *b { "True" } else { "False" })),
            ExprKind::None => LTy::None,
            ExprKind::Undefined | ExprKind::Missing => LTy::Any,
            ExprKind::Unary { op, operand } => {
                let t = self.expr(operand, &LTy::Any);
                match op {
                    ast::UnaryOp::Not => LTy::Bool,
                    _ => t.widen(),
                }
            }
            ExprKind::Binary { op, left, right } => {
                let l = self.expr(left, expected).widen();
                let r = self.expr(right, expected).widen();
                use ast::BinOp::*;
                match op {
                    And | Or => LTy::union(vec![l, r]),
                    BitOr if !l.schemas().is_empty() => l,
                    BitOr if matches!(l, LTy::Dict(..)) => l,
                    Add | Sub | Mul | Div | Mod | Pow | FloorDiv => match (&l, &r) {
                        (LTy::Int, LTy::Int) if *op != Div => LTy::Int,
                        (LTy::Int | LTy::Float, LTy::Int | LTy::Float) => LTy::Float,
                        (LTy::Str, LTy::Str) if *op == Add => LTy::Str,
                        (LTy::Str, LTy::Int) if *op == Mul => LTy::Str,
                        (LTy::List(_), LTy::List(_)) if *op == Add => LTy::union(vec![l, r]),
                        _ => LTy::Any,
                    },
                    _ => match (&l, &r) {
                        (LTy::Int, LTy::Int) => LTy::Int,
                        _ => LTy::Any,
                    },
                }
            }
            ExprKind::Compare(c) => {
                self.expr(&c.left, &LTy::Any);
                for (_, x) in &c.ops {
                    self.expr(x, &LTy::Any);
                }
                LTy::Bool
            }
            ExprKind::If(i) => {
                self.expr(&i.cond, &LTy::Any);
                let a = self.expr(&i.then, expected);
                let b = self.expr(&i.orelse, expected);
                LTy::union(vec![a, b])
            }
            ExprKind::Selector(s) => {
                let t = self.expr(&s.value, &LTy::Any);
                match self.sema.member_of(&t, s.attr.sym) {
                    Some((mt, d)) => {
                        self.occ(s.attr.span, d, Role::Read, mt.clone());
                        mt
                    }
                    None => LTy::Any,
                }
            }
            ExprKind::Subscript { value, index, .. } => {
                let t = self.expr(value, &LTy::Any);
                self.expr(index, &LTy::Any);
                match t {
                    LTy::Dict(..) => t.value(),
                    t => t.elem(),
                }
            }
            ExprKind::Slice(s) => {
                let t = self.expr(&s.value, &LTy::Any);
                for x in s.lower.iter().chain(&s.upper).chain(&s.step) {
                    self.expr(x, &LTy::Any);
                }
                t
            }
            ExprKind::Call { func, args } => {
                let ft = self.expr(func, &LTy::Any);
                self.call_args(args);
                match ft {
                    LTy::Func(f) => f.1.clone(),
                    LTy::SchemaType(s) => LTy::Schema(s),
                    _ => LTy::Any,
                }
            }
            ExprKind::Paren(x) => self.expr(x, expected),
            ExprKind::List(items) => {
                let et = expected.elem();
                let mut ts = Vec::new();
                for x in items.iter() {
                    ts.push(self.expr(x, &et).widen());
                }
                LTy::List(Box::new(if ts.is_empty() {
                    LTy::Any
                } else {
                    LTy::union(ts)
                }))
            }
            ExprKind::ListIf(i) => {
                self.expr(&i.cond, &LTy::Any);
                for x in i.body.iter().chain(&i.orelse) {
                    self.expr(x, expected);
                }
                LTy::Any
            }
            ExprKind::Starred(x) => self.expr(x, &LTy::Any).elem(),
            ExprKind::Config(entries) => {
                self.config(e.span, entries, expected);
                if expected.schemas().is_empty() {
                    LTy::Dict(Box::new(LTy::Str), Box::new(LTy::Any))
                } else {
                    expected.clone()
                }
            }
            ExprKind::ListComp(c) => {
                self.scopes.push(Scope::default());
                self.clauses(&c.clauses);
                self.mark(e.span);
                let t = self.expr(&c.elt, &expected.elem());
                self.scopes.pop();
                LTy::List(Box::new(t.widen()))
            }
            ExprKind::DictComp(c) => {
                self.scopes.push(Scope::default());
                self.clauses(&c.clauses);
                self.mark(e.span);
                self.expr(&c.key, &LTy::Any);
                let v = self.expr(&c.value, &expected.value());
                self.scopes.pop();
                LTy::Dict(Box::new(LTy::Str), Box::new(v.widen()))
            }
            ExprKind::Quant(q) => {
                let it = self.expr(&q.target, &LTy::Any);
                self.scopes.push(Scope::default());
                let (a, b) = match (&it, q.vars.len()) {
                    (LTy::Dict(k, v), 2) => ((**k).clone(), (**v).clone()),
                    (LTy::List(e), 2) => (LTy::Int, (**e).clone()),
                    (t, _) => (t.elem(), LTy::Any),
                };
                for (i, v) in q.vars.iter().enumerate() {
                    self.declare(*v, if i == 0 { a.clone() } else { b.clone() });
                }
                self.mark(e.span);
                let t = self.expr(&q.test, &LTy::Any);
                if let Some(c) = &q.if_cond {
                    self.expr(c, &LTy::Any);
                }
                self.scopes.pop();
                match q.op {
                    ast::QuantOp::All | ast::QuantOp::Any => LTy::Bool,
                    ast::QuantOp::Map => LTy::List(Box::new(t.widen())),
                    ast::QuantOp::Filter => it,
                }
            }
            ExprKind::Schema(se) => {
                let sr = self.ident_ref(&se.name);
                if let Some(a) = &se.args {
                    self.call_args(a);
                }
                let t = sr.map_or(LTy::Any, LTy::Schema);
                self.expr(&se.config, &t);
                t
            }
            ExprKind::Lambda(l) => {
                self.scopes.push(Scope::default());
                self.mark(e.span);
                self.params(&l.params);
                let ret = match &l.ret {
                    Some(t) => {
                        self.type_refs(t);
                        Some(self.sema.resolve_type(self.pkg, self.file, t))
                    }
                    None => None,
                };
                let mut last = LTy::Any;
                for s in &l.body {
                    self.stmt(s, Ctx::Lambda);
                    if let StmtKind::Expr(x) = &s.kind {
                        // the value of the last expression is the result: typed again
                        // quietly (its names are already recorded)
                        let q = std::mem::replace(&mut self.quiet, true);
                        last = self.expr(x, &LTy::Any).widen();
                        self.quiet = q;
                    }
                }
                self.scopes.pop();
                let ret = ret.unwrap_or(last);
                self.sema.lambda_ty(self.pkg, self.file, l, ret)
            }
            ExprKind::As { value, ty } => {
                self.expr(value, &LTy::Any);
                self.type_refs(ty);
                self.sema.resolve_type(self.pkg, self.file, ty)
            }
        }
    }

    fn clauses(&mut self, clauses: &[ast::CompClause]) {
        for cl in clauses {
            let it = self.expr(&cl.iter, &LTy::Any);
            let (a, b) = match (&it, cl.targets.len()) {
                (LTy::Dict(k, v), 2) => ((**k).clone(), (**v).clone()),
                (LTy::List(e), 2) => (LTy::Int, (**e).clone()),
                (t, _) => (t.elem(), LTy::Any),
            };
            for (i, t) in cl.targets.iter().enumerate() {
                if let Some(n) = t.names.first() {
                    self.declare(*n, if i == 0 { a.clone() } else { b.clone() });
                }
            }
            for c in &cl.ifs {
                self.expr(c, &LTy::Any);
            }
        }
    }

    /// A config literal's entries: keys name the expected schema's attributes, values are
    /// walked expecting the attribute's type.
    fn config(&mut self, span: Span, entries: &[ConfigEntry], expected: &LTy) {
        if !self.quiet {
            self.configs.push((span, expected.clone()));
        }
        self.entries(entries.iter(), expected);
    }

    /// Entries of a config literal or of an `if` inside one (its condition walked first).
    fn entries<'e>(&mut self, entries: impl Iterator<Item = &'e ConfigEntry>, expected: &LTy) {
        let schemas = expected.schemas();
        for en in entries {
            match &en.kind {
                ConfigEntryKind::KeyValue { key, value, .. } => {
                    let vt = self.key(key, expected, &schemas);
                    self.expr(value, &vt);
                }
                ConfigEntryKind::Unpack { value, .. } => {
                    self.expr(value, &LTy::Any);
                }
                ConfigEntryKind::If(ci) => {
                    self.expr(&ci.cond, &LTy::Any);
                    self.entries(ci.body.iter().chain(&ci.orelse), expected);
                }
            }
        }
    }

    /// A config key; returns the type its value should have.
    fn key(&mut self, key: &Expr, expected: &LTy, schemas: &[SchemaRef]) -> LTy {
        self.mark(key.span);
        let attr = |w: &mut Self, sym: Symbol, span: Span, on: &LTy| -> LTy {
            match w.sema.member_of(on, sym) {
                Some((t, d)) if !on.schemas().is_empty() => {
                    w.occ(span, d, Role::Key, t.clone());
                    t
                }
                _ => on.value(),
            }
        };
        match &key.kind {
            ExprKind::Ident(sym) => {
                if schemas.is_empty() {
                    expected.value()
                } else {
                    attr(self, *sym, key.span, expected)
                }
            }
            ExprKind::Str(s) => {
                if schemas.is_empty() {
                    return expected.value();
                }
                // the name inside the quotes
                let inner = Span::new(
                    key.span.file,
                    key.span.lo + 1,
                    key.span.hi.saturating_sub(1),
                );
                attr(self, Symbol::intern(s), inner, expected)
            }
            ExprKind::Selector(_) => {
                // `a.b.c: v` sets c of b of a
                let mut chain = Vec::new();
                let mut cur = key;
                loop {
                    match &cur.kind {
                        ExprKind::Selector(s) => {
                            chain.push((s.attr.sym, s.attr.span));
                            cur = &s.value;
                        }
                        ExprKind::Ident(sym) => {
                            chain.push((*sym, cur.span));
                            break;
                        }
                        _ => {
                            self.expr(cur, &LTy::Any);
                            return LTy::Any;
                        }
                    }
                }
                chain.reverse();
                let mut t = expected.clone();
                for (sym, sp) in chain {
                    t = attr(self, sym, sp, &t);
                }
                t
            }
            _ => {
                self.expr(key, &LTy::Any);
                expected.value()
            }
        }
    }
}
