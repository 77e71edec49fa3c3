//! kusionctl as an installed tool: `scripts/install.sh` puts the debug build of this workspace
//! into a temporary prefix, and everything below runs the installed binaries with a fresh HOME,
//! no plugin path and no checkout to fall back on.
//!
//! The install needs the workspace's debug build output (kusionctl, kcl and the shipped plugin
//! libraries; `scripts/test.sh` builds the whole workspace first). A missing artifact fails the
//! test with install.sh's message naming it: this test never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `<target>` of this test's own kusionctl (`<target>/debug/kusionctl`).
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_kusionctl"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf()
}

/// The shipped plugins: name of every manifest under runtimes/ and plugins/.
fn shipped() -> Vec<String> {
    let mut names = Vec::new();
    for group in ["runtimes", "plugins"] {
        for e in std::fs::read_dir(workspace().join(group)).unwrap() {
            let m = e.unwrap().path().join("plugin.toml");
            if let Ok(text) = std::fs::read_to_string(&m) {
                let v: toml::Value = toml::from_str(&text).unwrap();
                names.push(v["name"].as_str().unwrap().to_string());
            }
        }
    }
    names.sort();
    names
}

struct Installed {
    _dir: tempfile::TempDir,
    prefix: PathBuf,
    home: PathBuf,
}

/// One install shared by the tests of this file (the copy of the debug binaries is large).
fn installed() -> &'static Installed {
    static ONCE: OnceLock<Installed> = OnceLock::new();
    ONCE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("prefix");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let out = Command::new("bash")
            .arg(workspace().join("scripts/install.sh"))
            .args(["--profile", "debug", "--prefix"])
            .arg(&prefix)
            .arg("--from-target")
            .arg(target_dir())
            .env("HOME", &home)
            .env_remove("KUSION_PLUGIN_PATH")
            .env_remove("KUSION_CONFIG")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/install.sh failed (is the workspace built? scripts/test.sh builds it):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Installed {
            _dir: dir,
            prefix,
            home,
        }
    })
}

/// Run an installed tool as a fresh shell would: isolated HOME, no kusion variables, no cargo
/// variables (which would point kusionctl at this checkout).
fn run_in(tool: &str, cwd: &Path, args: &[&str]) -> Output {
    let i = installed();
    let mut cmd = Command::new(i.prefix.join("bin").join(tool));
    cmd.args(args).current_dir(cwd).env("HOME", &i.home);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("KUSION_") || k.starts_with("CARGO") {
            cmd.env_remove(&k);
        }
    }
    cmd.output().unwrap()
}

fn run(args: &[&str]) -> Output {
    run_in("kusionctl", &installed().home, args)
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", text(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

#[test]
fn installed_layout_and_every_shipped_plugin_loads() {
    let i = installed();
    for f in ["bin/kusionctl", "bin/kcl"] {
        assert!(i.prefix.join(f).is_file(), "{f} not installed");
    }
    for name in shipped() {
        let manifest = i
            .prefix
            .join("lib/kusion/plugins")
            .join(&name)
            .join("plugin.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(
            text.contains("sha256 = "),
            "{}: no checksum",
            manifest.display()
        );
    }
    let list = json(&run(&["plugin", "list", "-o", "json"]));
    let entries = list.as_array().unwrap();
    let mut names: Vec<String> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, shipped(), "{list:#}");
    for e in entries {
        assert_eq!(e["status"]["state"], "loaded", "{e:#}");
        assert_eq!(e["source"], "installed", "{e:#}");
    }
}

#[test]
fn a_tampered_installed_plugin_is_refused() {
    // A copy of the install with one library changed after its manifest was written.
    let i = installed();
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path();
    let copy = Command::new("cp")
        .arg("-a")
        .arg(i.prefix.join("bin"))
        .arg(i.prefix.join("lib"))
        .arg(prefix)
        .status()
        .unwrap();
    assert!(copy.success());
    let plugin = prefix.join("lib/kusion/plugins/cmdb");
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(plugin.join("plugin.toml")).unwrap()).unwrap();
    let lib = plugin.join(manifest["file"].as_str().unwrap());
    let mut bytes = std::fs::read(&lib).unwrap();
    bytes.extend_from_slice(b"tampered");
    std::fs::write(&lib, bytes).unwrap();
    let out = Command::new(prefix.join("bin/kusionctl"))
        .args(["plugin", "list", "-o", "json"])
        .env("HOME", &i.home)
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("KUSION_PLUGIN_PATH")
        .output()
        .unwrap();
    let list = json(&out);
    let cmdb = list
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "cmdb")
        .unwrap();
    assert_eq!(cmdb["status"]["state"], "refused", "{cmdb:#}");
    assert!(
        cmdb["status"]["reason"]
            .as_str()
            .unwrap()
            .contains("sha256"),
        "{cmdb:#}"
    );
}

