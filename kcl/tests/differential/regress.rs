//! Differences found against upstream, kept with upstream's output as the expectation:
//! `regressions/<name>/` holds the program's files, `args.txt` (the `kcl run` arguments, one
//! per line) and either `expected.stdout` (upstream's exact output) or `expected.error`
//! (upstream's error kind and first message line, the program folder written `${CWD}`),
//! optionally with `expected.stderr`: upstream's whole error output (every diagnostic, its
//! positions and notes), which must appear in ours as upstream's own test harness asks, with
//! blank lines and the `error[CODE]: ` prefixes left out (upstream's API, the oracle, prints a
//! runtime error's kind without its code).

use std::path::{Path, PathBuf};

use super::oracle::{Outcome, Program};

pub fn regressions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential/regressions")
}

/// What upstream did with a recorded program.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    Stdout(String),
    Error(String, String),
}

pub struct Case {
    pub name: String,
    pub program: Program,
    pub expected: Expected,
    /// Upstream's whole error output, when recorded.
    pub stderr: Option<String>,
}

const META: [&str; 4] = [
    "args.txt",
    "expected.stdout",
    "expected.error",
    "expected.stderr",
];

pub fn load_all() -> Vec<Case> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(regressions_dir()) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let args: Vec<String> = std::fs::read_to_string(d.join("args.txt"))
            .unwrap_or_else(|_| panic!("{name}: args.txt missing"))
            .lines()
            .map(String::from)
            .collect();
        let mut files = Vec::new();
        collect(&d, &d, &mut files);
        files.sort();
        let expected = match std::fs::read_to_string(d.join("expected.stdout")) {
            Ok(s) => Expected::Stdout(s),
            Err(_) => {
                let e = std::fs::read_to_string(d.join("expected.error"))
                    .unwrap_or_else(|_| panic!("{name}: expected.stdout or expected.error"));
                let mut l = e.lines();
                Expected::Error(
                    l.next().unwrap_or("").to_string(),
                    l.next().unwrap_or("").to_string(),
                )
            }
        };
        let stderr = std::fs::read_to_string(d.join("expected.stderr")).ok();
        out.push(Case {
            name,
            program: Program { files, args },
            expected,
            stderr,
        });
    }
    out
}

fn collect(root: &Path, d: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            collect(root, &p, out);
        } else if !META.contains(&rel.as_str()) {
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

/// Record `program` with upstream's outcome under `name` (replacing a case of that name).
pub fn record(name: &str, program: &Program, upstream: &Outcome, dir_of_run: &Path) {
    let d = regressions_dir().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    program.write(&d);
    std::fs::write(d.join("args.txt"), program.args.join("\n") + "\n").unwrap();
    if upstream.ok() {
        std::fs::write(d.join("expected.stdout"), &upstream.stdout).unwrap();
    } else {
        let (k, m) = upstream.error_key(dir_of_run);
        std::fs::write(d.join("expected.error"), format!("{k}\n{m}\n")).unwrap();
    }
}

/// Does our outcome meet the recorded expectation? (`Err` explains how not.)
pub fn check(case: &Case, ours: &Outcome, dir: &Path) -> Result<(), String> {
    match &case.expected {
        Expected::Stdout(s) if ours.ok() && &ours.stdout == s => Ok(()),
        Expected::Stdout(s) => Err(format!(
            "upstream printed:\n{s}\nours (exit {}):\n{}{}",
            ours.code, ours.stdout, ours.stderr
        )),
        Expected::Error(k, m) => {
            if ours.ok() {
                return Err(format!(
                    "upstream failed with {k}: {m}\nours succeeded:\n{}",
                    ours.stdout
                ));
            }
            let (ok, om) = ours.error_key(dir);
            if (&ok, &om) != (k, m) {
                return Err(format!(
                    "upstream failed with {k}: {m}\nours failed with {ok}: {om}\n{}",
                    ours.stderr
                ));
            }
            match &case.stderr {
                Some(want) => {
                    let cwd = format!("{}/", dir.display());
                    let got = normalize_stderr(&ours.stderr.replace(&cwd, "${CWD}/"));
                    let want = normalize_stderr(want);
                    if got.contains(&want) {
                        Ok(())
                    } else {
                        Err(format!("upstream's diagnostics:\n{want}\nours:\n{got}"))
                    }
                }
                None => Ok(()),
            }
        }
    }
}

/// Error output as compared: escapes, blank lines and `error[CODE]: ` prefixes left out.
pub fn normalize_stderr(s: &str) -> String {
    let mut out = String::new();
    let plain = super::oracle::strip_ansi(s);
    for line in plain.lines().filter(|l| !l.trim().is_empty()) {
        let line = match line.strip_prefix("error[") {
            Some(rest) => rest.split_once("]: ").map_or(line, |(_, t)| t),
            None => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}
