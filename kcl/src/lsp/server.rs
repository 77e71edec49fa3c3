//! The server loop: the main thread reads messages, applies buffer changes to the database
//! (parsing the edited file at once) and hands work out: requests to a small pool of workers,
//! re-analysis to the diagnostics thread. Every request runs under `catch_unwind`: a panic is
//! logged and answered with an error, and the server goes on. `$/cancelRequest` sets the
//! request's flag; workers check it between units and answer `RequestCancelled`. The
//! diagnostics thread takes every pending change before each unit, so a burst of edits is
//! analysed once, newest first.

use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::Notification as _;
use lsp_types::request::Request as _;
use lsp_types::{self as lt, Url};
use serde_json::{Value, json};

use super::db::{Db, Unit, findings_by_file, lock, normalize};
use super::ide::{self, Snapshot};
use super::pos::{self, Encoding};

/// Panics caught in requests and analyses since the process started (the fuzz driver's
/// figure: each one was answered with an error and the server went on).
pub static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Server options that are not part of the protocol.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Answer `kcl/debug/panic` by panicking (tests of the panic isolation).
    pub debug_requests: bool,
}

type Job = Box<dyn FnOnce() + Send>;

struct Server {
    sender: Sender<Message>,
    db: Arc<Db>,
    enc: Encoding,
    snippets: bool,
    status: bool,
    opts: Options,
    pending: Arc<Mutex<HashMap<RequestId, Arc<AtomicBool>>>>,
    jobs: Sender<Job>,
    diag: Sender<DiagMsg>,
}

enum DiagMsg {
    /// Re-analyse these units (the first ones first).
    Dirty(Vec<Arc<Unit>>),
    Stop,
}

/// Runs the server on a connection until `exit`.
pub fn serve(conn: Connection, opts: Options) -> anyhow::Result<()> {
    let (id, params) = conn.initialize_start()?;
    let init: lt::InitializeParams = serde_json::from_value(params)?;
    let offered: Vec<String> = init
        .capabilities
        .general
        .as_ref()
        .and_then(|g| g.position_encodings.as_ref())
        .map(|v| v.iter().map(|e| e.as_str().to_string()).collect())
        .unwrap_or_default();
    // UTF-8 when offered: no conversion of columns; else the mandatory UTF-16
    let enc = if offered.iter().any(|e| e == "utf-8") {
        Encoding::Utf8
    } else {
        Encoding::Utf16
    };
    let snippets = init
        .capabilities
        .text_document
        .as_ref()
        .and_then(|t| t.completion.as_ref())
        .and_then(|c| c.completion_item.as_ref())
        .and_then(|c| c.snippet_support)
        .unwrap_or(false);
    let status = init
        .initialization_options
        .as_ref()
        .and_then(|o| o.get("statusNotifications"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut roots: Vec<PathBuf> = init
        .workspace_folders
        .iter()
        .flatten()
        .filter_map(|f| f.uri.to_file_path().ok())
        .collect();
    #[allow(deprecated)] // rootUri/rootPath: clients without workspace folders still send them
    if roots.is_empty() {
        if let Some(p) = init.root_uri.as_ref().and_then(|u| u.to_file_path().ok()) {
            roots.push(p);
        } else if let Some(p) = init.root_path.as_ref() {
            roots.push(PathBuf::from(p));
        }
    }
    let roots: Vec<PathBuf> = roots.iter().map(|r| normalize(r)).collect();
    let watch = init
        .capabilities
        .workspace
        .as_ref()
        .and_then(|w| w.did_change_watched_files.as_ref())
        .and_then(|d| d.dynamic_registration)
        .unwrap_or(false);
    let result = json!({
        "capabilities": capabilities(enc),
        "serverInfo": {"name": "kcl-lsp (kusion-rs)", "version": env!("CARGO_PKG_VERSION")},
    });
    conn.initialize_finish(id, result)?;
    if watch {
        // files changed by other programs (a checkout, `kcl mod`): the client tells us
        let reg = json!({"registrations": [{
            "id": "kcl-watch",
            "method": "workspace/didChangeWatchedFiles",
            "registerOptions": {"watchers": [
                {"globPattern": "**/*.k"},
                {"globPattern": "**/kcl.mod"},
                {"globPattern": "**/kcl.mod.lock"},
                {"globPattern": "**/kcl.yaml"},
            ]},
        }]});
        conn.sender.send(
            Request::new(
                "kcl-watch".to_string().into(),
                "client/registerCapability".into(),
                reg,
            )
            .into(),
        )?;
    }
    tracing::info!(?roots, encoding = enc.name(), "initialized");

    let db = Arc::new(Db::new());
    let (jobs, job_rx) = crossbeam_channel::unbounded::<Job>();
    let mut workers = Vec::new();
    for i in 0..2 {
        let rx = job_rx.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("kcl-lsp-worker-{i}"))
                .stack_size(32 << 20)
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })?,
        );
    }
    let (diag, diag_rx) = crossbeam_channel::unbounded::<DiagMsg>();
    let diag_thread = {
        let db = db.clone();
        let sender = conn.sender.clone();
        std::thread::Builder::new()
            .name("kcl-lsp-diagnostics".into())
            .stack_size(32 << 20)
            .spawn(move || diagnostics_loop(db, sender, diag_rx, enc, status))?
    };
    let mut server = Server {
        sender: conn.sender.clone(),
        db,
        enc,
        snippets,
        status,
        opts,
        pending: Default::default(),
        jobs,
        diag,
    };
    // the initial analysis: every unit of the workspace folders
    let started = Instant::now();
    server.db.set_roots(roots);
    let units = server.db.units();
    tracing::info!(
        units = units.units.len(),
        ms = started.elapsed().as_millis() as u64,
        "units discovered"
    );
    let _ = server.diag.send(DiagMsg::Dirty(units.units.clone()));
    let r = server.main_loop(&conn.receiver);
    let _ = server.diag.send(DiagMsg::Stop);
    drop(server);
    let _ = diag_thread.join();
    for w in workers {
        let _ = w.join();
    }
    r
}

