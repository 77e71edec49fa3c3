//! `kcl run`: evaluate KCL files and print the result as YAML, JSON or TOML.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::run::{Rendering, RunOptions, run_parts};

/// Arguments of `kcl run` (upstream-compatible spellings).
#[derive(Args, Debug, Default)]
pub struct RunArgs {
    /// Input files or folders; none means the `[profile] entries` of `kcl.mod`.
    pub files: Vec<PathBuf>,
    /// Write the output to a file.
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Output format (any case, as upstream).
    #[arg(
        long = "format",
        value_enum,
        ignore_case = true,
        default_value = "yaml"
    )]
    pub format: Format,
    /// With `--format toml`: write each table's plain values before its sub-tables (keeping
    /// key order otherwise) instead of failing as upstream does on a value after a table.
    #[arg(long = "toml_tables_last", alias = "toml-tables-last")]
    pub toml_tables_last: bool,
    /// An error found converting a schema attribute's value is reported at the attribute's
    /// declaration, as upstream's; this adds a note naming where the instance is made (a
    /// vendored model's error then names the user's file too).
    #[arg(long = "note_instances", alias = "note-instances")]
    pub note_instances: bool,
    /// Drop None values.
    #[arg(short = 'n', long = "disable_none", alias = "disable-none")]
    pub disable_none: bool,
    /// Sort keys.
    #[arg(short = 'k', long = "sort_keys", alias = "sort-keys")]
    pub sort_keys: bool,
    /// Show hidden (`_`-prefixed) variables.
    #[arg(short = 'H', long = "show_hidden", alias = "show-hidden")]
    pub show_hidden: bool,
    /// Select a value path (`a.b.c`).
    #[arg(short = 'S', long = "path_selector", alias = "path-selector")]
    pub path_selector: Vec<String>,
    /// Override a value (`a.b=value`, `a.b-`).
    #[arg(short = 'O', long = "overrides")]
    pub overrides: Vec<String>,
    /// Top-level argument for `option()` (`key=value`).
    #[arg(short = 'D', long = "argument")]
    pub argument: Vec<String>,
    /// Settings files.
    #[arg(short = 'Y', long = "setting", num_args = 1..)]
    pub setting: Vec<PathBuf>,
    /// External packages (`name=path`).
    #[arg(short = 'E', long = "external")]
    pub external: Vec<String>,
    /// Strict range check (accepted for compatibility).
    #[arg(short = 'r', long = "strict_range_check")]
    pub strict_range_check: bool,
    /// Debug mode (accepted for compatibility).
    #[arg(short = 'd', long = "debug")]
    pub debug: bool,
    /// List options (accepted for compatibility).
    #[arg(short = 'l')]
    pub list: bool,
    /// Quiet mode: no package download progress (`print()` output stays, as upstream).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// No colours or styles in messages. Accepted: this `kcl` never styles its output.
    #[arg(long = "no_style", alias = "no-style")]
    pub no_style: bool,
    /// Vendor mode: kcl.mod's registry and git dependencies come from the package's vendor/
    /// folder only (`kcl mod vendor` fills it), never from the cache or the network.
    #[arg(short = 'V', long = "vendor")]
    pub vendor: bool,
    /// Upstream's tag of an OCI or Git package to run: not supported.
    #[arg(short = 't', long = "tag", value_name = "TAG")]
    pub tag: Option<String>,
    /// Let `file.*` read files under DIR (besides the package, the working folder and the
    /// external packages).
    #[arg(long = "allow-read", value_name = "DIR")]
    pub allow_read: Vec<PathBuf>,
    /// Let `file.*` write, move and delete files under DIR.
    #[arg(long = "allow-write", value_name = "DIR")]
    pub allow_write: Vec<PathBuf>,
    /// Let `file.read_env` read the variable NAME (`*` for all).
    #[arg(long = "allow-env", value_name = "NAME")]
    pub allow_env: Vec<String>,
    /// Upstream's behaviour: `file.*` and `file.read_env` reach everything.
    #[arg(long = "allow-all")]
    pub allow_all: bool,
    /// Most items in one list, dict or string the program builds (default 100000000).
    #[arg(long = "max-items", value_name = "N")]
    pub max_items: Option<usize>,
    /// Most memory the evaluation may use, e.g. `8GiB` (default 4GiB; `0` for no limit).
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = crate::limits::parse_size)]
    pub max_memory: Option<u64>,
    /// Longest evaluation, e.g. `30m` (default 10m; `0` for no limit).
    #[arg(long = "timeout", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub timeout: Option<std::time::Duration>,
}

