//! The library entry point: run a KCL program and get its value or printed output.

use crate::access::Access;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::eval::{EvalError, EvalOptions, Evaluator, PluginHook};
use crate::output::{PrintOpts, to_json};
pub use crate::parser::loader::ParseCache;
use crate::parser::loader::{LoadOptions, load_program_cached};
use crate::value::{Dict, ErrKind, Str, Value};

/// Options of one run (the `kcl run` flags).
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Directory relative paths are resolved against (defaults to the current directory).
    pub work_dir: Option<PathBuf>,
    /// `-D key=value`.
    pub args: Vec<(String, String)>,
    /// `-Y settings.yaml` files.
    pub settings: Vec<PathBuf>,
    /// `-E name=path`.
    pub external: Vec<(String, PathBuf)>,
    /// `-O path=value` overrides.
    pub overrides: Vec<String>,
    /// `-S path` selectors.
    pub path_selector: Vec<String>,
    pub disable_none: bool,
    /// `-r`: integers must fit in 32 bits.
    pub strict_range_check: bool,
    /// `--note_instances`: a schema attribute's conversion error notes where the instance is
    /// made (not upstream's output; off by default).
    pub note_instances: bool,
    pub sort_keys: bool,
    pub show_hidden: bool,
    /// `--format json`.
    pub json: bool,
    pub plugin: Option<Rc<dyn PluginHook>>,
    /// Parsed modules shared with other runs (possibly on other threads).
    pub parse_cache: Option<std::sync::Arc<ParseCache>>,
    /// What `file.*` may reach besides the package, the working folder and the external
    /// packages (see [`crate::access`]).
    pub allow: Allow,
    /// Collection size, time and memory limits of the evaluation.
    pub limits: crate::limits::Limits,
    /// The process ends right after this run (`kcl run`): the evaluator's memory is left to
    /// the operating system instead of being freed value by value, which on a large program
    /// costs more than the run's output.
    pub exiting: bool,
}

/// Access granted on top of the package, working folder and external packages.
#[derive(Debug, Clone, Default)]
pub struct Allow {
    /// `--allow-read DIR`.
    pub read: Vec<PathBuf>,
    /// `--allow-write DIR`.
    pub write: Vec<PathBuf>,
    /// `--allow-env NAME` (`*` for every variable).
    pub env: Vec<String>,
    /// `--allow-all`: upstream's behaviour, nothing confined.
    pub all: bool,
    /// Deny every write, saying why (`kusionctl compile`).
    pub deny_writes: Option<String>,
}

impl Allow {
    /// The access of a run whose package root is `root`.
    pub(crate) fn access(
        &self,
        root: &Path,
        work_dir: &Path,
        external: &[(String, PathBuf)],
    ) -> Access {
        if self.all {
            return Access::unconfined();
        }
        let mut read: Vec<PathBuf> = vec![root.to_path_buf(), work_dir.to_path_buf()];
        read.extend(external.iter().map(|(_, p)| p.clone()));
        read.extend(self.read.iter().cloned());
        let mut write = vec![root.to_path_buf(), work_dir.to_path_buf()];
        write.extend(self.write.iter().cloned());
        let mut access = Access::confined(&read, &write, &self.env);
        if let Some(why) = &self.deny_writes {
            access.writes_denied = Some(why.clone());
        }
        access
    }
}

/// A failed run: the rendered diagnostic text (rustc-style, like upstream).
#[derive(Debug, thiserror::Error)]
pub enum KclError {
    #[error("{0}")]
    Syntax(String),
    #[error("{0}")]
    Eval(EvalError),
    #[error("{0}")]
    Other(String),
    /// A run that failed after `print()` wrote `printed` (shown before the error).
    #[error("{error}")]
    Printed {
        printed: String,
        error: Box<KclError>,
    },
}

/// The result of a run: the output value, the text `kcl run` prints, and `print()` output.
pub struct RunOutput {
    pub value: Value,
    pub text: String,
    pub printed: String,
    pub warnings: Vec<String>,
    /// Every source file the program was loaded from (main files, then imported packages).
    pub files: Vec<PathBuf>,
}

