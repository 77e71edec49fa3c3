//! Runtime values of the KCL evaluator.
//!
//! Values are cheap to clone: every compound value sits behind an `Rc`, and mutation goes through
//! `Rc::make_mut` (copy-on-write), so sharing a large config between variables costs a pointer.
//! Dict keys are [`Str`] (a thin `Rc<str>`) so the same key string is shared by every dict that
//! uses it.

mod dict;
pub(crate) mod json;
mod num;
mod ops;
mod rcstr;
mod strfmt;
mod union;

use std::any::Any;
use std::fmt;
use std::rc::Rc;

use indexmap::IndexMap;
use rustc_hash::FxBuildHasher;

pub use dict::{Dict, Ops};
pub use num::{float_to_str, float_to_yaml, unit_multiplier};
pub use ops::{
    BinOp, binary, compare, strict_range_check, unary_invert, unary_neg, unary_not, unary_pos,
};
pub use strfmt::to_str;
pub use union::{
    Rebuild, check_union, merge_entry, merge_entry_with, union, union_dict_instance, union_with,
};

pub use rcstr::Str;
/// Insertion-ordered map used by dicts and schema instances.
pub type Map = IndexMap<Str, Value, FxBuildHasher>;

/// How a config entry was written: `:` (union), `=` (override) or `+=` (insert).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConfigOp {
    #[default]
    Union,
    Override,
    Insert,
}

/// A runtime error raised while evaluating; the evaluator attaches a source position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtError {
    pub kind: ErrKind,
    pub msg: String,
}

/// Upstream's error classes, which decide the `error[CODE]: Title` head line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrKind {
    Evaluation,
    Type,
    Compile,
    Immutable,
    Attribute,
    IndexSignature,
    Assertion,
    Schema,
    RecursionLimit,
    UniqueKey,
    /// A base that cannot be inherited (a mixin).
    IllegalInherit,
    /// A name of the wrong form (a mixin not named `...Mixin`).
    Name,
    /// A parameter list out of order (`non-default argument follows default argument`).
    IllegalParameter,
}

impl ErrKind {
    pub fn code_title(self) -> (&'static str, &'static str) {
        match self {
            ErrKind::Evaluation => ("E3M38", "EvaluationError"),
            ErrKind::Type => ("E2G22", "TypeError"),
            ErrKind::Compile => ("E2L23", "CompileError"),
            ErrKind::Immutable => ("E1001", "ImmutableError"),
            ErrKind::Attribute => ("E2A31", "IllegalAttributeError"),
            ErrKind::IndexSignature => ("E1001", "IndexSignatureError"),
            ErrKind::Assertion => ("E3M38", "EvaluationError"),
            ErrKind::Schema => ("E3M38", "EvaluationError"),
            ErrKind::RecursionLimit => ("E3M38", "EvaluationError"),
            ErrKind::UniqueKey => ("E2L28", "UniqueKeyError"),
            ErrKind::IllegalInherit => ("E2D34", "IllegalInheritError"),
            ErrKind::Name => ("E1001", "NameError"),
            ErrKind::IllegalParameter => ("E1001", "IllegalParameterError"),
        }
    }
}

impl RtError {
    pub fn new(kind: ErrKind, msg: impl Into<String>) -> Self {
        RtError {
            kind,
            msg: msg.into(),
        }
    }
    pub fn eval(msg: impl Into<String>) -> Self {
        Self::new(ErrKind::Evaluation, msg)
    }
    pub fn ty(msg: impl Into<String>) -> Self {
        Self::new(ErrKind::Type, msg)
    }
}

impl fmt::Display for RtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for RtError {}

pub type RtResult<T> = Result<T, RtError>;

/// A number with a unit suffix (`1Ki`, `500m`): it keeps its spelling for `str()`.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// The literal's numeric part.
    pub raw: f64,
    /// The suffix as written (`Ki`, `M`, `m`, ...).
    pub suffix: Str,
}

impl Unit {
    /// The value the suffix stands for (`1Ki` = 1024).
    pub fn value(&self) -> f64 {
        self.raw * unit_multiplier(&self.suffix).unwrap_or(1.0)
    }
}

