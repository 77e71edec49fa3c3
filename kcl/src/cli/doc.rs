//! `kcl doc generate`: Markdown (or HTML) reference of a package's schemas.
//!
//! Laid out as upstream's `kcl doc generate` (kcl-go's doc templates): one `index.md` per
//! package folder with `# Package <name>`, the package docstring as `## Overview`, an `## Index`
//! linking every schema (`#schema-Name`) and sub-package, then `## Schemas`, each as
//! `### Schema Name` with its description, `#### Attributes` (`**name** *required*`, the type
//! in backticks, the description from the docstring's `Attributes` section; alphabetical, as
//! upstream) and `#### Examples`. Beyond upstream: each attribute's default, the parent
//! schema, the `check:` rules, `@deprecated` notes, and types that name a documented schema are
//! links to it (also across packages). `--format html` writes the same as `index.html` pages.
//! Only the files are parsed (nothing is evaluated), so a package with errors elsewhere still
//! gets its documentation.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::ast::{ExprKind, Span, StmtKind};

/// `kcl doc ...`.
#[derive(Args, Debug)]
pub struct DocArgs {
    #[command(subcommand)]
    pub command: DocCommand,
}

#[derive(Subcommand, Debug)]
pub enum DocCommand {
    /// Generate the documentation of a package and its sub-packages.
    Generate(GenerateArgs),
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The package folder (default `.`).
    #[arg(long = "file-path", default_value = ".")]
    pub file_path: PathBuf,
    /// Where to write (default `<file-path>/docs`... as upstream: `./docs`).
    #[arg(long = "target", default_value = "docs")]
    pub target: PathBuf,
    /// md or html.
    #[arg(long = "format", value_parser = ["md", "markdown", "html"], default_value = "md")]
    pub format: String,
    /// Leave out attributes marked `@deprecated`.
    #[arg(long = "ignore-deprecated")]
    pub ignore_deprecated: bool,
}

/// One documented schema.
#[derive(Debug, Clone)]
struct SchemaDoc {
    name: String,
    /// Package path relative to the root (`""` for the root, `a/b` below it).
    pkg: String,
    file: PathBuf,
    kind: &'static str,
    parent: Option<String>,
    description: String,
    examples: String,
    attrs: Vec<AttrDoc>,
    checks: Vec<String>,
}

#[derive(Debug, Clone)]
struct AttrDoc {
    name: String,
    ty: String,
    required: bool,
    default: Option<String>,
    description: String,
    deprecated: Option<String>,
}

struct Package {
    rel: String,
    name: String,
    description: String,
    schemas: Vec<SchemaDoc>,
}

