//! The KCL syntax tree.
//!
//! Every node carries a [`Span`] (file id + byte range); resolve it to `file:line:col` with
//! [`Span::loc`]. Identifiers are interned [`Symbol`]s; string literal values are `Arc<str>` so
//! an evaluator can share them without copying. Blocks are plain `Vec`s of statements.
//!
//! Conventions:
//! * `elif` chains are nested: an `elif` becomes a single [`IfStmt`] (or entry/item) in the
//!   `orelse` of its predecessor.
//! * Dotted names in type, schema, decorator and loop-variable positions are [`Identifier`]s
//!   (a list of [`Name`]s); in expressions `a.b` is a [`ExprKind::Selector`] chain.
//! * Parenthesised expressions are kept ([`ExprKind::Paren`]) so the formatter can print them.
//!
//! Over 800 lines: it is the node types only (and their spans), one idea; the whole tree is
//! read in one place, in grammar order.

pub mod span;
pub mod symbol;
pub(crate) mod walk;

pub use span::{FileId, Loc, SourceFile, SourceMap, Span, source_map};
use std::sync::Arc;
pub use symbol::Symbol;

/// One parsed `.k` file.
#[derive(Clone, Debug)]
pub struct Module {
    /// The source file this module was parsed from.
    pub file: FileId,
    /// Display name of the file (absolute path for disk files).
    pub filename: Arc<str>,
    /// Module docstring: a string literal that is the first statement of the file.
    pub doc: Option<StrLit>,
    /// Top-level statements in order.
    pub body: Vec<Stmt>,
    /// Every `#` comment in the file, in source order (the formatter re-attaches them).
    pub comments: Vec<Comment>,
}

/// A `#` comment; `span` covers the `#` up to the end of the line (no newline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comment {
    /// Where the comment is.
    pub span: Span,
}

/// A single identifier occurrence (a `$`-escaped name like `$type` is stored as `type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Name {
    /// The interned identifier text.
    pub sym: Symbol,
    /// Where it is written.
    pub span: Span,
}

/// A dotted name such as `pkg.Schema` used in types, schema names, parents, decorators and
/// comprehension loop variables.
#[derive(Clone, Debug, PartialEq)]
pub struct Identifier {
    /// The parts in order (`pkg`, `Schema`); never empty.
    pub names: Vec<Name>,
    /// The whole dotted name.
    pub span: Span,
}

/// A string literal with its decoded value (escapes processed, quotes removed).
#[derive(Clone, Debug, PartialEq)]
pub struct StrLit {
    /// The decoded text.
    pub value: Arc<str>,
    /// The literal including prefix and quotes.
    pub span: Span,
}

// ------------------------------------------------------------------ statements ------

/// A statement with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What kind of statement.
    pub kind: StmtKind,
    /// From the first token (including decorators) to the last.
    pub span: Span,
}

/// The statement forms.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// A bare expression (e.g. a docstring, a call, or `a` on its own line).
    Expr(Expr),
    /// `name: Schema {...}` at module or block level (unify into `name`).
    Unification(UnificationStmt),
    /// `a = b = value` or `a: T = value`.
    Assign(AssignStmt),
    /// `a += value` and other augmented assignments.
    AugAssign(AugAssignStmt),
    /// `assert test [if cond] [, msg]`.
    Assert(AssertStmt),
    /// `if` / `elif` / `else` statement.
    If(IfStmt),
    /// `import a.b [as c]`.
    Import(ImportStmt),
    /// A schema attribute declaration `name[?]: T [= value]` (schema bodies only, but the
    /// parser also accepts it at module level as upstream does).
    SchemaAttr(SchemaAttr),
    /// `schema`, `mixin` or `protocol` definition.
    Schema(Box<SchemaStmt>),
    /// `rule` definition.
    Rule(Box<RuleStmt>),
    /// `type Name = T`.
    TypeAlias(TypeAliasStmt),
}

/// Left-hand side of an assignment: `name`, `name.attr`, `name[index]`, chained.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The root variable.
    pub name: Name,
    /// Attribute and index steps after the root.
    pub path: Vec<TargetPath>,
    /// The whole target.
    pub span: Span,
}

/// One step of a [`Target`] path.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetPath {
    /// `.attr`
    Attr(Name),
    /// `[index]`
    Index(Expr),
}