/// A schema instance: its type name, package and attribute values.
#[derive(Debug, Clone)]
pub struct SchemaInst {
    pub name: Str,
    pub pkg: Str,
    pub attrs: Dict,
    /// The schema type (owned by the evaluator), used for `instanceof` and re-instantiation.
    pub ty: Option<Rc<dyn Any>>,
    /// Where it was instantiated (for errors reported later, e.g. missing attributes).
    pub span: Option<crate::ast::Span>,
    /// Which attributes came from its config, and its arguments, so a later merge
    /// (`inst | {...}`, repeated `a: S {...}`, a dict merged into a nested instance) can
    /// rebuild it with computed attributes re-evaluated and checks run again.
    pub origin: Option<Rc<Origin>>,
}

/// What a schema instance was instantiated with. The config itself is not kept: its keys are,
/// and their values are the instance's final attribute values (as upstream rebuilds), so
/// instances made from configs of one shape share one `Origin`.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    /// Config keys in order; `true` when the entry replaced the attribute (`=`, `+=`) rather
    /// than merging with its default (`:`).
    pub keys: ConfigKeys,
    pub args: Vec<Value>,
    pub kwargs: Vec<(Str, Value)>,
    /// Made from a dict merged with an instance under one key of a config (not made again
    /// there): upstream's config is then that dict itself, so what a later dict sets in place
    /// becomes a config key too.
    pub open: bool,
}

/// The keys of an instance's config; `true` marks an entry that replaced the attribute.
pub type ConfigKeys = Rc<[(Str, bool)]>;

impl SchemaInst {
    /// The entries this instance was configured with `:` (with their final values), in the
    /// order of its attributes: the part of it a merge into another instance checks for
    /// conflicts (upstream walks the attributes, so the first conflict is the first declared).
    pub fn unified_config(&self) -> Dict {
        let mut d = Dict::new();
        if let Some(o) = &self.origin {
            for (k, v) in &self.attrs.map {
                if o.keys.iter().any(|(ck, replaced)| ck == k && !replaced) {
                    d.map.insert(k.clone(), v.clone());
                }
            }
        }
        d
    }
    /// The config this instance is equivalent to: its config keys with their final values.
    pub fn config(&self) -> Dict {
        let Some(o) = &self.origin else {
            return self.attrs.clone();
        };
        let mut d = Dict::with_capacity(o.keys.len());
        for (k, replaced) in o.keys.iter() {
            if let Some(v) = self.attrs.map.get(k) {
                d.map.insert(k.clone(), v.clone());
                if *replaced {
                    d.set_op(k.clone(), ConfigOp::Override, None);
                }
            }
        }
        d
    }
}

impl PartialEq for SchemaInst {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name && self.attrs.map == o.attrs.map
    }
}

/// A native function: positional args and keyword args in, value out.
pub type NativeFn = fn(&mut dyn Host, &[Value], &[(Str, Value)]) -> RtResult<Value>;

/// What builtins may ask of the running program (options, printing, plugin calls, callbacks).
pub trait Host {
    /// `option(key)` lookup: the `-D`/settings value, if given.
    fn option(&mut self, key: &str) -> Option<Value>;
    /// Call a KCL function value with arguments (for builtins taking callbacks).
    fn call(&mut self, f: &Value, args: &[Value], kwargs: &[(Str, Value)]) -> RtResult<Value>;
    /// `print(...)` output.
    fn print(&mut self, text: &str);
    /// `manifests.yaml_stream`: replace the program's output with this text.
    fn set_output(&mut self, text: String);
    /// Working directory for `file.*` relative paths, and the module root.
    fn workdir(&self) -> std::path::PathBuf;
    /// `file.workdir()`: the work directory the run was given (empty when none).
    fn exec_workdir(&self) -> String {
        String::new()
    }
    /// `-r`: numbers are checked against the 32-bit ranges.
    fn strict_range_check(&self) -> bool {
        false
    }
    /// `file.current()`: the file being evaluated.
    fn current_file(&self) -> String {
        String::new()
    }
    fn mod_root(&self) -> std::path::PathBuf;
    /// What `file.*` may reach (unconfined unless the host says otherwise).
    fn access(&self) -> std::borrow::Cow<'_, crate::access::Access> {
        std::borrow::Cow::Owned(crate::access::Access::unconfined())
    }
    /// A plugin call (`kcl_plugin.<module>.<fn>`).
    fn plugin(
        &mut self,
        module: &str,
        func: &str,
        args: &[Value],
        kwargs: &[(Str, Value)],
    ) -> RtResult<Value>;
}

