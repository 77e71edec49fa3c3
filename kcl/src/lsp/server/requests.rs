//! Requests: each one decoded, answered from a snapshot of its document's unit (or, for
//! references and rename, of every unit), and checked for cancellation between units.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lsp_server::Request;
use lsp_types::request::Request as _;
use lsp_types::{self as lt, Url};
use serde_json::{Value, json};

use super::super::db::Db;
use super::super::ide::{self, Snapshot};
use super::super::pos::Encoding;
use super::path_of;

pub(super) struct ReqCtx {
    pub(super) enc: Encoding,
    pub(super) snippets: bool,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) debug: bool,
}

impl ReqCtx {
    fn check(&self) -> Result<(), ReqError> {
        if self.cancel.load(Ordering::SeqCst) {
            Err(ReqError::Canceled)
        } else {
            Ok(())
        }
    }
}

pub(super) enum ReqError {
    Canceled,
    Invalid(String),
    Failed(String),
    Unknown,
}

fn params<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ReqError> {
    serde_json::from_value(v).map_err(|e| ReqError::Invalid(e.to_string()))
}

/// The snapshot for a document: its unit's result and model.
fn snapshot(db: &Db, uri: &Url, enc: Encoding) -> Result<Snapshot, ReqError> {
    let path = path_of(uri).ok_or_else(|| ReqError::Invalid(format!("not a file URI: {uri}")))?;
    let file = db
        .file(&path)
        .ok_or_else(|| ReqError::Failed(format!("cannot read {}", path.display())))?;
    let mut unit = db.unit_of(&path);
    let mut result = db.result(&unit);
    if result.file_by_path(&path).is_none() {
        // a file its unit did not load (not listed): its folder alone
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        unit = Arc::new(super::super::db::Unit {
            key: path.clone(),
            dir,
            files: vec![path.display().to_string()],
        });
        result = db.result(&unit);
    }
    let sema = result.sema();
    Ok(Snapshot {
        result,
        sema,
        file,
        enc,
    })
}

fn to_value<T: serde::Serialize>(v: T) -> Result<Value, ReqError> {
    serde_json::to_value(v).map_err(|e| ReqError::Failed(e.to_string()))
}