pub fn run(a: DocArgs) -> anyhow::Result<ExitCode> {
    let DocCommand::Generate(g) = a.command;
    let root = std::fs::canonicalize(&g.file_path)
        .map_err(|e| anyhow::anyhow!("cannot read '{}': {e}", g.file_path.display()))?;
    let mut packages = Vec::new();
    collect(&root, &root, &mut packages, g.ignore_deprecated)?;
    // the root page stays: it indexes the packages below it
    packages.retain(|p| p.rel.is_empty() || !p.schemas.is_empty() || !p.description.is_empty());
    if packages.iter().all(|p| p.schemas.is_empty()) {
        eprintln!("error: no schemas found under '{}'", g.file_path.display());
        return Ok(ExitCode::from(1));
    }
    let html = g.format == "html";
    let links = Links::new(&packages);
    for p in &packages {
        let md = render_package(p, &packages, &links);
        let dir = g.target.join(&p.rel);
        std::fs::create_dir_all(&dir)?;
        if html {
            std::fs::write(dir.join("index.html"), to_html(&p.name, &md))?;
        } else {
            std::fs::write(dir.join("index.md"), md)?;
        }
    }
    let n: usize = packages.iter().map(|p| p.schemas.len()).sum();
    eprintln!(
        "wrote {} package page(s), {n} schema(s), to {}",
        packages.len(),
        g.target.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Every package folder below `dir` (depth first, in name order).
fn collect(
    root: &Path,
    dir: &Path,
    out: &mut Vec<Package>,
    ignore_deprecated: bool,
) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    let rel = dir
        .strip_prefix(root)
        .unwrap_or(Path::new(""))
        .to_string_lossy()
        .replace('\\', "/");
    let mut pkg = Package {
        name: if rel.is_empty() {
            root.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "main".into())
        } else {
            rel.replace('/', ".")
        },
        rel: rel.clone(),
        description: String::new(),
        schemas: Vec::new(),
    };
    for p in &entries {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !p.is_file() || !name.ends_with(".k") || name.ends_with("_test.k") {
            continue;
        }
        let m = match crate::parser::parse_file(p) {
            Ok(m) => m,
            Err(d) => {
                // documentation of a broken file would mislead: say so and go on
                eprint!("{d}");
                continue;
            }
        };
        if let Some(d) = &m.doc
            && pkg.description.is_empty()
        {
            pkg.description = dedent(&d.value);
        }
        for s in &m.body {
            if let StmtKind::Schema(sc) = &s.kind {
                pkg.schemas.push(schema_doc(sc, &rel, p, ignore_deprecated));
            }
        }
    }
    pkg.schemas.sort_by(|a, b| a.name.cmp(&b.name));
    out.push(pkg);
    for p in entries {
        let hidden = p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if p.is_dir() && !hidden {
            collect(root, &p, out, ignore_deprecated)?;
        }
    }
    Ok(())
}

fn text(span: Span) -> String {
    span.text().map(|t| t.to_string()).unwrap_or_default()
}

fn schema_doc(
    sc: &crate::ast::SchemaStmt,
    pkg: &str,
    file: &Path,
    ignore_deprecated: bool,
) -> SchemaDoc {
    let doc = sc
        .doc
        .as_ref()
        .map(|d| dedent(&d.value))
        .unwrap_or_default();
    let sections = sections(&doc);
    let attr_docs = attribute_docs(sections.get("Attributes").map(String::as_str).unwrap_or(""));
    let mut attrs = Vec::new();
    for s in &sc.body {
        let StmtKind::SchemaAttr(a) = &s.kind else {
            continue;
        };
        let deprecated = a
            .decorators
            .iter()
            .find(|d| {
                d.name
                    .names
                    .last()
                    .is_some_and(|n| n.sym.as_str() == "deprecated")
            })
            .map(|d| {
                let mut parts = Vec::new();
                for k in d.args.iter().flat_map(|x| x.keywords.iter()) {
                    if let ExprKind::Str(v) = &k.value.kind {
                        match k.name.sym.as_str() {
                            "version" => parts.push(format!("since version {v}")),
                            "reason" => parts.push(v.to_string()),
                            _ => {}
                        }
                    }
                }
                parts.join(", ")
            });
        if ignore_deprecated && deprecated.is_some() {
            continue;
        }
        let name = a.name.sym.as_str().to_string();
        attrs.push(AttrDoc {
            description: attr_docs.get(&name).cloned().unwrap_or_default(),
            ty: text(a.ty.span),
            required: !a.optional,
            default: a.value.as_ref().map(|v| text(v.span)),
            name,
            deprecated,
        });
    }
    attrs.sort_by(|a, b| a.name.cmp(&b.name));
    let checks = sc
        .checks
        .iter()
        .map(|c| {
            let mut s = text(c.test.span);
            if let Some(i) = &c.if_cond {
                let _ = write!(s, " if {}", text(i.span));
            }
            if let Some(m) = &c.msg {
                let _ = write!(s, ", {}", text(m.span));
            }
            s
        })
        .collect();
    SchemaDoc {
        name: sc.name.sym.as_str().to_string(),
        pkg: pkg.to_string(),
        file: file.to_path_buf(),
        kind: match sc.kind {
            crate::ast::SchemaKind::Schema => "Schema",
            crate::ast::SchemaKind::Mixin => "Mixin",
            crate::ast::SchemaKind::Protocol => "Protocol",
        },
        parent: sc.parent.as_ref().map(|p| text(p.span)),
        description: sections.get("").cloned().unwrap_or_default(),
        examples: sections.get("Examples").cloned().unwrap_or_default(),
        attrs,
        checks,
    }
}

