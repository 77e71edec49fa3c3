//! `kcl vet DATA CODE.k [-s Schema]`: validate a JSON or YAML document against a schema.
//!
//! As upstream (kcl-lib's `ValidateCode`): the data becomes a KCL config instantiating the
//! schema (`value = Schema {...}`; a list validates each item; no `-s` means the code's first
//! schema), and the checker and evaluator judge it, so types, `check:` blocks, unknown
//! attributes and required ones are reported in the language's own words. Success prints
//! `Validate success!`; a failure exits 1.
//!
//! Unlike upstream, which stops at the first failing instance, every violation is reported:
//! after each one the offending value is taken out of the data and the rest validated again.
//! Each is shown at its place in the data file (line and column, from a YAML 1.2 parser that
//! keeps marks on every node; JSON is read by the same parser) together with its data path
//! (`$.ports[1].containerPort`) and, below, the schema line that declares or checks it.
//!
//! Here: the command, the validation loop and the report; [`data`]: the data file with
//! positions; [`to_kcl`]: the data as KCL, mapped back to data paths.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::ast::{FileId, Span, StmtKind};
use crate::eval::{EvalError, EvalOptions, Evaluator};
use crate::parser::loader::{LoadOptions, load_program};

mod data;
mod to_kcl;

use data::{Data, Node, Pos, map_pos, parse_data};
use to_kcl::{Gen, Origin, Step, child_path, generate, parse_path, remove_path};

/// Arguments of `kcl vet`.
#[derive(Args, Debug)]
pub struct VetArgs {
    /// The JSON or YAML data file (`-`: standard input).
    pub data: PathBuf,
    /// The KCL file with the schema.
    pub code: PathBuf,
    /// The schema to validate against (default: the first schema of the code).
    #[arg(short = 's', long = "schema")]
    pub schema: Option<String>,
    /// The name given to the data's value in the generated config.
    #[arg(short = 'a', long = "attribute_name", default_value = "value")]
    pub attribute_name: String,
    /// Data format: `json` also checks the text is strict JSON; both are read by the same YAML
    /// 1.2 parser, so YAML needs no flag.
    #[arg(long = "format", value_parser = ["json", "yaml", "JSON", "YAML"])]
    pub format: Option<String>,
    /// External packages (`name=path`).
    #[arg(short = 'E', long = "external")]
    pub external: Vec<String>,
    /// Report format: text or json.
    #[arg(long = "output", value_parser = ["text", "json"], default_value = "text")]
    pub output: String,
}

/// One violation: the evaluator's error and its place in the data.
pub(crate) struct Violation {
    pub path: String,
    /// What to take out of the data before looking for the next violation: the value itself,
    /// or for a failed `check:` the whole instance (its other values are not at fault).
    pub remove: String,
    pub pos: Pos,
    pub error: EvalError,
}

/// "attribute 'x' of S is required" for a value this run took out itself.
fn caused_by_removal(v: &Violation, removed: &[String]) -> bool {
    let Some(rest) = v.error.msg.strip_prefix("attribute '") else {
        return false;
    };
    let Some((attr, _)) = rest.split_once('\'') else {
        return false;
    };
    v.error.msg.contains("is required") && removed.iter().any(|r| *r == child_path(&v.path, attr))
}

/// Where the data file's text is shown in reports.
struct DataFile {
    name: String,
    lines: Vec<String>,
}

