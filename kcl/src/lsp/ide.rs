//! The editor features over a unit's [`Sema`]: hover, completion, definition, references,
//! rename, symbols, formatting, semantic tokens, inlay hints, signature help and quick fixes.
//! Everything here reads a snapshot (a unit's result and its model) and returns protocol types.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsp_types::{
    CodeAction, CodeActionKind, CompletionItem, CompletionItemKind, CompletionItemLabelDetails,
    DocumentSymbol, Documentation, Hover, HoverContents, InlayHint, InlayHintKind, InlayHintLabel,
    InsertTextFormat, Location, MarkupContent, MarkupKind, ParameterInformation, ParameterLabel,
    Range, SemanticToken, SignatureHelp, SignatureInformation, SymbolInformation, SymbolKind,
    TextEdit, Url, WorkspaceEdit,
};

use crate::ast::{FileId, Span, StmtKind, Symbol, source_map};
use crate::lexer::{Tok, lex};

use super::db::{Db, FileData, UnitResult};
use super::pos::{self, Encoding};
use super::sema::{Def, LTy, Member, Role, SchemaRef, Sema, TopKind, attr_doc, doc_summary};
use super::signatures::{self, FnSig};

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

    // ------------------------------------------------------------- completion ----

    pub fn completion(&self, p: lsp_types::Position, snippets: bool) -> Vec<CompletionItem> {
        let off = self.offset(p);
        let text = self.text();
        let off = (off as usize).min(text.len());
        let line_start = text[..off].rfind('\n').map_or(0, |i| i + 1);
        let line = &text[line_start..off];
        let word_len = line
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .map(char::len_utf8)
            .sum::<usize>();
        let before_word = &line[..line.len() - word_len];
        if let Some(rest) = line.trim_start().strip_prefix("import ") {
            return self.import_paths(rest.trim());
        }
        if before_word.ends_with('.') {
            return self.members_after_dot(before_word, off as u32);
        }
        let walked = self.sema.walk_file(self.id(), Some(off as u32));
        let prefix = before_word.trim_end();
        let key_position = prefix.is_empty()
            || prefix.ends_with('{')
            || prefix.ends_with(',')
            || prefix.trim().is_empty();
        if key_position
            && let Some((span, ty)) = walked.config_at(off as u32)
            && !ty.schemas().is_empty()
        {
            let set = keys_set(text, *span);
            let mut items = Vec::new();
            for sr in ty.schemas() {
                for m in self.sema.members(sr).iter() {
                    if !set.contains(m.name.as_str()) {
                        items.push(attr_item(&self.sema, m));
                    }
                }
            }
            return items;
        }
        let mut items = Vec::new();
        let mut seen = std::collections::HashSet::new();
        if let Some(snap) = &walked.scope {
            for (n, d, t) in &snap.locals {
                if seen.insert(*n) {
                    items.push(name_item(&self.sema, *n, d, t, snippets));
                }
            }
            if let Some(sr) = snap.schema {
                for m in self.sema.members(sr).iter() {
                    if seen.insert(m.name) {
                        let mut it = attr_item(&self.sema, m);
                        it.insert_text = None;
                        items.push(it);
                    }
                }
            }
        }
        let pkg = self.sema.pkg_of(self.id());
        for n in &self.sema.pkgs[pkg as usize].order {
            if seen.insert(*n) {
                let d = Def::Top { pkg, name: *n };
                let t = self.sema.top_ty(pkg, *n);
                items.push(name_item(&self.sema, *n, &d, &t, snippets));
                if let LTy::SchemaType(sr) = t
                    && snippets
                {
                    items.push(schema_snippet(&self.sema, sr, n.as_str()));
                }
            }
        }
        for ((f, n), (t, decl)) in &self.sema.imports {
            let same = *f == self.id() || (pkg == 0 && self.sema.pkg_of(*f) == 0);
            if same && seen.insert(*n) {
                let ty = match t {
                    crate::parser::loader::ImportTarget::Package(_) => {
                        self.sema.target_pkg(t).map_or(LTy::Any, LTy::Pkg)
                    }
                    _ => LTy::Any,
                };
                let d = Def::Import {
                    decl: *decl,
                    name: *n,
                };
                items.push(name_item(&self.sema, *n, &d, &ty, snippets));
            }
        }
        for f in signatures::builtins() {
            if !seen.contains(&Symbol::intern(f.name)) {
                items.push(fn_item(f, None, snippets));
            }
        }
        for kw in KEYWORDS {
            items.push(CompletionItem {
                label: kw.to_string(),
                kind: Some(CompletionItemKind::KEYWORD),
                sort_text: Some(format!("9{kw}")),
                ..Default::default()
            });
        }
        items
    }

    /// Members of the value before a `.`: the dotted chain is resolved in the scope at the
    /// cursor (the text may not parse while the user types).
    fn members_after_dot(&self, before: &str, off: u32) -> Vec<CompletionItem> {
        let chain_text: String = before[..before.len() - 1]
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.' || *c == '$')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let parts: Vec<&str> = chain_text.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Vec::new();
        }
        let Some(ty) = self.chain_type(&parts, off) else {
            return Vec::new();
        };
        self.members_of(&ty)
    }

    /// The type of `a.b.c` at `off`.
    fn chain_type(&self, parts: &[&str], off: u32) -> Option<LTy> {
        let walked = self.sema.walk_file(self.id(), Some(off));
        let first = Symbol::intern(parts[0].trim_start_matches('$'));
        let pkg = self.sema.pkg_of(self.id());
        let mut ty = walked
            .scope
            .as_ref()
            .and_then(|s| {
                s.locals
                    .iter()
                    .find(|(n, _, _)| *n == first)
                    .map(|(_, _, t)| t.clone())
                    .or_else(|| {
                        s.schema
                            .and_then(|sr| self.sema.member(sr, first))
                            .map(|m| m.ty)
                    })
            })
            .or_else(|| {
                self.sema
                    .top(pkg, first)
                    .map(|_| self.sema.top_ty(pkg, first))
            })
            .or_else(|| {
                self.sema.import(self.id(), first).map(|(t, _)| match t {
                    crate::parser::loader::ImportTarget::Package(_) => {
                        self.sema.target_pkg(t).map_or(LTy::Any, LTy::Pkg)
                    }
                    crate::parser::loader::ImportTarget::System(m) => {
                        crate::parser::loader::SYSTEM_MODULES
                            .iter()
                            .find(|s| **s == &**m)
                            .map_or(LTy::Any, |s| LTy::SysModule(s))
                    }
                    _ => LTy::Any,
                })
            })?;
        for p in &parts[1..] {
            ty = self.sema.member_of(&ty, Symbol::intern(p))?.0;
        }
        Some(ty)
    }

    fn members_of(&self, ty: &LTy) -> Vec<CompletionItem> {
        let mut items = Vec::new();
        match ty {
            LTy::Schema(_) | LTy::Union(_) => {
                for sr in ty.schemas() {
                    for m in self.sema.members(sr).iter() {
                        let mut it = attr_item(&self.sema, m);
                        it.insert_text = None;
                        items.push(it);
                    }
                }
            }
            LTy::Pkg(p) => {
                let pkg = &self.sema.pkgs[*p as usize];
                for n in &pkg.order {
                    if n.as_str().starts_with('_') {
                        continue;
                    }
                    let d = Def::Top { pkg: *p, name: *n };
                    let t = self.sema.top_ty(*p, *n);
                    items.push(name_item(&self.sema, *n, &d, &t, true));
                    if let LTy::SchemaType(sr) = t {
                        items.push(schema_snippet(&self.sema, sr, n.as_str()));
                    }
                }
            }
            LTy::SysModule(m) => {
                for f in signatures::system_module(m) {
                    items.push(fn_item(f, Some(m), true));
                }
                if *m == "math" {
                    for (c, t) in signatures::MATH_CONSTANTS {
                        items.push(CompletionItem {
                            label: c.to_string(),
                            kind: Some(CompletionItemKind::CONSTANT),
                            detail: Some(t.to_string()),
                            ..Default::default()
                        });
                    }
                }
            }
            LTy::Str => {
                for f in signatures::str_methods() {
                    let mut it = fn_item(f, None, true);
                    it.kind = Some(CompletionItemKind::METHOD);
                    items.push(it);
                }
            }
            _ => {}
        }
        items
    }

    /// Import paths: `kcl.mod` dependencies, the package root's folders, system modules;
    /// after `a.b.` the folders of that package.
    fn import_paths(&self, typed: &str) -> Vec<CompletionItem> {
        let parts: Vec<&str> = typed.split('.').collect();
        let done = &parts[..parts.len().saturating_sub(1)];
        let mut items = Vec::new();
        let root = self.sema.program.root.clone();
        let base: Option<PathBuf> = if done.is_empty() {
            None
        } else if let Some((_, p)) = self.sema.externals.iter().find(|(n, _)| n == done[0]) {
            Some(done[1..].iter().fold(p.clone(), |acc, s| acc.join(s)))
        } else {
            Some(done.iter().fold(root.clone(), |acc, s| acc.join(s)))
        };
        let mut push = |label: String, detail: String, kind| {
            if !items.iter().any(|i: &CompletionItem| i.label == label) {
                items.push(CompletionItem {
                    label,
                    kind: Some(kind),
                    detail: Some(detail),
                    ..Default::default()
                });
            }
        };
        match base {
            None => {
                for (n, p) in &self.sema.externals {
                    push(
                        n.clone(),
                        format!("kcl.mod dependency ({})", p.display()),
                        CompletionItemKind::MODULE,
                    );
                }
                for m in crate::parser::loader::SYSTEM_MODULES {
                    push(
                        m.to_string(),
                        "system module".into(),
                        CompletionItemKind::MODULE,
                    );
                }
                for (n, k) in package_entries(&root) {
                    push(n, "package".into(), k);
                }
            }
            Some(dir) => {
                for (n, k) in package_entries(&dir) {
                    push(n, "package".into(), k);
                }
            }
        }
        items
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

    // ---------------------------------------------------------- semantic tokens ----

    pub fn semantic_tokens(&self) -> Vec<SemanticToken> {
        let text = self.text().to_string();
        let starts = pos::line_starts(&text);
        let walked = self.sema.walk_file(self.id(), None);
        let mut by_lo: HashMap<u32, (&Def, Role)> = HashMap::new();
        for o in &walked.occs {
            by_lo.insert(o.span.lo, (&o.def, o.role));
        }
        let lexed = lex(&text, FileId(u32::MAX), 0);
        // (lo, hi, type, modifiers) in source order
        let mut raw: Vec<(u32, u32, u32, u32)> = Vec::new();
        let mut comments = lexed.comments.iter().peekable();
        for t in &lexed.tokens {
            while let Some(c) = comments.peek() {
                if c.span.lo >= t.lo {
                    break;
                }
                raw.push((c.span.lo, c.span.hi, TT_COMMENT, 0));
                comments.next();
            }
            let class = match t.tok {
                Tok::Ident(sym) => match by_lo.get(&t.lo) {
                    Some((d, role)) => {
                        let (ty, m) = def_token(&self.sema, d);
                        let decl = if *role == Role::Decl {
                            MOD_DECLARATION
                        } else {
                            0
                        };
                        Some((ty, m | decl))
                    }
                    None if CONTEXT_KEYWORDS.contains(&sym.as_str()) => Some((TT_KEYWORD, 0)),
                    None => Some((TT_VARIABLE, 0)),
                },
                Tok::Number => Some((TT_NUMBER, 0)),
                Tok::Str { .. } => Some((TT_STRING, 0)),
                Tok::True | Tok::False | Tok::None | Tok::Undefined => {
                    Some((TT_KEYWORD, MOD_READONLY))
                }
                Tok::Import
                | Tok::As
                | Tok::If
                | Tok::Elif
                | Tok::Else
                | Tok::For
                | Tok::In
                | Tok::Not
                | Tok::And
                | Tok::Or
                | Tok::Is
                | Tok::Lambda
                | Tok::Assert => Some((TT_KEYWORD, 0)),
                Tok::At => Some((TT_DECORATOR, 0)),
                Tok::Eof => None,
                Tok::LParen
                | Tok::RParen
                | Tok::LBracket
                | Tok::RBracket
                | Tok::LBrace
                | Tok::RBrace
                | Tok::Comma
                | Tok::Colon
                | Tok::Dot => None,
                _ => Some((TT_OPERATOR, 0)),
            };
            if let Some((ty, m)) = class {
                raw.push((t.lo, t.hi, ty, m));
            }
        }
        for c in comments {
            raw.push((c.span.lo, c.span.hi, TT_COMMENT, 0));
        }
        // decorators: `@name` as one decorator token
        let mut out = Vec::new();
        let (mut prev_line, mut prev_col) = (0u32, 0u32);
        for (lo, hi, ty, m) in raw {
            // a token spanning lines (a triple-quoted string) is sent line by line
            let mut s = lo;
            while s < hi {
                let p = pos::position(&text, &starts, s, self.enc);
                let line_end = text[s as usize..hi as usize]
                    .find('\n')
                    .map_or(hi, |i| s + i as u32);
                let e = pos::position(&text, &starts, line_end, self.enc);
                let len = e.character.saturating_sub(p.character);
                if len > 0 {
                    let dl = p.line - prev_line;
                    let dc = if dl == 0 {
                        p.character - prev_col
                    } else {
                        p.character
                    };
                    out.push(SemanticToken {
                        delta_line: dl,
                        delta_start: dc,
                        length: len,
                        token_type: ty,
                        token_modifiers_bitset: m,
                    });
                    prev_line = p.line;
                    prev_col = p.character;
                }
                s = line_end + 1;
            }
        }
        out
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

const KEYWORDS: &[&str] = &[
    "schema",
    "rule",
    "mixin",
    "protocol",
    "check",
    "import",
    "as",
    "if",
    "elif",
    "else",
    "for",
    "in",
    "not",
    "and",
    "or",
    "is",
    "lambda",
    "assert",
    "type",
    "True",
    "False",
    "None",
    "Undefined",
    "all",
    "any",
    "map",
    "filter",
];

/// Words the lexer gives as identifiers that are keywords where they stand.
const CONTEXT_KEYWORDS: &[&str] = &[
    "schema", "rule", "mixin", "protocol", "check", "type", "all", "any", "map", "filter",
];

/// Semantic token types, in the legend's order.
pub const TOKEN_TYPES: &[&str] = &[
    "namespace",
    "type",
    "struct",
    "parameter",
    "variable",
    "property",
    "function",
    "method",
    "keyword",
    "comment",
    "string",
    "number",
    "operator",
    "decorator",
];
const TT_NAMESPACE: u32 = 0;
const TT_TYPE: u32 = 1;
const TT_STRUCT: u32 = 2;
const TT_PARAMETER: u32 = 3;
const TT_VARIABLE: u32 = 4;
const TT_PROPERTY: u32 = 5;
const TT_FUNCTION: u32 = 6;
const TT_METHOD: u32 = 7;
const TT_KEYWORD: u32 = 8;
const TT_COMMENT: u32 = 9;
const TT_STRING: u32 = 10;
const TT_NUMBER: u32 = 11;
const TT_OPERATOR: u32 = 12;
const TT_DECORATOR: u32 = 13;
/// Semantic token modifiers, in the legend's order.
pub const TOKEN_MODIFIERS: &[&str] = &["declaration", "readonly", "defaultLibrary"];
const MOD_DECLARATION: u32 = 1;
const MOD_READONLY: u32 = 2;
const MOD_LIBRARY: u32 = 4;

fn def_token(sema: &Sema, d: &Def) -> (u32, u32) {
    match d {
        Def::Top { pkg, name } => match sema.top(*pkg, *name).map(|t| t.kind) {
            Some(TopKind::Schema) => (TT_STRUCT, 0),
            Some(TopKind::Rule) => (TT_FUNCTION, 0),
            Some(TopKind::Alias) => (TT_TYPE, 0),
            _ if matches!(sema.top_ty(*pkg, *name), LTy::Func(_)) => (TT_FUNCTION, 0),
            _ => (TT_VARIABLE, 0),
        },
        Def::Attr { .. } => (TT_PROPERTY, 0),
        Def::Local { .. } => (TT_PARAMETER, 0),
        Def::Import { .. } | Def::Pkg(_) | Def::SysModule(_) => (TT_NAMESPACE, 0),
        Def::Builtin(_) | Def::SysFunc(..) => (TT_FUNCTION, MOD_LIBRARY),
        Def::StrMethod(_) => (TT_METHOD, MOD_LIBRARY),
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

fn attr_item(sema: &Sema, m: &Member) -> CompletionItem {
    let ty = member_ty_text(sema, m);
    let doc = sema
        .schema(m.owner)
        .and_then(|st| st.doc.as_ref())
        .and_then(|d| attr_doc(&d.value, m.name.as_str()));
    CompletionItem {
        label: m.name.to_string(),
        kind: Some(CompletionItemKind::FIELD),
        detail: Some(format!(
            "{}{}: {ty}",
            m.name,
            if m.optional { "?" } else { "" }
        )),
        label_details: Some(CompletionItemLabelDetails {
            detail: Some(format!(": {ty}")),
            description: m.required().then(|| "required".to_string()),
        }),
        documentation: doc.map(|d| {
            Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value: d,
            })
        }),
        // required attributes first
        sort_text: Some(format!(
            "{}{}",
            if m.required() { "0" } else { "1" },
            m.name
        )),
        insert_text: Some(m.name.to_string()),
        ..Default::default()
    }
}

fn name_item(sema: &Sema, n: Symbol, d: &Def, t: &LTy, snippets: bool) -> CompletionItem {
    let kind = match d {
        Def::Top { pkg, name } => match sema.top(*pkg, *name).map(|x| x.kind) {
            Some(TopKind::Schema) => CompletionItemKind::STRUCT,
            Some(TopKind::Rule) => CompletionItemKind::FUNCTION,
            Some(TopKind::Alias) => CompletionItemKind::TYPE_PARAMETER,
            _ if matches!(t, LTy::Func(_)) => CompletionItemKind::FUNCTION,
            _ => CompletionItemKind::VARIABLE,
        },
        Def::Attr { .. } => CompletionItemKind::FIELD,
        Def::Import { .. } | Def::Pkg(_) | Def::SysModule(_) => CompletionItemKind::MODULE,
        Def::Builtin(_) | Def::SysFunc(..) => CompletionItemKind::FUNCTION,
        Def::StrMethod(_) => CompletionItemKind::METHOD,
        Def::Local { .. } => CompletionItemKind::VARIABLE,
    };
    let mut item = CompletionItem {
        label: n.to_string(),
        kind: Some(kind),
        detail: Some(sema.ty_str(t)),
        sort_text: Some(format!("2{n}")),
        ..Default::default()
    };
    if let LTy::Func(f) = t
        && snippets
    {
        item.insert_text = Some(format!("{n}($0)"));
        item.insert_text_format = Some(InsertTextFormat::SNIPPET);
        item.detail = Some(format!("{n}({}) -> {}", f.0.join(", "), sema.ty_str(&f.1)));
    }
    item
}

fn fn_item(f: &FnSig, module: Option<&str>, snippets: bool) -> CompletionItem {
    CompletionItem {
        label: f.name.to_string(),
        kind: Some(CompletionItemKind::FUNCTION),
        detail: Some(f.label(module)),
        documentation: Some(Documentation::String(f.doc.to_string())),
        insert_text: snippets.then(|| format!("{}($0)", f.name)),
        insert_text_format: snippets.then_some(InsertTextFormat::SNIPPET),
        sort_text: Some(format!("3{}", f.name)),
        ..Default::default()
    }
}

/// `Name {...}` with a placeholder per required attribute.
fn schema_snippet(sema: &Sema, sr: SchemaRef, label: &str) -> CompletionItem {
    let members = sema.members(sr);
    let mut body = String::new();
    for (n, m) in (1..).zip(members.iter().filter(|m| m.required())) {
        body.push_str(&format!("\n\t{} = ${{{n}}}", m.name));
    }
    if body.is_empty() {
        body = "\n\t$0".into();
    } else {
        body.push_str("\n\t$0");
    }
    CompletionItem {
        label: format!("{label}{{}}"),
        kind: Some(CompletionItemKind::SNIPPET),
        detail: Some(format!("{} instance", sema.schema_name(sr))),
        filter_text: Some(label.to_string()),
        insert_text: Some(format!("{label} {{{body}\n}}")),
        insert_text_format: Some(InsertTextFormat::SNIPPET),
        sort_text: Some(format!("2{label}~")),
        ..Default::default()
    }
}

/// Keys a config literal already sets (at its top level).
fn keys_set(text: &str, span: Span) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    let body = text.get(span.lo as usize..span.hi as usize).unwrap_or("");
    let mut depth = 0i32;
    for line in body.lines() {
        let t = line.trim();
        if depth == 1 {
            let key: String = t
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let rest = t[key.len()..].trim_start();
            if !key.is_empty()
                && (rest.starts_with('=') || rest.starts_with(':') || rest.starts_with("+="))
            {
                out.insert(key);
            }
        }
        for c in line.chars() {
            match c {
                '{' | '[' | '(' => depth += 1,
                '}' | ']' | ')' => depth -= 1,
                _ => {}
            }
        }
    }
    out
}

/// Sub-packages of a folder: folders holding `.k` files (or folders), and `.k` files.
fn package_entries(dir: &Path) -> Vec<(String, CompletionItemKind)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "vendor" {
            continue;
        }
        let p = e.path();
        if p.is_dir() {
            if name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                out.push((name, CompletionItemKind::MODULE));
            }
        } else if let Some(stem) = name.strip_suffix(".k")
            && !stem.ends_with("_test")
            && stem.chars().all(|c| c.is_alphanumeric() || c == '_')
        {
            out.push((stem.to_string(), CompletionItemKind::FILE));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

// -------------------------------------------------------------- workspace-wide ----

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
        && !matches!(
            s,
            "import"
                | "as"
                | "if"
                | "elif"
                | "else"
                | "for"
                | "in"
                | "not"
                | "and"
                | "or"
                | "is"
                | "lambda"
                | "assert"
                | "True"
                | "False"
                | "None"
                | "Undefined"
                | "schema"
                | "rule"
                | "mixin"
                | "protocol"
                | "check"
                | "type"
                | "all"
                | "any"
                | "map"
                | "filter"
        )
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
    for s in &fd.module.body {
        let (name, kind) = match &s.kind {
            StmtKind::Schema(sc) => (sc.name, SymbolKind::STRUCT),
            StmtKind::Rule(r) => (r.name, SymbolKind::FUNCTION),
            StmtKind::TypeAlias(t) => (t.name, SymbolKind::TYPE_PARAMETER),
            _ => {
                let mut names = Vec::new();
                super::sema::assigned_names(s, &mut names);
                for n in names {
                    if matches(n.sym.as_str()) {
                        out.push(SymbolInformation {
                            name: n.sym.to_string(),
                            kind: SymbolKind::VARIABLE,
                            tags: None,
                            deprecated: None,
                            location: Location::new(
                                uri.clone(),
                                pos::range(text, starts, n.span.lo, n.span.hi, enc),
                            ),
                            container_name: Some(container.clone()),
                        });
                    }
                }
                continue;
            }
        };
        if matches(name.sym.as_str()) {
            out.push(SymbolInformation {
                name: name.sym.to_string(),
                kind,
                tags: None,
                deprecated: None,
                location: Location::new(
                    uri.clone(),
                    pos::range(text, starts, name.span.lo, name.span.hi, enc),
                ),
                container_name: Some(container.clone()),
            });
        }
    }
    out
}