fn capabilities(enc: Encoding) -> Value {
    json!({
        "positionEncoding": enc.name(),
        "textDocumentSync": {
            "openClose": true,
            "change": 2,
            "save": {"includeText": false},
        },
        "hoverProvider": true,
        "completionProvider": {
            "triggerCharacters": [".", "=", ":", " "],
            "resolveProvider": false,
            "completionItem": {"labelDetailsSupport": true},
        },
        "signatureHelpProvider": {"triggerCharacters": ["(", ","]},
        "definitionProvider": true,
        "referencesProvider": true,
        "renameProvider": {"prepareProvider": true},
        "documentSymbolProvider": true,
        "workspaceSymbolProvider": true,
        "documentFormattingProvider": true,
        "codeActionProvider": {"codeActionKinds": ["quickfix"]},
        "inlayHintProvider": true,
        "semanticTokensProvider": {
            "legend": {
                "tokenTypes": ide::TOKEN_TYPES,
                "tokenModifiers": ide::TOKEN_MODIFIERS,
            },
            "full": true,
            "range": false,
        },
        "workspace": {
            "workspaceFolders": {"supported": true, "changeNotifications": true},
        },
    })
}

impl Server {
    fn main_loop(&mut self, rx: &Receiver<Message>) -> anyhow::Result<()> {
        for msg in rx {
            match msg {
                Message::Request(req) => {
                    if req.method == lt::request::Shutdown::METHOD {
                        let _ = self
                            .sender
                            .send(Response::new_ok(req.id, Value::Null).into());
                        // wait for `exit`
                        for m in rx {
                            if let Message::Notification(n) = m
                                && n.method == lt::notification::Exit::METHOD
                            {
                                return Ok(());
                            }
                        }
                        return Ok(());
                    }
                    self.request(req);
                }
                Message::Notification(n) => {
                    if n.method == lt::notification::Exit::METHOD {
                        return Ok(());
                    }
                    let method = n.method.clone();
                    if let Err(e) = catch_unwind(AssertUnwindSafe(|| self.notification(n))) {
                        PANICS.fetch_add(1, Ordering::SeqCst);
                        tracing::error!(method, panic = panic_text(&e), "notification panicked");
                    }
                }
                Message::Response(_) => {}
            }
        }
        Ok(())
    }

