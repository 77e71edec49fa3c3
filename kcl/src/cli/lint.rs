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
use crate::parser::loader::{LoadOptions, load_program_partial};

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
    let Some(mut external) = super::external_packages(&a.external, &cwd) else {
        return Ok(ExitCode::from(2));
    };
    // the dependencies of kcl.mod (of the package above the working folder), as `kcl run`
    // resolves them; -E wins
    let given: Vec<String> = external.iter().map(|(n, _)| n.clone()).collect();
    match super::mod_dependencies(&[], &given, false, false) {
        Ok(deps) => external.extend(deps),
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(1));
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

// ------------------------------------------------------------ beyond upstream's lint ----

use crate::ast::{ConfigEntry, ConfigEntryKind, Expr, ExprKind, LambdaExpr, Stmt, StrPart, Symbol};

/// Every expression below `stmts`, outermost first.
fn walk_stmts<'a>(stmts: &'a [Stmt], f: &mut dyn FnMut(&'a Expr)) {
    for s in stmts {
        walk_stmt(s, f);
    }
}

fn walk_stmt<'a>(s: &'a Stmt, f: &mut dyn FnMut(&'a Expr)) {
    match &s.kind {
        StmtKind::Expr(e) => walk_expr(e, f),
        StmtKind::Unification(u) => walk_expr(&u.value, f),
        StmtKind::Assign(a) => {
            for t in &a.targets {
                walk_target(t, f);
            }
            walk_expr(&a.value, f);
        }
        StmtKind::AugAssign(a) => {
            walk_target(&a.target, f);
            walk_expr(&a.value, f);
        }
        StmtKind::Assert(a) => {
            walk_expr(&a.test, f);
            a.if_cond.iter().chain(&a.msg).for_each(|e| walk_expr(e, f));
        }
        StmtKind::If(i) => {
            walk_expr(&i.cond, f);
            walk_stmts(&i.body, f);
            walk_stmts(&i.orelse, f);
        }
        StmtKind::SchemaAttr(a) => {
            if let Some(v) = &a.value {
                walk_expr(v, f);
            }
        }
        StmtKind::Schema(sc) => {
            for p in sc.params.iter().flatten() {
                if let Some(d) = &p.default {
                    walk_expr(d, f);
                }
            }
            walk_stmts(&sc.body, f);
            for c in &sc.checks {
                walk_expr(&c.test, f);
                c.if_cond.iter().chain(&c.msg).for_each(|e| walk_expr(e, f));
            }
        }
        StmtKind::Rule(r) => {
            for c in &r.checks {
                walk_expr(&c.test, f);
                c.if_cond.iter().chain(&c.msg).for_each(|e| walk_expr(e, f));
            }
        }
        StmtKind::Import(_) | StmtKind::TypeAlias(_) => {}
    }
}

fn walk_target<'a>(t: &'a crate::ast::Target, f: &mut dyn FnMut(&'a Expr)) {
    for p in &t.path {
        if let crate::ast::TargetPath::Index(e) = p {
            walk_expr(e, f);
        }
    }
}

fn walk_entries<'a>(entries: &'a [ConfigEntry], f: &mut dyn FnMut(&'a Expr)) {
    for e in entries {
        match &e.kind {
            ConfigEntryKind::KeyValue { key, value, .. } => {
                walk_expr(key, f);
                walk_expr(value, f);
            }
            ConfigEntryKind::Unpack { value, .. } => walk_expr(value, f),
            ConfigEntryKind::If(i) => {
                walk_expr(&i.cond, f);
                walk_entries(&i.body, f);
                walk_entries(&i.orelse, f);
            }
        }
    }
}

