//! `kusion-stage-plugins [TARGET_DIR]`: puts this checkout's built plugins where a `kusionctl`
//! built into TARGET_DIR looks for them (`TARGET_DIR/lib/kusion/plugins`; see
//! `kusion_tests::plugins`). TARGET_DIR defaults to `$CARGO_TARGET_DIR`, else `<checkout>/target`.
//! Run by `scripts/stage-plugins.sh`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kusion_tests::plugins::{self, Outcome};

fn main() -> ExitCode {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf();
    let target = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| checkout.join("target"));
    match plugins::stage(&checkout, &target) {
        Ok(done) => {
            println!("plugins for {}:", plugins::staged_dir(&target).display());
            for (name, outcome) in done {
                match outcome {
                    Outcome::Staged(file) => println!("  {name}: staged {}", file.display()),
                    Outcome::Current(_) => println!("  {name}: current"),
                    Outcome::NotBuilt => println!("  {name}: not built"),
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kusion-stage-plugins: {e}");
            ExitCode::FAILURE
        }
    }
}
