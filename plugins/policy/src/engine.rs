//! Evaluation of a policy set over a spec with the KCL evaluator.
//!
//! One KCL program per set and call: the set's files are loaded once, the spec and context are
//! handed in as `option("spec")` / `option("context")` (already converted to KCL values, shared
//! by every set), package-level values (lookup tables, allowed lists) are computed once, and then
//! each rule is instantiated once per matching resource with `resource` bound. A failed check is a
//! finding; any other error is an error of the policy, naming the set, the rule and the resource.

use kusion_kcl::{Binding, RuleProgram, RuleSession, Value as KValue, Verdict};
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

fn kpath<'a>(v: &'a KValue, path: &[&str]) -> Option<&'a KValue> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// The pod spec and containers of a Kubernetes workload, computed once per resource in Rust so
/// that every rule reads them without walking the manifest again.
fn workload_views(resource: &Value, value: &KValue) -> (KValue, KValue) {
    let empty = || (KValue::empty_dict(), KValue::list(Vec::new()));
    if resource["type"] != "Kubernetes" {
        return empty();
    }
    let Some(attrs) = value.get("attributes") else {
        return empty();
    };
    let path: &[&str] = match resource["attributes"]["kind"].as_str() {
        Some("Pod") => &["spec"],
        Some("CronJob") => &["spec", "jobTemplate", "spec", "template", "spec"],
        Some(_) => &["spec", "template", "spec"],
        None => return empty(),
    };
    let Some(pod) = kpath(attrs, path).filter(|p| p.is_dict()) else {
        return empty();
    };
    let mut containers = Vec::new();
    for key in ["initContainers", "containers"] {
        if let Some(l) = pod.get(key).and_then(KValue::list_items) {
            containers.extend(l.iter().cloned());
        }
    }
    (pod.clone(), KValue::list(containers))
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
        let value = kusion_kcl::from_json(r);
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
    let stack = context["stack"]["name"]
        .as_str()
        .or_else(|| context["stack"].as_str())
        .unwrap_or_default()
        .to_string();
    Ok(Prepared {
        resources,
        spec: KValue::dict([("resources", KValue::list(values))]),
        context: kusion_kcl::from_json(context),
        stack,
    })
}

/// The finding message of a failed rule check: the check's own message, else the rule's
/// description, else the condition's source text.
fn check_message(failure: &kusion_kcl::CheckFailure, rule: &Rule) -> String {
    match (&failure.message, &rule.description) {
        (Some(m), _) => m.clone(),
        (None, Some(d)) => d.clone(),
        (None, None) => format!("check `{}` failed", failure.condition),
    }
}

fn first_line(s: &str) -> String {
    s.trim().to_string()
}

/// Load a set's program (parse errors name file:line:col), check it statically and check that
/// its rules and its manifest agree.
fn load(set: &PolicySet, options: Vec<(String, KValue)>) -> Result<RuleSession, PolicyError> {
    // The static checker, as `kcl run` runs it: a set with a type error or a malformed rule
    // (a parameter without default after one with) is refused when loaded, not at evaluation.
    let program = RuleProgram::load(&set.files, &set.dir).map_err(|e| PolicyError::Set {
        set: set.name.clone(),
        detail: first_line(&e.to_string()),
    })?;
    let declared = program.rules();
    for d in declared {
        let name = &d.name;
        if !set.rules.iter().any(|r| &r.name == name) {
            return Err(PolicyError::Set {
                set: set.name.clone(),
                detail: format!(
                    "{}: rule `{name}` has no `[rules.{name}]` entry (severity, what it applies to) in {}",
                    d.span.loc(),
                    set.dir.join(crate::set::SET_MANIFEST).display()
                ),
            });
        }
    }
    for rule in &set.rules {
        if !declared.iter().any(|d| d.name == rule.name) {
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
    program.start(options).map_err(|e| PolicyError::Set {
        set: set.name.clone(),
        detail: first_line(&e.to_string()),
    })
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
        options.push((k.clone(), kusion_kcl::from_json(v)));
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
    let session = load(set, set_options(set, prepared))?;
    let set_err = |e: kusion_kcl::EvalError| PolicyError::Set {
        set: set.name.clone(),
        detail: first_line(&e.to_string()),
    };
    session.run_top_level().map_err(set_err)?;
    let (k_resource, k_pod, k_containers) = (
        Binding::new("resource"),
        Binding::new("pod"),
        Binding::new("containers"),
    );
    let mut findings = Vec::new();
    for rule in &set.rules {
        if !rule.stacks.matches(&prepared.stack) {
            continue;
        }
        let id = format!("{}/{}", set.name, rule.name);
        let severity = severity_override(&id)
            .or_else(|| severity_override(&rule.name))
            .unwrap_or(rule.severity);
        let ty = session
            .rule(&rule.name)
            .map_err(set_err)?
            .ok_or_else(|| PolicyError::Set {
                set: set.name.clone(),
                detail: format!("`{}` is not a rule", rule.name),
            })?;
        let mut run =
            |resource: Option<&crate::engine::PreparedResource>| -> Result<(), PolicyError> {
                let verdict = match resource {
                    Some(r) => session.instantiate(
                        &ty,
                        [
                            (&k_resource, r.value.clone()),
                            (&k_pod, r.pod.clone()),
                            (&k_containers, r.containers.clone()),
                        ],
                    ),
                    None => session.instantiate(&ty, [(&k_resource, KValue::None)]),
                };
                match verdict {
                    Ok(Verdict::Pass) => Ok(()),
                    Ok(Verdict::Fail(failure)) => {
                        findings.push(Finding {
                            rule: id.clone(),
                            severity,
                            resource_id: resource.and_then(|r| r.id.clone()),
                            message: check_message(&failure, rule),
                        });
                        Ok(())
                    }
                    Err(e) => Err(PolicyError::Rule {
                        set: set.name.clone(),
                        rule: rule.name.clone(),
                        resource: resource.and_then(|r| r.id.clone()),
                        detail: first_line(&e.to_string()),
                    }),
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
