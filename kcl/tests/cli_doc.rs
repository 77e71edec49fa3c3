//! `kcl doc generate` through the binary, on the Konfig models: upstream's page layout, the
//! docstrings' attribute descriptions, defaults, checks, and links that resolve.

use std::path::Path;
use std::process::{Command, Output};

fn kcl(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kcl"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn models() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/konfig/models")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn markdown_of_the_konfig_models() {
    let d = tempfile::tempdir().unwrap();
    let o = kcl(
        d.path(),
        &[
            "doc",
            "generate",
            "--file-path",
            &models(),
            "--target",
            "out",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = d.path().join("out");
    let root = std::fs::read_to_string(out.join("index.md")).unwrap();
    assert!(root.starts_with("# Package models\n\n## Index\n\n- [backend](backend/index.md)\n"));
    assert!(
        root.contains("  - [Server](frontend/index.md#schema-Server)\n"),
        "{root}"
    );
    let fe = std::fs::read_to_string(out.join("frontend/index.md")).unwrap();
    // upstream's schema layout: heading, description, attributes with *required*, type
    assert!(fe.contains("### Schema Port\n\nA port the container listens on.\n\n#### Attributes\n\n**containerPort** *required*\n\n`int`\n\nThe port number.\n"), "{fe}");
    // defaults, links to documented schemas, parents, checks, deprecation-free, examples
    assert!(fe.contains("**protocol** *required*\n\n`\"TCP\" | \"UDP\" | \"SCTP\"`\n\nDefault: `\"TCP\"`\n\nTCP, UDP or SCTP.\n"), "{fe}");
    assert!(fe.contains("Type: [[Port](#schema-Port)]"), "{fe}");
    assert!(
        fe.contains("### Schema Server\n\nInherits [Workload](#schema-Workload).\n"),
        "{fe}"
    );
    assert!(
        fe.contains(
            "- `0 <= replicas <= 100, \"replicas must be between 0 and 100, got ${replicas}\"`"
        ),
        "{fe}"
    );
    // every relative link points at an existing page, and every anchor at a schema heading
    for (page, text) in [("index.md", &root), ("frontend/index.md", &fe)] {
        let base = out.join(page).parent().unwrap().to_path_buf();
        // links outside code spans
        let prose: String = text.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        for link in prose
            .split("](")
            .skip(1)
            .map(|s| &s[..s.find(')').unwrap()])
        {
            let (file, anchor) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                out.join(page)
            } else {
                base.join(file)
            };
            let t = std::fs::read_to_string(&target)
                .unwrap_or_else(|_| panic!("{page}: broken link {link}"));
            if let Some(name) = anchor.strip_prefix("schema-") {
                assert!(
                    t.contains(&format!("### Schema {name}\n"))
                        || t.contains(&format!("### Mixin {name}\n")),
                    "{page}: no schema for {link}"
                );
            }
        }
    }
}

#[test]
fn html_pages() {
    let d = tempfile::tempdir().unwrap();
    let o = kcl(
        d.path(),
        &[
            "doc",
            "generate",
            "--file-path",
            &models(),
            "--target",
            "out",
            "--format",
            "html",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fe = std::fs::read_to_string(d.path().join("out/frontend/index.html")).unwrap();
    assert!(fe.starts_with("<!DOCTYPE html>"));
    assert!(
        fe.contains("<h3 id=\"schema-Port\">Schema Port</h3>"),
        "{fe}"
    );
    assert!(fe.contains("<a href=\"#schema-Port\">Port</a>"), "{fe}");
    assert!(
        fe.contains("<strong>containerPort</strong> <em>required</em>"),
        "{fe}"
    );
    let root = std::fs::read_to_string(d.path().join("out/index.html")).unwrap();
    assert!(
        root.contains("<a href=\"frontend/index.html#schema-Server\">Server</a>"),
        "{root}"
    );
}

#[test]
fn examples_section_and_deprecated_attributes() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("pkg")).unwrap();
    std::fs::write(
        d.path().join("pkg/app.k"),
        "\"\"\"\nApps.\n\"\"\"\nschema App:\n    \"\"\"\n    An app.\n\n    Attributes\n    ----------\n    name : str, required\n        Its name.\n\n    Examples\n    --------\n    a = App {name = \"x\"}\n    \"\"\"\n    name: str\n    @deprecated(version=\"2\", reason=\"use name\")\n    title?: str\n",
    )
    .unwrap();
    let o = kcl(
        d.path(),
        &["doc", "generate", "--file-path", "pkg", "--target", "out"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = std::fs::read_to_string(d.path().join("out/index.md")).unwrap();
    assert!(
        t.starts_with("# Package pkg\n\n## Overview\n\nApps.\n"),
        "{t}"
    );
    assert!(
        t.contains("#### Examples\n\n```kcl\na = App {name = \"x\"}\n```\n"),
        "{t}"
    );
    assert!(
        t.contains("**title**\n\n`str`\n\n*Deprecated*: since version 2, use name\n"),
        "{t}"
    );
    let o = kcl(
        d.path(),
        &[
            "doc",
            "generate",
            "--file-path",
            "pkg",
            "--target",
            "out2",
            "--ignore-deprecated",
        ],
    );
    assert!(o.status.success());
    let t = std::fs::read_to_string(d.path().join("out2/index.md")).unwrap();
    assert!(!t.contains("**title**"), "{t}");
}