pub(super) fn handle(db: &Db, ctx: &ReqCtx, req: Request) -> Result<Value, ReqError> {
    use lt::request as R;
    let enc = ctx.enc;
    match req.method.as_str() {
        R::HoverRequest::METHOD => {
            let p: lt::HoverParams = params(req.params)?;
            let s = snapshot(db, &p.text_document_position_params.text_document.uri, enc)?;
            to_value(s.hover(p.text_document_position_params.position))
        }
        R::GotoDefinition::METHOD => {
            let p: lt::GotoDefinitionParams = params(req.params)?;
            let s = snapshot(db, &p.text_document_position_params.text_document.uri, enc)?;
            to_value(s.definition(p.text_document_position_params.position))
        }
        R::Completion::METHOD => {
            let p: lt::CompletionParams = params(req.params)?;
            let s = snapshot(db, &p.text_document_position.text_document.uri, enc)?;
            let items = s.completion(p.text_document_position.position, ctx.snippets);
            to_value(lt::CompletionResponse::List(lt::CompletionList {
                is_incomplete: false,
                items,
            }))
        }
        R::SignatureHelpRequest::METHOD => {
            let p: lt::SignatureHelpParams = params(req.params)?;
            let s = snapshot(db, &p.text_document_position_params.text_document.uri, enc)?;
            to_value(s.signature_help(p.text_document_position_params.position))
        }
        R::References::METHOD => {
            let p: lt::ReferenceParams = params(req.params)?;
            let s = snapshot(db, &p.text_document_position.text_document.uri, enc)?;
            let locs = references(db, ctx, &s, p.text_document_position.position)?
                .into_iter()
                .filter(|(_, role)| {
                    p.context.include_declaration || *role != super::super::sema::Role::Decl
                })
                .map(|(l, _)| l)
                .collect::<Vec<_>>();
            to_value(locs)
        }
        R::PrepareRenameRequest::METHOD => {
            let p: lt::TextDocumentPositionParams = params(req.params)?;
            let s = snapshot(db, &p.text_document.uri, enc)?;
            match ide::rename_target(&s, p.position, db) {
                Ok((_, span)) => {
                    let (_, range) = ide::span_range(span, enc)
                        .ok_or_else(|| ReqError::Failed("no position".into()))?;
                    to_value(lt::PrepareRenameResponse::Range(range))
                }
                Err(m) => Err(ReqError::Failed(m)),
            }
        }
        R::Rename::METHOD => {
            let p: lt::RenameParams = params(req.params)?;
            let s = snapshot(db, &p.text_document_position.text_document.uri, enc)?;
            to_value(rename(
                db,
                ctx,
                &s,
                p.text_document_position.position,
                &p.new_name,
            )?)
        }
        R::DocumentSymbolRequest::METHOD => {
            let p: lt::DocumentSymbolParams = params(req.params)?;
            let s = snapshot(db, &p.text_document.uri, enc)?;
            to_value(lt::DocumentSymbolResponse::Nested(s.document_symbols()))
        }
        R::WorkspaceSymbolRequest::METHOD => {
            let p: lt::WorkspaceSymbolParams = params(req.params)?;
            // parsed files only: listing names needs no unit analysis
            let mut out = Vec::new();
            let units = db.units();
            let mut files: Vec<&PathBuf> = units.primary.keys().collect();
            files.sort();
            for path in files {
                ctx.check()?;
                if let Some(fd) = db.file(path) {
                    out.extend(ide::workspace_symbols(&fd, &p.query, enc));
                }
                if out.len() >= 1000 {
                    break;
                }
            }
            out.truncate(1000);
            to_value(out)
        }
        R::Formatting::METHOD => {
            let p: lt::DocumentFormattingParams = params(req.params)?;
            let path = path_of(&p.text_document.uri)
                .ok_or_else(|| ReqError::Invalid("not a file URI".into()))?;
            let f = db
                .file(&path)
                .ok_or_else(|| ReqError::Failed(format!("cannot read {}", path.display())))?;
            to_value(ide::format(f.text(), &path.display().to_string(), enc))
        }
        R::CodeActionRequest::METHOD => {
            let p: lt::CodeActionParams = params(req.params)?;
            let s = snapshot(db, &p.text_document.uri, enc)?;
            let actions: Vec<lt::CodeActionOrCommand> = s
                .code_actions(p.range, &p.text_document.uri, db)
                .into_iter()
                .map(lt::CodeActionOrCommand::CodeAction)
                .collect();
            to_value(actions)
        }
        R::InlayHintRequest::METHOD => {
            let p: lt::InlayHintParams = params(req.params)?;
            let s = snapshot(db, &p.text_document.uri, enc)?;
            to_value(s.inlay_hints(p.range))
        }
        R::SemanticTokensFullRequest::METHOD => {
            let p: lt::SemanticTokensParams = params(req.params)?;
            let s = snapshot(db, &p.text_document.uri, enc)?;
            to_value(lt::SemanticTokens {
                result_id: None,
                data: s.semantic_tokens(),
            })
        }
        "kcl/debug/panic" if ctx.debug => panic!("kcl/debug/panic asked for a panic"),
        "kcl/debug/stats" if ctx.debug => Ok(json!({
            "parsed": db.parsed.load(Ordering::Relaxed),
            "loaded": db.loaded.load(Ordering::Relaxed),
            "checked": db.checked.load(Ordering::Relaxed),
        })),
        "kcl/debug/sleep" if ctx.debug => {
            // a long request that honours cancellation (the cancellation test)
            for _ in 0..500 {
                ctx.check()?;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Ok(Value::Null)
        }
        _ => Err(ReqError::Unknown),
    }
}

/// Runs `f` on every unit of the workspace with its model and the files it reports on.
fn for_each_unit(
    db: &Db,
    ctx: &ReqCtx,
    mut f: impl FnMut(
        &super::super::db::UnitResult,
        &super::super::sema::Sema,
        Vec<Arc<super::super::db::FileData>>,
    ),
) -> Result<(), ReqError> {
    let units = db.units();
    for (i, u) in units.units.iter().enumerate() {
        ctx.check()?;
        let r = db.result(u);
        let sema = r.sema();
        let files: Vec<_> = r
            .main_files
            .iter()
            .filter(|p| units.primary.get(*p) == Some(&i))
            .filter_map(|p| sema.file_by_path(p).cloned())
            .collect();
        f(&r, &sema, files);
    }
    Ok(())
}

/// Every reference to the symbol at `p`, workspace-wide: each unit's files are walked (their
/// own unit's model resolves them) and names whose definition is the same place are kept.
fn references(
    db: &Db,
    ctx: &ReqCtx,
    s: &Snapshot,
    p: lt::Position,
) -> Result<Vec<(lt::Location, super::super::sema::Role)>, ReqError> {
    let off = s.offset(p);
    let walked = s.sema.walk_file(s.file_id(), None);
    let Some(occ) = walked.occ_at(off) else {
        return Ok(Vec::new());
    };
    let Some(key) = ide::def_key(&s.sema, &occ.def) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<(lt::Location, super::super::sema::Role)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut visit = |sema: &super::super::sema::Sema, fd: &super::super::db::FileData| {
        if !seen.insert(fd.path.clone()) {
            return;
        }
        for r in refs_of(db, sema, fd).iter() {
            if r.key == key
                && let Some(l) = ide::location(crate::ast::Span::new(fd.id(), r.lo, r.hi), ctx.enc)
            {
                out.push((l, r.role));
            }
        }
    };
    // the asking file's own unit first (a file outside every workspace folder too)
    if let Some(fd) = s.sema.file_by_path(&s.file.path) {
        visit(&s.sema, fd);
    }
    for_each_unit(db, ctx, |_, sema, files| {
        for f in files {
            visit(sema, &f);
        }
    })?;
    out.sort_by(|a, b| {
        (
            a.0.uri.as_str(),
            a.0.range.start.line,
            a.0.range.start.character,
        )
            .cmp(&(
                b.0.uri.as_str(),
                b.0.range.start.line,
                b.0.range.start.character,
            ))
    });
    out.dedup_by(|a, b| a.0 == b.0);
    Ok(out)
}

/// The references index of a file, from the database's cache while the model is the same.
fn refs_of(
    db: &Db,
    sema: &super::super::sema::Sema,
    fd: &super::super::db::FileData,
) -> Arc<Vec<ide::RefEntry>> {
    db.refs_cached(sema, fd, || ide::file_refs(sema, fd.id()))
}

fn rename(
    db: &Db,
    ctx: &ReqCtx,
    s: &Snapshot,
    p: lt::Position,
    new: &str,
) -> Result<lt::WorkspaceEdit, ReqError> {
    let (def, _) = ide::rename_target(s, p, db).map_err(ReqError::Failed)?;
    let new_clean = new.strip_prefix('$').unwrap_or(new);
    if !ide::valid_name(new_clean) {
        return Err(ReqError::Failed(format!(
            "'{new}' is not a valid KCL name (letters, digits and '_', not a keyword)"
        )));
    }
    if let Some(why) = ide::rename_conflict(&s.sema, &def, new_clean) {
        return Err(ReqError::Failed(format!("cannot rename: {why}")));
    }
    let refs = references(db, ctx, s, p)?;
    let mut changes: HashMap<Url, Vec<lt::TextEdit>> = HashMap::new();
    for (l, _) in refs {
        let path = l
            .uri
            .to_file_path()
            .map_err(|_| ReqError::Failed("bad location".into()))?;
        if !ide::editable(&path, db) {
            return Err(ReqError::Failed(format!(
                "cannot rename: {} refers to it and is not the workspace's to edit",
                path.display()
            )));
        }
        changes
            .entry(l.uri.clone())
            .or_default()
            .push(lt::TextEdit::new(l.range, new_clean.to_string()));
    }
    Ok(lt::WorkspaceEdit {
        changes: Some(changes),
        ..Default::default()
    })
}
