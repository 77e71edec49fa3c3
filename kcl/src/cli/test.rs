//! `kcl test`: run the `test_*` lambdas of `*_test.k` files beside a package.
//!
//! As upstream (`kcl test`, kcl-lib's `Test` service): a package is a folder with `*_test.k`
//! files; they are loaded together with the folder's other `.k` files, and every top-level
//! `test_* = lambda ...` of a test file (in file, then statement order) runs in an evaluation
//! of its own, with the package in scope. The report is upstream's (`name: PASS (1ms)`,
//! a failure's message below its line, a rule, `PASS: n/total` and `FAIL: n/total`), exit 1 on
//! a failure; `--fail-fast` stops a package at its first failure (upstream goes on with the
//! next package). `--format json` gives the same results as one JSON document for CI, with
//! each failure's location and message apart.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;

use crate::ast::{ExprKind, Span, StmtKind, Symbol};
use crate::eval::{EvalError, EvalOptions, Evaluator};
use crate::parser::loader::{LoadOptions, load_program};
use crate::pkg::resolve::normalize;
use crate::value::Value;

/// Arguments of `kcl test`.
#[derive(Args, Debug)]
pub struct TestArgs {
    /// Package folders; `DIR/...` includes every folder below DIR (default `.`).
    pub packages: Vec<String>,
    /// Only run tests whose name matches this regular expression.
    #[arg(long = "run", value_name = "REGEX")]
    pub run: Option<String>,
    /// Stop a package's tests at its first failure.
    #[arg(long = "fail-fast", alias = "fail_fast")]
    pub fail_fast: bool,
    /// Report format: `text` (upstream's) or `json`.
    #[arg(
        long = "format",
        value_enum,
        ignore_case = true,
        default_value = "text"
    )]
    pub format: ReportFormat,
    /// Top-level argument for `option()` (`key=value`).
    #[arg(short = 'D', long = "argument")]
    pub argument: Vec<String>,
    /// External packages (`name=path`).
    #[arg(short = 'E', long = "external")]
    pub external: Vec<String>,
    /// Strict range check.
    #[arg(short = 'r', long = "strict_range_check")]
    pub strict_range_check: bool,
    /// Accepted as upstream's (nothing is logged or styled here).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// Accepted as upstream's (nothing is styled here).
    #[arg(long = "no_style", alias = "no-style")]
    pub no_style: bool,
}

/// `kcl test --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    Text,
    Json,
}

/// One test's outcome.
struct Case {
    name: String,
    package: PathBuf,
    /// Where the lambda is defined (`file:line:col`).
    defined_at: String,
    micros: u128,
    log: String,
    error: Option<EvalError>,
}

