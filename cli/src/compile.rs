//! `kusionctl compile`: run a stack's KCL and turn the output into a Spec.
//!
//! The output either holds `resources` in spec form already, or its top-level Kubernetes objects
//! (anything with `apiVersion`/`kind`/`metadata`, also inside top-level lists and in every
//! document of a YAML stream) become `type: Kubernetes` resources with generated IDs.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use kusion_kcl::PluginHook;
use kusion_kcl::{ParseCache, RunOptions, run_full};
use kusion_kernel::spec::Spec;
use kusion_sdk::Resource;
use serde_json::{Map, Value};

use crate::project::{self, STACK_FILE, Stack};

/// A KCL program failed: `rendered` is exactly what `kcl run` prints for it.
#[derive(Debug)]
pub struct KclFailure {
    pub stack: String,
    pub dir: PathBuf,
    pub rendered: String,
}

impl fmt::Display for KclFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stack {} ({}): the KCL program failed:\n{}",
            self.stack,
            self.dir.display(),
            self.rendered.trim_end()
        )
    }
}

impl std::error::Error for KclFailure {}

/// A KCL program given on the command line (`kusionctl run FILE`) failed; `rendered` is what
/// `kcl run` prints for it, already headed `error[...]`.
#[derive(Debug)]
pub struct KclProgramFailure {
    pub file: PathBuf,
    pub rendered: String,
}

impl fmt::Display for KclProgramFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: the KCL program failed:\n{}",
            self.file.display(),
            self.rendered.trim_end()
        )
    }
}

impl std::error::Error for KclProgramFailure {}

/// One compiled stack.
pub struct Compiled {
    pub spec: Spec,
    /// Every file the compile read (settings, `kcl.mod` files and KCL sources).
    pub inputs: Vec<PathBuf>,
}

/// Compile the stack in `dir` (the whole pipeline: layout, KCL, spec). `plugins` serves the
/// program's `kcl_plugin.<module>.<fn>` calls.
pub fn compile_dir(
    dir: &Path,
    cache: Option<Arc<ParseCache>>,
    plugins: Option<Rc<dyn PluginHook>>,
) -> Result<Compiled> {
    let stack = project::open_stack(dir)?;
    compile_stack(&stack, cache, plugins)
}

/// Compile an opened stack.
pub fn compile_stack(
    stack: &Stack,
    cache: Option<Arc<ParseCache>>,
    plugins: Option<Rc<dyn PluginHook>>,
) -> Result<Compiled> {
    let (settings_path, settings) = stack.kcl_settings()?;
    let externals = project::externals(stack)?;
    let mut inputs = vec![stack.dir.join(STACK_FILE), settings_path.clone()];
    inputs.push(stack.project_dir.join(project::PROJECT_FILE));
    for d in stack.dir.ancestors() {
        if d.join("kcl.mod").is_file() {
            inputs.push(d.join("kcl.mod"));
        }
        if d == stack.root {
            break;
        }
    }
    for (_, p) in &externals {
        if p.join("kcl.mod").is_file() {
            inputs.push(p.join("kcl.mod"));
        }
    }
    if settings.files().is_empty() && kusion_kcl::cli_profile_entries(&stack.dir).is_err() {
        return Err(anyhow!(
            "{}: stack {} lists no KCL files (kcl_cli_configs.files) and its kcl.mod has no [profile] entries",
            settings_path.display(),
            stack.label()
        ));
    }
    let mut options = RunOptions {
        work_dir: Some(stack.dir.clone()),
        settings: vec![settings_path.clone()],
        external: externals,
        parse_cache: cache,
        plugin: plugins,
        // a stack's error inside a Konfig model names the stack's own file too
        note_instances: true,
        // A stack reads its own package and folder; anything else is granted in stack.yaml,
        // and compiling never writes.
        allow: kusion_kcl::Allow {
            read: stack
                .config
                .allow_read
                .iter()
                .map(|p| stack.dir.join(p))
                .collect(),
            write: Vec::new(),
            env: stack.config.allow_env.clone(),
            all: false,
            deny_writes: Some(
                "compiling a stack never writes files (kusionctl compile, preview and apply only read)"
                    .into(),
            ),
        },
        ..Default::default()
    };
    // The names are options like any other; a kcl.yaml setting them explicitly wins.
    for (key, value) in [
        ("project", &stack.project.name),
        ("stack", &stack.config.name),
    ] {
        if !settings.has_option(key) {
            options.args.push((key.to_string(), value.clone()));
        }
    }
    let out = run_full(&[], &options).map_err(|e| KclFailure {
        stack: stack.label(),
        dir: stack.dir.clone(),
        rendered: e.to_string(),
    })?;
    for w in &out.warnings {
        eprintln!("{w}");
    }
    inputs.extend(out.files.iter().cloned());
    let spec = output_to_spec(&out.text).map_err(|e| {
        anyhow!(
            "stack {} ({}): the output of the KCL files listed in {} is not a valid spec: {e}",
            stack.label(),
            stack.dir.display(),
            settings_path.display()
        )
    })?;
    Ok(Compiled { spec, inputs })
}

