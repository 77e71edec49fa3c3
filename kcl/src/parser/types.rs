//! Type annotation parsing: `int`, `[T]`, `{K:V}`, `A | B`, literal types, schema names and
//! function types, with upstream's messages when a type is missing.

use std::sync::Arc;

use super::literals::parse_number;
use super::{Ctx, MAX_CHAIN, Parser};
use crate::ast::*;
use crate::lexer::Tok;

/// What upstream's parser names when a type is missing.
pub(crate) const TYPE_START: &[&str] = &[
    "any",
    "bool",
    "int",
    "float",
    "str",
    "True",
    "False",
    "identifier",
    "literal",
    "[",
    "{",
    ")",
];

impl<'a> Parser<'a> {
    /// A type annotation, including unions `A | B`.
    pub(crate) fn parse_type(&mut self) -> Type {
        if !self.enter() {
            let t = self.bump();
            return Type {
                kind: TypeKind::Any,
                span: self.tspan(t),
            };
        }
        let first = self.parse_type_elem();
        let r = if self.at(Tok::Pipe) && !self.at_line_break() {
            let mut members = vec![first];
            while self.at(Tok::Pipe) && !self.at_line_break() {
                self.bump();
                members.push(self.parse_type_elem());
                if members.len() > MAX_CHAIN {
                    self.too_long();
                    break;
                }
            }
            let span = members[0].span.to(members[members.len() - 1].span);
            Type {
                kind: TypeKind::Union(members),
                span,
            }
        } else {
            first
        };
        self.depth -= 1;
        r
    }

    /// The `]` or `}` closing a type's brackets: upstream's type parser does not read past the
    /// line's end for it (outside parentheses), and leaves a closer on a later line unread.
    fn expect_type_closer(&mut self, closer: Tok, what: &str) {
        if self.tk().nl && !self.ctx.contains(&Ctx::Paren) && !self.at_eof() {
            self.expected_at_line_end(&[what]);
        } else {
            self.expect(closer, what);
        }
    }

