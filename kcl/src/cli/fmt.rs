//! `kcl fmt [FILES|DIRS]`: format KCL files in place, or check/verify them.

use crate::ast::source_map;
use crate::fmt::{ast_fingerprint, format_module};
use crate::parser::{loader::collect_k_files, parse_registered};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `kcl fmt`.
#[derive(clap::Args, Debug)]
pub struct FmtArgs {
    /// Files or directories (searched recursively for `.k` files); default: current folder.
    pub paths: Vec<PathBuf>,
    /// Do not write; exit 1 if any file is not formatted.
    #[arg(long)]
    pub check: bool,
    /// Print the formatted text to stdout instead of writing files.
    #[arg(long)]
    pub stdout: bool,
    /// Do not write; check that formatting is idempotent and keeps the syntax tree.
    #[arg(long)]
    pub verify: bool,
}

/// Runs `kcl fmt`.
pub fn run(args: FmtArgs) -> anyhow::Result<ExitCode> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let files = collect_k_files(&paths)?;
    let mut failed = 0usize;
    let mut changed = 0usize;
    let mut verified = 0usize;
    for f in &files {
        let text =
            std::fs::read_to_string(f).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
        let abs = std::path::absolute(f).unwrap_or_else(|_| f.clone());
        let sf = source_map().add(abs.display().to_string(), Some(&abs), text.as_str());
        let m = match parse_registered(sf.id) {
            Ok(m) => m,
            Err(d) => {
                eprint!("{}", d.render());
                failed += 1;
                continue;
            }
        };
        let out = format_module(&m, &text);
        if args.verify {
            match verify(&abs, &m, &out) {
                Ok(()) => verified += 1,
                Err(msg) => {
                    println!("FAIL {}: {msg}", f.display());
                    failed += 1;
                }
            }
            continue;
        }
        if args.stdout {
            std::io::stdout().write_all(out.as_bytes())?;
            continue;
        }
        if out != text {
            changed += 1;
            if args.check {
                println!("{} is not formatted", f.display());
            } else {
                std::fs::write(f, &out).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
            }
        }
    }
    if args.verify {
        println!("{verified} verified, {failed} failed");
    } else if !args.stdout {
        eprintln!(
            "{} file(s) {}",
            changed,
            if args.check {
                "need formatting"
            } else {
                "reformatted"
            }
        );
    }
    let bad = failed > 0 || (args.check && changed > 0);
    Ok(if bad {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Formatting `out` again must give `out`, and its tree must equal `m`'s.
fn verify(path: &std::path::Path, m: &crate::ast::Module, out: &str) -> Result<(), String> {
    let name = format!("{} (formatted)", path.display());
    let sf = source_map().add(name, None, out);
    let m2 = parse_registered(sf.id)
        .map_err(|d| format!("formatted text does not parse:\n{}", d.render()))?;
    if ast_fingerprint(m) != ast_fingerprint(&m2) {
        return Err("formatting changed the syntax tree".into());
    }
    if m.comments.len() != m2.comments.len() {
        return Err(format!(
            "comments: {} before, {} after",
            m.comments.len(),
            m2.comments.len()
        ));
    }
    let again = format_module(&m2, out);
    if again != out {
        let line = again
            .lines()
            .zip(out.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0)
            + 1;
        return Err(format!(
            "not idempotent (first difference at formatted line {line})"
        ));
    }
    Ok(())
}
