//! Running the built `kusionctl` from integration tests: where the binaries are, this
//! checkout's plugins staged beside them, a command with the user's environment scrubbed, and
//! small file helpers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// `target/<profile>/`: the folder above the running test binary's `deps/`, or
/// `KUSION_TEST_BIN_DIR` when set (e.g. a debug test binary driving a release `kusionctl` for
/// a benchmark, where only the program measured needs the optimised build).
pub fn profile_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUSION_TEST_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// A file built into `target/<profile>/` (a binary or plugin library); panics with a hint when
/// it is missing, since the tests run against the workspace build.
pub fn built(name: &str) -> PathBuf {
    let path = profile_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the workspace first (cargo build --workspace)",
        path.display()
    );
    path
}

/// The built `kusionctl`, with this checkout's built plugins staged where it looks for them.
pub fn kusionctl() -> PathBuf {
    stage_plugins();
    built("kusionctl")
}

/// Stage this checkout's built plugins in `<target>/lib/kusion/plugins`, the install prefix of
/// the binaries in [`profile_dir`] (once per test process; see [`crate::plugins`]). Returns
/// that folder.
pub fn stage_plugins() -> &'static Path {
    static STAGED: OnceLock<PathBuf> = OnceLock::new();
    STAGED.get_or_init(|| {
        let target = profile_dir()
            .parent()
            .expect("the profile folder is inside a target folder")
            .to_path_buf();
        let checkout = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("tests/ has a parent");
        crate::plugins::stage(checkout, &target)
            .unwrap_or_else(|e| panic!("staging this checkout's plugins: {e}"));
        crate::plugins::staged_dir(&target)
    })
}

/// `kusionctl` run in `dir` with `HOME` set to `home` and without the variables that would
/// let the caller's own setup leak in (state folder, plugin path, config files, kubeconfig).
/// Tests that need one of them set it again on the returned command.
pub fn kusionctl_in(dir: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(kusionctl());
    cmd.current_dir(dir)
        .env("HOME", home)
        .env_remove("KUSION_STATE_DIR")
        .env_remove("KUSION_PLUGIN_PATH")
        .env_remove("KUSION_CONFIG")
        .env_remove("KUSION_RUNTIME_CONFIG")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null());
    cmd
}

/// Run `kusionctl args...` in `dir` with `HOME=home` (see [`kusionctl_in`]).
pub fn run_kusionctl(dir: &Path, home: &Path, args: &[&str]) -> Output {
    kusionctl_in(dir, home)
        .args(args)
        .output()
        .expect("running kusionctl")
}

/// Stdout then stderr of a finished command, for assertions and failure messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every file below `dir` with its bytes, recursively (for "nothing at rest in clear" checks).
pub fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            let bytes =
                std::fs::read(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
            out.push((p, bytes));
        }
    }
    out
}

/// Copies the folder `from` into `to` (created), recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("creating {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("reading {}: {e}", from.display()));
    for e in entries {
        let e = e.expect("a directory entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("a file type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target)
                .unwrap_or_else(|err| panic!("copying {}: {err}", e.path().display()));
        }
    }
}
