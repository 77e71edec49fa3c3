//! Running one program through upstream KCL (`scripts/kcl-oracle.py serve`, one Python process
//! per upstream release kept for a whole run) and through our `kcl` binary, and comparing what
//! they print.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// A program: files relative to its folder, and the `kcl run` arguments (files included).
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub files: Vec<(String, String)>,
    pub args: Vec<String>,
}

impl Program {
    /// A single-file program run as `kcl run main.k`.
    pub fn single(src: &str) -> Program {
        Program {
            files: vec![("main.k".into(), src.into())],
            args: vec!["main.k".into()],
        }
    }

    /// Write the files under `dir`.
    pub fn write(&self, dir: &Path) {
        for (p, text) in &self.files {
            let f = dir.join(p);
            if let Some(d) = f.parent() {
                std::fs::create_dir_all(d).unwrap();
            }
            std::fs::write(f, text).unwrap();
        }
    }

    /// The program as one text: every file under a `# --- path` line, then the command.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for (p, text) in &self.files {
            s.push_str(&format!("# --- {p}\n{text}"));
            if !text.ends_with('\n') {
                s.push('\n');
            }
        }
        s.push_str(&format!("# --- $ kcl run {}\n", self.args.join(" ")));
        s
    }
}

/// What a run printed.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.code == 0
    }
    /// For a failure: the error kind (`EvaluationError`, `TypeError`, ...) and the first line
    /// of its message, with the program's folder written `${CWD}`.
    pub fn error_key(&self, dir: &Path) -> (String, String) {
        error_key(&self.stderr.replace(&dir.display().to_string(), "${CWD}"))
    }
}

/// The error kind and first message line of a diagnostic, in either of upstream's layouts
/// (`error[E2G22]: TypeError` from the command line, a bare `EvaluationError` from kcl-lib)
/// and ours.
pub fn error_key(stderr: &str) -> (String, String) {
    let plain = strip_ansi(stderr);
    let mut lines = plain
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty());
    let Some(first) = lines.next() else {
        return (String::new(), String::new());
    };
    let kind = match first.strip_prefix("error[") {
        Some(rest) => rest.split_once("]: ").map(|(_, t)| t.trim().to_string()),
        None if !first.contains(' ') && first.ends_with("Error") => Some(first.trim().to_string()),
        None => None,
    };
    let Some(kind) = kind else {
        return (String::new(), first.trim().to_string());
    };
    // the message of the first snippet: the gutter line after its source line
    let rest: Vec<&str> = lines.collect();
    let mut seen_source = false;
    for l in &rest {
        let t = l.trim_start();
        if t.starts_with("-->") {
            seen_source = false;
            continue;
        }
        if let Some((num, _)) = t.split_once('|')
            && !num.trim().is_empty()
            && num.trim().chars().all(|c| c.is_ascii_digit())
        {
            seen_source = true;
            continue;
        }
        if seen_source && let Some(m) = t.strip_prefix('|') {
            let m = m.trim().trim_start_matches('^').trim();
            if !m.is_empty() {
                return (kind, m.to_string());
            }
        }
    }
    let msg = rest
        .iter()
        .map(|l| l.trim())
        .find(|l| !l.starts_with("-->") && *l != "|")
        .unwrap_or("")
        .to_string();
    (kind, msg)
}

/// `s` without terminal colour escapes.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// How two runs differ (`None`: they agree).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Diff {
    /// Both succeeded with different output.
    Stdout,
    /// One failed: `true` when upstream succeeded.
    Status { upstream_ok: bool },
    /// Both failed, with another error kind or message.
    Error { kind_differs: bool },
    /// Both failed with the same first error, and `KCL_DIFF_WHOLE=1` asked for the errors
    /// after it too: they differ.
    Whole,
}

pub fn compare(up: &Outcome, ours: &Outcome, dir: &Path) -> Option<Diff> {
    match (up.ok(), ours.ok()) {
        (true, true) => (up.stdout != ours.stdout).then_some(Diff::Stdout),
        (false, false) => {
            let (uk, um) = up.error_key(dir);
            let (ok, om) = ours.error_key(dir);
            // kcl-lib's API words a missing package its own way ("pkgpath x not found in the
            // program"); the kcl command line, whose wording the grammar suite holds and we
            // follow, says "Cannot find the module x from ...": only the kind is compared
            if uk == "CannotFindModule" && ok == uk {
                return None;
            }
            // likewise a cyclic import: kcl-lib's loader says "RecursiveLoad: Could not
            // compiles due to cyclic import statements" where the command line (the grammar
            // suite's import_main_file_fail_0) reports the resolver's "There is a circular
            // reference between modules ..."
            if uk == "RecursiveLoad" && om.starts_with("There is a circular reference") {
                return None;
            }
            if uk != ok {
                Some(Diff::Error { kind_differs: true })
            } else if um != om {
                Some(Diff::Error {
                    kind_differs: false,
                })
            } else if std::env::var("KCL_DIFF_WHOLE").is_ok_and(|v| v == "1")
                && whole_errors(&up.stderr, dir) != whole_errors(&ours.stderr, dir)
            {
                Some(Diff::Whole)
            } else {
                None
            }
        }
        (u, _) => Some(Diff::Status { upstream_ok: u }),
    }
}

