//! Calling the router in-process, and what every error response must look like.

use axum::body::Body;
use axum::http::{Request, StatusCode};
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
