fn main() -> std::process::ExitCode {
    kusionctl::main_with(kusionctl::builtin_runtimes())
}
