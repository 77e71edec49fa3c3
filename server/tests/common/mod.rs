//! Stacks on the real engine with the fake-cloud runtime, calling the router in-process, and
//! what every error response must look like.

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use kusion_kernel::operation::Stack;
use kusion_kernel::policy::{PolicyGuard, StackInfo};
use kusion_kernel::registry::Registry;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::StateStore;
use kusion_sdk::PluginResult;
use kusion_sdk::policy::{Finding, PolicyPlugin, PolicyPluginInfo, Severity};
use kusion_server::{Prepared, SourceError, StackRef, StackSource};
use serde_json::Value;
use tower::ServiceExt;

pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub request_id: Option<String>,
    pub body: Value,
}

pub async fn call(
    app: &axum::Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Reply {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        request = request.header("authorization", format!("Bearer {t}"));
    }
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type").unwrap_or_default();
    let request_id = header("x-request-id");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Reply {
        status,
        content_type,
        request_id,
        body,
    }
}

/// Polls the operation `id` until it reaches `status` (a minute at most) and returns it.
pub async fn wait_for(app: &axum::Router, token: &str, id: &str, status: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let r = call(
            app,
            "GET",
            &format!("/api/v1/operations/{id}"),
            Some(token),
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        if r.body["status"] == status {
            return r.body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "operation never reached {status}: {}",
            r.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

pub fn assert_problem(r: &Reply, status: StatusCode, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.body);
    assert_eq!(r.content_type, "application/problem+json", "{what}");
    let id = r
        .request_id
        .as_deref()
        .expect("x-request-id on every response");
    assert_eq!(
        r.body["requestId"], id,
        "{what}: the problem names the request"
    );
    assert_eq!(r.body["status"], status.as_u16(), "{what}");
}

/// Stacks `<root>/<project>/dev` whose spec is the folder's `spec.yaml`, listed from the disk
/// (project `shop` requires approval); the real engine under them.
pub struct Files {
    pub root: PathBuf,
    pub cloud: PathBuf,
    /// How many times the stacks were listed.
    pub listed: AtomicUsize,
    /// A policy every stack is guarded by.
    pub policy: Option<Arc<dyn PolicyPlugin>>,
}

impl Files {
    pub fn new(root: PathBuf, cloud: PathBuf) -> Files {
        Files {
            root,
            cloud,
            listed: AtomicUsize::new(0),
            policy: None,
        }
    }

    /// Every stack guarded by [`SizePolicy`].
    pub fn with_size_policy(mut self) -> Files {
        self.policy = Some(Arc::new(SizePolicy));
        self
    }
}

/// A policy plugin in process: warns about every resource whose `size` is over 1 and denies
/// any over 10.
pub struct SizePolicy;

impl PolicyPlugin for SizePolicy {
    fn describe(&self) -> PolicyPluginInfo {
        PolicyPluginInfo {
            name: "sizes".into(),
            version: "1.0.0".into(),
            abi: kusion_sdk::ABI_VERSION,
        }
    }
    fn configure(&self, _config: &Value) -> PluginResult<()> {
        Ok(())
    }
    fn evaluate(&self, spec: &Value, _context: &Value) -> PluginResult<Vec<Finding>> {
        let mut out = Vec::new();
        for r in spec["resources"].as_array().into_iter().flatten() {
            let size = r["attributes"]["size"].as_u64().unwrap_or(0);
            if size > 1 {
                out.push(Finding {
                    rule: if size > 10 {
                        "MaxSize"
                    } else {
                        "SmallIsBeautiful"
                    }
                    .into(),
                    severity: if size > 10 {
                        Severity::Deny
                    } else {
                        Severity::Warn
                    },
                    resource_id: r["id"].as_str().map(str::to_string),
                    message: format!("size {size} is over 1"),
                });
            }
        }
        Ok(out)
    }
}

const SPEC: &str = "resources:\n- id: t:web\n  type: Test\n  attributes: {size: 1}\n- id: t:db\n  type: Test\n  attributes: {size: 2}\n  dependsOn: [t:web]\n";

impl StackSource for Files {
    fn stacks(&self) -> Result<Vec<StackRef>, SourceError> {
        self.listed.fetch_add(1, Ordering::SeqCst);
        let mut projects: Vec<String> = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries
                .flatten()
                .filter(|e| e.path().join("dev/spec.yaml").is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        projects.sort();
        Ok(projects
            .into_iter()
            .map(|p| StackRef {
                dir: self.root.join(&p).join("dev"),
                stack: "dev".into(),
                description: None,
                require_approval: p == "shop",
                project: p,
            })
            .collect())
    }
    fn compile(&self, stack: &StackRef) -> Result<Spec, SourceError> {
        Spec::read_file(&stack.dir.join("spec.yaml")).map_err(|e| SourceError(e.to_string()))
    }
    fn state(&self, stack: &StackRef) -> Result<Arc<dyn StateStore>, SourceError> {
        kusion_kernel::state::open("local", stack.dir.join(".kusion/state"), "dev")
            .map_err(|e| SourceError(e.to_string()))
    }
    fn open(&self, stack: &StackRef) -> Result<Prepared, SourceError> {
        let mut registry = Registry::new();
        registry
            .register(Arc::new(kusion_test_runtime::TestRuntime::with_dir(
                &self.cloud,
            )))
            .map_err(|e| SourceError(e.to_string()))?;
        Ok(Prepared {
            spec: self.compile(stack)?,
            stack: Stack {
                store: self.state(stack)?,
                registry,
            },
            guard: PolicyGuard::with_plugins(
                self.policy
                    .iter()
                    .map(|p| {
                        (
                            "sizes".to_string(),
                            p.clone(),
                            Duration::from_secs(10),
                            false,
                        )
                    })
                    .collect(),
                StackInfo {
                    name: stack.stack.clone(),
                    path: None,
                },
                Vec::new(),
            ),
            revision: None,
        })
    }
}

/// A stack `<root>/<project>/dev` with two resources, `t:db` depending on `t:web`.
pub fn write_stack(root: &Path, project: &str) {
    write_spec(root, project, SPEC);
}

pub fn write_spec(root: &Path, project: &str, spec: &str) {
    let dir = root.join(project).join("dev");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("spec.yaml"), spec).unwrap();
}

/// Every log line the server writes during the test, from [`capture_logs`].
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sends every log line of the test process, at every level, to the returned buffer (once per
/// test binary).
pub fn capture_logs() -> Captured {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    logs
}
