//! Git sources through the `git` CLI: one bare mirror per URL under the cache folder, a shallow
//! fetch of the wanted ref into it, and one extracted tree per revision (kept while it is the
//! latest, so an unchanged revision costs one `git fetch` and no extraction). Symbolic links
//! in the tree that lead outside it are dropped (see [`drop_escaping_links`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// How long one git command may run before it is killed.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args}: {message}")]
    Command { args: String, message: String },
    /// A URL or ref git would read as an option (`--upload-pack=...` runs a command).
    #[error("{what} '{value}' may not start with '-'")]
    Unsafe { what: &'static str, value: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GitError + '_ {
    move |source| GitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What a Secret may hold for a source.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    pub username: Option<String>,
    pub password: Option<String>,
    /// An SSH private key.
    pub identity: Option<Vec<u8>>,
    pub known_hosts: Option<Vec<u8>>,
}

/// A revision extracted on disk.
#[derive(Clone, Debug)]
pub struct Checkout {
    /// The commit ID.
    pub revision: String,
    /// The repository's files at that commit.
    pub dir: PathBuf,
}

/// How long a fetch answers for the same URL, ref and credentials: many Stacks on one
/// repository then cost one fetch a second, not one each (a fetch is ~0.2 s on a busy host).
/// It adds at most this much to the time from a push to its apply.
const FRESH: Duration = Duration::from_secs(1);

/// How long a tree replaced by a newer revision is kept (see [`GitCache::fetch_now`]).
pub const TREE_GRACE: Duration = Duration::from_secs(600);

/// Marks `dir` as used now (its modification time).
fn touch(dir: &Path) {
    let now = std::time::SystemTime::now();
    if let Err(e) = std::fs::File::open(dir).and_then(|f| f.set_modified(now)) {
        tracing::debug!(dir = %dir.display(), "marking a tree as in use: {e}");
    }
}

/// (URL, ref, credentials hash) -> when fetched and what.
type Recent = std::collections::HashMap<(String, String, String), (Instant, Checkout)>;

pub struct GitCache {
    root: PathBuf,
    recent: std::sync::Mutex<Recent>,
}

impl GitCache {
    pub fn new(root: impl Into<PathBuf>) -> GitCache {
        GitCache {
            root: root.into(),
            recent: Default::default(),
        }
    }

    /// [`GitCache::fetch_now`], or its answer for the same source within the last second.
    pub fn fetch(
        &self,
        url: &str,
        reference: &str,
        credentials: Option<&Credentials>,
    ) -> Result<Checkout, GitError> {
        // Credentials are part of the key: a Stack never reuses what another Stack's secret
        // fetched.
        let who = credentials.map_or_else(String::new, |c| {
            let mut h = Sha256::new();
            for part in [
                c.username.as_deref().map(str::as_bytes),
                c.password.as_deref().map(str::as_bytes),
                c.identity.as_deref(),
                c.known_hosts.as_deref(),
            ] {
                h.update(part.unwrap_or_default());
                h.update([0]);
            }
            hex::encode(h.finalize())
        });
        let key = (url.to_string(), reference.to_string(), who);
        if let Some((at, checkout)) = self
            .recent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            && at.elapsed() < FRESH
            && checkout.dir.is_dir()
        {
            return Ok(checkout.clone());
        }
        let checkout = self.fetch_now(url, reference, credentials)?;
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|_, (at, _)| at.elapsed() < FRESH);
        recent.insert(key, (Instant::now(), checkout.clone()));
        Ok(checkout)
    }

    /// Fetch `reference` (branch, tag or commit) of `url` shallowly and extract its tree.
    pub fn fetch_now(
        &self,
        url: &str,
        reference: &str,
        credentials: Option<&Credentials>,
    ) -> Result<Checkout, GitError> {
        // A Stack's author chooses these; whoever may create Stacks must not choose git's
        // options on the controller's host.
        for (what, value) in [("source url", url), ("source ref", reference)] {
            if value.starts_with('-') {
                return Err(GitError::Unsafe {
                    what,
                    value: value.to_string(),
                });
            }
        }
        let key = hex::encode(&Sha256::digest(url.as_bytes())[..12]);
        let mirror = self.root.join("mirrors").join(format!("{key}.git"));
        if !mirror.join("HEAD").is_file() {
            std::fs::create_dir_all(&mirror).map_err(io(&mirror))?;
            git(&mirror, &["init", "--bare", "--quiet"], &[])?;
        }
        let env = self.credential_env(&key, credentials)?;
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        git(
            &mirror,
            &[
                "fetch",
                "--quiet",
                "--depth",
                "1",
                "--no-tags",
                "--force",
                "--",
                url,
                reference,
            ],
            &env,
        )?;
        let revision = git(&mirror, &["rev-parse", "FETCH_HEAD^{commit}"], &[])?
            .trim()
            .to_string();
        let trees = self.root.join("trees").join(&key);
        let dir = trees.join(&revision);
        if !dir.is_dir() {
            std::fs::create_dir_all(&trees).map_err(io(&trees))?;
            let partial = trees.join(format!(".{revision}.partial"));
            let _ = std::fs::remove_dir_all(&partial);
            std::fs::create_dir_all(&partial).map_err(io(&partial))?;
            let archive = trees.join(format!(".{revision}.tar"));
            let out = archive.display().to_string();
            git(
                &mirror,
                &["archive", "--format=tar", "-o", &out, &revision],
                &[],
            )?;
            let file = std::fs::File::open(&archive).map_err(io(&archive))?;
            tar::Archive::new(file)
                .unpack(&partial)
                .map_err(io(&partial))?;
            let _ = std::fs::remove_file(&archive);
            for dropped in drop_escaping_links(&partial).map_err(io(&partial))? {
                tracing::warn!(
                    url,
                    revision = %revision,
                    path = %dropped.display(),
                    "symbolic link pointing outside the repository's tree dropped"
                );
            }
            std::fs::rename(&partial, &dir).map_err(io(&dir))?;
        }
        // The tree's time says when it was last the revision served: a tree replaced by a newer
        // one is kept for `TREE_GRACE` after that, because an operation (in this process, or
        // another sharing the folder) may still be compiling from it.
        touch(&dir);
        if let Ok(entries) = std::fs::read_dir(&trees) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy() == revision.as_str() {
                    continue;
                }
                let p = e.path();
                let stale = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_none_or(|age| age >= TREE_GRACE);
                if stale {
                    let _ = if p.is_dir() {
                        std::fs::remove_dir_all(&p)
                    } else {
                        std::fs::remove_file(&p)
                    };
                }
            }
        }
        Ok(Checkout { revision, dir })
    }

    /// Credentials reach git through the environment only (never the command line, which other
    /// users of the machine can read): an HTTP header through `GIT_CONFIG_*`, an SSH key file.
    fn credential_env(
        &self,
        key: &str,
        credentials: Option<&Credentials>,
    ) -> Result<Vec<(String, String)>, GitError> {
        let mut env = Vec::new();
        let Some(c) = credentials else {
            return Ok(env);
        };
        if let (Some(user), Some(password)) = (&c.username, &c.password) {
            use base64::Engine;
            let basic =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
            env.push(("GIT_CONFIG_KEY_0".into(), "http.extraHeader".into()));
            env.push((
                "GIT_CONFIG_VALUE_0".into(),
                format!("Authorization: Basic {basic}"),
            ));
        }
        if let Some(identity) = &c.identity {
            use std::os::unix::fs::OpenOptionsExt;
            let keys = self.root.join("keys");
            std::fs::create_dir_all(&keys).map_err(io(&keys))?;
            let file = keys.join(key);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&file)
                .map_err(io(&file))?;
            std::io::Write::write_all(&mut f, identity).map_err(io(&file))?;
            let hosts = keys.join(format!("{key}.known_hosts"));
            let checking = match &c.known_hosts {
                Some(k) => {
                    std::fs::write(&hosts, k).map_err(io(&hosts))?;
                    "yes"
                }
                None => "accept-new",
            };
            env.push((
                "GIT_SSH_COMMAND".into(),
                format!(
                    "ssh -i {} -o IdentitiesOnly=yes -o StrictHostKeyChecking={checking} -o UserKnownHostsFile={}",
                    file.display(),
                    hosts.display()
                ),
            ));
        }
        Ok(env)
    }
}

