//! Helpers shared by the end-to-end tests (see `tests/tests/`).

pub mod api_server;
pub mod chromium;
pub mod cli;
pub mod git_http;
pub mod oidc_issuer;
pub mod plugins;
pub mod proxy;
pub mod servers;
pub mod stores;
