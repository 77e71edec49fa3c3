//! RFC 9457 problem documents: every error the API returns is `application/problem+json`
//! carrying the request's ID, whatever produced it (a handler, the auth layer, axum's own
//! extractors or router).

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

pub const CONTENT_TYPE: &str = "application/problem+json";

/// A problem document (RFC 9457).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// A URI naming the kind of problem (`about:blank` when the status says it all).
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The request's `x-request-id`, filled in by the server's last layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl Problem {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Problem {
        Problem {
            kind: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail: Some(detail.into()),
            request_id: None,
        }
    }

    pub fn bad_request(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, detail)
    }
    pub fn unauthorized(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::UNAUTHORIZED, detail)
    }
    pub fn too_many_requests(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::TOO_MANY_REQUESTS, detail)
    }
    pub fn forbidden(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::FORBIDDEN, detail)
    }
    pub fn not_found(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::NOT_FOUND, detail)
    }
    pub fn conflict(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::CONFLICT, detail)
    }
    pub fn unprocessable(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }
    pub fn internal(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::INTERNAL_SERVER_ERROR, detail)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> axum::response::Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"kusion\""),
            );
        }
        response
    }
}

/// Largest error body rewritten into a problem document; bigger ones are replaced by the status.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Makes every error response a problem document naming `request_id`: ours get the ID added,
/// others (axum's rejections of bad JSON or paths, unknown routes, wrong methods) are wrapped
/// with their text as the detail.
pub async fn finish(
    response: axum::response::Response,
    request_id: Option<String>,
) -> axum::response::Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_ERROR_BODY)
        .await
        .unwrap_or_default();
    let is_problem = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == CONTENT_TYPE.as_bytes());
    let mut doc = if is_problem {
        serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_or_default()
    } else {
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        let detail = if text.is_empty() {
            status.canonical_reason().unwrap_or("Error").to_string()
        } else {
            text
        };
        serde_json::to_value(Problem::new(status, detail)).unwrap_or_default()
    };
    if let (Some(obj), Some(id)) = (doc.as_object_mut(), request_id) {
        obj.insert("requestId".into(), id.into());
    }
    let body = serde_json::to_vec(&doc).unwrap_or_default();
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    parts.headers.remove(header::CONTENT_LENGTH);
    axum::response::Response::from_parts(parts, Body::from(body))
}
