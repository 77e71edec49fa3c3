//! The lexer's tokens: their kinds, how upstream's messages name them, and the reserved words.

use crate::ast::{AugOp, Symbol};

/// Words KCL reserves (upstream's full list, soft keywords included): a name spelled like one
/// cannot be used bare (generated schemas write such attributes `$name`).
pub const KEYWORDS: &[&str] = &[
    "True",
    "False",
    "None",
    "Undefined",
    "import",
    "as",
    "if",
    "elif",
    "else",
    "for",
    "in",
    "not",
    "and",
    "or",
    "is",
    "lambda",
    "assert",
    "schema",
    "mixin",
    "protocol",
    "check",
    "rule",
    "relaxed",
    "type",
    "all",
    "any",
    "filter",
    "map",
];

/// Token kinds. Literal values are decoded by the parser from the token text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tok {
    /// Identifier (a `$name` escape is stored without the `$`).
    Ident(Symbol),
    /// Number literal (int, float, or int with unit suffix).
    Number,
    /// String literal; `raw` for `r"..."`, `triple` for triple-quoted.
    Str { raw: bool, triple: bool },
    /// `True`
    True,
    /// `False`
    False,
    /// `None`
    None,
    /// `Undefined`
    Undefined,
    /// `import`
    Import,
    /// `as`
    As,
    /// `if`
    If,
    /// `elif`
    Elif,
    /// `else`
    Else,
    /// `for`
    For,
    /// `in`
    In,
    /// `not`
    Not,
    /// `and`
    And,
    /// `or`
    Or,
    /// `is`
    Is,
    /// `lambda`
    Lambda,
    /// `assert`
    Assert,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `,`
    Comma,
    /// `:`
    Colon,
    /// `.`
    Dot,
    /// `...`
    Ellipsis,
    /// `?`
    Question,
    /// `@`
    At,
    /// `$` not starting a `$name` escape: upstream's lexer has the token, and no rule takes it
    Dollar,
    /// `->`
    Arrow,
    /// `=`
    Assign,
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Star,
    /// `**`
    StarStar,
    /// `/`
    Slash,
    /// `//`
    SlashSlash,
    /// `%`
    Percent,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `&`
    Amp,
    /// `|`
    Pipe,
    /// `^`
    Caret,
    /// `~`
    Tilde,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `<=`
    LtE,
    /// `>=`
    GtE,
    /// `==`
    EqEq,
    /// `!=`
    NotEq,
    /// `+=`, `-=`, ...
    AugAssign(AugOp),
    /// End of input (always the last token).
    Eof,
}

impl Tok {
    /// The word keywords (`import`, `if`, `lambda`, `assert`, ...), not the constants `True`,
    /// `None`...: the parser, the messages and the editor's highlighting all classify by it.
    pub fn is_word_keyword(self) -> bool {
        matches!(
            self,
            Tok::Import
                | Tok::As
                | Tok::If
                | Tok::Elif
                | Tok::Else
                | Tok::For
                | Tok::In
                | Tok::Not
                | Tok::And
                | Tok::Or
                | Tok::Is
                | Tok::Lambda
                | Tok::Assert
        )
    }

    /// Whether upstream's lexer makes this token a name: identifiers, word keywords and the
    /// constants (its parser takes them where a name stands, as its comprehension variables).
    pub fn is_upstream_name(self) -> bool {
        matches!(
            self,
            Tok::Ident(_) | Tok::True | Tok::False | Tok::None | Tok::Undefined
        ) || self.is_word_keyword()
    }

    /// How upstream's parser names a token it did not expect: keywords (and the constants
    /// `True`, `None`...) are identifiers to it, a literal is its value.
    pub fn describe(self, text: &str) -> String {
        match self {
            Tok::Ident(_) | Tok::True | Tok::False | Tok::None | Tok::Undefined => {
                "identifier".into()
            }
            t if t.is_word_keyword() => "identifier".into(),
            Tok::Number => text.to_string(),
            Tok::Str { .. } => {
                let t = text.trim_start_matches(['r', 'R']);
                let q = if t.starts_with("\"\"\"") || t.starts_with("'''") {
                    3
                } else {
                    1
                };
                t.get(q..t.len().saturating_sub(q)).unwrap_or(t).to_string()
            }
            Tok::Eof => "eof".into(),
            _ => text.to_string(),
        }
    }
}

/// One token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// Kind.
    pub tok: Tok,
    /// Start byte.
    pub lo: u32,
    /// End byte.
    pub hi: u32,
    /// First token of a logical line (after a newline that was not `\`-continued).
    pub nl: bool,
    /// Indentation width of the line when `nl` (tabs expand to multiples of 8).
    pub indent: u32,
}

/// The token of a reserved word, `None` for any other word.
pub(super) fn keyword(w: &str) -> Option<Tok> {
    Some(match w {
        "True" => Tok::True,
        "False" => Tok::False,
        "None" => Tok::None,
        "Undefined" => Tok::Undefined,
        "import" => Tok::Import,
        "as" => Tok::As,
        "if" => Tok::If,
        "elif" => Tok::Elif,
        "else" => Tok::Else,
        "for" => Tok::For,
        "in" => Tok::In,
        "not" => Tok::Not,
        "and" => Tok::And,
        "or" => Tok::Or,
        "is" => Tok::Is,
        "lambda" => Tok::Lambda,
        "assert" => Tok::Assert,
        _ => return None,
    })
}