/// A callable value.
pub enum Func {
    Native {
        name: &'static str,
        f: NativeFn,
    },
    /// A builtin method bound to its receiver (`"a".upper`).
    Method {
        name: Str,
        recv: Value,
    },
    /// Anything the evaluator defines (lambdas, schema types); opaque here but for `is_type`
    /// (a schema or rule type, for which `typeof` says "type").
    User {
        name: Str,
        data: Rc<dyn Any>,
        is_type: bool,
    },
}

impl fmt::Debug for Func {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Func::Native { name, .. } => write!(f, "<builtin {name}>"),
            Func::Method { name, .. } => write!(f, "<method {name}>"),
            Func::User { name, .. } => write!(f, "<function {name}>"),
        }
    }
}

/// A KCL value.
#[derive(Debug, Clone, Default)]
pub enum Value {
    #[default]
    Undefined,
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Unit(Rc<Unit>),
    Str(Str),
    List(Rc<Vec<Value>>),
    Dict(Rc<Dict>),
    Schema(Rc<SchemaInst>),
    Func(Rc<Func>),
}

impl PartialEq for Value {
    fn eq(&self, o: &Self) -> bool {
        ops::equal(self, o)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(Str::from(s))
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(Str::from(s))
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}
impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Self {
        Value::List(Rc::new(v))
    }
}
impl From<Dict> for Value {
    fn from(d: Dict) -> Self {
        Value::Dict(Rc::new(d))
    }
}

