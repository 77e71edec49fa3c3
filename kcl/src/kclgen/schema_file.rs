//! One KCL file of schemas in upstream's layout: the header, then per schema a raw docstring
//! with an `Attributes` section, the attributes, an optional index signature and `check:`.

use std::fmt::Write;

use super::{HEADER, name};

/// A generated attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct Prop {
    pub name: String,
    /// The type as KCL text.
    pub ty: String,
    pub required: bool,
    /// A KCL literal.
    pub default: Option<String>,
    pub doc: String,
}

/// A generated schema.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schema {
    pub name: String,
    pub doc: String,
    pub props: Vec<Prop>,
    /// `[...str]: T`.
    pub index: Option<String>,
    /// `check:` lines (expressions, already guarded for optional attributes).
    pub checks: Vec<String>,
}

fn doc_lines(out: &mut String, text: &str, indent: &str) {
    // a raw docstring ends at the first `"""`
    let text = text.replace("\"\"\"", "'''");
    for line in text.lines() {
        let line = line.trim_end();
        if !line.is_empty() {
            let _ = write!(out, "{indent}{line}");
        }
        out.push('\n');
    }
}

/// The file for `schemas`, in the given order.
pub fn render(schemas: &[Schema]) -> String {
    let mut s = String::from(HEADER);
    s.push('\n');
    if schemas
        .iter()
        .any(|d| d.checks.iter().any(|c| c.contains("regex.")))
    {
        s.push_str("import regex\n");
    }
    s.push('\n');
    for d in schemas {
        let _ = writeln!(s, "schema {}:", name(&d.name));
        s.push_str("    r\"\"\"\n");
        doc_lines(
            &mut s,
            if d.doc.trim().is_empty() {
                &d.name
            } else {
                &d.doc
            },
            "    ",
        );
        if !d.props.is_empty() {
            s.push_str("\n    Attributes\n    ----------\n");
            for p in &d.props {
                let mut line = format!(
                    "    {} : {}, {}",
                    name(&p.name),
                    p.ty,
                    if p.required { "required" } else { "optional" }
                );
                if let Some(v) = &p.default {
                    let _ = write!(line, ", default is {v}");
                }
                // a raw docstring ends at the first `"""`, which a default's literal may hold
                s.push_str(&line.replace("\"\"\"", "'''"));
                s.push('\n');
                doc_lines(&mut s, &p.doc, "        ");
            }
        }
        s.push_str("    \"\"\"\n\n");
        for p in &d.props {
            let q = if p.required { "" } else { "?" };
            let _ = write!(s, "    {}{q}: {}", name(&p.name), p.ty);
            if let Some(v) = &p.default {
                let _ = write!(s, " = {v}");
            }
            s.push('\n');
        }
        if let Some(t) = &d.index {
            let _ = writeln!(s, "    [...str]: {t}");
        }
        if !d.checks.is_empty() {
            s.push_str("\n    check:\n");
            for c in &d.checks {
                let _ = writeln!(s, "        {c}");
            }
        }
        s.push('\n');
    }
    // upstream's file ends right after a final `check:` block
    if schemas.last().is_some_and(|d| !d.checks.is_empty()) {
        s.pop();
    }
    s
}

/// `aws_s3_bucket` -> `AwsS3Bucket`, `foo-bar.baz` -> `FooBarBaz` (upstream's `ToCamel`).
pub fn camel(s: &str) -> String {
    let mut out = String::new();
    let mut up = true;
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            if up {
                out.push(c.to_ascii_uppercase());
                up = false;
            } else {
                out.push(c);
            }
            // a digit run ends a word: `s3bucket` -> `S3Bucket`
            if c.is_ascii_digit() {
                up = true;
            }
        } else {
            up = true;
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'S');
    }
    out
}

/// Upstream reads a schema named `...Protocol` as a protocol and `...Mixin` as a mixin, which
/// may not hold what a schema holds; such names get a `Schema` suffix.
pub fn safe_name(n: &str) -> String {
    if n.ends_with("Protocol") || n.ends_with("Mixin") {
        format!("{n}Schema")
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_names() {
        assert_eq!(camel("aws_s3_bucket"), "AwsS3Bucket");
        assert_eq!(camel("book"), "Book");
        assert_eq!(camel("address-state"), "AddressState");
        assert_eq!(camel("fooBar"), "FooBar");
    }
}
