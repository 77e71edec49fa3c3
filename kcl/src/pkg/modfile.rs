//! `kcl.mod`, the package manifest: `[package]`, `[dependencies]` and `[profile]`, read with
//! the position of every key so that a bad entry is reported at its `file:line:col`, and edited
//! in place (`kcl mod add`) so the user's comments and layout stay.
//!
//! Dependency forms (upstream kpm's):
//! `name = "1.2.3"` (the default registry, `<reg>/<repo>/name:1.2.3`),
//! `name = { oci = "oci://host/repo", tag = "1.2.3" }`,
//! `name = { git = "url", tag|commit|branch = "...", package = "sub" }` and
//! `name = { path = "../dir" }`.

use std::path::{Path, PathBuf};

use toml_edit::Item;

use super::{PkgError, line_col, toml_syntax_error};

/// `kcl.mod` as read.
#[derive(Clone, Debug, Default)]
pub struct ModFile {
    /// The folder holding `kcl.mod` (the package root).
    pub root: PathBuf,
    pub name: String,
    pub version: String,
    pub edition: String,
    pub description: String,
    /// `[package] include` / `exclude`: glob patterns (relative to the root) of what a
    /// published package holds.
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    /// `[dependencies]` in file order.
    pub dependencies: Vec<Dependency>,
    /// `[profile] entries`.
    pub entries: Vec<String>,
}

/// One `[dependencies]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    pub name: String,
    pub source: Source,
    /// `kcl.mod:line:col` of its key, for messages.
    pub at: String,
}

/// Where a dependency comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `name = "version"`: `<default registry>/<default repo>/<name>:<version>`.
    Registry { version: String },
    /// `{ oci = "oci://reg/repo", tag = "..." }`; no tag means the newest version.
    Oci {
        reg: String,
        repo: String,
        tag: Option<String>,
    },
    /// `{ git = "url", tag|commit|branch = "..." }`; `package` picks a package inside the
    /// repository by its `kcl.mod` name.
    Git {
        url: String,
        reference: GitRef,
        package: Option<String>,
    },
    /// `{ path = "dir" }`, relative to the package root.
    Local { path: String },
}

/// The one reference a git dependency names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GitRef {
    Tag(String),
    Commit(String),
    Branch(String),
    /// None named: the default branch.
    Default,
}

impl GitRef {
    /// The reference as written (empty for the default branch).
    pub fn as_str(&self) -> &str {
        match self {
            GitRef::Tag(s) | GitRef::Commit(s) | GitRef::Branch(s) => s,
            GitRef::Default => "",
        }
    }
}

impl Source {
    /// The version a dependency is locked and cached under: the registry version or tag, the
    /// git reference, the local package's own version.
    pub fn version(&self) -> Option<&str> {
        match self {
            Source::Registry { version } => Some(version),
            Source::Oci { tag, .. } => tag.as_deref(),
            Source::Git { reference, .. } => Some(reference.as_str()).filter(|s| !s.is_empty()),
            Source::Local { .. } => None,
        }
    }

    /// `oci://reg/repo` of a registry source with the settings' defaults.
    pub fn oci_ref(
        &self,
        name: &str,
        settings: &super::Settings,
    ) -> Option<(String, String, Option<String>)> {
        match self {
            Source::Registry { version } => Some((
                settings.default_registry.clone(),
                join_repo(&settings.default_repo, name),
                Some(version.clone()),
            )),
            Source::Oci { reg, repo, tag } => Some((reg.clone(), repo.clone(), tag.clone())),
            _ => None,
        }
    }
}

/// `a/b` + `c` = `a/b/c` (upstream's `utils.JoinPath`).
pub fn join_repo(base: &str, elem: &str) -> String {
    let b = base.trim_end_matches('/');
    let e = elem.trim_start_matches('/');
    if b.is_empty() {
        e.to_string()
    } else {
        format!("{b}/{e}")
    }
}

/// Splits `oci://host/repo` into host and repository.
pub fn parse_oci_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("oci://")?;
    let (host, repo) = rest.split_once('/')?;
    let repo = repo.trim_matches('/');
    (!host.is_empty() && !repo.is_empty()).then(|| (host.to_string(), repo.to_string()))
}

