//! End-to-end tests of the evaluator through the library API and the `kcl run` binary, on
//! small fixtures written here (no external corpus needed).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use kusion_kcl::{PluginHook, RunOptions, run_full};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

fn run_text(src: &str, opts: RunOptions) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "main.k", src);
    let opts = RunOptions {
        work_dir: Some(dir.path().to_path_buf()),
        ..opts
    };
    run_full(&[f], &opts)
        .map(|o| format!("{}{}", o.printed, o.text))
        .map_err(|e| e.to_string())
}

fn run_ok(src: &str) -> String {
    run_text(src, RunOptions::default()).unwrap_or_else(|e| panic!("run failed:\n{e}"))
}

#[test]
fn scalars_and_quoting() {
    let out = run_ok(
        "a = 1\nb = \"123\"\nc = 1.5\nd = None\ne = [1, {x = \"y\"}]\nf = {}\n_hidden = 3\ng = \"multi\\nline\"\n",
    );
    assert_eq!(
        out,
        "a: 1\nb: '123'\nc: 1.5\nd: null\ne:\n- 1\n- x: 'y'\nf: {}\ng: |-\n  multi\n  line\n"
    );
}

#[test]
fn order_independent_globals() {
    assert_eq!(run_ok("b = a + 1\na = 1\n"), "b: 2\na: 1\n");
}

#[test]
fn schema_defaults_inheritance_and_config() {
    let src = r#"
schema Base:
    kind: str = "base"
schema App(Base):
    name: str
    replicas: int = 1
    labels: {str:str} = {}
    full = "${name}-${replicas}"
app = App {name = "web", replicas = 3, labels.tier = "front"}
"#;
    assert_eq!(
        run_ok(src),
        "app:\n  kind: base\n  name: web\n  replicas: 3\n  labels:\n    tier: front\n  full: web-3\n"
    );
}

#[test]
fn schema_check_failure_reports_message() {
    let src =
        "schema P:\n    age: int\n    check:\n        age > 10, \"too young\"\np = P {age = 1}\n";
    let err = run_text(src, RunOptions::default()).unwrap_err();
    assert!(err.contains("Instance check failed"), "{err}");
    assert!(err.contains("too young"), "{err}");
    assert!(err.contains("main.k:5:"), "{err}");
}

