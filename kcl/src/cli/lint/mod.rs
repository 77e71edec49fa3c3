//! `kcl lint [PATH|DIR/...]`: the static checker's findings, without evaluating.
//!
//! As upstream (`kcl lint`, kcl-lib's `LintPath`): each package is loaded and resolved, and
//! syntax errors, unresolved imports and type errors are reported with upstream's codes and
//! messages, together with upstream's lint warnings, `Module 'x' imported but unused`
//! (`unused-import`) and `Module 'x' is reimported multiple times` (`reimport`); and beyond
//! upstream, lambda locals never read (`unused-variable`), lambda parameters and locals hiding
//! a package-level name (`shadowed-name`), configs setting a `@deprecated` schema attribute
//! (`deprecated`, in the evaluator's words), and statements that never run (`unreachable`: an
//! `if` branch behind a literal condition, what follows `assert False`). Output is
//! rustc-style (or `--format json`); the exit code is 1 when there is an error, warnings alone
//! exit 0. `--fix` deletes unused and repeated imports (a certain fix: the name is used nowhere
//! in the file). Rules are switched off with `--disable RULE` or `disable = ["RULE"]` in
//! `kcl-lint.toml` (in the current folder, or given with `--config`).
//!
//! Packages: a folder is one package; `DIR/...` lints every folder below DIR that holds `.k`
//! files, as upstream. One refinement so a Konfig repository lints clean: a folder with a
//! `kcl.yaml` is linted as the files it lists (as it is compiled), and a folder whose files are
//! all listed by some `kcl.yaml` is linted there and not alone.
//!
//! Limits: every error the checker collects is reported, one per line; where the checker stops
//! early in a file with several type errors, the later ones are missed (upstream reports them).
//!
//! Here: the command, upstream's findings and `--fix`; [`packages`]: which packages;
//! [`extra`]: the findings beyond the checker's.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::ast::{Module, Span, StmtKind};
use crate::diag::Level;
use crate::lexer::{Tok, lex};
use crate::parser::loader::{LoadOptions, load_program_partial};

mod extra;
mod packages;

use extra::{extra_warnings, resolver_errors};
use packages::packages;

/// Arguments of `kcl lint`.
#[derive(Args, Debug)]
pub struct LintArgs {
    /// Files, package folders, or `DIR/...` for every package below DIR (default `.`).
    pub paths: Vec<String>,
    /// Delete unused and repeated imports.
    #[arg(long = "fix")]
    pub fix: bool,
    /// Switch a rule off (`unused-import`, `reimport`, `unused-variable`, `shadowed-name`,
    /// `deprecated`, `unreachable`); repeatable.
    #[arg(long = "disable", value_name = "RULE")]
    pub disable: Vec<String>,
    /// A `kcl-lint.toml` (`disable = [...]`); default `./kcl-lint.toml` when it exists.
    #[arg(long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Report format.
    #[arg(long = "format", value_parser = ["text", "json"], default_value = "text")]
    pub format: String,
    /// External packages (`name=path`).
    #[arg(short = 'E', long = "external")]
    pub external: Vec<String>,
}

/// The lint rules (warnings; errors cannot be switched off).
pub(crate) const RULES: &[&str] = &[
    "unused-import",
    "reimport",
    "unused-variable",
    "shadowed-name",
    "deprecated",
    "unreachable",
];

/// One finding.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub error: bool,
    /// Upstream's code for errors (`E2G22`), the rule name for warnings.
    pub code: String,
    pub title: String,
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub message: String,
    pub rendered: String,
    /// A certain fix: delete these bytes of `file`.
    pub delete: Option<(usize, usize)>,
    /// Where the finding is (the language server's range).
    pub span: Option<Span>,
}

