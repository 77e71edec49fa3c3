// Planning and applying allocate from many worker threads at once; mimalloc keeps that cheap.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kusionctl::main_with(kusionctl::builtin_runtimes())
}
