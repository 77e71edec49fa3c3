//! Evaluation of a policy set over a spec with the KCL evaluator.
//!
//! One KCL program per set and call: the set's files are loaded once, the spec and context are
//! handed in as `option("spec")` / `option("context")` (already converted to KCL values, shared
//! by every set), package-level values (lookup tables, allowed lists) are computed once, and then
//! each rule is instantiated once per matching resource with `resource` bound. A failed check is a
//! finding; any other error is an error of the policy, naming the set, the rule and the resource.

use std::rc::Rc;

use kusion_kcl::ast::Symbol;
use kusion_kcl::eval::{EvalOptions, Evaluator, SchemaType};
use kusion_kcl::parser::loader::{LoadOptions, load_program};
use kusion_kcl::value::{Dict, ErrKind, Func, Str, Value as KValue};
use kusion_sdk::policy::Finding;
use serde_json::Value;

use crate::PolicyError;
use crate::set::{PolicySet, Rule, Scope};

/// What a rule sees of one resource, computed once per evaluation for every set.
pub struct Prepared {
    pub resources: Vec<PreparedResource>,
    pub spec: KValue,
    pub context: KValue,
    pub stack: String,
}

pub struct PreparedResource {
    pub id: Option<String>,
    pub resource_type: String,
    /// Kubernetes `kind`, Terraform `resourceType`, else the `type`.
    pub kind: String,
    pub value: KValue,
    /// The pod spec of a Kubernetes workload (`{}` otherwise), bound as `pod`.
    pub pod: KValue,
    /// Every container of that pod spec, init containers first, bound as `containers`.
    pub containers: KValue,
}

fn kget<'a>(v: &'a KValue, key: &str) -> Option<&'a KValue> {
    match v {
        KValue::Dict(d) => d.get(key),
        _ => None,
    }
}

fn kpath<'a>(v: &'a KValue, path: &[&str]) -> Option<&'a KValue> {
    path.iter().try_fold(v, |v, k| kget(v, k))
}

/// The pod spec and containers of a Kubernetes workload, computed once per resource in Rust so
/// that every rule reads them without walking the manifest again.
fn workload_views(resource: &Value, value: &KValue) -> (KValue, KValue) {
    let empty = || {
        (
            KValue::Dict(Rc::new(Dict::new())),
            KValue::List(Rc::new(Vec::new())),
        )
    };
    if resource["type"] != "Kubernetes" {
        return empty();
    }
    let Some(attrs) = kget(value, "attributes") else {
        return empty();
    };
    let path: &[&str] = match resource["attributes"]["kind"].as_str() {
        Some("Pod") => &["spec"],
        Some("CronJob") => &["spec", "jobTemplate", "spec", "template", "spec"],
        Some(_) => &["spec", "template", "spec"],
        None => return empty(),
    };
    let Some(pod @ KValue::Dict(_)) = kpath(attrs, path) else {
        return empty();
    };
    let mut containers = Vec::new();
    for key in ["initContainers", "containers"] {
        if let Some(KValue::List(l)) = kget(pod, key) {
            containers.extend(l.iter().cloned());
        }
    }
    (pod.clone(), KValue::List(Rc::new(containers)))
}

fn kind_of(resource: &Value) -> String {
    let from = |v: &Value| v.as_str().map(str::to_string);
    from(&resource["attributes"]["kind"])
        .or_else(|| from(&resource["extensions"]["resourceType"]))
        .or_else(|| from(&resource["type"]))
        .unwrap_or_default()
}