/// Why a program did not load, as upstream reports it: the syntax errors, then what its
/// resolver finds in the program as the parser recovered it (imports of missing packages
/// first). `None` when the program cannot be recovered (a file that cannot be read) or the
/// recovered program shows no error.
fn recovered_errors(files: &[PathBuf], load: &LoadOptions) -> Option<KclError> {
    let (mut program, errors, missing) =
        crate::parser::loader::load_program_recovered(files, load).ok()?;
    crate::parser::merge::merge_main(&mut program);
    let mut text = crate::diag::Diagnostics(errors).to_string();
    text.push_str(&crate::diag::Diagnostics(missing).to_string());
    if let Err(e) = crate::types::check_program(&program) {
        text.push_str(&e.to_string());
    }
    // (a failure the recovered load does not meet again keeps its own words)
    (!text.is_empty()).then_some(KclError::Syntax(text))
}

/// Settings from `-Y` files merged into the options (files listed there are returned).
fn apply_settings(
    opts: &mut RunOptions,
    files: &mut Vec<PathBuf>,
    args: &mut Vec<(String, Value)>,
) -> Result<(), KclError> {
    for path in opts.settings.clone() {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            KclError::Other(format!("cannot read settings file {}: {e}", path.display()))
        })?;
        // upstream reports an unparsable settings file like one of the wrong shape
        let y: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).map_err(|_| {
            KclError::Other(format!(
                "EvaluationError\nFailed to load '{}', invalid setting file format",
                path.display()
            ))
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        if let Some(c) = y.get("kcl_cli_configs") {
            for key in ["files", "file"] {
                if let Some(serde_yaml_ng::Value::Sequence(fs)) = c.get(key) {
                    for f in fs {
                        if let Some(s) = f.as_str() {
                            let p = PathBuf::from(s);
                            // `${KCL_MOD}` and `${name:KCL_MOD}` are expanded later, not
                            // relative to the settings file
                            files.push(if p.is_absolute() || s.contains("KCL_MOD}") {
                                p
                            } else {
                                base.join(p)
                            });
                        }
                    }
                }
            }
            let b = |k: &str| c.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
            opts.disable_none |= b("disable_none");
            opts.sort_keys |= b("sort_keys");
            opts.show_hidden |= b("show_hidden");
            if let Some(serde_yaml_ng::Value::Sequence(s)) = c.get("overrides") {
                opts.overrides
                    .extend(s.iter().filter_map(|x| x.as_str().map(String::from)));
            }
            if let Some(serde_yaml_ng::Value::Sequence(s)) = c.get("path_selector") {
                opts.path_selector
                    .extend(s.iter().filter_map(|x| x.as_str().map(String::from)));
            }
        }
        let invalid = || {
            KclError::Other(format!(
                "EvaluationError\nFailed to load '{}', invalid setting file format",
                path.display()
            ))
        };
        if !matches!(y, serde_yaml_ng::Value::Mapping(_)) {
            return Err(invalid());
        }
        match y.get("kcl_options") {
            Some(serde_yaml_ng::Value::Sequence(items)) => {
                for it in items {
                    let (Some(k), Some(v)) =
                        (it.get("key").and_then(|k| k.as_str()), it.get("value"))
                    else {
                        return Err(invalid());
                    };
                    args.push((k.to_string(), crate::value::json::from_yaml(v)));
                }
            }
            None | Some(serde_yaml_ng::Value::Null) => {}
            Some(_) => return Err(invalid()),
        }
    }
    Ok(())
}

/// Run the program made of `files` and return its output value (top-level variables).
pub fn run(files: &[PathBuf], options: &RunOptions) -> Result<Value, KclError> {
    run_full(files, options).map(|o| o.value)
}

