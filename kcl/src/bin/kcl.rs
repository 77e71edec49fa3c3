//! The `kcl` command line (see `kusion_kcl::cli`).

// The front end and evaluator allocate many small nodes; mimalloc is markedly faster than the
// system allocator for that pattern (see benches/parse.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kusion_kcl::cli::main()
}
