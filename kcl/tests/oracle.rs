//! Differential test against upstream KCL (the `kcl-lib` Python package, installed by
//! `scripts/setup.d/40-kcl-oracle.sh`): random programs from a small generator run through both
//! evaluators; outputs must be the same YAML value (or both must fail). Discrepancies found this
//! way are kept as fixtures under `tests/oracle_regressions/` and checked without the oracle.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kusion_kcl::{RunOptions, run_full};

/// Small deterministic generator (xorshift), so failures reproduce from the seed.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn int(&mut self) -> i64 {
        self.pick(200) as i64 - 100
    }
    fn word(&mut self) -> String {
        [
            "a", "bc", "web", "api", "x-1", "Hello", "data", "k8s", "", "  sp ",
        ][self.pick(10)]
        .to_string()
    }
    fn int_expr(&mut self, vars: &[String], depth: u32) -> String {
        if depth == 0 || self.pick(3) == 0 {
            if !vars.is_empty() && self.pick(2) == 0 {
                return format!("len({})", vars[self.pick(vars.len())]);
            }
            return self.int().to_string();
        }
        let op = ["+", "-", "*", "//", "%"][self.pick(5)];
        let (a, b) = (
            self.int_expr(vars, depth - 1),
            self.int_expr(vars, depth - 1),
        );
        if op == "//" || op == "%" {
            return format!("({a}) {op} ({} if ({b}) == 0 else ({b}))", 7);
        }
        format!("({a}) {op} ({b})")
    }
    fn str_expr(&mut self, depth: u32) -> String {
        let w = self.word();
        match if depth == 0 { 0 } else { self.pick(6) } {
            0 => format!("\"{w}\""),
            1 => format!("\"{w}\".upper()"),
            2 => format!("\"{w}\" + {}", self.str_expr(depth - 1)),
            3 => format!("\"${{{}}}-{w}\"", self.int_expr(&[], 1)),
            4 => format!(
                "\",\".join([{}, {}])",
                self.str_expr(depth - 1),
                self.str_expr(depth - 1)
            ),
            _ => format!("\"{w}\".strip().replace(\"a\", \"b\")"),
        }
    }
    fn value(&mut self, vars: &[String], depth: u32) -> String {
        match if depth == 0 {
            self.pick(3)
        } else {
            self.pick(8)
        } {
            0 => self.int_expr(vars, 2),
            1 => self.str_expr(1),
            2 => ["True", "False", "None"][self.pick(3)].to_string(),
            3 => format!(
                "[{}]",
                (0..self.pick(4))
                    .map(|_| self.value(vars, depth - 1))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            4 => {
                let n = self.pick(4);
                let mut keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
                keys.dedup();
                format!(
                    "{{{}}}",
                    keys.iter()
                        .map(|k| format!("{k} = {}", self.value(vars, depth - 1)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            5 => format!("[x * 2 for x in range({}) if x % 2 == 0]", self.pick(6)),
            6 => format!("{{\"k${{i}}\" = i for i in range({})}}", self.pick(4)),
            _ => format!(
                "{} | {{k0 = {}}}",
                "{k0 = 1, k1 = 2}",
                self.value(vars, depth - 1)
            ),
        }
    }
    fn program(&mut self) -> String {
        let mut src = String::from(
            "schema S:\n    name: str\n    n: int = 1\n    tags: [str] = []\n    full = \"${name}-${n}\"\n    check:\n        n < 150, \"too big\"\n\n",
        );
        let mut vars: Vec<String> = Vec::new();
        for i in 0..(2 + self.pick(5)) {
            let name = format!("v{i}");
            let line = match self.pick(9) {
                5 => format!(
                    "{name} = (lambda x, y = 2 {{ x * y + {} }})({})\n",
                    self.int(),
                    self.int_expr(&[], 1)
                ),
                6 => format!(
                    "{name} = all x in [{}, {}] {{ x > {} }}\n",
                    self.int(),
                    self.int(),
                    self.int()
                ),
                7 => format!(
                    "{name} = sorted([{}, {}, {}])\n",
                    self.int(),
                    self.int(),
                    self.int()
                ),
                8 => format!(
                    "{name} = max({}, {}) if \"{}\" in [\"a\", \"web\"] else min({}, 3)\n",
                    self.int(),
                    self.int(),
                    self.word(),
                    self.int()
                ),
                0 => format!(
                    "{name} = S {{name = {}, n = {}}}\n",
                    self.str_expr(1),
                    self.int_expr(&[], 1)
                ),
                1 if !vars.is_empty() => format!(
                    "{name} = [x for x in {}]\n",
                    format_args!("[{}]", vars.join(", "))
                ),
                _ => format!("{name} = {}\n", self.value(&[], 2)),
            };
            src.push_str(&line);
            vars.push(name);
        }
        src
    }
}

const ORACLE: &str = r#"
import json, sys
import kcl_lib.api as api
a = api.API()
for path in sys.argv[1:]:
    try:
        r = a.exec_program(api.ExecProgramArgs(k_filename_list=[path]))
        out = {"ok": not r.err_message, "yaml": r.yaml_result, "err": r.err_message}
    except Exception as e:
        out = {"ok": False, "yaml": "", "err": str(e)}
    print(json.dumps(out))
"#;

fn oracle(files: &[PathBuf]) -> Vec<(bool, String)> {
    oracle_full(files)
        .into_iter()
        .map(|(ok, yaml, _)| (ok, yaml))
        .collect()
}

/// Upstream's verdict, output and error text for each file.
fn oracle_full(files: &[PathBuf]) -> Vec<(bool, String, String)> {
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(ORACLE)
        .args(files)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = cmd
        .output()
        .expect("python3 must be installed for the oracle test");
    assert!(
        out.status.success(),
        "the upstream KCL oracle (pip package kcl-lib, see scripts/setup.d/40-kcl-oracle.sh) failed to run:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["ok"].as_bool().unwrap(),
                v["yaml"].as_str().unwrap_or("").to_string(),
                v["err"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn ours(file: &Path) -> Result<String, String> {
    let opts = RunOptions {
        work_dir: file.parent().map(Path::to_path_buf),
        ..Default::default()
    };
    run_full(&[file.to_path_buf()], &opts)
        .map(|o| o.text)
        .map_err(|e| e.to_string())
}

fn yaml_value(s: &str) -> serde_yaml_ng::Value {
    serde_yaml_ng::from_str(s).unwrap_or(serde_yaml_ng::Value::Null)
}

#[test]
fn random_programs_match_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let files: Vec<PathBuf> = (0..150)
        .map(|i| {
            let p = dir.path().join(format!("p{i}.k"));
            std::fs::write(&p, g.program()).unwrap();
            p
        })
        .collect();
    let expected = oracle(&files);
    assert_eq!(expected.len(), files.len());
    let mut failures = Vec::new();
    let ok_count = expected.iter().filter(|(ok, _)| *ok).count();
    for (f, (ok, yaml)) in files.iter().zip(expected) {
        let mine = ours(f);
        let same = match (&mine, ok) {
            (Ok(text), true) => yaml_value(text) == yaml_value(&yaml),
            (Err(_), false) => true,
            _ => false,
        };
        if !same {
            failures.push(format!(
                "--- {}\n{}\nupstream ok={ok}:\n{yaml}\nours: {mine:?}",
                f.display(),
                std::fs::read_to_string(f).unwrap()
            ));
        }
    }
    eprintln!("oracle: {ok_count} of 150 programs evaluated without error upstream");
    assert!(
        ok_count >= 75,
        "the generator should mostly produce valid programs"
    );
    assert!(
        failures.is_empty(),
        "{} of 150 programs differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn recorded_regressions_still_match() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle_regressions");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "k") {
            let want = std::fs::read_to_string(p.with_extension("yaml")).unwrap();
            let got = ours(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(yaml_value(&got), yaml_value(&want), "{}", p.display());
            n += 1;
        }
    }
    assert!(n > 0);
    let _ = std::io::stdout().flush();
}

/// The first annotation of a rustc-style diagnostic (the text after the `^` caret), with
/// terminal colours removed.
fn first_annotation(err: &str) -> Option<String> {
    let mut plain = String::with_capacity(err.len());
    let mut chars = err.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain.lines().find_map(|l| {
        let (_, rest) = l.split_once('|')?;
        let rest = rest.trim_start().strip_prefix('^')?;
        let msg = rest.trim_start_matches('^').trim();
        (!msg.is_empty()).then(|| msg.to_string())
    })
}

/// The static checker against upstream's resolver: `err_*.k` programs must fail in both with
/// upstream's first message in ours; `ok_*.k` programs (shapes the checker must not reject)
/// must give the same output.
#[test]
fn static_checks_match_upstream() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle_checker");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "k"))
        .collect();
    files.sort();
    let expected = oracle_full(&files);
    let mut failures = Vec::new();
    for (f, (ok, yaml, err)) in files.iter().zip(expected) {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let mine = ours(f);
        let want_ok = name.starts_with("ok_");
        if ok != want_ok {
            failures.push(format!(
                "{name}: upstream ok={ok}, fixture expects {want_ok}: {err}"
            ));
            continue;
        }
        match (&mine, ok) {
            (Ok(text), true) if yaml_value(text) == yaml_value(&yaml) => {}
            (Err(e), false) => {
                let key = first_annotation(&err).unwrap_or_default();
                if !e.contains(&key) {
                    failures.push(format!("{name}: upstream says {key:?}, ours:\n{e}"));
                }
            }
            _ => failures.push(format!(
                "{name}: upstream ok={ok}:\n{yaml}{err}\nours: {mine:?}"
            )),
        }
    }
    assert!(files.len() >= 18, "fixtures missing in {}", dir.display());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