/// `targets... [: ty] = value`.
#[derive(Clone, Debug, PartialEq)]
pub struct AssignStmt {
    /// One or more targets (`a = b = 1` has two).
    pub targets: Vec<Target>,
    /// Optional type annotation (only with a single target).
    pub ty: Option<Type>,
    /// The assigned value.
    pub value: Expr,
}

/// `target op= value`.
#[derive(Clone, Debug, PartialEq)]
pub struct AugAssignStmt {
    /// The updated target.
    pub target: Target,
    /// The operator (`+=` is [`AugOp::Add`]).
    pub op: AugOp,
    /// The right-hand side.
    pub value: Expr,
}

/// Augmented-assignment operators; each maps to a [`BinOp`] via [`AugOp::bin_op`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AugOp {
    /// `+=`
    Add,
    /// `-=`
    Sub,
    /// `*=`
    Mul,
    /// `/=`
    Div,
    /// `%=`
    Mod,
    /// `**=`
    Pow,
    /// `//=`
    FloorDiv,
    /// `<<=`
    Shl,
    /// `>>=`
    Shr,
    /// `&=`
    BitAnd,
    /// `|=`
    BitOr,
    /// `^=`
    BitXor,
}

impl AugOp {
    /// The binary operator this augmented assignment applies.
    pub fn bin_op(self) -> BinOp {
        match self {
            AugOp::Add => BinOp::Add,
            AugOp::Sub => BinOp::Sub,
            AugOp::Mul => BinOp::Mul,
            AugOp::Div => BinOp::Div,
            AugOp::Mod => BinOp::Mod,
            AugOp::Pow => BinOp::Pow,
            AugOp::FloorDiv => BinOp::FloorDiv,
            AugOp::Shl => BinOp::Shl,
            AugOp::Shr => BinOp::Shr,
            AugOp::BitAnd => BinOp::BitAnd,
            AugOp::BitOr => BinOp::BitOr,
            AugOp::BitXor => BinOp::BitXor,
        }
    }
    /// Source text of the operator, e.g. `"+="`.
    pub fn as_str(self) -> &'static str {
        match self {
            AugOp::Add => "+=",
            AugOp::Sub => "-=",
            AugOp::Mul => "*=",
            AugOp::Div => "/=",
            AugOp::Mod => "%=",
            AugOp::Pow => "**=",
            AugOp::FloorDiv => "//=",
            AugOp::Shl => "<<=",
            AugOp::Shr => ">>=",
            AugOp::BitAnd => "&=",
            AugOp::BitOr => "|=",
            AugOp::BitXor => "^=",
        }
    }
}

/// `target: SchemaExpr` — unify a schema instance into a variable.
#[derive(Clone, Debug, PartialEq)]
pub struct UnificationStmt {
    /// The variable.
    pub target: Name,
    /// The value; always an [`ExprKind::Schema`] expression.
    pub value: Expr,
}

/// `assert test [if cond] [, msg]`.
#[derive(Clone, Debug, PartialEq)]
pub struct AssertStmt {
    /// The asserted condition.
    pub test: Expr,
    /// Only check when this holds.
    pub if_cond: Option<Expr>,
    /// Error message expression.
    pub msg: Option<Expr>,
}

/// `if cond: body [elif ...] [else: orelse]`.
#[derive(Clone, Debug, PartialEq)]
pub struct IfStmt {
    /// The condition.
    pub cond: Expr,
    /// Statements run when `cond` is truthy.
    pub body: Vec<Stmt>,
    /// `else` statements; an `elif` is a single nested `If` statement here.
    pub orelse: Vec<Stmt>,
}

/// `import path [as alias]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportStmt {
    /// The path as written, e.g. `"..base.lib"` or `"kcl_plugin.cmdb"`.
    pub path: Arc<str>,
    /// Number of leading dots (0 = absolute, 1 = same package, 2 = parent, ...).
    pub level: u32,
    /// The dotted parts after the leading dots.
    pub names: Vec<Name>,
    /// Span of the path.
    pub path_span: Span,
    /// `as` alias.
    pub asname: Option<Name>,
}

impl ImportStmt {
    /// The local name the import binds: the alias, or the last path part.
    pub fn local_name(&self) -> Option<Symbol> {
        self.asname
            .map(|n| n.sym)
            .or_else(|| self.names.last().map(|n| n.sym))
    }
}