    fn parse_type_elem(&mut self) -> Type {
        let t = self.tk();
        let span = self.tspan(t);
        // inside a type's brackets (not parentheses) the line ends the type too
        let in_type_brackets =
            self.type_brackets > 0 && !self.ctx.contains(&Ctx::Paren) && (t.nl || self.at_eof());
        if self.nl_break() || in_type_brackets {
            // upstream's lexer ends the line first: the type parser finds its newline, not
            // the indent or dedent (or the end of the file) after it
            let (got, span) = if in_type_brackets && !self.nl_break() {
                // at the end of the previous line, as upstream points
                let p = self.prev();
                let at = p.hi.saturating_sub(1).max(p.lo);
                ("newline".to_string(), self.span(at, at + 1))
            } else {
                self.describe_current()
            };
            let got = if got == "dedent" || got == "indent" {
                "newline".into()
            } else {
                got
            };
            let list = TYPE_START
                .iter()
                .map(|w| format!("\"{w}\""))
                .collect::<Vec<_>>();
            self.error(
                span,
                format!("expected one of [{}] got {got}", list.join(", ")),
            );
            return Type {
                kind: TypeKind::Any,
                span: self.span(t.lo, t.lo),
            };
        }
        // upstream's type parser reads a word keyword as a type's name (`f: if = 1` is the
        // undefined name 'if')
        if t.tok.is_word_keyword() {
            self.keyword_as_name();
        }
        let t = self.tk();
        let kind = match t.tok {
            Tok::Ident(sym) => {
                let basic = match sym.as_str() {
                    "any" => Some(TypeKind::Any),
                    "bool" => Some(TypeKind::Basic(BasicType::Bool)),
                    "int" => Some(TypeKind::Basic(BasicType::Int)),
                    "float" => Some(TypeKind::Basic(BasicType::Float)),
                    "str" => Some(TypeKind::Basic(BasicType::Str)),
                    _ => None,
                };
                // (a builtin type's name is no package's: `int.x` is `int`, the `.` left to
                // what follows)
                if let Some(k) = basic {
                    self.bump();
                    return Type { kind: k, span };
                }
                match self.parse_identifier() {
                    Some(id) => {
                        let span = id.span;
                        return Type {
                            kind: TypeKind::Named(id),
                            span,
                        };
                    }
                    None => TypeKind::Any,
                }
            }
            Tok::LBracket => {
                self.bump();
                self.ctx.push(Ctx::Bracket);
                self.type_brackets += 1;
                let elem = if self.at(Tok::RBracket) {
                    None
                } else {
                    Some(Box::new(self.parse_type()))
                };
                self.type_brackets -= 1;
                self.ctx.pop();
                self.expect_type_closer(Tok::RBracket, "]");
                return Type {
                    kind: TypeKind::List(elem),
                    span: self.since(t.lo),
                };
            }
            Tok::LBrace => {
                self.bump();
                self.ctx.push(Ctx::Brace);
                self.type_brackets += 1;
                let mut k = None;
                let mut v = None;
                if self.at(Tok::RBrace) {
                    // `{}` is no type: upstream wants its key type
                    self.expected(TYPE_START);
                } else {
                    if !self.at(Tok::Colon) {
                        k = Some(Box::new(self.parse_type()));
                    }
                    // the `:` stands on the key type's line: at a line break (and at the end
                    // of the file) upstream finds the line's newline here
                    if self.at_eof() || self.tk().nl {
                        self.expected_at_line_end(&[":"]);
                    } else {
                        self.expect(Tok::Colon, ":");
                    }
                    if !self.at(Tok::RBrace) {
                        v = Some(Box::new(self.parse_type()));
                    }
                }
                self.type_brackets -= 1;
                self.ctx.pop();
                self.expect_type_closer(Tok::RBrace, "}");
                return Type {
                    kind: TypeKind::Dict(k, v),
                    span: self.since(t.lo),
                };
            }
            Tok::LParen => {
                self.bump();
                // upstream reads a function type's parameters on one line, each a type, the
                // commas between them optional
                let mut params = Vec::new();
                loop {
                    let t = self.tk();
                    if t.nl || t.tok == Tok::Eof {
                        let p = self.prev();
                        let at = p.hi.saturating_sub(1).max(p.lo);
                        let list = TYPE_START
                            .iter()
                            .map(|w| format!("\"{w}\""))
                            .collect::<Vec<_>>();
                        let msg = format!("expected one of [{}] got newline", list.join(", "));
                        self.error(self.span(at, at + 1), msg);
                        return Type {
                            kind: TypeKind::Any,
                            span: self.since(t.lo),
                        };
                    }
                    if self.at(Tok::RParen) || params.len() > MAX_CHAIN {
                        break;
                    }
                    let before = self.pos;
                    params.push(self.parse_type());
                    self.eat(Tok::Comma);
                    if self.pos == before {
                        // (a token no type starts with: reported, and skipped)
                        self.bump();
                    }
                }
                self.expect(Tok::RParen, ")");
                let ret = if self.at(Tok::Arrow) && !self.at_line_break() {
                    self.bump();
                    // `(int) -> int | str` returns `int | str` (upstream accepts a lambda
                    // returning `str` for it)
                    Some(Box::new(self.parse_type()))
                } else {
                    None
                };
                return Type {
                    kind: TypeKind::Function { params, ret },
                    span: self.since(t.lo),
                };
            }
            Tok::Str { raw, triple } => {
                self.bump();
                // upstream's literal type is the empty string after a bad escape
                let s = match self.bad_string_escape(t, raw, triple) {
                    true => String::new(),
                    false => self.decode_plain_string(t, raw, triple),
                };
                TypeKind::Literal(LiteralType::Str(Arc::from(s)))
            }
            Tok::Number => {
                self.bump();
                match parse_number(self.text(t)) {
                    Ok(ExprKind::Int(i)) => TypeKind::Literal(LiteralType::Int(i, None)),
                    Ok(ExprKind::NumberUnit { value, suffix }) => {
                        TypeKind::Literal(LiteralType::Int(value, Some(suffix)))
                    }
                    Ok(ExprKind::Float(f)) => TypeKind::Literal(LiteralType::Float(f)),
                    Err(msg) => {
                        if !self.lexer_reported(span) {
                            self.error(span, msg);
                        }
                        TypeKind::Any
                    }
                    Ok(_) => {
                        self.error(span, "invalid number literal");
                        TypeKind::Any
                    }
                }
            }
            Tok::True => {
                self.bump();
                TypeKind::Literal(LiteralType::Bool(true))
            }
            Tok::False => {
                self.bump();
                TypeKind::Literal(LiteralType::Bool(false))
            }
            Tok::None => {
                self.bump();
                TypeKind::Literal(LiteralType::None)
            }
            Tok::Undefined => {
                self.bump();
                TypeKind::Literal(LiteralType::Undefined)
            }
            _ => {
                self.expected(TYPE_START);
                TypeKind::Any
            }
        };
        Type { kind, span }
    }
}
