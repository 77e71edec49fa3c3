//! Builds the in-repo plugins (the examples and the fixture plugins under `fixtures/`) so tests
//! and benchmarks load real libraries. Each is built with cargo into `target/plugin-tests` (its
//! own target directory, so the build never waits on the `cargo test` that runs us) and copied to
//! a per-variant path, because feature variants of one crate overwrite each other's output.
//!
//! Test support only (a dev-dependency): it spawns `cargo`, `git` and `tar`, and panics when a
//! build fails, because a test cannot run without its plugin.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// What to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixture {
    /// `examples/localfile-runtime` (native runtime plugin).
    LocalFile,
    /// `native-fixture` (native function plugin: echo, panic).
    NativeFunction,
    /// `native-fixture` built with `claim-abi-2`.
    NativeFunctionAbi2,
    /// `examples/wasm-policy` (WASM policy component).
    WasmPolicy,
    /// `wasm-fixture` (WASM function component: echo, spin, grow, read_file, env, panic).
    WasmFunction,
    /// `wasm-runtime-fixture` (WASM runtime component: `WasmKv` files in a granted
    /// directory; spin, grow, fail, panic, connect on request).
    WasmRuntime,
}

impl Fixture {
    fn package(self) -> &'static str {
        match self {
            Fixture::LocalFile => "localfile-runtime",
            Fixture::NativeFunction | Fixture::NativeFunctionAbi2 => "kusion-native-fixture",
            Fixture::WasmPolicy => "wasm-policy",
            Fixture::WasmFunction => "kusion-wasm-fixture",
            Fixture::WasmRuntime => "kusion-wasm-runtime-fixture",
        }
    }

    fn is_wasm(self) -> bool {
        matches!(
            self,
            Fixture::WasmPolicy | Fixture::WasmFunction | Fixture::WasmRuntime
        )
    }

    fn features(self) -> &'static [&'static str] {
        match self {
            Fixture::NativeFunctionAbi2 => &["claim-abi-2"],
            _ => &[],
        }
    }

    fn variant(self) -> &'static str {
        match self {
            Fixture::LocalFile => "localfile",
            Fixture::NativeFunction => "native-function",
            Fixture::NativeFunctionAbi2 => "native-function-abi2",
            Fixture::WasmPolicy => "wasm-policy",
            Fixture::WasmFunction => "wasm-function",
            Fixture::WasmRuntime => "wasm-runtime",
        }
    }

    /// The file cargo produces for this package.
    fn output_name(self) -> String {
        let stem = self.package().replace('-', "_");
        if self.is_wasm() {
            format!("{stem}.wasm")
        } else {
            dylib_file_name(&stem)
        }
    }
}

/// The platform file name of a `cdylib` crate's library (`liblocalfile_runtime.so`).
fn dylib_file_name(crate_name: &str) -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        crate_name.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// The kusion-rs checkout this crate was built from (this crate sits at `tests/dev-plugins`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Where fixture builds go.
pub fn target_dir() -> PathBuf {
    workspace_root().join("target").join("plugin-tests")
}

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Build `fixture` (incrementally) and return the path of a private copy of its output.
/// Native plugins are debug builds (quick to build for tests), WASM ones optimised.
/// Panics with cargo's output when the build fails: tests cannot run without their plugin.
pub fn build(fixture: Fixture) -> PathBuf {
    build_profile(fixture, fixture.is_wasm())
}

/// Build `fixture` optimised (for benchmarks: a debug plugin measures unoptimised serde).
pub fn build_release(fixture: Fixture) -> PathBuf {
    build_profile(fixture, true)
}

