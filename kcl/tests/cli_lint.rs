//! `kcl lint` through the binary: upstream's errors and lint warnings, rustc-style, exit 1 on
//! errors only, `--fix`, rule switches, JSON, and the Konfig repository linting clean.

use std::path::Path;
use std::process::{Command, Output};

fn kcl(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kcl"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const IMPORTS: &str = "import math\nimport math\nimport regex as re\nimport base64\n\nx = base64.encode(\"a\")\ny = \"${re.match}\"\n";

#[test]
fn warnings_alone_exit_0_in_upstreams_words() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.k"), IMPORTS).unwrap();
    let o = kcl(d.path(), &["lint", "a.k"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    let file = d.path().join("a.k").canonicalize().unwrap();
    assert!(
        e.starts_with(&format!(
            "warning[unused-import]: UnusedImportWarning\n --> {}:1:1\n  |\n1 | import math\n  | ^ Module 'math' imported but unused\n  |\n",
            file.display()
        )),
        "{e}"
    );
    assert!(
        e.contains("Module 'math' is reimported multiple times"),
        "{e}"
    );
    // used in code and inside a string interpolation: no warning
    assert!(
        !e.contains("Module 're'") && !e.contains("Module 'base64'"),
        "{e}"
    );
    assert!(
        e.ends_with("0 error(s), 3 warning(s) in 1 package(s)\n"),
        "{e}"
    );
}

#[test]
fn errors_exit_1_with_upstreams_code() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.k"), "import math\nx: int = \"s\"\n").unwrap();
    std::fs::write(d.path().join("b.k"), "a = \n").unwrap();
    let o = kcl(d.path(), &["lint", "a.k"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.starts_with("error[E2G22]: TypeError\n"), "{e}");
    assert!(e.contains("expected int, got str(s)"), "{e}");
    assert!(e.contains("imported but unused"), "{e}");
    let o = kcl(d.path(), &["lint", "b.k"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("error[E1001]: InvalidSyntax"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn fix_deletes_unused_and_repeated_imports() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.k"), IMPORTS).unwrap();
    let o = kcl(d.path(), &["lint", "--fix", "a.k"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("fixed 3 finding(s)"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(d.path().join("a.k")).unwrap(),
        "import regex as re\nimport base64\n\nx = base64.encode(\"a\")\ny = \"${re.match}\"\n"
    );
    let o = kcl(d.path(), &["lint", "a.k"]);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn rules_switched_off_by_flag_or_config() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.k"), IMPORTS).unwrap();
    let o = kcl(d.path(), &["lint", "a.k", "--disable", "unused-import"]);
    let e = stderr(&o);
    assert!(
        !e.contains("unused-import") && e.contains("reimport"),
        "{e}"
    );
    std::fs::write(
        d.path().join("kcl-lint.toml"),
        "disable = [\"reimport\", \"unused-import\"]\n",
    )
    .unwrap();
    let o = kcl(d.path(), &["lint", "a.k"]);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let o = kcl(d.path(), &["lint", "a.k", "--disable", "no-such-rule"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn json_and_packages_below_a_folder() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("p/q")).unwrap();
    std::fs::write(d.path().join("p/a.k"), "import math\na = 1\n").unwrap();
    std::fs::write(d.path().join("p/q/b.k"), "b: str = 1\n").unwrap();
    let o = kcl(d.path(), &["lint", "./...", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["packages"], 2);
    assert_eq!(v["errors"], 1);
    assert_eq!(v["warnings"], 1);
    let f = &v["findings"][0];
    assert_eq!(f["code"], "unused-import");
    assert_eq!(f["line"], 1);
    assert_eq!(f["fixable"], true);
    let f = &v["findings"][1];
    assert_eq!(f["code"], "E2G22");
    assert!(f["file"].as_str().unwrap().ends_with("p/q/b.k"));
}

#[test]
fn konfig_lints_clean() {
    let konfig = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/konfig");
    let o = kcl(&konfig, &["lint", "./...", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(o.status.success(), "{v:#}");
    assert_eq!(v["findings"], serde_json::json!([]), "{v:#}");
    // k8s packages, the models and every stack (as its kcl.yaml lists its files)
    assert!(v["packages"].as_u64().unwrap() >= 15, "{v:#}");
}

#[test]
fn rules_beyond_upstream() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("c.k"),
        "schema Person:\n    name: str\n    @deprecated(version=\"1.2\", reason=\"use age\", strict=False)\n    years?: int\n\n\
         x = 1\nf = lambda x, y {\n    unused = 1\n    _tmp = 2\n    z = y + 1\n    items = [1]\n    items[0] = 3\n    p = Person {name = \"a\", years = 3}\n    r = \"${z}\"\n}\n",
    )
    .unwrap();
    let o = kcl(d.path(), &["lint", "c.k", "--format", "json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got: Vec<(String, u64, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        (
            "shadowed-name",
            7,
            "parameter 'x' shadows the package-level name defined at 6:1",
        ),
        (
            "unused-variable",
            8,
            "variable 'unused' is assigned but never used",
        ),
        (
            "unused-variable",
            13,
            "variable 'p' is assigned but never used",
        ),
        (
            "deprecated",
            13,
            "years was deprecated since version 1.2, use age",
        ),
    ];
    let want: Vec<(String, u64, String)> = want
        .iter()
        .map(|(c, l, m)| (c.to_string(), *l, m.to_string()))
        .collect();
    // `_tmp`, `items` (mutated), `z` (read in a string) and the returned `r` are not unused
    assert_eq!(got, want);
}

#[test]
fn resolver_errors_the_checker_leaves_to_evaluation() {
    let d = tempfile::tempdir().unwrap();
    // upstream's resolver rejects both statically; a syntax error does not hide the rest
    std::fs::write(
        d.path().join("a.k"),
        "data = [1]\nx = [i for i, j, k in data]\ny = [i for i.j in data]\nz = \n",
    )
    .unwrap();
    let o = kcl(d.path(), &["lint", "a.k", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got: Vec<(u64, u64, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["line"].as_u64().unwrap(),
                f["column"].as_u64().unwrap(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got[0],
        (
            2,
            18,
            "the number of loop variables is 3, which can only be 1 or 2".into()
        )
    );
    assert_eq!(
        got[1],
        (
            3,
            12,
            "loop variables can only be ordinary identifiers".into()
        )
    );
    assert_eq!(got[2].0, 4, "{got:?}");
}

#[test]
fn unreachable_code() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("u.k"),
        "a = 1\nif False:\n    b = 2\nif True:\n    c = 3\nelse:\n    e = 4\nf = lambda {\n    assert False, \"never\"\n    x = 1\n    x\n}\nif a > 0:\n    g = 1\n",
    )
    .unwrap();
    let o = kcl(d.path(), &["lint", "u.k", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got: Vec<(u64, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "unreachable")
        .map(|f| {
            (
                f["line"].as_u64().unwrap(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                3,
                "unreachable code: the condition is always False".to_string()
            ),
            (
                7,
                "unreachable code: the condition is always True".to_string()
            ),
            (
                10,
                "unreachable code: the assertion at 9:5 always fails".to_string()
            ),
        ]
    );
}