/// `@name` or `@name(args)` before a schema, rule or attribute.
#[derive(Clone, Debug, PartialEq)]
pub struct Decorator {
    /// Decorator name (`deprecated`, `info`, ...).
    pub name: Identifier,
    /// Call arguments, when written with parentheses.
    pub args: Option<CallArgs>,
    /// From `@` to the end.
    pub span: Span,
}

/// A formal parameter of a schema, rule or lambda: `name[: T][ = default]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Parameter name.
    pub name: Name,
    /// Declared type.
    pub ty: Option<Type>,
    /// Default value.
    pub default: Option<Expr>,
    /// The whole parameter.
    pub span: Span,
}

/// `schema Name[params](Parent) for Protocol:` with its body. Also used for `mixin` and
/// `protocol` definitions (see [`SchemaStmt::kind`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaStmt {
    /// Docstring (first string literal of the body).
    pub doc: Option<StrLit>,
    /// Schema name.
    pub name: Name,
    /// `schema`, `mixin` or `protocol`.
    pub kind: SchemaKind,
    /// Base schema `(Parent)`.
    pub parent: Option<Identifier>,
    /// `for Protocol` (mixins).
    pub for_host: Option<Identifier>,
    /// `[a, b = 1]` parameters; `None` when absent (distinct from `[]`).
    pub params: Option<Vec<Param>>,
    /// `mixin [A, B]` in the body.
    pub mixins: Vec<Identifier>,
    /// Attributes and other statements of the body, in order.
    pub body: Vec<Stmt>,
    /// Decorators before `schema`.
    pub decorators: Vec<Decorator>,
    /// `check:` block entries.
    pub checks: Vec<CheckExpr>,
    /// `[name: K]: V [= default]` index signature.
    pub index_signature: Option<IndexSignature>,
}

/// Which keyword introduced a [`SchemaStmt`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaKind {
    /// `schema`
    Schema,
    /// `mixin`
    Mixin,
    /// `protocol`
    Protocol,
}

impl SchemaStmt {
    /// Upstream treats a schema whose name ends in `Mixin` as a mixin.
    pub fn is_mixin(&self) -> bool {
        self.kind == SchemaKind::Mixin || self.name.sym.as_str().ends_with("Mixin")
    }
    /// True for `protocol` definitions (and, as upstream reads them, schemas named `...Protocol`).
    pub fn is_protocol(&self) -> bool {
        self.kind == SchemaKind::Protocol || self.name.sym.as_str().ends_with("Protocol")
    }
}

/// A schema attribute `[@decorators] name[?]: T [op value]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaAttr {
    /// Attribute docstring. The parser never sets it (KCL attaches docstrings to schemas, not
    /// attributes); it exists so doc tools can attach text without changing the tree type.
    pub doc: Option<StrLit>,
    /// The attribute name; for a quoted name (`"a-b": str`) the decoded string.
    pub name: Name,
    /// True when the name was written as a string literal.
    pub quoted: bool,
    /// `?` after the name.
    pub optional: bool,
    /// Declared type.
    pub ty: Type,
    /// `=` or an augmented operator before the default value.
    pub op: Option<AttrOp>,
    /// Default value.
    pub value: Option<Expr>,
    /// Decorators on the lines before.
    pub decorators: Vec<Decorator>,
}

impl SchemaAttr {
    /// Where upstream places the declaration: at its first decorator, if any, else at the name
    /// (for a type error about the declaration and a "variable is defined here" note).
    pub fn decl_span(&self) -> Span {
        match self.decorators.first() {
            Some(d) => Span::new(self.name.span.file, d.span.lo, self.name.span.hi),
            None => self.name.span,
        }
    }
}

/// Operator between a schema attribute's type and its default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrOp {
    /// `=`
    Assign,
    /// `+=`, `|=`, ...
    Aug(AugOp),
}

/// `[name: K]: V [= default]`, `[K]: V` or `[...K]: V` in a schema body.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexSignature {
    /// Optional key variable name.
    pub key_name: Option<Name>,
    /// Key type.
    pub key_ty: Type,
    /// Value type.
    pub value_ty: Type,
    /// Default value.
    pub value: Option<Expr>,
    /// `...` before the key type (other attributes may be present too).
    pub any_other: bool,
    /// The whole signature.
    pub span: Span,
}

