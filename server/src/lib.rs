//! `kusion-server`: the API front end of `kusionctl server`. A REST API (axum, with an OpenAPI 3
//! document generated from the handlers at `/openapi.json`) over the stacks of one Konfig
//! checkout: list and compile stacks, queue previews, applies and destroys as operations (with a
//! second person's approval where the stack asks for it), stream their progress as Server-Sent
//! Events, read release history. Bearer tokens (hashed at rest, scoped per project, expiring)
//! decide who may do what ([`auth`]); every mutating or refused call lands in an append-only
//! audit log ([`audit`]); errors are RFC 9457 problem documents ([`problem`]) and every response
//! carries `x-request-id`.
//!
//! The stacks come in through a [`StackSource`] the front end implements (`kusionctl server`
//! with the code `kusionctl apply` runs); operations wait in an [`OperationQueue`] and a
//! [`worker`] runs them through the kernel's policy-guarded preview and apply. The GitOps
//! controller's Stacks, and approval of the plans they wait on, come in through a
//! [`ClusterStacks`] when the server is given a cluster ([`cluster`]).

pub mod api;
pub mod audit;
pub mod auth;
pub mod cache;
pub mod cluster;
pub mod console;
pub mod oidc;
pub mod ops;
pub mod pgqueue;
pub mod problem;
pub mod source;
pub mod worker;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use cluster::{ClusterError, ClusterStack, ClusterStacks};
pub use ops::{InProcessQueue, Operation, OperationQueue};
pub use pgqueue::{PostgresQueue, QueueOptions};
pub use source::{Prepared, SourceError, StackRef, StackSource};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{0}")]
    Io(String),
    #[error("{0} not found")]
    NotFound(String),
}

/// Everything a request handler reaches.
pub struct AppState {
    pub source: Arc<dyn StackSource>,
    pub queue: Arc<dyn OperationQueue>,
    /// The GitOps controller's Stacks, when the server was given a cluster.
    pub cluster: Option<Arc<dyn ClusterStacks>>,
    /// The checkout's stacks, and each stack's release history, read at most once per TTL.
    pub listing: cache::ReadCache<(), Vec<StackRef>>,
    pub histories: cache::ReadCache<PathBuf, Vec<api::ReleaseSummary>>,
    pub tokens: auth::TokenStore,
    /// Bearer JWTs of a configured OIDC issuer, beside the server's own tokens.
    pub oidc: Option<oidc::OidcVerifier>,
    pub audit: audit::AuditLog,
    pub metrics: api::Metrics,
}

impl AppState {
    /// The state kept in `data_dir` (created): `tokens.json` and `audit.jsonl`.
    pub fn open(
        data_dir: &Path,
        source: Arc<dyn StackSource>,
        queue: Arc<dyn OperationQueue>,
        cluster: Option<Arc<dyn ClusterStacks>>,
        cache_ttl: std::time::Duration,
    ) -> Result<Arc<AppState>, ServerError> {
        Self::open_with_oidc(data_dir, source, queue, cluster, cache_ttl, None)
    }

    /// [`AppState::open`], also accepting the JWTs `oidc` verifies.
    pub fn open_with_oidc(
        data_dir: &Path,
        source: Arc<dyn StackSource>,
        queue: Arc<dyn OperationQueue>,
        cluster: Option<Arc<dyn ClusterStacks>>,
        cache_ttl: std::time::Duration,
        oidc: Option<oidc::OidcVerifier>,
    ) -> Result<Arc<AppState>, ServerError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| ServerError::Io(format!("creating {}: {e}", data_dir.display())))?;
        Ok(Arc::new(AppState {
            source,
            queue,
            cluster,
            listing: cache::ReadCache::new(cache_ttl),
            histories: cache::ReadCache::new(cache_ttl),
            tokens: auth::TokenStore::open(&data_dir.join("tokens.json"))?,
            oidc,
            audit: audit::AuditLog::open(&data_dir.join("audit.jsonl"))?,
            metrics: api::Metrics::default(),
        }))
    }
}

/// How `kusionctl server` runs.
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// In-process workers to start (the embedded default runs one).
    pub workers: usize,
    /// How long stack listings and release histories are served from memory
    /// ([`cache::DEFAULT_TTL`]; zero reads every time).
    pub cache_ttl: std::time::Duration,
    /// Also accept bearer JWTs of this OIDC issuer.
    pub oidc: Option<oidc::OidcConfig>,
}

/// The subject of the admin token minted at each start of the embedded server.
pub const BOOTSTRAP_SUBJECT: &str = "bootstrap-admin";

/// A bound server, ready to serve.
pub struct Bound {
    pub listener: tokio::net::TcpListener,
    pub state: Arc<AppState>,
    pub address: SocketAddr,
    /// The start-up admin token: shown once, stored only as its hash.
    pub admin_token: String,
}

/// Binds the listener, opens the data folder and mints a fresh admin token (revoking the one
/// a previous start printed).
pub async fn bind(
    options: &ServeOptions,
    source: Arc<dyn StackSource>,
    queue: Arc<dyn OperationQueue>,
    cluster: Option<Arc<dyn ClusterStacks>>,
) -> Result<Bound, ServerError> {
    let oidc = match &options.oidc {
        Some(config) => Some(
            oidc::OidcVerifier::discover(config.clone())
                .await
                .map_err(|e| ServerError::Io(e.to_string()))?,
        ),
        None => None,
    };
    let state = AppState::open_with_oidc(
        &options.data_dir,
        source,
        queue,
        cluster,
        options.cache_ttl,
        oidc,
    )?;
    state.tokens.revoke_subject(BOOTSTRAP_SUBJECT)?;
    let minted = state.tokens.mint(
        BOOTSTRAP_SUBJECT,
        [(auth::ALL_PROJECTS.to_string(), auth::Role::Admin)].into(),
        None,
    )?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|e| ServerError::Io(format!("listening on {}: {e}", options.listen)))?;
    let address = listener
        .local_addr()
        .map_err(|e| ServerError::Io(e.to_string()))?;
    Ok(Bound {
        listener,
        state,
        address,
        admin_token: minted.token,
    })
}

/// Serves until the process ends, with `workers` in-process workers.
pub async fn serve(bound: Bound, workers: usize) -> Result<(), ServerError> {
    spawn_workers(&bound.state.queue, &bound.state.source, workers);
    let app = api::router(bound.state);
    axum::serve(
        bound.listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .map_err(|e| ServerError::Io(format!("serving: {e}")))
}

/// Starts `count` workers on the async runtime, named `<host>-<pid>-<n>` (unique across the
/// machines sharing a queue); returns their names.
pub fn spawn_workers(
    queue: &Arc<dyn OperationQueue>,
    source: &Arc<dyn StackSource>,
    count: usize,
) -> Vec<String> {
    (0..count)
        .map(|n| {
            let name = format!(
                "{}-{}-{n}",
                kusion_kernel::state::hostname(),
                std::process::id()
            );
            tokio::spawn(worker::run(queue.clone(), source.clone(), name.clone()));
            name
        })
        .collect()
}