#[test]
fn required_attribute_and_unknown_member() {
    let err = run_text(
        "schema P:\n    name: str\np = P {}\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(err.contains("attribute 'name' of P is required"), "{err}");
    // (with `name` required, upstream reports the missing attribute first)
    let err = run_text(
        "schema P:\n    name?: str\np = P {nam = \"x\"}\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.contains("Cannot add member 'nam' to schema 'P'"),
        "{err}"
    );
}

#[test]
fn config_operators_and_unification() {
    let src = r#"
schema C:
    name: str
    args: [str] = []
c: C {name = "a", args = ["x"]}
c: C {args += ["y"]}
d = {a = 1, b.c = 2} | {a = 3}
"#;
    assert_eq!(
        run_ok(src),
        "c:\n  name: a\n  args:\n  - x\n  - 'y'\nd:\n  a: 3\n  b:\n    c: 2\n"
    );
}

#[test]
fn immutable_globals() {
    let err = run_text("a = 1\na = 2\n", RunOptions::default()).unwrap_err();
    assert!(err.contains("declared immutable"), "{err}");
}

#[test]
fn lambdas_comprehensions_quantifiers() {
    let src = r#"
add = lambda x, y = 1 { x + y }
a = add(1)
b = [x * 2 for x in range(4) if x != 2]
c = {k: v + 1 for k, v in {x = 1, y = 2}}
d = all x in [1, 2] { x > 0 }
e = filter x in [1, 2, 3] { x > 1 }
f = map x in [1, 2] { x * 10 }
"#;
    assert_eq!(
        run_ok(src),
        "a: 2\nb:\n- 0\n- 2\n- 6\nc:\n  x: 2\n  'y': 3\nd: true\ne:\n- 2\n- 3\nf:\n- 10\n- 20\n"
    );
}

#[test]
fn builtins_and_system_modules() {
    let src = r#"
import base64
import json
import math
s = "hello".upper()
n = len([1, 2, 3])
b = base64.encode("abc")
j = json.encode({a = [1, None]})
m = math.floor(2.7)
t = typeof(1)
"#;
    assert_eq!(
        run_ok(src),
        "s: HELLO\n'n': 3\nb: YWJj\nj: '{\"a\": [1, null]}'\nm: 2\nt: int\n"
    );
}

#[test]
fn print_goes_before_the_output() {
    assert_eq!(run_ok("print(\"hi\", 1)\na = 1\n"), "hi 1\na: 1\n");
}

#[test]
fn yaml_stream_replaces_output() {
    let out = run_ok("import manifests\nmanifests.yaml_stream([{a = 1}, {b = 2}])\n");
    assert_eq!(out, "a: 1\n---\nb: 2\n");
}

#[test]
fn options_selectors_json_and_flags() {
    let opts = RunOptions {
        args: vec![("env".into(), "prod".into()), ("n".into(), "3".into())],
        ..Default::default()
    };
    let out = run_text("env = option(\"env\")\nn = option(\"n\", type=\"int\") + 1\nd = option(\"missing\", default=\"x\")\n", opts).unwrap();
    assert_eq!(out, "env: prod\n'n': 4\nd: x\n");
    let opts = RunOptions {
        path_selector: vec!["a.b".into()],
        ..Default::default()
    };
    assert_eq!(run_text("a = {b = {c = 1}}\n", opts).unwrap(), "c: 1\n");
    let opts = RunOptions {
        json: true,
        ..Default::default()
    };
    assert_eq!(
        run_text("a = 1\nb = [\"x\"]\n", opts).unwrap(),
        "{\n    \"a\": 1,\n    \"b\": [\n        \"x\"\n    ]\n}\n"
    );
    let opts = RunOptions {
        disable_none: true,
        sort_keys: true,
        show_hidden: true,
        ..Default::default()
    };
    assert_eq!(
        run_text("z = 1\na = None\n_h = 2\n", opts).unwrap(),
        "_h: 2\nz: 1\n"
    );
}

#[test]
fn overrides_apply_before_evaluation() {
    let src = "schema P:\n    first: str\n    last: str\n    full = first + \" \" + last\np = P {first = \"a\", last = \"b\"}\n";
    let opts = RunOptions {
        overrides: vec!["p.first=\"x\"".into()],
        ..Default::default()
    };
    assert_eq!(
        run_text(src, opts).unwrap(),
        "p:\n  first: x\n  last: b\n  full: x b\n"
    );
}

#[test]
fn imports_across_packages_with_kcl_mod() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "kcl.mod",
        "[package]\nname = \"demo\"\n\n[profile]\nentries = [\"main.k\"]\n",
    );
    write(
        dir.path(),
        "lib/defs.k",
        "schema Svc:\n    port: int = 80\nDEFAULT = 8080\n",
    );
    write(dir.path(), "lib/more.k", "double = lambda x { x * 2 }\n");
    write(
        dir.path(),
        "main.k",
        "import lib\ns = lib.Svc {port = lib.double(lib.DEFAULT)}\n",
    );
    let opts = RunOptions {
        work_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    // no files: the kcl.mod profile entries are run
    let out = run_full(&[], &opts).unwrap();
    assert_eq!(out.text, "s:\n  port: 16160\n");
}

#[test]
fn several_files_form_one_package() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.k",
        "schema S:\n    x: int\n    y?: int\nv: S {x = 1}\n",
    );
    let b = write(dir.path(), "b.k", "v: S {y = 2}\n");
    let opts = RunOptions {
        work_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    assert_eq!(
        run_full(&[a, b], &opts).unwrap().text,
        "v:\n  x: 1\n  'y': 2\n"
    );
}

struct Cmdb;

