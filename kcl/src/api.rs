//! The parts of the public face that are not plain re-exports: the static check of a loaded
//! program, a few value helpers, and [`RuleProgram`], the narrow handle a host (the
//! policy plugin) uses to instantiate a program's rules one at a time without reaching into the
//! evaluator.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::ast::{Span, StmtKind, Symbol};
use crate::eval::{EvalError, EvalOptions, Evaluator, Pkg, SchemaType};
use crate::parser::loader::{LoadOptions, Program, load_program_cached};
use crate::run::KclError;
use crate::value::{Dict, ErrKind, Func, Str, Value};

/// Statically check a loaded program, as `kcl run` does before evaluating it: type errors,
/// import cycles, malformed schemas and rules.
pub fn check(program: &Program) -> Result<(), EvalError> {
    crate::types::check_program(program).map(|_| ())
}

/// Whether `name` is a KCL keyword (so not usable as a plain identifier).
pub fn is_keyword(name: &str) -> bool {
    crate::lexer::KEYWORDS.contains(&name)
}

/// Helpers for hosts that build and read values without the evaluator's internals.
impl Value {
    /// The value of `key` in a dict (not a schema instance), if any.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(d) => d.get(key),
            _ => None,
        }
    }
    /// Whether this is a dict.
    pub fn is_dict(&self) -> bool {
        matches!(self, Value::Dict(_))
    }
    /// A list of `items`.
    pub fn list(items: Vec<Value>) -> Value {
        Value::from(items)
    }
    /// A dict of `pairs`, in order.
    pub fn dict<'a>(pairs: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
        let mut d = Dict::new();
        for (k, v) in pairs {
            d.insert(Str::from(k), v);
        }
        Value::from(d)
    }
}

/// A rule (or schema) declared in a [`RuleProgram`]'s main package: its name and where.
#[derive(Debug, Clone)]
pub struct Declared {
    pub name: String,
    pub span: Span,
}

/// A program loaded from a set of files and statically checked, whose rules a host instantiates
/// one at a time with its own values bound (see [`RuleProgram::start`]).
pub struct RuleProgram {
    program: Program,
    dir: PathBuf,
    rules: Vec<Declared>,
}

impl RuleProgram {
    /// Parse `files` (looking for `kcl.mod` from `dir`) and check the program statically. A
    /// parse error is [`KclError::Syntax`] (the rendered diagnostics), a check error
    /// [`KclError::Eval`].
    pub fn load(files: &[PathBuf], dir: &Path) -> Result<RuleProgram, KclError> {
        // the process's cache: a policy host loads the same rules for every check
        let program = load_program_cached(
            files,
            &LoadOptions {
                external: Vec::new(),
                work_dir: Some(dir.to_path_buf()),
            },
            Some(crate::parser::loader::process_cache()),
        )
        .map_err(|d| KclError::Syntax(d.to_string()))?;
        check(&program).map_err(KclError::Eval)?;
        let rules = program
            .main
            .modules
            .iter()
            .flat_map(|m| m.body.iter())
            .filter_map(|s| match &s.kind {
                StmtKind::Rule(r) => Some(Declared {
                    name: r.name.sym.as_str().to_string(),
                    span: r.name.span,
                }),
                _ => None,
            })
            .collect();
        Ok(RuleProgram {
            program,
            dir: dir.to_path_buf(),
            rules,
        })
    }

    /// The `rule` statements of the main package, in source order.
    pub fn rules(&self) -> &[Declared] {
        &self.rules
    }

    /// Start evaluating: `options` are what `option(name)` returns; file functions resolve
    /// against the program's directory. Resolution errors (an unknown name, a bad import) are
    /// reported here.
    pub fn start(self, options: Vec<(String, Value)>) -> Result<RuleSession, EvalError> {
        let eopts = EvalOptions {
            args: options,
            work_dir: self.dir.clone(),
            ..Default::default()
        };
        let (ev, modules) = Evaluator::new(self.program, eopts);
        let pkg = ev.make_pkg("__main__", self.dir, modules)?;
        Ok(RuleSession { ev, pkg })
    }
}

/// An evaluating [`RuleProgram`].
pub struct RuleSession {
    ev: Evaluator,
    pkg: Rc<Pkg>,
}

/// A rule (or schema) type of a [`RuleSession`], found by [`RuleSession::rule`].
pub struct RuleType(Rc<SchemaType>);

/// The name of a value bound when a rule is instantiated; made once, reused for every call.
#[derive(Clone)]
pub struct Binding(Str);

impl Binding {
    pub fn new(name: &str) -> Binding {
        Binding(Str::from(name))
    }
}

/// The outcome of instantiating a rule.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Every check held.
    Pass,
    /// A check failed.
    Fail(CheckFailure),
}

/// A failed check of a rule.
#[derive(Debug, Clone)]
pub struct CheckFailure {
    /// The message written after the condition (`cond, "message"`), when there is a non-empty
    /// one.
    pub message: Option<String>,
    /// The condition's source text (up to its first comma), empty when unavailable.
    pub condition: String,
    /// Where the failed condition is.
    pub span: Span,
}

const CHECK_PREFIX: &str = "Check failed on the condition";

/// The failed check an evaluation error stands for, or `None` when it is another error.
fn check_failure(e: &EvalError) -> Option<CheckFailure> {
    if e.kind != ErrKind::Schema {
        return None;
    }
    let (span, note) = e.notes.last()?;
    let rest = note.strip_prefix(CHECK_PREFIX)?;
    let msg = rest.strip_prefix(": ").unwrap_or("").trim();
    let condition = span
        .text()
        .map(|t| t.split(',').next().unwrap_or(&t).trim().to_string())
        .unwrap_or_default();
    Some(CheckFailure {
        message: (!msg.is_empty()).then(|| msg.to_string()),
        condition,
        span: *span,
    })
}

impl RuleSession {
    /// Run the package's top-level statements (lookup tables, allowed lists), once.
    pub fn run_top_level(&self) -> Result<(), EvalError> {
        self.ev.run_pkg(&self.pkg)
    }

    /// The rule or schema type named `name` at the top level, `None` when the name is bound to
    /// something else (or nothing).
    pub fn rule(&self, name: &str) -> Result<Option<RuleType>, EvalError> {
        Ok(self
            .ev
            .get_global(&self.pkg, Symbol::intern(name), false)?
            .as_ref()
            .and_then(|v| match v {
                Value::Func(f) => match &**f {
                    Func::User { data, .. } => data.clone().downcast::<SchemaType>().ok(),
                    _ => None,
                },
                _ => None,
            })
            .map(RuleType))
    }

    /// Instantiate `rule` with `bindings` as its configuration: [`Verdict::Fail`] when one of
    /// its checks fails, an error for any other failure.
    pub fn instantiate<'a>(
        &self,
        rule: &RuleType,
        bindings: impl IntoIterator<Item = (&'a Binding, Value)>,
    ) -> Result<Verdict, EvalError> {
        let bindings = bindings.into_iter();
        let mut config = Dict::with_capacity(bindings.size_hint().0);
        for (k, v) in bindings {
            config.insert(k.0.clone(), v);
        }
        match self
            .ev
            .instantiate(&rule.0, &[], &[], config, Span::default())
        {
            Ok(_) => Ok(Verdict::Pass),
            Err(e) => match check_failure(&e) {
                Some(f) => Ok(Verdict::Fail(f)),
                None => Err(e),
            },
        }
    }
}
