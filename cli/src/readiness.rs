//! The KCL readiness hook: judges a resource's own readiness rule (extension `readiness`, an
//! expression such as `status.phase == "Active"`) over the live object a watch reports, with
//! the object's top-level fields bound as variables (`metadata`, `spec`, `status`, `data`, ...;
//! absent ones are `None`) and the whole object as `live`.

use std::sync::Arc;

use kusion_kernel::readiness::{ReadinessHook, Verdict};
use serde_json::Value;

/// Names always bound (to `None` when the object lacks them), so a rule over a field that
/// appears later is "not ready" rather than an undefined name.
const COMMON: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status", "data"];
/// The name the whole object is bound to.
const LIVE: &str = "live";

fn bindable(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with('_')
        // Fields spelled like KCL keywords are reachable through `live` only.
        && !kusion_kcl::is_keyword(name)
        && name != LIVE
}

/// A KCL expression yielding `value`: its JSON text travels base64-encoded, so no quote,
/// escape or `${` interpolation in the data can change the program.
fn decoded(value: &Value) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(value.to_string());
    format!("json.decode(base64.decode(\"{text}\"))")
}

/// The program judging `expression` over `live`; its `kusion_ready` is the verdict.
fn program(expression: &str, live: &Value) -> String {
    let mut out = String::from("import base64\nimport json\n\n");
    out.push_str(&format!("{LIVE} = {}\n", decoded(live)));
    let fields = live.as_object();
    for name in COMMON {
        if fields.is_none_or(|f| !f.contains_key(*name)) {
            // typed `any`: a rule reads its fields once it exists (`data.ready`), which the
            // checker refuses on a name it knows is always None
            out.push_str(&format!("{name}: any = None\n"));
        }
    }
    for (name, value) in fields.into_iter().flatten() {
        if bindable(name) {
            out.push_str(&format!("{name} = {}\n", decoded(value)));
        }
    }
    // a block lambda called at once: the rule may span lines (as a block's statements) and
    // end in a comment; upstream's parser reads parentheses on one line
    out.push_str("kusion_ready = lambda {\n");
    for line in expression.lines() {
        out.push_str(&format!("    {line}\n"));
    }
    out.push_str("}()\n");
    out
}

/// Evaluates rules with kusion's KCL evaluator.
pub struct KclReadiness;

impl ReadinessHook for KclReadiness {
    fn judge(&self, _id: &str, expression: &str, live: &Value) -> Result<Verdict, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("a scratch directory: {e}"))?;
        let file = dir.path().join("readiness.k");
        std::fs::write(&file, program(expression, live))
            .map_err(|e| format!("writing {}: {e}", file.display()))?;
        let options = kusion_kcl::RunOptions {
            work_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let value = kusion_kcl::run(&[file], &options).map_err(|e| e.to_string())?;
        match value.as_dict().and_then(|d| d.get("kusion_ready")) {
            Some(kusion_kcl::Value::Bool(true)) => Ok(Verdict::Ready),
            Some(kusion_kcl::Value::Bool(false)) => Ok(Verdict::NotReady(format!(
                "waiting for readiness rule: {expression}"
            ))),
            Some(other) => Err(format!(
                "must be a boolean expression, but it is {}",
                other.type_name()
            )),
            None => Err("evaluated to nothing".into()),
        }
    }
}

/// Judge `registry`'s resources' readiness rules as KCL expressions.
pub fn install(registry: &mut kusion_kernel::registry::Registry) {
    registry.set_readiness(Arc::new(KclReadiness));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn judge(expr: &str, live: Value) -> Result<Verdict, String> {
        KclReadiness.judge("v1:ConfigMap:ns:x", expr, &live)
    }

    #[test]
    fn rules_see_the_live_fields() {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"},
                        "status": {"phase": "Active"}});
        assert_eq!(
            judge("status.phase == \"Active\"", ns.clone()),
            Ok(Verdict::Ready)
        );
        assert!(matches!(
            judge("status.phase == \"Terminating\"", ns.clone()),
            Ok(Verdict::NotReady(_))
        ));
        assert_eq!(judge("live.metadata.name == \"a\"", ns), Ok(Verdict::Ready));
        // A field the object does not have yet is None, not an error.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert!(matches!(
            judge("data != None and data.ready == \"yes\"", cm),
            Ok(Verdict::NotReady(_))
        ));
    }

    #[test]
    fn broken_rules_are_errors() {
        let cm = json!({"kind": "ConfigMap", "data": {"n": "1"}});
        let e = judge("data.n", cm.clone()).unwrap_err();
        assert!(e.contains("boolean"), "{e}");
        assert!(judge("data.n ==", cm).is_err());
    }
}
