//! Git dependencies, fetched with the `git` program (as upstream does through go-getter): any
//! URL git understands (`https://`, `ssh://`, `git://`, `file://`, a path), credentials from
//! git's own configuration. Never prompts: a repository that needs a password git cannot find
//! fails with git's message.

use std::path::Path;
use std::process::Command;

use super::PkgError;
use super::modfile::GitRef;

fn git(args: &[&str], cwd: Option<&Path>, what: &str) -> Result<String, PkgError> {
    let mut c = Command::new("git");
    c.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true");
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    let out = c
        .output()
        .map_err(|e| PkgError::Remote(format!("{what}: cannot run git (is it installed?): {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let msg = err
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        return Err(PkgError::Remote(format!("{what}: git {}: {msg}", args[0])));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Clones `url` at `reference` into `dest` (which must not exist) and removes `.git`, so the
/// folder is the package's content only. Returns the commit checked out.
pub fn fetch(url: &str, reference: &GitRef, dest: &Path, what: &str) -> Result<String, PkgError> {
    let d = dest.to_string_lossy().to_string();
    match reference {
        GitRef::Tag(r) | GitRef::Branch(r) => {
            git(
                &["clone", "--quiet", "--depth", "1", "--branch", r, url, &d],
                None,
                what,
            )?;
        }
        GitRef::Default => {
            git(&["clone", "--quiet", "--depth", "1", url, &d], None, what)?;
        }
        GitRef::Commit(c) => {
            git(&["clone", "--quiet", "--no-checkout", url, &d], None, what)?;
            git(
                &["-c", "advice.detachedHead=false", "checkout", "--quiet", c],
                Some(dest),
                what,
            )
            .map_err(|e| PkgError::Remote(format!("{e} (commit '{c}' not found?)")))?;
        }
    }
    let head = git(&["rev-parse", "HEAD"], Some(dest), what)?;
    let dot_git = dest.join(".git");
    std::fs::remove_dir_all(&dot_git).map_err(|e| PkgError::io(&dot_git, e))?;
    Ok(head)
}

/// The folder under `root` whose `kcl.mod` names package `name` (a `package = ...` git
/// dependency in a repository of several packages).
pub fn find_package(root: &Path, name: &str) -> Result<std::path::PathBuf, PkgError> {
    fn walk(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
        if super::ModFile::load_if_present(dir)
            .ok()
            .flatten()
            .is_some_and(|m| m.name == name)
        {
            return Some(dir.to_path_buf());
        }
        let mut subs: Vec<_> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        subs.sort();
        subs.into_iter().find_map(|s| walk(&s, name))
    }
    walk(root, name).ok_or_else(|| {
        PkgError::Invalid(format!(
            "no kcl.mod with package name '{name}' in {}",
            root.display()
        ))
    })
}