fn walk_expr<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    f(e);
    let mut w = |x: &'a Expr| walk_expr(x, f);
    match &e.kind {
        ExprKind::JoinedStr(parts) => {
            for p in parts.iter() {
                if let StrPart::Interp { expr, .. } = p {
                    w(expr);
                }
            }
        }
        ExprKind::Unary { operand, .. } => w(operand),
        ExprKind::Binary { left, right, .. } => {
            w(left);
            w(right);
        }
        ExprKind::Compare(c) => {
            w(&c.left);
            c.ops.iter().for_each(|(_, x)| w(x));
        }
        ExprKind::If(i) => {
            w(&i.cond);
            w(&i.then);
            w(&i.orelse);
        }
        ExprKind::Selector(s) => w(&s.value),
        ExprKind::Subscript { value, index, .. } => {
            w(value);
            w(index);
        }
        ExprKind::Slice(s) => {
            w(&s.value);
            s.lower
                .iter()
                .chain(&s.upper)
                .chain(&s.step)
                .for_each(&mut w);
        }
        ExprKind::Call { func, args } => {
            w(func);
            args.args.iter().for_each(&mut w);
            args.keywords.iter().for_each(|k| w(&k.value));
        }
        ExprKind::Paren(x) | ExprKind::Starred(x) => w(x),
        ExprKind::As { value, .. } => w(value),
        ExprKind::List(items) => items.iter().for_each(&mut w),
        ExprKind::ListIf(i) => {
            w(&i.cond);
            i.body.iter().chain(&i.orelse).for_each(&mut w);
        }
        ExprKind::Config(entries) => walk_entries(entries, f),
        ExprKind::ListComp(c) => {
            w(&c.elt);
            for cl in &c.clauses {
                w(&cl.iter);
                cl.ifs.iter().for_each(&mut w);
            }
        }
        ExprKind::DictComp(c) => {
            w(&c.key);
            w(&c.value);
            for cl in &c.clauses {
                w(&cl.iter);
                cl.ifs.iter().for_each(&mut w);
            }
        }
        ExprKind::Quant(q) => {
            w(&q.target);
            w(&q.test);
            q.if_cond.iter().for_each(&mut w);
        }
        ExprKind::Schema(s) => {
            if let Some(a) = &s.args {
                a.args.iter().for_each(&mut w);
                a.keywords.iter().for_each(|k| w(&k.value));
            }
            w(&s.config);
        }
        ExprKind::Lambda(l) => {
            for p in &l.params {
                if let Some(d) = &p.default {
                    w(d);
                }
            }
            walk_stmts(&l.body, f);
        }
        _ => {}
    }
}

/// The names an expression tree reads (identifiers, and the roots of assignment paths).
fn reads(stmts: &[Stmt]) -> BTreeSet<Symbol> {
    let mut out = BTreeSet::new();
    walk_stmts(stmts, &mut |e| {
        if let ExprKind::Ident(s) = e.kind {
            out.insert(s);
        }
        if let ExprKind::Schema(s) = &e.kind
            && let Some(n) = s.name.names.first()
        {
            out.insert(n.sym);
        }
    });
    let mut targets = |s: &Stmt| {
        let ts: Vec<&crate::ast::Target> = match &s.kind {
            StmtKind::Assign(a) => a.targets.iter().collect(),
            StmtKind::AugAssign(a) => vec![&a.target],
            _ => Vec::new(),
        };
        for t in ts {
            if !t.path.is_empty() || matches!(s.kind, StmtKind::AugAssign(_)) {
                out.insert(t.name.sym);
            }
        }
    };
    fn each(stmts: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
        for s in stmts {
            f(s);
            if let StmtKind::If(i) = &s.kind {
                each(&i.body, f);
                each(&i.orelse, f);
            }
        }
    }
    each(stmts, &mut targets);
    out
}