/// One line of a `check:` block: `test [if cond] [, msg]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckExpr {
    /// The checked condition.
    pub test: Expr,
    /// Only check when this holds.
    pub if_cond: Option<Expr>,
    /// Failure message.
    pub msg: Option<Expr>,
    /// The whole line.
    pub span: Span,
}

/// `rule Name[params](Parents...) for Protocol: checks`.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleStmt {
    /// Docstring.
    pub doc: Option<StrLit>,
    /// Rule name.
    pub name: Name,
    /// Parent rules.
    pub parents: Vec<Identifier>,
    /// `for Protocol`.
    pub for_host: Option<Identifier>,
    /// Parameters.
    pub params: Option<Vec<Param>>,
    /// Decorators.
    pub decorators: Vec<Decorator>,
    /// The checks (each line of the body).
    pub checks: Vec<CheckExpr>,
}

/// `type Name = T`.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeAliasStmt {
    /// Alias name.
    pub name: Name,
    /// Aliased type.
    pub ty: Type,
}

// ----------------------------------------------------------------------- types ------

/// A type annotation.
#[derive(Clone, Debug, PartialEq)]
pub struct Type {
    /// The type form.
    pub kind: TypeKind,
    /// Where it is written.
    pub span: Span,
}

/// Type forms.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeKind {
    /// `any`
    Any,
    /// `bool`, `int`, `float`, `str`
    Basic(BasicType),
    /// A schema or alias name, possibly dotted (`pkg.Schema`).
    Named(Identifier),
    /// `[T]`; `[]` has no element type.
    List(Option<Box<Type>>),
    /// `{K:V}`; `{}` has neither.
    Dict(Option<Box<Type>>, Option<Box<Type>>),
    /// `A | B | C` (at least two members).
    Union(Vec<Type>),
    /// A literal type `"a"`, `1`, `2.0`, `True`, `None`, `1Ki`.
    Literal(LiteralType),
    /// `(A, B) -> R`; `ret` is `None` when no `->` was written.
    Function {
        params: Vec<Type>,
        ret: Option<Box<Type>>,
    },
}

/// Built-in scalar types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BasicType {
    /// `bool`
    Bool,
    /// `int`
    Int,
    /// `float`
    Float,
    /// `str`
    Str,
}

/// The value of a literal type.
#[derive(Clone, Debug, PartialEq)]
pub enum LiteralType {
    /// `True` / `False`
    Bool(bool),
    /// Integer literal (with its unit suffix, if any).
    Int(i64, Option<NumberSuffix>),
    /// Float literal.
    Float(f64),
    /// String literal.
    Str(Arc<str>),
    /// `None`
    None,
    /// `Undefined`
    Undefined,
}

// ----------------------------------------------------------------- expressions ------

/// An expression with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// The expression form.
    pub kind: ExprKind,
    /// Where it is written.
    pub span: Span,
}