pub fn run(a: VetArgs) -> anyhow::Result<ExitCode> {
    // `-` reads the data from standard input, as upstream
    let from_stdin = a.data.as_os_str() == "-";
    let read = if from_stdin {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t).map(|_| t)
    } else {
        std::fs::read_to_string(&a.data)
    };
    let text = match read {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read '{}': {e}", a.data.display());
            return Ok(ExitCode::from(1));
        }
    };
    let mut root = match parse_data(&text) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "error: '{}' is not valid JSON or YAML: {e}",
                a.data.display()
            );
            return Ok(ExitCode::from(1));
        }
    };
    let cwd = std::env::current_dir()?;
    let mut external = Vec::new();
    for e in &a.external {
        match e.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                external.push((k.trim().to_string(), cwd.join(v.trim())))
            }
            _ => {
                eprintln!("invalid --external value \"{e}\", expected '<pkg_name>=<pkg_path>'");
                return Ok(ExitCode::from(1));
            }
        }
    }
    if a.format
        .as_deref()
        .is_some_and(|f| f.eq_ignore_ascii_case("json"))
        && let Err(e) = serde_json::from_str::<serde_json::Value>(&text)
    {
        eprintln!("error: '{}' is not valid JSON: {e}", a.data.display());
        return Ok(ExitCode::from(1));
    }
    let data_file = DataFile {
        name: if from_stdin {
            "<stdin>".to_string()
        } else {
            std::fs::canonicalize(&a.data)
                .unwrap_or(a.data.clone())
                .display()
                .to_string()
        },
        lines: text.lines().map(str::to_string).collect(),
    };
    let code = std::fs::canonicalize(&a.code).unwrap_or(a.code.clone());
    let validator = match Validator::new(
        &code,
        a.schema.as_deref(),
        &a.attribute_name,
        &external,
        &cwd,
    ) {
        Ok(v) => v,
        Err(e) => {
            eprint!("{e}");
            return Ok(ExitCode::from(1));
        }
    };
    let mut violations: Vec<Violation> = Vec::new();
    let mut removed: Vec<String> = Vec::new();
    // each round validates what is left after taking out the values already reported
    for _ in 0..200 {
        let v = match validator.validate_once(&root) {
            Ok(None) => break,
            Ok(Some(v)) => v,
            Err(e) => {
                // the code itself does not load or check
                eprint!("{e}");
                return Ok(ExitCode::from(1));
            }
        };
        if caused_by_removal(&v, &removed) {
            break;
        }
        let again = violations.iter().any(|x| x.path == v.path);
        let gone = !again && v.remove != "$" && remove_path(&mut root, &v.remove);
        if gone {
            removed.push(v.remove.clone());
        }
        if !again {
            violations.push(v);
        }
        if !gone {
            break;
        }
    }
    violations.sort_by_key(|v| (v.pos.line, v.pos.col));
    if a.output == "json" {
        print_json(&violations, &data_file);
    } else if violations.is_empty() {
        println!("Validate success!");
    } else {
        let mut out = String::new();
        for v in &violations {
            out.push_str(&render(v, &data_file));
        }
        eprint!("{out}");
    }
    Ok(if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The code, loaded and checked once; each validation evaluates it with one more module.
struct Validator {
    program: crate::parser::loader::Program,
    schema: String,
    name: String,
    external: Vec<(String, PathBuf)>,
    cwd: PathBuf,
    dir: PathBuf,
}

impl Validator {
    fn new(
        code: &Path,
        schema: Option<&str>,
        name: &str,
        external: &[(String, PathBuf)],
        cwd: &Path,
    ) -> Result<Self, String> {
        let load = LoadOptions {
            external: external.to_vec(),
            work_dir: None,
        };
        let program = load_program(&[code.to_path_buf()], &load).map_err(|d| d.to_string())?;
        let schema = match schema {
            Some(s) => s.to_string(),
            None => program
                .main
                .modules
                .iter()
                .flat_map(|m| m.body.iter())
                .find_map(|s| match &s.kind {
                    StmtKind::Schema(sc) => Some(sc.name.sym.as_str().to_string()),
                    _ => None,
                })
                .ok_or(
                    "error: the code defines no schema to validate against (give one with -s)\n",
                )?,
        };
        let v = Validator {
            program,
            schema,
            name: name.to_string(),
            external: external.to_vec(),
            cwd: cwd.to_path_buf(),
            dir: code.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        // the code alone must run, so that every later error is the data's
        if let (_, Err(e)) = v.eval("")? {
            return Err(e.to_string());
        }
        Ok(v)
    }

    /// Check and evaluate the code with `text` as one more file; the file's id and the result.
    fn eval(&self, text: &str) -> Result<(FileId, Result<(), EvalError>), String> {
        let mut program = self.program.clone();
        let module = crate::parser::parse_source(VET_FILE, text).map_err(|d| d.to_string())?;
        let file = module.file;
        program.main.modules.push(std::sync::Arc::new(module));
        crate::parser::merge::merge_main(&mut program);
        let checked = match crate::types::check_program(&program) {
            Ok(c) => c,
            Err(e) => return Ok((file, Err(e))),
        };
        let access = crate::run::Allow::default().access(&program.root, &self.cwd, &self.external);
        let eopts = EvalOptions {
            args: Vec::new(),
            work_dir: self.cwd.clone(),
            exec_workdir: String::new(),
            plugin: None,
            strict_range_check: false,
            note_instances: false,
            access,
            unchecked_configs: checked.unchecked_configs,
        };
        let (ev, modules) = Evaluator::new(program, eopts);
        let r = (|| {
            let pkg = ev.make_pkg("__main__", self.dir.clone(), modules)?;
            ev.run_pkg(&pkg)
        })();
        Ok((file, r))
    }

    /// Validate the data once: `Ok(None)` when valid, else the first violation; `Err` when the
    /// code does not load or check on its own.
    fn validate_once(&self, root: &Node) -> Result<Option<Violation>, String> {
        let g = generate(root, &self.schema, &self.name);
        let (file, r) = self.eval(&g.text)?;
        let Err(e) = r else { return Ok(None) };
        // an error raised in the schema's own code (a default merged with the data, say)
        // is still the data's: the code alone ran
        let root_origin = g.origins.last().expect("the root is always recorded");
        let o = origin_of(&e, file, &g.origins).unwrap_or(root_origin);
        let (path, pos, remove) =
            self.localize(&e, root, &o.path)
                .unwrap_or((o.path.clone(), o.pos, o.path.clone()));
        Ok(Some(Violation {
            path,
            remove,
            pos,
            error: e,
        }))
    }

    /// The evaluator puts an error found while a nested dict becomes a schema instance at the
    /// outer config. Find the dict itself: the innermost dict below `at` that, instantiated
    /// alone as the schema the error's note lies in, fails the same way; for an attribute's
    /// type, the key of that attribute in it.
    fn localize(&self, e: &EvalError, root: &Node, at: &str) -> Option<(String, Pos, String)> {
        let note = e
            .notes
            .iter()
            .map(|(s, _)| *s)
            .chain(e.span)
            .find(|s| !is_vet_file(*s))?;
        let schema = self.schema_at(note)?;
        let start = node_at(root, at)?;
        let mut maps = Vec::new();
        collect_maps(start, at, &mut maps);
        let key = |x: &EvalError| {
            let n = x
                .notes
                .iter()
                .map(|(s, _)| *s)
                .chain(x.span)
                .find(|s| !is_vet_file(*s))
                .map(|s| (s.file, s.loc().line));
            (x.msg.clone(), n)
        };
        let want = key(e);
        for (path, n) in maps {
            let mut g = Gen {
                text: format!("__vet_probe = {schema} "),
                origins: Vec::new(),
            };
            g.value(n, &path);
            g.text.push('\n');
            let Ok((_, Err(x))) = self.eval(&g.text) else {
                continue;
            };
            if key(&x) != want {
                continue;
            }
            // point at the attribute the note names (a declaration) or tests first (a check
            // condition) when the dict has it
            // (a failed check's note marks the line upstream reports: its whole text)
            let line = crate::ast::source_map().get(note.file).map(|f| {
                f.line_text(note.loc().line.saturating_sub(1) as usize)
                    .to_string()
            });
            let text = match (note.text(), line) {
                (Some(t), Some(l)) if t.len() < l.len() => l,
                (t, l) => t.map(|t| t.to_string()).or(l).unwrap_or_default(),
            };
            let words = text
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with(|c: char| c.is_alphabetic() || c == '_'));
            let failed_check = e.notes.iter().any(|(_, m)| m.starts_with("Check failed"));
            if let Data::Map(entries) = &n.data {
                for w in words {
                    if let Some((k, kpos, _)) = entries.iter().find(|(k, _, _)| k == w) {
                        let p = child_path(&path, k);
                        let remove = if failed_check {
                            path.clone()
                        } else {
                            p.clone()
                        };
                        return Some((p, *kpos, remove));
                    }
                }
            }
            return Some((path.clone(), map_pos(n), path));
        }
        None
    }

    /// The name of the schema whose body holds `span`.
    fn schema_at(&self, span: Span) -> Option<String> {
        self.program
            .main
            .modules
            .iter()
            .chain(
                self.program
                    .packages
                    .iter()
                    .flat_map(|(_, p)| p.modules.iter()),
            )
            .filter(|m| m.file == span.file)
            .flat_map(|m| m.body.iter())
            .find_map(|s| match &s.kind {
                StmtKind::Schema(sc) if s.span.lo <= span.lo && span.lo < s.span.hi => {
                    Some(sc.name.sym.as_str().to_string())
                }
                _ => None,
            })
    }
}

/// Display name of the generated file (kept out of reports).
const VET_FILE: &str = "<kcl vet data>";

fn is_vet_file(s: Span) -> bool {
    &*s.loc().file == VET_FILE
}

fn node_at<'a>(root: &'a Node, path: &str) -> Option<&'a Node> {
    let mut cur = root;
    for s in parse_path(path) {
        cur = match (&cur.data, s) {
            (Data::Map(e), Step::Key(k)) => e.iter().find(|(x, _, _)| *x == k).map(|x| &x.2)?,
            (Data::List(l), Step::Index(i)) => l.get(i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Every dict at or below `n`, innermost first.
fn collect_maps<'a>(n: &'a Node, path: &str, out: &mut Vec<(String, &'a Node)>) {
    match &n.data {
        Data::Map(e) => {
            for (k, _, v) in e {
                collect_maps(v, &child_path(path, k), out);
            }
            out.push((path.to_string(), n));
        }
        Data::List(l) => {
            for (i, v) in l.iter().enumerate() {
                collect_maps(v, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The innermost piece of data an error points at (its span or, failing that, a note's).
fn origin_of<'a>(e: &EvalError, file: FileId, origins: &'a [Origin]) -> Option<&'a Origin> {
    let spans: Vec<Span> = e
        .span
        .into_iter()
        .chain(e.notes.iter().map(|(s, _)| *s))
        .collect();
    spans.iter().filter(|s| s.file == file).find_map(|s| {
        let lo = s.lo as usize;
        origins
            .iter()
            .filter(|o| o.lo <= lo && lo < o.hi.max(o.lo + 1))
            .min_by_key(|o| o.hi - o.lo)
    })
}

fn title(e: &EvalError) -> &'static str {
    e.kind.code_title().1
}

/// A violation in upstream's diagnostic layout, pointing into the data file, with the
/// evaluator's notes (the schema's declaration or check) below.
fn render(v: &Violation, data: &DataFile) -> String {
    let (code, t) = v.error.kind.code_title();
    let mut out = format!("error[{code}]: {t}\n");
    let ln = v.pos.line.to_string();
    let pad = " ".repeat(ln.len());
    let src = data
        .lines
        .get(v.pos.line.saturating_sub(1))
        .cloned()
        .unwrap_or_default();
    let _ = writeln!(out, "{pad}--> {}:{}:{}", data.name, v.pos.line, v.pos.col);
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{ln} | {src}");
    let _ = writeln!(
        out,
        "{pad} | {}^ {} (at {})",
        " ".repeat(v.pos.col.saturating_sub(1)),
        v.error.msg,
        v.path
    );
    let _ = writeln!(out, "{pad} |");
    // the notes outside the generated code: where the schema declares or checks the value
    let notes = EvalError {
        kind: v.error.kind,
        msg: String::new(),
        span: None,
        notes: v
            .error
            .notes
            .iter()
            .filter(|(s, _)| !is_vet_file(*s))
            .cloned()
            .collect(),
        footer: Vec::new(),
        plain: false,
        also: None,
    };
    if let Some(sp) = v.error.span.filter(|s| !is_vet_file(*s)) {
        let mut n = notes;
        n.notes.insert(0, (sp, v.error.msg.clone()));
        push_notes(&mut out, &n);
    } else {
        push_notes(&mut out, &notes);
    }
    out.push('\n');
    out
}

fn push_notes(out: &mut String, e: &EvalError) {
    if e.notes.is_empty() {
        return;
    }
    // the evaluator's own rendering of the notes, without its head line and message
    let full = e.to_string();
    let body = full.split_once('\n').map(|x| x.1).unwrap_or("");
    let body = body.strip_prefix('\n').unwrap_or(body);
    out.push_str(body);
}

fn print_json(violations: &[Violation], data: &DataFile) {
    let errors: Vec<serde_json::Value> = violations
        .iter()
        .map(|v| {
            let schema = v
                .error
                .span
                .into_iter()
                .chain(v.error.notes.iter().map(|(s, _)| *s))
                .filter(|s| !is_vet_file(*s))
                .map(|s| s.loc())
                .next()
                .map(
                    |l| serde_json::json!({"filepath": &*l.file, "line": l.line, "column": l.col}),
                );
            serde_json::json!({
                "errorType": title(&v.error),
                "file": data.name,
                "line": v.pos.line,
                "column": v.pos.col,
                "path": v.path,
                "message": v.error.msg,
                "codeSnippet": data.lines.get(v.pos.line.saturating_sub(1)).map(|s| s.trim()),
                "schema": schema,
            })
        })
        .collect();
    let doc = if violations.is_empty() {
        serde_json::json!({"success": true, "message": "Validate success!"})
    } else {
        serde_json::json!({"success": false, "errCount": errors.len(), "errors": errors})
    };
    crate::cli::print_json(&doc);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_of_yaml_and_json() {
        let n = parse_data("a: 1\nb:\n  - x: 'y'\n  - 2.5\n").unwrap();
        let Data::Map(e) = &n.data else { panic!() };
        assert_eq!(e[1].1, Pos { line: 2, col: 1 });
        let Data::List(l) = &e[1].2.data else {
            panic!()
        };
        let Data::Map(x) = &l[0].data else { panic!() };
        assert_eq!(x[0].1, Pos { line: 3, col: 5 });
        assert!(matches!(l[1].data, Data::Float(f) if f == 2.5));
        let n = parse_data("{\n  \"name\": \"web\",\n  \"n\": 3\n}").unwrap();
        let Data::Map(e) = &n.data else { panic!() };
        assert_eq!(e[1].1, Pos { line: 3, col: 3 });
        assert!(matches!(e[1].2.data, Data::Int(3)));
    }

    #[test]
    fn paths_round_trip() {
        let mut n = parse_data("a:\n  \"x.y\": [1, 2, 3]\n").unwrap();
        assert!(remove_path(&mut n, "$.a[\"x.y\"][1]"));
        let g = generate(&n, "S", "value");
        assert_eq!(g.text, "value = S {\na: {\n\"x.y\": [1, 3]\n}\n}\n");
    }
}