/// `--format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Yaml,
    Json,
    Toml,
}

pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    // running a package straight from a registry or git is not supported: refused by name (a
    // usage error) rather than silently ignored
    if a.tag.is_some() {
        eprintln!(
            "error: --tag (-t) is not supported by this kcl: running OCI or Git packages is not supported (add them to kcl.mod with `kcl mod add`)"
        );
        return Ok(ExitCode::from(2));
    }
    let mut opts = RunOptions {
        disable_none: a.disable_none,
        sort_keys: a.sort_keys,
        show_hidden: a.show_hidden,
        path_selector: a.path_selector,
        overrides: a.overrides,
        settings: a.setting,
        json: a.format == Format::Json,
        strict_range_check: a.strict_range_check,
        note_instances: a.note_instances,
        allow: crate::run::Allow {
            read: a.allow_read,
            write: a.allow_write,
            env: a.allow_env,
            all: a.allow_all,
            deny_writes: None,
        },
        limits: {
            let mut l = crate::limits::Limits::default();
            if let Some(n) = a.max_items {
                l.max_items = n;
            }
            if let Some(m) = a.max_memory {
                l.max_memory = m;
            }
            if let Some(t) = a.timeout {
                l.timeout = (!t.is_zero()).then_some(t);
            }
            l
        },
        exiting: true,
        ..Default::default()
    };
    for d in &a.argument {
        match d.split_once('=') {
            Some((k, v)) if !k.is_empty() => opts.args.push((k.to_string(), v.to_string())),
            _ => {
                // upstream's wording (its "EvaluationError" head line, then the reason)
                eprintln!("EvaluationError\nInvalid value for top level arguments: '{d}'");
                return Ok(ExitCode::from(1));
            }
        }
    }
    for e in &a.external {
        match e.split_once('=') {
            Some((k, v)) => opts.external.push((k.to_string(), PathBuf::from(v))),
            None => {
                eprintln!("error: invalid value for -E '{e}': expected name=path");
                return Ok(ExitCode::from(1));
            }
        }
    }
    // kcl.mod's dependencies, resolved as upstream's `kcl run` does (downloaded when missing,
    // verified against kcl.mod.lock); -E packages win
    let given: Vec<String> = opts.external.iter().map(|(n, _)| n.clone()).collect();
    match super::mod_dependencies(&a.files, &given, a.vendor, a.quiet) {
        Ok(deps) => opts.external.extend(deps),
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(1));
        }
    }
    match run_parts(&a.files, &opts) {
        Ok((out, rendering)) => {
            let stdout = std::io::stdout();
            let mut lock = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
            for w in &out.warnings {
                eprintln!("{w}");
            }
            lock.write_all(out.printed.as_bytes())?;
            if a.format == Format::Toml {
                // upstream converts its YAML result, so TOML is made from the YAML text
                let yaml = match rendering {
                    Rendering::Text(t) => t,
                    Rendering::Yaml(v, po) => crate::output::to_yaml(&v, po),
                };
                let text = match crate::output::toml::yaml_to_toml_with(
                    &yaml,
                    a.sort_keys,
                    a.toml_tables_last,
                ) {
                    Ok(t) => t,
                    Err(e) => {
                        lock.flush()?;
                        eprintln!("{e}");
                        return Ok(ExitCode::from(1));
                    }
                };
                match &a.output {
                    Some(p) => std::fs::write(p, text)?,
                    None => lock.write_all(text.as_bytes())?,
                }
                lock.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            // the document is written as it is rendered (not built whole first)
            match &a.output {
                Some(p) => {
                    let mut f = std::io::BufWriter::new(std::fs::File::create(p)?);
                    rendering.write_to(&mut f)?;
                    f.flush()?;
                }
                None => rendering.write_to(&mut lock)?,
            }
            lock.flush()?;
            // the process exits next (see RunOptions::exiting)
            std::mem::forget((out, rendering));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if let crate::KclError::Printed { printed, .. } = &e {
                let mut out = std::io::stdout().lock();
                out.write_all(printed.as_bytes())?;
                out.flush()?;
            }
            // (rendered diagnostics end with a line break; a plain message gets one)
            let text = e.to_string();
            if text.ends_with('\n') {
                eprint!("{text}");
            } else {
                eprintln!("{text}");
            }
            Ok(ExitCode::from(1))
        }
    }
}
