//! Parser tests on small in-repo fixtures.

use kusion_kcl::ast::*;
use kusion_kcl::parse_source;

fn parse_ok(src: &str) -> Module {
    match parse_source("test.k", src) {
        Ok(m) => m,
        Err(d) => panic!("unexpected errors:\n{}", d.render()),
    }
}

fn first_error(src: &str) -> String {
    match parse_source("/tmp/case/main.k", src) {
        Ok(_) => panic!("expected a syntax error for {src:?}"),
        Err(d) => d.0[0].message().to_string(),
    }
}

#[test]
fn assignments_and_types() {
    let m = parse_ok("a = 1\nb: int = 2\nc = d = \"x\"\ne += [1]\n_f.g[0].h = 3\n");
    assert_eq!(m.body.len(), 5);
    match &m.body[1].kind {
        StmtKind::Assign(a) => {
            assert_eq!(a.targets[0].name.sym.as_str(), "b");
            assert!(matches!(
                a.ty.as_ref().unwrap().kind,
                TypeKind::Basic(BasicType::Int)
            ));
        }
        k => panic!("{k:?}"),
    }
    match &m.body[2].kind {
        StmtKind::Assign(a) => assert_eq!(a.targets.len(), 2),
        k => panic!("{k:?}"),
    }
    match &m.body[4].kind {
        StmtKind::Assign(a) => assert_eq!(a.targets[0].path.len(), 3),
        k => panic!("{k:?}"),
    }
}

#[test]
fn schema_definition() {
    let src = r#"
@deprecated(version="1.1")
schema Person[a, b = 1](Base) for Proto:
    """A person."""
    mixin [NameMixin, pkg.Other]
    name?: str = "x"
    "quoted-key": int
    labels: {str:str} = {}
    kind: "a" | "b" = "a"
    [key: str]: any
    if a:
        extra: int = 1

    check:
        len(name) > 0 if name, "name must not be empty"
        b >= 0
"#;
    let m = parse_ok(src);
    let StmtKind::Schema(s) = &m.body[0].kind else {
        panic!()
    };
    assert_eq!(s.name.sym.as_str(), "Person");
    assert_eq!(s.decorators.len(), 1);
    assert_eq!(s.params.as_ref().unwrap().len(), 2);
    assert_eq!(s.parent.as_ref().unwrap().names[0].sym.as_str(), "Base");
    assert_eq!(s.for_host.as_ref().unwrap().names[0].sym.as_str(), "Proto");
    assert_eq!(s.doc.as_ref().unwrap().value.as_ref(), "A person.");
    assert_eq!(s.mixins.len(), 2);
    assert_eq!(s.checks.len(), 2);
    assert!(s.checks[0].if_cond.is_some() && s.checks[0].msg.is_some());
    assert!(s.index_signature.is_some());
    let attrs: Vec<_> = s
        .body
        .iter()
        .filter_map(|st| match &st.kind {
            StmtKind::SchemaAttr(a) => Some((a.name.sym.as_str(), a.optional, a.quoted)),
            _ => None,
        })
        .collect();
    assert_eq!(
        attrs,
        vec![
            ("name", true, false),
            ("quoted-key", false, true),
            ("labels", false, false),
            ("kind", false, false)
        ]
    );
}

#[test]
fn config_if_blocks_and_entries() {
    let src = "data = Config {\n    name: \"a\"\n    if env == \"prod\":\n        replicas = 3\n        labels.tier += [\"x\"]\n    elif env:\n        replicas = 2\n    else:\n        replicas = 1\n    **base\n    arr[0] = 2\n}\n";
    let m = parse_ok(src);
    let StmtKind::Assign(a) = &m.body[0].kind else {
        panic!()
    };
    let ExprKind::Schema(se) = &a.value.kind else {
        panic!()
    };
    let ExprKind::Config(entries) = &se.config.kind else {
        panic!()
    };
    assert_eq!(entries.len(), 4);
    let ConfigEntryKind::If(ci) = &entries[1].kind else {
        panic!()
    };
    assert_eq!(ci.body.len(), 2);
    assert!(matches!(ci.orelse[0].kind, ConfigEntryKind::If(_)));
    assert!(matches!(entries[2].kind, ConfigEntryKind::Unpack { .. }));
}

