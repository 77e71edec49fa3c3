//! `kcl test` through the binary: discovery of `*_test.k` beside a package, one evaluation per
//! `test_*` lambda, upstream's report, `--run`, `--fail-fast`, JSON, exit codes, and the
//! Konfig models' own tests.

use std::path::Path;
use std::process::{Command, Output};

fn kcl(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kcl"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The report with durations (`(3ms)`) blanked.
fn report(o: &Output) -> String {
    let s = stdout(o);
    let mut out = String::new();
    for line in s.lines() {
        match line.rfind(" (") {
            Some(i) if line.ends_with("ms)") => {
                out.push_str(&line[..i]);
                out.push_str(" (_)");
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn package() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let w = |n: &str, t: &str| {
        let p = d.path().join(n);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, t).unwrap();
    };
    w(
        "main.k",
        "schema Person:\n    name: str\n    age: int = 1\n    check:\n        age >= 0, \"age must be non-negative\"\n\nalice = Person {name = \"alice\"}\n",
    );
    w(
        "main_test.k",
        "test_default_age = lambda {\n    assert Person {name = \"x\"}.age == 1\n}\n\
         test_alice_is_two = lambda {\n    print(\"checking alice\")\n    assert alice.age == 2, \"alice should be 2\"\n}\n\
         test_check_fails = lambda {\n    p = Person {name = \"x\", age = -1}\n}\n\
         not_a_test = lambda { assert False }\ntest_not_a_lambda = 1\n",
    );
    w("sub/s.k", "x = 1\n");
    w("sub/s_test.k", "test_x = lambda {\n    assert x == 1\n}\n");
    d
}

#[test]
fn reports_like_upstream_and_fails_with_exit_1() {
    let d = package();
    let o = kcl(d.path(), &["test"]);
    assert_eq!(o.status.code(), Some(1));
    let r = report(&o);
    let main_test = d.path().join("main_test.k").canonicalize().unwrap();
    let main_test = main_test.display();
    // (a runtime error names its line only, as upstream's runtime)
    assert!(
        r.starts_with(&format!(
            "test_default_age: PASS (_)\ntest_alice_is_two: FAIL (_)\nerror[E3M38]: EvaluationError\n --> {main_test}:6:1\n  |\n6 |     assert alice.age == 2, \"alice should be 2\"\n  |  alice should be 2\n  |\n\n\ntest_check_fails: FAIL (_)\n"
        )),
        "{r}"
    );
    // a failed schema check shows the instance and the failed condition
    assert!(r.contains("Instance check failed"), "{r}");
    assert!(
        r.contains("Check failed on the condition: age must be non-negative"),
        "{r}"
    );
    assert!(
        r.ends_with(&format!("{}\nPASS: 1/3\nFAIL: 2/3\n", "-".repeat(80))),
        "{r}"
    );
    // the sub-package is only tested with ./...
    assert!(!r.contains("test_x"));
}

#[test]
fn recursive_run_filter_and_fail_fast() {
    let d = package();
    let o = kcl(d.path(), &["test", "./...", "--run", "^test_(x|default)"]);
    assert!(o.status.success());
    assert_eq!(
        report(&o),
        format!(
            "test_default_age: PASS (_)\ntest_x: PASS (_)\n{}\nPASS: 2/2\n",
            "-".repeat(80)
        )
    );
    // fail-fast stops the package at its first failure; as upstream, the next package runs
    let o = kcl(d.path(), &["test", "./...", "--fail-fast"]);
    assert_eq!(o.status.code(), Some(1));
    let r = report(&o);
    assert!(r.contains("test_alice_is_two: FAIL"), "{r}");
    assert!(!r.contains("test_check_fails"), "{r}");
    assert!(r.contains("test_x: PASS"), "{r}");
    assert!(r.ends_with("PASS: 2/3\nFAIL: 1/3\n"), "{r}");
    let o = kcl(d.path(), &["test", "--run", "("]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn json_report_for_ci() {
    let d = package();
    let o = kcl(d.path(), &["test", "./...", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["total"], 4);
    assert_eq!(v["passed"], 2);
    assert_eq!(v["failed"], 2);
    let t = &v["tests"][1];
    assert_eq!(t["name"], "test_alice_is_two");
    assert_eq!(t["status"], "fail");
    assert_eq!(t["log"], "checking alice\n");
    assert_eq!(t["failure"]["message"], "alice should be 2");
    let loc = t["failure"]["location"].as_str().unwrap();
    // (where upstream's runtime reports it: the part of the assert it evaluated last, the
    // message)
    assert!(loc.ends_with("main_test.k:6:28"), "{loc}");
    assert!(
        t["defined_at"]
            .as_str()
            .unwrap()
            .ends_with("main_test.k:4:1"),
        "{t}"
    );
    assert_eq!(v["tests"][3]["name"], "test_x");
    assert!(v["tests"][3]["package"].as_str().unwrap().ends_with("/sub"));
}

#[test]
fn each_test_has_its_own_evaluation() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.k"), "schema P:\n    n: int\n").unwrap();
    // an instance made by one test is not seen by the next (upstream passes both too)
    std::fs::write(
        d.path().join("a_test.k"),
        "test_one = lambda {\n    p = P {n = 1}\n    assert len(P.instances()) == 1\n}\n\
         test_two = lambda {\n    q = P {n = 2}\n    assert len(P.instances()) == 1, \"saw ${len(P.instances())}\"\n}\n",
    )
    .unwrap();
    let o = kcl(d.path(), &["test"]);
    assert!(o.status.success(), "{}", report(&o));
}

#[test]
fn no_test_files() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.k"), "a = 1\n").unwrap();
    let o = kcl(d.path(), &["test", "./..."]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "no test files\n");
}

#[test]
fn a_package_that_does_not_check_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.k"), "a: int = \"x\"\n").unwrap();
    std::fs::write(
        d.path().join("a_test.k"),
        "test_a = lambda { assert True }\n",
    )
    .unwrap();
    let o = kcl(d.path(), &["test"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("TypeError"));
}

#[test]
fn konfig_models_pass_their_tests() {
    let konfig = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/konfig");
    let o = kcl(&konfig, &["test", "./...", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(o.status.success(), "{v:#}");
    assert_eq!(v["failed"], 0);
    assert!(v["total"].as_u64().unwrap() >= 20, "{v:#}");
}
