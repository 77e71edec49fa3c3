//! `kcl parse FILES|DIRS...`: parse every `.k` file and print diagnostics.

use crate::parser::{loader::collect_k_files, parse_file};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `kcl parse`.
#[derive(clap::Args, Debug)]
pub struct ParseArgs {
    /// Files or directories (searched recursively for `.k` files).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Print one `OK|ERR path` line per file instead of diagnostics.
    #[arg(long)]
    pub summary: bool,
    /// Print throughput figures (bytes, seconds, MB/s) to stderr.
    #[arg(long)]
    pub stats: bool,
}

/// Runs `kcl parse`; exit code 1 when any file has a syntax error.
pub fn run(args: ParseArgs) -> anyhow::Result<ExitCode> {
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