impl ModFile {
    /// Reads `root/kcl.mod`.
    pub fn load(root: &Path) -> Result<ModFile, PkgError> {
        let path = root.join("kcl.mod");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                PkgError::Invalid(format!("no kcl.mod in {}", root.display()))
            } else {
                PkgError::io(&path, e)
            }
        })?;
        Self::parse(root, &path, &text)
    }

    /// Reads `root/kcl.mod` if there is one.
    pub fn load_if_present(root: &Path) -> Result<Option<ModFile>, PkgError> {
        if root.join("kcl.mod").is_file() {
            Self::load(root).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Parses the text of `path` (the `kcl.mod` in `root`).
    pub fn parse(root: &Path, path: &Path, text: &str) -> Result<ModFile, PkgError> {
        let at = |span: Option<std::ops::Range<usize>>| {
            let (l, c) = line_col(text, span.map_or(0, |s| s.start));
            format!("{}:{l}:{c}", path.display())
        };
        let doc = toml_edit::Document::parse(text).map_err(|e| {
            PkgError::Syntax(format!(
                "{}: {}",
                at(e.span()),
                e.message().trim_end().replace('\n', " ")
            ))
        })?;
        let top = doc.as_table();
        let mut m = ModFile {
            root: root.to_path_buf(),
            ..Default::default()
        };
        let bad =
            |item: &Item, what: &str| PkgError::Syntax(format!("{}: {what}", at(item.span())));
        if let Some(pkg) = top.get("package") {
            let t = pkg
                .as_table_like()
                .ok_or_else(|| bad(pkg, "[package] must be a table"))?;
            let s = |key: &str| -> Result<String, PkgError> {
                match t.get(key) {
                    None => Ok(String::new()),
                    Some(v) => v
                        .as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(v, &format!("package {key} must be a string"))),
                }
            };
            m.name = s("name")?;
            m.version = s("version")?;
            m.edition = s("edition")?;
            m.description = s("description")?;
            let list = |key: &str| -> Result<Vec<String>, PkgError> {
                match t.get(key) {
                    None => Ok(Vec::new()),
                    Some(v) => string_list(v)
                        .ok_or_else(|| bad(v, &format!("package {key} must be a list of strings"))),
                }
            };
            m.include = list("include")?;
            m.exclude = list("exclude")?;
        }
        if let Some(deps) = top.get("dependencies") {
            let t = deps
                .as_table_like()
                .ok_or_else(|| bad(deps, "[dependencies] must be a table"))?;
            for (name, item) in t.iter() {
                let key_at = at(t.key(name).and_then(|k| k.span()).or(item.span()));
                let source = parse_source(name, item, &key_at)?;
                m.dependencies.push(Dependency {
                    name: name.to_string(),
                    source,
                    at: key_at,
                });
            }
        }
        if let Some(prof) = top.get("profile") {
            let t = prof
                .as_table_like()
                .ok_or_else(|| bad(prof, "[profile] must be a table"))?;
            if let Some(e) = t.get("entries") {
                m.entries = string_list(e)
                    .ok_or_else(|| bad(e, "profile entries must be a list of strings"))?;
            }
        }
        Ok(m)
    }

    /// `<name>_<version>`: the folder name of this package in a cache or `vendor/`.
    pub fn full_name(&self) -> String {
        format!("{}_{}", self.name, self.version)
    }

    /// The dependency named `name`.
    pub fn dependency(&self, name: &str) -> Option<&Dependency> {
        self.dependencies.iter().find(|d| d.name == name)
    }
}

fn string_list(item: &Item) -> Option<Vec<String>> {
    item.as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn parse_source(name: &str, item: &Item, at: &str) -> Result<Source, PkgError> {
    let bad = |msg: String| PkgError::Syntax(format!("{at}: dependency '{name}': {msg}"));
    if let Some(v) = item.as_str() {
        if v.is_empty() {
            return Err(bad("the version is empty".into()));
        }
        return Ok(Source::Registry {
            version: v.to_string(),
        });
    }
    let Some(t) = item.as_table_like() else {
        return Err(bad(
            "expected a version string or a table such as { path = \"...\" }".into(),
        ));
    };
    let field = |key: &str| -> Result<Option<String>, PkgError> {
        match t.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| bad(format!("'{key}' must be a string"))),
        }
    };
    if let Some(path) = field("path")? {
        return Ok(Source::Local { path });
    }
    if let Some(url) = field("git")? {
        let refs: Vec<GitRef> = [
            field("tag")?.map(GitRef::Tag),
            field("commit")?.map(GitRef::Commit),
            field("branch")?.map(GitRef::Branch),
        ]
        .into_iter()
        .flatten()
        .collect();
        if refs.len() > 1 {
            return Err(bad("only one of branch, tag or commit is allowed".into()));
        }
        return Ok(Source::Git {
            url,
            reference: refs.into_iter().next().unwrap_or(GitRef::Default),
            package: field("package")?,
        });
    }
    if let Some(url) = field("oci")? {
        let (reg, repo) = parse_oci_url(&url).ok_or_else(|| {
            bad(format!(
                "'{url}' is not an OCI url (expected oci://<registry>/<repository>)"
            ))
        })?;
        return Ok(Source::Oci {
            reg,
            repo,
            tag: field("tag")?,
        });
    }
    if let Some(version) = field("version")? {
        return Ok(Source::Registry { version });
    }
    Err(bad(
        "expected one of 'path', 'git', 'oci' or 'version'".into()
    ))
}

/// The text of a new `kcl.mod` (`kcl mod init`), in upstream's layout.
pub fn init_text(name: &str, version: &str) -> String {
    format!(
        "[package]\nname = {}\nedition = \"*\"\nversion = {}\n\n",
        toml_quote(name),
        toml_quote(version)
    )
}

