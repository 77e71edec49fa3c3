//! End-to-end test with a real editor: Neovim (Debian's `neovim`, installed by
//! `scripts/setup.d/70-neovim.sh`) runs headless, its built-in LSP client starts `kcl lsp`
//! on a copy of `examples/konfig`, and a Lua script (`lsp_neovim/e2e.lua`) types an error
//! and waits for the diagnostic, undoes it, completes a schema attribute, and jumps to a
//! definition in the k8s package. A missing `nvim` fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &t);
        } else {
            std::fs::copy(&p, &t).expect("copy");
        }
    }
}

#[test]
fn neovim_types_an_error_completes_an_attribute_and_jumps_into_k8s() {
    let nvim = Command::new("nvim").arg("--version").output();
    assert!(
        nvim.as_ref().is_ok_and(|o| o.status.success()),
        "nvim is missing: install it with scripts/setup.d/70-neovim.sh (Debian's neovim)"
    );
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let konfig = tmp.path().join("konfig");
    copy_dir(&manifest.join("../examples/konfig"), &konfig);
    let konfig: PathBuf = konfig.canonicalize().expect("canonical");
    let log = tmp.path().join("e2e.log");
    let script = manifest.join("tests/lsp_neovim/e2e.lua");
    let mut child = Command::new("nvim")
        .args(["--headless", "-u", "NONE", "-i", "NONE", "-n", "-c"])
        .arg(format!("luafile {}", script.display()))
        .env("KCL_BIN", env!("CARGO_BIN_EXE_kcl"))
        .env("KONFIG", &konfig)
        .env("LOG", &log)
        .env("KCL_LSP_LOG", "info")
        .current_dir(&konfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nvim");
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    println!("{text}");
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    let status = status.unwrap_or_else(|| panic!("nvim timed out\n{text}\n{stderr}"));
    assert!(
        status.success(),
        "nvim failed ({status}):\n{text}\n{stderr}"
    );
    assert!(text.lines().any(|l| l == "PASS"), "{text}");
    assert!(text.contains("diagnostic: line"), "{text}");
}