/// Expression forms.
///
/// Kept to 24 bytes (an [`Expr`] is 40): a large config is mostly expressions, so variants with
/// more than 16 bytes of fields are boxed and sequences are boxed slices (no spare capacity).
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A variable reference.
    Ident(Symbol),
    /// Integer literal (decimal, `0x`, `0o`, `0b`).
    Int(i64),
    /// Float literal.
    Float(f64),
    /// Integer with a unit suffix: `1Ki`, `2M`. `value` is the number as written (not scaled).
    NumberUnit { value: i64, suffix: NumberSuffix },
    /// Plain string literal (no interpolation).
    Str(Arc<str>),
    /// String with `${...}` interpolations.
    JoinedStr(Box<[StrPart]>),
    /// `True` / `False`.
    Bool(bool),
    /// `None`.
    None,
    /// `Undefined`.
    Undefined,
    /// `op operand`.
    Unary { op: UnaryOp, operand: Box<Expr> },
    /// `left op right` (arithmetic, bitwise, `and`, `or`).
    Binary {
        op: BinOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// A comparison chain `a < b <= c`.
    Compare(Box<CompareExpr>),
    /// `then if cond else orelse`.
    If(Box<IfExpr>),
    /// `value.attr` or `value?.attr`.
    Selector(Box<SelectorExpr>),
    /// `value[index]` or `value?[index]`.
    Subscript {
        value: Box<Expr>,
        index: Box<Expr>,
        optional: bool,
    },
    /// `value[lower:upper:step]` (any part may be absent).
    Slice(Box<SliceExpr>),
    /// `func(args)`.
    Call {
        func: Box<Expr>,
        args: Box<CallArgs>,
    },
    /// `(inner)`.
    Paren(Box<Expr>),
    /// `[a, b, *c, if x: d]`.
    List(Box<[Expr]>),
    /// `if cond: items [elif ...] [else: items]` inside a list literal.
    ListIf(Box<ListIfItem>),
    /// `*value` inside a list literal.
    Starred(Box<Expr>),
    /// `{k: v, k2 = v2, **x, if c: ...}` config/dict literal.
    Config(Box<[ConfigEntry]>),
    /// `[elt for x in xs if c]`.
    ListComp(Box<ListComp>),
    /// `{k: v for k, v in d}`.
    DictComp(Box<DictComp>),
    /// `all/any/map/filter x in xs { test [if cond] }`.
    Quant(Box<QuantExpr>),
    /// `Name {...}` or `Name(args) {...}` schema instantiation.
    Schema(Box<SchemaExpr>),
    /// `lambda params [-> T] { body }`.
    Lambda(Box<LambdaExpr>),
    /// `value as T`.
    As { value: Box<Expr>, ty: Box<Type> },
    /// Placeholder produced by error recovery; never present in an `Ok` parse.
    Missing,
}

/// `left op right [op right ...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareExpr {
    /// The first operand.
    pub left: Expr,
    /// The `(op, right)` pairs in order.
    pub ops: Vec<(CmpOp, Expr)>,
}

/// `then if cond else orelse`.
#[derive(Clone, Debug, PartialEq)]
pub struct IfExpr {
    /// The condition.
    pub cond: Expr,
    /// Value when `cond` is truthy.
    pub then: Expr,
    /// Value otherwise.
    pub orelse: Expr,
}

/// `value.attr` or `value?.attr`.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectorExpr {
    /// The object.
    pub value: Expr,
    /// The attribute name.
    pub attr: Name,
    /// `?.` was used.
    pub optional: bool,
}

/// One piece of a [`ExprKind::JoinedStr`].
#[derive(Clone, Debug, PartialEq)]
pub enum StrPart {
    /// Literal text (escapes decoded).
    Lit(Arc<str>),
    /// `${expr}` or `${expr: spec}`; `spec` is the text after the colon, trimmed (e.g. `#json`).
    Interp { expr: Expr, spec: Option<Arc<str>> },
}

/// Unit suffixes of number literals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberSuffix {
    /// `n` = 1e-9
    N,
    /// `u` = 1e-6
    U,
    /// `m` = 1e-3
    M,
    /// `k` = 1e3
    K,
    /// `K` = 1e3
    KUpper,
    /// `M` = 1e6
    MUpper,
    /// `G` = 1e9
    G,
    /// `T` = 1e12
    T,
    /// `P` = 1e15
    P,
    /// `Ki` = 2^10
    Ki,
    /// `Mi` = 2^20
    Mi,
    /// `Gi` = 2^30
    Gi,
    /// `Ti` = 2^40
    Ti,
    /// `Pi` = 2^50
    Pi,
}

impl NumberSuffix {
    /// Parses a suffix as written.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "n" => Self::N,
            "u" => Self::U,
            "m" => Self::M,
            "k" => Self::K,
            "K" => Self::KUpper,
            "M" => Self::MUpper,
            "G" => Self::G,
            "T" => Self::T,
            "P" => Self::P,
            "Ki" => Self::Ki,
            "Mi" => Self::Mi,
            "Gi" => Self::Gi,
            "Ti" => Self::Ti,
            "Pi" => Self::Pi,
            _ => return None,
        })
    }
    /// The suffix as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::N => "n",
            Self::U => "u",
            Self::M => "m",
            Self::K => "k",
            Self::KUpper => "K",
            Self::MUpper => "M",
            Self::G => "G",
            Self::T => "T",
            Self::P => "P",
            Self::Ki => "Ki",
            Self::Mi => "Mi",
            Self::Gi => "Gi",
            Self::Ti => "Ti",
            Self::Pi => "Pi",
        }
    }
    /// The multiplier as a float (`n` is 1e-9, `Ki` is 1024, ...).
    pub fn factor(self) -> f64 {
        match self {
            Self::N => 1e-9,
            Self::U => 1e-6,
            Self::M => 1e-3,
            Self::K | Self::KUpper => 1e3,
            Self::MUpper => 1e6,
            Self::G => 1e9,
            Self::T => 1e12,
            Self::P => 1e15,
            Self::Ki => 1024.0,
            Self::Mi => 1048576.0,
            Self::Gi => 1073741824.0,
            Self::Ti => 1099511627776.0,
            Self::Pi => 1125899906842624.0,
        }
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// `+x`
    Pos,
    /// `-x`
    Neg,
    /// `~x`
    Invert,
    /// `not x`
    Not,
}