/// Sets dependency `name` in the `kcl.mod` text to `source` (added at the end of
/// `[dependencies]`, or replaced where it is), keeping everything else as written.
pub fn set_dependency(
    path: &Path,
    text: &str,
    name: &str,
    source: &Source,
) -> Result<String, PkgError> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| toml_syntax_error(path, text, e.span(), e.message()))?;
    let value: toml_edit::Value = match source {
        Source::Registry { version } => version.as_str().into(),
        Source::Oci { reg, repo, tag } => {
            let mut t = toml_edit::InlineTable::new();
            t.insert("oci", format!("oci://{reg}/{repo}").into());
            if let Some(tag) = tag {
                t.insert("tag", tag.as_str().into());
            }
            t.into()
        }
        Source::Git {
            url,
            reference,
            package,
        } => {
            let mut t = toml_edit::InlineTable::new();
            t.insert("git", url.as_str().into());
            match reference {
                GitRef::Tag(s) => _ = t.insert("tag", s.as_str().into()),
                GitRef::Commit(s) => _ = t.insert("commit", s.as_str().into()),
                GitRef::Branch(s) => _ = t.insert("branch", s.as_str().into()),
                GitRef::Default => {}
            }
            if let Some(p) = package {
                t.insert("package", p.as_str().into());
            }
            t.into()
        }
        Source::Local { path } => {
            let mut t = toml_edit::InlineTable::new();
            t.insert("path", path.as_str().into());
            t.into()
        }
    };
    let deps = doc
        .entry("dependencies")
        .or_insert_with(|| Item::Table(toml_edit::Table::new()));
    let Some(t) = deps.as_table_like_mut() else {
        return Err(PkgError::Syntax(format!(
            "{}: [dependencies] must be a table",
            path.display()
        )));
    };
    match t.get_mut(name) {
        Some(item) if item.is_value() => *item = Item::Value(value),
        _ => {
            t.insert(name, Item::Value(value));
        }
    }
    Ok(doc.to_string())
}

/// A TOML basic string, quoted as upstream's encoder quotes it.
pub(crate) fn toml_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04X}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ModFile, PkgError> {
        ModFile::parse(Path::new("/p"), Path::new("/p/kcl.mod"), text)
    }

    #[test]
    fn every_upstream_dependency_form() {
        let m = parse(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\n\
             k8s = \"1.28\"\n\
             h = { oci = \"oci://ghcr.io/kcl-lang/helloworld\", tag = \"0.1.0\" }\n\
             g = { git = \"https://example.com/g.git\", commit = \"abc\" }\n\
             l = { path = \"../l\" }\n",
        )
        .unwrap();
        assert_eq!(m.name, "app");
        let s: Vec<_> = m.dependencies.iter().map(|d| &d.source).collect();
        assert_eq!(
            s[0],
            &Source::Registry {
                version: "1.28".into()
            }
        );
        assert_eq!(
            s[1],
            &Source::Oci {
                reg: "ghcr.io".into(),
                repo: "kcl-lang/helloworld".into(),
                tag: Some("0.1.0".into())
            }
        );
        assert!(matches!(s[2], Source::Git { reference: GitRef::Commit(c), .. } if c == "abc"));
        assert_eq!(
            s[3],
            &Source::Local {
                path: "../l".into()
            }
        );
        assert_eq!(m.dependencies[1].at, "/p/kcl.mod:6:1");
    }

    #[test]
    fn bad_entries_name_file_line_col() {
        let e = parse("[dependencies]\nx = { git = \"u\", tag = \"a\", branch = \"b\" }\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/p/kcl.mod:2:1: dependency 'x': only one of branch, tag or commit is allowed"
        );
        let e = parse("[dependencies]\nx = 3\n").unwrap_err().to_string();
        assert!(
            e.starts_with("/p/kcl.mod:2:1: dependency 'x': expected a version"),
            "{e}"
        );
        let e = parse("[package\nname = 1\n").unwrap_err().to_string();
        assert!(e.starts_with("/p/kcl.mod:1:"), "{e}");
        let e = parse("[dependencies]\ny = { oci = \"ghcr.io/x\" }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not an OCI url"), "{e}");
    }

    #[test]
    fn set_dependency_keeps_comments() {
        let text = "# my package\n[package]\nname = \"a\" # the name\n";
        let out = set_dependency(
            Path::new("kcl.mod"),
            text,
            "k8s",
            &Source::Registry {
                version: "1.28".into(),
            },
        )
        .unwrap();
        assert!(out.starts_with(text), "{out}");
        assert!(out.contains("[dependencies]\nk8s = \"1.28\"\n"), "{out}");
        let out = set_dependency(
            Path::new("kcl.mod"),
            &out,
            "k8s",
            &Source::Local {
                path: "../k".into(),
            },
        )
        .unwrap();
        assert!(out.contains("k8s = { path = \"../k\" }"), "{out}");
        assert_eq!(out.matches("k8s").count(), 1);
    }
}
