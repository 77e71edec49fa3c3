//! Hostile inputs: deep nesting, long chains and garbage must give errors, never a panic,
//! hang or stack overflow (these run on the default 2 MiB test-thread stack, debug build).

use kusion_kcl::format_source;
use kusion_kcl::parse_unregistered;

fn no_panic(src: &str) -> usize {
    let (_, errors) = parse_unregistered(src);
    errors.len()
}

#[test]
fn deep_nesting_is_rejected_cleanly() {
    for (open, close) in [
        ("(", ")"),
        ("[", "]"),
        ("{a: ", "}"),
        ("f(", ")"),
        ("lambda {", "}"),
    ] {
        let src = format!("x = {}1{}\n", open.repeat(5000), close.repeat(5000));
        assert!(no_panic(&src) > 0, "{open}: deep nesting must be reported");
    }
    // Upstream reads `not not` as `not` applied to a name `not` followed by another statement,
    // so a chain of `not` is many short statements, not deep nesting: it must simply not crash.
    let src = format!("x = {}1\n", "not ".repeat(5000));
    no_panic(&src);
    let src = format!("x = {}1\n", "-".repeat(5000));
    assert!(no_panic(&src) > 0);
    let mut nested_if = String::new();
    for i in 0..500 {
        nested_if.push_str(&" ".repeat(i * 4));
        nested_if.push_str("if a:\n");
    }
    assert!(no_panic(&nested_if) > 0);
}

#[test]
fn moderate_nesting_parses_and_formats() {
    let src = format!("x = {}1{}\n", "[".repeat(40), "]".repeat(40));
    assert_eq!(no_panic(&src), 0);
    let out = format_source("nest.k", &src).unwrap();
    assert_eq!(out, src);
}

#[test]
fn long_flat_sequences_are_fine() {
    let items: Vec<String> = (0..200_000).map(|i| i.to_string()).collect();
    let src = format!("x = [{}]\n", items.join(", "));
    assert_eq!(no_panic(&src), 0);
    let src = format!("x = {}\n", vec!["a"; 900].join(" + "));
    assert_eq!(no_panic(&src), 0);
}

#[test]
fn garbage_does_not_panic() {
    let samples = [
        "\u{0}\u{1}\u{2}",
        "\"unterminated",
        "'''never closed",
        "x = \"${\"",
        "x = \"${a\"",
        "x = \"${}\"",
        "schema",
        "schema A[",
        "@",
        "import",
        "import .",
        "a[1:2:3:4]",
        "lambda",
        "all x in",
        "{**}",
        "x = 1Ki2",
        "x = 99999999999999999999999",
        "\tif a:\n  b\n\tc",
        "a ?. b",
        "$",
        "r'\\",
        "x = {if a: b = 1 else: c = 2}",
        ")))]]]}}}",
    ];
    for s in samples {
        no_panic(s);
        let _ = format_source("g.k", s);
    }
}

/// Every `Ok` parse is free of error placeholders.
#[test]
fn empty_subscript_is_an_error() {
    let (_, errors) = parse_unregistered("x = a[]\n");
    assert_eq!(errors.len(), 1);
    // (upstream's parser takes the `]` and wants the index after it)
    assert_eq!(errors[0].message(), "expected expression got newline");
}
