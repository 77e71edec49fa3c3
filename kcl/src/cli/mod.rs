//! The `kcl` binary's subcommands. Each lives in its own file so the front end (`fmt`,
//! `parse`) and the evaluator (`run`) can grow independently.

pub mod completion;
pub mod doc;
pub mod fmt;
pub mod import;
pub mod kmod;
pub mod lint;
pub mod parse;
pub mod run;
pub mod test;
pub mod vet;

use clap::{CommandFactory, Parser, Subcommand};
use std::ffi::OsString;
use std::process::ExitCode;

/// KCL language tool.
#[derive(Parser, Debug)]
#[command(
    name = "kcl",
    about = "KCL configuration language tool",
    // `--version`/`-v` print upstream's form (see `shorthand`)
    disable_version_flag = true,
    after_help = "`kcl FILE...` (or `kcl -D k=v FILE...`) is `kcl run FILE...`; `kcl --version` prints the version."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Format KCL files in place (or check them with --check).
    Fmt(fmt::FmtArgs),
    /// Parse KCL files and report syntax errors.
    Parse(parse::ParseArgs),
    /// Evaluate KCL files and print the result.
    Run(run::RunArgs),
    /// Convert JSON, YAML, TOML, JSON Schema, Terraform schemas, OpenAPI or CRDs to KCL.
    Import(import::ImportArgs),
    /// Run the `test_*` lambdas of `*_test.k` files (`kcl test ./...`).
    #[command(alias = "t")]
    Test(test::TestArgs),
    /// Documentation of a package's schemas (`kcl doc generate`).
    Doc(doc::DocArgs),
    /// Report the static checker's findings without evaluating (`kcl lint ./...`).
    Lint(lint::LintArgs),
    /// Validate a JSON or YAML file against a schema (`kcl vet data.json code.k -s Schema`).
    Vet(vet::VetArgs),
    /// Package management: init, add, pull, push, update, graph, metadata, vendor.
    Mod(kmod::ModArgs),
    /// Show the version (`<version>-<os>-<arch>`, upstream's form).
    Version,
    /// Print a shell completion script.
    Completion(completion::CompletionArgs),
    /// The language server (LSP over standard input and output).
    #[cfg(feature = "lsp")]
    Lsp(LspArgs),
}

/// Arguments of `kcl lsp`.
#[cfg(feature = "lsp")]
#[derive(clap::Args, Debug)]
pub struct LspArgs {
    /// Speak LSP on standard input and output (the default and only transport).
    #[arg(long)]
    pub stdio: bool,
}

/// The version line in upstream's form (`0.12.4-linux-amd64`: Go's OS and architecture names).
pub fn version_string() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        o => o,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        a => a,
    };
    format!("{}-{os}-{arch}", env!("CARGO_PKG_VERSION"))
}

/// Upstream's shorthands: `kcl FILE...` (and `kcl -D k=v FILE`) is `kcl run ...`, and
/// `kcl --version`/`-v` prints `kcl version <version>`, and `kcl` alone its help. Returns the
/// arguments to parse, or `None` when it printed instead.
fn shorthand(mut args: Vec<OsString>) -> Option<Vec<OsString>> {
    if args.len() == 1 {
        // upstream's root command prints its help and succeeds
        let _ = Cli::command().print_help();
        return None;
    }
    let Some(first) = args.get(1).and_then(|a| a.to_str()).map(str::to_string) else {
        return Some(args);
    };
    if first == "--version" || first == "-v" {
        println!("kcl version {}", version_string());
        return None;
    }
    let cmd = Cli::command();
    let is_subcommand = first == "help"
        || cmd
            .get_subcommands()
            .any(|c| c.get_name() == first || c.get_all_aliases().any(|a| a == first));
    // a flag other than help, a `.k` file or an existing path: a run; anything else is left
    // to clap so a mistyped subcommand is reported as one
    let runs = !is_subcommand
        && (first.starts_with('-') && first != "-h" && first != "--help"
            || first.ends_with(".k")
            || std::path::Path::new(&first).exists());
    if runs {
        args.insert(1, OsString::from("run"));
    }
    Some(args)
}

/// Entry point of the `kcl` binary: exit code 0 on success, 1 on errors.
pub fn main() -> ExitCode {
    match shorthand(std::env::args_os().collect()) {
        Some(args) => dispatch(Cli::parse_from(args)),
        None => ExitCode::SUCCESS,
    }
}

