//! Workspace-wide features: definitions compared across units (references and rename), rename's
//! target, editability and conflicts, and workspace symbols.

use std::path::{Path, PathBuf};

use lsp_types::{Location, SymbolInformation, SymbolKind, Url};

use crate::ast::{FileId, Span, StmtKind, Symbol, source_map};
use crate::lexer::KEYWORDS;

use super::super::db::{Db, FileData};
use super::super::pos::{self, Encoding};
use super::super::sema::{Def, Role, SchemaRef, Sema};
use super::Snapshot;

/// Where a definition is, comparable across units: its file and the byte range of its name.
pub type DefKey = (PathBuf, u32);

/// The key of a definition.
pub fn def_key(sema: &Sema, d: &Def) -> Option<DefKey> {
    let span = sema.def_span(d)?;
    let path = source_map().get(span.file)?.path.clone()?;
    Some((path, span.lo))
}

/// One reference in a file, as the references index keeps it.
#[derive(Clone, Debug)]
pub struct RefEntry {
    pub lo: u32,
    pub hi: u32,
    pub key: DefKey,
    pub role: Role,
}

/// The references index of a file: every resolved name with its definition's key.
pub fn file_refs(sema: &Sema, file: FileId) -> Vec<RefEntry> {
    sema.walk_file(file, None)
        .occs
        .iter()
        .filter_map(|o| {
            Some(RefEntry {
                lo: o.span.lo,
                hi: o.span.hi,
                key: def_key(sema, &o.def)?,
                role: o.role,
            })
        })
        .collect()
}

/// Why a rename is refused, or the definition and its current name.
pub fn rename_target(
    snap: &Snapshot,
    p: lsp_types::Position,
    db: &Db,
) -> Result<(Def, Span), String> {
    let off = snap.offset(p);
    let walked = snap.sema.walk_file(snap.file_id(), None);
    let occ = walked
        .occ_at(off)
        .ok_or_else(|| "no symbol to rename here".to_string())?;
    match &occ.def {
        Def::Builtin(_) | Def::SysFunc(..) | Def::SysModule(_) | Def::StrMethod(_) => {
            return Err("builtins and system modules cannot be renamed".into());
        }
        Def::Pkg(_) => return Err("a package is renamed by renaming its folder".into()),
        Def::Import { decl, name } => {
            // `import a.b` binds `b` through the path itself: renaming it would need `as`
            let aliased = snap.sema.imports.values().any(|(_, d)| d == decl)
                && decl.text().is_some_and(|t| *t == *name.as_str())
                && snap.sema.files.iter().any(|f| {
                    f.module.body.iter().any(|s| match &s.kind {
                        StmtKind::Import(i) => i.asname.is_some_and(|a| a.span == *decl),
                        _ => false,
                    })
                });
            if !aliased {
                return Err(format!(
                    "'{name}' is bound by its import path: add an alias ('import ... as {name}') to rename it"
                ));
            }
        }
        _ => {}
    }
    let span = snap
        .sema
        .def_span(&occ.def)
        .ok_or_else(|| "the definition is not in a file".to_string())?;
    let path = source_map()
        .get(span.file)
        .and_then(|f| f.path.clone())
        .ok_or_else(|| "the definition is not in a file".to_string())?;
    if !editable(&path, db) {
        return Err(format!(
            "'{}' is defined in {}, outside the workspace's own files (a dependency)",
            snap.sema.def_name(&occ.def),
            path.display()
        ));
    }
    Ok((occ.def.clone(), occ.span))
}

/// A file the workspace owns: under a workspace folder, not in a `vendor/` folder or a
/// dependency.
pub fn editable(path: &Path, db: &Db) -> bool {
    let roots = db.roots();
    let under_root = roots.is_empty() || roots.iter().any(|r| path.starts_with(r));
    under_root && !path.components().any(|c| c.as_os_str() == "vendor")
}

/// A valid KCL identifier that is no keyword.
pub fn valid_name(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_alphabetic() || c == '_')
        && cs.all(|c| c.is_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&s)
}