/// Every diagnostic of an error output, comparable across the two: codes, blank lines and
/// gutter-only lines left out, the program folder written `${CWD}`; for upstream's API, its
/// parse-phase block (printed again with the resolver's) and its "pkgpath .. not found"
/// errors (the command line says "Cannot find the module") dropped.
pub fn whole_errors(stderr: &str, dir: &Path) -> Vec<String> {
    let cwd = format!("{}/", dir.display());
    let text = super::regress::normalize_stderr(&stderr.replace(&cwd, "${CWD}/"));
    let mut blocks: Vec<Vec<String>> = Vec::new();
    for line in text.lines().filter(|l| l.trim() != "|") {
        let starts = !line.starts_with(' ')
            && !line.starts_with("suggestion:")
            && !line.starts_with("note:")
            && !line.chars().next().is_some_and(|c| c.is_ascii_digit());
        if starts || blocks.is_empty() {
            blocks.push(Vec::new());
        }
        blocks.last_mut().unwrap().push(line.trim_end().to_string());
    }
    blocks.retain(|b| !b.iter().any(|l| l.contains("not found in the program")));
    for k in 1..=blocks.len() / 2 {
        if blocks[..k] == blocks[k..2 * k] {
            blocks.drain(..k);
            break;
        }
    }
    blocks.concat()
}

/// The repository's `scripts/` folder.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts")
}

/// Where setup keeps kcl-lib 0.12.4 (`pip install --target`): the release the Konfig goldens
/// and the grammar suite come from.
pub fn oracle_0124_dir() -> PathBuf {
    let cache = std::env::var_os("KUSION_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/kusion-rs")
        });
    cache.join("kcl-lib-0.12.4")
}

/// One upstream release behind `kcl-oracle.py serve`.
pub struct Oracle {
    pub name: String,
    lib_path: Option<PathBuf>,
    proc: Option<(Child, ChildStdin, Receiver<String>)>,
    pub calls: usize,
}

const ORACLE_TIMEOUT: Duration = Duration::from_secs(60);

