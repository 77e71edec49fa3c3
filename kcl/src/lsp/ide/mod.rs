//! The editor features over a unit's [`Sema`]: hover, completion, definition, references,
//! rename, symbols, formatting, semantic tokens, inlay hints, signature help and quick fixes.
//! Everything here reads a snapshot (a unit's result and its model) and returns protocol types.
//!
//! Here: hover, definition, signature help, inlay hints, document symbols, quick fixes and
//! formatting; [`complete`]: completion; [`tokens`]: semantic tokens; [`workspace`]: what spans
//! units (references, rename, workspace symbols).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use lsp_types::{
    CodeAction, CodeActionKind, DocumentSymbol, Documentation, Hover, HoverContents, InlayHint,
    InlayHintKind, InlayHintLabel, Location, MarkupContent, MarkupKind, ParameterInformation,
    ParameterLabel, Range, SignatureHelp, SignatureInformation, SymbolKind, TextEdit, Url,
    WorkspaceEdit,
};

use crate::ast::{FileId, Span, StmtKind, Symbol, source_map};

use super::db::{Db, FileData, UnitResult};
use super::pos::{self, Encoding};
use super::sema::{Def, LTy, Member, SchemaRef, Sema, TopKind, attr_doc, doc_summary};
use super::signatures::{self, FnSig};

mod complete;
mod tokens;
mod workspace;

pub use tokens::{TOKEN_MODIFIERS, TOKEN_TYPES};
pub use workspace::{
    DefKey, RefEntry, def_key, editable, file_refs, rename_conflict, rename_target, valid_name,
    workspace_symbols,
};

/// What one request works on: the unit's result and model, and the file asked about.
pub struct Snapshot {
    pub result: Arc<UnitResult>,
    pub sema: Arc<Sema>,
    pub file: Arc<FileData>,
    pub enc: Encoding,
}

/// Spans to protocol locations.
pub fn span_range(span: Span, enc: Encoding) -> Option<(PathBuf, Range)> {
    let sf = source_map().get(span.file)?;
    let path = sf.path.clone()?;
    Some((
        path,
        pos::range(&sf.text, sf.line_starts(), span.lo, span.hi, enc),
    ))
}

/// A span as a location.
pub fn location(span: Span, enc: Encoding) -> Option<Location> {
    let (path, range) = span_range(span, enc)?;
    Some(Location::new(Url::from_file_path(&path).ok()?, range))
}

impl Snapshot {
    /// Byte offset of a position in the file.
    pub fn offset(&self, p: lsp_types::Position) -> u32 {
        pos::offset(self.file.text(), self.file.src.line_starts(), p, self.enc)
    }
    fn range(&self, lo: u32, hi: u32) -> Range {
        pos::range(
            self.file.text(),
            self.file.src.line_starts(),
            lo,
            hi,
            self.enc,
        )
    }
    fn id(&self) -> FileId {
        self.file_id()
    }
    /// The file's id in this unit (a file loaded twice has the id of its main-package copy).
    pub fn file_id(&self) -> FileId {
        self.sema
            .files
            .iter()
            .find(|f| f.path == self.file.path)
            .map_or(self.file.id(), |f| f.id())
    }
    fn text(&self) -> &str {
        self.sema
            .file(self.id())
            .map_or(self.file.text(), |f| f.text())
    }

    // ------------------------------------------------------------------ hover ----