pub fn run(a: LintArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let mut disabled: BTreeSet<String> = a.disable.iter().cloned().collect();
    let config = a.config.clone().or_else(|| {
        let p = cwd.join("kcl-lint.toml");
        p.is_file().then_some(p)
    });
    if let Some(c) = &config {
        let text = std::fs::read_to_string(c)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", c.display()))?;
        let v: toml::Table =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", c.display()))?;
        if let Some(d) = v.get("disable").and_then(|d| d.as_array()) {
            disabled.extend(d.iter().filter_map(|x| x.as_str().map(String::from)));
        }
    }
    if let Some(bad) = disabled.iter().find(|r| !RULES.contains(&r.as_str())) {
        eprintln!(
            "error: unknown lint rule '{bad}' (rules: {})",
            RULES.join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    let external = match super::external_with_dependencies(&a.external, &cwd) {
        Ok(external) => external,
        Err(code) => return Ok(code),
    };
    let specs = if a.paths.is_empty() {
        vec![".".to_string()]
    } else {
        a.paths.clone()
    };
    let packages = match packages(&cwd, &specs) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let mut findings = Vec::new();
    for (dir, files) in &packages {
        findings.extend(
            lint_package(dir, files, &external)
                .into_iter()
                .filter(|f| f.error || !disabled.contains(&f.code)),
        );
    }
    if a.fix {
        let fixed = apply_fixes(&findings)?;
        if fixed > 0 {
            eprintln!("fixed {fixed} finding(s)");
        }
        findings.retain(|f| f.delete.is_none());
    }
    let errors = findings.iter().filter(|f| f.error).count();
    let warnings = findings.len() - errors;
    if a.format == "json" {
        let items: Vec<serde_json::Value> = findings
            .iter()
            .map(|f| {
                serde_json::json!({
                    "level": if f.error { "error" } else { "warning" },
                    "code": f.code,
                    "title": f.title,
                    "file": f.file,
                    "line": f.line,
                    "column": f.col,
                    "message": f.message,
                    "fixable": f.delete.is_some(),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "errors": errors,
            "warnings": warnings,
            "packages": packages.len(),
            "findings": items,
        });
        crate::cli::print_json(&doc);
    } else {
        let mut out = String::new();
        for f in &findings {
            out.push_str(&f.rendered);
            out.push('\n');
        }
        if errors + warnings > 0 {
            let _ = writeln!(
                out,
                "{errors} error(s), {warnings} warning(s) in {} package(s)",
                packages.len()
            );
        }
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(out.as_bytes());
    }
    Ok(if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Lint one package (its files loaded together).
pub(crate) fn lint_package(
    dir: &Path,
    files: &[PathBuf],
    external: &[(String, PathBuf)],
) -> Vec<Finding> {
    let load = LoadOptions {
        external: external.to_vec(),
        work_dir: Some(dir.to_path_buf()),
    };
    // as upstream, a file with syntax errors is still resolved as the parser recovered it
    let (mut program, diags) = match load_program_partial(files, &load) {
        Ok((p, d)) => (Some(p), d),
        Err(d) => (None, d),
    };
    lint_loaded(program.as_mut(), &diags, true)
}

/// The findings of a loaded package (`diags`: what loading reported): the load errors, the
/// warnings, and the checker's errors; `imported` also checks the packages it imports (first
/// error of each), as `kcl lint` does. The language server lints each package as its own main
/// package, without them.
pub(crate) fn lint_loaded(
    program: Option<&mut crate::parser::loader::Program>,
    diags: &crate::diag::Diagnostics,
    imported: bool,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut program = program;
    for d in &diags.0 {
        let (file, line, col) = match d.span() {
            Some(s) => {
                let l = s.loc();
                (l.file.to_string(), l.line, l.col)
            }
            None => (String::new(), 0, 0),
        };
        out.push(Finding {
            error: d.level == Level::Error,
            code: d.code.as_deref().unwrap_or("").to_string(),
            title: d.title.to_string(),
            file,
            line,
            col,
            message: d.message().to_string(),
            rendered: d.render(),
            delete: None,
            span: d.span(),
        });
    }
    let Some(program) = program.take() else {
        return out;
    };
    // the warnings look at the files as written, before schemas are merged
    for m in &program.main.modules {
        out.extend(import_warnings(m));
    }
    out.extend(extra_warnings(program));
    for f in resolver_errors(program) {
        if !out
            .iter()
            .any(|x| x.error && x.file == f.file && x.line == f.line)
        {
            out.push(f);
        }
    }
    crate::parser::merge::merge_main(program);
    let errors = if imported {
        crate::types::check_program_all(program)
    } else {
        crate::types::check_main_package(program)
    };
    for e in errors {
        let (file, line, col) = match e.span {
            Some(s) => {
                let l = s.loc();
                (l.file.to_string(), l.line, l.col)
            }
            None => (String::new(), 0, 0),
        };
        let (code, title) = e.kind.code_title();
        // one error per line: a second one there (a syntax error's recovered tree, or the
        // same mistake seen twice) adds nothing
        if out
            .iter()
            .any(|f| f.error && f.file == file && f.line == line)
        {
            continue;
        }
        out.push(Finding {
            error: true,
            code: code.to_string(),
            title: title.to_string(),
            file,
            line,
            col,
            message: e.msg.clone(),
            rendered: e.to_string(),
            delete: None,
            span: e.span,
        });
    }
    // errors first, then warnings, each in file order
    out.sort_by(|a, b| (!a.error, &a.file, a.line, a.col).cmp(&(!b.error, &b.file, b.line, b.col)));
    out
}

/// Unused and repeated imports of one file (upstream's two lint warnings).
fn import_warnings(m: &Module) -> Vec<Finding> {
    let Some(src) = crate::ast::source_map().get(m.file) else {
        return Vec::new();
    };
    let text: &str = &src.text;
    let imports: Vec<(Span, &crate::ast::ImportStmt)> = m
        .body
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Import(i) => Some((s.span, i)),
            _ => None,
        })
        .collect();
    if imports.is_empty() {
        return Vec::new();
    }
    // every name the file mentions outside its imports, and inside `${...}` of its strings
    let lexed = lex(text, m.file, 0);
    let in_import = |lo: u32| imports.iter().any(|(s, _)| s.lo <= lo && lo < s.hi);
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let mut interpolated = String::new();
    for t in &lexed.tokens {
        match t.tok {
            Tok::Ident(sym) if !in_import(t.lo) => {
                used.insert(sym.as_str());
            }
            Tok::Str { .. } => {
                let s = &text[t.lo as usize..t.hi as usize];
                if s.contains("${") {
                    interpolated.push_str(s);
                    interpolated.push('\n');
                }
            }
            _ => {}
        }
    }
    let mentioned = |name: &str| {
        used.contains(name) || {
            // a crude but safe test: the name as a word inside an interpolated string
            interpolated.match_indices(name).any(|(i, _)| {
                let before = interpolated[..i].chars().next_back();
                let after = interpolated[i + name.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        }
    };
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (span, imp) in &imports {
        let Some(local) = imp.local_name() else {
            continue;
        };
        let local = local.as_str();
        let whole = whole_lines(text, *span);
        if seen.contains(&&*imp.path) {
            out.push(warning(
                "reimport",
                "ReimportWarning",
                *span,
                format!("Module '{local}' is reimported multiple times"),
                whole,
            ));
        }
        seen.push(&imp.path);
        if !mentioned(local) {
            out.push(warning(
                "unused-import",
                "UnusedImportWarning",
                *span,
                format!("Module '{local}' imported but unused"),
                whole,
            ));
        }
    }
    out
}

/// The statement's lines when it has them to itself (so deleting them is safe).
fn whole_lines(text: &str, span: Span) -> Option<(usize, usize)> {
    let lo = span.lo as usize;
    let hi = span.hi as usize;
    let start = text[..lo].rfind('\n').map_or(0, |i| i + 1);
    if !text[start..lo].trim().is_empty() {
        return None;
    }
    let end = text[hi..].find('\n').map_or(text.len(), |i| hi + i + 1);
    let rest = text[hi..end].trim();
    (rest.is_empty() || rest.starts_with('#')).then_some((start, end))
}

fn warning(
    rule: &str,
    title: &str,
    span: Span,
    message: String,
    delete: Option<(usize, usize)>,
) -> Finding {
    let l = span.loc();
    let mut d =
        crate::diag::Diagnostic::error(crate::diag::ErrorKind::CompileError, span, &message);
    d.level = Level::Warning;
    d.code = Some(rule.to_string().into());
    d.title = title.to_string().into();
    Finding {
        error: false,
        code: rule.to_string(),
        title: title.to_string(),
        file: l.file.to_string(),
        line: l.line,
        col: l.col,
        message,
        rendered: d.render(),
        delete,
        span: Some(span),
    }
}

/// Apply the certain fixes (deletions), last first in each file; how many findings they fix.
fn apply_fixes(findings: &[Finding]) -> anyhow::Result<usize> {
    let mut by_file: std::collections::BTreeMap<&str, Vec<(usize, usize)>> = Default::default();
    for f in findings {
        if let Some(d) = f.delete {
            by_file.entry(&f.file).or_default().push(d);
        }
    }
    let n = findings.iter().filter(|f| f.delete.is_some()).count();
    for (file, mut dels) in by_file {
        // a repeated unused import has two findings and one deletion
        dels.sort();
        dels.dedup();
        let mut text = std::fs::read_to_string(file)?;
        for (lo, hi) in dels.into_iter().rev() {
            if hi <= text.len() {
                text.replace_range(lo..hi, "");
            }
        }
        std::fs::write(file, text)?;
    }
    Ok(n)
}
