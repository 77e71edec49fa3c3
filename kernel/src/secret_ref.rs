//! External secret references: a spec string that is exactly `ref://<scheme>/<path>[#<key>]`
//! (`ref://aws-secretsmanager/db#password`, `ref://env/DB_PASSWORD`, `ref://file/secrets/pw`)
//! stands for a secret a secret-store plugin reads while planning and again while applying.
//!
//! The spec, its compiled output and the release history keep the reference, never the value.
//! The resolved value exists only in memory for the runtime call; the field it lands in is
//! sensitive, so previews mask it and state keeps it sealed (or as a hash without a state
//! key). Every plan reads the store again, so a rotated secret plans an update.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use kusion_sdk::function::{FunctionPlugin, SECRET_RESOLVE};
use kusion_sdk::{FieldPath, Resource};
use serde_json::{Map, Value};

/// What a secret reference starts with.
pub const PREFIX: &str = "ref://";

/// The secret-store plugins of one operation, by the schemes they serve.
#[derive(Clone, Default)]
pub struct SecretStores {
    by_scheme: BTreeMap<String, (String, Arc<dyn FunctionPlugin>)>,
    /// Keyword arguments of every `resolve` call: `workdir`, the stack folder relative file
    /// references are read from.
    context: Map<String, Value>,
}

impl SecretStores {
    /// Serve every scheme plugin `name` declares; a scheme already served stays with the first.
    pub fn add(&mut self, name: &str, plugin: Arc<dyn FunctionPlugin>) {
        for scheme in plugin.describe().secret_stores {
            if let Some((first, _)) = self.by_scheme.get(&scheme) {
                tracing::warn!(scheme = %scheme, used = %first, shadowed = %name,
                    "two secret stores serve the same scheme");
                continue;
            }
            self.by_scheme
                .insert(scheme, (name.to_string(), Arc::clone(&plugin)));
        }
    }

    /// The stack folder, passed to stores as the `workdir` keyword argument.
    pub fn set_workdir(&mut self, dir: &std::path::Path) {
        self.context.insert(
            "workdir".into(),
            Value::String(dir.to_string_lossy().into_owned()),
        );
    }

    /// The schemes served, each with its plugin's name.
    pub fn schemes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.by_scheme
            .iter()
            .map(|(s, (name, _))| (s.as_str(), name.as_str()))
    }

    fn read(&self, reference: &str) -> Result<String, String> {
        let scheme = reference
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('/'))
            .map(|(scheme, _)| scheme)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                format!("{reference}: a secret reference is ref://<store>/<name>[#<key>]")
            })?;
        let Some((name, plugin)) = self.by_scheme.get(scheme) else {
            let served: Vec<&str> = self.by_scheme.keys().map(String::as_str).collect();
            return Err(if served.is_empty() {
                format!(
                    "{reference}: no secret-store plugin is loaded (`kusionctl plugin list` shows why; the shipped one is `secrets`)"
                )
            } else {
                format!(
                    "{reference}: no secret store serves {scheme:?} (served: {})",
                    served.join(", ")
                )
            });
        };
        match plugin.call(
            SECRET_RESOLVE,
            &[Value::String(reference.to_string())],
            &self.context,
        ) {
            Ok(Value::String(s)) => Ok(s),
            Ok(other) => Err(format!(
                "{reference}: secret store {name:?} answered a {} instead of a string",
                kind_of(&other)
            )),
            Err(e) => Err(format!("{reference}: secret store {name:?}: {}", e.message)),
        }
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// One plan's or one apply's reads: a reference used by several resources is read once.
pub(crate) struct SecretReads {
    stores: SecretStores,
    read: Mutex<HashMap<String, Result<String, String>>>,
}