/// Binary operators (comparisons are [`CmpOp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
    /// `**`
    Pow,
    /// `//`
    FloorDiv,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `&`
    BitAnd,
    /// `|` (also union of configs)
    BitOr,
    /// `^`
    BitXor,
    /// `and`
    And,
    /// `or`
    Or,
}

impl BinOp {
    /// Source text of the operator.
    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::FloorDiv => "//",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtE,
    /// `>`
    Gt,
    /// `>=`
    GtE,
    /// `is`
    Is,
    /// `is not`
    IsNot,
    /// `in`
    In,
    /// `not in`
    NotIn,
}

impl CmpOp {
    /// Source text of the operator.
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::NotEq => "!=",
            CmpOp::Lt => "<",
            CmpOp::LtE => "<=",
            CmpOp::Gt => ">",
            CmpOp::GtE => ">=",
            CmpOp::Is => "is",
            CmpOp::IsNot => "is not",
            CmpOp::In => "in",
            CmpOp::NotIn => "not in",
        }
    }
}

/// `value[lower:upper:step]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SliceExpr {
    /// The sliced value.
    pub value: Expr,
    /// Start.
    pub lower: Option<Expr>,
    /// End.
    pub upper: Option<Expr>,
    /// Step.
    pub step: Option<Expr>,
    /// `?[` was used.
    pub optional: bool,
}

/// Arguments of a call, schema instantiation or decorator.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct CallArgs {
    /// Positional arguments.
    pub args: Vec<Expr>,
    /// Keyword arguments `name=value`, after the positional ones.
    pub keywords: Vec<Keyword>,
}

/// `name=value` argument.
#[derive(Clone, Debug, PartialEq)]
pub struct Keyword {
    /// Argument name.
    pub name: Name,
    /// Argument value.
    pub value: Expr,
}

/// `if cond: exprs [elif ...] [else: exprs]` inside a list literal.
#[derive(Clone, Debug, PartialEq)]
pub struct ListIfItem {
    /// The condition.
    pub cond: Expr,
    /// Items added when true.
    pub body: Vec<Expr>,
    /// Items added otherwise; an `elif` is a single nested [`ExprKind::ListIf`].
    pub orelse: Vec<Expr>,
}

/// One entry of a config/dict literal. Its span ([`ConfigEntry::span`]) is derived from its
/// parts rather than stored: large configs hold tens of thousands of entries.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigEntry {
    /// The entry form.
    pub kind: ConfigEntryKind,
}

impl ConfigEntry {
    /// The whole entry: from the key to the end of the value, from `**`, or from `if`.
    pub fn span(&self) -> Span {
        match &self.kind {
            ConfigEntryKind::KeyValue { key, value, .. } => Span {
                file: key.span.file,
                lo: key.span.lo,
                hi: key.span.hi.max(value.span.hi),
            },
            ConfigEntryKind::Unpack { span, .. } => *span,
            ConfigEntryKind::If(ci) => ci.span,
        }
    }
}

/// Config entry forms.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigEntryKind {
    /// `key op value`. The key is an identifier, a selector chain (`a.b.c: 1` nests), a
    /// string, a subscript `a[0]` (list-index update) or any other expression.
    KeyValue {
        key: Expr,
        op: ConfigOp,
        value: Expr,
    },
    /// `**value`; `span` covers the `**` too.
    Unpack { value: Expr, span: Span },
    /// `if cond: entries [elif ...] [else: entries]`.
    If(Box<ConfigIf>),
}

