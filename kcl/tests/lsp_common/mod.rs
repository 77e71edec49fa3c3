//! An LSP client for the protocol tests, benchmarks and the fuzz driver: the server runs
//! in-process on `lsp_server::Connection::memory()` (messages travel as values; parameters
//! are JSON and decoded by the server as over stdio, which `lsp.rs` also tests through the
//! binary).
#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lsp_server::{Connection, Message, Notification, Request, RequestId, Response};
use serde_json::{Value, json};

pub struct Client {
    conn: Connection,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
    next: i32,
    /// Notifications received while waiting for something else.
    pub inbox: VecDeque<Notification>,
}

pub fn uri(p: &Path) -> String {
    url::Url::from_file_path(p)
        .expect("absolute path")
        .to_string()
}

impl Client {
    /// Starts a server on `roots` (workspace folders) and initializes it (UTF-16 positions,
    /// snippets, status notifications).
    pub fn start(roots: &[&Path]) -> Client {
        Client::start_with(roots, json!({}))
    }

    /// As [`Client::start`] with extra client capabilities merged in.
    pub fn start_with(roots: &[&Path], general: Value) -> Client {
        let (server, client) = Connection::memory();
        let thread = std::thread::Builder::new()
            .name("lsp-server".into())
            .spawn(move || {
                kusion_kcl::lsp::serve(
                    server,
                    kusion_kcl::lsp::Options {
                        debug_requests: true,
                    },
                )
            })
            .expect("spawn");
        let mut c = Client {
            conn: client,
            thread: Some(thread),
            next: 1,
            inbox: VecDeque::new(),
        };
        let folders: Vec<Value> = roots
            .iter()
            .map(|r| json!({"uri": uri(r), "name": r.display().to_string()}))
            .collect();
        let mut caps = json!({
            "textDocument": {
                "completion": {"completionItem": {"snippetSupport": true}},
                "hover": {"contentFormat": ["markdown"]},
            },
            "workspace": {"workspaceFolders": true},
        });
        if !general.is_null() && general.as_object().is_some_and(|o| !o.is_empty()) {
            caps["general"] = general;
        }
        let init = c.request(
            "initialize",
            json!({
                "processId": null,
                "rootUri": roots.first().map(|r| uri(r)),
                "capabilities": caps,
                "workspaceFolders": folders,
                "initializationOptions": {"statusNotifications": true},
            }),
        );
        assert!(init.is_ok(), "initialize failed: {init:?}");
        c.notify("initialized", json!({}));
        c
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.conn
            .sender
            .send(Message::Notification(Notification::new(
                method.into(),
                params,
            )))
            .expect("send");
    }

    /// Sends a request without waiting; its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> RequestId {
        let id: RequestId = self.next.into();
        self.next += 1;
        self.conn
            .sender
            .send(Message::Request(Request::new(
                id.clone(),
                method.into(),
                params,
            )))
            .expect("send");
        id
    }

    /// Waits for the response to `id` (notifications meanwhile go to the inbox).
    pub fn response(&mut self, id: RequestId) -> Response {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.conn.receiver.recv_timeout(left) {
                Ok(Message::Response(r)) if r.id == id => return r,
                Ok(Message::Response(_)) => {}
                Ok(Message::Notification(n)) => self.inbox.push_back(n),
                Ok(Message::Request(r)) => {
                    // server-to-client requests: answered with null
                    let _ = self
                        .conn
                        .sender
                        .send(Message::Response(Response::new_ok(r.id, Value::Null)));
                }
                Err(e) => panic!("no response to {id:?}: {e}"),
            }
        }
    }

    /// A request's result, or its error.
    pub fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Value, lsp_server::ResponseError> {
        let id = self.send_request(method, params);
        let r = self.response(id);
        r.response_result
    }

    /// The result of a request that must succeed.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        match self.request(method, params) {
            Ok(v) => v,
            Err(e) => panic!("{method} failed: {e:?}"),
        }
    }

    /// Waits for a notification matching `pred` (earlier ones in the inbox count).
    pub fn wait_for(
        &mut self,
        timeout: Duration,
        mut pred: impl FnMut(&Notification) -> bool,
    ) -> Option<Notification> {
        if let Some(i) = self.inbox.iter().position(&mut pred) {
            return self.inbox.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.conn.receiver.recv_timeout(left) {
                Ok(Message::Notification(n)) => {
                    if pred(&n) {
                        return Some(n);
                    }
                    self.inbox.push_back(n);
                }
                Ok(Message::Request(r)) => {
                    let _ = self
                        .conn
                        .sender
                        .send(Message::Response(Response::new_ok(r.id, Value::Null)));
                }
                Ok(Message::Response(_)) => {}
                Err(_) => return None,
            }
        }
    }

    /// Waits until the server has analysed everything pending (`kcl/status` idle).
    pub fn wait_idle(&mut self) -> Value {
        let n = self
            .wait_for(Duration::from_secs(120), |n| n.method == "kcl/status")
            .expect("the server never became idle");
        n.params
    }

    /// Drops every notification received so far.
    pub fn clear(&mut self) {
        while let Ok(m) = self.conn.receiver.try_recv() {
            if let Message::Notification(n) = m {
                self.inbox.push_back(n);
            }
        }
        self.inbox.clear();
    }

    /// The next diagnostics published for `uri`.
    pub fn diagnostics(&mut self, uri: &str, timeout: Duration) -> Option<Vec<Value>> {
        let n = self.wait_for(timeout, |n| {
            n.method == "textDocument/publishDiagnostics" && n.params["uri"] == uri
        })?;
        Some(
            n.params["diagnostics"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        )
    }

    pub fn open(&self, path: &Path, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri(path), "languageId": "kcl", "version": 1, "text": text}}),
        );
    }

    /// Replaces a range (0-based line/character) with `text`.
    pub fn edit(&self, path: &Path, version: i32, range: [u32; 4], text: &str) {
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": uri(path), "version": version},
                "contentChanges": [{
                    "range": {"start": {"line": range[0], "character": range[1]},
                              "end": {"line": range[2], "character": range[3]}},
                    "text": text,
                }],
            }),
        );
    }

    /// Shuts the server down and waits for its thread.
    pub fn shutdown(mut self) {
        let _ = self.request("shutdown", Value::Null);
        self.notify("exit", Value::Null);
        if let Some(t) = self.thread.take() {
            let r = t.join().expect("server thread panicked");
            assert!(r.is_ok(), "server failed: {r:?}");
        }
    }
}

/// `{"textDocument": {"uri"}, "position": {...}}`.
pub fn at(path: &Path, line: u32, character: u32) -> Value {
    json!({"textDocument": {"uri": uri(path)}, "position": {"line": line, "character": character}})
}

/// Line and UTF-16 character of the first occurrence of `needle` in `text`, plus `delta` bytes.
pub fn find(text: &str, needle: &str, delta: usize) -> (u32, u32) {
    let off = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in text"))
        + delta;
    let line = text[..off].matches('\n').count() as u32;
    let start = text[..off].rfind('\n').map_or(0, |i| i + 1);
    (line, text[start..off].encode_utf16().count() as u32)
}
