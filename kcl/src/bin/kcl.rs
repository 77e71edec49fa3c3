//! The `kcl` command line (see `kusion_kcl::cli`).
//!
//! The system allocator is used on purpose: with mimalloc `kcl run` held 1.3-3x more resident
//! memory on the evaluation benchmarks (e.g. deploy_10k.k 181 MiB vs 145 MiB, compute.k 75 MiB vs
//! 24 MiB) for no measurable CPU gain, and peak memory is one of the evaluator's targets.

fn main() -> std::process::ExitCode {
    kusion_kcl::cli::main()
}