/// Run and also render the output text exactly as `kcl run` prints it.
pub fn run_full(files: &[PathBuf], options: &RunOptions) -> Result<RunOutput, KclError> {
    let (mut out, r) = run_parts(files, options)?;
    out.text = match r {
        Rendering::Text(t) => t,
        Rendering::Yaml(v, po) => crate::output::to_yaml(&v, po),
    };
    Ok(out)
}

/// The output of a run still to be written: ready text, or a value to print as YAML.
pub enum Rendering {
    Text(String),
    Yaml(Value, PrintOpts),
}

impl Rendering {
    /// Write it to `w`; YAML is produced in chunks, never held whole.
    pub fn write_to(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        match self {
            Rendering::Text(t) => w.write_all(t.as_bytes()),
            Rendering::Yaml(v, po) => crate::output::write_yaml(v, *po, w),
        }
    }
}

/// [`run_full`] without rendering: the output's `text` is empty and what to print is returned
/// beside it (`kcl run` streams it).
pub fn run_parts(
    files: &[PathBuf],
    options: &RunOptions,
) -> Result<(RunOutput, Rendering), KclError> {
    let mut opts = options.clone();
    let mut files = files.to_vec();
    let mut args: Vec<(String, Value)> = Vec::new();
    apply_settings(&mut opts, &mut files, &mut args)?;
    for (k, v) in &opts.args {
        // kept raw: `option()` converts by its `type` (so `-D sha=12e1` stays a string)
        args.push((k.clone(), Value::str(v)));
    }
    let work_dir = match &opts.work_dir {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|e| KclError::Other(e.to_string()))?,
    };
    if files.is_empty() {
        files = match crate::cli_profile_entries(&work_dir) {
            Ok(f) => f,
            // a package without `[profile] entries` is its own folder, as upstream's `kcl run`
            // in a `kcl mod init` package
            Err(_) if work_dir.join("kcl.mod").is_file() => vec![work_dir.clone()],
            Err(e) => return Err(e),
        };
    }
    // `-E name=path` paths are relative to the work directory; `${name:KCL_MOD}` in a file
    // argument is that package's root
    for (_, p) in opts.external.iter_mut() {
        if !p.is_absolute() {
            *p = work_dir.join(&*p);
        }
    }
    let files: Vec<PathBuf> = files
        .into_iter()
        .map(|f| {
            let mut s = f.to_string_lossy().into_owned();
            for (n, p) in &opts.external {
                s = s.replace(&format!("${{{n}:KCL_MOD}}"), &p.display().to_string());
            }
            PathBuf::from(s)
        })
        .collect();
    let files: Vec<PathBuf> = files
        .into_iter()
        .map(|f| {
            if f.is_absolute() || f.to_string_lossy().contains("KCL_MOD}") {
                f
            } else {
                work_dir.join(f)
            }
        })
        .collect();
    // a file named both on the command line and in a settings file is loaded once
    let mut seen = std::collections::HashSet::new();
    let files: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| seen.insert(std::fs::canonicalize(f).unwrap_or_else(|_| f.clone())))
        .collect();
    let load = LoadOptions {
        external: opts.external.clone(),
        work_dir: Some(work_dir.clone()),
    };
    let cache = opts.parse_cache.clone();
    let cache: &ParseCache = match cache.as_deref() {
        Some(c) => c,
        None => crate::parser::loader::process_cache(),
    };
    let mut program = match load_program_cached(&files, &load, Some(cache)) {
        Ok(p) => p,
        Err(d) => {
            return Err(
                recovered_errors(&files, &load).unwrap_or_else(|| KclError::Syntax(d.to_string()))
            );
        }
    };
    let loaded: Vec<PathBuf> = program
        .main
        .modules
        .iter()
        .chain(program.packages.iter().flat_map(|(_, p)| p.modules.iter()))
        .map(|m| PathBuf::from(&*m.filename))
        .collect();
    if !opts.overrides.is_empty() {
        crate::overrides::apply(&mut program, &opts.overrides).map_err(KclError::Other)?;
    }
    // repeated schema declarations of the main package become one statement, as upstream
    // rewrites them before resolving
    crate::parser::merge::merge_main(&mut program);
    // static errors first, as upstream's resolver reports them before anything runs
    let checked = crate::types::check_program(&program).map_err(KclError::Eval)?;
    let exec_workdir = opts
        .work_dir
        .as_ref()
        .map(|w| w.display().to_string())
        .unwrap_or_default();
    let access = opts.allow.access(&program.root, &work_dir, &opts.external);
    let eopts = EvalOptions {
        args,
        work_dir: work_dir.clone(),
        exec_workdir,
        plugin: opts.plugin.clone(),
        strict_range_check: opts.strict_range_check,
        note_instances: opts.note_instances,
        access,
        unchecked_configs: checked.unchecked_configs,
    };
    let _limits = crate::limits::enter(opts.limits);
    let (ev, modules) = Evaluator::new(program, eopts);
    // where upstream's runtime stands when the program has run: its last statement
    let last_stmt = modules
        .iter()
        .rev()
        .find_map(|m| m.body.last())
        .map(|s| s.span);
    let teardown = Teardown {
        ev: Some(ev),
        free: !opts.exiting,
    };
    let ev = teardown.evaluator();
    let finish = || -> Result<(RunOutput, Rendering), KclError> {
        let main = ev
            .make_pkg("__main__", work_dir.clone(), modules)
            .map_err(KclError::Eval)?;
        ev.run_pkg(&main).map_err(KclError::Eval)?;
        let out = ev.pkg_output(&main, opts.show_hidden);
        let mut value = Value::from(out);
        if let Some(doc) = ev.expr_output(&main).map_err(KclError::Eval)? {
            value = match (&doc, value.as_dict().is_some_and(|d| !d.is_empty())) {
                (Value::Dict(_) | Value::Schema(_), true) => {
                    crate::value::union(&doc, &value, false).map_err(|e| KclError::Other(e.msg))?
                }
                // (None documents leave the globals' document as it is)
                (Value::None, true) => value,
                _ => doc,
            };
        }
        let po = PrintOpts {
            sort_keys: opts.sort_keys,
            drop_none: opts.disable_none,
            hide_private: !opts.show_hidden,
            quote_digit_start: false,
        };
        let printed = ev.stdout.borrow().clone();
        let warnings = ev.warnings.borrow().clone();
        if let Some(t) = ev.output_override.borrow().clone() {
            return Ok((
                RunOutput {
                    value,
                    text: String::new(),
                    printed,
                    warnings,
                    files: loaded,
                },
                Rendering::Text(t),
            ));
        }
        // (upstream selects in a config document only: any other is output as it is)
        if !opts.path_selector.is_empty() && value.is_config() {
            let end = ev.program_end_pos().or(last_stmt);
            value = select(&value, &opts.path_selector).map_err(|m| match end {
                Some(sp) => KclError::Eval(EvalError::new(ErrKind::Evaluation, m, Some(sp))),
                None => KclError::Other(m),
            })?;
        }
        let mut v = value.clone();
        if opts.disable_none && !matches!(v, Value::List(_)) {
            v = v.without_none();
        }
        let rendering = if opts.json {
            let mut s = to_json(&v, po, 4);
            s.push('\n');
            Rendering::Text(s)
        } else {
            match &v {
                // upstream prints an empty document as `{}`
                Value::Dict(d) if d.is_empty() => Rendering::Text("{}\n".into()),
                Value::List(items) => Rendering::Text(selected_list_yaml(items, po)),
                _ => Rendering::Yaml(v, po),
            }
        };
        let out = RunOutput {
            value,
            text: String::new(),
            printed,
            warnings,
            files: loaded,
        };
        Ok((out, rendering))
    };
    // what `print()` wrote before a failure is output too (upstream's command line has
    // written it as the program ran)
    finish().map_err(|error| {
        let printed = ev.stdout.borrow().clone();
        if printed.is_empty() {
            error
        } else {
            KclError::Printed {
                printed,
                error: Box::new(error),
            }
        }
    })
}