#[test]
fn version_names_build_contracts_and_plugins() {
    let v = json(&run(&["version", "-o", "json"]));
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"), "{v:#}");
    assert!(!v["commit"].as_str().unwrap().is_empty(), "{v:#}");
    assert_eq!(v["pluginAbi"], kusion_sdk::ABI_VERSION.to_string(), "{v:#}");
    assert_eq!(v["witPackage"], kusion_sdk::WIT_PACKAGE, "{v:#}");
    let plugins = v["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), shipped().len(), "{v:#}");
    for p in plugins {
        assert!(p["version"].is_string() && p["abi"].is_string(), "{p:#}");
    }
    let human = run(&["version"]);
    assert!(human.status.success(), "{}", text(&human));
    let human = String::from_utf8_lossy(&human.stdout);
    for name in shipped() {
        assert!(human.contains(&name), "{human}");
    }
    let short = run(&["--version"]);
    let short = String::from_utf8_lossy(&short.stdout);
    assert!(
        short.starts_with(&format!("kusionctl {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{short}"
    );
}

#[test]
fn completions_and_man_pages() {
    let i = installed();
    for tool in ["kusionctl", "kcl"] {
        for shell in ["bash", "zsh", "fish"] {
            let out = run_in(tool, &i.home, &["completion", shell]);
            assert!(out.status.success(), "{tool} {shell}: {}", text(&out));
            let script = String::from_utf8_lossy(&out.stdout);
            assert!(script.contains(tool), "{tool} {shell}: {script}");
        }
    }
    let bash =
        std::fs::read_to_string(i.prefix.join("share/bash-completion/completions/kusionctl"))
            .unwrap();
    assert!(bash.contains("preview") && bash.contains("--state-backend"));
    for page in [
        "kusionctl.1",
        "kusionctl-apply.1",
        "kusionctl-state-history.1",
        "kcl.1",
        "kcl-run.1",
    ] {
        let path = i.prefix.join("share/man/man1").join(page);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(text.contains(".TH"), "{page} is not a man page");
    }
    let fish = i.prefix.join("share/fish/vendor_completions.d/kcl.fish");
    assert!(fish.is_file(), "{} missing", fish.display());
}

#[test]
fn usage_errors_exit_2_with_one_message() {
    let i = installed();
    let out = run(&["preview", "-f", "spec.yaml", "-o", "yaml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("this command prints human or json"),
        "{}",
        text(&out)
    );

    let out = run(&["preview", "-C", "/nonexistent/stack"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("-C /nonexistent/stack: no such directory"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("error:").count(), 1, "{stderr}");

    let out = run(&["init", "--state-backend", "local", "demo"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "init takes no state options: {}",
        text(&out)
    );
    let _ = i;
}

#[test]
fn init_writes_under_the_project_and_a_project_folder_asks_for_a_stack() {
    let work = tempfile::tempdir().unwrap();
    let out = run_in("kusionctl", work.path(), &["init", "demo", "dev", "prod"]);
    assert!(out.status.success(), "{}", text(&out));
    let top: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(top, ["demo"], "init wrote outside demo/");
    assert!(work.path().join("demo/kcl.mod").is_file());

    let out = run_in(
        "kusionctl",
        work.path(),
        &["compile", "-C", "demo/dev", "-o", "json"],
    );
    assert!(out.status.success(), "{}", text(&out));

    let out = run_in("kusionctl", work.path(), &["preview", "-C", "demo"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("demo is a project folder, not a stack"),
        "{stderr}"
    );
    assert!(
        stderr.contains("-C demo/dev") && stderr.contains("-C demo/prod"),
        "{stderr}"
    );

    let out = run_in("kusionctl", &work.path().join("demo"), &["state", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("-C dev"),
        "{}",
        text(&out)
    );
}

#[test]
fn compile_all_json_keys_are_camel_case() {
    let work = tempfile::tempdir().unwrap();
    let out = run_in("kusionctl", work.path(), &["init", "demo"]);
    assert!(out.status.success(), "{}", text(&out));
    let summary = json(&run_in(
        "kusionctl",
        work.path(),
        &["compile", "--all", "demo", "-o", "json"],
    ));
    assert!(summary.get("cacheDir").is_some(), "{summary:#}");
    assert!(summary.get("cache_dir").is_none(), "{summary:#}");
    let first = &summary["stacks"][0];
    assert!(first.get("kclError").is_none() && first.get("kcl_error").is_none());
}