/// Convert the spec and context once.
pub fn prepare(spec: &Value, context: &Value) -> Result<Prepared, PolicyError> {
    let list = spec
        .get("resources")
        .and_then(Value::as_array)
        .ok_or_else(|| PolicyError::Input("the spec has no `resources` list".into()))?;
    let mut resources = Vec::with_capacity(list.len());
    let mut values = Vec::with_capacity(list.len());
    for r in list {
        let value = kusion_kcl::builtins::from_json_value(r);
        values.push(value.clone());
        let (pod, containers) = workload_views(r, &value);
        resources.push(PreparedResource {
            id: r["id"].as_str().map(str::to_string),
            resource_type: r["type"].as_str().unwrap_or_default().to_string(),
            kind: kind_of(r),
            value,
            pod,
            containers,
        });
    }
    let mut spec_dict = Dict::new();
    spec_dict.insert(Str::from("resources"), KValue::List(Rc::new(values)));
    let stack = context["stack"]["name"]
        .as_str()
        .or_else(|| context["stack"].as_str())
        .unwrap_or_default()
        .to_string();
    Ok(Prepared {
        resources,
        spec: KValue::Dict(Rc::new(spec_dict)),
        context: kusion_kcl::builtins::from_json_value(context),
        stack,
    })
}

/// The rule type behind a global (rules are schema types to the evaluator).
fn as_rule_type(v: &KValue) -> Option<Rc<SchemaType>> {
    match v {
        KValue::Func(f) => match &**f {
            Func::User { data, .. } => data.clone().downcast::<SchemaType>().ok(),
            _ => None,
        },
        _ => None,
    }
}

const CHECK_PREFIX: &str = "Check failed on the condition";

/// The finding message of a failed rule check, or `None` when the error is not a check failure.
fn check_message(e: &kusion_kcl::EvalError, rule: &Rule) -> Option<String> {
    if e.kind != ErrKind::Schema {
        return None;
    }
    let (span, note) = e.notes.last()?;
    let rest = note.strip_prefix(CHECK_PREFIX)?;
    let msg = rest.strip_prefix(": ").unwrap_or("").trim();
    if !msg.is_empty() {
        return Some(msg.to_string());
    }
    // No message on the check line: the rule's description, else the condition's source text.
    Some(match &rule.description {
        Some(d) => d.clone(),
        None => {
            let text = span
                .text()
                .map(|t| t.split(',').next().unwrap_or(&t).trim().to_string())
                .unwrap_or_default();
            format!("check `{text}` failed")
        }
    })
}

fn first_line(s: &str) -> String {
    s.trim().to_string()
}

/// Load a set's program (parse errors name file:line:col) and check that its rules and its
/// manifest agree.
fn load(
    set: &PolicySet,
    options: Vec<(String, KValue)>,
) -> Result<(Evaluator, Rc<kusion_kcl::eval::Pkg>), PolicyError> {
    let program = load_program(
        &set.files,
        &LoadOptions {
            external: Vec::new(),
            work_dir: Some(set.dir.clone()),
        },
    )
    .map_err(|d| PolicyError::Set {
        set: set.name.clone(),
        detail: first_line(&d.to_string()),
    })?;
    // The static checker, as `kcl run` runs it: a set with a type error or a malformed rule
    // (a parameter without default after one with) is refused when loaded, not at evaluation.
    kusion_kcl::types::check_program(&program).map_err(|e| PolicyError::Set {
        set: set.name.clone(),
        detail: first_line(&e.to_string()),
    })?;
    let declared: Vec<(String, kusion_kcl::Span)> = program
        .main
        .modules
        .iter()
        .flat_map(|m| m.body.iter())
        .filter_map(|s| match &s.kind {
            kusion_kcl::ast::StmtKind::Rule(r) => {
                Some((r.name.sym.as_str().to_string(), r.name.span))
            }
            _ => None,
        })
        .collect();
    for (name, span) in &declared {
        if !set.rules.iter().any(|r| &r.name == name) {
            return Err(PolicyError::Set {
                set: set.name.clone(),
                detail: format!(
                    "{}: rule `{name}` has no `[rules.{name}]` entry (severity, what it applies to) in {}",
                    span.loc(),
                    set.dir.join(crate::set::SET_MANIFEST).display()
                ),
            });
        }
    }
    for rule in &set.rules {
        if !declared.iter().any(|(n, _)| n == &rule.name) {
            return Err(PolicyError::Set {
                set: set.name.clone(),
                detail: format!(
                    "{}: `[rules.{}]` names no `rule {}` in the set's .k files",
                    set.dir.join(crate::set::SET_MANIFEST).display(),
                    rule.name,
                    rule.name
                ),
            });
        }
    }
    let eopts = EvalOptions {
        args: options,
        work_dir: set.dir.clone(),
        ..Default::default()
    };
    let (ev, modules) = Evaluator::new(program, eopts);
    let pkg = ev
        .make_pkg("__main__", set.dir.clone(), modules)
        .map_err(|e| PolicyError::Set {
            set: set.name.clone(),
            detail: first_line(&e.to_string()),
        })?;
    Ok((ev, pkg))
}