fn build_profile(fixture: Fixture, release: bool) -> PathBuf {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let target = target_dir();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root())
        .args(["build", "--locked", "-p", fixture.package(), "--target-dir"])
        .arg(&target);
    if !fixture.features().is_empty() {
        cmd.arg("--features").arg(fixture.features().join(","));
    }
    // WASM plugins are always built optimised: a debug component is ~6 MB and slow to compile.
    let profile = if release { "release" } else { "debug" };
    if release {
        cmd.arg("--release")
            .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
            .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
    }
    let profile_dir = if fixture.is_wasm() {
        cmd.args(["--target", "wasm32-wasip2"]);
        target.join("wasm32-wasip2").join(profile)
    } else {
        target.join(profile)
    };
    // Inherited RUSTFLAGS from a coverage or sanitizer run must not leak into the guest build.
    cmd.env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {}: {e}", fixture.package()));
    if !output.status.success() {
        panic!(
            "building plugin fixture {} failed (for WASM run scripts/setup.d/10-wasm.sh first):\n{}",
            fixture.package(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let built = profile_dir.join(fixture.output_name());
    let dir = target
        .join("variants")
        .join(format!("{}-{profile}", fixture.variant()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let copy = dir.join(fixture.output_name());
    // Copy only when changed: a library already mapped by this process must not be rewritten.
    let same = std::fs::read(&copy).ok() == std::fs::read(&built).ok();
    if !same {
        // Write a new inode rather than truncating one that another test process may have mapped.
        let tmp = dir.join(format!(".{}.tmp", fixture.output_name()));
        std::fs::copy(&built, &tmp).unwrap_or_else(|e| panic!("{}: {e}", built.display()));
        std::fs::rename(&tmp, &copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
    }
    copy
}

/// The last commit whose SDK declared ABI 1.0 (JSON-only calls). Its `native-fixture` (then at
/// `kernel/src/plugin/fixtures/native-fixture`) is rebuilt from git history, so a test loads a
/// library genuinely compiled against the older SDK.
pub const SDK_1_0_COMMIT: &str = "1485cd812fcecf30494b5d01e642c07d5baf38b2";

/// Build the echo fixture against the SDK as it was at [`SDK_1_0_COMMIT`] and return the path
/// of the library. Needs the checkout's git history (a clone has it); panics with the reason when
/// the old sources cannot be extracted or built, because the test it serves must not pass vacuously.
pub fn build_sdk_1_0_fixture() -> PathBuf {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = workspace_root();
    let dir = target_dir().join("sdk-1.0");
    let src = dir.join("src");
    if !src.join("sdk/Cargo.toml").exists() {
        let _ = std::fs::remove_dir_all(&src);
        std::fs::create_dir_all(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        // `git archive | tar -x` keeps the old files out of the working tree and the index.
        let archive = Command::new("git")
            .current_dir(&root)
            .args([
                "archive",
                "--format=tar",
                SDK_1_0_COMMIT,
                "sdk",
                "kernel/src/plugin/fixtures/native-fixture/src",
                "Cargo.lock",
            ])
            .output()
            .unwrap_or_else(|e| panic!("cannot run git to extract the ABI 1.0 SDK: {e}"));
        if !archive.status.success() {
            panic!(
                "cannot extract the ABI 1.0 SDK from git commit {SDK_1_0_COMMIT} (is this a clone with history?):\n{}",
                String::from_utf8_lossy(&archive.stderr)
            );
        }
        let mut tar = Command::new("tar")
            .current_dir(&src)
            .args(["-x", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run tar: {e}"));
        {
            use std::io::Write;
            let mut stdin = tar.stdin.take().expect("piped stdin");
            stdin
                .write_all(&archive.stdout)
                .unwrap_or_else(|e| panic!("tar: {e}"));
        }
        let status = tar.wait().unwrap_or_else(|e| panic!("tar: {e}"));
        assert!(status.success(), "tar could not unpack the ABI 1.0 SDK");
        // A two-member workspace with the dependency specs the old SDK inherited.
        let manifest = r#"[workspace]
resolver = "3"
members = ["sdk", "fixture"]

[workspace.package]
edition = "2024"
version = "0.1.0"
license = "Apache-2.0"

[workspace.dependencies]
thiserror = "2"
serde = { version = "1", features = ["derive"] }
serde_json = { version = "1", features = ["preserve_order"] }
abi_stable = "0.11"
"#;
        write(&src.join("Cargo.toml"), manifest);
        let fixture = src.join("fixture");
        std::fs::create_dir_all(&fixture).unwrap_or_else(|e| panic!("{}: {e}", fixture.display()));
        std::fs::rename(
            src.join("kernel/src/plugin/fixtures/native-fixture/src"),
            fixture.join("src"),
        )
        .unwrap_or_else(|e| panic!("moving the old fixture sources: {e}"));
        write(
            &fixture.join("Cargo.toml"),
            r#"[package]
name = "kusion-native-fixture"
edition = "2024"
version = "0.1.0"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
kusion-sdk = { path = "../sdk", features = ["native"] }

[features]
claim-abi-2 = []
"#,
        );
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(&src)
        .args(["build", "-p", "kusion-native-fixture", "--target-dir"])
        .arg(dir.join("target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the ABI 1.0 fixture: {e}"));
    if !output.status.success() {
        panic!(
            "building the ABI 1.0 fixture failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    dir.join("target")
        .join("debug")
        .join(dylib_file_name("kusion_native_fixture"))
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