/// Entry point for embedding (`kusionctl kcl ...`): `args` includes the program name.
pub fn main_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let Some(args) = shorthand(args) else {
        return ExitCode::SUCCESS;
    };
    match Cli::try_parse_from(args) {
        Ok(cli) => dispatch(cli),
        Err(e) => {
            // --help/--version print and succeed; usage errors exit 2 like the binary
            let _ = e.print();
            ExitCode::from(if e.use_stderr() { 2 } else { 0 })
        }
    }
}

fn dispatch(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Fmt(a) => fmt::run(a),
        Command::Parse(a) => parse::run(a),
        Command::Run(a) => run::run(a),
        Command::Import(a) => import::run(a),
        Command::Test(a) => test::run(a),
        Command::Lint(a) => lint::run(a),
        Command::Doc(a) => doc::run(a),
        Command::Vet(a) => vet::run(a),
        Command::Mod(a) => kmod::run(a),
        Command::Version => {
            println!("{}", version_string());
            Ok(ExitCode::SUCCESS)
        }
        Command::Completion(a) => completion::run(a),
        #[cfg(feature = "lsp")]
        Command::Lsp(_) => crate::lsp::run_stdio().map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// A `--format json` report on standard output, pretty-printed; a closed pipe (`| head`) is
/// not an error worth a panic.
pub(crate) fn print_json(doc: &serde_json::Value) {
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stdout(),
        "{}",
        serde_json::to_string_pretty(doc).unwrap_or_default()
    );
}

/// `-E name=path` values as (name, path under `cwd`); a malformed one is reported and gives
/// `None` (the caller exits 2).
pub(crate) fn external_packages(
    specs: &[String],
    cwd: &std::path::Path,
) -> Option<Vec<(String, std::path::PathBuf)>> {
    let mut out = Vec::with_capacity(specs.len());
    for e in specs {
        match e.split_once('=') {
            Some((k, v)) => out.push((k.to_string(), cwd.join(v))),
            None => {
                eprintln!("error: invalid value for -E '{e}': expected name=path");
                return None;
            }
        }
    }
    Some(out)
}

/// What `kcl lint` and `kcl test` load packages with: the `-E name=path` packages (a malformed
/// one is reported: exit 2), then the `kcl.mod` dependencies of the package above the working
/// folder, resolved as `kcl run` resolves them (a failure is reported: exit 1); `-E` wins.
pub(crate) fn external_with_dependencies(
    specs: &[String],
    cwd: &std::path::Path,
) -> Result<Vec<(String, std::path::PathBuf)>, ExitCode> {
    let Some(mut external) = external_packages(specs, cwd) else {
        return Err(ExitCode::from(2));
    };
    let given: Vec<String> = external.iter().map(|(n, _)| n.clone()).collect();
    match mod_dependencies(&[], &given, false, false) {
        Ok(deps) => external.extend(deps),
        Err(e) => {
            eprintln!("error: {e}");
            return Err(ExitCode::from(1));
        }
    }
    Ok(external)
}

/// The `kcl.mod` dependencies of the package the `inputs` belong to (the nearest `kcl.mod`
/// above the first input's folder, else above the working folder), resolved by
/// [`crate::pkg::dependencies_of`]: downloaded when missing, checked against `kcl.mod.lock`,
/// which is updated. Names in `given` (`-E`) are not resolved.
pub(crate) fn mod_dependencies(
    inputs: &[std::path::PathBuf],
    given: &[String],
    vendor: bool,
    quiet: bool,
) -> anyhow::Result<Vec<(String, std::path::PathBuf)>> {
    let cwd = std::env::current_dir()?;
    let base = inputs
        .iter()
        .find(|f| !f.to_string_lossy().contains("${"))
        .map(|f| {
            let abs = cwd.join(f);
            if abs.is_dir() {
                abs
            } else {
                abs.parent()
                    .map(std::path::Path::to_path_buf)
                    .unwrap_or(abs)
            }
        })
        .unwrap_or(cwd);
    let opts = crate::pkg::ResolveOptions {
        vendor,
        write_lock: true,
        progress: !quiet,
        ..Default::default()
    };
    Ok(crate::pkg::dependencies_of(&base, given, &opts)?)
}