impl Oracle {
    /// The release installed for `python3` (kcl-lib from `scripts/setup.d/40-kcl-oracle.sh`)
    /// or, with `lib_path`, the one installed there. Panics with a clear message when it
    /// cannot run: the differential tests must not pass without their oracle.
    pub fn start(name: &str, lib_path: Option<PathBuf>) -> Oracle {
        let mut o = Oracle {
            name: name.to_string(),
            lib_path,
            proc: None,
            calls: 0,
        };
        o.spawn();
        // a trivial program proves the oracle imports and runs
        let dir = tempfile::tempdir().unwrap();
        let probe = Program::single("a = 1\n");
        probe.write(dir.path());
        let r = o.run(&probe, dir.path());
        assert!(
            matches!(&r, Some(out) if out.ok() && out.stdout == "a: 1\n"),
            "the upstream KCL oracle {name} does not work (run `bash scripts/setup.d/40-kcl-oracle.sh`): {r:?}"
        );
        o
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new("python3");
        cmd.arg(scripts_dir().join("kcl-oracle.py"))
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        match &self.lib_path {
            Some(p) => {
                assert!(
                    p.join("kcl_lib").is_dir(),
                    "upstream KCL oracle {} is not installed at {} (run `bash scripts/setup.d/40-kcl-oracle.sh`)",
                    self.name,
                    p.display()
                );
                cmd.env("KCL_ORACLE_PATH", p);
            }
            None => {
                cmd.env_remove("KCL_ORACLE_PATH");
            }
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start python3 for the KCL oracle: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        self.proc = Some((child, stdin, rx));
    }

    fn kill(&mut self) {
        if let Some((mut c, _, _)) = self.proc.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send the request; the answer is read with [`Oracle::receive`] (so several oracles
    /// can work at once).
    pub fn send(&mut self, p: &Program, dir: &Path) {
        // kcl-lib keeps memory from every run (gigabytes after a few thousand): start afresh
        if self.calls > 0 && self.calls.is_multiple_of(500) {
            self.kill();
        }
        if self.proc.is_none() {
            self.spawn();
        }
        let mut argv = vec!["run".to_string()];
        argv.extend(p.args.iter().cloned());
        let req = serde_json::json!({"argv": argv, "cwd": dir.display().to_string()});
        let (_, stdin, _) = self.proc.as_mut().unwrap();
        if writeln!(stdin, "{req}")
            .and_then(|_| stdin.flush())
            .is_err()
        {
            self.kill();
        }
        self.calls += 1;
    }

    /// Upstream's outcome of the last request (`None`: upstream crashed or timed out).
    pub fn receive(&mut self) -> Option<Outcome> {
        let (_, _, rx) = self.proc.as_mut()?;
        match rx.recv_timeout(ORACLE_TIMEOUT) {
            Ok(line) => {
                let v: serde_json::Value = serde_json::from_str(&line).ok()?;
                Some(Outcome {
                    code: v["code"].as_i64().unwrap_or(1) as i32,
                    stdout: v["stdout"].as_str().unwrap_or("").to_string(),
                    stderr: v["stderr"].as_str().unwrap_or("").to_string(),
                })
            }
            Err(_) => {
                // crashed (the native library aborted) or stuck: start a fresh one next time
                self.kill();
                None
            }
        }
    }

    pub fn run(&mut self, p: &Program, dir: &Path) -> Option<Outcome> {
        self.send(p, dir);
        self.receive()
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Our `kcl run` on the program in `dir` (`None`: it did not finish in time).
pub fn run_ours(p: &Program, dir: &Path) -> Option<Outcome> {
    // the program's folder as written: files upstream's run made (`file.append`, `-o`) must
    // not be there for ours
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let path = e.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
    p.write(dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcl"))
        .arg("run")
        .args(&p.args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the kcl binary");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    let status = status?;
    Some(Outcome {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    })
}

/// Upstream as the oracle: kcl-lib 0.12.4, the release the grammar suite and the Konfig
/// goldens come from, decides; another release (kcl-lib 0.13 for `python3`) may run beside it
/// for information only (`KCL_DIFF_ALSO_013=1`), counting the programs whose outcome changed
/// between the releases. Skipping those instead hid real differences: 0.13 checks required
/// attributes before evaluation where 0.12.4 does so at run time.
pub struct Upstream {
    pub releases: Vec<Oracle>,
    /// Programs on which the informational release disagreed with 0.12.4.
    pub version_dependent: usize,
}

/// Upstream's answer for one program.
pub enum Verdict {
    /// kcl-lib 0.12.4's outcome.
    Agreed(Outcome),
    /// The oracle crashed or timed out.
    Failed,
}

impl Upstream {
    /// kcl-lib 0.12.4 from the setup's cache folder; with `KCL_DIFF_ALSO_013=1` kcl-lib as
    /// installed for `python3` runs beside it (informational).
    pub fn start() -> Upstream {
        let mut releases = vec![Oracle::start("kcl-lib 0.12.4", Some(oracle_0124_dir()))];
        if std::env::var("KCL_DIFF_ALSO_013").is_ok_and(|v| v == "1") {
            releases.push(Oracle::start("kcl-lib (python3)", None));
        }
        Upstream {
            releases,
            version_dependent: 0,
        }
    }

    pub fn run(&mut self, p: &Program, dir: &Path) -> Verdict {
        for o in self.releases.iter_mut() {
            o.send(p, dir);
        }
        let outs: Vec<Option<Outcome>> = self.releases.iter_mut().map(|o| o.receive()).collect();
        let Some(Some(first)) = outs.first().cloned() else {
            return Verdict::Failed;
        };
        // kcl-lib's core panicked (`a: 1_0.5` unwraps a float parse in its type parser) and
        // the API still answered "ok, no output": a crash, not an outcome to match
        if first.ok() && first.stderr.contains("panicked at") {
            return Verdict::Failed;
        }
        if outs[1..].iter().any(|o| {
            o.as_ref()
                .is_some_and(|x| compare(&first, x, dir).is_some())
        }) {
            self.version_dependent += 1;
        }
        Verdict::Agreed(first)
    }

    pub fn calls(&self) -> usize {
        self.releases.iter().map(|o| o.calls).sum()
    }
}