impl Value {
    pub fn str(s: &str) -> Value {
        Value::Str(Str::from(s))
    }
    pub fn native(name: &'static str, f: NativeFn) -> Value {
        Value::Func(Rc::new(Func::Native { name, f }))
    }
    pub fn empty_dict() -> Value {
        Value::Dict(Rc::new(Dict::new()))
    }
    pub fn is_none_or_undefined(&self) -> bool {
        matches!(self, Value::None | Value::Undefined)
    }
    pub fn is_undefined(&self) -> bool {
        matches!(self, Value::Undefined)
    }
    /// Python-like truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Undefined | Value::None => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Unit(u) => u.raw != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Dict(d) => !d.is_empty(),
            Value::Schema(_) | Value::Func(_) => true,
        }
    }
    /// The type name `typeof` returns and error messages use.
    pub fn type_name(&self) -> String {
        match self {
            Value::Undefined => "UndefinedType".into(),
            Value::None => "NoneType".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_) => "int".into(),
            Value::Float(_) => "float".into(),
            // upstream's run-time type of a unit value names its literal
            Value::Unit(u) => format!(
                "number_multiplier({}{})",
                num::fmt_unit_raw(u.raw),
                u.suffix
            ),
            Value::Str(_) => "str".into(),
            Value::List(_) => "list".into(),
            Value::Dict(_) => "dict".into(),
            Value::Schema(s) => s.name.to_string(),
            // (a schema or rule itself is a `type` to upstream's run time)
            Value::Func(f) if matches!(&**f, Func::User { is_type: true, .. }) => "type".into(),
            Value::Func(_) => "function".into(),
        }
    }
    /// The type name with a schema's package (`pkg.S`; `S` in the main package), as
    /// upstream's `typeof(v, full_name=True)` and run-time type errors print it.
    pub fn type_name_full(&self) -> String {
        match self {
            Value::Schema(s) if !s.pkg.is_empty() && &*s.pkg != "__main__" => {
                format!("{}.{}", s.pkg, s.name)
            }
            _ => self.type_name(),
        }
    }
    /// Type with the value, as upstream's messages print it: `int(1)`, `str(a)`.
    pub fn type_with_value(&self) -> String {
        match self {
            Value::Bool(b) => format!("bool({})", if *b { "True" } else { "False" }),
            Value::Int(i) => format!("int({i})"),
            Value::Float(f) => format!("float({})", float_to_str(*f)),
            Value::Str(s) => format!("str({s})"),
            Value::Unit(u) => format!(
                "number_multiplier({}{})",
                num::fmt_unit_raw(u.raw),
                u.suffix
            ),
            _ => self.type_name(),
        }
    }
    /// Type as upstream's type errors print a value: literals for scalars, element types
    /// with values inside containers (`[str(a) | int(1)]`, `{str(k):str(v)}`).
    pub fn type_detail(&self) -> String {
        fn join(mut v: Vec<String>) -> String {
            let mut seen = std::collections::HashSet::new();
            v.retain(|x| seen.insert(x.clone()));
            v.join(" | ")
        }
        match self {
            Value::List(l) => format!("[{}]", join(l.iter().map(|x| x.type_detail()).collect())),
            Value::Dict(d) => format!(
                "{{{}:{}}}",
                join(d.map.keys().map(|k| format!("str({k})")).collect()),
                join(d.map.values().map(|x| x.type_detail()).collect())
            ),
            _ => self.type_with_value(),
        }
    }
    /// Type as operator errors print it: literals for scalars, plain types inside containers.
    pub fn type_plain_nested(&self) -> String {
        fn plain(v: &Value) -> String {
            match v {
                Value::List(l) => {
                    let mut t: Vec<String> = Vec::new();
                    for x in l.iter() {
                        let s = plain(x);
                        if !t.contains(&s) {
                            t.push(s);
                        }
                    }
                    format!("[{}]", t.join(" | "))
                }
                Value::Dict(d) => {
                    let mut t: Vec<String> = Vec::new();
                    for x in d.map.values() {
                        let s = plain(x);
                        if !t.contains(&s) {
                            t.push(s);
                        }
                    }
                    format!("{{str:{}}}", t.join(" | "))
                }
                other => other.type_name(),
            }
        }
        match self {
            Value::List(_) | Value::Dict(_) => plain(self),
            _ => self.type_with_value(),
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }
    /// Numeric view (int, float, bool, unit).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Bool(b) => Some(*b as i64 as f64),
            Value::Unit(u) => Some(u.value()),
            _ => None,
        }
    }
    /// The attribute map of a dict or schema instance.
    pub fn as_dict(&self) -> Option<&Dict> {
        match self {
            Value::Dict(d) => Some(d),
            Value::Schema(s) => Some(&s.attrs),
            _ => None,
        }
    }
    pub fn is_config(&self) -> bool {
        matches!(self, Value::Dict(_) | Value::Schema(_))
    }
    /// Mutable access to a dict or schema's attributes (copy-on-write).
    pub fn dict_mut(&mut self) -> Option<&mut Dict> {
        match self {
            Value::Dict(d) => Some(Rc::make_mut(d)),
            Value::Schema(s) => Some(&mut Rc::make_mut(s).attrs),
            _ => None,
        }
    }
    pub fn list_items(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }
    /// Iterate like `for x in v`: list items, dict keys, string characters.
    pub fn iter_items(&self) -> RtResult<Vec<Value>> {
        Ok(match self {
            Value::List(l) => l.to_vec(),
            Value::Dict(_) | Value::Schema(_) => self
                .as_dict()
                .unwrap()
                .map
                .keys()
                .map(|k| Value::Str(k.clone()))
                .collect(),
            Value::Str(s) => s.chars().map(|c| Value::from(c.to_string())).collect(),
            Value::None | Value::Undefined => Vec::new(),
            // (upstream's run-time error, without a column)
            other => {
                return Err(RtError::eval(format!(
                    "'{}' object is not iterable",
                    other.type_name()
                )));
            }
        })
    }
    /// `len(v)` is zero.
    pub fn is_empty(&self) -> RtResult<bool> {
        self.len().map(|n| n == 0)
    }
    /// `len(v)`.
    pub fn len(&self) -> RtResult<usize> {
        match self {
            // upstream counts a string's bytes (`len("ünï")` is 5)
            Value::Str(s) => Ok(s.len()),
            Value::List(l) => Ok(l.len()),
            Value::Dict(d) => Ok(d.len()),
            Value::Schema(s) => Ok(s.attrs.len()),
            other => Err(RtError::eval(format!(
                "object of type '{}' has no len()",
                other.type_name()
            ))),
        }
    }
    /// Strip `None` values recursively (`-n`).
    pub fn without_none(&self) -> Value {
        match self {
            Value::List(l) => Value::from(
                l.iter()
                    .filter(|v| !v.is_none_or_undefined())
                    .map(|v| v.without_none())
                    .collect::<Vec<_>>(),
            ),
            Value::Dict(_) | Value::Schema(_) => {
                let d = self.as_dict().unwrap();
                let mut out = Dict::with_capacity(d.len());
                for (k, v) in &d.map {
                    if !v.is_none_or_undefined() {
                        out.map.insert(k.clone(), v.without_none());
                    }
                }
                match self {
                    Value::Schema(s) => Value::Schema(Rc::new(SchemaInst {
                        attrs: out,
                        ..(**s).clone()
                    })),
                    _ => Value::from(out),
                }
            }
            v => v.clone(),
        }
    }
}

