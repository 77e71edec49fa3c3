//! The `kcl` command line (see `kusion_kcl::cli`).

fn main() -> std::process::ExitCode {
    kusion_kcl::cli::main()
}