/// The spec for a KCL output text (one YAML document or a `---` stream).
pub fn output_to_spec(text: &str) -> Result<Spec, String> {
    use serde::Deserialize;
    let mut docs = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|e| format!("unreadable output: {e}"))?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    if let [Value::Object(m)] = docs.as_slice()
        && let Some(resources) = m.get("resources")
    {
        if !resources.is_array() {
            return Err(
                "`resources` is not a spec (expected a list of {id, type, attributes, dependsOn})"
                    .into(),
            );
        }
        let text = serde_json::to_string(&serde_json::json!({ "resources": resources }))
            .map_err(|e| e.to_string())?;
        let spec = Spec::parse(&text, "the output").map_err(|e| e.to_string())?;
        check(&spec)?;
        return Ok(spec);
    }
    let mut objects = Vec::new();
    for doc in docs {
        collect_objects(doc, &mut objects);
    }
    if objects.is_empty() {
        return Err(
            "it has no `resources` list and no Kubernetes objects (values with apiVersion, kind and metadata)"
                .into(),
        );
    }
    let mut resources: Vec<Resource> = Vec::with_capacity(objects.len());
    for object in objects {
        resources.push(kubernetes_resource(object)?);
    }
    // A namespaced object waits for its Namespace when the spec creates it.
    let namespaces: BTreeSet<String> = resources
        .iter()
        .filter(|r| r.id.starts_with("v1:Namespace:"))
        .map(|r| r.id.clone())
        .collect();
    for r in &mut resources {
        if let Some(ns) = r
            .attributes
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
        {
            let id = format!("v1:Namespace:{ns}");
            if namespaces.contains(&id) && r.id != id {
                r.depends_on.push(id);
            }
        }
    }
    let spec = Spec { resources };
    check(&spec)?;
    Ok(spec)
}

/// Structural checks (IDs, duplicates, dependencies); the runtimes check types at plan time.
fn check(spec: &Spec) -> Result<(), String> {
    let types: BTreeSet<String> = spec
        .resources
        .iter()
        .map(|r| r.resource_type.clone())
        .collect();
    // Only the runtimes know a resource's target (its cluster), so one ID may occur more than
    // once here when the copies' extensions differ; the plan checks the real targets.
    let targets: Vec<Option<String>> = spec
        .resources
        .iter()
        .map(|r| {
            (!r.extensions.is_empty()).then(|| Value::Object(r.extensions.clone()).to_string())
        })
        .collect();
    spec.validate_targeted(&types, &targets)
        .map_err(|e| e.to_string())
}

fn is_kubernetes_object(v: &Map<String, Value>) -> bool {
    v.get("apiVersion").is_some_and(Value::is_string)
        && v.get("kind").is_some_and(Value::is_string)
        && v.get("metadata").is_some_and(Value::is_object)
}

/// Top-level objects: the document itself, its top-level values, and elements of top-level lists.
fn collect_objects(doc: Value, out: &mut Vec<Map<String, Value>>) {
    let list = |items: Vec<Value>, out: &mut Vec<Map<String, Value>>| {
        for item in items {
            if let Value::Object(o) = item
                && is_kubernetes_object(&o)
            {
                out.push(o);
            }
        }
    };
    match doc {
        Value::Object(m) if is_kubernetes_object(&m) => out.push(m),
        Value::Object(m) => {
            for (_, v) in m {
                match v {
                    Value::Object(o) if is_kubernetes_object(&o) => out.push(o),
                    Value::Array(items) => list(items, out),
                    _ => {}
                }
            }
        }
        Value::Array(items) => list(items, out),
        _ => {}
    }
}

/// `apiVersion:Kind[:namespace]:name`, type Kubernetes.
fn kubernetes_resource(object: Map<String, Value>) -> Result<Resource, String> {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let api_version = s(object.get("apiVersion")).unwrap_or_default();
    let kind = s(object.get("kind")).unwrap_or_default();
    let metadata = object.get("metadata");
    let name = s(metadata.and_then(|m| m.get("name"))).ok_or_else(|| {
        format!("a {api_version} {kind} object has no metadata.name, so it cannot get an ID")
    })?;
    let id = match s(metadata.and_then(|m| m.get("namespace"))) {
        Some(ns) if !ns.is_empty() => format!("{api_version}:{kind}:{ns}:{name}"),
        _ => format!("{api_version}:{kind}:{name}"),
    };
    Ok(Resource::new(id, "Kubernetes", object))
}

