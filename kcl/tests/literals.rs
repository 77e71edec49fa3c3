//! Literal decoding: numbers with units, string forms, escapes and interpolation.

use kusion_kcl::ast::*;
use kusion_kcl::parse_source;

fn value(src: &str) -> ExprKind {
    let m = parse_source("lit.k", &format!("x = {src}\n"))
        .unwrap_or_else(|d| panic!("{src}: {}", d.render()));
    match &m.body[0].kind {
        StmtKind::Assign(a) => a.value.kind.clone(),
        k => panic!("{k:?}"),
    }
}

fn string(src: &str) -> String {
    match value(src) {
        ExprKind::Str(s) => s.to_string(),
        k => panic!("{src}: {k:?}"),
    }
}

#[test]
fn numbers() {
    assert_eq!(value("42"), ExprKind::Int(42));
    assert_eq!(value("0x1F"), ExprKind::Int(31));
    assert_eq!(value("0o17"), ExprKind::Int(15));
    assert_eq!(value("0b101"), ExprKind::Int(5));
    assert_eq!(value("1_000"), ExprKind::Int(1000));
    assert_eq!(value("1.5"), ExprKind::Float(1.5));
    assert_eq!(value("1e3"), ExprKind::Float(1000.0));
    assert_eq!(value("2.5E-2"), ExprKind::Float(0.025));
    for (s, suffix) in [
        ("1Ki", NumberSuffix::Ki),
        ("2M", NumberSuffix::MUpper),
        ("3m", NumberSuffix::M),
        ("4Gi", NumberSuffix::Gi),
        ("5n", NumberSuffix::N),
    ] {
        match value(s) {
            ExprKind::NumberUnit { suffix: got, .. } => assert_eq!(got, suffix, "{s}"),
            k => panic!("{s}: {k:?}"),
        }
    }
    assert!(parse_source("n.k", "x = 1Kx\n").is_err());
    assert!(parse_source("n.k", "x = 99999999999999999999\n").is_err());
}

#[test]
fn strings_and_escapes() {
    assert_eq!(string(r#""a\tb\n""#), "a\tb\n");
    assert_eq!(string(r#"'it\'s'"#), "it's");
    assert_eq!(string(r#""\x41\u00e9\101""#), "AéA");
    assert_eq!(string(r#"r"\d+\n""#), "\\d+\\n");
    assert_eq!(string("\"\"\"line1\nline2\"\"\""), "line1\nline2");
    assert_eq!(string("'''a 'quoted' b'''"), "a 'quoted' b");
    assert_eq!(string(r#""unknown \q escape""#), "unknown \\q escape");
    // `\$` escapes interpolation: the text stays literal.
    assert_eq!(string(r#""$\${a}""#), "$${a}");
    assert_eq!(string(r#""$$ $""#), "$$ $");
}

#[test]
fn interpolation_parts_have_spans_in_the_file() {
    let src = "x = \"pre ${name.upper()} mid ${count: #json} end\"\n";
    let m = parse_source("interp.k", src).unwrap();
    let StmtKind::Assign(a) = &m.body[0].kind else {
        panic!()
    };
    let ExprKind::JoinedStr(parts) = &a.value.kind else {
        panic!("{:?}", a.value.kind)
    };
    assert_eq!(parts.len(), 5);
    assert!(matches!(&parts[0], StrPart::Lit(s) if s.as_ref() == "pre "));
    let StrPart::Interp { expr, spec: None } = &parts[1] else {
        panic!()
    };
    assert_eq!(
        &src[expr.span.lo as usize..expr.span.hi as usize],
        "name.upper()"
    );
    let StrPart::Interp {
        spec: Some(spec), ..
    } = &parts[3]
    else {
        panic!()
    };
    assert_eq!(spec.as_ref(), "#json");
    assert!(matches!(&parts[4], StrPart::Lit(s) if s.as_ref() == " end"));
}

#[test]
fn identifiers_keywords_and_constants() {
    assert_eq!(value("True"), ExprKind::Bool(true));
    assert_eq!(value("None"), ExprKind::None);
    assert_eq!(value("Undefined"), ExprKind::Undefined);
    match value("$if") {
        ExprKind::Ident(s) => assert_eq!(s.as_str(), "if"),
        k => panic!("{k:?}"),
    }
    // Contextual words stay usable as names.
    for w in ["schema", "rule", "check", "mixin", "protocol", "type"] {
        match value(w) {
            ExprKind::Ident(s) => assert_eq!(s.as_str(), w),
            k => panic!("{w}: {k:?}"),
        }
    }
    // Quantifier words always start a quantifier, as upstream parses them; `$all` is a name.
    for w in ["all", "any", "map", "filter"] {
        assert!(
            parse_source("lit.k", &format!("x = {w}\n")).is_err(),
            "{w} parsed as a name"
        );
        match value(&format!("${w}")) {
            ExprKind::Ident(s) => assert_eq!(s.as_str(), w),
            k => panic!("{w}: {k:?}"),
        }
    }
}

#[test]
fn multi_label_diagnostic_renders_each_block() {
    use kusion_kcl::diag::{Diagnostic, ErrorKind};
    let m = parse_source("/p/main.k", "a = 1\n\n\n\n\n\n\n\n\na = 2\n").unwrap();
    let d = Diagnostic::error(
        ErrorKind::ImmutableError,
        m.body[1].span,
        "Can not change the value of 'a'",
    )
    .with_label(m.body[0].span, "The variable 'a' is declared here")
    .with_note("change the variable name to '_a' to make it mutable");
    assert_eq!(
        d.render(),
        "error[E1001]: ImmutableError\n  --> /p/main.k:10:1\n   |\n10 | a = 2\n   | ^ Can not change the value of 'a'\n   |\n --> /p/main.k:1:1\n  |\n1 | a = 1\n  | ^ The variable 'a' is declared here\n  |\nnote: change the variable name to '_a' to make it mutable\n"
    );
}

/// Upstream lexes an interpolation's format spec before it rejects a spec without `#`: a number
/// with a suffix no unit has (`.2f`) is reported first, at the number.
#[test]
fn interpolation_spec_number_suffix_is_reported_first() {
    let src = "a = 1.5\nb = \"${a:.2f}\"\n";
    let errs = parse_source("spec.k", src).unwrap_err();
    let first = &errs.0[0].labels[0];
    assert_eq!(first.message, "invalid int binary suffix");
    assert_eq!(&src[first.span.lo as usize..], "2f}\"\n");
    assert!(
        errs.0
            .iter()
            .any(|d| d.labels[0].message == "invalid joined string spec without #")
    );
    // a valid unit suffix and a `#` spec are no such error
    let ok = parse_source("spec2.k", "a = 1\nb = \"${a:2Ki}\"\nc = \"${a: #>5}\"\n");
    let msgs: Vec<String> = ok
        .err()
        .map(|e| e.0.iter().map(|d| d.labels[0].message.clone()).collect())
        .unwrap_or_default();
    assert!(
        !msgs.iter().any(|m| m == "invalid int binary suffix"),
        "{msgs:?}"
    );
}
