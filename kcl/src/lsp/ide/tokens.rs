//! Semantic tokens: every name classified by what it resolves to (namespace, struct, property,
//! parameter, function, method, variable, type), and keywords, strings, numbers, comments and
//! operators from the lexer; the legend the server announces.

use std::collections::HashMap;

use lsp_types::SemanticToken;

use crate::ast::FileId;
use crate::lexer::{Tok, lex};

use super::super::pos;
use super::super::sema::{Def, LTy, Role, Sema, TopKind};
use super::Snapshot;

/// Words the lexer gives as identifiers that are keywords where they stand.
const CONTEXT_KEYWORDS: &[&str] = &[
    "schema", "rule", "mixin", "protocol", "check", "type", "all", "any", "map", "filter",
];

impl Snapshot {
    pub fn semantic_tokens(&self) -> Vec<SemanticToken> {
        let text = self.text().to_string();
        let starts = pos::line_starts(&text);
        let walked = self.sema.walk_file(self.id(), None);
        let mut by_lo: HashMap<u32, (&Def, Role)> = HashMap::new();
        for o in &walked.occs {
            by_lo.insert(o.span.lo, (&o.def, o.role));
        }
        let lexed = lex(&text, FileId(u32::MAX), 0);
        // (lo, hi, type, modifiers) in source order
        let mut raw: Vec<(u32, u32, u32, u32)> = Vec::new();
        let mut comments = lexed.comments.iter().peekable();
        for t in &lexed.tokens {
            while let Some(c) = comments.peek() {
                if c.span.lo >= t.lo {
                    break;
                }
                raw.push((c.span.lo, c.span.hi, TT_COMMENT, 0));
                comments.next();
            }
            let class = match t.tok {
                Tok::Ident(sym) => match by_lo.get(&t.lo) {
                    Some((d, role)) => {
                        let (ty, m) = def_token(&self.sema, d);
                        let decl = if *role == Role::Decl {
                            MOD_DECLARATION
                        } else {
                            0
                        };
                        Some((ty, m | decl))
                    }
                    None if CONTEXT_KEYWORDS.contains(&sym.as_str()) => Some((TT_KEYWORD, 0)),
                    None => Some((TT_VARIABLE, 0)),
                },
                Tok::Number => Some((TT_NUMBER, 0)),
                Tok::Str { .. } => Some((TT_STRING, 0)),
                Tok::True | Tok::False | Tok::None | Tok::Undefined => {
                    Some((TT_KEYWORD, MOD_READONLY))
                }
                t if t.is_word_keyword() => Some((TT_KEYWORD, 0)),
                Tok::At => Some((TT_DECORATOR, 0)),
                Tok::Eof => None,
                Tok::LParen
                | Tok::RParen
                | Tok::LBracket
                | Tok::RBracket
                | Tok::LBrace
                | Tok::RBrace
                | Tok::Comma
                | Tok::Colon
                | Tok::Dot => None,
                _ => Some((TT_OPERATOR, 0)),
            };
            if let Some((ty, m)) = class {
                raw.push((t.lo, t.hi, ty, m));
            }
        }
        for c in comments {
            raw.push((c.span.lo, c.span.hi, TT_COMMENT, 0));
        }
        // decorators: `@name` as one decorator token
        let mut out = Vec::new();
        let (mut prev_line, mut prev_col) = (0u32, 0u32);
        for (lo, hi, ty, m) in raw {
            // a token spanning lines (a triple-quoted string) is sent line by line
            let mut s = lo;
            while s < hi {
                let p = pos::position(&text, &starts, s, self.enc);
                let line_end = text[s as usize..hi as usize]
                    .find('\n')
                    .map_or(hi, |i| s + i as u32);
                let e = pos::position(&text, &starts, line_end, self.enc);
                let len = e.character.saturating_sub(p.character);
                if len > 0 {
                    let dl = p.line - prev_line;
                    let dc = if dl == 0 {
                        p.character - prev_col
                    } else {
                        p.character
                    };
                    out.push(SemanticToken {
                        delta_line: dl,
                        delta_start: dc,
                        length: len,
                        token_type: ty,
                        token_modifiers_bitset: m,
                    });
                    prev_line = p.line;
                    prev_col = p.character;
                }
                s = line_end + 1;
            }
        }
        out
    }
}

/// Semantic token types, in the legend's order.
pub const TOKEN_TYPES: &[&str] = &[
    "namespace",
    "type",
    "struct",
    "parameter",
    "variable",
    "property",
    "function",
    "method",
    "keyword",
    "comment",
    "string",
    "number",
    "operator",
    "decorator",
];
const TT_NAMESPACE: u32 = 0;
const TT_TYPE: u32 = 1;
const TT_STRUCT: u32 = 2;
const TT_PARAMETER: u32 = 3;
const TT_VARIABLE: u32 = 4;
const TT_PROPERTY: u32 = 5;
const TT_FUNCTION: u32 = 6;
const TT_METHOD: u32 = 7;
const TT_KEYWORD: u32 = 8;
const TT_COMMENT: u32 = 9;
const TT_STRING: u32 = 10;
const TT_NUMBER: u32 = 11;
const TT_OPERATOR: u32 = 12;
const TT_DECORATOR: u32 = 13;
/// Semantic token modifiers, in the legend's order.
pub const TOKEN_MODIFIERS: &[&str] = &["declaration", "readonly", "defaultLibrary"];
const MOD_DECLARATION: u32 = 1;
const MOD_READONLY: u32 = 2;
const MOD_LIBRARY: u32 = 4;

fn def_token(sema: &Sema, d: &Def) -> (u32, u32) {
    match d {
        Def::Top { pkg, name } => match sema.top(*pkg, *name).map(|t| t.kind) {
            Some(TopKind::Schema) => (TT_STRUCT, 0),
            Some(TopKind::Rule) => (TT_FUNCTION, 0),
            Some(TopKind::Alias) => (TT_TYPE, 0),
            _ if matches!(sema.top_ty(*pkg, *name), LTy::Func(_)) => (TT_FUNCTION, 0),
            _ => (TT_VARIABLE, 0),
        },
        Def::Attr { .. } => (TT_PROPERTY, 0),
        Def::Local { .. } => (TT_PARAMETER, 0),
        Def::Import { .. } | Def::Pkg(_) | Def::SysModule(_) => (TT_NAMESPACE, 0),
        Def::Builtin(_) | Def::SysFunc(..) => (TT_FUNCTION, MOD_LIBRARY),
        Def::StrMethod(_) => (TT_METHOD, MOD_LIBRARY),
    }
}
