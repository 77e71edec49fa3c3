//! The web console: plain HTML, CSS and JavaScript modules compiled into the binary (no build
//! step), served at `/` and `/ui/...` without a token. Only the static shell is public: every
//! piece of data the pages show comes from the authenticated API, with the token the person
//! pastes kept in the tab's `sessionStorage` and sent as a Bearer header (never in a URL).

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use crate::problem::Problem;

/// What the pages may load and talk to: their own scripts, styles and API only. No inline
/// script or style, no framing, no plugins; `connect-src 'self'` keeps data on this server.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `(path below /ui/, content type, body)`.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../console/index.html"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../console/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/api.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/dom.js"),
    ),
    (
        "graph.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/graph.js"),
    ),
    (
        "views.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/views.js"),
    ),
];

/// The console's routes (no authentication: they serve only the assets above).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { asset("index.html") }))
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|| async { asset("index.html") }))
        .route(
            "/ui/{*path}",
            get(|Path(path): Path<String>| async move { asset(&path) }),
        )
}

/// The embedded file at `path`, with the console's security headers; a problem document when
/// there is none.
fn asset(path: &str) -> Response {
    let Some((_, content_type, body)) = ASSETS.iter().find(|(name, _, _)| *name == path) else {
        return Problem::not_found(format!("no console file {path:?}")).into_response();
    };
    let mut response = (StatusCode::OK, *body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Assets change with the binary; revalidating is cheap on loopback and avoids a stale
    // script after an upgrade.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_asset_writes_markup_from_data() {
        // Data is put on the page as text nodes and attributes only.
        for (name, _, body) in ASSETS {
            for banned in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(!body.contains(banned), "{name} uses {banned}");
            }
        }
    }

    #[test]
    fn the_shell_loads_only_embedded_files() {
        let (_, _, index) = ASSETS[0];
        let mut referenced = 0;
        for part in index.split(['"', '\'']) {
            if let Some(file) = part.strip_prefix("/ui/") {
                assert!(
                    ASSETS.iter().any(|(n, _, _)| *n == file),
                    "index.html loads {file}, which is not embedded"
                );
                referenced += 1;
            } else {
                assert!(
                    !part.starts_with("http:")
                        && !part.starts_with("https:")
                        && !part.starts_with("//"),
                    "index.html loads {part} from elsewhere"
                );
            }
        }
        assert_eq!(referenced, 2, "the stylesheet and the main module");
    }

    #[test]
    fn every_module_the_pages_import_is_served() {
        for (name, _, body) in ASSETS {
            for line in body.lines() {
                if let Some(rest) = line.trim().strip_prefix("import ")
                    && let Some(from) = rest.split("from \"./").nth(1)
                {
                    let file = from.trim_end_matches(['"', ';']);
                    assert!(
                        ASSETS.iter().any(|(n, _, _)| *n == file),
                        "{name} imports {file}, which is not embedded"
                    );
                }
            }
        }
    }
}