/// Parse and resolve a set without a spec (configure time): malformed sets fail early.
pub fn check_set(set: &PolicySet) -> Result<(), PolicyError> {
    load(set, Vec::new()).map(drop)
}

fn set_options(set: &PolicySet, prepared: &Prepared) -> Vec<(String, KValue)> {
    let mut options = vec![
        ("spec".to_string(), prepared.spec.clone()),
        ("context".to_string(), prepared.context.clone()),
    ];
    for (k, v) in &set.options {
        options.push((k.clone(), kusion_kcl::builtins::from_json_value(v)));
    }
    options
}

/// Evaluate one set; findings are named `<set>/<Rule>`.
pub fn evaluate_set(
    set: &PolicySet,
    severity_override: &dyn Fn(&str) -> Option<kusion_sdk::policy::Severity>,
    prepared: &Prepared,
) -> Result<Vec<Finding>, PolicyError> {
    if !set.stacks.matches(&prepared.stack) {
        return Ok(Vec::new());
    }
    let (ev, pkg) = load(set, set_options(set, prepared))?;
    let set_err = |e: kusion_kcl::EvalError| PolicyError::Set {
        set: set.name.clone(),
        detail: first_line(&e.to_string()),
    };
    ev.run_pkg(&pkg).map_err(set_err)?;
    let mut findings = Vec::new();
    for rule in &set.rules {
        if !rule.stacks.matches(&prepared.stack) {
            continue;
        }
        let id = format!("{}/{}", set.name, rule.name);
        let severity = severity_override(&id)
            .or_else(|| severity_override(&rule.name))
            .unwrap_or(rule.severity);
        let ty = ev
            .get_global(&pkg, Symbol::intern(&rule.name))
            .map_err(set_err)?
            .as_ref()
            .and_then(as_rule_type)
            .ok_or_else(|| PolicyError::Set {
                set: set.name.clone(),
                detail: format!("`{}` is not a rule", rule.name),
            })?;
        let span = kusion_kcl::Span::default();
        let (k_resource, k_pod, k_containers): (Str, Str, Str) = (
            Str::from("resource"),
            Str::from("pod"),
            Str::from("containers"),
        );
        let mut run =
            |resource: Option<&crate::engine::PreparedResource>| -> Result<(), PolicyError> {
                let mut config = Dict::with_capacity(3);
                match resource {
                    Some(r) => {
                        config.insert(k_resource.clone(), r.value.clone());
                        config.insert(k_pod.clone(), r.pod.clone());
                        config.insert(k_containers.clone(), r.containers.clone());
                    }
                    None => config.insert(k_resource.clone(), KValue::None),
                }
                match ev.instantiate(&ty, &[], &[], config, span) {
                    Ok(_) => Ok(()),
                    Err(e) => match check_message(&e, rule) {
                        Some(message) => {
                            findings.push(Finding {
                                rule: id.clone(),
                                severity,
                                resource_id: resource.and_then(|r| r.id.clone()),
                                message,
                            });
                            Ok(())
                        }
                        None => Err(PolicyError::Rule {
                            set: set.name.clone(),
                            rule: rule.name.clone(),
                            resource: resource.and_then(|r| r.id.clone()),
                            detail: first_line(&e.to_string()),
                        }),
                    },
                }
            };
        match rule.scope {
            Scope::Spec => run(None)?,
            Scope::Resource => {
                for r in &prepared.resources {
                    if rule.types.matches(&r.resource_type) && rule.kinds.matches(&r.kind) {
                        run(Some(r))?;
                    }
                }
            }
        }
    }
    Ok(findings)
}