/// Remove the common indentation of a docstring and its blank edges.
fn dedent(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let indent = lines
        .iter()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let out: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                l.trim().to_string()
            } else {
                l.get(indent.min(l.len() - l.trim_start().len())..)
                    .unwrap_or("")
                    .trim_end()
                    .to_string()
            }
        })
        .collect();
    out.join("\n").trim().to_string()
}

/// A numpy-style docstring's sections: the description (key `""`), `Attributes`, `Examples`...
fn sections(doc: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let lines: Vec<&str> = doc.lines().collect();
    let mut current = String::new();
    let mut buf: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let underline = lines.get(i + 1).map(|n| n.trim());
        if !l.trim().is_empty()
            && underline.is_some_and(|u| u.len() >= 3 && u.chars().all(|c| c == '-'))
        {
            out.insert(current.clone(), buf.join("\n").trim().to_string());
            current = l.trim().to_string();
            buf.clear();
            i += 2;
            continue;
        }
        buf.push(l);
        i += 1;
    }
    out.insert(current, buf.join("\n").trim().to_string());
    out
}

/// `name[, name] : type, ...` entries of an `Attributes` section and their indented text.
fn attribute_docs(section: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut names: Vec<String> = Vec::new();
    let mut desc: Vec<String> = Vec::new();
    let flush =
        |names: &mut Vec<String>, desc: &mut Vec<String>, out: &mut BTreeMap<String, String>| {
            for n in names.drain(..) {
                out.insert(n, desc.join("\n").trim().to_string());
            }
            desc.clear();
        };
    for l in section.lines() {
        let indented = l.starts_with(' ') || l.starts_with('\t');
        if !indented && !l.trim().is_empty() {
            flush(&mut names, &mut desc, &mut out);
            let head = l.split(" : ").next().unwrap_or(l);
            let head = head.split(':').next().unwrap_or(head);
            names = head
                .split(',')
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect();
        } else {
            desc.push(l.trim().to_string());
        }
    }
    flush(&mut names, &mut desc, &mut out);
    out
}

// ------------------------------------------------------------------------ rendering ----

/// Where each schema is documented, to link types to it.
struct Links {
    /// Schema name -> packages (relative paths) documenting one of that name.
    by_name: BTreeMap<String, Vec<String>>,
}

impl Links {
    fn new(packages: &[Package]) -> Self {
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in packages {
            for s in &p.schemas {
                by_name
                    .entry(s.name.clone())
                    .or_default()
                    .push(p.rel.clone());
            }
        }
        Links { by_name }
    }

    /// `ty` with schema names linked (from the page of package `from`): a bare name links to
    /// the same package's schema, `alias.Name` to the one package documenting `Name`.
    fn link(&self, ty: &str, from: &str) -> String {
        let mut out = String::new();
        let mut word = String::new();
        let flush = |word: &mut String, out: &mut String| {
            if word.is_empty() {
                return;
            }
            let last = word.rsplit('.').next().unwrap_or(word);
            let target = self.by_name.get(last).and_then(|pkgs| {
                if !word.contains('.') {
                    pkgs.iter().find(|p| *p == from)
                } else if pkgs.len() == 1 {
                    pkgs.first()
                } else {
                    None
                }
            });
            match target {
                Some(p) => {
                    let _ = write!(out, "[{word}]({}#schema-{last})", rel_link(from, p));
                }
                None => out.push_str(word),
            }
            word.clear();
        };
        for c in ty.chars() {
            if c.is_alphanumeric() || c == '_' || c == '.' {
                word.push(c);
            } else {
                flush(&mut word, &mut out);
                out.push(c);
            }
        }
        flush(&mut word, &mut out);
        out
    }
}