    fn notification(&mut self, n: Notification) {
        use lt::notification as N;
        match n.method.as_str() {
            N::DidOpenTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<lt::DidOpenTextDocumentParams>(n.params)
                    && let Some(path) = path_of(&p.text_document.uri)
                {
                    self.db.set_overlay(
                        &path,
                        Arc::from(p.text_document.text),
                        p.text_document.version,
                    );
                    self.changed(&path);
                }
            }
            N::DidChangeTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<lt::DidChangeTextDocumentParams>(n.params)
                    && let Some(path) = path_of(&p.text_document.uri)
                {
                    let mut text = self
                        .db
                        .overlay(&path)
                        .map(|(t, _)| t.to_string())
                        .or_else(|| std::fs::read_to_string(&path).ok())
                        .unwrap_or_default();
                    for c in p.content_changes {
                        text = pos::apply_change(&text, c.range, &c.text, self.enc);
                    }
                    self.db
                        .set_overlay(&path, Arc::from(text), p.text_document.version);
                    self.changed(&path);
                }
            }
            N::DidCloseTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<lt::DidCloseTextDocumentParams>(n.params)
                    && let Some(path) = path_of(&p.text_document.uri)
                {
                    self.db.close_overlay(&path);
                    self.changed(&path);
                }
            }
            N::DidSaveTextDocument::METHOD => {}
            N::DidChangeWatchedFiles::METHOD => {
                if let Ok(p) = serde_json::from_value::<lt::DidChangeWatchedFilesParams>(n.params) {
                    let mut all = false;
                    for c in p.changes {
                        if let Some(path) = path_of(&c.uri) {
                            self.db
                                .disk_changed(&path, c.typ != lt::FileChangeType::CHANGED);
                            all |= c.typ != lt::FileChangeType::CHANGED
                                || path.extension().is_none_or(|e| e != "k");
                            if !all {
                                self.changed(&path);
                            }
                        }
                    }
                    if all {
                        self.db.rediscover();
                        self.db.prune();
                        let _ = self
                            .diag
                            .send(DiagMsg::Dirty(self.db.units().units.clone()));
                    }
                }
            }
            N::DidChangeWorkspaceFolders::METHOD => {
                if let Ok(p) =
                    serde_json::from_value::<lt::DidChangeWorkspaceFoldersParams>(n.params)
                {
                    let mut roots = self.db.roots();
                    for r in &p.event.removed {
                        if let Ok(path) = r.uri.to_file_path() {
                            let path = normalize(&path);
                            roots.retain(|x| *x != path);
                        }
                    }
                    for a in &p.event.added {
                        if let Ok(path) = a.uri.to_file_path() {
                            roots.push(normalize(&path));
                        }
                    }
                    self.db.set_roots(roots);
                    self.db.prune();
                    let _ = self
                        .diag
                        .send(DiagMsg::Dirty(self.db.units().units.clone()));
                }
            }
            N::Cancel::METHOD => {
                if let Ok(p) = serde_json::from_value::<lt::CancelParams>(n.params) {
                    let id: RequestId = match p.id {
                        lt::NumberOrString::Number(i) => i.into(),
                        lt::NumberOrString::String(s) => s.into(),
                    };
                    if let Some(flag) = lock(&self.pending).get(&id) {
                        flag.store(true, Ordering::SeqCst);
                    }
                }
            }
            _ => {}
        }
    }

    /// A file changed: its units are analysed again, its own unit first.
    fn changed(&self, path: &Path) {
        let units = self.db.units_affected_by(path);
        let _ = self.diag.send(DiagMsg::Dirty(units));
    }

    fn request(&self, req: Request) {
        let flag = Arc::new(AtomicBool::new(false));
        lock(&self.pending).insert(req.id.clone(), flag.clone());
        let db = self.db.clone();
        let sender = self.sender.clone();
        let pending = self.pending.clone();
        let ctx = ReqCtx {
            enc: self.enc,
            snippets: self.snippets,
            cancel: flag,
            debug: self.opts.debug_requests,
        };
        let _ = self.status;
        let job: Job = Box::new(move || {
            let id = req.id.clone();
            let method = req.method.clone();
            let started = Instant::now();
            let out = catch_unwind(AssertUnwindSafe(|| handle(&db, &ctx, req)));
            let resp = match out {
                Ok(Ok(v)) if ctx.cancel.load(Ordering::SeqCst) => {
                    let _ = v;
                    Response::new_err(
                        id.clone(),
                        ErrorCode::RequestCanceled as i32,
                        "canceled".into(),
                    )
                }
                Ok(Ok(v)) => Response::new_ok(id.clone(), v),
                Ok(Err(ReqError::Canceled)) => Response::new_err(
                    id.clone(),
                    ErrorCode::RequestCanceled as i32,
                    "canceled".into(),
                ),
                Ok(Err(ReqError::Invalid(m))) => {
                    Response::new_err(id.clone(), ErrorCode::InvalidParams as i32, m)
                }
                Ok(Err(ReqError::Failed(m))) => {
                    Response::new_err(id.clone(), ErrorCode::RequestFailed as i32, m)
                }
                Ok(Err(ReqError::Unknown)) => Response::new_err(
                    id.clone(),
                    ErrorCode::MethodNotFound as i32,
                    format!("unknown method {method}"),
                ),
                Err(e) => {
                    PANICS.fetch_add(1, Ordering::SeqCst);
                    let text = panic_text(&e);
                    tracing::error!(method, panic = text, "request panicked");
                    Response::new_err(
                        id.clone(),
                        ErrorCode::InternalError as i32,
                        format!("internal error in {method}: {text}"),
                    )
                }
            };
            tracing::debug!(
                method,
                ms = started.elapsed().as_secs_f64() * 1e3,
                "request"
            );
            lock(&pending).remove(&id);
            let _ = sender.send(resp.into());
        });
        let _ = self.jobs.send(job);
    }
}