/// The YAML of a list chosen by `-S` (several selectors, or one naming a list), as upstream
/// plans it: configs only make a `---` stream of documents (none for an empty list); otherwise
/// one list whose configs are planned (`-n`, `-H`) and whose other items are printed as they are.
fn selected_list_yaml(items: &[Value], po: PrintOpts) -> String {
    let planned = |v: &Value| {
        if po.drop_none {
            v.without_none()
        } else {
            v.clone()
        }
    };
    if items.iter().all(Value::is_config) {
        let docs: Vec<Value> = items.iter().map(planned).collect();
        return crate::output::to_yaml_stream(&docs, po);
    }
    let raw = PrintOpts {
        drop_none: false,
        hide_private: false,
        ..po
    };
    let mut out = String::new();
    for item in items {
        if matches!(item, Value::Undefined | Value::Func(_)) {
            continue;
        }
        let one = Value::from(vec![if item.is_config() {
            planned(item)
        } else {
            item.clone()
        }]);
        out.push_str(&crate::output::to_yaml(
            &one,
            if item.is_config() { po } else { raw },
        ));
    }
    if out.is_empty() {
        out.push_str("[]\n");
    }
    out
}

/// Owns a run's evaluator and frees it at the end of the run, or leaves it to the process's
/// exit (see [`RunOptions::exiting`]).
struct Teardown {
    ev: Option<Evaluator>,
    free: bool,
}

