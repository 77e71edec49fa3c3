//! A `kusionctl server` process for end-to-end tests: started on a free port, its banner read
//! for the address and the start-up admin token, and called over HTTP.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

pub struct ApiServer {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The admin token the banner printed.
    pub admin: String,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An agent that returns every status as a response (the tests assert on them).
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

impl ApiServer {
    /// Runs `command` (a `kusionctl server --listen 127.0.0.1:0 ...` command line) with its
    /// standard error in `log`, and waits for its banner.
    pub fn start(mut command: Command, log: &Path) -> ApiServer {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("starting kusionctl server");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut base = None;
        let mut admin = None;
        while base.is_none() || admin.is_none() {
            let line = lines
                .next()
                .unwrap_or_else(|| {
                    panic!(
                        "the server stopped: {}",
                        std::fs::read_to_string(log).unwrap_or_default()
                    )
                })
                .unwrap();
            if let Some(rest) = line.strip_prefix("kusion server listening on ") {
                base = rest.split_whitespace().next().map(str::to_string);
            }
            if let Some((_, token)) = line.split_once("): ") {
                admin = Some(token.trim().to_string());
            }
        }
        ApiServer {
            child,
            base: base.unwrap(),
            admin: admin.unwrap(),
        }
    }

    /// The server process's ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `timeout` for the process to exit; its exit status, or
    /// None when it did not exit in time.
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(sent.success(), "kill -TERM failed");
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// `method path` with `token`; the status and the body (JSON, else the text as a string).
    /// Every response must carry a request ID.
    pub fn call(&self, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let auth = format!("Bearer {token}");
        let agent = agent();
        let mut response = match (method, body) {
            ("GET", _) => agent
                .get(&url)
                .header("Authorization", auth.as_str())
                .call(),
            ("POST", Some(b)) => agent
                .post(&url)
                .header("Authorization", auth.as_str())
                .header("Content-Type", "application/json")
                .send(b.to_string()),
            ("POST", None) => agent
                .post(&url)
                .header("Authorization", auth.as_str())
                .send_empty(),
            _ => panic!("unsupported method {method}"),
        }
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        assert!(
            response.headers().contains_key("x-request-id"),
            "{method} {path}: no request id"
        );
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// A token for `subject` with `scopes` (project → role name), minted over the API with
    /// `admin`; valid for an hour.
    pub fn mint(&self, admin: &str, subject: &str, scopes: Value) -> String {
        let (code, body) = self.call(
            "POST",
            "/api/v1/tokens",
            admin,
            Some(serde_json::json!({"subject": subject, "scopes": scopes, "ttlSeconds": 3600})),
        );
        assert_eq!(code, 201, "minting a token for {subject}: {body}");
        body["token"].as_str().expect("a minted token").to_string()
    }

    /// Polls operation `id` until it is `status` (two minutes at most); an operation that ends
    /// in another state fails the test at once.
    pub fn wait_for(&self, token: &str, id: &str, status: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            let (code, op) = self.call("GET", &format!("/api/v1/operations/{id}"), token, None);
            assert_eq!(code, 200, "{op}");
            if op["status"] == status {
                return op;
            }
            assert!(
                !matches!(
                    op["status"].as_str(),
                    Some("failed" | "blocked" | "rejected" | "succeeded")
                ),
                "waiting for {status}: {op}"
            );
            assert!(std::time::Instant::now() < deadline, "never {status}: {op}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls operation `id` until it has ended, whatever the end (three minutes at most).
    pub fn wait_final(&self, token: &str, id: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(180);
        loop {
            let (code, op) = self.call("GET", &format!("/api/v1/operations/{id}"), token, None);
            assert_eq!(code, 200, "{op}");
            if matches!(
                op["status"].as_str(),
                Some("succeeded" | "failed" | "blocked" | "rejected" | "cancelled")
            ) {
                return op;
            }
            assert!(std::time::Instant::now() < deadline, "never ended: {op}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Operation `id`'s events: its Server-Sent Events stream read to its end (the operation's
    /// end, for one still running).
    pub fn events(&self, token: &str, id: &str) -> Vec<Value> {
        let (code, text) = self.call(
            "GET",
            &format!("/api/v1/operations/{id}/events"),
            token,
            None,
        );
        assert_eq!(code, 200, "{text}");
        sse_data(text.as_str().unwrap_or_default())
    }
}

/// Every `data:` of a Server-Sent Events stream, as JSON.
pub fn sse_data(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect()
}