impl SecretReads {
    pub(crate) fn new(stores: SecretStores) -> SecretReads {
        SecretReads {
            stores,
            read: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, reference: &str) -> Result<String, String> {
        if let Some(done) = self
            .read
            .lock()
            .ok()
            .and_then(|m| m.get(reference).cloned())
        {
            return done;
        }
        // Read outside the lock: stores may be slow and other resources need other secrets.
        let answer = self.stores.read(reference);
        if let Ok(mut m) = self.read.lock() {
            m.insert(reference.to_string(), answer.clone());
        }
        answer
    }

    /// `resource` with every secret reference replaced by its value, and the fields that now
    /// hold one; `None` when it has no reference (nothing is copied).
    pub(crate) fn resolve(
        &self,
        resource: &Resource,
    ) -> Result<Option<(Resource, Vec<FieldPath>)>, String> {
        if !resource.attributes.values().any(contains_reference) {
            return Ok(None);
        }
        let mut resolved = resource.clone();
        let mut paths = Vec::new();
        for (key, value) in resolved.attributes.iter_mut() {
            self.replace(value, &FieldPath::root().child_key(key), &mut paths)
                .map_err(|e| format!("resource {:?}: {e}", resource.id))?;
        }
        Ok(Some((resolved, paths)))
    }

    fn replace(
        &self,
        value: &mut Value,
        at: &FieldPath,
        paths: &mut Vec<FieldPath>,
    ) -> Result<(), String> {
        match value {
            Value::String(s) if s.starts_with(PREFIX) => {
                let secret = self.get(s).map_err(|e| format!("field {at}: {e}"))?;
                *value = Value::String(secret);
                paths.push(at.clone());
                Ok(())
            }
            Value::Array(items) => items
                .iter_mut()
                .enumerate()
                .try_for_each(|(i, v)| self.replace(v, &at.child_index(i), paths)),
            Value::Object(map) => map
                .iter_mut()
                .try_for_each(|(k, v)| self.replace(v, &at.child_key(k), paths)),
            _ => Ok(()),
        }
    }
}

/// The paths of `resource` whose value is a secret reference.
pub fn reference_paths(resource: &Resource) -> Vec<FieldPath> {
    fn walk(value: &Value, at: &FieldPath, out: &mut Vec<FieldPath>) {
        match value {
            Value::String(s) if s.starts_with(PREFIX) => out.push(at.clone()),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, v)| walk(v, &at.child_index(i), out)),
            Value::Object(map) => map.iter().for_each(|(k, v)| walk(v, &at.child_key(k), out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (key, value) in &resource.attributes {
        walk(value, &FieldPath::root().child_key(key), &mut out);
    }
    out
}

/// Whether `value` holds a secret reference anywhere.
pub fn contains_reference(value: &Value) -> bool {
    crate::diff::any_string_starts_with(value, PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kusion_sdk::error::{PluginError, PluginResult};
    use kusion_sdk::function::FunctionPluginInfo;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A store over a fixed map that counts its reads.
    struct Fixed(BTreeMap<String, String>, AtomicUsize);

    impl FunctionPlugin for Fixed {
        fn describe(&self) -> FunctionPluginInfo {
            FunctionPluginInfo {
                module: "fixed".into(),
                version: "0".into(),
                abi: kusion_sdk::ABI_VERSION,
                functions: vec![SECRET_RESOLVE.into()],
                secret_stores: vec!["fixed".into()],
            }
        }
        fn configure(&self, _: &Value) -> PluginResult<()> {
            Ok(())
        }
        fn call(&self, f: &str, args: &[Value], _: &Map<String, Value>) -> PluginResult<Value> {
            assert_eq!(f, SECRET_RESOLVE);
            self.1.fetch_add(1, Ordering::SeqCst);
            let r = args[0].as_str().unwrap();
            self.0
                .get(r.trim_start_matches("ref://fixed/"))
                .map(|v| Value::String(v.clone()))
                .ok_or_else(|| PluginError::invalid(format!("{r} not found")))
        }
    }

    fn stores() -> (SecretStores, Arc<Fixed>) {
        let plugin = Arc::new(Fixed(
            [("db#pw".to_string(), "hunter2".to_string())].into(),
            AtomicUsize::new(0),
        ));
        let mut s = SecretStores::default();
        s.add("fixed-plugin", plugin.clone());
        (s, plugin)
    }

    fn resource(attrs: Value) -> Resource {
        Resource::new("t:a", "t", attrs.as_object().unwrap().clone())
    }

    #[test]
    fn references_are_replaced_and_their_fields_named_once_read() {
        let (s, plugin) = stores();
        let reads = SecretReads::new(s);
        let r = resource(
            json!({"env": [{"name": "PW", "value": "ref://fixed/db#pw"}],
                               "copy": "ref://fixed/db#pw", "url": "http://x/ref://fixed/db#pw"}),
        );
        let (resolved, paths) = reads.resolve(&r).unwrap().unwrap();
        assert_eq!(resolved.attributes["env"][0]["value"], "hunter2");
        assert_eq!(resolved.attributes["copy"], "hunter2");
        assert_eq!(
            resolved.attributes["url"], "http://x/ref://fixed/db#pw",
            "only whole values"
        );
        let paths: Vec<String> = paths.iter().map(ToString::to_string).collect();
        assert_eq!(paths, ["env[0].value", "copy"]);
        assert_eq!(plugin.1.load(Ordering::SeqCst), 1, "read once per run");
        assert!(reads.resolve(&resource(json!({"a": 1}))).unwrap().is_none());
    }

    #[test]
    fn failures_name_the_resource_field_reference_and_store() {
        let (s, _) = stores();
        let reads = SecretReads::new(s);
        let e = reads
            .resolve(&resource(json!({"a": {"b": "ref://fixed/nope"}})))
            .unwrap_err();
        assert!(
            e.contains("\"t:a\"")
                && e.contains("a.b")
                && e.contains("fixed-plugin")
                && e.contains("not found"),
            "{e}"
        );
        let e = reads
            .resolve(&resource(json!({"a": "ref://vault/x"})))
            .unwrap_err();
        assert!(
            e.contains("no secret store serves \"vault\" (served: fixed)"),
            "{e}"
        );
        let e = SecretReads::new(SecretStores::default())
            .resolve(&resource(json!({"a": "ref://env/X"})))
            .unwrap_err();
        assert!(e.contains("no secret-store plugin is loaded"), "{e}");
        let e = reads
            .resolve(&resource(json!({"a": "ref://nothing"})))
            .unwrap_err();
        assert!(e.contains("ref://<store>/<name>"), "{e}");
    }
}
