//! Records the git commit kusionctl is built from, for `kusionctl version`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    // A build from a source archive has no .git: the packager may say which commit it is.
    println!("cargo:rerun-if-env-changed=KUSION_GIT_COMMIT");
    let commit = std::env::var("KUSION_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KUSION_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves (a commit, a checkout); worktrees keep HEAD outside `.git/`.
    // A path that does not exist (a packed ref) would rerun this script on every build.
    let watch = |path: Option<String>| {
        if let Some(p) = path.filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={p}");
        }
    };
    watch(git(&[
        "rev-parse",
        "--path-format=absolute",
        "--git-path",
        "HEAD",
    ]));
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(git(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            &reference,
        ]));
    }
}