/// Build a dict value from pairs.
pub fn dict_of(pairs: impl IntoIterator<Item = (Str, Value)>) -> Value {
    let mut d = Dict::new();
    for (k, v) in pairs {
        d.map.insert(k, v);
    }
    Value::from(d)
}

/// Stack-depth guard shared by recursive value walks and the evaluator.
pub const MAX_DEPTH: usize = 2000;

/// Ordering used by `max` and `min` (the `<` operator's order).
pub fn ops_cmp(a: &Value, b: &Value) -> RtResult<std::cmp::Ordering> {
    ops::cmp_values(a, b)
}

/// Ordering used by `sorted`: upstream sorts with a narrower order than `<`, numbers
/// with numbers and strings with strings; anything else (bools, lists, None) is an
/// evaluation error naming both types.
pub fn sort_cmp(a: &Value, b: &Value) -> RtResult<std::cmp::Ordering> {
    let ord = match (a, b) {
        (Value::Str(x), Value::Str(y)) => Some(x.as_str().cmp(y.as_str())),
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => a
            .as_f64()
            .unwrap_or(0.0)
            .partial_cmp(&b.as_f64().unwrap_or(0.0)),
        _ => None,
    };
    ord.ok_or_else(|| {
        RtError::eval(format!(
            "cannot compare {} and {}",
            a.type_name(),
            b.type_name()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_layout() {
        // Lists of scalars and dict entries are most of a large program's heap.
        assert_eq!(size_of::<Value>(), 16);
        assert_eq!(size_of::<Dict>(), 64);
    }

    #[test]
    fn clone_shares_lists() {
        let a = Value::from(vec![Value::Int(1), Value::Int(2)]);
        let b = a.clone();
        match (&a, &b) {
            (Value::List(x), Value::List(y)) => assert!(Rc::ptr_eq(x, y)),
            _ => unreachable!(),
        }
    }

    #[test]
    fn copy_on_write_dict() {
        let mut a = dict_of([(Str::from("x"), Value::Int(1))]);
        let b = a.clone();
        a.dict_mut().unwrap().insert(Str::from("y"), Value::Int(2));
        assert_eq!(a.len().unwrap(), 2);
        assert_eq!(b.len().unwrap(), 1);
    }

    #[test]
    fn truthiness_and_types() {
        assert!(!Value::None.truthy());
        assert!(!Value::str("").truthy());
        assert!(Value::Int(3).truthy());
        assert_eq!(Value::Int(1).type_with_value(), "int(1)");
        assert_eq!(Value::Bool(false).type_with_value(), "bool(False)");
        assert_eq!(Value::None.type_name(), "NoneType");
    }
}
