//! Completion: schema attributes inside config literals (required ones marked), members after
//! a dot, names in scope, system functions and string methods, import paths and `kcl.mod`
//! dependencies, keywords and snippets; and the items each kind becomes.

use std::path::{Path, PathBuf};

use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionItemLabelDetails, Documentation,
    InsertTextFormat, MarkupContent, MarkupKind,
};

use crate::ast::{Span, Symbol};
use crate::lexer::KEYWORDS;

use super::super::sema::{Def, LTy, Member, SchemaRef, Sema, TopKind, attr_doc};
use super::super::signatures::{self, FnSig};
use super::{Snapshot, member_ty_text};

impl Snapshot {
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
    pub(super) fn chain_type(&self, parts: &[&str], off: u32) -> Option<LTy> {
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