/// The link from package page `from` to package page `to` (`../x/index.md`, or `` for itself).
fn rel_link(from: &str, to: &str) -> String {
    if from == to {
        return String::new();
    }
    let up = if from.is_empty() {
        0
    } else {
        from.split('/').count()
    };
    let mut s = "../".repeat(up);
    if !to.is_empty() {
        s.push_str(to);
        s.push('/');
    }
    s.push_str("index.md");
    s
}

fn render_package(p: &Package, all: &[Package], links: &Links) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Package {}\n", p.name);
    if !p.description.is_empty() {
        let _ = writeln!(o, "## Overview\n\n{}\n", p.description);
    }
    let _ = writeln!(o, "## Index\n");
    for s in &p.schemas {
        let _ = writeln!(o, "- [{}](#schema-{})", s.name, s.name);
    }
    // sub-packages (and their schemas) below this one
    for q in all.iter().filter(|q| {
        q.rel != p.rel && (p.rel.is_empty() || q.rel.starts_with(&format!("{}/", p.rel)))
    }) {
        let depth = q.rel.split('/').count()
            - if p.rel.is_empty() {
                1
            } else {
                p.rel.split('/').count() + 1
            };
        let pad = "  ".repeat(depth);
        let link = rel_link(&p.rel, &q.rel);
        let short = q.rel.rsplit('/').next().unwrap_or(&q.rel);
        let _ = writeln!(o, "{pad}- [{short}]({link})");
        for s in &q.schemas {
            let _ = writeln!(o, "{pad}  - [{}]({link}#schema-{})", s.name, s.name);
        }
    }
    o.push('\n');
    if !p.schemas.is_empty() {
        let _ = writeln!(o, "## Schemas\n");
        for s in &p.schemas {
            render_schema(&mut o, s, links);
        }
    }
    o.push_str("<!-- Auto generated by kcl doc generate, please do not edit. -->\n");
    o
}

fn render_schema(o: &mut String, s: &SchemaDoc, links: &Links) {
    let _ = writeln!(o, "### {} {}\n", s.kind, s.name);
    if let Some(p) = &s.parent {
        let _ = writeln!(o, "Inherits {}.\n", links.link(p, &s.pkg));
    }
    if !s.description.is_empty() {
        let _ = writeln!(o, "{}\n", s.description);
    }
    if !s.attrs.is_empty() {
        let _ = writeln!(o, "#### Attributes\n");
    }
    for a in &s.attrs {
        let _ = write!(o, "**{}**", a.name);
        if a.required {
            o.push_str(" *required*");
        }
        o.push_str("\n\n");
        let _ = writeln!(o, "`{}`\n", a.ty);
        let linked = links.link(&a.ty, &s.pkg);
        if linked != a.ty {
            let _ = writeln!(o, "Type: {linked}\n");
        }
        if let Some(d) = &a.default {
            let _ = writeln!(o, "Default: `{}`\n", d.replace('\n', " "));
        }
        if let Some(d) = &a.deprecated {
            let _ = writeln!(
                o,
                "*Deprecated*{}\n",
                if d.is_empty() {
                    String::new()
                } else {
                    format!(": {d}")
                }
            );
        }
        if !a.description.is_empty() {
            let _ = writeln!(o, "{}\n", a.description);
        }
    }
    if !s.checks.is_empty() {
        let _ = writeln!(o, "#### Checks\n");
        for c in &s.checks {
            let _ = writeln!(o, "- `{}`", c.replace('`', "'"));
        }
        o.push('\n');
    }
    if !s.examples.is_empty() {
        let _ = writeln!(o, "#### Examples\n\n```kcl\n{}\n```\n", s.examples);
    }
    let file = s
        .file
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let _ = writeln!(o, "Source: `{file}`\n");
}

