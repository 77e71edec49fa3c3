//! The server loop: the main thread reads messages, applies buffer changes to the database
//! (parsing the edited file at once) and hands work out: requests to a small pool of workers,
//! re-analysis to the diagnostics thread. Every request runs under `catch_unwind`: a panic is
//! logged and answered with an error, and the server goes on. `$/cancelRequest` sets the
//! request's flag; workers check it between units and answer `RequestCancelled`. The
//! diagnostics thread takes every pending change before each unit, so a burst of edits is
//! analysed once, newest first.
//!
//! Here: the main loop, notifications and the hand-out of requests; [`requests`]: answering
//! them; [`diagnostics`]: the diagnostics thread.

use std::collections::HashMap;
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

use super::db::{Db, Unit, lock};
use super::ide::{self};
use super::pos::{self, Encoding};
use crate::pkg::resolve::normalize;

mod diagnostics;
mod requests;

use diagnostics::diagnostics_loop;
pub(crate) use diagnostics::to_diagnostic_at;
use requests::{ReqCtx, ReqError, handle};

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