impl Teardown {
    fn evaluator(&self) -> &Evaluator {
        self.ev
            .as_ref()
            .expect("the evaluator lives until the teardown drops")
    }
}

impl Drop for Teardown {
    fn drop(&mut self) {
        if let Some(ev) = self.ev.take()
            && !self.free
        {
            std::mem::forget(ev);
        }
    }
}

/// `-S` selectors: `a.b.c`, `pkg:a.b`, `:a.{x,y}`, `a.[0,1]`. Several selectors give the
/// list of their values, as upstream's `filter_by_path`.
fn select(v: &Value, sels: &[String]) -> Result<Value, String> {
    if let [s] = sels {
        return select_one(v, s);
    }
    let picked: Result<Vec<Value>, String> = sels.iter().map(|s| select_one(v, s)).collect();
    Ok(Value::from(picked?))
}

fn select_one(v: &Value, sel: &str) -> Result<Value, String> {
    let missing = || format!("invalid path select operand {sel}, value not found");
    if !sel.contains('{') && !sel.contains('[') && !sel.contains(':') {
        let mut cur = v.clone();
        for part in sel.split('.') {
            // (a number steps into a list, as upstream's `y.0`)
            let item = match (cur.list_items(), part.parse::<usize>()) {
                (Some(items), Ok(i)) => items.get(i).cloned(),
                _ => cur.as_dict().and_then(|d| d.get(part).cloned()),
            };
            cur = item.ok_or_else(missing)?;
        }
        return Ok(cur);
    }
    // the key set and index forms keep the path structure
    let path = sel.split_once(':').map(|(_, p)| p).unwrap_or(sel);
    let parts: Vec<&str> = split_sel(path);
    let picked = pick(v, &parts).ok_or_else(missing)?;
    let merged = crate::value::union(&Value::empty_dict(), &picked, false).map_err(|e| e.msg)?;
    Ok(merged)
}

