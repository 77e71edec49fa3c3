//! `kcl parse FILES|DIRS...`: parse every `.k` file and print diagnostics; with `--program`,
//! load the inputs as one program (main package + imports) the way `kcl run` will.

use crate::parser::loader::{LoadOptions, collect_k_files, load_program};
use crate::parser::parse_file;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `kcl parse`.
#[derive(clap::Args, Debug)]
pub struct ParseArgs {
    /// Files or directories (searched recursively for `.k` files unless --program).
    pub paths: Vec<PathBuf>,
    /// Print one `OK|ERR path` line per file instead of diagnostics.
    #[arg(long)]
    pub summary: bool,
    /// Print throughput figures (bytes, seconds, MB/s) to stderr.
    #[arg(long)]
    pub stats: bool,
    /// Load the inputs as one program: main package plus everything it imports.
    #[arg(long)]
    pub program: bool,
    /// External package `name=path` (with --program).
    #[arg(short = 'E', long = "external", value_parser = parse_external)]
    pub external: Vec<(String, PathBuf)>,
}

/// Parses a `name=path` external package argument.
pub fn parse_external(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok((n.to_string(), PathBuf::from(p))),
        _ => Err(format!("expected name=path, got '{s}'")),
    }
}

/// Runs `kcl parse`; exit code 1 when any file has a syntax error.
pub fn run(args: ParseArgs) -> anyhow::Result<ExitCode> {
    if args.program {
        let opts = LoadOptions {
            external: args.external.clone(),
            work_dir: None,
        };
        return match load_program(&args.paths, &opts) {
            Ok(p) => {
                let files: usize = p.main.modules.len()
                    + p.packages
                        .iter()
                        .map(|(_, k)| k.modules.len())
                        .sum::<usize>();
                println!("root {}", p.root.display());
                println!("main package: {} file(s)", p.main.modules.len());
                for (path, pkg) in p.packages.iter() {
                    println!(
                        "package {path}: {} file(s) from {}",
                        pkg.modules.len(),
                        pkg.path.display()
                    );
                }
                println!("{} package(s), {files} file(s)", p.packages.len() + 1);
                Ok(ExitCode::SUCCESS)
            }
            Err(d) => {
                eprint!("{}", d.render());
                Ok(ExitCode::from(1))
            }
        };
    }
    if args.paths.is_empty() {
        anyhow::bail!("no input files");
    }
    let files = collect_k_files(&args.paths)?;
    let mut failed = 0usize;
    let mut bytes = 0u64;
    let start = std::time::Instant::now();
    for f in &files {
        bytes += std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        match parse_file(f) {
            Ok(_) => {
                if args.summary {
                    println!("OK {}", f.display());
                }
            }
            Err(d) => {
                failed += 1;
                if args.summary {
                    println!(
                        "ERR {} :: {}",
                        f.display(),
                        d.0.first().map(|x| x.message()).unwrap_or("")
                    );
                } else {
                    eprint!("{}", d.render());
                }
            }
        }
    }
    if args.stats {
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "parsed {} files, {} bytes in {:.3}s: {:.1} MB/s",
            files.len(),
            bytes,
            secs,
            bytes as f64 / 1e6 / secs.max(1e-9)
        );
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