pub fn run(a: TestArgs) -> anyhow::Result<ExitCode> {
    let filter = match a.run.as_deref().map(fancy_regex::Regex::new).transpose() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: invalid --run regular expression: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut args = Vec::new();
    for d in &a.argument {
        match d.split_once('=') {
            Some((k, v)) if !k.is_empty() => args.push((k.to_string(), Value::str(v))),
            _ => {
                eprintln!("EvaluationError\nInvalid value for top level arguments: '{d}'");
                return Ok(ExitCode::from(1));
            }
        }
    }
    let cwd = std::env::current_dir()?;
    let external = match super::external_with_dependencies(&a.external, &cwd) {
        Ok(external) => external,
        Err(code) => return Ok(code),
    };
    let specs = if a.packages.is_empty() {
        vec![".".to_string()]
    } else {
        a.packages.clone()
    };
    let mut dirs = Vec::new();
    for s in &specs {
        let (base, recursive) = match s.strip_suffix("/...").or(s.strip_suffix("...")) {
            Some(b) => (if b.is_empty() { "." } else { b }, true),
            None => (s.as_str(), false),
        };
        let base = normalize(&cwd.join(base));
        if !base.is_dir() {
            eprintln!("error: cannot find the package folder '{s}'");
            return Ok(ExitCode::from(1));
        }
        collect_dirs(&base, recursive, &mut dirs)?;
    }
    let ctx = Setup {
        args,
        external,
        strict_range_check: a.strict_range_check,
        cwd,
    };
    let mut cases = Vec::new();
    for dir in dirs {
        if let Err(e) = run_package(&dir, &ctx, filter.as_ref(), a.fail_fast, &mut cases) {
            // the package does not load or check: upstream reports the error alone
            eprint!("{e}");
            return Ok(ExitCode::from(1));
        }
    }
    let failed = cases.iter().filter(|c| c.error.is_some()).count();
    match a.format {
        ReportFormat::Text => print_text(&cases),
        ReportFormat::Json => print_json(&cases),
    }
    if failed > 0 {
        // upstream's CLI ends a failed run with an empty error line
        eprintln!();
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

struct Setup {
    args: Vec<(String, Value)>,
    external: Vec<(String, PathBuf)>,
    strict_range_check: bool,
    cwd: PathBuf,
}

/// `dir` (and with `recursive` every folder below it, in name order) when it holds tests.
fn collect_dirs(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    if entries.iter().any(|p| is_test_file(p)) && !out.iter().any(|d| d == dir) {
        out.push(dir.to_path_buf());
    }
    if recursive {
        for p in entries {
            let hidden = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            if p.is_dir() && !hidden {
                collect_dirs(&p, true, out)?;
            }
        }
    }
    Ok(())
}

fn is_test_file(p: &Path) -> bool {
    p.is_file()
        && p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with("_test.k"))
}

/// Load `dir`'s package with its test files and run the tests, appending to `cases`.
fn run_package(
    dir: &Path,
    s: &Setup,
    filter: Option<&fancy_regex::Regex>,
    fail_fast: bool,
    cases: &mut Vec<Case>,
) -> Result<(), String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("error: {}: {e}\n", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "k"))
        .collect();
    // the package's files first, then its tests, each in name order
    files.sort_by_key(|p| (is_test_file(p), p.clone()));
    let load = LoadOptions {
        external: s.external.clone(),
        work_dir: None,
    };
    let mut program = load_program(&files, &load).map_err(|d| d.to_string())?;
    crate::parser::merge::merge_main(&mut program);
    let checked = crate::types::check_program(&program).map_err(|e| e.to_string())?;
    // the tests: `test_* = lambda` at the top level of a test file
    let mut tests: Vec<(Symbol, Span, String)> = Vec::new();
    for m in &program.main.modules {
        if !m.filename.ends_with("_test.k") {
            continue;
        }
        for st in &m.body {
            let StmtKind::Assign(a) = &st.kind else {
                continue;
            };
            if !matches!(a.value.kind, ExprKind::Lambda(_)) {
                continue;
            }
            for t in &a.targets {
                let name = t.name.sym.as_str();
                if t.path.is_empty()
                    && name.starts_with("test_")
                    && filter.is_none_or(|f| f.is_match(name).unwrap_or(false))
                {
                    let l = t.span.loc();
                    let at = format!("{}:{}:{}", l.file, l.line, l.col);
                    tests.push((t.name.sym, t.span, at));
                }
            }
        }
    }
    let access = crate::run::Allow::default().access(&program.root, &s.cwd, &s.external);
    for (sym, span, defined_at) in tests {
        let start = Instant::now();
        let eopts = EvalOptions {
            args: s.args.clone(),
            work_dir: s.cwd.clone(),
            exec_workdir: String::new(),
            plugin: None,
            strict_range_check: s.strict_range_check,
            note_instances: false,
            access: access.clone(),
            unchecked_configs: checked.unchecked_configs.clone(),
        };
        let (ev, modules) = Evaluator::new(program.clone(), eopts);
        let result = (|| {
            let pkg = ev.make_pkg("__main__", dir.to_path_buf(), modules)?;
            ev.run_pkg(&pkg)?;
            let f = ev.get_global(&pkg, sym, false)?.unwrap_or(Value::Undefined);
            let ctx = ev.ctx(&pkg, span.file);
            ev.in_pkg(&pkg, || ev.call_value(&ctx, &f, &[], &[], span))
                .map(|_| ())
        })();
        let failed = result.is_err();
        cases.push(Case {
            name: sym.as_str().to_string(),
            package: dir.to_path_buf(),
            defined_at,
            micros: start.elapsed().as_micros(),
            log: ev.stdout.borrow().clone(),
            error: result.err(),
        });
        if failed && fail_fast {
            break;
        }
    }
    Ok(())
}

fn print_text(cases: &[Case]) {
    use std::fmt::Write as _;
    let mut out = String::new();
    if cases.is_empty() {
        println!("no test files");
        return;
    }
    for c in cases {
        let ms = c.micros / 1000;
        match &c.error {
            None => {
                let _ = writeln!(out, "{}: PASS ({ms}ms)", c.name);
            }
            Some(e) => {
                let _ = writeln!(out, "{}: FAIL ({ms}ms)", c.name);
                // upstream's message ends in a blank line and its reporter adds another
                let _ = writeln!(out, "{}\n\n", e.to_string().trim_end());
            }
        }
    }
    let total = cases.len();
    let fail = cases.iter().filter(|c| c.error.is_some()).count();
    let pass = total - fail;
    out.push_str(&"-".repeat(80));
    out.push('\n');
    if pass > 0 {
        let _ = writeln!(out, "PASS: {pass}/{total}");
    }
    if fail > 0 {
        let _ = writeln!(out, "FAIL: {fail}/{total}");
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
}

fn print_json(cases: &[Case]) {
    let tests: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| {
            let mut o = serde_json::json!({
                "name": c.name,
                "package": c.package.display().to_string(),
                "defined_at": c.defined_at,
                "status": if c.error.is_some() { "fail" } else { "pass" },
                "duration_us": c.micros as u64,
                "log": c.log,
            });
            if let Some(e) = &c.error {
                let location = e.span.map(|sp| {
                    let l = sp.loc();
                    format!("{}:{}:{}", l.file, l.line, l.col)
                });
                o["failure"] = serde_json::json!({
                    "location": location,
                    "message": e.msg,
                    "report": e.to_string(),
                });
            }
            o
        })
        .collect();
    let failed = cases.iter().filter(|c| c.error.is_some()).count();
    let doc = serde_json::json!({
        "passed": cases.len() - failed,
        "failed": failed,
        "total": cases.len(),
        "tests": tests,
    });
    crate::cli::print_json(&doc);
}