    pub fn hover(&self, p: lsp_types::Position) -> Option<Hover> {
        let off = self.offset(p);
        let walked = self.sema.walk_file(self.id(), None);
        let occ = walked.occ_at(off)?;
        let md = describe(&self.sema, &occ.def, &occ.ty)?;
        Some(Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value: md,
            }),
            range: Some(self.range(occ.span.lo, occ.span.hi)),
        })
    }

    // ------------------------------------------------------------- definition ----

    pub fn definition(&self, p: lsp_types::Position) -> Option<Location> {
        let off = self.offset(p);
        let walked = self.sema.walk_file(self.id(), None);
        let occ = walked.occ_at(off)?;
        match &occ.def {
            Def::Pkg(pi) => {
                let m = self.sema.pkgs.get(*pi as usize)?.modules.first()?;
                location(Span::new(m.file, 0, 0), self.enc)
            }
            d => location(self.sema.def_span(d)?, self.enc),
        }
    }

    // ------------------------------------------------------------- signatures ----

    pub fn signature_help(&self, p: lsp_types::Position) -> Option<SignatureHelp> {
        let off = self.offset(p) as usize;
        let text = self.text();
        let off = off.min(text.len());
        // the unclosed `(` before the cursor and the commas at its level
        let bytes = text.as_bytes();
        let (mut depth, mut commas, mut open) = (0i32, 0u32, None);
        let mut i = off;
        let floor = off.saturating_sub(4000);
        while i > floor {
            i -= 1;
            match bytes[i] {
                b')' | b']' | b'}' => depth += 1,
                b'(' | b'[' | b'{' if depth > 0 => depth -= 1,
                b'(' => {
                    open = Some(i);
                    break;
                }
                b'[' | b'{' => return None,
                b',' if depth == 0 => commas += 1,
                _ => {}
            }
        }
        let open = open?;
        let callee: String = text[..open]
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if callee.is_empty() {
            return None;
        }
        let parts: Vec<&str> = callee.split('.').collect();
        let (label, params, doc) = self.callee_signature(&parts, open as u32)?;
        let param_infos: Vec<ParameterInformation> = params
            .iter()
            .map(|p| ParameterInformation {
                label: ParameterLabel::Simple(p.clone()),
                documentation: None,
            })
            .collect();
        let active = commas.min(params.len().saturating_sub(1) as u32);
        Some(SignatureHelp {
            signatures: vec![SignatureInformation {
                label,
                documentation: doc.map(|d| {
                    Documentation::MarkupContent(MarkupContent {
                        kind: MarkupKind::Markdown,
                        value: d,
                    })
                }),
                parameters: Some(param_infos),
                active_parameter: Some(active),
            }],
            active_signature: Some(0),
            active_parameter: Some(active),
        })
    }

    /// (label, parameters, doc) of a callee.
    fn callee_signature(
        &self,
        parts: &[&str],
        off: u32,
    ) -> Option<(String, Vec<String>, Option<String>)> {
        let sig = |f: &FnSig, m: Option<&str>| {
            (
                f.label(m),
                f.params.iter().map(|p| p.to_string()).collect(),
                Some(f.doc.to_string()),
            )
        };
        if let [one] = parts
            && let Some(f) = signatures::builtin(one)
            && self
                .chain_type(parts, off)
                .is_none_or(|t| matches!(t, LTy::Func(_)))
        {
            let pkg = self.sema.pkg_of(self.id());
            if self.sema.top(pkg, Symbol::intern(one)).is_none() {
                return Some(sig(f, None));
            }
        }
        if parts.len() >= 2 {
            let owner = self.chain_type(&parts[..parts.len() - 1], off)?;
            let last = parts[parts.len() - 1];
            match &owner {
                LTy::SysModule(m) => {
                    let f = signatures::system_function(m, last)?;
                    return Some(sig(f, Some(m)));
                }
                LTy::Str => {
                    let f = signatures::str_method(last)?;
                    return Some(sig(f, None));
                }
                _ => {}
            }
        }
        let ty = self.chain_type(parts, off)?;
        match ty {
            LTy::Func(f) => {
                let name = parts.join(".");
                let label = format!("{name}({}) -> {}", f.0.join(", "), self.sema.ty_str(&f.1));
                Some((label, f.0.clone(), None))
            }
            LTy::SchemaType(sr) => {
                let st = self.sema.schema(sr)?;
                let file = self.sema.schema_file(sr)?;
                let params: Vec<String> = st
                    .params
                    .as_ref()?
                    .iter()
                    .map(|p| match &p.ty {
                        Some(t) => format!(
                            "{}: {}",
                            p.name.sym,
                            self.sema.ty_str(&self.sema.resolve_type(sr.pkg, file, t))
                        ),
                        None => p.name.sym.to_string(),
                    })
                    .collect();
                let label = format!("{}[{}]", self.sema.schema_name(sr), params.join(", "));
                let doc = st.doc.as_ref().map(|d| doc_summary(&d.value));
                Some((label, params, doc))
            }
            _ => None,
        }
    }

    // ------------------------------------------------------------ inlay hints ----

    pub fn inlay_hints(&self, range: Range) -> Vec<InlayHint> {
        let lo = self.offset(range.start);
        let hi = self.offset(range.end);
        let walked = self.sema.walk_file(self.id(), None);
        walked
            .hints
            .iter()
            .filter(|(s, _)| s.lo >= lo && s.hi <= hi)
            .map(|(s, t)| InlayHint {
                position: self.range(s.hi, s.hi).end,
                label: InlayHintLabel::String(format!(": {}", self.sema.ty_str(t))),
                kind: Some(InlayHintKind::TYPE),
                text_edits: None,
                tooltip: None,
                padding_left: Some(false),
                padding_right: Some(false),
                data: None,
            })
            .collect()
    }

    // ---------------------------------------------------------------- symbols ----

    pub fn document_symbols(&self) -> Vec<DocumentSymbol> {
        let Some(fd) = self.sema.file(self.id()) else {
            return Vec::new();
        };
        let m = fd.module.clone();
        let mut out = Vec::new();
        for s in &m.body {
            out.extend(self.stmt_symbols(s));
        }
        out
    }

    #[allow(deprecated)] // `DocumentSymbol::deprecated` must be written out
    fn stmt_symbols(&self, s: &crate::ast::Stmt) -> Vec<DocumentSymbol> {
        let sym = |name: String, detail: Option<String>, kind, span: Span, sel: Span, children| {
            DocumentSymbol {
                name,
                detail,
                kind,
                tags: None,
                deprecated: None,
                range: self.range(span.lo, span.hi),
                selection_range: self.range(sel.lo, sel.hi),
                children,
            }
        };
        match &s.kind {
            StmtKind::Schema(sc) => {
                let mut children = Vec::new();
                for b in &sc.body {
                    if let StmtKind::SchemaAttr(a) = &b.kind {
                        let ty = a.ty.span.text().map(|t| t.to_string());
                        children.push(sym(
                            a.name.sym.to_string(),
                            ty,
                            SymbolKind::FIELD,
                            b.span,
                            a.name.span,
                            None,
                        ));
                    }
                }
                vec![sym(
                    sc.name.sym.to_string(),
                    Some("schema".into()),
                    SymbolKind::STRUCT,
                    s.span,
                    sc.name.span,
                    Some(children),
                )]
            }
            StmtKind::Rule(r) => vec![sym(
                r.name.sym.to_string(),
                Some("rule".into()),
                SymbolKind::FUNCTION,
                s.span,
                r.name.span,
                None,
            )],
            StmtKind::TypeAlias(t) => vec![sym(
                t.name.sym.to_string(),
                Some("type".into()),
                SymbolKind::TYPE_PARAMETER,
                s.span,
                t.name.span,
                None,
            )],
            StmtKind::Assign(_) | StmtKind::Unification(_) | StmtKind::AugAssign(_) => {
                let mut names = Vec::new();
                super::sema::assigned_names(s, &mut names);
                names
                    .into_iter()
                    .map(|n| {
                        let ty = self.sema.top_ty(self.sema.pkg_of(self.id()), n.sym);
                        let kind = if matches!(ty, LTy::Func(_)) {
                            SymbolKind::FUNCTION
                        } else {
                            SymbolKind::VARIABLE
                        };
                        sym(
                            n.sym.to_string(),
                            Some(self.sema.ty_str(&ty)),
                            kind,
                            s.span,
                            n.span,
                            None,
                        )
                    })
                    .collect()
            }
            StmtKind::If(i) => i
                .body
                .iter()
                .chain(&i.orelse)
                .flat_map(|s| self.stmt_symbols(s))
                .collect(),
            _ => Vec::new(),
        }
    }

    // ------------------------------------------------------------ code actions ----

    pub fn code_actions(&self, range: Range, uri: &Url, db: &Db) -> Vec<CodeAction> {
        let lo = self.offset(range.start);
        let hi = self.offset(range.end);
        let mut out = Vec::new();
        for f in self.result.findings(db) {
            let (Some(span), Some((dlo, dhi))) = (f.span, f.delete) else {
                continue;
            };
            let Some(fd) = self.result.file_of(span.file) else {
                continue;
            };
            if fd.path != self.file.path || span.hi < lo || span.lo > hi {
                continue;
            }
            let text = fd.text();
            let starts = fd.src.line_starts();
            let diag_range = pos::range(text, starts, span.lo, span.hi, self.enc);
            let edit_range = pos::range(text, starts, dlo as u32, dhi as u32, self.enc);
            let title = match f.code.as_str() {
                "unused-import" => "Remove the unused import".to_string(),
                "reimport" => "Remove the repeated import".to_string(),
                _ => format!("Fix: {}", f.message),
            };
            let mut changes = HashMap::new();
            changes.insert(uri.clone(), vec![TextEdit::new(edit_range, String::new())]);
            out.push(CodeAction {
                title,
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![super::server::to_diagnostic_at(f, diag_range)]),
                edit: Some(WorkspaceEdit {
                    changes: Some(changes),
                    ..Default::default()
                }),
                is_preferred: Some(true),
                ..Default::default()
            });
        }
        out
    }
}