/// Remove every symbolic link under `root` that is absolute, dangling, or resolves (through
/// any chain of links) outside `root`: a Stack's author must not make the compiler read the
/// controller's own files (`main.k -> /etc/...`, `data -> ../../../state`). The archive's
/// unpacking already refuses to write through such links; this keeps them from being read.
/// Returns the removed links, relative to `root`.
pub fn drop_escaping_links(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let real_root = root.canonicalize()?;
    let mut links = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_symlink() {
                links.push(entry.path());
            } else if kind.is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    let mut dropped = Vec::new();
    for link in links {
        let absolute = std::fs::read_link(&link).is_ok_and(|t| t.is_absolute());
        // Removing one link can only make others dangle, never make them escape, so one pass
        // in any order is enough.
        let inside = !absolute
            && link
                .canonicalize()
                .is_ok_and(|real| real.starts_with(&real_root));
        if !inside {
            std::fs::remove_file(&link)?;
            dropped.push(link.strip_prefix(root).unwrap_or(&link).to_path_buf());
        }
    }
    dropped.sort();
    Ok(dropped)
}

/// Run git in `dir` without prompts; its stdout, or its stderr as the error.
fn git(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String, GitError> {
    let shown = args.join(" ");
    let err = |message: String| GitError::Command {
        args: shown.clone(),
        message,
    };
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| err(format!("starting git: {e}")))?;
    // Read both pipes on threads so a chatty git never blocks on a full pipe.
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = stdout.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let deadline = Instant::now() + GIT_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(err(format!("timed out after {GIT_TIMEOUT:?}")));
            }
            Err(e) => return Err(err(format!("waiting for git: {e}"))),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = errs.join().unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        Err(err(format!("{status}: {}", stderr.trim())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn fetches_a_branch_and_a_tag_and_follows_new_commits() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join("stack")).unwrap();
        run(&repo, &["init", "--quiet", "-b", "main"]);
        std::fs::write(repo.join("stack/a.txt"), "one").unwrap();
        run(&repo, &["add", "."]);
        run(&repo, &["commit", "--quiet", "-m", "one"]);
        run(&repo, &["tag", "v1"]);
        let cache = GitCache::new(tmp.path().join("cache"));
        let url = repo.display().to_string();
        for (u, r) in [("--upload-pack=touch pwned", "main"), (url.as_str(), "-x")] {
            let err = cache.fetch(u, r, None).unwrap_err();
            assert!(matches!(err, GitError::Unsafe { .. }), "{err}");
        }
        assert!(!tmp.path().join("pwned").exists());
        let first = cache.fetch(&url, "main", None).unwrap();
        assert_eq!(
            std::fs::read_to_string(first.dir.join("stack/a.txt")).unwrap(),
            "one"
        );
        std::fs::write(repo.join("stack/a.txt"), "two").unwrap();
        run(&repo, &["commit", "--quiet", "-am", "two"]);
        // Within a second the same source answers from memory, unless the credentials differ.
        let memo = cache.fetch(&url, "main", None).unwrap();
        assert_eq!(memo.revision, first.revision);
        let other = Credentials {
            username: Some("u".into()),
            password: Some("p".into()),
            ..Default::default()
        };
        let second = cache.fetch(&url, "main", Some(&other)).unwrap();
        assert_ne!(first.revision, second.revision);
        assert_eq!(
            cache.fetch_now(&url, "main", None).unwrap().revision,
            second.revision
        );
        assert_eq!(
            std::fs::read_to_string(second.dir.join("stack/a.txt")).unwrap(),
            "two"
        );
        // The replaced tree stays while an operation may still compile from it, and goes once
        // it has not been the served revision for the grace period.
        assert!(first.dir.is_dir(), "the older tree is kept for a while");
        let long_ago = std::time::SystemTime::now() - TREE_GRACE - Duration::from_secs(1);
        std::fs::File::open(&first.dir)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        cache.fetch_now(&url, "main", None).unwrap();
        assert!(
            !first.dir.exists(),
            "the older tree is removed after the grace"
        );
        assert!(second.dir.is_dir());
        let tagged = cache.fetch_now(&url, "v1", None).unwrap();
        assert_eq!(tagged.revision, first.revision);
        let e = cache.fetch_now(&url, "no-such-branch", None).unwrap_err();
        assert!(e.to_string().contains("no-such-branch"), "{e}");
    }

    #[test]
    fn links_leaving_the_tree_are_dropped_and_links_inside_kept() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let secret = tmp.path().join("secret.txt");
        std::fs::write(&secret, "controller's own file").unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join("stack/deep")).unwrap();
        run(&repo, &["init", "--quiet", "-b", "main"]);
        std::fs::write(repo.join("stack/a.txt"), "inside").unwrap();
        symlink(&secret, repo.join("stack/absolute")).unwrap();
        symlink("../../secret.txt", repo.join("stack/up")).unwrap();
        symlink("a.txt", repo.join("stack/same")).unwrap();
        symlink("../a.txt", repo.join("stack/deep/parent")).unwrap();
        symlink("..", repo.join("stack/deep/dir")).unwrap();
        // Inside lexically, outside once `up` is followed.
        symlink("up", repo.join("stack/chain")).unwrap();
        symlink("nothing-here", repo.join("stack/dangling")).unwrap();
        assert_eq!(
            std::fs::read_to_string(repo.join("stack/chain")).unwrap(),
            "controller's own file",
            "in a plain checkout the link reads outside the repository"
        );
        run(&repo, &["add", "."]);
        run(&repo, &["commit", "--quiet", "-m", "links"]);
        let cache = GitCache::new(tmp.path().join("cache"));
        let got = cache
            .fetch_now(&repo.display().to_string(), "main", None)
            .unwrap();
        let stack = got.dir.join("stack");
        for gone in ["absolute", "up", "chain", "dangling"] {
            assert!(
                std::fs::symlink_metadata(stack.join(gone)).is_err(),
                "{gone} should have been dropped"
            );
        }
        assert_eq!(
            std::fs::read_to_string(stack.join("same")).unwrap(),
            "inside"
        );
        assert_eq!(
            std::fs::read_to_string(stack.join("deep/parent")).unwrap(),
            "inside"
        );
        assert_eq!(
            std::fs::read_to_string(stack.join("deep/dir/a.txt")).unwrap(),
            "inside"
        );
        assert_eq!(
            drop_escaping_links(&got.dir).unwrap(),
            Vec::<PathBuf>::new(),
            "what is left resolves inside"
        );
    }
}
