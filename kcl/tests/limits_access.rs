//! Runaway programs end in a clear error (exit 1), never an allocator abort; `file.*` and
//! `file.read_env` reach only the package, the working folder and what is allowed by name.

use std::path::Path;
use std::time::{Duration, Instant};

use kusion_kcl::Allow;
use kusion_kcl::Limits;
use kusion_kcl::{RunOptions, run_full};

fn run_in(dir: &Path, src: &str, opts: RunOptions) -> Result<String, String> {
    let file = dir.join("main.k");
    std::fs::write(&file, src).unwrap();
    let opts = RunOptions {
        work_dir: Some(dir.to_path_buf()),
        ..opts
    };
    run_full(&[file], &opts)
        .map(|o| o.text)
        .map_err(|e| e.to_string())
}

#[test]
fn runaway_collections_time_and_memory_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let e = run_in(
        dir.path(),
        "n = len([1 for i in range(10**9)])\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(e.contains("--max-items"), "{e}");
    let e = run_in(dir.path(), "x = range(10**10)\n", RunOptions::default()).unwrap_err();
    assert!(e.contains("--max-items"), "{e}");
    let e = run_in(dir.path(), "x = \"ab\" * 10**12\n", RunOptions::default()).unwrap_err();
    assert!(e.contains("--max-items"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));

    let e = run_in(
        dir.path(),
        "x = [i for i in range(10**12) if False]\n",
        RunOptions {
            limits: Limits {
                timeout: Some(Duration::from_millis(300)),
                ..Limits::default()
            },
            ..RunOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.contains("--timeout"), "{e}");

    let e = run_in(
        dir.path(),
        "x = [[[k for k in range(1000)] for j in range(1000)] for i in range(1000)]\n",
        RunOptions {
            limits: Limits {
                max_memory: 400 << 20,
                ..Limits::default()
            },
            ..RunOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.contains("--max-memory"), "{e}");
    // Ordinary programs are untouched.
    let out = run_in(
        dir.path(),
        "x = len([i for i in range(100000)])\n",
        RunOptions::default(),
    )
    .unwrap();
    assert_eq!(out.trim(), "x: 100000");
}

#[test]
fn file_access_is_confined_to_the_package_and_allowed_folders() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(pkg.join("kcl.mod"), "[package]\nname = \"pkg\"\n").unwrap();
    std::fs::write(pkg.join("data.json"), "{\"a\": 1}").unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "hunter2").unwrap();

    let out = run_in(
        &pkg,
        "import file\nimport json\nx = json.decode(file.read(\"data.json\"))\n",
        RunOptions::default(),
    )
    .unwrap();
    assert!(out.contains("a: 1"), "{out}");
    let read_outside = format!(
        "import file\nx = file.read(\"{}\")\n",
        outside.join("secret.txt").display()
    );
    let e = run_in(&pkg, &read_outside, RunOptions::default()).unwrap_err();
    assert!(
        e.contains("not allowed")
            && e.contains(&format!(
                "--allow-read {}",
                outside.canonicalize().unwrap().display()
            )),
        "{e}"
    );
    let e = run_in(
        &pkg,
        "import file\nx = file.read(\"../outside/secret.txt\")\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(e.contains("not allowed"), "{e}");
    let e = run_in(
        &pkg,
        "import file\nx = file.read(\"/etc/shadow\")\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(e.contains("--allow-read /etc"), "{e}");
    let allowed = RunOptions {
        allow: Allow {
            read: vec![outside.clone()],
            ..Allow::default()
        },
        ..RunOptions::default()
    };
    let out = run_in(&pkg, &read_outside, allowed).unwrap();
    assert!(out.contains("hunter2"), "{out}");

    // Environment variables only by name.
    let e = run_in(
        &pkg,
        "import file\nx = file.read_env(\"HOME\")\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(e.contains("--allow-env HOME"), "{e}");
    let env_ok = RunOptions {
        allow: Allow {
            env: vec!["HOME".into()],
            ..Allow::default()
        },
        ..RunOptions::default()
    };
    run_in(&pkg, "import file\nx = file.read_env(\"HOME\")\n", env_ok).unwrap();

    // Writes: inside the package by default; never when writes are denied (compile).
    run_in(
        &pkg,
        "import file\nfile.write(\"out.txt\", \"x\")\nx = 1\n",
        RunOptions::default(),
    )
    .unwrap();
    assert!(pkg.join("out.txt").exists());
    let e = run_in(
        &pkg,
        &format!(
            "import file\nfile.delete(\"{}\")\nx = 1\n",
            outside.join("secret.txt").display()
        ),
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(e.contains("--allow-write"), "{e}");
    assert!(outside.join("secret.txt").exists());
    let compile = RunOptions {
        allow: Allow {
            deny_writes: Some("compiling never writes files".into()),
            ..Allow::default()
        },
        ..RunOptions::default()
    };
    let e = run_in(
        &pkg,
        "import file\nfile.write(\"o2.txt\", \"x\")\nx = 1\n",
        compile,
    )
    .unwrap_err();
    assert!(e.contains("never writes"), "{e}");
    // Upstream's behaviour on request.
    let all = RunOptions {
        allow: Allow {
            all: true,
            ..Allow::default()
        },
        ..RunOptions::default()
    };
    run_in(&pkg, &read_outside, all).unwrap();
}