/// `kcl fmt` on a buffer: one edit replacing the text, none when it is formatted or does not
/// parse.
pub fn format(text: &str, name: &str, enc: Encoding) -> Vec<TextEdit> {
    match crate::fmt::format_source(name, text) {
        Ok(f) if f != text => {
            let starts = pos::line_starts(text);
            vec![TextEdit::new(
                pos::range(text, &starts, 0, text.len() as u32, enc),
                f,
            )]
        }
        _ => Vec::new(),
    }
}

/// Hover text of a definition.
pub fn describe(sema: &Sema, d: &Def, ty: &LTy) -> Option<String> {
    let code = |s: String| format!("```kcl\n{s}\n```");
    Some(match d {
        Def::Top { pkg, name } => {
            let top = sema.top(*pkg, *name)?;
            let pkgpath = &sema.pkgs[*pkg as usize].path;
            match top.kind {
                TopKind::Schema => {
                    let sr = SchemaRef {
                        pkg: *pkg,
                        name: *name,
                    };
                    let st = sema.schema(sr)?;
                    let mut head = format!("schema {name}");
                    if let Some(p) = &st.parent {
                        let names: Vec<&str> = p.names.iter().map(|n| n.sym.as_str()).collect();
                        head.push_str(&format!("({})", names.join(".")));
                    }
                    let mut s = code(head);
                    if &**pkgpath != crate::parser::loader::MAIN_PKG {
                        s.push_str(&format!("\n\npackage `{pkgpath}`"));
                    }
                    if let Some(doc) = &st.doc {
                        s.push_str("\n\n");
                        s.push_str(&doc_summary(&doc.value));
                    }
                    let members = sema.members(sr);
                    if !members.is_empty() {
                        s.push_str("\n\nAttributes:\n");
                        for m in members.iter().filter(|m| m.declared) {
                            s.push_str(&format!(
                                "- `{}{}: {}`{}\n",
                                m.name,
                                if m.optional { "?" } else { "" },
                                member_ty_text(sema, m),
                                if m.required() { " (required)" } else { "" }
                            ));
                        }
                    }
                    s
                }
                TopKind::Rule => code(format!("rule {name}")),
                TopKind::Alias => {
                    let st = sema.top_stmt(*pkg, top)?;
                    let t = match &st.kind {
                        StmtKind::TypeAlias(a) => a.ty.span.text().map(|t| t.to_string()),
                        _ => None,
                    };
                    code(format!("type {name} = {}", t.unwrap_or_default()))
                }
                TopKind::Var => code(format!(
                    "{name}: {}",
                    sema.ty_str(&sema.top_ty(*pkg, *name))
                )),
            }
        }
        Def::Attr { schema, attr, .. } => {
            let m = sema.member(*schema, *attr)?;
            let mut s = code(format!(
                "{}{}: {}{}",
                attr,
                if m.optional { "?" } else { "" },
                member_ty_text(sema, &m),
                m.default
                    .as_ref()
                    .map(|d| format!(" = {}", first_line(d)))
                    .unwrap_or_default()
            ));
            s.push_str(&format!(
                "\n\nattribute of schema `{}`{}",
                sema.schema_name(m.owner),
                if m.required() { " (required)" } else { "" }
            ));
            if let Some(doc) = sema.schema(m.owner).and_then(|st| st.doc.as_ref())
                && let Some(ad) = attr_doc(&doc.value, attr.as_str())
            {
                s.push_str("\n\n");
                s.push_str(&ad);
            }
            if let Some(dflt) = &m.default {
                s.push_str(&format!("\n\ndefault: `{}`", first_line(dflt)));
            }
            s
        }
        Def::Local { name, .. } => code(format!("{name}: {}", sema.ty_str(ty))),
        Def::Import { name, .. } => code(format!("import {name}: {}", sema.ty_str(ty))),
        Def::Pkg(p) => {
            let pkg = &sema.pkgs[*p as usize];
            format!(
                "{}\n\n{}",
                code(format!("package {}", pkg.path)),
                pkg.dir.display()
            )
        }
        Def::SysModule(m) => code(format!("module {m}")) + "\n\nsystem module",
        Def::Builtin(n) => {
            let f = signatures::builtin(n)?;
            format!("{}\n\n{}", code(f.label(None)), f.doc)
        }
        Def::SysFunc(m, n) => {
            let f = signatures::system_function(m, n)?;
            format!("{}\n\n{}", code(f.label(Some(m))), f.doc)
        }
        Def::StrMethod(n) => {
            let f = signatures::str_method(n)?;
            format!("{}\n\n{}", code(format!("str.{}", f.label(None))), f.doc)
        }
    })
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("");
    if s.lines().count() > 1 {
        format!("{l} ...")
    } else {
        l.to_string()
    }
}

fn member_ty_text(sema: &Sema, m: &Member) -> String {
    if m.ty_text.is_empty() {
        sema.ty_str(&m.ty)
    } else {
        m.ty_text.clone()
    }
}