fn split_sel(p: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in p.char_indices() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            '.' if depth == 0 => {
                out.push(&p[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&p[start..]);
    out
}

/// The value at `parts` wrapped back in its path (`{a: {b: v}}`).
fn pick(v: &Value, parts: &[&str]) -> Option<Value> {
    let Some((first, rest)) = parts.split_first() else {
        return Some(v.clone());
    };
    if let Some(keys) = first.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
        let mut d = Dict::new();
        for k in keys.split(',') {
            let k = k.trim();
            let x = v.as_dict()?.get(k)?;
            d.map.insert(Str::from(k), pick(x, rest)?);
        }
        return Some(Value::from(d));
    }
    if first.starts_with('[') {
        // list element selection is not supported by upstream either
        return None;
    }
    let x = v.as_dict()?.get(first)?;
    let mut d = Dict::new();
    d.map.insert(Str::from(*first), pick(x, rest)?);
    Some(Value::from(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let w = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w("kcl.mod", "[package]\nname = \"app\"\n");
        w(
            "lib/model.k",
            "schema Base:\n    name: str\n    check:\n        len(name) > 0\n\nschema App(Base):\n    replicas: int = 1\n\nmake = lambda n: str { App {name = n} }\n",
        );
        w(
            "main.k",
            "import lib.model\n\nschema Local:\n    f: (int) -> int = lambda x: int { x + 1 }\n    v: int = f(1)\n\nadd = lambda a: int { lambda b: int { a + b } }\nplus2 = add(2)\napps = [model.make(\"a${i}\") for i in range(3)]\nl = Local {}\ncount = len(model.App.instances()) + plus2(1)\n",
        );
        dir
    }

    fn run_in(dir: &std::path::Path) -> String {
        let opts = RunOptions {
            work_dir: Some(dir.to_path_buf()),
            ..Default::default()
        };
        run_full(&[dir.join("main.k")], &opts).unwrap().text
    }

    // Schema types (their layouts and instances), closures and imported packages all hold
    // their package: without the evaluator cutting those cycles, every run stays in memory.
    #[test]
    fn a_run_gives_its_packages_back() {
        let dir = program();
        let out = run_in(dir.path());
        assert!(out.contains("count: 3"), "{out}");
        assert_eq!(crate::eval::live::packages(), 0);
    }

    // The syntax trees belong to the run's packages, not to the process: once the run and
    // the values a host kept from it are gone, only the parse cache holds them (an edited
    // file's old version is then freed by the cache).
    #[test]
    fn a_run_gives_its_syntax_trees_back() {
        let dir = program();
        let cache = std::sync::Arc::new(ParseCache::new());
        let opts = RunOptions {
            work_dir: Some(dir.path().to_path_buf()),
            parse_cache: Some(cache.clone()),
            ..Default::default()
        };
        let holders = |f: &str| {
            let m = cache.parse(&dir.path().join(f)).unwrap();
            std::sync::Arc::strong_count(&m) - 1
        };
        let out = run_full(&[dir.path().join("main.k")], &opts).unwrap();
        // `l` is an instance of `Local`: its schema type holds the main package's tree
        assert!(holders("main.k") > 1, "the kept value lost its tree");
        let text = crate::output::to_yaml(&out.value, Default::default());
        assert!(text.contains("count: 3"), "{text}");
        drop(out);
        assert_eq!(holders("main.k"), 1);
        assert_eq!(holders("lib/model.k"), 1);
    }

    // A process running the same files again parses and registers them once (the process's
    // parse cache): the source map does not grow per run.
    #[test]
    fn running_the_same_files_again_registers_no_new_source() {
        let dir = program();
        let first = run_in(dir.path());
        let before = crate::ast::source_map().add("probe", None, "").id;
        let again = run_in(dir.path());
        let after = crate::ast::source_map().add("probe", None, "").id;
        assert_eq!(first, again);
        // other tests of this binary may register files meanwhile: only ours must not add
        let ours = |id: crate::ast::FileId| {
            crate::ast::source_map()
                .get(id)
                .and_then(|f| f.path.clone())
                .is_some_and(|p| p.starts_with(dir.path()))
        };
        let new: Vec<u32> = (before.0 + 1..after.0)
            .filter(|&k| ours(crate::ast::FileId(k)))
            .collect();
        assert!(new.is_empty(), "registered again: {new:?}");
        // an edit is seen (content is verified, not file times)
        std::fs::write(dir.path().join("main.k"), "count = 7\n").unwrap();
        assert_eq!(run_in(dir.path()), "count: 7\n");
    }
}