/// Operator between a config key and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigOp {
    /// `:` (merge/unify)
    Union,
    /// `=` (override)
    Override,
    /// `+=` (append/insert)
    Insert,
}

impl ConfigOp {
    /// Source text of the operator.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigOp::Union => ":",
            ConfigOp::Override => "=",
            ConfigOp::Insert => "+=",
        }
    }
}

/// `if` inside a config literal.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigIf {
    /// The condition.
    pub cond: Expr,
    /// Entries when true.
    pub body: Vec<ConfigEntry>,
    /// Entries otherwise; an `elif` is a single nested `If` entry.
    pub orelse: Vec<ConfigEntry>,
    /// From `if` to the end of the last entry.
    pub span: Span,
}

/// One `for targets in iter [if cond]...` clause of a comprehension.
#[derive(Clone, Debug, PartialEq)]
pub struct CompClause {
    /// Loop variables (one or two, upstream rejects more later; dotted names are parsed and
    /// rejected later too).
    pub targets: Vec<Identifier>,
    /// The iterated value.
    pub iter: Expr,
    /// Filter conditions.
    pub ifs: Vec<Expr>,
    /// The whole clause.
    pub span: Span,
}

/// `[elt for ...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ListComp {
    /// Produced element.
    pub elt: Expr,
    /// Clauses, outermost first.
    pub clauses: Vec<CompClause>,
}

/// `{key: value for ...}` (also `{key = value for ...}`, `**x for ...` is not supported).
#[derive(Clone, Debug, PartialEq)]
pub struct DictComp {
    /// Key expression.
    pub key: Expr,
    /// The entry operator.
    pub op: ConfigOp,
    /// Value expression.
    pub value: Expr,
    /// Clauses, outermost first.
    pub clauses: Vec<CompClause>,
}

/// Quantifier kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantOp {
    /// `all`
    All,
    /// `any`
    Any,
    /// `map`
    Map,
    /// `filter`
    Filter,
}

impl QuantOp {
    /// Keyword text.
    pub fn as_str(self) -> &'static str {
        match self {
            QuantOp::All => "all",
            QuantOp::Any => "any",
            QuantOp::Map => "map",
            QuantOp::Filter => "filter",
        }
    }
}

/// `op vars in target { test [if cond] }`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantExpr {
    /// Which quantifier.
    pub op: QuantOp,
    /// Loop variables (one or two).
    pub vars: Vec<Name>,
    /// The iterated value.
    pub target: Expr,
    /// Body expression.
    pub test: Expr,
    /// Optional filter.
    pub if_cond: Option<Expr>,
}

/// `Name {config}` or `Name(args) {config}`.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaExpr {
    /// The schema name (dotted for imported schemas).
    pub name: Identifier,
    /// Constructor arguments when written with parentheses.
    pub args: Option<CallArgs>,
    /// The config; always an [`ExprKind::Config`] or [`ExprKind::DictComp`].
    pub config: Expr,
}

/// `lambda params [-> T] { body }`.
#[derive(Clone, Debug, PartialEq)]
pub struct LambdaExpr {
    /// Parameters.
    pub params: Vec<Param>,
    /// Declared return type.
    pub ret: Option<Type>,
    /// Body statements; the value of the last expression statement is the result.
    pub body: Vec<Stmt>,
}

impl Expr {
    /// `a` or `a.b.c` written with names only (no `?.`), as its names and their spans; `None`
    /// for any other expression.
    pub fn name_path(&self) -> Option<Vec<(Symbol, Span)>> {
        match &self.kind {
            ExprKind::Ident(s) => Some(vec![(*s, self.span)]),
            ExprKind::Selector(x) if !x.optional => {
                let mut p = x.value.name_path()?;
                p.push((x.attr.sym, x.attr.span));
                Some(p)
            }
            _ => None,
        }
    }

    /// A placeholder expression used by error recovery.
    pub fn missing(span: Span) -> Expr {
        Expr {
            kind: ExprKind::Missing,
            span,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_expressions() {
        // Large configs are mostly expressions and config entries (see `ExprKind`).
        assert_eq!(size_of::<ExprKind>(), 24);
        assert_eq!(size_of::<Expr>(), 40);
        assert_eq!(size_of::<ConfigEntry>(), 88);
    }
}