/// The Markdown this module writes, as a stand-alone HTML page (headings, paragraphs, lists,
/// code, emphasis and links: what the Markdown uses).
fn to_html(title: &str, md: &str) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let inline = |s: &str| -> String {
        let s = esc(s);
        let mut out = String::new();
        let mut rest = s.as_str();
        // `code`, **bold**, *em*, [text](href) — in that order of precedence
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('`')
                && let Some(end) = r.find('`')
            {
                let _ = write!(out, "<code>{}</code>", &r[..end]);
                rest = &r[end + 1..];
            } else if let Some(r) = rest.strip_prefix("**")
                && let Some(end) = r.find("**")
            {
                let _ = write!(out, "<strong>{}</strong>", &r[..end]);
                rest = &r[end + 2..];
            } else if let Some(r) = rest.strip_prefix('*')
                && let Some(end) = r.find('*')
            {
                let _ = write!(out, "<em>{}</em>", &r[..end]);
                rest = &r[end + 1..];
            } else if let Some(r) = rest.strip_prefix('[')
                && let Some(mid) = r.find("](")
                && let Some(end) = r[mid..].find(')')
            {
                let href = r[mid + 2..mid + end].replace("index.md", "index.html");
                let _ = write!(out, "<a href=\"{href}\">{}</a>", &r[..mid]);
                rest = &r[mid + end + 1..];
            } else {
                let c = rest.chars().next().unwrap_or(' ');
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    };
    let mut body = String::new();
    let mut in_code = false;
    let mut in_list = false;
    let mut para: Vec<String> = Vec::new();
    let flush_para = |para: &mut Vec<String>, body: &mut String| {
        if !para.is_empty() {
            let _ = writeln!(body, "<p>{}</p>", para.join("<br>\n"));
            para.clear();
        }
    };
    for line in md.lines() {
        if line.starts_with("```") {
            flush_para(&mut para, &mut body);
            body.push_str(if in_code {
                "</code></pre>\n"
            } else {
                "<pre><code>"
            });
            in_code = !in_code;
            continue;
        }
        if in_code {
            let _ = writeln!(body, "{}", esc(line));
            continue;
        }
        let item = line.trim_start().strip_prefix("- ");
        if in_list && item.is_none() {
            body.push_str("</ul>\n");
            in_list = false;
        }
        if let Some(h) = line.strip_prefix('#').map(|_| line.trim_start_matches('#')) {
            flush_para(&mut para, &mut body);
            let level = line.len() - h.len();
            let h = h.trim();
            let id = h
                .split_whitespace()
                .nth(1)
                .map(|n| format!(" id=\"schema-{n}\""))
                .filter(|_| {
                    h.starts_with("Schema ")
                        || h.starts_with("Mixin ")
                        || h.starts_with("Protocol ")
                });
            let _ = writeln!(
                body,
                "<h{level}{}>{}</h{level}>",
                id.unwrap_or_default(),
                inline(h)
            );
        } else if let Some(it) = item {
            flush_para(&mut para, &mut body);
            if !in_list {
                body.push_str("<ul>\n");
                in_list = true;
            }
            let _ = writeln!(body, "<li>{}</li>", inline(it));
        } else if line.trim().is_empty() || line.starts_with("<!--") {
            flush_para(&mut para, &mut body);
        } else {
            para.push(inline(line));
        }
    }
    flush_para(&mut para, &mut body);
    if in_list {
        body.push_str("</ul>\n");
    }
    format!(
        "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>Package {}</title>\n</head>\n<body>\n{body}</body>\n</html>\n",
        esc(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_docstring_sections() {
        let doc = "A port.\n\nAttributes\n----------\nname, alias : str, optional\n    Port name.\n    Short.\nport : int, required\n    The number.\n\nExamples\n--------\np = Port {port = 80}";
        let s = sections(doc);
        assert_eq!(s[""], "A port.");
        assert_eq!(s["Examples"], "p = Port {port = 80}");
        let a = attribute_docs(&s["Attributes"]);
        assert_eq!(a["name"], "Port name.\nShort.");
        assert_eq!(a["alias"], "Port name.\nShort.");
        assert_eq!(a["port"], "The number.");
    }

    #[test]
    fn links_between_pages() {
        assert_eq!(rel_link("frontend", "frontend"), "");
        assert_eq!(rel_link("frontend", "backend"), "../backend/index.md");
        assert_eq!(rel_link("", "a/b"), "a/b/index.md");
        assert_eq!(rel_link("a/b", ""), "../../index.md");
    }
}