/// Whether `new` is already a name where `def` is defined (a rename would capture or be
/// captured).
pub fn rename_conflict(sema: &Sema, d: &Def, new: &str) -> Option<String> {
    let new_sym = Symbol::intern(new);
    match d {
        Def::Top { pkg, .. } => {
            if sema.top(*pkg, new_sym).is_some() {
                return Some(format!("'{new}' is already defined in the package"));
            }
            if sema
                .imports
                .iter()
                .any(|((f, n), _)| *n == new_sym && sema.pkg_of(*f) == *pkg)
            {
                return Some(format!("'{new}' is already an import name in the package"));
            }
        }
        Def::Attr { schema, .. } => {
            if sema.member(*schema, new_sym).is_some() {
                return Some(format!(
                    "schema '{}' already has an attribute '{new}'",
                    sema.schema_name(*schema)
                ));
            }
            // a schema that inherits the attribute must not declare the new name either
            for (pi, p) in sema.pkgs.iter().enumerate() {
                for n in &p.order {
                    let sr = SchemaRef {
                        pkg: pi as u32,
                        name: *n,
                    };
                    if sema.schema(sr).is_none() {
                        continue;
                    }
                    let ms = sema.members(sr);
                    let inherits = ms.iter().any(|m| {
                        m.owner == *schema
                            && Def::Attr {
                                schema: m.owner,
                                attr: m.name,
                                decl: m.decl,
                            } == *d
                    });
                    if inherits && ms.iter().any(|m| m.name == new_sym) {
                        return Some(format!(
                            "schema '{}' already has an attribute '{new}'",
                            sema.schema_name(sr)
                        ));
                    }
                }
            }
        }
        Def::Local { decl, .. } | Def::Import { decl, .. } => {
            // any name `new` resolved in the same file would change meaning
            let walked = sema.walk_file(decl.file, None);
            if walked
                .occs
                .iter()
                .any(|o| o.span.text().is_some_and(|t| &*t == new))
            {
                return Some(format!("'{new}' is already used in this file"));
            }
            let pkg = sema.pkg_of(decl.file);
            if sema.top(pkg, new_sym).is_some() {
                return Some(format!("'{new}' is already defined in the package"));
            }
        }
        _ => return Some("this symbol cannot be renamed".into()),
    }
    None
}

/// Workspace symbols of a file matching `query` (case-insensitive subsequence).
#[allow(deprecated)] // `SymbolInformation::deprecated` must be written out
pub fn workspace_symbols(fd: &FileData, query: &str, enc: Encoding) -> Vec<SymbolInformation> {
    let q: Vec<char> = query.to_lowercase().chars().collect();
    let matches = |name: &str| {
        let mut it = q.iter().peekable();
        for c in name.to_lowercase().chars() {
            if it.peek() == Some(&&c) {
                it.next();
            }
        }
        it.peek().is_none()
    };
    let Ok(uri) = Url::from_file_path(&fd.path) else {
        return Vec::new();
    };
    let text = fd.text();
    let starts = fd.src.line_starts();
    let mut out = Vec::new();
    // the package's folder (a file needs no analysis to be listed)
    let container = fd
        .path
        .parent()
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let symbol = |n: crate::ast::Name, kind| SymbolInformation {
        name: n.sym.to_string(),
        kind,
        tags: None,
        deprecated: None,
        location: Location::new(
            uri.clone(),
            pos::range(text, starts, n.span.lo, n.span.hi, enc),
        ),
        container_name: Some(container.clone()),
    };
    for s in &fd.module.body {
        let (name, kind) = match &s.kind {
            StmtKind::Schema(sc) => (sc.name, SymbolKind::STRUCT),
            StmtKind::Rule(r) => (r.name, SymbolKind::FUNCTION),
            StmtKind::TypeAlias(t) => (t.name, SymbolKind::TYPE_PARAMETER),
            _ => {
                let mut names = Vec::new();
                super::super::sema::assigned_names(s, &mut names);
                for n in names {
                    if matches(n.sym.as_str()) {
                        out.push(symbol(n, SymbolKind::VARIABLE));
                    }
                }
                continue;
            }
        };
        if matches(name.sym.as_str()) {
            out.push(symbol(name, kind));
        }
    }
    out
}
