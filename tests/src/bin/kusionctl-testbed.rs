//! `kusionctl` with the fake-cloud test runtime compiled in. For tests and the demo only; the
//! shipped `kusionctl` loads runtimes as plugins.

use std::sync::Arc;

fn main() -> std::process::ExitCode {
    let mut runtimes = kusionctl::builtin_runtimes();
    runtimes.push(Arc::new(kusion_test_runtime::TestRuntime::new()));
    kusionctl::main_with(runtimes)
}