/// Lambda locals never read (`unused-variable`) and lambda parameters or locals that hide a
/// package-level name (`shadowed-name`); uses of `@deprecated` schema attributes in configs
/// (`deprecated`); dead statements (`unreachable`). None of these is in upstream's lint.
fn extra_warnings(program: &crate::parser::loader::Program) -> Vec<Finding> {
    let modules = &program.main.modules;
    // package-level names: variables, schemas, rules, imports
    let mut globals: std::collections::HashMap<Symbol, Span> = Default::default();
    // `@deprecated` attributes by (schema, attribute)
    let mut deprecated: std::collections::HashMap<(Symbol, Symbol), String> = Default::default();
    let all_modules = modules
        .iter()
        .chain(program.packages.iter().flat_map(|(_, p)| p.modules.iter()));
    for m in modules {
        for s in &m.body {
            match &s.kind {
                StmtKind::Assign(a) => {
                    for t in &a.targets {
                        globals.entry(t.name.sym).or_insert(t.name.span);
                    }
                }
                StmtKind::Unification(u) => {
                    globals.entry(u.target.sym).or_insert(u.target.span);
                }
                StmtKind::Schema(sc) => {
                    globals.entry(sc.name.sym).or_insert(sc.name.span);
                }
                StmtKind::Rule(r) => {
                    globals.entry(r.name.sym).or_insert(r.name.span);
                }
                StmtKind::Import(i) => {
                    if let Some(n) = i.local_name() {
                        globals.entry(n).or_insert(s.span);
                    }
                }
                _ => {}
            }
        }
    }
    for m in all_modules {
        for s in &m.body {
            let StmtKind::Schema(sc) = &s.kind else {
                continue;
            };
            for b in &sc.body {
                let StmtKind::SchemaAttr(a) = &b.kind else {
                    continue;
                };
                for d in &a.decorators {
                    if d.name.names.last().map(|n| n.sym.as_str()) == Some("deprecated") {
                        deprecated.insert((sc.name.sym, a.name.sym), deprecation(a, d));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for m in modules {
        unreachable_warnings(&m.body, &mut out);
        walk_stmts(&m.body, &mut |e: &Expr| match &e.kind {
            ExprKind::Lambda(l) => {
                out.extend(lambda_warnings(l, &globals));
                unreachable_warnings(&l.body, &mut out);
            }
            ExprKind::Schema(s) if !deprecated.is_empty() => {
                let Some(schema) = s.name.names.last().map(|n| n.sym) else {
                    return;
                };
                let ExprKind::Config(entries) = &s.config.kind else {
                    return;
                };
                for en in entries.iter() {
                    let ConfigEntryKind::KeyValue { key, .. } = &en.kind else {
                        continue;
                    };
                    let attr = match &key.kind {
                        ExprKind::Ident(k) => *k,
                        ExprKind::Str(k) => Symbol::intern(k),
                        _ => continue,
                    };
                    if let Some(msg) = deprecated.get(&(schema, attr)) {
                        out.push(warning(
                            "deprecated",
                            "DeprecatedWarning",
                            key.span,
                            msg.clone(),
                            None,
                        ));
                    }
                }
            }
            _ => {}
        });
    }
    out
}

/// The evaluator's deprecation message for literal decorator arguments.
fn deprecation(a: &crate::ast::SchemaAttr, d: &crate::ast::Decorator) -> String {
    let lit = |e: &Expr| match &e.kind {
        ExprKind::Str(s) => s.to_string(),
        ExprKind::Int(i) => i.to_string(),
        ExprKind::Float(f) => f.to_string(),
        _ => String::new(),
    };
    let (mut version, mut reason) = (String::new(), String::new());
    if let Some(args) = &d.args {
        if let Some(x) = args.args.first() {
            version = lit(x);
        }
        for k in &args.keywords {
            match k.name.sym.as_str() {
                "version" => version = lit(&k.value),
                "reason" => reason = lit(&k.value),
                _ => {}
            }
        }
    }
    let mut msg = format!("{} was deprecated", a.name.sym.as_str());
    if !version.is_empty() {
        msg.push_str(&format!(" since version {version}"));
    }
    if !reason.is_empty() {
        msg.push_str(&format!(", {reason}"));
    }
    msg
}

fn lambda_warnings(
    l: &LambdaExpr,
    globals: &std::collections::HashMap<Symbol, Span>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let shadow = |name: Symbol, span: Span, what: &str| {
        globals.get(&name).map(|g| {
            let at = g.loc();
            warning(
                "shadowed-name",
                "ShadowedNameWarning",
                span,
                format!(
                    "{what} '{}' shadows the package-level name defined at {}:{}",
                    name.as_str(),
                    at.line,
                    at.col
                ),
                None,
            )
        })
    };
    for p in &l.params {
        out.extend(shadow(p.name.sym, p.name.span, "parameter"));
    }
    let used = reads(&l.body);
    let mut seen = BTreeSet::new();
    let last = l.body.len().saturating_sub(1);
    for (i, s) in l.body.iter().enumerate() {
        let StmtKind::Assign(a) = &s.kind else {
            continue;
        };
        // an assignment ending the body is the lambda's value: not unused
        let returned = i == last;
        for t in a.targets.iter().filter(|t| t.path.is_empty()) {
            let name = t.name.sym;
            if !seen.insert(name) {
                continue;
            }
            out.extend(shadow(name, t.name.span, "local variable"));
            if !returned && !name.as_str().starts_with('_') && !used.contains(&name) {
                out.push(warning(
                    "unused-variable",
                    "UnusedVariableWarning",
                    t.name.span,
                    format!("variable '{}' is assigned but never used", name.as_str()),
                    None,
                ));
            }
        }
    }
    out
}

/// Errors upstream's resolver reports that the checker (which runs before `kcl run`
/// evaluates) leaves to evaluation: comprehension loop variables that are dotted or more than
/// two.
fn resolver_errors(program: &crate::parser::loader::Program) -> Vec<Finding> {
    use crate::diag::{Diagnostic, ErrorKind};
    let mut diags = Vec::new();
    for m in &program.main.modules {
        walk_stmts(&m.body, &mut |e: &Expr| {
            let clauses = match &e.kind {
                ExprKind::ListComp(c) => &c.clauses,
                ExprKind::DictComp(c) => &c.clauses,
                _ => return,
            };
            for cl in clauses {
                if let Some(t) = cl.targets.iter().find(|t| t.names.len() > 1) {
                    diags.push(Diagnostic::error(
                        ErrorKind::CompileError,
                        t.span,
                        "loop variables can only be ordinary identifiers",
                    ));
                } else if cl.targets.len() > 2 {
                    diags.push(Diagnostic::error(
                        ErrorKind::CompileError,
                        cl.targets[2].span,
                        format!(
                            "the number of loop variables is {}, which can only be 1 or 2",
                            cl.targets.len()
                        ),
                    ));
                }
            }
        });
    }
    diags
        .iter()
        .map(|d| {
            let l = d.span().map(|s| s.loc());
            Finding {
                error: true,
                code: d.code.as_deref().unwrap_or("").to_string(),
                title: d.title.to_string(),
                file: l.as_ref().map(|l| l.file.to_string()).unwrap_or_default(),
                line: l.as_ref().map_or(0, |l| l.line),
                col: l.as_ref().map_or(0, |l| l.col),
                message: d.message().to_string(),
                rendered: d.render(),
                delete: None,
                span: d.span(),
            }
        })
        .collect()
}

/// Statements that never run (`unreachable`): an `if` branch behind a literal condition, and
/// what follows an unconditional `assert False` in the same block.
fn unreachable_warnings(stmts: &[Stmt], out: &mut Vec<Finding>) {
    let literal = |e: &Expr| -> Option<bool> {
        match &e.kind {
            ExprKind::Bool(b) => Some(*b),
            ExprKind::None | ExprKind::Undefined => Some(false),
            ExprKind::Int(i) => Some(*i != 0),
            ExprKind::Paren(x) => match &x.kind {
                ExprKind::Bool(b) => Some(*b),
                _ => None,
            },
            _ => None,
        }
    };
    let mut dead_after: Option<Span> = None;
    for s in stmts {
        if let Some(at) = dead_after.take() {
            let l = at.loc();
            out.push(warning(
                "unreachable",
                "UnreachableCodeWarning",
                s.span,
                format!(
                    "unreachable code: the assertion at {}:{} always fails",
                    l.line, l.col
                ),
                None,
            ));
            break;
        }
        match &s.kind {
            StmtKind::Assert(a) if a.if_cond.is_none() && literal(&a.test) == Some(false) => {
                dead_after = Some(s.span);
            }
            StmtKind::If(i) => {
                let (dead, why) = match literal(&i.cond) {
                    Some(false) => (i.body.first(), "False"),
                    Some(true) => (i.orelse.first(), "True"),
                    None => (None, ""),
                };
                if let Some(d) = dead {
                    out.push(warning(
                        "unreachable",
                        "UnreachableCodeWarning",
                        d.span,
                        format!("unreachable code: the condition is always {why}"),
                        None,
                    ));
                }
                unreachable_warnings(&i.body, out);
                unreachable_warnings(&i.orelse, out);
            }
            StmtKind::Schema(sc) => unreachable_warnings(&sc.body, out),
            _ => {}
        }
    }
}
