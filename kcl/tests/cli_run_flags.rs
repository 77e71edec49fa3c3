//! `kcl run`'s upstream-compatible surface through the binary: output formats (TOML in the
//! form of upstream's kcl-go encoder), `kcl FILE` as `kcl run FILE`, `kcl version`, and the
//! upstream flags that are accepted or refused by name.

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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const APP: &str = r#"name = "app"
replicas = 3
ratio = 0.5
labels = {app = "x", "a.b" = "y"}
containers = [{name = "c", ports = [80, 443]}]
meta = {inner = {deep = True}, n = 1}
"#;

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (n, t) in files {
        std::fs::write(d.path().join(n), t).unwrap();
    }
    d
}

#[test]
fn toml_in_key_order_is_upstreams_encoder() {
    // tables come last here, so upstream's ordered encoder accepts it
    let d = dir_with(&[(
        "a.k",
        "name = \"app\"\nratio = 0.5\nbig = 1e20\nports = [80, 443]\nc = [{name = \"c\", env = [{k = \"A\"}]}]\nlabels = {app = \"x\", \"a.b\" = \"y\"}\nmeta = {n = 1, inner = {deep = True}}\n",
    )]);
    let o = kcl(d.path(), &["run", "a.k", "--format", "toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "name = \"app\"\nratio = 0.5\nbig = 100000000000000000000.0\nports = [80, 443]\n\
         c = [{name = \"c\", env = [{k = \"A\"}]}]\n\n[labels]\n  app = \"x\"\n  \"a.b\" = \"y\"\n\n\
         [meta]\n  n = 1\n  [meta.inner]\n    deep = true\n\n"
    );
}

#[test]
fn toml_value_after_table_fails_as_upstream_unless_tables_last() {
    let d = dir_with(&[("a.k", APP)]);
    let o = kcl(d.path(), &["run", "a.k", "--format", "toml"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "unsupported to define 'containers' after a table, ref: https://toml.io/en/v1.0.0#table\n"
    );
    let o = kcl(d.path(), &["a.k", "--format", "toml", "--toml_tables_last"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "name = \"app\"\nreplicas = 3\nratio = 0.5\ncontainers = [{name = \"c\", ports = [80, 443]}]\n\n\
         [labels]\n  app = \"x\"\n  \"a.b\" = \"y\"\n\n[meta]\n  n = 1\n  [meta.inner]\n    deep = true\n\n"
    );
}

#[test]
fn toml_sorted_keys_is_upstreams_go_map_form() {
    let d = dir_with(&[("a.k", APP)]);
    let o = kcl(d.path(), &["run", "a.k", "--format", "toml", "-k"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "name = \"app\"\nratio = 0.5\nreplicas = 3\n\n[[containers]]\n  name = \"c\"\n  ports = [80, 443]\n\n\
         [labels]\n  \"a.b\" = \"y\"\n  app = \"x\"\n\n[meta]\n  n = 1\n  [meta.inner]\n    deep = true\n\n"
    );
}

#[test]
fn toml_none_values() {
    let d = dir_with(&[
        ("n.k", "a = 1\nb = {c = None, d = 2}\n"),
        ("l.k", "l = [1, None]\n"),
    ]);
    // upstream's Go encoder crashes on a None dict value; here it is an error naming the key
    let o = kcl(d.path(), &["run", "n.k", "--format", "toml"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("'b.c'"), "{}", stderr(&o));
    assert!(stderr(&o).contains("-n/--disable_none"), "{}", stderr(&o));
    // -n drops None values, as upstream's YAML (and so its TOML) does
    let o = kcl(d.path(), &["run", "n.k", "--format", "toml", "-n"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "a = 1\n\n[b]\n  d = 2\n\n");
    // with sorted keys upstream reads a Go map, whose encoder skips None values
    let o = kcl(d.path(), &["run", "n.k", "--format", "toml", "-k"]);
    assert_eq!(stdout(&o), "a = 1\n\n[b]\n  d = 2\n\n");
    // a None list item is upstream's encoder error either way
    for extra in [&[][..], &["-k"]] {
        let mut args = vec!["run", "l.k", "--format", "toml"];
        args.extend_from_slice(extra);
        let o = kcl(d.path(), &args);
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(stderr(&o), "toml: cannot encode array with nil element\n");
    }
    let o = kcl(d.path(), &["run", "l.k", "--format", "toml", "-n"]);
    assert_eq!(stdout(&o), "l = [1]\n\n");
}

#[test]
fn toml_to_output_file_and_empty_result() {
    let d = dir_with(&[("a.k", "x = 1\n"), ("e.k", "_x = 1\n")]);
    let o = kcl(
        d.path(),
        &["run", "a.k", "--format", "toml", "-o", "out.toml"],
    );
    assert!(o.status.success());
    assert_eq!(
        std::fs::read_to_string(d.path().join("out.toml")).unwrap(),
        "x = 1\n\n"
    );
    let o = kcl(d.path(), &["run", "e.k", "--format", "toml"]);
    assert_eq!(stdout(&o), "\n");
}

#[test]
fn format_is_case_insensitive_and_unknown_is_a_usage_error() {
    let d = dir_with(&[("a.k", "x = 1\n")]);
    let o = kcl(d.path(), &["run", "a.k", "--format", "JSON"]);
    assert_eq!(stdout(&o), "{\n    \"x\": 1\n}\n");
    let o = kcl(d.path(), &["run", "a.k", "--format", "xml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid value 'xml'"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
}

#[test]
fn file_shorthand_runs() {
    let d = dir_with(&[("a.k", "x = option(\"v\")\n")]);
    let o = kcl(d.path(), &["a.k", "-D", "v=2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "x: 2\n");
    let o = kcl(d.path(), &["-D", "v=3", "a.k"]);
    assert_eq!(stdout(&o), "x: 3\n");
    // `kcl` alone prints the help and succeeds, as upstream's root command
    let o = kcl(d.path(), &[]);
    assert!(o.status.success());
    assert!(
        stdout(&o).contains("is `kcl run FILE...`"),
        "{}",
        stdout(&o)
    );
    // a mistyped subcommand stays a subcommand error
    let o = kcl(d.path(), &["rnu"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unrecognized subcommand"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn version_in_upstreams_form() {
    let d = tempfile::tempdir().unwrap();
    let o = kcl(d.path(), &["version"]);
    let v = stdout(&o);
    let line = v.trim_end();
    let parts: Vec<&str> = line.split('-').collect();
    assert_eq!(parts.len(), 3, "{line}");
    assert_eq!(parts[0], env!("CARGO_PKG_VERSION"));
    assert!(["linux", "darwin", "windows"].contains(&parts[1]), "{line}");
    let o = kcl(d.path(), &["--version"]);
    assert_eq!(stdout(&o), format!("kcl version {line}\n"));
}

#[test]
fn upstream_flags_accepted_or_refused_by_name() {
    let d = dir_with(&[("a.k", "print(\"hi\")\nx = 1\n")]);
    let o = kcl(d.path(), &["run", "a.k", "-q", "--no_style"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "hi\nx: 1\n");
    // vendor mode: the package's dependencies from vendor/ (none here)
    for flag in ["-V", "--vendor"] {
        let o = kcl(d.path(), &["run", "a.k", flag]);
        assert!(o.status.success(), "{flag}: {}", stderr(&o));
        assert_eq!(stdout(&o), "hi\nx: 1\n");
    }
    for flag in [&["-t", "v1"][..], &["--tag", "v1"]] {
        let mut args = vec!["run", "a.k"];
        args.extend_from_slice(flag);
        let o = kcl(d.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{flag:?}");
        assert!(
            stderr(&o).contains("is not supported"),
            "{flag:?}: {}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty());
    }
}

#[test]
fn instance_note_only_when_asked_for() {
    // upstream reports the attribute's declaration alone; --note_instances adds where the
    // instance is made
    let d = dir_with(&[(
        "main.k",
        "schema A:\n    a: int\nu: any = \"s\"\nx = A {a = u}\n",
    )]);
    let plain = kcl(d.path(), &["run", "main.k"]);
    assert_eq!(plain.status.code(), Some(1));
    assert!(
        stderr(&plain).contains("expect int, got str"),
        "{}",
        stderr(&plain)
    );
    assert!(
        !stderr(&plain).contains("the instance is made at"),
        "{}",
        stderr(&plain)
    );
    let noted = kcl(d.path(), &["run", "main.k", "--note_instances"]);
    assert_eq!(noted.status.code(), Some(1));
    let err = stderr(&noted);
    assert!(err.contains("note: the instance is made at"), "{err}");
    assert!(err.contains("main.k:4:5"), "{err}");
}

#[test]
fn print_output_is_kept_when_the_run_fails() {
    // upstream's command line writes print() output as the program runs: a failure after it
    // leaves it on stdout, the error on stderr
    let d = dir_with(&[("a.k", "print(\"before\")\nassert False, \"stop\"\n")]);
    let o = kcl(d.path(), &["run", "a.k"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "before\n");
    assert!(stderr(&o).contains("stop"), "{}", stderr(&o));
}