impl PluginHook for Cmdb {
    fn call(
        &self,
        module: &str,
        function: &str,
        args: &[serde_json::Value],
        _kwargs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<serde_json::Value, String> {
        match (module, function) {
            ("cmdb", "lookup") => Ok(serde_json::json!({"host": args[0], "cluster": "c1"})),
            _ => Err(format!("unknown function {module}.{function}")),
        }
    }
}

#[test]
fn plugin_calls_go_to_the_hook() {
    let src = "import kcl_plugin.cmdb\nr = cmdb.lookup(\"web-1\")\n";
    let opts = RunOptions {
        plugin: Some(Rc::new(Cmdb)),
        ..Default::default()
    };
    assert_eq!(
        run_text(src, opts).unwrap(),
        "r:\n  host: web-1\n  cluster: c1\n"
    );
    let err = run_text(src, RunOptions::default()).unwrap_err();
    assert!(err.contains("kcl_plugin.cmdb"), "{err}");
}

#[test]
fn deep_recursion_is_an_error_not_a_crash() {
    let err = run_text(
        "f = lambda x { f(x + 1) }\na = f(0)\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(err.contains("maximum recursion depth exceeded"), "{err}");
    let err = run_text(
        "schema A:\n    b: A = A {}\na = A {}\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(err.contains("maximum recursion depth exceeded"), "{err}");
}

#[test]
fn int_overflow_is_an_error() {
    let err = run_text("a = 9223372036854775807 + 1\n", RunOptions::default()).unwrap_err();
    assert!(err.contains("A 64 bit integer overflow"), "{err}");
}

#[test]
fn override_file_rewrites_source() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "main.k",
        "app = {\n    image = \"nginx:1\"\n}\n",
    );
    assert!(kusion_kcl::override_file(&f, &["app.image=\"nginx:2\"".into()]).unwrap());
    let opts = RunOptions {
        work_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    assert_eq!(
        run_full(&[f], &opts).unwrap().text,
        "app:\n  image: nginx:2\n"
    );
}

#[test]
fn kcl_run_binary_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "ok.k", "a = 1\n");
    write(dir.path(), "bad.k", "a = b\n");
    let bin = env!("CARGO_BIN_EXE_kcl");
    let ok = Command::new(bin)
        .args(["run", "ok.k"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(ok.status.success());
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "a: 1\n");
    let bad = Command::new(bin)
        .args(["run", "bad.k"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("name 'b' is not defined") && err.contains("bad.k:1:5"),
        "{err}"
    );
    let out = Command::new(bin)
        .args(["run", "ok.k", "-o", "out.yaml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.yaml")).unwrap(),
        "a: 1\n"
    );
}

/// A dict merged into an attribute holding a schema instance rebuilds that instance: it stays
/// an instance of its schema, keeps its defaults, recomputes derived attributes and runs its
/// checks (upstream's behaviour; outputs recorded from kcl-lib 0.12 in tests/oracle_regressions).
#[test]
fn dict_merged_into_nested_instance_is_checked() {
    let schemas = "schema A:\n    x: int = 1\n    y: int = x * 2\n    check:\n        x > 0, \"x must be positive\"\n\nschema B:\n    a: A = A {}\n    al: [A] = [A {}]\n";
    let out = run_ok(&format!(
        "{schemas}b = B {{a: {{x = 3}}}}\nc = B {{}} | {{al += [{{x = 4}}]}}\nt = typeof(c.al[1])\n"
    ));
    assert_eq!(
        out,
        "b:\n  a:\n    x: 3\n    'y': 6\n  al:\n  - x: 1\n    'y': 2\nc:\n  a:\n    x: 1\n    'y': 2\n  al:\n  - x: 1\n    'y': 2\n  - x: 4\n    'y': 8\nt: A\n"
    );
    for prog in [
        "b = B {a: {x = -1}}\n",
        "b = B {a = {x = -1}}\n",
        "b = B {a: A {x = 2}}\nc = b | {a: {x = -3}}\n",
        "b = B {al: [{x = -5}]}\n",
    ] {
        let err = run_text(&format!("{schemas}{prog}"), RunOptions::default()).expect_err(prog);
        assert!(err.contains("Instance check failed"), "{prog}: {err}");
        assert!(
            err.contains("Check failed on the condition: x must be positive"),
            "{prog}: {err}"
        );
    }
}

/// Assigning an attribute of a schema instance (`inst.a = v`) rebuilds it: derived attributes
/// follow and the checks run again (upstream's unification/fail_2).
#[test]
fn attribute_assignment_rebuilds_the_instance() {
    let schema = "schema C:\n    age?: int\n    dbl = (age or 0) * 2\n    check:\n        age > 0 if age\n\n_c = C {age: 18}\n";
    assert_eq!(
        run_ok(&format!("{schema}_c.age = 5\nc = _c\n")),
        "c:\n  age: 5\n  dbl: 10\n"
    );
    let err = run_text(
        &format!("{schema}_c.age = -1\nc = _c\n"),
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(err.contains("Instance check failed"), "{err}");
}

/// A comprehension variable written as a config key stands for its value; a non-string value
/// is an error (upstream's datatype/dict/indexing_in_comprehension_fail_0).
#[test]
fn loop_variables_as_config_keys() {
    assert_eq!(
        run_ok("a = [{s: 1} for s in [\"x\"]]\nf = lambda k {\n    {k: 1}\n}\nb = f(\"y\")\n"),
        "a:\n- x: 1\nb:\n  k: 1\n"
    );
    let err = run_text(
        "schema L:\n    s: str\na = [L {s: \"q\"} for s in [{n = 1}]]\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.contains("A attribute must be string type, got '{str:int}'"),
        "{err}"
    );
}

/// An index signature keyed by string literals admits only those keys.
#[test]
fn index_signature_literal_keys() {
    let schema = "type _k = \"web\" | \"worker\"\nschema P:\n    [_k]: int\n";
    assert_eq!(
        run_ok(&format!("{schema}p = P {{web = 1, worker: 2}}\n")),
        "p:\n  web: 1\n  worker: 2\n"
    );
    let err = run_text(
        &format!("{schema}p = P {{wirker: 2}}\n"),
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.contains("Cannot add member 'wirker' to schema 'P', did you mean '[\"worker\"]'?"),
        "{err}"
    );
}

/// `reduce(function, iterable, initial)`; its callback's parameter types are checked at run
/// time with upstream's wording.
#[test]
fn reduce_folds_and_checks_callback_types() {
    assert_eq!(
        run_ok("r = reduce(lambda acc, x { acc + x }, [1, 2, 3], 10)\n"),
        "r: 16\n"
    );
    let err = run_text(
        "r = reduce(lambda acc: int, x: int -> int { acc + x }, [\"s\"], 0)\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(err.contains("expect int, got str"), "{err}");
}

/// `sum` over a comprehension and `len` of a `map` give the builtins' results (they are
/// computed without the temporary list).
#[test]
fn sum_and_len_over_comprehensions() {
    assert_eq!(
        run_ok(
            "a = sum([i * i for i in range(10)])\nb = sum([x for x in [1.5, 2]])\nc = len(map k, v in {a = 1, b = 2} { v })\nd = sum([[i] for i in range(2)], [])\n"
        ),
        "a: 285\nb: 3.5\nc: 2\nd:\n- 0\n- 1\n"
    );
    let err = run_text(
        "x = sum([\"a\" for i in range(2)])\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.contains("unsupported operand type(s) for +: 'int' and 'str'"),
        "{err}"
    );
}

/// File errors name paths as the program wrote them (upstream's `kcl run` golden:
/// `Failed to copy from 'source.txt' to 'destination.txt': ...`), not joined to the folder.
#[test]
fn file_errors_name_paths_as_written() {
    let cases = [
        (
            "import file\nfile.cp(\"source.txt\", \"destination.txt\")\n",
            "Failed to copy from 'source.txt' to 'destination.txt': ",
        ),
        (
            "import file\nfile.mv(\"a.txt\", \"b.txt\")\n",
            "Failed to move 'a.txt' to 'b.txt': ",
        ),
        (
            "import file\na = file.read(\"nofile.txt\")\n",
            "failed to access the file 'nofile.txt': ",
        ),
        (
            "import file\na = file.size(\"nofile.txt\")\n",
            "failed to get size of 'nofile.txt': ",
        ),
        (
            "import file\nfile.delete(\"nofile.txt\")\n",
            "failed to delete 'nofile.txt': ",
        ),
        (
            "import file\nfile.write(\"nodir/a\", \"x\")\n",
            "Failed to create file 'nodir/a': ",
        ),
    ];
    for (src, want) in cases {
        let e = run_text(src, RunOptions::default()).expect_err(src);
        assert!(e.contains(want), "{src}: expected {want:?} in\n{e}");
    }
}

/// `option(type="str")` keeps a `-D` value as written, as upstream's `kcl run` does (its grammar
/// case option/scientific_notation_str; kcl-lib's API reads `12e1` as 120 instead).
#[test]
fn option_str_keeps_text() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "main.k",
        "a = option(\"a\", type=\"str\")\nb = option(\"b\", type=\"int\")\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_kcl"))
        .args(["run", f.to_str().unwrap(), "-D", "a=12e1", "-D", "b=42"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a: '12e1'\nb: 42\n");
}

/// Upstream reads the value of an unpacked dict comprehension (`{**{k: {...} for k in ...}}`)
/// against the dict's value type: a schema's attribute of the wrong type is a static error
/// there (kept as a test here: a regression case would redraw the differential sample).
#[test]
fn unpacked_dict_comprehension_value_checked_against_schema() {
    let err = run_text(
        "schema S:\n    a: int = 1\ny: {str:S} = {**{k: {a = \"x\"} for k in [\"x\"]}}\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(err.contains("TypeError"), "{err}");
    assert!(err.contains("expected int, got str(x)"), "{err}");
    let ok = run_ok("schema S:\n    a: int = 1\ny: {str:S} = {**{k: {a = 2} for k in [\"x\"]}}\n");
    assert!(ok.contains("a: 2"), "{ok}");
}

#[test]
fn regex_split_that_would_never_end_is_an_error() {
    // upstream searches again from an empty match's end and so loops forever without a
    // maxsplit; with one it stops at that many pieces
    let e = run_text(
        "import regex\nx = regex.split(\"xxabc\", \"x*\")\n",
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(e.contains("matches the empty string at position 2"), "{e}");
    assert_eq!(
        run_ok("import regex\nx = regex.split(\"a,b,c\", \",\")\n"),
        "x:\n- a\n- b\n- c\n"
    );
    assert_eq!(
        run_ok("import regex\nx = regex.split(\"xxabc\", \"x*\", 3)\n"),
        "x:\n- ''\n- ''\n- ''\n"
    );
}