#[test]
fn expressions() {
    let m = parse_ok(
        "a = [x * 2 for x in xs if x > 1]\nb = {k: v for k, v in d}\nc = all x in xs { x > 0 }\nd = lambda x: int, y = 1 -> int { x + y }\ne = s?.a?[0][1:2:3]\nf = 1 if c else 2\ng = \"v${a + 1}-${b: #json}\"\nh = 1Ki + 2.5e3\ni = not a in b and c is not None\nj = x as Person\nk = [*a, if b: 1 else: 2]\n",
    );
    assert_eq!(m.body.len(), 11);
    let val = |i: usize| match &m.body[i].kind {
        StmtKind::Assign(a) => a.value.kind.clone(),
        k => panic!("{k:?}"),
    };
    assert!(matches!(val(0), ExprKind::ListComp(_)));
    assert!(matches!(val(1), ExprKind::DictComp(_)));
    assert!(matches!(val(2), ExprKind::Quant(_)));
    assert!(matches!(val(3), ExprKind::Lambda(_)));
    assert!(matches!(val(4), ExprKind::Slice(_)));
    assert!(matches!(val(5), ExprKind::If { .. }));
    match val(6) {
        ExprKind::JoinedStr(parts) => {
            assert_eq!(parts.len(), 4);
            assert!(
                matches!(&parts[3], StrPart::Interp { spec: Some(s), .. } if s.as_ref() == "#json")
            );
        }
        k => panic!("{k:?}"),
    }
    match val(7) {
        ExprKind::Binary { left, .. } => {
            assert!(matches!(
                left.kind,
                ExprKind::NumberUnit {
                    value: 1,
                    suffix: NumberSuffix::Ki
                }
            ))
        }
        k => panic!("{k:?}"),
    }
    assert!(matches!(val(9), ExprKind::As { .. }));
    assert!(matches!(val(10), ExprKind::List(ref v) if v.len() == 2));
}

#[test]
fn imports_rules_and_aliases() {
    let m = parse_ok(
        "import a.b.c as d\nimport ..pkg\ntype T = int | \"x\"\nrule R(Base) for P:\n    a > 1\n    b if c\n",
    );
    let StmtKind::Import(i) = &m.body[0].kind else {
        panic!()
    };
    assert_eq!(i.path.as_ref(), "a.b.c");
    assert_eq!(i.local_name().unwrap().as_str(), "d");
    let StmtKind::Import(i) = &m.body[1].kind else {
        panic!()
    };
    assert_eq!(i.level, 2);
    assert!(matches!(m.body[2].kind, StmtKind::TypeAlias(_)));
    let StmtKind::Rule(r) = &m.body[3].kind else {
        panic!()
    };
    assert_eq!(r.checks.len(), 2);
}

#[test]
fn syntax_errors_match_upstream_messages() {
    assert_eq!(
        first_error("a==\n"),
        "expected one of [\"identifier\", \"literal\", \"(\", \"[\", \"{\"] got newline"
    );
    assert_eq!(first_error("a, b = 1, 2\n"), "unexpected token ','");
    assert_eq!(
        first_error("x = [i for i() in data]\n"),
        "expected one of [\"in\"] got ("
    );
    assert_eq!(
        first_error("p = P(a=1, 2) {}\n"),
        "positional argument follows keyword argument"
    );
    assert_eq!(
        first_error("schema A[a = 1, b]:\n    x: int\n"),
        "non-default argument follows default argument"
    );
    assert_eq!(
        first_error("_a + 1 = 2\n"),
        "'BinaryExpression' is an illegal expression for assignment"
    );
    assert_eq!(
        first_error("schema P:\n    name: str\n   age: int\n"),
        "invalid indentation with 3 spaces, try to align indents by adding or removing spaces"
    );
    assert_eq!(
        first_error("if a:\n    b = 2\n\tc = 3\n"),
        "inconsistent use of tabs and spaces in indentation"
    );
    assert_eq!(
        first_error("b = \"${b = a + 1}\"\n"),
        "invalid string interpolation expression: 'b = a + 1'"
    );
    assert_eq!(
        first_error("import .a..b\n"),
        "expected one of [\"identifier\"] got ."
    );
}

#[test]
fn diagnostics_render_like_upstream() {
    let err = parse_source("/case/main.k", "a==\n").unwrap_err();
    let text = err.0[0].render();
    assert_eq!(
        text,
        "error[E1001]: InvalidSyntax\n --> /case/main.k:1:3\n  |\n1 | a==\n  |   ^ expected one of [\"identifier\", \"literal\", \"(\", \"[\", \"{\"] got newline\n  |\n"
    );
}

#[test]
fn several_errors_are_reported() {
    let err = parse_source("m.k", "a = (\nb = 1 +\nc = ]\n").unwrap_err();
    assert!(err.len() >= 2, "{}", err.render());
}

#[test]
fn spans_resolve_lazily() {
    let m = parse_ok("a = 1\nbb = 2\n");
    let loc = m.body[1].span.loc();
    assert_eq!((loc.line, loc.col), (2, 1));
    assert_eq!(loc.file.as_ref(), "test.k");
}
