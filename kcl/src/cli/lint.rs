//! `kcl lint [PATH|DIR/...]`: the static checker's findings, without evaluating.
//!
//! As upstream (`kcl lint`, kcl-lib's `LintPath`): each package is loaded and resolved, and
//! syntax errors, unresolved imports and type errors are reported with upstream's codes and
//! messages, together with upstream's lint warnings, `Module 'x' imported but unused`
//! (`unused-import`) and `Module 'x' is reimported multiple times` (`reimport`). Output is
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
//! Limits: the checker stops at its first type error in a package (upstream reports all), so a
//! package shows at most one type error per run.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::ast::{Module, Span, StmtKind};
use crate::diag::Level;
use crate::lexer::{Tok, lex};
use crate::parser::loader::{LoadOptions, load_program};

/// Arguments of `kcl lint`.
#[derive(Args, Debug)]
pub struct LintArgs {
    /// Files, package folders, or `DIR/...` for every package below DIR (default `.`).
    pub paths: Vec<String>,
    /// Delete unused and repeated imports.
    #[arg(long = "fix")]
    pub fix: bool,
    /// Switch a rule off (`unused-import`, `reimport`); repeatable.
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
pub const RULES: &[&str] = &["unused-import", "reimport"];

/// One finding.
#[derive(Debug, Clone)]
pub struct Finding {
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
    let mut external = Vec::new();
    for e in &a.external {
        match e.split_once('=') {
            Some((k, v)) => external.push((k.to_string(), cwd.join(v))),
            None => {
                eprintln!("error: invalid value for -E '{e}': expected name=path");
                return Ok(ExitCode::from(2));
            }
        }
    }
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
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stdout(),
            "{}",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        );
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

// ------------------------------------------------------------------------ packages ----

/// The packages to lint: a folder and its files (in name order), folders in name order.
fn packages(cwd: &Path, specs: &[String]) -> Result<Vec<(PathBuf, Vec<PathBuf>)>, String> {
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut loose: Vec<PathBuf> = Vec::new();
    for s in specs {
        if let Some(base) = s.strip_suffix("...") {
            let base = base.trim_end_matches('/');
            let root = cwd.join(if base.is_empty() { "." } else { base });
            walk(&normalize(&root), &mut dirs);
        } else {
            let p = normalize(&cwd.join(s));
            if p.is_dir() {
                dirs.insert(p);
            } else if p.is_file() {
                loose.push(p);
            } else {
                return Err(format!("cannot find '{s}'"));
            }
        }
    }
    // files listed by a folder's kcl.yaml are linted with that folder
    let mut claimed: BTreeSet<PathBuf> = BTreeSet::new();
    let mut listed: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    for d in &dirs {
        if let Some(files) = settings_files(d) {
            for f in &files {
                if let Ok(c) = std::fs::canonicalize(f) {
                    claimed.insert(c);
                }
            }
            listed.push((d.clone(), files));
        }
    }
    let mut out: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    for d in &dirs {
        if let Some((_, files)) = listed.iter().find(|(x, _)| x == d) {
            out.push((d.clone(), files.clone()));
            continue;
        }
        let files = k_files(d);
        if files.is_empty() {
            continue;
        }
        let all_claimed = files.iter().all(|f| {
            std::fs::canonicalize(f).is_ok_and(|c| claimed.contains(&c))
                || f.to_string_lossy().ends_with("_test.k")
        });
        if all_claimed && !claimed.is_empty() && files.iter().any(|f| !is_test(f)) {
            continue;
        }
        out.push((d.clone(), files));
    }
    for f in loose {
        let dir = f.parent().map(Path::to_path_buf).unwrap_or_default();
        match out.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, fs)) if !fs.contains(&f) => fs.push(f),
            Some(_) => {}
            None => out.push((dir, vec![f])),
        }
    }
    if out.is_empty() {
        return Err(format!("no KCL files found in {}", specs.join(" ")));
    }
    Ok(out)
}

fn is_test(p: &Path) -> bool {
    p.to_string_lossy().ends_with("_test.k")
}

fn walk(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut has_k = false;
    let mut subdirs = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !name.starts_with('.') {
                subdirs.push(p);
            }
        } else if name.ends_with(".k") {
            has_k = true;
        }
    }
    if has_k || dir.join("kcl.yaml").is_file() {
        out.insert(dir.to_path_buf());
    }
    subdirs.sort();
    for s in subdirs {
        walk(&s, out);
    }
}

/// A folder's `.k` files: the package's, then its tests, each in name order.
fn k_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "k"))
                .collect()
        })
        .unwrap_or_default();
    files.sort_by_key(|p| (is_test(p), p.clone()));
    files
}

/// The files a folder's `kcl.yaml` lists (`kcl_cli_configs.files`), as `kcl run` reads them.
fn settings_files(dir: &Path) -> Option<Vec<PathBuf>> {
    let text = std::fs::read_to_string(dir.join("kcl.yaml")).ok()?;
    let y: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).ok()?;
    let c = y.get("kcl_cli_configs")?;
    let mut out = Vec::new();
    for key in ["files", "file"] {
        if let Some(serde_yaml_ng::Value::Sequence(fs)) = c.get(key) {
            for f in fs.iter().filter_map(|f| f.as_str()) {
                let p = PathBuf::from(f);
                out.push(if p.is_absolute() || f.contains("KCL_MOD}") {
                    p
                } else {
                    normalize(&dir.join(p))
                });
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

// --------------------------------------------------------------------------- checks ----

/// Lint one package (its files loaded together).
pub fn lint_package(dir: &Path, files: &[PathBuf], external: &[(String, PathBuf)]) -> Vec<Finding> {
    let load = LoadOptions {
        external: external.to_vec(),
        work_dir: Some(dir.to_path_buf()),
    };
    let mut out = Vec::new();
    let mut program = match load_program(files, &load) {
        Ok(p) => p,
        Err(diags) => {
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
                });
            }
            return out;
        }
    };
    // the warnings look at the files as written, before schemas are merged
    for m in &program.main.modules {
        out.extend(import_warnings(m));
    }
    crate::parser::merge::merge_main(&mut program);
    if let Err(e) = crate::types::check_program(&program) {
        let (file, line, col) = match e.span {
            Some(s) => {
                let l = s.loc();
                (l.file.to_string(), l.line, l.col)
            }
            None => (String::new(), 0, 0),
        };
        let (code, title) = e.kind.code_title();
        out.insert(
            0,
            Finding {
                error: true,
                code: code.to_string(),
                title: title.to_string(),
                file,
                line,
                col,
                message: e.msg.clone(),
                rendered: e.to_string(),
                delete: None,
            },
        );
    }
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
