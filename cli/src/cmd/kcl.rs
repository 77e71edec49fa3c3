//! `kusionctl kcl <args>`: the `kcl` tool (run, fmt, parse, import, lsp, ...) inside kusionctl, so
//! `kusionctl kcl import --openapi swagger.json -o k8s` needs no second binary.

use std::process::ExitCode;

/// Runs the kcl command line with `args` (everything after `kusionctl kcl`).
pub fn run(args: &[String]) -> ExitCode {
    let argv = std::iter::once("kcl".to_string()).chain(args.iter().cloned());
    kusion_kcl::cli::main_from(argv)
}

/// `kusionctl kcl ...` is handed over before kusionctl parses its own flags: kusionctl's
/// global options (`-o`, `-C`) would otherwise take the kcl tool's flags of the same name.
pub fn intercept() -> Option<ExitCode> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some("kcl") {
        return None;
    }
    let rest: Vec<String> = args.collect();
    Some(run(&rest))
}