/// In a stack folder without a spec file (`-f`), compile the stack, with the loaded plugins
/// serving its `kcl_plugin.*` calls.
pub fn spec_for(
    workdir: &Path,
    spec: &Option<PathBuf>,
    plugins: &kusion_kernel::plugin::LoadedPlugins,
) -> Result<Option<Spec>> {
    if spec.is_none() && project::is_stack_dir(workdir) {
        let hook = crate::kcl_plugins::plugin_hook(plugins);
        return Ok(Some(compile_dir(workdir, None, Some(hook))?.spec));
    }
    Ok(None)
}

/// The spec as `-o yaml` / `-o json` prints it.
pub fn render_spec(spec: &Spec, json: bool) -> String {
    if json {
        let mut s = spec.to_json();
        s.push('\n');
        s
    } else {
        spec.to_yaml()
    }
}

/// Hashes of files, computed once per run and shared by every stack that read them.
#[derive(Default)]
pub struct FileHashes {
    map: std::sync::Mutex<HashMap<PathBuf, Option<String>>>,
}

impl FileHashes {
    /// The content hash of `path` (None when it cannot be read).
    pub fn get(&self, path: &Path) -> Option<String> {
        if let Some(h) = self.map.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            return h.clone();
        }
        let h = std::fs::read(path)
            .ok()
            .map(|b| blake3::hash(&b).to_hex().to_string());
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_path_buf(), h.clone());
        h
    }

    /// A hash of the `.k` file names in `dir`: a file added to or removed from a package folder
    /// changes what an import of it loads.
    pub fn dir_listing(&self, dir: &Path) -> Option<String> {
        let key = dir.join("\0listing");
        if let Some(h) = self.map.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return h.clone();
        }
        let h = std::fs::read_dir(dir).ok().map(|entries| {
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".k"))
                .collect();
            names.sort();
            blake3::hash(names.join("\n").as_bytes())
                .to_hex()
                .to_string()
        });
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, h.clone());
        h
    }
}

#[path = "compile_all.rs"]
pub mod all;

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(spec: &Spec) -> Vec<&str> {
        spec.resources.iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn yaml_streams_top_level_values_and_lists_become_kubernetes_resources() {
        let stream = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: a}\n";
        let spec = output_to_spec(stream).unwrap();
        assert_eq!(ids(&spec), ["v1:Namespace:a", "v1:ConfigMap:a:c"]);
        assert_eq!(spec.resources[1].depends_on, ["v1:Namespace:a"]);
        assert_eq!(spec.resources[0].resource_type, "Kubernetes");

        let nested = "app: {name: x, image: y}\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: d, namespace: other}\n- 3\nsvc:\n  apiVersion: v1\n  kind: Service\n  metadata: {name: s}\n";
        let spec = output_to_spec(nested).unwrap();
        assert_eq!(ids(&spec), ["apps/v1:Deployment:other:d", "v1:Service:s"]);
        assert!(
            spec.resources[0].depends_on.is_empty(),
            "namespace not in the spec"
        );
    }

    #[test]
    fn spec_form_is_taken_as_is_and_checked() {
        let spec = output_to_spec("resources:\n- id: t:a\n  type: Test\n").unwrap();
        assert_eq!(ids(&spec), ["t:a"]);
        let e = output_to_spec("resources:\n- id: t:a\n  type: Test\n  dependsOn: [t:zz]\n")
            .unwrap_err();
        assert!(e.contains("t:zz"), "{e}");
        let e = output_to_spec("resources: 3\n").unwrap_err();
        assert!(e.contains("is not a spec"), "{e}");
    }

    #[test]
    fn outputs_without_resources_or_names_are_errors() {
        let e = output_to_spec("a: 1\nb: [1, 2]\n").unwrap_err();
        assert!(
            e.contains("no `resources` list and no Kubernetes objects"),
            "{e}"
        );
        let e = output_to_spec("apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: x}\n")
            .unwrap_err();
        assert!(e.contains("no metadata.name"), "{e}");
        let e = output_to_spec(
            "a: {apiVersion: v1, kind: Namespace, metadata: {name: n}}\nb: {apiVersion: v1, kind: Namespace, metadata: {name: n}}\n",
        )
        .unwrap_err();
        assert!(
            e.contains("duplicate resource ID \"v1:Namespace:n\""),
            "{e}"
        );
    }
}
