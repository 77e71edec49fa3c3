//! Formatter tests: a golden file, idempotency and tree preservation on in-repo fixtures.

use kusion_kcl::parse_source;
use kusion_kcl::{ast_fingerprint, format_source};

const MESSY: &str = include_str!("fixtures/fmt/messy.input");
const GOLDEN: &str = include_str!("fixtures/fmt/messy.golden");

#[test]
fn formats_to_golden() {
    let out = format_source("messy.k", MESSY).expect("fixture parses");
    if out != GOLDEN {
        for (i, (a, b)) in out.lines().zip(GOLDEN.lines()).enumerate() {
            assert_eq!(a, b, "first difference at line {}", i + 1);
        }
        assert_eq!(out, GOLDEN);
    }
}

/// Formatting twice changes nothing, and the tree (spans aside) and comments are kept.
fn check_round_trip(name: &str, src: &str) {
    let before = parse_source(name, src).expect("input parses");
    let out = format_source(name, src).expect("formats");
    let after = parse_source(name, &out)
        .unwrap_or_else(|d| panic!("formatted text does not parse:\n{}\n{out}", d.render()));
    assert_eq!(
        ast_fingerprint(&before),
        ast_fingerprint(&after),
        "tree changed:\n{out}"
    );
    assert_eq!(
        before.comments.len(),
        after.comments.len(),
        "comments lost:\n{out}"
    );
    let again = format_source(name, &out).expect("formats again");
    assert_eq!(out, again, "not idempotent");
}

#[test]
fn round_trip_fixtures() {
    check_round_trip("messy.k", MESSY);
    check_round_trip("golden.k", GOLDEN);
    let samples = [
        "schema A:\n    x: int\n    # trailing comment in body\n\n# top comment\nb = 1\n",
        "a = {\n    # c1\n    k: 1  # c2\n    # c3\n}\n",
        "x = [\n    if a: 1\n    elif b: 2\n    else: 3\n]\n",
        "data = [lambda x, y=(i), z=(b) {\n    x + y + i\n}(i) for i in [1, 2, 3]]\n",
        "f = lambda {\n  config: {str:}\n} -> any {\n    config.key\n}\n",
        "t: \"a\" | \"b\" = \"a\"\ntype X = int | str | [Y] | {str:Z} | (int) -> bool\n",
        "r = a?.b?[0][1::2] + x[::-1]\nc = d.e(f, g=h) if i else j\n",
        "x: Person {\n    a = 1\n}\n@deprecated(\"1.1\")\nschema P[a, b = 1](Q) for Proto:\n    mixin [M1, M2]\n    [...str]: int\n    if a:\n        c: int = 1\n",
        "n = not a and b or c in d and e not in f\nu = 1Ki + 0x1F + 1.5e-3 + 0o17 + 0b1\n",
        "assert all k, v in {a = 1} { v > 0 if k }, \"m\"\nm = map x in xs {x * 2}\nfl = filter x in xs {x > 1}\n",
        // Found by fuzzing: a comment right after a statement's closing bracket, before EOF-ish
        // text, must stay a trailing comment on the second pass too.
        // (arguments starting on the `(` line stay on it, as upstream reads them: this one
        // opens its line)
        "# c\n\nschema P:\n    x: int = 0\n    r = T(\n        inp\n\n    )#ut T\nm = 5\n",
    ];
    for (i, s) in samples.iter().enumerate() {
        check_round_trip(&format!("sample{i}.k"), s);
    }
}

#[test]
fn syntax_errors_are_reported_not_formatted() {
    assert!(format_source("bad.k", "a = (\n").is_err());
}

/// The benchmark's generated config is valid KCL and already in canonical style.
#[test]
fn generated_config_parses_and_is_formatted() {
    let src = kusion_kcl::generate_config(2_000);
    assert!(src.lines().count() >= 2_000);
    check_round_trip("generated.k", &src);
    let out = format_source("generated.k", &src).unwrap();
    if let Some((i, (a, b))) = out
        .lines()
        .zip(src.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
    {
        panic!(
            "generator output not in canonical style at line {}:\n{a}\n{b}",
            i + 1
        );
    }
    assert_eq!(out.len(), src.len());
}
