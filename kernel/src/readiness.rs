//! Readiness rules a resource carries itself (extension [`EXT_READINESS`]: an expression over the
//! live object, e.g. `status.phase == "Active"`). The kernel cannot evaluate KCL (it does not
//! depend on the evaluator), so whoever can puts a [`ReadinessHook`] on the stack's
//! [`Registry`](crate::registry::Registry); the apply loop calls it with the live object of every
//! watch event. Without a hook such a resource fails with a clear "unsupported" instead of being
//! judged by the runtime's built-in rules the user replaced.

use kusion_sdk::Resource;
pub use kusion_sdk::runtime::EXT_READINESS;
use serde_json::Value;

/// What a readiness rule says about one live object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Ready.
    Ready,
    /// Not ready (yet), with why.
    NotReady(String),
}

/// Evaluates readiness rules.
pub trait ReadinessHook: Send + Sync {
    /// Judge `expression` (the rule of resource `id`) over `live`; `Err` when the rule itself is
    /// broken (does not parse, is not a boolean, ...), which fails the resource.
    fn judge(&self, id: &str, expression: &str, live: &Value) -> Result<Verdict, String>;
}

/// The readiness rule of `resource`, if it has one.
pub fn rule_of(resource: &Resource) -> Result<Option<&str>, String> {
    match resource.extensions.get(EXT_READINESS) {
        None => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.as_str())),
        Some(_) => Err(format!(
            "extension `{EXT_READINESS}` must be a non-empty string (an expression over the live object)"
        )),
    }
}

/// The message for a rule no hook can judge.
pub fn unsupported(expression: &str) -> String {
    format!(
        "Unsupported: the readiness rule `{expression}` (extension `{EXT_READINESS}`) needs a \
         rule evaluator, and this stack's registry has none (kusionctl gives stacks the KCL one)"
    )
}