struct ReqCtx {
    enc: Encoding,
    snippets: bool,
    cancel: Arc<AtomicBool>,
    debug: bool,
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

enum ReqError {
    Canceled,
    Invalid(String),
    Failed(String),
    Unknown,
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// The absolute, normalized path of a `file:` URI.
fn path_of(uri: &Url) -> Option<PathBuf> {
    uri.to_file_path().ok().map(|p| normalize(&p))
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
        unit = Arc::new(super::db::Unit {
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

fn handle(db: &Db, ctx: &ReqCtx, req: Request) -> Result<Value, ReqError> {
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
                    p.context.include_declaration || *role != super::sema::Role::Decl
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
    mut f: impl FnMut(&super::db::UnitResult, &super::sema::Sema, Vec<Arc<super::db::FileData>>),
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
) -> Result<Vec<(lt::Location, super::sema::Role)>, ReqError> {
    let off = s.offset(p);
    let walked = s.sema.walk_file(s.file_id(), None);
    let Some(occ) = walked.occ_at(off) else {
        return Ok(Vec::new());
    };
    let Some(key) = ide::def_key(&s.sema, &occ.def) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<(lt::Location, super::sema::Role)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut visit = |sema: &super::sema::Sema, fd: &super::db::FileData| {
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
fn refs_of(db: &Db, sema: &super::sema::Sema, fd: &super::db::FileData) -> Arc<Vec<ide::RefEntry>> {
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

/// A lint finding as a protocol diagnostic at `range`.
pub(crate) fn to_diagnostic_at(f: &crate::cli::lint::Finding, range: lt::Range) -> lt::Diagnostic {
    let tags = match f.code.as_str() {
        "unused-import" | "unused-variable" | "unreachable" => {
            Some(vec![lt::DiagnosticTag::UNNECESSARY])
        }
        "deprecated" => Some(vec![lt::DiagnosticTag::DEPRECATED]),
        _ => None,
    };
    lt::Diagnostic {
        range,
        severity: Some(if f.error {
            lt::DiagnosticSeverity::ERROR
        } else {
            lt::DiagnosticSeverity::WARNING
        }),
        code: (!f.code.is_empty()).then(|| lt::NumberOrString::String(f.code.clone())),
        code_description: None,
        source: Some("kcl".into()),
        message: if f.title.is_empty() {
            f.message.clone()
        } else {
            format!("{}: {}", f.title, f.message)
        },
        related_information: None,
        tags,
        data: f.delete.map(|_| json!({"fixable": true})),
    }
}

/// A finding's range: its span, widened to the word there when it is a point.
fn finding_range(text: &str, starts: &[u32], lo: u32, hi: u32, enc: Encoding) -> lt::Range {
    let mut hi = hi.max(lo);
    if hi == lo {
        let rest = text.get(lo as usize..).unwrap_or("");
        let word: usize = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .map(char::len_utf8)
            .sum();
        hi = lo + word.max(rest.chars().next().map_or(0, |c| c.len_utf8())) as u32;
    }
    pos::range(text, starts, lo, hi, enc)
}

/// Re-analyses dirty units and publishes the diagnostics that changed.
fn diagnostics_loop(
    db: Arc<Db>,
    sender: Sender<Message>,
    rx: Receiver<DiagMsg>,
    enc: Encoding,
    status: bool,
) {
    let mut queue: VecDeque<Arc<Unit>> = VecDeque::new();
    let mut published: HashMap<PathBuf, Vec<lt::Diagnostic>> = HashMap::new();
    let mut batch_start: Option<Instant> = None;
    let mut done = 0usize;
    let take = |m: DiagMsg, queue: &mut VecDeque<Arc<Unit>>| -> bool {
        match m {
            DiagMsg::Stop => false,
            DiagMsg::Dirty(units) => {
                // newest first: the edited file's unit jumps the queue
                for u in units.into_iter().rev() {
                    queue.retain(|x| x.key != u.key);
                    queue.push_front(u);
                }
                true
            }
        }
    };
    loop {
        if queue.is_empty() {
            if let Some(t) = batch_start.take()
                && status
            {
                let _ = sender.send(
                    Notification::new(
                        "kcl/status".into(),
                        json!({"state": "idle", "units": done, "ms": t.elapsed().as_secs_f64() * 1e3}),
                    )
                    .into(),
                );
            }
            done = 0;
            match rx.recv() {
                Ok(m) => {
                    if !take(m, &mut queue) {
                        return;
                    }
                }
                Err(_) => return,
            }
            batch_start.get_or_insert_with(Instant::now);
        }
        while let Ok(m) = rx.try_recv() {
            if !take(m, &mut queue) {
                return;
            }
        }
        let Some(unit) = queue.pop_front() else {
            continue;
        };
        let db2 = db.clone();
        let computed = catch_unwind(AssertUnwindSafe(|| {
            let r = db2.result(&unit);
            let _ = r.findings(&db2);
            r
        }));
        let r = match computed {
            Ok(r) => r,
            Err(e) => {
                PANICS.fetch_add(1, Ordering::SeqCst);
                tracing::error!(unit = %unit.key.display(), panic = panic_text(&e), "analysis panicked");
                continue;
            }
        };
        done += 1;
        let units = db.units();
        let own = units.units.iter().position(|u| u.key == unit.key);
        for (path, findings) in findings_by_file(&r, &db) {
            // a file reports through its primary unit only
            match (units.primary.get(&path), own) {
                (Some(p), Some(o)) if *p != o => continue,
                (Some(_), None) => continue,
                _ => {}
            }
            let Some(fd) = r.file_by_path(&path) else {
                continue;
            };
            let text = fd.text();
            let starts = fd.src.line_starts();
            let mut diags: Vec<lt::Diagnostic> = findings
                .iter()
                .map(|f| {
                    let range = match f.span {
                        Some(s) => finding_range(text, starts, s.lo, s.hi, enc),
                        None => lt::Range::default(),
                    };
                    to_diagnostic_at(f, range)
                })
                .collect();
            diags.dedup();
            if published.get(&path) == Some(&diags) {
                continue;
            }
            let Ok(uri) = Url::from_file_path(&path) else {
                continue;
            };
            let version = db.overlay(&path).map(|(_, v)| v);
            published.insert(path.clone(), diags.clone());
            let params = lt::PublishDiagnosticsParams {
                uri,
                diagnostics: diags,
                version,
            };
            let _ = sender.send(
                Notification::new(lt::notification::PublishDiagnostics::METHOD.into(), params)
                    .into(),
            );
        }
    }
}
